/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fammap.c - checks that the mapping calls keep the kernel's meaning on
 * large blocks: run alone (the kernel's own memory) it must pass as it
 * does under LD_PRELOAD=libfamshim.so, where the blocks are
 * fabric-attached memory served by a host famd through a buffer smaller
 * than they are. Every byte read back is compared with what was written
 * or with zero; the first wrong one fails the run.
 *
 * usage: fammap [-f] [-s SIZE] [TEST...]
 *   -f        expect fabric-attached memory: blocks from malloc() and from
 *             mmap(MAP_PRIVATE | MAP_ANONYMOUS) must be in a mapping
 *             registered with userfaultfd
 *   -s SIZE   bytes of each block (K, M, G suffixes; default 64M)
 * TESTS (default: all, in this order):
 *   discard   madvise DONTNEED, DONTNEED_LOCKED, FREE and REMOVE on a
 *             range off chunk boundaries: it reads back as zeros, the rest
 *             keeps its data, and it can be written again
 *   hints     every other advice, and mprotect of part of the block: the
 *             data stays
 *   mlock     mlock and munlock of part of a block, msync of another
 *   mmap      a large anonymous mapping: zero, written and verified
 *   munmap    parts of a mapping unmapped: a touch there is SIGSEGV, the
 *             rest keeps its data; mapped again with MAP_FIXED: zeros
 *   reserve   a PROT_NONE, MAP_NORESERVE reservation committed with
 *             mprotect and with MAP_FIXED, uncommitted with MAP_FIXED
 *             PROT_NONE (then zeros); MAP_FIXED_NOREPLACE refused over a
 *             mapped part
 *   bigreserve a MAP_NORESERVE reservation 16 times SIZE, windows of SIZE
 *             committed, written, verified and uncommitted in turn (at
 *             most two at once): run against a memory node whose capacity
 *             is a fraction of the reservation
 *   mremap    grown (moving), shrunk in place; the data stays
 *   fixedfile a file mapped with MAP_FIXED over the middle of a mapping
 *   forkadvice DONTFORK and WIPEONFORK on parts of a mapping and of a
 *             malloc'd block: in a forked child the first is gone
 *             (SIGSEGV), the second reads as zeros, the rest is the
 *             parent's; the parent keeps everything; DOFORK and
 *             KEEPONFORK take the advice back
 *   lastthread a forked child whose only thread ends with pthread_exit()
 *             ends (status 0) while it holds fabric-attached memory
 *   closefds  every descriptor from 3 up closed, as a child about to exec
 *             does, and as a daemon does: in forked children that then
 *             run /bin/true, in ones that exit, and in this process; the
 *             blocks keep their data, and later ones still work
 * Prints "ok - what" per test; exits 1 at the first wrong byte.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "toolutil.h"

#define PAGE ((size_t)4096)
#define MIB  ((size_t)1 << 20)

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif

static size_t opt_size = 64 * MIB;
static bool opt_fam;
static sigjmp_buf segv_jump;

/* x rounded down to a page. */
static inline size_t
pgdown(size_t x)
{
	return x & ~(PAGE - 1);
}

/* Writes the pattern over bytes [from, to) of p (multiples of 8). */
static void
fill(void *p, size_t from, size_t to, uint64_t seed)
{
	uint64_t *w = p;

	for (size_t i = from / 8; i < to / 8; i++)
		w[i] = tool_pat(i * 8, seed);
}

/* Fails at the first word of bytes [from, to) of p off the pattern. */
static void
check(const char *test, const void *p, size_t from, size_t to, uint64_t seed)
{
	const uint64_t *w = p;

	for (size_t i = from / 8; i < to / 8; i++)
		if (w[i] != tool_pat(i * 8, seed))
			FAIL("%s: wrong word at offset %zu: expected %#" PRIx64
			    ", read %#" PRIx64, test, i * 8, tool_pat(i * 8, seed),
			    w[i]);
}

/* Fails at the first non-zero word of bytes [from, to) of p. */
static void
check_zero(const char *test, const void *p, size_t from, size_t to)
{
	const uint64_t *w = p;

	for (size_t i = from / 8; i < to / 8; i++)
		if (w[i] != 0)
			FAIL("%s: offset %zu should be zero, read %#" PRIx64,
			    test, i * 8, w[i]);
}

/* Checks, under -f, that p is fabric-attached memory. */
static void
check_kind(const char *test, const void *p)
{
	if (opt_fam && !tool_is_fam(p))
		FAIL("%s: %p is not fabric-attached memory", test, p);
}

/* A page-aligned block of opt_size bytes from malloc. */
static uint8_t *
block(const char *test, uint8_t **base)
{
	uint8_t *p = malloc(opt_size + PAGE);

	if (p == NULL)
		FAIL("%s: malloc: %s", test, strerror(errno));
	*base = p;
	p = (uint8_t *)(((uintptr_t)p + PAGE - 1) & ~(uintptr_t)(PAGE - 1));
	check_kind(test, p);
	return p;
}

/* A private anonymous mapping of len bytes with protection prot. */
static uint8_t *
map(const char *test, size_t len, int prot, int extra)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | extra,
	    -1, 0);

	if (p == MAP_FAILED)
		FAIL("%s: mmap of %zu bytes: %s", test, len, strerror(errno));
	return p;
}

