/* SPDX-License-Identifier: Apache-2.0 */
/*
 * graph-io.c - the graph workload's files (contrib/graph/README.md
 * describes them byte by byte):
 *
 *   edge file   a header and (u, v) pairs of 32-bit ids: any graph from
 *               elsewhere; built into CSR when read
 *   CSR pair    PREFIX.off (offsets) and PREFIX.adj (neighbours), each with
 *               a header: read as they are, or mapped from the memory node
 *               with fam_alloc_file() by graph-fam, so that vertex data and
 *               edge data are regions of their own
 *
 * All integers are little-endian; files are read and written front to back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph.h"

#ifdef GRAPH_FAM
#include "famd-client/famd-client.h"
#endif

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the graph files are little-endian; this build assumes a little-endian CPU"
#endif

#define EDGE_MAGIC "FAMGEDGE"
#define OFF_MAGIC  "FAMGCSRO"
#define ADJ_MAGIC  "FAMGCSRA"
#define GRAPH_FILE_VERSION 1

/* The edge file's header (32 bytes, little-endian). */
struct edge_header {
	char magic[8];    /* "FAMGEDGE" */
	uint32_t version; /* 1 */
	uint32_t hsize;   /* bytes of header: 32 */
	uint64_t n;       /* vertices: every id is below n */
	uint64_t m;       /* (u, v) records that follow */
};

/* The header of PREFIX.off and PREFIX.adj (64 bytes, little-endian). */
struct csr_header {
	char magic[8];     /* "FAMGCSRO" (offsets) or "FAMGCSRA" (adjacency) */
	uint32_t version;  /* 1 */
	uint32_t hsize;    /* bytes of header: 64 */
	uint64_t n;        /* vertices */
	uint64_t m;        /* adjacency entries (twice the edges) */
	uint64_t checksum; /* graph_checksum() of the graph; equal in both */
	uint8_t zero[24];  /* zero */
};

_Static_assert(sizeof(struct edge_header) == 32, "edge header is 32 bytes");
_Static_assert(sizeof(struct csr_header) == 64, "CSR header is 64 bytes");

/* Writes all of buf to fd. 0 or -1. */
static int
write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t k = write(fd, p, len > (1u << 30) ? (1u << 30) : len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* Reads exactly len bytes from fd into buf. 0, or -1 (short or error). */
static int
read_all(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t k = read(fd, p, len > (1u << 30) ? (1u << 30) : len);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* Opens path for writing, truncated. The fd or -1 (message printed). */
static int
create_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		fprintf(stderr, "graph: %s: %s\n", path, strerror(errno));
	return fd;
}

/* Closes fd of path after writing; 0 or -1 (message printed). */
static int
close_written(int fd, const char *path, int rc)
{
	if (rc == 0 && fsync(fd) < 0 && errno != EINVAL)
		rc = -1;
	if (close(fd) < 0)
		rc = -1;
	if (rc < 0)
		fprintf(stderr, "graph: writing %s: %s\n", path,
		    strerror(errno ? errno : EIO));
	return rc;
}

/* Writes g's edges (u < v, once each) as an edge file. 0 or -1. */
int
graph_write_edges(const struct graph *g, const char *path)
{
	struct edge_header h;
	struct graph_edge buf[8192];
	size_t k = 0;
	int fd = create_file(path), rc;

	if (fd < 0)
		return -1;
	memset(&h, 0, sizeof h);
	memcpy(h.magic, EDGE_MAGIC, 8);
	h.version = GRAPH_FILE_VERSION;
	h.hsize = sizeof h;
	h.n = g->n;
	h.m = g->m / 2;
	rc = write_all(fd, &h, sizeof h);
	for (uint64_t u = 0; u < g->n && rc == 0; u++) {
		for (uint64_t e = g->off[u]; e < g->off[u + 1] && rc == 0; e++) {
			if (g->adj[e] <= u)
				continue;
			buf[k].u = (uint32_t)u;
			buf[k].v = g->adj[e];
			if (++k == sizeof buf / sizeof buf[0]) {
				rc = write_all(fd, buf, sizeof buf);
				k = 0;
			}
		}
	}
	if (rc == 0 && k > 0)
		rc = write_all(fd, buf, k * sizeof buf[0]);
	return close_written(fd, path, rc);
}

/* Reads an edge file and builds g from it. 0 or -1 (message printed). */
int
graph_read_edges(struct graph *g, const char *path)
{
	struct edge_header h;
	struct graph_edge *el;
	off_t size;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0) {
		fprintf(stderr, "graph: %s: %s\n", path, strerror(errno));
		return -1;
	}
	size = lseek(fd, 0, SEEK_END);
	if (size < (off_t)sizeof h || lseek(fd, 0, SEEK_SET) != 0 ||
	    read_all(fd, &h, sizeof h) < 0 ||
	    memcmp(h.magic, EDGE_MAGIC, 8) != 0 ||
	    h.version != GRAPH_FILE_VERSION || h.hsize != sizeof h ||
	    h.n == 0 || h.n > ((uint64_t)1 << 32) - 1 ||
	    h.m > ((uint64_t)1 << 40) ||
	    (uint64_t)size != sizeof h + h.m * sizeof(struct graph_edge)) {
		fprintf(stderr, "graph: %s: not an edge file (bad header or "
		    "length)\n", path);
		close(fd);
		return -1;
	}
	el = graph_xmalloc(h.m * sizeof *el);
	rc = read_all(fd, el, h.m * sizeof *el);
	close(fd);
	if (rc < 0) {
		fprintf(stderr, "graph: %s: short read\n", path);
		free(el);
		return -1;
	}
	return graph_build(g, h.n, el, h.m);
}

