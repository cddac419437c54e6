/* SPDX-License-Identifier: Apache-2.0 */
/*
 * faultbench.c - fault-service throughput and latency for chunk-sized
 * accesses, sequential or random.
 *
 *   faultbench [-m MODE] [-s SIZE] [-c CHUNK] [-p seq|rand] [-t THREADS]
 *              [-w] [-P FLUSH] [-R]
 *
 * MODE:
 *   malloc   the memory comes from malloc(); run it under libfamshim.so to
 *            measure famd (or without, for local memory)
 *   ceiling  the raw userfaultfd ceiling: a memfd mapped MAP_SHARED and
 *            registered on an in-process userfaultfd, whose handler thread
 *            serves each missing fault with one UFFDIO_COPY of a chunk from
 *            local memory (write-protected, as famd installs)
 *
 * The program touches each chunk once, one 8-byte read per 4 KiB page (so
 * the time is fault service, not memory bandwidth), in order or in a random
 * permutation, times the first touch of each chunk, and prints one line
 * (with -t THREADS, that many threads fault at once, thread k touching the
 * k-th, (k+THREADS)-th, ... chunk of the order; the ceiling's handler has
 * as many threads reading its userfaultfd):
 *   mode pattern bytes seconds GB/s chunks/s p50_us p99_us checksum
 * With -P FLUSH (malloc mode, under libfamshim.so with SIZE above the
 * host's buffer) every page of the block is first written with a pattern,
 * then FLUSH bytes (twice the buffer) of a second, never-written block are
 * read, pass after pass (at most 16) until no page of the first is
 * resident (mincore), so that every chunk of the first lives on the memory
 * node and the buffer holds clean chunks: each timed first touch is a
 * chunk fetch from the memory node with no write-back in its way, and the
 * pattern is checked. Pages still resident after the last pass are
 * reported on stderr. With -w it then writes every page and reads everything back to
 * check. With -R the block is advised MADV_RANDOM first (its page-aligned
 * part).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096u

static size_t chunk = 65536;
static int uffd = -1;
static uint8_t *src;
static uint64_t base;
static volatile int stop;
static unsigned nthreads = 1;

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static size_t
parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);

	switch (*end) {
	case 'k': case 'K': v *= 1024; break;
	case 'm': case 'M': v *= 1024 * 1024; break;
	case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
	}
	return (size_t)v;
}

/* The in-process handler: one UFFDIO_COPY of a whole chunk per fault. */
static void *
handler(void *arg)
{
	struct uffd_msg msgs[64];

	while (!stop) {
		struct pollfd p = { .fd = uffd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 100) <= 0)
			continue;
		n = read(uffd, msgs, sizeof msgs);
		for (ssize_t i = 0; i < n / (ssize_t)sizeof msgs[0]; i++) {
			uint64_t a = base + (msgs[i].arg.pagefault.address -
			    base) / chunk * chunk;
			struct uffdio_copy cp = { .dst = a,
				.src = (uint64_t)(uintptr_t)src, .len = chunk,
				.mode = UFFDIO_COPY_MODE_WP };

			if (msgs[i].event != UFFD_EVENT_PAGEFAULT)
				continue;
			if (msgs[i].arg.pagefault.flags &
			    UFFD_PAGEFAULT_FLAG_WP) {
				struct uffdio_writeprotect w = {
					.range = { a, chunk }, .mode = 0 };

				ioctl(uffd, UFFDIO_WRITEPROTECT, &w);
				continue;
			}
			if (ioctl(uffd, UFFDIO_COPY, &cp) < 0 &&
			    errno != EEXIST) {
				struct uffdio_range r = { a, chunk };

				ioctl(uffd, UFFDIO_WAKE, &r);
			}
		}
	}
	return NULL;
}

