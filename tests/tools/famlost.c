/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famlost.c - what a program sees when its host famd dies: run under
 * LD_PRELOAD=libfamshim.so with a host famd, it fills a large block, says
 * "ready" on stdout, and has THREADS threads read it over and over (checking
 * every word) and touch never-written pages of a second half (which must
 * read as zero) until the test driver kills famd. Then every thread must
 * get SIGBUS - never a wrong word, never a hang - and the program must go
 * on: free() of the lost block is ignored, and a new large block works.
 *
 * With -m the test driver kills the memory famd instead, and the host famd
 * lives on: every thread must get SIGBUS once it touches a chunk that is not
 * in the host's buffer (the written half must be larger than the buffer),
 * and every word read before must be right. A writing thread joins them:
 * it fills a second, larger block front to back, checking each chunk, so
 * that the buffer fills with dirty chunks that cannot be written back; it
 * too must get SIGBUS, not hang. Then a new large block must be
 * libc memory (the host famd has no memory node), and the program says
 * "waiting" until SIGUSR1 tells it a memory famd was started again: the
 * old block's data is gone with the old one, so a pass over it must raise
 * SIGBUS (after right words only), and a new large block must be
 * fabric-attached memory again.
 *
 * With -p the memory famd lives on but the network to it fails: every
 * thread must get SIGBUS as with -m, and a new large block must be libc
 * memory while the node is out of reach; after SIGUSR1 (the network is
 * back) the host must have resumed its session, so a pass over the old
 * block must read every word right, and a new large block must be
 * fabric-attached memory again.
 *
 * usage: famlost [-m | -p] [-s SIZE] [-t THREADS] [-w SECONDS]
 *   -m          the memory famd dies, not the host famd
 *   -p          the network to the memory famd fails and heals
 *   -s SIZE     bytes of the block (K, M, G suffixes; default 64M)
 *   -t N        reading threads (default 4)
 *   -w SECONDS  how long to wait for each event (default 60)
 * Exits 0 when all went as said, 1 on a wrong word, a thread without
 * SIGBUS, or a failure after it.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
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

static size_t opt_size = (size_t)64 << 20;
static unsigned opt_threads = 4;
static unsigned opt_wait = 60;
static bool opt_memory;
static bool opt_partition;           /* -p: the node comes back whole */

static uint64_t *buf;
static uint64_t *wbuf;               /* -m: the writing thread's block */
static size_t wsize;
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

/*
 * -m: fills wbuf front to back, a chunk at a time, checking each, pass
 * after pass (each with its own pattern), until SIGBUS.
 */
static void *
writer_main(void *arg)
{
	size_t words = wsize / 8, step = (64 << 10) / 8;
	volatile uint64_t *v = wbuf;
	volatile uint64_t pass = 0;
	volatile size_t i = 0;
	sigjmp_buf jb;

	bus_jmp = &jb;
	if (sigsetjmp(jb, 1) != 0) {
		printf("writer: SIGBUS in pass %" PRIu64 " at byte %zu\n",
		    (uint64_t)pass, (size_t)i * 8);
		atomic_fetch_add(&bused, 1);
		return NULL;
	}
	for (;; pass++) {
		for (i = 0; i < words; i += step) {
			for (size_t j = i; j < i + step; j++)
				v[j] = pat(j) + pass;
			for (size_t j = i; j < i + step; j++) {
				if (v[j] != pat(j) + pass) {
					printf("FAIL - writer: word %zu is %#"
					    PRIx64 ", not %#" PRIx64 "\n", j,
					    v[j], pat(j) + pass);
					atomic_store(&wrong, true);
					return NULL;
				}
			}
		}
	}
}

/* Parses a size with an optional K, M or G suffix, or exits 2. */
static size_t
parse_size(const char *s)
{
	size_t v = tool_parse_size(s);

	if (v < (1 << 20)) {
		fprintf(stderr, "famlost: bad size %s\n", s);
		exit(2);
	}
	return v;
}

/* Returns CLOCK_MONOTONIC in milliseconds. */
static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Allocates, fills, checks and frees a new block; fam: what it must be. */
static int
new_block(bool fam, const char *when)
{
	size_t words = opt_size / 8, i;
	uint64_t *p = malloc(opt_size);

	if (p == NULL) {
		printf("FAIL - malloc %s: %s\n", when, strerror(errno));
		return 1;
	}
	if (tool_is_fam(p) != fam) {
		printf("FAIL - a new block %s is %s\n", when, fam ?
		    "libc memory, not fabric-attached" :
		    "fabric-attached memory, not libc's");
		return 1;
	}
	for (i = 0; i < words; i += 509)
		p[i] = pat(i);
	for (i = 0; i < words; i += 509) {
		if (p[i] != pat(i)) {
			printf("FAIL - the new block %s lost word %zu\n", when,
			    i);
			return 1;
		}
	}
	free(p);
	return 0;
}

