/*
 * libfam.c - libfam: the program's side of a session with the host famd
 * (wire/session.h), and the fam_*() API of fam.h.
 *
 * This code may run inside malloc (libfamshim compiles it in): it never
 * allocates and never uses stdio. Tables live in static or mmap'd memory,
 * messages on the stack, and errors go to stderr with write(2), once.
 *
 * Session states (libfam.state):
 *   LIBFAM_S_NONE    no session; the next allocation opens one, at most
 *                    once a second after a failure
 *   LIBFAM_S_LIVE    connected, the userfaultfd passed, a watchdog thread
 *                    waiting for the socket to hang up
 *   LIBFAM_S_BROKEN  a round trip failed: the socket is shut down, and the
 *                    watchdog is about to declare the session lost
 * Arena states (struct libfam_arena.state):
 *   LIBFAM_A_LIVE       mapped, registered with famd, faults served
 *   LIBFAM_A_LOST       famd gone: mapped onto an empty file, so every access
 *                       raises SIGBUS
 *   LIBFAM_A_INHERITED  a parent's arena seen in a forked child: not mapped
 *                       (MADV_DONTFORK), reserved PROT_NONE (SIGSEGV)
 * Arenas keep their slot and their address range for the life of the
 * process, so an address once FAM stays FAM: free() of it never reaches
 * libc.
 *
 * Lock order: libfam.lock is the only lock. It is held across each round
 * trip and each change of the tables, and never while touching the memory of
 * a region: a fault there may wait for the watchdog, which takes the lock.
 * libfam_owns() reads the arena table without it: an entry is filled before
 * its slot is published (release store of narenas) and never moves.
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <linux/userfaultfd.h>

#include "fam.h"
#include "wire/session.h"
#include "client/libfam-internal.h"

/* Debian 12's headers stop at Linux 6.1; these are the kernel's values. */
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MFD_ALLOW_SEALING
#define MFD_ALLOW_SEALING 0x0002U
#endif

#define LIBFAM_MAX_ARENAS  4096
#define LIBFAM_RETRY_NS    1000000000ull /* between attempts to connect */
#define LIBFAM_MIN_REGIONS 256           /* slots of a new region table */
#define LIBFAM_MAX_ARENA   FAM_SESSION_MAX_ARENA
#define LIBFAM_MAX_FDS     4 /* descriptors accepted on one reply */

enum libfam_state {
	LIBFAM_S_NONE,
	LIBFAM_S_LIVE,
	LIBFAM_S_BROKEN,
};

enum libfam_arena_state {
	LIBFAM_A_LIVE,
	LIBFAM_A_LOST,
	LIBFAM_A_INHERITED,
};

struct libfam_arena {
	uintptr_t base;   /* address of byte 0 */
	size_t len;       /* bytes mapped: the size of famd's memfd */
	uint64_t id;      /* famd's name for it, within the session */
	uint64_t session; /* generation of the session that mapped it */
	uint64_t *used;   /* one bit per chunk in a region (mmap'd) */
	size_t used_len;  /* bytes of that bitmap */
	_Atomic int state; /* enum libfam_arena_state */
};

struct libfam_region {
	uintptr_t addr;   /* first byte; 0 marks a free slot */
	size_t size;      /* bytes reserved, a multiple of the chunk size */
	uint64_t handle;  /* famd's name for it */
	uint32_t arena;   /* slot in the arena table */
	uint32_t flags;   /* FAM_S_ALLOC_* */
};

static struct libfam {
	pthread_mutex_t lock;
	enum libfam_state state;
	uint64_t gen;       /* sessions opened so far; names the current one */
	int sock;           /* session socket, -1 without a session */
	int uffd;           /* our copy of the userfaultfd, -1 without */
	int lost_fd;        /* an empty, sealed memfd: lost arenas map it */
	uint64_t seq;       /* last request number sent */
	size_t chunk;       /* famd's chunk size (bytes, a power of two) */
	size_t arena_size;  /* famd's usual arena length */
	int lost_why;       /* 0, or the -errno that broke the session */
	uint64_t retry_ns;  /* no new connection attempt before this time */
	int last_err;       /* -errno of the last failed attempt */
	bool reported;      /* the current outage has been reported */
	const char *ident;
	const char *fallback;

	struct libfam_region *regions; /* open addressing, linear probing */
	size_t nregions;
	size_t region_cap;  /* slots: a power of two, or 0 */
} libfam = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.sock = -1,
	.uffd = -1,
	.lost_fd = -1,
	.ident = "libfam",
};

