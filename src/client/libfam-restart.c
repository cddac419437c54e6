/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libfam-restart.c - outliving a restart of the host famd (wire/session.h,
 * "restart"): the program keeps a copy of each arena's memfd beside its
 * copy of the userfaultfd, and when the session socket hangs up, waits up
 * to FAM_RESTART_WAIT seconds (default 30) for a host famd to take the
 * session back. Meanwhile its threads that fault on fabric-attached memory
 * wait in the kernel (the userfaultfd is still open: a fault blocks, it
 * never reads zeros), and allocations wait for the lock.
 *
 * Owns: struct libfam_arena.memfd, the waiting loop.
 * Locks: called with libfam.lock held (the watchdog's).
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "famd-client/famd-client.h"
#include "wire/session.h"
#include "client/libfam-internal.h"

#define RECLAIM_RETRY_NS 100000000ull /* between attempts: 100 ms */

/* Keeps memfd (taken over) as arena a's copy of famd's memfd. */
void
arena_keep_memfd(struct libfam_arena *a, int memfd)
{
	a->memfd = fd_high(memfd);
	fd_id_take(a->memfd, a->memfd_id);
}

/* Closes arena a's copy of its memfd, if it still has it. */
void
arena_drop_memfd(struct libfam_arena *a)
{
	if ((a->memfd_id[0] != 0 || a->memfd_id[1] != 0) &&
	    fd_is(a->memfd, a->memfd_id))
		close(a->memfd);
	a->memfd = -1;
	a->memfd_id[0] = a->memfd_id[1] = 0;
}

/* Tells whether arena a is one the current session serves (or served). */
static bool
arena_ours(const struct libfam_arena *a)
{
	return atomic_load(&a->state) == LIBFAM_A_LIVE &&
	    a->session == libfam.gen;
}

/*
 * Hands arena a back (REARENA); an arena famd refuses is mapped onto an
 * empty file (SIGBUS, never wrong data). Returns -ECONNRESET or -EPROTO
 * when the session broke, else 0 (*lost counts the refused).
 */
static int
reclaim_arena(struct libfam_arena *a, unsigned *lost)
{
	struct fam_smsg m;
	int rc, fd = fd_is(a->memfd, a->memfd_id) ? a->memfd : -1;

	memset(&m, 0, sizeof m);
	m.a = a->id;
	m.b = a->base;
	m.c = a->len;
	rc = session_call(FAM_S_REARENA, &m, NULL, fd, NULL);
	if (rc == -ECONNRESET || rc == -EPROTO)
		return rc;
	if (rc < 0) {
		arena_replace(a);
		(*lost)++;
	}
	return 0;
}

/*
 * One attempt: a new session (HELLO) that takes the old one back
 * (RECLAIM, then REARENA per arena). Returns 0, or -errno: -ESTALE means
 * a famd is back but does not have our session (no use trying again).
 */
static int
reclaim_once(unsigned *lost)
{
	uint64_t token = libfam.token;
	size_t chunk = libfam.chunk, n = atomic_load(&narenas), i, count = 0;
	struct fam_smsg m;
	int rc, devfd = -1;

	rc = session_connect(true, &devfd);
	close_fd(devfd);
	if (rc < 0) {
		libfam.token = token;
		return rc;
	}
	if (libfam.chunk != chunk) {
		/* Another chunk size: our arenas' layout means nothing to it. */
		libfam.chunk = chunk;
		rc = -ESTALE;
		goto fail;
	}
	for (i = 0; i < n; i++)
		count += arena_ours(&arenas[i]);
	memset(&m, 0, sizeof m);
	m.a = token;
	m.b = count;
	rc = session_call(FAM_S_RECLAIM, &m, NULL, libfam.uffd, NULL);
	if (rc == -ENOENT || rc == -EPERM || rc == -EINVAL)
		rc = -ESTALE;
	for (i = 0; rc == 0 && i < n; i++)
		if (arena_ours(&arenas[i]))
			rc = reclaim_arena(&arenas[i], lost);
	if (rc == 0)
		return 0;
fail:
	if (fd_is(libfam.sock, libfam.sock_id))
		close_fd(libfam.sock);
	libfam.sock = -1;
	libfam.token = token;
	return rc;
}

/* Waits for a host famd to take the session back (FAM_RESTART_WAIT). */
int
session_reclaim_wait(void)
{
	uint64_t start = libfam_now(), waited;
	uint64_t limit = (uint64_t)libfam.restart_wait_ms * 1000000u;
	struct timespec ts = { .tv_nsec = (long)RECLAIM_RETRY_NS };
	char nbuf[21], ebuf[128];
	unsigned lost = 0;
	int rc;

	if (limit == 0 || libfam.token == 0 ||
	    !fd_is(libfam.uffd, libfam.uffd_id))
		return -ENOTSUP;
	libfam.state = LIBFAM_S_BROKEN;
	if (fd_is(libfam.sock, libfam.sock_id))
		close_fd(libfam.sock);
	libfam.sock = -1;
	libfam_say("the host famd went away; waiting ",
	    libfam_fmt_u64(nbuf, libfam.restart_wait_ms / 1000),
	    " s for it to come back (threads touching fabric-attached memory "
	    "wait meanwhile)", NULL);
	for (;;) {
		rc = reclaim_once(&lost);
		waited = libfam_now() - start;
		if (rc == 0 || rc == -ESTALE || waited >= limit)
			break;
		nanosleep(&ts, NULL);
	}
	if (rc < 0) {
		libfam_say("no host famd took this program's fabric-attached "
		    "memory back within ", libfam_fmt_u64(nbuf,
		    waited / 1000000000u), " s: ", rc == -ESTALE ?
		    "it does not know this program's session" :
		    libfam_fmt_errno(ebuf, sizeof ebuf, -rc), NULL);
		return rc;
	}
	libfam.state = LIBFAM_S_LIVE;
	libfam.lost_why = 0;
	libfam.reported = false;
	libfam_say("the host famd came back after ", libfam_fmt_u64(nbuf,
	    waited / 1000000u), " ms: this program's fabric-attached memory "
	    "is served again", NULL);
	if (lost > 0)
		libfam_say("the host famd could not take back ",
		    libfam_fmt_u64(nbuf, lost), lost == 1 ? " arena" :
		    " arenas", "; touching it raises SIGBUS", NULL);
	return 0;
}
