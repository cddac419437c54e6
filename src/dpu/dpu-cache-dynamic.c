/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu-cache-dynamic.c - the dynamic cache (dynamic_cache = on or adaptive):
 * entries of cache_entry_size in one buffer of cache_size bytes, found
 * through a hash table on (region record, entry), each kept a granule
 * (entry_size / 64) at a time.
 *
 * Owns: struct dpu_dcache (dpu->dc) but its recent list, its entries
 * (struct dpu_centry), the READs parked on loads. The recent list and
 * the prefetch workers are dpu-cache-prefetch.c's.
 * Entry states (enum dpu_entry_state, in dpu.h): FREE -> VALID (in the
 * table; each granule absent, loading or valid) -> FREE when evicted or
 * dropped; a dropped entry still referenced is `dead` until its last
 * reference.
 * Locks: dc.lock (the table, entries, parked READs) and dc.rlock (the
 * recent list) are leaves, never held together. A reference dropped on a
 * region record is dropped outside both (its end takes dc.lock).
 *
 * What fills it: prefetch loads (dpu_dcache_load_new: the granules of an
 * entry neither valid, loading nor being forwarded), and the answers of
 * forwarded READs (the bytes are in the dpu's hands; kept unless a write
 * to the region landed while the READ was out).
 *
 * A read is served when every granule it touches is valid, from one entry
 * (zero-copy) or several (copied); when the rest are loading, the READ
 * waits for those loads (parked on the entry, like a miss-status
 * register) instead of fetching the bytes a second time; otherwise only
 * the bytes from its first granule not valid to its last go to the memory
 * node, the rest copied from the cache. The host has had
 * the granules a hit or a forwarded READ gave it: an entry whose valid
 * granules it has all had is spent. A full cache evicts an entry with no
 * reference, load or waiter: a spent one first, else the least recently
 * read, a prefetched one no read has reached only once stale (see
 * dcache_slot_get).
 *
 * Adaptive (dynamic_cache = adaptive): the front counts the cache's hits
 * over windows of hit_window reads. Caching beats going to the memory
 * node when its hit rate h exceeds B_net / B_intra (bw_ratio; the paper's
 * model: E[T_d] = s/B_intra + (1 - h) s/B_net < s/B_net); a window below
 * that turns the cache off (emptied: no lookups, no loads) for
 * probe_interval, after which it is turned on again and judged on the
 * next window. Each switch is logged and counted.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dpu/dpu-cache.h"

#define DCACHE_SPAN 16 /* most entries a read served from the cache spans */
/*
 * A prefetched entry no read has reached may be evicted once this many
 * times the cache's entries in reads went by since it was loaded.
 */
#define DCACHE_STALE 2

static uint64_t dcache_mask_bytes(const struct dpu_dcache *dc,
    const struct dpu_centry *e, uint64_t mask);

/*
 * Sets the dynamic cache up: its buffer, table and prefetch workers (their
 * loads go to dpu->up.loads, set before). Front, at start.
 */
