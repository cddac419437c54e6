/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu-cache-static.c - the static cache: chosen regions (static_regions by
 * name, or a program's fam_advise(FAM_ADVISE_STATIC) passed on by its host
 * as REGION_ADVISE) copied whole into the dpu's memory, a piece at a time
 * off the critical path, and every read of them served here once the
 * pieces it touches are loaded.
 *
 * Owns: struct dpu_static, a region's copy (hung on its struct
 * dpu_mregion, which it lives as long as).
 * Piece states (enum dpu_piece_state, in dpu.h): EMPTY -> LOADING ->
 * LOADED; LOADING -> STALE when a write lands meanwhile (its load's data
 * is not used), then EMPTY again, and loaded by the next pass over the
 * pieces (a pass that loaded something starts the next at once; one
 * that loaded nothing, up to STATIC_EMPTY_PASSES in a row).
 * A region larger than the room left in static_size gets a partial copy:
 * every piece SKIP, its reads counted per piece until they number as
 * many as its pieces, then the most read pieces that fit become EMPTY
 * (the others stay SKIP: their reads are forwarded).
 * Locks: none; piece states and counts are atomics.
 *
 * Loads are requests of the back (DR_LOAD): this file makes them and its
 * caller hands them on (a list it fills, or the next load it returns);
 * each completion makes the next.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dpu/dpu-cache.h"

#define STATIC_RETRY_NS (1000ull * 1000000u) /* after a failed load */
#define STATIC_EMPTY_PASSES 3 /* passes in a row that may load nothing */

/* Claims the next piece to load and makes its load; NULL when none. */
static struct dpu_req *
static_load_next(struct dpu *dpu, struct dpu_mregion *m,
    struct dpu_static *st)
{
	struct dpu_req *q;

	for (;;) {
		uint64_t p = atomic_fetch_add(&st->next, 1);
		uint8_t empty = DS_EMPTY;

		if (p >= st->npieces)
			return NULL;
		if (!atomic_compare_exchange_strong(&st->state[p], &empty,
		    DS_LOADING))
			continue;
		q = calloc(1, sizeof *q);
		if (q == NULL) {
			atomic_store(&st->state[p], DS_EMPTY);
			return NULL;
		}
		q->kind = DR_LOAD;
		q->dpu = dpu;
		q->m = m;
		atomic_fetch_add(&m->refs, 1);
		q->off = p * DPU_STATIC_PIECE;
		q->len = (uint32_t)(st->size - q->off < DPU_STATIC_PIECE ?
		    st->size - q->off : DPU_STATIC_PIECE);
		q->buf = st->mem + q->off;
		q->flags = FAM_F_BACKGROUND;
		q->start_ns = mono_ns();
		atomic_fetch_add(&st->loads_out, 1);
		return q;
	}
}

/* Makes up to DPU_STATIC_LOADS loads of a copy, onto loads. Front. */
static void
static_fill(struct dpu *dpu, struct dpu_mregion *m, struct dpu_static *st,
    struct dpu_reqq *loads)
{
	for (unsigned i = atomic_load(&st->loads_out); i < DPU_STATIC_LOADS;
	    i++) {
		struct dpu_req *q = static_load_next(dpu, m, st);

		if (q == NULL)
			break;
		TAILQ_INSERT_TAIL(loads, q, link);
	}
}

/* Frees what a static copy holds (its mapping and tables). */
static void
static_destroy(struct dpu_static *st)
{
	if (st->mem != NULL && st->mem != MAP_FAILED)
		munmap(st->mem, st->size);
	free(st->reads);
	free(st->state);
	free(st);
}

/*
 * Makes a static copy of m and its first loads (onto loads): whole when
 * it fits in what is left of static_size, else partial (pieces chosen by
 * their reads, later) when a piece fits. Front.
 */
static int
static_start(struct dpu *dpu, struct dpu_mregion *m, const char *why,
    struct dpu_reqq *loads)
{
	struct dpu_static *st;
	uint64_t size = m->remote.size, used = atomic_load(&dpu->static_bytes);
	uint64_t room = used < dpu->static_size ? dpu->static_size - used : 0;
	char sz[32], rs[32];

