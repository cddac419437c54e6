/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_host_buffer.c - the host's buffer and eviction (host-buffer.c):
 * a host role and a memory role in this process on loopback, the suite
 * the program; a second thread takes the faults that fill the buffer, and
 * the suite calls the eviction as the fault service does.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "host/host.h"
#include "unit.h"

#define CHUNK  (64u << 10)
#define PAGE   4096u
#define FRAMES 16u /* buffer_size 1M */

static struct unit_famds u;
static struct unit_prog prog;
static struct host *h;
static uint8_t *mem;

/* A range of chunks a thread reads or writes (the first word of a page). */
struct work {
	volatile uint8_t *p;
	uint64_t first, n;
	bool write;
	uint64_t wrong;
};

/* Reads or writes one word in every page of the work's chunks. */
static void
touch(void *arg)
{
	struct work *w = arg;

	for (uint64_t off = w->first * CHUNK; off < (w->first + w->n) * CHUNK;
	    off += PAGE) {
		volatile uint64_t *q = (volatile uint64_t *)(w->p + off);

		if (w->write)
			*q = off + 1;
		else if (*q != 0 && *q != off + 1)
			w->wrong++;
	}
}

/* Reads (or writes) chunks first.. of the region from a second thread. */
static struct work
chunks(uint64_t first, uint64_t n, bool write)
{
	struct work w = { .p = mem, .first = first, .n = n, .write = write };
	struct unit_touch t;

	ck_assert_int_eq(unit_touch_start(&t, touch, &w), 0);
	ck_assert(unit_touch_wait(u.base, &t, 30000));
	ck_assert(!t.sigbus);
	return w;
}

/* A word a thread writes (write) or reads into val, at byte off. */
struct word {
	uint64_t off, val;
	bool write;
};

/* Writes or reads the word. */
static void
touch_word(void *arg)
{
	struct word *w = arg;
	volatile uint64_t *q = (volatile uint64_t *)(mem + w->off);

	if (w->write)
		*q = w->val;
	else
		w->val = *q;
}

/* Writes val (or, read, returns the word) at byte off, from a thread. */
static uint64_t
word(uint64_t off, uint64_t val, bool write)
{
	struct word w = { .off = off, .val = val, .write = write };
	struct unit_touch t;

	ck_assert_int_eq(unit_touch_start(&t, touch_word, &w), 0);
	ck_assert(unit_touch_wait(u.base, &t, 30000));
	ck_assert(!t.sigbus);
	return w.val;
}

/* Returns the state of chunk c of the region. */
static unsigned
state(uint64_t c)
{
	return h->clients->regions->chunks[c].state;
}

/* Tells whether no write-back is in flight. */
static bool
no_writebacks(void)
{
	return h->writebacks_inflight == 0;
}

/* Starts the roles with host_keys and allocates a region of 64 chunks. */
static void
start(const char *host_keys)
{
	uint64_t handle;

	ck_assert_int_eq(unit_famds_start(&u, host_keys), 0);
	h = unit_famds_host(&u);
	ck_assert_int_eq(unit_prog_open(&prog, u.base, u.session), 0);
	ck_assert_int_eq(unit_prog_alloc(&prog, 64 * CHUNK, &mem, &handle),
	    0);
	ck_assert_uint_eq(h->npages, FRAMES * CHUNK / PAGE);
}

/* Ends the session and stops the roles. */
static void
teardown(void)
{
	unit_prog_close(&prog);
	unit_famds_stop(&u);
}

