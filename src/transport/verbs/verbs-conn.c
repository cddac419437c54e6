/* SPDX-License-Identifier: Apache-2.0 */
/*
 * verbs-conn.c - a verbs connection's resources and life: creation (PD,
 * CQ, SRQ, buffers), close and drain, teardown, deadlines, and the API.
 */
#include "config.h"

#include "transport/verbs/verbs.h"


/* ---- connection resources ---------------------------------------------- */

/* Allocates a connection (no verbs resources yet) with its events. */
struct vb_conn *
vb_conn_new(struct event_base *evb, const struct fam_conn_opts *opts,
    bool active)
{
	struct vb_conn *c = calloc(1, sizeof *c);

	if (c == NULL)
		return NULL;
	if (tp_conn_init(&c->tc, &vb_conn_ops, evb, opts, active) < 0) {
		free(c);
		return NULL;
	}
	if (c->tc.opts.qps_per_peer > VB_MAX_QPS)
		c->tc.opts.qps_per_peer = VB_MAX_QPS;
	if (c->tc.opts.inject_error_ppm > 1000000)
		c->tc.opts.inject_error_ppm = 1000000;
	c->rng = vb_random64();
	TAILQ_INIT(&c->mrs);
	for (unsigned i = 0; i < VB_MAX_QPS; i++) {
		c->qps[i].c = c;
		c->qps[i].index = i;
		TAILQ_INIT(&c->qps[i].outq);
	}
	c->ev_post = event_new(evb, -1, 0, vb_post_cb, c);
	c->ev_poll = event_new(evb, -1, 0, vb_poll_cb, c);
	c->ev_async = event_new(evb, -1, 0, vb_async_conn_cb, c);
	if (c->ev_post == NULL || c->ev_poll == NULL || c->ev_async == NULL) {
		if (c->ev_post != NULL)
			event_free(c->ev_post);
		if (c->ev_poll != NULL)
			event_free(c->ev_poll);
		if (c->ev_async != NULL)
			event_free(c->ev_async);
		tp_conn_fini(&c->tc);
		free(c);
		return NULL;
	}
	pthread_mutex_lock(&vb_lock);
	LIST_INSERT_HEAD(&vb_conns, c, link);
	pthread_mutex_unlock(&vb_lock);
	return c;
}

/* Gives the connection its own rdma_cm event channel, in the loop. */
int
vb_conn_channel(struct vb_conn *c)
{
	c->cmch = rdma_create_event_channel();
	if (c->cmch == NULL)
		return -errno;
	if (fd_set_nonblock(c->cmch->fd) < 0)
		return -errno;
	return vb_watch(c->tc.evb, c->cmch->fd, vb_cm_cb, c, &c->ev_cm);
}

/* Allocates page-aligned memory and registers it. */
static int
vb_buf_reg(struct vb_conn *c, size_t len, int access, uint8_t **mem,
    struct ibv_mr **mr)
{
	void *p = NULL;
	int err;

	err = posix_memalign(&p, (size_t)sysconf(_SC_PAGESIZE), len);
	if (err != 0)
		return -err;
	memset(p, 0, len);
	*mr = ibv_reg_mr(c->pd, p, len, access);
	if (*mr == NULL) {
		err = errno != 0 ? -errno : -ENOMEM;
		free(p);
		return err;
	}
	*mem = p;
	return 0;
}

/* Posts receive buffers (a chain) on the SRQ. Returns 0 or -errno. */
int
vb_post_recvs(struct vb_conn *c, struct vb_rbuf *list)
{
	struct ibv_recv_wr wrs[VB_POLL_BATCH], *bad = NULL;
	struct ibv_sge sges[VB_POLL_BATCH];
	int n = 0, err;

	while (list != NULL) {
		struct vb_rbuf *rb = list;

		list = rb->next;
		rb->next = NULL;
		sges[n].addr = (uintptr_t)rb->buf;
		sges[n].length = VB_MSG_BUF;
		sges[n].lkey = c->rmr->lkey;
		wrs[n].wr_id = (uintptr_t)rb;
		wrs[n].sg_list = &sges[n];
		wrs[n].num_sge = 1;
		wrs[n].next = NULL;
		if (n > 0)
			wrs[n - 1].next = &wrs[n];
		if (++n == VB_POLL_BATCH || list == NULL) {
			err = ibv_post_srq_recv(c->srq, wrs, &bad);
			if (err != 0)
				return -err;
			n = 0;
		}
	}
	return 0;
}

