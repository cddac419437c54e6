/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-grain.c - fetch = adaptive: how much of a chunk a fault reads.
 *
 * Owns: each region's density, measured on the chunks read in part
 * (CH_PARTIAL): the grains in place as one leaves the buffer, or all of
 * them once half are in place; and the choice it makes for the next
 * demand fetch: one grain (a 64th of a chunk, 4 KiB at the least: the
 * faulting page's) while the density is under half, else the whole
 * chunk; a region read whole still reads one demand fetch in 16 in part,
 * so that its density stays measured. Sequential faults (within two
 * grains after one of the last four), replicated regions, forks' copies
 * and their sources, and install = continue read whole chunks.
 * Whether a fetch goes in writable (host_fetch_writable(): a thread that
 * waits for it faulted writing, read-ahead of a run that writes).
 * Whether grains go in writable (the chunk taken as dirty at once, no
 * write-protect fault to come): into a chunk already written, and where
 * most partial chunks of the region leave the buffer dirty (counted as
 * they leave: host_grain_left()).
 * Below the fault service, above the buffer. A partial chunk's grain
 * bits, and the density counted as chunks leave the buffer: host.h
 * (struct chunk: present; host_grain_evicted()).
 * Locks: none; everything runs on the control loop.
 */
#include "config.h"

#include <stdlib.h>

#include <linux/userfaultfd.h>

#include <jansson.h>

#include "host/host.h"

#define GRAIN_SAMPLES 8   /* partial chunks evicted before density counts */
#define GRAIN_PROBE   16  /* a dense region's demand fetches per probe */
#define GRAIN_WRITTEN 75  /* percent of partial chunks leaving dirty above
                           * which grains go in writable */

/* Reads [host] fetch and sizes a grain for the chunk size. */
void
host_grain_init(struct host *h)
{
	h->adaptive = cfg_int(h->d->cfg, CFG_HOST_FETCH) == CFG_FETCH_ADAPTIVE;
	h->grain_shift = h->chunk_shift > 18 ? h->chunk_shift - 6 : 12;
	h->chunk_pages = h->chunk >> 12;
}

/* Returns the grain bits of grains [first, first + n). */
uint64_t
host_grain_mask(unsigned first, unsigned n)
{
	return (n >= 64 ? ~0ull : ((1ull << n) - 1)) << first;
}

/* Returns the density of r in percent of a chunk, or -1 when unknown. */
static int
grain_density(const struct host *h, const struct region *r)
{
	uint64_t per = h->chunk >> h->grain_shift;

	if (r->grain_chunks < GRAIN_SAMPLES)
		return -1;
	return (int)(r->grain_used * 100 / (r->grain_chunks * per));
}

/*
 * Tells whether r's chunks may be read in grains (fetch = adaptive): not
 * with install = continue, nor in a replicated or erasure-coded region
 * (ncopies N, or K + M), a fork's copy or its source. (host-reclaim.c
 * asks it too: elsewhere a chunk partly in place is no partial chunk.)
 */
bool
host_grain_region(const struct host *h, const struct region *r)
{
	return h->adaptive && !h->cont_ok && h->grain_shift < h->chunk_shift &&
	    r->ncopies <= 1 && r->src == NULL && r->copies == NULL;
}

/*
 * Returns the grains a demand fetch of r reads (0: the whole chunk), and
 * remembers it as the region's fetch size in use.
 */
unsigned
host_grain_choose(struct host *h, struct region *r)
{
	int density;

	if (!host_grain_region(h, r) || r->cl->forking || r->ra_window > 0)
		return 0;
	density = grain_density(h, r);
	if (density < 0 || density < 50) {
		r->grain_n = 1;
		return 1;
	}
	r->grain_n = 0;
	if (++r->whole_fetches % GRAIN_PROBE == 0)
		return 1;
	return 0;
}

/* Describes r's fetch size and density (famctl regions). */
json_t *
host_grain_json(const struct host *h, const struct region *r)
{
	uint64_t partial = 0;

	for (uint64_t c = 0; h->adaptive && c < r->nchunks; c++)
		partial += (r->chunks[c].flags & CH_PARTIAL) != 0 &&
		    r->chunks[c].state != CH_ABSENT;
	return json_pack("{s:I,s:I,s:I,s:i,s:I,s:I}",
	    "handle", (json_int_t)r->handle,
	    "bytes", (json_int_t)r->size,
	    "fetch_bytes", (json_int_t)(h->adaptive && r->grain_n > 0 ?
	    (uint64_t)r->grain_n << h->grain_shift : h->chunk),
	    "density_pct", grain_density(h, r),
	    "partial_chunks", (json_int_t)partial,
	    "partial_fetches", (json_int_t)r->grain_fetches);
}

/* Returns the pages of the buffer a read of f takes. */
uint32_t
host_grain_pages(const struct host *h, const struct fetch *f)
{
	if (f->g_n == 0)
		return (uint32_t)h->chunk_pages;
	return (uint32_t)(((uint64_t)f->g_n << h->grain_shift) >> 12);
}

/* Returns the bytes f reads (its grains, or the whole chunk). */
uint64_t
host_grain_bytes(const struct host *h, const struct fetch *f)
{
	return f->g_n > 0 ? (uint64_t)f->g_n << h->grain_shift : h->chunk;
}

/*
 * Decides what demand fetch f of absent chunk c, faulted at off in r,
 * reads: its grain alone, or the whole chunk (sequential faults, a dense
 * region, the last chunk of a file, a fork's sharing).
 */
void
host_grain_start(struct host *h, struct fetch *f, uint64_t off)
{
	struct region *r = f->r;
	unsigned si;
	uint64_t soff = host_stripe_offset(h, r, f->chunk, &si);
	unsigned n;

	if (!h->adaptive || f->src != NULL || host_grain_sequential(h, r, off) ||
	    host_stripe_len(h, &r->stripes[si], soff) != h->chunk)
		return;
	n = host_grain_choose(h, r);
	if (n == 0)
		return;
	f->g_first = (unsigned)((off & (h->chunk - 1)) >> h->grain_shift);
	f->g_n = n;
	r->grain_fetches++;
}

/*
 * Tells whether a fault at off of r follows one of the recent ones closely
 * (within two grains after it): a sequential run, read whole. Threads
 * scanning apart are runs each (a stream per recent fault). Remembers off
 * in place of the fault it follows, or of the oldest.
 */
bool
host_grain_sequential(const struct host *h, struct region *r, uint64_t off)
{
	unsigned n = nitems(r->grain_last);

	for (unsigned i = 0; i < n; i++) {
		uint64_t last = r->grain_last[i];

		if (last != 0 && off + 1 >= last &&
		    off + 1 - last <= (2ull << h->grain_shift)) {
			r->grain_last[i] = off + 1;
			return true;
		}
	}
	r->grain_last[r->grain_lasti] = off + 1;
	r->grain_lasti = (r->grain_lasti + 1) % n;
	return false;
}

/*
 * Makes a fetch of the grain at off of partial chunk c of r (resident,
 * or being written back), for thread tid; marks the chunk CH_GROWING.
 * Returns it for the demand queue, or NULL when memory is short.
 */
struct fetch *
host_grain_grow(struct host *h, struct region *r, uint64_t c, uint64_t off,
    pid_t tid, uint64_t addr)
{
	struct chunk *ch = &r->chunks[c];
	struct fetch *f = calloc(1, sizeof *f);

	if (f == NULL)
		return NULL;
	host_grain_sequential(h, r, off);
	f->r = r;
	f->chunk = c;
	f->frame = -1;
	f->grow = true;
	f->g_first = (unsigned)((off & (h->chunk - 1)) >> h->grain_shift);
	f->g_n = 1;
	f->zero = !(ch->flags & CH_REMOTE);
	f->start_ns = f->fault_ns = mono_ns();
	f->waiters[0] = tid;
	f->waddr[0] = addr;
	f->nwaiters = 1;
	ch->flags |= CH_GROWING;
	ch->fetch = f;
	r->busy++;
	h->stats.grain_grows++;
	return f;
}

/*
 * Tells whether f's grains go in writable, the chunk taken as dirty, with
 * no write-protect fault to come: more of a chunk whose write protection
 * is lifted (dirty already), or, where most partial chunks leave the
 * buffer dirty, a grain a thread faulted on (it will be written).
 * A write-back protects the whole chunk first, as it does for any.
 */
bool
host_grain_writable(const struct fetch *f)
{
	const struct region *r = f->r;
	const struct chunk *ch = &r->chunks[f->chunk];

	if (f->g_n == 0 || f->direct || f->src != NULL || r->copies != NULL ||
	    r->cl->forking || (r->flags & FAM_S_ALLOC_SHARED))
		return false;
	if (f->grow && ch->state == CH_RESIDENT &&
	    (ch->flags & (CH_UNPROT | CH_DIRTY)) == (CH_UNPROT | CH_DIRTY))
		return true;
	return f->nwaiters > 0 && (!f->grow || ch->state == CH_RESIDENT) &&
	    r->left >= GRAIN_SAMPLES &&
	    r->left_dirty * 100 >= (uint64_t)r->left * GRAIN_WRITTEN;
}

/*
 * Tells whether f goes in writable, its chunk taken as dirty: where
 * host_grain_writable() says so, where a thread that waits for it faulted
 * writing (it writes as soon as it wakes: write-protected, it would fault
 * again at once), and read ahead of a sequential run that writes. Not
 * where a write must be seen: a fork's copy or its source, a fork being
 * made, a read-only shared region, a file's last chunk that extends past
 * what the memory node holds, more of a chunk being written back.
 */
bool
host_fetch_writable(struct host *h, const struct fetch *f)
{
	const struct region *r = f->r;
	unsigned si;
	uint64_t off;

	if (host_grain_writable(f))
		return true;
	if (!f->wfault || f->src != NULL || r->copies != NULL ||
	    r->cl->forking || (r->flags & FAM_S_ALLOC_SHARED) ||
	    (f->grow && r->chunks[f->chunk].state != CH_RESIDENT))
		return false;
	off = host_stripe_offset(h, r, f->chunk, &si);
	return host_stripe_len(h, &r->stripes[si], off) >= h->chunk;
}

/* A thread faulted writing on chunk ch: the read it waits for knows. */
void
host_fetch_wants_write(struct chunk *ch, uint64_t flags)
{
	if ((flags & UFFD_PAGEFAULT_FLAG_WRITE) && ch->fetch != NULL &&
	    (ch->state == CH_FETCHING || (ch->flags & CH_GROWING)))
		ch->fetch->wfault = true;
}

/*
 * f's grains went in writable: its chunk is dirty, its protection lifted
 * (a write-back or the hand protects it again).
 */
void
host_grain_written(struct host *h, struct fetch *f)
{
	struct chunk *ch = &f->r->chunks[f->chunk];

	if (!f->writable)
		return;
	ch->flags |= CH_UNPROT | CH_REF;
	if (!(ch->flags & CH_DIRTY)) {
		ch->flags |= CH_DIRTY;
		f->r->dirty++;
		h->dirty++;
	}
}

/* A read of part of a chunk was installed: its grains are in place. */
void
host_grain_installed(struct host *h, struct fetch *f)
{
	struct chunk *ch = &f->r->chunks[f->chunk];
	uint64_t mask = host_grain_mask(f->g_first, f->g_n);

	if (f->g_n == 0)
		return;
	if (f->grow) {
		ch->fetch = NULL;
		ch->flags &= ~CH_GROWING;
		ch->flags |= CH_REF; /* used again: a second chance */
		ch->present |= mask;
		/* dense already: counted now, not only if it leaves */
		if (host_grain_count(h, ch) * 2 >= h->chunk >> h->grain_shift)
			host_grain_evicted(h, f->r, ch);
	} else {
		ch->flags |= CH_PARTIAL;
		ch->present = mask;
	}
	h->stats.grain_fetches++;
	h->stats.grain_bytes += host_grain_bytes(h, f);
}

/*
 * A read of more grains of a resident chunk failed or was dropped: the
 * chunk stays as it was, its frame gives the pages back.
 */
void
host_grain_ungrown(struct host *h, struct fetch *f)
{
	struct chunk *ch = &f->r->chunks[f->chunk];

	if (!f->r->dying && ch->fetch == f) {
		ch->flags &= ~CH_GROWING;
		ch->fetch = NULL;
		if (f->g_pages > 0)
			host_frame_grow(h, ch->frame, -(int64_t)f->g_pages);
	}
	f->g_pages = 0;
}

/*
 * Records thread tid, faulting at addr, as a waiter of f: its page is
 * installed by f, or asked for again when f is over (host-fault.c).
 * Returns false when f has no room left for it.
 */
bool
host_grain_wait(struct fetch *f, pid_t tid, uint64_t addr)
{
	for (unsigned i = 0; i < f->nwaiters; i++)
		if (f->waiters[i] == tid) {
			f->waddr[i] = addr;
			return true;
		}
	if (f->nwaiters >= nitems(f->waiters))
		return false;
	f->waddr[f->nwaiters] = addr;
	f->waiters[f->nwaiters++] = tid;
	return true;
}

/*
 * Sets *at and *len to what f's waiter i gets SIGBUS for: the chunk (its
 * missing pages), or for a partial fetch the grain where it faulted.
 */
void
host_grain_span(const struct host *h, const struct fetch *f, unsigned i,
    uint64_t *at, uint64_t *len)
{
	uint64_t grain = (uint64_t)1 << h->grain_shift;

	if (f->g_n == 0 || f->waddr[i] == 0) {
		*at = f->r->ar->uaddr + f->r->off + (f->chunk << h->chunk_shift);
		*len = h->chunk;
	} else {
		*at = f->waddr[i] & ~(grain - 1);
		*len = grain;
	}
}
