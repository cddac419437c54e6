/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu-forward.c - the dpu's data path: a host's READ or WRITE (checked by
 * dpu-host.c against its session's regions) is answered from a cache when
 * it can, else given a staging buffer, forwarded to the memory node
 * holding the region, and answered when the memory node has answered: a
 * read's data goes to the host from the buffer it arrived in (zero-copy
 * staging: the reply references the buffer, released when the reply is
 * sent); a write is acknowledged only once the memory node has it.
 * Control requests to memory nodes (REGION_CREATE, ...) and cache loads
 * take the same way.
 *
 * Owns: struct dpu_req, the batch, the queues and the back thread.
 * Request life (struct dpu_req):
 *   front: composed (staging buffer taken), then put in the batch
 *          (aggregate = on) or handed over at once
 *   back:  issued on the memory node's connection; with aggregation, a
 *          batch is issued whole and each connection it touched flushed
 *          once (one writev for the batch); without, each request is
 *          flushed alone. Its completion fills status (and the data, in
 *          the staging buffer)
 *   front: answered; READ data stays referenced until the reply is sent,
 *          then the buffer and the request are released
 * The batch: the requests that arrive in one pass of the front's loop,
 * sent when the pass is over (a deferred event) or at batch_limit.
 *
 * Asynchronous forwarding (async = on): the back runs on a thread with its
 * own event loop. The front hands it batches through the to_back queue and
 * it hands completions back through to_front (struct dpu_queue: a list
 * under a lock, and an eventfd that wakes the consumer's loop). With async
 * off, both sides run on the control loop and the hand-overs are calls.
 * Either transport: each connection is used on its own loop only (the
 * hosts' on the front's, the memory nodes' on the back's); what the
 * verbs transport shares between loops it guards itself.
 *
 * Calls down only (dpu-cache*.c, dpu-staging.c, dpu-memlink.c); a request
 * ends with its host connection through dpu->up.hconn_put, a control
 * request with its own q->done.
 * Locks: a queue's lock is a leaf (see dpu.h).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>

#include "dpu/dpu-forward.h"

static void dpu_complete(struct dpu *dpu, struct dpu_req *q);
static void back_issue(struct dpu *dpu, struct dpu_req *q);
static void back_woken(struct dpu *dpu);

/* Raises an atomic maximum. */
static void
stat_max(_Atomic uint64_t *max, uint64_t v)
{
	uint64_t cur = atomic_load_explicit(max, memory_order_relaxed);

	while (v > cur && !atomic_compare_exchange_weak_explicit(max, &cur, v,
	    memory_order_relaxed, memory_order_relaxed))
		;
}

/*
 * Stops reading a host connection whose requests or staging passed their
 * bound, and resumes it once half is done. Front.
 */
static void
hconn_flow(struct dpu_hconn *hc)
{
	struct dpu *dpu = hc->dpu;

	if (hc->closed)
		return;
	if (!hc->throttled && (hc->inflight >= DPU_HOST_INFLIGHT_MAX ||
	    hc->staged >= DPU_HOST_STAGED_MAX)) {
		if (fam_conn_throttle(hc->c, true) == 0) {
			hc->throttled = true;
			DPU_INC(dpu, host_throttles, 1);
			log_debug("dpu: %s: %u requests, %zu bytes staged; "
			    "reading it paused", hc->peer, hc->inflight,
			    hc->staged);
		}
	} else if (hc->throttled && hc->inflight <= DPU_HOST_INFLIGHT_MAX / 2 &&
	    hc->staged <= DPU_HOST_STAGED_MAX / 2) {
		hc->throttled = false;
		(void)fam_conn_throttle(hc->c, false);
	}
}

/* Frees a request and what it holds (staging, region, host). Front. */
void
dpu_req_free(struct dpu_req *q)
{
	struct dpu *dpu = q->dpu;

	if (q->buf != NULL)
		dpu_buf_put(dpu, q->buf, q->len);
	if (q->m != NULL)
		dpu_mregion_put(q->m);
	if (q->hc != NULL) {
		q->hc->inflight--;
		dpu->inflight--;
		if (q->kind == DR_READ || q->kind == DR_WRITE)
			q->hc->staged -= q->len;
		hconn_flow(q->hc);
		dpu->up.hconn_put(q->hc);
	}
	free(q);
}

/* Makes a control request for memory node n (payload copied). */
struct dpu_req *
dpu_call_new(struct dpu *dpu, struct dpu_node *node, uint8_t type,
    const void *payload, uint32_t plen, dpu_req_fn done, void *arg)
{
	struct dpu_req *q;

	if (plen > sizeof q->payload)
		return NULL;
	q = calloc(1, sizeof *q);
	if (q == NULL)
		return NULL;
	q->kind = DR_CALL;
	q->dpu = dpu;
	q->node = node;
	q->type = type;
	memcpy(q->payload, payload, plen);
	q->plen = plen;
	q->done = done;
	q->arg = arg;
	q->start_ns = mono_ns();
	return q;
}

/* ---- back: issue and complete ------------------------------------------- */

/*
 * A request is over on the back side: a cache load goes to the cache, a
 * write the memory node has goes into the caches too, then the front
 * answers. Back.
 */
static void
back_finish(struct dpu *dpu, struct dpu_req *q)
{
	if (q->kind == DR_LOAD) {
		struct dpu_req *next = dpu_cache_load_done(dpu, q);

		/* A static copy's next piece: the loop puts it on the wire. */
		if (next != NULL)
			back_issue(dpu, next);
		back_woken(dpu);
		return;
	}
	if (q->kind == DR_WRITE && q->status == 0)
		dpu_cache_write_done(dpu, q);
	else if (q->kind == DR_READ)
		dpu_cache_read_done(dpu, q);
	dpu_complete(dpu, q);
}

/*
 * The READs a dynamic load woke: answered from the cache, or forwarded
 * when it cannot serve them after all. Back.
 */
static void
back_woken(struct dpu *dpu)
{
	struct dpu_reqq ready, again;
	struct dpu_req *q;

	TAILQ_INIT(&ready);
	TAILQ_INIT(&again);
	dpu_dcache_woken(dpu, &ready, &again);
	while ((q = TAILQ_FIRST(&ready)) != NULL) {
		TAILQ_REMOVE(&ready, q, link);
		dpu_complete(dpu, q);
	}
	while ((q = TAILQ_FIRST(&again)) != NULL) {
		struct dpu_node *n = q->m->node;

		TAILQ_REMOVE(&again, q, link);
		back_issue(dpu, q);
		if (n->dirty && n->conn != NULL) {
			n->dirty = false;
			dpu_node_flush(n);
			DPU_INC(dpu, flushes, 1);
		}
	}
}

/* Completion of a forwarded READ or WRITE. Back. */
static void
back_rw_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct dpu_req *q = ctx;
	struct dpu *dpu = q->dpu;

	atomic_fetch_sub_explicit(&dpu->mem_inflight, 1, memory_order_relaxed);
	q->status = status;
	if (q->onesided && --q->m->onesided_out == 0 &&
	    q->m->free_after != NULL) {
		struct dpu_req *f = q->m->free_after;

		/* The lease may end now: nothing of ours uses it any more. */
		q->m->free_after = NULL;
		back_issue(dpu, f);
	}
	if (status == 0) {
		uint32_t bytes = q->sub_len != 0 ? q->sub_len : q->len;

		if (q->flags & FAM_F_BACKGROUND)
			DPU_INC(dpu, mem_background_bytes, bytes);
		else
			DPU_INC(dpu, mem_ondemand_bytes, bytes);
		if (q->kind == DR_WRITE)
			DPU_INC(dpu, mem_write_bytes, bytes);
		else
			DPU_INC(dpu, mem_read_bytes, bytes);
	} else
		DPU_INC(dpu, mem_errors, 1);
	back_finish(dpu, q);
}

