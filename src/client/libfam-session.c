/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libfam-session.c - the program's side of a session with the host famd
 * (wire/session.h): connecting, the round trips, the watchdog that notices
 * the end of a session, and what becomes of the arenas then (fork:
 * libfam-fork.c).
 *
 * Owns: struct libfam libfam (the session and the lock), the session
 * socket, our copy of the userfaultfd, the watchdog thread, the messages on
 * stderr (written with write(2), once per outage).
 * Session states (libfam.state):
 *   LIBFAM_S_NONE    no session; the next allocation opens one, at most
 *                    once a second after a failure
 *   LIBFAM_S_LIVE    connected, the userfaultfd passed, a watchdog thread
 *                    waiting for the socket to hang up
 *   LIBFAM_S_BROKEN  a round trip failed: the socket is shut down, and the
 *                    watchdog is about to declare the session lost
 * Locks: libfam.lock (libfam-internal.h says the order).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <linux/futex.h>
#include <linux/userfaultfd.h>

#include "famd-client/famd-client.h"
#include "wire/fdpass.h"
#include "wire/session.h"
#include "client/libfam-internal.h"

/* Debian 12's headers stop at Linux 6.1; these are the kernel's values. */
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif

#define LIBFAM_RETRY_NS 1000000000ull /* between attempts to connect */

struct libfam libfam = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.sock = -1,
	.uffd = -1,
	.lost_fd = -1,
	.ident = "libfamd-client",
};

/* ---- messages ------------------------------------------------------- */

/* Appends s to buf (size len) at *n, leaving room for a newline. */
static void
say_add(char *buf, size_t len, size_t *n, const char *s)
{
	size_t l = strlen(s);

	if (l > len - 1 - *n)
		l = len - 1 - *n;
	memcpy(buf + *n, s, l);
	*n += l;
}

