/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-buffer.c - the node-wide buffer: `buffer_size` bytes of frames
 * shared by every region of every program, the staging slots reads land
 * in, and the eviction that keeps room.
 *
 * Owns: frames (free list, hand, evict_gen, hot ones: frame.hot,
 * host.hot_pages), staging slots, write-backs in
 * flight (at most MAX_WRITEBACKS; one write per copy of the chunk, a copy
 * it cannot reach marked stale), the late write-backs (h->late: below),
 * the clean/dirty counts.
 * write_quorum N: a write-back of a replicated (or erasure-coded) chunk
 *   goes from a copy of the chunk it holds (wb->hold), and its chunk is
 *   clean once N copies acknowledged; it is then late until its other
 *   writes are over, each such copy stale meanwhile (no read goes there)
 *   and made up to date by its write, unless a later write-back of the
 *   chunk began (superseded: that one's writes decide; it skips the copies
 *   still being written, leaving them stale for the rebuild).
 * Chunk states it moves: RESIDENT -> ABSENT (clean: punched at once),
 *   RESIDENT -> EVICTING -> ABSENT (dirty: write-protected, written back
 *   from famd's mapping, punched; written again meanwhile: stays RESIDENT,
 *   dirty).
 * Policy: `clock` gives a second chance to chunks faulted at random or
 * written since the hand passed (and re-protects dirty ones as it passes,
 * so later writes count), HOST_HEAT more to refaulted ones (with kept
 * loops, HOST_HOT_LAPS to those used at random, up to a third of the
 * buffer); chunks of a sequential run get none, but a loop's (a run
 * reading its region again) are kept, up to `loop_keep` percent of the
 * buffer, while it loops. `fifo` evicts in arrival order. Above
 * high_watermark, background eviction runs down to low_watermark.
 * Refaults: a chunk read in for a fault less than a buffer's worth of
 * evicted pages after it left (chunk.ghost: when it left, on a 16-bit
 * clock of evicted pages) is counted, to tell how well the hand chooses,
 * and is heated: HOST_HEAT more passes (host_frame_heat()).
 * Locks: none; everything runs on the control loop.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "host/host.h"
#include "host/host-ec.h"
#include "host/host-uffd.h"

#define MAX_WRITEBACKS 64
#define WB_HOLD_MIN ((uint64_t)64 << 20) /* write_quorum's copies: room */
#define GHOST_TICKS    1024 /* ghost clock units in a buffer's pages */
#define GRAIN_FRAMES_MAX ((uint64_t)1 << 22) /* frames for partial chunks */

struct writeback;

/*
 * A write-back's write to one copy (or fragment, ec:K+M) of its chunk
 * (partial: of a run of it).
 */
struct wb_copy {
	struct writeback *wb;
	struct stripe *s;
	struct fam_conn *conn;
	const struct fam_remote *remote;
	unsigned k;          /* the copy's (fragment's) index */
	const uint8_t *src;  /* what is written, len bytes */
	uint32_t len;
	uint32_t crc;        /* ec:K+M: the fragment's CRC32C */
	uint32_t off;        /* partial: the run's first byte in the chunk */
	bool zero;           /* ... written as zeros (not in place) */
	bool out;            /* its write is in flight */
};

/* A chunk's write-back: one write per copy that can take it. */
struct writeback {
	struct region *r;
	uint64_t chunk;
	unsigned out;  /* writes in flight */
	unsigned ok;   /* copies that acknowledged */
	int err;       /* the first write's error */
	uint8_t *ecbuf; /* ec:K+M: the parity (and padded) fragments */
	uint8_t *hold; /* write_quorum: the chunk, copied; what is written */
	unsigned quorum; /* acknowledgements that make the chunk clean before
	                  * every write is over (0: only once all are) */
	bool acked;    /* quorum reached: late (in h->late) */
	bool superseded; /* late, and a later write-back of the chunk began */
	bool partial;  /* of a partial chunk: every run must be written */
	unsigned nwrites;
	struct writeback *late_prev, *late_next;
	struct wb_copy copy[];
};

/* Returns the stripe (in *stripe) and byte offset in it of chunk c. */
uint64_t
host_stripe_offset(const struct host *h, const struct region *r, uint64_t c,
    unsigned *stripe)
{
	*stripe = (unsigned)(c % r->width);
	return (c / r->width) << h->chunk_shift;
}

/*
 * Returns the bytes of a chunk at off in stripe s that the memory node
 * holds: a whole chunk, but for the last chunk of a file, which the memory
 * node reserves to its page size, not to our chunk size (ec:K+M: a whole
 * chunk, its fragments being smaller).
 */
uint32_t
host_stripe_len(const struct host *h, const struct stripe *s, uint64_t off)
{
	if (s->r != NULL && s->r->ec != NULL)
		return (uint32_t)h->chunk;
	if (off >= s->remote.size)
		return 0;
	if (s->remote.size - off < h->chunk)
		return (uint32_t)(s->remote.size - off);
	return (uint32_t)h->chunk;
}

/*
 * Allocates the frames of a buffer of buffer_size bytes, all free: one per
 * chunk, or with fetch = adaptive one per grain (a partial chunk holds a
 * grain or more), GRAIN_FRAMES_MAX at the most.
 */