/* SIGSEGV: back to the probe. */
static void
on_segv(int sig)
{
	(void)sig;
	siglongjmp(segv_jump, 1);
}

/* Tells whether reading the byte at p raises SIGSEGV. */
static bool
faults(const volatile uint8_t *p)
{
	struct sigaction sa = { .sa_handler = on_segv }, old;
	bool hit = false;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, &old);
	if (sigsetjmp(segv_jump, 1) == 0)
		(void)*p;
	else
		hit = true;
	sigaction(SIGSEGV, &old, NULL);
	return hit;
}

/* ---- tests ------------------------------------------------------------ */

/* The discarding advice: zeros there, the data elsewhere. */
static void
test_discard(void)
{
	static const struct { int advice; const char *name; } adv[] = {
		{ MADV_DONTNEED, "DONTNEED" },
		{ MADV_DONTNEED_LOCKED, "DONTNEED_LOCKED" },
		{ MADV_FREE, "FREE" },
		{ MADV_REMOVE, "REMOVE" },
	};
	uint8_t *base, *p = block("discard", &base);
	size_t n = opt_size;

	for (unsigned i = 0; i < sizeof adv / sizeof adv[0]; i++) {
		/* Off chunk boundaries, a third of the block. */
		size_t lo = pgdown(n / 3) + 5 * PAGE;
		size_t hi = pgdown(2 * n / 3) + 3 * PAGE;
		uint64_t seed = 100 + i;
		int rc;

		fill(p, 0, n, seed);
		rc = madvise(p + lo, hi - lo, adv[i].advice);
		if (rc != 0 && adv[i].advice == MADV_REMOVE && !opt_fam &&
		    errno == EINVAL) {
			/* The kernel removes on shared mappings only. */
			continue;
		}
		if (rc != 0 && adv[i].advice == MADV_DONTNEED_LOCKED &&
		    errno == EINVAL)
			continue; /* before Linux 5.18 */
		if (rc != 0)
			FAIL("discard: madvise %s: %s", adv[i].name,
			    strerror(errno));
		if (adv[i].advice != MADV_FREE)
			check_zero("discard", p, lo, hi);
		check(adv[i].name, p, 0, lo, seed);
		check(adv[i].name, p, hi, n, seed);
		fill(p, lo, hi, seed + 50);
		check(adv[i].name, p, lo, hi, seed + 50);
		check(adv[i].name, p, 0, lo, seed);
	}
	fill(p, 0, n, 7);
	if (posix_madvise(p, n / 2, POSIX_MADV_DONTNEED) != 0)
		FAIL("discard: posix_madvise DONTNEED failed");
	check("posix_madvise DONTNEED", p, 0, n, 7);
	free(base);
	printf("ok - discard: DONTNEED, DONTNEED_LOCKED, FREE, REMOVE read "
	    "back as zeros; the rest of %zu MiB kept\n", n / MIB);
}

