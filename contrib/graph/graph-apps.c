/* SPDX-License-Identifier: Apache-2.0 */
/*
 * graph-apps.c - the five kernels (BFS, PageRank, connected components,
 * betweenness centrality, radii), each with a check of its result that a
 * wrong answer cannot pass, and a self-test on small graphs whose answers
 * are known or computed by brute force.
 *
 * The kernels follow Ligra's: level-synchronous frontiers, switching to a
 * pull over every vertex in order ("dense" edge map) when the frontier is
 * large, so that the edge lists are read front to back whenever they can
 * be. Their checks are passes over the edges in order, never a walk at
 * random.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

#define PR_DAMPING 0.85

/* Prints a kernel's line: NAME SECONDS details check=SECONDS ok|WRONG. */
static bool report(const char *name, double secs, double check_secs, bool ok,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static bool
report(const char *name, double secs, double check_secs, bool ok,
    const char *fmt, ...)
{
	va_list ap;

	printf("%s %.3f ", name, secs);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" check=%.3f %s\n", check_secs, ok ? "ok" : "WRONG");
	fflush(stdout);
	return ok;
}

/* Whether the sorted list of u holds v (binary search). */
static bool
has_edge(const struct graph *g, uint64_t u, uint32_t v)
{
	uint64_t a = g->off[u], b = g->off[u + 1];

	while (a < b) {
		uint64_t mid = a + (b - a) / 2;

		if (g->adj[mid] == v)
			return true;
		if (g->adj[mid] < v)
			a = mid + 1;
		else
			b = mid;
	}
	return false;
}

/*
 * Up to k distinct vertices with edges: the one of highest degree, then
 * pseudo-random ones from seed. Returns how many (fewer on tiny graphs).
 */
static unsigned
pick_sources(const struct graph *g, unsigned k, uint64_t seed, uint32_t *out)
{
	unsigned got = 0;

	if (k == 0)
		return 0;
	out[got++] = graph_max_degree_vertex(g);
	if (graph_deg(g, out[0]) == 0)
		return 1;
	for (uint64_t i = 1; got < k && i < 100000; i++) {
		uint32_t v = (uint32_t)(graph_mix(seed, i, 0x534f55ull) % g->n);
		bool dup = false;

		if (graph_deg(g, v) == 0)
			continue;
		for (unsigned j = 0; j < got && !dup; j++)
			dup = out[j] == v;
		if (!dup)
			out[got++] = v;
	}
	return got;
}

/* ---- BFS --------------------------------------------------------------- */

/*
 * Breadth-first search from root into parent[] and level[] (GRAPH_NONE
 * where unreached); direction-optimizing: top-down from the frontier's
 * bitmap, bottom-up (every unreached vertex looks for a parent in the
 * frontier, in vertex order) while the frontier's edges are many. Returns
 * the vertices reached.
 */
static uint64_t
bfs_compute(const struct graph *g, uint32_t root, uint32_t *parent,
    uint32_t *level)
{
	uint64_t words = (g->n + 63) / 64, count = 1, nf = 1, fe;
	uint64_t *front = graph_xmalloc(words * sizeof *front);
	uint64_t *next = graph_xmalloc(words * sizeof *next);

	#pragma omp parallel for schedule(static, 4096)
	for (uint64_t i = 0; i < g->n; i++) {
		parent[i] = GRAPH_NONE;
		level[i] = GRAPH_NONE;
	}
	memset(front, 0, words * sizeof *front);
	parent[root] = root;
	level[root] = 0;
	front[root / 64] |= 1ull << (root % 64);
	fe = graph_deg(g, root);
	for (uint32_t depth = 1; nf > 0; depth++) {
		uint64_t nn = 0, ne = 0;

		if (fe > g->m / 20) {
			/* bottom-up: each word of next is one thread's */
			#pragma omp parallel for schedule(static, 64) reduction(+:nn, ne)
			for (uint64_t w = 0; w < words; w++) {
				uint64_t word = 0;

				for (unsigned b = 0; b < 64; b++) {
					uint64_t v = w * 64 + b;

					if (v >= g->n)
						break;
					if (parent[v] != GRAPH_NONE)
						continue;
					for (uint64_t e = g->off[v];
					    e < g->off[v + 1]; e++) {
						uint32_t u = g->adj[e];

						if (front[u / 64] >> (u % 64) & 1) {
							parent[v] = u;
							level[v] = depth;
							word |= 1ull << b;
							nn++;
							ne += graph_deg(g, v);
							break;
						}
					}
				}
				next[w] = word;
			}
		} else {
			memset(next, 0, words * sizeof *next);
			#pragma omp parallel for schedule(dynamic, 16) reduction(+:nn, ne)
			for (uint64_t w = 0; w < words; w++) {
				for (uint64_t bits = front[w]; bits != 0;
				    bits &= bits - 1) {
					uint64_t u = w * 64 +
					    (uint64_t)__builtin_ctzll(bits);

					for (uint64_t e = g->off[u];
					    e < g->off[u + 1]; e++) {
						uint32_t v = g->adj[e];
						uint32_t none = GRAPH_NONE;

						if (__atomic_load_n(&parent[v],
						    __ATOMIC_RELAXED) != GRAPH_NONE)
							continue;
						if (!__atomic_compare_exchange_n(
						    &parent[v], &none, (uint32_t)u,
						    false, __ATOMIC_RELAXED,
						    __ATOMIC_RELAXED))
							continue;
						level[v] = depth;
						__atomic_fetch_or(&next[v / 64],
						    1ull << (v % 64),
						    __ATOMIC_RELAXED);
						nn++;
						ne += graph_deg(g, v);
					}
				}
			}
		}
		count += nn;
		nf = nn;
		fe = ne;
		uint64_t *t = front;
		front = next;
		next = t;
	}
	free(front);
	free(next);
	return count;
}

