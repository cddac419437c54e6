/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_dpu_cache.c - the dpu's static and dynamic caches on recorded read
 * and write traces, against the real cache code: its real memory, its
 * real prefetch workers (threads), a region record of the real kind. The
 * memory node is a buffer in this process: the test plays the dpu's back,
 * answering each load the cache asks for from that buffer (at once, on
 * the thread that asked), as the forwarding would with the memory node's
 * answer.
 *
 * After each read the test waits until the cache has settled: every read
 * taken off the recent list and every load it led to complete (the
 * region record's references are back to the test's one).
 *
 * Two tests go through the real loads: a memory famd and a dpu famd in
 * this process, and a host connection to the dpu.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "core/famd.h"
#include "dpu/dpu-cache.h"
#include "trace-pagerank.h"

#define KIB        1024u
#define MIB        (1024u * 1024u)
#define ENTRY      (64u * KIB)      /* cache_entry_size of these tests */
#define CHUNK      (16u * KIB)      /* what a host reads at once */
#define T_SETTLE_S 10

/* The dpu whose caches are tested, and the memory node's bytes. */
static struct {
	struct famd d;
	struct cfg cfg;
	struct dpu *dpu;
	struct dpu_mregion *m;  /* the one region record; ours: 1 ref */
	uint8_t *mem;           /* the region on the "memory node" */
	uint64_t size;
	_Atomic unsigned loads; /* loads the back answered */
	uint8_t *fetched;       /* loads answered per KiB of the region */
	bool hold;              /* the workers' loads wait in held */
	pthread_mutex_t held_lock;
	struct dpu_reqq held;
	unsigned nheld;
} t;

/* Fills the memory node's region with bytes that tell offsets apart. */
static void
mem_fill(uint8_t seed)
{
	for (uint64_t i = 0; i < t.size; i++)
		t.mem[i] = (uint8_t)(i * 131 + (i >> 12) + seed);
}

/* Answers one load from the memory node's bytes. */
static void
back_answer(struct dpu_req *q)
{
	ck_assert_uint_le(q->off + q->len, t.size);
	memcpy(q->buf, t.mem + q->off, q->len);
	q->status = 0;
	atomic_fetch_add(&t.loads, 1);
	for (uint64_t k = q->off / KIB; k < (q->off + q->len + KIB - 1) / KIB;
	    k++)
		t.fetched[k]++;
}

/* Answers a list of loads, and the next loads each completion asks for. */
static void
back_run(struct dpu_reqq *list)
{
	struct dpu_req *q;

	while ((q = TAILQ_FIRST(list)) != NULL) {
		struct dpu_req *next;

		TAILQ_REMOVE(list, q, link);
		back_answer(q);
		next = dpu_cache_load_done(t.dpu, q);
		if (next != NULL)
			TAILQ_INSERT_TAIL(list, next, link);
	}
}

/* The prefetch workers' way to the back (dpu->up.loads): answered at once. */
static void
back_loads(struct dpu *dpu, struct dpu_reqq *list, unsigned n)
{
	if (!t.hold) {
		back_run(list);
		return;
	}
	pthread_mutex_lock(&t.held_lock);
	TAILQ_CONCAT(&t.held, list, link);
	t.nheld += n;
	pthread_mutex_unlock(&t.held_lock);
}

/* Starts a dpu's caches with the [dpu] keys in keys, and one region. */
static void
cache_setup(const char *keys, uint64_t size)
{
	char *text;
	struct cfg_errors errs = { 0 };
	FILE *f;
	char *cause = NULL;

	memset(&t, 0, sizeof t);
	text = xasprintf("[famd]\nrole = dpu\nlog_level = err\n"
	    "[dpu]\nmemory_nodes = 127.0.0.1:1\ncache_size = 1M\n"
	    "cache_entry_size = 64K\nprefetch_workers = 1\n%s\n", keys);
	f = fmemopen(text, strlen(text), "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_msg(cfg_load_file(&t.cfg, f, "check.conf", NULL, 0,
	    &errs) == 0, "configuration: %s", errs.count ? errs.msg[0] : "?");
	fclose(f);
	free(text);
	t.d.cfg = &t.cfg;
	t.dpu = calloc(1, sizeof *t.dpu);
	ck_assert_ptr_nonnull(t.dpu);
	t.dpu->d = &t.d;
	t.dpu->up.mregion_gone = dpu_cache_mregion_gone;
	t.dpu->up.loads = back_loads;
	t.dpu->nodes[0].dpu = t.dpu;
	t.dpu->nnodes = 1;
	ck_assert_msg(dpu_cache_start(t.dpu, &cause) == 0, "start: %s",
	    cause);

	t.size = size;
	t.mem = malloc(size);
	ck_assert_ptr_nonnull(t.mem);
	t.fetched = calloc(size / KIB + 1, 1);
	ck_assert_ptr_nonnull(t.fetched);
	pthread_mutex_init(&t.held_lock, NULL);
	TAILQ_INIT(&t.held);
	mem_fill(0);
	t.m = calloc(1, sizeof *t.m);
	ck_assert_ptr_nonnull(t.m);
	t.m->node = &t.dpu->nodes[0];
	t.m->instance = 1;
	t.m->remote.region = 1;
	t.m->remote.size = size;
	atomic_init(&t.m->refs, 1);
}

/* Stops the caches; the region record goes with its last reference. */
static void
cache_teardown(void)
{
	dpu_cache_quiesce(t.dpu);
	ck_assert_uint_eq(atomic_load(&t.m->refs), 1);
	dpu_mregion_put(t.m);
	ck_assert_uint_eq(atomic_load(&t.dpu->static_bytes), 0);
	dpu_cache_stop(t.dpu);
	free(t.dpu);
	free(t.mem);
	free(t.fetched);
	pthread_mutex_destroy(&t.held_lock);
	cfg_free(&t.cfg);
}

/* Waits until the prefetch workers and the loads are done with the region. */
static void
cache_settle(void)
{
	struct timespec ms = { 0, 1000000 };

	for (int i = 0; i < T_SETTLE_S * 1000; i++) {
		if (atomic_load(&t.m->refs) == 1)
			return;
		nanosleep(&ms, NULL);
	}
	ck_abort_msg("the cache did not settle: %u references",
	    atomic_load(&t.m->refs));
}

/*
 * A host reads [off, off + len): served by the cache (true; the bytes are
 * checked against the memory node's) or forwarded (false). Loads the
 * lookup asks for are answered.
 */
static bool
host_read(uint64_t off, uint32_t len)
{
	struct dpu_reqq loads;
	struct dpu_hit hit;
	bool served;

	TAILQ_INIT(&loads);
	served = dpu_cache_lookup(t.dpu, t.m, off, len, &hit, &loads);
	if (served) {
		ck_assert_msg(memcmp(hit.data, t.mem + off, len) == 0,
		    "read of %u bytes at %llu served stale or wrong bytes", len,
		    (unsigned long long)off);
		hit.release(hit.arg);
	}
	back_run(&loads);
	return served;
}

