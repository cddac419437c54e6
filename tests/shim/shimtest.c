/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shimtest.c - checks the malloc family's semantics as a program sees them,
 * run under LD_PRELOAD=libfamshim.so (tests/e2e/shim-*.sh): every entry
 * point, alignment, usable sizes, errno, threads, fork and exec. The large
 * size (4 MiB) is above the FAM_THRESHOLD the drivers set (1M), the small
 * one (1000 bytes) below it.
 *
 * usage: shimtest all | strict | threads | fork | alloc BYTES
 *   all      semantics, errno, usable sizes, threads, fork (expects memory)
 *   strict   large requests fail with ENOMEM, small ones succeed
 *            (FAM_STRICT=1 without a famd)
 *   alloc    malloc(BYTES): exits 0 with memory, 1 with NULL and ENOMEM
 * Prints "ok - what" per check, and exits 1 after the first failure.
 */
#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#define LARGE ((size_t)4 << 20)
#define SMALL ((size_t)1000)
#define NTHREADS 8

static long page;
/* Impossible sizes, hidden from the compiler's warnings about them. */
static volatile size_t huge = SIZE_MAX - 4096;
static volatile size_t half = SIZE_MAX / 2;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			printf("FAIL - %s:%d: %s: ", __FILE__, __LINE__,   \
			    #cond);                                        \
			printf(__VA_ARGS__);                               \
			printf("\n");                                      \
			fflush(stdout);                                    \
			exit(1);                                           \
		}                                                          \
	} while (0)

/* Fills n bytes at p with a pattern made from seed. */
static void
fill(void *p, size_t n, unsigned seed)
{
	unsigned char *c = p;
	size_t i;

	for (i = 0; i < n; i++)
		c[i] = (unsigned char)(i * 31 + seed);
}

/* Tells whether n bytes at p hold fill()'s pattern for seed. */
static bool
holds(const void *p, size_t n, unsigned seed)
{
	const unsigned char *c = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (c[i] != (unsigned char)(i * 31 + seed))
			return false;
	return true;
}

/* Tells whether n bytes at p are zero. */
static bool
zeroed(const void *p, size_t n)
{
	const unsigned char *c = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (c[i] != 0)
			return false;
	return true;
}

/* Tells whether p is a multiple of align. */
static bool
aligned(const void *p, size_t align)
{
	return (uintptr_t)p % align == 0;
}

/* malloc and free, large and small; usable sizes. */
static void
test_malloc(void)
{
	size_t sizes[] = { 0, 1, SMALL, LARGE - 1, LARGE, LARGE + 1,
		(size_t)64 << 20 };
	size_t i;

	for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		size_t n = sizes[i];
		char *p = malloc(n);

		CHECK(p != NULL, "malloc(%zu)", n);
		CHECK(aligned(p, 16), "malloc(%zu) = %p", n, (void *)p);
		CHECK(malloc_usable_size(p) >= n, "usable %zu < %zu",
		    malloc_usable_size(p), n);
		fill(p, n, (unsigned)i);
		CHECK(holds(p, n, (unsigned)i), "malloc(%zu) data", n);
		free(p);
	}
	CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL)");
	free(NULL);
	errno = 0;
	CHECK(malloc(huge) == NULL && errno == ENOMEM,
	    "malloc(huge) errno %d", errno);
	printf("ok - malloc/free of 0 B to 64 MiB keep data, 16-byte aligned, "
	    "usable >= asked; malloc(huge) is ENOMEM\n");
}