START_TEST(test_buffer_admits_no_more_frames_than_it_has)
{
	int64_t got[FRAMES];

	start(NULL);
	for (unsigned i = 0; i < FRAMES; i++) {
		got[i] = host_frame_get(h);
		ck_assert_int_ge(got[i], 0);
	}
	ck_assert_int_eq(host_frame_get(h), -1);
	ck_assert_uint_eq(h->used, FRAMES);
	host_frame_put(h, (uint32_t)got[3]);
	ck_assert_int_eq(host_frame_get(h), got[3]);
	for (unsigned i = 0; i < FRAMES; i++)
		host_frame_put(h, (uint32_t)got[i]);
	ck_assert_uint_eq(h->used, 0);
	/* 40 chunks read through 16 frames: never more resident than that */
	ck_assert_uint_eq(chunks(0, 40, false).wrong, 0);
	ck_assert_uint_le(h->used, FRAMES);
	ck_assert_uint_eq(h->clients->regions->resident, h->used);
	ck_assert_uint_eq(h->stats.zero_fills, 40);
}
END_TEST

START_TEST(test_fifo_evicts_in_arrival_order_and_writes_back_first)
{
	start("eviction = fifo\nhigh_watermark = 100\nlow_watermark = 99\n");
	chunks(0, FRAMES, false);
	ck_assert_uint_eq(h->used, FRAMES);
	chunks(1, 1, true);
	ck_assert_uint_eq(h->dirty, 1);
	/* the oldest chunk leaves first */
	ck_assert(host_evict_for_room(h));
	ck_assert_uint_eq(state(0), CH_ABSENT);
	ck_assert_uint_eq(state(1), CH_RESIDENT);
	/* the next, dirty, is written back and keeps its frame meanwhile */
	ck_assert(host_evict_for_room(h));
	ck_assert_uint_eq(state(1), CH_EVICTING);
	ck_assert_uint_eq(state(2), CH_ABSENT);
	ck_assert_uint_eq(h->used, FRAMES - 2);
	ck_assert_uint_eq(h->writebacks_inflight, 1);
	ck_assert(unit_run_until(u.base, no_writebacks, 5000));
	ck_assert_uint_eq(state(1), CH_ABSENT);
	ck_assert(h->clients->regions->chunks[1].flags & CH_REMOTE);
	ck_assert_uint_eq(h->used, FRAMES - 3);
	ck_assert_uint_eq(h->stats.writebacks, 1);
	ck_assert_uint_eq(h->stats.evictions_dirty, 1);
	ck_assert_uint_eq(h->stats.evictions_clean, 2);
	/* and what was written comes back from the memory node */
	ck_assert_uint_eq(chunks(1, 1, false).wrong, 0);
	ck_assert_uint_eq(h->stats.fetches, 1);
}
END_TEST

START_TEST(test_clock_gives_a_written_chunk_a_second_chance)
{
	start("eviction = clock\nhigh_watermark = 100\nlow_watermark = 99\n");
	chunks(0, FRAMES, false);
	/* every chunk was faulted: the hand clears them all, then takes 0 */
	ck_assert(host_evict_for_room(h));
	ck_assert_uint_eq(state(0), CH_ABSENT);
	chunks(1, 1, true); /* referenced again */
	ck_assert(host_evict_for_room(h));
	ck_assert_uint_eq(state(1), CH_RESIDENT);
	ck_assert_uint_eq(state(2), CH_ABSENT);
	ck_assert_uint_eq(h->writebacks_inflight, 0);
	ck_assert_uint_eq(h->dirty, 1);
	/* its second chance is spent: next time round it is written back */
	for (unsigned i = 0; i < FRAMES - 3; i++)
		ck_assert(host_evict_for_room(h));
	ck_assert_uint_eq(state(1), CH_RESIDENT);
	ck_assert(!host_evict_for_room(h)); /* nothing clean is left */
	ck_assert_uint_eq(state(1), CH_EVICTING);
}
END_TEST

/*
 * A dirty chunk the hand re-protected and found written again is hot: the
 * hand passes it over, writable, before it re-protects it again (tenure),
 * so that a chunk written all the time costs a write-protect fault every
 * few passes, not every pass.
 */
