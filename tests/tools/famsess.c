/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famsess.c - a client of the host famd's session socket (wire/session.h)
 * on raw sockets, for tests: each attack sends malformed or out-of-place
 * messages and checks famd's answer, or that famd drops the connection.
 *
 * usage: famsess [-s MIB] [-t MS] SOCKET ATTACK...
 *   -s MIB  how much the attacks on the host famd page (default 16)
 *   -t MS   how long to wait for an answer (default 5000)
 * Each attack runs on connections of its own and prints one line,
 * "ok - ATTACK: what famd did". `famsess -l` lists the attacks, with
 * "drop" after those famd must answer by dropping the connection (and
 * counting a bad message), "answer" after those it must answer with an
 * error, keeping the session usable, "host" after the attacks on the host
 * famd's resources (tests/e2e/host-attacks.sh checks famd's side).
 * Exit status: 0 when famd behaved as specified, 1 when not, 2 usage.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <linux/userfaultfd.h>

#include "wire/session.h"

#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

#define SESS_MAX_FDS 8

/* What famd must do with an attack (famsess -l prints it). */
enum { SESS_DROP, SESS_ANSWER, SESS_HOST };
static const char *const sess_kinds[] = { "drop", "answer", "host" };

static const char *sess_path;
static int sess_timeout_ms = 5000;
static const char *sess_attack; /* the attack running, for messages */
static uint64_t sess_seq;

/* What famd hands out in a session opened by sess_open(). */
struct sess {
	int fd;
	int uffd;
	uint64_t chunk, arena_size;
};

/* Prints a failure of the running attack and exits 1. */
static void __attribute__((noreturn, format(printf, 1, 2)))
sess_fail(const char *fmt, ...)
{
	va_list ap;

	printf("FAIL - %s: ", sess_attack != NULL ? sess_attack : "famsess");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	exit(1);
}

/* Returns the name of errno e, or "0". */
static const char *
sess_errname(int e)
{
	const char *n;

	if (e == 0)
		return "0";
	n = strerrorname_np(e < 0 ? -e : e);
	return n != NULL ? n : "E?";
}

/* Connects to the session socket. */
static int
sess_connect(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(sess_path) >= sizeof sun.sun_path)
		sess_fail("socket path too long");
	strcpy(sun.sun_path, sess_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0)
		sess_fail("connect %s: %s", sess_path, strerror(errno));
	return fd;
}

/* Fills the header of a well-formed request of type. */
static void
sess_msg(struct fam_smsg *m, uint16_t type)
{
	memset(m, 0, sizeof *m);
	m->magic = FAM_SESSION_MAGIC;
	m->version = FAM_SESSION_VERSION;
	m->type = type;
	m->seq = ++sess_seq;
}

/* Sends len bytes of buf, with nfds descriptors on the first byte. */
static void
sess_send_raw(int fd, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(SESS_MAX_FDS * sizeof(int))];
	} cm;
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (nfds > 0) {
		struct cmsghdr *c;

		memset(&cm, 0, sizeof cm);
		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	}
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)len)
		sess_fail("sendmsg: %s", n < 0 ? strerror(errno) :
		    "short write");
}

/* Sends m and its data (m->len bytes, or dlen when given apart). */
static void
sess_send(int fd, const struct fam_smsg *m, const void *data, size_t dlen,
    const int *fds, int nfds)
{
	char buf[sizeof *m + FAM_SESSION_MAX_DATA + 64];

	if (dlen > sizeof buf - sizeof *m)
		sess_fail("message too long for this tool");
	memcpy(buf, m, sizeof *m);
	if (dlen > 0)
		memcpy(buf + sizeof *m, data, dlen);
	sess_send_raw(fd, buf, sizeof *m + dlen, fds, nfds);
}

/* Waits up to the timeout for fd to be readable; false on a timeout. */
static bool
sess_wait(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n;

	do
		n = poll(&p, 1, sess_timeout_ms);
	while (n < 0 && errno == EINTR);
	return n > 0;
}

/*
 * Reads one reply into r (its descriptor, if any, into *rfd). Returns 0,
 * or -ECONNRESET when famd closed the connection first.
 */
static int
sess_recv(int fd, struct fam_smsg *r, int *rfd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(SESS_MAX_FDS * sizeof(int))];
	} cm;
	size_t got = 0;

	if (rfd != NULL)
		*rfd = -1;
	while (got < sizeof *r) {
		struct iovec iov = { (char *)r + got, sizeof *r - got };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = cm.buf, .msg_controllen = sizeof cm.buf };
		ssize_t n;

		if (!sess_wait(fd))
			sess_fail("no answer within %d ms", sess_timeout_ms);
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != ECONNRESET)
			sess_fail("recvmsg: %s", strerror(errno));
		if (n <= 0) {
			if (got > 0)
				sess_fail("a reply cut short");
			return -ECONNRESET;
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL;
		    c = CMSG_NXTHDR(&mh, c)) {
			size_t nf = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			for (size_t i = 0; i < nf; i++) {
				int f;

				memcpy(&f, CMSG_DATA(c) + i * sizeof(int),
				    sizeof f);
				if (rfd != NULL && *rfd < 0)
					*rfd = f;
				else
					close(f);
			}
		}
		got += (size_t)n;
	}
	return 0;
}

/*
 * Reads the reply to request m and checks that it answers it with status
 * want; the reply replaces m. Returns the descriptor it carried, or -1.
 */
static int
sess_expect(int fd, struct fam_smsg *m, int want)
{
	struct fam_smsg r;
	int rfd;

	if (sess_recv(fd, &r, &rfd) < 0)
		sess_fail("request type %u: famd closed the session instead "
		    "of answering %s", m->type, sess_errname(want));
	if (r.magic != FAM_SESSION_MAGIC || r.version != FAM_SESSION_VERSION ||
	    r.type != m->type || r.seq != m->seq || r.len != 0)
		sess_fail("request type %u seq %" PRIu64 ": malformed reply "
		    "(magic %#x, version %u, type %u, seq %" PRIu64 ", len %u)",
		    m->type, m->seq, r.magic, r.version, r.type, r.seq, r.len);
	if (r.status != want)
		sess_fail("request type %u: status %s, expected %s", m->type,
		    sess_errname(r.status), sess_errname(want));
	*m = r;
	return rfd;
}