	if (atomic_load(&m->st) != NULL)
		return 0;
	if (size > room && room < DPU_STATIC_PIECE) {
		DPU_INC(dpu, static_rejected, 1);
		log_info("dpu: region %" PRIu32 " on %s (%s): not cached: "
		    "%s would pass static_size", m->remote.region, m->node->addr,
		    why, fmt_bytes(sz, sizeof sz, size));
		return -ENOSPC;
	}
	st = calloc(1, sizeof *st);
	if (st == NULL)
		return -ENOMEM;
	st->size = size;
	st->npieces = (size + DPU_STATIC_PIECE - 1) / DPU_STATIC_PIECE;
	st->want = st->npieces;
	st->charged = size;
	st->state = calloc(st->npieces, sizeof *st->state);
	st->mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (size > room) {
		st->want = room / DPU_STATIC_PIECE;
		st->charged = st->want * DPU_STATIC_PIECE;
		st->reads = calloc(st->npieces, sizeof *st->reads);
	}
	if (st->state == NULL || st->mem == MAP_FAILED ||
	    (size > room && st->reads == NULL)) {
		static_destroy(st);
		return -ENOMEM;
	}
	atomic_fetch_add(&dpu->static_bytes, st->charged);
	atomic_fetch_add(&dpu->static_regions, 1);
	if (st->reads != NULL) {
		for (uint64_t p = 0; p < st->npieces; p++)
			atomic_store(&st->state[p], DS_SKIP);
		DPU_INC(dpu, static_partial, 1);
		log_info("dpu: region %" PRIu32 " on %s cached in part (%s): "
		    "%s of %s, the pieces read most", m->remote.region,
		    m->node->addr, why, fmt_bytes(rs, sizeof rs, st->charged),
		    fmt_bytes(sz, sizeof sz, size));
	} else
		log_info("dpu: region %" PRIu32 " on %s cached whole (%s): %s",
		    m->remote.region, m->node->addr, why,
		    fmt_bytes(sz, sizeof sz, size));
	atomic_store_explicit(&m->st, st, memory_order_release);
	static_fill(dpu, m, st, loads);
	return 0;
}

/*
 * A partial copy's reads are counted (as many as its pieces): its `want`
 * most read pieces are to be loaded (onto loads), the rest stay SKIP.
 * Front.
 */
static void
static_choose(struct dpu *dpu, struct dpu_mregion *m, struct dpu_static *st,
    struct dpu_reqq *loads)
{
	uint64_t chosen = 0;

	for (; chosen < st->want; chosen++) {
		uint64_t best = UINT64_MAX;
		uint32_t most = 0;

		for (uint64_t p = 0; p < st->npieces; p++) {
			uint32_t n = atomic_load(&st->reads[p]);

			if (atomic_load(&st->state[p]) == DS_SKIP &&
			    (best == UINT64_MAX || n > most)) {
				best = p;
				most = n;
			}
		}
		if (best == UINT64_MAX || most == 0)
			break; /* pieces never read are not worth the room */
		atomic_store(&st->state[best], DS_EMPTY);
	}
	log_info("dpu: region %" PRIu32 " on %s: %" PRIu64 " of its %" PRIu64
	    " pieces chosen for its partial static copy, by their reads",
	    m->remote.region, m->node->addr, chosen, st->npieces);
	st->want = chosen;
	atomic_store(&st->next, 0);
	static_fill(dpu, m, st, loads);
}

/*
 * A region record is made: cache it whole if static_regions names it; the
 * loads to start go onto loads. Front.
 */
void
dpu_cache_region_new(struct dpu *dpu, struct dpu_mregion *m,
    struct dpu_reqq *loads)
{
	if (m->name[0] == '\0')
		return;
	for (unsigned i = 0; i < dpu->nstatic_names; i++)
		if (strcmp(dpu->static_names[i], m->name) == 0) {
			(void)static_start(dpu, m, "static_regions",
			    loads);
			return;
		}
}

/*
 * A program's advice, through its host. STATIC caches the region whole
 * (the loads to start go onto loads); RANDOM keeps it out of the dynamic
 * cache (what it holds of it goes); NORMAL lets it in again, and a static
 * copy made stays until the region goes. Front.
 */
int
dpu_cache_advise(struct dpu *dpu, struct dpu_mregion *m, uint32_t advice,
    struct dpu_reqq *loads)
{
	atomic_store(&m->advised_random, advice == FAM_ADVICE_RANDOM);
	if (advice == FAM_ADVICE_RANDOM)
		dpu_dcache_purge(dpu, m);
	if (advice != FAM_ADVICE_STATIC)
		return 0;
	atomic_store(&m->advised_static, true);
	dpu_dcache_purge(dpu, m);
	return static_start(dpu, m, "advised", loads);
}

/*
 * Whether a pass that ended with pieces left starts another at once: after
 * one that loaded something, yes; after one that loaded nothing (each of
 * its pieces written, or torn, while it was read), only up to
 * STATIC_EMPTY_PASSES times in a row, so that a region written all the
 * time is not read over and over (a read that misses starts the loads
 * again). A region written once while its only piece loaded is loaded
 * by the next pass, not left to the next read.
 */
static bool
static_pass_again(struct dpu_static *st)
{
	if (atomic_exchange(&st->pass_loaded, 0) > 0) {
		atomic_store(&st->empty_passes, 0);
		return true;
	}
	return atomic_fetch_add(&st->empty_passes, 1) < STATIC_EMPTY_PASSES;
}

/*
 * A load of a piece is over: the piece is there (or empty again). Returns
 * the next load, to issue at once, or NULL. Back.
 */