/*
 * Checks a BFS tree as Graph500 does: the root is its own parent at level
 * 0; every other reached vertex has an edge to its parent, one level up;
 * every edge joins two reached or two unreached vertices, at most one level
 * apart; and count vertices are reached.
 */
static bool
bfs_check(const struct graph *g, uint32_t root, const uint32_t *parent,
    const uint32_t *level, uint64_t count)
{
	uint64_t bad = 0, reached = 0;

	if (parent[root] != root || level[root] != 0)
		return false;
	#pragma omp parallel for schedule(static, 4096) reduction(+:bad, reached)
	for (uint64_t v = 0; v < g->n; v++) {
		uint32_t p = parent[v];

		if (p == GRAPH_NONE) {
			bad += level[v] != GRAPH_NONE;
		} else {
			reached++;
			if (v != root &&
			    (p >= g->n || parent[p] == GRAPH_NONE ||
			    level[v] != level[p] + 1 || !has_edge(g, v, p)))
				bad++;
		}
		for (uint64_t e = g->off[v]; e < g->off[v + 1]; e++) {
			uint32_t w = g->adj[e];

			if ((parent[w] == GRAPH_NONE) != (p == GRAPH_NONE))
				bad++;
			else if (p != GRAPH_NONE &&
			    (level[w] > level[v] + 1 || level[v] > level[w] + 1))
				bad++;
		}
	}
	return bad == 0 && reached == count;
}

/* BFS from root, checked. */
bool
graph_app_bfs(const struct graph *g, uint32_t root)
{
	uint32_t *parent = graph_xmalloc(g->n * sizeof *parent);
	uint32_t *level = graph_xmalloc(g->n * sizeof *level);
	uint32_t depth = 0;
	uint64_t count;
	double t, secs, tc;
	bool ok;

	graph_advise_vertex(parent);
	graph_advise_vertex(level);
	graph_pause("start", "bfs");
	t = graph_now();
	count = bfs_compute(g, root, parent, level);
	secs = graph_now() - t;
	graph_pause("end", "bfs");
	if (graph_corrupt) {
		for (uint64_t v = 0; v < g->n; v++)
			if (parent[v] != GRAPH_NONE && v != root) {
				parent[v] = (uint32_t)v;
				break;
			}
	}
	tc = graph_now();
	ok = bfs_check(g, root, parent, level, count);
	for (uint64_t v = 0; v < g->n; v++)
		if (level[v] != GRAPH_NONE && level[v] > depth)
			depth = level[v];
	tc = graph_now() - tc;
	free(parent);
	free(level);
	return report("bfs", secs, tc, ok, "root=%" PRIu32 " reached=%" PRIu64
	    " depth=%" PRIu32, root, count, depth);
}

/* ---- PageRank ---------------------------------------------------------- */

/*
 * PageRank by power iteration (damping .85, the rank of vertices without
 * edges spread over all), pulling along the lists. Returns the ranks (one of
 * the two arrays; *other is the other) and the last iteration's L1 change.
 */
static double *
pagerank_compute(const struct graph *g, unsigned iters, double *a, double *b,
    double *contrib, double *delta_out)
{
	double *rank = a, *next = b, delta = 0;
	double n = (double)g->n;

	#pragma omp parallel for schedule(static, 4096)
	for (uint64_t i = 0; i < g->n; i++)
		rank[i] = 1.0 / n;
	for (unsigned it = 0; it < iters; it++) {
		double dangling = 0, base;

		#pragma omp parallel for schedule(static, 4096) reduction(+:dangling)
		for (uint64_t u = 0; u < g->n; u++) {
			uint64_t d = graph_deg(g, u);

			contrib[u] = d ? rank[u] / (double)d : 0;
			if (d == 0)
				dangling += rank[u];
		}
		base = (1.0 - PR_DAMPING + PR_DAMPING * dangling) / n;
		delta = 0;
		#pragma omp parallel for schedule(dynamic, 1024) reduction(+:delta)
		for (uint64_t v = 0; v < g->n; v++) {
			double s = 0;

			for (uint64_t e = g->off[v]; e < g->off[v + 1]; e++)
				s += contrib[g->adj[e]];
			next[v] = base + PR_DAMPING * s;
			delta += fabs(next[v] - rank[v]);
		}
		double *t = rank;
		rank = next;
		next = t;
	}
	*delta_out = delta;
	return rank;
}

/*
 * Checks ranks: finite, each at least the teleport share (1 - d) / n, and
 * summing to 1 within 1e-6. The sum is the real invariant: a lost or
 * doubled contribution anywhere moves it.
 */