/* Completion of a control request: keeps the answer. Back. */
static void
back_call_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct dpu_req *q = ctx;

	atomic_fetch_sub_explicit(&q->dpu->mem_inflight, 1,
	    memory_order_relaxed);
	q->status = status;
	if (status == 0 && payload != NULL) {
		q->rlen = len < sizeof q->resp ? len : (uint32_t)sizeof q->resp;
		memcpy(q->resp, payload, q->rlen);
		if (len > sizeof q->resp)
			q->status = -EPROTO;
	}
	dpu_complete(q->dpu, q);
}

/* The answer to a REGION_LEASE: m's new lease, if still current. Back. */
static void
back_lease_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct dpu_req *q = ctx;
	struct dpu *dpu = q->dpu;
	struct dpu_mregion *m = q->m;
	struct fam_region_info info;

	m->renewing = false;
	if (status == 0 && (proto_get_region_info(payload, len, &info) < 0 ||
	    info.region != m->remote.region))
		status = -EPROTO;
	if (q->gen != m->node->gen) {
		/* That connection is gone already: a later one asks again. */
	} else if (status == 0 && info.rkey != 0) {
		m->lease_rkey = info.rkey;
		m->lease_addr = info.addr;
		m->lease_gen = q->gen;
		DPU_INC(dpu, lease_renewals, 1);
	} else if (status != -ECONNRESET && status != -ETIMEDOUT) {
		/*
		 * No lease (the region went, or a host fenced it off with an
		 * exclusive adoption): requests, and the memory node's
		 * answer to them, take over.
		 */
		DPU_INC(dpu, lease_errors, 1);
		log_info("dpu: no new lease on region %" PRIu32 " of %s: %s; "
		    "its reads and writes go as requests", m->remote.region,
		    m->node->addr, strerror(status < 0 ? -status : EPROTO));
		m->leased = false;
		m->lease_rkey = 0;
	}
	dpu_mregion_put(m);
	free(q);
}

/*
 * m's lease came on an earlier connection (the memory node deregistered
 * it when that one closed): asks for a new one, once per connection. Back.
 */
