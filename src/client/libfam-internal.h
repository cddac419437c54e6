/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libfam-internal.h - libfam's private header: its entry points for
 * libfamshim, which compiles libfam in (it must work when preloaded alone)
 * and hides them; then what libfam-api.c, libfam-session.c,
 * libfam-fork.c, libfam-arena.c and libfam-restart.c share.
 *
 * Every function here may be called from inside malloc: none allocates, none
 * uses stdio. All return 0 or -errno unless said otherwise.
 *
 * Lock order: libfam.lock is the only lock. It is held across each round
 * trip and each change of the tables, and never while touching the memory of
 * a region: a fault there may wait for the watchdog, which takes the lock.
 * arena_of() reads the arena table without it: an entry is filled before
 * its slot is published (release store of narenas) and never moves.
 */
#ifndef LIBFAM_INTERNAL_H
#define LIBFAM_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Allocates a zero-filled region of at least size bytes whose address is a
 * multiple of align (0, or a power of two); flags: 0 or FAM_S_ALLOC_SPARSE. *usable receives the bytes
 * reserved. On failure, *quiet (when not NULL) tells whether there is
 * nothing more to report: no session could be had (reported on stderr
 * already), or the request was one famd could never meet.
 */
int libfam_alloc(size_t size, size_t align, unsigned flags, void **ptr,
    size_t *usable, bool *quiet);

/*
 * Allocates a region holding the file path (FAM_S_ALLOC_FILE, and maybe
 * FAM_S_ALLOC_SHARED in flags); *len receives the file's length.
 */
int libfam_alloc_file(const char *path, unsigned flags, void **ptr,
    size_t *len);

/*
 * Releases the region starting at ptr. Returns 1 (and does nothing) for
 * memory inherited from the parent across fork(), -EINVAL for an address
 * that does not start a region.
 */
int libfam_free(void *ptr);

/*
 * Makes [addr, addr + len) of fabric-attached memory read back as zeros:
 * the whole chunks are discarded by famd (out of the buffer, forgotten on
 * the memory node), the rest written with zeros. Touches the memory: call
 * it without the lock.
 */
int libfam_discard(void *addr, size_t len);

/*
 * An access hint (FAM_ADVISE_RANDOM or FAM_ADVISE_NORMAL) for the regions
 * that [addr, addr + len) covers at least half of; famd keeps one advice
 * per region. Best effort: a region famd cannot be told about is skipped.
 */
void libfam_hint(void *addr, size_t len, int advice);

/* Tells whether ptr lies in an arena of this process; lock-free. */
bool libfam_owns(const void *ptr);

/* Bytes reserved for the region starting at ptr, 0 if none. */
size_t libfam_usable_size(const void *ptr);

/*
 * Names the messages' author ("libfamd-client" by default) and what becomes
 * of allocations when famd cannot be reached (appended to that warning).
 */
void libfam_configure(const char *ident, const char *fallback);

/* Writes "ident: " and the strings up to NULL as one line on stderr. */
void libfam_say(const char *first, ...) __attribute__((sentinel));

/* Formats v in decimal into buf (at least 21 bytes); returns buf. */
char *libfam_fmt_u64(char *buf, uint64_t v);

/* Formats err as "description (ENAME)" into buf of len bytes; returns buf. */
const char *libfam_fmt_errno(char *buf, size_t len, int err);

/* ---- shared among libfam's files: hidden from every program ---------- */

struct fam_smsg;

#pragma GCC visibility push(hidden)

#define LIBFAM_MAX_ARENAS 4096

enum libfam_state {
	LIBFAM_S_NONE,
	LIBFAM_S_LIVE,
	LIBFAM_S_BROKEN,
	/*
	 * The program closed our socket (closefrom(3) before an exec, say):
	 * no session any more, and none opened again; famd goes on serving
	 * the arenas until the process exits or execs.
	 */
	LIBFAM_S_CLOSED,
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
	int memfd;        /* our copy of famd's memfd, for a restart of famd:
	                   * valid while fd_is(memfd, memfd_id) */
	uint64_t memfd_id[2];
};