START_TEST(test_clock_leaves_a_chunk_written_again_writable_for_a_pass)
{
	const struct chunk *c1;
	uint64_t wp;

	start("eviction = clock\nhigh_watermark = 100\nlow_watermark = 99\n");
	c1 = &h->clients->regions->chunks[1];
	chunks(0, FRAMES, false);
	ck_assert(host_evict_for_room(h)); /* every REF cleared; 0 taken */
	chunks(1, 1, true);                /* written: dirty */
	ck_assert(host_evict_for_room(h)); /* 1 re-protected; 2 taken */
	ck_assert(!(c1->flags & CH_UNPROT));
	wp = h->stats.faults_wp;
	chunks(1, 1, true); /* written again: one fault, and it is hot */
	ck_assert_uint_eq(h->stats.faults_wp, wp + 1);
	for (unsigned i = 0; i < FRAMES - 3; i++)
		ck_assert(host_evict_for_room(h)); /* 3..15 taken */
	ck_assert_uint_eq(state(FRAMES - 1), CH_ABSENT);
	chunks(FRAMES, FRAMES - 1, false); /* the buffer full again */
	/* a whole pass: 1 passed over, writable; one of the new ones taken */
	ck_assert(host_evict_for_room(h));
	ck_assert_uint_eq(state(1), CH_RESIDENT);
	ck_assert(c1->flags & CH_UNPROT);
	chunks(1, 1, true);
	ck_assert_uint_eq(h->stats.faults_wp, wp + 1); /* no fault */
	/* the next pass re-protects it: a write faults again */
	ck_assert(host_evict_for_room(h));
	ck_assert(!(c1->flags & CH_UNPROT));
	chunks(1, 1, true);
	ck_assert_uint_eq(h->stats.faults_wp, wp + 2);
	ck_assert_uint_eq(h->dirty, 1);
}
END_TEST

START_TEST(test_background_eviction_runs_from_high_to_low_watermark)
{
	start("high_watermark = 100\nlow_watermark = 99\n");
	chunks(0, 12, false);
	unit_run_for(u.base, 200);
	ck_assert_uint_eq(h->used, 12);
	ck_assert_uint_eq(h->stats.evictions_clean, 0);
	/* as a reload to high_watermark 50, low_watermark 25 does */
	h->high_pct = 50;
	h->low_pct = 25;
	unit_run_for(u.base, 300); /* a few ticks */
	ck_assert(!h->evicting);
	ck_assert_uint_le(h->used, FRAMES * 25 / 100);
	ck_assert_uint_eq(h->stats.evictions_clean, 12 - h->used);
	ck_assert_uint_eq(h->stats.fault_waits_for_room, 0);
}
END_TEST

/*
 * A background pass evicts HOST_EVICT_SLICE chunks at a time: the rest in
 * the loop's next rounds, so that faults' reads and replies go between.
 */
START_TEST(test_background_eviction_goes_by_slices)
{
	uint64_t gen;

	start("high_watermark = 100\nlow_watermark = 99\n");
	ck_assert_uint_eq(chunks(0, 12, false).wrong, 0);
	unit_run_for(u.base, 200);
	ck_assert_uint_eq(h->used, 12);
	h->high_pct = 50;
	h->low_pct = 1;
	gen = h->evict_gen;
	host_evict_background(h);
	ck_assert_uint_eq(h->stats.evictions_clean, HOST_EVICT_SLICE);
	ck_assert(h->evicting);
	ck_assert(evtimer_pending(h->evict_ev, NULL));
	/* one pass: what arrives before its last slice is spared */
	ck_assert_uint_eq(h->evict_gen, gen);
	unit_run_for(u.base, 100);
	ck_assert_uint_gt(h->evict_gen, gen);
	ck_assert_uint_eq(h->stats.evictions_clean, 12);
	ck_assert_uint_eq(h->used, 0);
	ck_assert(!h->evicting);
	ck_assert_uint_eq(chunks(0, 12, false).wrong, 0);
}
END_TEST

