/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famhold.c - allocates blocks with malloc() and says which are
 * fabric-attached memory, run under LD_PRELOAD=libfamshim.so (the quota
 * tests): for each SIZE in order it allocates, fills and checks a block and
 * prints "block N SIZE: fam" or "block N SIZE: libc"; with -w it then says
 * "holding PID" and keeps every block until SIGUSR1 (or SECONDS pass),
 * checks them all again and frees them.
 *
 * usage: famhold [-w SECONDS] SIZE...   (K, M, G suffixes)
 * Exits 0 when every block held its data, 1 on a wrong word or a NULL.
 */
#include "config.h"

#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "toolutil.h"

/* The word that belongs at word i of block b. */
static uint64_t
pat(size_t b, size_t i)
{
	uint64_t x = ((uint64_t)b << 40 ^ (i + 1)) * 0x9e3779b97f4a7c15ull;

	return x ^ (x >> 31);
}


/* Checks block b of n words; returns 0, or 1 after saying what is wrong. */
static int
check(uint64_t *p, size_t b, size_t n)
{
	for (size_t i = 0; i < n; i += 61)
		if (p[i] != pat(b, i)) {
			printf("FAIL - block %zu: word %zu is %#" PRIx64 ", not %#"
			    PRIx64 "\n", b, i, p[i], pat(b, i));
			return 1;
		}
	return 0;
}

int
main(int argc, char **argv)
{
	unsigned wait_s = 0;
	uint64_t **blocks;
	size_t *sizes, nb;
	sigset_t usr1;
	int c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "w:")) != -1) {
		if (c != 'w') {
			fprintf(stderr, "usage: famhold [-w SECONDS] SIZE...\n");
			return 2;
		}
		wait_s = (unsigned)atoi(optarg);
	}
	nb = (size_t)(argc - optind);
	blocks = calloc(nb + 1, sizeof *blocks);
	sizes = calloc(nb + 1, sizeof *sizes);
	if (nb == 0 || blocks == NULL || sizes == NULL) {
		fprintf(stderr, "usage: famhold [-w SECONDS] SIZE...\n");
		return 2;
	}
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);
	for (size_t b = 0; b < nb; b++) {
		size_t n;

		sizes[b] = tool_parse_size(argv[optind + (int)b]);
		if (sizes[b] < 8) {
			fprintf(stderr, "famhold: bad size %s\n",
			    argv[optind + (int)b]);
			return 2;
		}
		blocks[b] = malloc(sizes[b]);
		if (blocks[b] == NULL) {
			printf("FAIL - block %zu: malloc(%zu) returned NULL\n",
			    b, sizes[b]);
			return 1;
		}
		n = sizes[b] / 8;
		for (size_t i = 0; i < n; i += 61)
			blocks[b][i] = pat(b, i);
		if (check(blocks[b], b, n) != 0)
			return 1;
		printf("block %zu %zu: %s\n", b, sizes[b],
		    tool_is_fam(blocks[b]) ? "fam" : "libc");
	}
	if (wait_s > 0) {
		struct timespec ts = { .tv_sec = wait_s };

		printf("holding %d\n", (int)getpid());
		(void)sigtimedwait(&usr1, NULL, &ts);
	}
	for (size_t b = 0; b < nb; b++) {
		if (check(blocks[b], b, sizes[b] / 8) != 0)
			return 1;
		free(blocks[b]);
	}
	printf("ok - %zu blocks held their data\n", nb);
	free(blocks);
	free(sizes);
	return 0;
}
