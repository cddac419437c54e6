/* SPDX-License-Identifier: Apache-2.0 */
/*
 * graph-gen.c - the Kronecker (R-MAT) generator and the CSR builder.
 *
 * Both are written for memory that may be paged from far away: every large
 * array is written front to back or a window at a time, never scattered
 * over its whole length.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph.h"

/* Seconds on the monotonic clock. */
double
graph_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* malloc() that exits with a message on failure. */
void *
graph_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL) {
		fprintf(stderr, "graph: malloc(%zu): out of memory\n", n);
		exit(1);
	}
	return p;
}

/* A fast counter-based generator (splitmix64); *s is its state. */
uint64_t
graph_rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A well-mixed hash of (seed, a, b). */
uint64_t
graph_mix(uint64_t seed, uint64_t a, uint64_t b)
{
	uint64_t s = seed ^ (a * 0x9e3779b97f4a7c15ull) ^
	    (b * 0xc2b2ae3d27d4eb4full);

	graph_rnd(&s);
	return graph_rnd(&s);
}

/*
 * A bijection of [0, 2^scale) that depends on seed: multiplications by odd
 * numbers, additions and xor-shifts, each invertible modulo 2^scale.
 */
static uint32_t
scramble(uint64_t x, unsigned scale, uint64_t k1, uint64_t k2)
{
	uint64_t mask = ((uint64_t)1 << scale) - 1;

	x = (x * k1 + k2) & mask;
	x ^= x >> (scale / 2 + 1);
	x = (x * (k2 | 1)) & mask;
	x ^= x >> (scale / 3 + 1);
	x = (x * k1 + (k2 >> 17)) & mask;
	return (uint32_t)x;
}

/*
 * Fills el[0 .. ef << scale) with Kronecker (R-MAT) edges with the Graph500
 * initiator (a .57, b .19, c .19, d .05) over 2^scale vertices whose ids are
 * then scrambled by a fixed permutation; edge i depends only on (seed, i).
 */
void
graph_kronecker(struct graph_edge *el, unsigned scale, unsigned ef,
    uint64_t seed)
{
	uint64_t m = (uint64_t)ef << scale;
	uint64_t k1 = graph_mix(seed, 1, 2) | 1, k2 = graph_mix(seed, 3, 4);

	#pragma omp parallel for schedule(static, 65536)
	for (uint64_t i = 0; i < m; i++) {
		uint64_t st = graph_mix(seed, i, 0x4b524f4eull), r = 0;
		uint64_t u = 0, v = 0;

		for (unsigned l = 0; l < scale; l++) {
			uint32_t q;

			if (l % 4 == 0)
				r = graph_rnd(&st);
			q = (uint32_t)(r & 0xffff); /* 16 random bits per level */
			r >>= 16;
			u <<= 1;
			v <<= 1;
			if (q < 37356) /* a = .57 of 65536 */
				continue;
			if (q < 49807) /* + b = .19 */
				v |= 1;
			else if (q < 62259) /* + c = .19 */
				u |= 1;
			else { /* d = .05 */
				u |= 1;
				v |= 1;
			}
		}
		el[i].u = scramble(u, scale, k1, k2);
		el[i].v = scramble(v, scale, k1, k2);
	}
}

/*
 * Sorts a[0 .. n) ascending, in place: quicksort (median of three, the
 * smaller side first) down to runs of 24, then insertion sort. No memory
 * is allocated (qsort may malloc a copy).
 */
void
graph_sort_u32(uint32_t *a, uint64_t n)
{
	while (n > 24) {
		uint32_t x = a[0], y = a[n / 2], z = a[n - 1], p;
		uint64_t i = 0, j = n - 1;

		p = x < y ? (y < z ? y : (x < z ? z : x))
		    : (x < z ? x : (y < z ? z : y));
		for (;;) {
			while (a[i] < p)
				i++;
			while (a[j] > p)
				j--;
			if (i >= j)
				break;
			uint32_t t = a[i];
			a[i++] = a[j];
			a[j--] = t;
		}
		/* a[0 .. j] <= p <= a[j + 1 .. n) */
		if (j + 1 < n - j - 1) {
			graph_sort_u32(a, j + 1);
			a += j + 1;
			n -= j + 1;
		} else {
			graph_sort_u32(a + j + 1, n - j - 1);
			n = j + 1;
		}
	}
	for (uint64_t i = 1; i < n; i++) {
		uint32_t x = a[i];
		uint64_t j = i;

		for (; j > 0 && a[j - 1] > x; j--)
			a[j] = a[j - 1];
		a[j] = x;
	}
}