/* Writes "ident: " and the strings up to NULL as one line on stderr. */
void
libfam_say(const char *first, ...)
{
	char buf[512];
	const char *s;
	size_t n = 0, off = 0;
	ssize_t w;
	va_list ap;
	int saved = errno;

	say_add(buf, sizeof buf, &n, libfam.ident);
	say_add(buf, sizeof buf, &n, ": ");
	va_start(ap, first);
	for (s = first; s != NULL; s = va_arg(ap, const char *))
		say_add(buf, sizeof buf, &n, s);
	va_end(ap);
	buf[n++] = '\n';
	while (off < n) {
		w = write(STDERR_FILENO, buf + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	errno = saved;
}

/* Formats v in decimal into buf (at least 21 bytes); returns buf. */
char *
libfam_fmt_u64(char *buf, uint64_t v)
{
	char tmp[21];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (i = 0; i < n; i++)
		buf[i] = tmp[n - 1 - i];
	buf[n] = '\0';
	return buf;
}

/* Formats an errno as "description (ENAME)" into buf of len bytes. */
const char *
libfam_fmt_errno(char *buf, size_t len, int err)
{
	const char *desc = strerrordesc_np(err), *name = strerrorname_np(err);
	char num[21];
	size_t n = 0;

	say_add(buf, len, &n, desc != NULL ? desc : "unknown error");
	say_add(buf, len, &n, " (");
	say_add(buf, len, &n,
	    name != NULL ? name : libfam_fmt_u64(num, (uint64_t)err));
	say_add(buf, len, &n, ")");
	buf[n] = '\0';
	return buf;
}

/* Names the messages' author and what becomes of allocations without famd. */
void
libfam_configure(const char *ident, const char *fallback)
{
	libfam.ident = ident;
	libfam.fallback = fallback;
}

/* Reports a failure to get a session, once per outage. */
static void
report_outage(const char *what, const char *path, int err)
{
	char ebuf[128];

	if (libfam.reported)
		return;
	libfam.reported = true;
	libfam_say(what, path, ": ", libfam_fmt_errno(ebuf, sizeof ebuf, err),
	    libfam.fallback != NULL ? "; " : "",
	    libfam.fallback != NULL ? libfam.fallback : "", NULL);
}

/* ---- helpers -------------------------------------------------------- */

/* Returns CLOCK_MONOTONIC in nanoseconds. */
uint64_t
libfam_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Closes fd if it is one. */
void
close_fd(int fd)
{
	if (fd >= 0)
		close(fd);
}

/*
 * The session socket's path: $FAM_SOCKET, else the default. Read once,
 * under libfam.lock (and again by atfork_prepare, in the parent): a forked
 * child opens its session before it maps its copies of the parent's
 * arenas, and the environment can live there (a shell's, with
 * FAM_HEAP=all), so the child must not read it then.
 */
const char *
session_path(void)
{
	static char path[sizeof(((struct sockaddr_un *)NULL)->sun_path) + 1];
	static bool known;

	if (!known) {
		const char *p = secure_getenv("FAM_SOCKET");

		if (p == NULL || *p == '\0')
			p = FAM_SESSION_SOCKET;
		/* a longer one is cut, and still refused as too long */
		strncpy(path, p, sizeof path - 1);
		known = true;
	}
	return path;
}

/*
 * Takes the lock, with cancellation off: a round trip waits in recvmsg(), a
 * cancellation point, and a thread cancelled there would keep the lock.
 * Returns the cancel state to give back to libfam_unlock().
 */
int
libfam_lock(void)
{
	int old;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	pthread_mutex_lock(&libfam.lock);
	return old;
}

/* Releases the lock and restores the cancel state. */
void
libfam_unlock(int cancel)
{
	pthread_mutex_unlock(&libfam.lock);
	pthread_setcancelstate(cancel, NULL);
}

/* ---- the session socket --------------------------------------------- */

/*
 * Reads exactly len bytes from the session socket; the first descriptor
 * that comes with them goes to *fd (when fd is not NULL), any other is
 * closed.
 */
static int
sock_read(void *buf, size_t len, int *fd)
{
	size_t done = 0;
	bool truncated;
	ssize_t n;

	while (done < len) {
		int extra = -1;

		n = fdpass_recv(libfam.sock, (char *)buf + done, len - done,
		    fd != NULL ? fd : &extra, &truncated, 0);
		if (extra >= 0)
			close(extra);
		if (n < 0)
			return (int)n;
		if (truncated)
			return -EPROTO;
		if (n == 0)
			return -ECONNRESET;
		done += (size_t)n;
	}
	return 0;
}

/* Sends m, its len bytes of data and, when fd >= 0, a descriptor. */
static int
sock_send(const struct fam_smsg *m, const void *data, int fd)
{
	struct iovec iov[2] = {
		{ .iov_base = (void *)m, .iov_len = sizeof *m },
		{ .iov_base = (void *)data, .iov_len = m->len },
	};
	struct iovec *v = iov;
	int nv = m->len ? 2 : 1;
	ssize_t n;

	while (nv > 0) {
		n = fdpass_send(libfam.sock, v, nv, fd, MSG_NOSIGNAL);
		if (n < 0)
			return (int)n;
		fd = -1; /* the descriptor went with the first bytes */
		while (nv > 0 && (size_t)n >= v->iov_len) {
			n -= (ssize_t)v->iov_len;
			v++;
			nv--;
		}
		if (nv > 0) {
			v->iov_base = (char *)v->iov_base + n;
			v->iov_len -= (size_t)n;
		}
	}
	return 0;
}

/*
 * Moves fd (close-on-exec) to a number near the top of the first 1024, out
 * of the way of programs that dup2() onto small numbers they chose ("exec
 * 3>file"); returns the descriptor to use.
 */
int
fd_high(int fd)
{
	struct rlimit rl;
	long top = 1024;
	int nfd;

	if (fd < 0 || getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return fd;
	if (rl.rlim_cur != RLIM_INFINITY && (long)rl.rlim_cur < top)
		top = (long)rl.rlim_cur;
	if (top - 64 <= fd)
		return fd;
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, (int)(top - 64));
	if (nfd < 0)
		return fd;
	close(fd);
	return nfd;
}

/* Records what file fd is (id[0] device, id[1] inode). */
void
fd_id_take(int fd, uint64_t id[2])
{
	struct stat st;

	id[0] = id[1] = 0;
	if (fd >= 0 && fstat(fd, &st) == 0) {
		id[0] = (uint64_t)st.st_dev;
		id[1] = (uint64_t)st.st_ino;
	}
}

/*
 * Tells whether fd is still the file fd_id_take() saw: a program may close
 * every descriptor it did not open, and the number then names another
 * file, or none.
 */
bool
fd_is(int fd, const uint64_t id[2])
{
	struct stat st;

	return fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_dev == id[0] &&
	    (uint64_t)st.st_ino == id[1];
}

/*
 * The program closed our session socket: forget the descriptors without
 * closing them (their numbers may be the program's by now). famd sees
 * the session end and serves the arenas on until the process exits or
 * execs; no session is opened again.
 */
static void
session_closed(void)
{
	if (libfam.state == LIBFAM_S_CLOSED)
		return;
	if (!fd_is(libfam.uffd, libfam.uffd_id))
		libfam.uffd = -1;
	libfam.sock = -1;
	libfam.state = LIBFAM_S_CLOSED;
	libfam_say("the program closed the session socket: the "
	    "fabric-attached memory it has stays served until it exits or "
	    "runs another program; new allocations come from libc", NULL);
}

/*
 * Ends a live session after a failed round trip: shuts the socket down, so
 * the watchdog wakes and declares its arenas lost.
 */
void
session_break(int why)
{
	if (libfam.state != LIBFAM_S_LIVE)
		return;
	libfam.state = LIBFAM_S_BROKEN;
	libfam.lost_why = why;
	shutdown(libfam.sock, SHUT_RDWR);
}

/*
 * One round trip: sends m (with data, and fd when >= 0) as a request of
 * this type and reads the reply into m, its descriptor into *rfd when rfd
 * is not NULL. Returns 0, famd's error as -errno, or -ECONNRESET or -EPROTO
 * once the session is broken.
 */
int
session_call(uint16_t type, struct fam_smsg *m, const void *data, int fd,
    int *rfd)
{
	char sink[256];
	uint64_t seq = ++libfam.seq;
	size_t left;
	int rc, got = -1;

	if (rfd != NULL)
		*rfd = -1;
	if (libfam.state == LIBFAM_S_CLOSED)
		return -ECONNRESET;
	if (!fd_is(libfam.sock, libfam.sock_id)) {
		session_closed();
		return -ECONNRESET;
	}
	m->magic = FAM_SESSION_MAGIC;
	m->version = FAM_SESSION_VERSION;
	m->type = type;
	m->status = 0;
	m->reserved = 0;
	m->seq = seq;
	rc = sock_send(m, data, fd);
	if (rc == 0)
		rc = sock_read(m, sizeof *m, &got);
	if (rc == 0)
		rc = fam_smsg_check_reply(m, type, seq);
	for (left = rc == 0 ? m->len : 0; left > 0 && rc == 0;) {
		size_t n = left < sizeof sink ? left : sizeof sink;

		rc = sock_read(sink, n, NULL);
		left -= n;
	}
	if (rc < 0) {
		close_fd(got);
		rc = rc == -EPROTO ? -EPROTO : -ECONNRESET;
		session_break(rc);
		return rc;
	}
	if (m->status != 0) {
		close_fd(got);
		return -m->status;
	}
	if (rfd != NULL)
		*rfd = got;
	else
		close_fd(got);
	return 0;
}

/* ---- session set-up and loss ---------------------------------------- */

/*
 * Creates this process's userfaultfd: one that also catches the kernel's
 * faults (a read(2) into a page not yet resident) when this process may
 * have it, from the syscall or from /dev/userfaultfd (devfd: famd hands
 * it to the members of its uffd_device_group); else a user-mode-only one,
 * with which such a system call fails with EFAULT.
 */
static int
uffd_create(int devfd)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd >= 0)
		return fd;
	if (errno == EPERM && devfd >= 0)
		fd = ioctl(devfd, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && errno == EPERM)
		fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK |
		    UFFD_USER_MODE_ONLY);
	return fd >= 0 ? fd : -errno;
}

