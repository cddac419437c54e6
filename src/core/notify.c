/* SPDX-License-Identifier: Apache-2.0 */
/*
 * notify.c - the sd_notify protocol, written out: one datagram to the
 * socket named by $NOTIFY_SOCKET ('@' means the abstract namespace).
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/famd.h"

/* Sends state (lines of VAR=value) to systemd; 0 when there is no systemd. */
int
notify_send(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	socklen_t len;
	size_t plen;
	ssize_t n;
	int fd, rc = 0;

	if (path == NULL || *path == '\0')
		return 0;
	plen = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || plen >= sizeof sun.sun_path)
		return -EINVAL;
	memcpy(sun.sun_path, path, plen);
	if (sun.sun_path[0] == '@')
		sun.sun_path[0] = '\0';
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen);

	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	n = sendto(fd, state, strlen(state), MSG_NOSIGNAL,
	    (struct sockaddr *)&sun, len);
	if (n < 0) {
		rc = -errno;
		log_debug("sd_notify to %s: %s", path, strerror(errno));
	}
	close(fd);
	return rc;
}

/* Tells systemd that famd serves. */
void
notify_ready(void)
{
	notify_send("READY=1");
}

/* Tells systemd that famd is reloading its configuration. */
void
notify_reloading(void)
{
	struct timespec ts;
	char buf[64];

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(buf, sizeof buf, "RELOADING=1\nMONOTONIC_USEC=%llu",
	    (unsigned long long)ts.tv_sec * 1000000ull +
	    (unsigned long long)ts.tv_nsec / 1000);
	notify_send(buf);
}

/* Tells systemd that famd is stopping. */
void
notify_stopping(void)
{
	notify_send("STOPPING=1");
}

/* Sets the one-line status systemctl shows. */
void
notify_status(const char *fmt, ...)
{
	char buf[256];
	va_list ap;
	int n;

	n = snprintf(buf, sizeof buf, "STATUS=");
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
	va_end(ap);
	notify_send(buf);
}