/*
 * Frees the SRQ, the CQ (its events acknowledged, its watch gone) and the
 * completion channel, in that order (NULL-safe).
 */
static void
vb_conn_cq_free(struct vb_conn *c)
{
	if (c->srq != NULL)
		ibv_destroy_srq(c->srq);
	c->srq = NULL;
	if (c->ev_cq != NULL)
		event_free(c->ev_cq);
	c->ev_cq = NULL;
	if (c->cq != NULL && c->cq_unacked > 0)
		ibv_ack_cq_events(c->cq, c->cq_unacked);
	c->cq_unacked = 0;
	if (c->cq != NULL)
		ibv_destroy_cq(c->cq);
	c->cq = NULL;
	if (c->cchan != NULL)
		ibv_destroy_comp_channel(c->cchan);
	c->cchan = NULL;
}

/* Frees the PD (NULL-safe): last, after everything in it. */
static void
vb_conn_pd_free(struct vb_conn *c)
{
	if (c->pd != NULL)
		ibv_dealloc_pd(c->pd);
	c->pd = NULL;
}

/*
 * Creates the PD, the completion channel (non-blocking) with its CQ
 * (armed), and the SRQ, sized for nqps QPs. On failure nothing is left.
 */
static int
vb_conn_queues(struct vb_conn *c, struct ibv_context *ctx, unsigned nqps)
{
	struct ibv_srq_init_attr sattr = { 0 };
	int cqe, err;

	c->pd = ibv_alloc_pd(ctx);
	if (c->pd == NULL)
		return -ENOMEM;
	c->cchan = ibv_create_comp_channel(ctx);
	if (c->cchan == NULL || fd_set_nonblock(c->cchan->fd) < 0) {
		err = errno != 0 ? -errno : -ENOMEM;
		goto out;
	}
	cqe = (int)(nqps * VB_SQ_DEPTH + VB_RECV_BUFS(nqps) + 16);
	if (c->dev->max_cqe > 0 && cqe > c->dev->max_cqe)
		cqe = c->dev->max_cqe;
	c->cq = ibv_create_cq(ctx, cqe, c, c->cchan, 0);
	if (c->cq == NULL) {
		err = errno != 0 ? -errno : -ENOMEM;
		goto out;
	}
	if ((err = ibv_req_notify_cq(c->cq, 0)) != 0) {
		err = -err;
		goto out;
	}
	sattr.srq_context = c;
	sattr.attr.max_wr = VB_RECV_BUFS(nqps);
	sattr.attr.max_sge = 1;
	c->srq = ibv_create_srq(c->pd, &sattr);
	if (c->srq == NULL) {
		err = errno != 0 ? -errno : -ENOMEM;
		goto out;
	}
	return 0;

out:
	vb_conn_cq_free(c);
	vb_conn_pd_free(c);
	return err;
}

/* Deregisters and frees a buffer of vb_buf_reg() (NULL-safe). */
static void
vb_buf_free(struct ibv_mr **mr, uint8_t **mem)
{
	if (*mr != NULL)
		ibv_dereg_mr(*mr);
	free(*mem);
	*mr = NULL;
	*mem = NULL;
}

/* Frees what vb_conn_bufs() made (NULL-safe, in reverse order). */
static void
vb_conn_bufs_free(struct vb_conn *c)
{
	free(c->rbufs);
	free(c->sbufs);
	free(c->slabs);
	c->rbufs = NULL;
	c->sbufs = c->sfree = NULL;
	c->slabs = c->bfree = NULL;
	vb_buf_free(&c->bmr, &c->bmem);
	vb_buf_free(&c->smr, &c->smem);
	vb_buf_free(&c->rmr, &c->rmem);
}

/* Threads the send buffers, bounce slabs and receive buffers into lists. */
static struct vb_rbuf *
vb_conn_lists(struct vb_conn *c)
{
	struct vb_rbuf *list = NULL;

	for (unsigned i = 0; i < VB_SEND_BUFS; i++) {
		c->sbufs[i].buf = c->smem + (size_t)i * VB_MSG_BUF;
		c->sbufs[i].next = c->sfree;
		c->sfree = &c->sbufs[i];
	}
	for (unsigned i = 0; i < VB_SLABS; i++) {
		c->slabs[i].buf = c->bmem + (size_t)i * VB_SLAB;
		c->slabs[i].next = c->bfree;
		c->bfree = &c->slabs[i];
	}
	c->nbfree = VB_SLABS;
	for (unsigned i = 0; i < c->nrbufs; i++) {
		c->rbufs[i].tag = VB_TAG_RECV;
		c->rbufs[i].buf = c->rmem + (size_t)i * VB_MSG_BUF;
		c->rbufs[i].next = list;
		list = &c->rbufs[i];
	}
	return list;
}