static int
frames_alloc(struct host *h, uint64_t buffer_size, char **cause)
{
	h->nframes = buffer_size >> h->chunk_shift;
	if (h->adaptive) {
		uint64_t slots = buffer_size >> h->grain_shift;

		if (slots > GRAIN_FRAMES_MAX)
			slots = GRAIN_FRAMES_MAX;
		if (slots > h->nframes)
			h->nframes = slots;
	}
	h->frames = calloc(h->nframes, sizeof *h->frames);
	h->free_frames = calloc(h->nframes, sizeof *h->free_frames);
	if (h->frames == NULL || h->free_frames == NULL) {
		*cause = xasprintf("cannot allocate %llu frames",
		    (unsigned long long)h->nframes);
		return -1;
	}
	for (uint64_t i = 0; i < h->nframes; i++)
		h->free_frames[i] = (uint32_t)(h->nframes - 1 - i);
	h->nfree = h->nframes;
	return 0;
}

/*
 * Turns fetch = adaptive on in a buffer that holds nothing yet (a restart
 * state of a famd that may have left partial chunks: host-restart.c): its
 * frames become one per grain. 0, or -1 with *cause set (the buffer is as
 * it was).
 */
int
host_buffer_adapt(struct host *h, char **cause)
{
	struct frame *frames = h->frames;
	uint32_t *free_frames = h->free_frames;
	uint64_t nframes = h->nframes;

	if (h->adaptive)
		return 0;
	if (h->nfree != h->nframes) {
		*cause = xasprintf("the buffer holds chunks already");
		return -1;
	}
	h->adaptive = true;
	if (frames_alloc(h, h->npages << 12, cause) < 0) {
		free(h->frames);
		free(h->free_frames);
		h->adaptive = false;
		h->frames = frames;
		h->free_frames = free_frames;
		h->nframes = h->nfree = nframes;
		return -1;
	}
	free(frames);
	free(free_frames);
	return 0;
}

/* Allocates the frames, staging buffers and the zero chunk. */
int
host_buffer_init(struct host *h, uint64_t buffer_size, char **cause)
{
	unsigned nstaging = (unsigned)cfg_int(h->d->cfg, CFG_HOST_MAX_FETCHES);

	h->npages = (buffer_size >> h->chunk_shift) * h->chunk_pages;
	for (h->ghost_shift = 0; h->npages >> h->ghost_shift > GHOST_TICKS;)
		h->ghost_shift++;
	if (frames_alloc(h, buffer_size, cause) < 0)
		return -1;

	h->staging = host_numa_alloc(h, (size_t)nstaging * h->chunk);
	h->staging_busy = calloc((nstaging + 63) / 64, sizeof *h->staging_busy);
	h->zero = host_numa_alloc(h, h->chunk);
	if (h->staging == NULL || h->staging_busy == NULL || h->zero == NULL) {
		*cause = xasprintf("cannot allocate %u staging buffers of %llu "
		    "bytes", nstaging, (unsigned long long)h->chunk);
		return -1;
	}
	h->nstaging = h->nstaging_free = nstaging;
	return 0;
}

/* Frees what host_buffer_init() allocated. */
void
host_buffer_fini(struct host *h)
{
	if (h->staging != NULL)
		host_numa_free(h->staging, (size_t)h->nstaging * h->chunk);
	if (h->zero != NULL)
		host_numa_free(h->zero, h->chunk);
	free(h->staging_busy);
	free(h->frames);
	free(h->free_frames);
	h->staging = h->zero = NULL;
	h->staging_busy = NULL;
	h->frames = NULL;
	h->free_frames = NULL;
}

/* Returns true if staging slot i is taken. */
static bool
staging_busy(const struct host *h, unsigned i)
{
	return (h->staging_busy[i / 64] >> (i % 64)) & 1;
}

/*
 * Takes up to *n contiguous staging slots (at least one): the first run of
 * *n free slots, else the longest shorter one; a single slot is taken from
 * the top, so that lone reads leave the long runs below them alone. Sets
 * *n to the slots taken; NULL when none is free.
 */
uint8_t *
host_staging_get(struct host *h, unsigned *n)
{
	unsigned want = *n, best = 0, best_len = 0;

	if (h->nstaging_free == 0 || want == 0)
		return NULL;
	if (want == 1) {
		for (unsigned i = h->nstaging; i-- > 0;)
			if (!staging_busy(h, i)) {
				best = i;
				best_len = 1;
				break;
			}
	} else {
		for (unsigned i = 0; i < h->nstaging && best_len < want;) {
			unsigned j = i;

			while (j < h->nstaging && j - i < want &&
			    !staging_busy(h, j))
				j++;
			if (j - i > best_len) {
				best = i;
				best_len = j - i;
			}
			i = j == i ? i + 1 : j;
		}
	}
	if (best_len == 0)
		return NULL;
	for (unsigned i = best; i < best + best_len; i++)
		h->staging_busy[i / 64] |= (uint64_t)1 << (i % 64);
	h->nstaging_free -= best_len;
	*n = best_len;
	return h->staging + ((size_t)best << h->chunk_shift);
}

/* Gives back n staging slots from p, taken by host_staging_get(). */
void
host_staging_put(struct host *h, uint8_t *p, unsigned n)
{
	unsigned first = (unsigned)((size_t)(p - h->staging) >> h->chunk_shift);

	for (unsigned i = first; i < first + n; i++)
		h->staging_busy[i / 64] &= ~((uint64_t)1 << (i % 64));
	h->nstaging_free += n;
}

