/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-replica.c - replicate:N: each chunk of a region on N memory nodes
 * (and the placement and states of ec:K+M's fragments, host-ec.c).
 *
 * Owns: where the copies of a column live (host_replica_node), which copy
 * a read goes to (host_chunk_route: the one expected to answer first,
 * host-hedge.c's estimates), each copy's stale bits, making a
 * copy's region again on a node that restarted empty, and the background
 * rebuild (h->rb) that copies stale chunks from a copy that has them (a
 * fragment: host_ec_rebuild_start decodes it from K others).
 * States of a copy (struct stripe):
 *   up to date  not gone, its stale bit clear for the row: reads may go
 *               there
 *   stale       its bit set for a row: a write-back could not reach it, or
 *               a read from it failed; the rebuild copies the row to it
 *   gone        its node restarted (its region there is lost): made again
 *               (REGION_CREATE) once the node is up, every row stale then
 * A chunk whose copies are all stale or gone is lost: its faults get
 * SIGBUS, never wrong data.
 * Locks: none; everything runs on the control loop.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"

#define REBUILD_BURST_NS (200ull * 1000000u) /* tokens kept at most */
#define REPLICA_JSON_REGIONS 64 /* regions listed one by one in status */

/* Returns the memory node of copy k of column col (the next k nodes). */
unsigned
host_replica_node(unsigned col, unsigned k, unsigned nnodes)
{
	return (col + k) % nnodes;
}

/*
 * Chooses the node of copy k of column col of a new region, for each
 * (place[k * width + col]): the first from node (col + k) on that is up
 * and holds no other copy of the column. A copy that no node up can take
 * goes to the first other node (that is down: place[] + nnodes), to be
 * made when it is back (host_replica_defer), when its column has K copies
 * on nodes up (ec:K+M; k is 0 otherwise: one copy); else -EHOSTDOWN. One
 * copy: on node col, up, or -EHOSTDOWN. up_only false (the dpu places it):
 * node (col + k), up or not.
 */
int
host_replica_place(const struct host *h, unsigned width, unsigned copies,
    unsigned k_ec, bool up_only, unsigned place[])
{
	unsigned n = h->nnodes, need = k_ec > 0 ? k_ec : 1;

	for (unsigned i = 0; i < width * copies && !up_only; i++)
		place[i] = host_replica_node(i % width, i / width, n);
	if (!up_only)
		return 0;
	for (unsigned col = 0; col < width; col++) {
		uint32_t used = 0;
		unsigned up = 0;

		for (unsigned k = 0; k < copies; k++) {
			unsigned pick = UINT_MAX, down = UINT_MAX;

			for (unsigned j = 0; j < n; j++) {
				unsigned x = (col + k + j) % n;

				if (used >> x & 1)
					continue;
				if (h->nodes[x].state == MN_UP) {
					pick = x;
					break;
				}
				if (down == UINT_MAX)
					down = x;
				if (copies == 1)
					break; /* its own node only */
			}
			if (pick != UINT_MAX) {
				up++;
				place[k * width + col] = pick;
			} else if (copies > 1 && down != UINT_MAX) {
				pick = down;
				place[k * width + col] = down + n;
			} else {
				return -EHOSTDOWN;
			}
			used |= 1u << pick;
		}
		if (up < need)
			return -EHOSTDOWN;
	}
	return 0;
}

/*
 * Copy s of a new region is on a node that is down (host_replica_place):
 * its region there (of rows rows) is made once the node is up, every row
 * stale then, rebuilt from the other copies.
 */
void
host_replica_defer(struct host *h, struct stripe *s, uint64_t rows)
{
	s->remote.size = rows * host_replica_unit(h, s->r);
	s->owned = false;
	host_stripe_gone(s);
}

/*
 * Returns the copies of each chunk a region gets from ALLOC's d (0: the
 * host's redundancy; a file: 1), and K and M of ec:K+M in *k and *m (0
 * when it is not erasure-coded; fragment i is the region's copy i).
 */
unsigned
host_replica_copies(const struct host *h, uint64_t d, bool file, unsigned *k,
    unsigned *m)
{
	*k = *m = 0;
	if (file)
		return 1;
	if (d & FAM_SESSION_EC) {
		*k = (unsigned)(d >> 8 & 0xff);
		*m = (unsigned)(d & 0xff);
	} else if (d == 0 && h->ec_k > 0) {
		*k = h->ec_k;
		*m = h->ec_m;
	}
	if (*k > 0)
		return *k + *m;
	return d != 0 ? (unsigned)d : h->copies;
}

/* Returns the bytes a copy holds of each row: a chunk, or a fragment. */
uint32_t
host_replica_unit(const struct host *h, const struct region *r)
{
	return r->ec != NULL ? host_ec_frag(r) : (uint32_t)h->chunk;
}

/* Returns the chunks (rows) column col of r holds on each of its copies. */
uint64_t
host_replica_rows(const struct host *h, const struct region *r, unsigned col)
{
	uint32_t unit = host_replica_unit(h, r);

	return (r->stripes[col].remote.size + unit - 1) / unit;
}

/* Gives each copy of a replicated region its stale bits (all clear). */
int
host_replica_alloc(struct host *h, struct region *r)
{
	if (r->ncopies <= 1)
		return 0;
	if (host_ec_alloc(r) < 0)
		return -ENOMEM;
	for (unsigned i = 0; i < r->nstripes; i++) {
		uint64_t rows = host_replica_rows(h, r, i % r->width);
		struct stripe *s = &r->stripes[i];

		s->stale = calloc((rows + 63) / 64 + 1, sizeof *s->stale);
		if (s->stale == NULL)
			return -ENOMEM;
		s->nstale = 0;
	}
	return 0;
}

/* Frees the stale bits of r's copies (and its code, ec:K+M). */
void
host_replica_free(struct region *r)
{
	host_ec_free(r);
	for (unsigned i = 0; i < r->nstripes; i++) {
		free(r->stripes[i].stale);
		r->stripes[i].stale = NULL;
	}
}

/* Returns true when copy s holds the latest data of row. */
bool
host_replica_valid(const struct stripe *s, uint64_t row)
{
	return !s->gone && s->remote.size != 0 && !host_stale_test(s, row);
}

/*
 * Routes a read of chunk c of r (host_route): to its one stripe, or with
 * copies to the up-to-date one expected to answer first (host-hedge.c:
 * its node's read time lately, and the reads out there), a copy whose
 * node is out of reach last. Returns 0 (*sp the stripe, done with
 * host_route_done), -EAGAIN when an up-to-date copy may come back (its
 * node is away), -EIO when none is left. A read that had fewer copies to
 * choose from than the region has (one stale, or out of reach) counts as
 * a failover.
 */
int
host_chunk_route(struct host *h, struct region *r, uint64_t c,
    bool background, struct stripe **sp, struct fam_conn **conn,
    struct fam_mr **mr, const struct fam_remote **remote)
{
	unsigned col = (unsigned)(c % r->width), ncand = 0;
	uint64_t row = c / r->width, exp[HOST_MAX_NODES];
	unsigned cand[HOST_MAX_NODES];
	bool waits = false, fewer = false;

	*sp = &r->stripes[col];
	if (r->ec != NULL)
		return -EIO; /* a fragment is no chunk: host_ec_read() */
	if (r->ncopies <= 1)
		return host_route(h, *sp, background, conn, mr, remote);
	for (unsigned k = 0; k < r->ncopies && k < HOST_MAX_NODES; k++) {
		struct stripe *s = &r->stripes[k * r->width + col];
		uint64_t e;
		unsigned j;

		if (!host_replica_valid(s, row)) {
			fewer = true;
			continue;
		}
		e = s->node != NULL && !h->has_dpu && !host_node_usable(h, s) ?
		    UINT64_MAX : host_hedge_expect(h, s, 1);
		fewer |= e == UINT64_MAX;
		for (j = ncand; j > 0 && exp[j - 1] > e; j--) {
			cand[j] = cand[j - 1];
			exp[j] = exp[j - 1];
		}
		cand[j] = k;
		exp[j] = e;
		ncand++;
	}
	for (unsigned j = 0; j < ncand; j++) {
		struct stripe *s = &r->stripes[cand[j] * r->width + col];
		int rc = host_route(h, s, background, conn, mr, remote);

		if (rc == 0) {
			h->stats.replica_failovers += fewer || j > 0;
			host_hedge_routed(h, cand[j]);
			*sp = s;
			return 0;
		}
		waits |= rc == -EAGAIN;
	}
	return waits ? -EAGAIN : -EIO;
}

/* Returns true when a copy of chunk c of s's region other than s is valid. */
static bool
replica_other(const struct stripe *s, uint64_t c)
{
	const struct region *r = s->r;
	unsigned col = (unsigned)(c % r->width);

	for (unsigned k = 0; k < r->ncopies; k++) {
		const struct stripe *o = &r->stripes[k * r->width + col];

		if (o != s && host_replica_valid(o, c / r->width))
			return true;
	}
	return false;
}

/*
 * A read of chunk c from copy s failed with status: returns true when the
 * read should go again, to another copy. A copy whose link is alive but
 * answered wrong (a bad checksum, an error) is marked stale for the row,
 * so that the read goes elsewhere and the rebuild mends it.
 */
bool
host_replica_failover(struct host *h, struct stripe *s, uint64_t c,
    int status)
{
	if (s == NULL || s->r->ncopies <= 1 || s->r->ec != NULL || s->r->dying ||
	    !replica_other(s, c))
		return false;
	if (status != -ECONNRESET && status != -ETIMEDOUT &&
	    status != -EHOSTDOWN && status != -ENOTCONN) {
		host_stale_set(s, c / s->r->width);
		h->stats.replica_stale++;
	}
	return true;
}

/*
 * Returns r's redundancy state (enum host_redundancy_state), and in
 * *behind the copies of chunks it still has to rebuild.
 */
int
host_replica_state(const struct host *h, const struct region *r,
    uint64_t *behind)
{
	int st = HOST_RED_HEALTHY;

	*behind = 0;
	if (r->ncopies <= 1)
		return st;
	for (unsigned i = 0; i < r->nstripes; i++) {
		const struct stripe *s = &r->stripes[i];
		bool up = s->node != NULL && s->node->state == MN_UP &&
		    s->node->instance == s->instance;

		if (s->gone || !up) {
			*behind += s->gone ? host_replica_rows(h, r,
			    i % r->width) : s->nstale;
			st = HOST_RED_DEGRADED;
			continue;
		}
		*behind += s->nstale;
		if (s->nstale > 0 && st == HOST_RED_HEALTHY)
			st = HOST_RED_REBUILDING;
	}
	return st;
}

/* Completion of the REGION_CREATE that makes a gone copy again. */
static void
replica_create_done(void *ctx, int status, const uint8_t *payload,
    uint32_t len)
{
	struct stripe *s = ctx;
	struct region *r = s->r;
	struct host *h = r->cl->h;
	struct fam_region_info info;
	uint64_t rows = host_replica_rows(h, r, (unsigned)(s - r->stripes) %
	    r->width);

	s->creating = false;
	r->busy--;
	if (status == 0 && proto_get_region_info(payload, len, &info) < 0)
		status = -EPROTO;
	if (status == 0 && (r->dying || s->node->instance != s->instance)) {
		host_node_free(s->node, s->instance, info.region);
	} else if (status == 0) {
		s->remote.region = info.region;
		s->remote.rkey = info.rkey;
		s->remote.addr = info.addr;
		s->key = info.key;
		s->owned = true;
		s->leasing = false;
		s->path = SP_DIRECT;
		s->gone = false;
		for (uint64_t row = 0; row < rows; row++)
			host_stale_set(s, row);
		h->rb.recreated++;
		log_info("pid %ld: region %llu: its copy on memory node %s is "
		    "made again; %llu chunks to rebuild", (long)r->cl->pid,
		    (unsigned long long)r->handle, s->node->addr,
		    (unsigned long long)rows);
	} else if (!r->dying) {
		log_rl(LOG_INFO, "pid %ld: region %llu: cannot make its copy "
		    "again on memory node %s: %s; retrying", (long)r->cl->pid,
		    (unsigned long long)r->handle, s->node->addr,
		    strerror(-status));
	}
	host_region_idle(r);
}

/* Makes a gone copy's region again on its node, which is up again. */
static void
replica_recreate(struct host *h, struct stripe *s)
{
	struct fam_region_create rc = { 0 };
	uint8_t buf[FAM_REGION_CREATE_MIN + FAM_NAME_MAX + FAM_PATH_MAX];
	size_t len;

	if (s->creating || s->node == NULL || s->node->state != MN_UP ||
	    s->node->conn == NULL)
		return;
	rc.size = s->remote.size;
	len = proto_put_region_create(buf, sizeof buf, &rc);
	s->instance = s->node->instance;
	if (fam_conn_call(s->node->conn, FAM_MSG_REGION_CREATE, buf,
	    (uint32_t)len, replica_create_done, s) < 0)
		return;
	s->creating = true;
	s->r->busy++;
}

static void rebuild_next(struct host *h);

/* The rebuild's chunk is copied (or not): its bit, the next one. */
void
host_replica_rebuild_end(struct host *h, int status)
{
	struct host_rebuild *rb = &h->rb;
	struct region *r = rb->r;
	uint64_t row = rb->chunk / r->width;

	rb->busy = false;
	rb->r = NULL;
	r->busy--;
	if (rb->spoiled && rb->wrote && !r->dying) {
		/* A write-back raced it: its copy may have landed last. */
		host_stale_set(rb->dst, row);
	} else if (status == 0 && !rb->spoiled && !r->dying) {
		host_stale_clear(rb->dst, row);
		rb->done++;
		rb->bytes += host_replica_unit(h, r);
	} else if (status == -ENOENT && rb->wrote && !r->dying) {
		host_stripe_gone(rb->dst); /* its region is gone there: made again */
		rb->dst->owned = false;
	} else if (status < 0 && status != -ECANCELED && !r->dying) {
		log_rl(LOG_INFO, "pid %ld: region %llu: rebuilding chunk %llu "
		    "on memory node %s: %s; retrying", (long)r->cl->pid,
		    (unsigned long long)r->handle,
		    (unsigned long long)rb->chunk, rb->dst->node->addr,
		    strerror(-status));
	}
	host_region_idle(r);
	if (status == 0)
		rebuild_next(h);
}

/* Completion of the rebuild's write to the copy that was behind. */
static void
rebuild_write_done(void *ctx, int status, const uint8_t *payload,
    uint32_t len)
{
	struct host *h = ctx;

	host_route_done(h, h->rb.dst);
	host_replica_rebuild_end(h, status);
}

/* Completion of the rebuild's read from an up-to-date copy: write it. */
static void
rebuild_read_done(void *ctx, int status, const uint8_t *payload,
    uint32_t len)
{
	struct host *h = ctx;
	struct host_rebuild *rb = &h->rb;
	struct region *r = rb->r;
	struct fam_conn *conn;
	struct fam_mr *mr;
	const struct fam_remote *remote;
	unsigned si;
	uint64_t off = host_stripe_offset(h, r, rb->chunk, &si);

	host_route_done(h, rb->src);
	if (status == 0 && (r->dying || rb->spoiled))
		status = -ECANCELED;
	if (status == 0)
		status = host_route(h, rb->dst, true, &conn, &mr, &remote);
	if (status < 0) {
		host_replica_rebuild_end(h, status);
		return;
	}
	rb->wrote = true;
	status = fam_conn_writef(conn, remote, off, host_stripe_len(h,
	    rb->dst, off), rb->buf, NULL, FAM_F_BACKGROUND, rebuild_write_done,
	    h);
	if (status < 0) {
		host_route_done(h, rb->dst);
		host_replica_rebuild_end(h, status);
	}
}

/*
 * Starts copying row of copy dst from an up-to-date copy. Returns 1 when
 * started, 0 when the row needed no copy (never written: its bit is
 * cleared), -EAGAIN when it cannot go now.
 */
static int
rebuild_start(struct host *h, struct stripe *dst, uint64_t row)
{
	struct host_rebuild *rb = &h->rb;
	struct region *r = dst->r;
	unsigned col = (unsigned)(dst - r->stripes) % r->width;
	uint64_t c = row * r->width + col;
	struct fam_conn *conn;
	struct fam_mr *mr;
	const struct fam_remote *remote;
	unsigned si;
	uint64_t off = host_stripe_offset(h, r, c, &si);

	if (c >= r->nchunks || !(r->chunks[c].flags & CH_REMOTE)) {
		host_stale_clear(dst, row); /* nothing there to copy */
		return 0;
	}
	if (r->chunks[c].state == CH_EVICTING || r->chunks[c].late > 0)
		return -EAGAIN; /* its write-back brings every copy up */
	if (r->ec != NULL) {
		rb->r = r;
		rb->chunk = c;
		rb->src = NULL;
		rb->dst = dst;
		rb->spoiled = false;
		rb->wrote = false;
		if (host_ec_rebuild_start(h, dst, c) < 0) {
			rb->r = NULL;
			return -EAGAIN;
		}
		rb->busy = true;
		r->busy++;
		return 1;
	}
	for (unsigned k = 0; k < r->ncopies; k++) {
		struct stripe *s = &r->stripes[k * r->width + col];

		if (s == dst || !host_replica_valid(s, row) ||
		    host_route(h, s, true, &conn, &mr, &remote) < 0)
			continue;
		rb->r = r;
		rb->chunk = c;
		rb->src = s;
		rb->dst = dst;
		rb->spoiled = false;
		rb->wrote = false;
		if (fam_conn_readf(conn, remote, off, host_stripe_len(h, s, off),
		    rb->buf, NULL, FAM_F_BACKGROUND, rebuild_read_done, h) < 0) {
			host_route_done(h, s);
			rb->r = NULL;
			return -EAGAIN;
		}
		rb->busy = true;
		r->busy++;
		return 1;
	}
	return -EAGAIN;
}

/* Starts the next copy of a stale chunk of r the tokens allow; true if so. */
static bool
rebuild_region(struct host *h, struct region *r)
{
	for (unsigned i = 0; i < r->nstripes; i++) {
		struct stripe *s = &r->stripes[i];
		uint64_t rows;

		if (s->gone || s->nstale == 0 || !host_node_usable(h, s) ||
		    !s->owned)
			continue;
		rows = host_replica_rows(h, r, i % r->width);
		for (uint64_t row = 0; row < rows && s->nstale > 0; row++) {
			int rc;

			if (s->stale[row / 64] == 0) {
				row |= 63;
				continue;
			}
			if (!host_stale_test(s, row))
				continue;
			if (h->rb.tokens < h->chunk)
				return true;
			rc = rebuild_start(h, s, row);
			if (rc == 1) {
				h->rb.tokens -= h->chunk;
				return true;
			}
		}
	}
	return false;
}

/* Starts the next chunk copy when none is in flight and tokens allow. */
static void
rebuild_next(struct host *h)
{
	if (h->rb.busy || h->stopping)
		return;
	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next)
		for (struct region *r = cl->regions; r != NULL; r = r->next)
			if (r->ncopies > 1 && !r->dying && rebuild_region(h, r))
				return;
}

/*
 * Drives the rebuild (each tick): tokens at rebuild_rate, gone copies made
 * again, and the next stale chunk copied when none is in flight.
 */
void
host_replica_tick(struct host *h)
{
	struct host_rebuild *rb = &h->rb;
	uint64_t now = mono_ns(), cap;

	rb->rate = (uint64_t)cfg_int(h->d->cfg, CFG_HOST_REBUILD_RATE);
	cap = rb->rate * (REBUILD_BURST_NS / 1000000u) / 1000u;
	if (cap < h->chunk)
		cap = h->chunk;
	if (rb->last_ns != 0)
		rb->tokens += rb->rate * ((now - rb->last_ns) / 1000u) / 1000000u;
	rb->last_ns = now;
	if (rb->tokens > cap)
		rb->tokens = cap;
	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next)
		for (struct region *r = cl->regions; r != NULL; r = r->next)
			for (unsigned i = 0; i < r->nstripes && r->ncopies > 1 &&
			    !r->dying; i++)
				if (r->stripes[i].gone)
					replica_recreate(h, &r->stripes[i]);
	rebuild_next(h);
}

