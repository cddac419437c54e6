/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famred.c - a program of libfamd-client's (no shim) that asks for
 * redundancy block by block, fam_alloc_redundant(), for the end-to-end
 * tests: one block per MODE, then passes over them, each checking the
 * previous pass's pattern, writing a new one and checking it.
 *
 * usage: famred [-s SIZE] [-w] MODE...
 *   MODE     default (fam_alloc), none, replicate:N or ec:K+M
 *   -s SIZE  bytes of each block (K, M, G suffixes; default 24M)
 *   -w       says "ready" once the blocks are allocated, and waits for
 *            SIGUSR1 before the first write
 * Prints "block I MODE handle H" for each block (H from fam_stat), then
 * "pass N" after each pass. SIGUSR2, the first time: the blocks of mode
 * none are left alone from the next pass on ("plain left alone"); the
 * second time: each is read, a word per chunk, until one raises SIGBUS
 * ("plain I lost at O": its data on a memory node that died), and the
 * passes go on over the others. SIGUSR1 (after -w's): one more pass, then
 * "ok - passes: N" and exit 0. A wrong word: "FAIL - ...", exit 1.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "famd-client/famd-client.h"

#include "toolutil.h"

#define MAX_BLOCKS 8

struct block {
	const char *mode;
	unsigned red;
	uint64_t *p;
	bool plain;    /* mode none */
	bool skipped;  /* left alone (SIGUSR2) */
};

static struct block blocks[MAX_BLOCKS];
static unsigned nblocks;
static size_t opt_size = (size_t)24 << 20;
static volatile sig_atomic_t usr1, usr2;
static sigjmp_buf bus_jmp;

/* SIGUSR1, SIGUSR2: counted. */
static void
on_usr(int sig)
{
	if (sig == SIGUSR1)
		usr1++;
	else
		usr2++;
}

/* SIGBUS while probing a plain block: back to the probe. */
static void
on_bus(int sig)
{
	(void)sig;
	siglongjmp(bus_jmp, 1);
}

/* Returns the FAM_ALLOC_* of a mode's name; exits on a bad one. */
static unsigned
mode_parse(const char *m)
{
	unsigned n, k;
	char end;

	if (strcmp(m, "default") == 0)
		return FAM_ALLOC_DEFAULT;
	if (strcmp(m, "none") == 0)
		return FAM_ALLOC_NONE;
	if (sscanf(m, "replicate:%u%c", &n, &end) == 1)
		return FAM_ALLOC_REPLICATE(n);
	if (sscanf(m, "ec:%u+%u%c", &k, &n, &end) == 2)
		return FAM_ALLOC_EC(k, n);
	FAIL("mode %s: want default, none, replicate:N or ec:K+M", m);
}

/* Writes (or checks) block b's pattern of pass n. */
static void
block_pass(const struct block *b, unsigned i, unsigned n, bool check)
{
	size_t words = opt_size / sizeof(uint64_t);
	uint64_t seed = (uint64_t)n << 8 | i;

	for (size_t w = 0; w < words; w++) {
		uint64_t want = tool_pat(w * 8, seed);

		if (!check)
			b->p[w] = want;
		else if (b->p[w] != want)
			FAIL("block %u (%s), pass %u: word at %zu is %#" PRIx64
			    ", not %#" PRIx64, i, b->mode, n, w * 8, b->p[w],
			    want);
	}
}

/* Reads a word per 4 KiB of each plain block until one raises SIGBUS. */
static void
probe_plain(void)
{
	struct sigaction sa = { .sa_handler = on_bus };

	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_NODEFER;
	if (sigaction(SIGBUS, &sa, NULL) < 0)
		FAIL("sigaction: %s", strerror(errno));
	for (unsigned i = 0; i < nblocks; i++) {
		volatile uint64_t *p = blocks[i].p;
		volatile size_t off = 0;

		if (!blocks[i].plain)
			continue;
		if (sigsetjmp(bus_jmp, 1) != 0) {
			printf("plain %u lost at %zu\n", i, (size_t)off);
			fflush(stdout);
			continue;
		}
		for (off = 0; off < opt_size; off += 4096)
			(void)p[off / 8];
		FAIL("block %u (none): every chunk read after a node died", i);
	}
	signal(SIGBUS, SIG_DFL);
}

/* Parses the options, allocates the blocks, runs the passes. */
int
main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_usr };
	bool wait = false, left = false, probed = false;
	unsigned n = 0;
	int stop;
	int c;

	while ((c = getopt(argc, argv, "s:w")) != -1) {
		if (c == 's')
			opt_size = tool_parse_size(optarg);
		else if (c == 'w')
			wait = true;
		else
			FAIL("usage: famred [-s SIZE] [-w] MODE...");
	}
	if (optind == argc || argc - optind > MAX_BLOCKS)
		FAIL("usage: famred [-s SIZE] [-w] MODE... (1 to %d)",
		    MAX_BLOCKS);
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) < 0 ||
	    sigaction(SIGUSR2, &sa, NULL) < 0)
		FAIL("sigaction: %s", strerror(errno));
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (; optind < argc; optind++) {
		struct block *b = &blocks[nblocks];
		struct fam_stat st;

		b->mode = argv[optind];
		b->red = mode_parse(b->mode);
		b->plain = b->red == FAM_ALLOC_NONE;
		b->p = fam_alloc_redundant(opt_size, b->red);
		if (b->p == NULL)
			FAIL("fam_alloc_redundant(%zu, %s): %s", opt_size,
			    b->mode, strerror(errno));
		if (fam_stat(b->p, &st) < 0)
			FAIL("fam_stat: %s", strerror(errno));
		printf("block %u %s handle %" PRIu64 "\n", nblocks, b->mode,
		    st.handle);
		nblocks++;
	}
	stop = wait ? 2 : 1;
	if (wait) {
		printf("ready\n");
		while (usr1 == 0)
			pause();
	}
	for (bool last = false; !last; n++) {
		last = usr1 >= stop;
		if (usr2 >= 1 && !left) {
			for (unsigned i = 0; i < nblocks; i++)
				blocks[i].skipped = blocks[i].plain;
			left = true;
			printf("plain left alone\n");
		}
		if (usr2 >= 2 && !probed) {
			probe_plain();
			probed = true;
		}
		for (unsigned i = 0; i < nblocks; i++) {
			if (blocks[i].skipped)
				continue;
			if (n > 0)
				block_pass(&blocks[i], i, n - 1, true);
			block_pass(&blocks[i], i, n, false);
			block_pass(&blocks[i], i, n, true);
		}
		printf("pass %u\n", n);
	}
	printf("ok - passes: %u over %u blocks of %zu MiB, each verified "
	    "twice\n", n, nblocks, opt_size >> 20);
	return 0;
}