static void
back_lease_renew(struct dpu *dpu, struct dpu_node *n, struct dpu_mregion *m)
{
	uint8_t buf[FAM_REGION_LEASE_LEN];
	struct dpu_req *q;

	if (m->renewing)
		return;
	q = calloc(1, sizeof *q);
	if (q == NULL)
		return;
	q->dpu = dpu;
	q->m = m;
	q->gen = n->gen;
	proto_put_region_free(buf, m->remote.region);
	atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
	if (fam_conn_call(n->conn, FAM_MSG_REGION_LEASE, buf, sizeof buf,
	    back_lease_done, q) < 0) {
		dpu_mregion_put(m);
		free(q);
		return;
	}
	m->renewing = true;
	n->dirty = true;
}

/*
 * Chooses how a READ, WRITE or LOAD goes: one-sided against m's lease
 * when it is valid on the current connection, else as a request the
 * memory node serves (tcp; a lease being renewed; none to be had). A
 * dpu's own load of a region that is not shared stays a request: a host
 * may take such a region over (an exclusive adoption ends our lease
 * without telling us), and a one-sided access to an ended lease is an
 * access error that costs the whole connection, where a request only
 * gets ENOENT. Back.
 */
static bool
back_lease(struct dpu *dpu, struct dpu_node *n, struct dpu_req *q,
    struct fam_remote *r)
{
	struct dpu_mregion *m = q->m;

	*r = m->remote;
	r->rkey = 0;
	r->addr = 0;
	if (!m->leased || (q->kind == DR_LOAD && !(m->flags & FAM_RF_SHARED)))
		return false;
	if (m->lease_gen != n->gen || m->lease_rkey == 0) {
		back_lease_renew(dpu, n, m);
		return false;
	}
	r->rkey = m->lease_rkey;
	r->addr = m->lease_addr;
	return true;
}

/*
 * Issues a request on its memory node's connection; a request that cannot
 * go (node down, restarted) completes at once with an error. Back.
 */
static void
back_issue(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_node *n = q->kind == DR_CALL ? q->node : q->m->node;
	uint64_t instance = q->kind == DR_CALL ? q->instance : q->m->instance;
	struct fam_remote r;
	struct fam_mr *mr = NULL;
	struct fam_conn *c;
	int rc;

	if (q->kind == DR_CALL && q->type == FAM_MSG_REGION_FREE) {
		uint32_t region = (uint32_t)q->payload[0] << 24 |
		    (uint32_t)q->payload[1] << 16 |
		    (uint32_t)q->payload[2] << 8 | q->payload[3];

		if (q->m != NULL && q->m->onesided_out > 0) {
			/* Not while our RDMA is out against its lease. */
			q->m->free_after = q;
			return;
		}
		dpu_node_free_region(n, instance, region);
		back_finish(dpu, q);
		return;
	}
	if (atomic_load_explicit(&n->state, memory_order_acquire) != DN_UP ||
	    n->conn == NULL) {
		q->status = -EHOSTDOWN;
		back_finish(dpu, q);
		return;
	}
	if (atomic_load_explicit(&n->instance, memory_order_acquire) !=
	    instance) {
		q->status = -EIO; /* that memory famd restarted: data gone */
		back_finish(dpu, q);
		return;
	}
	if (q->kind != DR_CALL) {
		if (q->sub_len == 0) /* else set when its cached part was */
			q->wseq = atomic_load(&q->m->writes);
		q->onesided = back_lease(dpu, n, q, &r);
		mr = dpu_arena_has(dpu, q->buf) ? n->staging_mr : NULL;
	}
	switch (q->kind) {
	case DR_READ:
	case DR_LOAD:
		DPU_INC(dpu, mem_reads, 1);
		/* A cache's load two-sided: on its own connection, if any. */
		c = q->kind == DR_LOAD && !q->onesided && n->bg_up ? n->bg :
		    n->conn;
		if (c != n->conn)
			DPU_INC(dpu, load_own_conn, 1);
		if (q->sub_len != 0) /* the rest came from the cache */
			rc = fam_conn_readf(c, &r, q->off + q->sub_off,
			    q->sub_len, q->buf + q->sub_off, mr, q->flags,
			    back_rw_done, q);
		else
			rc = fam_conn_readf(c, &r, q->off, q->len, q->buf,
			    mr, q->flags, back_rw_done, q);
		break;
	case DR_WRITE:
		DPU_INC(dpu, mem_writes, 1);
		rc = fam_conn_writef(n->conn, &r, q->off, q->len, q->buf, mr,
		    q->flags, back_rw_done, q);
		break;
	default:
		q->gen = n->gen;
		rc = fam_conn_call(n->conn, q->type, q->payload, q->plen,
		    back_call_done, q);
		break;
	}
	if (rc < 0) {
		q->onesided = false;
		q->status = rc;
		back_finish(dpu, q);
		return;
	}
	if (q->onesided)
		q->m->onesided_out++;
	if (q->kind == DR_LOAD && q->onesided)
		DPU_INC(dpu, load_onesided, 1);
	else if (q->kind == DR_LOAD)
		DPU_INC(dpu, load_twosided, 1);
	else if (q->kind != DR_CALL && q->onesided)
		DPU_INC(dpu, mem_onesided, 1);
	else if (q->kind != DR_CALL)
		DPU_INC(dpu, mem_twosided, 1);
	n->dirty = true;
	stat_max(&dpu->n.mem_inflight_max, (uint64_t)atomic_fetch_add_explicit(
	    &dpu->mem_inflight, 1, memory_order_relaxed) + 1);
}