/* The other advice and mprotect: the data stays. */
static void
test_hints(void)
{
	static const struct { int advice; const char *name; } adv[] = {
		{ MADV_NORMAL, "NORMAL" }, { MADV_RANDOM, "RANDOM" },
		{ MADV_SEQUENTIAL, "SEQUENTIAL" }, { MADV_WILLNEED, "WILLNEED" },
		{ MADV_HUGEPAGE, "HUGEPAGE" },
		{ MADV_NOHUGEPAGE, "NOHUGEPAGE" }, { MADV_COLD, "COLD" },
		{ MADV_PAGEOUT, "PAGEOUT" }, { MADV_DONTFORK, "DONTFORK" },
		{ MADV_DOFORK, "DOFORK" }, { MADV_WIPEONFORK, "WIPEONFORK" },
		{ MADV_KEEPONFORK, "KEEPONFORK" }, { MADV_DONTDUMP, "DONTDUMP" },
		{ MADV_DODUMP, "DODUMP" },
		{ MADV_POPULATE_READ, "POPULATE_READ" },
		{ MADV_POPULATE_WRITE, "POPULATE_WRITE" },
	};
	uint8_t *base, *p = block("hints", &base);
	size_t n = opt_size, lo = pgdown(n / 4) + 3 * PAGE;
	size_t hi = lo + MIB + 7 * PAGE;

	fill(p, 0, n, 21);
	for (unsigned i = 0; i < sizeof adv / sizeof adv[0]; i++) {
		if (madvise(p + lo + i * PAGE, hi - lo, adv[i].advice) != 0)
			FAIL("hints: madvise %s: %s", adv[i].name,
			    strerror(errno));
		check(adv[i].name, p, 0, n, 21);
	}
	if (mprotect(p + lo, 9 * PAGE, PROT_READ) != 0)
		FAIL("hints: mprotect read-only: %s", strerror(errno));
	check("mprotect read-only", p, 0, n, 21);
	if (mprotect(p + lo, 9 * PAGE, PROT_READ | PROT_WRITE) != 0)
		FAIL("hints: mprotect read-write: %s", strerror(errno));
	fill(p, 0, n, 22);
	check("after the hints", p, 0, n, 22);
	free(base);
	printf("ok - hints: 16 kinds of advice and mprotect on part of %zu "
	    "MiB, data kept\n", n / MIB);
}

/* mlock, munlock and msync of parts of a block. */
static void
test_mlock(void)
{
	uint8_t *base, *p = block("mlock", &base);
	size_t n = opt_size;

	fill(p, 0, n, 31);
	if (mlock(p + n / 2, MIB) != 0)
		FAIL("mlock: mlock: %s", strerror(errno));
	check("mlock", p, 0, n, 31);
	fill(p, n / 2, n / 2 + MIB, 32);
	if (munlock(p + n / 2, MIB) != 0)
		FAIL("mlock: munlock: %s", strerror(errno));
	if (msync(p + PAGE, 3 * MIB, MS_SYNC) != 0)
		FAIL("mlock: msync: %s", strerror(errno));
	check("mlock (low half)", p, 0, n / 2, 31);
	check("mlock (locked part)", p, n / 2, n / 2 + MIB, 32);
	check("mlock (high half)", p, n / 2 + MIB, n, 31);
	free(base);
	printf("ok - mlock: mlock, munlock and msync of parts of %zu MiB\n",
	    n / MIB);
}

/* A large anonymous mapping. */
static void
test_mmap(void)
{
	size_t n = opt_size;
	uint8_t *p = map("mmap", n, PROT_READ | PROT_WRITE, 0);

	check_kind("mmap", p);
	check_zero("mmap (fresh)", p, 0, n);
	fill(p, 0, n, 41);
	check("mmap", p, 0, n, 41);
	if (munmap(p, n) != 0)
		FAIL("mmap: munmap: %s", strerror(errno));
	p = map("mmap", n + 12345, PROT_READ | PROT_WRITE, 0);
	check_zero("mmap (again)", p, 0, n);
	if (munmap(p, n + 12345) != 0)
		FAIL("mmap: munmap: %s", strerror(errno));
	printf("ok - mmap: %zu MiB anonymous, zero, written and verified\n",
	    n / MIB);
}

