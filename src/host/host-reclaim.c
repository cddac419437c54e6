/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-reclaim.c - a program takes its session back after a restart of
 * famd (wire/session.h, "restart"): RECLAIM hands over its userfaultfd and
 * names the session restored from the state file (host-restart.c), one
 * REARENA per arena hands over its memfd; famd then finds which chunks are
 * resident and serves the arenas again.
 *
 * Owns: nothing of its own; moves a restored session's regions and arenas
 * into the program's new session (host_client.reclaim_left counts the
 * REARENAs still to come).
 * What a chunk is after a reclaim, from the arena's memfd (with install =
 * copy, a page is in the memfd only once UFFDIO_COPY put it in place):
 *   every page there    RESIDENT, and dirty: whether the program wrote it
 *                       is not known (its write-protect bits are the
 *                       program's page tables', which famd cannot read)
 *   some pages there    an install or a punch cut short: the pages there
 *                       are unwritten (installed write-protected), the
 *                       memory node holds the chunk; punched, ABSENT. With
 *                       fetch = adaptive, where faults read grains (not
 *                       a replicated or erasure-coded region, a fork's,
 *                       a file's last chunk), a partial chunk: its grains
 *                       wholly there RESIDENT (CH_PARTIAL), dirty, the
 *                       others punched
 *   none                ABSENT, read from the memory node (which reads a
 *                       chunk never written as zeros)
 * Locks: none; the control loop.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "host/host.h"
#include "host/host-session.h"
#include "host/host-uffd.h"

#ifndef F_SEAL_SHRINK
#define F_SEAL_SEAL   0x0001
#define F_SEAL_SHRINK 0x0002
#endif
#ifndef F_GET_SEALS
#define F_GET_SEALS 1034
#endif

#define RECLAIM_MAX_ARENAS 4096u /* libfam's arena table */

/* Returns the restored session named token, or NULL. */
static struct host_client *
restored_find(struct host *h, uint64_t token)
{
	for (struct host_client *w = h->clients; w != NULL; w = w->next)
		if (w->restored && !w->dead && token != 0 && w->token == token)
			return w;
	return NULL;
}

/* Moves restored session w's arenas and regions into cl, and frees w. */
static void
restored_move(struct host_client *cl, struct host_client *w)
{
	struct host *h = cl->h;
	struct host_client **pp;

	for (struct arena *ar = w->arenas; ar != NULL; ar = ar->next)
		ar->cl = cl;
	for (struct region *r = w->regions; r != NULL; r = r->next) {
		r->cl = cl;
		cl->refs++;
		w->refs--;
	}
	cl->arenas = w->arenas;
	cl->next_arena = w->next_arena;
	cl->regions = w->regions;
	cl->nregions = w->nregions;
	cl->bytes = w->bytes;
	w->arenas = NULL;
	w->regions = NULL;
	w->nregions = w->bytes = 0;
	w->dead = true;
	for (pp = &h->clients; *pp != NULL; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	host_client_put(w);
}

/* Chunk c of r is resident again, in frame fr; dirty (and writable) or not. */
static void
chunk_reclaimed(struct host *h, struct region *r, uint64_t c, int64_t fr,
    bool dirty)
{
	struct chunk *ch = &r->chunks[c];

	h->frames[fr].r = r;
	h->frames[fr].chunk = c;
	ch->state = CH_RESIDENT;
	ch->frame = (uint32_t)fr;
	ch->flags = CH_REMOTE | CH_REF;
	r->resident++;
	h->restart->chunks_resident++;
	if (dirty) {
		ch->flags |= CH_DIRTY | CH_UNPROT;
		r->dirty++;
		h->dirty++;
	}
}

/*
 * Chunk c of r is partly in its arena's memfd (fetch = adaptive): a
 * partial chunk of the famd before, whose grains in place may have been
 * written (they are the only copy). Its grains wholly there are taken back
 * as a partial chunk, dirty; a grain partly there (an install or a punch
 * cut short: what is there is the memory node's) is punched. 0, or -errno.
 */
static int
chunk_reclaim_partial(struct host *h, struct region *r, uint64_t c)
{
	struct chunk *ch = &r->chunks[c];
	uint64_t grain = (uint64_t)1 << h->grain_shift, mask = 0;
	unsigned per = (unsigned)(h->chunk >> h->grain_shift);
	off_t lo = (off_t)(r->off + (c << h->chunk_shift));
	int memfd = r->ar->memfd;
	int64_t fr;

	for (unsigned g = 0; g < per; g++) {
		off_t glo = lo + (off_t)(g * grain), ghi = glo + (off_t)grain;
		off_t d = lseek(memfd, glo, SEEK_DATA), e;

		if (d < 0 && errno != ENXIO)
			return -errno;
		if (d < 0 || d >= ghi)
			continue; /* nothing of it there */
		e = lseek(memfd, glo, SEEK_HOLE);
		if (e < 0)
			return -errno;
		if (d == glo && e >= ghi) {
			mask |= 1ull << g;
			continue;
		}
		if (fallocate(memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		    glo, (off_t)grain) < 0)
			return -errno;
	}
	h->restart->chunks_punched += mask == 0;
	if (mask == 0)
		return 0;
	fr = host_frame_take(h, (uint32_t)((unsigned)__builtin_popcountll(mask) *
	    (grain >> 12)));
	if (fr < 0)
		return -ENOSPC;
	chunk_reclaimed(h, r, c, fr, true);
	ch->present = mask;
	ch->flags |= CH_PARTIAL;
	h->restart->chunks_partial++;
	return 0;
}

/*
 * Tells whether chunk c of r, partly in the memfd, may be a partial chunk
 * (fetch = adaptive): only where a demand fetch reads grains
 * (host_grain_region(), and a whole chunk on the node: host_grain_start());
 * anywhere else (a shared file, a replicated or erasure-coded region, a
 * fork's copy or source, a file's last chunk) it is an install or a punch
 * cut short.
 */
static bool
reclaim_may_be_partial(const struct host *h, const struct region *r,
    uint64_t c)
{
	unsigned si;
	uint64_t soff;

	if ((r->flags & FAM_S_ALLOC_SHARED) || !host_grain_region(h, r))
		return false;
	soff = host_stripe_offset(h, r, c, &si);
	return host_stripe_len(h, &r->stripes[si], soff) == h->chunk;
}

/*
 * Finds the resident chunks of r from its arena's memfd (the table above):
 * gives each a frame, dirty; punches what an install cut short left.
 */
static int
region_reclaim(struct host *h, struct region *r)
{
	struct host_restart *rs = h->restart;
	int memfd = r->ar->memfd;
	uint64_t c;

	for (c = 0; c < r->nchunks; c++) {
		off_t lo = (off_t)(r->off + (c << h->chunk_shift));
		off_t hi = lo + (off_t)h->chunk, at = lo, held = 0;
		int64_t fr;

		while (at < hi) {
			off_t d = lseek(memfd, at, SEEK_DATA), e;

			if (d < 0 && errno == ENXIO)
				break;
			if (d < 0)
				return -errno;
			if (d >= hi)
				break;
			e = lseek(memfd, d, SEEK_HOLE);
			if (e < 0)
				return -errno;
			held += (e < hi ? e : hi) - d;
			at = e;
		}
		if (held == 0)
			continue;
		if (held < (off_t)h->chunk && reclaim_may_be_partial(h, r, c)) {
			int rc = chunk_reclaim_partial(h, r, c);

			if (rc < 0)
				return rc;
			continue;
		}
		if (held < (off_t)h->chunk) {
			host_chunks_punch(h, r, c, 1);
			rs->chunks_punched++;
			continue;
		}
		fr = host_frame_get(h);
		if (fr < 0)
			return -ENOSPC;
		/* A shared file's chunk stays write-protected: never dirty. */
		chunk_reclaimed(h, r, c, fr, !(r->flags & FAM_S_ALLOC_SHARED));
	}
	return 0;
}

/* Gives an arena that was not handed back its buffer frames again. */
static void
arena_unclaim(struct host *h, struct arena *ar)
{
	for (size_t i = 0; i < ar->nregions; i++)
		host_region_drop_chunks(h, ar->regions[i]);
	if (ar->local != NULL)
		munmap(ar->local, ar->size);
	if (ar->memfd >= 0)
		close(ar->memfd);
	ar->local = NULL;
	ar->memfd = -1;
}

/* Checks that memfd is an arena of len bytes as famd seals them. */
static int
memfd_check(int memfd, uint64_t len)
{
	struct stat st;
	int seals;

	if (fstat(memfd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != len)
		return -EINVAL;
	seals = fcntl(memfd, F_GET_SEALS);
	if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_SEAL)) !=
	    (F_SEAL_SHRINK | F_SEAL_SEAL))
		return -EINVAL;
	return 0;
}

