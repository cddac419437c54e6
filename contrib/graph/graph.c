/*
 * graph.c - graph analytics over a CSR graph whose arrays come from plain
 * malloc(), so that under libfamshim.so they are fabric-attached memory and
 * the program knows nothing of famd.
 *
 *   graph [-AX] [-s SCALE] [-e EDGEFACTOR] [-S SEED] [-i ITERS] [-r ROOT] APP...
 *
 * The graph is a directed graph with 2^SCALE vertices and about
 * EDGEFACTOR * 2^SCALE edges whose targets follow the R-MAT (Kronecker)
 * distribution, generated in vertex order into CSR. APPs: bfs (breadth-first search: parents checked), pagerank
 * (ITERS power iterations: ranks must sum to 1). Every result is checked,
 * so a fast wrong answer fails (-X spoils one result of each app before its
 * check, to show that the checks catch it). -A advises the vertex arrays
 * read at random (PageRank's contributions, BFS's parents) as static
 * (fam_advise, when the program runs under libfamshim.so). Prints one line
 * per phase:
 *   phase seconds detail
 * and exits 1 when a check fails.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

static bool corrupt; /* -X: spoil one result, to show the checks catch it */
static bool advise;  /* -A: advise the vertex arrays read at random */

/*
 * libfam's hint, there when the program runs under libfamshim.so (or is
 * linked with libfam); the program stays plain without it.
 */
extern int fam_advise(const void *ptr, int advice) __attribute__((weak));
#define GRAPH_ADVISE_STATIC 1 /* FAM_ADVISE_STATIC */

/* Advises p static when asked to and famd is there to hear it. */
static void
advise_static(const void *p)
{
	if (advise && fam_advise != NULL && fam_advise(p, GRAPH_ADVISE_STATIC) < 0)
		fprintf(stderr, "graph: fam_advise: %m\n");
}

struct graph {
	uint64_t n, m;   /* vertices, edges */
	uint64_t *off;   /* n + 1 offsets into adj */
	uint32_t *adj;   /* neighbours */
};

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A small fast generator (splitmix64), one state per caller. */
static uint64_t
rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* One R-MAT edge with the Graph500 probabilities (a .57, b .19, c .19). */
static void
rmat_edge(uint64_t *s, unsigned scale, uint32_t *u, uint32_t *v)
{
	uint32_t x = 0, y = 0;
	uint64_t r = 0;

	for (unsigned i = 0; i < scale; i++) {
		uint32_t q;

		if (i % 4 == 0)
			r = rnd(s);
		q = (uint32_t)(r & 0xffff); /* 16 random bits per level */
		r >>= 16;
		x <<= 1;
		y <<= 1;
		if (q < 37355) /* .57 * 65536 */
			continue;
		if (q < 49807) /* + .19 */
			y |= 1;
		else if (q < 62259) /* + .19 */
			x |= 1;
		else {
			x |= 1;
			y |= 1;
		}
	}
	*u = x;
	*v = y;
}

static void *
xmalloc(size_t n)
{
	void *p = malloc(n);

	if (p == NULL) {
		perror("graph: malloc");
		exit(1);
	}
	return p;
}

/* Returns a well-mixed hash of (seed, a, b). */
static uint64_t
mix(uint64_t seed, uint64_t a, uint64_t b)
{
	uint64_t s = seed ^ (a * 0x9e3779b97f4a7c15ull) ^ (b << 32 | b);

	return rnd(&s);
}

/*
 * Generates the graph straight into CSR in vertex order, so that it is
 * written front to back like a graph read from a file: vertex u gets an
 * exponentially distributed number of edges (mean EDGEFACTOR) whose targets
 * follow the R-MAT distribution (a few hot vertices, many cold ones).
 */