struct dpu_req *
dpu_static_load_done(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_mregion *m = q->m;
	struct dpu_static *st = atomic_load_explicit(&m->st,
	    memory_order_acquire);
	uint64_t p = q->off / DPU_STATIC_PIECE;
	struct dpu_req *next = NULL;
	bool last = atomic_fetch_sub(&st->loads_out, 1) == 1;

	if (q->status == 0) {
		uint8_t loading = DS_LOADING;

		if (atomic_compare_exchange_strong_explicit(&st->state[p],
		    &loading, DS_LOADED, memory_order_acq_rel,
		    memory_order_acquire)) {
			atomic_fetch_add(&st->loaded, 1);
			atomic_fetch_add(&st->pass_loaded, 1);
			DPU_INC(dpu, static_loaded_bytes, q->len);
		} else {
			/* Written meanwhile: empty again, for the next pass. */
			atomic_store(&st->state[p], DS_EMPTY);
		}
		next = static_load_next(dpu, m, st);
	} else {
		atomic_store(&st->state[p], DS_EMPTY);
		DPU_INC(dpu, static_load_errors, 1);
		/*
		 * A CRC mismatch is what a write landing while the memory
		 * node sent the piece looks like (a torn read): the other
		 * pieces go on, and the next pass loads this one again.
		 * Other errors stop the loads until a read misses
		 * (dpu_static_lookup()).
		 */
		if (q->status == -EBADMSG)
			next = static_load_next(dpu, m, st);
	}
	/*
	 * The last load of a pass, with pieces left (written while loading,
	 * or torn): another pass, at once (static_pass_again()).
	 */
	if (next == NULL && last && (q->status == 0 ||
	    q->status == -EBADMSG) && atomic_load(&st->loaded) < st->want &&
	    static_pass_again(st)) {
		atomic_store(&st->next, 0);
		next = static_load_next(dpu, m, st);
	}
	dpu_mregion_put(m);
	free(q);
	return next;
}

/* The reply of a static hit is sent: the region record may go. Front. */
static void
static_sent(void *arg)
{
	dpu_mregion_put(arg);
}

/* Returns true when every piece of [off, off + len) is loaded. */
static bool
static_covers(struct dpu_static *st, uint64_t off, uint32_t len)
{
	uint64_t last = (off + len - 1) / DPU_STATIC_PIECE;

	for (uint64_t p = off / DPU_STATIC_PIECE; p <= last; p++)
		if (atomic_load_explicit(&st->state[p], memory_order_acquire) !=
		    DS_LOADED)
			return false;
	return true;
}

/*
 * Looks a read up in m's static copy st. A hit fills hit (a reference on
 * m, until hit->release); a miss restarts loads that stopped on an error
 * (onto loads). Returns true on a hit. Front.
 */
bool
dpu_static_lookup(struct dpu *dpu, struct dpu_mregion *m,
    struct dpu_static *st, uint64_t off, uint32_t len, struct dpu_hit *hit,
    struct dpu_reqq *loads)
{
	if (!static_covers(st, off, len)) {
		DPU_INC(dpu, static_misses, 1);
		if (st->reads != NULL && atomic_load(&st->nreads) <
		    st->npieces) {
			/* A partial copy counts its reads, then chooses. */
			for (uint64_t p = off / DPU_STATIC_PIECE; p <= (off +
			    len - 1) / DPU_STATIC_PIECE && p < st->npieces; p++)
				atomic_fetch_add(&st->reads[p], 1);
			if (atomic_fetch_add(&st->nreads, 1) + 1 ==
			    st->npieces)
				static_choose(dpu, m, st, loads);
			return false;
		}
		if (atomic_load(&st->loads_out) == 0 &&
		    atomic_load(&st->loaded) < st->want &&
		    mono_ns() >= st->retry_ns) {
			/* Loads stopped on an error: start them over. */
			st->retry_ns = mono_ns() + STATIC_RETRY_NS;
			atomic_store(&st->empty_passes, 0);
			atomic_store(&st->next, 0);
			static_fill(dpu, m, st, loads);
		}
		return false;
	}
	atomic_fetch_add(&m->refs, 1);
	hit->data = st->mem + off;
	hit->dynamic = false;
	hit->release = static_sent;
	hit->arg = m;
	return true;
}

/*
 * A write the memory node has, within st: the copy gets it too (not the
 * pieces a partial copy skips: they take no memory). Back.
 */
void
dpu_static_write(struct dpu_static *st, const struct dpu_req *q)
{
	for (uint64_t p = q->off / DPU_STATIC_PIECE; p <= (q->off + q->len -
	    1) / DPU_STATIC_PIECE; p++) {
		uint64_t lo = p * DPU_STATIC_PIECE, hi = lo + DPU_STATIC_PIECE;
		uint8_t loading = DS_LOADING;

		if (atomic_load(&st->state[p]) == DS_SKIP)
			continue;
		lo = lo > q->off ? lo : q->off;
		hi = hi < q->off + q->len ? hi : q->off + q->len;
		memcpy(st->mem + lo, q->buf + (lo - q->off), hi - lo);
		atomic_compare_exchange_strong(&st->state[p], &loading,
		    DS_STALE);
	}
}

/* Frees a static copy (its region record goes). Any side. */
void
dpu_static_free(struct dpu *dpu, struct dpu_static *st)
{
	atomic_fetch_sub(&dpu->static_bytes, st->charged);
	atomic_fetch_sub(&dpu->static_regions, 1);
	static_destroy(st);
}

