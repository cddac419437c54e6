/* SPDX-License-Identifier: Apache-2.0 */
/*
 * verbs-post.c - output: messages and one-sided operations queued per QP
 * and posted as one chain of work requests (tagged wr_ids).
 */
#include "config.h"

#include "transport/verbs/verbs.h"

/* ---- output ------------------------------------------------------------ */

/*
 * Returns the registration a reply's payload can be sent from without a
 * copy: mr, when it is a verbs registration in c's protection domain that
 * covers every iovec; NULL otherwise (the payload is copied).
 */
static struct ibv_mr *
vb_zc_mr(struct vb_conn *c, struct fam_mr *mr, const struct iovec *iov,
    int iovcnt)
{
	struct vb_mr *m = (struct vb_mr *)mr;
	uintptr_t lo, hi;

	if (mr == NULL || mr->ops != &verbs_transport_ops || m->mr == NULL ||
	    m->mr->pd != c->pd || m->zero_based)
		return NULL;
	lo = (uintptr_t)m->mr->addr;
	hi = lo + m->mr->length;
	for (int i = 0; i < iovcnt; i++) {
		uintptr_t p = (uintptr_t)iov[i].iov_base;

		if (iov[i].iov_len > 0 && (p < lo || p > hi ||
		    iov[i].iov_len > hi - p))
			return NULL;
	}
	return m->mr;
}

/* Schedules posting queued work at the end of the current callbacks. */
void
vb_kick(struct vb_conn *c)
{
	if (!c->post_pending && c->tc.state < TPS_DRAINING) {
		c->post_pending = true;
		event_active(c->ev_post, EV_WRITE, 0);
	}
}

/* Picks the QP for a new message or operation (round robin over UP). */
static struct vb_qp *
vb_pick_qp(struct vb_conn *c)
{
	for (unsigned n = 0; n < c->nqps; n++) {
		struct vb_qp *q = &c->qps[c->rr++ % c->nqps];

		if (q->state == VQ_UP)
			return q;
	}
	return &c->qps[0];
}

/* Queues a message on q (its length computed from its iovecs). */
static void
vb_msg_queue(struct vb_conn *c, struct vb_qp *q, struct vb_msg *m)
{
	m->total = 0;
	for (int i = 0; i < m->out.iovcnt; i++)
		m->total += m->out.iov[i].iov_len;
	m->out.payload_len = m->total - FAM_PROTO_HDR_LEN;
	TAILQ_INSERT_TAIL(&q->outq, m, link);
	vb_kick(c);
}

/*
 * Takes the next piece of m's remaining payload, max bytes at most: sets
 * *p to it and returns its length (0 when nothing is left).
 */
static size_t
vb_msg_take(struct vb_msg *m, size_t max, uint8_t **p)
{
	struct iovec *v;
	size_t take;

	while (m->iovpos < m->out.iovcnt &&
	    m->iovoff == m->out.iov[m->iovpos].iov_len) {
		m->iovpos++; /* an empty piece */
		m->iovoff = 0;
	}
	if (m->iovpos >= m->out.iovcnt || max == 0)
		return 0;
	v = &m->out.iov[m->iovpos];
	take = v->iov_len - m->iovoff;
	if (take > max)
		take = max;
	*p = (uint8_t *)v->iov_base + m->iovoff;
	m->iovoff += take;
	if (m->iovoff == v->iov_len) {
		m->iovpos++;
		m->iovoff = 0;
	}
	m->posted += take;
	return take;
}

/* Copies up to len bytes of m's remaining data into dst. */
static size_t
vb_msg_gather(struct vb_msg *m, uint8_t *dst, size_t len)
{
	size_t n = 0, take;
	uint8_t *p;

	while ((take = vb_msg_take(m, len - n, &p)) > 0) {
		memcpy(dst + n, p, take);
		n += take;
	}
	return n;
}

/*
 * Zero-copy: describes up to max SGEs (len bytes at most) of m's remaining
 * payload, in m's registration; returns the bytes they cover.
 */
static size_t
vb_msg_sges(struct vb_msg *m, struct ibv_sge *sg, unsigned max, size_t len,
    unsigned *nsg)
{
	size_t n = 0, take;
	uint8_t *p;

	while (*nsg < max && (take = vb_msg_take(m, len - n, &p)) > 0) {
		sg[*nsg].addr = (uintptr_t)p;
		sg[*nsg].length = (uint32_t)take;
		sg[*nsg].lkey = m->zmr->lkey;
		(*nsg)++;
		n += take;
	}
	return n;
}

/*
 * The immediate data of a message's first SEND (host byte order): a
 * marker, the message type and its header flags, from the header at p.
 */