/*
 * Issues a list of requests: with aggregation, all of them, then one flush
 * per memory-node connection they went to; without, each flushed on its
 * own. Back.
 */
static void
back_run(struct dpu *dpu, struct dpu_reqq *list)
{
	bool aggregate = atomic_load_explicit(&dpu->aggregate,
	    memory_order_relaxed);
	struct dpu_req *q;

	while ((q = TAILQ_FIRST(list)) != NULL) {
		TAILQ_REMOVE(list, q, link);
		back_issue(dpu, q);
		if (aggregate)
			continue;
		for (unsigned i = 0; i < dpu->nnodes; i++)
			if (dpu->nodes[i].dirty && dpu->nodes[i].conn != NULL) {
				dpu->nodes[i].dirty = false;
				dpu_node_flush(&dpu->nodes[i]);
				DPU_INC(dpu, flushes, 1);
			}
	}
	for (unsigned i = 0; i < dpu->nnodes; i++) {
		if (dpu->nodes[i].dirty) {
			dpu->nodes[i].dirty = false;
			if (dpu->nodes[i].conn != NULL) {
				dpu_node_flush(&dpu->nodes[i]);
				DPU_INC(dpu, flushes, 1);
			}
		}
		dpu_node_stats_sync(&dpu->nodes[i]);
	}
	if (dpu->back_stopping) {
		dpu_nodes_close(dpu);
		if (dpu->async && dpu_nodes_closed(dpu))
			event_base_loopexit(dpu->back_base, NULL);
	}
}

/* Wakes a queue's consumer. */
static void
queue_wake(struct dpu_queue *qu)
{
	uint64_t one = 1;

	if (write(qu->efd, &one, sizeof one) < 0 && errno != EAGAIN)
		log_warn("dpu: waking a loop: %s", strerror(errno));
}

/* Appends a list of n requests to a queue; wakes its consumer. */
static void
queue_push(struct dpu_queue *qu, struct dpu_reqq *list, unsigned n,
    _Atomic uint64_t *max)
{
	bool wake;
	unsigned depth;

	pthread_mutex_lock(&qu->lock);
	wake = TAILQ_EMPTY(&qu->q);
	TAILQ_CONCAT(&qu->q, list, link);
	qu->depth += n;
	depth = qu->depth;
	pthread_mutex_unlock(&qu->lock);
	stat_max(max, depth);
	if (wake)
		queue_wake(qu);
}

/* The consumer's side: takes everything queued and works on it. */
static void
queue_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dpu_queue *qu = arg;
	struct dpu_reqq list;
	uint64_t v;

	if (read(qu->efd, &v, sizeof v) < 0 && errno != EAGAIN)
		log_warn("dpu: reading an eventfd: %s", strerror(errno));
	TAILQ_INIT(&list);
	pthread_mutex_lock(&qu->lock);
	TAILQ_CONCAT(&list, &qu->q, link);
	qu->depth = 0;
	pthread_mutex_unlock(&qu->lock);
	qu->drain(qu->dpu, &list);
}

/* Sets a queue up on the consumer's loop. */
static int
queue_init(struct dpu_queue *qu, struct dpu *dpu, struct event_base *base,
    void (*drain)(struct dpu *, struct dpu_reqq *))
{
	qu->dpu = dpu;
	qu->drain = drain;
	TAILQ_INIT(&qu->q);
	pthread_mutex_init(&qu->lock, NULL);
	qu->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (qu->efd < 0)
		return -errno;
	qu->ev = event_new(base, qu->efd, EV_READ | EV_PERSIST, queue_cb, qu);
	if (qu->ev == NULL || event_add(qu->ev, NULL) < 0)
		return -ENOMEM;
	return 0;
}

/* Tears a queue down (its consumer's loop no longer runs). */
static void
queue_fini(struct dpu_queue *qu)
{
	if (qu->ev != NULL)
		event_free(qu->ev);
	if (qu->efd >= 0)
		close(qu->efd);
	qu->ev = NULL;
	qu->efd = -1;
	pthread_mutex_destroy(&qu->lock);
}

/* Hands a list of n requests to the back side. Front. */
static void
front_hand_over(struct dpu *dpu, struct dpu_reqq *list, unsigned n)
{
	if (dpu->async)
		queue_push(&dpu->to_back, list, n, &dpu->n.queue_back_max);
	else
		back_run(dpu, list);
}