/* Takes a free frame for a whole chunk; -1 when the buffer is full. */
int64_t
host_frame_get(struct host *h)
{
	return host_frame_take(h, (uint32_t)h->chunk_pages);
}

/* Takes a free frame holding pages; -1 when the buffer is full. */
int64_t
host_frame_take(struct host *h, uint32_t pages)
{
	if (h->nfree == 0 || h->pages_used + pages > h->npages)
		return -1;
	h->pages_used += pages;
	h->used++;
	h->nfree--;
	/* (its region and chunk are the caller's to set) */
	h->frames[h->free_frames[h->nfree]] = (struct frame){
		.gen = h->evict_gen, .pages = pages };
	return h->free_frames[h->nfree];
}

/* Returns a frame to the free list. */
void
host_frame_put(struct host *h, uint32_t frame)
{
	if (h->frames[frame].kept)
		h->kept_pages -= h->frames[frame].pages;
	if (h->frames[frame].hot)
		h->hot_pages -= h->frames[frame].pages;
	h->frames[frame].kept = false;
	h->frames[frame].hot = false;
	h->frames[frame].r = NULL;
	h->free_frames[h->nfree++] = frame;
	h->used--;
	h->pages_used -= h->frames[frame].pages;
	h->frames[frame].pages = 0;
}

/*
 * Makes a taken frame hold pages more (fewer, when negative): a partial
 * chunk's grains. -ENOBUFS when the buffer has no room for them.
 */
int
host_frame_grow(struct host *h, uint32_t frame, int64_t pages)
{
	if (pages > 0 && h->pages_used + (uint64_t)pages > h->npages)
		return -ENOBUFS;
	h->pages_used = (uint64_t)((int64_t)h->pages_used + pages);
	if (h->frames[frame].kept)
		h->kept_pages = (uint64_t)((int64_t)h->kept_pages + pages);
	if (h->frames[frame].hot)
		h->hot_pages = (uint64_t)((int64_t)h->hot_pages + pages);
	h->frames[frame].pages = (uint32_t)((int64_t)h->frames[frame].pages +
	    pages);
	return 0;
}

/*
 * Frame fr's chunk came back for a fault soon after it left (a refault):
 * HOST_HEAT more passes of the hand; HOST_HOT_LAPS when it was used at
 * random (random: no sequential run's), loops are kept (`loop_keep`: the
 * operator runs iterative programs) and hot chunks still have room.
 */
void
host_frame_heat(struct host *h, uint32_t frame, bool random)
{
	struct frame *fr = &h->frames[frame];

	fr->heat = HOST_HEAT;
	if (!random || cfg_int(h->d->cfg, CFG_HOST_LOOP_KEEP) == 0 ||
	    cfg_int(h->d->cfg, CFG_HOST_EVICTION) != CFG_EVICTION_CLOCK ||
	    h->hot_pages + fr->pages > h->npages / HOST_HOT_SHARE)
		return;
	fr->hot = true;
	fr->heat = HOST_HOT_LAPS;
	h->hot_pages += fr->pages;
}

/* Punches n chunks of r from c out of its memfd (and the page tables). */
void
host_chunks_punch(struct host *h, struct region *r, uint64_t c, uint64_t n)
{
	/* the copies left behind are in the restart state before it goes */
	host_restart_flush(h);
	if (fallocate(r->ar->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	    (off_t)(r->off + (c << h->chunk_shift)),
	    (off_t)(n << h->chunk_shift)) < 0)
		log_rl(LOG_WARNING, "pid %ld: punching chunks %llu-%llu: %s",
		    (long)r->cl->pid, (unsigned long long)c,
		    (unsigned long long)(c + n - 1), strerror(errno));
}

/* Orders gathered punches by region, then chunk. */
static int
punch_cmp(const void *a, const void *b)
{
	const struct host_punch *x = a, *y = b;

	if (x->r != y->r)
		return (uintptr_t)x->r < (uintptr_t)y->r ? -1 : 1;
	return x->chunk < y->chunk ? -1 : x->chunk > y->chunk;
}

/*
 * Punches the chunks gathered by chunk_punch() so far, sorted, one
 * fallocate per run of adjacent chunks of a region (one walk of the page
 * tables and one TLB flush for the run).
 */
static void
punch_flush(struct host *h)
{
	unsigned i = 0;

	if (h->punch_n > 1)
		qsort(h->punch, h->punch_n, sizeof h->punch[0], punch_cmp);
	while (i < h->punch_n) {
		struct host_punch *p = &h->punch[i];
		uint64_t n = 1;

		while (i + n < h->punch_n && p[n].r == p->r &&
		    p[n].chunk == p->chunk + n)
			n++;
		host_chunks_punch(h, p->r, p->chunk, n);
		i += (unsigned)n;
	}
	h->punch_n = 0;
}

/*
 * Punches chunk c of r out of its memfd, at once, or during background
 * eviction with the other chunks the pass evicts (punch_flush() before
 * the pass returns, so that no chunk is installed in between).
 */
static void
chunk_punch(struct host *h, struct region *r, uint64_t c)
{
	if (!h->punch_batch) {
		host_chunks_punch(h, r, c, 1);
		return;
	}
	if (h->punch_n == HOST_PUNCH_MAX)
		punch_flush(h);
	h->punch[h->punch_n].r = r;
	h->punch[h->punch_n].chunk = c;
	h->punch_n++;
}

