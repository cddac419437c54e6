/*
 * dpu-cache.c - what the dpu answers from its own memory.
 *
 * Static cache: chosen regions (static_regions by name, or a program's
 * fam_advise(FAM_ADVISE_STATIC) passed on by its host as REGION_ADVISE)
 * are copied whole into the dpu's memory, a piece at a time off the
 * critical path (loads are background reads on the memory link), and then
 * every read of them is served here: 100% hits once loaded. A write is
 * forwarded as usual and copied into the cached copy when the memory node
 * has acknowledged it (write-through; see struct dpu_static for why the
 * order of loads and writes on one connection keeps the copy right). A
 * region that would take static_size past its limit is not cached.
 *
 * Loads are requests of the back (DR_LOAD): the front starts a region's
 * first few, and each completion starts the next, on the back's loop.
 * A copy lives as long as its memory-node region record (struct
 * dpu_mregion); a reply served from it holds a reference on that record
 * until the reply is sent.
 *
 * Lock order: none here yet; piece states and counters are atomics.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dpu.h"

#define STATIC_RETRY_NS (1000ull * 1000000u) /* after a failed load */

/* Splits static_regions into names. */
static void
static_names_set(struct dpu *dpu, const char *list)
{
	for (unsigned i = 0; i < dpu->nstatic_names; i++)
		free(dpu->static_names[i]);
	free(dpu->static_names);
	dpu->static_names = NULL;
	dpu->nstatic_names = 0;
	for (const char *p = list; *p != '\0';) {
		const char *e = strchr(p, ',');
		size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
		char **names;

		while (len > 0 && *p == ' ') {
			p++;
			len--;
		}
		while (len > 0 && p[len - 1] == ' ')
			len--;
		if (len > 0) {
			names = realloc(dpu->static_names,
			    (dpu->nstatic_names + 1) * sizeof *names);
			if (names == NULL)
				return;
			dpu->static_names = names;
			names[dpu->nstatic_names] = strndup(p, len);
			if (names[dpu->nstatic_names] != NULL)
				dpu->nstatic_names++;
		}
		if (e == NULL)
			break;
		p = e + 1;
	}
}

/* Reads the reloadable cache keys. Front. */
void
dpu_cache_configure(struct dpu *dpu)
{
	const struct cfg *cfg = dpu->d->cfg;

	static_names_set(dpu, cfg_str(cfg, CFG_DPU_STATIC_REGIONS));
	dpu->static_size = (uint64_t)cfg_int(cfg, CFG_DPU_STATIC_SIZE);
}

/* Sets the caches up. */
int
dpu_cache_start(struct dpu *dpu, char **cause)
{
	dpu_cache_configure(dpu);
	return 0;
}

/* Frees what the caches hold (every region is gone by now). */
void
dpu_cache_stop(struct dpu *dpu)
{
	static_names_set(dpu, "");
}

/* ---- the static cache ------------------------------------------------- */

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

/* Starts up to DPU_STATIC_LOADS loads of a copy. Front. */
static void
static_fill(struct dpu *dpu, struct dpu_mregion *m, struct dpu_static *st)
{
	for (unsigned i = atomic_load(&st->loads_out); i < DPU_STATIC_LOADS;
	    i++) {
		struct dpu_req *q = static_load_next(dpu, m, st);

		if (q == NULL)
			break;
		dpu_submit(dpu, q);
	}
}

/* Makes a static copy of m and starts loading it. Front. */
static int
static_start(struct dpu *dpu, struct dpu_mregion *m, const char *why)
{
	struct dpu_static *st;
	uint64_t size = m->remote.size, used = atomic_load(&dpu->static_bytes);
	char sz[32];

	if (atomic_load(&m->st) != NULL)
		return 0;
	if (used + size > dpu->static_size) {
		DPU_INC(dpu, static_rejected, 1);
		log_info("dpu: region %" PRIu32 " on %s (%s): not cached whole: "
		    "%s would pass static_size", m->remote.region, m->node->addr,
		    why, fmt_bytes(sz, sizeof sz, size));
		return -ENOSPC;
	}
	st = calloc(1, sizeof *st);
	if (st == NULL)
		return -ENOMEM;
	st->size = size;
	st->npieces = (size + DPU_STATIC_PIECE - 1) / DPU_STATIC_PIECE;
	st->state = calloc(st->npieces, sizeof *st->state);
	st->mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (st->state == NULL || st->mem == MAP_FAILED) {
		if (st->mem != MAP_FAILED)
			munmap(st->mem, size);
		free(st->state);
		free(st);
		return -ENOMEM;
	}
	atomic_fetch_add(&dpu->static_bytes, size);
	atomic_fetch_add(&dpu->static_regions, 1);
	atomic_store_explicit(&m->st, st, memory_order_release);
	log_info("dpu: region %" PRIu32 " on %s cached whole (%s): %s",
	    m->remote.region, m->node->addr, why, fmt_bytes(sz, sizeof sz,
	    size));
	static_fill(dpu, m, st);
	return 0;
}