uint32_t
vb_imm(const uint8_t *p)
{
	/* Header bytes: magic (4), version, type, flags (2, big-endian). */
	return VB_IMM_MARK | (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7];
}

/* Returns the slot for the next WR of q (the caller fills it). */
static struct vb_sqe *
vb_slot(struct vb_qp *q, uint32_t k)
{
	return &q->ring[(q->head + q->used + k) % VB_SQ_DEPTH];
}

/* A message is fully posted: its request is in flight, its reply out. */
static void
vb_msg_posted(struct vb_conn *c, struct vb_msg *m)
{
	c->tc.stats.msgs_out++;
	c->tc.stats.bytes_out += m->out.payload_len;
	if (m->out.op != NULL) {
		m->out.op->state = TP_OPS_SENT;
		tp_table_add(&c->tc, m->out.op);
	}
	/* Zero-copy: finished when its last send retires (vb_retire()). */
	if (m->zmr == NULL)
		vb_msg_done(c, m);
}

/* The work requests of one post on a QP, chained, and what they finish. */
struct vb_chain {
	struct ibv_send_wr wrs[VB_SQ_DEPTH];
	struct ibv_sge sges[VB_SQ_DEPTH][VB_MAX_SGE];
	struct vb_msg *done[VB_SQ_DEPTH];  /* messages fully in the chain */
	uint32_t done_slot[VB_SQ_DEPTH];   /* ... and their last WR */
	uint32_t n, room;                  /* WRs in the chain; ring room */
	unsigned ndone;
};

/* Appends a WR to the chain and returns it (zeroed, with its wr_id). */
static struct ibv_send_wr *
vb_chain_add(struct vb_chain *ch, struct vb_sqe *e)
{
	struct ibv_send_wr *w = &ch->wrs[ch->n];

	memset(w, 0, sizeof *w);
	w->wr_id = (uintptr_t)e;
	w->sg_list = ch->sges[ch->n];
	if (ch->n > 0)
		ch->wrs[ch->n - 1].next = w;
	ch->n++;
	return w;
}

/* Takes a bounce slab for op, appended to its slabs (in order). */
static struct vb_slab *
vb_slab_take(struct vb_conn *c, struct tp_op *op)
{
	struct vb_slab *s = c->bfree, **pp;

	c->bfree = s->next;
	c->nbfree--;
	s->next = NULL;
	for (pp = &vb_opx(op)->slabs; *pp != NULL; pp = &(*pp)->next)
		;
	*pp = s;
	return s;
}

/*
 * Adds a one-sided operation to the chain, whole: one RDMA READ/WRITE
 * from the caller's registration, or one per bounce slab (a write's data
 * copied in now). Returns false, adding nothing, when it does not fit.
 */
static bool
vb_chain_data(struct vb_qp *q, struct vb_chain *ch, struct tp_op *op)
{
	struct vb_conn *c = q->c;
	struct vb_opx *x = vb_opx(op);
	bool rd = op->kind == TP_OP_READ;
	uint32_t parts = x->lmr != NULL ? 1 :
	    (op->rw.len + VB_SLAB - 1) / VB_SLAB;

	if (parts > ch->room - ch->n || (x->lmr == NULL && parts > c->nbfree))
		return false;
	for (uint32_t k = 0; k < parts; k++) {
		struct vb_sqe *e = vb_slot(q, ch->n);
		struct ibv_sge *sg = ch->sges[ch->n];
		struct ibv_send_wr *w = vb_chain_add(ch, e);
		uint32_t off = k * VB_SLAB;
		uint32_t len = x->lmr != NULL ? op->rw.len :
		    (op->rw.len - off < VB_SLAB ? op->rw.len - off : VB_SLAB);

		if (x->lmr != NULL) {
			sg->addr = (uintptr_t)(rd ? op->dst : op->src);
			sg->lkey = x->lmr->lkey;
		} else {
			struct vb_slab *s = vb_slab_take(c, op);

			if (!rd)
				memcpy(s->buf, (const uint8_t *)op->src + off,
				    len);
			sg->addr = (uintptr_t)s->buf;
			sg->lkey = c->bmr->lkey;
		}
		sg->length = len;
		w->num_sge = 1;
		w->opcode = rd ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		w->wr.rdma.remote_addr = x->raddr + off;
		w->wr.rdma.rkey = x->rkey;
		e->kind = SQE_DATA;
		e->op = op;
		e->sbuf = NULL;
		e->msg = NULL;
		e->len = len;
		e->close_after = false;
		e->opcode = rd ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
	}
	x->parts_left = parts;
	op->state = TP_OPS_POSTED;
	return true;
}

/*
 * Adds one SEND of m's remaining bytes to the chain: in a send buffer
 * (the header, or everything when not zero-copy), then zero-copy payload
 * SGEs. Returns false when no send buffer is free.
 */
