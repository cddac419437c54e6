/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famownalloc.c - a program that brings its own malloc, as programs linked
 * with jemalloc or tcmalloc do: malloc() and its family are defined here,
 * ahead of libfamshim's, and a large block is mapped with mmap() while the
 * allocator holds its lock (jemalloc maps a new arena's metadata so).
 * Under LD_PRELOAD=libfamshim.so the shim may serve that mmap() with
 * fabric-attached memory; whatever it does, the program must not wait on
 * its own lock, and every byte must read back as written. Like jemalloc,
 * the allocator registers fork handlers at its first call (taking its lock
 * before fork(), and in the child counting the fork in its metadata, a
 * block it maps at its first large allocation), so that in a forked child
 * its handler runs before libfam's unless the shim puts libfam's first.
 * With FAMOWNALLOC_META_FIRST set, it maps its metadata at its first call,
 * as jemalloc does setting itself up (that call may be the shim's own
 * pthread_create(), starting its watchdog thread).
 *
 * usage: famownalloc [-f | -l] [-C | -F] [-s SIZE] [-t THREADS] [-w SECONDS]
 *   -f   expect the large blocks to be fabric-attached memory
 *   -l   expect them to be the kernel's memory
 *   -s   bytes of each large block (default 8M); each thread maps four
 *   -t   threads allocating at once (default 2)
 *   -w   once the first thread's blocks are written (with -C: the
 *        child's), print "ready", hold them SECONDS and exit 0 without
 *        reading them back
 *   -F   fork first: the child, which has no session, allocates (its
 *        first session opened from inside its allocator's mmap()), then
 *        the parent, once the child has passed
 *   -C   fork last: a block written, then fork(); the child reads the
 *        parent's data, writes its own, allocates, and finds its fork
 *        counted by the allocator's handler; the parent then finds its
 *        data unchanged
 * Prints "ok" and exits 0, or "FAIL - why" and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "toolutil.h"

#define POOL_SIZE ((size_t)64 << 20)
#define BIG       ((size_t)1 << 20)
#define HDR       64

/* A bump allocator for small blocks, mmap() for large ones. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* not recursive */
static _Alignas(4096) unsigned char pool[POOL_SIZE];
static size_t used;

/* The allocator's metadata: mapped at the first large allocation. */
struct meta {
	unsigned long allocs;
	unsigned long forks; /* counted by the child's fork handler */
};
static struct meta *meta;
static atomic_bool inited;

static void
own_prepare(void)
{
	pthread_mutex_lock(&lock);
}

static void
own_parent(void)
{
	pthread_mutex_unlock(&lock);
}

static void
own_child(void)
{
	if (meta != NULL)
		meta->forks++;
	pthread_mutex_unlock(&lock);
}

/* Maps the metadata block (a large mapping: the shim may serve it). */
static void
meta_map(void)
{
	void *m = mmap(NULL, BIG, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (m != MAP_FAILED)
		meta = m;
}

struct hdr {
	size_t size;   /* usable bytes */
	size_t mapped; /* bytes mapped for it (0: in the pool) */
	void *base;    /* what was mapped */
};

/* The header sits just below each block. */
static struct hdr *
hdr_of(void *p)
{
	return (struct hdr *)((unsigned char *)p - sizeof(struct hdr));
}

/* Takes size bytes aligned to align (a power of two, at least HDR). */
static void *
own_alloc(size_t size, size_t align)
{
	unsigned char *p = NULL;
	struct hdr *h;

	if (!atomic_exchange(&inited, true)) {
		pthread_atfork(own_prepare, own_parent, own_child);
		if (getenv("FAMOWNALLOC_META_FIRST") != NULL) {
			pthread_mutex_lock(&lock);
			if (meta == NULL)
				meta_map();
			pthread_mutex_unlock(&lock);
		}
	}
	if (align < HDR)
		align = HDR;
	if (size > (size_t)1 << 40) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&lock);
	if (size >= BIG && meta == NULL)
		meta_map();
	if (meta != NULL)
		meta->allocs++;
	if (size >= BIG) {
		/* mapped with the lock held, as jemalloc maps its metadata */
		size_t len = size + align + 4096;
		void *m = mmap(NULL, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m != MAP_FAILED) {
			p = (unsigned char *)(((uintptr_t)m + HDR + align - 1) &
			    ~(uintptr_t)(align - 1));
			h = hdr_of(p);
			h->mapped = len;
			h->base = m;
		}
	} else {
		uintptr_t at = ((uintptr_t)pool + used + HDR + align - 1) &
		    ~(uintptr_t)(align - 1);

		if (at + size <= (uintptr_t)pool + POOL_SIZE) {
			p = (unsigned char *)at;
			used = at + size - (uintptr_t)pool;
			h = hdr_of(p);
			h->mapped = 0;
			h->base = NULL;
		}
	}
	if (p != NULL)
		hdr_of(p)->size = size;
	pthread_mutex_unlock(&lock);
	if (p == NULL)
		errno = ENOMEM;
	return p;
}

void *
malloc(size_t size)
{
	return own_alloc(size, 16);
}

void
free(void *p)
{
	struct hdr *h;

	if (p == NULL)
		return;
	h = hdr_of(p);
	pthread_mutex_lock(&lock);
	if (h->mapped != 0)
		munmap(h->base, h->mapped);
	pthread_mutex_unlock(&lock);
}

void *
calloc(size_t n, size_t size)
{
	void *p;

	if (size != 0 && n > SIZE_MAX / size) {
		errno = ENOMEM;
		return NULL;
	}
	p = own_alloc(n * size, 16);
	if (p != NULL && hdr_of(p)->mapped == 0)
		memset(p, 0, n * size); /* the pool is never reused, but */
	return p;
}

void *
realloc(void *old, size_t size)
{
	void *p;

	if (old == NULL)
		return malloc(size);
	p = malloc(size);
	if (p == NULL)
		return NULL;
	memcpy(p, old, hdr_of(old)->size < size ? hdr_of(old)->size : size);
	free(old);
	return p;
}

int
posix_memalign(void **out, size_t align, size_t size)
{
	void *p = own_alloc(size, align);

	if (p == NULL)
		return ENOMEM;
	*out = p;
	return 0;
}

void *
aligned_alloc(size_t align, size_t size)
{
	return own_alloc(size, align);
}

void *
memalign(size_t align, size_t size)
{
	return own_alloc(size, align);
}

void *
valloc(size_t size)
{
	return own_alloc(size, 4096);
}

void *
pvalloc(size_t size)
{
	return own_alloc((size + 4095) & ~(size_t)4095, 4096);
}

size_t
malloc_usable_size(void *p)
{
	return p == NULL ? 0 : hdr_of(p)->size;
}

static size_t block = (size_t)8 << 20;
static int expect; /* 'f': FAM, 'l': the kernel's, 0: either */
static unsigned hold; /* -w */

/* One thread: four large blocks, written, verified, freed. */
static void *
worker(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg;
	uint64_t *b[4];

	for (int i = 0; i < 4; i++) {
		b[i] = malloc(block);
		if (b[i] == NULL)
			FAIL("malloc(%zu): %s", block, strerror(errno));
		if (expect == 'f' && !tool_is_fam(b[i]))
			FAIL("block %d is not fabric-attached memory", i);
		if (expect == 'l' && tool_is_fam(b[i]))
			FAIL("block %d is fabric-attached memory", i);
		for (size_t w = 0; w < block / 8; w++)
			b[i][w] = tool_pat(w * 8, seed + (uint64_t)i);
	}
	if (hold > 0 && seed == 1) {
		printf("ready\n");
		fflush(stdout);
		sleep(hold);
		_exit(0);
	}
	for (int i = 0; i < 4; i++) {
		for (size_t w = 0; w < block / 8; w++)
			if (b[i][w] != tool_pat(w * 8, seed + (uint64_t)i))
				FAIL("block %d: wrong word at byte %zu", i,
				    w * 8);
		free(b[i]);
	}
	return NULL;
}

/* -C: copy on write across fork(), with the allocator's handler. */
static void
fork_last(void)
{
	uint64_t *b = malloc(block);
	size_t nw = block / 8;
	int status;
	pid_t pid;

	if (b == NULL)
		FAIL("malloc(%zu): %s", block, strerror(errno));
	if (expect == 'f' && (!tool_is_fam(b) || !tool_is_fam(meta)))
		FAIL("the block or the allocator's metadata is not "
		    "fabric-attached memory");
	for (size_t w = 0; w < nw; w++)
		b[w] = tool_pat(w * 8, 100);
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		void *more;

		if (meta->forks != 1)
			FAIL("child: the allocator counted %lu forks, not 1",
			    meta->forks);
		for (size_t w = 0; w < nw; w++)
			if (b[w] != tool_pat(w * 8, 100))
				FAIL("child: wrong word of the parent's at "
				    "byte %zu", w * 8);
		for (size_t w = 0; w < nw; w++)
			b[w] = tool_pat(w * 8, 200);
		more = malloc(block);
		if (more == NULL)
			FAIL("child: malloc: %s", strerror(errno));
		memset(more, 1, block);
		if (hold > 0) {
			printf("ready\n");
			fflush(stdout);
			sleep(hold);
			_exit(0);
		}
		for (size_t w = 0; w < nw; w++)
			if (b[w] != tool_pat(w * 8, 200))
				FAIL("child: wrong word of its own at byte %zu",
				    w * 8);
		_exit(0);
	}
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		FAIL("the forked child: status %#x", status);
	if (meta->forks != 0)
		FAIL("parent: the allocator counted a fork of its own");
	for (size_t w = 0; w < nw; w++)
		if (b[w] != tool_pat(w * 8, 100))
			FAIL("parent: wrong word at byte %zu after the child "
			    "wrote", w * 8);
	free(b);
	printf("fork ok\n");
}

int
main(int argc, char **argv)
{
	pthread_t t[16];
	int nt = 2, c, status;
	bool forkfirst = false, forklast = false;
	pid_t pid;

	while ((c = getopt(argc, argv, "CFfls:t:w:")) != -1) {
		switch (c) {
		case 'f':
		case 'l':
			expect = c;
			break;
		case 's':
			block = tool_parse_size(optarg);
			break;
		case 't':
			nt = atoi(optarg);
			break;
		case 'w':
			hold = (unsigned)atoi(optarg);
			break;
		case 'F':
			forkfirst = true;
			break;
		case 'C':
			forklast = true;
			break;
		default:
			fprintf(stderr, "usage: famownalloc [-f | -l] "
			    "[-C | -F] [-s SIZE] [-t THREADS] [-w SECONDS]\n");
			return 2;
		}
	}
	if (nt < 1 || nt > 16 || block < BIG)
		FAIL("1 to 16 threads, blocks of 1M or more");
	if (forkfirst) {
		fflush(stdout);
		pid = fork();
		if (pid < 0)
			FAIL("fork: %s", strerror(errno));
		if (pid > 0) {
			if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
			    WEXITSTATUS(status) != 0)
				FAIL("the forked child: status %#x", status);
			printf("child ok\n");
		}
	}
	if (forklast) {
		fork_last();
		return 0;
	}
	for (int i = 0; i < nt; i++)
		if ((errno = pthread_create(&t[i], NULL, worker,
		    (void *)(uintptr_t)(i * 4 + 1))) != 0)
			FAIL("pthread_create: %s", strerror(errno));
	for (int i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	printf("ok\n");
	return 0;
}