struct libfam_region {
	uintptr_t addr;   /* first byte; 0 marks a free slot */
	size_t size;      /* bytes reserved, a multiple of the chunk size */
	uint64_t handle;  /* famd's name for it */
	uint32_t arena;   /* slot in the arena table */
	uint32_t flags;   /* FAM_S_ALLOC_* */
};

/* The session and the tables' bookkeeping (libfam-session.c). */
struct libfam {
	pthread_mutex_t lock;
	enum libfam_state state;
	uint64_t gen;       /* sessions opened so far; names the current one */
	int sock;           /* session socket, -1 without a session */
	int uffd;           /* our copy of the userfaultfd, -1 without */
	int lost_fd;        /* an empty, sealed memfd: lost arenas map it */
	uint64_t sock_id[2]; /* st_dev and st_ino of sock: still ours? */
	uint64_t uffd_id[2]; /* ... and of uffd */
	uint64_t seq;       /* last request number sent */
	size_t chunk;       /* famd's chunk size (bytes, a power of two) */
	size_t arena_size;  /* famd's usual arena length */
	int lost_why;       /* 0, or the -errno that broke the session */
	uint64_t retry_ns;  /* no new connection attempt before this time */
	int last_err;       /* -errno of the last failed attempt */
	bool reported;      /* the current outage has been reported */
	const char *ident;
	const char *fallback;
	bool fork_off;      /* FAM_FORK=0: children do not get a copy */
	uint64_t fork_token; /* between fork's handlers: famd's copy, or 0 */
	int fork_err;       /* ... or why there is none (-errno) */
	int fork_cancel;    /* ... and the cancel state to restore */
	uint8_t forking;    /* 1 from atfork_prepare, 2 once the child's
	                     * copies are its own, 0 after the last handler */
	uint64_t token;     /* the session's name after a restart of famd */
	unsigned restart_wait_ms; /* FAM_RESTART_WAIT: how long to wait for
	                           * famd to come back (0: not at all) */

	struct libfam_region *regions; /* open addressing, linear probing */
	size_t nregions;
	size_t region_cap;  /* slots: a power of two, or 0 */
};

extern struct libfam libfam;

/* The arena table (libfam-arena.c). */
extern struct libfam_arena arenas[LIBFAM_MAX_ARENAS];
extern _Atomic size_t narenas;

/* libfam-session.c */

/* Closes fd if it is one. */
void close_fd(int fd);

/* Takes the lock, cancellation off; returns the state for libfam_unlock(). */
int libfam_lock(void);

/* Releases the lock and restores the cancel state. */
void libfam_unlock(int cancel);

/* Once per process: the fork handlers (libfam-fork.c). */
void libfam_init(void);

/*
 * Registers libfam's child handler, once; libfamshim's __register_atfork
 * calls it before it registers anyone's, so that it runs first.
 */
void libfam_atfork_first(void);

/* Makes sure there is a live session; *quiet tells a failure to get one. */
int session_get(bool *quiet);

/*
 * Starts the session's watchdog thread now, before any session: for a
 * program whose own malloc may map memory holding its lock (the shim),
 * and registers child, which calls libfam_watchdog_spare_child(), as a
 * fork handler: a forked child's spare.
 */
void libfam_watchdog_spare(void (*child)(void));
void libfam_watchdog_spare_child(void);

/*
 * In a forked child: adopts the parent's copies now if libfam's first
 * child handler has not (its registration failed); for handlers that
 * need them.
 */
void libfam_fork_child_pending(void);

/*
 * One round trip: m as a request of type (with data, and fd when >= 0);
 * the reply in m, its descriptor in *rfd. Returns 0, famd's error as -errno,
 * or -ECONNRESET or -EPROTO once the session is broken.
 */
int session_call(uint16_t type, struct fam_smsg *m, const void *data, int fd,
    int *rfd);