/* Entries of the adjacency array that one bucket aims at (1 MiB). */
#define BUILD_SLICE ((uint64_t)1 << 18)
#define BUILD_BUCKETS 64  /* at most: 64 write streams at once */
#define BUILD_STAGE   256 /* entries staged per bucket before a copy */

/* The bucket of vertex u: the last b with lo[b] <= u. */
static unsigned
bucket_of(const uint64_t *lo, unsigned nb, uint32_t u)
{
	unsigned a = 0, b = nb - 1;

	while (a < b) {
		unsigned mid = (a + b + 1) / 2;

		if (lo[mid] <= u)
			a = mid;
		else
			b = mid - 1;
	}
	return a;
}

/*
 * Builds g (n vertices) from the m edges in el, which it frees: both
 * directions, self loops and duplicates dropped, lists sorted. Memory is
 * written in order or within a small window, never at random over its
 * length: the entries are first split by owner into at most 64 buckets of
 * about 1 MiB of lists each (one write stream per bucket), then each bucket
 * is placed into its own slice of the adjacency array. Returns 0 or -1 (an
 * id >= n).
 */
int
graph_build(struct graph *g, uint64_t n, struct graph_edge *el, uint64_t m)
{
	uint32_t *deg = graph_xmalloc(n * sizeof *deg);
	uint64_t lo[BUILD_BUCKETS + 1], cur[BUILD_BUCKETS];
	struct graph_edge *split;
	uint64_t *fill, total, w;
	unsigned long bad = 0;
	unsigned nb;

	memset(g, 0, sizeof *g);
	memset(deg, 0, n * sizeof *deg);
	#pragma omp parallel for schedule(static, 65536) reduction(+:bad)
	for (uint64_t e = 0; e < m; e++) {
		uint32_t u = el[e].u, v = el[e].v;

		if (u >= n || v >= n) {
			bad++;
			continue;
		}
		if (u == v)
			continue;
		__atomic_fetch_add(&deg[u], 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&deg[v], 1, __ATOMIC_RELAXED);
	}
	if (bad) {
		fprintf(stderr, "graph: %lu edges name a vertex >= %llu\n",
		    bad, (unsigned long long)n);
		free(deg);
		free(el);
		return -1;
	}
	g->n = n;
	g->off = graph_xmalloc((n + 1) * sizeof *g->off);
	g->off[0] = 0;
	for (uint64_t u = 0; u < n; u++)
		g->off[u + 1] = g->off[u] + deg[u];
	free(deg);
	total = g->off[n];

	/* Buckets: vertex ranges holding about total / nb entries each. */
	nb = (unsigned)(total / BUILD_SLICE + 1);
	if (nb > BUILD_BUCKETS)
		nb = BUILD_BUCKETS;
	lo[0] = 0;
	for (unsigned b = 1; b < nb; b++) {
		uint64_t want = total / nb * b, a = lo[b - 1], z = n;

		while (a < z) { /* the first u with off[u] >= want */
			uint64_t mid = a + (z - a) / 2;

			if (g->off[mid] < want)
				a = mid + 1;
			else
				z = mid;
		}
		lo[b] = a;
	}
	lo[nb] = n;
	for (unsigned b = 0; b < nb; b++)
		cur[b] = g->off[lo[b]];

	split = graph_xmalloc(total * sizeof *split);
	#pragma omp parallel
	{
		struct graph_edge *stage = graph_xmalloc((size_t)nb *
		    BUILD_STAGE * sizeof *stage);
		unsigned cnt[BUILD_BUCKETS] = { 0 };

		#pragma omp for schedule(static, 65536)
		for (uint64_t e = 0; e < m; e++) {
			struct graph_edge ends[2] = { el[e], { el[e].v, el[e].u } };

			if (el[e].u == el[e].v)
				continue;
			for (int k = 0; k < 2; k++) {
				unsigned b = bucket_of(lo, nb, ends[k].u);
				struct graph_edge *s = stage + (size_t)b * BUILD_STAGE;

				s[cnt[b]++] = ends[k];
				if (cnt[b] == BUILD_STAGE) {
					uint64_t at = __atomic_fetch_add(&cur[b],
					    BUILD_STAGE, __ATOMIC_RELAXED);

					memcpy(split + at, s, BUILD_STAGE * sizeof *s);
					cnt[b] = 0;
				}
			}
		}
		for (unsigned b = 0; b < nb; b++) {
			uint64_t at = __atomic_fetch_add(&cur[b], cnt[b],
			    __ATOMIC_RELAXED);

			memcpy(split + at, stage + (size_t)b * BUILD_STAGE,
			    cnt[b] * sizeof *stage);
		}
		free(stage);
	}
	free(el);

	/* Each bucket into its slice of the lists, one thread per bucket. */
	g->adj = graph_xmalloc(total * sizeof *g->adj);
	g->off_base = g->off;
	g->adj_base = g->adj;
	g->store = GRAPH_STORE_MALLOC;
	fill = graph_xmalloc(n * sizeof *fill);
	memcpy(fill, g->off, n * sizeof *fill);
	#pragma omp parallel for schedule(dynamic, 1)
	for (unsigned b = 0; b < nb; b++)
		for (uint64_t i = g->off[lo[b]]; i < g->off[lo[b + 1]]; i++)
			g->adj[fill[split[i].u]++] = split[i].v;
	free(fill);
	free(split);

	#pragma omp parallel for schedule(dynamic, 1024)
	for (uint64_t u = 0; u < n; u++)
		graph_sort_u32(g->adj + g->off[u], g->off[u + 1] - g->off[u]);

	/* Drop duplicates, front to back (off[u] is rewritten after use). */
	w = 0;
	for (uint64_t u = 0; u < n; u++) {
		uint64_t s = g->off[u], e = g->off[u + 1];
		uint32_t prev = GRAPH_NONE;

		g->off[u] = w;
		for (uint64_t i = s; i < e; i++) {
			if (g->adj[i] == prev)
				continue;
			prev = g->adj[i];
			g->adj[w++] = prev;
		}
	}
	g->off[n] = w;
	g->m = w;
	return 0;
}

