/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-hedge.c - reads go to the fastest copy, and a read a copy does not
 * answer in time goes to another one too (hedged reads, replicate:N).
 *
 * Owns: each memory node's read estimate (struct hedge_node: a moving
 * average of a chunk read's service time, the chunks in flight there,
 * since when a read hedged away from it is unanswered), by which
 * host_chunk_route orders the copies (host_hedge_expect); every chunk read
 * the fault service sends (struct hedge_read: its first read, and past
 * its deadline, [host] hedge_after, the same read from another up-to-date
 * copy into staging slots of its own); the deadline timer; the counters.
 * States of a hedge_read:
 *   waiting  its first read out, its deadline ahead (listed in hd->list)
 *   hedged   the same read sent to another copy too (or none could take
 *            it): whichever answers first with the whole length and a
 *            right CRC (the transport checks both) is the answer
 *   over     the answer (the first success, else the last failure) went
 *            to the fault service (fetch_done), once; a read still out is
 *            dropped when it comes: its staging slots and route given
 *            back, nothing installed. Freed when no read is out.
 * A read into the arena (install = continue) is never hedged: a late
 * answer would land under the program (host_hedge_on keeps replicated
 * regions' reads in staging slots).
 * Locks: none; everything runs on the control loop.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "host/host.h"

#define HEDGE_FLOOR_NS (2ull * 1000000u) /* auto: hedged after 2 ms at least */
#define HEDGE_TIMES    4u /* auto: after 4 times the time expected */
#define HEDGE_RETRY_NS (1ull * 1000000u) /* no staging slot: again in 1 ms */

/* What the host knows of reads from one memory node. */
struct hedge_node {
	uint64_t svc_ns;   /* a chunk read's service time (moving average) */
	uint64_t at_ns;    /* ... its last sample */
	uint64_t stuck_ns; /* a read hedged away from it unanswered since */
	unsigned out;      /* chunks being read there */
	uint64_t reads;    /* reads sent there */
	uint64_t hedged;   /* reads hedged away from it */
};

struct hedge_read;

/* One of a hedge_read's two reads: the first, or the hedge. */
struct hedge_leg {
	struct hedge_read *hr;
	struct stripe *s;  /* the copy read, routed (host_route_done) */
	uint8_t *buf;      /* where it reads to; NULL once given back */
	uint64_t sent_ns;
	unsigned q;        /* chunks in flight on its node when sent */
	bool out;
};

/* A read of nrun chunks for the fault service (fetch_send). */
struct hedge_read {
	struct host *h;
	struct region *r;  /* kept (busy) until no read is out */
	struct fetch *f;   /* the read's first fetch, until the answer */
	fam_done_fn done;  /* the fault service's completion */
	uint64_t off;
	uint32_t len;      /* bytes read */
	unsigned n;        /* chunks */
	uint16_t flags;    /* FAM_F_BACKGROUND or 0 */
	bool direct;       /* into the arena: never hedged */
	bool hedged, over;
	uint64_t deadline_ns; /* waiting: when the hedge goes */
	struct hedge_leg leg[2];
	struct hedge_read *prev, *next; /* waiting: in hd->list */
};

/* The host's hedging state (h->hedge). */
struct host_hedge {
	struct event *ev;        /* fires at the earliest deadline */
	uint64_t armed_ns;       /* ... that deadline (0: not armed) */
	struct hedge_read *list; /* reads waiting for their deadline */
	uint64_t sent, won, wasted, no_copy;
	uint64_t by_copy[HOST_MAX_NODES]; /* reads routed to copy k */
	struct hedge_node node[HOST_MAX_NODES];
};

/* Returns the estimate of the memory node of stripe s, or NULL. */
static struct hedge_node *
hedge_node_of(const struct host *h, const struct stripe *s)
{
	if (h->hedge == NULL || s == NULL || s->node == NULL ||
	    s->node->is_dpu || s->node < h->nodes ||
	    s->node >= h->nodes + h->nnodes)
		return NULL;
	return &h->hedge->node[s->node - h->nodes];
}

/*
 * Returns a chunk read's service time on hn lately: its average, halved
 * for each second since the last sample (a node passed over because it
 * was slow is tried again in a while).
 */
static uint64_t
hedge_svc(const struct hedge_node *hn, uint64_t now)
{
	uint64_t age = (now - hn->at_ns) / 1000000000u;

	return age >= 32 ? 0 : hn->svc_ns >> age;
}

/* Returns how long a read of n chunks from copy s is expected to take. */
uint64_t
host_hedge_expect(const struct host *h, const struct stripe *s, unsigned n)
{
	const struct hedge_node *hn = hedge_node_of(h, s);
	uint64_t now = mono_ns(), e;

	if (hn == NULL)
		return 0;
	e = hedge_svc(hn, now) * (hn->out + n);
	if (hn->stuck_ns != 0 && now - hn->stuck_ns > e)
		e = now - hn->stuck_ns;
	return e;
}

/* Tells whether reads of r may be hedged (replicate:N, hedge_after on). */
bool
host_hedge_on(const struct host *h, const struct region *r)
{
	return r->ncopies > 1 && r->ec == NULL && h->hedge != NULL &&
	    cfg_int(h->d->cfg, CFG_HOST_HEDGE_AFTER) != 0;
}

/* Counts a read routed to copy k of its chunk. */
void
host_hedge_routed(struct host *h, unsigned k)
{
	if (h->hedge != NULL && k < HOST_MAX_NODES)
		h->hedge->by_copy[k]++;
}

/*
 * Returns how long a read of hr's waits before it is hedged (0: never):
 * hedge_after, or (auto) HEDGE_TIMES the time its node was expected to
 * take, HEDGE_FLOOR_NS at least and half op_timeout at most.
 */
static uint64_t
hedge_wait(const struct host *h, const struct hedge_read *hr)
{
	int64_t after = cfg_int(h->d->cfg, CFG_HOST_HEDGE_AFTER);
	uint64_t cap = (uint64_t)cfg_int(h->d->cfg, CFG_OP_TIMEOUT) *
	    1000000u / 2, w;
	const struct hedge_node *hn = hedge_node_of(h, hr->leg[0].s);

	if (after == 0 || hr->direct || !host_hedge_on(h, hr->r))
		return 0;
	if (after > 0)
		return (uint64_t)after * 1000000u;
	w = hn == NULL ? 0 : HEDGE_TIMES * hedge_svc(hn, hr->leg[0].sent_ns) *
	    (hr->leg[0].q + hr->n);
	if (w < HEDGE_FLOOR_NS)
		w = HEDGE_FLOOR_NS;
	return w < cap ? w : cap;
}

/* Arms the timer for the earliest deadline of the reads waiting. */
static void
hedge_arm(struct host *h)
{
	struct host_hedge *hd = h->hedge;
	uint64_t first = UINT64_MAX, now = mono_ns(), in;
	struct timeval tv;

	for (struct hedge_read *hr = hd->list; hr != NULL; hr = hr->next)
		if (hr->deadline_ns < first)
			first = hr->deadline_ns;
	hd->armed_ns = first == UINT64_MAX ? 0 : first;
	if (first == UINT64_MAX) {
		event_del(hd->ev);
		return;
	}
	in = first > now ? first - now : 0;
	tv.tv_sec = (time_t)(in / 1000000000u);
	tv.tv_usec = (suseconds_t)(in % 1000000000u / 1000u);
	evtimer_add(hd->ev, &tv);
}

/* Puts hr in the list of reads waiting for their deadline. */
static void
hedge_list(struct host_hedge *hd, struct hedge_read *hr)
{
	hr->prev = NULL;
	hr->next = hd->list;
	if (hd->list != NULL)
		hd->list->prev = hr;
	hd->list = hr;
}

/* Takes hr out of the list of reads waiting (when it is there). */
static void
hedge_unlist(struct host_hedge *hd, struct hedge_read *hr)
{
	if (hr->prev != NULL)
		hr->prev->next = hr->next;
	else if (hd->list == hr)
		hd->list = hr->next;
	if (hr->next != NULL)
		hr->next->prev = hr->prev;
	hr->prev = hr->next = NULL;
}

/* A leg's read was sent (or not): its node's chunks in flight. */
static void
hedge_node_sent(struct host *h, struct hedge_leg *lg, unsigned n)
{
	struct hedge_node *hn = hedge_node_of(h, lg->s);

	lg->sent_ns = mono_ns();
	lg->q = hn != NULL ? hn->out : 0;
	if (hn == NULL)
		return;
	hn->out += n;
	hn->reads++;
}

/*
 * A leg's read came back with status: its node's chunks in flight, the
 * service time sampled from a success (the time from send to reply
 * shared among the chunks it waited behind and its own).
 */
static void
hedge_node_done(struct host *h, const struct hedge_leg *lg, unsigned n,
    int status)
{
	struct hedge_node *hn = hedge_node_of(h, lg->s);
	uint64_t now = mono_ns(), svc;

	if (hn == NULL)
		return;
	hn->out -= n <= hn->out ? n : hn->out;
	if (hn->stuck_ns != 0 && lg->sent_ns >= hn->stuck_ns)
		hn->stuck_ns = 0; /* it answers what it was sent since */
	else if (hn->stuck_ns != 0 && status == 0)
		hn->stuck_ns = 0;
	if (status < 0)
		return;
	svc = (now - lg->sent_ns) / (lg->q + n);
	hn->svc_ns = hn->at_ns == 0 ? svc : (7 * hn->svc_ns + svc) / 8;
	hn->at_ns = now;
}

/* Frees hr once it is over and no read of it is out. */
static void
hedge_free_maybe(struct hedge_read *hr)
{
	struct region *r = hr->r;

	if (!hr->over || hr->leg[0].out || hr->leg[1].out)
		return;
	free(hr);
	r->busy--;
	host_region_idle(r); /* last: it may free r */
}

/* Gives back what a leg that is not the answer held: slots, route. */
static void
hedge_leg_release(struct host *h, struct hedge_read *hr,
    struct hedge_leg *lg)
{
	host_route_done(h, lg->s);
	if (lg->buf != NULL && !hr->direct)
		host_staging_put(h, lg->buf, hr->n);
	lg->buf = NULL;
}

/*
 * A read from copy s failed while another is out: a copy that answered
 * wrong (not a lost link) is marked stale for the chunks read, as
 * host_replica_failover does, so that the rebuild mends it.
 */
static void
hedge_leg_failed(struct host *h, struct hedge_read *hr, struct stripe *s,
    int status)
{
	uint64_t c = hr->f->chunk;

	for (unsigned i = 0; i < hr->n; i++, c += hr->r->width)
		(void)host_replica_failover(h, s, c, status);
}

/* Hands the answer of leg i (status) to the fault service, once. */
static void
hedge_answer(struct hedge_read *hr, unsigned i, int status,
    const uint8_t *payload, uint32_t len)
{
	struct host *h = hr->h;
	struct hedge_leg *lg = &hr->leg[i];
	struct fetch *f = hr->f;
	unsigned k = 0;

	hr->over = true;
	hr->f = NULL;
	hedge_unlist(h->hedge, hr);
	/* the fault service gives back this leg's route and slots */
	f->s = lg->s;
	if (!hr->direct)
		for (struct fetch *g = f; g != NULL; g = g->run, k++)
			g->staging = lg->buf + ((size_t)k << h->chunk_shift);
	lg->buf = NULL;
	if (i == 1 && status == 0)
		h->hedge->won++;
	else if (i == 1)
		h->hedge->wasted++;
	hr->done(f, status, payload, len);
}

/* Completion of one leg of a hedged (or hedgeable) read. */
static void
hedge_leg_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct hedge_leg *lg = ctx;
	struct hedge_read *hr = lg->hr;
	struct host *h = hr->h;
	unsigned i = (unsigned)(lg - hr->leg);
	struct hedge_leg *other = &hr->leg[!i];

	lg->out = false;
	hedge_node_done(h, lg, hr->n, status);
	if (hr->over) { /* the other answered first: dropped */
		hedge_leg_release(h, hr, lg);
		h->hedge->wasted += i == 1;
		hedge_free_maybe(hr);
		host_wake(h, HOST_WAKE_KICK); /* slots free */
		return;
	}
	if (status < 0 && other->out) { /* the other may still answer */
		hedge_leg_failed(h, hr, lg->s, status);
		hedge_leg_release(h, hr, lg);
		h->hedge->wasted += i == 1;
		hedge_unlist(h->hedge, hr);
		return;
	}
	hedge_answer(hr, i, status, payload, len);
	hedge_free_maybe(hr);
}

