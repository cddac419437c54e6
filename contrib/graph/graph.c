/* SPDX-License-Identifier: Apache-2.0 */
/*
 * graph.c - graph analytics over a CSR graph whose arrays come from plain
 * malloc(), so that under libfamshim.so they are fabric-attached memory and
 * the program knows nothing of famd. graph-fam, the same program linked
 * with libfamd-client, can instead map a graph preloaded on the memory
 * node (-F).
 *
 *   graph [-APX] [-s SCALE] [-e EDGEFACTOR] [-S SEED] [-f EDGEFILE |
 *         -c PREFIX | -F PREFIX] [-w EDGEFILE] [-W PREFIX] [-i ITERS] [-P]
 *         [-r ROOT] [-k SOURCES] [-K SAMPLES] [APP...]
 *
 * The graph is undirected: generated (2^SCALE vertices, EDGEFACTOR * 2^SCALE
 * Kronecker edges with Graph500's parameters), read from an edge file (-f)
 * or from a CSR pair PREFIX.off and PREFIX.adj (-c), or mapped from the
 * memory node with fam_alloc_file (-F, graph-fam only). -w and -W write it
 * out (contrib/graph/README.md describes the files).
 *
 * APPs: bfs (from ROOT, default the vertex of highest degree), pagerank
 * (ITERS power iterations), cc (connected components), bc (betweenness
 * centrality from SOURCES sources, Brandes), radii (eccentricity estimates
 * from SAMPLES <= 64 sources), all (the five), selftest (every kernel
 * against brute force on small graphs). Every result is checked, so a fast
 * wrong answer fails; -X spoils one result of each app before its check, to
 * show that the checks catch it. -A advises every vertex array a kernel
 * reads again static (fam_advise, when famd is there to hear it); -R
 * advises them random instead (no read-ahead, kept out of a dpu's dynamic
 * cache, which is then the edge data's alone). -P stops the
 * process (SIGSTOP) at the start and the end of each kernel, after a line
 * "pause start|end APP", for a harness to read counters and continue it.
 *
 * Prints one line per phase:
 *   build|load SECONDS n=N m=M bytes=B checksum=X
 *   APP SECONDS details... check=SECONDS ok|WRONG
 *   total SECONDS maxrss=KIB
 * and exits 1 when a check fails, 2 on bad usage or input.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "graph.h"

bool graph_corrupt;
bool graph_advise;
static bool pause_enabled; /* -P */

/*
 * With -P, prints "pause WHAT NAME" and stops the process (SIGSTOP) until
 * a harness continues it. Otherwise nothing.
 */
void
graph_pause(const char *what, const char *name)
{
	if (!pause_enabled)
		return;
	printf("pause %s %s\n", what, name);
	fflush(stdout);
	raise(SIGSTOP);
}

/*
 * libfamd-client's hint, there when the program runs under a libfamshim.so
 * or libfamd-client.so that has it; the program stays plain without it.
 */
extern int fam_advise(const void *ptr, int advice) __attribute__((weak));
#define GRAPH_ADVISE_STATIC 1 /* FAM_ADVISE_STATIC */
#define GRAPH_ADVISE_RANDOM 2 /* FAM_ADVISE_RANDOM */
static int graph_advice = GRAPH_ADVISE_STATIC;

/*
 * Advises p, a vertex array, static (-A: a dpu's static cache) or random
 * (-R) when asked to and famd hears.
 */
void
graph_advise_vertex(const void *p)
{
	if (graph_advise && fam_advise != NULL &&
	    fam_advise(p, graph_advice) < 0)
		fprintf(stderr, "graph: fam_advise: %m\n");
}

/* Prints the usage and returns 2. */
static int
usage(void)
{
	fprintf(stderr,
	    "usage: graph [-APRX] [-s scale] [-e edgefactor] [-S seed]\n"
	    "             [-f edgefile | -c prefix | -F prefix] [-w edgefile] "
	    "[-W prefix]\n"
	    "             [-i iters] [-r root] [-k sources] [-K samples] "
	    "[app...]\n"
	    "apps: bfs pagerank cc bc radii all selftest\n");
	return 2;
}