/* Returns the ghost clock now: the pages evicted so far, in its units. */
static uint16_t
ghost_now(const struct host *h)
{
	uint16_t t = (uint16_t)(h->evicted_pages >> h->ghost_shift);

	return t != 0 ? t : 1; /* 0: never evicted */
}

/*
 * A chunk was read in: if a fault waited for it and it left the buffer
 * less than a buffer's worth of evictions ago, it counts as a refault (the
 * hand took what the program was still using). Says whether it is a
 * refault, another chunk evicted before (at any time), or one never
 * evicted.
 */
enum host_admit
host_chunk_admitted(struct host *h, struct chunk *ch, bool demand)
{
	uint16_t left = ch->ghost;

	ch->ghost = 0;
	if (demand && left != 0 && (uint16_t)(ghost_now(h) - left) <=
	    (h->npages >> h->ghost_shift)) {
		h->stats.refaults++;
		return HOST_ADMIT_REFAULT;
	}
	return left != 0 ? HOST_ADMIT_AGAIN : HOST_ADMIT_NEW;
}

/*
 * Whether kept frame fr stays as the hand passes: its region loops, and
 * what is kept is within the target.
 */
static bool
loop_kept(struct host *h, struct frame *fr)
{
	if (fr->r->loop_lap + 2 > h->hand_laps &&
	    h->kept_pages <= h->keep_target)
		return true;
	fr->kept = false;
	h->kept_pages -= fr->pages;
	return false;
}

/* Removes resident chunk c of r from the buffer (it is clean or lost). */
static void
chunk_evict(struct host *h, struct region *r, uint64_t c)
{
	struct chunk *ch = &r->chunks[c];

	h->evicted_pages += h->frames[ch->frame].pages;
	chunk_punch(h, r, c);
	host_grain_evicted(h, r, ch);
	if (ch->flags & CH_DIRTY) {
		r->dirty--;
		h->dirty--;
	}
	ch->present = 0;
	ch->flags &= CH_REMOTE;
	ch->state = CH_ABSENT;
	host_frame_put(h, ch->frame);
	ch->ghost = ghost_now(h); /* (in place of the frame, ABSENT) */
	r->resident--;
}

/*
 * The write-back of chunk ch of r is over for the program (status 0: the
 * chunk is clean, it leaves the buffer unless written again meanwhile; or
 * it failed: the chunk stays, dirty).
 */
static void
writeback_end(struct host *h, struct region *r, struct chunk *ch, int status)
{
	h->writebacks_inflight--;
	if (r->dying) {
		host_wake(h, HOST_WAKE_KICK);
		return;
	}
	h->writeback_err = status;
	if (status < 0) {
		h->stats.writeback_errors++;
		log_rl(LOG_INFO,
		    "pid %ld: writing back chunk %llu of region %llu: %s; "
		    "it stays in the buffer", (long)r->cl->pid,
		    (unsigned long long)(ch - r->chunks),
		    (unsigned long long)r->handle, strerror(-status));
		ch->state = CH_RESIDENT;
		if (!(ch->flags & CH_DIRTY)) {
			ch->flags |= CH_DIRTY;
			r->dirty++;
			h->dirty++;
		}
		return;
	}
	h->stats.writebacks++;
	ch->flags |= CH_REMOTE;
	ch->state = CH_RESIDENT;
	if (ch->flags & (CH_DIRTY | CH_GROWING)) {
		/*
		 * Written again meanwhile: it stays, and goes back later (or
		 * more of it is being read: it stays for that).
		 */
		h->stats.evictions_cancelled++;
	} else {
		chunk_evict(h, r, (uint64_t)(ch - r->chunks));
		h->stats.evictions_dirty++;
	}
	host_wake(h, HOST_WAKE_KICK);
}

/*
 * wb has its quorum of copies: its chunk is clean now; the copies still
 * being written are stale until their writes land (wb is late).
 */
static void
writeback_ack(struct host *h, struct writeback *wb)
{
	struct region *r = wb->r;
	struct chunk *ch = &r->chunks[wb->chunk];

	wb->acked = true;
	for (unsigned i = 0; i < wb->nwrites; i++)
		if (wb->copy[i].out)
			host_stale_set(wb->copy[i].s, wb->chunk / r->width);
	if (ch->late < UINT16_MAX)
		ch->late++;
	wb->late_prev = NULL;
	wb->late_next = h->late;
	if (h->late != NULL)
		h->late->late_prev = wb;
	h->late = wb;
	h->nlate++;
	h->stats.writebacks_early++;
	writeback_end(h, r, ch, 0);
}

/* Frees wb, its writes all over (a late one leaves h->late). */
static void
writeback_free(struct host *h, struct writeback *wb)
{
	if (wb->acked) {
		struct chunk *ch = &wb->r->chunks[wb->chunk];

		if (ch->late > 0)
			ch->late--;
		if (wb->late_prev != NULL)
			wb->late_prev->late_next = wb->late_next;
		else
			h->late = wb->late_next;
		if (wb->late_next != NULL)
			wb->late_next->late_prev = wb->late_prev;
		h->nlate--;
	}
	if (wb->hold != NULL)
		h->wb_held--;
	free(wb->hold);
	free(wb->ecbuf);
	free(wb);
}

