/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-ec.c - redundancy = ec:K+M: each chunk of a region as K data and
 * M parity fragments (Reed-Solomon, ISA-L) on K + M memory nodes.
 *
 * Owns: the codec (host-ec.h), a region's fragment CRCs (struct host_ec),
 * the reads of a chunk from any K of its fragments (struct ec_read), the
 * encoding of a write-back, and the rebuild of one lost fragment.
 * Placement and state are host-replica.c's: fragment i of column col is
 * the region's stripe [i * width + col] (a "copy" there), on memory node
 * (col + i) % nodes, holding row r of the column at r * frag; its stale
 * bits, gone and made again as a replica's.
 * A read: K usable fragments asked for, data ones first (no decode) but
 *   for a node much slower than the others lately (ec_pick);
 *   each that fails (an error, op_timeout, a CRC that does not match the
 *   one its write-back left) is replaced by one not asked yet; K good ->
 *   the missing data fragments decoded; fewer left -> the read fails
 *   (-EHOSTDOWN while a node that has one may return, else -EIO).
 * A fragment read whose CRC does not match is marked stale: never used,
 *   rebuilt from the others.
 * Hedged (hedge_after, not 0): fragments are read into er->buf, never in
 *   place; past the deadline with reads out, their nodes count as that
 *   slow and one more fragment is asked for (up to M); the first K good
 *   decode the chunk and done() goes then; the reads still out are
 *   dropped as they come, er freed after the last.
 * Locks: none; everything runs on the control loop.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "host/host.h"
#include "host/host-ec.h"

#define EC_PARITY_US 1000u /* a parity fragment's read counted slower */
#define EC_HEDGE_FLOOR_NS (2ull * 1000000u) /* auto: 2 ms at least */

/* A region's ec:K+M state. */
struct host_ec {
	struct host_ec_codec codec;
	uint32_t *crc;  /* [c * (k + m) + i]: CRC32C of fragment i of chunk c */
	uint64_t *unknown; /* a bit per crc[] not known (restored after a
	                    * restart of famd): taken from its first read */
	uint64_t nchunks;
};

/* A read of one chunk from K of its fragments. */
struct ec_read {
	struct host *h;
	struct region *r;
	uint64_t c;
	uint8_t *dst;          /* the chunk */
	uint8_t *buf;          /* (k + m) fragments as read */
	bool background;
	fam_done_fn done;
	void *ctx;
	uint32_t asked;        /* fragments asked for (bit i) */
	uint32_t back;         /* ... whose read came back */
	uint32_t good;         /* ... read, their CRC right */
	unsigned out;          /* reads in flight */
	int err;               /* the first failure */
	bool hedge;            /* hedge_after on: every fragment read into buf
	                        * (a late one must not land in dst) */
	bool over;             /* done() called; freed once out is 0 */
	unsigned extra;        /* fragments asked for beyond K (hedges) */
	uint64_t lat_cap;      /* a hedge: nodes slower lately than this
	                        * (us) are not asked; 0: any */
	struct event *timer;   /* the next hedge (NULL: none) */
	struct ec_frag {
		struct ec_read *er;
		unsigned i;
		struct stripe *s;
		uint64_t sent_ns;
	} frag[HOST_EC_MAX];
};

/* ---- the codec ------------------------------------------------------- */

