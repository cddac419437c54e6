/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu-cache-prefetch.c - the dynamic cache's prefetch: the recent list (a
 * ring of the last DPU_RECENT reads hosts sent) and the prefetch workers
 * (threads) that load ahead of the reads that continue a run.
 *
 * Owns: dc.ring, dc.head, dc.tail, dc.streams, the workers.
 * Locks: dc.rlock (the recent list; a leaf). The loads are made under
 * dc.lock (dpu_dcache_load_new), never with dc.rlock held.
 *
 * A read continues a run when the recent list has a read that ended where
 * it starts, and one that ended where that one started (a sequential run,
 * from one thread or several); "where" allows a gap up to half the later
 * read, the chunks a host skips because it still holds them (a stride of
 * reads with gaps as long as themselves is not a run). Its
 * prefetch loads from the byte after its
 * end twice the run's length so far, at most prefetch_depth entries past
 * that byte's entry and half the cache: the granules neither valid,
 * loading nor being forwarded, off the critical path (handed to the back
 * through dpu->up.loads). A read with no such neighbours loads nothing:
 * random reads would only load what is not read again.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dpu/dpu-cache.h"

static void *prefetch_main(void *arg);

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

/* Puts a read on the recent list and wakes a prefetch worker. Front. */
void
dpu_recent_push(struct dpu *dpu, struct dpu_mregion *m, uint64_t off,
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

/*
 * Returns the recent read of m that ended at off, or at most gap bytes
 * before it (the nearest), or NULL. Under rlock.
 */
static const struct dpu_recent *
recent_ending_at(struct dpu_dcache *dc, const struct dpu_mregion *m,
    uint64_t off, uint64_t gap)
{
	uint64_t lo = dc->head > DPU_RECENT ? dc->head - DPU_RECENT : 0;
	const struct dpu_recent *best = NULL;

	for (uint64_t i = lo; i < dc->head; i++) {
		const struct dpu_recent *x = &dc->ring[i % DPU_RECENT];
		uint64_t end = x->off + x->len;

		if (x->m != m || x->len == 0 || end > off || end + gap < off)
			continue;
		if (end == off)
			return x;
		if (best == NULL || end > best->off + best->len)
			best = x;
	}
	return best;
}

/*
 * Returns true when the recent list shows r continuing a run: a read that
 * ended where r starts, and one that ended where that one started. A
 * random read has such neighbours rarely. Under dc->rlock.
 */
static bool
recent_continues(struct dpu_dcache *dc, const struct dpu_recent *r)
{
	const struct dpu_recent *p = recent_ending_at(dc, r->m, r->off,
	    r->len / 2);

	return p != NULL && p->off >= p->len &&
	    recent_ending_at(dc, r->m, p->off, p->len / 2) != NULL;
}

/*
 * Returns the bytes of the run r ends, as the recent list shows it (up to
 * limit). Under dc->rlock.
 */
static uint64_t
recent_run_bytes(struct dpu_dcache *dc, const struct dpu_recent *r,
    uint64_t limit)
{
	uint64_t bytes = r->len, off = r->off, gap = r->len / 2;
	const struct dpu_recent *p;

	for (unsigned k = 0; k < DPU_RECENT && bytes < limit && off > 0 &&
	    (p = recent_ending_at(dc, r->m, off, gap)) != NULL; k++) {
		bytes += p->len;
		off = p->off;
		gap = p->len / 2;
	}
	return bytes;
}

/*
 * Returns how many runs the recent list shows going on: reads that
 * continue a run and that no read continues yet (at least 1). Under
 * dc->rlock.
 */
static unsigned
recent_streams(struct dpu_dcache *dc)
{
	uint64_t lo = dc->head > DPU_RECENT ? dc->head - DPU_RECENT : 0;
	unsigned n = 0;

	for (uint64_t i = lo; i < dc->head; i++) {
		const struct dpu_recent *x = &dc->ring[i % DPU_RECENT];
		bool continued = false;

		if (x->len == 0 ||
		    recent_ending_at(dc, x->m, x->off, x->len / 2) == NULL)
			continue;
		for (uint64_t j = lo; j < dc->head && !continued; j++) {
			const struct dpu_recent *y = &dc->ring[j % DPU_RECENT];

			continued = y->m == x->m && y->len > 0 &&
			    y->off >= x->off + x->len &&
			    y->off <= x->off + x->len + y->len / 2;
		}
		n += !continued;
	}
	return n > 0 ? n : 1;
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
 * Loads ahead of a read that continues a run: from the byte after its end,
 * twice the run's length so far, at most to prefetch_depth entries past
 * the entry that byte is in (a run that stops wastes little), what is not
 * cached, loading or being forwarded. Returns the loads made (onto list).
 * Prefetch worker.
 */
static unsigned
prefetch_run(struct dpu *dpu, const struct dpu_recent *r, uint64_t run,
    unsigned depth, struct dpu_reqq *list)
{
	struct dpu_dcache *dc = &dpu->dc;
	uint64_t end = r->off + r->len;
	uint64_t index = end >> dc->entry_shift;
	uint64_t last = (end + 2 * run - 1) >> dc->entry_shift;
	unsigned nq = 0;

	if (last > index + depth)
		last = index + depth;
	for (unsigned k = 0; index + k <= last; k++) {
		uint32_t from = k == 0 ? (uint32_t)(end & (dc->entry_size - 1)) :
		    0;
		struct dpu_req *q;

		/* An entry may need several loads (runs of absent granules). */
		while ((q = dpu_dcache_load_new(dpu, r->m, index + k, from)) !=
		    NULL) {
			TAILQ_INSERT_TAIL(list, q, link);
			nq++;
			from = (uint32_t)(q->off + q->len - ((index + k) <<
			    dc->entry_shift));
		}
	}
	return nq;
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
	uint64_t run[DPU_RECENT];
	struct dpu_mregion *cm[8];
	uint64_t chi[8];

	for (;;) {
		struct dpu_reqq list;
		unsigned n = 0, nq = 0, ncov = 0, depth, share, streams;

		pthread_mutex_lock(&dc->rlock);
		while (!dc->stop && dc->tail == dc->head)
			pthread_cond_wait(&dc->rcond, &dc->rlock);
		if (dc->stop) {
			pthread_mutex_unlock(&dc->rlock);
			return NULL;
		}
		/*
		 * Each run going on gets its share of the cache: the entries
		 * it loads ahead, the one it reads and the one it just left
		 * (streams x (depth + 2) entries at most); deeper, runs' loads
		 * would evict each other's entries before they are read.
		 */
		depth = atomic_load(&dc->depth);
		streams = recent_streams(dc);
		dc->streams = streams;
		share = dc->nentries / streams;
		share = share > 3 ? share - 2 : 1;
		if (share > dc->nentries / 2 - 1)
			share = dc->nentries / 2 - 1;
		if (depth > share)
			depth = share;
		while (dc->tail < dc->head && n < DPU_RECENT) {
			items[n] = dc->ring[dc->tail % DPU_RECENT];
			run[n] = recent_continues(dc, &items[n]) ?
			    recent_run_bytes(dc, &items[n],
			    (uint64_t)depth << dc->entry_shift) : 0;
			dc->tail++;
			n++;
		}
		pthread_mutex_unlock(&dc->rlock);
		TAILQ_INIT(&list);
		for (unsigned i = n; i-- > 0;) {
			uint64_t index = (items[i].off + items[i].len) >>
			    dc->entry_shift;

			if (run[i] == 0 || prefetch_covered(cm, chi, ncov, items[i].m,
			    index) || !atomic_load_explicit(&dc->enabled,
			    memory_order_relaxed))
				continue;
			nq += prefetch_run(dpu, &items[i], run[i], depth, &list);
			if (ncov < nitems(cm)) {
				cm[ncov] = items[i].m;
				chi[ncov++] = index;
			}
		}
		if (nq > 0)
			dpu->up.loads(dpu, &list, nq);
		for (unsigned i = 0; i < n; i++)
			dpu_mregion_put(items[i].m);
	}
}
