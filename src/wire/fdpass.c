/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fdpass.c - sendmsg and recvmsg with SCM_RIGHTS, for both ends of the
 * session socket. One call each; the callers loop and frame.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wire/fdpass.h"

/*
 * Sends iov once (sendmsg with flags), with fd as an SCM_RIGHTS
 * descriptor when fd >= 0. Returns the bytes sent or -errno; EINTR is
 * retried.
 */
ssize_t
fdpass_send(int sock, struct iovec *iov, int iovcnt, int fd, int flags)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)iovcnt };
	ssize_t n;

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof u);
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof u.buf;
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof fd);
	}
	do
		n = sendmsg(sock, &mh, flags);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

/*
 * Receives up to len bytes once (recvmsg with flags, and MSG_CMSG_CLOEXEC).
 * The first descriptor that comes with them goes to *fd when *fd < 0;
 * every other one is closed. *truncated tells whether more than
 * FDPASS_MAX descriptors were sent (the kernel dropped some). Returns the
 * bytes received (0 at end of stream) or -errno; EINTR is retried.
 */
ssize_t
fdpass_recv(int sock, void *buf, size_t len, int *fd, bool *truncated,
    int flags)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(FDPASS_MAX * sizeof(int))];
	} u;
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh;
	ssize_t n;

	do {
		memset(&mh, 0, sizeof mh);
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof u.buf;
		n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL;
	    c = CMSG_NXTHDR(&mh, c)) {
		size_t nfds;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nfds; i++) {
			int got;

			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
			if (*fd < 0)
				*fd = got;
			else
				close(got);
		}
	}
	*truncated = (mh.msg_flags & MSG_CTRUNC) != 0;
	return n;
}
