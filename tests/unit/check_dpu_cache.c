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
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/famd.h"
#include "dpu/dpu-cache.h"

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
	back_run(list);
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

START_TEST(test_static_write_during_a_load_never_leaves_older_data)
{
	struct dpu_reqq loads;
	struct dpu_req *q;
	uint8_t *before;

	cache_setup("dynamic_cache = off", MIB);
	TAILQ_INIT(&loads);
	ck_assert_int_eq(dpu_cache_advise(t.dpu, t.m, FAM_ADVICE_STATIC,
	    &loads), 0);
	q = TAILQ_FIRST(&loads);
	ck_assert_ptr_nonnull(q);
	TAILQ_REMOVE(&loads, q, link);
	ck_assert(TAILQ_EMPTY(&loads));
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
	ck_assert_ptr_null(dpu_cache_load_done(t.dpu, q));
	free(before);
	/* Those bytes are never served: the piece is loaded again. */
	ck_assert(!host_read(CHUNK, CHUNK));
	ck_assert_uint_eq(atomic_load(&t.loads), 1);
	ck_assert(host_read(CHUNK, CHUNK));
	ck_assert(host_read(0, MIB));
	cache_teardown();
}
END_TEST

START_TEST(test_static_copy_refused_past_static_size)
{
	struct dpu_reqq loads;

	cache_setup("dynamic_cache = off\nstatic_size = 1M", 2 * MIB);
	TAILQ_INIT(&loads);
	ck_assert_int_eq(dpu_cache_advise(t.dpu, t.m, FAM_ADVICE_STATIC,
	    &loads), -ENOSPC);
	ck_assert(TAILQ_EMPTY(&loads));
	ck_assert(!host_read(0, CHUNK));
	ck_assert_uint_eq(atomic_load(&t.loads), 0);
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

START_TEST(test_dynamic_read_spanning_two_entries_is_forwarded)
{
	cache_setup("dynamic_cache = on\nprefetch_depth = 8", 8 * MIB);
	sequential_trace(0, 8, NULL, 0);
	/* Entries 0 and 1 are both cached: each serves its own reads... */
	ck_assert(host_read_settled(ENTRY - CHUNK, CHUNK));
	ck_assert(host_read_settled(ENTRY, CHUNK));
	/* ...and a read across their boundary goes to the memory node. */
	ck_assert(!host_read_settled(ENTRY - CHUNK / 2, CHUNK));
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

/* The suite. */
static Suite *
dpu_cache_suite(void)
{
	Suite *s = suite_create("dpu_cache");
	TCase *st = tcase_create("static");
	TCase *dy = tcase_create("dynamic");

	tcase_set_timeout(st, 60);
	tcase_set_timeout(dy, 120);
	tcase_add_test(st, test_static_copy_serves_reads_once_its_pieces_are_loaded);
	tcase_add_test(st, test_static_copy_takes_acknowledged_writes);
	tcase_add_test(st, test_static_write_during_a_load_never_leaves_older_data);
	tcase_add_test(st, test_static_copy_refused_past_static_size);
	tcase_add_test(dy, test_dynamic_sequential_trace_hits_after_its_prefetch);
	tcase_add_test(dy, test_dynamic_random_trace_does_not_prefetch_endlessly);
	tcase_add_test(dy, test_dynamic_eviction_keeps_the_cache_within_its_entries);
	tcase_add_test(dy, test_dynamic_read_spanning_two_entries_is_forwarded);
	tcase_add_test(dy, test_dynamic_entries_take_acknowledged_writes);
	tcase_add_test(dy, test_adaptive_turns_off_below_bw_ratio_and_on_after_probe);
	tcase_add_test(dy, test_cache_set_off_empties_the_dynamic_cache);
	suite_add_tcase(s, st);
	suite_add_tcase(s, dy);
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