/* Makes the rebuild's chunk buffer; 0 or -ENOMEM. */
int
host_replica_init(struct host *h)
{
	h->rb.buf = malloc(h->chunk);
	return h->rb.buf != NULL ? 0 : -ENOMEM;
}

/* Frees the rebuild's buffer (nothing of it is in flight any more). */
void
host_replica_fini(struct host *h)
{
	free(h->rb.buf);
	h->rb.buf = NULL;
	free(h->rb.ecbuf);
	h->rb.ecbuf = NULL;
}

/* Returns the name of a redundancy state. */
static const char *
replica_state_name(int st)
{
	return st == HOST_RED_DEGRADED ? "degraded" :
	    st == HOST_RED_REBUILDING ? "rebuilding" : "healthy";
}

/* Writes r's redundancy mode (none, replicate:N, ec:K+M) into buf. */
static void
replica_mode(const struct region *r, unsigned copies, unsigned k,
    unsigned m, char *buf, size_t size)
{
	if (r != NULL) {
		copies = r->ncopies;
		k = host_ec_k(r);
		m = r->ncopies - k;
	}
	if (k > 0)
		snprintf(buf, size, "ec:%u+%u", k, m);
	else if (copies <= 1)
		snprintf(buf, size, "none");
	else
		snprintf(buf, size, "replicate:%u", copies);
}

