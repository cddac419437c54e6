/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bfsreuse.c - what a buffer could save on BFS: replays contrib/graph's
 * direction-optimizing BFS, one thread, over a CSR pair (graph -W PREFIX),
 * records every access to its arrays as a chunk number, and prints per
 * step the distinct data touched by chunks and by 4 KiB pages, then the
 * chunks an LRU and Belady's optimum (evict the chunk used again last)
 * miss over the whole trace with a buffer of BUFFER bytes.
 *
 *   bfsreuse [-c CHUNK] [-b BUFFER_MIB] [-r ROOT] PREFIX
 *
 * CHUNK 65536, BUFFER_MIB 205 (a third of scale 22's footprint) and ROOT
 * 3725578 (famd-bench's, scale 22) by default. The arrays are laid out
 * one after the other, each from a chunk's start, as separate mallocs of
 * that size are under the shim: edges, offsets, parent, level, two
 * frontier bitmaps.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NONE UINT32_MAX

struct trace {
	uint32_t *c;      /* chunk numbers, consecutive repeats folded */
	uint64_t n, cap;
	uint64_t base[6]; /* each array's first byte in the layout */
	unsigned shift;   /* log2 of the chunk size */
};

static void *
xmalloc(size_t n)
{
	void *p = malloc(n);

	if (p == NULL) {
		fprintf(stderr, "bfsreuse: out of memory\n");
		exit(1);
	}
	return p;
}

static int
usage(void)
{
	fprintf(stderr, "usage: bfsreuse [-c CHUNK] [-b BUFFER_MIB] "
	    "[-r ROOT] PREFIX\n");
	return 2;
}

/* Records a touch of byte off of array a. */
static void
touch(struct trace *t, unsigned a, uint64_t off)
{
	uint32_t c = (uint32_t)((t->base[a] + off) >> t->shift);

	if (t->n > 0 && t->c[t->n - 1] == c)
		return;
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 1 << 20;
		t->c = realloc(t->c, t->cap * sizeof *t->c);
		if (t->c == NULL) {
			fprintf(stderr, "bfsreuse: out of memory\n");
			exit(1);
		}
	}
	t->c[t->n++] = c;
}

/* The arrays; the two bitmaps swap roles each step (front, next). */
enum { A_ADJ, A_OFF, A_PARENT, A_LEVEL, A_BITS0, A_BITS1 };

/* Records reading v's degree: off[v] and off[v + 1]. */
static void
touch_deg(struct trace *t, uint64_t v)
{
	touch(t, A_OFF, v * 8);
	touch(t, A_OFF, v * 8 + 8);
}

/* Reads PREFIX.SUFFIX's 64-byte header and then count items of size. */
static void *
load(const char *prefix, const char *suffix, size_t size, uint64_t *count)
{
	char path[4096];
	uint64_t hdr[8];
	FILE *f;
	void *p;

	snprintf(path, sizeof path, "%s%s", prefix, suffix);
	f = fopen(path, "r");
	if (f == NULL || fread(hdr, sizeof hdr, 1, f) != 1) {
		fprintf(stderr, "bfsreuse: %s: %s\n", path,
		    f == NULL ? strerror(errno) : "too short");
		exit(1);
	}
	*count = suffix[1] == 'o' ? hdr[2] + 1 : hdr[3]; /* n + 1, or m */
	p = xmalloc(*count * size);
	if (fread(p, size, *count, f) != *count) {
		fprintf(stderr, "bfsreuse: %s: too short\n", path);
		exit(1);
	}
	fclose(f);
	return p;
}

/* Distinct chunks in t->c[from, to), by array; returns their bytes. */
static uint64_t
distinct(const struct trace *t, uint64_t from, uint64_t to, uint8_t *seen,
    uint64_t nchunks)
{
	uint64_t d = 0;

	memset(seen, 0, nchunks);
	for (uint64_t i = from; i < to; i++)
		if (!seen[t->c[i]]) {
			seen[t->c[i]] = 1;
			d++;
		}
	return d << t->shift;
}

/* Misses of an LRU of cap chunks over t (a list in use order). */
static uint64_t
lru_misses(const struct trace *t, uint64_t nchunks, uint64_t cap)
{
	uint32_t *prev = xmalloc(nchunks * 4), *next = xmalloc(nchunks * 4);
	uint8_t *in = xmalloc(nchunks);
	uint32_t head = NONE, tail = NONE; /* head: used last */
	uint64_t used = 0, miss = 0;

	memset(in, 0, nchunks);
	for (uint64_t i = 0; i < t->n; i++) {
		uint32_t c = t->c[i];

		if (in[c]) { /* unlink */
			if (prev[c] != NONE)
				next[prev[c]] = next[c];
			else
				head = next[c];
			if (next[c] != NONE)
				prev[next[c]] = prev[c];
			else
				tail = prev[c];
		} else {
			miss++;
			if (used == cap) {
				uint32_t v = tail;

				tail = prev[v];
				if (tail != NONE)
					next[tail] = NONE;
				else
					head = NONE;
				in[v] = 0;
				used--;
			}
			in[c] = 1;
			used++;
		}
		prev[c] = NONE;
		next[c] = head;
		if (head != NONE)
			prev[head] = c;
		head = c;
		if (tail == NONE)
			tail = c;
	}
	free(prev);
	free(next);
	free(in);
	return miss;
}

/* Misses of Belady's optimum with cap chunks: a max-heap on next use. */
static uint64_t
opt_misses(const struct trace *t, uint64_t nchunks, uint64_t cap)
{
	uint64_t *nextuse = xmalloc(t->n * 8), *last = xmalloc(nchunks * 8);
	uint64_t *cur = xmalloc(nchunks * 8), *hk = xmalloc(t->n * 8);
	uint32_t *hc = xmalloc(t->n * 4);
	uint8_t *in = xmalloc(nchunks);
	uint64_t hn = 0, used = 0, miss = 0;

	memset(in, 0, nchunks);
	for (uint64_t c = 0; c < nchunks; c++)
		last[c] = UINT64_MAX;
	for (uint64_t i = t->n; i-- > 0;) {
		nextuse[i] = last[t->c[i]];
		last[t->c[i]] = i;
	}
	for (uint64_t i = 0; i < t->n; i++) {
		uint32_t c = t->c[i];
		uint64_t j;

		if (!in[c]) {
			miss++;
			while (used == cap) { /* pop until a live entry */
				uint64_t k = hk[0], kk = hk[--hn], p = 0;
				uint32_t v = hc[0], vv = hc[hn];

				for (;;) {
					uint64_t l = 2 * p + 1;

					if (l >= hn)
						break;
					if (l + 1 < hn && hk[l + 1] > hk[l])
						l++;
					if (hk[l] <= kk)
						break;
					hk[p] = hk[l];
					hc[p] = hc[l];
					p = l;
				}
				hk[p] = kk;
				hc[p] = vv;
				if (in[v] && cur[v] == k) {
					in[v] = 0;
					used--;
				}
			}
			in[c] = 1;
			used++;
		}
		cur[c] = nextuse[i];
		for (j = hn++; j > 0 && hk[(j - 1) / 2] < nextuse[i];
		    j = (j - 1) / 2) {
			hk[j] = hk[(j - 1) / 2];
			hc[j] = hc[(j - 1) / 2];
		}
		hk[j] = nextuse[i];
		hc[j] = c;
	}
	free(nextuse);
	free(last);
	free(cur);
	free(hk);
	free(hc);
	free(in);
	return miss;
}

/* One BFS step, bottom-up, recorded: returns the vertices found. */
static uint64_t
step_up(struct trace *t, const uint64_t *off, const uint32_t *adj,
    uint64_t n, uint32_t *parent, uint32_t *level, const uint64_t *front,
    uint64_t *next, unsigned a_front, uint32_t depth, uint64_t *ne)
{
	uint64_t words = (n + 63) / 64, nn = 0;

	for (uint64_t w = 0; w < words; w++) {
		uint64_t word = 0;

		for (unsigned b = 0; b < 64 && w * 64 + b < n; b++) {
			uint64_t v = w * 64 + b;

			touch(t, A_PARENT, v * 4);
			if (parent[v] != NONE)
				continue;
			touch_deg(t, v);
			for (uint64_t e = off[v]; e < off[v + 1]; e++) {
				uint32_t u = adj[e];

				touch(t, A_ADJ, e * 4);
				touch(t, a_front, u / 64 * 8);
				if (front[u / 64] >> (u % 64) & 1) {
					parent[v] = u;
					level[v] = depth;
					touch(t, A_LEVEL, v * 4);
					word |= 1ull << b;
					nn++;
					*ne += off[v + 1] - off[v];
					break;
				}
			}
		}
		next[w] = word;
		touch(t, a_front ^ 1, w * 8);
	}
	return nn;
}

/* One BFS step, top-down, recorded: returns the vertices found. */
static uint64_t
step_down(struct trace *t, const uint64_t *off, const uint32_t *adj,
    uint64_t n, uint32_t *parent, uint32_t *level, const uint64_t *front,
    uint64_t *next, unsigned a_front, uint32_t depth, uint64_t *ne)
{
	uint64_t words = (n + 63) / 64, nn = 0;

	memset(next, 0, words * 8);
	for (uint64_t w = 0; w < words; w++) {
		touch(t, a_front, w * 8);
		for (uint64_t bits = front[w]; bits != 0; bits &= bits - 1) {
			uint64_t u = w * 64 + (uint64_t)__builtin_ctzll(bits);

			touch_deg(t, u);
			for (uint64_t e = off[u]; e < off[u + 1]; e++) {
				uint32_t v = adj[e];

				touch(t, A_ADJ, e * 4);
				touch(t, A_PARENT, (uint64_t)v * 4);
				if (parent[v] != NONE)
					continue;
				parent[v] = (uint32_t)u;
				level[v] = depth;
				touch(t, A_LEVEL, (uint64_t)v * 4);
				next[v / 64] |= 1ull << (v % 64);
				touch(t, a_front ^ 1, v / 64 * 8);
				touch_deg(t, v);
				nn++;
				*ne += off[v + 1] - off[v];
			}
		}
	}
	return nn;
}

int
main(int argc, char **argv)
{
	uint64_t chunk = 65536, buffer = 205 << 20, n1, m, nchunks, end = 0;
	uint32_t root = 3725578;
	struct trace tc = { 0 }, tp = { 0 };
	int opt;

	while ((opt = getopt(argc, argv, "c:b:r:")) != -1) {
		switch (opt) {
		case 'c': chunk = strtoull(optarg, NULL, 0); break;
		case 'b': buffer = strtoull(optarg, NULL, 0);
			if (buffer > (UINT64_C(1) << 40))
				return usage();
			buffer <<= 20;
			break;
		case 'r': root = (uint32_t)strtoul(optarg, NULL, 0); break;
		default: return usage();
		}
	}
	if (optind + 1 != argc || chunk < 4096 || (chunk & (chunk - 1)))
		return usage();
	uint64_t *off = load(argv[optind], ".off", 8, &n1);
	uint32_t *adj = load(argv[optind], ".adj", 4, &m);
	uint64_t n = n1 - 1, words = (n + 63) / 64;
	uint64_t size[6] = { m * 4, n1 * 8, n * 4, n * 4, words * 8, words * 8 };

	if (root >= n) {
		fprintf(stderr, "bfsreuse: root %" PRIu32 " >= %" PRIu64 "\n",
		    root, n);
		return 2;
	}
	tc.shift = (unsigned)__builtin_ctzll(chunk);
	tp.shift = 12;
	for (unsigned a = 0; a < 6; a++) {
		tc.base[a] = tp.base[a] = end;
		end += (size[a] + chunk - 1) / chunk * chunk;
	}
	nchunks = end >> tc.shift;

	uint32_t *parent = xmalloc(n * 4), *level = xmalloc(n * 4);
	uint64_t *front = calloc(words, 8), *next = calloc(words, 8);
	uint64_t fe = off[root + 1] - off[root], nf = 1;
	uint8_t *seen = xmalloc(end >> 12);
	unsigned a_front = A_BITS0;

	if (buffer / chunk == 0) {
		fprintf(stderr, "bfsreuse: a buffer of %" PRIu64 " MiB holds no "
		    "chunk of %" PRIu64 " bytes\n", buffer >> 20, chunk);
		return 2;
	}
	if (front == NULL || next == NULL) {
		fprintf(stderr, "bfsreuse: out of memory\n");
		return 1;
	}

	memset(parent, 0xff, n * 4);
	memset(level, 0xff, n * 4);
	parent[root] = root;
	level[root] = 0;
	front[root / 64] |= 1ull << (root % 64);
	printf("step direction  found    distinct: by %" PRIu64 " KiB chunks, "
	    "by 4 KiB pages (MB)\n", chunk >> 10);
	for (uint32_t depth = 1; nf > 0; depth++) {
		uint64_t ne = 0, c0 = tc.n, p0 = tp.n, nn;
		bool up = fe > m / 20;

		/* the step twice, once per granule; the second on a copy */
		for (int pass = 0; pass < 2; pass++) {
			struct trace *t = pass == 0 ? &tc : &tp;
			uint32_t *pa = parent, *le = level;

			if (pass == 0) {
				pa = xmalloc(n * 4);
				le = xmalloc(n * 4);
				memcpy(pa, parent, n * 4);
				memcpy(le, level, n * 4);
			}
			ne = 0;
			nn = (up ? step_up : step_down)(t, off, adj, n, pa, le,
			    front, next, a_front, depth, &ne);
			if (pass == 0) {
				free(pa);
				free(le);
			}
		}
		printf("%4u %-9s %8" PRIu64 " %12.0f %12.0f\n", depth,
		    up ? "bottom-up" : "top-down", nn,
		    distinct(&tc, c0, tc.n, seen, nchunks) / 1e6,
		    distinct(&tp, p0, tp.n, seen, end >> 12) / 1e6);
		tp.n = 0; /* pages: counted per step only */
		nf = nn;
		fe = ne;
		uint64_t *x = front;
		front = next;
		next = x;
		a_front ^= 1;
	}
	uint64_t cap = buffer / chunk, lru = lru_misses(&tc, nchunks, cap);
	uint64_t best = opt_misses(&tc, nchunks, cap);

	printf("buffer %" PRIu64 " MiB (%" PRIu64 " chunks): LRU misses %"
	    PRIu64 " (%.2f GB), optimum %" PRIu64 " (%.2f GB)\n",
	    buffer >> 20, cap, lru, (double)(lru * chunk) / 1e9, best,
	    (double)(best * chunk) / 1e9);
	return 0;
}