/* calloc zero-fills, and refuses overflowing products. */
static void
test_calloc(void)
{
	size_t sizes[] = { SMALL, LARGE, (size_t)32 << 20 };
	size_t i;

	for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		/* Dirty the heap first, so a reused block would show. */
		char *d = malloc(sizes[i]);

		CHECK(d != NULL, "malloc");
		memset(d, 0xa5, sizes[i]);
		free(d);
		char *p = calloc(sizes[i] / 8, 8);

		CHECK(p != NULL, "calloc(%zu)", sizes[i]);
		CHECK(zeroed(p, sizes[i]), "calloc(%zu) not zero", sizes[i]);
		free(p);
	}
	errno = 0;
	CHECK(calloc(half, 3) == NULL && errno == ENOMEM,
	    "calloc overflow errno %d", errno);
	errno = 0;
	CHECK(reallocarray(NULL, half, 3) == NULL && errno == ENOMEM,
	    "reallocarray overflow errno %d", errno);
	printf("ok - calloc zero-fills small and large blocks; calloc and "
	    "reallocarray refuse overflowing sizes with ENOMEM\n");
}

/* realloc keeps data across growth, shrinking and the threshold. */
static void
test_realloc(void)
{
	size_t steps[] = { SMALL, LARGE, 3 * LARGE, LARGE + 7, SMALL / 2,
		2 * LARGE, 100 };
	size_t i, have = 0;
	char *p = NULL;

	for (i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		size_t n = steps[i], keep = have < n ? have : n;

		p = realloc(p, n);
		CHECK(p != NULL, "realloc to %zu", n);
		CHECK(holds(p, keep, 7), "realloc to %zu lost data", n);
		CHECK(malloc_usable_size(p) >= n, "usable after realloc");
		fill(p, n, 7);
		have = n;
	}
	p = reallocarray(p, LARGE / 4, 4);
	CHECK(p != NULL && holds(p, have, 7), "reallocarray keeps data");
	errno = 0;
	CHECK(realloc(p, huge) == NULL && errno == ENOMEM,
	    "realloc(huge)");
	CHECK(holds(p, have, 7), "failed realloc changed the block");
	CHECK(realloc(p, 0) == NULL, "realloc(p, 0) frees, returns NULL");
	p = realloc(NULL, LARGE);
	CHECK(p != NULL, "realloc(NULL, large)");
	free(p);
	printf("ok - realloc keeps data growing, shrinking and crossing the "
	    "threshold both ways; a failed realloc leaves the block\n");
}

/* Every aligned allocator meets its alignment, large and small. */
static void
test_align(void)
{
	size_t aligns[] = { 16, 64, 4096, 65536, (size_t)2 << 20 };
	size_t sizes[] = { SMALL, LARGE };
	size_t i, j;
	void *p;

	for (i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
		for (j = 0; j < 2; j++) {
			size_t a = aligns[i], n = sizes[j];

			CHECK(posix_memalign(&p, a, n) == 0, "posix_memalign");
			CHECK(aligned(p, a), "posix_memalign %zu %p", a, p);
			fill(p, n, 1);
			CHECK(holds(p, n, 1), "posix_memalign data");
			free(p);
			p = aligned_alloc(a, n);
			CHECK(p != NULL && aligned(p, a), "aligned_alloc %zu", a);
			fill(p, n, 2);
			free(p);
			p = memalign(a, n);
			CHECK(p != NULL && aligned(p, a), "memalign %zu", a);
			CHECK(malloc_usable_size(p) >= n, "memalign usable");
			free(p);
		}
	}
	CHECK(posix_memalign(&p, 3, 64) == EINVAL, "posix_memalign(3)");
	CHECK(posix_memalign(&p, 4, 64) == EINVAL, "posix_memalign(4)");
	CHECK(posix_memalign(&p, 0, LARGE) == EINVAL, "posix_memalign(0)");
	p = valloc(LARGE);
	CHECK(p != NULL && aligned(p, (size_t)page), "valloc large");
	free(p);
	p = valloc(SMALL);
	CHECK(p != NULL && aligned(p, (size_t)page), "valloc small");
	free(p);
	p = pvalloc(LARGE + 1);
	CHECK(p != NULL && aligned(p, (size_t)page), "pvalloc large");
	CHECK(malloc_usable_size(p) >= LARGE + (size_t)page, "pvalloc rounds");
	free(p);
	p = pvalloc(1);
	CHECK(p != NULL && aligned(p, (size_t)page) &&
	    malloc_usable_size(p) >= (size_t)page, "pvalloc small");
	free(p);
	printf("ok - posix_memalign, aligned_alloc, memalign (16 B to 2 MiB), "
	    "valloc and pvalloc align, small and large; bad alignments are "
	    "EINVAL\n");
}

