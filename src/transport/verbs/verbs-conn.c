/*
 * verbs-conn.c - a verbs connection's resources and life: creation (PD,
 * CQ, SRQ, buffers), close and drain, teardown, deadlines, and the API.
 */
#include "config.h"

#include "transport/verbs/verbs.h"

static void vb_timer_cb(evutil_socket_t fd, short what, void *arg);
static void vb_teardown_cb(evutil_socket_t fd, short what, void *arg);

/* ---- the table of two-sided requests in flight ------------------------- */

/* Finds the request in flight with id, or NULL. */
struct vb_op *
vb_table_find(struct vb_conn *c, uint64_t id)
{
	struct vb_op *op = c->table[id & c->table_mask];

	while (op != NULL && op->id != id)
		op = op->hnext;
	return op;
}

/* Adds a request to the table. */
void
vb_table_add(struct vb_conn *c, struct vb_op *op)
{
	struct vb_op **slot = &c->table[op->id & c->table_mask];

	op->hnext = *slot;
	*slot = op;
}

/* Removes a request from the table. */
void
vb_table_remove(struct vb_conn *c, struct vb_op *op)
{
	struct vb_op **pp = &c->table[op->id & c->table_mask];

	while (*pp != NULL && *pp != op)
		pp = &(*pp)->hnext;
	if (*pp == op)
		*pp = op->hnext;
	op->hnext = NULL;
}

/* ---- connection resources ---------------------------------------------- */

