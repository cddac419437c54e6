/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famtest.c - checks that memory from malloc() holds exactly what was
 * written, run under LD_PRELOAD=libfamshim.so so that its large blocks are
 * fabric-attached memory served by a host famd. Every byte it reads back is
 * compared with what it wrote (or with zero); the first wrong one fails the
 * run with its offset, the expected and the actual value.
 *
 * usage: famtest [-s SIZE] [-t THREADS] [-n COUNT] [-b BLOCKS] [-S SEED]
 *                [-f|-l] [-w] [TEST...]
 *   -s SIZE   bytes of the big buffer (K, M, G suffixes; default 64M)
 *   -t N      threads for the thread tests (default 8)
 *   -n N      blocks in the "many" test (default 10000)
 *   -b N      blocks each thread of the "split" test makes (default 16)
 *   -S SEED   pattern seed (default 1)
 *   -f        expect fabric-attached memory: every large block must lie in
 *             a mapping registered with userfaultfd ("um" in
 *             /proc/self/smaps) and kept from children ("dc": a child
 *             gets famd's copy instead), and a fresh one must read as
 *             zeros
 *   -l        expect libc memory (no famd): no large block may be such
 *   -w        sparse: once its words are written, verified and rewritten,
 *             say "holding" and wait for SIGUSR1 (a driver restarts famd
 *             meanwhile), then go on
 * A large block is 2 MiB (above the shim's default threshold), or
 * FAM_THRESHOLD + 4 KiB when that is set, below 2 MiB too (tests that scale
 * their data down lower the threshold with it).
 * TESTS (default: all of them, in this order):
 *   seq       write the buffer front to back, verify
 *   random    write chunks in a pseudo-random order, verify in another
 *   runs      written, then read front to back twice while chunks further
 *             on are touched first, so that read-ahead meets resident
 *             chunks in the middle of the runs it reads at once
 *   strided   one word per 4 KiB + 8 B of a calloc'd buffer; the rest
 *             must stay zero
 *   advise    madvise (HUGEPAGE, NOHUGEPAGE) and mprotect split the block
 *             into mappings at pages inside chunks; written and verified
 *             through eviction, twice
 *   shared    THREADS threads write interleaved words of the same chunks,
 *             then each verifies all of them
 *   split     THREADS threads each write and verify their slice, and
 *             allocate, fill, verify and free blocks of their own at once
 *   calloc    calloc reads zero; written, freed, calloc'd again: zero again
 *   realloc   growing, shrinking and crossing the threshold keep the data
 *   align     posix_memalign, aligned_alloc, memalign, valloc, pvalloc
 *   many      COUNT large blocks held at once, then COUNT alloc/free pairs
 *   fork      fork+exec /bin/true; a child allocating its own blocks; a
 *             child reading an inherited block and writing it privately
 *   cow       fork with copy-on-write over the whole buffer: parent and
 *             child write halves at once, each sees only its own writes
 *             ($FAMTEST_HOLD: a file made after the child's exit, waited
 *             for to go away before the last check)
 *   cowfree   fork; the parent frees its block and fills a new one while
 *             the child still shares the old: the child reads its data
 *   sparse    (only when named) random 8-byte writes, one per 16 KiB on
 *             average, over a calloc'd buffer: written, verified and
 *             rewritten in another order, verified in a third; the word
 *             after each stays zero (few of a chunk's pages are used)
 *   reads     (only when named) one block written once, then read and
 *             verified in passes, "read N" printed after each, until
 *             SIGUSR1; then one more pass (nothing written back meanwhile)
 *   passes    (only when named) one block, rewritten with a new pattern
 *             and verified in passes, "pass N" printed after each, until
 *             SIGUSR1; then one more pass: a driver changes things under
 *             a program that keeps the same memory (and its data) all along
 * FAMTEST_THREADS, FAMTEST_COUNT and FAMTEST_BLOCKS in the environment
 * change the defaults of -t, -n and -b (tests/rxe/guest.sh sets them: an
 * emulated guest moves less data in the same time).
 * Prints "ok - what" per test; exits 1 at the first wrong byte or failure.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "toolutil.h"

#define CHUNK ((size_t)64 << 10) /* unit of the random and realloc tests */
#define MIB   ((size_t)1 << 20)
#define PAGE  ((size_t)4096)

static size_t opt_size = 64 * MIB;
static unsigned opt_threads = 8;
static unsigned long opt_count = 10000;
static unsigned opt_blocks = 16;
static uint64_t opt_seed = 1;
static int opt_expect; /* 'f', 'l' or 0 */
static bool opt_hold;   /* -w */
static size_t large = 2 * MIB; /* above FAM_THRESHOLD's default */


/* Writes the pattern into words [from, to) of p. */
static void
write_words(uint64_t *p, size_t from, size_t to, uint64_t seed)
{
	size_t i;

	for (i = from; i < to; i++)
		p[i] = tool_pat(i * 8, seed);
}

/* Fails at the first word of [from, to) of p that is not the pattern. */
static void
check_words(const char *test, const uint64_t *p, size_t from, size_t to,
    uint64_t seed)
{
	size_t i;

	for (i = from; i < to; i++)
		if (p[i] != tool_pat(i * 8, seed))
			FAIL("%s: wrong word at offset %zu of %p: expected "
			    "%#" PRIx64 ", read %#" PRIx64, test, i * 8,
			    (const void *)p, tool_pat(i * 8, seed), p[i]);
}

/* Fails at the first non-zero byte of n bytes at p. */
static void
check_zero(const char *test, const void *p, size_t n)
{
	const uint64_t *w = p;
	const unsigned char *c = p;
	size_t i;

	for (i = 0; i < n / 8; i++)
		if (w[i] != 0)
			FAIL("%s: offset %zu of %p should be zero, read %#"
			    PRIx64, test, i * 8, p, w[i]);
	for (i = n / 8 * 8; i < n; i++)
		if (c[i] != 0)
			FAIL("%s: byte %zu of %p should be zero", test, i, p);
}

/* Tells whether the mapping holding p has both VmFlags want0 and want1. */
static bool
smaps_flags(const void *p, const char *want0, const char *want1)
{
	int r = tool_vmflags(p, want0, want1);

	if (r < 0)
		FAIL("cannot open /proc/self/smaps: %s", strerror(errno));
	return r == 1;
}

/* Checks that a large block is (-f) or is not (-l) fabric-attached memory. */
static void
check_kind(const char *test, const void *p)
{
	bool fam;

	if (opt_expect == 0)
		return;
	fam = smaps_flags(p, " um", " dc");
	if (opt_expect == 'f' && !fam)
		FAIL("%s: %p is not in a userfaultfd-registered, MADV_DONTFORK "
		    "mapping: not fabric-attached memory", test, p);
	if (opt_expect == 'l' && fam)
		FAIL("%s: %p is fabric-attached memory, expected libc's", test,
		    p);
}

/* malloc() that fails the test on NULL. */
static void *
xmalloc(const char *test, size_t n)
{
	void *p = malloc(n);

	if (p == NULL)
		FAIL("%s: malloc(%zu): %s", test, n, strerror(errno));
	return p;
}

/*
 * A block whose mapping the program splits at pages inside chunks:
 * madvise HUGEPAGE and NOHUGEPAGE on ranges that start and end off chunk
 * boundaries, and mprotect read-only then read-write of a range in the
 * middle. The kernel then holds the block as several mappings, and a
 * chunk may span two: every word written before and after stays right
 * through eviction and refetch.
 */
static void
test_advise(void)
{
	size_t n = opt_size + 12345, words = n / 8;
	uint64_t *p = xmalloc("advise", n);
	uintptr_t a = ((uintptr_t)p + 3 * PAGE + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
	uintptr_t e = ((uintptr_t)p + n) & ~(uintptr_t)(PAGE - 1);
	uintptr_t m = a + ((e - a) / 3 & ~(uintptr_t)(PAGE - 1)) + 5 * PAGE;

	check_kind("advise", p);
	write_words(p, 0, words, opt_seed + 11);
	if (madvise((void *)a, e - a, MADV_HUGEPAGE) != 0)
		FAIL("advise: madvise HUGEPAGE: %s", strerror(errno));
	if (madvise((void *)m, 7 * PAGE, MADV_NOHUGEPAGE) != 0)
		FAIL("advise: madvise NOHUGEPAGE: %s", strerror(errno));
	if (mprotect((void *)(m + 9 * PAGE), 3 * PAGE, PROT_READ) != 0)
		FAIL("advise: mprotect read-only: %s", strerror(errno));
	check_words("advise (after madvise and mprotect)", p, 0, words,
	    opt_seed + 11);
	if (mprotect((void *)(m + 9 * PAGE), 3 * PAGE,
	    PROT_READ | PROT_WRITE) != 0)
		FAIL("advise: mprotect read-write: %s", strerror(errno));
	write_words(p, 0, words, opt_seed + 12);
	check_words("advise (rewritten)", p, 0, words, opt_seed + 12);
	free(p);
	printf("ok - advise: %zu MiB split into mappings inside chunks by "
	    "madvise and mprotect, written and verified twice\n",
	    opt_size / MIB);
}

/* Sequential write, then verify. */
static void
test_seq(void)
{
	size_t words = opt_size / 8;
	uint64_t *p = xmalloc("seq", opt_size);

	check_kind("seq", p);
	if (opt_expect == 'f')
		check_zero("seq (fresh memory)", p, opt_size);
	write_words(p, 0, words, opt_seed);
	check_words("seq", p, 0, words, opt_seed);
	free(p);
	printf("ok - seq: %zu MiB written front to back and verified\n",
	    opt_size / MIB);
}

/*
 * Sequential passes over a block whose chunks were written out, with a
 * word of a chunk 40 chunks on (past the read-ahead window) read first
 * every 11 chunks, so that the chunks read ahead together are broken up by
 * resident ones: every word is right.
 */
static void
test_runs(void)
{
	size_t n = opt_size / CHUNK, cw = CHUNK / 8;
	uint64_t *p = xmalloc("runs", opt_size);

	check_kind("runs", p);
	write_words(p, 0, n * cw, opt_seed + 5);
	for (unsigned pass = 0; pass < 2; pass++)
		for (size_t c = 0; c < n; c++) {
			if (c % 11 == pass && c + 40 < n)
				check_words("runs (ahead)", p, (c + 40) * cw,
				    (c + 40) * cw + 1, opt_seed + 5);
			check_words("runs", p, c * cw, (c + 1) * cw,
			    opt_seed + 5);
		}
	free(p);
	printf("ok - runs: %zu MiB read front to back twice with chunks "
	    "ahead touched first, verified\n", opt_size / MIB);
}

static volatile sig_atomic_t passes_stop;

/* SIGUSR1 during `passes`: finish after one more pass (or a hold: go on). */
static void
passes_signal(int sig)
{
	(void)sig;
	passes_stop = 1;
}

/* -w: says "holding" and waits for SIGUSR1 (a driver changes things). */
static void
hold(const char *test)
{
	struct sigaction sa;
	sigset_t usr1, old;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = passes_signal;
	sigemptyset(&sa.sa_mask);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (sigaction(SIGUSR1, &sa, NULL) < 0 ||
	    sigprocmask(SIG_BLOCK, &usr1, &old) < 0)
		FAIL("%s: hold: %s", test, strerror(errno));
	printf("holding\n");
	fflush(stdout);
	while (!passes_stop)
		sigsuspend(&old);
	passes_stop = 0;
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/*
 * One block kept for the whole run: each pass checks the previous pass's
 * pattern, writes a new one and checks it, until SIGUSR1, then once more.
 */
static void
test_passes(void)
{
	size_t words = opt_size / 8;
	uint64_t *p = xmalloc("passes", opt_size);
	struct sigaction sa;
	unsigned n = 0;
	bool last = false;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = passes_signal;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) < 0)
		FAIL("passes: sigaction: %s", strerror(errno));
	check_kind("passes", p);
	for (;;) {
		if (n > 0)
			check_words("passes (the previous pass)", p, 0, words,
			    opt_seed + n - 1);
		write_words(p, 0, words, opt_seed + n);
		check_words("passes", p, 0, words, opt_seed + n);
		printf("pass %u\n", ++n);
		if (last)
			break;
		last = passes_stop != 0;
	}
	free(p);
	printf("ok - passes: %u passes over %zu MiB, each verified twice\n", n,
	    opt_size / MIB);
}

/*
 * One block written once, then only read and verified in passes, "read N"
 * printed after each, until SIGUSR1, then once more: a driver changes
 * things under a program that writes nothing back meanwhile.
 */
static void
test_reads(void)
{
	size_t words = opt_size / 8;
	uint64_t *p = xmalloc("reads", opt_size);
	struct sigaction sa;
	unsigned n = 0;
	bool last = false;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = passes_signal;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) < 0)
		FAIL("reads: sigaction: %s", strerror(errno));
	check_kind("reads", p);
	write_words(p, 0, words, opt_seed);
	printf("written\n");
	for (;;) {
		check_words("reads", p, 0, words, opt_seed);
		printf("read %u\n", ++n);
		if (last)
			break;
		last = passes_stop != 0;
	}
	free(p);
	printf("ok - reads: written once, read and verified %u times over "
	    "%zu MiB\n", n, opt_size / MIB);
}

/* The greatest common divisor of a and b. */
static size_t
gcd(size_t a, size_t b)
{
	while (b != 0) {
		size_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* A step coprime with n: i * step mod n visits every chunk once. */
static size_t
coprime_step(size_t n, size_t hint)
{
	size_t s = hint % n;

	if (s == 0)
		s = 1;
	while (gcd(s, n) != 1)
		s++;
	return s;
}

/* Chunks written in one pseudo-random order, verified in another. */
static void
test_random(void)
{
	size_t n = opt_size / CHUNK, cw = CHUNK / 8, i, c, s1, s2;
	uint64_t *p = xmalloc("random", opt_size);

	if (n == 0)
		FAIL("random: -s must be at least %zu", CHUNK);
	check_kind("random", p);
	s1 = coprime_step(n, 7919 * (size_t)opt_seed + n / 3);
	s2 = coprime_step(n, 104729 + n / 5);
	for (i = 0; i < n; i++) {
		c = (i * s1 + 13) % n;
		write_words(p, c * cw, (c + 1) * cw, opt_seed + 1);
	}
	for (i = 0; i < n; i++) {
		c = (i * s2 + 5) % n;
		check_words("random", p, c * cw, (c + 1) * cw, opt_seed + 1);
	}
	free(p);
	printf("ok - random: %zu chunks of 64 KiB written and verified in two "
	    "orders\n", n);
}

/*
 * Checks that sparse word k (of n, spread over pairs pairs of words) of p
 * holds seed's pattern, and that the word after it is still zero.
 */
static void
sparse_check(const uint64_t *p, size_t k, size_t step, size_t pairs,
    uint64_t seed)
{
	size_t w = 2 * ((k * step + 11) % pairs);

	check_words("sparse", p, w, w + 1, seed);
	if (p[w + 1] != 0)
		FAIL("sparse: word at offset %zu should be zero, read %#"
		    PRIx64, (w + 1) * 8, p[w + 1]);
}

/*
 * Random 8-byte writes and reads, one per 16 KiB on average, over a
 * calloc'd buffer (the words after them stay zero): written, then each
 * verified and rewritten in another order, then verified in a third.
 */
static void
test_sparse(void)
{
	size_t pairs = opt_size / 16, n = opt_size / 16384, k, step, order;
	uint64_t *p = calloc(pairs, 16);
	pid_t child;
	int st = 0;

	if (p == NULL)
		FAIL("sparse: calloc: %s", strerror(errno));
	check_kind("sparse", p);
	step = coprime_step(pairs, 7919 * (size_t)opt_seed + pairs / 3);
	for (k = 0; k < n; k++) {
		size_t w = 2 * ((k * step + 11) % pairs);

		p[w] = tool_pat(w * 8, opt_seed + 20);
	}
	order = coprime_step(n, 104729 + n / 5);
	for (k = 0; k < n; k++) {
		size_t j = (k * order + 3) % n, w = 2 * ((j * step + 11) % pairs);

		sparse_check(p, j, step, pairs, opt_seed + 20);
		p[w] = tool_pat(w * 8, opt_seed + 21);
	}
	if (opt_hold)
		hold("sparse");
	order = coprime_step(n, 15485863 + n / 7);
	for (k = 0; k < n; k++)
		sparse_check(p, (k * order + 1) % n, step, pairs, opt_seed + 21);
	/* a child forked now reads the same, from chunks read in part */
	if ((child = fork()) < 0)
		FAIL("sparse: fork: %s", strerror(errno));
	if (child == 0) {
		for (k = 0; k < n; k++)
			sparse_check(p, k, step, pairs, opt_seed + 21);
		_exit(0);
	}
	if (waitpid(child, &st, 0) != child || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		FAIL("sparse: the forked child's check failed (status %#x)", st);
	for (k = 0; k < n; k++)
		sparse_check(p, k, step, pairs, opt_seed + 21);
	free(p);
	printf("ok - sparse: %zu random words over %zu MiB written, verified "
	    "and rewritten, verified again, and by a forked child; the words "
	    "beside them zero\n", n, opt_size / MIB);
}

/* One word per 4 KiB + 8 B of a calloc'd buffer; the rest stays zero. */
static void
test_strided(void)
{
	size_t stride = (4096 + 8) / 8, words = opt_size / 8, i, j;
	uint64_t *p = calloc(words, 8);

	if (p == NULL)
		FAIL("strided: calloc: %s", strerror(errno));
	check_kind("strided", p);
	for (i = 0; i < words; i += stride)
		p[i] = tool_pat(i * 8, opt_seed + 2);
	for (i = 0; i < words; i += stride) {
		check_words("strided", p, i, i + 1, opt_seed + 2);
		for (j = i + 1; j < i + stride && j < words; j++)
			if (p[j] != 0)
				FAIL("strided: word at offset %zu should be "
				    "zero, read %#" PRIx64, j * 8, p[j]);
	}
	free(p);
	printf("ok - strided: one word per 4104 B written over %zu MiB, those "
	    "verified and all others zero\n", opt_size / MIB);
}

struct worker {
	pthread_t t;
	unsigned id;
	uint64_t *buf;
	size_t words;
	pthread_barrier_t *barrier;
	const char *err;
	size_t err_off;
};

/* Interleaved words of the same chunks; then every word checked. */
static void *
shared_main(void *arg)
{
	struct worker *w = arg;
	size_t i;

	for (i = w->id; i < w->words; i += opt_threads)
		w->buf[i] = tool_pat(i * 8, opt_seed + 3);
	pthread_barrier_wait(w->barrier);
	for (i = 0; i < w->words; i++) {
		if (w->buf[i] != tool_pat(i * 8, opt_seed + 3)) {
			w->err = "wrong word";
			w->err_off = i * 8;
			break;
		}
	}
	return NULL;
}

/* A slice of one buffer, and blocks of its own at the same time. */
static void *
split_main(void *arg)
{
	struct worker *w = arg;
	size_t from = w->words / opt_threads * w->id;
	size_t to = w->id + 1 == opt_threads ? w->words :
	    w->words / opt_threads * (w->id + 1);
	size_t i, j;

	for (i = from; i < to; i++)
		w->buf[i] = tool_pat(i * 8, opt_seed + 4 + w->id);
	for (i = from; i < to; i++) {
		if (w->buf[i] != tool_pat(i * 8, opt_seed + 4 + w->id)) {
			w->err = "wrong word in its slice";
			w->err_off = i * 8;
			return NULL;
		}
	}
	for (j = 0; j < opt_blocks; j++) {
		size_t n = large + j * CHUNK + w->id * 8;
		uint64_t *own = malloc(n);

		if (own == NULL) {
			w->err = "malloc failed";
			return NULL;
		}
		for (i = 0; i < n / 8; i += 61)
			own[i] = tool_pat(i * 8, w->id * 100 + j);
		for (i = 0; i < n / 8; i += 61) {
			if (own[i] != tool_pat(i * 8, w->id * 100 + j)) {
				w->err = "wrong word in its own block";
				w->err_off = i * 8;
				free(own);
				return NULL;
			}
		}
		free(own);
	}
	return NULL;
}

/* Runs THREADS workers over one buffer. */
static void
run_threads(const char *test, void *(*fn)(void *))
{
	struct worker *w = calloc(opt_threads, sizeof *w);
	pthread_barrier_t barrier;
	uint64_t *buf = xmalloc(test, opt_size);
	unsigned i;

	if (w == NULL)
		FAIL("%s: calloc", test);
	check_kind(test, buf);
	pthread_barrier_init(&barrier, NULL, opt_threads);
	for (i = 0; i < opt_threads; i++) {
		w[i] = (struct worker){ .id = i, .buf = buf,
			.words = opt_size / 8, .barrier = &barrier };
		if (pthread_create(&w[i].t, NULL, fn, &w[i]) != 0)
			FAIL("%s: pthread_create", test);
	}
	for (i = 0; i < opt_threads; i++)
		pthread_join(w[i].t, NULL);
	for (i = 0; i < opt_threads; i++)
		if (w[i].err != NULL)
			FAIL("%s: thread %u: %s at offset %zu", test, i,
			    w[i].err, w[i].err_off);
	pthread_barrier_destroy(&barrier);
	free(buf);
	free(w);
}

/* Threads on the same chunks. */
static void
test_shared(void)
{
	run_threads("shared", shared_main);
	printf("ok - shared: %u threads wrote interleaved words of the same "
	    "chunks of %zu MiB; each verified all of them\n", opt_threads,
	    opt_size / MIB);
}

/* Threads on different chunks, allocating at the same time. */
static void
test_split(void)
{
	run_threads("split", split_main);
	printf("ok - split: %u threads wrote and verified their own slices, "
	    "and %u blocks each of their own at once\n", opt_threads,
	    opt_blocks);
}

/* calloc is zero, and zero again after the memory was written and freed. */
static void
test_calloc(void)
{
	int round;

	for (round = 0; round < 3; round++) {
		uint64_t *p = calloc(opt_size / 8, 8);

		if (p == NULL)
			FAIL("calloc: %s", strerror(errno));
		check_kind("calloc", p);
		check_zero("calloc", p, opt_size);
		write_words(p, 0, opt_size / 8, opt_seed + 5);
		free(p);
	}
	printf("ok - calloc: %zu MiB read as zero, three times over memory "
	    "written and freed in between\n", opt_size / MIB);
}

/* realloc up and down, across the threshold, keeps the data. */
static void
test_realloc(void)
{
	size_t steps[] = { large, 4 * large, 3 * large + 4096, large + 8,
		4096, 3 * large, opt_size, large };
	size_t i, have = 0;
	uint64_t *p = NULL;

	for (i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		size_t n = steps[i], keep = have < n ? have : n;

		p = realloc(p, n);
		if (p == NULL)
			FAIL("realloc to %zu: %s", n, strerror(errno));
		check_words("realloc", p, 0, keep / 8, opt_seed + 6);
		if (n >= large)
			check_kind("realloc", p);
		write_words(p, 0, n / 8, opt_seed + 6);
		have = n;
	}
	free(p);
	printf("ok - realloc: up and down between 4 KiB and %zu MiB, data "
	    "kept at every step\n", opt_size / MIB);
}

/* Every aligned allocator meets its alignment on large blocks. */
static void
test_align(void)
{
	size_t aligns[] = { 4096, 65536, 2 * MIB, 64 * MIB };
	size_t i, n = large + 4096;
	uint64_t *p;
	void *v;

	for (i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
		size_t a = aligns[i];

		if (posix_memalign(&v, a, n) != 0)
			FAIL("align: posix_memalign(%zu)", a);
		p = v;
		if ((uintptr_t)p % a != 0)
			FAIL("align: posix_memalign(%zu) gave %p", a, v);
		check_kind("align", p);
		write_words(p, 0, n / 8, a);
		check_words("align", p, 0, n / 8, a);
		free(p);
		p = aligned_alloc(a, n);
		if (p == NULL || (uintptr_t)p % a != 0)
			FAIL("align: aligned_alloc(%zu) gave %p", a,
			    (void *)p);
		write_words(p, 0, n / 8, a + 1);
		check_words("align", p, 0, n / 8, a + 1);
		free(p);
		p = memalign(a, n);
		if (p == NULL || (uintptr_t)p % a != 0)
			FAIL("align: memalign(%zu) gave %p", a, (void *)p);
		if (malloc_usable_size(p) < n)
			FAIL("align: usable size %zu < %zu",
			    malloc_usable_size(p), n);
		free(p);
	}
	p = valloc(n);
	if (p == NULL || (uintptr_t)p % 4096 != 0)
		FAIL("align: valloc gave %p", (void *)p);
	free(p);
	p = pvalloc(n + 1);
	if (p == NULL || (uintptr_t)p % 4096 != 0 ||
	    malloc_usable_size(p) < n + 4096)
		FAIL("align: pvalloc gave %p", (void *)p);
	free(p);
	printf("ok - align: posix_memalign, aligned_alloc, memalign up to 64 "
	    "MiB alignment, valloc, pvalloc\n");
}

/* COUNT large blocks held at once, then COUNT alloc/free pairs. */
static void
test_many(void)
{
	uint64_t **v = calloc(opt_count, sizeof *v);
	size_t *len = calloc(opt_count, sizeof *len);
	unsigned long i;

	if (v == NULL || len == NULL)
		FAIL("many: calloc");
	for (i = 0; i < opt_count; i++) {
		len[i] = large + (i % 7) * 4096;
		v[i] = xmalloc("many", len[i]);
		v[i][0] = tool_pat(i, opt_seed + 7);
		v[i][len[i] / 8 - 1] = tool_pat(i + 1, opt_seed + 7);
	}
	check_kind("many", v[opt_count / 2]);
	for (i = 0; i < opt_count; i++) {
		if (v[i][0] != tool_pat(i, opt_seed + 7) ||
		    v[i][len[i] / 8 - 1] != tool_pat(i + 1, opt_seed + 7))
			FAIL("many: block %lu of %lu lost its first or last "
			    "word", i, opt_count);
		free(v[i]);
	}
	for (i = 0; i < opt_count; i++) {
		uint64_t *p = xmalloc("many", large);

		if (opt_expect == 'f' && (p[0] != 0 || p[large / 8 - 1] != 0))
			FAIL("many: block %lu reused a freed region without "
			    "zeroing it", i);
		p[0] = i;
		p[large / 8 - 1] = i;
		free(p);
	}
	free(v);
	free(len);
	printf("ok - many: %lu large blocks held at once and verified, then "
	    "%lu allocated and freed one by one\n", opt_count, opt_count);
}

/* Waits for pid; returns its wait status. */
static int
wait_child(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			FAIL("fork: waitpid: %s", strerror(errno));
	return status;
}

/* fork+exec, a child with blocks of its own, and the inherited ones. */
static void
test_fork(void)
{
	size_t n = 4 * large;
	uint64_t *p = xmalloc("fork", n);
	int status;
	pid_t pid;

	write_words(p, 0, n / 8, opt_seed + 8);
	pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	status = wait_child(pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		FAIL("fork: fork+exec /bin/true: status %#x", status);

	pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		uint64_t *c = malloc(n);
		size_t i;

		if (c == NULL)
			_exit(2);
		if (opt_expect == 'f' && !smaps_flags(c, " um", " dc"))
			_exit(3);
		for (i = 0; i < n / 8; i++)
			c[i] = tool_pat(i * 8, 99);
		for (i = 0; i < n / 8; i++)
			if (c[i] != tool_pat(i * 8, 99))
				_exit(4);
		free(c);
		free(p); /* inherited: ignored under FAM */
		_exit(0);
	}
	status = wait_child(pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		FAIL("fork: a child allocating its own blocks: status %#x",
		    status);

	pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		/* the parent's block, as it was at the fork, and private */
		check_words("fork (child)", p, 0, n / 8, opt_seed + 8);
		write_words(p, 0, n / 8, opt_seed + 9);
		check_words("fork (child)", p, 0, n / 8, opt_seed + 9);
		_exit(0);
	}
	status = wait_child(pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		FAIL("fork: a child reading and writing the inherited block: "
		    "status %#x", status);
	check_words("fork", p, 0, n / 8, opt_seed + 8);
	free(p);
	printf("ok - fork: fork+exec of /bin/true; a child allocated, wrote "
	    "and verified its own block; a child read the inherited block and "
	    "wrote it privately; the parent's data is intact\n");
}


/* Sends one byte on fd, or fails. */
static void
cow_signal(const char *who, int fd)
{
	char c = 1;

	if (write(fd, &c, 1) != 1)
		FAIL("cow (%s): write to the pipe: %s", who, strerror(errno));
}

/* Waits for one byte on fd, or fails. */
static void
cow_wait(const char *who, int fd)
{
	char c;

	if (read(fd, &c, 1) != 1)
		FAIL("cow (%s): the other side went away", who);
}

/*
 * The view of one side after both wrote: the first half (the child's) and
 * the second half (the parent's) each as that side should see it.
 */
static void
cow_check(const char *who, const uint64_t *p, size_t half, size_t words,
    uint64_t first, uint64_t second)
{
	check_words(who, p, 0, half, first);
	check_words(who, p, half, words, second);
}

/*
 * fork with copy-on-write: the parent writes pattern A over a block
 * (larger than the buffer when -s says so) and forks; the child checks A,
 * writes B over the first half, the parent C over the second meanwhile;
 * each checks its own view, then again once the other has written (the
 * other's writes must not show), every word, both directions. After the
 * child's exit the parent checks once more ($FAMTEST_HOLD: a file created
 * then, and waited for to disappear) and frees the block.
 */
static void
test_cow(void)
{
	size_t n = opt_size, words = n / 8, half = words / 2;
	uint64_t *p = xmalloc("cow", n);
	uint64_t a = opt_seed + 20, b = opt_seed + 21, c = opt_seed + 22;
	const char *hold = getenv("FAMTEST_HOLD");
	int up[2], down[2], status;
	pid_t pid;

	check_kind("cow", p);
	write_words(p, 0, words, a);
	if (pipe(up) < 0 || pipe(down) < 0)
		FAIL("cow: pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		FAIL("cow: fork: %s", strerror(errno));
	if (pid == 0) {
		close(up[0]);
		close(down[1]);
		check_words("cow (child, the parent's data)", p, 0, words, a);
		write_words(p, 0, half, b);
		cow_check("cow (child, its own writes)", p, half, words, b, a);
		cow_signal("child", up[1]);
		cow_wait("child", down[0]);
		cow_check("cow (child, after the parent wrote)", p, half, words,
		    b, a);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	write_words(p, half, words, c);
	cow_check("cow (parent, its own writes)", p, half, words, a, c);
	cow_wait("parent", up[0]);
	cow_check("cow (parent, after the child wrote)", p, half, words, a, c);
	cow_signal("parent", down[1]);
	status = wait_child(pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		FAIL("cow: the child failed: status %#x", status);
	close(up[0]);
	close(down[1]);
	if (hold != NULL && *hold != '\0') {
		FILE *fp = fopen(hold, "w");

		if (fp == NULL)
			FAIL("cow: %s: %s", hold, strerror(errno));
		fprintf(fp, "%ld\n", (long)pid);
		fclose(fp);
		while (access(hold, F_OK) == 0)
			usleep(10000);
	}
	cow_check("cow (parent, after the child's exit)", p, half, words, a, c);
	free(p);
	printf("ok - cow: parent and child each read the data of the fork "
	    "and only their own writes, %zu bytes, both directions\n", n);
}

/*
 * fork, then the parent frees its block while the child still shares it
 * and fills the buffer with a new block: the child still reads the data of
 * the fork, every word, and writes its own.
 */
static void
test_cowfree(void)
{
	size_t n = opt_size, words = n / 8, half = words / 2;
	uint64_t *p = xmalloc("cowfree", n), *q;
	uint64_t a = opt_seed + 23, b = opt_seed + 24, c = opt_seed + 25;
	int down[2], status;
	pid_t pid;

	write_words(p, 0, words, a);
	if (pipe(down) < 0)
		FAIL("cowfree: pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		FAIL("cowfree: fork: %s", strerror(errno));
	if (pid == 0) {
		close(down[1]);
		cow_wait("child", down[0]);
		check_words("cowfree (child, the freed block's data)", p, 0,
		    words, a);
		write_words(p, 0, half, b);
		cow_check("cowfree (child, its own writes)", p, half, words, b,
		    a);
		_exit(0);
	}
	close(down[0]);
	free(p);
	q = xmalloc("cowfree", n);
	write_words(q, 0, words, c);
	cow_signal("parent", down[1]);
	check_words("cowfree (parent, its new block)", q, 0, words, c);
	status = wait_child(pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		FAIL("cowfree: the child failed: status %#x", status);
	check_words("cowfree (parent, its new block)", q, 0, words, c);
	close(down[1]);
	free(q);
	printf("ok - cowfree: the parent freed its block and filled another; "
	    "the child read the data of the fork, %zu bytes, and wrote its "
	    "own\n", n);
}

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
	{ "seq", test_seq },
	{ "random", test_random },
	{ "runs", test_runs },
	{ "strided", test_strided },
	{ "advise", test_advise },
	{ "shared", test_shared },
	{ "split", test_split },
	{ "calloc", test_calloc },
	{ "realloc", test_realloc },
	{ "align", test_align },
	{ "many", test_many },
	{ "fork", test_fork },
	{ "cow", test_cow },
	{ "cowfree", test_cowfree },
	{ "sparse", test_sparse }, /* only when named */
	{ "reads", test_reads }, /* only when named */
	{ "passes", test_passes }, /* last: only when named */
};

/* Parses a size with an optional K, M or G suffix, or exits 2. */
static size_t
parse_size(const char *s)
{
	size_t v = tool_parse_size(s);

	if (v == 0) {
		fprintf(stderr, "famtest: bad size %s\n", s);
		exit(2);
	}
	return v;
}

/* Prints the usage and exits. */
static void
usage(void)
{
	size_t i;

	fprintf(stderr, "usage: famtest [-s SIZE] [-t THREADS] [-n COUNT] "
	    "[-b BLOCKS] [-S SEED] [-f|-l] [-w] [TEST...]\ntests:");
	for (i = 0; i < sizeof tests / sizeof tests[0]; i++)
		fprintf(stderr, " %s", tests[i].name);
	fprintf(stderr, "\n");
	exit(2);
}

/* Runs the tests named on the command line, or all of them. */
int
main(int argc, char **argv)
{
	const char *t;
	struct timespec t0, t1;
	size_t i;
	int c, j;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((t = getenv("FAMTEST_THREADS")) != NULL)
		opt_threads = (unsigned)atoi(t);
	if ((t = getenv("FAMTEST_COUNT")) != NULL)
		opt_count = strtoul(t, NULL, 10);
	if ((t = getenv("FAMTEST_BLOCKS")) != NULL)
		opt_blocks = (unsigned)atoi(t);
	t = getenv("FAM_THRESHOLD");
	while ((c = getopt(argc, argv, "s:t:n:b:S:flw")) != -1) {
		switch (c) {
		case 's':
			opt_size = parse_size(optarg);
			break;
		case 't':
			opt_threads = (unsigned)atoi(optarg);
			break;
		case 'n':
			opt_count = strtoul(optarg, NULL, 10);
			break;
		case 'b':
			opt_blocks = (unsigned)atoi(optarg);
			break;
		case 'S':
			opt_seed = strtoull(optarg, NULL, 0);
			break;
		case 'f':
			opt_expect = 'f';
			break;
		case 'l':
			opt_expect = 'l';
			break;
		case 'w':
			opt_hold = true;
			break;
		default:
			usage();
		}
	}
	if (opt_threads == 0 || opt_count == 0 || opt_blocks == 0 ||
	    opt_size % 8 != 0)
		usage();
	if (t != NULL && *t != '\0')
		large = parse_size(t) + 4096;
	if (opt_size < large)
		opt_size = large;
	for (j = optind; j < argc; j++) {
		for (i = 0; i < sizeof tests / sizeof tests[0]; i++)
			if (strcmp(argv[j], tests[i].name) == 0)
				break;
		if (i == sizeof tests / sizeof tests[0])
			usage();
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < sizeof tests / sizeof tests[0]; i++) {
		bool run = optind == argc && tests[i].fn != test_passes &&
		    tests[i].fn != test_sparse && tests[i].fn != test_reads;

		for (j = optind; j < argc; j++)
			run |= strcmp(argv[j], tests[i].name) == 0;
		if (run)
			tests[i].fn();
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("famtest: all passed in %.2f s (buffer %zu MiB, %u threads, "
	    "large = %zu B%s)\n", (double)(t1.tv_sec - t0.tv_sec) +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e9, opt_size / MIB,
	    opt_threads, large, opt_expect == 'f' ? ", fabric-attached" :
	    opt_expect == 'l' ? ", libc" : "");
	return 0;
}
