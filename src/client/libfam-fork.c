/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libfam-fork.c - fork() and the program's fabric-attached memory
 * (doc/fork.md): the parent has famd copy its regions, the child adopts
 * the copies with a session of its own, at the same addresses, before any
 * other child handler runs, then has that session watched.
 *
 * Owns: the fork handlers and libfam.fork_*, libfam.forking (under
 * libfam.lock from atfork_prepare until the parent's or child's handlers).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "famd-client/famd-client.h"
#include "wire/session.h"
#include "client/libfam-internal.h"

/*
 * Before fork(): no round trip or table change may be half done; famd
 * copies our regions for the child (FAM_S_FORK) unless FAM_FORK=0.
 */
static void
atfork_prepare(void)
{
	struct fam_smsg m;
	size_t n = atomic_load(&narenas), i;
	bool any = false;
	int rc;

	libfam.fork_cancel = libfam_lock();
	libfam.forking = 1;
	(void)session_path(); /* not in the child: see there */
	libfam.fork_token = 0;
	libfam.fork_err = 0;
	for (i = 0; i < n; i++)
		any |= arena_served(&arenas[i]);
	if (libfam.fork_off || !any)
		return;
	memset(&m, 0, sizeof m);
	rc = session_call(FAM_S_FORK, &m, NULL, -1, NULL);
	if (rc == 0 && m.a == 0)
		rc = -EPROTO;
	if (rc == 0)
		libfam.fork_token = m.a;
	else
		libfam.fork_err = rc;
}

/* After fork(), in the parent. */
static void
atfork_parent(void)
{
	libfam.forking = 0;
	libfam.fork_token = 0;
	libfam_unlock(libfam.fork_cancel);
}

/*
 * The child's copy of arena a (FAM_S_ADOPT): maps it where the parent had
 * it and has famd serve it.
 */
static int
fork_adopt(struct libfam_arena *a, uint64_t token)
{
	struct fam_smsg m;
	int rc, memfd = -1;
	void *p;

	memset(&m, 0, sizeof m);
	m.a = token;
	m.b = a->id;
	rc = session_call(FAM_S_ADOPT, &m, NULL, -1, &memfd);
	if (rc < 0)
		return rc;
	if (memfd < 0 || m.b != a->base || m.c != a->len || m.a == 0) {
		close_fd(memfd);
		session_break(-EPROTO);
		return -EPROTO;
	}
	p = libfam_mmap((void *)a->base, a->len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_FIXED_NOREPLACE | MAP_NORESERVE, memfd, 0);
	rc = p == MAP_FAILED ? -errno : 0;
	if (rc == 0 && p != (void *)a->base) {
		libfam_munmap(p, a->len); /* a kernel without MAP_FIXED_NOREPLACE */
		rc = -EEXIST;
	}
	if (rc == 0 && libfam_madvise(p, a->len, MADV_DONTFORK) < 0)
		rc = -errno;
	if (rc == 0) {
		uint64_t id = m.a;

		memset(&m, 0, sizeof m);
		m.a = id;
		m.b = a->base;
		rc = session_call(FAM_S_MAP, &m, NULL, -1, NULL);
		if (rc == 0) {
			a->id = id;
			a->session = libfam.gen;
			arena_keep_memfd(a, memfd);
			return 0;
		}
	}
	close(memfd);
	if (p != MAP_FAILED && p == (void *)a->base)
		libfam_munmap(p, a->len);
	return rc;
}

/*
 * Without a copy (FAM_FORK=0): the parent's arenas are reserved
 * PROT_NONE, so that nothing else lands there and a touch raises SIGSEGV.
 */
static void
atfork_child_nocopy(size_t n)
{
	void *p;

	for (size_t i = 0; i < n; i++) {
		struct libfam_arena *a = &arenas[i];

		if (atomic_load(&a->state) == LIBFAM_A_LIVE) {
			p = libfam_mmap((void *)a->base, a->len, PROT_NONE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
			    MAP_FIXED_NOREPLACE, -1, 0);
			if (p != MAP_FAILED && p != (void *)a->base)
				libfam_munmap(p, a->len);
		}
		atomic_store(&a->state, LIBFAM_A_INHERITED);
	}
	if (libfam.regions != NULL)
		libfam_munmap(libfam.regions,
		    libfam.region_cap * sizeof *libfam.regions);
	libfam.regions = NULL;
	libfam.region_cap = 0;
	libfam.nregions = 0;
}

/*
 * After fork(), in the child, before any other child handler (see
 * libfam_atfork_first): the parent's session is not ours. With famd's
 * copy, a session of our own adopts it, arena by arena, at the same
 * addresses; an arena that cannot be had is mapped so that a touch raises
 * SIGBUS (never wrong data). The program's allocator has not had its own
 * child handler yet, and may hold its locks: nothing here may allocate.
 * The watch of the new session starts in atfork_child_watch.
 */