static bool
pagerank_check(const struct graph *g, const double *rank, double *sum_out)
{
	double sum = 0, floor_ = (1.0 - PR_DAMPING) / (double)g->n;
	uint64_t bad = 0;

	#pragma omp parallel for schedule(static, 4096) reduction(+:sum, bad)
	for (uint64_t i = 0; i < g->n; i++) {
		sum += rank[i];
		bad += !isfinite(rank[i]) || rank[i] < floor_ * (1 - 1e-9);
	}
	*sum_out = sum;
	return bad == 0 && fabs(sum - 1.0) < 1e-6;
}

/* PageRank, iters iterations, checked. */
bool
graph_app_pagerank(const struct graph *g, unsigned iters)
{
	double *a = graph_xmalloc(g->n * sizeof *a);
	double *b = graph_xmalloc(g->n * sizeof *b);
	double *contrib = graph_xmalloc(g->n * sizeof *contrib);
	double *rank, delta, sum, t, secs, tc;
	bool ok;

	graph_advise_vertex(contrib);
	graph_advise_vertex(a);
	graph_advise_vertex(b);
	graph_pause("start", "pagerank");
	t = graph_now();
	rank = pagerank_compute(g, iters, a, b, contrib, &delta);
	secs = graph_now() - t;
	graph_pause("end", "pagerank");
	if (graph_corrupt)
		rank[g->n / 2] += 1e-3;
	tc = graph_now();
	ok = pagerank_check(g, rank, &sum);
	tc = graph_now() - tc;
	free(a);
	free(b);
	free(contrib);
	return report("pagerank", secs, tc, ok, "iters=%u sum=%.9f delta=%.3g",
	    iters, sum, delta);
}

/* ---- connected components ---------------------------------------------- */

/*
 * Labels each vertex with the least id of its component: label propagation
 * (each vertex takes the least label of its neighbours, in vertex order,
 * updated in place) with pointer jumping, until nothing changes. Returns the
 * rounds.
 */
static unsigned
cc_compute(const struct graph *g, uint32_t *label)
{
	unsigned rounds = 0;
	int changed = 1;

	#pragma omp parallel for schedule(static, 4096)
	for (uint64_t v = 0; v < g->n; v++)
		label[v] = (uint32_t)v;
	while (changed) {
		changed = 0;
		rounds++;
		#pragma omp parallel for schedule(dynamic, 1024) reduction(|:changed)
		for (uint64_t v = 0; v < g->n; v++) {
			uint32_t l = __atomic_load_n(&label[v], __ATOMIC_RELAXED);
			uint32_t l0 = l;

			for (uint64_t e = g->off[v]; e < g->off[v + 1]; e++) {
				uint32_t x = __atomic_load_n(&label[g->adj[e]],
				    __ATOMIC_RELAXED);

				if (x < l)
					l = x;
			}
			if (l < l0) {
				__atomic_store_n(&label[v], l, __ATOMIC_RELAXED);
				changed = 1;
			}
		}
		#pragma omp parallel for schedule(static, 4096)
		for (uint64_t v = 0; v < g->n; v++) {
			uint32_t l = __atomic_load_n(&label[v], __ATOMIC_RELAXED);
			uint32_t ll;

			while ((ll = __atomic_load_n(&label[l],
			    __ATOMIC_RELAXED)) < l)
				l = ll;
			__atomic_store_n(&label[v], l, __ATOMIC_RELAXED);
		}
	}
	return rounds;
}

/* Union-find root of v, halving the path. */
static uint32_t
uf_find(uint32_t *p, uint32_t v)
{
	while (p[v] != v) {
		p[v] = p[p[v]];
		v = p[v];
	}
	return v;
}

/*
 * Checks labels: equal across every edge, each the least id of its class
 * (label[v] <= v, label[label[v]] == label[v]), and as many classes as a
 * union-find over the edges finds components: so no class joins two
 * components and none is split. Counts components and the largest one.
 */
static bool
cc_check(const struct graph *g, const uint32_t *label, uint64_t *ncomp,
    uint64_t *largest)
{
	uint32_t *p = graph_xmalloc(g->n * sizeof *p);
	uint64_t bad = 0, roots = 0, comps = g->n, big = 0;

	#pragma omp parallel for schedule(static, 4096) reduction(+:bad, roots)
	for (uint64_t v = 0; v < g->n; v++) {
		uint32_t l = label[v];

		if (l > v || label[l] != l)
			bad++;
		roots += l == v;
		for (uint64_t e = g->off[v]; e < g->off[v + 1]; e++)
			bad += label[g->adj[e]] != l;
	}
	for (uint64_t v = 0; v < g->n; v++)
		p[v] = (uint32_t)v;
	for (uint64_t u = 0; u < g->n; u++) {
		for (uint64_t e = g->off[u]; e < g->off[u + 1]; e++) {
			uint32_t a, b;

			if (g->adj[e] < u)
				continue;
			a = uf_find(p, (uint32_t)u);
			b = uf_find(p, g->adj[e]);
			if (a != b) {
				p[a > b ? a : b] = a < b ? a : b;
				comps--;
			}
		}
	}
	/* Sizes of the classes, counted at their roots (p reused). */
	for (uint64_t v = 0; v < g->n; v++)
		p[v] = 0;
	for (uint64_t v = 0; v < g->n; v++)
		if (label[v] < g->n)
			p[label[v]]++;
	for (uint64_t v = 0; v < g->n; v++)
		if (p[v] > big)
			big = p[v];
	free(p);
	*ncomp = roots;
	*largest = big;
	return bad == 0 && roots == comps;
}