/* Sets up the code of k + m fragments of a chunk; 0, -EINVAL or -ENOMEM. */
int
host_ec_codec_init(struct host_ec_codec *ec, unsigned k, unsigned m,
    uint32_t chunk)
{
	uint32_t frag;

	memset(ec, 0, sizeof *ec);
	if (k < 1 || k > HOST_EC_MAX_K || m < 1 || m > HOST_EC_MAX_M ||
	    chunk == 0)
		return -EINVAL;
	frag = (chunk + k - 1) / k;
	frag = (frag + HOST_EC_ALIGN - 1) / HOST_EC_ALIGN * HOST_EC_ALIGN;
	ec->matrix = malloc((size_t)(k + m) * k);
	ec->tables = malloc((size_t)k * m * 32);
	if (ec->matrix == NULL || ec->tables == NULL) {
		host_ec_codec_fini(ec);
		return -ENOMEM;
	}
	ec->k = k;
	ec->m = m;
	ec->chunk = chunk;
	ec->frag = frag;
	/* any k rows of a Cauchy matrix are invertible: any k fragments do */
	gf_gen_cauchy1_matrix(ec->matrix, (int)(k + m), (int)k);
	ec_init_tables((int)k, (int)m, ec->matrix + k * k, ec->tables);
	return 0;
}

/* Frees what host_ec_codec_init made. */
void
host_ec_codec_fini(struct host_ec_codec *ec)
{
	free(ec->matrix);
	free(ec->tables);
	ec->matrix = NULL;
	ec->tables = NULL;
}

/* Returns the bytes of the chunk in data fragment i (the rest is zeros). */
uint32_t
host_ec_data_len(const struct host_ec_codec *ec, unsigned i)
{
	uint64_t at = (uint64_t)i * ec->frag;

	if (at >= ec->chunk)
		return 0;
	return ec->chunk - at < ec->frag ? (uint32_t)(ec->chunk - at) :
	    ec->frag;
}

/*
 * Splits a chunk into its k + m fragments: frag[i] points at each (a data
 * fragment in the chunk itself when whole, else in pad, k fragments of
 * room; the parity ones in parity, m fragments of room), crc[i] its CRC32C.
 */
void
host_ec_encode(const struct host_ec_codec *ec, const uint8_t *chunk,
    uint8_t *pad, uint8_t *parity, const uint8_t *frag[], uint32_t crc[])
{
	unsigned char *data[HOST_EC_MAX_K], *coding[HOST_EC_MAX_M];

	for (unsigned i = 0; i < ec->k; i++) {
		uint32_t len = host_ec_data_len(ec, i);
		uint8_t *p = pad + (size_t)i * ec->frag;

		if (len == ec->frag) {
			data[i] = (unsigned char *)chunk + (size_t)i * ec->frag;
			continue;
		}
		memcpy(p, chunk + (size_t)i * ec->frag, len);
		memset(p + len, 0, ec->frag - len);
		data[i] = p;
	}
	for (unsigned j = 0; j < ec->m; j++)
		coding[j] = parity + (size_t)j * ec->frag;
	ec_encode_data((int)ec->frag, (int)ec->k, (int)ec->m, ec->tables,
	    data, coding);
	for (unsigned i = 0; i < ec->k + ec->m; i++) {
		frag[i] = i < ec->k ? data[i] : coding[i - ec->k];
		crc[i] = proto_crc32c(0, frag[i], ec->frag);
	}
}

/*
 * Gives back the chunk from the fragments read (frag[i] NULL: not read),
 * each checked against its CRC32C crc[i] first (those that fail are set in
 * *bad and not used). scratch: room for k fragments. Returns 0, or -EIO
 * when fewer than k fragments are right: the chunk is then not written.
 */