int
dpu_dcache_start(struct dpu *dpu, char **cause)
{
	struct dpu_dcache *dc = &dpu->dc;
	const struct cfg *cfg = dpu->d->cfg;
	unsigned buckets = 16;

	pthread_mutex_init(&dc->lock, NULL);
	pthread_mutex_init(&dc->rlock, NULL);
	pthread_cond_init(&dc->rcond, NULL);
	dc->entry_size = (uint32_t)cfg_int(cfg, CFG_DPU_CACHE_ENTRY_SIZE);
	dc->entry_shift = (unsigned)__builtin_ctz(dc->entry_size);
	dc->gran_shift = dc->entry_shift - 6;
	dc->nentries = (unsigned)((uint64_t)cfg_int(cfg, CFG_DPU_CACHE_SIZE) /
	    dc->entry_size);
	if (dc->nentries < 4) {
		*cause = xasprintf("[dpu] cache_size must hold at least 4 "
		    "entries of cache_entry_size");
		return -EINVAL;
	}
	dc->size = (uint64_t)dc->nentries * dc->entry_size;
	while (buckets < 2 * dc->nentries)
		buckets *= 2;
	dc->table = calloc(buckets, sizeof *dc->table);
	dc->table_mask = buckets - 1;
	dc->entries = calloc(dc->nentries, sizeof *dc->entries);
	dc->mem = mmap(NULL, dc->size, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (dc->table == NULL || dc->entries == NULL || dc->mem == MAP_FAILED) {
		if (dc->mem == MAP_FAILED)
			dc->mem = NULL;
		*cause = xasprintf("cannot allocate a dynamic cache of %llu "
		    "bytes", (unsigned long long)dc->size);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < dc->nentries; i++)
		dc->entries[i].dc = dc;
	dc->rnd = mono_ns() | 1;
	dc->mode = -1;
	dc->last_rate = -1;
	return 0;
}

/* Frees the dynamic cache (every region and load is gone by now). */
void
dpu_dcache_stop(struct dpu *dpu)
{
	struct dpu_dcache *dc = &dpu->dc;

	if (dc->mem != NULL)
		munmap(dc->mem, dc->size);
	free(dc->table);
	free(dc->entries);
	dc->mem = NULL;
	dc->table = NULL;
	dc->entries = NULL;
	pthread_mutex_destroy(&dc->lock);
	pthread_mutex_destroy(&dc->rlock);
	pthread_cond_destroy(&dc->rcond);
}

/* Returns the bucket of entry index of m. */
static unsigned
dcache_bucket(const struct dpu_dcache *dc, const struct dpu_mregion *m,
    uint64_t index)
{
	uint64_t k = (uint64_t)(uintptr_t)m ^ (index * 0x9e3779b97f4a7c15ull);

	k ^= k >> 29;
	return (unsigned)(k * 0xbf58476d1ce4e5b9ull >> 32) & dc->table_mask;
}

/* Finds entry index of m in the table. Under dc->lock. */
static struct dpu_centry *
dcache_find(struct dpu_dcache *dc, const struct dpu_mregion *m,
    uint64_t index)
{
	struct dpu_centry *e = dc->table[dcache_bucket(dc, m, index)];

	while (e != NULL && !(e->m == m && e->index == index))
		e = e->hnext;
	return e;
}

/* Takes e out of the table. Under dc->lock. */
static void
dcache_unlink(struct dpu_dcache *dc, struct dpu_centry *e)
{
	struct dpu_centry **pp = &dc->table[dcache_bucket(dc, e->m, e->index)];

	while (*pp != NULL && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp == e)
		*pp = e->hnext;
	e->hnext = NULL;
}

/* Gives e's slot back. Under dc->lock; e is out of the table. */
static void
dcache_release(struct dpu_dcache *dc, struct dpu_centry *e)
{
	e->state = CE_FREE;
	e->m = NULL;
	e->dead = false;
	dc->nused--;
}

/*
 * Counts an entry that leaves the cache: a prefetch that no read used was
 * wasted. Under dc->lock.
 */
static void
dcache_leaves(struct dpu *dpu, struct dpu_centry *e)
{
	uint64_t unserved = e->loaded & ~e->served;

	if (e->loaded != 0 && !e->used)
		DPU_INC(dpu, dyn_prefetch_wasted, 1);
	if (unserved & e->had)
		DPU_INC(dpu, dyn_unserved_had_bytes, dcache_mask_bytes(&dpu->dc,
		    e, unserved & e->had));
	if (unserved & ~e->had)
		DPU_INC(dpu, dyn_unserved_unread_bytes, dcache_mask_bytes(
		    &dpu->dc, e, unserved & ~e->had));
}

/* Drops e: out of the table, its slot free now or at its last reference. */
static void
dcache_drop(struct dpu *dpu, struct dpu_dcache *dc, struct dpu_centry *e)
{
	if (e->state == CE_FREE || e->dead)
		return;
	dcache_leaves(dpu, e);
	dcache_unlink(dc, e);
	if (e->refs == 0)
		dcache_release(dc, e);
	else
		e->dead = true;
}

/* Drops a reference to an entry. Under dc->lock. */
static void
dcache_unref(struct dpu_dcache *dc, struct dpu_centry *e)
{
	if (--e->refs == 0 && e->dead)
		dcache_release(dc, e);
}

/* Returns the slot memory of e. */
static uint8_t *
dcache_slot(struct dpu_dcache *dc, const struct dpu_centry *e)
{
	return dc->mem + (size_t)(e - dc->entries) * dc->entry_size;
}

/* Returns the granules of an entry that [from, to) (entry offsets) touches. */
static uint64_t
dcache_gran_mask(const struct dpu_dcache *dc, uint32_t from, uint32_t to)
{
	unsigned a = from >> dc->gran_shift;
	unsigned b = (to - 1) >> dc->gran_shift;

	if (to <= from)
		return 0;
	return (b - a == 63 ? ~0ull : ((1ull << (b - a + 1)) - 1)) << a;
}

/*
 * Returns the granules of e that [from, to) holds whole (the entry's last
 * granule ends at e->len).
 */
static uint64_t
dcache_gran_inner(const struct dpu_dcache *dc, const struct dpu_centry *e,
    uint32_t from, uint32_t to)
{
	uint32_t g = (uint32_t)1 << dc->gran_shift;
	uint32_t a = (from + g - 1) >> dc->gran_shift;
	uint32_t b = to >= e->len ? (e->len + g - 1) >> dc->gran_shift :
	    to >> dc->gran_shift;

	return b > a ? dcache_gran_mask(dc, a << dc->gran_shift,
	    b << dc->gran_shift) : 0;
}

/* Returns the bytes of e that the granules of mask hold. */
static uint64_t
dcache_mask_bytes(const struct dpu_dcache *dc, const struct dpu_centry *e,
    uint64_t mask)
{
	uint64_t bytes = (uint64_t)__builtin_popcountll(mask) << dc->gran_shift;
	uint64_t last = (e->len - 1) >> dc->gran_shift;

	/* The region's last entry may end inside its last granule. */
	if (mask & (1ull << last))
		bytes -= ((last + 1) << dc->gran_shift) - e->len;
	return bytes;
}

/*
 * Finds a slot for a new entry: a free one, else one with no reference,
 * no load out and no waiter, evicted: first one that is spent (the host
 * has had every granule it holds), else the least recently read of those
 * a read has started on, else of the rest, once stale (DCACHE_STALE): a
 * prefetched entry no read has reached yet is what a run reads next, and
 * the entry a stream reads now was read last. Under dc->lock; NULL when
 * none (the load or the bytes to keep are left out).
 */
static struct dpu_centry *
dcache_slot_get(struct dpu *dpu, struct dpu_dcache *dc)
{
	struct dpu_centry *victim = NULL;
	unsigned victim_rank = 3;

	for (unsigned k = 0; k < dc->nentries; k++) {
		struct dpu_centry *e = &dc->entries[k];
		unsigned rank;

		if (e->state == CE_FREE) {
			dc->nused++;
			return e;
		}
		if (dc->nused < dc->nentries)
			continue; /* a free slot exists: take that */
		if (e->refs > 0 || e->dead || e->loading != 0 ||
		    e->waiters != NULL)
			continue;
		rank = (e->valid & ~e->had) == 0 ? 0 : e->had != 0 ? 1 : 2;
		if (rank == 2 && dc->clock - e->touch < DCACHE_STALE *
		    dc->nentries)
			continue; /* loaded ahead of a run that comes to it */
		if (rank < victim_rank || (rank == victim_rank &&
		    e->touch < victim->touch)) {
			victim = e;
			victim_rank = rank;
		}
	}
	if (victim != NULL) {
		dcache_leaves(dpu, victim);
		dcache_unlink(dc, victim);
		DPU_INC(dpu, dyn_evictions, 1);
	}
	return victim;
}

/*
 * Makes entry index of m, empty, in the table. Under dc->lock; NULL when
 * the region ends before it or no slot is free.
 */
static struct dpu_centry *
dcache_entry_new(struct dpu *dpu, struct dpu_mregion *m, uint64_t index)
{
	struct dpu_dcache *dc = &dpu->dc;
	uint64_t off = index << dc->entry_shift;
	struct dpu_centry *e;

	if (off >= m->remote.size)
		return NULL;
	if ((e = dcache_slot_get(dpu, dc)) == NULL) {
		DPU_INC(dpu, dyn_full, 1);
		return NULL;
	}
	e->m = m;
	e->index = index;
	e->len = (uint32_t)(m->remote.size - off < dc->entry_size ?
	    m->remote.size - off : dc->entry_size);
	e->state = CE_VALID;
	e->dead = false;
	e->used = false;
	e->valid = e->loading = e->fwd = e->loaded = e->had = e->served = 0;
	e->touch = dc->clock;
	e->refs = 0;
	e->waiters = NULL;
	e->hnext = dc->table[dcache_bucket(dc, m, index)];
	dc->table[dcache_bucket(dc, m, index)] = e;
	return e;
}

/* The reply of a dynamic hit is sent (or failed): the entry may go. Front. */
static void
dcache_sent(void *arg)
{
	struct dpu_centry *e = arg;
	struct dpu_dcache *dc = e->dc;

	pthread_mutex_lock(&dc->lock);
	dcache_unref(dc, e);
	pthread_mutex_unlock(&dc->lock);
}

/* The reply of a hit copied from several entries is sent: its copy goes. */
static void
dcache_copy_sent(void *arg)
{
	free(arg);
}

/* Turns the dynamic cache on or off (off empties it). Front. */
static void
dcache_enable(struct dpu *dpu, bool on)
{
	struct dpu_dcache *dc = &dpu->dc;

	if (atomic_exchange(&dc->enabled, on) != on && !on)
		dpu_dcache_purge(dpu, NULL);
}

/* An adaptive switch: on (a probe) or off until probe_interval. Front. */
static void
adaptive_switch(struct dpu *dpu, bool on, const char *why)
{
	struct dpu_dcache *dc = &dpu->dc;

	dc->win_reads = dc->win_hits = 0;
	if (on) {
		dc->probe_at = 0;
		dc->probing = true;
		dc->switches_on++;
	} else {
		dc->probe_at = mono_ns() + dc->probe_ns;
		dc->probing = false;
		dc->switches_off++;
	}
	dcache_enable(dpu, on);
	log_notice("dpu: dynamic cache %s: %s", on ? "on" : "off", why);
}

/* Counts a lookup of the adaptive cache; judges a full window. Front. */
static void
adaptive_count(struct dpu *dpu, bool hit)
{
	struct dpu_dcache *dc = &dpu->dc;
	char why[192];
	double rate;

	dc->win_reads++;
	dc->win_hits += hit;
	if (dc->win_reads < dc->window)
		return;
	rate = (double)dc->win_hits / (double)dc->win_reads;
	dc->last_rate = rate;
	dc->windows++;
	if (rate * 100.0 < (double)dc->bw_ratio) {
		snprintf(why, sizeof why, "hit rate %.1f%% over the last %u "
		    "reads is below bw_ratio %u%% (B_net/B_intra): it costs more "
		    "than it saves; trying again in %llu ms", rate * 100.0,
		    dc->win_reads, dc->bw_ratio,
		    (unsigned long long)(dc->probe_ns / 1000000u));
		adaptive_switch(dpu, false, why);
		return;
	}
	if (dc->probing)
		log_notice("dpu: dynamic cache stays on: hit rate %.1f%% over "
		    "%u reads, above bw_ratio %u%%", rate * 100.0, dc->win_reads,
		    dc->bw_ratio);
	dc->probing = false;
	dc->win_reads = dc->win_hits = 0;
}

/* One entry's part of a read: [from, to) of entry index. */
struct dcache_part {
	struct dpu_centry *e;
	uint64_t index;
	uint32_t from, to;
	uint64_t mask;
};

enum dcache_state { DS_HIT, DS_WAIT, DS_MISS };

/*
 * Looks [off, off + len) of m up, entry by entry (at most DCACHE_SPAN),
 * and marks the entries found read now. Returns DS_HIT when every granule
 * is valid, DS_WAIT when every one is valid or loading (*wait: the first
 * entry with a load out), DS_MISS otherwise. Under dc->lock.
 */
static int
dcache_span(struct dpu_dcache *dc, struct dpu_mregion *m, uint64_t off,
    uint32_t len, struct dcache_part *p, unsigned *np,
    struct dpu_centry **wait)
{
	uint64_t first = off >> dc->entry_shift;
	uint64_t last = (off + len - 1) >> dc->entry_shift;
	int state = DS_HIT;

	*wait = NULL;
	if (len == 0 || last - first >= DCACHE_SPAN)
		return DS_MISS;
	*np = (unsigned)(last - first + 1);
	for (unsigned i = 0; i < *np; i++) {
		uint64_t base = (first + i) << dc->entry_shift;
		uint64_t end = off + len < base + dc->entry_size ? off + len :
		    base + dc->entry_size;

		p[i].index = first + i;
		p[i].from = (uint32_t)((off > base ? off : base) - base);
		p[i].to = (uint32_t)(end - base);
		p[i].mask = dcache_gran_mask(dc, p[i].from, p[i].to);
		p[i].e = dcache_find(dc, m, first + i);
		if (p[i].e == NULL || p[i].to > p[i].e->len) {
			state = DS_MISS;
			continue;
		}
		p[i].e->touch = dc->clock;
		if ((p[i].mask & ~p[i].e->valid) == 0)
			continue;
		if ((p[i].mask & ~(p[i].e->valid | p[i].e->loading)) != 0)
			state = DS_MISS;
		else if (state == DS_HIT)
			state = DS_WAIT;
		if (*wait == NULL && (p[i].mask & p[i].e->loading) != 0)
			*wait = p[i].e;
	}
	return state;
}

/*
 * A hit on the parts of a read: the host has had them; the loaded
 * granules a hit serves for the first time are counted. Under dc->lock.
 */
static void
dcache_span_had(struct dpu *dpu, const struct dcache_part *p, unsigned n)
{
	struct dpu_dcache *dc = &dpu->dc;

	for (unsigned i = 0; i < n; i++) {
		struct dpu_centry *e = p[i].e;
		uint64_t fresh = p[i].mask & e->loaded & ~e->served;

		e->had |= p[i].mask;
		if (fresh == 0)
			continue;
		e->served |= fresh;
		DPU_INC(dpu, dyn_load_served_bytes, dcache_mask_bytes(dc, e,
		    fresh));
		if (!e->used) {
			e->used = true;
			DPU_INC(dpu, dyn_prefetch_used, 1);
		}
	}
}

/*
 * A read that misses goes to the memory node: the granules it brings are
 * not prefetched meanwhile (its answer fills them), its entries made when
 * missing. Under dc->lock.
 */
static void
dcache_span_fwd(struct dpu *dpu, struct dpu_mregion *m, struct dcache_part *p,
    unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (p[i].e == NULL)
			p[i].e = dcache_entry_new(dpu, m, p[i].index);
		if (p[i].e != NULL)
			p[i].e->fwd |= p[i].mask & ~(p[i].e->valid |
			    p[i].e->loading);
	}
}

