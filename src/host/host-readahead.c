/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-readahead.c - read-ahead: the sequential runs of faults in each
 * region, and the chunks fetched ahead of them.
 *
 * Owns: each region's runs (region.ra[], region.ra_window), and which
 *   loops' chunks are kept (frame.kept, host.kept_pages, keep_target;
 *   the hand honours them in host-buffer.c).
 * A run: a fault just past a run's last one (or within what it read
 *   ahead) doubles its window, from 2 up to host_ra_max() chunks, and absent
 *   chunks in the window are fetched as read-ahead (host_fetch_start()); a
 *   fault that belongs to no run starts one, in a free slot or that of the
 *   run unused longest.
 * Locks: none; everything runs on the control loop.
 */
#include "config.h"

#include "host/host.h"

/* Forgets r's sequential runs (a new region, or one taken over). */
void
host_ra_reset(struct region *r)
{
	for (unsigned i = 0; i < HOST_RA_STREAMS; i++)
		r->ra[i] = (struct ra_stream){ .last = UINT64_MAX };
	r->ra_window = 0;
}

/*
 * The run of r a fault on chunk c belongs to: one that c continues (past
 * its last fault, within what it read ahead or just after its last
 * fault); else one whose last fault c is at most its window behind (a
 * thread a little behind another in a shared sweep); else a free one, or
 * the one unused longest, started at c. Threads sharing a sweep fault a
 * little behind and ahead of each other, and a sweep of several parts (a
 * loop reading two arrays of one block, two threads each on its half)
 * makes several runs: each keeps its window instead of every fault
 * restarting one.
 */
static struct ra_stream *
ra_stream_of(struct region *r, uint64_t c)
{
	struct ra_stream *st, *pick = NULL;

	for (unsigned i = 0; i < HOST_RA_STREAMS; i++)
		r->ra[i].used++;
	/* pass 0: runs c continues; pass 1: runs c is a little behind */
	for (unsigned pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < HOST_RA_STREAMS; i++) {
			uint64_t behind, front;

			st = &r->ra[i];
			if (st->last == UINT64_MAX)
				continue;
			behind = st->window > 2 ? st->window : 2;
			front = st->next > st->last + 1 ? st->next :
			    st->last + 1;
			if (c > front || (pass == 0 ? c <= st->last :
			    c + behind < st->last))
				continue;
			st->used = 0;
			return st;
		}
	}
	for (unsigned i = 0; i < HOST_RA_STREAMS; i++) {
		st = &r->ra[i];
		if (pick == NULL || st->last == UINT64_MAX ||
		    (pick->last != UINT64_MAX && st->used > pick->used))
			pick = st;
		if (st->last == UINT64_MAX)
			break;
	}
	*pick = (struct ra_stream){ .last = UINT64_MAX, .next = c + 1 };
	return pick;
}

/*
 * The largest read-ahead window, in chunks: `prefetch`, but past
 * HOST_RA_SMALL chunks no more than lets HOST_RA_STREAMS runs' whole
 * windows take a quarter of the buffer (a small buffer would evict what
 * was read ahead before its run reached it).
 */
unsigned
host_ra_max(const struct host *h)
{
	uint64_t max = (uint64_t)cfg_int(h->d->cfg, CFG_HOST_PREFETCH);
	uint64_t fit = h->npages / h->chunk_pages / (4 * HOST_RA_STREAMS);

	if (fit < HOST_RA_SMALL)
		fit = HOST_RA_SMALL;
	return (unsigned)(max < fit ? max : fit);
}

/*
 * Reads ahead of a sequential run of faults: the window doubles from 2 up
 * to host_ra_max() chunks while faults keep landing just past the run's last
 * one. Once the window is whole, it is topped up only when a run of chunks
 * to read together (FETCH_RUN_BYTES, at most half the window) is missing
 * from it, not one chunk per fault.
 */