int
host_ec_decode(const struct host_ec_codec *ec, uint8_t *const frag[],
    const uint32_t crc[], uint8_t *chunk, uint8_t *scratch, uint32_t *bad)
{
	unsigned k = ec->k, n = 0, nmiss = 0, src[HOST_EC_MAX_K];
	unsigned miss[HOST_EC_MAX_K];
	unsigned char b[HOST_EC_MAX_K * HOST_EC_MAX_K];
	unsigned char d[HOST_EC_MAX_K * HOST_EC_MAX_K];
	unsigned char c[HOST_EC_MAX_K * HOST_EC_MAX_K];
	unsigned char tables[HOST_EC_MAX_K * HOST_EC_MAX_K * 32];
	unsigned char *in[HOST_EC_MAX_K], *out[HOST_EC_MAX_K];

	*bad = 0;
	for (unsigned i = 0; i < k + ec->m; i++) {
		if (frag[i] == NULL)
			continue;
		if (proto_crc32c(0, frag[i], ec->frag) != crc[i]) {
			*bad |= 1u << i;
			continue;
		}
		if (n < k)
			src[n++] = i; /* data fragments come first */
	}
	if (n < k)
		return -EIO;
	for (unsigned i = 0; i < k; i++) {
		bool have = frag[i] != NULL && !(*bad >> i & 1);

		if (!have)
			miss[nmiss++] = i;
	}
	if (nmiss > 0) {
		for (unsigned r = 0; r < k; r++) {
			memcpy(b + r * k, ec->matrix + src[r] * k, k);
			in[r] = frag[src[r]];
		}
		if (gf_invert_matrix(b, d, (int)k) < 0)
			return -EIO; /* cannot be, with a Cauchy matrix */
		for (unsigned j = 0; j < nmiss; j++) {
			memcpy(c + j * k, d + miss[j] * k, k);
			out[j] = scratch + (size_t)j * ec->frag;
		}
		ec_init_tables((int)k, (int)nmiss, c, tables);
		ec_encode_data((int)ec->frag, (int)k, (int)nmiss, tables, in, out);
	}
	for (unsigned i = 0, j = 0; i < k; i++) {
		const uint8_t *from = j < nmiss && miss[j] == i ? out[j++] :
		    frag[i];
		uint8_t *to = chunk + (size_t)i * ec->frag;
		uint32_t len = host_ec_data_len(ec, i);

		if (len > 0 && from != to)
			memmove(to, from, len);
	}
	return 0;
}

/* ---- a region's fragments -------------------------------------------- */

/* Gives r the code of ec:k+m (its stripes' sizes follow); 0 or -errno. */
int
host_ec_new(struct host *h, struct region *r, unsigned k, unsigned m)
{
	struct host_ec *e = calloc(1, sizeof *e);
	int rc;

	if (e == NULL)
		return -ENOMEM;
	rc = host_ec_codec_init(&e->codec, k, m, (uint32_t)h->chunk);
	if (rc < 0) {
		free(e);
		return rc;
	}
	r->ec = e;
	return 0;
}

/* Gives r's fragments their CRCs, once it has its chunks; 0 or -ENOMEM. */
int
host_ec_alloc(struct region *r)
{
	struct host_ec *e = r->ec;

	if (e == NULL)
		return 0;
	e->nchunks = r->nchunks;
	e->crc = calloc(r->nchunks * (e->codec.k + e->codec.m) + 1,
	    sizeof *e->crc);
	return e->crc != NULL ? 0 : -ENOMEM;
}

/*
 * r was restored after a restart of famd, which kept no CRCs: each
 * fragment's is taken from its first read (its copies' stale marks, in
 * the restart state, tell which fragments are behind); 0 or -ENOMEM.
 */
int
host_ec_restored(struct region *r)
{
	struct host_ec *e = r->ec;
	size_t len;

	if (e == NULL)
		return 0;
	len = ((e->nchunks * (e->codec.k + e->codec.m) + 63) / 64 + 1) *
	    sizeof *e->unknown;
	e->unknown = malloc(len);
	if (e->unknown == NULL)
		return -ENOMEM;
	memset(e->unknown, 0xff, len);
	return 0;
}

/* Returns true when crc[at] is known, learning it from crc when it is not. */
static bool
ec_crc_check(struct host_ec *e, uint64_t at, uint32_t crc)
{
	if (e->unknown != NULL && (e->unknown[at / 64] >> (at % 64) & 1)) {
		e->crc[at] = crc;
		e->unknown[at / 64] &= ~(1ull << (at % 64));
	}
	return e->crc[at] == crc;
}