/*
 * -m, once every thread got SIGBUS: the block of libc memory while there
 * is no memory node; then, after SIGUSR1, the old block lost and new ones
 * fabric-attached again.
 */
static int
memory_node_restarted(const sigset_t *usr1)
{
	size_t half = opt_size / 16;
	volatile uint64_t *v = buf;
	volatile size_t i = 0;
	struct timespec ts = { .tv_sec = opt_wait };
	sigjmp_buf jb;
	long t0;

	if (new_block(false, "while the memory node is down") != 0)
		return 1;
	printf("ok - a new large block is libc memory while the memory node "
	    "is down\n");
	printf("waiting %d\n", (int)getpid());
	if (sigtimedwait(usr1, NULL, &ts) != SIGUSR1) {
		printf("FAIL - no SIGUSR1 within %u s\n", opt_wait);
		return 1;
	}
	t0 = now_ms();
	bus_jmp = &jb;
	if (opt_partition) {
		if (sigsetjmp(jb, 1) != 0) {
			printf("FAIL - SIGBUS at %p reading the old block after "
			    "the network came back\n", bus_addr);
			return 1;
		}
		for (i = 0; i < half; i++) {
			if (v[i] != pat(i)) {
				printf("FAIL - word %zu is %#" PRIx64 ", not %#"
				    PRIx64 "\n", (size_t)i, v[i], pat(i));
				return 1;
			}
		}
		bus_jmp = NULL;
		printf("ok - after the network came back the old block read "
		    "back whole (%zu words in %ld ms)\n", half, now_ms() - t0);
	} else if (sigsetjmp(jb, 1) == 0) {
		for (i = 0; i < half; i++) {
			if (v[i] != pat(i)) {
				printf("FAIL - word %zu is %#" PRIx64 ", not %#"
				    PRIx64 "\n", (size_t)i, v[i], pat(i));
				return 1;
			}
		}
		printf("FAIL - the old block read back whole after the memory "
		    "node restarted, more than the buffer holds\n");
		return 1;
	} else {
		bus_jmp = NULL;
		printf("ok - after the restart a pass over the old block "
		    "raises SIGBUS (word %zu, after %ld ms); every word before "
		    "was right\n", (size_t)i, now_ms() - t0);
	}
	free(buf);
	if (new_block(true, "after the restart") != 0)
		return 1;
	printf("ok - free() of the lost block works; a new large block is "
	    "fabric-attached memory again\n");
	return 0;
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
	sigset_t usr1;
	unsigned n;
	int c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "mps:t:w:")) != -1) {
		switch (c) {
		case 'm':
			opt_memory = true;
			break;
		case 'p':
			opt_memory = opt_partition = true;
			break;
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
			fprintf(stderr, "usage: famlost [-m | -p] [-s SIZE] "
			    "[-t THREADS] [-w SECONDS]\n");
			return 2;
		}
	}
	if (opt_threads == 0)
		opt_threads = 1;
	sigaction(SIGBUS, &sa, NULL);
	/* Every thread blocks SIGUSR1: main waits for it with sigtimedwait. */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
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
	if (opt_memory) {
		/* Sparse: only what the writer reaches is used. */
		wsize = opt_size * 16;
		wbuf = malloc(wsize);
		if (wbuf == NULL) {
			printf("FAIL - malloc(%zu): %s\n", wsize,
			    strerror(errno));
			return 1;
		}
	}
	t = calloc(opt_threads + 1, sizeof *t);
	for (n = 0; n < opt_threads; n++)
		pthread_create(&t[n], NULL, reader_main, (void *)(uintptr_t)n);
	if (opt_memory)
		pthread_create(&t[n], NULL, writer_main, NULL);
	printf("ready %d\n", (int)getpid());

	for (i = 0; i < (size_t)opt_wait * 10; i++) {
		struct timespec ts = { .tv_nsec = 100000000 };

		if (atomic_load(&bused) == opt_threads + opt_memory ||
		    atomic_load(&wrong))
			break;
		nanosleep(&ts, NULL);
	}
	if (atomic_load(&wrong))
		return 1;
	if (atomic_load(&bused) != opt_threads + opt_memory) {
		printf("FAIL - %u of %u threads got SIGBUS within %u s\n",
		    atomic_load(&bused), opt_threads + opt_memory, opt_wait);
		return 1;
	}
	for (n = 0; n < opt_threads + opt_memory; n++)
		pthread_join(t[n], NULL);
	free(t);
	if (opt_memory) {
		printf("ok - %u threads reading the block and one writing got "
		    "SIGBUS when the memory node %s, and never a wrong "
		    "word\n", opt_threads, opt_partition ?
		    "was out of reach" : "died");
		free(wbuf);
		return memory_node_restarted(&usr1);
	}
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
	printf("ok - free() of the lost block is ignored; a new large block "
	    "works\n");
	return 0;
}
