/* SPDX-License-Identifier: Apache-2.0 */
/*
 * evictbench.c - the kernel's share of a chunk's trip through the host
 * buffer, without a network: bring a 64 KiB chunk into an arena (a memfd
 * mapped twice, famd's mapping and the "program's", registered on a
 * userfaultfd as famd registers it) and later evict it, the way famd
 * does, for each way of installing and of evicting.
 *
 *   evictbench [-s ARENA] [-b BUFFER] [-c CHUNK] [-B BATCH] [-r ROUNDS]
 *
 * install (the data comes from a source buffer, as a socket's would):
 *   copy      copied into a staging buffer, then UFFDIO_COPY (install = copy)
 *   continue  MADV_POPULATE_WRITE of famd's mapping of the chunk, copied
 *             there, then UFFDIO_CONTINUE write-protected (install = continue)
 *   cont-nopop  as continue, the pages allocated by the copy's page faults
 * evict (BUFFER bytes stay resident; the chunk BUFFER behind goes):
 *   punch     fallocate(PUNCH_HOLE) of one chunk
 *   remove    madvise(MADV_REMOVE) of famd's mapping of one chunk
 *   batch     fallocate(PUNCH_HOLE) of BATCH adjacent chunks at once
 * Prints, per pair, the microseconds per chunk (install, evict, both) and
 * the CPU seconds (user + system) per GB moved, median of ROUNDS passes
 * over the arena, pairs interleaved.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef UFFDIO_CONTINUE_MODE_WP
#define UFFDIO_CONTINUE_MODE_WP ((__u64)1 << 1)
#endif

enum { IN_COPY, IN_CONT, IN_CONT_NOPOP, NIN };
enum { EV_PUNCH, EV_REMOVE, EV_BATCH, NEV };
static const char *const in_names[] = { "copy", "continue", "cont-nopop" };
static const char *const ev_names[] = { "punch", "remove", "batch" };

static size_t arena = 256u << 20, buffer = 64u << 20, chunk = 64u << 10;
static unsigned batch = 16, rounds = 5;
static int memfd, uffd;
static uint8_t *local, *prog, *src, *staging;

/* Dies with a message. */
static void
die(const char *what)
{
	perror(what);
	exit(1);
}

/* Returns a monotonic time in seconds. */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Returns this process's CPU seconds so far. */
static double
cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	    ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* Brings chunk i in with install mode m. */
static void
install(int m, size_t i)
{
	size_t off = i * chunk;

	if (m == IN_COPY) {
		struct uffdio_copy cp = {
			.dst = (uint64_t)(uintptr_t)(prog + off),
			.src = (uint64_t)(uintptr_t)staging,
			.len = chunk, .mode = UFFDIO_COPY_MODE_WP,
		};

		memcpy(staging, src, chunk);
		if (ioctl(uffd, UFFDIO_COPY, &cp) < 0)
			die("UFFDIO_COPY");
		return;
	}
	if (m == IN_CONT && madvise(local + off, chunk,
	    MADV_POPULATE_WRITE) < 0)
		die("MADV_POPULATE_WRITE");
	memcpy(local + off, src, chunk);
	struct uffdio_continue c = {
		.range = { .start = (uint64_t)(uintptr_t)(prog + off),
		    .len = chunk },
		.mode = UFFDIO_CONTINUE_MODE_WP,
	};
	if (ioctl(uffd, UFFDIO_CONTINUE, &c) < 0)
		die("UFFDIO_CONTINUE");
}

/* Evicts n chunks from chunk i with evict mode e. */
static void
evict(int e, size_t i, size_t n)
{
	if (e == EV_REMOVE) {
		if (madvise(local + i * chunk, n * chunk, MADV_REMOVE) < 0)
			die("MADV_REMOVE");
		return;
	}
	if (fallocate(memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	    (off_t)(i * chunk), (off_t)(n * chunk)) < 0)
		die("fallocate");
}