static bool
vb_chain_send(struct vb_qp *q, struct vb_chain *ch, struct vb_msg *m)
{
	struct vb_conn *c = q->c;
	struct vb_sbuf *sb = NULL;
	struct vb_sqe *e = vb_slot(q, ch->n);
	struct ibv_sge *sg = ch->sges[ch->n];
	bool first = m->posted == 0;
	struct ibv_send_wr *w;
	unsigned nsg = 0;

	if (first || m->zmr == NULL) {
		if (c->sfree == NULL)
			return false;
		sb = c->sfree;
		c->sfree = sb->next;
		sg[0].addr = (uintptr_t)sb->buf;
		sg[0].length = (uint32_t)vb_msg_gather(m, sb->buf,
		    m->zmr == NULL ? VB_MSG_BUF : FAM_PROTO_HDR_LEN);
		sg[0].lkey = c->smr->lkey;
		nsg = 1;
	}
	if (m->zmr != NULL)
		(void)vb_msg_sges(m, sg, VB_MAX_SGE, VB_MSG_BUF -
		    (nsg > 0 ? sg[0].length : 0), &nsg);
	w = vb_chain_add(ch, e);
	w->num_sge = (int)nsg;
	w->opcode = IBV_WR_SEND;
	if (first) {
		/* Every message starts with its whole header. */
		uint32_t imm = vb_imm(sb->buf);

		w->opcode = IBV_WR_SEND_WITH_IMM;
		/* A test aid: the peer must refuse it. */
		if (c->tc.opts.inject_bad_imm && sb->buf[5] != FAM_MSG_HELLO &&
		    sb->buf[5] != FAM_MSG_AUTH)
			imm ^= 0x00ff0000u;
		w->imm_data = htobe32(imm);
	}
	e->kind = SQE_SEND;
	e->sbuf = sb;
	e->msg = m->zmr != NULL && m->posted == m->total ? m : NULL;
	e->op = NULL;
	e->opcode = IBV_WC_SEND;
	e->close_after = m->out.close_after && m->posted == m->total;
	if (e->close_after)
		w->send_flags = IBV_SEND_SIGNALED;
	return true;
}

/*
 * Fills the chain from q's output queue, in order: message fragments
 * while send buffers and ring slots last, one-sided operations whole.
 * From an API call (fam_conn_flush), a response stops the chain: posting
 * it could call its `sent` there; it and what follows go with the
 * deferred post.
 */
static void
vb_chain_fill(struct vb_qp *q, struct vb_chain *ch, bool api)
{
	struct vb_msg *m;

	while ((m = TAILQ_FIRST(&q->outq)) != NULL && ch->n < ch->room) {
		if (api && m->out.resp)
			break;
		if (m->data) {
			if (!vb_chain_data(q, ch, m->out.op))
				break;
			TAILQ_REMOVE(&q->outq, m, link);
			free(m);
			continue;
		}
		while (m->posted < m->total && ch->n < ch->room &&
		    vb_chain_send(q, ch, m))
			;
		if (m->posted < m->total)
			break; /* out of buffers or slots: the rest later */
		TAILQ_REMOVE(&q->outq, m, link);
		ch->done_slot[ch->ndone] = ch->n - 1;
		ch->done[ch->ndone++] = m;
	}
}

/* Selective signalling: the last WR of the chain, and every Nth. */
static void
vb_chain_signal(struct vb_qp *q, struct vb_chain *ch)
{
	struct ibv_send_wr *wrs = ch->wrs;

	for (uint32_t k = 0; k < ch->n; k++) {
		if (k + 1 == ch->n)
			wrs[k].send_flags |= IBV_SEND_SIGNALED;
		if (wrs[k].send_flags & IBV_SEND_SIGNALED)
			q->unsignalled = 0;
		else if (++q->unsignalled >= VB_SIGNAL_EVERY) {
			wrs[k].send_flags |= IBV_SEND_SIGNALED;
			q->unsignalled = 0;
		}
		if (wrs[k].send_flags & IBV_SEND_SIGNALED)
			q->c->tc.stats.wrs_signalled++;
	}
}

/*
 * ibv_post_send refused the chain at bad: counts what the HCA took,
 * finishes the messages it did not take, and closes the connection.
 */