/* Counts the pages of chunk c of the region in its arena's memfd. */
static unsigned
pages_in_memfd(uint64_t c)
{
	struct region *r = h->clients->regions;
	unsigned char vec[CHUNK / PAGE];
	unsigned n = 0;

	ck_assert_int_eq(mincore(r->ar->local + r->off + c * CHUNK, CHUNK,
	    vec), 0);
	for (unsigned i = 0; i < CHUNK / PAGE; i++)
		n += vec[i] & 1;
	return n;
}

START_TEST(test_background_pass_punches_each_evicted_chunk_and_no_other)
{
	static const uint64_t order[] = { 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5,
	    13 };

	start("eviction = fifo\nhigh_watermark = 100\nlow_watermark = 99\n");
	/* arrival order interleaves two runs of the region */
	for (unsigned i = 0; i < 12; i++)
		ck_assert_uint_eq(chunks(order[i], 1, false).wrong, 0);
	unit_run_for(u.base, 200);
	for (unsigned i = 0; i < 12; i++)
		ck_assert_uint_eq(pages_in_memfd(order[i]), CHUNK / PAGE);
	h->high_pct = 50;
	h->low_pct = 25;
	unit_run_for(u.base, 300);
	/* the 8 oldest left (two runs of 4), the 4 newest stay whole */
	ck_assert_uint_eq(h->used, 4);
	for (unsigned i = 0; i < 12; i++) {
		bool gone = i < 8;

		ck_assert_uint_eq(state(order[i]), (gone ? CH_ABSENT :
		    CH_RESIDENT));
		ck_assert_uint_eq(pages_in_memfd(order[i]), (gone ? 0 :
		    CHUNK / PAGE));
	}
	ck_assert_uint_eq(pages_in_memfd(6), 0); /* never touched */
	/* and they come back */
	ck_assert_uint_eq(chunks(0, 14, false).wrong, 0);
}
END_TEST

START_TEST(test_occupancy_and_dirty_counters)
{
	struct fam_smsg m = { .type = FAM_S_STAT };
	struct region *r;

	start("eviction = fifo\nhigh_watermark = 100\nlow_watermark = 99\n");
	chunks(0, 4, true);
	chunks(4, 2, false);
	r = h->clients->regions;
	ck_assert_uint_eq(h->used, 6);
	ck_assert_uint_eq(h->dirty, 4);
	ck_assert_uint_eq(r->resident, 6);
	ck_assert_uint_eq(r->dirty, 4);
	m.a = (uint64_t)(uintptr_t)mem;
	ck_assert_int_eq(unit_prog_call(&prog, &m, -1, NULL), 0);
	ck_assert_uint_eq(m.c, 6 * CHUNK);
	ck_assert_uint_eq(m.d, 4 * CHUNK);
	/* the four dirty ones go to write-back, the first clean one out */
	ck_assert(host_evict_for_room(h));
	ck_assert_uint_eq(h->writebacks_inflight, 4);
	ck_assert_uint_eq(h->dirty, 0);
	ck_assert_uint_eq(h->used, 5);
	ck_assert(unit_run_until(u.base, no_writebacks, 5000));
	ck_assert_uint_eq(h->used, 1);
	ck_assert_uint_eq(r->resident, 1);
	ck_assert_uint_eq(r->dirty, 0);
	ck_assert_uint_eq(h->stats.evictions_dirty, 4);
}
END_TEST

START_TEST(test_chunk_read_again_soon_after_it_left_counts_as_a_refault)
{
	start("eviction = fifo\nhigh_watermark = 100\nlow_watermark = 99\n");
	chunks(0, FRAMES, false);
	ck_assert(host_evict_for_room(h));
	ck_assert_uint_eq(state(0), CH_ABSENT);
	/* a chunk read for the first time is no refault */
	ck_assert_uint_eq(chunks(20, 1, false).wrong, 0);
	ck_assert_uint_eq(h->stats.refaults, 0);
	/* the one that just left is */
	ck_assert(host_evict_for_room(h));
	ck_assert_uint_eq(chunks(0, 1, false).wrong, 0);
	ck_assert_uint_eq(h->stats.refaults, 1);
	ck_assert_uint_eq(chunks(0, 1, false).wrong, 0); /* resident: none */
	ck_assert_uint_eq(h->stats.refaults, 1);
}
END_TEST