/* Takes arena id back: its memfd, mapped at addr in the program. */
static int
arena_reclaim(struct host_client *cl, uint32_t id, uint64_t addr,
    uint64_t len, int memfd)
{
	struct host *h = cl->h;
	struct arena *ar;
	int rc;

	for (ar = cl->arenas; ar != NULL; ar = ar->next)
		if (ar->id == id)
			break;
	if (ar == NULL || ar->memfd >= 0)
		return -ENOENT;
	if (len != ar->size || fam_smsg_check_map(addr, len) != 0 ||
	    (ar->uaddr != 0 && ar->uaddr != addr) || memfd_check(memfd, len) < 0)
		return -EINVAL;
	ar->local = mmap(NULL, len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_NORESERVE, memfd, 0);
	if (ar->local == MAP_FAILED) {
		ar->local = NULL;
		return -errno;
	}
	host_numa_bind(h, ar->local, len);
	ar->memfd = memfd;
	/* The famd before may have poisoned pages: new regions punch first. */
	ar->poisoned = h->poison_ok;
	if (ar->uaddr == 0) {
		/* It died between the program's mapping and MAP. */
		rc = uffd_register(cl->uffd, addr, len, h->wp_ok, h->cont_ok);
		if (rc < 0)
			goto fail;
		ar->uaddr = addr;
	}
	for (size_t i = 0; i < ar->nregions; i++) {
		rc = region_reclaim(h, ar->regions[i]);
		if (rc < 0)
			goto fail;
	}
	return 0;
fail:
	log_rl(LOG_WARNING, "session pid %ld: cannot take arena %u back: %s",
	    (long)cl->pid, id, strerror(-rc));
	ar->memfd = -1; /* the caller closes it */
	arena_unclaim(h, ar);
	return rc;
}