/* Returns true when a part of a read is valid or loading. dc->lock. */
static bool
dcache_span_any(const struct dcache_part *p, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (p[i].e != NULL && (p[i].mask & (p[i].e->valid |
		    p[i].e->loading)) != 0)
			return true;
	return false;
}

/*
 * Finds the bytes of a read that are not valid: [*a, *b) of the read, from
 * its first granule not valid to its last. Under dc->lock.
 */
static void
dcache_span_missing(const struct dpu_dcache *dc, const struct dcache_part *p,
    unsigned n, uint32_t *a, uint32_t *b)
{
	uint32_t at = 0;

	*a = UINT32_MAX;
	*b = 0;
	for (unsigned i = 0; i < n; i++) {
		uint64_t miss = p[i].e == NULL || p[i].to > p[i].e->len ?
		    p[i].mask : p[i].mask & ~p[i].e->valid;
		uint32_t lo, hi;

		if (miss != 0) {
			lo = (uint32_t)__builtin_ctzll(miss) << dc->gran_shift;
			hi = (64 - (uint32_t)__builtin_clzll(miss)) <<
			    dc->gran_shift;
			lo = lo > p[i].from ? lo : p[i].from;
			hi = hi < p[i].to ? hi : p[i].to;
			if (*a == UINT32_MAX)
				*a = at + (lo - p[i].from);
			*b = at + (hi - p[i].from);
		}
		at += p[i].to - p[i].from;
	}
}