/* Completion of a write-back's write to one copy; the last ends it. */
static void
writeback_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct wb_copy *wc = ctx;
	struct writeback *wb = wc->wb;
	struct region *r = wb->r;
	struct host *h = r->cl->h;
	struct chunk *ch = &r->chunks[wb->chunk];
	uint64_t row = wb->chunk / r->width;
	bool acked = wb->acked;

	host_route_done(h, wc->s);
	wc->out = false;
	if (status == 0) {
		wb->ok++;
		h->stats.writeback_bytes += wc->len;
		if (!wb->superseded) {
			host_stale_clear(wc->s, row); /* it has the latest now */
			if (r->ec != NULL)
				host_ec_wb_done(r, wb->chunk, wc->k, wc->crc);
		}
	} else {
		if (wb->err == 0)
			wb->err = status;
		host_stale_set(wc->s, row);
		h->stats.late_failed += acked;
	}
	wb->out--;
	if (!acked && wb->quorum > 0 && wb->ok >= wb->quorum && wb->out > 0)
		writeback_ack(h, wb);
	if (wb->out > 0)
		return;
	/*
	 * ec:K+M: K fragments at least, or the chunk cannot be read again;
	 * a partial chunk: every run.
	 */
	status = wb->ok >= (r->ec != NULL ? host_ec_k(r) : wb->partial ?
	    wb->nwrites : 1) ? 0 : wb->err != 0 ? wb->err : -EHOSTDOWN;
	acked = wb->acked;
	writeback_free(h, wb);
	r->busy--;
	if (!acked)
		writeback_end(h, r, ch, status);
	host_region_idle(r);
}

/*
 * A write-back of chunk c of r begins: the late ones of the same chunk are
 * superseded (what they write is not the latest any more). Returns a bit
 * per copy that one of them is still writing (to be skipped: a write of
 * ours there might land before theirs).
 */
static uint64_t
writeback_supersede(struct host *h, struct region *r, uint64_t c)
{
	uint64_t busy = 0;

	if (r->chunks[c].late == 0)
		return 0;
	for (struct writeback *wb = h->late; wb != NULL; wb = wb->late_next) {
		if (wb->r != r || wb->chunk != c)
			continue;
		wb->superseded = true;
		for (unsigned i = 0; i < wb->nwrites; i++)
			if (wb->copy[i].out)
				busy |= 1ull << wb->copy[i].k;
	}
	return busy;
}

/*
 * Returns the acknowledgements a write-back of r to n copies waits for
 * before its chunk is clean: write_quorum (ec:K+M: K at least), or 0 (all
 * of them: write_quorum = all or not below n, no copies, or too many
 * write-backs hold a copy of their chunk already).
 */
static unsigned
writeback_quorum(const struct host *h, const struct region *r, unsigned n)
{
	uint64_t room = h->npages << 12;
	unsigned q = h->write_quorum;

	if (q == 0 || r->ncopies <= 1)
		return 0;
	if (q < host_ec_k(r))
		q = host_ec_k(r);
	if (room < WB_HOLD_MIN)
		room = WB_HOLD_MIN;
	if (q >= n || (h->wb_held + 1) * h->chunk > room)
		return 0;
	return q;
}

/*
 * Routes the write-back of chunk c to each copy that can take it now, into
 * wb; a copy that cannot (its node away, its region gone, a late write of
 * the chunk still going there) falls behind (stale) once the write-back
 * goes. Returns the copies routed.
 */
static unsigned
writeback_route(struct host *h, struct region *r, uint64_t c,
    struct writeback *wb)
{
	unsigned col = (unsigned)(c % r->width), n = 0;
	uint64_t busy = writeback_supersede(h, r, c);

	for (unsigned k = 0; k < r->ncopies; k++) {
		struct wb_copy *wc = &wb->copy[n];
		struct fam_mr *mr; /* the staging buffers': not the source */

		wc->s = &r->stripes[k * r->width + col];
		if (wc->s->gone || (busy >> k & 1) || host_route(h, wc->s, true,
		    &wc->conn, &mr, &wc->remote) < 0)
			continue;
		wc->wb = wb;
		wc->k = k;
		n++;
	}
	return n;
}

/* Marks behind each copy of chunk c that the write-back did not route. */
static void
writeback_skipped(struct host *h, struct region *r, uint64_t c,
    const struct writeback *wb, unsigned n)
{
	unsigned col = (unsigned)(c % r->width);

	for (unsigned k = 0; k < r->ncopies; k++) {
		struct stripe *s = &r->stripes[k * r->width + col];
		bool routed = false;

		for (unsigned i = 0; i < n; i++)
			routed |= wb->copy[i].s == s;
		if (!routed && !host_stale_test(s, c / r->width)) {
			host_stale_set(s, c / r->width);
			h->stats.replica_stale++;
		}
	}
	if (h->rb.busy && h->rb.r == r && h->rb.chunk == c)
		h->rb.spoiled = true; /* its copy may land after ours */
}

/*
 * Gives each of the n copies wb routed what it is written: the chunk (its
 * bytes on the memory node), or, ec:K+M, its fragment, encoded now from
 * the write-protected chunk; from a copy of it (wb->hold) when wb may be
 * acknowledged before every write is over (its chunk then leaves the
 * buffer while they go on). 0 or -ENOMEM.
 */
static int
writeback_source(struct host *h, struct region *r, uint64_t c,
    struct writeback *wb, unsigned n)
{
	const uint8_t *chunk = r->ar->local + r->off + (c << h->chunk_shift);
	const uint8_t *frag[HOST_EC_MAX];
	uint32_t crc[HOST_EC_MAX];
	unsigned si;
	uint64_t off = host_stripe_offset(h, r, c, &si);