void
host_prefetch(struct host *h, struct region *r, uint64_t c)
{
	unsigned max = host_ra_max(h);
	unsigned run = FETCH_RUN_BYTES >> h->chunk_shift;
	uint64_t high = h->npages * h->high_pct / 100, end;
	struct ra_stream *st;

	if (max == 0 || r->advice == FAM_ADVICE_RANDOM)
		return;
	if (run > max / 2)
		run = max / 2;
	st = ra_stream_of(r, c);
	if (st->last != UINT64_MAX && c > st->last) {
		st->window = st->window == 0 ? 2 : st->window * 2;
		if (st->window > max)
			st->window = max;
	}
	if (st->last == UINT64_MAX || c > st->last)
		st->last = c;
	r->ra_window = st->window;
	if (st->window == 0)
		return;
	if (st->next < c + 1)
		st->next = c + 1;
	if (st->window == max && st->next - (c + 1) + run > max)
		return;
	end = c + 1 + st->window;
	if (end > r->nchunks)
		end = r->nchunks;
	for (; st->next < end; st->next++) {
		struct chunk *ch = &r->chunks[st->next];

		if (h->pages_used >= high)
			break;
		if (ch->state == CH_ABSENT && !host_fork_pending(r, st->next))
			host_fetch_start(h, r, st->next, true, 0, 0);
	}
}

/*
 * Loops (clock): a sequential run that reads a region again (again: its
 * chunk had left the buffer) makes the region a loop's for two laps of the
 * hand. A loop's chunks that come in for its runs (read ahead, or faulted
 * while a run's window is open) while the kept frames are under
 * `loop_keep` percent of the buffer are kept: the hand passes
 * them while the region still loops, so each sweep finds them in place
 * and reads only the rest, instead of evicting each chunk just before the
 * sweep comes back to it (a clock or an LRU over a loop larger than the
 * buffer misses every time). A region that stopped looping loses its kept
 * chunks as the hand meets them. What is kept leaves room for twice the
 * read-ahead windows of HOST_RA_STREAMS runs and the write-backs in
 * flight, and the hot chunks used at random (host_frame_heat()): in a
 * small buffer, kept chunks would push out what was read ahead before it
 * is used. Balanced against chunks used at random
 * (h->keep_target): a loop's chunk read again raises the target by a
 * chunk, a refault of one used at random lowers it (host_loop_refault()),
 * and kept chunks past it leave as the hand meets them.
 */
void
host_loop_keep(struct host *h, struct region *r, uint32_t frame, bool again)
{
	struct frame *fr = &h->frames[frame];
	uint64_t max = h->npages *
	    (uint64_t)cfg_int(h->d->cfg, CFG_HOST_LOOP_KEEP) / 100, room;

	if (max == 0 ||
	    cfg_int(h->d->cfg, CFG_HOST_EVICTION) != CFG_EVICTION_CLOCK)
		return; /* off (the default) */
	if (again)
		r->loop_lap = h->hand_laps + 1;
	room = ((uint64_t)host_ra_max(h) * 2 *
	    HOST_RA_STREAMS + h->writebacks_inflight) * h->chunk_pages +
	    h->hot_pages;
	if (h->npages < room + max)
		max = h->npages > room ? h->npages - room : 0;
	if (again && !fr->kept && h->keep_target < max)
		h->keep_target += fr->pages; /* more kept would have had it */
	if (max > h->keep_target)
		max = h->keep_target;
	if (r->loop_lap == 0 || r->loop_lap + 2 <= h->hand_laps || fr->kept ||
	    h->kept_pages + fr->pages > max)
		return; /* not (or no longer) a loop's, or room for no more */
	fr->kept = true;
	h->kept_pages += fr->pages;
}

/* A chunk used at random came back soon after it left: less kept. */
void
host_loop_refault(struct host *h)
{
	h->keep_target -= h->keep_target < h->chunk_pages ? h->keep_target :
	    h->chunk_pages;
}
