/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famsoak.c - a soak worker, run under LD_PRELOAD=libfamshim.so by
 * tests/soak/soak.sh: THREADS threads each keep SLOTS blocks of random
 * sizes, and until SECONDS have passed replace one at random - check every
 * word of the old block, free it, allocate a new one and write every word
 * of it. A block whose memory node was lost raises SIGBUS when touched: it
 * is counted as lost and freed, never read as data. A wrong word fails the
 * run at once.
 *
 * usage: famsoak [-d SECONDS] [-t THREADS] [-k SLOTS] [-m MAXSIZE] [-S SEED]
 * Prints "soak: ops N allocs N fam N bytes_written N bytes_verified N
 * lost N" at the end; exits 0, or 1 on a wrong word or a failed malloc.
 */
#include "config.h"

#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "toolutil.h"

#define MIB ((size_t)1 << 20)

static unsigned opt_seconds = 60, opt_threads = 2, opt_slots = 4;
static size_t opt_max = 8 * MIB;
static uint64_t opt_seed = 1;

static _Atomic uint64_t n_ops, n_allocs, n_fam, n_written, n_verified;
static _Atomic uint64_t n_lost;
static _Atomic bool wrong;
static __thread sigjmp_buf *bus_jmp;

struct block {
	uint64_t *p;
	size_t words;
	uint64_t tag;  /* what the words were made of */
};

/* The word at index i of a block tagged tag. */
static inline uint64_t
pat(uint64_t tag, size_t i)
{
	uint64_t x = (tag * 0x100000001b3ull) ^ (i * 0x9e3779b97f4a7c15ull);

	return x ^ (x >> 29);
}

static void
on_sigbus(int sig, siginfo_t *si, void *uc)
{
	if (bus_jmp == NULL)
		_exit(3);
	siglongjmp(*bus_jmp, 1);
}

/* xorshift64*: the thread's random numbers. */
static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * Checks every word of b and frees it; a SIGBUS on the way makes it lost.
 * Returns false on a wrong word.
 */
static bool
retire(struct block *b, unsigned id)
{
	volatile uint64_t *v = b->p;
	sigjmp_buf jb;
	volatile size_t i = 0;

	if (b->p == NULL)
		return true;
	bus_jmp = &jb;
	if (sigsetjmp(jb, 1) == 0) {
		for (i = 0; i < b->words; i++)
			if (v[i] != pat(b->tag, i)) {
				printf("FAIL - thread %u: block %#" PRIx64
				    " word %zu of %zu is %#" PRIx64 ", not %#"
				    PRIx64 "\n", id, b->tag, (size_t)i,
				    b->words, v[i], pat(b->tag, i));
				atomic_store(&wrong, true);
				bus_jmp = NULL;
				return false;
			}
		atomic_fetch_add(&n_verified, b->words * 8);
	} else {
		atomic_fetch_add(&n_verified, i * 8);
		atomic_fetch_add(&n_lost, 1);
	}
	bus_jmp = NULL;
	free(b->p);
	b->p = NULL;
	return true;
}

/* Allocates b anew and writes every word; a SIGBUS makes it lost. */
static bool
fill(struct block *b, uint64_t *rs, uint64_t tag)
{
	size_t size = MIB + (size_t)(rnd(rs) % (opt_max - MIB + 1));
	volatile uint64_t *v;
	sigjmp_buf jb;
	volatile size_t i = 0;

	size &= ~(size_t)7;
	b->p = malloc(size);
	if (b->p == NULL) {
		printf("FAIL - malloc(%zu) returned NULL\n", size);
		atomic_store(&wrong, true);
		return false;
	}
	atomic_fetch_add(&n_allocs, 1);
	if (tool_is_fam(b->p))
		atomic_fetch_add(&n_fam, 1);
	b->words = size / 8;
	b->tag = tag;
	v = b->p;
	bus_jmp = &jb;
	if (sigsetjmp(jb, 1) == 0) {
		for (i = 0; i < b->words; i++)
			v[i] = pat(tag, i);
		atomic_fetch_add(&n_written, size);
	} else {
		atomic_fetch_add(&n_lost, 1);
		free(b->p);
		b->p = NULL;
	}
	bus_jmp = NULL;
	return true;
}

static void *
worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	struct block *slots = calloc(opt_slots, sizeof *slots);
	uint64_t rs = opt_seed * 0x9e3779b97f4a7c15ull + id * 7919 + 1;
	uint64_t tag = ((uint64_t)getpid() << 24) ^ ((uint64_t)id << 48);
	double end = now_s() + opt_seconds;

	if (slots == NULL)
		return NULL;
	while (now_s() < end && !atomic_load(&wrong)) {
		struct block *b = &slots[rnd(&rs) % opt_slots];

		if (!retire(b, id) || !fill(b, &rs, ++tag))
			break;
		atomic_fetch_add(&n_ops, 1);
	}
	for (unsigned k = 0; k < opt_slots && !atomic_load(&wrong); k++)
		retire(&slots[k], id);
	free(slots);
	return NULL;
}

int
main(int argc, char **argv)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus,
		.sa_flags = SA_SIGINFO | SA_NODEFER };
	pthread_t *t;
	int c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "d:t:k:m:S:")) != -1) {
		switch (c) {
		case 'd': opt_seconds = (unsigned)atoi(optarg); break;
		case 't': opt_threads = (unsigned)atoi(optarg); break;
		case 'k': opt_slots = (unsigned)atoi(optarg); break;
		case 'm': opt_max = (size_t)atoi(optarg) * MIB; break;
		case 'S': opt_seed = strtoull(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: famsoak [-d SECONDS] [-t THREADS] "
			    "[-k SLOTS] [-m MAXSIZE-MiB] [-S SEED]\n");
			return 2;
		}
	}
	if (opt_threads == 0 || opt_slots == 0 || opt_max < MIB) {
		fprintf(stderr, "famsoak: bad arguments\n");
		return 2;
	}
	sigaction(SIGBUS, &sa, NULL);
	t = calloc(opt_threads, sizeof *t);
	for (unsigned i = 0; i < opt_threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < opt_threads; i++)
		pthread_join(t[i], NULL);
	free(t);
	printf("soak: ops %" PRIu64 " allocs %" PRIu64 " fam %" PRIu64
	    " bytes_written %" PRIu64 " bytes_verified %" PRIu64 " lost %"
	    PRIu64 "\n", atomic_load(&n_ops), atomic_load(&n_allocs),
	    atomic_load(&n_fam), atomic_load(&n_written),
	    atomic_load(&n_verified), atomic_load(&n_lost));
	return atomic_load(&wrong) ? 1 : 0;
}