/* free() keeps errno, whatever it frees. */
static void
test_errno(void)
{
	void *s = malloc(SMALL), *l = malloc(LARGE), *c = calloc(1, LARGE);

	CHECK(s && l && c, "allocations");
	errno = 4242;
	free(s);
	CHECK(errno == 4242, "free(small) changed errno to %d", errno);
	free(l);
	CHECK(errno == 4242, "free(large) changed errno to %d", errno);
	free(c);
	free(NULL);
	CHECK(errno == 4242, "free changed errno to %d", errno);
	errno = 77;
	s = malloc(LARGE);
	CHECK(s != NULL && errno == 77, "a successful malloc changed errno "
	    "to %d", errno);
	free(s);
	printf("ok - free keeps errno; a successful large malloc leaves it\n");
}

struct hammer {
	unsigned id;
	unsigned long ops;
	int failed;
};

/* One thread's share: mixed sizes, data checked before every free. */
static void *
hammer_main(void *arg)
{
	struct hammer *h = arg;
	char *slot[64] = { 0 };
	size_t len[64] = { 0 };
	unsigned x = h->id * 2654435761u + 1;
	unsigned long i;

	for (i = 0; i < h->ops; i++) {
		unsigned k, pick;
		size_t n;

		x = x * 1103515245u + 12345u;
		k = (x >> 8) % 64;
		pick = (x >> 16) % 100;
		n = pick < 3 ? LARGE + (x % 4096) : pick < 60 ?
		    1 + (x >> 4) % 256 : 1 + (x >> 4) % 65536;
		if (slot[k] != NULL) {
			if (!holds(slot[k], len[k] < 64 ? len[k] : 64,
			    h->id + k)) {
				h->failed = 1;
				return NULL;
			}
			if (pick % 4 == 0) {
				slot[k] = realloc(slot[k], n);
				if (slot[k] == NULL) {
					h->failed = 1;
					return NULL;
				}
				len[k] = n;
				fill(slot[k], n < 64 ? n : 64, h->id + k);
				continue;
			}
			free(slot[k]);
			slot[k] = NULL;
			continue;
		}
		slot[k] = (pick & 1) ? calloc(1, n) : malloc(n);
		if (slot[k] == NULL) {
			h->failed = 1;
			return NULL;
		}
		len[k] = n;
		fill(slot[k], n < 64 ? n : 64, h->id + k);
	}
	for (i = 0; i < 64; i++)
		free(slot[i]);
	return NULL;
}

/* NTHREADS threads allocate and free at once. */
static void
test_threads(void)
{
	pthread_t t[NTHREADS];
	struct hammer h[NTHREADS];
	unsigned i;

	for (i = 0; i < NTHREADS; i++) {
		h[i] = (struct hammer){ .id = i, .ops = 100000 };
		CHECK(pthread_create(&t[i], NULL, hammer_main, &h[i]) == 0,
		    "pthread_create");
	}
	for (i = 0; i < NTHREADS; i++) {
		pthread_join(t[i], NULL);
		CHECK(!h[i].failed, "thread %u saw wrong data or NULL", i);
	}
	printf("ok - %d threads, %lu malloc/calloc/realloc/free each, sizes 1 B "
	    "to 4 MiB, data intact\n", NTHREADS, h[0].ops);
}