/*
 * With loops kept, a chunk used at random that comes back soon after it
 * left is hot: the hand passes it HOST_HOT_LAPS times, while hot chunks
 * hold at most a third of the buffer; one past that gets HOST_HEAT passes.
 */
/* Makes room, and reads one of chunks 20..63 in turn (none a refault). */
static void
read_another(uint64_t *next)
{
	ck_assert(host_evict_for_room(h));
	ck_assert_uint_eq(chunks(20 + (*next)++ % 44, 1, false).wrong, 0);
}

START_TEST(test_refault_at_random_stays_hot_for_many_laps_within_a_third)
{
	uint64_t hot = FRAMES / HOST_HOT_SHARE, refaults, next = 0;

	start("eviction = clock\nloop_keep = 50\nhigh_watermark = 100\n"
	    "low_watermark = 99\n");
	chunks(0, FRAMES, false);
	/* chunks 0.. leave one by one and come back at once: refaults */
	for (uint64_t c = 0; c <= hot; c++) {
		ck_assert(host_evict_for_room(h));
		ck_assert_uint_eq(state(c), CH_ABSENT);
		ck_assert_uint_eq(chunks(c, 1, false).wrong, 0);
		ck_assert_uint_eq(h->stats.refaults, c + 1);
	}
	ck_assert_uint_eq(h->hot_pages, hot * CHUNK / PAGE);
	/* many laps of chunks read once: the hot ones stay, the last goes */
	refaults = h->stats.refaults;
	for (unsigned i = 0; i < 8 * FRAMES; i++)
		read_another(&next);
	ck_assert_uint_eq(h->stats.refaults, refaults);
	ck_assert_uint_gt(h->hand_laps, 2 + HOST_HEAT);
	for (uint64_t c = 0; c < hot; c++)
		ck_assert_uint_eq(state(c), CH_RESIDENT);
	ck_assert_uint_eq(state(hot), CH_ABSENT);
	/* hot no more once its laps are over: room for others */
	for (unsigned i = 0; i < 100 * FRAMES && state(0) == CH_RESIDENT; i++)
		read_another(&next);
	ck_assert_uint_eq(state(0), CH_ABSENT);
	ck_assert_uint_gt(h->hand_laps, HOST_HOT_LAPS);
	ck_assert_uint_lt(h->hot_pages, hot * CHUNK / PAGE);
}
END_TEST

/* Without kept loops (the default), a refault gets HOST_HEAT passes. */
START_TEST(test_refault_without_kept_loops_is_not_hot)
{
	start("eviction = clock\nhigh_watermark = 100\nlow_watermark = 99\n");
	chunks(0, FRAMES, false);
	ck_assert(host_evict_for_room(h));
	ck_assert_uint_eq(chunks(0, 1, false).wrong, 0);
	ck_assert_uint_eq(h->stats.refaults, 1);
	ck_assert_uint_eq(h->hot_pages, 0);
	ck_assert(!h->frames[h->clients->regions->chunks[0].frame].hot);
	ck_assert_uint_eq(h->frames[h->clients->regions->chunks[0].frame].heat,
	    HOST_HEAT);
}
END_TEST

/*
 * Makes chunks 0.. hot (written again, with `written`: dirty, and as if
 * found written at every pass), and every other chunk in the buffer
 * unable to leave (marked growing, as a partial chunk is: a state whole
 * resident chunks never have, set here by hand).
 */