/* Creates the empty, sealed file lost arenas are mapped onto. */
static void
lost_fd_create(void)
{
	int fd;

	if (libfam.lost_fd >= 0)
		return;
	fd = memfd_create("fam-lost", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return;
	fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
	libfam.lost_fd = fd_high(fd);
}

/* Declares the session lost: every arena of it faults with SIGBUS from now on. */
static void
session_lose(void)
{
	size_t n = atomic_load(&narenas), i, regions = 0, bytes = 0;
	char nbuf[21], bbuf[21], ebuf[128];
	int stuck = 0, why = libfam.lost_why, err = 0, rc;
	struct uffdio_range range;

	for (i = 0; i < libfam.region_cap; i++) {
		struct libfam_region *r = &libfam.regions[i];

		if (r->addr != 0 &&
		    atomic_load(&arenas[r->arena].state) == LIBFAM_A_LIVE) {
			regions++;
			bytes += r->size;
		}
	}
	/* First no thread may fault on the old mappings again... */
	for (i = 0; i < n; i++) {
		if (atomic_load(&arenas[i].state) != LIBFAM_A_LIVE)
			continue;
		rc = arena_replace(&arenas[i]);
		if (rc < 0) {
			stuck++;
			err = -rc;
		}
	}
	/* ... then those waiting in a fault retry, and get SIGBUS. */
	for (i = 0; i < n && libfam.uffd >= 0; i++) {
		if (arenas[i].session != libfam.gen ||
		    atomic_load(&arenas[i].state) != LIBFAM_A_LOST)
			continue;
		range.start = arenas[i].base;
		range.len = arenas[i].len;
		ioctl(libfam.uffd, UFFDIO_WAKE, &range);
	}
	/*
	 * Closing our userfaultfd while an arena is still mapped would turn
	 * its faults into silent zero pages: keep it then, and those threads
	 * stay blocked instead.
	 */
	if (stuck == 0 && fd_is(libfam.uffd, libfam.uffd_id))
		close_fd(libfam.uffd);
	if (fd_is(libfam.sock, libfam.sock_id))
		close_fd(libfam.sock);
	libfam.uffd = -1;
	libfam.sock = -1;
	libfam.state = LIBFAM_S_NONE;
	libfam.lost_why = 0;
	libfam.retry_ns = 0;
	libfam.reported = false;

	libfam_say(why == 0 ? "the host famd closed the session" :
	    why == -EPROTO ? "the session with the host famd broke (protocol "
	    "error)" : "the session with the host famd broke",
	    ": ", libfam_fmt_u64(nbuf, regions),
	    regions == 1 ? " region (" : " regions (",
	    libfam_fmt_u64(bbuf, bytes >> 20), " MiB) of fabric-attached "
	    "memory lost; touching it raises SIGBUS", NULL);
	if (stuck > 0)
		libfam_say("could not unmap ", libfam_fmt_u64(nbuf, (uint64_t)stuck),
		    " lost arenas: ", libfam_fmt_errno(ebuf, sizeof ebuf, err),
		    "; threads touching them will wait for ever", NULL);
}

/* An entry of getdents64(2). */
struct libfam_dirent {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

/* Tells whether the thread tid of this process has ended (a zombie). */
static bool
thread_ended(const char *tid)
{
	char path[96] = "/proc/self/task/", st[512], *p;
	ssize_t n;
	int fd;

	if (strlen(tid) > 40)
		return false;
	strcat(strcat(path, tid), "/stat");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT;
	n = read(fd, st, sizeof st - 1);
	close(fd);
	if (n <= 0)
		return false;
	st[n] = '\0';
	p = strrchr(st, ')');
	return p != NULL && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/*
 * Tells whether every other thread of this process has ended: the
 * program's last thread called pthread_exit(), which ends the process
 * (as exit(0)) when no thread is left, and the watchdog must not be the
 * one thread that keeps it alive.
 */
static bool
watchdog_alone(void)
{
	char buf[2048], self[21];
	bool alone = true;
	long n;
	int dfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dfd < 0)
		return false;
	libfam_fmt_u64(self, (uint64_t)syscall(SYS_gettid));
	while (alone && (n = syscall(SYS_getdents64, dfd, buf,
	    sizeof buf)) > 0) {
		for (long off = 0; off < n && alone;) {
			struct libfam_dirent *d = (void *)(buf + off);

			off += d->d_reclen;
			if (d->d_name[0] == '.' || strcmp(d->d_name, self) == 0)
				continue;
			alone = thread_ended(d->d_name);
		}
	}
	close(dfd);
	return alone;
}

/* Waits for fd to hang up; once a second, looks whether we are alone. */
static short
watchdog_poll(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLRDHUP };

	for (;;) {
		int n = poll(&pfd, 1, 1000);
		struct timespec ts = { .tv_nsec = 10000000 };

		if (n > 0)
			return pfd.revents;
		if (n == 0 && watchdog_alone())
			exit(0);
		if (n < 0 && errno != EINTR)
			nanosleep(&ts, NULL); /* ENOMEM: try again */
	}
}

/*
 * The spare watchdog: a thread started before any session, in a program
 * that brings its own malloc (libfam_watchdog_spare()). Such an allocator
 * may map a large block while it holds its own lock; the shim serves that
 * mmap(), and the first one opens the session. pthread_create() allocates
 * the new thread's TLS with the program's calloc(), which waits for that
 * same lock: the program hangs. The spare, made when nothing is held,
 * takes the session's watch instead. It waits on a futex, not on
 * libfam.lock, so a fork while it waits leaves the child nothing locked;
 * the child gets a spare of its own from a fork handler registered after
 * the allocator's (it runs once the allocator works again in the child).
 * given goes back to 0 under libfam.lock, where the watch ends: a session
 * opened right after finds the spare idle.
 */
static struct {
	_Atomic uint32_t given; /* 0: idle (or none), 1: gen to watch */
	uint64_t gen;           /* written before given is set */
	pid_t pid;              /* the process it runs in (0: none; a
	                         * child's is its parent's until replaced) */
	bool handler;           /* a forked child starts a spare of its own */
} spare;

static void watchdog_watch(uint64_t gen, bool on_spare);

/* The spare's thread: waits for a session, watches it, and waits again. */
static void *
watchdog_spare_main(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts = { .tv_sec = 1 };

		if (atomic_load_explicit(&spare.given,
		    memory_order_acquire) == 0) {
			if (syscall(SYS_futex, &spare.given, FUTEX_WAIT_PRIVATE,
			    0, &ts, NULL, 0) < 0 && errno == ETIMEDOUT &&
			    watchdog_alone())
				exit(0);
			continue;
		}
		watchdog_watch(spare.gen, true); /* sets given to 0 */
	}
	return NULL;
}

