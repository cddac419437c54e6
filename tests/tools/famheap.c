/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famheap.c - many small allocations, run under LD_PRELOAD=libfamshim.so
 * with FAM_HEAP=all by tests/e2e/shim-heap.sh: THREADS threads allocate
 * objects of 64 bytes to 4 KiB (malloc, calloc, posix_memalign,
 * aligned_alloc, realloc) until TOTAL bytes are live, write every byte,
 * then every byte is checked, half are freed and allocated again, and
 * everything is checked once more. Then a forked child frees some of the
 * parent's objects (which it cannot read) and allocates, writes and checks
 * its own, and the parent checks all of its objects again.
 *
 * usage: famheap [-t TOTAL] [-T THREADS] [-S SEED] [-H]
 * -H prints "holding" once the data is written and checked, and waits for
 * SIGUSR1. Prints "famheap: objects N bytes N fam N rss_kib N hwm_kib N"
 * and "famheap: child ok"; exits 0, or 1 with "FAIL - ..." on a wrong byte.
 */
#include "config.h"

#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "toolutil.h"

#define MIN_OBJ 64
#define MAX_OBJ 4096

struct obj {
	unsigned char *p;
	size_t size;
};

struct worker {
	pthread_t tid;
	unsigned id;
	size_t want;      /* bytes to have live */
	uint64_t rng;
	struct obj *objs;
	size_t n, cap;
	size_t bytes, fam; /* live bytes; objects found in FAM */
};

static uint64_t opt_seed = 1;
static volatile sig_atomic_t go_on;

/* The next pseudo-random number of w (xorshift64). */
static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* The byte at offset off of object i of worker w. */
static unsigned char
pattern(const struct worker *w, size_t i, size_t off, unsigned gen)
{
	return (unsigned char)(w->id * 37 + i * 131 + off * 7 + gen * 11 +
	    opt_seed);
}

/* Allocates object i of w, of a random size, one of five ways. */
static void
obj_new(struct worker *w, size_t i, unsigned gen)
{
	size_t size = MIN_OBJ + rnd(&w->rng) % (MAX_OBJ - MIN_OBJ + 1), k;
	unsigned how = (unsigned)(rnd(&w->rng) % 8);
	unsigned char *p = NULL;
	void *q;

	switch (how) {
	case 0:
		p = calloc(1, size);
		if (p == NULL)
			FAIL("calloc(%zu)", size);
		for (k = 0; k < size; k++)
			if (p[k] != 0)
				FAIL("calloc(%zu): byte %zu is %u", size, k, p[k]);
		break;
	case 1:
		if (posix_memalign(&q, 64, size) != 0)
			FAIL("posix_memalign(64, %zu)", size);
		p = q;
		if ((uintptr_t)p % 64 != 0)
			FAIL("posix_memalign(64) gave %p", (void *)p);
		break;
	case 2:
		p = aligned_alloc(256, (size + 255) & ~(size_t)255);
		if (p == NULL || (uintptr_t)p % 256 != 0)
			FAIL("aligned_alloc(256) gave %p", (void *)p);
		break;
	case 3:
		/* Grown by realloc from a quarter: the head must survive. */
		p = malloc(size / 4);
		if (p == NULL)
			FAIL("malloc(%zu)", size / 4);
		memset(p, 0x5a, size / 4);
		p = realloc(p, size);
		if (p == NULL)
			FAIL("realloc(%zu)", size);
		for (k = 0; k < size / 4; k++)
			if (p[k] != 0x5a)
				FAIL("realloc lost byte %zu", k);
		break;
	default:
		p = malloc(size);
		if (p == NULL)
			FAIL("malloc(%zu)", size);
	}
	if (malloc_usable_size(p) < size)
		FAIL("malloc_usable_size %zu < %zu", malloc_usable_size(p), size);
	for (k = 0; k < size; k++)
		p[k] = pattern(w, i, k, gen);
	w->objs[i].p = p;
	w->objs[i].size = size;
	w->bytes += size;
}

/* Checks every byte of every object of w. */
static void
objs_check(struct worker *w, unsigned gen_odd)
{
	size_t i, k;

	for (i = 0; i < w->n; i++) {
		unsigned gen = (i % 2) ? gen_odd : 0;

		for (k = 0; k < w->objs[i].size; k++)
			if (w->objs[i].p[k] != pattern(w, i, k, gen))
				FAIL("thread %u object %zu (%zu bytes) byte %zu: "
				    "%u, not %u", w->id, i, w->objs[i].size, k,
				    w->objs[i].p[k], pattern(w, i, k, gen));
	}
}