/*
 * Every arena came (or not): frees what was not handed back, has the
 * fault service read the userfaultfd, and wakes the threads that waited
 * in faults through the restart (their faults come again).
 */
static void
reclaim_finish(struct host_client *cl)
{
	struct host *h = cl->h;
	struct arena **pp = &cl->arenas;
	uint64_t lost = 0, resident = 0;

	while (*pp != NULL) {
		struct arena *ar = *pp;

		if (ar->memfd >= 0) {
			pp = &ar->next;
			continue;
		}
		for (struct region *r = cl->regions, *next; r != NULL;
		    r = next) {
			next = r->next;
			if (r->ar == ar) {
				host_region_free(r);
				lost++;
			}
		}
		/* host_region_free() may have freed an arena never mapped. */
		for (pp = &cl->arenas; *pp != NULL && *pp != ar;
		    pp = &(*pp)->next)
			;
		if (*pp == ar) {
			*pp = ar->next;
			arena_free(h, ar);
		}
	}
	if (lost > 0)
		log_warn("session pid %ld: %llu regions were in arenas the "
		    "program did not hand back: freed", (long)cl->pid,
		    (unsigned long long)lost);
	cl->uffd_ev = event_new(h->base, cl->uffd, EV_READ | EV_PERSIST,
	    session_uffd_cb, cl);
	if (cl->uffd_ev == NULL || event_add(cl->uffd_ev, NULL) < 0)
		log_warn("session pid %ld: cannot watch its userfaultfd",
		    (long)cl->pid);
	for (struct arena *ar = cl->arenas; ar != NULL; ar = ar->next)
		if (ar->uaddr != 0)
			uffd_wake(cl->uffd, ar->uaddr, ar->size);
	for (struct region *r = cl->regions; r != NULL; r = r->next)
		resident += r->resident;
	h->restart->reclaimed++;
	h->restart->dirty = true;
	log_notice("session pid %ld taken back after a restart of famd: %llu "
	    "regions, %llu bytes, %llu chunks resident (taken as dirty)",
	    (long)cl->pid, (unsigned long long)cl->nregions,
	    (unsigned long long)cl->bytes, (unsigned long long)resident);
	host_evict_background(h);
	host_fetch_kick(h);
}

/* RECLAIM: a program takes back the session it had with the famd before. */
int
session_reclaim(struct host_client *cl)
{
	struct host *h = cl->h;
	struct host_client *w = restored_find(h, cl->req.a);
	int fd = cl->pending_fd;

	cl->pending_fd = -1;
	if (fd < 0)
		return session_fail(cl, EBADF);
	if (w == NULL || w->pid != cl->pid || w->uid != cl->uid ||
	    cl->req.b > RECLAIM_MAX_ARENAS || fd_set_nonblock(fd) < 0) {
		close(fd);
		log_rl(LOG_WARNING, "session pid %ld: asked to take back a "
		    "session of the famd before this one, %s", (long)cl->pid,
		    w == NULL ? "which this famd does not know (no restart "
		    "state, or it was refused or released): its memory is "
		    "lost" : cl->req.b > RECLAIM_MAX_ARENAS ? "with too many "
		    "arenas" : "which was another process's");
		return session_fail(cl, w == NULL ? ENOENT :
		    cl->req.b > RECLAIM_MAX_ARENAS ? EINVAL : EPERM);
	}
	cl->uffd = fd;
	restored_move(cl, w);
	cl->reclaim_left = (uint32_t)cl->req.b;
	if (cl->reclaim_left == 0)
		reclaim_finish(cl);
	return session_reply(cl, 0, 0, 0, 0, 0, 0, -1);
}

/* REARENA: one arena of the session being taken back. */
int
session_rearena(struct host_client *cl)
{
	int fd = cl->pending_fd, rc;

	cl->pending_fd = -1;
	if (cl->reclaim_left == 0) {
		if (fd >= 0)
			close(fd);
		return session_fail(cl, EINVAL);
	}
	cl->reclaim_left--;
	rc = fd < 0 ? -EBADF : cl->req.a > UINT32_MAX ? -ENOENT :
	    arena_reclaim(cl, (uint32_t)cl->req.a, cl->req.b, cl->req.c, fd);
	if (rc < 0 && fd >= 0)
		close(fd);
	if (cl->reclaim_left == 0)
		reclaim_finish(cl);
	return rc < 0 ? session_fail(cl, -rc) :
	    session_reply(cl, 0, 0, 0, 0, 0, 0, -1);
}