/* Fills a CSR header of kind magic for g. */
static void
csr_header_init(struct csr_header *h, const char *magic,
    const struct graph *g, uint64_t checksum)
{
	memset(h, 0, sizeof *h);
	memcpy(h->magic, magic, 8);
	h->version = GRAPH_FILE_VERSION;
	h->hsize = sizeof *h;
	h->n = g->n;
	h->m = g->m;
	h->checksum = checksum;
}

/* PREFIX + suffix, malloc'd. */
static char *
csr_path(const char *prefix, const char *suffix)
{
	char *p;

	if (asprintf(&p, "%s%s", prefix, suffix) < 0) {
		fprintf(stderr, "graph: out of memory\n");
		exit(1);
	}
	return p;
}

/* Writes g as the CSR pair PREFIX.off and PREFIX.adj. 0 or -1. */
int
graph_write_csr(const struct graph *g, const char *prefix)
{
	struct csr_header h;
	uint64_t sum = graph_checksum(g);
	char *po = csr_path(prefix, ".off"), *pa = csr_path(prefix, ".adj");
	int fd, rc = -1;

	if ((fd = create_file(po)) < 0)
		goto out;
	csr_header_init(&h, OFF_MAGIC, g, sum);
	rc = write_all(fd, &h, sizeof h);
	if (rc == 0)
		rc = write_all(fd, g->off, (g->n + 1) * sizeof *g->off);
	if ((rc = close_written(fd, po, rc)) < 0)
		goto out;
	rc = -1;
	if ((fd = create_file(pa)) < 0)
		goto out;
	csr_header_init(&h, ADJ_MAGIC, g, sum);
	rc = write_all(fd, &h, sizeof h);
	if (rc == 0)
		rc = write_all(fd, g->adj, g->m * sizeof *g->adj);
	rc = close_written(fd, pa, rc);
out:
	free(po);
	free(pa);
	return rc;
}

/*
 * Checks a CSR header of kind magic against the file's length (bytes of
 * each element elem, count entries); *ref holds the other file's header, or
 * zeros the first time. 0 or -1 (message printed).
 */
static int
csr_header_check(const struct csr_header *h, const char *magic,
    uint64_t len, size_t elem, int is_off, struct csr_header *ref,
    const char *path)
{
	uint64_t count;

	if (len < sizeof *h || memcmp(h->magic, magic, 8) != 0 ||
	    h->version != GRAPH_FILE_VERSION || h->hsize != sizeof *h ||
	    h->n == 0 || h->n > ((uint64_t)1 << 32) - 1 ||
	    h->m > ((uint64_t)1 << 40)) {
		fprintf(stderr, "graph: %s: not a graph %s file\n", path,
		    is_off ? "offsets" : "adjacency");
		return -1;
	}
	count = is_off ? h->n + 1 : h->m;
	if (len < sizeof *h + count * elem) {
		fprintf(stderr, "graph: %s: shorter than its header says\n",
		    path);
		return -1;
	}
	if (ref->hsize != 0 && (ref->n != h->n || ref->m != h->m ||
	    ref->checksum != h->checksum)) {
		fprintf(stderr, "graph: %s: belongs to another graph\n", path);
		return -1;
	}
	*ref = *h;
	return 0;
}