/* Parts of a mapping unmapped, then mapped again. */
static void
test_munmap(void)
{
	size_t n = opt_size, lo = pgdown(n / 3) + 5 * PAGE;
	size_t hi = pgdown(n / 2) + 3 * PAGE;
	uint8_t *p = map("munmap", n, PROT_READ | PROT_WRITE, 0);

	fill(p, 0, n, 51);
	if (munmap(p + lo, hi - lo) != 0)
		FAIL("munmap: middle: %s", strerror(errno));
	if (!faults(p + lo) || !faults(p + hi - 1))
		FAIL("munmap: the unmapped middle can be read");
	check("munmap (head)", p, 0, lo, 51);
	check("munmap (tail)", p, hi, n, 51);
	if (mmap(p + lo, hi - lo, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_FIXED, -1, 0) != p + lo)
		FAIL("munmap: mapping the middle again: %s", strerror(errno));
	check_zero("munmap (mapped again)", p, lo, hi);
	fill(p, lo, hi, 52);
	if (munmap(p, PAGE * 3) != 0 || munmap(p + n - 2 * PAGE, 2 * PAGE))
		FAIL("munmap: the ends: %s", strerror(errno));
	if (!faults(p) || !faults(p + n - 1))
		FAIL("munmap: the unmapped ends can be read");
	check("munmap (middle)", p, lo, hi, 52);
	check("munmap (rest)", p, 3 * PAGE, lo, 51);
	if (munmap(p, n) != 0)
		FAIL("munmap: all: %s", strerror(errno));
	printf("ok - munmap: middle and ends of %zu MiB unmapped (SIGSEGV "
	    "there), mapped again as zeros, the rest kept\n", n / MIB);
}

/* A reservation committed and uncommitted the ways runtimes do. */
static void
test_reserve(void)
{
	size_t n = opt_size, q = pgdown(n / 4);
	uint8_t *p = map("reserve", n, PROT_NONE, MAP_NORESERVE);

	if (!faults(p))
		FAIL("reserve: a PROT_NONE reservation can be read");
	if (mprotect(p, q, PROT_READ | PROT_WRITE) != 0)
		FAIL("reserve: commit with mprotect: %s", strerror(errno));
	check_zero("reserve (committed)", p, 0, q);
	fill(p, 0, q, 61);
	if (mmap(p + q, q, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_FIXED, -1, 0) != p + q)
		FAIL("reserve: commit with MAP_FIXED: %s", strerror(errno));
	check_zero("reserve (committed with MAP_FIXED)", p, q, 2 * q);
	fill(p, q, 2 * q, 62);
	if (mmap(p + PAGE, 2 * PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
	    MAP_FIXED_NOREPLACE, -1, 0) != MAP_FAILED || errno != EEXIST)
		FAIL("reserve: MAP_FIXED_NOREPLACE over a mapping was not "
		    "refused with EEXIST");
	check("reserve (first quarter)", p, 0, q, 61);
	/* Uncommit the first quarter, as a heap shrinks. */
	if (mmap(p, q, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED |
	    MAP_NORESERVE, -1, 0) != p)
		FAIL("reserve: uncommit: %s", strerror(errno));
	if (!faults(p + q / 2))
		FAIL("reserve: an uncommitted page can be read");
	check("reserve (second quarter)", p, q, 2 * q, 62);
	if (mprotect(p, q, PROT_READ | PROT_WRITE) != 0)
		FAIL("reserve: commit again: %s", strerror(errno));
	check_zero("reserve (committed again)", p, 0, q);
	if (munmap(p, n) != 0)
		FAIL("reserve: munmap: %s", strerror(errno));
	printf("ok - reserve: %zu MiB PROT_NONE reservation committed, "
	    "uncommitted, committed again\n", n / MIB);
}