/*
 * Registers the receive, send and bounce buffers, threads their lists and
 * posts the receives on the SRQ. On failure nothing is left.
 */
static int
vb_conn_bufs(struct vb_conn *c, unsigned nqps)
{
	int err;

	/* Receive buffers: written by our HCA only. */
	c->nrbufs = VB_RECV_BUFS(nqps);
	c->rlen = (size_t)c->nrbufs * VB_MSG_BUF;
	err = vb_buf_reg(c, c->rlen, IBV_ACCESS_LOCAL_WRITE, &c->rmem, &c->rmr);
	/* Send buffers: only read by the HCA. */
	c->slen = (size_t)VB_SEND_BUFS * VB_MSG_BUF;
	if (err == 0)
		err = vb_buf_reg(c, c->slen, 0, &c->smem, &c->smr);
	/* Bounce slabs: targets of RDMA READ, sources of RDMA WRITE. */
	c->blen = (size_t)VB_SLABS * VB_SLAB;
	if (err == 0)
		err = vb_buf_reg(c, c->blen, IBV_ACCESS_LOCAL_WRITE, &c->bmem,
		    &c->bmr);
	if (err < 0)
		goto out;
	c->rbufs = calloc(c->nrbufs, sizeof *c->rbufs);
	c->sbufs = calloc(VB_SEND_BUFS, sizeof *c->sbufs);
	c->slabs = calloc(VB_SLABS, sizeof *c->slabs);
	if (c->rbufs == NULL || c->sbufs == NULL || c->slabs == NULL) {
		err = -ENOMEM;
		goto out;
	}
	err = vb_post_recvs(c, vb_conn_lists(c));
	if (err < 0)
		goto out;
	return 0;

out:
	vb_conn_bufs_free(c);
	return err;
}

/*
 * Creates what every QP of the connection shares, on the device of ctx:
 * PD, completion channel, CQ, SRQ, and the registered receive, send and
 * bounce buffers (receives posted). nqps sizes the CQ and the SRQ.
 */
int
vb_conn_setup(struct vb_conn *c, struct ibv_context *ctx, unsigned nqps)
{
	int err;

	c->nqps = nqps;
	pthread_mutex_lock(&vb_lock);
	c->ctx = ctx; /* other loops' device events look for it */
	pthread_mutex_unlock(&vb_lock);
	c->dev = vb_dev_get(c->tc.evb, ctx);
	if (c->dev == NULL)
		return -ENOMEM;
	c->rd_atom = c->dev->rd_atom;
	err = vb_conn_queues(c, ctx, nqps);
	if (err < 0)
		goto out_dev;
	err = vb_conn_bufs(c, nqps);
	if (err < 0)
		goto out_queues;
	err = vb_watch(c->tc.evb, c->cchan->fd, vb_cq_cb, c, &c->ev_cq);
	if (err < 0)
		goto out_bufs;
	return 0;

out_bufs:
	vb_conn_bufs_free(c);
out_queues:
	vb_conn_cq_free(c);
	vb_conn_pd_free(c);
out_dev:
	vb_dev_put(c->dev);
	c->dev = NULL;
	return err;
}