/* Allocates a connection (no verbs resources yet) with its events. */
struct vb_conn *
vb_conn_new(struct event_base *evb, const struct fam_conn_opts *opts,
    bool active)
{
	struct vb_conn *c = calloc(1, sizeof *c);
	uint32_t size = 16;

	if (c == NULL)
		return NULL;
	c->base.ops = &verbs_transport_ops;
	c->evb = evb;
	c->active = active;
	tp_opts_fill(&c->opts, opts);
	if (c->opts.qps_per_peer > VB_MAX_QPS)
		c->opts.qps_per_peer = VB_MAX_QPS;
	if (c->opts.inject_error_ppm > 1000000)
		c->opts.inject_error_ppm = 1000000;
	c->timeout_ns = (uint64_t)c->opts.op_timeout_ms * 1000000u;
	while (size < 2 * c->opts.max_outstanding + 2 && size < (1u << 20))
		size *= 2;
	c->table = calloc(size, sizeof *c->table);
	c->table_mask = size - 1;
	c->next_id = 1;
	c->rng = vb_random64();
	TAILQ_INIT(&c->ops);
	TAILQ_INIT(&c->waitq);
	TAILQ_INIT(&c->mrs);
	for (unsigned i = 0; i < VB_MAX_QPS; i++) {
		c->qps[i].c = c;
		c->qps[i].index = i;
		TAILQ_INIT(&c->qps[i].outq);
	}
	c->ev_timer = evtimer_new(evb, vb_timer_cb, c);
	c->ev_defer = event_new(evb, -1, 0, vb_teardown_cb, c);
	c->ev_post = event_new(evb, -1, 0, vb_post_cb, c);
	c->ev_poll = event_new(evb, -1, 0, vb_poll_cb, c);
	c->ev_async = event_new(evb, -1, 0, vb_async_conn_cb, c);
	if (c->table == NULL || c->ev_timer == NULL || c->ev_defer == NULL ||
	    c->ev_post == NULL || c->ev_poll == NULL || c->ev_async == NULL) {
		if (c->ev_timer != NULL)
			event_free(c->ev_timer);
		if (c->ev_defer != NULL)
			event_free(c->ev_defer);
		if (c->ev_post != NULL)
			event_free(c->ev_post);
		if (c->ev_poll != NULL)
			event_free(c->ev_poll);
		if (c->ev_async != NULL)
			event_free(c->ev_async);
		free(c->table);
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
	c->ev_cm = event_new(c->evb, c->cmch->fd, EV_READ | EV_PERSIST,
	    vb_cm_cb, c);
	if (c->ev_cm == NULL || event_add(c->ev_cm, NULL) < 0)
		return -ENOMEM;
	return 0;
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
 * Creates what every QP of the connection shares, on the device of ctx:
 * PD, completion channel, CQ, SRQ, and the registered receive, send and
 * bounce buffers (receives posted). nqps sizes the CQ and the SRQ.
 */
int
vb_conn_setup(struct vb_conn *c, struct ibv_context *ctx, unsigned nqps)
{
	struct ibv_srq_init_attr sattr = { 0 };
	struct vb_rbuf *list = NULL;
	int cqe, err;

	c->nqps = nqps;
	pthread_mutex_lock(&vb_lock);
	c->ctx = ctx; /* other loops' device events look for it */
	pthread_mutex_unlock(&vb_lock);
	c->dev = vb_dev_get(c->evb, ctx);
	if (c->dev == NULL)
		return -ENOMEM;
	c->rd_atom = c->dev->rd_atom;
	c->pd = ibv_alloc_pd(ctx);
	if (c->pd == NULL) {
		err = -ENOMEM;
		goto out_dev;
	}
	c->cchan = ibv_create_comp_channel(ctx);
	if (c->cchan == NULL) {
		err = errno != 0 ? -errno : -ENOMEM;
		goto out_pd;
	}
	if (fd_set_nonblock(c->cchan->fd) < 0) {
		err = -errno;
		goto out_cchan;
	}
	cqe = (int)(nqps * VB_SQ_DEPTH + VB_RECV_BUFS(nqps) + 16);
	if (c->dev->max_cqe > 0 && cqe > c->dev->max_cqe)
		cqe = c->dev->max_cqe;
	c->cq = ibv_create_cq(ctx, cqe, c, c->cchan, 0);
	if (c->cq == NULL) {
		err = errno != 0 ? -errno : -ENOMEM;
		goto out_cchan;
	}
	if ((err = ibv_req_notify_cq(c->cq, 0)) != 0) {
		err = -err;
		goto out_cq;
	}
	sattr.srq_context = c;
	sattr.attr.max_wr = VB_RECV_BUFS(nqps);
	sattr.attr.max_sge = 1;
	c->srq = ibv_create_srq(c->pd, &sattr);
	if (c->srq == NULL) {
		err = errno != 0 ? -errno : -ENOMEM;
		goto out_cq;
	}
	/* Receive buffers: written by our HCA only. */
	c->nrbufs = VB_RECV_BUFS(nqps);
	c->rlen = (size_t)c->nrbufs * VB_MSG_BUF;
	err = vb_buf_reg(c, c->rlen, IBV_ACCESS_LOCAL_WRITE, &c->rmem, &c->rmr);
	if (err < 0)
		goto out_srq;
	/* Send buffers: only read by the HCA. */
	c->slen = (size_t)VB_SEND_BUFS * VB_MSG_BUF;
	err = vb_buf_reg(c, c->slen, 0, &c->smem, &c->smr);
	if (err < 0)
		goto out_rmr;
	/* Bounce slabs: targets of RDMA READ, sources of RDMA WRITE. */
	c->blen = (size_t)VB_SLABS * VB_SLAB;
	err = vb_buf_reg(c, c->blen, IBV_ACCESS_LOCAL_WRITE, &c->bmem, &c->bmr);
	if (err < 0)
		goto out_smr;
	c->rbufs = calloc(c->nrbufs, sizeof *c->rbufs);
	c->sbufs = calloc(VB_SEND_BUFS, sizeof *c->sbufs);
	c->slabs = calloc(VB_SLABS, sizeof *c->slabs);
	if (c->rbufs == NULL || c->sbufs == NULL || c->slabs == NULL) {
		err = -ENOMEM;
		goto out_arrays;
	}
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
	err = vb_post_recvs(c, list);
	if (err < 0)
		goto out_arrays;
	c->ev_cq = event_new(c->evb, c->cchan->fd, EV_READ | EV_PERSIST,
	    vb_cq_cb, c);
	if (c->ev_cq == NULL || event_add(c->ev_cq, NULL) < 0) {
		err = -ENOMEM;
		goto out_event;
	}
	return 0;

out_event:
	if (c->ev_cq != NULL)
		event_free(c->ev_cq);
	c->ev_cq = NULL;
out_arrays:
	free(c->rbufs);
	free(c->sbufs);
	free(c->slabs);
	c->rbufs = NULL;
	c->sbufs = c->sfree = NULL;
	c->slabs = c->bfree = NULL;
	ibv_dereg_mr(c->bmr);
	free(c->bmem);
	c->bmr = NULL;
	c->bmem = NULL;
out_smr:
	ibv_dereg_mr(c->smr);
	free(c->smem);
	c->smr = NULL;
	c->smem = NULL;
out_rmr:
	ibv_dereg_mr(c->rmr);
	free(c->rmem);
	c->rmr = NULL;
	c->rmem = NULL;
out_srq:
	ibv_destroy_srq(c->srq);
	c->srq = NULL;
out_cq:
	ibv_destroy_cq(c->cq);
	c->cq = NULL;
out_cchan:
	ibv_destroy_comp_channel(c->cchan);
	c->cchan = NULL;
out_pd:
	ibv_dealloc_pd(c->pd);
	c->pd = NULL;
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
	if (c->srq != NULL)
		ibv_destroy_srq(c->srq);
	if (c->ev_cq != NULL)
		event_free(c->ev_cq);
	if (c->cq != NULL) {
		if (c->cq_unacked > 0)
			ibv_ack_cq_events(c->cq, c->cq_unacked);
		ibv_destroy_cq(c->cq);
	}
	if (c->cchan != NULL)
		ibv_destroy_comp_channel(c->cchan);
	while ((m = TAILQ_FIRST(&c->mrs)) != NULL) {
		TAILQ_REMOVE(&c->mrs, m, link);
		ibv_dereg_mr(m->mr);
		free(m);
	}
	if (c->rmr != NULL)
		ibv_dereg_mr(c->rmr);
	if (c->smr != NULL)
		ibv_dereg_mr(c->smr);
	if (c->bmr != NULL)
		ibv_dereg_mr(c->bmr);
	if (c->pd != NULL)
		ibv_dealloc_pd(c->pd);
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
	free(c->rmem);
	free(c->smem);
	free(c->bmem);
	free(c->rbufs);
	free(c->sbufs);
	free(c->slabs);
	event_free(c->ev_timer);
	event_free(c->ev_defer);
	event_free(c->ev_post);
	event_free(c->ev_poll);
	event_free(c->ev_async);
	free(c->table);
	explicit_bzero(c->opts.secret, sizeof c->opts.secret);
	explicit_bzero(c->opts.hello.secret, sizeof c->opts.hello.secret);
	free(c);
}

/* ---- connection life --------------------------------------------------- */

/* Schedules the deadline timer for the earliest thing that can expire. */
void
vb_arm_timer(struct vb_conn *c)
{
	uint64_t next = 0, now, d;
	struct vb_op *op;
	struct timeval tv;

	if (c->state == VBS_CLOSED || evtimer_pending(c->ev_timer, NULL))
		return;
	op = TAILQ_FIRST(&c->ops);
	if (op != NULL && c->state < VBS_DRAINING)
		next = op->deadline;
	if ((!c->active && c->state == VBS_HELLO) || c->state == VBS_CLOSING ||
	    c->state == VBS_DRAINING)
		if (next == 0 || c->deadline < next)
			next = c->deadline;
	if (next == 0)
		return;
	now = mono_ns();
	d = next > now ? next - now : 0;
	tv.tv_sec = (time_t)(d / 1000000000u);
	tv.tv_usec = (suseconds_t)(d % 1000000000u / 1000u + 1);
	evtimer_add(c->ev_timer, &tv);
}

/* The send queues are drained (or given up on): schedule the teardown. */
void
vb_drained(struct vb_conn *c)
{
	if (c->state == VBS_CLOSED)
		return;
	c->state = VBS_CLOSED;
	event_del(c->ev_timer);
	event_active(c->ev_defer, EV_WRITE, 0);
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
 * Ends the connection: every QP to the error state (rdma_disconnect tells
 * the peer), then the send queues drain; the teardown and its callbacks run
 * from the loop.
 */
void
vb_close(struct vb_conn *c, int err)
{
	if (c->state >= VBS_DRAINING)
		return;
	c->state = VBS_DRAINING;
	c->close_err = err;
	if (c->op_err == 0)
		c->op_err = err == -ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET;
	if (c->counted_hello && c->l != NULL) {
		c->l->nhello--;
		c->counted_hello = false;
	}
	event_del(c->ev_timer);
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
	c->deadline = mono_ns() + (uint64_t)VB_DRAIN_MS * 1000000u;
	vb_arm_timer(c);
}

/* Frees an op and what it holds (bounce slabs go back to the pool). */
void
vb_op_free(struct vb_conn *c, struct vb_op *op)
{
	while (op->slabs != NULL) {
		struct vb_slab *s = op->slabs;

		op->slabs = s->next;
		s->next = c->bfree;
		c->bfree = s;
		c->nbfree++;
	}
	free(op->payload);
	free(op);
}

/* Completes an op with status: removes it, calls done, frees it. */
void
vb_op_finish(struct vb_conn *c, struct vb_op *op, int status,
    const uint8_t *payload, uint32_t len)
{
	TAILQ_REMOVE(&c->ops, op, all);
	if (op->state == OPS_WAITING)
		TAILQ_REMOVE(&c->waitq, op, wait);
	else if (c->nflight > 0)
		c->nflight--;
	c->nops--;
	c->stats.outstanding = c->nops;
	if (op->done != NULL)
		op->done(op->ctx, status, payload, len);
	vb_op_free(c, op);
	if (c->state == VBS_OPEN)
		vb_pump(c);
}

/* Finishes a message that leaves the queue: tells whoever waits, frees it. */
void
vb_msg_done(struct vb_conn *c, struct vb_msg *m)
{
	size_t hdr = m->total - m->payload_len;
	size_t sent = m->posted > hdr ? m->posted - hdr : 0;

	if (m->sent != NULL)
		m->sent(m->ctx);
	if (m->holding && c->h.release != NULL)
		c->h.release(c->harg, m->hold, false, (uint32_t)sent);
	free(m->copy);
	free(m);
}

/* Tears a closed connection down and frees it (deferred event). */
static void
vb_teardown_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_conn *c = arg;
	struct vb_op *op;

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
			if (c->h.release != NULL)
				c->h.release(c->harg, q->rx.hold, true,
				    q->rx.got);
		}
	}
	while ((op = TAILQ_FIRST(&c->ops)) != NULL) {
		TAILQ_REMOVE(&c->ops, op, all);
		if (op->state == OPS_WAITING)
			TAILQ_REMOVE(&c->waitq, op, wait);
		c->nops--;
		c->stats.outstanding = c->nops;
		if (op->done != NULL)
			op->done(op->ctx, c->op_err, NULL, 0);
		vb_op_free(c, op);
	}
	if (c->h.closed != NULL)
		c->h.closed(&c->base, c->close_err, c->harg);
	vb_conn_destroy(c);
}