/* A reservation far larger than what is ever committed at once. */
static void
test_bigreserve(void)
{
	size_t n = opt_size, total = 16 * n;
	static const unsigned win[] = { 3, 11, 7, 14 };
	uint8_t *p = map("bigreserve", total, PROT_NONE, MAP_NORESERVE);

	check_kind("bigreserve", p);
	for (unsigned i = 0; i < sizeof win / sizeof win[0]; i++) {
		uint8_t *w = p + win[i] * n;

		if (mprotect(w, n, PROT_READ | PROT_WRITE) != 0)
			FAIL("bigreserve: commit: %s", strerror(errno));
		check_zero("bigreserve (committed)", w, 0, n);
		fill(w, 0, n, 80 + i);
		check("bigreserve", w, 0, n, 80 + i);
		if (i > 0)
			check("bigreserve (the window before)",
			    p + win[i - 1] * n, 0, n, 80 + i - 1);
		if (i == 0)
			continue;
		/* Uncommit the window before, as a heap shrinks. */
		if (mmap(p + win[i - 1] * n, n, PROT_NONE, MAP_PRIVATE |
		    MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) !=
		    p + win[i - 1] * n)
			FAIL("bigreserve: uncommit: %s", strerror(errno));
	}
	if (munmap(p, total) != 0)
		FAIL("bigreserve: munmap: %s", strerror(errno));
	printf("ok - bigreserve: %zu MiB reserved, four windows of %zu MiB "
	    "committed in turn\n", total / MIB, n / MIB);
}

/* mremap: grown by moving, shrunk in place. */
static void
test_mremap(void)
{
	size_t n = pgdown(opt_size / 2);
	uint8_t *p = map("mremap", n, PROT_READ | PROT_WRITE, 0), *q;

	fill(p, 0, n, 71);
	q = mremap(p, n, 2 * n, MREMAP_MAYMOVE);
	if (q == MAP_FAILED)
		FAIL("mremap: grow: %s", strerror(errno));
	check("mremap (grown)", q, 0, n, 71);
	check_zero("mremap (grown part)", q, n, 2 * n);
	fill(q, n, 2 * n, 71);
	p = mremap(q, 2 * n, pgdown(n / 2) + 3 * PAGE, 0);
	if (p != q)
		FAIL("mremap: shrink moved or failed: %s", strerror(errno));
	check("mremap (shrunk)", p, 0, pgdown(n / 2) + 3 * PAGE, 71);
	if (!faults(p + n))
		FAIL("mremap: the part shrunk off can be read");
	if (munmap(p, pgdown(n / 2) + 3 * PAGE) != 0)
		FAIL("mremap: munmap: %s", strerror(errno));
	printf("ok - mremap: %zu MiB grown to %zu MiB (moved), shrunk in "
	    "place\n", n / MIB, 2 * n / MIB);
}

/* A file mapped with MAP_FIXED over the middle of a mapping. */
static void
test_fixedfile(void)
{
	size_t n = opt_size, lo = pgdown(n / 2) + 16 * PAGE, len = 8 * PAGE;
	uint8_t *p = map("fixedfile", n, PROT_READ | PROT_WRITE, 0);
	uint8_t page[PAGE * 8];
	char path[] = "/tmp/fammap.XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0)
		FAIL("fixedfile: mkstemp: %s", strerror(errno));
	unlink(path);
	fill(page, 0, sizeof page, 81);
	if (write(fd, page, sizeof page) != (ssize_t)sizeof page)
		FAIL("fixedfile: write: %s", strerror(errno));
	fill(p, 0, n, 82);
	if (mmap(p + lo, len, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0) !=
	    p + lo)
		FAIL("fixedfile: mmap: %s", strerror(errno));
	close(fd);
	check("fixedfile (the file)", p + lo, 0, len, 81);
	check("fixedfile (before)", p, 0, lo, 82);
	check("fixedfile (after)", p, lo + len, n, 82);
	fill(p, 0, lo, 83);
	check("fixedfile (rewritten)", p, 0, lo, 83);
	if (munmap(p, n) != 0)
		FAIL("fixedfile: munmap: %s", strerror(errno));
	printf("ok - fixedfile: a file mapped over the middle of %zu MiB\n",
	    n / MIB);
}