/*
 * Copies bytes [x, y) of a read (valid in the parts that hold them) to
 * buf + x. Under dc->lock.
 */
static void
dcache_span_copy_range(struct dpu_dcache *dc, const struct dcache_part *p,
    unsigned n, uint32_t x, uint32_t y, uint8_t *buf)
{
	uint32_t at = 0;

	for (unsigned i = 0; i < n && at < y; i++) {
		uint32_t plen = p[i].to - p[i].from;
		uint32_t from = x > at ? x - at : 0;
		uint32_t to = y - at < plen ? y - at : plen;

		if (from < to)
			memcpy(buf + at + from, dcache_slot(dc, p[i].e) +
			    p[i].from + from, to - from);
		at += plen;
	}
}

/* Copies the parts of a read, all valid, to buf. Under dc->lock. */
static void
dcache_span_copy(struct dpu_dcache *dc, const struct dcache_part *p,
    unsigned n, uint8_t *buf)
{
	for (unsigned i = 0; i < n; i++) {
		memcpy(buf, dcache_slot(dc, p[i].e) + p[i].from,
		    p[i].to - p[i].from);
		buf += p[i].to - p[i].from;
	}
}

/*
 * Looks a read up in the dynamic cache and puts it on the recent list. A
 * hit fills hit: the bytes, and a reference until hit->release (on the
 * entry, or a copy when the read spans entries). A read whose granules are
 * valid or loading sets hit->wait (to park it: dpu_dcache_park). Returns
 * true on a hit. Front.
 */