/* Frees r's code and CRCs. */
void
host_ec_free(struct region *r)
{
	if (r->ec == NULL)
		return;
	host_ec_codec_fini(&r->ec->codec);
	free(r->ec->crc);
	free(r->ec->unknown);
	free(r->ec);
	r->ec = NULL;
}

/* Returns the bytes of a fragment of r (0: r is not erasure-coded). */
uint32_t
host_ec_frag(const struct region *r)
{
	return r->ec != NULL ? r->ec->codec.frag : 0;
}

/* Returns the data fragments of r (0: r is not erasure-coded). */
unsigned
host_ec_k(const struct region *r)
{
	return r->ec != NULL ? r->ec->codec.k : 0;
}

/* Returns true when fragment stripe s is up to date for row and reachable. */
static bool
ec_usable(const struct host *h, const struct stripe *s, uint64_t row)
{
	return host_replica_valid(s, row) && host_node_usable(h, s) &&
	    s->owned && !s->switching;
}

/*
 * Tells whether chunk c of r can be read now: 0 when K of its fragments
 * are up to date and reachable, -EAGAIN when enough are up to date but
 * not reachable (a node away may return), -EIO when fewer than K are left.
 */
int
host_ec_check(const struct host *h, const struct region *r, uint64_t c)
{
	unsigned col = (unsigned)(c % r->width), valid = 0, usable = 0;
	uint64_t row = c / r->width;

	for (unsigned i = 0; i < r->ncopies; i++) {
		const struct stripe *s = &r->stripes[i * r->width + col];

		valid += host_replica_valid(s, row);
		usable += ec_usable(h, s, row);
	}
	if (usable >= r->ec->codec.k)
		return 0;
	return valid >= r->ec->codec.k ? -EAGAIN : -EIO;
}

static void ec_read_frag_done(void *ctx, int status, const uint8_t *payload,
    uint32_t len);

/* Returns where fragment i of er's chunk is read to. */
static uint8_t *
ec_read_to(const struct ec_read *er, unsigned i)
{
	const struct host_ec_codec *ec = &er->r->ec->codec;

	if (!er->hedge && i < ec->k && host_ec_data_len(ec, i) == ec->frag)
		return er->dst + (size_t)i * ec->frag; /* in place */
	return er->buf + (size_t)i * ec->frag;
}

/*
 * Returns how long a fragment read from node n takes lately, in us: its
 * average, halved for each second since the last sample (a node passed
 * over because it was slow is tried again in a while).
 */
static uint64_t
ec_node_lat(const struct host *h, const struct mnode *n)
{
	const struct host_ec_lat *l = &h->ec_lat[n - h->nodes];
	uint64_t age = (mono_ns() - l->at_ns) / 1000000000u;

	return age >= 32 ? 0 : l->us >> age;
}

/* Takes the time a fragment read from node n took (sent at sent_ns). */
static void
ec_node_sample(struct host *h, const struct mnode *n, uint64_t sent_ns)
{
	struct host_ec_lat *l = &h->ec_lat[n - h->nodes];
	uint64_t now = mono_ns(), us = (now - sent_ns) / 1000u;

	l->us = l->us == 0 ? us : (7 * l->us + us) / 8;
	l->at_ns = now;
}

/*
 * Returns the next fragment of er's chunk to ask for, not asked for yet nor
 * in skip, up to date and reachable: the one whose node answers fastest,
 * a parity fragment (it costs a decode) only before a data fragment whose
 * node is more than 4 times and 1 ms slower than its own; or -1.
 */
static int
ec_pick(const struct ec_read *er, uint32_t skip)
{
	const struct region *r = er->r;
	unsigned col = (unsigned)(er->c % r->width), k = r->ec->codec.k;
	uint64_t row = er->c / r->width, best_key = 0;
	int best = -1;

	for (unsigned i = 0; i < r->ncopies; i++) {
		const struct stripe *s = &r->stripes[i * r->width + col];
		uint64_t lat, key;

		if (((er->asked | skip) >> i & 1) || !ec_usable(er->h, s, row))
			continue;
		lat = ec_node_lat(er->h, s->node);
		if (er->lat_cap != 0 && lat > er->lat_cap)
			continue; /* a hedge there would not come sooner */
		key = i < k ? lat : 4 * lat + EC_PARITY_US;
		if (best < 0 || key < best_key) {
			best = (int)i;
			best_key = key;
		}
	}
	return best;
}