/* Hands the session gen to the spare watchdog if it is idle. */
static bool
watchdog_spare_take(uint64_t gen)
{
	if (spare.pid != getpid() ||
	    atomic_load_explicit(&spare.given, memory_order_acquire) != 0)
		return false;
	spare.gen = gen;
	atomic_store_explicit(&spare.given, 1, memory_order_release);
	syscall(SYS_futex, &spare.given, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	return true;
}

/*
 * Waits for the session socket to hang up, then waits for famd to take
 * the session back after a restart, or declares it lost.
 */
static void *
watchdog_main(void *arg)
{
	watchdog_watch((uint64_t)(uintptr_t)arg, false);
	return NULL;
}

/*
 * The watch of session gen, on a watchdog's thread (see watchdog_main);
 * on the spare, it ends with the spare idle again (libfam.lock held).
 */
static void
watchdog_watch(uint64_t gen, bool on_spare)
{
	int fd;

	pthread_mutex_lock(&libfam.lock);
	fd = libfam.gen == gen ? libfam.sock : -1;
	while (fd >= 0) {
		short revents;

		pthread_mutex_unlock(&libfam.lock);
		revents = watchdog_poll(fd);
		fd = -1;
		pthread_mutex_lock(&libfam.lock);
		if (libfam.gen == gen && libfam.state != LIBFAM_S_NONE &&
		    libfam.state != LIBFAM_S_CLOSED) {
			if ((revents & POLLNVAL) ||
			    !fd_is(libfam.sock, libfam.sock_id))
				session_closed();
			else if (session_reclaim_wait() == 0)
				fd = libfam.sock;
			else
				session_lose();
		}
	}
	if (on_spare)
		atomic_store_explicit(&spare.given, 0, memory_order_release);
	pthread_mutex_unlock(&libfam.lock);
}

/* Starts a watchdog thread at main, with every signal blocked. */
static int
watchdog_thread(void *(*main)(void *), uint64_t gen)
{
	pthread_attr_t attr;
	sigset_t all, old;
	pthread_t t;
	int rc;

	sigfillset(&all);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, &attr, main, (void *)(uintptr_t)gen);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return -rc;
}