bool
dpu_dcache_lookup(struct dpu *dpu, struct dpu_mregion *m, uint64_t off,
    uint32_t len, struct dpu_hit *hit)
{
	struct dpu_dcache *dc = &dpu->dc;
	struct dcache_part p[DCACHE_SPAN];
	struct dpu_centry *wait;
	uint8_t *copy = NULL;
	bool partial = false;
	unsigned n = 0;
	int state;

	hit->wait = false;
	if (!atomic_load_explicit(&dc->enabled, memory_order_relaxed)) {
		if (dc->mode != CFG_DYNAMIC_ADAPTIVE || dc->probe_at == 0 ||
		    mono_ns() < dc->probe_at)
			return false;
		adaptive_switch(dpu, true, "probing its hit rate again");
	}
	DPU_INC(dpu, dyn_lookup_bytes, len);
	if (((off + len - 1) ^ off) >> dc->entry_shift) {
		DPU_INC(dpu, dyn_spanning, 1);
		copy = malloc(len);
	}
	pthread_mutex_lock(&dc->lock);
	dc->clock++;
	state = dcache_span(dc, m, off, len, p, &n, &wait);
	if (state == DS_HIT && n > 1 && copy == NULL)
		state = DS_MISS;
	if (state == DS_HIT) {
		dcache_span_had(dpu, p, n);
		if (n == 1)
			p[0].e->refs++;
		else
			dcache_span_copy(dc, p, n, copy);
	} else if (state == DS_MISS) {
		partial = dcache_span_any(p, n);
		dcache_span_fwd(dpu, m, p, n);
	}
	pthread_mutex_unlock(&dc->lock);
	dpu_recent_push(dpu, m, off, len);
	if (dc->mode == CFG_DYNAMIC_ADAPTIVE)
		adaptive_count(dpu, state != DS_MISS);
	if (state != DS_HIT) {
		free(copy);
		/* A part cached or loading: dpu_dcache_park takes it on. */
		hit->wait = state == DS_WAIT || partial;
		if (!hit->wait)
			DPU_INC(dpu, dyn_misses, 1);
		return false;
	}
	hit->dynamic = true;
	if (n == 1) {
		hit->data = dcache_slot(dc, p[0].e) + p[0].from;
		hit->release = dcache_sent;
		hit->arg = p[0].e;
	} else {
		hit->data = copy;
		hit->release = dcache_copy_sent;
		hit->arg = copy;
	}
	return true;
}