/* Runs fn(p, arg) in a forked child; fails unless it exits 0. */
static void
in_child(const char *test, void (*fn)(uint8_t *, int), uint8_t *p, int arg)
{
	int st;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		FAIL("%s: fork: %s", test, strerror(errno));
	if (pid == 0) {
		fn(p, arg);
		fflush(stdout);
		_exit(0);
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0)
		FAIL("%s: the child failed (status %#x)", test, st);
}

/* The parts of a forkadvice block: [wipe), [gone), [kept) advised and
 * taken back, each off chunk boundaries. */
static void
fork_parts(size_t *w, size_t *d, size_t *k)
{
	size_t n = opt_size;

	w[0] = pgdown(n / 8) + 3 * PAGE;
	w[1] = pgdown(n / 4) + 5 * PAGE;
	d[0] = pgdown(n / 2) + 7 * PAGE;
	d[1] = pgdown(5 * n / 8) + 2 * PAGE;
	k[0] = pgdown(3 * n / 4) + PAGE;
	k[1] = pgdown(7 * n / 8) + 9 * PAGE;
}

/* Child of forkadvice: seed is the parent's; advised says whether the
 * WIPEONFORK and DONTFORK parts still hold. */
static void
fork_child_check(uint8_t *p, int advised)
{
	size_t w[2], d[2], k[2], n = opt_size;
	uint64_t seed = 41;

	fork_parts(w, d, k);
	if (!advised) {
		check("forkadvice, advice taken back", p, 0, n, seed);
		return;
	}
	check("forkadvice, before WIPEONFORK", p, 0, w[0], seed);
	check_zero("forkadvice, WIPEONFORK", p, w[0], w[1]);
	check("forkadvice, between", p, w[1], d[0], seed);
	if (!faults(p + d[0]) || !faults(p + d[1] - 1))
		FAIL("forkadvice: a DONTFORK range is readable in the child");
	check("forkadvice, after DONTFORK", p, d[1], n, seed);
	fill(p, w[1], d[0], seed + 1); /* private to the child */
	check("forkadvice, child's write", p, w[1], d[0], seed + 1);
}

/* DONTFORK, WIPEONFORK and their undoing, in forked children. */
static void
test_forkadvice(void)
{
	size_t w[2], d[2], k[2], n = opt_size;
	uint8_t *base, *blk[2];

	fork_parts(w, d, k);
	blk[0] = map("forkadvice", n, PROT_READ | PROT_WRITE, 0);
	check_kind("forkadvice", blk[0]);
	blk[1] = block("forkadvice", &base);
	for (int i = 0; i < 2; i++) {
		uint8_t *p = blk[i];

		fill(p, 0, n, 41);
		if (madvise(p + w[0], w[1] - w[0], MADV_WIPEONFORK) != 0 ||
		    madvise(p + d[0], d[1] - d[0], MADV_DONTFORK) != 0 ||
		    madvise(p + k[0], k[1] - k[0], MADV_WIPEONFORK) != 0 ||
		    madvise(p + k[0], k[1] - k[0], MADV_DONTFORK) != 0 ||
		    madvise(p + k[0], k[1] - k[0], MADV_KEEPONFORK) != 0 ||
		    madvise(p + k[0], k[1] - k[0], MADV_DOFORK) != 0)
			FAIL("forkadvice: madvise: %s", strerror(errno));
		in_child("forkadvice", fork_child_check, p, 1);
		check("forkadvice, the parent after the child", p, 0, n, 41);
		if (madvise(p + w[0], w[1] - w[0], MADV_KEEPONFORK) != 0 ||
		    madvise(p + d[0], d[1] - d[0], MADV_DOFORK) != 0)
			FAIL("forkadvice: taking advice back: %s",
			    strerror(errno));
		in_child("forkadvice", fork_child_check, p, 0);
	}
	if (munmap(blk[0], n) != 0)
		FAIL("forkadvice: munmap: %s", strerror(errno));
	free(base);
	printf("ok - forkadvice: DONTFORK gone and WIPEONFORK zero in the "
	    "child, the parent's %zu MiB kept, DOFORK and KEEPONFORK undo\n",
	    n / MIB);
}