	wb->quorum = writeback_quorum(h, r, n);
	if (wb->quorum > 0)
		wb->hold = malloc(h->chunk);
	if (wb->hold != NULL) {
		memcpy(wb->hold, chunk, h->chunk);
		chunk = wb->hold;
		h->wb_held++;
	} else {
		wb->quorum = 0; /* no room: every copy, from the buffer */
	}
	if (r->ec != NULL && host_ec_wb_encode(r, chunk, &wb->ecbuf, frag,
	    crc) < 0)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		struct wb_copy *wc = &wb->copy[i];

		wc->src = r->ec != NULL ? frag[wc->k] : chunk;
		wc->len = r->ec != NULL ? host_ec_frag(r) :
		    host_stripe_len(h, wc->s, off);
		wc->crc = r->ec != NULL ? crc[wc->k] : 0;
	}
	return 0;
}

/*
 * Counts the runs of grains of partial chunk ch to write back (in place,
 * or all of them when zeros), and fills wb's writes with them when wb is
 * not NULL.
 */
static unsigned
writeback_runs(const struct host *h, const struct chunk *ch, bool zeros,
    struct writeback *wb)
{
	unsigned per = (unsigned)(h->chunk >> h->grain_shift), n = 0;

	for (unsigned g = 0, e; g < per; g = e) {
		bool in = (ch->present >> g) & 1;

		for (e = g; e < per && ((ch->present >> e) & 1) == in; e++)
			;
		if (!in && !zeros)
			continue;
		if (wb != NULL) {
			wb->copy[n].off = g << h->grain_shift;
			wb->copy[n].len = (e - g) << h->grain_shift;
			wb->copy[n].zero = !in;
		}
		n++;
	}
	return n;
}

/*
 * Starts writing back dirty partial chunk c of r (one copy: partial chunks
 * are not replicated), a write per run of grains in place, from famd's
 * mapping; the grains not in place are never read there (that would put
 * pages of zeros in the memfd, under the program), and are written as
 * zeros only when the memory node holds nothing of the chunk (not
 * CH_REMOTE: they are zeros). Write-protects it first, like a whole one.
 */
static int
writeback_start_partial(struct host *h, struct region *r, uint64_t c)
{
	struct chunk *ch = &r->chunks[c];
	bool zeros = !(ch->flags & CH_REMOTE);
	unsigned si, n = writeback_runs(h, ch, zeros, NULL), routed = 0;
	uint64_t off = host_stripe_offset(h, r, c, &si);
	struct writeback *wb = calloc(1, sizeof *wb + n * sizeof wb->copy[0]);
	int rc = 0;

	if (wb == NULL)
		return -ENOMEM;
	writeback_runs(h, ch, zeros, wb);
	for (; routed < n; routed++) {
		struct wb_copy *wc = &wb->copy[routed];
		struct fam_mr *mr;

		wc->wb = wb;
		wc->s = &r->stripes[si];
		if (wc->s->gone || host_route(h, wc->s, true, &wc->conn, &mr,
		    &wc->remote) < 0)
			break;
	}
	if (routed == n && (ch->flags & CH_UNPROT)) {
		rc = uffd_protect(r->cl->uffd, r->ar->uaddr + r->off +
		    (c << h->chunk_shift), h->chunk, true);
		if (rc == 0 || rc == -ESRCH)
			ch->flags &= ~CH_UNPROT;
	}
	if (routed < n || (rc < 0 && rc != -ESRCH)) {
		for (unsigned i = 0; i < routed; i++)
			host_route_done(h, wb->copy[i].s);
		free(wb);
		return rc < 0 ? rc : -EHOSTDOWN;
	}
	ch->flags &= ~CH_DIRTY;
	r->dirty--;
	h->dirty--;
	ch->state = CH_EVICTING;
	wb->r = r;
	wb->chunk = c;
	wb->out = wb->nwrites = n;
	wb->partial = true;
	r->busy++;
	h->writebacks_inflight++;
	for (unsigned i = 0; i < n; i++) {
		struct wb_copy *wc = &wb->copy[i];

		wc->out = true;
		rc = fam_conn_writef(wc->conn, wc->remote, off + wc->off,
		    wc->len, wc->zero ? h->zero : r->ar->local + r->off +
		    (c << h->chunk_shift) + wc->off, NULL, FAM_F_BACKGROUND,
		    writeback_done, wc);
		if (rc < 0)
			writeback_done(wc, rc, NULL, 0); /* stays, dirty */
	}
	return 0;
}

/*
 * Starts writing back dirty chunk c of r, to each copy: write-protects it
 * first, so a write during the write-back is seen and keeps the chunk.
 */