/* Reads one CSR file into a malloc'd array; its header into *ref. */
static void *
csr_read_one(const char *path, const char *magic, size_t elem, int is_off,
    struct csr_header *ref)
{
	struct csr_header h;
	void *a;
	off_t len;
	size_t bytes;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "graph: %s: %s\n", path, strerror(errno));
		return NULL;
	}
	len = lseek(fd, 0, SEEK_END);
	if (len < 0 || lseek(fd, 0, SEEK_SET) != 0 ||
	    read_all(fd, &h, sizeof h) < 0)
		memset(&h, 0, sizeof h);
	if (csr_header_check(&h, magic, (uint64_t)(len < 0 ? 0 : len), elem,
	    is_off, ref, path) < 0) {
		close(fd);
		return NULL;
	}
	bytes = (is_off ? h.n + 1 : h.m) * elem;
	a = graph_xmalloc(bytes);
	if (read_all(fd, a, bytes) < 0) {
		fprintf(stderr, "graph: %s: short read\n", path);
		free(a);
		a = NULL;
	}
	close(fd);
	return a;
}

/* Reads the CSR pair PREFIX.off, PREFIX.adj into malloc'd arrays. */
int
graph_read_csr(struct graph *g, const char *prefix)
{
	struct csr_header ref;
	char *po = csr_path(prefix, ".off"), *pa = csr_path(prefix, ".adj");
	int rc = -1;

	memset(g, 0, sizeof *g);
	memset(&ref, 0, sizeof ref);
	g->off = csr_read_one(po, OFF_MAGIC, sizeof *g->off, 1, &ref);
	if (g->off == NULL)
		goto out;
	g->adj = csr_read_one(pa, ADJ_MAGIC, sizeof *g->adj, 0, &ref);
	if (g->adj == NULL) {
		free(g->off);
		goto out;
	}
	g->n = ref.n;
	g->m = ref.m;
	g->off_base = g->off;
	g->adj_base = g->adj;
	g->store = GRAPH_STORE_MALLOC;
	rc = graph_validate(g);
	if (rc == 0 && graph_checksum(g) != ref.checksum) {
		fprintf(stderr, "graph: %s.{off,adj}: checksum differs from "
		    "the header's\n", prefix);
		rc = -1;
	}
	if (rc < 0)
		graph_free(g);
out:
	free(po);
	free(pa);
	return rc;
}

#ifdef GRAPH_FAM
/* Maps one CSR file from the memory node; its header into *ref. */
static void *
csr_map_one(const char *path, const char *magic, size_t elem, int is_off,
    struct csr_header *ref)
{
	size_t size = 0;
	void *base = fam_alloc_file(path, FAM_FILE_SHARED, &size);

	if (base == NULL) {
		fprintf(stderr, "graph: fam_alloc_file(%s): %s\n", path,
		    strerror(errno));
		return NULL;
	}
	if (csr_header_check(base, magic, size, elem, is_off, ref, path) < 0) {
		fam_free(base);
		return NULL;
	}
	return base;
}

/*
 * Maps the CSR pair PREFIX.off, PREFIX.adj (relative to the memory node's
 * preload_dir) with fam_alloc_file(FAM_FILE_SHARED). Only in graph-fam.
 */
int
graph_map_csr_fam(struct graph *g, const char *prefix)
{
	struct csr_header ref;
	char *po = csr_path(prefix, ".off"), *pa = csr_path(prefix, ".adj");
	int rc = -1;

	memset(g, 0, sizeof *g);
	memset(&ref, 0, sizeof ref);
	g->off_base = csr_map_one(po, OFF_MAGIC, sizeof *g->off, 1, &ref);
	if (g->off_base == NULL)
		goto out;
	g->adj_base = csr_map_one(pa, ADJ_MAGIC, sizeof *g->adj, 0, &ref);
	if (g->adj_base == NULL) {
		fam_free(g->off_base);
		goto out;
	}
	g->store = GRAPH_STORE_FAM;
	g->n = ref.n;
	g->m = ref.m;
	g->off = (uint64_t *)((char *)g->off_base + sizeof ref);
	g->adj = (uint32_t *)((char *)g->adj_base + sizeof ref);
	rc = graph_validate(g);
	if (rc < 0)
		graph_free(g);
out:
	free(po);
	free(pa);
	return rc;
}
#else
/* graph is plain: only graph-fam maps files from the memory node. */
int
graph_map_csr_fam(struct graph *g, const char *prefix)
{
	(void)g;
	fprintf(stderr, "graph: -F %s: this program is not linked with "
	    "libfamd-client (graph-fam is)\n", prefix);
	return -1;
}
#endif

/* Releases g's arrays. */
void
graph_free(struct graph *g)
{
#ifdef GRAPH_FAM
	if (g->store == GRAPH_STORE_FAM) {
		fam_free(g->off_base);
		fam_free(g->adj_base);
		memset(g, 0, sizeof *g);
		return;
	}
#endif
	free(g->off_base);
	free(g->adj_base);
	memset(g, 0, sizeof *g);
}