/*
 * Asks for fragments of er's chunk, the fastest first (ec_pick), until K
 * (and er->extra more, hedges) are good or out. Returns the reads started.
 */
static unsigned
ec_read_more(struct ec_read *er)
{
	struct host *h = er->h;
	struct region *r = er->r;
	const struct host_ec_codec *ec = &r->ec->codec;
	unsigned col = (unsigned)(er->c % r->width), started = 0;
	uint64_t row = er->c / r->width;
	uint32_t skip = 0;
	int i;

	while (__builtin_popcount(er->good) + er->out < ec->k + er->extra &&
	    (i = ec_pick(er, skip)) >= 0) {
		struct ec_frag *fr = &er->frag[i];
		struct fam_conn *conn;
		struct fam_mr *mr;
		const struct fam_remote *remote;
		int rc;

		skip |= 1u << i;
		fr->s = &r->stripes[(unsigned)i * r->width + col];
		if (host_route(h, fr->s, er->background, &conn, &mr,
		    &remote) < 0)
			continue;
		er->asked |= 1u << i;
		fr->er = er;
		fr->i = (unsigned)i;
		fr->sent_ns = mono_ns();
		rc = fam_conn_readf(conn, remote, row * ec->frag, ec->frag,
		    ec_read_to(er, (unsigned)i), NULL, er->background ?
		    FAM_F_BACKGROUND : 0, ec_read_frag_done, fr);
		if (rc < 0) {
			host_route_done(h, fr->s);
			if (er->err == 0)
				er->err = rc;
			continue;
		}
		er->out++;
		started++;
		h->stats.ec_frag_reads++;
	}
	return started;
}

/* Frees er once it is over and no fragment read of it is out. */
static void
ec_read_free(struct ec_read *er)
{
	struct region *r = er->r;

	if (!er->over || er->out > 0)
		return;
	if (er->timer != NULL)
		event_free(er->timer);
	free(er->buf);
	free(er);
	r->busy--; /* r stayed: it was still busy with us */
	host_region_idle(r);
}

/*
 * Ends er: decodes the chunk from K good fragments, or fails; once. Reads
 * still out (a hedge won) are dropped as they come (ec_read_free).
 */
static void
ec_read_end(struct ec_read *er)
{
	struct host *h = er->h;
	struct region *r = er->r;
	const struct host_ec_codec *ec = &r->ec->codec;
	uint8_t *frag[HOST_EC_MAX] = { NULL };
	uint32_t bad;
	int status;

	/* too few: to wait for (a node away) or lost (fewer than K left) */
	status = host_ec_check(h, r, er->c) == -EIO ? -EIO : -EHOSTDOWN;
	/* a dying region too: a fork's copies read its data first */
	if ((unsigned)__builtin_popcount(er->good) >= ec->k) {
		for (unsigned i = 0; i < ec->k + ec->m; i++)
			if (er->good >> i & 1)
				frag[i] = ec_read_to(er, i);
		status = host_ec_decode(ec, frag, r->ec->crc + er->c *
		    (ec->k + ec->m), er->dst, er->buf + (size_t)(ec->k + ec->m) *
		    ec->frag, &bad);
		h->stats.ec_decodes += status == 0 && (er->good &
		    ((1u << ec->k) - 1)) != (1u << ec->k) - 1;
		h->stats.ec_hedges_won += status == 0 && er->out > 0;
	}
	er->over = true;
	if (er->timer != NULL)
		event_del(er->timer);
	er->done(er->ctx, status, NULL, 0);
	ec_read_free(er);
}