/*
 * Routes hr's hedge to the up-to-date copy other than the first read's
 * expected to answer first: 0 (*sp routed), or -EAGAIN when none can.
 */
static int
hedge_route(struct host *h, struct hedge_read *hr, struct stripe **sp,
    struct fam_conn **conn, struct fam_mr **mr,
    const struct fam_remote **remote)
{
	struct region *r = hr->r;
	uint64_t c0 = hr->f->chunk;
	unsigned col = (unsigned)(c0 % r->width), ncand = 0;
	struct stripe *cand[HOST_MAX_NODES];
	uint64_t exp[HOST_MAX_NODES];

	for (unsigned k = 0; k < r->ncopies && k < HOST_MAX_NODES; k++) {
		struct stripe *s = &r->stripes[k * r->width + col];
		bool ok = s != hr->leg[0].s && host_node_usable(h, s) &&
		    (hr->leg[0].s == NULL || s->node != hr->leg[0].s->node);
		unsigned j;

		for (unsigned i = 0; ok && i < hr->n; i++)
			ok = host_replica_valid(s, c0 / r->width + i);
		if (!ok)
			continue;
		/* in order of the time expected */
		for (j = ncand; j > 0 && exp[j - 1] > host_hedge_expect(h, s,
		    hr->n); j--) {
			cand[j] = cand[j - 1];
			exp[j] = exp[j - 1];
		}
		cand[j] = s;
		exp[j] = host_hedge_expect(h, s, hr->n);
		ncand++;
	}
	for (unsigned j = 0; j < ncand; j++)
		if (host_route(h, cand[j], hr->flags & FAM_F_BACKGROUND, conn,
		    mr, remote) == 0) {
			*sp = cand[j];
			return 0;
		}
	return -EAGAIN;
}