static void
vb_chain_failed(struct vb_qp *q, struct vb_chain *ch, struct ibv_send_wr *bad,
    int err)
{
	struct vb_conn *c = q->c;
	uint32_t took = 0;
	char who[160];

	for (struct ibv_send_wr *w = ch->wrs; w != bad && w != NULL;
	    w = w->next)
		took++;
	q->used += took;
	log_notice("verbs: %s: ibv_post_send: %s; closing the connection",
	    tp_who(&c->tc, who, sizeof who), strerror(err));
	for (unsigned i = 0; i < ch->ndone; i++) {
		struct vb_msg *m = ch->done[i];

		/* A zero-copy one the HCA took retires with it. */
		if (m->zmr != NULL && ch->done_slot[i] < took)
			continue;
		if (m->zmr != NULL)
			vb_slot(q, ch->done_slot[i] - took)->msg = NULL;
		vb_msg_done(c, m);
	}
	tp_close(&c->tc, -EIO);
}

/*
 * Builds and posts, as one chain, what q's output queue allows (one
 * doorbell). Keeps FIFO order per QP. A zero-copy message's header goes
 * in a send buffer, its payload straight from its registration (further
 * SENDs need no send buffer); its last fragment's slot holds it until
 * that send retires.
 */
static void
vb_qp_post(struct vb_qp *q, bool api)
{
	struct vb_conn *c = q->c;
	struct vb_chain ch;
	struct ibv_send_wr *bad = NULL;
	int err;

	ch.n = 0;
	ch.ndone = 0;
	ch.room = VB_SQ_DEPTH - 1 - q->used;
	vb_chain_fill(q, &ch, api);
	if (ch.n == 0)
		return;
	vb_chain_signal(q, &ch);
	c->tc.stats.doorbells++;
	c->tc.stats.wrs += ch.n;
	err = ibv_post_send(q->qp, ch.wrs, &bad);
	if (err != 0) {
		vb_chain_failed(q, &ch, bad, err);
		return;
	}
	q->used += ch.n;
	for (unsigned i = 0; i < ch.ndone; i++)
		vb_msg_posted(c, ch.done[i]);
}

/* Posts queued work on every QP that is up. */
void
vb_post_all(struct vb_conn *c)
{
	for (unsigned i = 0; i < c->nqps && c->tc.state < TPS_DRAINING; i++)
		if (c->qps[i].state == VQ_UP && c->qps[i].qp != NULL)
			vb_qp_post(&c->qps[i], false);
}

/*
 * fam_conn_flush(): posts what is queued now, one chain (one doorbell)
 * per QP, instead of at the end of the loop's pass; responses wait for
 * that pass (see vb_qp_post()).
 */
int
vb_flush(struct fam_conn *fc)
{
	struct vb_conn *c = vb_conn_of(fc);

	if (c->tc.state != TPS_OPEN)
		return c->tc.state < TPS_OPEN ? 0 : -ENOTCONN;
	for (unsigned i = 0; i < c->nqps && c->tc.state < TPS_DRAINING; i++)
		if (c->qps[i].state == VQ_UP && c->qps[i].qp != NULL)
			vb_qp_post(&c->qps[i], true);
	return 0;
}

/* The deferred post: what API calls queued since the last callback. */
void
vb_post_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_conn *c = arg;

	c->post_pending = false;
	vb_post_all(c);
}

/*
 * Queues a message of the core's (tp_conn_ops.out_queue): an answer to the
 * message handled now goes on its QP (on QP 0 when it ends the
 * connection), a reply of the role's on the next QP up, from its
 * registration without a copy when vb_zc_mr() allows.
 */
void
vb_out_queue(struct tp_conn *tc, struct tp_out *o, bool rx)
{
	struct vb_conn *c = vb_conn_of(tc);
	struct vb_msg *m = (struct vb_msg *)o;
	struct vb_qp *q;

	if (!rx)
		q = vb_pick_qp(c);
	else
		q = o->close_after || c->rxq == NULL ? &c->qps[0] : c->rxq;
	if (o->mr != NULL)
		m->zmr = vb_zc_mr(c, o->mr, o->iov + 1, o->iovcnt - 1);
	vb_msg_queue(c, q, m);
	if (m->zmr != NULL)
		tc->stats.bytes_zero_copy += o->payload_len;
}

/* Puts an op on a QP's output queue: a request, or a one-sided transfer. */
int
vb_op_start(struct tp_conn *tc, struct tp_op *op)
{
	struct vb_conn *c = vb_conn_of(tc);
	struct vb_qp *q = op->kind == TP_OP_HELLO ? &c->qps[0] : vb_pick_qp(c);
	struct vb_msg *m;

	if (vb_opx(op)->onesided) {
		m = (struct vb_msg *)tp_out_new(tc, 0);
		if (m == NULL)
			return -ENOMEM;
		m->out.op = op;
		m->data = true;
		TAILQ_INSERT_TAIL(&q->outq, m, link);
		vb_kick(c);
		return 0;
	}
	m = (struct vb_msg *)tp_op_out(tc, op);
	if (m == NULL)
		return -ENOMEM;
	vb_msg_queue(c, q, m);
	return 0;
}