/* ---- deadlines --------------------------------------------------------- */

/* A deadline may have passed: an op, the hello, an error reply, a drain. */
static void
vb_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_conn *c = arg;
	uint64_t now = mono_ns();
	struct vb_op *op = TAILQ_FIRST(&c->ops);
	const char *why = NULL;
	char who[160];

	if (c->state == VBS_DRAINING) {
		if (now >= c->deadline) {
			log_notice("verbs: %s: send queues did not flush within "
			    "%u ms; destroying the connection anyway",
			    vb_who(c, who, sizeof who), VB_DRAIN_MS);
			vb_drained(c);
			return;
		}
	} else if (c->state == VBS_CLOSING) {
		if (now >= c->deadline) {
			vb_close(c, c->final_err);
			return;
		}
	} else if (op != NULL && op->deadline <= now)
		why = op->kind == OP_HELLO ? (c->state == VBS_CONNECTING ?
		    "no connection" : "no answer to our hello") :
		    "an operation did not complete";
	else if (!c->active && c->state == VBS_HELLO && c->deadline <= now)
		why = "no hello";
	if (why != NULL) {
		c->stats.timeouts += c->nops > 0 ? c->nops : 1;
		log_notice("verbs: %s: %s within %u ms; closing",
		    vb_who(c, who, sizeof who), why, c->opts.op_timeout_ms);
		c->op_err = -ETIMEDOUT;
		vb_close(c, -ETIMEDOUT);
		return;
	}
	vb_arm_timer(c);
}