/*
 * Starts the watchdog of the current session (libfam.lock held): the
 * spare takes it when there is one.
 */
static int
watchdog_start(void)
{
	if (watchdog_spare_take(libfam.gen))
		return 0;
	return watchdog_thread(watchdog_main, libfam.gen);
}

/*
 * Starts the spare's thread (libfam.lock held, or in a forked child,
 * where the parent's spare is not).
 */
static void
watchdog_spare_start(void)
{
	char ebuf[128];
	int rc;

	libfam_fork_child_pending();
	rc = watchdog_thread(watchdog_spare_main, 0);
	spare.pid = rc == 0 ? getpid() : 0;
	if (rc < 0 && atomic_load(&spare.given) != 0)
		libfam_say("fork: cannot start the watchdog thread (",
		    libfam_fmt_errno(ebuf, sizeof ebuf, -rc), "): this child "
		    "will not wait for a restarted famd", NULL);
}

/*
 * Starts the spare watchdog now, before any session (the shim's
 * constructor, in a program with its own malloc); once per process. The
 * thread is made first: pthread_create() calls the program's calloc(),
 * which sets its allocator up and registers its fork handlers, so that
 * the child handler registered next runs after the allocator's.
 */
void
libfam_watchdog_spare(void (*child)(void))
{
	int cancel = libfam_lock();

	if (spare.pid != getpid() && libfam.state == LIBFAM_S_NONE)
		watchdog_spare_start();
	/* in a forked child, after the allocator's: a spare of its own */
	if (spare.pid == getpid() && !spare.handler)
		spare.handler = pthread_atfork(NULL, NULL, child) == 0;
	libfam_unlock(cancel);
}