/* Ends a live session after a failed round trip (why: -errno). */
void session_break(int why);

/* The session socket's path (FAM_SOCKET), read once (see there). */
const char *session_path(void);

/* Opens a session (libfam.lock held), and with watchdog, its watch. */
int session_open(bool watchdog);

/* In a forked child, before anything else: the parent's watch is not ours. */
void watchdog_fork_child(void);

/* In a forked child, after its allocator's handlers: watch session gen. */
int watchdog_fork_watch(uint64_t gen);

/*
 * Connects to the host famd and says HELLO (wire/session.h, step 1):
 * libfam.sock, chunk, arena_size and token are set; *devfd gets
 * /dev/userfaultfd when famd offers it. Reports a failure once per outage
 * unless quiet.
 */
int session_connect(bool quiet, int *devfd);

/* Moves fd to a high number (close-on-exec); returns the one to use. */
int fd_high(int fd);

/* Records what file fd is (id[0] device, id[1] inode). */
void fd_id_take(int fd, uint64_t id[2]);

/* Tells whether fd is still the file fd_id_take() saw. */
bool fd_is(int fd, const uint64_t id[2]);

/* Returns CLOCK_MONOTONIC in nanoseconds. */
uint64_t libfam_now(void);

/* libfam-restart.c */

/* Keeps memfd (taken over) as arena a's copy of famd's memfd. */
void arena_keep_memfd(struct libfam_arena *a, int memfd);

/* Closes arena a's copy of its memfd, if it still has it. */
void arena_drop_memfd(struct libfam_arena *a);

/*
 * The session socket hung up: waits (FAM_RESTART_WAIT) for a host famd to
 * take the session back (RECLAIM). Returns 0 once the session is live
 * again, else -errno (the caller declares it lost). Called with the lock.
 */
int session_reclaim_wait(void);

/* libfam-arena.c */

/*
 * The kernel's mmap(2), munmap(2) and madvise(2) themselves: libfamshim's
 * see fabric-attached memory, and libfam's own mappings must not.
 */
void *libfam_mmap(void *addr, size_t len, int prot, int flags, int fd,
    long off);
int libfam_munmap(void *addr, size_t len);
int libfam_madvise(void *addr, size_t len, int advice);

/* The arena holding addr, or NULL; lock-free. */
struct libfam_arena *arena_of(uintptr_t addr);

/* The live arena famd calls id in the current session, or NULL. */
struct libfam_arena *arena_by_id(uint64_t id);

/* Tells whether famd serves arena a now: live, of the live session. */
bool arena_served(const struct libfam_arena *a);

/* Sets (on) or clears the bits of chunks [first, first + count). */
void arena_mark(struct libfam_arena *a, size_t first, size_t count, bool on);

/* Tells whether any chunk of [first, first + count) is in a region. */
bool arena_busy(const struct libfam_arena *a, size_t first, size_t count);

/* Maps memfd (len bytes) aligned as wire/session.h says; *basep its base. */
int arena_map(int memfd, size_t len, uintptr_t *basep);

/* Prepares the next free slot for an arena of len bytes. */
int arena_prepare(size_t len, struct libfam_arena **ap);

/* Frees what arena_prepare() got for a slot left unused. */
void arena_unprepare(struct libfam_arena *a);

/* Publishes the prepared arena a, mapped at base. */
void arena_publish(struct libfam_arena *a, uint64_t id, uintptr_t base,
    size_t len);

/* Maps an empty file over a live arena: every access raises SIGBUS. */
int arena_replace(struct libfam_arena *a);

/* The region starting at addr, or NULL. */
struct libfam_region *region_find(uintptr_t addr);

/* Adds r, growing the table (kept at most half full). */
int region_add(const struct libfam_region *r);

/* Removes the region in slot r. */
void region_del(struct libfam_region *r);

/* Forgets region r: its chunks become free in its arena. */
void region_drop(struct libfam_region *r);

#pragma GCC visibility pop

#endif /* LIBFAM_INTERNAL_H */