/* Completion of one fragment's read: checked, replaced if bad, or done. */
static void
ec_read_frag_done(void *ctx, int status, const uint8_t *payload,
    uint32_t len)
{
	struct ec_frag *fr = ctx;
	struct ec_read *er = fr->er;
	struct host *h = er->h;
	struct region *r = er->r;
	const struct host_ec_codec *ec = &r->ec->codec;
	uint64_t row = er->c / r->width;

	host_route_done(h, fr->s);
	er->out--;
	er->back |= 1u << fr->i;
	if (er->over) { /* answered without it: dropped */
		if (status == 0)
			ec_node_sample(h, fr->s->node, fr->sent_ns);
		ec_read_free(er);
		return;
	}
	if (status == 0 && !ec_crc_check(r->ec, er->c * (ec->k + ec->m) +
	    fr->i, proto_crc32c(0, ec_read_to(er, fr->i), ec->frag)))
		status = -EBADMSG;
	if (status == 0) {
		er->good |= 1u << fr->i;
		ec_node_sample(h, fr->s->node, fr->sent_ns);
	} else {
		if (er->err == 0 || er->err == -EBADMSG)
			er->err = status;
		h->stats.ec_frag_errors++;
		if (status != -ECONNRESET && status != -ETIMEDOUT &&
		    status != -EHOSTDOWN && status != -ENOTCONN &&
		    !r->dying && !host_stale_test(fr->s, row)) {
			/* its node answered wrong: never used, rebuilt */
			host_stale_set(fr->s, row);
			h->stats.replica_stale++;
		}
		ec_read_more(er);
	}
	if (er->out == 0 || (unsigned)__builtin_popcount(er->good) >= ec->k)
		ec_read_end(er);
}

/*
 * Returns how long er's reads wait before one more fragment is asked for
 * (0: never): hedge_after, or (auto) 4 times the slowest of the nodes
 * asked lately, 2 ms at least and half op_timeout at most.
 */
static uint64_t
ec_hedge_wait(const struct ec_read *er)
{
	const struct host *h = er->h;
	const struct region *r = er->r;
	int64_t after = cfg_int(h->d->cfg, CFG_HOST_HEDGE_AFTER);
	uint64_t cap = (uint64_t)cfg_int(h->d->cfg, CFG_OP_TIMEOUT) *
	    1000000u / 2, w = 0;

	if (after >= 0)
		return (uint64_t)after * 1000000u;
	for (unsigned i = 0; i < r->ncopies; i++)
		if (er->asked >> i & 1 && er->frag[i].s->node != NULL) {
			uint64_t us = ec_node_lat(h, er->frag[i].s->node);

			w = 4 * us * 1000u > w ? 4 * us * 1000u : w;
		}
	w = w < EC_HEDGE_FLOOR_NS ? EC_HEDGE_FLOOR_NS : w;
	return w < cap ? w : cap;
}

/* Arms er's next hedge, while fragments are left to ask for. */
static void
ec_hedge_arm(struct ec_read *er)
{
	uint64_t wait = ec_hedge_wait(er);
	struct timeval tv;

	if (wait == 0 || er->extra >= er->r->ec->codec.m)
		return;
	tv.tv_sec = (time_t)(wait / 1000000000u);
	tv.tv_usec = (suseconds_t)(wait % 1000000000u / 1000u);
	evtimer_add(er->timer, &tv);
}

/*
 * er's deadline passed with fragments still out: their nodes are counted
 * that slow (ec_pick passes them over for a while) and one more fragment
 * is asked for, of a node not known to be slower than what they waited
 * (else again at the next deadline); the first K good decode the chunk.
 */