/* Connected components, checked. */
bool
graph_app_cc(const struct graph *g)
{
	uint32_t *label = graph_xmalloc(g->n * sizeof *label);
	uint64_t ncomp, largest;
	double t, secs, tc;
	unsigned rounds;
	bool ok;

	graph_advise_vertex(label);
	graph_pause("start", "cc");
	t = graph_now();
	rounds = cc_compute(g, label);
	secs = graph_now() - t;
	graph_pause("end", "cc");
	if (graph_corrupt) {
		for (uint64_t v = 0; v < g->n; v++)
			if (label[v] != v) {
				label[v] = (uint32_t)v;
				break;
			}
	}
	tc = graph_now();
	ok = cc_check(g, label, &ncomp, &largest);
	tc = graph_now() - tc;
	free(label);
	return report("cc", secs, tc, ok, "components=%" PRIu64 " largest=%"
	    PRIu64 " rounds=%u", ncomp, largest, rounds);
}

/* ---- betweenness centrality -------------------------------------------- */

/* The per-source state of Brandes' algorithm. */
struct bc_state {
	int32_t *dist;   /* hops from the source, -1 unreached */
	double *sigma;   /* shortest paths from the source */
	double *delta;   /* dependency of the source on each vertex */
	uint32_t *queue; /* reached vertices, level by level */
	uint64_t *lvl;   /* queue index where each level starts */
	uint64_t nlvl;   /* levels (entries of lvl used, less one) */
	uint64_t lvl_cap;
};

/*
 * Brandes' algorithm from one source s, adding s's dependencies to bc.
 * Forward, a level-synchronous BFS counting shortest paths: a small
 * frontier is expanded top-down and each new vertex then pulls its count
 * from the level above; a large one (its edges over m/20) is replaced by a
 * pull over every unreached vertex in vertex order. Each level's vertices
 * are kept sorted, so that the lists are read in address order. Backward,
 * dependencies are pulled level by level from the level below. Checks the
 * identity
 *   sum over v != s of delta_s(v) = sum over reached t != s of (d(s,t) - 1)
 * (each shortest path to t has d - 1 inner vertices) and that no
 * dependency is negative; returns whether both hold.
 */