/* Describes one region's redundancy: mode, state, chunks behind. */
static json_t *
replica_region_json(const struct region *r, int st, uint64_t behind)
{
	char mode[32];

	replica_mode(r, 0, 0, 0, mode, sizeof mode);
	return json_pack("{s:I,s:I,s:s,s:s,s:I,s:I}",
	    "pid", (json_int_t)r->cl->pid, "region", (json_int_t)r->handle,
	    "mode", mode, "state", replica_state_name(st),
	    "chunks", (json_int_t)r->nchunks,
	    "to_rebuild", (json_int_t)behind);
}

/*
 * Describes the redundancy of every region: the worst state, progress, and
 * each region (up to REPLICA_JSON_REGIONS, the worst first).
 */
json_t *
host_replica_json(struct host *h)
{
	int worst = HOST_RED_HEALTHY;
	uint64_t behind = 0, regions = 0, degraded = 0, rebuilding = 0;
	char mode[32], quorum[16];
	json_t *each = json_array(), *o;

	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next)
		for (struct region *r = cl->regions; r != NULL; r = r->next) {
			uint64_t b;
			int st = host_replica_state(h, r, &b);

			if (r->ncopies <= 1)
				continue;
			if (json_array_size(each) < REPLICA_JSON_REGIONS) {
				if (st == HOST_RED_HEALTHY)
					json_array_append_new(each,
					    replica_region_json(r, st, b));
				else
					json_array_insert_new(each, 0,
					    replica_region_json(r, st, b));
			}
			regions++;
			behind += b;
			degraded += st == HOST_RED_DEGRADED;
			rebuilding += st == HOST_RED_REBUILDING;
			if (st > worst)
				worst = st;
		}
	replica_mode(NULL, h->copies, h->ec_k, h->ec_m, mode, sizeof mode);
	snprintf(quorum, sizeof quorum, "%u", h->write_quorum);
	o = json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
	    "mode", mode, "state", replica_state_name(worst),
	    "regions", (json_int_t)regions,
	    "regions_degraded", (json_int_t)degraded,
	    "regions_rebuilding", (json_int_t)rebuilding,
	    "chunks_to_rebuild", (json_int_t)behind,
	    "chunks_rebuilt", (json_int_t)h->rb.done,
	    "bytes_rebuilt", (json_int_t)h->rb.bytes,
	    "copies_made_again", (json_int_t)h->rb.recreated,
	    "rebuild_rate", (json_int_t)h->rb.rate,
	    "failovers", (json_int_t)h->stats.replica_failovers);
	json_object_set_new(o, "write_quorum", json_string(h->write_quorum == 0 ?
	    "all" : quorum));
	json_object_set_new(o, "writebacks_early", json_integer((json_int_t)
	    h->stats.writebacks_early));
	json_object_set_new(o, "writebacks_late", json_integer((json_int_t)
	    h->nlate));
	json_object_set_new(o, "late_writes_failed", json_integer((json_int_t)
	    h->stats.late_failed));
	json_object_set_new(o, "ec", host_ec_json(h));
	json_object_set_new(o, "hedge", host_hedge_json(h));
	json_object_set_new(o, "each", each);
	return o;
}