/* ---- the API ----------------------------------------------------------- */

/* Connects to addr: rdma_cm for QP 0, the hello queued behind it. */
static int
vb_connect(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, const struct fam_conn_handlers *h,
    void *arg, struct fam_conn **out, char **cause)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct vb_conn *c;
	struct vb_op *op;
	int err;

	if (opts->hello.node[0] == '\0' ||
	    opts->hello.role < FAM_WIRE_ROLE_HOST ||
	    opts->hello.role > FAM_WIRE_ROLE_MEMORY) {
		*cause = xasprintf("connect %s: the hello needs a node name and "
		    "a role", addr);
		return -EINVAL;
	}
	err = vb_memlock_gate(opts->qps_per_peer > 0 ? opts->qps_per_peer : 1,
	    cause);
	if (err < 0)
		return err;
	err = tp_resolve(addr, false, &ss, &sslen, cause);
	if (err < 0)
		return err;
	c = vb_conn_new(base, opts, true);
	op = calloc(1, sizeof *op);
	if (c == NULL || op == NULL ||
	    (op->payload = malloc(sizeof(struct fam_hello))) == NULL) {
		free(op);
		if (c != NULL)
			vb_conn_destroy(c);
		*cause = xasprintf("connect %s: out of memory", addr);
		return -ENOMEM;
	}
	snprintf(c->peer, sizeof c->peer, "%s", addr);
	memcpy(&c->dst, &ss, sizeof ss);
	c->nqps = c->opts.qps_per_peer;
	c->cmch = vb_channel_open("connect", cause);
	if (c->cmch == NULL) {
		vb_op_free(c, op);
		vb_conn_destroy(c);
		return -ENODEV;
	}
	c->ev_cm = event_new(base, c->cmch->fd, EV_READ | EV_PERSIST, vb_cm_cb,
	    c);
	if (c->ev_cm == NULL || event_add(c->ev_cm, NULL) < 0 ||
	    (err = vb_qp_connect(&c->qps[0], NULL)) < 0) {
		err = c->ev_cm == NULL ? -ENOMEM : err < 0 ? err : -ENOMEM;
		*cause = xasprintf("connect %s: %s", addr, strerror(-err));
		vb_op_free(c, op);
		vb_conn_destroy(c);
		return err;
	}
	c->state = VBS_CONNECTING;
	memcpy(op->payload, &c->opts.hello, sizeof c->opts.hello);
	explicit_bzero(c->opts.hello.secret, sizeof c->opts.hello.secret);
	op->kind = OP_HELLO;
	op->type = FAM_MSG_HELLO;
	op->id = c->next_id++;
	op->deadline = mono_ns() + c->timeout_ns;
	op->state = OPS_WAITING;
	TAILQ_INSERT_TAIL(&c->ops, op, all);
	TAILQ_INSERT_TAIL(&c->waitq, op, wait);
	c->nops++;
	c->stats.outstanding = c->nops;
	if (h != NULL)
		c->h = *h;
	c->harg = arg;
	vb_arm_timer(c);
	*out = &c->base;
	return 0;
}