/* A host reads, and the cache settles. */
static bool
host_read_settled(uint64_t off, uint32_t len)
{
	bool served = host_read(off, len);

	cache_settle();
	return served;
}

/*
 * A host writes len bytes of value v at off: the memory node has them,
 * then the cache gets the acknowledged write (the back's path).
 */
static void
host_write(uint64_t off, uint32_t len, uint8_t v)
{
	struct dpu_req q = { 0 };

	q.kind = DR_WRITE;
	q.dpu = t.dpu;
	q.m = t.m;
	q.off = off;
	q.len = len;
	q.buf = malloc(len);
	ck_assert_ptr_nonnull(q.buf);
	memset(q.buf, v, len);
	memcpy(t.mem + off, q.buf, len);
	dpu_cache_write_done(t.dpu, &q);
	free(q.buf);
}

/* Returns a number from the dynamic cache's status (a.b: a nested one). */
static json_int_t
dyn_status(const char *key, const char *sub)
{
	json_t *j = dpu_cache_json(t.dpu);
	json_t *v = json_object_get(json_object_get(j, "dynamic"), key);
	json_int_t n;

	if (sub != NULL)
		v = json_object_get(v, sub);
	ck_assert_msg(v != NULL, "no dynamic.%s%s%s in the status", key,
	    sub ? "." : "", sub ? sub : "");
	n = json_is_boolean(v) ? json_is_true(v) : json_integer_value(v);
	json_decref(j);
	return n;
}

/* Reads a region sequentially in CHUNKs from off; returns the hits. */
static unsigned
sequential_trace(uint64_t off, unsigned reads, unsigned *late_hits,
    unsigned late_from)
{
	unsigned hits = 0;

	for (unsigned i = 0; i < reads; i++) {
		bool hit = host_read_settled(off + (uint64_t)i * CHUNK, CHUNK);

		hits += hit;
		if (late_hits != NULL && i >= late_from)
			*late_hits += hit;
	}
	return hits;
}