/* Creates QP q on its rdma_cm id with the connection's PD, CQ and SRQ. */
int
vb_qp_create(struct vb_qp *q)
{
	struct vb_conn *c = q->c;
	struct ibv_qp_init_attr attr = {
		.qp_context = q,
		.send_cq = c->cq,
		.recv_cq = c->cq,
		.srq = c->srq,
		.cap = { .max_send_wr = VB_SQ_DEPTH,
			.max_send_sge = VB_MAX_SGE,
			.max_recv_wr = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};

	if (q->id->verbs != c->ctx)
		return -EXDEV; /* every QP must share the PD: one device */
	q->ring = calloc(VB_SQ_DEPTH, sizeof *q->ring);
	if (q->ring == NULL)
		return -ENOMEM;
	if (rdma_create_qp(q->id, c->pd, &attr) != 0) {
		int err = -errno;

		free(q->ring);
		q->ring = NULL;
		return err;
	}
	q->qp = q->id->qp;
	q->qp_num = q->qp->qp_num;
	for (unsigned i = 0; i < VB_SQ_DEPTH; i++) {
		q->ring[i].tag = VB_TAG_SQ;
		q->ring[i].qp = q;
	}
	return 0;
}

/* Fills the connection parameters of a connect or an accept. */
void
vb_conn_param(struct vb_conn *c, struct rdma_conn_param *p, uint8_t *priv,
    const struct vb_priv *pd)
{
	memset(p, 0, sizeof *p);
	vb_priv_put(priv, pd);
	p->private_data = priv;
	p->private_data_len = VB_PRIV_LEN;
	p->initiator_depth = (uint8_t)c->rd_atom;
	p->responder_resources = (uint8_t)c->rd_atom;
	p->retry_count = 7;
	p->rnr_retry_count = 7; /* receivers repost at once: wait, never fail */
}

/*
 * Destroys every verbs resource, paired with its creation: QPs, SRQ, CQ,
 * completion channel, MRs (the user's left over, then ours), PD, rdma_cm
 * ids, event channel. The send queues have been drained (or given up on).
 * Unlinked first: no other loop finds it (and activates ev_async) after.
 */
void
vb_conn_destroy(struct vb_conn *c)
{
	struct vb_mr *m;

	pthread_mutex_lock(&vb_lock);
	LIST_REMOVE(c, link);
	pthread_mutex_unlock(&vb_lock);

	for (unsigned i = 0; i < VB_MAX_QPS; i++) {
		struct vb_qp *q = &c->qps[i];

		if (q->qp != NULL)
			rdma_destroy_qp(q->id);
		q->qp = NULL;
	}
	vb_conn_cq_free(c);
	while ((m = TAILQ_FIRST(&c->mrs)) != NULL) {
		TAILQ_REMOVE(&c->mrs, m, link);
		ibv_dereg_mr(m->mr);
		free(m);
	}
	vb_conn_bufs_free(c);
	vb_conn_pd_free(c);
	vb_dev_put(c->dev);
	for (unsigned i = 0; i < VB_MAX_QPS; i++) {
		struct vb_qp *q = &c->qps[i];

		if (q->id != NULL)
			rdma_destroy_id(q->id);
		free(q->ring);
		if (q->rx.owned)
			free(q->rx.buf);
	}
	if (c->ev_cm != NULL)
		event_free(c->ev_cm);
	if (c->cmch != NULL)
		rdma_destroy_event_channel(c->cmch);
	event_free(c->ev_post);
	event_free(c->ev_poll);
	event_free(c->ev_async);
	tp_conn_fini(&c->tc);
	free(c);
}

/* ---- connection life --------------------------------------------------- */

/* The send queues are drained (or given up on): schedule the teardown. */
void
vb_drained(struct vb_conn *c)
{
	if (c->tc.state != TPS_CLOSED)
		tp_teardown(&c->tc);
}

/* Returns true once every QP's send queue has flushed its drain marker. */
bool
vb_all_drained(const struct vb_conn *c)
{
	for (unsigned i = 0; i < VB_MAX_QPS; i++)
		if (c->qps[i].drain_posted && !c->qps[i].drained)
			return false;
	return true;
}

/* Posts the drain marker on q's send queue, if anything is posted there. */
static void
vb_qp_drain(struct vb_qp *q)
{
	struct ibv_send_wr wr = { 0 }, *bad = NULL;
	struct vb_sqe *e;
	uint32_t slot;

	if (q->qp == NULL || q->used == 0)
		return;
	slot = (q->head + q->used) % VB_SQ_DEPTH;
	e = &q->ring[slot];
	e->kind = SQE_DRAIN;
	e->sbuf = NULL;
	e->msg = NULL;
	e->op = NULL;
	e->close_after = false;
	wr.wr_id = (uintptr_t)e;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(q->qp, &wr, &bad) != 0)
		return; /* nothing will flush: the drain deadline decides */
	q->used++;
	q->drain_posted = true;
}

/*
 * Ends the connection (tp_close): every QP to the error state
 * (rdma_disconnect tells the peer), then the send queues drain; the
 * teardown and its callbacks run from the loop.
 */