/* Sets the handlers (of an accepted connection). */
static void
vb_set_handlers(struct fam_conn *fc, const struct fam_conn_handlers *h,
    void *arg)
{
	struct vb_conn *c = vb_conn_of(fc);

	if (h != NULL)
		c->h = *h;
	else
		memset(&c->h, 0, sizeof c->h);
	c->harg = arg;
}

/* Queues a request of any type but HELLO. */
static int
vb_call(struct fam_conn *fc, uint8_t type, const void *payload, uint32_t len,
    fam_done_fn done, void *ctx)
{
	struct vb_conn *c = vb_conn_of(fc);
	struct fam_hdr h = { .magic = FAM_PROTO_MAGIC,
		.version = FAM_PROTO_VERSION, .type = type, .len = len };
	struct vb_op *op;
	int err;

	if ((err = vb_check_usable(c)) < 0)
		return err;
	if (done == NULL || type == FAM_MSG_HELLO || (len > 0 && payload ==
	    NULL))
		return -EINVAL;
	err = proto_check_hdr(&h, c->opts.max_payload);
	if (err < 0)
		return err == -EMSGSIZE ? err : -EINVAL;
	op = calloc(1, sizeof *op);
	if (op == NULL)
		return -ENOMEM;
	if (len > 0) {
		op->payload = malloc(len);
		if (op->payload == NULL) {
			free(op);
			return -ENOMEM;
		}
		memcpy(op->payload, payload, len);
	}
	op->plen = len;
	op->kind = OP_CALL;
	op->type = type;
	op->done = done;
	op->ctx = ctx;
	c->stats.calls++;
	vb_op_submit(c, op);
	return 0;
}

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
 * Checks and queues a READ or WRITE: one-sided when the lease has an
 * rkey, otherwise a request served by the peer (through its resolve).
 */