/* Returns the next number of a fixed pseudo-random sequence. */
static uint64_t
trace_random(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* ---- static cache ----------------------------------------------------- */

START_TEST(test_static_copy_serves_reads_once_its_pieces_are_loaded)
{
	struct dpu_reqq loads;

	cache_setup("dynamic_cache = off", 2 * MIB + 512 * KIB);
	TAILQ_INIT(&loads);
	ck_assert_int_eq(dpu_cache_advise(t.dpu, t.m, FAM_ADVICE_STATIC,
	    &loads), 0);
	ck_assert(!TAILQ_EMPTY(&loads));
	/* Nothing is loaded yet: the read is forwarded. */
	ck_assert(!host_read(0, CHUNK));
	back_run(&loads);
	/* Three pieces (the last one short), each loaded once. */
	ck_assert_uint_eq(atomic_load(&t.loads), 3);
	ck_assert(host_read(0, CHUNK));
	ck_assert(host_read(MIB - CHUNK / 2, CHUNK));      /* across pieces */
	ck_assert(host_read(t.size - CHUNK, CHUNK));       /* the last bytes */
	ck_assert(host_read(0, 2 * MIB + 512 * KIB));      /* all of it */
	ck_assert_uint_eq(atomic_load(&t.loads), 3);
	cache_teardown();
}
END_TEST

START_TEST(test_static_copy_takes_acknowledged_writes)
{
	struct dpu_reqq loads;

	cache_setup("dynamic_cache = off", 2 * MIB);
	TAILQ_INIT(&loads);
	ck_assert_int_eq(dpu_cache_advise(t.dpu, t.m, FAM_ADVICE_STATIC,
	    &loads), 0);
	back_run(&loads);
	ck_assert(host_read(4 * KIB, CHUNK));
	host_write(4 * KIB, 8 * KIB, 0xa5);
	/* host_read checks the bytes served against the memory node's. */
	ck_assert(host_read(0, CHUNK));
	host_write(MIB - 100, 200, 0x5a);                  /* across pieces */
	ck_assert(host_read(MIB - CHUNK, 2 * CHUNK));
	cache_teardown();
}
END_TEST

/*
 * A region of one piece advised static: its one load, taken out to be
 * answered by the test.
 */
static struct dpu_req *
static_one_load(void)
{
	struct dpu_reqq loads;
	struct dpu_req *q;

	cache_setup("dynamic_cache = off", MIB);
	TAILQ_INIT(&loads);
	ck_assert_int_eq(dpu_cache_advise(t.dpu, t.m, FAM_ADVICE_STATIC,
	    &loads), 0);
	q = TAILQ_FIRST(&loads);
	ck_assert_ptr_nonnull(q);
	TAILQ_REMOVE(&loads, q, link);
	ck_assert(TAILQ_EMPTY(&loads));
	return q;
}

START_TEST(test_static_write_during_a_load_never_leaves_older_data)
{
	struct dpu_reqq loads;
	struct dpu_req *q;
	uint8_t *before;

	TAILQ_INIT(&loads);
	q = static_one_load();
	/*
	 * The load was served by the memory node before a write, whose
	 * acknowledgement arrives first (over verbs the two are not
	 * ordered): the load's older bytes land after the write's.
	 */
	before = malloc(t.size);
	ck_assert_ptr_nonnull(before);
	memcpy(before, t.mem, t.size);
	host_write(CHUNK, CHUNK, 0x77);
	memcpy(q->buf, before + q->off, q->len);
	q->status = 0;
	q = dpu_cache_load_done(t.dpu, q);
	free(before);
	/* Those bytes are never served: the piece is loaded again, at once. */
	ck_assert(!host_read(CHUNK, CHUNK));
	ck_assert_ptr_nonnull(q);
	TAILQ_INSERT_TAIL(&loads, q, link);
	back_run(&loads);
	ck_assert_uint_eq(atomic_load(&t.loads), 1);
	ck_assert(host_read(CHUNK, CHUNK));
	ck_assert(host_read(0, MIB));
	cache_teardown();
}
END_TEST

START_TEST(test_static_torn_load_is_retried_a_few_passes_then_on_a_miss)
{
	struct dpu_req *q = static_one_load();
	unsigned passes = 0;

	/*
	 * Each read of the region's one piece torn by writes (a CRC
	 * mismatch): read again at once, but not for ever.
	 */
	while (q != NULL) {
		passes++;
		ck_assert_uint_le(passes, 10);
		q->status = -EBADMSG;
		q = dpu_cache_load_done(t.dpu, q);
	}
	ck_assert_uint_eq(passes, 4); /* the first, and 3 passes again */
	/* A read that misses starts the loads over: this one is whole. */
	ck_assert(!host_read(0, CHUNK));
	ck_assert_uint_eq(atomic_load(&t.loads), 1);
	ck_assert(host_read(0, MIB));
	cache_teardown();
}
END_TEST

START_TEST(test_static_copy_refused_past_static_size)
{
	struct dpu_reqq loads;

	cache_setup("dynamic_cache = off\nstatic_size = 512K", 2 * MIB);
	TAILQ_INIT(&loads);
	ck_assert_int_eq(dpu_cache_advise(t.dpu, t.m, FAM_ADVICE_STATIC,
	    &loads), -ENOSPC);
	ck_assert(TAILQ_EMPTY(&loads));
	ck_assert(!host_read(0, CHUNK));
	ck_assert_uint_eq(atomic_load(&t.loads), 0);
	cache_teardown();
}
END_TEST

START_TEST(test_static_partial_copy_keeps_the_pieces_read_most)
{
	struct dpu_reqq loads;

	/* Room for 2 of the region's 8 pieces. */
	cache_setup("dynamic_cache = off\nstatic_size = 2M", 8 * MIB);
	TAILQ_INIT(&loads);
	ck_assert_int_eq(dpu_cache_advise(t.dpu, t.m, FAM_ADVICE_STATIC,
	    &loads), 0);
	ck_assert(TAILQ_EMPTY(&loads));
	ck_assert_uint_eq(atomic_load(&t.dpu->static_bytes), 2 * MIB);
	/* Its first 8 reads: pieces 5 and 2 most, piece 7 once. */
	for (unsigned i = 0; i < 7; i++)
		ck_assert(!host_read((i % 2 ? 5 : 2) * (uint64_t)MIB + i * CHUNK,
		    CHUNK));
	ck_assert_uint_eq(atomic_load(&t.loads), 0);
	/* The eighth read chooses: pieces 2 and 5 are loaded, no other. */
	ck_assert(!host_read(7 * (uint64_t)MIB, CHUNK));
	ck_assert(host_read(2 * (uint64_t)MIB + 100 * KIB, CHUNK));
	ck_assert(host_read(5 * (uint64_t)MIB, MIB));
	ck_assert(!host_read(7 * (uint64_t)MIB, CHUNK));
	ck_assert(!host_read(0, CHUNK));
	ck_assert_uint_eq(atomic_load(&t.loads), 2);
	/* A write to a piece it skips is not copied, and is never served. */
	host_write(7 * (uint64_t)MIB, CHUNK, 0x3c);
	ck_assert(!host_read(7 * (uint64_t)MIB, CHUNK));
	host_write(5 * (uint64_t)MIB + CHUNK, CHUNK, 0xc3);
	ck_assert(host_read(5 * (uint64_t)MIB, 4 * CHUNK));
	cache_teardown();
}
END_TEST

/* ---- dynamic cache ---------------------------------------------------- */

START_TEST(test_dynamic_sequential_trace_hits_after_its_prefetch)
{
	unsigned late = 0, hits;

	cache_setup("dynamic_cache = on\nprefetch_depth = 8", 8 * MIB);
	/* The first read finds nothing: nothing was read before it. */
	ck_assert(!host_read_settled(0, CHUNK));
	hits = 1 + sequential_trace(CHUNK, 63, &late, 31);
	ck_assert_uint_gt(atomic_load(&t.loads), 0);
	/* Once the run is seen, the prefetch stays ahead of the reader. */
	ck_assert_uint_eq(late, 63 - 31);
	ck_assert_uint_ge(hits, 32);
	cache_teardown();
}
END_TEST

START_TEST(test_dynamic_run_with_skipped_chunks_still_prefetches)
{
	unsigned hits = 0;

	/*
	 * A host reads a run in pieces of 4 chunks, skipping the chunk
	 * between two pieces (it still holds it): still a run.
	 */
	cache_setup("dynamic_cache = on\nprefetch_depth = 8", 8 * MIB);
	for (unsigned i = 0; i < 12; i++)
		hits += host_read_settled((uint64_t)i * 5 * CHUNK, 4 * CHUNK);
	ck_assert_uint_gt(atomic_load(&t.loads), 0);
	ck_assert_uint_ge(hits, 8);
	cache_teardown();
}
END_TEST

START_TEST(test_dynamic_stride_is_not_a_run)
{
	/* Reads as far apart as they are long: a stride, not a run. */
	cache_setup("dynamic_cache = on\nprefetch_depth = 8", 8 * MIB);
	for (unsigned i = 0; i < 64; i++)
		(void)host_read_settled((uint64_t)i * 2 * CHUNK, CHUNK);
	ck_assert_uint_eq(atomic_load(&t.loads), 0);
	cache_teardown();
}
END_TEST

START_TEST(test_dynamic_random_trace_does_not_prefetch_endlessly)
{
	uint64_t s = 0x9e3779b97f4a7c15ull;
	unsigned reads = 400, hits = 0;

	cache_setup("dynamic_cache = on\nprefetch_depth = 8", 64 * MIB);
	for (unsigned i = 0; i < reads; i++)
		hits += host_read_settled(trace_random(&s) % (t.size / CHUNK) *
		    CHUNK, CHUNK);
	/* Random reads are not runs: (almost) nothing is loaded for them. */
	ck_assert_msg(atomic_load(&t.loads) * 10 <= reads, "%u loads for %u "
	    "random reads", atomic_load(&t.loads), reads);
	ck_assert_uint_le(hits, reads / 10);
	cache_teardown();
}
END_TEST

START_TEST(test_dynamic_eviction_keeps_the_cache_within_its_entries)
{
	unsigned late = 0;
	json_int_t entries;

	/* 16 entries of 64 KiB; the run reads 128 entries' worth. */
	cache_setup("dynamic_cache = on\nprefetch_depth = 8", 8 * MIB);
	entries = dyn_status("entries", NULL);
	ck_assert_int_eq(entries, 16);
	for (unsigned i = 0; i < 8 * MIB / CHUNK; i++) {
		bool hit = host_read_settled((uint64_t)i * CHUNK, CHUNK);

		if (i >= 8 * MIB / CHUNK - 64)
			late += hit;
		ck_assert_int_le(dyn_status("entries_used", NULL), entries);
	}
	/* It loaded far more than it holds, evicting, and still hits. */
	ck_assert_uint_gt(atomic_load(&t.loads), 4 * entries);
	ck_assert_int_gt(dyn_status("evictions", NULL), 0);
	ck_assert_uint_eq(late, 64);
	cache_teardown();
}
END_TEST

START_TEST(test_dynamic_read_spanning_two_valid_entries_is_served)
{
	cache_setup("dynamic_cache = on\nprefetch_depth = 8", 8 * MIB);
	sequential_trace(0, 8, NULL, 0);
	/* Entries 0 and 1 are both cached: each serves its own reads... */
	ck_assert(host_read_settled(ENTRY - CHUNK, CHUNK));
	ck_assert(host_read_settled(ENTRY, CHUNK));
	/* ...and a read across their boundary is served from both. */
	ck_assert(host_read_settled(ENTRY - CHUNK / 2, CHUNK));
	ck_assert(host_read_settled(ENTRY + CHUNK, CHUNK));
	cache_teardown();
}
END_TEST

START_TEST(test_dynamic_entries_take_acknowledged_writes)
{
	cache_setup("dynamic_cache = on\nprefetch_depth = 8", 8 * MIB);
	sequential_trace(0, 8, NULL, 0);
	ck_assert(host_read_settled(ENTRY - CHUNK, CHUNK));
	/* A write across the boundary of two cached entries. */
	host_write(ENTRY - 4 * KIB, 8 * KIB, 0xee);
	ck_assert_int_eq(dyn_status("write_updates", NULL), 2);
	ck_assert(host_read_settled(ENTRY - CHUNK, CHUNK));
	ck_assert(host_read_settled(ENTRY, CHUNK));
	cache_teardown();
}
END_TEST

/* ---- dynamic cache: granules, forwarded reads, waits, eviction -------- */

/*
 * The back's answer to a READ the dpu forwarded, issued when the region
 * had seen wseq writes, with the bytes data (NULL: the memory node's now).
 */
static void
host_forwarded(uint64_t off, uint32_t len, uint64_t wseq, const uint8_t *data)
{
	struct dpu_req q = { 0 };

	q.kind = DR_READ;
	q.dpu = t.dpu;
	q.m = t.m;
	q.off = off;
	q.len = len;
	q.wseq = wseq;
	q.buf = malloc(len);
	ck_assert_ptr_nonnull(q.buf);
	memcpy(q.buf, data != NULL ? data : t.mem + off, len);
	dpu_cache_read_done(t.dpu, &q);
	free(q.buf);
}

/* Waits until the workers are done but for the loads held. */
static void
held_settle(void)
{
	struct timespec ms = { 0, 1000000 };

	for (int i = 0; i < T_SETTLE_S * 1000; i++) {
		unsigned n;

		pthread_mutex_lock(&t.held_lock);
		n = t.nheld;
		pthread_mutex_unlock(&t.held_lock);
		if (atomic_load(&t.m->refs) == 1 + n)
			return;
		nanosleep(&ms, NULL);
	}
	ck_abort_msg("the cache did not settle: %u references",
	    atomic_load(&t.m->refs));
}

/* A host read that misses is forwarded, and its answer comes back. */
static bool
host_read_or_forward(uint64_t off, uint32_t len)
{
	bool hit = host_read(off, len);

	if (!hit)
		host_forwarded(off, len, t.m->writes, NULL);
	if (t.hold)
		held_settle();
	else
		cache_settle();
	return hit;
}

/* Waits until the workers have handed over loads: n held at least. */
static void
held_wait(unsigned n)
{
	struct timespec ms = { 0, 1000000 };

	for (int i = 0; i < T_SETTLE_S * 1000; i++) {
		pthread_mutex_lock(&t.held_lock);
		if (t.nheld >= n && t.dpu->dc.tail == t.dpu->dc.head) {
			pthread_mutex_unlock(&t.held_lock);
			nanosleep(&ms, NULL);
			return;
		}
		pthread_mutex_unlock(&t.held_lock);
		nanosleep(&ms, NULL);
	}
	ck_abort_msg("the workers handed over %u loads, not %u", t.nheld, n);
}

/* Answers every held load with the bytes of old (NULL: the memory's now). */
static void
held_answer(const uint8_t *old)
{
	struct dpu_req *q;

	pthread_mutex_lock(&t.held_lock);
	while ((q = TAILQ_FIRST(&t.held)) != NULL) {
		TAILQ_REMOVE(&t.held, q, link);
		t.nheld--;
		back_answer(q);
		if (old != NULL)
			memcpy(q->buf, old + q->off, q->len);
		ck_assert_ptr_null(dpu_cache_load_done(t.dpu, q));
	}
	pthread_mutex_unlock(&t.held_lock);
}

/* A READ as dpu_forward_rw makes it, of [off, off + len). */
static struct dpu_req *
read_req(uint64_t off, uint32_t len)
{
	struct dpu_req *q = calloc(1, sizeof *q);

	ck_assert_ptr_nonnull(q);
	q->kind = DR_READ;
	q->dpu = t.dpu;
	q->m = t.m;
	q->off = off;
	q->len = len;
	q->buf = malloc(len);
	ck_assert_ptr_nonnull(q->buf);
	return q;
}

/* Frees a READ made by read_req. */
static void
read_req_free(struct dpu_req *q)
{
	free(q->buf);
	free(q);
}

START_TEST(test_dynamic_forwarded_bytes_are_kept_and_never_loaded_again)
{
	cache_setup("dynamic_cache = on\nprefetch_depth = 8", 8 * MIB);
	/* A run of three chunks, each forwarded: its bytes are kept. */
	for (unsigned i = 0; i < 3; i++)
		ck_assert(!host_read_or_forward((uint64_t)i * CHUNK, CHUNK));
	ck_assert_int_eq(dyn_status("insert_bytes", NULL), 3 * CHUNK);
	/* The prefetch starts after the run's end, not at its entry. */
	for (unsigned k = 0; k < 3 * CHUNK / KIB; k++)
		ck_assert_msg(t.fetched[k] == 0, "KiB %u of the forwarded run "
		    "was loaded again", k);
	ck_assert_uint_eq(t.fetched[3 * CHUNK / KIB], 1);
	/* The run's bytes and what follows them are served from the dpu. */
	ck_assert(host_read_settled(0, CHUNK));
	ck_assert(host_read_settled(3 * CHUNK, CHUNK));
	ck_assert(host_read_settled(4 * CHUNK, CHUNK));
	for (unsigned k = 0; k < 8 * MIB / KIB; k++)
		ck_assert_uint_le(t.fetched[k], 1);
	cache_teardown();
}
END_TEST

START_TEST(test_dynamic_read_waits_for_the_load_of_its_bytes)
{
	struct dpu_reqq ready, again;
	struct dpu_hit hit;
	struct dpu_reqq loads;
	struct dpu_req *q;

	cache_setup("dynamic_cache = on\nprefetch_depth = 8", 8 * MIB);
	t.hold = true;
	for (unsigned i = 0; i < 3; i++)
		ck_assert(!host_read_or_forward((uint64_t)i * CHUNK, CHUNK));
	held_wait(1);
	/* The next chunk is loading: the read waits, it is not forwarded. */
	TAILQ_INIT(&loads);
	ck_assert(!dpu_cache_lookup(t.dpu, t.m, 3 * CHUNK, CHUNK, &hit,
	    &loads));
	ck_assert(hit.wait);
	q = read_req(3 * CHUNK, CHUNK);
	ck_assert_int_eq(dpu_cache_park(t.dpu, q), DP_PARKED);
	TAILQ_INIT(&ready);
	TAILQ_INIT(&again);
	dpu_dcache_woken(t.dpu, &ready, &again);
	ck_assert(TAILQ_EMPTY(&ready) && TAILQ_EMPTY(&again));
	held_wait(1);
	held_answer(NULL);
	/* The load is over: the read is served from it, loaded once. */
	dpu_dcache_woken(t.dpu, &ready, &again);
	ck_assert_ptr_eq(TAILQ_FIRST(&ready), q);
	ck_assert(TAILQ_EMPTY(&again));
	ck_assert_int_eq(q->status, 0);
	ck_assert(memcmp(q->buf, t.mem + 3 * CHUNK, CHUNK) == 0);
	for (unsigned k = 0; k < 8 * MIB / KIB; k++)
		ck_assert_uint_le(t.fetched[k], 1);
	ck_assert_int_eq(dyn_status("waits", NULL), 1);
	read_req_free(q);
	t.hold = false;
	held_answer(NULL);
	cache_settle();
	cache_teardown();
}
END_TEST

START_TEST(test_dynamic_write_during_a_waited_load_forwards_the_read)
{
	struct dpu_reqq ready, again;
	struct dpu_hit hit;
	struct dpu_reqq loads;
	struct dpu_req *q;
	uint8_t *before;

	cache_setup("dynamic_cache = on\nprefetch_depth = 8", 8 * MIB);
	t.hold = true;
	for (unsigned i = 0; i < 3; i++)
		ck_assert(!host_read_or_forward((uint64_t)i * CHUNK, CHUNK));
	held_wait(1);
	TAILQ_INIT(&loads);
	ck_assert(!dpu_cache_lookup(t.dpu, t.m, 3 * CHUNK, CHUNK, &hit,
	    &loads));
	ck_assert(hit.wait);
	q = read_req(3 * CHUNK, CHUNK);
	ck_assert_int_eq(dpu_cache_park(t.dpu, q), DP_PARKED);
	held_wait(1);
	/* A write lands while the load is out; the load brings older bytes. */
	before = malloc(t.size);
	ck_assert_ptr_nonnull(before);
	memcpy(before, t.mem, t.size);
	host_write(3 * CHUNK + KIB, 2 * KIB, 0x3c);
	held_answer(before);
	free(before);
	/* The waiting read goes to the memory node; nothing stale is served. */
	TAILQ_INIT(&ready);
	TAILQ_INIT(&again);
	dpu_dcache_woken(t.dpu, &ready, &again);
	ck_assert(TAILQ_EMPTY(&ready));
	ck_assert_ptr_eq(TAILQ_FIRST(&again), q);
	read_req_free(q);
	t.hold = false;
	held_answer(NULL);
	cache_settle();
	host_read_settled(3 * CHUNK, CHUNK); /* checks the bytes if served */
	cache_teardown();
}
END_TEST

START_TEST(test_dynamic_forwarded_read_older_than_a_write_is_not_kept)
{
	uint8_t *old;
	uint64_t wseq;

	cache_setup("dynamic_cache = on\nprefetch_depth = 8", 8 * MIB);
	ck_assert(!host_read(ENTRY, CHUNK));
	wseq = t.m->writes;
	old = malloc(CHUNK);
	ck_assert_ptr_nonnull(old);
	memcpy(old, t.mem + ENTRY, CHUNK);
	/* The write is acknowledged before the READ's older answer. */
	host_write(ENTRY, 4 * KIB, 0x99);
	host_forwarded(ENTRY, CHUNK, wseq, old);
	free(old);
	ck_assert_int_eq(dyn_status("insert_bytes", NULL), 0);
	ck_assert(!host_read_settled(ENTRY, CHUNK));
	/* A READ issued after the write is kept, with the written bytes. */
	host_forwarded(ENTRY, CHUNK, t.m->writes, NULL);
	ck_assert(host_read_settled(ENTRY, CHUNK));
	cache_teardown();
}
END_TEST

START_TEST(test_dynamic_recorded_pagerank_trace_hits_and_loads_what_is_read)
{
	uint64_t chunks = 0, hit = 0, loaded, served;

	/* The geometry it was recorded with: 16 entries of 64 KiB. */
	cache_setup("dynamic_cache = on\nprefetch_depth = 8",
	    (uint64_t)TRACE_PAGERANK_CHUNKS * CHUNK);
	for (size_t i = 0; i < nitems(trace_pagerank); i++) {
		uint64_t off = (uint64_t)trace_pagerank[i].off * CHUNK;
		uint32_t len = trace_pagerank[i].len * CHUNK;

		/* Every hit's bytes are checked against the memory node's. */
		if (host_read_or_forward(off, len))
			hit += trace_pagerank[i].len;
		chunks += trace_pagerank[i].len;
	}
	loaded = (uint64_t)dyn_status("load_bytes", NULL);
	served = (uint64_t)dyn_status("load_served_bytes", NULL);
	ck_assert_uint_gt(dyn_status("evictions", NULL), 0);
	/*
	 * Measured when it was recorded: 1217 of 1300 chunks hit, 74% of
	 * the bytes loaded served (this small cache evicts some loads
	 * before their read, and loads past the end of each sweep).
	 */
	ck_assert_msg(hit * 100 >= chunks * 90, "%llu of %llu chunks hit",
	    (unsigned long long)hit, (unsigned long long)chunks);
	ck_assert_msg(loaded > 0 && served * 100 >= loaded * 70, "%llu bytes "
	    "loaded, %llu of them served", (unsigned long long)loaded,
	    (unsigned long long)served);
	cache_teardown();
}
END_TEST

START_TEST(test_dynamic_eviction_takes_spent_entries_before_prefetched_ones)
{
	unsigned hits = 0;

	/*
	 * 16 entries: 8 of bytes the host has had (forwarded reads, apart:
	 * not a run, nothing loaded for them).
	 */
	cache_setup("dynamic_cache = on\nprefetch_depth = 8", 8 * MIB);
	for (unsigned i = 0; i < 8; i++)
		host_read_or_forward((uint64_t)(32 + 2 * i) * ENTRY, ENTRY);
	/* A run at 4 MiB: its prefetch loads entries ahead of it. */
	for (unsigned i = 0; i < 12; i++)
		host_read_or_forward(4 * MIB + (uint64_t)i * CHUNK, CHUNK);
	/* Eight more forwarded reads need slots: the spent entries go. */
	for (unsigned i = 0; i < 8; i++)
		host_read_or_forward((uint64_t)(96 + 2 * i) * ENTRY, ENTRY);
	ck_assert_int_gt(dyn_status("evictions", NULL), 0);
	/* What was loaded ahead of the run is still there: it hits. */
	for (unsigned i = 12; i < 24; i++)
		hits += host_read_settled(4 * MIB + (uint64_t)i * CHUNK, CHUNK);
	ck_assert_uint_eq(hits, 12);
	ck_assert_int_eq(dyn_status("prefetches_wasted", NULL), 0);
	cache_teardown();
}
END_TEST

START_TEST(test_dynamic_read_half_cached_forwards_only_its_missing_part)
{
	struct dpu_reqq loads;
	struct dpu_hit hit;
	struct dpu_req *q;

	cache_setup("dynamic_cache = on\nprefetch_depth = 0", 8 * MIB);
	/* Entry 0 is cached (a forwarded read's bytes); entry 1 is not. */
	host_forwarded(0, ENTRY, t.m->writes, NULL);
	TAILQ_INIT(&loads);
	ck_assert(!dpu_cache_lookup(t.dpu, t.m, ENTRY - CHUNK, 2 * CHUNK,
	    &hit, &loads));
	ck_assert(hit.wait);
	q = read_req(ENTRY - CHUNK, 2 * CHUNK);
	ck_assert_int_eq(dpu_cache_park(t.dpu, q), DP_FORWARD);
	/* Only the chunk in entry 1 goes to the memory node. */
	ck_assert_uint_eq(q->sub_off, CHUNK);
	ck_assert_uint_eq(q->sub_len, CHUNK);
	ck_assert(memcmp(q->buf, t.mem + ENTRY - CHUNK, CHUNK) == 0);
	ck_assert_int_eq(dyn_status("partial_misses", NULL), 1);
	/*
	 * A write lands before the memory node's answer: the part copied
	 * from the cache may be older, so the answer is not kept.
	 */
	host_write(ENTRY - CHUNK, KIB, 0x42);
	memcpy(q->buf + q->sub_off, t.mem + q->off + q->sub_off, q->sub_len);
	q->status = 0;
	dpu_cache_read_done(t.dpu, q);
	ck_assert_int_eq(dyn_status("insert_bytes", NULL), ENTRY);
	ck_assert(!host_read_settled(ENTRY, CHUNK));
	ck_assert(host_read_settled(ENTRY - CHUNK, CHUNK));
	read_req_free(q);
	cache_settle();
	cache_teardown();
}
END_TEST

START_TEST(test_dynamic_cache_leaves_a_region_advised_static_alone)
{
	struct dpu_reqq loads;

	/* Advised static, too big for static_size: not copied... */
	cache_setup("dynamic_cache = on\nprefetch_depth = 8\nstatic_size = 512K",
	    2 * MIB);
	TAILQ_INIT(&loads);
	ck_assert_int_eq(dpu_cache_advise(t.dpu, t.m, FAM_ADVICE_STATIC,
	    &loads), -ENOSPC);
	/* ...and a run through it is neither looked up, loaded nor kept. */
	for (unsigned i = 0; i < 16; i++)
		ck_assert(!host_read_or_forward((uint64_t)i * CHUNK, CHUNK));
	ck_assert_uint_eq(atomic_load(&t.loads), 0);
	ck_assert_int_eq(dyn_status("lookup_bytes", NULL), 0);
	ck_assert_int_eq(dyn_status("insert_bytes", NULL), 0);
	cache_teardown();
}
END_TEST

START_TEST(test_adaptive_turns_off_below_bw_ratio_and_on_after_probe)
{
	uint64_t s = 12345;
	struct timespec probe = { 0, 150 * 1000000 };
	unsigned hits;

	cache_setup("dynamic_cache = adaptive\nbw_ratio = 50\nhit_window = 16\n"
	    "probe_interval = 100ms\nprefetch_depth = 8", 64 * MIB);
	ck_assert_int_eq(dyn_status("enabled", NULL), 1);
	/* A window of random reads: hit rate 0, below 50%: off. */
	for (unsigned i = 0; i < 16; i++)
		host_read_settled(trace_random(&s) % (t.size / CHUNK) * CHUNK,
		    CHUNK);
	ck_assert_int_eq(dyn_status("enabled", NULL), 0);
	ck_assert_int_eq(dyn_status("adaptive", "switches_off"), 1);
	/* Off, it serves nothing and loads nothing, even for a run. */
	s = atomic_load(&t.loads);
	ck_assert_uint_eq(sequential_trace(0, 8, NULL, 0), 0);
	ck_assert_uint_eq(atomic_load(&t.loads), s);
	/* After probe_interval, the next read turns it on for a window. */
	nanosleep(&probe, NULL);
	hits = sequential_trace(32 * MIB, 16, NULL, 0);
	ck_assert_int_eq(dyn_status("adaptive", "switches_on"), 1);
	/* A run hits above bw_ratio: it stays on, judged over that window. */
	ck_assert_uint_gt(hits * 100, 50 * 16);
	ck_assert_int_eq(dyn_status("enabled", NULL), 1);
	ck_assert_int_eq(dyn_status("adaptive", "switches_off"), 1);
	ck_assert_int_eq(dyn_status("adaptive", "windows"), 2);
	cache_teardown();
}
END_TEST

START_TEST(test_cache_set_off_empties_the_dynamic_cache)
{
	cache_setup("dynamic_cache = on\nprefetch_depth = 8", 8 * MIB);
	sequential_trace(0, 8, NULL, 0);
	ck_assert_int_gt(dyn_status("entries_used", NULL), 0);
	dpu_cache_set_dynamic(t.dpu, CFG_DYNAMIC_OFF, "test");
	ck_assert_int_eq(dyn_status("entries_used", NULL), 0);
	ck_assert(!host_read_settled(CHUNK, CHUNK));
	dpu_cache_set_dynamic(t.dpu, CFG_DYNAMIC_ON, "test");
	ck_assert_uint_ge(sequential_trace(8 * CHUNK, 16, NULL, 0), 8);
	cache_teardown();
}
END_TEST

/* ---- through the real loads --------------------------------------------- */

/*
 * A memory famd and a dpu famd in this process, on one loop (as
 * famd.c starts them: tcp on loopback, async = no), and a host connection
 * to the dpu made with the transport, as a host famd makes it: the
 * caches' loads go through the forwarding to the real memory node.
 */
static struct {
	struct event_base *base;
	struct famd mem, dpu;
	struct cfg mem_cfg, dpu_cfg;
	char dir[64];
	struct fam_conn *c;
	bool connected, closed;
} real;

/* An operation of the host, and its answer. */
struct real_op {
	bool done;
	int status;
	uint8_t resp[FAM_REGION_INFO_LEN];
	uint32_t len;
};

/* Loads a configuration from text. */
static void
real_cfg(struct cfg *cfg, const char *text)
{
	struct cfg_errors errs = { 0 };
	FILE *f = fmemopen((void *)text, strlen(text), "r");

	ck_assert_ptr_nonnull(f);
	ck_assert_msg(cfg_load_file(cfg, f, "check.conf", NULL, 0, &errs) == 0,
	    "configuration: %s", errs.count ? errs.msg[0] : "?");
	fclose(f);
}

/* Returns a value of a famd's status, by a path of keys (ints: index). */
static json_t *
real_status(struct famd *d, const char *const *path, unsigned n)
{
	json_t *st = json_pack("{s:[]}", "peers");
	json_t *v = st, *copy;

	d->ops->status(d, st);
	for (unsigned i = 0; i < n && v != NULL; i++)
		v = json_is_array(v) ? json_array_get(v, (size_t)atoi(path[i])) :
		    json_object_get(v, path[i]);
	copy = v != NULL ? json_deep_copy(v) : NULL;
	json_decref(st);
	return copy;
}

/* Returns a counter of the dpu's cache status: cache.KIND.KEY. */
static json_int_t
real_cache(const char *kind, const char *key)
{
	const char *path[] = { "cache", kind, key };
	json_t *v = real_status(&real.dpu, path, 3);
	json_int_t n;

	ck_assert_ptr_nonnull(v);
	n = json_integer_value(v);
	json_decref(v);
	return n;
}

/* Runs the loop a little: what is ready, then a millisecond's sleep. */
static void
real_pump(void)
{
	struct timespec ms = { 0, 1000000 };

	event_base_loop(real.base, EVLOOP_NONBLOCK);
	nanosleep(&ms, NULL);
}

/* Runs the loop until *flag, or fails after a while. */
static void
real_wait(const bool *flag, const char *what)
{
	for (int i = 0; i < T_SETTLE_S * 1000 && !*flag; i++)
		real_pump();
	ck_assert_msg(*flag, "timed out waiting for %s", what);
}

/* The host's connection to the dpu is up. */
static void
real_connected(struct fam_conn *c, const struct fam_hello_resp *resp,
    void *arg)
{
	real.connected = true;
}

/* The host's connection to the dpu is gone. */
static void
real_closed(struct fam_conn *c, int err, void *arg)
{
	real.closed = true;
	real.c = NULL;
}

static const struct fam_conn_handlers real_handlers = {
	.connected = real_connected,
	.closed = real_closed,
};

/* Completion of a host's operation. */
static void
real_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct real_op *op = ctx;

	op->status = status;
	op->len = len < sizeof op->resp ? len : (uint32_t)sizeof op->resp;
	if (payload != NULL)
		memcpy(op->resp, payload, op->len);
	op->done = true;
}