/* Sends the batch collected so far. Front. */
static void
batch_send(struct dpu *dpu)
{
	unsigned n = dpu->batch_n, b = 0;
	struct dpu_reqq list;

	if (n == 0)
		return;
	while (b + 1 < DPU_BATCH_BUCKETS && (2u << b) <= n)
		b++;
	DPU_INC(dpu, batches, 1);
	DPU_INC(dpu, batch_requests, n);
	DPU_INC(dpu, batch_hist[b], 1);
	stat_max(&dpu->n.batch_max, n);
	TAILQ_INIT(&list);
	TAILQ_CONCAT(&list, &dpu->batch, link);
	dpu->batch_n = 0;
	front_hand_over(dpu, &list, n);
}

/* The loop's pass is over: the batch goes. Front. */
static void
batch_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dpu *dpu = arg;

	dpu->batch_armed = false;
	batch_send(dpu);
}

/*
 * Hands requests made on another thread (prefetch loads) to the back; the
 * caches' dpu->up.loads.
 */
void
dpu_submit_from(struct dpu *dpu, struct dpu_reqq *list, unsigned n)
{
	queue_push(&dpu->to_back, list, n, &dpu->n.queue_back_max);
}

/* Hands a request to the back side, in the batch or alone. Front. */
void
dpu_submit(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_reqq one;

	if (atomic_load_explicit(&dpu->aggregate, memory_order_relaxed) &&
	    !dpu->stopping) {
		TAILQ_INSERT_TAIL(&dpu->batch, q, link);
		if (++dpu->batch_n >= dpu->batch_limit)
			batch_send(dpu);
		else if (!dpu->batch_armed) {
			dpu->batch_armed = true;
			event_active(dpu->batch_ev, EV_TIMEOUT, 0);
		}
		return;
	}
	batch_send(dpu); /* what was collected goes first: order is kept */
	TAILQ_INIT(&one);
	TAILQ_INSERT_TAIL(&one, q, link);
	front_hand_over(dpu, &one, 1);
}

/* Hands a list of requests (cache loads) to the back, one by one. Front. */
void
dpu_submit_list(struct dpu *dpu, struct dpu_reqq *list)
{
	struct dpu_req *q;

	while ((q = TAILQ_FIRST(list)) != NULL) {
		TAILQ_REMOVE(list, q, link);
		dpu_submit(dpu, q);
	}
}

/* ---- front: compose and answer ------------------------------------------ */

/*
 * Returns the registration of the staging arena on a host connection, made
 * at its first READ reply from the arena, so that the reply goes from the
 * slot the memory node's data landed in (each connection has a protection
 * domain of its own: the memory node's registration is no use there).
 * NULL: the reply is copied. Front.
 */
static struct fam_mr *
hconn_arena_mr(struct dpu *dpu, struct dpu_hconn *hc)
{
	if (!hc->arena_tried) {
		hc->arena_tried = true;
		hc->arena_mr = fam_mr_register(hc->c, dpu->arena,
		    dpu->arena_size);
		if (hc->arena_mr == NULL)
			log_warn("dpu: %s: cannot register the staging arena "
			    "(%s); READ replies are copied", hc->peer,
			    strerror(errno));
	}
	return hc->arena_mr;
}

/* The reply of a READ is sent: its staging buffer can go. Front. */
static void
front_read_sent(void *arg)
{
	dpu_req_free(arg);
}

/* Maps an error of the memory link to what the host is told. */
static int
front_errno(int err)
{
	switch (err) {
	case -ECONNRESET:
	case -ETIMEDOUT:
	case -ENOTCONN:
	case -ECONNREFUSED:
		return EHOSTDOWN;
	default:
		return err < 0 ? -err : err;
	}
}

/* A request is complete: answer the host, release what it held. Front. */
static void
front_done(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_hconn *hc = q->hc;

	if (q->kind == DR_CALL) {
		if (q->done != NULL)
			q->done(q);
		dpu_req_free(q);
		return;
	}
	if (hc->closed) {
		dpu_req_free(q);
		return;
	}
	if (q->status < 0) {
		DPU_INC(dpu, rw_errors, 1);
		(void)fam_conn_reply(hc->c, &q->h, front_errno(q->status), NULL,
		    0, false, NULL, NULL);
		dpu_req_free(q);
		return;
	}
	if (q->flags & FAM_F_BACKGROUND)
		DPU_INC(dpu, host_background_bytes, q->len);
	else
		DPU_INC(dpu, host_ondemand_bytes, q->len);
	DPU_INC(dpu, forwarded, 1);
	DPU_INC(dpu, forward_ns, mono_ns() - q->start_ns);
	if (q->kind == DR_WRITE) {
		DPU_INC(dpu, host_write_bytes, q->len);
		(void)fam_conn_reply(hc->c, &q->h, 0, NULL, 0, false, NULL,
		    NULL);
		dpu_req_free(q);
		return;
	}
	DPU_INC(dpu, host_read_bytes, q->len);
	if (dpu->opts.kind != FAM_TP_VERBS) {
		if (fam_conn_reply(hc->c, &q->h, 0, q->buf, q->len, false,
		    front_read_sent, q) < 0)
			dpu_req_free(q);
		return;
	}
	{
		/* Verbs: from the staging slot when the connection can. */
		struct iovec iov = { .iov_base = q->buf, .iov_len = q->len };
		struct fam_mr *mr = dpu_arena_has(dpu, q->buf) ?
		    hconn_arena_mr(dpu, hc) : NULL;
		uint64_t zc = fam_conn_stats(hc->c)->bytes_zero_copy;
		uint32_t len = q->len;

		if (fam_conn_replyv(hc->c, &q->h, 0, &iov, 1, mr,
		    front_read_sent, q) < 0) {
			dpu_req_free(q);
			return;
		}
		if (fam_conn_stats(hc->c)->bytes_zero_copy - zc == len) {
			DPU_INC(dpu, replies_zero_copy, 1);
			DPU_INC(dpu, reply_bytes_zero_copy, len);
		} else {
			DPU_INC(dpu, reply_bytes_copied, len);
		}
	}
}