/*
 * hr's first read is past its deadline: the same read goes to another
 * up-to-date copy, into staging slots of its own. Returns true when it
 * should be tried again a little later (no slot free now).
 */
static bool
hedge_send(struct host *h, struct hedge_read *hr)
{
	struct host_hedge *hd = h->hedge;
	struct hedge_leg *lg = &hr->leg[1];
	struct hedge_node *hn = hedge_node_of(h, hr->leg[0].s);
	struct fam_conn *conn;
	struct fam_mr *mr;
	const struct fam_remote *remote;
	struct stripe *s;
	unsigned n = hr->n;
	uint64_t bytes = (uint64_t)hr->n << h->chunk_shift;
	uint8_t *buf;

	if (hr->r->dying || hr->r->cl->dead || h->stopping)
		return false;
	if (hn != NULL && (hn->stuck_ns == 0 ||
	    hn->stuck_ns > hr->leg[0].sent_ns))
		hn->stuck_ns = hr->leg[0].sent_ns; /* unanswered since */
	if (hedge_route(h, hr, &s, &conn, &mr, &remote) < 0) {
		hd->no_copy++;
		return false;
	}
	buf = host_staging_get(h, &n);
	if (buf == NULL || n < hr->n) {
		if (buf != NULL)
			host_staging_put(h, buf, n);
		host_route_done(h, s);
		return true;
	}
	if (hr->len < bytes)
		memset(buf + hr->len, 0, bytes - hr->len);
	lg->hr = hr;
	lg->s = s;
	lg->buf = buf;
	lg->out = true;
	hedge_node_sent(h, lg, hr->n);
	if (fam_conn_readf(conn, remote, hr->off, hr->len, buf, mr, hr->flags,
	    hedge_leg_done, lg) < 0) {
		lg->out = false;
		hedge_node_done(h, lg, hr->n, -EIO);
		hedge_leg_release(h, hr, lg);
		return false;
	}
	if (hn != NULL)
		hn->hedged++;
	hd->sent++;
	return false;
}