/*
 * A READ q that misses: the bytes before its first granule not valid and
 * after its last are copied to q->buf from the cache, and only those
 * between go to the memory node (q->sub_off, q->sub_len). Under dc->lock.
 */
static void
dcache_partial(struct dpu *dpu, struct dpu_req *q, struct dcache_part *p,
    unsigned n)
{
	struct dpu_dcache *dc = &dpu->dc;
	uint32_t a, b;

	q->sub_off = q->sub_len = 0;
	if (n == 0)
		return;
	dcache_span_missing(dc, p, n, &a, &b);
	if (a >= b || (a == 0 && b == q->len))
		return;
	dcache_span_copy_range(dc, p, n, 0, a, q->buf);
	dcache_span_copy_range(dc, p, n, b, q->len, q->buf);
	for (unsigned i = 0; i < n; i++) {
		struct dpu_centry *e = p[i].e;
		uint64_t got, fresh;

		if (e == NULL || (got = p[i].mask & e->valid) == 0)
			continue;
		fresh = got & e->loaded & ~e->served;
		e->had |= got;
		e->served |= fresh;
		if (fresh != 0)
			DPU_INC(dpu, dyn_load_served_bytes,
			    dcache_mask_bytes(dc, e, fresh));
	}
	/* A write landing from now on: the bytes copied may be older. */
	q->wseq = atomic_load(&q->m->writes);
	q->sub_off = a;
	q->sub_len = b - a;
	DPU_INC(dpu, dyn_partial, 1);
	DPU_INC(dpu, dyn_hit_bytes, q->len - (b - a));
}

/*
 * A READ q the cache will serve once the loads it needs are over: parked
 * on the entry whose load it waits for (one load per granule: the bytes
 * are not fetched twice). Returns DP_PARKED, DP_READY (q->buf holds the
 * bytes now) or DP_FORWARD. Under dc->lock.
 */
static int
dcache_park_locked(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_dcache *dc = &dpu->dc;
	struct dcache_part p[DCACHE_SPAN];
	struct dpu_centry *wait;
	unsigned n = 0;

	switch (dcache_span(dc, q->m, q->off, q->len, p, &n, &wait)) {
	case DS_HIT:
		dcache_span_had(dpu, p, n);
		dcache_span_copy(dc, p, n, q->buf);
		q->status = 0;
		DPU_INC(dpu, dyn_hits, 1);
		DPU_INC(dpu, dyn_hit_bytes, q->len);
		return DP_READY;
	case DS_WAIT:
		q->wnext = wait->waiters;
		wait->waiters = q;
		return DP_PARKED;
	default:
		dcache_partial(dpu, q, p, n);
		DPU_INC(dpu, dyn_misses, 1);
		if (wait != NULL)
			DPU_INC(dpu, dyn_loading, 1);
		return DP_FORWARD;
	}
}

/* Parks a READ the lookup said to wait (dcache_park_locked). Front. */
int
dpu_dcache_park(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_dcache *dc = &dpu->dc;
	int rc;

	pthread_mutex_lock(&dc->lock);
	rc = dcache_park_locked(dpu, q);
	if (rc == DP_PARKED)
		DPU_INC(dpu, dyn_waits, 1);
	pthread_mutex_unlock(&dc->lock);
	return rc;
}

/*
 * Takes the READs whose load is over: those now served onto ready (their
 * bytes in their buffers), those that cannot be (a load failed, a write
 * dropped the entry) onto again, to be forwarded; the others wait on.
 * Back.
 */