/* Sends a request and checks its answer; returns a descriptor it carried. */
static int
sess_call(int fd, struct fam_smsg *m, const void *data, int sendfd, int want)
{
	sess_send(fd, m, data, m->len, &sendfd, sendfd >= 0 ? 1 : 0);
	return sess_expect(fd, m, want);
}

/* Checks that famd drops the connection without answering, and closes fd. */
static void
sess_expect_drop(int fd)
{
	struct fam_smsg r;

	if (sess_recv(fd, &r, NULL) == 0)
		sess_fail("famd answered (type %u, status %s) where it should "
		    "have dropped the session", r.type,
		    sess_errname(r.status));
	close(fd);
}

/* Checks that the session still answers: a HELLO gets its normal reply. */
static void
sess_alive(int fd)
{
	struct fam_smsg m;
	int devfd;

	sess_msg(&m, FAM_S_HELLO);
	m.a = FAM_SESSION_VERSION;
	devfd = sess_call(fd, &m, NULL, -1, 0);
	if (devfd >= 0)
		close(devfd);
	if (m.a == 0 || (m.a & (m.a - 1)) != 0)
		sess_fail("HELLO after the attack: chunk size %" PRIu64, m.a);
}

/*
 * Checks that famd no longer holds the write end of a pipe it was given:
 * the read end sees end-of-file once every copy is closed.
 */
static void
sess_expect_closed(int rd, const char *what)
{
	char b;
	ssize_t n;

	if (!sess_wait(rd))
		sess_fail("famd still holds %s after %d ms", what,
		    sess_timeout_ms);
	n = read(rd, &b, 1);
	if (n != 0)
		sess_fail("reading the pipe given to famd: %zd", n);
	close(rd);
}

/* Makes a pipe; returns its read end, its write end in *wr. */
static int
sess_pipe(int *wr)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0)
		sess_fail("pipe: %s", strerror(errno));
	*wr = p[1];
	return p[0];
}

/*
 * Creates a userfaultfd as libfam does: through /dev/userfaultfd's devfd
 * if need be, else user-mode-only.
 */
static int
sess_uffd_new(int devfd)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0 && errno == EPERM && devfd >= 0)
		fd = ioctl(devfd, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && errno == EPERM)
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK |
		    UFFD_USER_MODE_ONLY);
	if (fd < 0)
		sess_fail("cannot create a userfaultfd: %s", strerror(errno));
	return fd;
}

/* Opens a session as libfam does: HELLO, then UFFD with a userfaultfd. */
static struct sess
sess_open(void)
{
	struct sess s = { .fd = sess_connect() };
	struct fam_smsg m;
	int devfd;

	sess_msg(&m, FAM_S_HELLO);
	m.a = FAM_SESSION_VERSION;
	devfd = sess_call(s.fd, &m, NULL, -1, 0);
	s.chunk = m.a;
	s.arena_size = m.b;
	s.uffd = sess_uffd_new(devfd);
	if (devfd >= 0)
		close(devfd);
	sess_msg(&m, FAM_S_UFFD);
	sess_call(s.fd, &m, NULL, s.uffd, 0);
	return s;
}

/* Closes a session. */
static void
sess_close(struct sess *s)
{
	close(s->fd);
	close(s->uffd);
}

/* Sends an ALLOC of size bytes with flags and alignment; checks status. */
static int
sess_alloc(int fd, uint64_t size, uint64_t flags, uint64_t align,
    const char *path, size_t plen, int want, struct fam_smsg *reply)
{
	struct fam_smsg m;
	int rfd;

	sess_msg(&m, FAM_S_ALLOC);
	m.a = size;
	m.b = flags;
	m.c = align;
	m.len = (uint32_t)plen;
	rfd = sess_call(fd, &m, path, -1, want);
	if (reply != NULL)
		*reply = m;
	return rfd;
}

/* Sends a request of type with a and b; checks its status. */
static void
sess_simple(int fd, uint16_t type, uint64_t a, uint64_t b, int want)
{
	struct fam_smsg m;
	int rfd;

	sess_msg(&m, type);
	m.a = a;
	m.b = b;
	rfd = sess_call(fd, &m, NULL, -1, want);
	if (rfd >= 0)
		sess_fail("a descriptor came with the reply to type %u", type);
}

/* ---- attacks famd answers by dropping the session ---------------------- */

/* Half a HELLO, then the program closes its side. */
static void
attack_truncated(void)
{
	struct fam_smsg m;
	int fd = sess_connect();

	sess_msg(&m, FAM_S_HELLO);
	m.a = FAM_SESSION_VERSION;
	sess_send_raw(fd, &m, sizeof m / 2, NULL, 0);
	shutdown(fd, SHUT_WR);
	sess_expect_drop(fd);
}

/* A message that does not start with the magic number. */
static void
attack_bad_magic(void)
{
	struct fam_smsg m;
	int fd = sess_connect();

	sess_msg(&m, FAM_S_HELLO);
	m.magic = 0x47455420; /* "GET " */
	sess_send(fd, &m, NULL, 0, NULL, 0);
	sess_expect_drop(fd);
}

/* A message of another version of the session protocol. */
static void
attack_bad_version(void)
{
	struct fam_smsg m;
	int fd = sess_connect();

	sess_msg(&m, FAM_S_HELLO);
	m.version = FAM_SESSION_VERSION + 1;
	m.a = FAM_SESSION_VERSION;
	sess_send(fd, &m, NULL, 0, NULL, 0);
	sess_expect_drop(fd);
}