/* A request completed on the back side; the front answers. Back. */
static void
dpu_complete(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_reqq one;

	if (!dpu->async) {
		front_done(dpu, q);
		return;
	}
	TAILQ_INIT(&one);
	TAILQ_INSERT_TAIL(&one, q, link);
	queue_push(&dpu->to_front, &one, 1, &dpu->n.queue_front_max);
}

/* Completions handed over by the back thread. Front. */
static void
front_drain(struct dpu *dpu, struct dpu_reqq *list)
{
	struct dpu_req *q;

	while ((q = TAILQ_FIRST(list)) != NULL) {
		TAILQ_REMOVE(list, q, link);
		front_done(dpu, q);
	}
}

/* The back thread: its loop runs until the back is told to stop. */
static void *
back_main(void *arg)
{
	struct dpu *dpu = arg;

	event_base_loop(dpu->back_base, EVLOOP_NO_EXIT_ON_EMPTY);
	return NULL;
}

/* The first thing the back thread does: connect to the memory nodes. */
static void
back_start_cb(evutil_socket_t fd, short what, void *arg)
{
	dpu_nodes_connect(arg);
}

/* Reads the reloadable forwarding keys. Front. */
void
dpu_forward_configure(struct dpu *dpu)
{
	const struct cfg *cfg = dpu->d->cfg;

	atomic_store_explicit(&dpu->aggregate,
	    cfg_int(cfg, CFG_DPU_AGGREGATE) != 0, memory_order_relaxed);
	dpu->batch_limit = (unsigned)cfg_int(cfg, CFG_DPU_BATCH_LIMIT);
}

/*
 * Sets the forwarding up: the batch, and with async the back's loop,
 * thread and queues; then the back connects to the memory nodes.
 */
int
dpu_forward_start(struct dpu *dpu, char **cause)
{
	struct timeval now = { 0, 0 };
	int err;

	TAILQ_INIT(&dpu->batch);
	dpu->to_back.efd = dpu->to_front.efd = -1;
	dpu->async = cfg_int(dpu->d->cfg, CFG_DPU_ASYNC) != 0;
	dpu_forward_configure(dpu);
	if (dpu->opts.kind == FAM_TP_VERBS && dpu_arena_init(dpu) < 0)
		log_warn("dpu: no memory for the registered staging arena; "
		    "transfers go through bounce buffers");
	dpu->batch_ev = event_new(dpu->base, -1, 0, batch_cb, dpu);
	if (dpu->batch_ev == NULL) {
		*cause = xasprintf("out of memory");
		return -ENOMEM;
	}
	if (!dpu->async) {
		dpu->back_base = dpu->base;
		if (dpu_nodes_init(dpu) < 0) {
			*cause = xasprintf("out of memory");
			return -ENOMEM;
		}
		/* The prefetch workers' way in, on the one loop. */
		if ((err = queue_init(&dpu->to_back, dpu, dpu->back_base,
		    back_run)) < 0) {
			*cause = xasprintf("forwarding queue: %s",
			    strerror(-err));
			return err;
		}
		dpu_nodes_connect(dpu);
		return 0;
	}
	dpu->back_base = event_base_new();
	if (dpu->back_base == NULL || dpu_nodes_init(dpu) < 0) {
		*cause = xasprintf("cannot make the forwarding loop");
		return -ENOMEM;
	}
	if ((err = queue_init(&dpu->to_back, dpu, dpu->back_base,
	    back_run)) < 0 || (err = queue_init(&dpu->to_front, dpu,
	    dpu->base, front_drain)) < 0) {
		*cause = xasprintf("forwarding queues: %s", strerror(-err));
		return err;
	}
	if (event_base_once(dpu->back_base, -1, EV_TIMEOUT, back_start_cb, dpu,
	    &now) < 0) {
		*cause = xasprintf("out of memory");
		return -ENOMEM;
	}
	err = pthread_create(&dpu->back_thread, NULL, back_main, dpu);
	if (err != 0) {
		*cause = xasprintf("cannot start the forwarding thread: %s",
		    strerror(err));
		return -err;
	}
	dpu->back_started = true;
	return 0;
}