/* Maps size bytes served by the in-process handler's nthreads threads. */
static uint8_t *
ceiling_map(size_t size, pthread_t *thr)
{
	struct uffdio_api api = { .api = UFFD_API,
		.features = UFFD_FEATURE_PAGEFAULT_FLAG_WP |
		    UFFD_FEATURE_WP_HUGETLBFS_SHMEM };
	struct uffdio_register reg;
	int memfd = memfd_create("ceiling", MFD_CLOEXEC);
	uint8_t *p;

	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0) {
		int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);

		if (dev >= 0)
			uffd = ioctl(dev, _IO(0xAA, 0x00), O_CLOEXEC | O_NONBLOCK);
	}
	if (memfd < 0 || uffd < 0 || ioctl(uffd, UFFDIO_API, &api) < 0 ||
	    ftruncate(memfd, (off_t)size) < 0) {
		perror("faultbench: userfaultfd");
		exit(1);
	}
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (p == MAP_FAILED) {
		perror("faultbench: mmap");
		exit(1);
	}
	base = (uint64_t)(uintptr_t)p;
	reg.range.start = (uint64_t)(uintptr_t)p;
	reg.range.len = size;
	reg.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP;
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) < 0) {
		perror("faultbench: UFFDIO_REGISTER");
		exit(1);
	}
	src = aligned_alloc(PAGE, chunk);
	for (size_t i = 0; i < chunk; i++)
		src[i] = (uint8_t)i;
	for (unsigned i = 0; i < nthreads; i++)
		pthread_create(&thr[i], NULL, handler, NULL);
	return p;
}

/* Returns how many pages of [p, p + size) are resident (mincore). */
static size_t
resident_pages(uint8_t *p, size_t size)
{
	size_t n = size / PAGE, left = 0;
	unsigned char *v = malloc(n);

	if (v == NULL || mincore(p, size, v) < 0) {
		perror("faultbench: mincore");
		exit(1);
	}
	for (size_t i = 0; i < n; i++)
		left += v[i] & 1;
	free(v);
	return left;
}

/* One thread's share of the timed pass: every nthreads-th chunk. */
struct toucher {
	pthread_t t;
	unsigned id;
	uint8_t *p;
	const size_t *order;
	size_t nchunks;
	uint64_t *lat;
	size_t flush;
	uint64_t sum;
	int bad;
};