void
dpu_dcache_woken(struct dpu *dpu, struct dpu_reqq *ready,
    struct dpu_reqq *again)
{
	struct dpu_dcache *dc = &dpu->dc;
	struct dpu_req *q, *next;

	pthread_mutex_lock(&dc->lock);
	q = dc->woken;
	dc->woken = NULL;
	for (; q != NULL; q = next) {
		next = q->wnext;
		q->wnext = NULL;
		switch (dcache_park_locked(dpu, q)) {
		case DP_READY:
			TAILQ_INSERT_TAIL(ready, q, link);
			break;
		case DP_FORWARD:
			TAILQ_INSERT_TAIL(again, q, link);
			break;
		}
	}
	pthread_mutex_unlock(&dc->lock);
}

/*
 * Makes the load of the absent granules of entry index of m from entry
 * offset from: the first run of granules neither valid nor loading. The
 * entry is made when missing. Returns the load, NULL when there is nothing
 * to do (or no room). Prefetch worker.
 */
struct dpu_req *
dpu_dcache_load_new(struct dpu *dpu, struct dpu_mregion *m, uint64_t index,
    uint32_t from)
{
	struct dpu_dcache *dc = &dpu->dc;
	struct dpu_centry *e;
	struct dpu_req *q;
	uint64_t absent, run;
	unsigned a, b;

	if ((index << dc->entry_shift) >= m->remote.size)
		return NULL;
	q = calloc(1, sizeof *q);
	if (q == NULL)
		return NULL;
	pthread_mutex_lock(&dc->lock);
	/*
	 * Turned off (cache.set, an adaptive switch) after the worker took
	 * the read: the purge that followed has the lock before us or after,
	 * and an entry made after it would be a load of a cache that is off.
	 */
	if (!atomic_load(&dc->enabled))
		e = NULL;
	else if ((e = dcache_find(dc, m, index)) == NULL)
		e = dcache_entry_new(dpu, m, index);
	absent = e == NULL || from >= e->len ? 0 :
	    dcache_gran_mask(dc, from, e->len) & ~(e->valid | e->loading |
	    e->fwd);
	if (absent == 0) {
		pthread_mutex_unlock(&dc->lock);
		free(q);
		return NULL;
	}
	a = (unsigned)__builtin_ctzll(absent);
	run = ~(absent >> a); /* the first granule after the run: its bit */
	b = run == 0 ? 64 : a + (unsigned)__builtin_ctzll(run);
	e->loading |= dcache_gran_mask(dc, a << dc->gran_shift,
	    b << dc->gran_shift);
	e->refs++;
	DPU_INC(dpu, dyn_loads, 1);
	pthread_mutex_unlock(&dc->lock);
	q->kind = DR_LOAD;
	q->dpu = dpu;
	q->m = m;
	atomic_fetch_add(&m->refs, 1);
	q->off = (index << dc->entry_shift) + (a << dc->gran_shift);
	q->len = (b << dc->gran_shift) < e->len ? (b - a) << dc->gran_shift :
	    e->len - (a << dc->gran_shift);
	q->buf = dcache_slot(dc, e) + (a << dc->gran_shift);
	q->flags = FAM_F_BACKGROUND;
	q->entry = e;
	q->start_ns = mono_ns();
	return q;
}

/*
 * A dynamic load is over: its granules are valid (unless it failed or
 * the entry was dropped), and the READs waiting on the entry are woken
 * (dpu_dcache_woken takes them). Back.
 */
void
dpu_dcache_load_done(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_dcache *dc = &dpu->dc;
	struct dpu_centry *e = q->entry;
	uint32_t from = (uint32_t)(q->off & (dc->entry_size - 1));
	uint64_t mask = dcache_gran_mask(dc, from, from + q->len);
	struct dpu_req *w;

	pthread_mutex_lock(&dc->lock);
	e->loading &= ~mask;
	if (q->status == 0 && !e->dead) {
		e->valid |= mask;
		e->loaded |= mask;
	}
	while ((w = e->waiters) != NULL) {
		e->waiters = w->wnext;
		w->wnext = dc->woken;
		dc->woken = w;
	}
	dcache_unref(dc, e);
	pthread_mutex_unlock(&dc->lock);
	if (q->status == 0)
		DPU_INC(dpu, dyn_load_bytes, q->len);
	else
		DPU_INC(dpu, dyn_load_errors, 1);
	dpu_mregion_put(q->m);
	free(q);
}

/*
 * A forwarded READ is over: its answer's whole granules go into the cache
 * (the entries made when missing), unless it failed or a write to the
 * region was acknowledged while it was out (its bytes may be older). The
 * host has had them. Back.
 */