static void
ec_hedge_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ec_read *er = arg;
	struct host *h = er->h;
	uint64_t now = mono_ns(), waited = 1;

	if (er->over)
		return;
	for (unsigned i = 0; i < er->r->ncopies; i++) {
		const struct ec_frag *fr = &er->frag[i];
		struct host_ec_lat *l;

		if (!(er->asked >> i & 1) || (er->back >> i & 1) ||
		    fr->s->node == NULL)
			continue;
		l = &h->ec_lat[fr->s->node - h->nodes];
		if (l->us < (now - fr->sent_ns) / 1000u)
			l->us = (now - fr->sent_ns) / 1000u;
		l->at_ns = now;
		if (waited < l->us)
			waited = l->us;
	}
	er->extra++;
	er->lat_cap = waited;
	if (ec_read_more(er) > 0)
		h->stats.ec_hedges++;
	else
		er->extra--;
	er->lat_cap = 0;
	ec_hedge_arm(er);
}

/*
 * Reads chunk c of r into dst (chunk bytes) from K of its fragments, then
 * done(ctx, status, NULL, 0) once. Returns 0 when started, -EHOSTDOWN when
 * not enough fragments can be reached now, -EIO when fewer than K are left
 * anywhere, -ENOMEM.
 */
int
host_ec_read(struct host *h, struct region *r, uint64_t c, uint8_t *dst,
    bool background, fam_done_fn done, void *ctx)
{
	const struct host_ec_codec *ec = &r->ec->codec;
	struct ec_read *er;
	int rc = host_ec_check(h, r, c);

	if (rc < 0)
		return rc == -EAGAIN ? -EHOSTDOWN : rc;
	er = calloc(1, sizeof *er);
	if (er == NULL)
		return -ENOMEM;
	/* the fragments not read in place, then room to decode k */
	er->buf = malloc((size_t)(2 * ec->k + ec->m) * ec->frag);
	if (er->buf == NULL) {
		free(er);
		return -ENOMEM;
	}
	er->h = h;
	er->r = r;
	er->c = c;
	er->dst = dst;
	er->background = background;
	er->done = done;
	er->ctx = ctx;
	er->hedge = cfg_int(h->d->cfg, CFG_HOST_HEDGE_AFTER) != 0;
	if (er->hedge) {
		er->timer = evtimer_new(h->base, ec_hedge_cb, er);
		if (er->timer == NULL) {
			free(er->buf);
			free(er);
			return -ENOMEM;
		}
	}
	if (ec_read_more(er) == 0) {
		rc = er->err != 0 ? er->err : -EHOSTDOWN;
		if (er->timer != NULL)
			event_free(er->timer);
		free(er->buf);
		free(er);
		return rc;
	}
	r->busy++;
	h->stats.ec_reads++;
	if (er->timer != NULL)
		ec_hedge_arm(er);
	return 0;
}

/* ---- write-back and rebuild ------------------------------------------ */

/*
 * Encodes chunk (chunk c of r) for its write-back: *buf (to free once the
 * writes are over) holds what is not in the chunk itself, src[i] and
 * crc[i] each fragment and its CRC32C. Returns 0 or -ENOMEM.
 */
int
host_ec_wb_encode(struct region *r, const uint8_t *chunk, uint8_t **buf,
    const uint8_t *src[], uint32_t crc[])
{
	const struct host_ec_codec *ec = &r->ec->codec;

	*buf = malloc((size_t)(ec->k + ec->m) * ec->frag);
	if (*buf == NULL)
		return -ENOMEM;
	host_ec_encode(ec, chunk, *buf, *buf + (size_t)ec->k * ec->frag, src,
	    crc);
	return 0;
}

/* Fragment i of chunk c of r was written with CRC crc: reads expect it. */
void
host_ec_wb_done(struct region *r, uint64_t c, unsigned i, uint32_t crc)
{
	struct host_ec *e = r->ec;
	uint64_t at = c * (e->codec.k + e->codec.m) + i;

	if (c >= e->nchunks)
		return;
	e->crc[at] = crc;
	if (e->unknown != NULL)
		e->unknown[at / 64] &= ~(1ull << (at % 64));
}