static void
hot_alone(bool written)
{
	struct chunk *chs;

	start("eviction = clock\nloop_keep = 50\nhigh_watermark = 100\n"
	    "low_watermark = 99\n");
	chs = h->clients->regions->chunks;
	chunks(0, FRAMES, false);
	for (uint64_t c = 0; c < FRAMES / HOST_HOT_SHARE; c++) {
		ck_assert(host_evict_for_room(h));
		ck_assert_uint_eq(chunks(c, 1, written).wrong, 0);
		h->frames[chs[c].frame].tenure_left = written ?
		    HOST_TENURE_MAX : 0;
	}
	ck_assert_uint_eq(h->hot_pages,
	    FRAMES / HOST_HOT_SHARE * CHUNK / PAGE);
	for (uint64_t c = FRAMES / HOST_HOT_SHARE; c < FRAMES; c++)
		chs[c].flags |= CH_GROWING;
}

/* Ends hot_alone(): every chunk may leave again. */
static void
hot_alone_end(void)
{
	for (uint64_t c = FRAMES / HOST_HOT_SHARE; c < FRAMES; c++) {
		ck_assert_uint_eq(state(c), CH_RESIDENT);
		h->clients->regions->chunks[c].flags &= ~CH_GROWING;
	}
}

/* Hot chunks leave when nothing else in the buffer can. */
START_TEST(test_hot_chunks_leave_when_nothing_else_can)
{
	hot_alone(false);
	ck_assert(host_evict_for_room(h));
	hot_alone_end();
	ck_assert_uint_eq(state(0), CH_ABSENT);
	ck_assert_uint_lt(h->hot_pages, FRAMES / HOST_HOT_SHARE * CHUNK / PAGE);
}
END_TEST

/* ... written again at every pass too: their write-backs start. */
START_TEST(test_hot_chunks_written_again_leave_when_nothing_else_can)
{
	hot_alone(true);
	ck_assert_uint_eq(h->writebacks_inflight, 0);
	host_evict_for_room(h); /* false: room comes from the write-backs */
	ck_assert_uint_gt(h->writebacks_inflight, 0);
	ck_assert(unit_run_until(u.base, no_writebacks, 5000));
	hot_alone_end();
	ck_assert_uint_eq(state(0), CH_ABSENT);
}
END_TEST

START_TEST(test_grain_read_into_a_written_chunk_takes_writes_without_a_fault)
{
	uint64_t wp;

	start("fetch = adaptive\neviction = fifo\nhigh_watermark = 100\n"
	    "low_watermark = 99\n");
	/* a grain of chunk 0, read, then written: one write-protect fault */
	word(0, 0, false);
	word(0, 11, true);
	ck_assert(h->clients->regions->chunks[0].flags & CH_PARTIAL);
	ck_assert_uint_eq(h->stats.faults_wp, 1);
	/* another grain of it, far enough not to look sequential, read */
	ck_assert_uint_eq(word(CHUNK / 2, 0, false), 0);
	ck_assert_uint_eq(h->stats.grain_grows, 1);
	word(CHUNK / 2, 22, true);
	ck_assert_uint_eq(h->stats.faults_wp, 1); /* it went in writable */
	ck_assert_uint_eq(h->dirty, 1);
	/* both writes are written back, and read again */
	while (state(0) == CH_RESIDENT)
		ck_assert(host_evict_for_room(h) ||
		    unit_run_until(u.base, no_writebacks, 5000));
	ck_assert(unit_run_until(u.base, no_writebacks, 5000));
	ck_assert_uint_eq(state(0), CH_ABSENT);
	ck_assert_uint_eq(h->stats.evictions_dirty, 1);
	ck_assert_uint_eq(word(CHUNK / 2, 0, false), 22);
	ck_assert_uint_eq(word(0, 0, false), 11);
	/* a grain of chunk 8 faulted on by a write: no write-protect fault */
	wp = h->stats.faults_wp;
	word(8 * CHUNK, 33, true);
	ck_assert_uint_eq(h->stats.faults_wp, wp);
	ck_assert(h->clients->regions->chunks[8].flags & CH_DIRTY);
	while (state(8) == CH_RESIDENT)
		ck_assert(host_evict_for_room(h) ||
		    unit_run_until(u.base, no_writebacks, 5000));
	ck_assert(unit_run_until(u.base, no_writebacks, 5000));
	ck_assert_uint_eq(word(8 * CHUNK, 0, false), 33);
}
END_TEST