/* A worker: allocates and writes its share, checks it, renews half. */
static void *
worker_run(void *arg)
{
	struct worker *w = arg;
	size_t i;

	while (w->bytes < w->want) {
		if (w->n == w->cap) {
			w->cap = w->cap ? w->cap * 2 : 1024;
			w->objs = realloc(w->objs, w->cap * sizeof *w->objs);
			if (w->objs == NULL)
				FAIL("realloc of the object table");
		}
		obj_new(w, w->n, 0);
		w->n++;
	}
	objs_check(w, 0);
	for (i = 1; i < w->n; i += 2) {
		w->bytes -= w->objs[i].size;
		free(w->objs[i].p);
	}
	for (i = 1; i < w->n; i += 2)
		obj_new(w, i, 1);
	objs_check(w, 1);
	for (i = 0; i < w->n; i++)
		if (tool_is_fam(w->objs[i].p))
			w->fam++;
	return NULL;
}

/* Reads the kB value of field (e.g. "VmRSS:") from /proc/self/status. */
static long
status_kib(const char *field)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof line, f) != NULL)
		if (strncmp(line, field, strlen(field)) == 0)
			v = strtol(line + strlen(field), NULL, 10);
	fclose(f);
	return v;
}

/* SIGUSR1: stop holding. */
static void
on_usr1(int sig)
{
	go_on = 1;
}

/*
 * In a forked child: frees some of the parent's objects (n of them, their
 * addresses in inherited[], on the stack: the parent's heap may not be
 * readable in the child), then allocates, writes and checks its own, in
 * fabric-attached memory when want_fam.
 */
static int
child_run(void *const *inherited, size_t n, bool want_fam)
{
	struct worker c = { .id = 99, .want = 1 << 20, .rng = 7 };
	size_t i;

	for (i = 0; i < n; i++)
		free(inherited[i]);
	worker_run(&c);
	if (want_fam && c.fam != c.n)
		FAIL("the child: %zu of its %zu objects are fabric-attached",
		    c.fam, c.n);
	for (i = 0; i < c.n; i++)
		free(c.objs[i].p);
	free(c.objs);
	return 0;
}

/* Runs the workers, holds if asked, forks, checks again. */
int
main(int argc, char **argv)
{
	size_t total = 24 << 20, bytes = 0, objs = 0, fam = 0, ninh;
	void *inherited[64];
	unsigned nthreads = 2, t;
	struct worker *w;
	bool hold = false;
	int opt, st;
	pid_t pid;

	while ((opt = getopt(argc, argv, "t:T:S:H")) != -1) {
		switch (opt) {
		case 't':
			total = tool_parse_size(optarg);
			break;
		case 'T':
			nthreads = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'S':
			opt_seed = strtoull(optarg, NULL, 10);
			break;
		case 'H':
			hold = true;
			break;
		default:
			fprintf(stderr, "usage: famheap [-t TOTAL] [-T THREADS] "
			    "[-S SEED] [-H]\n");
			return 2;
		}
	}
	if (nthreads == 0)
		nthreads = 1;
	w = calloc(nthreads, sizeof *w);
	if (w == NULL)
		FAIL("calloc of the workers");
	signal(SIGUSR1, on_usr1);
	for (t = 0; t < nthreads; t++) {
		w[t].id = t;
		w[t].want = total / nthreads;
		w[t].rng = opt_seed * 1000003 + t + 1;
		if (pthread_create(&w[t].tid, NULL, worker_run, &w[t]) != 0)
			FAIL("pthread_create");
	}
	for (t = 0; t < nthreads; t++) {
		pthread_join(w[t].tid, NULL);
		bytes += w[t].bytes;
		objs += w[t].n;
		fam += w[t].fam;
	}
	printf("famheap: objects %zu bytes %zu fam %zu rss_kib %ld hwm_kib %ld\n",
	    objs, bytes, fam, status_kib("VmRSS:"), status_kib("VmHWM:"));
	if (hold) {
		printf("holding\n");
		fflush(stdout);
		while (!go_on)
			pause();
	}
	for (ninh = 0; ninh < 64 && ninh * 3 < w[0].n; ninh++)
		inherited[ninh] = w[0].objs[ninh * 3].p;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		FAIL("fork");
	if (pid == 0)
		_exit(child_run(inherited, ninh, fam == objs));
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		FAIL("the child: status %#x", st);
	printf("famheap: child ok\n");
	for (t = 0; t < nthreads; t++)
		objs_check(&w[t], 1);
	printf("famheap: parent ok after the child\n");
	return 0;
}
