/*
 * famlost.c - what a program sees when its host famd dies: run under
 * LD_PRELOAD=libfamshim.so with a host famd, it fills a large block, says
 * "ready" on stdout, and has THREADS threads read it over and over (checking
 * every word) and touch never-written pages of a second half (which must
 * read as zero) until the test driver kills famd. Then every thread must
 * get SIGBUS - never a wrong word, never a hang - and the program must go
 * on: free() of the lost block is ignored, and a new large block works.
 *
 * usage: famlost [-s SIZE] [-t THREADS] [-w SECONDS]
 *   -s SIZE     bytes of the block (K, M, G suffixes; default 64M)
 *   -t N        reading threads (default 4)
 *   -w SECONDS  how long to wait for famd to die (default 60)
 * Exits 0 when all went as said, 1 on a wrong word, a thread without
 * SIGBUS, or a failure after it.
 */
#include "config.h"

#include <errno.h>
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

static size_t opt_size = (size_t)64 << 20;
static unsigned opt_threads = 4;
static unsigned opt_wait = 60;

static uint64_t *buf;
static _Atomic unsigned bused;       /* threads that got SIGBUS */
static _Atomic bool wrong;           /* a thread read a wrong word */
static __thread sigjmp_buf *bus_jmp; /* where this thread's SIGBUS goes */
static __thread void *bus_addr;

/* The word that belongs at word index i. */
static inline uint64_t
pat(size_t i)
{
	uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull;

	return x ^ (x >> 29);
}

/* SIGBUS: back to the thread's loop, with the address. */
static void
on_sigbus(int sig, siginfo_t *si, void *uc)
{
	if (bus_jmp == NULL)
		_exit(3);
	bus_addr = si->si_addr;
	siglongjmp(*bus_jmp, 1);
}

/* Reads the block until famd dies; checks every word. */
static void *
reader_main(void *arg)
{
	size_t half = opt_size / 16, id = (size_t)(uintptr_t)arg, i, pass;
	volatile uint64_t *v = buf;
	sigjmp_buf jb;

	bus_jmp = &jb;
	if (sigsetjmp(jb, 1) != 0) {
		atomic_fetch_add(&bused, 1);
		return NULL;
	}
	for (pass = 0;; pass++) {
		for (i = 0; i < half; i++) {
			uint64_t w = v[i];

			if (w != pat(i)) {
				printf("FAIL - thread %zu: word %zu is %#" PRIx64
				    ", not %#" PRIx64 "\n", id, i, w, pat(i));
				atomic_store(&wrong, true);
				return NULL;
			}
		}
		/* One never-written page per pass: a fresh fault. */
		i = half + ((pass * opt_threads + id) * 512) % half;
		if (v[i] != 0) {
			printf("FAIL - thread %zu: never-written word %zu is "
			    "%#" PRIx64 "\n", id, i, v[i]);
			atomic_store(&wrong, true);
			return NULL;
		}
	}
}

/* Parses a size with an optional K, M or G suffix. */
static size_t
parse_size(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	switch (*end) {
	case 'K':
	case 'k':
		v <<= 10;
		end++;
		break;
	case 'M':
	case 'm':
		v <<= 20;
		end++;
		break;
	case 'G':
	case 'g':
		v <<= 30;
		end++;
		break;
	}
	if (end == s || *end != '\0' || v < (1 << 20)) {
		fprintf(stderr, "famlost: bad size %s\n", s);
		exit(2);
	}
	return (size_t)v;
}

/* Fills the block, waits for famd to die, checks what became of it. */
int
main(int argc, char **argv)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus,
		.sa_flags = SA_SIGINFO };
	pthread_t *t;
	sigjmp_buf jb;
	size_t i, words;
	uint64_t *again;
	unsigned n;
	int c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "s:t:w:")) != -1) {
		switch (c) {
		case 's':
			opt_size = parse_size(optarg);
			break;
		case 't':
			opt_threads = (unsigned)atoi(optarg);
			break;
		case 'w':
			opt_wait = (unsigned)atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: famlost [-s SIZE] [-t THREADS] "
			    "[-w SECONDS]\n");
			return 2;
		}
	}
	if (opt_threads == 0)
		opt_threads = 1;
	sigaction(SIGBUS, &sa, NULL);
	words = opt_size / 8;
	buf = malloc(opt_size);
	if (buf == NULL) {
		printf("FAIL - malloc(%zu): %s\n", opt_size, strerror(errno));
		return 1;
	}
	for (i = 0; i < words / 2; i++)
		buf[i] = pat(i);
	for (i = 0; i < words / 2; i++) {
		if (buf[i] != pat(i)) {
			printf("FAIL - word %zu wrong before famd died\n", i);
			return 1;
		}
	}
	t = calloc(opt_threads, sizeof *t);
	for (n = 0; n < opt_threads; n++)
		pthread_create(&t[n], NULL, reader_main, (void *)(uintptr_t)n);
	printf("ready %d\n", (int)getpid());

	for (i = 0; i < (size_t)opt_wait * 10; i++) {
		struct timespec ts = { .tv_nsec = 100000000 };

		if (atomic_load(&bused) == opt_threads || atomic_load(&wrong))
			break;
		nanosleep(&ts, NULL);
	}
	if (atomic_load(&wrong))
		return 1;
	if (atomic_load(&bused) != opt_threads) {
		printf("FAIL - %u of %u threads got SIGBUS within %u s\n",
		    atomic_load(&bused), opt_threads, opt_wait);
		return 1;
	}
	for (n = 0; n < opt_threads; n++)
		pthread_join(t[n], NULL);
	printf("ok - %u threads reading the block got SIGBUS when famd died, "
	    "and never a wrong word\n", opt_threads);

	bus_jmp = &jb;
	if (sigsetjmp(jb, 1) == 0) {
		volatile uint64_t x = buf[words - 1];

		(void)x;
		printf("FAIL - the lost block can still be read\n");
		return 1;
	}
	printf("ok - a later touch of the lost block raises SIGBUS (at %p)\n",
	    bus_addr);
	bus_jmp = NULL;

	free(buf);
	again = malloc(opt_size);
	if (again == NULL) {
		printf("FAIL - malloc after famd died: %s\n", strerror(errno));
		return 1;
	}
	for (i = 0; i < words; i += 509)
		again[i] = pat(i);
	for (i = 0; i < words; i += 509) {
		if (again[i] != pat(i)) {
			printf("FAIL - the new block lost word %zu\n", i);
			return 1;
		}
	}
	free(again);
	free(t);
	printf("ok - free() of the lost block is ignored; a new large block "
	    "works\n");
	return 0;
}