/* A message type famd does not know (past the last, and zero). */
static void
attack_unknown_type(void)
{
	struct fam_smsg m;
	int fd = sess_connect();

	sess_msg(&m, FAM_S_TYPE_MAX + 1);
	sess_send(fd, &m, NULL, 0, NULL, 0);
	sess_expect_drop(fd);
}

/* Type zero. */
static void
attack_type_zero(void)
{
	struct fam_smsg m;
	int fd = sess_connect();

	sess_msg(&m, 0);
	sess_send(fd, &m, NULL, 0, NULL, 0);
	sess_expect_drop(fd);
}

/* A `len` far beyond the longest path, with nothing after it. */
static void
attack_huge_len(void)
{
	struct sess s = sess_open();
	struct fam_smsg m;

	sess_msg(&m, FAM_S_ALLOC);
	m.b = FAM_S_ALLOC_FILE;
	m.len = UINT32_MAX;
	sess_send(s.fd, &m, NULL, 0, NULL, 0);
	sess_expect_drop(s.fd);
	close(s.uffd);
}

/* A `len` one past the longest path, with all its bytes. */
static void
attack_long_path(void)
{
	char path[FAM_SESSION_MAX_DATA + 1];
	struct sess s = sess_open();
	struct fam_smsg m;

	memset(path, 'a', sizeof path);
	sess_msg(&m, FAM_S_ALLOC);
	m.b = FAM_S_ALLOC_FILE;
	m.len = sizeof path;
	sess_send(s.fd, &m, path, sizeof path, NULL, 0);
	sess_expect_drop(s.fd);
	close(s.uffd);
}

/* A file path with a NUL inside it. */
static void
attack_nul_in_path(void)
{
	static const char path[] = "data.bin\0../../etc/shadow";
	struct sess s = sess_open();
	struct fam_smsg m;

	sess_msg(&m, FAM_S_ALLOC);
	m.b = FAM_S_ALLOC_FILE | FAM_S_ALLOC_SHARED;
	m.len = sizeof path - 1;
	sess_send(s.fd, &m, path, sizeof path - 1, NULL, 0);
	sess_expect_drop(s.fd);
	close(s.uffd);
}

/* Data after a message type that carries none. */
static void
attack_data_on_stat(void)
{
	struct sess s = sess_open();
	struct fam_smsg m;

	sess_msg(&m, FAM_S_STAT);
	m.len = 4;
	sess_send(s.fd, &m, "abcd", 4, NULL, 0);
	sess_expect_drop(s.fd);
	close(s.uffd);
}

/* A request with its status field set. */
static void
attack_status_set(void)
{
	struct fam_smsg m;
	int fd = sess_connect();

	sess_msg(&m, FAM_S_HELLO);
	m.a = FAM_SESSION_VERSION;
	m.status = EIO;
	sess_send(fd, &m, NULL, 0, NULL, 0);
	sess_expect_drop(fd);
}

/* A request with its reserved field set. */
static void
attack_reserved_set(void)
{
	struct fam_smsg m;
	int fd = sess_connect();

	sess_msg(&m, FAM_S_HELLO);
	m.a = FAM_SESSION_VERSION;
	m.reserved = 1;
	sess_send(fd, &m, NULL, 0, NULL, 0);
	sess_expect_drop(fd);
}

/* ALLOC before the program handed over its userfaultfd. */
static void
attack_alloc_before_uffd(void)
{
	struct fam_smsg m;
	int fd = sess_connect(), devfd;

	sess_msg(&m, FAM_S_HELLO);
	m.a = FAM_SESSION_VERSION;
	devfd = sess_call(fd, &m, NULL, -1, 0);
	if (devfd >= 0)
		close(devfd);
	sess_msg(&m, FAM_S_ALLOC);
	m.a = 1 << 20;
	sess_send(fd, &m, NULL, 0, NULL, 0);
	sess_expect_drop(fd);
}

/* STAT, MAP and FREE without a userfaultfd, on fresh connections. */
static void
attack_requests_before_uffd(void)
{
	static const uint16_t types[] = { FAM_S_MAP, FAM_S_FREE, FAM_S_STAT };

	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		struct fam_smsg m;
		int fd = sess_connect();

		sess_msg(&m, types[i]);
		m.a = 1;
		m.b = 1 << 30;
		sess_send(fd, &m, NULL, 0, NULL, 0);
		sess_expect_drop(fd);
	}
}

/* More descriptors on one message than famd takes (it takes four). */
static void
attack_too_many_fds(void)
{
	int rd[5], wr[5];
	struct fam_smsg m;
	int fd = sess_connect();

	for (int i = 0; i < 5; i++)
		rd[i] = sess_pipe(&wr[i]);
	sess_msg(&m, FAM_S_HELLO);
	m.a = FAM_SESSION_VERSION;
	sess_send(fd, &m, NULL, 0, wr, 5);
	for (int i = 0; i < 5; i++)
		close(wr[i]);
	sess_expect_drop(fd);
	for (int i = 0; i < 5; i++)
		sess_expect_closed(rd[i], "a descriptor of a dropped session");
}

/* ---- attacks famd answers with an error, keeping the session ----------- */

/* HELLO asking for an API version famd does not speak. */
static void
attack_hello_version(void)
{
	struct fam_smsg m;
	int fd = sess_connect();

	sess_msg(&m, FAM_S_HELLO);
	m.a = FAM_SESSION_VERSION + 41;
	sess_call(fd, &m, NULL, -1, EPROTONOSUPPORT);
	sess_alive(fd);
	close(fd);
}

/* UFFD without a descriptor. */
static void
attack_uffd_without_fd(void)
{
	struct fam_smsg m;
	int fd = sess_connect();

	sess_msg(&m, FAM_S_UFFD);
	sess_call(fd, &m, NULL, -1, EBADF);
	sess_alive(fd);
	close(fd);
}

