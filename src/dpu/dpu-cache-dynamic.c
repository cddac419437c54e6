/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu-cache-dynamic.c - the dynamic cache (dynamic_cache = on or adaptive):
 * entries of cache_entry_size in one buffer of cache_size bytes, found
 * through a hash table on (region record, entry), loaded ahead of reads
 * that continue a sequential run.
 *
 * Owns: struct dpu_dcache (dpu->dc), its entries (struct dpu_centry), the
 * recent list and the prefetch workers.
 * Entry states (enum dpu_entry_state, in dpu.h): FREE -> LOADING (a
 * prefetch load is out) -> VALID (reads hit it) -> FREE when evicted or
 * dropped; a dropped entry still referenced is `dead` until its last
 * reference.
 * Locks: dc.lock (the table, entries' state, refs, dead) and dc.rlock (the
 * recent list) are leaves, never held together. A reference dropped on a
 * region record is dropped outside both (its end takes dc.lock).
 *
 * Prefetch: every read a host sends (hit or miss) goes on the recent list,
 * a ring of the last DPU_RECENT reads; prefetch workers (threads, waiting
 * on a condition variable) take them, and when the list shows that a read
 * continues a run (two reads before it, each ending where the next
 * starts: a sequential run, from one thread or several), load the entry
 * read and the prefetch_depth entries after it (at most a quarter of the
 * cache), those not cached yet, off the critical path (background reads,
 * handed to the back through dpu->up.loads). A read with no such
 * neighbours loads nothing: random reads would only load what is not read
 * again. A full cache evicts an entry with no reference, chosen at random
 * among those read whole since they were loaded, else among those read at
 * all, else among the rest (see dcache_slot_get).
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

static void *prefetch_main(void *arg);

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

/* Starts the prefetch workers. Front, at start. */
int
dpu_dcache_workers_start(struct dpu *dpu, char **cause)
{
	struct dpu_dcache *dc = &dpu->dc;
	unsigned n = (unsigned)cfg_int(dpu->d->cfg, CFG_DPU_PREFETCH_WORKERS);
	int err;

	for (dc->nworkers = 0; dc->nworkers < n; dc->nworkers++) {
		err = pthread_create(&dc->workers[dc->nworkers], NULL,
		    prefetch_main, dpu);
		if (err != 0) {
			*cause = xasprintf("cannot start a prefetch worker: %s",
			    strerror(err));
			return -err;
		}
	}
	return 0;
}