static int
vb_rw(struct vb_conn *c, enum vb_op_kind kind, const struct fam_remote *r,
    uint64_t off, uint32_t len, void *dst, const void *src,
    struct fam_mr *mr, uint16_t flags, fam_done_fn done, void *ctx)
{
	struct vb_op *op;
	int err;

	if ((err = vb_check_usable(c)) < 0)
		return err;
	if (r == NULL || done == NULL || (dst == NULL && src == NULL))
		return -EINVAL;
	if (len == 0 || len > FAM_RW_MAX ||
	    len + (kind == OP_WRITE ? FAM_WRITE_HDR_LEN : 0) >
	    c->opts.max_payload)
		return -EINVAL;
	if (off > UINT64_MAX - len || (r->size != 0 && off + len > r->size))
		return -ERANGE;
	if (r->rkey != 0 && r->addr > UINT64_MAX - off - len)
		return -ERANGE;
	op = calloc(1, sizeof *op);
	if (op == NULL)
		return -ENOMEM;
	op->kind = kind;
	op->type = kind == OP_READ ? FAM_MSG_READ : FAM_MSG_WRITE;
	op->rw.region = r->region;
	op->rw.len = len;
	op->rw.offset = off;
	op->flags = flags;
	op->dst = dst;
	op->src = src;
	op->done = done;
	op->ctx = ctx;
	if (r->rkey != 0) {
		c->stats.onesided++;
		op->onesided = true;
		op->raddr = r->addr + off;
		op->rkey = r->rkey;
		op->lmr = vb_mr_covering(c, mr, kind == OP_READ ? dst : src,
		    len);
	}
	if (kind == OP_READ)
		c->stats.reads++;
	else
		c->stats.writes++;
	vb_op_submit(c, op);
	return 0;
}

/* Queues a READ into dst. */
static int
vb_read(struct fam_conn *fc, const struct fam_remote *r, uint64_t off,
    uint32_t len, void *dst, struct fam_mr *mr, uint16_t flags,
    fam_done_fn done, void *ctx)
{
	if (dst == NULL)
		return -EINVAL;
	return vb_rw(vb_conn_of(fc), OP_READ, r, off, len, dst, NULL, mr,
	    flags, done, ctx);
}

/* Queues a WRITE from src (referenced until posted or done). */
static int
vb_write(struct fam_conn *fc, const struct fam_remote *r, uint64_t off,
    uint32_t len, const void *src, struct fam_mr *mr, uint16_t flags,
    fam_done_fn done, void *ctx)
{
	if (src == NULL)
		return -EINVAL;
	return vb_rw(vb_conn_of(fc), OP_WRITE, r, off, len, NULL, src, mr,
	    flags, done, ctx);
}

/* Queues the response to a request. */
static int
vb_reply(struct fam_conn *fc, const struct fam_hdr *req, int status,
    const struct iovec *iov, int iovcnt, bool copy, struct fam_mr *mr,
    fam_sent_fn sent, void *ctx)
{
	struct vb_conn *c = vb_conn_of(fc);
	struct ibv_mr *zmr;
	struct vb_msg *m;
	size_t len = 0;
	int err;

	if (c->state != VBS_OPEN)
		return -ENOTCONN;
	if (req == NULL || iovcnt < 0 || iovcnt > TP_MAX_IOV ||
	    (iovcnt > 0 && iov == NULL))
		return -EINVAL;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > FAM_PROTO_MAX_PAYLOAD)
			return -EMSGSIZE;
		len += iov[i].iov_len;
	}
	if (status != 0 && len != 0)
		return -EINVAL;
	zmr = copy || len == 0 ? NULL : vb_zc_mr(c, mr, iov, iovcnt);
	m = vb_msg_new(copy ? 1 : iovcnt);
	if (m == NULL)
		return -ENOMEM;
	err = tp_resp_hdr(req, status, len, m->inl);
	if (err < 0) {
		free(m);
		return err;
	}
	if (copy && len > 0) {
		uint8_t *p;

		m->copy = malloc(len);
		if (m->copy == NULL) {
			free(m);
			return -ENOMEM;
		}
		p = m->copy;
		for (int i = 0; i < iovcnt; i++) {
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
			p += iov[i].iov_len;
		}
		m->iov[1].iov_base = m->copy;
		m->iov[1].iov_len = len;
		m->iovcnt = 2;
	} else {
		for (int i = 0; i < iovcnt; i++)
			if (iov[i].iov_len > 0)
				m->iov[m->iovcnt++] = iov[i];
	}
	m->resp = true;
	m->sent = sent;
	m->ctx = ctx;
	m->zmr = zmr;
	if (zmr != NULL)
		c->stats.bytes_zero_copy += len;
	vb_msg_queue(c, vb_pick_qp(c), m);
	return 0;
}