/* The vertex of highest degree (the lowest id among equals). */
uint32_t
graph_max_degree_vertex(const struct graph *g)
{
	uint64_t best = 0;

	for (uint64_t v = 1; v < g->n; v++)
		if (graph_deg(g, v) > graph_deg(g, best))
			best = v;
	return (uint32_t)best;
}

/* A hash of the whole graph, equal for equal graphs. */
uint64_t
graph_checksum(const struct graph *g)
{
	uint64_t h = graph_mix(g->n, g->m, 0);

	#pragma omp parallel for schedule(static, 4096) reduction(+:h)
	for (uint64_t u = 0; u < g->n; u++)
		for (uint64_t e = g->off[u]; e < g->off[u + 1]; e++)
			h += graph_mix(0x67726170ull, u, g->adj[e]);
	return h;
}

/* Checks g's structure (offsets, ids, sorted simple lists). 0 or -1. */
int
graph_validate(const struct graph *g)
{
	unsigned long bad = 0;

	if (g->off[0] != 0 || g->off[g->n] != g->m) {
		fprintf(stderr, "graph: offsets do not span the edges\n");
		return -1;
	}
	#pragma omp parallel for schedule(static, 4096) reduction(+:bad)
	for (uint64_t u = 0; u < g->n; u++) {
		uint64_t s = g->off[u], e = g->off[u + 1];

		if (e < s || e > g->m) {
			bad++;
			continue;
		}
		for (uint64_t i = s; i < e; i++) {
			uint32_t v = g->adj[i];

			if (v >= g->n || v == u || (i > s && v <= g->adj[i - 1]))
				bad++;
		}
	}
	if (bad) {
		fprintf(stderr, "graph: %lu bad offsets or adjacency entries "
		    "(out of range, self loops, unsorted or repeated)\n", bad);
		return -1;
	}
	return 0;
}