static void
atfork_child(void)
{
	size_t n = atomic_load(&narenas), i, lost = 0;
	pthread_mutex_t init = PTHREAD_MUTEX_INITIALIZER;
	uint64_t token = libfam.fork_token, parent_gen = libfam.gen;
	int rc = libfam.fork_err, err = 0;
	char ebuf[128], nbuf[21];

	if (libfam.forking != 1)
		return; /* libfam's prepare has not run: nothing of it here */
	libfam.forking = 2;
	watchdog_fork_child();
	memcpy(&libfam.lock, &init, sizeof init);
	/* Only ours: the parent may have closed them, and reused the numbers. */
	if (fd_is(libfam.sock, libfam.sock_id))
		close_fd(libfam.sock);
	if (fd_is(libfam.uffd, libfam.uffd_id))
		close_fd(libfam.uffd);
	libfam.sock = -1;
	libfam.uffd = -1;
	libfam.state = LIBFAM_S_NONE;
	libfam.lost_why = 0;
	libfam.token = 0;
	for (i = 0; i < n; i++)
		arena_drop_memfd(&arenas[i]); /* the parent's arenas' */
	libfam.gen++;
	libfam.fork_token = 0;
	libfam.fork_err = 0;
	if (token == 0 && rc == 0) {
		atfork_child_nocopy(n);
		return;
	}
	libfam.retry_ns = 0; /* the parent's last failure is not ours */
	if (rc == 0)
		rc = session_open(false);
	for (i = 0; i < n; i++) {
		struct libfam_arena *a = &arenas[i];

		if (atomic_load(&a->state) != LIBFAM_A_LIVE ||
		    a->session != parent_gen)
			continue;
		if (rc == 0 && libfam.state == LIBFAM_S_LIVE &&
		    (err = fork_adopt(a, token)) == 0)
			continue;
		if (err == 0)
			err = rc;
		arena_replace(a);
		lost++;
	}
	if (lost > 0)
		libfam_say("fork: the parent's fabric-attached memory could "
		    "not be copied for this child (",
		    libfam_fmt_u64(nbuf, lost), lost == 1 ? " arena): " :
		    " arenas): ", libfam_fmt_errno(ebuf, sizeof ebuf, -err),
		    "; touching it raises SIGBUS", NULL);
}

/*
 * After fork(), in the child, later: the watch of the child's session.
 * pthread_create() calls the program's calloc(): where it has its own,
 * the spare the child starts after its allocator's handler takes it.
 */
static void
atfork_child_watch(void)
{
	char ebuf[128];
	int rc;

	libfam_fork_child_pending();
	if (libfam.forking != 2)
		return;
	libfam.forking = 0;
	if (libfam.state == LIBFAM_S_LIVE &&
	    (rc = watchdog_fork_watch(libfam.gen)) < 0)
		libfam_say("fork: cannot start the watchdog thread (",
		    libfam_fmt_errno(ebuf, sizeof ebuf, -rc), "): this child "
		    "will not wait for a restarted famd", NULL);
	pthread_setcancelstate(libfam.fork_cancel, NULL);
}

/*
 * Registers atfork_child ahead of every other child handler, once (the
 * shim's __register_atfork calls it first): an allocator's child handler
 * may touch what it keeps in FAM. The call made while registering
 * (through the shim again) returns at once.
 */
static __thread volatile bool registering /* read again from inside */
    __attribute__((tls_model("initial-exec")));

static void
atfork_first_once(void)
{
	/* a child forked meanwhile runs this again: once is enough */
	static bool registered;

	if (registered)
		return;
	registered = true;
	registering = true;
	pthread_atfork(NULL, NULL, atfork_child);
	registering = false;
}

/* (libfam-internal.h) */
void
libfam_fork_child_pending(void)
{
	if (libfam.forking == 1)
		atfork_child(); /* not registered first: pthread_atfork failed */
}

void
libfam_atfork_first(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	if (!registering)
		pthread_once(&once, atfork_first_once);
}

/* Once per process: the fork handlers. */
void
libfam_init(void)
{
	const char *e = secure_getenv("FAM_FORK");

	libfam.fork_off = e != NULL && strcmp(e, "0") == 0;
	e = secure_getenv("FAM_RESTART_WAIT");
	libfam.restart_wait_ms = 30000;
	if (e != NULL && *e != '\0') {
		char *end;
		unsigned long v = strtoul(e, &end, 10);

		if (*end == '\0' && v <= 3600)
			libfam.restart_wait_ms = (unsigned)v * 1000u;
	}
	libfam_atfork_first();
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child_watch);
}