/* Returns the port a famd listens on (its status: SECTION.listen). */
static unsigned
real_port(struct famd *d, const char *section)
{
	const char *path[] = { section, "listen" };
	json_t *v = real_status(d, path, 2);
	const char *colon;
	unsigned port;

	ck_assert_ptr_nonnull(v);
	colon = strrchr(json_string_value(v), ':');
	ck_assert_ptr_nonnull(colon);
	port = (unsigned)atoi(colon + 1);
	json_decref(v);
	return port;
}

/* Returns true once the dpu's memory node is up. */
static bool
real_dpu_up(void)
{
	const char *path[] = { "peers", "0", "state" };
	json_t *v = real_status(&real.dpu, path, 3);
	bool up = v != NULL && strcmp(json_string_value(v), "up") == 0;

	json_decref(v);
	return up;
}

/* Starts a memory famd, a dpu famd with [dpu] keys, and a host connection. */
static void
real_setup(const char *keys)
{
	struct fam_conn_opts o = { 0 };
	char *text, *cause = NULL;
	int i;

	memset(&real, 0, sizeof real);
	signal(SIGPIPE, SIG_IGN);
	strcpy(real.dir, "/tmp/check_dpu_cache.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(real.dir));
	real.base = event_base_new();
	ck_assert_ptr_nonnull(real.base);
	text = xasprintf("[famd]\nrole = memory\nnode_name = check-memory\n"
	    "log_level = err\nop_timeout = 5s\n[memory]\n"
	    "listen = 127.0.0.1:0\ncapacity = 16M\npreload_dir = %s\n"
	    "session_grace = 0\n", real.dir);
	real_cfg(&real.mem_cfg, text);
	free(text);
	real.mem = (struct famd){ .base = real.base, .cfg = &real.mem_cfg,
	    .role = ROLE_MEMORY, .ops = &role_memory_ops };
	famd = &real.mem;
	admin_unregister_all();
	ck_assert_int_eq(real.mem.ops->start(&real.mem), 0);
	text = xasprintf("[famd]\nrole = dpu\nnode_name = check-dpu\n"
	    "log_level = err\nop_timeout = 5s\n[dpu]\nlisten = 127.0.0.1:0\n"
	    "memory_nodes = 127.0.0.1:%u\nsession_grace = 0\nasync = no\n"
	    "cache_size = 1M\ncache_entry_size = 64K\n%s\n",
	    real_port(&real.mem, "memory"), keys);
	real_cfg(&real.dpu_cfg, text);
	free(text);
	real.dpu = (struct famd){ .base = real.base, .cfg = &real.dpu_cfg,
	    .role = ROLE_DPU, .ops = &role_dpu_ops };
	famd = &real.dpu;
	admin_unregister_all();
	ck_assert_int_eq(real.dpu.ops->start(&real.dpu), 0);
	for (i = 0; i < T_SETTLE_S * 1000 && !real_dpu_up(); i++)
		real_pump();
	ck_assert_msg(real_dpu_up(), "the dpu did not reach its memory node");

	o.kind = FAM_TP_TCP;
	o.hello.role = FAM_WIRE_ROLE_HOST;
	snprintf(o.hello.node, sizeof o.hello.node, "check-host");
	o.op_timeout_ms = 5000;
	o.max_outstanding = 64;
	o.max_payload = FAM_PROTO_MAX_PAYLOAD;
	text = xasprintf("127.0.0.1:%u", real_port(&real.dpu, "dpu"));
	ck_assert_msg(fam_connect(real.base, text, &o, &real_handlers, NULL,
	    &real.c, &cause) == 0, "connect: %s", cause);
	free(text);
	real_wait(&real.connected, "the host's hello");
}

/* Closes the host connection and stops both famds. */
static void
real_teardown(void)
{
	char *cmd;

	if (real.c != NULL) {
		fam_conn_close(real.c);
		real_wait(&real.closed, "the host connection to close");
	}
	real.dpu.ops->stop(&real.dpu);
	real.mem.ops->stop(&real.mem);
	cfg_free(&real.dpu_cfg);
	cfg_free(&real.mem_cfg);
	event_base_free(real.base);
	cmd = xasprintf("rm -rf %s", real.dir);
	ck_assert_int_eq(system(cmd), 0);
	free(cmd);
}

/* The host creates a region through the dpu; returns its id there. */
static uint32_t
real_create(const char *name, uint64_t size)
{
	struct fam_region_create req = { .size = size };
	struct fam_region_info info;
	struct real_op op = { 0 };
	uint8_t buf[FAM_REGION_CREATE_MIN + FAM_NAME_MAX + FAM_PATH_MAX];
	size_t len;

	snprintf(req.name, sizeof req.name, "%s", name);
	len = proto_put_region_create(buf, sizeof buf, &req);
	ck_assert_uint_gt(len, 0);
	ck_assert_int_eq(fam_conn_call(real.c, FAM_MSG_REGION_CREATE, buf,
	    (uint32_t)len, real_done, &op), 0);
	real_wait(&op.done, "REGION_CREATE");
	ck_assert_int_eq(op.status, 0);
	ck_assert_int_eq(proto_get_region_info(op.resp, op.len, &info), 0);
	return info.region;
}

/* The host reads or writes [off, off + len) of region id through the dpu. */
static void
real_rw(uint32_t id, bool write, uint64_t off, uint32_t len, uint8_t *buf)
{
	struct fam_remote rem = { .region = id, .size = 1ull << 30 };
	struct real_op op = { 0 };

	if (write)
		ck_assert_int_eq(fam_conn_write(real.c, &rem, off, len, buf, NULL,
		    real_done, &op), 0);
	else
		ck_assert_int_eq(fam_conn_read(real.c, &rem, off, len, buf, NULL,
		    real_done, &op), 0);
	real_wait(&op.done, write ? "a WRITE" : "a READ");
	ck_assert_int_eq(op.status, 0);
}

/* The host writes bytes of a pattern (seed) over [0, size) of region id. */
static void
real_fill(uint32_t id, uint64_t size, uint8_t seed, uint8_t *mem)
{
	for (uint64_t i = 0; i < size; i++)
		mem[i] = (uint8_t)(i * 131 + (i >> 12) + seed);
	for (uint64_t off = 0; off < size; off += 256 * KIB)
		real_rw(id, true, off, 256 * KIB, mem + off);
}

/* The host reads [off, off + len) and checks it against mem. */
static void
real_check(uint32_t id, const uint8_t *mem, uint64_t off, uint32_t len)
{
	uint8_t *buf = malloc(len);

	ck_assert_ptr_nonnull(buf);
	real_rw(id, false, off, len, buf);
	ck_assert_msg(memcmp(buf, mem + off, len) == 0, "read of %u bytes at "
	    "%llu through the dpu is wrong", len, (unsigned long long)off);
	free(buf);
}

START_TEST(test_real_static_copy_loads_from_the_memory_node)
{
	uint8_t *mem = malloc(2 * MIB);
	struct real_op op = { 0 };
	uint8_t buf[FAM_REGION_ADVISE_LEN];
	uint32_t id;

	ck_assert_ptr_nonnull(mem);
	real_setup("dynamic_cache = off");
	id = real_create("plain", 2 * MIB);
	real_fill(id, 2 * MIB, 3, mem);
	ck_assert_int_eq(real_cache("static", "regions"), 0);
	/* A program's advice: the region is loaded whole from the node. */
	proto_put_region_advise(buf, id, FAM_ADVICE_STATIC);
	ck_assert_int_eq(fam_conn_call(real.c, FAM_MSG_REGION_ADVISE, buf,
	    sizeof buf, real_done, &op), 0);
	real_wait(&op.done, "REGION_ADVISE");
	ck_assert_int_eq(op.status, 0);
	for (int i = 0; i < T_SETTLE_S * 1000 &&
	    real_cache("static", "loaded_bytes") < 2 * MIB; i++)
		real_pump();
	ck_assert_int_eq(real_cache("static", "loaded_bytes"), 2 * MIB);
	real_check(id, mem, MIB - 8 * KIB, CHUNK);
	ck_assert_int_eq(real_cache("static", "hits"), 1);
	/* A write goes to the node and into the copy. */
	memset(mem + MIB, 0x3c, 4 * KIB);
	real_rw(id, true, MIB, 4 * KIB, mem + MIB);
	real_check(id, mem, MIB - 8 * KIB, CHUNK);
	ck_assert_int_eq(real_cache("static", "hits"), 2);
	real_teardown();
	free(mem);
}
END_TEST

START_TEST(test_real_dynamic_prefetch_loads_from_the_memory_node)
{
	uint8_t *mem = malloc(2 * MIB);
	uint32_t id;

	ck_assert_ptr_nonnull(mem);
	real_setup("dynamic_cache = on\nprefetch_depth = 4");
	id = real_create("run", 2 * MIB);
	real_fill(id, 2 * MIB, 5, mem);
	for (uint64_t off = 0; off < 2 * MIB; off += CHUNK) {
		real_check(id, mem, off, CHUNK);
		for (int i = 0; i < 5; i++)
			real_pump();
	}
	ck_assert_int_gt(real_cache("dynamic", "loads"), 0);
	ck_assert_int_gt(real_cache("dynamic", "hits"), 2 * MIB / CHUNK / 4);
	ck_assert_int_eq(real_cache("dynamic", "load_errors"), 0);
	real_teardown();
	free(mem);
}
END_TEST

/* The suite. */
static Suite *
dpu_cache_suite(void)
{
	Suite *s = suite_create("dpu_cache");
	TCase *st = tcase_create("static");
	TCase *dy = tcase_create("dynamic");
	TCase *re = tcase_create("real_loads");

	tcase_set_timeout(st, 60);
	tcase_set_timeout(dy, 120);
	tcase_set_timeout(re, 120);
	tcase_add_test(st, test_static_copy_serves_reads_once_its_pieces_are_loaded);
	tcase_add_test(st, test_static_copy_takes_acknowledged_writes);
	tcase_add_test(st, test_static_write_during_a_load_never_leaves_older_data);
	tcase_add_test(st, test_static_torn_load_is_retried_a_few_passes_then_on_a_miss);
	tcase_add_test(st, test_static_copy_refused_past_static_size);
	tcase_add_test(st, test_static_partial_copy_keeps_the_pieces_read_most);
	tcase_add_test(dy, test_dynamic_sequential_trace_hits_after_its_prefetch);
	tcase_add_test(dy, test_dynamic_run_with_skipped_chunks_still_prefetches);
	tcase_add_test(dy, test_dynamic_stride_is_not_a_run);
	tcase_add_test(dy, test_dynamic_recorded_pagerank_trace_hits_and_loads_what_is_read);
	tcase_add_test(dy, test_dynamic_random_trace_does_not_prefetch_endlessly);
	tcase_add_test(dy, test_dynamic_eviction_keeps_the_cache_within_its_entries);
	tcase_add_test(dy, test_dynamic_read_spanning_two_valid_entries_is_served);
	tcase_add_test(dy, test_dynamic_entries_take_acknowledged_writes);
	tcase_add_test(dy, test_dynamic_forwarded_bytes_are_kept_and_never_loaded_again);
	tcase_add_test(dy, test_dynamic_read_waits_for_the_load_of_its_bytes);
	tcase_add_test(dy, test_dynamic_write_during_a_waited_load_forwards_the_read);
	tcase_add_test(dy, test_dynamic_forwarded_read_older_than_a_write_is_not_kept);
	tcase_add_test(dy, test_dynamic_eviction_takes_spent_entries_before_prefetched_ones);
	tcase_add_test(dy, test_dynamic_read_half_cached_forwards_only_its_missing_part);
	tcase_add_test(dy, test_dynamic_cache_leaves_a_region_advised_static_alone);
	tcase_add_test(dy, test_adaptive_turns_off_below_bw_ratio_and_on_after_probe);
	tcase_add_test(dy, test_cache_set_off_empties_the_dynamic_cache);
	tcase_add_test(re, test_real_static_copy_loads_from_the_memory_node);
	tcase_add_test(re, test_real_dynamic_prefetch_loads_from_the_memory_node);
	suite_add_tcase(s, st);
	suite_add_tcase(s, dy);
	suite_add_tcase(s, re);
	return s;
}

/* Runs the suite. */
int
main(void)
{
	SRunner *sr = srunner_create(dpu_cache_suite());
	int failed;

	log_open(LOG_DEST_STDERR, LOG_ERR);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