/*
 * Stops the forwarding: what is batched goes, the back closes the memory
 * nodes (its thread ends), and the completions it handed over are taken.
 * Front; the memory-node table is freed by dpu_nodes_fini().
 */
void
dpu_forward_stop(struct dpu *dpu)
{
	struct dpu_reqq list;

	if (!dpu->async)
		dpu->back_stopping = true;
	batch_send(dpu);
	if (dpu->batch_ev != NULL)
		event_free(dpu->batch_ev);
	dpu->batch_ev = NULL;
	if (!dpu->async) {
		TAILQ_INIT(&list);
		pthread_mutex_lock(&dpu->to_back.lock);
		TAILQ_CONCAT(&list, &dpu->to_back.q, link);
		pthread_mutex_unlock(&dpu->to_back.lock);
		back_run(dpu, &list);
		dpu_nodes_close(dpu);
		for (int i = 0; i < 100 && !dpu_nodes_closed(dpu); i++)
			event_base_loop(dpu->base, EVLOOP_NONBLOCK);
		queue_fini(&dpu->to_back);
		dpu_buf_fini();
		dpu_arena_fini(dpu);
		return;
	}
	if (dpu->back_started) {
		/* The back sees the flag with the next list it takes. */
		pthread_mutex_lock(&dpu->to_back.lock);
		dpu->back_stopping = true;
		pthread_mutex_unlock(&dpu->to_back.lock);
		queue_wake(&dpu->to_back);
		pthread_join(dpu->back_thread, NULL);
		dpu->back_started = false;
	}
	TAILQ_INIT(&list);
	if (dpu->to_front.efd >= 0) {
		pthread_mutex_lock(&dpu->to_front.lock);
		TAILQ_CONCAT(&list, &dpu->to_front.q, link);
		pthread_mutex_unlock(&dpu->to_front.lock);
		front_drain(dpu, &list);
	}
	queue_fini(&dpu->to_front);
	queue_fini(&dpu->to_back);
	dpu_buf_fini();
	dpu_arena_fini(dpu);
}

/* Describes batching and the queues for status. Front. */
json_t *
dpu_forward_json(struct dpu *dpu)
{
	json_t *hist = json_array();
	uint64_t batches = DPU_GET(dpu, batches);
	uint64_t fwd = DPU_GET(dpu, forwarded);
	uint64_t doorbells, wrs;
	json_t *j;

	if (!dpu->async)
		for (unsigned i = 0; i < dpu->nnodes; i++)
			dpu_node_stats_sync(&dpu->nodes[i]);
	doorbells = DPU_GET(dpu, mem_doorbells);
	wrs = DPU_GET(dpu, mem_wrs);
	for (unsigned b = 0; b < DPU_BATCH_BUCKETS; b++)
		json_array_append_new(hist, json_integer((json_int_t)
		    DPU_GET(dpu, batch_hist[b])));
	j = json_pack("{s:b,s:b,s:i,s:I,s:I,s:I,s:f,s:o,s:I,s:I,s:I,s:I,"
	    "s:I,s:I,s:f,s:{s:I,s:I,s:I,s:I,s:f,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
	    "s:I},s:{s:I,s:I,s:I}}",
	    "async", dpu->async,
	    "aggregate", atomic_load(&dpu->aggregate),
	    "batch_limit", (int)dpu->batch_limit,
	    "batches", (json_int_t)batches,
	    "batched_requests", (json_int_t)DPU_GET(dpu, batch_requests),
	    "batch_max", (json_int_t)DPU_GET(dpu, batch_max),
	    "batch_mean", batches ? (double)DPU_GET(dpu, batch_requests) /
	    (double)batches : 0.0,
	    "batch_sizes_log2", hist,
	    "flushes", (json_int_t)DPU_GET(dpu, flushes),
	    "requests_in_flight", (json_int_t)dpu->inflight,
	    "memory_in_flight", (json_int_t)atomic_load(&dpu->mem_inflight),
	    "memory_in_flight_max", (json_int_t)DPU_GET(dpu, mem_inflight_max),
	    "queue_to_back_max", (json_int_t)DPU_GET(dpu, queue_back_max),
	    "queue_to_front_max", (json_int_t)DPU_GET(dpu, queue_front_max),
	    "forward_latency_us_mean", fwd > 0 ?
	    (double)DPU_GET(dpu, forward_ns) / (double)fwd / 1000.0 : 0.0,
	    "memory_link",
	    "doorbells", (json_int_t)doorbells,
	    "work_requests", (json_int_t)wrs,
	    "signalled", (json_int_t)DPU_GET(dpu, mem_wrs_signalled),
	    "unsignalled", (json_int_t)(wrs - DPU_GET(dpu, mem_wrs_signalled)),
	    "work_requests_per_doorbell", doorbells > 0 ? (double)wrs /
	    (double)doorbells : 0.0,
	    "onesided", (json_int_t)DPU_GET(dpu, mem_onesided),
	    "twosided", (json_int_t)DPU_GET(dpu, mem_twosided),
	    "loads_onesided", (json_int_t)DPU_GET(dpu, load_onesided),
	    "loads_twosided", (json_int_t)DPU_GET(dpu, load_twosided),
	    "lease_renewals", (json_int_t)DPU_GET(dpu, lease_renewals),
	    "lease_errors", (json_int_t)DPU_GET(dpu, lease_errors),
	    "staging_registered", (json_int_t)DPU_GET(dpu, staging_registered),
	    "staging_bounced", (json_int_t)DPU_GET(dpu, staging_bounced),
	    "host_link",
	    "replies_zero_copy", (json_int_t)DPU_GET(dpu, replies_zero_copy),
	    "reply_bytes_zero_copy", (json_int_t)DPU_GET(dpu,
	    reply_bytes_zero_copy),
	    "reply_bytes_copied", (json_int_t)DPU_GET(dpu, reply_bytes_copied));
	json_object_set_new(json_object_get(j, "memory_link"),
	    "loads_own_connection", json_integer((json_int_t)DPU_GET(dpu,
	    load_own_conn)));
	return j;
}