/* UFFD with a pipe instead of a userfaultfd. */
static void
attack_uffd_not_userfaultfd(void)
{
	struct fam_smsg m;
	int fd = sess_connect(), wr, rd = sess_pipe(&wr);

	sess_msg(&m, FAM_S_UFFD);
	sess_call(fd, &m, NULL, wr, EINVAL);
	close(wr);
	sess_expect_closed(rd, "a pipe passed as a userfaultfd");
	sess_alive(fd);
	close(fd);
}

/* A second UFFD on a session that has one. */
static void
attack_second_uffd(void)
{
	struct sess s = sess_open();
	struct fam_smsg m;
	int other = sess_uffd_new(-1);

	sess_msg(&m, FAM_S_UFFD);
	sess_call(s.fd, &m, NULL, other, EEXIST);
	close(other);
	sess_alive(s.fd);
	sess_simple(s.fd, FAM_S_STAT, 4096, 0, ENOENT);
	sess_close(&s);
}

/* A descriptor attached to messages that carry none. */
static void
attack_stray_fd(void)
{
	struct sess s = sess_open();
	struct fam_smsg m;
	int wr, rd = sess_pipe(&wr), devfd;

	sess_msg(&m, FAM_S_HELLO);
	m.a = FAM_SESSION_VERSION;
	devfd = sess_call(s.fd, &m, NULL, wr, 0);
	if (devfd >= 0)
		close(devfd);
	close(wr);
	sess_expect_closed(rd, "a descriptor attached to a HELLO");
	rd = sess_pipe(&wr);
	sess_msg(&m, FAM_S_STAT);
	m.a = 4096;
	sess_call(s.fd, &m, NULL, wr, ENOENT);
	close(wr);
	sess_expect_closed(rd, "a descriptor attached to a STAT");
	sess_alive(s.fd);
	sess_close(&s);
}

/* FREE of a region handle famd never gave out, twice. */
static void
attack_free_unknown(void)
{
	struct sess s = sess_open();

	sess_simple(s.fd, FAM_S_FREE, 0, 0, ENOENT);
	sess_simple(s.fd, FAM_S_FREE, UINT64_MAX, 0, ENOENT);
	sess_alive(s.fd);
	sess_close(&s);
}

/* STAT of addresses in no region. */
static void
attack_stat_nowhere(void)
{
	struct sess s = sess_open();

	sess_simple(s.fd, FAM_S_STAT, 0, 0, ENOENT);
	sess_simple(s.fd, FAM_S_STAT, (uint64_t)(uintptr_t)&s, 0, ENOENT);
	sess_simple(s.fd, FAM_S_STAT, UINT64_MAX, 0, ENOENT);
	sess_alive(s.fd);
	sess_close(&s);
}

/* MAP of an arena famd never created. */
static void
attack_map_unknown_arena(void)
{
	struct sess s = sess_open();

	sess_simple(s.fd, FAM_S_MAP, 1, 1 << 30, ENOENT);
	sess_simple(s.fd, FAM_S_MAP, UINT32_MAX, 1 << 30, ENOENT);
	sess_alive(s.fd);
	sess_close(&s);
}

/* Impossible ALLOCs: size, flags, alignment, path without the flag. */
static void
attack_bad_alloc(void)
{
	struct sess s = sess_open();

	sess_alloc(s.fd, 0, 0, 0, NULL, 0, EINVAL, NULL);
	sess_alloc(s.fd, 1 << 20, 0x80, 0, NULL, 0, EINVAL, NULL);
	sess_alloc(s.fd, 1 << 20, FAM_S_ALLOC_SHARED, 0, NULL, 0, EINVAL,
	    NULL);
	sess_alloc(s.fd, 1 << 20, 0, 3 << 16, NULL, 0, EINVAL, NULL);
	sess_alloc(s.fd, 1 << 20, 0, (uint64_t)1 << 62, NULL, 0, EINVAL,
	    NULL);
	sess_alloc(s.fd, (uint64_t)1 << 62, 0, 0, NULL, 0, EFBIG, NULL);
	sess_alloc(s.fd, 0, FAM_S_ALLOC_FILE, 0, NULL, 0, EINVAL, NULL);
	sess_alloc(s.fd, 1 << 20, 0, 0, "data.bin", 8, EINVAL, NULL);
	sess_alive(s.fd);
	sess_close(&s);
}

/*
 * A real arena mapped where famd is told, after MAPs at an unaligned
 * address, address 0, an address range that wraps, and where nothing is
 * mapped; a second MAP of it; then the region is used and freed.
 */