static void
graph_build(struct graph *g, unsigned scale, unsigned ef, uint64_t seed)
{
	g->n = (uint64_t)1 << scale;
	g->off = xmalloc((g->n + 1) * sizeof *g->off);
	g->off[0] = 0;
	for (uint64_t u = 0; u < g->n; u++) {
		double x = (double)(mix(seed, u, 0) >> 11) / 9007199254740992.0;
		uint64_t d = (uint64_t)(-log(1.0 - x) * ef);

		if (d > (uint64_t)ef * 16)
			d = (uint64_t)ef * 16;
		g->off[u + 1] = g->off[u] + d;
	}
	g->m = g->off[g->n];
	g->adj = xmalloc(g->m * sizeof *g->adj);
	#pragma omp parallel for schedule(static, 4096)
	for (uint64_t u = 0; u < g->n; u++) {
		for (uint64_t e = g->off[u]; e < g->off[u + 1]; e++) {
			uint64_t st = mix(seed, u, e - g->off[u] + 1);
			uint32_t a, b;

			rmat_edge(&st, scale, &a, &b);
			g->adj[e] = a ^ (uint32_t)(u & 1); /* skewed target */
		}
	}
}

/*
 * Breadth-first search from root; checks the parent tree. Each level's
 * frontier is kept as a bitmap and walked in vertex order, as Ligra's dense
 * edge map does, so the edge lists are read front to back on every level.
 */