/* The deadline timer: hedges the reads past theirs. */
static void
hedge_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct host *h = arg;
	struct host_hedge *hd = h->hedge;
	uint64_t now = mono_ns();
	struct hedge_read *hr, *next;

	hd->armed_ns = 0;
	for (hr = hd->list; hr != NULL; hr = next) {
		next = hr->next;
		if (hr->deadline_ns > now)
			continue;
		hedge_unlist(hd, hr);
		hr->hedged = true;
		if (hedge_send(h, hr)) {
			hr->hedged = false;
			hr->deadline_ns = now + HEDGE_RETRY_NS;
			hedge_list(hd, hr);
		}
	}
	hedge_arm(h);
}

/*
 * Sends the read of f's run (f->nrun chunks, len bytes at off of copy s,
 * routed: conn, remote, mr) into f->staging, done(f, ...) once when it is
 * over; hedged after its deadline when r's reads may be (a region of one
 * copy: a plain read, nothing recorded). Returns 0, or
 * the transport's -errno (nothing sent, nothing called).
 */
int
host_hedge_read(struct host *h, struct fetch *f, struct stripe *s,
    struct fam_conn *conn, const struct fam_remote *remote,
    struct fam_mr *mr, uint64_t off, uint32_t len, uint16_t flags,
    fam_done_fn done)
{
	/* one copy: no choice to make, nothing to hedge, nothing to learn */
	struct hedge_read *hr = h->hedge != NULL && f->r->ncopies > 1 ?
	    calloc(1, sizeof *hr) : NULL;
	uint64_t wait, deadline = 0;
	int rc;

	if (hr == NULL)
		return fam_conn_readf(conn, remote, off, len, f->staging, mr,
		    flags, done, f);
	hr->h = h;
	hr->r = f->r;
	hr->f = f;
	hr->done = done;
	hr->off = off;
	hr->len = len;
	hr->n = f->nrun;
	hr->flags = flags;
	hr->direct = f->direct;
	hr->leg[0].hr = hr;
	hr->leg[0].s = s;
	hr->leg[0].buf = f->staging;
	hr->leg[0].out = true;
	hedge_node_sent(h, &hr->leg[0], hr->n);
	hr->r->busy++;
	wait = hedge_wait(h, hr);
	if (wait > 0) {
		deadline = hr->leg[0].sent_ns + wait;
		hr->deadline_ns = deadline;
		hedge_list(h->hedge, hr);
	}
	/* hr is the transport's from here: it may be over before we return */
	rc = fam_conn_readf(conn, remote, off, len, f->staging, mr, flags,
	    hedge_leg_done, &hr->leg[0]);
	if (rc < 0) {
		hedge_unlist(h->hedge, hr);
		hedge_node_done(h, &hr->leg[0], hr->n, rc);
		hr->r->busy--;
		free(hr);
		return rc;
	}
	if (wait > 0 && (h->hedge->armed_ns == 0 ||
	    deadline < h->hedge->armed_ns))
		hedge_arm(h);
	return 0;
}