/* Refuses a READ or WRITE with status err (a positive errno). Front. */
void
dpu_forward_refuse(struct dpu_hconn *hc, const struct fam_hdr *h, int err)
{
	DPU_INC(hc->dpu, rw_errors, 1);
	(void)fam_conn_reply(hc->c, h, err, NULL, 0, false, NULL, NULL);
}

/*
 * Serves a READ from a cache when one holds it: the reply references the
 * cached bytes (zero-copy). Returns false when the read is to be
 * forwarded. Front.
 */
static bool
front_cache_read(struct dpu_hconn *hc, const struct fam_hdr *h,
    struct dpu_mregion *m, uint64_t off, uint32_t len, bool *wait)
{
	struct dpu *dpu = hc->dpu;
	struct dpu_reqq loads;
	struct dpu_hit hit;
	bool served;

	TAILQ_INIT(&loads);
	hit.wait = false;
	served = dpu_cache_lookup(dpu, m, off, len, &hit, &loads);
	dpu_submit_list(dpu, &loads);
	*wait = hit.wait;
	if (!served)
		return false;
	if (fam_conn_reply(hc->c, h, 0, hit.data, len, false, hit.release,
	    hit.arg) < 0) {
		hit.release(hit.arg);
		return true; /* the connection is closing: nobody to answer */
	}
	if (hit.dynamic) {
		DPU_INC(dpu, dyn_hits, 1);
		DPU_INC(dpu, dyn_hit_bytes, len);
	} else {
		DPU_INC(dpu, static_hits, 1);
		DPU_INC(dpu, static_hit_bytes, len);
	}
	DPU_INC(dpu, host_read_bytes, len);
	if (h->flags & FAM_F_BACKGROUND)
		DPU_INC(dpu, host_background_bytes, len);
	else
		DPU_INC(dpu, host_ondemand_bytes, len);
	return true;
}

/*
 * A host's READ or WRITE of [off, off + len) of m, checked by the caller:
 * served from a cache, or forwarded with its data (a WRITE's, at data, is
 * copied into staging: it lives only during this call). Front.
 */
void
dpu_forward_rw(struct dpu_hconn *hc, const struct fam_hdr *h,
    struct dpu_mregion *m, uint64_t off, uint32_t len, const uint8_t *data)
{
	struct dpu *dpu = hc->dpu;
	struct dpu_req *q;
	bool wait = false;

	if (h->type == FAM_MSG_READ && front_cache_read(hc, h, m, off, len,
	    &wait))
		return;
	if (hc->inflight >= DPU_HOST_INFLIGHT_MAX) {
		/* Only where the transport cannot stop reading (verbs). */
		DPU_INC(dpu, flow_refusals, 1);
		dpu_forward_refuse(hc, h, EBUSY);
		return;
	}
	q = calloc(1, sizeof *q);
	if (q == NULL) {
		dpu_forward_refuse(hc, h, ENOMEM);
		return;
	}
	q->kind = h->type == FAM_MSG_READ ? DR_READ : DR_WRITE;
	q->dpu = dpu;
	q->h = *h;
	q->off = off;
	q->len = len;
	q->flags = h->flags & FAM_F_BACKGROUND;
	q->start_ns = mono_ns();
	q->buf = dpu_buf_get(dpu, len);
	if (q->buf == NULL) {
		free(q);
		dpu_forward_refuse(hc, h, ENOMEM);
		return;
	}
	if (q->kind == DR_WRITE)
		memcpy(q->buf, data, len);
	q->m = m;
	atomic_fetch_add_explicit(&q->m->refs, 1, memory_order_relaxed);
	q->hc = hc;
	hc->refs++;
	hc->inflight++;
	hc->staged += len;
	dpu->inflight++;
	hconn_flow(hc);
	if (wait) {
		/* Its bytes are loading: it waits for them, not fetched twice. */
		switch (dpu_cache_park(dpu, q)) {
		case DP_PARKED:
			return;
		case DP_READY:
			front_done(dpu, q);
			return;
		}
	}
	dpu_submit(dpu, q);
}