/* A region record is made: cache it whole if static_regions names it. */
void
dpu_cache_region_new(struct dpu *dpu, struct dpu_mregion *m)
{
	if (m->name[0] == '\0')
		return;
	for (unsigned i = 0; i < dpu->nstatic_names; i++)
		if (strcmp(dpu->static_names[i], m->name) == 0) {
			(void)static_start(dpu, m, "static_regions");
			return;
		}
}

/*
 * A program's advice, through its host. STATIC caches the region whole;
 * NORMAL is taken note of, and a copy made stays until the region goes.
 */
int
dpu_cache_advise(struct dpu *dpu, struct dpu_mregion *m, uint32_t advice)
{
	if (advice != FAM_ADVICE_STATIC)
		return 0;
	return static_start(dpu, m, "advised");
}

/* A load is over: the piece is there (or empty again); the next starts. */
void
dpu_cache_load_done(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_mregion *m = q->m;
	struct dpu_static *st = atomic_load_explicit(&m->st,
	    memory_order_acquire);
	uint64_t p = q->off / DPU_STATIC_PIECE;
	struct dpu_req *next = NULL;

	atomic_fetch_sub(&st->loads_out, 1);
	if (q->status == 0) {
		atomic_store_explicit(&st->state[p], DS_LOADED,
		    memory_order_release);
		atomic_fetch_add(&st->loaded, 1);
		DPU_INC(dpu, static_loaded_bytes, q->len);
		next = static_load_next(dpu, m, st);
	} else {
		atomic_store(&st->state[p], DS_EMPTY);
		DPU_INC(dpu, static_load_errors, 1);
	}
	dpu_mregion_put(m);
	free(q);
	if (next != NULL)
		dpu_issue(dpu, next);
}

/* The reply of a cache hit is sent: the region record may go. Front. */
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
 * Serves a host's READ from a cache when it can: the reply references the
 * cached bytes (zero-copy). Returns false when the read must be forwarded.
 * Front.
 */
bool
dpu_cache_read(struct dpu_hconn *hc, const struct fam_hdr *h,
    struct dpu_mregion *m, uint64_t off, uint32_t len)
{
	struct dpu *dpu = hc->dpu;
	struct dpu_static *st = atomic_load_explicit(&m->st,
	    memory_order_acquire);

	if (st == NULL)
		return false;
	if (!static_covers(st, off, len)) {
		DPU_INC(dpu, static_misses, 1);
		if (atomic_load(&st->loads_out) == 0 &&
		    atomic_load(&st->loaded) < st->npieces &&
		    mono_ns() >= st->retry_ns) {
			/* Loads stopped on an error: start them over. */
			st->retry_ns = mono_ns() + STATIC_RETRY_NS;
			atomic_store(&st->next, 0);
			static_fill(dpu, m, st);
		}
		return false;
	}
	atomic_fetch_add(&m->refs, 1);
	if (fam_conn_reply(hc->c, h, 0, st->mem + off, len, false, static_sent,
	    m) < 0) {
		dpu_mregion_put(m);
		return true; /* the connection is closing: nobody to answer */
	}
	DPU_INC(dpu, static_hits, 1);
	DPU_INC(dpu, static_hit_bytes, len);
	DPU_INC(dpu, host_read_bytes, len);
	if (h->flags & FAM_F_BACKGROUND)
		DPU_INC(dpu, host_background_bytes, len);
	else
		DPU_INC(dpu, host_ondemand_bytes, len);
	return true;
}

/* A write the memory node has: the cached copy gets it too. Back. */
void
dpu_cache_write_done(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_static *st = atomic_load_explicit(&q->m->st,
	    memory_order_acquire);

	if (st != NULL && q->off + q->len <= st->size)
		memcpy(st->mem + q->off, q->buf, q->len);
}

/* A region record goes: its cached copy with it. Any side. */
void
dpu_cache_mregion_gone(struct dpu_mregion *m)
{
	struct dpu_static *st = atomic_load(&m->st);
	struct dpu *dpu = m->node->dpu;

	if (st == NULL)
		return;
	atomic_fetch_sub(&dpu->static_bytes, st->size);
	atomic_fetch_sub(&dpu->static_regions, 1);
	munmap(st->mem, st->size);
	free(st->state);
	free(st);
}

/* Describes the caches for status. */
json_t *
dpu_cache_json(struct dpu *dpu)
{
	uint64_t hits = DPU_GET(dpu, static_hits);
	uint64_t misses = DPU_GET(dpu, static_misses);

	return json_pack("{s:{s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:I,s:I,s:I}}",
	    "static",
	    "regions", (json_int_t)atomic_load(&dpu->static_regions),
	    "size", (json_int_t)dpu->static_size,
	    "cached_bytes", (json_int_t)atomic_load(&dpu->static_bytes),
	    "loaded_bytes", (json_int_t)DPU_GET(dpu, static_loaded_bytes),
	    "hits", (json_int_t)hits,
	    "misses", (json_int_t)misses,
	    "hit_rate", hits + misses > 0 ? (double)hits /
	    (double)(hits + misses) : 0.0,
	    "hit_bytes", (json_int_t)DPU_GET(dpu, static_hit_bytes),
	    "rejected", (json_int_t)DPU_GET(dpu, static_rejected),
	    "load_errors", (json_int_t)DPU_GET(dpu, static_load_errors));
}