/* Makes the hedging state and its timer; 0 or -ENOMEM. */
int
host_hedge_init(struct host *h)
{
	h->hedge = calloc(1, sizeof *h->hedge);
	if (h->hedge == NULL)
		return -ENOMEM;
	h->hedge->ev = evtimer_new(h->base, hedge_timer_cb, h);
	if (h->hedge->ev == NULL) {
		free(h->hedge);
		h->hedge = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Frees the hedging state (no read is out any more). */
void
host_hedge_fini(struct host *h)
{
	if (h->hedge == NULL)
		return;
	event_free(h->hedge->ev);
	free(h->hedge);
	h->hedge = NULL;
}

/*
 * Adds what the host knows of reads from each memory node to its entry in
 * peers (the last nnodes + dpu entries, in the nodes' order): the service
 * time of a chunk read lately (us), the time a read is expected to take
 * now (us), chunks in flight, reads sent, reads hedged away.
 */
void
host_hedge_peers_json(const struct host *h, json_t *peers)
{
	size_t first = json_array_size(peers);

	if (h->hedge == NULL || first < h->nnodes + h->has_dpu)
		return;
	first -= h->nnodes + h->has_dpu;
	for (unsigned i = 0; i < h->nnodes; i++) {
		const struct hedge_node *hn = &h->hedge->node[i];
		struct stripe s = { .node = (struct mnode *)&h->nodes[i] };
		json_t *peer = json_array_get(peers, first + i);

		json_object_set_new(peer, "read_us", json_integer((json_int_t)
		    (hedge_svc(hn, mono_ns()) / 1000u)));
		json_object_set_new(peer, "read_expected_us", json_integer(
		    (json_int_t)(host_hedge_expect(h, &s, 1) / 1000u)));
		json_object_set_new(peer, "reads_in_flight",
		    json_integer((json_int_t)hn->out));
		json_object_set_new(peer, "reads",
		    json_integer((json_int_t)hn->reads));
		json_object_set_new(peer, "reads_hedged_away",
		    json_integer((json_int_t)hn->hedged));
	}
}

/*
 * Describes the hedged reads: hedge_after (ms, -1: auto), hedges sent,
 * won (installed), wasted (answered second, or failed), not sent for
 * want of another copy; and the reads routed to each copy of a chunk.
 */
json_t *
host_hedge_json(const struct host *h)
{
	json_t *by = json_array();
	unsigned most = h->copies > h->ec_k + h->ec_m ? h->copies :
	    h->ec_k + h->ec_m;

	if (h->hedge == NULL)
		return json_object();
	for (unsigned k = 0; k < HOST_MAX_NODES; k++)
		if (h->hedge->by_copy[k] != 0 && k + 1 > most)
			most = k + 1;
	for (unsigned k = 0; k < most; k++)
		json_array_append_new(by, json_integer((json_int_t)
		    h->hedge->by_copy[k]));
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:o}",
	    "hedge_after_ms", (json_int_t)cfg_int(h->d->cfg,
	    CFG_HOST_HEDGE_AFTER),
	    "sent", (json_int_t)h->hedge->sent,
	    "won", (json_int_t)h->hedge->won,
	    "wasted", (json_int_t)h->hedge->wasted,
	    "no_copy", (json_int_t)h->hedge->no_copy,
	    "reads_by_copy", by);
}