static int
writeback_start(struct host *h, struct region *r, uint64_t c)
{
	struct chunk *ch = &r->chunks[c];
	struct writeback *wb;
	unsigned si, n, sent = 0;
	uint64_t off = host_stripe_offset(h, r, c, &si);
	int rc = 0;

	if (ch->flags & CH_PARTIAL)
		return writeback_start_partial(h, r, c);
	wb = calloc(1, sizeof *wb + r->ncopies * sizeof wb->copy[0]);
	if (wb == NULL)
		return -ENOMEM;
	n = writeback_route(h, r, c, wb);
	if (n == 0 || (r->ec != NULL && n < host_ec_k(r))) {
		/* ec:K+M: fewer than K fragments would be a chunk lost */
		for (unsigned i = 0; i < n; i++)
			host_route_done(h, wb->copy[i].s);
		free(wb);
		return -EHOSTDOWN;
	}
	if (ch->flags & CH_UNPROT) {
		rc = uffd_protect(r->cl->uffd, r->ar->uaddr + r->off +
		    (c << h->chunk_shift), h->chunk, true);
		if (rc < 0 && rc != -ESRCH) {
			for (unsigned i = 0; i < n; i++)
				host_route_done(h, wb->copy[i].s);
			free(wb);
			return rc;
		}
		ch->flags &= ~CH_UNPROT;
	}
	/* encoded once write-protected: a write from now on is seen */
	rc = writeback_source(h, r, c, wb, n);
	if (rc < 0) {
		for (unsigned i = 0; i < n; i++)
			host_route_done(h, wb->copy[i].s);
		writeback_free(h, wb);
		return rc;
	}
	writeback_skipped(h, r, c, wb, n);
	ch->flags &= ~CH_DIRTY;
	r->dirty--;
	h->dirty--;
	ch->state = CH_EVICTING;
	wb->r = r;
	wb->chunk = c;
	wb->out = wb->nwrites = n;
	r->busy++;
	h->writebacks_inflight++;
	for (unsigned i = 0; i < n; i++) {
		struct wb_copy *wc = &wb->copy[i];

		wc->out = true;
		rc = fam_conn_writef(wc->conn, wc->remote, r->ec != NULL ?
		    (c / r->width) * wc->len : off, wc->len, wc->src, NULL,
		    FAM_F_BACKGROUND, writeback_done, wc);
		if (rc == 0) {
			sent++;
			continue;
		}
		if (sent == 0 && i + 1 == n) {
			/* none went: as if never started */
			host_route_done(h, wc->s);
			r->busy--;
			h->writebacks_inflight--;
			ch->state = CH_RESIDENT;
			ch->flags |= CH_DIRTY;
			r->dirty++;
			h->dirty++;
			writeback_free(h, wb);
			return rc;
		}
		writeback_done(wc, rc, NULL, 0);
	}
	return 0;
}

/*
 * Advances the hand to the next victim and evicts it: a clean chunk at once
 * (returns 1), a dirty one by starting its write-back (returns 0). Returns
 * -1 when no chunk can leave now. In the background, chunks that arrived
 * since the last background pass are left alone: the thread that faulted
 * on one may not have touched it yet, and evicting it would only make that
 * thread fault again (for ever, when the dirty chunks cannot leave).
 */
static int
evict_one(struct host *h, bool background)
{
	bool clock = cfg_int(h->d->cfg, CFG_HOST_EVICTION) == CFG_EVICTION_CLOCK;
	bool hot_on = clock && cfg_int(h->d->cfg, CFG_HOST_LOOP_KEEP) != 0;
	/*
	 * Two passes, and those a chunk's tenure and heat add; past them no
	 * chunk is spared its heat or tenure: for a fault, two more passes
	 * find a hot chunk (its reference, then it) before nothing is found.
	 */
	uint64_t spare = (2 + HOST_TENURE_MAX + HOST_HEAT) * h->nframes;
	uint64_t end = spare +
	    (!background && h->hot_pages > 0 ? 2 * h->nframes : 0);

	for (uint64_t scanned = 0; scanned < end; scanned++) {
		struct frame *fr = &h->frames[h->hand];
		struct region *r = fr->r;
		struct chunk *ch;
		uint64_t c = fr->chunk;

		h->hand = (h->hand + 1) % h->nframes;
		h->hand_laps += h->hand == 0;
		if (r == NULL || r->dying)
			continue;
		if (background && fr->gen == h->evict_gen)
			continue;
		ch = &r->chunks[c];
		if (ch->state != CH_RESIDENT || (ch->flags & CH_GROWING))
			continue;
		if (clock && fr->kept && loop_kept(h, fr))
			continue;
		if (fr->hot && (fr->heat == 0 || !hot_on)) {
			fr->hot = false; /* its passes are over: room for another */
			fr->heat = 0;
			h->hot_pages -= fr->pages;
		}
		if (clock && fr->heat > 0 && scanned < spare) {
			fr->heat--; /* came back soon after it left: heated */
			continue;
		}
		if (clock && (ch->flags & (CH_REF | CH_UNPROT)) ==
		    (CH_REF | CH_UNPROT) && fr->tenure_left > 0 &&
		    scanned < spare) {
			fr->tenure_left--; /* taken as written again */
			continue;
		}
		if (clock && (ch->flags & CH_REF)) {
			ch->flags &= ~CH_REF;
			if ((ch->flags & CH_UNPROT) && uffd_protect(r->cl->uffd,
			    r->ar->uaddr + r->off + (c << h->chunk_shift),
			    h->chunk, true) == 0)
				ch->flags &= ~CH_UNPROT; /* see the next write */
			continue;
		}
		if (!(ch->flags & CH_DIRTY) || r->lost) {
			if (ch->flags & CH_PREFETCH)
				r->ra_writes = false; /* read ahead, not written */
			h->stats.evictions_clean++;
			host_grain_left(r, ch, false);
			chunk_evict(h, r, c);
			return 1;
		}
		if (h->writebacks_inflight >= MAX_WRITEBACKS)
			continue;
		if (writeback_start(h, r, c) == 0) {
			host_grain_left(r, ch, true);
			return 0;
		}
	}
	return -1;
}