/* One pass over the arena; adds seconds spent installing and evicting. */
static void
pass(int m, int e, double *tin, double *tev)
{
	size_t n = arena / chunk, keep = buffer / chunk, b = 0;
	double t;

	for (size_t i = 0; i < n + keep; i++) {
		if (i < n) {
			t = now();
			install(m, i);
			*tin += now() - t;
		}
		if (i < keep)
			continue;
		t = now();
		if (e != EV_BATCH)
			evict(e, i - keep, 1);
		else if (++b == batch || i + 1 == n + keep) {
			evict(e, i - keep + 1 - b, b);
			b = 0;
		}
		*tev += now() - t;
	}
}

/* Sorts doubles. */
static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Sets up the arena, runs every pair ROUNDS times interleaved, prints. */
int
main(int argc, char **argv)
{
	struct uffdio_api api = { .api = UFFD_API,
	    .features = UFFD_FEATURE_MINOR_SHMEM |
	    UFFD_FEATURE_WP_HUGETLBFS_SHMEM };
	double in[NIN][NEV][64], ev[NIN][NEV][64], cp[NIN][NEV][64];
	int o;

	while ((o = getopt(argc, argv, "b:B:c:r:s:")) != -1) {
		switch (o) {
		case 'b': buffer = strtoull(optarg, NULL, 0) << 20; break;
		case 'B': batch = (unsigned)atoi(optarg); break;
		case 'c': chunk = strtoull(optarg, NULL, 0) << 10; break;
		case 'r': rounds = (unsigned)atoi(optarg); break;
		case 's': arena = strtoull(optarg, NULL, 0) << 20; break;
		default:
			fprintf(stderr, "usage: evictbench [-s ARENA_MiB] "
			    "[-b BUFFER_MiB] [-c CHUNK_KiB] [-B BATCH] "
			    "[-r ROUNDS]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > 64 || batch < 1 || buffer >= arena)
		die("bad arguments");
	memfd = memfd_create("evictbench", MFD_CLOEXEC);
	if (memfd < 0 || ftruncate(memfd, (off_t)arena) < 0)
		die("memfd");
	local = mmap(NULL, arena, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	prog = mmap(NULL, arena, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	src = aligned_alloc(4096, chunk);
	staging = aligned_alloc(4096, chunk);
	if (local == MAP_FAILED || prog == MAP_FAILED || !src || !staging)
		die("mmap");
	memset(src, 0x5a, chunk);
	memset(staging, 0, chunk);
	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) < 0)
		die("userfaultfd");
	struct uffdio_register reg = {
		.range = { .start = (uint64_t)(uintptr_t)prog, .len = arena },
		.mode = UFFDIO_REGISTER_MODE_MISSING |
		    UFFDIO_REGISTER_MODE_MINOR | UFFDIO_REGISTER_MODE_WP,
	};
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
		die("UFFDIO_REGISTER");
	for (unsigned r = 0; r < rounds; r++)
		for (int m = 0; m < NIN; m++)
			for (int e = 0; e < NEV; e++) {
				double tin = 0, tev = 0, c = cpu();

				pass(m, e, &tin, &tev);
				c = cpu() - c;
				evict(EV_PUNCH, 0, arena / chunk);
				in[m][e][r] = tin * 1e6 / (arena / chunk);
				ev[m][e][r] = tev * 1e6 / (arena / chunk);
				cp[m][e][r] = c / (arena / 1e9);
			}
	printf("evictbench: arena %zu MiB, buffer %zu MiB, chunk %zu KiB, "
	    "batch %u, median of %u\n", arena >> 20, buffer >> 20,
	    chunk >> 10, batch, rounds);
	printf("%-11s %-7s %12s %12s %12s %10s\n", "install", "evict",
	    "install us", "evict us", "chunk us", "CPU s/GB");
	for (int m = 0; m < NIN; m++)
		for (int e = 0; e < NEV; e++) {
			qsort(in[m][e], rounds, sizeof(double), cmp);
			qsort(ev[m][e], rounds, sizeof(double), cmp);
			qsort(cp[m][e], rounds, sizeof(double), cmp);
			printf("%-11s %-7s %12.2f %12.2f %12.2f %10.3f\n",
			    in_names[m], ev_names[e], in[m][e][rounds / 2],
			    ev[m][e][rounds / 2],
			    in[m][e][rounds / 2] + ev[m][e][rounds / 2],
			    cp[m][e][rounds / 2]);
		}
	return 0;
}