void
dpu_dcache_insert(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_dcache *dc = &dpu->dc;
	uint64_t end = q->off + q->len;

	bool keep = q->status == 0 && q->wseq == atomic_load(&q->m->writes);

	if (q->len == 0)
		return;
	pthread_mutex_lock(&dc->lock);
	/* (under the lock: a purge that turned the cache off is over) */
	keep = keep && atomic_load(&dc->enabled);
	for (uint64_t index = q->off >> dc->entry_shift;
	    (index << dc->entry_shift) < end; index++) {
		uint64_t base = index << dc->entry_shift;
		uint32_t from = (uint32_t)((q->off > base ? q->off : base) - base);
		uint32_t to = (uint32_t)((end < base + dc->entry_size ? end :
		    base + dc->entry_size) - base);
		struct dpu_centry *e = dcache_find(dc, q->m, index);
		uint64_t fill;

		if (e != NULL)
			e->fwd &= ~dcache_gran_mask(dc, from, to);
		if (!keep)
			continue;
		if (e == NULL)
			e = dcache_entry_new(dpu, q->m, index);
		if (e == NULL || to > e->len)
			continue;
		fill = dcache_gran_inner(dc, e, from, to) & ~(e->valid |
		    e->loading);
		for (uint64_t f = fill; f != 0; f &= f - 1) {
			uint32_t g = (uint32_t)__builtin_ctzll(f) << dc->gran_shift;
			uint32_t glen = (uint32_t)1 << dc->gran_shift;

			if (g + glen > e->len)
				glen = e->len - g;
			memcpy(dcache_slot(dc, e) + g, q->buf + (base + g - q->off),
			    glen);
		}
		e->valid |= fill;
		e->had |= dcache_gran_mask(dc, from, to);
		if (fill != 0)
			DPU_INC(dpu, dyn_insert_bytes, dcache_mask_bytes(dc, e,
			    fill));
	}
	pthread_mutex_unlock(&dc->lock);
}

/* A write the memory node has: a cached entry gets it too. Back. */
void
dpu_dcache_write(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_dcache *dc = &dpu->dc;
	uint64_t end = q->off + q->len;

	atomic_fetch_add(&q->m->writes, 1);
	for (uint64_t index = q->off >> dc->entry_shift;
	    (index << dc->entry_shift) < end; index++) {
		uint64_t base = index << dc->entry_shift;
		uint64_t from = q->off > base ? q->off : base;
		uint64_t to = end < base + dc->entry_size ? end :
		    base + dc->entry_size;
		uint64_t mask = dcache_gran_mask(dc, (uint32_t)(from - base),
		    (uint32_t)(to - base));
		struct dpu_centry *e;

		pthread_mutex_lock(&dc->lock);
		e = dcache_find(dc, q->m, index);
		if (e != NULL && !e->dead && (e->loading & mask) != 0) {
			/* Its load may land older data: it is not used. */
			dcache_unlink(dc, e);
			e->dead = true;
			e = NULL;
		} else if (e != NULL && !e->dead && to - base <= e->len &&
		    (e->valid & mask) != 0)
			e->refs++;
		else
			e = NULL;
		pthread_mutex_unlock(&dc->lock);
		if (e == NULL)
			continue;
		memcpy(dcache_slot(dc, e) + (from - base), q->buf + (from -
		    q->off), to - from);
		DPU_INC(dpu, dyn_write_updates, 1);
		pthread_mutex_lock(&dc->lock);
		dcache_unref(dc, e);
		pthread_mutex_unlock(&dc->lock);
	}
}

/*
 * Drops every entry of m (its record goes), or of every region (NULL).
 * Any side.
 */
void
dpu_dcache_purge(struct dpu *dpu, struct dpu_mregion *m)
{
	struct dpu_dcache *dc = &dpu->dc;

	if (dc->entries == NULL)
		return;
	pthread_mutex_lock(&dc->lock);
	for (unsigned i = 0; i < dc->nentries; i++) {
		struct dpu_centry *e = &dc->entries[i];

		if (e->state != CE_FREE && (m == NULL || e->m == m))
			dcache_drop(dpu, dc, e);
	}
	pthread_mutex_unlock(&dc->lock);
}

/* Sets the dynamic cache's mode: off, on, or adaptive (on to start). */
void
dpu_cache_set_dynamic(struct dpu *dpu, int mode, const char *why)
{
	struct dpu_dcache *dc = &dpu->dc;
	static const char *const names[] = { "off", "on", "adaptive" };

	if (mode == dc->mode)
		return;
	dc->mode = mode;
	dc->win_reads = dc->win_hits = 0;
	dc->probe_at = 0;
	dc->probing = false;
	dcache_enable(dpu, mode != CFG_DYNAMIC_OFF);
	log_notice("dpu: dynamic cache %s (%s)", names[mode], why);
}

/* Describes the caches for status. */