/* Completion of the rebuild's write of a fragment. */
static void
ec_rebuild_write_done(void *ctx, int status, const uint8_t *payload,
    uint32_t len)
{
	struct host *h = ctx;
	struct host_rebuild *rb = &h->rb;

	host_route_done(h, rb->dst);
	if (status == 0 && !rb->spoiled && !rb->r->dying)
		host_ec_wb_done(rb->r, rb->chunk, rb->frag, rb->crc);
	host_replica_rebuild_end(h, status);
}

/* The rebuild's chunk is read (decoded): its lost fragment is written. */
static void
ec_rebuild_read_done(void *ctx, int status, const uint8_t *payload,
    uint32_t len)
{
	struct host *h = ctx;
	struct host_rebuild *rb = &h->rb;
	struct region *r = rb->r;
	const struct host_ec_codec *ec = &r->ec->codec;
	const uint8_t *src[HOST_EC_MAX];
	uint32_t crc[HOST_EC_MAX];
	struct fam_conn *conn;
	struct fam_mr *mr;
	const struct fam_remote *remote;

	if (status == 0 && (r->dying || rb->spoiled))
		status = -ECANCELED;
	if (status == 0)
		host_ec_encode(ec, rb->buf, rb->ecbuf, rb->ecbuf +
		    (size_t)ec->k * ec->frag, src, crc);
	if (status == 0)
		status = host_route(h, rb->dst, true, &conn, &mr, &remote);
	if (status < 0) {
		host_replica_rebuild_end(h, status);
		return;
	}
	rb->wrote = true;
	rb->crc = crc[rb->frag];
	status = fam_conn_writef(conn, remote, (rb->chunk / r->width) *
	    ec->frag, ec->frag, src[rb->frag], NULL, FAM_F_BACKGROUND,
	    ec_rebuild_write_done, h);
	if (status < 0) {
		host_route_done(h, rb->dst);
		host_replica_rebuild_end(h, status);
	}
}

/*
 * Starts rebuilding fragment stripe dst's part of chunk c (h->rb, set by
 * host-replica.c but for its source): the chunk read from K others and
 * encoded again. Returns 0 when started, or -errno.
 */
int
host_ec_rebuild_start(struct host *h, struct stripe *dst, uint64_t c)
{
	struct host_rebuild *rb = &h->rb;
	struct region *r = dst->r;
	const struct host_ec_codec *ec = &r->ec->codec;
	size_t need = (size_t)(ec->k + ec->m) * ec->frag;

	if (rb->ecbuf_size < need) {
		uint8_t *p = realloc(rb->ecbuf, need);

		if (p == NULL)
			return -ENOMEM;
		rb->ecbuf = p;
		rb->ecbuf_size = need;
	}
	rb->frag = (unsigned)(dst - r->stripes) / r->width;
	return host_ec_read(h, r, c, rb->buf, true, ec_rebuild_read_done, h);
}

/*
 * Describes ec:K+M's reads: chunks read, fragment reads and those that
 * failed or had a wrong CRC, chunks decoded, hedges (fragments asked for
 * past hedge_after) and chunks done with reads still out, and how long a
 * fragment read from each memory node takes lately (us; ec_pick's).
 */
json_t *
host_ec_json(struct host *h)
{
	json_t *lat = json_array();

	for (unsigned i = 0; i < h->nnodes; i++)
		json_array_append_new(lat, json_integer((json_int_t)
		    ec_node_lat(h, &h->nodes[i])));
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:o}",
	    "reads", (json_int_t)h->stats.ec_reads,
	    "fragment_reads", (json_int_t)h->stats.ec_frag_reads,
	    "fragment_errors", (json_int_t)h->stats.ec_frag_errors,
	    "decodes", (json_int_t)h->stats.ec_decodes,
	    "hedges", (json_int_t)h->stats.ec_hedges,
	    "hedges_won", (json_int_t)h->stats.ec_hedges_won,
	    "fragment_read_us", lat);
}