/* fork+exec works, and a child may allocate and free on its own. */
static void
test_fork(void)
{
	char *big = malloc(LARGE);
	int status;
	pid_t pid;

	CHECK(big != NULL, "malloc");
	fill(big, LARGE, 9);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		execl("/bin/true", "true", (char *)NULL);
		_exit(127);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0, "fork+exec /bin/true: status %#x",
	    status);

	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		char *c = malloc(LARGE);

		if (c == NULL)
			_exit(2);
		fill(c, LARGE, 3);
		if (!holds(c, LARGE, 3))
			_exit(3);
		free(c);
		free(big); /* inherited: FAM ignores it, libc frees its copy */
		_exit(0);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 0, "child allocating: status %#x", status);
	CHECK(holds(big, LARGE, 9), "parent's block changed by the child");
	free(big);
	printf("ok - fork+exec of /bin/true; a forked child allocates, frees "
	    "and frees an inherited block; the parent's data is intact\n");
}

/* FAM_STRICT without famd: large requests fail with ENOMEM, small work. */
static void
test_strict(void)
{
	void *p, *s;

	errno = 0;
	CHECK(malloc(LARGE) == NULL && errno == ENOMEM, "malloc");
	errno = 0;
	CHECK(calloc(LARGE / 8, 8) == NULL && errno == ENOMEM, "calloc");
	errno = 0;
	CHECK(aligned_alloc(4096, LARGE) == NULL && errno == ENOMEM,
	    "aligned_alloc");
	errno = 0;
	CHECK(memalign(65536, LARGE) == NULL && errno == ENOMEM, "memalign");
	errno = 0;
	CHECK(valloc(LARGE) == NULL && errno == ENOMEM, "valloc");
	errno = 0;
	CHECK(pvalloc(LARGE) == NULL && errno == ENOMEM, "pvalloc");
	CHECK(posix_memalign(&p, 4096, LARGE) == ENOMEM, "posix_memalign");
	s = malloc(SMALL);
	CHECK(s != NULL, "small malloc");
	fill(s, SMALL, 5);
	errno = 0;
	CHECK(realloc(s, LARGE) == NULL && errno == ENOMEM, "realloc up");
	CHECK(holds(s, SMALL, 5), "failed realloc changed the block");
	errno = 0;
	CHECK(reallocarray(s, LARGE, 1) == NULL && errno == ENOMEM,
	    "reallocarray up");
	s = realloc(s, 2 * SMALL);
	CHECK(s != NULL && holds(s, SMALL, 5), "small realloc");
	free(s);
	p = calloc(1, SMALL);
	CHECK(p != NULL && zeroed(p, SMALL), "small calloc");
	free(p);
	printf("ok - FAM_STRICT: every large request fails with ENOMEM (the "
	    "old block kept), small ones work\n");
}

/* Runs the checks the mode names. */
int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "all";

	setvbuf(stdout, NULL, _IOLBF, 0);
	page = sysconf(_SC_PAGESIZE);
	if (strcmp(mode, "alloc") == 0 && argc == 3) {
		size_t n = strtoull(argv[2], NULL, 0);
		char *p;

		errno = 0;
		p = malloc(n);
		if (p == NULL) {
			printf("malloc(%zu): NULL, %s\n", n, strerror(errno));
			return errno == ENOMEM ? 1 : 2;
		}
		p[0] = p[n - 1] = 1;
		free(p);
		printf("malloc(%zu): memory\n", n);
	} else if (strcmp(mode, "strict") == 0) {
		test_strict();
	} else if (strcmp(mode, "threads") == 0) {
		test_threads();
	} else if (strcmp(mode, "fork") == 0) {
		test_fork();
	} else if (strcmp(mode, "all") == 0) {
		test_malloc();
		test_calloc();
		test_realloc();
		test_align();
		test_errno();
		test_threads();
		test_fork();
	} else {
		fprintf(stderr, "usage: shimtest all|strict|threads|fork|"
		    "alloc BYTES\n");
		return 2;
	}
	return 0;
}