/* Parses an unsigned number within [lo, hi] into *out; false if not one. */
static bool
parse_num(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (s[0] == '-')
		return false;
	v = strtoull(s, &end, 0);
	if (*end != '\0' || end == s || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

int
main(int argc, char **argv)
{
	uint64_t scale = 18, ef = 16, iters = 10, seed = 1, sources = 4;
	uint64_t samples = 16, root = UINT64_MAX, v;
	const char *efile = NULL, *cprefix = NULL, *fprefix = NULL;
	const char *wedge = NULL, *wcsr = NULL;
	struct graph g;
	struct rusage ru;
	double t0 = graph_now(), t;
	bool ok = true;
	int ch;

	while ((ch = getopt(argc, argv, "Ac:e:f:F:i:k:K:PRr:s:S:w:W:X")) != -1) {
		switch (ch) {
		case 'A': graph_advise = true; break;
		case 'R':
			graph_advise = true;
			graph_advice = GRAPH_ADVISE_RANDOM;
			break;
		case 'P': pause_enabled = true; break;
		case 'X': graph_corrupt = true; break;
		case 'c': cprefix = optarg; break;
		case 'f': efile = optarg; break;
		case 'F': fprefix = optarg; break;
		case 'w': wedge = optarg; break;
		case 'W': wcsr = optarg; break;
		case 'e':
			if (!parse_num(optarg, 1, 1024, &ef))
				return usage();
			break;
		case 'i':
			if (!parse_num(optarg, 0, 1000000, &iters))
				return usage();
			break;
		case 'k':
			if (!parse_num(optarg, 1, 1 << 20, &sources))
				return usage();
			break;
		case 'K':
			if (!parse_num(optarg, 1, 64, &samples))
				return usage();
			break;
		case 'r':
			if (!parse_num(optarg, 0, UINT32_MAX - 1, &root))
				return usage();
			break;
		case 's':
			if (!parse_num(optarg, 1, 31, &scale))
				return usage();
			break;
		case 'S':
			if (!parse_num(optarg, 0, UINT64_MAX, &seed))
				return usage();
			break;
		default:
			return usage();
		}
	}
	if ((efile != NULL) + (cprefix != NULL) + (fprefix != NULL) > 1) {
		fprintf(stderr, "graph: -f, -c and -F each name the graph; "
		    "give one\n");
		return 2;
	}
	if (optind == argc && wedge == NULL && wcsr == NULL) {
		fprintf(stderr, "graph: nothing to do\n");
		return usage();
	}
	for (int i = optind; i < argc; i++) {
		static const char *const apps[] = { "bfs", "pagerank", "cc",
			"bc", "radii", "all", "selftest", NULL };
		bool known = false;

		for (int j = 0; apps[j] != NULL; j++)
			known |= strcmp(argv[i], apps[j]) == 0;
		if (!known) {
			fprintf(stderr, "graph: unknown app %s\n", argv[i]);
			return usage();
		}
	}
	if (optind + 1 == argc && strcmp(argv[optind], "selftest") == 0 &&
	    efile == NULL && cprefix == NULL && fprefix == NULL &&
	    wedge == NULL && wcsr == NULL)
		return graph_selftest() ? 0 : 1;

	t = graph_now();
	if (efile != NULL || cprefix != NULL || fprefix != NULL) {
		int rc = efile ? graph_read_edges(&g, efile)
		    : cprefix ? graph_read_csr(&g, cprefix)
		    : graph_map_csr_fam(&g, fprefix);

		if (rc < 0)
			return 2;
		printf("load");
	} else {
		uint64_t m = ef << scale;
		struct graph_edge *el = graph_xmalloc(m * sizeof *el);

		graph_kronecker(el, (unsigned)scale, (unsigned)ef, seed);
		if (graph_build(&g, (uint64_t)1 << scale, el, m) < 0)
			return 2;
		printf("build");
	}
	printf(" %.3f n=%" PRIu64 " m=%" PRIu64 " bytes=%" PRIu64
	    " checksum=%016" PRIx64 "\n", graph_now() - t, g.n, g.m,
	    (g.n + 1) * 8 + g.m * 4, graph_checksum(&g));
	fflush(stdout);
	if (wedge != NULL && graph_write_edges(&g, wedge) < 0)
		return 2;
	if (wcsr != NULL && graph_write_csr(&g, wcsr) < 0)
		return 2;
	graph_advise_vertex(g.off);
	if (root == UINT64_MAX)
		root = graph_max_degree_vertex(&g);
	if (root >= g.n) {
		fprintf(stderr, "graph: root %" PRIu64 " is not a vertex\n",
		    root);
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		const char *a = argv[i];
		bool all = strcmp(a, "all") == 0;

		if (all || strcmp(a, "bfs") == 0)
			ok &= graph_app_bfs(&g, (uint32_t)root);
		if (all || strcmp(a, "pagerank") == 0)
			ok &= graph_app_pagerank(&g, (unsigned)iters);
		if (all || strcmp(a, "cc") == 0)
			ok &= graph_app_cc(&g);
		if (all || strcmp(a, "bc") == 0)
			ok &= graph_app_bc(&g, (unsigned)sources, seed);
		if (all || strcmp(a, "radii") == 0)
			ok &= graph_app_radii(&g, (unsigned)samples, seed);
		if (strcmp(a, "selftest") == 0)
			ok &= graph_selftest();
	}
	graph_free(&g);
	getrusage(RUSAGE_SELF, &ru);
	v = (uint64_t)ru.ru_maxrss;
	printf("total %.3f maxrss=%" PRIu64 "\n", graph_now() - t0, v);
	return ok ? 0 : 1;
}