/* Evicts every chunk, waiting for their write-backs. */
static void
evict_all(void)
{
	while (h->used > 0)
		if (!host_evict_for_room(h))
			ck_assert(unit_run_until(u.base, no_writebacks, 5000));
	ck_assert(unit_run_until(u.base, no_writebacks, 5000));
}

START_TEST(test_grain_read_where_chunks_leave_written_takes_writes_at_once)
{
	uint64_t wp;

	start("fetch = adaptive\neviction = fifo\nhigh_watermark = 100\n"
	    "low_watermark = 99\n");
	/* a grain read: it goes in write-protected */
	ck_assert_uint_eq(word(40 * CHUNK, 0, false), 0);
	word(40 * CHUNK, 40, true);
	ck_assert_uint_eq(h->stats.faults_wp, 1);
	/* ten partial chunks, each written, leave the buffer dirty */
	for (uint64_t c = 0; c < 10; c++)
		word(c * CHUNK, c + 1, true);
	evict_all();
	ck_assert_uint_ge(h->stats.evictions_dirty, 11);
	/* from now on a grain read goes in writable, its chunk dirty */
	wp = h->stats.faults_wp;
	ck_assert_uint_eq(word(20 * CHUNK + PAGE, 0, false), 0);
	ck_assert(h->clients->regions->chunks[20].flags & CH_DIRTY);
	ck_assert_uint_eq(h->dirty, 1);
	word(20 * CHUNK + PAGE, 77, true);
	ck_assert_uint_eq(h->stats.faults_wp, wp); /* no fault for it */
	ck_assert_uint_eq(word(5 * CHUNK, 0, false), 6); /* read back */
	word(5 * CHUNK, 66, true);
	ck_assert_uint_eq(h->stats.faults_wp, wp);
	/* both writes are written back, and read again */
	evict_all();
	ck_assert_uint_eq(word(20 * CHUNK + PAGE, 0, false), 77);
	ck_assert_uint_eq(word(5 * CHUNK, 0, false), 66);
	ck_assert_uint_eq(word(40 * CHUNK, 0, false), 40);
}
END_TEST

/* The suite's tests. */
static Suite *
host_buffer_suite(void)
{
	Suite *s = suite_create("host_buffer");
	TCase *t = tcase_create("buffer");

	tcase_add_checked_fixture(t, NULL, teardown);
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_buffer_admits_no_more_frames_than_it_has);
	tcase_add_test(t, test_fifo_evicts_in_arrival_order_and_writes_back_first);
	tcase_add_test(t, test_clock_gives_a_written_chunk_a_second_chance);
	tcase_add_test(t, test_clock_leaves_a_chunk_written_again_writable_for_a_pass);
	tcase_add_test(t, test_background_eviction_runs_from_high_to_low_watermark);
	tcase_add_test(t, test_background_eviction_goes_by_slices);
	tcase_add_test(t, test_background_pass_punches_each_evicted_chunk_and_no_other);
	tcase_add_test(t, test_occupancy_and_dirty_counters);
	tcase_add_test(t,
	    test_chunk_read_again_soon_after_it_left_counts_as_a_refault);
	tcase_add_test(t,
	    test_refault_at_random_stays_hot_for_many_laps_within_a_third);
	tcase_add_test(t, test_hot_chunks_leave_when_nothing_else_can);
	tcase_add_test(t,
	    test_hot_chunks_written_again_leave_when_nothing_else_can);
	tcase_add_test(t, test_refault_without_kept_loops_is_not_hot);
	tcase_add_test(t,
	    test_grain_read_into_a_written_chunk_takes_writes_without_a_fault);
	tcase_add_test(t,
	    test_grain_read_where_chunks_leave_written_takes_writes_at_once);
	suite_add_tcase(s, t);
	return s;
}

/* Runs the suite; exits 0 when every test passed. */
int
main(void)
{
	SRunner *sr = srunner_create(host_buffer_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