/* A child's last thread ends with pthread_exit(): the child ends. */
static void
test_lastthread(void)
{
	size_t n = opt_size;
	uint8_t *base, *p = block("lastthread", &base);
	int st = 0;
	pid_t pid;

	fill(p, 0, n, 96);
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		FAIL("lastthread: fork: %s", strerror(errno));
	if (pid == 0) {
		check("lastthread, in the child", p, 0, n, 96);
		pthread_exit(NULL);
	}
	for (int i = 0; i < 200; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
		usleep(50000);
		if (i == 199) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			FAIL("lastthread: the child lives on 10 s after its "
			    "last thread called pthread_exit()");
		}
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		FAIL("lastthread: the child ended with status %#x", st);
	free(base);
	printf("ok - lastthread: a child whose last thread called "
	    "pthread_exit() ended with status 0\n");
}

/* Closes every descriptor from 3 up, as closefrom(3) does. */
static void
close_from_3(void)
{
#ifdef SYS_close_range
	if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0)
		return;
#endif
	for (int fd = 3; fd < 65536; fd++)
		close(fd);
}

/* Child of closefds: how says whether it then runs /bin/true. */
static void
closefds_child(uint8_t *p, int exec)
{
	size_t n = opt_size;
	uint8_t *q;

	close_from_3();
	check("closefds, in the child", p, 0, n, 91);
	fill(p, 0, n / 2, 92); /* private to the child */
	check("closefds, the child's write", p, 0, n / 2, 92);
	q = malloc(n);
	if (q == NULL)
		FAIL("closefds: malloc in the child: %s", strerror(errno));
	fill(q, 0, n, 93);
	check("closefds, a new block", q, 0, n, 93);
	free(q);
	if (exec) {
		execl("/bin/true", "true", (char *)NULL);
		FAIL("closefds: exec /bin/true: %s", strerror(errno));
	}
}

/* Descriptors closed under the blocks: in children, then here. */
static void
test_closefds(void)
{
	size_t n = opt_size;
	uint8_t *base, *p = block("closefds", &base), *q;

	fill(p, 0, n, 91);
	/*
	 * Whether a child closes its session socket before or after libfam's
	 * watchdog is polling it is a race: sixteen times each way.
	 */
	for (int i = 0; i < 16; i++) {
		in_child("closefds", closefds_child, p, 1);
		in_child("closefds", closefds_child, p, 0);
	}
	check("closefds, the parent after its children", p, 0, n, 91);
	fflush(stdout);
	close_from_3();
	check("closefds, after closing", p, 0, n, 91);
	fill(p, 0, n, 94);
	check("closefds, written after closing", p, 0, n, 94);
	q = malloc(n);
	if (q == NULL)
		FAIL("closefds: malloc after closing: %s", strerror(errno));
	fill(q, 0, n, 95);
	check("closefds, a new block after closing", q, 0, n, 95);
	free(q);
	free(base);
	printf("ok - closefds: descriptors closed in 32 children (16 "
	    "exec'd) and here; %zu MiB kept its data\n", n / MIB);
}

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
	{ "discard", test_discard },
	{ "hints", test_hints },
	{ "mlock", test_mlock },
	{ "mmap", test_mmap },
	{ "munmap", test_munmap },
	{ "reserve", test_reserve },
	{ "bigreserve", test_bigreserve },
	{ "mremap", test_mremap },
	{ "fixedfile", test_fixedfile },
	{ "forkadvice", test_forkadvice },
	{ "lastthread", test_lastthread },
	{ "closefds", test_closefds },
};

/* Runs the tests named (all by default). */
int
main(int argc, char **argv)
{
	int c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "fs:")) != -1) {
		switch (c) {
		case 'f':
			opt_fam = true;
			break;
		case 's':
			opt_size = tool_parse_size(optarg) & ~(PAGE - 1);
			break;
		default:
			fprintf(stderr, "usage: fammap [-f] [-s SIZE] "
			    "[TEST...]\n");
			return 2;
		}
	}
	if (opt_size < 16 * MIB)
		FAIL("-s: at least 16M");
	for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
		bool run = optind == argc;

		for (int j = optind; j < argc; j++)
			run |= strcmp(argv[j], tests[i].name) == 0;
		if (run)
			tests[i].fn();
	}
	return 0;
}