static void
vb_close_hook(struct tp_conn *tc)
{
	struct vb_conn *c = vb_conn_of(tc);

	c->tc.state = TPS_DRAINING;
	if (c->counted_hello && c->l != NULL) {
		c->l->nhello--;
		c->counted_hello = false;
	}
	event_del(c->tc.ev_timer);
	for (unsigned i = 0; i < VB_MAX_QPS; i++) {
		struct vb_qp *q = &c->qps[i];
		struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

		if (q->id != NULL && (q->state == VQ_UP ||
		    q->state == VQ_CONNECT))
			(void)rdma_disconnect(q->id);
		if (q->qp != NULL)
			(void)ibv_modify_qp(q->qp, &attr, IBV_QP_STATE);
		q->state = q->id != NULL ? VQ_DOWN : VQ_IDLE;
		vb_qp_drain(q);
	}
	if (vb_all_drained(c)) {
		vb_drained(c);
		return;
	}
	c->tc.deadline = mono_ns() + (uint64_t)VB_DRAIN_MS * 1000000u;
	tp_arm_timer(&c->tc);
}

/* Releases what an op holds (bounce slabs go back to the pool). */
static void
vb_op_release(struct tp_conn *tc, struct tp_op *op)
{
	struct vb_conn *c = vb_conn_of(tc);

	while (vb_opx(op)->slabs != NULL) {
		struct vb_slab *s = vb_opx(op)->slabs;

		vb_opx(op)->slabs = s->next;
		s->next = c->bfree;
		c->bfree = s;
		c->nbfree++;
	}
}

/* Finishes a message that leaves the queue: tells whoever waits, frees it. */
void
vb_msg_done(struct vb_conn *c, struct vb_msg *m)
{
	size_t hdr = m->total - m->out.payload_len;
	size_t sent = m->posted > hdr ? m->posted - hdr : 0;

	if (m->out.sent != NULL)
		m->out.sent(m->out.ctx);
	if (m->out.holding && c->tc.h.release != NULL)
		c->tc.h.release(c->tc.harg, m->out.hold, false, (uint32_t)sent);
	free(m->out.copy);
	free(m);
}

/* Teardown: drops queued messages (callbacks fire), ends transfers. */
static void
vb_drop(struct tp_conn *tc)
{
	struct vb_conn *c = vb_conn_of(tc);

	for (unsigned i = 0; i < VB_MAX_QPS; i++) {
		struct vb_qp *q = &c->qps[i];
		struct vb_msg *m;

		/*
		 * Zero-copy messages whose sends never completed (the drain
		 * deadline passed): the QP is in the error state, their
		 * payload is read no more.
		 */
		for (uint32_t k = 0; q->ring != NULL && k < q->used; k++) {
			struct vb_sqe *x = &q->ring[(q->head + k) %
			    VB_SQ_DEPTH];

			if (x->kind == SQE_SEND && x->msg != NULL) {
				m = x->msg;
				x->msg = NULL;
				vb_msg_done(c, m);
			}
		}
		while ((m = TAILQ_FIRST(&q->outq)) != NULL) {
			TAILQ_REMOVE(&q->outq, m, link);
			if (m->data)
				free(m);
			else
				vb_msg_done(c, m);
		}
		if (q->rx.holding) {
			q->rx.holding = false;
			if (c->tc.h.release != NULL)
				c->tc.h.release(c->tc.harg, q->rx.hold, true,
				    q->rx.got);
		}
	}
}

/* Frees a connection and every verbs resource it has. */
static void
vb_destroy(struct tp_conn *tc)
{
	vb_conn_destroy(vb_conn_of(tc));
}

/* The send queues did not flush in time: tear down anyway. */
static void
vb_drain_expired(struct tp_conn *tc)
{
	char who[160];

	log_notice("verbs: %s: send queues did not flush within %u ms; "
	    "destroying the connection anyway", tp_who(tc, who, sizeof who),
	    VB_DRAIN_MS);
	vb_drained(vb_conn_of(tc));
}

/* ---- the API ----------------------------------------------------------- */

/* Returns the registration of mr covering [p, p + len) on c, or NULL. */
static struct ibv_mr *
vb_mr_covering(struct vb_conn *c, struct fam_mr *mr, const void *p,
    uint32_t len)
{
	struct vb_mr *m = (struct vb_mr *)mr;
	uintptr_t a = (uintptr_t)p, lo, hi;

	if (mr == NULL || mr->ops != &verbs_transport_ops || m->c != c)
		return NULL;
	lo = (uintptr_t)m->mr->addr;
	hi = lo + m->mr->length;
	if (a < lo || a > hi || len > hi - a)
		return NULL;
	return m->mr;
}