/* Registers [addr, addr + len) with the access flags given. */
static struct vb_mr *
vb_mr_new(struct vb_conn *c, void *addr, size_t len, int access)
{
	struct vb_mr *m;
	int err;

	if (c->pd == NULL || c->state >= VBS_DRAINING) {
		errno = ENOTCONN;
		return NULL;
	}
	m = calloc(1, sizeof *m);
	if (m == NULL)
		return NULL;
	m->mr = ibv_reg_mr(c->pd, addr, len, access);
	if (m->mr == NULL) {
		err = errno != 0 ? errno : ENOMEM;
		free(m);
		errno = err;
		return NULL;
	}
	m->base.ops = &verbs_transport_ops;
	m->c = c;
	TAILQ_INSERT_TAIL(&c->mrs, m, link);
	return m;
}

/* Registers local memory as the target or source of one-sided operations. */
static struct fam_mr *
vb_mr_register(struct fam_conn *fc, void *addr, size_t len)
{
	struct vb_mr *m = vb_mr_new(vb_conn_of(fc), addr, len,
	    IBV_ACCESS_LOCAL_WRITE);

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

/* Exposes memory to the peer's one-sided operations, least access. */
static int
vb_expose(struct fam_conn *fc, void *addr, size_t len, bool writable,
    struct fam_mr **out, uint64_t *raddr, uint32_t *rkey)
{
	struct vb_conn *c = vb_conn_of(fc);
	struct vb_mr *m;
	int access = IBV_ACCESS_REMOTE_READ;

	if (c->state != VBS_OPEN)
		return -ENOTCONN; /* never before the hello is accepted */
	if (writable)
		access |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
	m = vb_mr_new(c, addr, len, access);
	if (m == NULL)
		return errno != 0 ? -errno : -ENOMEM;
	*out = &m->base;
	*raddr = (uint64_t)(uintptr_t)addr;
	*rkey = m->mr->rkey;
	return 0;
}

/* Closes the connection (orderly, from our side). */
static void
vb_close_api(struct fam_conn *fc)
{
	struct vb_conn *c = vb_conn_of(fc);

	vb_close(c, c->state == VBS_CLOSING ? c->final_err : 0);
}

/* Returns the peer's address. */
static const char *
vb_peer(const struct fam_conn *fc)
{
	return ((const struct vb_conn *)fc)->peer;
}

/* Returns the connection's counters. */
static const struct fam_conn_stats *
vb_stats(const struct fam_conn *fc)
{
	return &((const struct vb_conn *)fc)->stats;
}

/* Returns true while the connection is open. */
static bool
vb_is_open(const struct fam_conn *fc)
{
	return ((const struct vb_conn *)fc)->state == VBS_OPEN;
}

const struct fam_transport_ops verbs_transport_ops = {
	.kind = FAM_TP_VERBS,
	.name = "verbs",
	.listen = vb_listen,
	.listener_free = vb_listener_free,
	.listener_addr = vb_listener_addr,
	.connect = vb_connect,
	.set_handlers = vb_set_handlers,
	.call = vb_call,
	.read = vb_read,
	.write = vb_write,
	.flush = vb_flush,
	.reply = vb_reply,
	.mr_register = vb_mr_register,
	.mr_deregister = vb_mr_deregister,
	.expose = vb_expose,
	.close = vb_close_api,
	.peer = vb_peer,
	.stats = vb_stats,
	.is_open = vb_is_open,
};