static bool
bc_source(const struct graph *g, uint32_t s, struct bc_state *st, double *bc,
    double *check_secs)
{
	uint64_t tail = 1, fe = graph_deg(g, s);
	double tc, sum_delta = 0, want = 0;
	uint64_t bad = 0;

	#pragma omp parallel for schedule(static, 4096)
	for (uint64_t v = 0; v < g->n; v++) {
		st->dist[v] = -1;
		st->sigma[v] = 0;
		st->delta[v] = 0;
	}
	st->dist[s] = 0;
	st->sigma[s] = 1;
	st->queue[0] = s;
	st->lvl[0] = 0;
	st->lvl[1] = 1;
	st->nlvl = 1;
	for (int32_t d = 0;; d++) {
		uint64_t a = st->lvl[d], b = st->lvl[d + 1], ne = 0;

		if (fe > g->m / 20) {
			uint64_t nn = 0;

			#pragma omp parallel for schedule(dynamic, 1024) reduction(+:nn, ne)
			for (uint64_t v = 0; v < g->n; v++) {
				double sg = 0;

				if (__atomic_load_n(&st->dist[v],
				    __ATOMIC_RELAXED) != -1)
					continue;
				for (uint64_t e = g->off[v]; e < g->off[v + 1];
				    e++) {
					uint32_t u = g->adj[e];

					if (__atomic_load_n(&st->dist[u],
					    __ATOMIC_RELAXED) == d)
						sg += st->sigma[u];
				}
				if (sg > 0) {
					st->sigma[v] = sg;
					__atomic_store_n(&st->dist[v], d + 1,
					    __ATOMIC_RELAXED);
					nn++;
					ne += graph_deg(g, v);
				}
			}
			/* The new level, in vertex order. */
			for (uint64_t v = 0; v < g->n && nn > 0; v++)
				if (st->dist[v] == d + 1)
					st->queue[tail++] = (uint32_t)v;
		} else {
			#pragma omp parallel for schedule(dynamic, 64)
			for (uint64_t i = a; i < b; i++) {
				uint32_t u = st->queue[i];

				for (uint64_t e = g->off[u]; e < g->off[u + 1];
				    e++) {
					uint32_t w = g->adj[e];
					int32_t unseen = -1;

					if (__atomic_load_n(&st->dist[w],
					    __ATOMIC_RELAXED) != -1)
						continue;
					if (__atomic_compare_exchange_n(
					    &st->dist[w], &unseen, d + 1, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
						st->queue[__atomic_fetch_add(&tail,
						    1, __ATOMIC_RELAXED)] = w;
				}
			}
			graph_sort_u32(st->queue + b, tail - b);
			#pragma omp parallel for schedule(dynamic, 64) reduction(+:ne)
			for (uint64_t i = b; i < tail; i++) {
				uint32_t w = st->queue[i];
				double sg = 0;

				for (uint64_t e = g->off[w]; e < g->off[w + 1];
				    e++)
					if (st->dist[g->adj[e]] == d)
						sg += st->sigma[g->adj[e]];
				st->sigma[w] = sg;
				ne += graph_deg(g, w);
			}
		}
		if (tail == b)
			break;
		fe = ne;
		if (st->nlvl + 2 > st->lvl_cap) {
			st->lvl_cap *= 2;
			st->lvl = realloc(st->lvl, st->lvl_cap * sizeof *st->lvl);
			if (st->lvl == NULL) {
				fprintf(stderr, "graph: out of memory\n");
				exit(1);
			}
		}
		st->lvl[++st->nlvl] = tail;
	}
	/* Levels nlvl-1 .. 1 pull from the level below them. */
	for (int64_t d = (int64_t)st->nlvl - 2; d >= 1; d--) {
		#pragma omp parallel for schedule(dynamic, 64)
		for (uint64_t i = st->lvl[d]; i < st->lvl[d + 1]; i++) {
			uint32_t v = st->queue[i];
			double acc = 0;

			for (uint64_t e = g->off[v]; e < g->off[v + 1]; e++) {
				uint32_t w = g->adj[e];

				if (st->dist[w] == (int32_t)d + 1)
					acc += st->sigma[v] / st->sigma[w] *
					    (1 + st->delta[w]);
			}
			st->delta[v] = acc;
		}
	}
	#pragma omp parallel for schedule(static, 4096)
	for (uint64_t i = 1; i < tail; i++)
		bc[st->queue[i]] += st->delta[st->queue[i]];

	tc = graph_now();
	#pragma omp parallel for schedule(static, 4096) reduction(+:sum_delta, want, bad)
	for (uint64_t i = 1; i < tail; i++) {
		uint32_t v = st->queue[i];

		sum_delta += st->delta[v];
		want += st->dist[v] - 1;
		bad += st->delta[v] < 0 || st->sigma[v] < 1 ||
		    !isfinite(st->delta[v]);
	}
	*check_secs += graph_now() - tc;
	return bad == 0 && fabs(sum_delta - want) <= 1e-6 * (want > 1 ? want : 1);
}

/* Sets up the per-source state for n vertices. */
static void
bc_state_init(struct bc_state *st, uint64_t n)
{
	st->dist = graph_xmalloc(n * sizeof *st->dist);
	st->sigma = graph_xmalloc(n * sizeof *st->sigma);
	st->delta = graph_xmalloc(n * sizeof *st->delta);
	st->queue = graph_xmalloc(n * sizeof *st->queue);
	/* Each source reads all of them again. */
	graph_advise_vertex(st->sigma);
	graph_advise_vertex(st->dist);
	graph_advise_vertex(st->delta);
	graph_advise_vertex(st->queue);
	st->lvl_cap = 64;
	st->lvl = graph_xmalloc(st->lvl_cap * sizeof *st->lvl);
}

/* Releases the per-source state. */
static void
bc_state_free(struct bc_state *st)
{
	free(st->dist);
	free(st->sigma);
	free(st->delta);
	free(st->queue);
	free(st->lvl);
}

/* Betweenness centrality from k sources, checked per source and overall. */
static bool
bc_compute(const struct graph *g, const uint32_t *src, unsigned k, double *bc,
    double *check_secs)
{
	struct bc_state st;
	bool ok = true;

	bc_state_init(&st, g->n);
	#pragma omp parallel for schedule(static, 4096)
	for (uint64_t v = 0; v < g->n; v++)
		bc[v] = 0;
	for (unsigned i = 0; i < k; i++)
		ok &= bc_source(g, src[i], &st, bc, check_secs);
	bc_state_free(&st);
	return ok;
}

/* Betweenness centrality (Brandes) from `sources` sources, checked. */
bool
graph_app_bc(const struct graph *g, unsigned sources, uint64_t seed)
{
	uint32_t *src = graph_xmalloc((sources ? sources : 1) * sizeof *src);
	double *bc = graph_xmalloc(g->n * sizeof *bc);
	double t, secs, tc = 0, t2, top = 0, total = 0;
	unsigned k = pick_sources(g, sources, seed, src);
	uint64_t bad = 0;
	bool ok;

	graph_advise_vertex(bc);
	graph_pause("start", "bc");
	t = graph_now();
	ok = bc_compute(g, src, k, bc, &tc);
	secs = graph_now() - t - tc;
	graph_pause("end", "bc");
	if (graph_corrupt)
		bc[src[0]] = -1;
	t2 = graph_now();
	#pragma omp parallel for schedule(static, 4096) reduction(+:bad, total) reduction(max:top)
	for (uint64_t v = 0; v < g->n; v++) {
		bad += !(bc[v] >= 0) || !isfinite(bc[v]);
		total += bc[v];
		if (bc[v] > top)
			top = bc[v];
	}
	ok &= bad == 0;
	tc += graph_now() - t2;
	free(src);
	free(bc);
	return report("bc", secs, tc, ok, "sources=%u max=%.6g total=%.6g", k,
	    top, total);
}

/* ---- radii ------------------------------------------------------------- */

/*
 * Estimates each vertex's eccentricity as its greatest distance to k <= 64
 * sampled sources: one BFS per source at once, a bit per source in a 64-bit
 * mask, every vertex pulling its neighbours' masks in vertex order each
 * round. est[v] = -1 where no source reaches. Returns the rounds.
 */
static unsigned
radii_compute(const struct graph *g, const uint32_t *src, unsigned k,
    int32_t *est, uint64_t *vis, uint64_t *next)
{
	unsigned rounds = 0;
	int changed = 1;

	#pragma omp parallel for schedule(static, 4096)
	for (uint64_t v = 0; v < g->n; v++) {
		vis[v] = 0;
		est[v] = -1;
	}
	for (unsigned i = 0; i < k; i++) {
		vis[src[i]] |= 1ull << i;
		est[src[i]] = 0;
	}
	while (changed) {
		changed = 0;
		rounds++;
		#pragma omp parallel for schedule(dynamic, 1024) reduction(|:changed)
		for (uint64_t v = 0; v < g->n; v++) {
			uint64_t nv = vis[v];

			for (uint64_t e = g->off[v]; e < g->off[v + 1]; e++)
				nv |= vis[g->adj[e]];
			next[v] = nv;
			if (nv != vis[v]) {
				est[v] = (int32_t)rounds;
				changed = 1;
			}
		}
		uint64_t *t = vis;
		vis = next;
		next = t;
	}
	/* vis may be the caller's next now: both are the same masks. */
	return rounds - 1;
}

/*
 * Checks the estimates against an exact BFS (pulled round by round in
 * vertex order) from the first source s, whose eccentricity is e:
 * d(s,v) <= est[v] <= d(s,v) + e (est[v] is a distance from some source,
 * which is within e of s), every edge joins two estimates at most 1 apart
 * (each distance is 1-Lipschitz, so their maximum is) or two unreached
 * vertices, and the largest estimate in s's component is at most 2e, a
 * bound on its diameter. *ecc gets e.
 */
static bool
radii_check(const struct graph *g, uint32_t s, const int32_t *est,
    int32_t *d0, int32_t *ecc)
{
	uint64_t bad = 0;
	int32_t e = 0, top = 0;
	int changed = 1;

	#pragma omp parallel for schedule(static, 4096)
	for (uint64_t v = 0; v < g->n; v++)
		d0[v] = -1;
	d0[s] = 0;
	for (int32_t r = 1; changed; r++) {
		changed = 0;
		#pragma omp parallel for schedule(dynamic, 1024) reduction(|:changed)
		for (uint64_t v = 0; v < g->n; v++) {
			if (d0[v] >= 0)
				continue;
			for (uint64_t x = g->off[v]; x < g->off[v + 1]; x++)
				if (__atomic_load_n(&d0[g->adj[x]],
				    __ATOMIC_RELAXED) == r - 1) {
					__atomic_store_n(&d0[v], r,
					    __ATOMIC_RELAXED);
					changed = 1;
					break;
				}
		}
		if (changed)
			e = r;
	}
	#pragma omp parallel for schedule(static, 4096) reduction(+:bad) reduction(max:top)
	for (uint64_t v = 0; v < g->n; v++) {
		if (d0[v] >= 0) {
			bad += est[v] < d0[v] || est[v] > d0[v] + e;
			if (est[v] > top)
				top = est[v];
		}
		for (uint64_t x = g->off[v]; x < g->off[v + 1]; x++) {
			int32_t o = est[g->adj[x]];

			if ((o < 0) != (est[v] < 0))
				bad++;
			else if (o >= 0 && (o > est[v] + 1 || est[v] > o + 1))
				bad++;
		}
	}
	*ecc = e;
	return bad == 0 && top <= 2 * e;
}

/* Radii from `samples` sampled sources (at most 64), checked. */
bool
graph_app_radii(const struct graph *g, unsigned samples, uint64_t seed)
{
	uint32_t src[64];
	int32_t *est = graph_xmalloc(g->n * sizeof *est);
	uint64_t *vis = graph_xmalloc(g->n * sizeof *vis);
	uint64_t *next = graph_xmalloc(g->n * sizeof *next);
	unsigned k = pick_sources(g, samples > 64 ? 64 : samples, seed, src);
	double t, secs, tc;
	int32_t top = -1, ecc;
	unsigned rounds;
	bool ok;

	graph_advise_vertex(vis);
	graph_advise_vertex(next);
	graph_advise_vertex(est);
	graph_pause("start", "radii");
	t = graph_now();
	rounds = radii_compute(g, src, k, est, vis, next);
	secs = graph_now() - t;
	graph_pause("end", "radii");
	if (graph_corrupt)
		est[src[0]] += 2;
	tc = graph_now();
	/* vis is free now: its first half holds the exact distances. */
	ok = radii_check(g, src[0], est, (int32_t *)vis, &ecc);
	for (uint64_t v = 0; v < g->n; v++)
		if (est[v] > top)
			top = est[v];
	tc = graph_now() - tc;
	free(est);
	free(vis);
	free(next);
	return report("radii", secs, tc, ok, "samples=%u rounds=%u max=%" PRId32
	    " ecc0=%" PRId32, k, rounds, top, ecc);
}

/* ---- self-test ---------------------------------------------------------- */

/* Exact hop distances from s by a plain queue (brute force). */
static void
ref_bfs(const struct graph *g, uint32_t s, int32_t *d, uint32_t *q)
{
	uint64_t h = 0, t = 0;

	for (uint64_t v = 0; v < g->n; v++)
		d[v] = -1;
	d[s] = 0;
	q[t++] = s;
	while (h < t) {
		uint32_t u = q[h++];

		for (uint64_t e = g->off[u]; e < g->off[u + 1]; e++)
			if (d[g->adj[e]] < 0) {
				d[g->adj[e]] = d[u] + 1;
				q[t++] = g->adj[e];
			}
	}
}

/*
 * Runs every kernel on g and compares with brute force: BFS levels with
 * exact distances, PageRank with a serial power iteration, components with
 * least ids reached by BFS, BC from every source with shortest-path counts
 * over all pairs, radii from every source (n <= 64) with exact
 * eccentricities. The kernels' own checks must pass too. Prints one line.
 */
static bool
selftest_graph(const char *name, const struct graph *g, const double *bc_want)
{
	uint64_t n = g->n;
	int32_t *dist = graph_xmalloc(n * n * sizeof *dist);
	double *sp = graph_xmalloc(n * n * sizeof *sp);
	uint32_t *q = graph_xmalloc(n * sizeof *q), *src;
	uint32_t *parent = graph_xmalloc(n * sizeof *parent);
	uint32_t *level = graph_xmalloc(n * sizeof *level);
	double *pa = graph_xmalloc(n * sizeof *pa), *pb = graph_xmalloc(n * sizeof *pb);
	double *pc = graph_xmalloc(n * sizeof *pc), *ref = graph_xmalloc(n * sizeof *ref);
	double *bc = graph_xmalloc(n * sizeof *bc), *bref = graph_xmalloc(n * sizeof *bref);
	uint64_t *va = graph_xmalloc(n * sizeof *va), *vb = graph_xmalloc(n * sizeof *vb);
	int32_t *est = graph_xmalloc(n * sizeof *est), *d0 = graph_xmalloc(n * sizeof *d0);
	double *rank, delta, sum, cs = 0;
	uint64_t count, ncomp, largest;
	int32_t ecc;
	bool ok = true;
	const char *why = "";

	src = graph_xmalloc(n * sizeof *src);
	for (uint64_t s = 0; s < n; s++)
		ref_bfs(g, (uint32_t)s, dist + s * n, q);
	/* Shortest-path counts: sp[s][t] = sum over t's parents. */
	for (uint64_t s = 0; s < n; s++) {
		int32_t *d = dist + s * n;
		double *c = sp + s * n;

		for (uint64_t v = 0; v < n; v++)
			c[v] = v == s;
		for (int32_t l = 1; l <= (int32_t)n; l++)
			for (uint64_t v = 0; v < n; v++) {
				if (d[v] != l)
					continue;
				for (uint64_t e = g->off[v]; e < g->off[v + 1]; e++)
					if (d[g->adj[e]] == l - 1)
						c[v] += c[g->adj[e]];
			}
	}

	/* BFS from the vertex of highest degree. */
	uint32_t root = graph_max_degree_vertex(g);
	count = bfs_compute(g, root, parent, level);
	if (!bfs_check(g, root, parent, level, count))
		ok = false, why = "bfs check";
	for (uint64_t v = 0; v < n; v++)
		if ((int64_t)(level[v] == GRAPH_NONE ? -1 : (int64_t)level[v]) !=
		    dist[root * n + v])
			ok = false, why = "bfs levels";

	/* PageRank against a serial iteration. */
	rank = pagerank_compute(g, 20, pa, pb, pc, &delta);
	for (uint64_t v = 0; v < n; v++)
		ref[v] = 1.0 / (double)n;
	for (int it = 0; it < 20; it++) {
		double dang = 0, *nx = bref;

		for (uint64_t v = 0; v < n; v++)
			if (graph_deg(g, v) == 0)
				dang += ref[v];
		for (uint64_t v = 0; v < n; v++) {
			double s = 0;

			for (uint64_t e = g->off[v]; e < g->off[v + 1]; e++)
				s += ref[g->adj[e]] / (double)graph_deg(g, g->adj[e]);
			nx[v] = (1 - PR_DAMPING + PR_DAMPING * dang) / (double)n +
			    PR_DAMPING * s;
		}
		memcpy(ref, nx, n * sizeof *ref);
	}
	if (!pagerank_check(g, rank, &sum))
		ok = false, why = "pagerank check";
	for (uint64_t v = 0; v < n; v++)
		if (fabs(rank[v] - ref[v]) > 1e-12)
			ok = false, why = "pagerank values";

	/* Components: the least id that reaches v. */
	cc_compute(g, q);
	if (!cc_check(g, q, &ncomp, &largest))
		ok = false, why = "cc check";
	for (uint64_t v = 0; v < n; v++) {
		uint64_t least = v;

		for (uint64_t s = 0; s < n; s++)
			if (dist[s * n + v] >= 0 && s < least)
				least = s;
		if (q[v] != least)
			ok = false, why = "cc labels";
	}

	/* BC from every source against all-pairs counting. */
	for (uint64_t v = 0; v < n; v++)
		src[v] = (uint32_t)v;
	if (!bc_compute(g, src, (unsigned)n, bc, &cs))
		ok = false, why = "bc identity";
	for (uint64_t v = 0; v < n; v++) {
		double want = 0;

		for (uint64_t s = 0; s < n; s++)
			for (uint64_t t = 0; t < n; t++) {
				int32_t dst = dist[s * n + t];

				if (s == v || t == v || s == t || dst < 0 ||
				    dist[s * n + v] < 0 || dist[v * n + t] < 0 ||
				    dist[s * n + v] + dist[v * n + t] != dst)
					continue;
				want += sp[s * n + v] * sp[v * n + t] /
				    sp[s * n + t];
			}
		bref[v] = want;
		if (fabs(bc[v] - want) > 1e-9 * (want > 1 ? want : 1) ||
		    (bc_want != NULL && fabs(bc[v] - bc_want[v]) > 1e-9))
			ok = false, why = "bc values";
	}

	/* Radii from every source: exact eccentricities. */
	if (n <= 64) {
		radii_compute(g, src, (unsigned)n, est, va, vb);
		if (!radii_check(g, src[0], est, d0, &ecc))
			ok = false, why = "radii check";
		for (uint64_t v = 0; v < n; v++) {
			int32_t e = -1;

			for (uint64_t t = 0; t < n; t++)
				if (dist[v * n + t] > e)
					e = dist[v * n + t];
			if (graph_deg(g, v) == 0)
				e = 0; /* a source alone: 0 */
			if (est[v] != e)
				ok = false, why = "radii values";
		}
	}
	printf("selftest %-10s n=%-3" PRIu64 " m=%-4" PRIu64 " %s%s\n", name, n,
	    g->m, ok ? "ok" : "WRONG ", why);
	free(dist);
	free(sp);
	free(q);
	free(src);
	free(parent);
	free(level);
	free(pa);
	free(pb);
	free(pc);
	free(ref);
	free(bc);
	free(bref);
	free(va);
	free(vb);
	free(est);
	free(d0);
	return ok;
}

/* Builds a small graph from pairs (a, b) and self-tests it. */
static bool
selftest_pairs(const char *name, uint64_t n, const uint32_t *pairs,
    uint64_t m, const double *bc_want)
{
	struct graph_edge *el = graph_xmalloc((m ? m : 1) * sizeof *el);
	struct graph g;
	bool ok;

	for (uint64_t i = 0; i < m; i++) {
		el[i].u = pairs[2 * i];
		el[i].v = pairs[2 * i + 1];
	}
	if (graph_build(&g, n, el, m) < 0 || graph_validate(&g) < 0) {
		printf("selftest %s WRONG build\n", name);
		return false;
	}
	ok = selftest_graph(name, &g, bc_want);
	graph_free(&g);
	return ok;
}

/*
 * The kernels on small graphs with known answers (a path, a star, a cycle,
 * a clique, two components, random graphs against brute force). Prints one
 * line per graph; returns true if all agree.
 */
bool
graph_selftest(void)
{
	/* path 0-1-2-3-4, given twice and with a self loop (dropped) */
	static const uint32_t path[] = { 0, 1, 1, 2, 2, 3, 3, 4, 1, 0, 2, 2 };
	/* BC over ordered pairs: 1 lies on (0,2) (0,3) (0,4), both ways */
	static const double path_bc[] = { 0, 6, 8, 6, 0 };
	static const uint32_t star[] = { 0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6 };
	static const double star_bc[] = { 30, 0, 0, 0, 0, 0, 0 };
	static const uint32_t cycle[] = { 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6,
		6, 7, 7, 0 };
	static const uint32_t clique[] = { 0, 1, 0, 2, 0, 3, 0, 4, 1, 2, 1, 3,
		1, 4, 2, 3, 2, 4, 3, 4 };
	/* a triangle 1-3-5, a path 0-2-4-6, vertex 7 alone */
	static const uint32_t two[] = { 1, 3, 3, 5, 5, 1, 0, 2, 2, 4, 4, 6 };
	bool ok = true;

	ok &= selftest_pairs("path", 5, path, 6, path_bc);
	ok &= selftest_pairs("star", 7, star, 6, star_bc);
	ok &= selftest_pairs("cycle", 8, cycle, 8, NULL);
	ok &= selftest_pairs("clique", 5, clique, 10, NULL);
	ok &= selftest_pairs("two+alone", 8, two, 6, NULL);
	for (uint64_t seed = 1; seed <= 4; seed++) {
		uint32_t pairs[2 * 90];
		char name[16];

		for (unsigned i = 0; i < 90; i++) {
			pairs[2 * i] = (uint32_t)(graph_mix(seed, i, 1) % 48);
			pairs[2 * i + 1] = (uint32_t)(graph_mix(seed, i, 2) % 48);
		}
		snprintf(name, sizeof name, "random%" PRIu64, seed);
		ok &= selftest_pairs(name, 48, pairs, seed == 4 ? 40 : 90, NULL);
	}
	{
		/* A Kronecker graph of 64 vertices, as the generator makes. */
		struct graph_edge *el = graph_xmalloc(64 * 4 * sizeof *el);
		struct graph g;

		graph_kronecker(el, 6, 4, 7);
		if (graph_build(&g, 64, el, 64 * 4) < 0 ||
		    graph_validate(&g) < 0) {
			printf("selftest kronecker WRONG build\n");
			ok = false;
		} else {
			ok &= selftest_graph("kronecker", &g, NULL);
			graph_free(&g);
		}
	}
	return ok;
}