/* Touches the thread's chunks once each, timing each first touch. */
static void *
touch(void *arg)
{
	struct toucher *w = arg;

	for (size_t i = w->id; i < w->nchunks; i += nthreads) {
		size_t c = w->order[i];
		volatile uint64_t *q = (uint64_t *)(w->p + c * chunk);
		uint64_t a = now_ns();

		for (size_t off = 0; off < chunk / 8; off += PAGE / 8) {
			uint64_t v = q[off];

			if (w->flush > 0 && v != (c * chunk + off * 8) *
			    0x9e3779b97f4a7c15ull) {
				fprintf(stderr, "faultbench: wrong data at %zu\n",
				    c * chunk + off * 8);
				w->bad = 1;
				return NULL;
			}
			w->sum += v;
		}
		w->lat[i] = now_ns() - a;
	}
	return NULL;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	const char *mode = "malloc", *pattern = "seq";
	size_t size = 256u << 20, nchunks, *order;
	uint64_t *lat, t0, t1, sum = 0;
	bool check = false, advise_random = false;
	size_t flush = 0;
	pthread_t thr[64];
	struct toucher *w;
	uint8_t *p;
	int ch;

	while ((ch = getopt(argc, argv, "c:m:p:P:Rs:t:w")) != -1) {
		switch (ch) {
		case 'P': flush = parse_size(optarg); break;
		case 'c': chunk = parse_size(optarg); break;
		case 'm': mode = optarg; break;
		case 'p': pattern = optarg; break;
		case 's': size = parse_size(optarg); break;
		case 't': nthreads = (unsigned)atoi(optarg); break;
		case 'w': check = true; break;
		case 'R': advise_random = true; break;
		default:
			fprintf(stderr, "usage: faultbench [-m malloc|ceiling] "
			    "[-s size] [-c chunk] [-p seq|rand] [-t threads] "
			    "[-w] [-P flush] [-R]\n");
			return 2;
		}
	}
	if (nthreads < 1 || nthreads > 64) {
		fprintf(stderr, "faultbench: -t takes 1 to 64 threads\n");
		return 2;
	}
	size = (size + chunk - 1) / chunk * chunk;
	nchunks = size / chunk;
	if (strcmp(mode, "ceiling") == 0)
		p = ceiling_map(size, thr);
	else if (strcmp(mode, "malloc") == 0)
		p = malloc(size);
	else {
		fprintf(stderr, "faultbench: unknown mode %s\n", mode);
		return 2;
	}
	if (p == NULL) {
		perror("faultbench: allocation");
		return 1;
	}
	if (advise_random) {
		uintptr_t lo = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
		uintptr_t hi = ((uintptr_t)p + size) & ~(uintptr_t)4095;

		if (hi > lo && madvise((void *)lo, hi - lo, MADV_RANDOM) != 0) {
			perror("faultbench: madvise");
			return 1;
		}
	}
	order = malloc(nchunks * sizeof *order);
	lat = malloc(nchunks * sizeof *lat);
	for (size_t i = 0; i < nchunks; i++)
		order[i] = i;
	if (strcmp(pattern, "rand") == 0) {
		srandom(42);
		for (size_t i = nchunks - 1; i > 0; i--) {
			size_t j = (size_t)random() % (i + 1), t = order[i];

			order[i] = order[j];
			order[j] = t;
		}
	}
	if (flush > 0) {
		uint8_t *f = malloc(flush);

		if (f == NULL) {
			perror("faultbench: allocation");
			return 1;
		}
		for (size_t i = 0; i < size; i += PAGE)
			*(volatile uint64_t *)(p + i) = i * 0x9e3779b97f4a7c15ull;
		for (int pass = 0; pass < 16; pass++) {
			size_t left;

			for (size_t i = 0; i < flush; i += PAGE)
				sum += *(volatile uint64_t *)(f + i);
			if ((left = resident_pages(p, size)) == 0)
				break;
			if (pass == 15)
				fprintf(stderr, "faultbench: %zu pages still "
				    "resident after the flush\n", left);
		}
		free(f);
	}
	w = calloc(nthreads, sizeof *w);
	if (w == NULL) {
		perror("faultbench: allocation");
		return 1;
	}
	t0 = now_ns();
	for (unsigned i = 0; i < nthreads; i++) {
		w[i] = (struct toucher){ .id = i, .p = p, .order = order,
			.nchunks = nchunks, .lat = lat, .flush = flush };
		if (pthread_create(&w[i].t, NULL, touch, &w[i]) != 0) {
			perror("faultbench: pthread_create");
			return 1;
		}
	}
	for (unsigned i = 0; i < nthreads; i++) {
		pthread_join(w[i].t, NULL);
		sum += w[i].sum;
		if (w[i].bad)
			return 1;
	}
	t1 = now_ns();
	qsort(lat, nchunks, sizeof *lat, cmp_u64);
	printf("%s %s %zu %.3f %.3f %.0f %.1f %.1f %llu\n", mode, pattern,
	    size, (double)(t1 - t0) / 1e9, (double)size / (double)(t1 - t0),
	    (double)nchunks / ((double)(t1 - t0) / 1e9),
	    (double)lat[nchunks / 2] / 1e3,
	    (double)lat[nchunks * 99 / 100] / 1e3, (unsigned long long)sum);
	if (check) {
		for (size_t i = 0; i < size; i += PAGE)
			*(uint64_t *)(p + i) = i ^ 0x5a5a5a5a5a5a5a5aull;
		for (size_t i = 0; i < size; i += PAGE)
			if (*(uint64_t *)(p + i) != (i ^ 0x5a5a5a5a5a5a5a5aull)) {
				fprintf(stderr, "faultbench: wrong data at %zu\n",
				    i);
				return 1;
			}
	}
	stop = 1;
	if (strcmp(mode, "ceiling") == 0)
		for (unsigned i = 0; i < nthreads; i++)
			pthread_join(thr[i], NULL);
	return 0;
}