static struct libfam_arena arenas[LIBFAM_MAX_ARENAS];
static _Atomic size_t narenas;
static _Atomic uintptr_t arenas_lo = UINTPTR_MAX;
static _Atomic uintptr_t arenas_hi;
static pthread_once_t libfam_once = PTHREAD_ONCE_INIT;

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
static uint64_t
libfam_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Tells whether v is a power of two. */
static bool
is_pow2(uint64_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

/* Closes fd if it is one. */
static void
close_fd(int fd)
{
	if (fd >= 0)
		close(fd);
}

/* The session socket's path: $FAM_SOCKET, else the default. */
static const char *
session_path(void)
{
	const char *p = secure_getenv("FAM_SOCKET");

	return p != NULL && *p != '\0' ? p : FAM_SESSION_SOCKET;
}

/*
 * Takes the lock, with cancellation off: a round trip waits in recvmsg(), a
 * cancellation point, and a thread cancelled there would keep the lock.
 * Returns the cancel state to give back to libfam_unlock().
 */
static int
libfam_lock(void)
{
	int old;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	pthread_mutex_lock(&libfam.lock);
	return old;
}

/* Releases the lock and restores the cancel state. */
static void
libfam_unlock(int cancel)
{
	pthread_mutex_unlock(&libfam.lock);
	pthread_setcancelstate(cancel, NULL);
}

/* ---- arena table ---------------------------------------------------- */

/* The arena holding addr, or NULL; lock-free. */
static struct libfam_arena *
arena_of(uintptr_t addr)
{
	size_t n = atomic_load_explicit(&narenas, memory_order_acquire), i;

	if (n == 0 || addr < atomic_load_explicit(&arenas_lo,
	    memory_order_relaxed) || addr >= atomic_load_explicit(&arenas_hi,
	    memory_order_relaxed))
		return NULL;
	for (i = 0; i < n; i++)
		if (addr - arenas[i].base < arenas[i].len)
			return &arenas[i];
	return NULL;
}

/* The live arena famd calls id in the current session, or NULL. */
static struct libfam_arena *
arena_by_id(uint64_t id)
{
	size_t n = atomic_load_explicit(&narenas, memory_order_relaxed), i;

	for (i = 0; i < n; i++)
		if (arenas[i].id == id && arenas[i].session == libfam.gen &&
		    atomic_load(&arenas[i].state) == LIBFAM_A_LIVE)
			return &arenas[i];
	return NULL;
}

/* Tells whether famd serves arena a now: live, of the live session. */
static bool
arena_served(const struct libfam_arena *a)
{
	return atomic_load(&a->state) == LIBFAM_A_LIVE &&
	    a->session == libfam.gen && libfam.state == LIBFAM_S_LIVE;
}

/* Sets (on) or clears the bits of chunks [first, first + count). */
static void
arena_mark(struct libfam_arena *a, size_t first, size_t count, bool on)
{
	size_t i;

	for (i = first; i < first + count; i++) {
		if (on)
			a->used[i / 64] |= 1ull << (i % 64);
		else
			a->used[i / 64] &= ~(1ull << (i % 64));
	}
}

/* Tells whether any chunk of [first, first + count) is in a region. */
static bool
arena_busy(const struct libfam_arena *a, size_t first, size_t count)
{
	size_t i;

	for (i = first; i < first + count; i++) {
		if (i % 64 == 0 && i + 64 <= first + count) {
			if (a->used[i / 64] != 0)
				return true;
			i += 63;
			continue;
		}
		if (a->used[i / 64] & (1ull << (i % 64)))
			return true;
	}
	return false;
}

/*
 * Maps memfd, famd's new arena, at an address aligned as wire/session.h
 * says, and keeps it from forked children. Returns its base.
 */
static int
arena_map(int memfd, size_t len, uintptr_t *basep)
{
	size_t align = FAM_SESSION_ARENA_ALIGN;
	uintptr_t resv, base;
	void *p;

	while (align > len)
		align >>= 1;
	if (align < (size_t)sysconf(_SC_PAGESIZE))
		align = (size_t)sysconf(_SC_PAGESIZE);
	p = mmap(NULL, len + align, PROT_NONE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	resv = (uintptr_t)p;
	base = (resv + align - 1) & ~(uintptr_t)(align - 1);
	p = mmap((void *)base, len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_FIXED | MAP_NORESERVE, memfd, 0);
	if (p == MAP_FAILED) {
		int rc = -errno;

		munmap((void *)resv, len + align);
		return rc;
	}
	if (base > resv)
		munmap((void *)resv, base - resv);
	if (resv + align > base)
		munmap((void *)(base + len), resv + align - base);
	if (madvise((void *)base, len, MADV_DONTFORK) < 0) {
		int rc = -errno;

		munmap((void *)base, len);
		return rc;
	}
	*basep = base;
	return 0;
}

/* Prepares the next free slot for an arena of len bytes: its chunk bitmap. */
static int
arena_prepare(size_t len, struct libfam_arena **ap)
{
	size_t n = atomic_load_explicit(&narenas, memory_order_relaxed);
	size_t blen = ((len / libfam.chunk + 63) / 64) * 8;
	struct libfam_arena *a;
	void *p;

	if (n >= LIBFAM_MAX_ARENAS)
		return -ENOMEM;
	a = &arenas[n];
	blen = (blen + 4095) & ~(size_t)4095;
	p = mmap(NULL, blen, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	a->used = p;
	a->used_len = blen;
	*ap = a;
	return 0;
}

/* Frees what arena_prepare() got for a slot left unused. */
static void
arena_unprepare(struct libfam_arena *a)
{
	munmap(a->used, a->used_len);
	a->used = NULL;
	a->used_len = 0;
}

/* Publishes the prepared arena a, mapped at base. */
static void
arena_publish(struct libfam_arena *a, uint64_t id, uintptr_t base, size_t len)
{
	a->base = base;
	a->len = len;
	a->id = id;
	a->session = libfam.gen;
	atomic_store(&a->state, LIBFAM_A_LIVE);
	if (base < atomic_load(&arenas_lo))
		atomic_store(&arenas_lo, base);
	if (base + len > atomic_load(&arenas_hi))
		atomic_store(&arenas_hi, base + len);
	atomic_store_explicit(&narenas, (size_t)(a - arenas) + 1,
	    memory_order_release);
}

/*
 * Replaces a live arena's mapping by one of an empty file, so that every
 * access raises SIGBUS (or, failing that, SIGSEGV). Returns -errno when the
 * old mapping is still there.
 */
static int
arena_replace(struct libfam_arena *a)
{
	void *p = MAP_FAILED;

	if (libfam.lost_fd >= 0)
		p = mmap((void *)a->base, a->len, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_FIXED | MAP_NORESERVE, libfam.lost_fd, 0);
	if (p == MAP_FAILED)
		p = mmap((void *)a->base, a->len, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
		    -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	atomic_store(&a->state, LIBFAM_A_LOST);
	return 0;
}

/* ---- region table --------------------------------------------------- */

/* Home slot of addr in a table of cap slots. */
static size_t
region_home(uintptr_t addr, size_t cap)
{
	uint64_t h = (uint64_t)addr * 0x9e3779b97f4a7c15ull;

	return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

/* The region starting at addr, or NULL. */
static struct libfam_region *
region_find(uintptr_t addr)
{
	size_t cap = libfam.region_cap, i;

	if (cap == 0 || addr == 0)
		return NULL;
	for (i = region_home(addr, cap);; i = (i + 1) & (cap - 1)) {
		if (libfam.regions[i].addr == addr)
			return &libfam.regions[i];
		if (libfam.regions[i].addr == 0)
			return NULL;
	}
}

/* Puts r in table t of cap slots, which has a free one. */
static void
region_put(struct libfam_region *t, size_t cap, const struct libfam_region *r)
{
	size_t i = region_home(r->addr, cap);

	while (t[i].addr != 0)
		i = (i + 1) & (cap - 1);
	t[i] = *r;
}

/* Adds r, growing the table (kept at most half full). */
static int
region_add(const struct libfam_region *r)
{
	struct libfam_region *t;
	size_t cap, i;

	if ((libfam.nregions + 1) * 2 > libfam.region_cap) {
		cap = libfam.region_cap != 0 ? libfam.region_cap * 2 :
		    LIBFAM_MIN_REGIONS;
		t = mmap(NULL, cap * sizeof *t, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (t == MAP_FAILED)
			return -ENOMEM;
		for (i = 0; i < libfam.region_cap; i++)
			if (libfam.regions[i].addr != 0)
				region_put(t, cap, &libfam.regions[i]);
		if (libfam.regions != NULL)
			munmap(libfam.regions,
			    libfam.region_cap * sizeof *libfam.regions);
		libfam.regions = t;
		libfam.region_cap = cap;
	}
	region_put(libfam.regions, libfam.region_cap, r);
	libfam.nregions++;
	return 0;
}

/* Removes the region in slot r (backward-shift deletion). */
static void
region_del(struct libfam_region *r)
{
	size_t cap = libfam.region_cap, i, j, k;

	i = (size_t)(r - libfam.regions);
	for (j = i;;) {
		j = (j + 1) & (cap - 1);
		if (libfam.regions[j].addr == 0)
			break;
		k = region_home(libfam.regions[j].addr, cap);
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		libfam.regions[i] = libfam.regions[j];
		i = j;
	}
	libfam.regions[i].addr = 0;
	libfam.nregions--;
}

/* Forgets region r: its chunks become free in its arena. */
static void
region_drop(struct libfam_region *r)
{
	struct libfam_arena *a = &arenas[r->arena];

	arena_mark(a, (r->addr - a->base) / libfam.chunk,
	    r->size / libfam.chunk, false);
	region_del(r);
}

/* ---- the session socket --------------------------------------------- */

/* Closes every descriptor in the SCM_RIGHTS messages of mh but one kept. */
static void
take_fds(struct msghdr *mh, int *keep)
{
	struct cmsghdr *c;
	size_t i, n;
	int fd;

	for (c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
			if (keep != NULL && *keep < 0)
				*keep = fd;
			else
				close(fd);
		}
	}
}

/*
 * Reads exactly len bytes from the session socket; the first descriptor
 * that comes with them goes to *fd, any other is closed.
 */
static int
sock_read(void *buf, size_t len, int *fd)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(LIBFAM_MAX_FDS * sizeof(int))];
	} cm;
	struct iovec iov;
	struct msghdr mh;
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		iov.iov_base = (char *)buf + done;
		iov.iov_len = len - done;
		memset(&mh, 0, sizeof mh);
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof cm.buf;
		n = recvmsg(libfam.sock, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		take_fds(&mh, fd);
		if (mh.msg_flags & MSG_CTRUNC)
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
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov[2] = {
		{ .iov_base = (void *)m, .iov_len = sizeof *m },
		{ .iov_base = (void *)data, .iov_len = m->len },
	};
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = m->len ? 2 : 1 };
	struct cmsghdr *c;
	ssize_t n;

	if (fd >= 0) {
		memset(&cm, 0, sizeof cm);
		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof cm.buf;
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof fd);
	}
	while (mh.msg_iovlen > 0) {
		n = sendmsg(libfam.sock, &mh, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
		while (mh.msg_iovlen > 0 && (size_t)n >= mh.msg_iov->iov_len) {
			n -= (ssize_t)mh.msg_iov->iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen > 0) {
			mh.msg_iov->iov_base = (char *)mh.msg_iov->iov_base + n;
			mh.msg_iov->iov_len -= (size_t)n;
		}
	}
	return 0;
}

/*
 * Ends a live session after a failed round trip: shuts the socket down, so
 * the watchdog wakes and declares its arenas lost.
 */
static void
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
static int
session_call(uint16_t type, struct fam_smsg *m, const void *data, int fd,
    int *rfd)
{
	char sink[256];
	uint64_t seq = ++libfam.seq;
	size_t left;
	int rc, got = -1;

	if (rfd != NULL)
		*rfd = -1;
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

/* Creates this process's userfaultfd, through devfd when the syscall is refused. */
static int
uffd_create(int devfd)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd >= 0)
		return fd;
	if (errno == EPERM && devfd >= 0)
		fd = ioctl(devfd, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
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
	libfam.lost_fd = fd;
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
	if (stuck == 0)
		close_fd(libfam.uffd);
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

/* Waits for the session socket to hang up, then declares the session lost. */
static void *
watchdog_main(void *arg)
{
	uint64_t gen = (uint64_t)(uintptr_t)arg;
	struct pollfd pfd = { .events = POLLRDHUP };

	pthread_mutex_lock(&libfam.lock);
	pfd.fd = libfam.gen == gen ? libfam.sock : -1;
	pthread_mutex_unlock(&libfam.lock);
	if (pfd.fd < 0)
		return NULL;
	for (;;) {
		int n = poll(&pfd, 1, -1);
		struct timespec ts = { .tv_nsec = 10000000 };

		if (n > 0)
			break;
		if (n < 0 && errno != EINTR)
			nanosleep(&ts, NULL); /* ENOMEM: try again */
	}
	pthread_mutex_lock(&libfam.lock);
	if (libfam.gen == gen && libfam.state != LIBFAM_S_NONE)
		session_lose();
	pthread_mutex_unlock(&libfam.lock);
	return NULL;
}

/* Starts the watchdog of the current session, with every signal blocked. */
static int
watchdog_start(void)
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
	rc = pthread_create(&t, &attr, watchdog_main,
	    (void *)(uintptr_t)libfam.gen);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	return -rc;
}

/* Opens a session with the host famd (wire/session.h, steps 1 and 2). */
static int
session_open(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	const char *path = session_path();
	uint64_t now = libfam_now();
	struct fam_smsg m;
	int rc, devfd = -1, uffd = -1;
	size_t plen = strlen(path);
	long page = sysconf(_SC_PAGESIZE);

	if (now < libfam.retry_ns)
		return libfam.last_err;
	if (plen >= sizeof sun.sun_path) {
		rc = -ENAMETOOLONG;
		report_outage("cannot reach the host famd at ", path, -rc);
		goto fail;
	}
	memcpy(sun.sun_path, path, plen);
	libfam.sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	rc = libfam.sock < 0 ? -errno : 0;
	while (rc == 0 && connect(libfam.sock, (struct sockaddr *)&sun,
	    sizeof sun) < 0)
		rc = errno == EINTR ? 0 : -errno;
	if (rc < 0) {
		report_outage("cannot reach the host famd at ", path, -rc);
		goto fail;
	}
	libfam.seq = 0;

	memset(&m, 0, sizeof m);
	m.a = FAM_API_VERSION;
	rc = session_call(FAM_S_HELLO, &m, NULL, -1, &devfd);
	if (rc == 0)
		rc = fam_smsg_check_hello_reply(&m, (uint64_t)page);
	if (rc < 0) {
		report_outage("cannot open a session with the host famd at ", path,
		    -rc);
		goto fail;
	}
	libfam.chunk = (size_t)m.a;
	libfam.arena_size = (size_t)m.b;
	if (!(m.c & FAM_S_FEAT_DEVFD)) {
		close_fd(devfd);
		devfd = -1;
	}

	uffd = uffd_create(devfd);
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
	rc = watchdog_start();
	if (rc < 0) {
		report_outage("cannot start the watchdog thread for ", path,
		    -rc);
		goto fail;
	}
	libfam.uffd = uffd;
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
static int
session_get(bool *quiet)
{
	int rc = 0;

	if (libfam.state == LIBFAM_S_BROKEN)
		rc = -ECONNRESET;
	else if (libfam.state == LIBFAM_S_NONE)
		rc = session_open();
	if (rc < 0 && quiet != NULL)
		*quiet = true;
	return rc;
}

/* ---- fork ----------------------------------------------------------- */

/* Before fork(): no round trip or table change may be half done. */
static void
atfork_prepare(void)
{
	pthread_mutex_lock(&libfam.lock);
}

/* After fork(), in the parent. */
static void
atfork_parent(void)
{
	pthread_mutex_unlock(&libfam.lock);
}

/*
 * After fork(), in the child: the parent's session and arenas are not ours.
 * The arenas were not inherited (MADV_DONTFORK): reserve their ranges so
 * that nothing else lands there and a touch raises SIGSEGV.
 */
static void
atfork_child(void)
{
	size_t n = atomic_load(&narenas), i;
	pthread_mutex_t init = PTHREAD_MUTEX_INITIALIZER;
	void *p;

	memcpy(&libfam.lock, &init, sizeof init);
	close_fd(libfam.sock);
	close_fd(libfam.uffd);
	libfam.sock = -1;
	libfam.uffd = -1;
	libfam.state = LIBFAM_S_NONE;
	libfam.lost_why = 0;
	libfam.gen++;
	for (i = 0; i < n; i++) {
		struct libfam_arena *a = &arenas[i];

		if (atomic_load(&a->state) == LIBFAM_A_LIVE) {
			p = mmap((void *)a->base, a->len, PROT_NONE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
			    MAP_FIXED_NOREPLACE, -1, 0);
			if (p != MAP_FAILED && p != (void *)a->base)
				munmap(p, a->len);
		}
		atomic_store(&a->state, LIBFAM_A_INHERITED);
	}
	if (libfam.regions != NULL)
		munmap(libfam.regions,
		    libfam.region_cap * sizeof *libfam.regions);
	libfam.regions = NULL;
	libfam.region_cap = 0;
	libfam.nregions = 0;
}

/* Once per process: the fork handlers. */
static void
libfam_init(void)
{
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* ---- regions -------------------------------------------------------- */

/* Asks famd to release a region the caller did not keep. */
static void
region_release(uint64_t handle)
{
	struct fam_smsg m;

	memset(&m, 0, sizeof m);
	m.a = handle;
	session_call(FAM_S_FREE, &m, NULL, -1, NULL);
}

/*
 * Maps the new arena famd attached to an ALLOC reply and tells famd where
 * (wire/session.h, step 3). The region [off, off + reserved) was checked.
 */
static int
alloc_new_arena(int memfd, uint64_t id, size_t len, struct libfam_arena **ap)
{
	struct libfam_arena *a = NULL;
	struct fam_smsg m;
	uintptr_t base = 0;
	int rc;

	rc = arena_prepare(len, &a);
	if (rc < 0)
		return rc;
	rc = arena_map(memfd, len, &base);
	if (rc < 0) {
		arena_unprepare(a);
		return rc;
	}
	memset(&m, 0, sizeof m);
	m.a = id;
	m.b = base;
	rc = session_call(FAM_S_MAP, &m, NULL, -1, NULL);
	if (rc < 0) {
		/* Nobody has a pointer into it yet. */
		munmap((void *)base, len);
		arena_unprepare(a);
		return rc;
	}
	arena_publish(a, id, base, len);
	*ap = a;
	return 0;
}

/*
 * Asks famd for a region (size, or the file path of plen bytes) and enters
 * it in the tables. Called with the lock held and a live session.
 */
static int
alloc_locked(size_t size, size_t align, unsigned flags, const char *path,
    size_t plen, uintptr_t *addrp, size_t *lenp)
{
	struct libfam_arena *a = NULL;
	struct libfam_region r;
	struct fam_smsg m;
	struct stat st;
	uint64_t off, len, reserved, alen;
	int rc, memfd = -1;

	memset(&m, 0, sizeof m);
	m.len = (uint32_t)plen;
	m.a = size;
	m.b = flags;
	m.c = align > libfam.chunk ? align : 0;
	rc = session_call(FAM_S_ALLOC, &m, path, -1, &memfd);
	if (rc < 0)
		return rc;
	off = m.b;
	len = m.c;
	reserved = (len + libfam.chunk - 1) & ~(uint64_t)(libfam.chunk - 1);
	r.handle = m.d;
	r.flags = flags;

	/* Check the reply before anything is mapped. */
	if ((m.flags & ~FAM_S_NEW_ARENA) != 0 ||
	    !(m.flags & FAM_S_NEW_ARENA) != (memfd < 0) || len == 0 ||
	    reserved < len || (!(flags & FAM_S_ALLOC_FILE) && len < size) ||
	    off % libfam.chunk != 0)
		goto proto;
	if (memfd >= 0) {
		if (arena_by_id(m.a) != NULL || fstat(memfd, &st) < 0 ||
		    st.st_size <= 0 || (uint64_t)st.st_size > LIBFAM_MAX_ARENA ||
		    (uint64_t)st.st_size % libfam.chunk != 0)
			goto proto;
		alen = (uint64_t)st.st_size;
	} else {
		a = arena_by_id(m.a);
		if (a == NULL)
			goto proto;
		alen = a->len;
	}
	if (off > alen || reserved > alen - off)
		goto proto;

	if (memfd >= 0) {
		rc = alloc_new_arena(memfd, m.a, (size_t)alen, &a);
		close(memfd);
		memfd = -1;
		if (rc < 0) {
			if (libfam.state == LIBFAM_S_LIVE)
				region_release(r.handle);
			return rc;
		}
	}
	r.addr = a->base + off;
	r.size = (size_t)reserved;
	r.arena = (uint32_t)(a - arenas);
	if (arena_busy(a, off / libfam.chunk, reserved / libfam.chunk))
		goto proto; /* two live regions on one chunk: never */
	if (align != 0 && r.addr % align != 0) {
		region_release(r.handle);
		return -EINVAL;
	}
	rc = region_add(&r);
	if (rc == 0 && (flags & FAM_S_ALLOC_SHARED) &&
	    mprotect((void *)r.addr, r.size, PROT_READ) < 0) {
		rc = -errno;
		region_del(region_find(r.addr));
	}
	if (rc < 0) {
		region_release(r.handle);
		return rc;
	}
	arena_mark(a, off / libfam.chunk, reserved / libfam.chunk, true);
	*addrp = r.addr;
	*lenp = (flags & FAM_S_ALLOC_FILE) ? (size_t)len : r.size;
	return 0;

proto:
	close_fd(memfd);
	session_break(-EPROTO);
	return -EPROTO;
}

/* Allocates a zero-filled region of at least size bytes, aligned to align. */
int
libfam_alloc(size_t size, size_t align, void **ptr, size_t *usable,
    bool *quiet)
{
	uintptr_t addr;
	size_t len;
	int rc, cancel;

	if (quiet != NULL)
		*quiet = true;
	if (size == 0 || (align != 0 && !is_pow2(align)))
		return -EINVAL;
	if (align > FAM_SESSION_ARENA_ALIGN)
		return -EINVAL;
	if (size > LIBFAM_MAX_ARENA)
		return -ENOMEM;
	if (quiet != NULL)
		*quiet = false;
	pthread_once(&libfam_once, libfam_init);
	cancel = libfam_lock();
	rc = session_get(quiet);
	if (rc == 0)
		rc = alloc_locked(size, align, 0, NULL, 0, &addr, &len);
	libfam_unlock(cancel);
	if (rc < 0)
		return rc;
	*ptr = (void *)addr;
	if (usable != NULL)
		*usable = len;
	return 0;
}

/* Allocates a region holding the file path, preloaded on the memory node. */
int
libfam_alloc_file(const char *path, unsigned flags, void **ptr, size_t *len)
{
	char buf[FAM_SESSION_MAX_DATA];
	uintptr_t addr;
	size_t plen, l;
	int rc, cancel;

	if (!(flags & FAM_S_ALLOC_FILE) || (flags & ~FAM_S_ALLOC_ALL))
		return -EINVAL;
	/* The path may be in a region: copy it before taking the lock. */
	plen = strnlen(path, sizeof buf + 1);
	if (plen == 0)
		return -EINVAL;
	if (plen > sizeof buf)
		return -ENAMETOOLONG;
	memcpy(buf, path, plen);
	pthread_once(&libfam_once, libfam_init);
	cancel = libfam_lock();
	rc = session_get(NULL);
	if (rc == 0)
		rc = alloc_locked(0, 0, flags, buf, plen, &addr, &l);
	libfam_unlock(cancel);
	if (rc < 0)
		return rc;
	*ptr = (void *)addr;
	*len = l;
	return 0;
}

/* Releases the region starting at ptr. */
int
libfam_free(void *ptr)
{
	struct libfam_arena *a = arena_of((uintptr_t)ptr);
	struct libfam_region *r;
	struct fam_smsg m;
	uintptr_t addr;
	size_t size;
	uint32_t flags;
	int rc = 0, cancel;

	if (a == NULL)
		return -EINVAL;
	if (atomic_load(&a->state) == LIBFAM_A_INHERITED)
		return 1;
	cancel = libfam_lock();
	r = region_find((uintptr_t)ptr);
	if (r == NULL) {
		rc = atomic_load(&a->state) == LIBFAM_A_INHERITED ? 1 :
		    -EINVAL;
		goto out;
	}
	if (!arena_served(a)) {
		/* The session is gone, and the region with it. */
		region_drop(r);
		goto out;
	}
	addr = r->addr;
	size = r->size;
	flags = r->flags;
	memset(&m, 0, sizeof m);
	m.a = r->handle;
	rc = session_call(FAM_S_FREE, &m, NULL, -1, NULL);
	if (rc < 0 && rc != -ENOENT && libfam.state == LIBFAM_S_LIVE)
		goto out; /* famd keeps it; so do we */
	region_drop(region_find(addr));
	if (rc == -ECONNRESET || rc == -EPROTO)
		rc = 0; /* released with the session */
	if ((flags & FAM_S_ALLOC_SHARED) && libfam.state == LIBFAM_S_LIVE)
		mprotect((void *)addr, size, PROT_READ | PROT_WRITE);
out:
	libfam_unlock(cancel);
	return rc;
}

/* Tells whether ptr lies in an arena of this process; lock-free. */
bool
libfam_owns(const void *ptr)
{
	return arena_of((uintptr_t)ptr) != NULL;
}

/* Bytes reserved for the region starting at ptr, 0 if none. */
size_t
libfam_usable_size(const void *ptr)
{
	struct libfam_region *r;
	size_t size = 0;
	int cancel;

	if (!libfam_owns(ptr))
		return 0;
	cancel = libfam_lock();
	r = region_find((uintptr_t)ptr);
	if (r != NULL)
		size = r->size;
	libfam_unlock(cancel);
	return size;
}

/* Asks famd about the region holding ptr. */
static int
libfam_stat(const void *ptr, struct fam_stat *st)
{
	struct libfam_arena *a = arena_of((uintptr_t)ptr);
	struct fam_smsg m;
	int rc, cancel;

	if (a == NULL)
		return -EINVAL;
	memset(&m, 0, sizeof m);
	cancel = libfam_lock();
	if (!arena_served(a)) {
		rc = -ENOTCONN;
	} else {
		m.a = (uintptr_t)ptr;
		rc = session_call(FAM_S_STAT, &m, NULL, -1, NULL);
		if (rc == 0 && ((m.flags & ~FAM_S_ALLOC_ALL) != 0 ||
		    m.b == 0 || m.b % libfam.chunk != 0 || m.c > m.b ||
		    m.d > m.c)) {
			session_break(-EPROTO);
			rc = -EPROTO;
		}
	}
	libfam_unlock(cancel);
	if (rc < 0)
		return rc;
	/* st may be in a region: written without the lock. */
	memset(st, 0, sizeof *st);
	st->size = (size_t)m.b;
	st->resident = (size_t)m.c;
	st->dirty = (size_t)m.d;
	st->handle = m.a;
	st->flags = ((m.flags & FAM_S_ALLOC_FILE) ? FAM_STAT_FILE : 0) |
	    ((m.flags & FAM_S_ALLOC_SHARED) ? FAM_STAT_READONLY : 0);
	return 0;
}

/* Passes advice about the region holding ptr to famd. */
static int
libfam_advise(const void *ptr, int advice)
{
	struct libfam_arena *a = arena_of((uintptr_t)ptr);
	struct fam_smsg m;
	int rc, cancel;

	if (a == NULL || advice < FAM_ADVISE_NORMAL ||
	    advice > FAM_ADVISE_STATIC)
		return -EINVAL;
	memset(&m, 0, sizeof m);
	cancel = libfam_lock();
	if (!arena_served(a)) {
		rc = -ENOTCONN;
	} else {
		m.a = (uintptr_t)ptr;
		m.b = (uint64_t)advice;
		rc = session_call(FAM_S_ADVISE, &m, NULL, -1, NULL);
	}
	libfam_unlock(cancel);
	return rc;
}

/* ---- the public API (fam.h) ----------------------------------------- */

/* Zero-filled memory of at least size bytes, aligned to the chunk size. */
void *
fam_alloc(size_t size)
{
	void *p;
	int rc = libfam_alloc(size, 0, &p, NULL, NULL);

	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	return p;
}

/* Memory holding the file path, loaded on the memory node. */
void *
fam_alloc_file(const char *path, int mode, size_t *size)
{
	unsigned flags;
	void *p;
	int rc;

	if (path == NULL || size == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if (mode == FAM_FILE_SHARED)
		flags = FAM_S_ALLOC_FILE | FAM_S_ALLOC_SHARED;
	else if (mode == FAM_FILE_PRIVATE)
		flags = FAM_S_ALLOC_FILE;
	else {
		errno = EINVAL;
		return NULL;
	}
	rc = libfam_alloc_file(path, flags, &p, size);
	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	return p;
}

/* Releases memory from fam_alloc() or fam_alloc_file(). */
int
fam_free(void *ptr)
{
	int rc;

	if (ptr == NULL)
		return 0;
	rc = libfam_free(ptr);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}

/* Describes the region holding ptr. */
int
fam_stat(const void *ptr, struct fam_stat *st)
{
	int rc;

	if (st == NULL) {
		errno = EINVAL;
		return -1;
	}
	rc = libfam_stat(ptr, st);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}

/* Returns 1 if ptr lies in fabric-attached memory of this process. */
int
fam_owns(const void *ptr)
{
	return libfam_owns(ptr) ? 1 : 0;
}

/* Bytes usable from ptr, the start of a region; 0 if not one. */
size_t
fam_usable_size(const void *ptr)
{
	return libfam_usable_size(ptr);
}

/*
 * Tells famd how the region holding ptr is used. Visible even where the
 * rest is hidden: libfamshim.so exports it too (famshim.sym).
 */
__attribute__((visibility("default"))) int
fam_advise(const void *ptr, int advice)
{
	int rc = libfam_advise(ptr, advice);

	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}