/*
 * Makes room for a fault: returns true when a frame was freed now; false
 * when room will come from write-backs in flight (or cannot come).
 */
bool
host_evict_for_room(struct host *h)
{
	for (;;) {
		int rc = evict_one(h, false);

		if (rc == 1)
			return true;
		if (rc < 0)
			return false;
		if (h->writebacks_inflight >= MAX_WRITEBACKS)
			return false;
	}
}

/*
 * Background eviction: above high_watermark, evicts (and starts
 * write-backs) until the buffer, less the write-backs in flight, is at
 * low_watermark, so that faults rarely wait for room. At most
 * HOST_EVICT_SLICE chunks a call: the rest in the loop's next rounds
 * (host_evict_soon()), so that a fault's read goes out, and a reply is
 * taken in, between slices instead of after the whole pass. The pass
 * ends (evict_gen) when its last slice does.
 */
void
host_evict_background(struct host *h)
{
	uint64_t high = h->npages * h->high_pct / 100;
	uint64_t low = h->npages * h->low_pct / 100;
	unsigned n = 0;

	if (h->pages_used > high)
		h->evicting = true;
	h->punch_batch = true;
	while (h->evicting) {
		if (h->pages_used <= low + h->writebacks_inflight *
		    h->chunk_pages) {
			if (h->pages_used <= low)
				h->evicting = false;
			break;
		}
		if (n++ == HOST_EVICT_SLICE) {
			host_evict_soon(h);
			break;
		}
		if (h->writebacks_inflight >= MAX_WRITEBACKS ||
		    evict_one(h, true) < 0)
			break;
	}
	punch_flush(h);
	h->punch_batch = false;
	/* a pass's slices spare what arrived since the pass before it */
	if (n <= HOST_EVICT_SLICE)
		h->evict_gen++;
}

/* Takes every chunk of a region being freed out of the buffer. */
void
host_region_drop_chunks(struct host *h, struct region *r)
{
	for (uint64_t c = 0; c < r->nchunks; c++) {
		struct chunk *ch = &r->chunks[c];

		if (ch->state == CH_RESIDENT || ch->state == CH_EVICTING) {
			host_frame_put(h, ch->frame);
			if (ch->flags & CH_DIRTY)
				h->dirty--;
			ch->state = CH_ABSENT;
			ch->ghost = 0; /* (not the frame's number: never left) */
		}
		ch->flags &= ~(CH_PARTIAL | CH_GROWING);
		ch->present = 0;
	}
	r->resident = 0;
	r->dirty = 0;
}

/*
 * Discards chunks [first, first + n) of r: from now on they read back as
 * zeros. Resident ones leave the buffer without a write-back; none is on
 * the memory node any more (CH_REMOTE cleared: the next fault zero-fills).
 * Returns -EBUSY, changing nothing, while one of them is being read or
 * written back.
 */
int
host_chunks_discard(struct host *h, struct region *r, uint64_t first,
    uint64_t n)
{
	uint64_t run = 0;

	for (uint64_t c = first; c < first + n; c++)
		if (r->chunks[c].state == CH_FETCHING ||
		    r->chunks[c].state == CH_EVICTING ||
		    (r->chunks[c].flags & CH_GROWING))
			return -EBUSY;
	for (uint64_t c = first; c < first + n; c++) {
		struct chunk *ch = &r->chunks[c];

		if (ch->state == CH_RESIDENT) {
			if (ch->flags & CH_DIRTY) {
				r->dirty--;
				h->dirty--;
			}
			host_frame_put(h, ch->frame);
			r->resident--;
			ch->state = CH_ABSENT;
			run++;
		} else if (run > 0) {
			host_chunks_punch(h, r, c - run, run);
			run = 0;
		}
		ch->flags = 0;
		ch->ghost = 0;
		ch->present = 0;
	}
	if (run > 0)
		host_chunks_punch(h, r, first + n - run, run);
	h->stats.discards += n;
	return 0;
}

/*
 * Before a fork shares client cl's chunks with copies: its partial chunks
 * leave the buffer (a copy reads its source's chunks whole, from famd's
 * mapping): clean ones now, dirty ones by their write-back. Returns the
 * partial chunks (and partial reads) still there; called again until 0.
 */
unsigned
host_grain_settle(struct host_client *cl)
{
	struct host *h = cl->h;
	unsigned left = 0;

	if (!h->adaptive)
		return 0;
	for (struct region *r = cl->regions; r != NULL; r = r->next)
		for (uint64_t c = 0; c < r->nchunks && !r->dying; c++) {
			struct chunk *ch = &r->chunks[c];

			if (ch->state == CH_FETCHING && ch->fetch->g_n > 0)
				left++;
			if (!(ch->flags & CH_PARTIAL) || ch->state == CH_ABSENT)
				continue;
			left++;
			if (ch->state != CH_RESIDENT || (ch->flags & CH_GROWING))
				continue;
			if (!(ch->flags & CH_DIRTY) || r->lost) {
				h->stats.evictions_clean++;
				chunk_evict(h, r, c);
				left--;
			} else if (h->writebacks_inflight < MAX_WRITEBACKS)
				writeback_start(h, r, c);
		}
	return left;
}