/* Stops the prefetch workers and empties the recent list. Front. */
void
dpu_dcache_quiesce(struct dpu *dpu)
{
	struct dpu_dcache *dc = &dpu->dc;

	pthread_mutex_lock(&dc->rlock);
	dc->stop = true;
	pthread_cond_broadcast(&dc->rcond);
	pthread_mutex_unlock(&dc->rlock);
	for (unsigned i = 0; i < dc->nworkers; i++)
		pthread_join(dc->workers[i], NULL);
	dc->nworkers = 0;
	while (dc->tail < dc->head) {
		dpu_mregion_put(dc->ring[dc->tail % DPU_RECENT].m);
		dc->tail++;
	}
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
	if (!e->used)
		DPU_INC(dpu, dyn_prefetch_wasted, 1);
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

/*
 * Finds a slot for a new entry: a free one, else one with no reference,
 * evicted. The victim is chosen at random, first among entries whose bytes
 * have all been read since they were loaded, then among those read at
 * all, then among the rest: a prefetched entry not read yet is what a run
 * reads next, and evicting it would waste its load and miss. Under
 * dc->lock; NULL when none.
 */
static struct dpu_centry *
dcache_slot_get(struct dpu *dpu, struct dpu_dcache *dc)
{
	struct dpu_centry *victim = NULL;
	unsigned start, rank = 3;

	dc->rnd ^= dc->rnd << 13;
	dc->rnd ^= dc->rnd >> 7;
	dc->rnd ^= dc->rnd << 17;
	start = (unsigned)(dc->rnd % dc->nentries);
	for (unsigned k = 0; k < dc->nentries && rank > 0; k++) {
		struct dpu_centry *e = &dc->entries[(start + k) % dc->nentries];
		unsigned r;

		if (e->state == CE_FREE) {
			dc->nused++;
			return e;
		}
		if (dc->nused < dc->nentries)
			continue; /* a free slot exists: take that */
		if (e->state != CE_VALID || e->refs > 0 || e->dead)
			continue;
		r = e->read_bytes >= e->len ? 0 : e->used ? 1 : 2;
		if (r < rank) {
			victim = e;
			rank = r;
		}
	}
	if (victim != NULL) {
		dcache_leaves(dpu, victim);
		dcache_unlink(dc, victim);
		DPU_INC(dpu, dyn_evictions, 1);
	}
	return victim;
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

/* Puts a read on the recent list and wakes a prefetch worker. Front. */
static void
recent_push(struct dpu *dpu, struct dpu_mregion *m, uint64_t off,
    uint32_t len)
{
	struct dpu_dcache *dc = &dpu->dc;
	struct dpu_mregion *old = NULL;

	atomic_fetch_add(&m->refs, 1);
	pthread_mutex_lock(&dc->rlock);
	if (dc->head - dc->tail == DPU_RECENT) {
		/* Full: the oldest is overwritten. */
		old = dc->ring[dc->tail % DPU_RECENT].m;
		dc->tail++;
	}
	dc->ring[dc->head % DPU_RECENT].m = m;
	dc->ring[dc->head % DPU_RECENT].off = off;
	dc->ring[dc->head % DPU_RECENT].len = len;
	dc->head++;
	pthread_cond_signal(&dc->rcond);
	pthread_mutex_unlock(&dc->rlock);
	DPU_INC(dpu, recent_pushed, 1);
	if (old != NULL) {
		DPU_INC(dpu, recent_dropped, 1);
		dpu_mregion_put(old);
	}
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

/* Counts the bytes of a hit on e that no hit served before. dc->lock. */
static void
dcache_served(struct dpu *dpu, struct dpu_centry *e, uint32_t from,
    uint32_t to)
{
	struct dpu_dcache *dc = &dpu->dc;
	uint64_t fresh = dcache_gran_mask(dc, from, to) & ~e->served;

	if (fresh == 0)
		return;
	e->served |= fresh;
	DPU_INC(dpu, dyn_load_served_bytes, dcache_mask_bytes(dc, e, fresh));
}

/*
 * Looks a read up in the dynamic cache and puts it on the recent list. A
 * hit fills hit (a reference on the entry, until hit->release). Returns
 * true on a hit. Front.
 */
bool
dpu_dcache_lookup(struct dpu *dpu, struct dpu_mregion *m, uint64_t off,
    uint32_t len, struct dpu_hit *hit)
{
	struct dpu_dcache *dc = &dpu->dc;
	uint64_t index = off >> dc->entry_shift;
	uint64_t base = index << dc->entry_shift;
	struct dpu_centry *e;
	bool found = false, loading = false;

	if (!atomic_load_explicit(&dc->enabled, memory_order_relaxed)) {
		if (dc->mode != CFG_DYNAMIC_ADAPTIVE || dc->probe_at == 0 ||
		    mono_ns() < dc->probe_at)
			return false;
		adaptive_switch(dpu, true, "probing its hit rate again");
	}
	DPU_INC(dpu, dyn_lookup_bytes, len);
	pthread_mutex_lock(&dc->lock);
	e = dcache_find(dc, m, index);
	if (e != NULL && e->state == CE_VALID && off + len <= base + e->len) {
		e->refs++;
		found = true;
		dcache_served(dpu, e, (uint32_t)(off - base),
		    (uint32_t)(off - base + len));
		e->read_bytes = len < e->len - e->read_bytes ?
		    e->read_bytes + len : e->len;
		if (!e->used) {
			e->used = true;
			DPU_INC(dpu, dyn_prefetch_used, 1);
		}
	} else
		loading = e != NULL && e->state == CE_LOADING;
	pthread_mutex_unlock(&dc->lock);
	recent_push(dpu, m, off, len);
	if (dc->mode == CFG_DYNAMIC_ADAPTIVE)
		adaptive_count(dpu, found);
	if (!found) {
		DPU_INC(dpu, dyn_misses, 1);
		if (loading)
			DPU_INC(dpu, dyn_loading, 1);
		return false;
	}
	hit->data = dcache_slot(dc, e) + (off - base);
	hit->dynamic = true;
	hit->release = dcache_sent;
	hit->arg = e;
	return true;
}

/*
 * Makes the load of entry index of m unless it is cached or loading.
 * Returns the load, NULL when there is nothing to do (or no room).
 * Prefetch worker.
 */
static struct dpu_req *
dcache_load_new(struct dpu *dpu, struct dpu_mregion *m, uint64_t index)
{
	struct dpu_dcache *dc = &dpu->dc;
	uint64_t off = index << dc->entry_shift;
	struct dpu_centry *e;
	struct dpu_req *q;

	if (off >= m->remote.size)
		return NULL;
	q = calloc(1, sizeof *q);
	if (q == NULL)
		return NULL;
	pthread_mutex_lock(&dc->lock);
	if (dcache_find(dc, m, index) != NULL ||
	    (e = dcache_slot_get(dpu, dc)) == NULL) {
		if (dcache_find(dc, m, index) == NULL)
			DPU_INC(dpu, dyn_full, 1);
		pthread_mutex_unlock(&dc->lock);
		free(q);
		return NULL;
	}
	e->m = m;
	e->index = index;
	e->len = (uint32_t)(m->remote.size - off < dc->entry_size ?
	    m->remote.size - off : dc->entry_size);
	e->state = CE_LOADING;
	e->dead = false;
	e->used = false;
	e->read_bytes = 0;
	e->served = 0;
	e->refs = 1;
	e->hnext = dc->table[dcache_bucket(dc, m, index)];
	dc->table[dcache_bucket(dc, m, index)] = e;
	pthread_mutex_unlock(&dc->lock);
	q->kind = DR_LOAD;
	q->dpu = dpu;
	q->m = m;
	atomic_fetch_add(&m->refs, 1);
	q->off = off;
	q->len = e->len;
	q->buf = dcache_slot(dc, e);
	q->flags = FAM_F_BACKGROUND;
	q->entry = e;
	q->start_ns = mono_ns();
	DPU_INC(dpu, dyn_loads, 1);
	return q;
}

/* Returns the recent read of m that ended at off, or NULL. Under rlock. */
static const struct dpu_recent *
recent_ending_at(struct dpu_dcache *dc, const struct dpu_mregion *m,
    uint64_t off)
{
	uint64_t lo = dc->head > DPU_RECENT ? dc->head - DPU_RECENT : 0;

	for (uint64_t i = lo; i < dc->head; i++) {
		const struct dpu_recent *x = &dc->ring[i % DPU_RECENT];

		if (x->m == m && x->len > 0 && x->off + x->len == off)
			return x;
	}
	return NULL;
}

/*
 * Returns true when the recent list shows r continuing a run: a read that
 * ended where r starts, and one that ended where that one started. A
 * random read has such neighbours rarely. Under dc->rlock.
 */
static bool
recent_continues(struct dpu_dcache *dc, const struct dpu_recent *r)
{
	const struct dpu_recent *p = recent_ending_at(dc, r->m, r->off);

	return p != NULL && p->off >= p->len &&
	    recent_ending_at(dc, r->m, p->off) != NULL;
}

/* Returns true when index of m lies in a range already handled. */
static bool
prefetch_covered(struct dpu_mregion *const *cm, const uint64_t *hi,
    unsigned ncov, const struct dpu_mregion *m, uint64_t index)
{
	for (unsigned i = 0; i < ncov; i++)
		if (cm[i] == m && index <= hi[i])
			return true;
	return false;
}

/*
 * A prefetch worker: takes every read waiting on the recent list and, from
 * the newest back, loads ahead of those that continue a run. A newer read
 * of a run covers the older ones (the run has moved past them), so a
 * worker that fell behind catches up at once instead of loading behind
 * the reader.
 */
static void *
prefetch_main(void *arg)
{
	struct dpu *dpu = arg;
	struct dpu_dcache *dc = &dpu->dc;
	struct dpu_recent items[DPU_RECENT];
	bool run[DPU_RECENT];
	struct dpu_mregion *cm[8];
	uint64_t chi[8];

	for (;;) {
		struct dpu_reqq list;
		unsigned n = 0, nq = 0, ncov = 0, depth;

		pthread_mutex_lock(&dc->rlock);
		while (!dc->stop && dc->tail == dc->head)
			pthread_cond_wait(&dc->rcond, &dc->rlock);
		if (dc->stop) {
			pthread_mutex_unlock(&dc->rlock);
			return NULL;
		}
		while (dc->tail < dc->head && n < DPU_RECENT) {
			items[n] = dc->ring[dc->tail % DPU_RECENT];
			run[n] = recent_continues(dc, &items[n]);
			dc->tail++;
			n++;
		}
		pthread_mutex_unlock(&dc->rlock);
		TAILQ_INIT(&list);
		/*
		 * A run never loads more than a quarter of the cache ahead:
		 * deeper, a few runs' loads would fill the cache with
		 * entries none has read yet, and evict each other.
		 */
		depth = atomic_load(&dc->depth);
		if (depth > dc->nentries / 4)
			depth = dc->nentries / 4;
		for (unsigned i = n; i-- > 0;) {
			uint64_t index = items[i].off >> dc->entry_shift;

			if (!run[i] || prefetch_covered(cm, chi, ncov, items[i].m,
			    index) || !atomic_load_explicit(&dc->enabled,
			    memory_order_relaxed))
				continue;
			for (unsigned k = 0; k <= depth; k++) {
				struct dpu_req *q = dcache_load_new(dpu,
				    items[i].m, index + k);

				if (q == NULL)
					continue;
				TAILQ_INSERT_TAIL(&list, q, link);
				nq++;
			}
			if (ncov < nitems(cm)) {
				cm[ncov] = items[i].m;
				chi[ncov++] = index + depth;
			}
		}
		if (nq > 0)
			dpu->up.loads(dpu, &list, nq);
		for (unsigned i = 0; i < n; i++)
			dpu_mregion_put(items[i].m);
	}
}

/* A dynamic load is over: the entry is valid, or goes. Back. */
void
dpu_dcache_load_done(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_dcache *dc = &dpu->dc;
	struct dpu_centry *e = q->entry;

	pthread_mutex_lock(&dc->lock);
	if (q->status == 0 && !e->dead)
		e->state = CE_VALID;
	else if (!e->dead) {
		dcache_unlink(dc, e);
		e->dead = true;
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

/* A write the memory node has: a cached entry gets it too. Back. */
void
dpu_dcache_write(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_dcache *dc = &dpu->dc;
	uint64_t end = q->off + q->len;

	for (uint64_t index = q->off >> dc->entry_shift;
	    (index << dc->entry_shift) < end; index++) {
		uint64_t base = index << dc->entry_shift;
		uint64_t from = q->off > base ? q->off : base;
		uint64_t to = end < base + dc->entry_size ? end :
		    base + dc->entry_size;
		struct dpu_centry *e;

		pthread_mutex_lock(&dc->lock);
		e = dcache_find(dc, q->m, index);
		if (e != NULL && !e->dead && e->state == CE_LOADING) {
			/* Its load may land older data: it is not used. */
			dcache_unlink(dc, e);
			e->dead = true;
			e = NULL;
		} else if (e != NULL && !e->dead && to - base <= e->len)
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