static void
attack_map_bad_address(void)
{
	struct sess s = sess_open();
	struct fam_smsg r, m;
	int memfd;
	uint8_t *base, *p;
	uint64_t size = 1 << 20, arena;
	void *hole;

	memfd = sess_alloc(s.fd, size, 0, 0, NULL, 0, 0, &r);
	if (memfd < 0 || !(r.flags & FAM_S_NEW_ARENA))
		sess_fail("the first ALLOC brought no arena (flags %#x)",
		    r.flags);
	arena = r.a;
	base = mmap(NULL, s.arena_size, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_NORESERVE, memfd, 0);
	if (base == MAP_FAILED)
		sess_fail("mmap of the arena: %s", strerror(errno));
	close(memfd);
	sess_simple(s.fd, FAM_S_MAP, arena, (uint64_t)(uintptr_t)base + 1,
	    EINVAL);
	sess_simple(s.fd, FAM_S_MAP, arena, (uint64_t)(uintptr_t)base + 2048,
	    EINVAL);
	sess_simple(s.fd, FAM_S_MAP, arena, 0, EINVAL);
	sess_simple(s.fd, FAM_S_MAP, arena, UINT64_MAX - 4095, EINVAL);
	/* An aligned address with nothing mapped there. */
	hole = mmap(NULL, s.arena_size, PROT_NONE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (hole == MAP_FAILED)
		sess_fail("mmap: %s", strerror(errno));
	munmap(hole, s.arena_size);
	sess_simple(s.fd, FAM_S_MAP, arena, (uint64_t)(uintptr_t)hole,
	    EINVAL);
	sess_simple(s.fd, FAM_S_STAT, (uint64_t)(uintptr_t)base + r.b, 0,
	    ENOENT);
	sess_simple(s.fd, FAM_S_MAP, arena, (uint64_t)(uintptr_t)base, 0);
	sess_simple(s.fd, FAM_S_MAP, arena, (uint64_t)(uintptr_t)base, ENOENT);

	/* famd serves the region's faults now: write, read back. */
	p = base + r.b;
	for (uint64_t i = 0; i < size; i += 512)
		p[i] = (uint8_t)(i >> 9);
	for (uint64_t i = 0; i < size; i += 512)
		if (p[i] != (uint8_t)(i >> 9))
			sess_fail("byte %" PRIu64 " of the region is %u", i,
			    p[i]);
	sess_msg(&m, FAM_S_STAT);
	m.a = (uint64_t)(uintptr_t)p + size - 1;
	sess_call(s.fd, &m, NULL, -1, 0);
	if (m.a != r.d || m.b != size || m.c == 0)
		sess_fail("STAT: handle %" PRIu64 " size %" PRIu64
		    " resident %" PRIu64 "; expected handle %" PRIu64
		    ", size %" PRIu64 ", some resident", m.a, m.b, m.c, r.d,
		    size);
	sess_simple(s.fd, FAM_S_FREE, r.d, 0, 0);
	sess_simple(s.fd, FAM_S_FREE, r.d, 0, ENOENT);
	sess_simple(s.fd, FAM_S_STAT, (uint64_t)(uintptr_t)p, 0, ENOENT);
	munmap(base, s.arena_size);
	sess_close(&s);
}

/* Several requests in one write: answered in order, each once. */
static void
attack_pipelined(void)
{
	struct sess s = sess_open();
	struct fam_smsg m[4];
	char buf[sizeof m];

	for (int i = 0; i < 4; i++) {
		sess_msg(&m[i], i % 2 ? FAM_S_FREE : FAM_S_STAT);
		m[i].a = 4096u * (unsigned)(i + 1);
		memcpy(buf + i * sizeof m[0], &m[i], sizeof m[0]);
	}
	sess_send_raw(s.fd, buf, sizeof buf, NULL, 0);
	for (int i = 0; i < 4; i++)
		sess_expect(s.fd, &m[i], ENOENT);
	sess_alive(s.fd);
	sess_close(&s);
}

/*
 * An ALLOC (answered when the memory node has reserved the region) with a
 * STAT behind it in the same write: both answered, in order.
 */
static void
attack_pipelined_alloc(void)
{
	struct sess s = sess_open();
	struct fam_smsg m[2];
	char buf[sizeof m];
	int memfd;

	sess_msg(&m[0], FAM_S_ALLOC);
	m[0].a = 1 << 20;
	sess_msg(&m[1], FAM_S_STAT);
	m[1].a = 4096;
	memcpy(buf, m, sizeof m);
	sess_send_raw(s.fd, buf, sizeof buf, NULL, 0);
	memfd = sess_expect(s.fd, &m[0], 0);
	if (memfd < 0)
		sess_fail("the ALLOC brought no arena");
	close(memfd);
	sess_expect(s.fd, &m[1], ENOENT);
	sess_simple(s.fd, FAM_S_FREE, m[0].d, 0, 0);
	sess_alive(s.fd);
	sess_close(&s);
}

/*
 * A second session names the first one's region and arena: famd finds
 * neither (a program reaches only its own regions); the first session
 * still frees its region.
 */
static void
attack_other_session(void)
{
	struct sess a = sess_open(), b = sess_open();
	struct fam_smsg m;
	int memfd;

	memfd = sess_alloc(a.fd, 1 << 20, 0, 0, NULL, 0, 0, &m);
	if (memfd < 0)
		sess_fail("the ALLOC brought no arena");
	close(memfd);
	sess_simple(b.fd, FAM_S_FREE, m.d, 0, ENOENT);
	sess_simple(b.fd, FAM_S_MAP, m.a, 1 << 30, ENOENT);
	sess_alive(b.fd);
	sess_simple(a.fd, FAM_S_FREE, m.d, 0, 0);
	sess_alive(a.fd);
	sess_close(&b);
	sess_close(&a);
}

/* ---- attacks on the host famd itself (tests/e2e/host-attacks.sh) ------ */

static uint64_t sess_size = 16u << 20; /* -s MiB: bytes an attack pages */

/*
 * ALLOCs size bytes in s, maps the new arena and MAPs it; returns the
 * region's address and the arena's memfd in *memfd.
 */
static uint8_t *
sess_region(struct sess *s, uint64_t size, int *memfd)
{
	struct fam_smsg r;
	uint8_t *base;

	*memfd = sess_alloc(s->fd, size, 0, 0, NULL, 0, 0, &r);
	if (*memfd < 0 || !(r.flags & FAM_S_NEW_ARENA))
		sess_fail("the ALLOC brought no arena (flags %#x)", r.flags);
	base = mmap(NULL, s->arena_size, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_NORESERVE, *memfd, 0);
	if (base == MAP_FAILED)
		sess_fail("mmap of the arena: %s", strerror(errno));
	sess_simple(s->fd, FAM_S_MAP, r.a, (uint64_t)(uintptr_t)base, 0);
	return base + r.b;
}

/* Writes v into every page of [p, p + len). */
static void
sess_fill(uint8_t *p, uint64_t len, uint8_t v)
{
	for (uint64_t i = 0; i < len; i += 4096)
		p[i] = v;
}

/* Checks that every page of [p, p + len) holds v. */
static void
sess_check(const uint8_t *p, uint64_t len, uint8_t v, const char *what)
{
	for (uint64_t i = 0; i < len; i += 4096)
		if (p[i] != v)
			sess_fail("%s: byte %" PRIu64 " is %u, not %u", what, i,
			    p[i], v);
}

/*
 * Dirties a region, then shrinks its arena's memfd (and tries to seal it
 * against famd's hole punching); a second session then pages as much
 * again, so famd writes the first one's dirty chunks back. famd must have
 * sealed the arena: ftruncate and F_ADD_SEALS fail with EPERM, and the
 * first region's data comes back whole.
 */
static void
attack_arena_shrink(void)
{
	struct sess a = sess_open(), b = sess_open();
	int fa, fb, shrink, seal;
	uint8_t *pa = sess_region(&a, sess_size, &fa), *pb;

	sess_fill(pa, sess_size, 0xa1);
	shrink = ftruncate(fa, 0) == 0 ? 0 : errno;
	seal = fcntl(fa, F_ADD_SEALS, F_SEAL_FUTURE_WRITE) == 0 ? 0 : errno;
	printf("# ftruncate of the arena: %s; F_SEAL_FUTURE_WRITE: %s\n",
	    sess_errname(shrink), sess_errname(seal));
	pb = sess_region(&b, sess_size, &fb);
	sess_fill(pb, sess_size, 0xb2);
	sess_check(pb, sess_size, 0xb2, "the second session's region");
	if (shrink != EPERM || seal != EPERM)
		sess_fail("the program changed its arena under famd "
		    "(ftruncate %s, F_ADD_SEALS %s; EPERM expected)",
		    sess_errname(shrink), sess_errname(seal));
	sess_check(pa, sess_size, 0xa1, "the shrunk region, paged back in");
	close(fa);
	close(fb);
	sess_close(&b);
	sess_close(&a);
}

static volatile sig_atomic_t sess_sigbus_n;

/* A SIGBUS handler that returns: the faulting access runs again. */
static void
sess_sigbus_return(int sig)
{
	(void)sig;
	sess_sigbus_n++;
}

/* Touches the page at arg for ever (each SIGBUS returns and retouches). */
static void *
sess_toucher(void *arg)
{
	volatile uint8_t *p = arg;

	for (;;)
		(void)*p;
	return NULL;
}

/*
 * A thread touches a freed region under a SIGBUS handler that returns, for
 * two seconds: famd must not serve (and log) the same fault again and
 * again. Prints how often the handler ran.
 */
static void
attack_sigbus_returns(void)
{
	struct sess s = sess_open();
	struct sigaction sa = { .sa_handler = sess_sigbus_return };
	struct timespec ts = { .tv_sec = 2 };
	struct fam_smsg m;
	pthread_t t;
	uint8_t *p;
	int fd;

	p = sess_region(&s, 1 << 20, &fd);
	sess_msg(&m, FAM_S_STAT);
	m.a = (uint64_t)(uintptr_t)p;
	sess_call(s.fd, &m, NULL, -1, 0);
	sess_simple(s.fd, FAM_S_FREE, m.a, 0, 0);
	sigaction(SIGBUS, &sa, NULL);
	if (pthread_create(&t, NULL, sess_toucher, p) != 0)
		sess_fail("pthread_create");
	nanosleep(&ts, NULL);
	printf("# the SIGBUS handler ran %ld times in 2 s\n",
	    (long)sess_sigbus_n);
	if (sess_sigbus_n == 0)
		sess_fail("a touch of a freed region raised no SIGBUS");
	/* The toucher never ends: exit with it (the caller prints ok). */
	printf("ok - sigbus-returns: the thread got SIGBUS; famd's side is "
	    "checked by the caller\n");
	fflush(stdout);
	_exit(0);
}

/*
 * HELLO, and what famd handed over: prints "devfd: none", or "devfd:
 * given" and whether USERFAULTFD_IOC_NEW on it makes a userfaultfd that
 * catches kernel faults (which vm.unprivileged_userfaultfd = 0 forbids an
 * unprivileged user).
 */
static void
attack_devfd(void)
{
	struct fam_smsg m;
	int fd = sess_connect(), devfd, u;

	sess_msg(&m, FAM_S_HELLO);
	m.a = FAM_SESSION_VERSION;
	devfd = sess_call(fd, &m, NULL, -1, 0);
	if (devfd < 0) {
		printf("devfd: none\n");
		close(fd);
		return;
	}
	u = ioctl(devfd, USERFAULTFD_IOC_NEW, O_CLOEXEC);
	printf("devfd: given; USERFAULTFD_IOC_NEW: %s\n",
	    sess_errname(u < 0 ? errno : 0));
	if (u >= 0)
		close(u);
	close(devfd);
	close(fd);
}

/*
 * A system call that writes into a page of a region not yet resident
 * (read(2) from a pipe), then the same after the program touched it:
 * prints each result. A user-mode-only userfaultfd does not catch the
 * kernel's fault: EFAULT.
 */
static void
attack_kernel_fault(void)
{
	struct sess s = sess_open();
	uint8_t *p;
	int memfd, pfd[2];
	ssize_t n;

	p = sess_region(&s, 1 << 20, &memfd);
	if (pipe(pfd) < 0)
		sess_fail("pipe: %s", strerror(errno));
	if (write(pfd[1], "famd", 4) != 4)
		sess_fail("write to the pipe");
	n = read(pfd[0], p, 4);
	printf("read(2) into a page not resident: %s\n",
	    n == 4 ? "ok" : sess_errname(errno));
	if (n != 4)
		p[0] = 1; /* the program's own touch: a user-mode fault */
	if (n != 4 && read(pfd[0], p, 4) != 4)
		sess_fail("read(2) into a resident page: %s", strerror(errno));
	if (memcmp(p, "famd", 4) != 0)
		sess_fail("the page does not hold what read(2) put there");
	close(pfd[0]);
	close(pfd[1]);
	close(memfd);
	sess_close(&s);
}

/* Waits until standard input ends (the test lets go of the attack). */
static void
sess_hold(void)
{
	char b;

	printf("holding\n");
	fflush(stdout);
	while (read(0, &b, 1) > 0)
		;
}

/*
 * Sends ALLOCs of 4 KiB that each need a new arena, never mapping one:
 * prints how many were granted before the first refusal, and its status.
 * Returns the handle of the last region granted (0: none).
 */
static uint64_t
sess_alloc_unmapped(struct sess *s, unsigned max)
{
	uint64_t handle = 0;
	unsigned granted = 0;
	int status = 0;

	while (granted < max) {
		struct fam_smsg m, r;
		int rfd;

		sess_msg(&m, FAM_S_ALLOC);
		m.a = 4096;
		sess_send(s->fd, &m, NULL, 0, NULL, 0);
		if (sess_recv(s->fd, &r, &rfd) < 0)
			sess_fail("famd closed the session after %u ALLOCs",
			    granted);
		if (rfd >= 0)
			close(rfd);
		if (r.status != 0) {
			status = r.status;
			break;
		}
		handle = r.d;
		granted++;
	}
	printf("arenas: %u granted, then %s\n", granted, sess_errname(status));
	return handle;
}

/*
 * 1,000 ALLOCs, none mapped, on one session; then the region granted is
 * freed (as libfam does when it cannot map an arena), and an ALLOC gets a
 * new arena again.
 */
static void
attack_arena_flood(void)
{
	struct sess s = sess_open();
	uint64_t handle = sess_alloc_unmapped(&s, 1000);
	int fd;

	if (handle != 0) {
		sess_simple(s.fd, FAM_S_FREE, handle, 0, 0);
		fd = sess_alloc(s.fd, 4096, 0, 0, NULL, 0, 0, NULL);
		if (fd < 0)
			sess_fail("no new arena once the unmapped one was "
			    "emptied");
		close(fd);
	}
	sess_alive(s.fd);
	sess_close(&s);
}

/*
 * Eight sessions of one user, each with one ALLOC it never maps; with
 * FAMSESS_HOLD set, they are held until standard input ends.
 */
static void
attack_arena_sessions(void)
{
	struct sess s[8];

	for (int i = 0; i < 8; i++) {
		s[i] = sess_open();
		sess_alloc_unmapped(&s[i], 1);
	}
	if (getenv("FAMSESS_HOLD") != NULL)
		sess_hold();
	for (int i = 0; i < 8; i++)
		sess_close(&s[i]);
}

/*
 * The process that connects forks a worker that does everything on the
 * connection: HELLO, its own userfaultfd, an ALLOC it maps, FREE, and a
 * touch of the freed region under a SIGBUS handler. famd must signal only
 * the faulting thread, never the process that connected: prints what
 * became of each after 3 s.
 */
static void
attack_forked_worker(void)
{
	struct sess s = { .fd = sess_connect(), .uffd = -1 };
	struct timespec ts = { .tv_sec = 3 };
	pid_t child;
	int st;

	child = fork();
	if (child < 0)
		sess_fail("fork: %s", strerror(errno));
	if (child == 0) {
		struct sigaction sa = { .sa_handler = sess_sigbus_return };
		struct fam_smsg m;
		uint8_t *p;
		int devfd, memfd;

		sess_msg(&m, FAM_S_HELLO);
		m.a = FAM_SESSION_VERSION;
		devfd = sess_call(s.fd, &m, NULL, -1, 0);
		s.chunk = m.a;
		s.arena_size = m.b;
		s.uffd = sess_uffd_new(devfd);
		sess_msg(&m, FAM_S_UFFD);
		sess_call(s.fd, &m, NULL, s.uffd, 0);
		p = sess_region(&s, 1 << 20, &memfd);
		sess_msg(&m, FAM_S_STAT);
		m.a = (uint64_t)(uintptr_t)p;
		sess_call(s.fd, &m, NULL, -1, 0);
		sess_simple(s.fd, FAM_S_FREE, m.a, 0, 0);
		sigaction(SIGBUS, &sa, NULL);
		(void)*(volatile uint8_t *)p;
		_exit(sess_sigbus_n > 0 ? 3 : 4);
	}
	close(s.fd);
	nanosleep(&ts, NULL);
	if (waitpid(child, &st, WNOHANG) == 0) {
		printf("worker: still waiting in its fault\n");
		kill(child, SIGKILL);
		waitpid(child, &st, 0);
	} else if (WIFEXITED(st) && WEXITSTATUS(st) == 3) {
		printf("worker: got SIGBUS\n");
	} else {
		printf("worker: ended with status %#x\n", st);
	}
	printf("parent: alive\n");
}

/* 100 connections that say nothing, held until standard input ends. */
static void
attack_conn_hold(void)
{
	int fds[100];

	for (int i = 0; i < 100; i++)
		fds[i] = sess_connect();
	sess_hold();
	for (int i = 0; i < 100; i++)
		close(fds[i]);
}

/*
 * Eight connections of one user, each sending HELLO: prints how many
 * famd answered and how many it closed; held until standard input ends
 * with FAMSESS_HOLD set.
 */
static void
attack_session_count(void)
{
	int fds[8], answered = 0, closed = 0;

	for (int i = 0; i < 8; i++) {
		struct fam_smsg m, r;
		int rfd;

		fds[i] = sess_connect();
		sess_msg(&m, FAM_S_HELLO);
		m.a = FAM_SESSION_VERSION;
		send(fds[i], &m, sizeof m, MSG_NOSIGNAL);
		if (sess_recv(fds[i], &r, &rfd) < 0) {
			closed++;
			continue;
		}
		if (rfd >= 0)
			close(rfd);
		answered++;
	}
	printf("sessions: %d answered, %d closed\n", answered, closed);
	if (getenv("FAMSESS_HOLD") != NULL)
		sess_hold();
	for (int i = 0; i < 8; i++)
		close(fds[i]);
}

static const struct {
	const char *name;
	int kind; /* SESS_DROP, SESS_ANSWER, SESS_HOST */
	void (*fn)(void);
	const char *what;
} attacks[] = {
	{ "truncated", SESS_DROP, attack_truncated,
	    "a message cut short by a close is dropped" },
	{ "bad-magic", SESS_DROP, attack_bad_magic, "dropped" },
	{ "bad-version", SESS_DROP, attack_bad_version, "dropped" },
	{ "unknown-type", SESS_DROP, attack_unknown_type, "dropped" },
	{ "type-zero", SESS_DROP, attack_type_zero, "dropped" },
	{ "huge-len", SESS_DROP, attack_huge_len, "dropped" },
	{ "long-path", SESS_DROP, attack_long_path,
	    "a path one byte too long is dropped" },
	{ "nul-in-path", SESS_DROP, attack_nul_in_path, "dropped" },
	{ "data-on-stat", SESS_DROP, attack_data_on_stat, "dropped" },
	{ "status-set", SESS_DROP, attack_status_set, "dropped" },
	{ "reserved-set", SESS_DROP, attack_reserved_set, "dropped" },
	{ "alloc-before-uffd", SESS_DROP, attack_alloc_before_uffd, "dropped" },
	{ "requests-before-uffd", SESS_DROP, attack_requests_before_uffd,
	    "MAP, FREE and STAT each dropped" },
	{ "too-many-fds", SESS_DROP, attack_too_many_fds,
	    "dropped, and every descriptor closed" },
	{ "hello-version", SESS_ANSWER, attack_hello_version,
	    "EPROTONOSUPPORT, session kept" },
	{ "uffd-without-fd", SESS_ANSWER, attack_uffd_without_fd,
	    "EBADF, session kept" },
	{ "uffd-not-userfaultfd", SESS_ANSWER, attack_uffd_not_userfaultfd,
	    "EINVAL, the pipe closed, session kept" },
	{ "second-uffd", SESS_ANSWER, attack_second_uffd, "EEXIST, session kept" },
	{ "stray-fd", SESS_ANSWER, attack_stray_fd,
	    "answered, the descriptor closed at once" },
	{ "free-unknown", SESS_ANSWER, attack_free_unknown, "ENOENT, session kept" },
	{ "stat-nowhere", SESS_ANSWER, attack_stat_nowhere, "ENOENT, session kept" },
	{ "other-session", SESS_ANSWER, attack_other_session,
	    "another session's region and arena: ENOENT, both kept" },
	{ "map-unknown-arena", SESS_ANSWER, attack_map_unknown_arena,
	    "ENOENT, session kept" },
	{ "bad-alloc", SESS_ANSWER, attack_bad_alloc,
	    "EINVAL or EFBIG each, session kept" },
	{ "map-bad-address", SESS_ANSWER, attack_map_bad_address,
	    "EINVAL for unaligned, 0, wrapping and unmapped addresses, ENOENT "
	    "for a second MAP; then the region is served and freed" },
	{ "pipelined", SESS_ANSWER, attack_pipelined,
	    "four requests in one write answered in order" },
	{ "pipelined-alloc", SESS_ANSWER, attack_pipelined_alloc,
	    "a STAT sent behind an ALLOC is answered after it" },
	{ "sigbus-returns", SESS_HOST, attack_sigbus_returns,
	    "a SIGBUS handler that returns, for 2 s" },
	{ "devfd", SESS_HOST, attack_devfd,
	    "what HELLO handed over said" },
	{ "kernel-fault", SESS_HOST, attack_kernel_fault,
	    "a system call into a page not resident said" },
	{ "arena-flood", SESS_HOST, attack_arena_flood,
	    "ALLOCs of arenas never mapped, on one session" },
	{ "arena-sessions", SESS_HOST, attack_arena_sessions,
	    "an arena never mapped on each of eight sessions" },
	{ "forked-worker", SESS_HOST, attack_forked_worker,
	    "the process that connected was not signalled" },
	{ "conn-hold", SESS_HOST, attack_conn_hold,
	    "100 silent connections held" },
	{ "session-count", SESS_HOST, attack_session_count,
	    "eight sessions of one user" },
	{ "arena-shrink", SESS_HOST, attack_arena_shrink,
	    "the arena cannot be shrunk or sealed; its data came back" },
};

#define NATTACKS (sizeof attacks / sizeof attacks[0])

/* Prints the usage and exits 2. */
static void __attribute__((noreturn))
sess_usage(void)
{
	fprintf(stderr, "usage: famsess [-s MIB] [-t MS] SOCKET ATTACK...\n"
	    "       famsess -l\nattacks:");
	for (size_t i = 0; i < NATTACKS; i++)
		fprintf(stderr, " %s", attacks[i].name);
	fprintf(stderr, "\n");
	exit(2);
}

/* Runs the attacks named on the command line. */
int
main(int argc, char **argv)
{
	int c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	while ((c = getopt(argc, argv, "ls:t:")) != -1) {
		switch (c) {
		case 'l':
			for (size_t i = 0; i < NATTACKS; i++)
				printf("%s %s\n", attacks[i].name,
				    sess_kinds[attacks[i].kind]);
			return 0;
		case 's':
			sess_size = strtoull(optarg, NULL, 10) << 20;
			break;
		case 't':
			sess_timeout_ms = atoi(optarg);
			break;
		default:
			sess_usage();
		}
	}
	if (argc - optind < 2)
		sess_usage();
	sess_path = argv[optind];
	for (int j = optind + 1; j < argc; j++) {
		size_t i;

		for (i = 0; i < NATTACKS; i++)
			if (strcmp(argv[j], attacks[i].name) == 0)
				break;
		if (i == NATTACKS)
			sess_usage();
		sess_attack = attacks[i].name;
		attacks[i].fn();
		printf("ok - %s: %s\n", attacks[i].name, attacks[i].what);
	}
	return 0;
}
