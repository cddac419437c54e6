/* SPDX-License-Identifier: Apache-2.0 */
/*
 * graph.h - the graph workload's shared declarations: a CSR graph, its
 * generator and files, and the five kernels with their checks.
 *
 * The graph is undirected and simple: every edge {u, v} appears in both
 * adjacency lists, each list is sorted, and there are no self loops or
 * duplicate edges. Vertex ids are 32 bits.
 */
#ifndef GRAPH_H
#define GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GRAPH_NONE UINT32_MAX /* "no vertex" in parent arrays */

enum graph_store {
	GRAPH_STORE_MALLOC, /* off and adj from malloc (the default) */
	GRAPH_STORE_FAM,    /* off and adj from fam_alloc_file, read-only */
};

struct graph {
	uint64_t n;             /* vertices */
	uint64_t m;             /* adjacency entries: twice the edges */
	uint64_t *off;          /* n + 1 offsets into adj */
	uint32_t *adj;          /* neighbours, sorted per vertex */
	void *off_base;         /* what holds off (freed by graph_free) */
	void *adj_base;         /* what holds adj */
	enum graph_store store; /* where off and adj come from */
};

/* One directed edge of an edge list (both ends are added to the graph). */
struct graph_edge {
	uint32_t u; /* source vertex */
	uint32_t v; /* target vertex */
};

/* Set by -X: every kernel spoils one result before its check. */
extern bool graph_corrupt;

/* Set by -A: every vertex array a kernel reads again is advised static. */
extern bool graph_advise;

/*
 * With -P, prints "pause WHAT" and stops the process (SIGSTOP) until a
 * harness continues it: at the start and the end of each kernel, so that
 * counters can be read around the kernel alone. Otherwise nothing.
 */
void graph_pause(const char *what, const char *name);

/* Advises p static (a dpu's static cache) when asked to and famd hears. */
void graph_advise_vertex(const void *p);

/* Seconds on the monotonic clock. */
double graph_now(void);

/* malloc() that exits with a message on failure. */
void *graph_xmalloc(size_t n);

/* A fast counter-based generator (splitmix64); *s is its state. */
uint64_t graph_rnd(uint64_t *s);

/* A well-mixed hash of (seed, a, b). */
uint64_t graph_mix(uint64_t seed, uint64_t a, uint64_t b);

/* degree of u */
static inline uint64_t
graph_deg(const struct graph *g, uint64_t u)
{
	return g->off[u + 1] - g->off[u];
}

/* ---- graph-gen.c ------------------------------------------------------- */

/*
 * Fills el[0 .. ef << scale) with Kronecker (R-MAT) edges with the Graph500
 * initiator (a .57, b .19, c .19, d .05) over 2^scale vertices whose ids are
 * then scrambled by a fixed permutation; edge i depends only on (seed, i).
 */
void graph_kronecker(struct graph_edge *el, unsigned scale, unsigned ef,
    uint64_t seed);

/*
 * Builds g (n vertices) from the m edges in el, which it frees: both
 * directions, self loops and duplicates dropped, lists sorted; memory is
 * written in order or within small windows. Returns 0 or -1 (an id >= n).
 */
int graph_build(struct graph *g, uint64_t n, struct graph_edge *el,
    uint64_t m);

/* Sorts a[0 .. n) ascending, in place, allocating nothing. */
void graph_sort_u32(uint32_t *a, uint64_t n);

/* The vertex of highest degree (the lowest id among equals). */
uint32_t graph_max_degree_vertex(const struct graph *g);

/* A hash of the whole graph, equal for equal graphs. */
uint64_t graph_checksum(const struct graph *g);

/* Releases g's arrays. */
void graph_free(struct graph *g);

/* ---- graph-io.c -------------------------------------------------------- */

/* Writes g's edges (u < v, once each) as an edge file. 0 or -1. */
int graph_write_edges(const struct graph *g, const char *path);

/* Reads an edge file and builds g from it. 0 or -1 (message printed). */
int graph_read_edges(struct graph *g, const char *path);

/* Writes g as the CSR pair PREFIX.off and PREFIX.adj. 0 or -1. */
int graph_write_csr(const struct graph *g, const char *prefix);

/* Reads the CSR pair PREFIX.off, PREFIX.adj into malloc'd arrays. */
int graph_read_csr(struct graph *g, const char *prefix);

/*
 * Maps the CSR pair PREFIX.off, PREFIX.adj (relative to the memory node's
 * preload_dir) with fam_alloc_file(FAM_FILE_SHARED). Only in graph-fam.
 */
int graph_map_csr_fam(struct graph *g, const char *prefix);

/* Checks g's structure (offsets, ids, sorted simple lists). 0 or -1. */
int graph_validate(const struct graph *g);

/* ---- graph-apps.c ------------------------------------------------------ */

/*
 * Each kernel runs, then checks its result; it prints one line
 *   NAME SECONDS details... check=SECONDS ok|WRONG
 * (SECONDS is the kernel's alone) and returns true if the check passed.
 */
bool graph_app_bfs(const struct graph *g, uint32_t root);
bool graph_app_pagerank(const struct graph *g, unsigned iters);
bool graph_app_cc(const struct graph *g);
bool graph_app_bc(const struct graph *g, unsigned sources, uint64_t seed);
bool graph_app_radii(const struct graph *g, unsigned samples, uint64_t seed);

/*
 * The kernels on small graphs with known answers (a path, a star, a cycle,
 * a clique, two components, random graphs against brute force). Prints one
 * line per graph; returns true if all agree.
 */
bool graph_selftest(void);

#endif /* GRAPH_H */