static bool
bfs(const struct graph *g, uint32_t root, uint64_t *reached)
{
	uint64_t words = (g->n + 63) / 64, count = 1, nf = 1;
	int64_t *parent = xmalloc(g->n * sizeof *parent);
	uint32_t *level = xmalloc(g->n * sizeof *level);
	uint64_t *front = xmalloc(words * sizeof *front);
	uint64_t *next = xmalloc(words * sizeof *next);
	bool ok = true;

	advise_static(parent);

	for (uint64_t i = 0; i < g->n; i++) {
		parent[i] = -1;
		level[i] = UINT32_MAX;
	}
	memset(front, 0, words * sizeof *front);
	parent[root] = root;
	level[root] = 0;
	front[root / 64] |= 1ull << (root % 64);
	for (uint32_t depth = 1; nf > 0; depth++) {
		uint64_t nn = 0;

		memset(next, 0, words * sizeof *next);
		#pragma omp parallel for schedule(dynamic, 16) reduction(+:nn)
		for (uint64_t w = 0; w < words; w++) {
			for (uint64_t bits = front[w]; bits != 0; bits &= bits - 1) {
				uint64_t u = w * 64 + (uint64_t)__builtin_ctzll(bits);

				for (uint64_t e = g->off[u]; e < g->off[u + 1]; e++) {
					uint32_t v = g->adj[e];
					int64_t expect = -1;

					if (__atomic_load_n(&parent[v],
					    __ATOMIC_RELAXED) >= 0)
						continue;
					if (__atomic_compare_exchange_n(&parent[v],
					    &expect, (int64_t)u, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
						level[v] = depth;
						__atomic_fetch_or(&next[v / 64],
						    1ull << (v % 64),
						    __ATOMIC_RELAXED);
						nn++;
					}
				}
			}
		}
		count += nn;
		memcpy(front, next, words * sizeof *front);
		nf = nn;
	}
	if (corrupt) {
		for (uint64_t v = 0; v < g->n; v++)
			if (parent[v] >= 0 && v != root) {
				parent[v] = (int64_t)((v + 1) % g->n);
				break;
			}
	}
	/*
	 * Check, in one pass over the edges in order (so that the check does
	 * not walk the graph at random): no edge leaves the reached set or
	 * skips a level, and every reached vertex but the root has an edge
	 * from its parent, which is one level up.
	 */
	uint8_t *found = xmalloc(g->n);

	memset(found, 0, g->n);
	for (uint64_t u = 0; u < g->n && ok; u++) {
		if (level[u] == UINT32_MAX)
			continue;
		for (uint64_t e = g->off[u]; e < g->off[u + 1]; e++) {
			uint32_t v = g->adj[e];

			if (level[v] == UINT32_MAX || level[v] > level[u] + 1)
				ok = false;
			if (parent[v] == (int64_t)u)
				found[v] = 1;
		}
	}
	for (uint64_t v = 0; v < g->n && ok; v++)
		if (parent[v] >= 0 && v != root &&
		    (!found[v] || level[parent[v]] + 1 != level[v]))
			ok = false;
	free(found);
	*reached = count;
	free(parent);
	free(front);
	free(next);
	free(level);
	return ok;
}

/*
 * PageRank by power iteration (damping .85), pulling along the edge lists
 * read as in-edges: ranks must sum to 1.
 */
static bool
pagerank(const struct graph *g, unsigned iters, double *sum_out)
{
	double *rank = xmalloc(g->n * sizeof *rank);
	double *next = xmalloc(g->n * sizeof *next);
	double *contrib = xmalloc(g->n * sizeof *contrib);
	uint32_t *outdeg = xmalloc(g->n * sizeof *outdeg);
	double sum = 0, base;

	advise_static(contrib);

	memset(outdeg, 0, g->n * sizeof *outdeg);
	#pragma omp parallel for schedule(static, 4096)
	for (uint64_t e = 0; e < g->m; e++)
		__atomic_fetch_add(&outdeg[g->adj[e]], 1, __ATOMIC_RELAXED);
	for (uint64_t i = 0; i < g->n; i++)
		rank[i] = 1.0 / (double)g->n;
	for (unsigned it = 0; it < iters; it++) {
		double dangling = 0;

		#pragma omp parallel for reduction(+:dangling)
		for (uint64_t u = 0; u < g->n; u++) {
			contrib[u] = outdeg[u] ? rank[u] / outdeg[u] : 0;
			if (outdeg[u] == 0)
				dangling += rank[u];
		}
		base = (0.15 + 0.85 * dangling) / (double)g->n;
		#pragma omp parallel for schedule(dynamic, 256)
		for (uint64_t v = 0; v < g->n; v++) {
			double s = 0;

			for (uint64_t e = g->off[v]; e < g->off[v + 1]; e++)
				s += contrib[g->adj[e]];
			next[v] = base + 0.85 * s;
		}
		memcpy(rank, next, g->n * sizeof *rank);
	}
	if (corrupt)
		rank[g->n / 2] += 1e-3;
	for (uint64_t i = 0; i < g->n; i++)
		sum += rank[i];
	*sum_out = sum;
	free(rank);
	free(next);
	free(contrib);
	free(outdeg);
	return fabs(sum - 1.0) < 1e-6;
}

int
main(int argc, char **argv)
{
	unsigned scale = 18, ef = 16, iters = 10;
	uint64_t seed = 1;
	long root = -1;
	struct graph g;
	double t;
	int ch, rc = 0;

	while ((ch = getopt(argc, argv, "Ae:i:r:s:S:X")) != -1) {
		switch (ch) {
		case 'A': advise = true; break;
		case 'X': corrupt = true; break;
		case 'e': ef = (unsigned)atoi(optarg); break;
		case 'i': iters = (unsigned)atoi(optarg); break;
		case 'r': root = atol(optarg); break;
		case 's': scale = (unsigned)atoi(optarg); break;
		case 'S': seed = strtoull(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: graph [-AX] [-s scale] [-e "
			    "edgefactor] [-S seed] [-i iters] [-r root] "
			    "bfs|pagerank...\n");
			return 2;
		}
	}
	if (optind == argc || scale < 4 || scale > 30 || ef == 0) {
		fprintf(stderr, "graph: nothing to run (apps: bfs pagerank)\n");
		return 2;
	}
	t = now();
	graph_build(&g, scale, ef, seed);
	printf("build %.3f n=%" PRIu64 " m=%" PRIu64 " bytes=%" PRIu64 "\n",
	    now() - t, g.n, g.m, (g.n + 1) * 8 + g.m * 4);
	if (root < 0) {
		/* The vertex of highest degree: surely in the big component. */
		root = 0;
		for (uint64_t v = 1; v < g.n; v++)
			if (g.off[v + 1] - g.off[v] >
			    g.off[root + 1] - g.off[root])
				root = (long)v;
	}
	for (int i = optind; i < argc; i++) {
		if (strcmp(argv[i], "bfs") == 0) {
			uint64_t reached;
			bool ok;

			t = now();
			ok = bfs(&g, (uint32_t)root, &reached);
			printf("bfs %.3f reached=%" PRIu64 " %s\n", now() - t,
			    reached, ok ? "ok" : "WRONG");
			rc |= !ok;
		} else if (strcmp(argv[i], "pagerank") == 0) {
			double sum;
			bool ok;

			t = now();
			ok = pagerank(&g, iters, &sum);
			printf("pagerank %.3f sum=%.9f %s\n", now() - t, sum,
			    ok ? "ok" : "WRONG");
			rc |= !ok;
		} else {
			fprintf(stderr, "graph: unknown app %s\n", argv[i]);
			return 2;
		}
	}
	free(g.off);
	free(g.adj);
	return rc;
}