/* In a forked child (the handler the shim registers): its own spare. */
void
libfam_watchdog_spare_child(void)
{
	watchdog_spare_start();
}

/* In a forked child, first: the parent's spare was watching its session. */
void
watchdog_fork_child(void)
{
	atomic_store(&spare.given, 0);
}

/*
 * In a forked child, later: the watch of the child's session (gen), on a
 * thread of its own, or where a spare is kept (a program with its own
 * malloc, whose fork handlers may come after libfam's), on the spare the
 * child starts after its allocator's handler.
 */
int
watchdog_fork_watch(uint64_t gen)
{
	/* no spare, or the child's could not start (its handler ran) */
	if (!spare.handler || spare.pid == 0)
		return watchdog_start();
	if (!watchdog_spare_take(gen)) {
		spare.gen = gen; /* for the spare to come */
		atomic_store(&spare.given, 1);
	}
	return 0;
}

/*
 * Connects to the host famd and says HELLO (wire/session.h, step 1);
 * *devfd gets /dev/userfaultfd when famd offers it.
 */
int
session_connect(bool quiet, int *devfd)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	const char *path = session_path();
	struct fam_smsg m;
	int rc;
	size_t plen = strlen(path);
	long page = sysconf(_SC_PAGESIZE);

	*devfd = -1;
	if (plen >= sizeof sun.sun_path) {
		rc = -ENAMETOOLONG;
		if (!quiet)
			report_outage("cannot reach the host famd at ", path,
			    -rc);
		return rc;
	}
	memcpy(sun.sun_path, path, plen);
	libfam.sock = fd_high(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
	rc = libfam.sock < 0 ? -errno : 0;
	while (rc == 0 && connect(libfam.sock, (struct sockaddr *)&sun,
	    sizeof sun) < 0)
		rc = errno == EINTR ? 0 : -errno;
	if (rc < 0) {
		if (!quiet)
			report_outage("cannot reach the host famd at ", path,
			    -rc);
		goto fail;
	}
	fd_id_take(libfam.sock, libfam.sock_id);
	libfam.seq = 0;

	memset(&m, 0, sizeof m);
	m.a = FAM_API_VERSION;
	rc = session_call(FAM_S_HELLO, &m, NULL, -1, devfd);
	if (rc == 0)
		rc = fam_smsg_check_hello_reply(&m, (uint64_t)page);
	if (rc < 0) {
		if (!quiet)
			report_outage("cannot open a session with the host "
			    "famd at ", path, -rc);
		goto fail;
	}
	libfam.chunk = (size_t)m.a;
	libfam.arena_size = (size_t)m.b;
	libfam.token = m.d;
	if (!(m.c & FAM_S_FEAT_DEVFD)) {
		close_fd(*devfd);
		*devfd = -1;
	}
	return 0;
fail:
	close_fd(*devfd);
	*devfd = -1;
	close_fd(libfam.sock);
	libfam.sock = -1;
	return rc;
}