/*
 * A READ or WRITE: one-sided when the lease has an rkey (straight from or
 * to the caller's registration, when mr covers it), otherwise a request
 * served by the peer (through its resolve).
 */
static void
vb_rw_prepare(struct tp_conn *tc, struct tp_op *op, const struct fam_remote *r,
    struct fam_mr *mr)
{
	struct vb_opx *x = vb_opx(op);

	if (r->rkey == 0)
		return;
	tc->stats.onesided++;
	x->onesided = true;
	x->raddr = r->addr + op->rw.offset;
	x->rkey = r->rkey;
	x->lmr = vb_mr_covering(vb_conn_of(tc), mr, op->kind == TP_OP_READ ?
	    op->dst : op->src, op->rw.len);
}

/* Returns where addr lies within its page. */
static uint64_t
vb_page_offset(const void *addr)
{
	return (uintptr_t)addr & ((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
}

/*
 * Registers [addr, addr + len) with the access flags given; zero_based:
 * the peer names its bytes by offset from addr's offset in its page (0
 * for a region, which starts a page), not by our address: a device maps
 * pages, so the two must agree within the page.
 */
static struct vb_mr *
vb_mr_new(struct vb_conn *c, void *addr, size_t len, int access,
    bool zero_based)
{
	struct vb_mr *m;
	int err;

	if (c->pd == NULL || c->tc.state >= TPS_DRAINING) {
		errno = ENOTCONN;
		return NULL;
	}
	m = calloc(1, sizeof *m);
	if (m == NULL)
		return NULL;
	m->mr = zero_based ? ibv_reg_mr_iova(c->pd, addr, len,
	    vb_page_offset(addr), access) : ibv_reg_mr(c->pd, addr, len,
	    access);
	if (m->mr == NULL) {
		err = errno != 0 ? errno : ENOMEM;
		free(m);
		errno = err;
		return NULL;
	}
	m->base.ops = &verbs_transport_ops;
	m->c = c;
	m->zero_based = zero_based;
	TAILQ_INSERT_TAIL(&c->mrs, m, link);
	return m;
}

/* Registers local memory as the target or source of one-sided operations. */
static struct fam_mr *
vb_mr_register(struct fam_conn *fc, void *addr, size_t len)
{
	struct vb_mr *m = vb_mr_new(vb_conn_of(fc), addr, len,
	    IBV_ACCESS_LOCAL_WRITE, false);

	return m != NULL ? &m->base : NULL;
}

/* Releases a registration (a lease ends: its rkey reaches nothing). */
static void
vb_mr_deregister(struct fam_mr *mr)
{
	struct vb_mr *m = (struct vb_mr *)mr;

	TAILQ_REMOVE(&m->c->mrs, m, link);
	(void)ibv_dereg_mr(m->mr);
	free(m);
}

/*
 * Exposes memory to the peer's one-sided operations, least access, at
 * offsets from 0: the lease shows nothing of our address space.
 */
static int
vb_expose(struct fam_conn *fc, void *addr, size_t len, bool writable,
    struct fam_mr **out, uint64_t *raddr, uint32_t *rkey)
{
	struct vb_conn *c = vb_conn_of(fc);
	struct vb_mr *m;
	int access = IBV_ACCESS_REMOTE_READ;

	if (c->tc.state != TPS_OPEN)
		return -ENOTCONN; /* never before the hello is accepted */
	if (writable)
		access |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
	m = vb_mr_new(c, addr, len, access, true);
	if (m == NULL)
		return errno != 0 ? -errno : -ENOMEM;
	*out = &m->base;
	*raddr = vb_page_offset(addr);
	*rkey = m->mr->rkey;
	return 0;
}

const struct tp_conn_ops vb_conn_ops = {
	.fam = &verbs_transport_ops, .op_priv = sizeof(struct vb_opx),
	.out_size = sizeof(struct vb_msg),
	.listener_size = sizeof(struct vb_listener), .bind = vb_bind,
	.dial = vb_dial, .close = vb_close_hook, .op_start = vb_op_start,
	.op_release = vb_op_release, .rw_prepare = vb_rw_prepare,
	.out_queue = vb_out_queue, .hello_done = vb_hello_done,
	.drain_expired = vb_drain_expired, .drop = vb_drop,
	.destroy = vb_destroy,
};

const struct fam_transport_ops verbs_transport_ops =
    TP_TRANSPORT_OPS(vb, FAM_TP_VERBS, "verbs", NULL);