/*
 * Opens a session with the host famd (wire/session.h, steps 1 and 2), and
 * starts its watchdog unless told not to (a forked child starts it once
 * its copies of the parent's arenas are mapped: a new thread reads the
 * locale, which can live there).
 */
int
session_open(bool watchdog)
{
	const char *path = session_path();
	uint64_t now = libfam_now();
	struct fam_smsg m;
	int rc, devfd = -1, uffd = -1;

	if (now < libfam.retry_ns)
		return libfam.last_err;
	rc = session_connect(false, &devfd);
	if (rc < 0)
		goto fail;

	uffd = fd_high(uffd_create(devfd));
	close_fd(devfd);
	if (uffd < 0) {
		rc = uffd;
		report_outage("cannot create a userfaultfd for the host famd at ",
		    path, -rc);
		goto fail;
	}
	memset(&m, 0, sizeof m);
	rc = session_call(FAM_S_UFFD, &m, NULL, uffd, NULL);
	if (rc < 0) {
		report_outage("the host famd did not take the userfaultfd at ", path,
		    -rc);
		goto fail;
	}

	lost_fd_create();
	libfam.gen++;
	rc = watchdog ? watchdog_start() : 0;
	if (rc < 0) {
		report_outage("cannot start the watchdog thread for ", path,
		    -rc);
		goto fail;
	}
	libfam.uffd = uffd;
	fd_id_take(uffd, libfam.uffd_id);
	libfam.state = LIBFAM_S_LIVE;
	libfam.retry_ns = 0;
	libfam.reported = false;
	return 0;

fail:
	close_fd(uffd);
	close_fd(libfam.sock);
	libfam.sock = -1;
	libfam.retry_ns = now + LIBFAM_RETRY_NS;
	libfam.last_err = rc;
	return rc;
}

/* Makes sure there is a live session; *quiet tells a failure to get one. */
int
session_get(bool *quiet)
{
	int rc = 0;

	if (libfam.state == LIBFAM_S_BROKEN || libfam.state == LIBFAM_S_CLOSED)
		rc = -ECONNRESET;
	else if (libfam.state == LIBFAM_S_NONE)
		rc = session_open(true);
	if (rc < 0 && quiet != NULL)
		*quiet = true;
	return rc;
}
