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
struct ibv_mr *
vb_zc_mr(struct vb_conn *c, struct fam_mr *mr, const struct iovec *iov,
    int iovcnt)
{
	struct vb_mr *m = (struct vb_mr *)mr;
	uintptr_t lo, hi;

	if (mr == NULL || mr->ops != &verbs_transport_ops || m->mr == NULL ||
	    m->mr->pd != c->pd)
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
	if (!c->post_pending && c->state < VBS_DRAINING) {
		c->post_pending = true;
		event_active(c->ev_post, EV_WRITE, 0);
	}
}

/* Picks the QP for a new message or operation (round robin over UP). */
struct vb_qp *
vb_pick_qp(struct vb_conn *c)
{
	for (unsigned n = 0; n < c->nqps; n++) {
		struct vb_qp *q = &c->qps[c->rr++ % c->nqps];

		if (q->state == VQ_UP)
			return q;
	}
	return &c->qps[0];
}

/* Allocates a message with room for niov payload iovecs. */
struct vb_msg *
vb_msg_new(int niov)
{
	struct vb_msg *m = calloc(1, sizeof *m +
	    (size_t)(niov + 1) * sizeof(struct iovec));

	if (m == NULL)
		return NULL;
	m->iov[0].iov_base = m->inl;
	m->iov[0].iov_len = FAM_PROTO_HDR_LEN;
	m->iovcnt = 1;
	return m;
}

/* Queues a message on q (its length computed from its iovecs). */
void
vb_msg_queue(struct vb_conn *c, struct vb_qp *q, struct vb_msg *m)
{
	m->total = 0;
	for (int i = 0; i < m->iovcnt; i++)
		m->total += m->iov[i].iov_len;
	m->payload_len = m->total - FAM_PROTO_HDR_LEN;
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

	while (m->iovpos < m->iovcnt && m->iovoff == m->iov[m->iovpos].iov_len) {
		m->iovpos++; /* an empty piece */
		m->iovoff = 0;
	}
	if (m->iovpos >= m->iovcnt || max == 0)
		return 0;
	v = &m->iov[m->iovpos];
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
	c->stats.msgs_out++;
	c->stats.bytes_out += m->payload_len;
	if (m->op != NULL) {
		m->op->state = OPS_SENT;
		vb_table_add(c, m->op);
	}
	/* Zero-copy: finished when its last send retires (vb_retire()). */
	if (m->zmr == NULL)
		vb_msg_done(c, m);
}

/*
 * Builds and posts, as one chain, what q's output queue allows: message
 * fragments while send buffers and ring slots last, one-sided operations
 * whole (with their bounce slabs). Keeps FIFO order per QP. A zero-copy
 * message's header goes in a send buffer, its payload straight from its
 * registration (further SENDs need no send buffer); its last fragment's
 * slot holds it until that send retires.
 */
static void
vb_qp_post(struct vb_qp *q, bool api)
{
	struct vb_conn *c = q->c;
	struct ibv_send_wr wrs[VB_SQ_DEPTH], *bad = NULL;
	struct ibv_sge sges[VB_SQ_DEPTH][VB_MAX_SGE];
	struct vb_msg *done[VB_SQ_DEPTH];
	uint32_t done_slot[VB_SQ_DEPTH];
	uint32_t n = 0, room = VB_SQ_DEPTH - 1 - q->used;
	unsigned ndone = 0;
	struct vb_msg *m;
	char who[160];
	int err;

	while ((m = TAILQ_FIRST(&q->outq)) != NULL && n < room) {
		/*
		 * From an API call (fam_conn_flush), a response stops the
		 * chain: posting it could call its `sent` there. It and what
		 * follows go with the deferred post, in order.
		 */
		if (api && m->resp)
			break;
		if (m->data) {
			struct vb_op *op = m->op;
			bool rd = op->kind == OP_READ;
			uint32_t parts = op->lmr != NULL ? 1 :
			    (op->rw.len + VB_SLAB - 1) / VB_SLAB;

			if (parts > room - n ||
			    (op->lmr == NULL && parts > c->nbfree))
				break;
			for (uint32_t k = 0; k < parts; k++) {
				struct vb_sqe *e = vb_slot(q, n);
				struct ibv_send_wr *w = &wrs[n];
				uint32_t off = k * VB_SLAB;
				uint32_t len = op->lmr != NULL ? op->rw.len :
				    (op->rw.len - off < VB_SLAB ?
				    op->rw.len - off : VB_SLAB);

				memset(w, 0, sizeof *w);
				if (op->lmr != NULL) {
					sges[n][0].addr = (uintptr_t)(rd ?
					    op->dst : op->src);
					sges[n][0].lkey = op->lmr->lkey;
				} else {
					struct vb_slab *s = c->bfree, **pp;

					c->bfree = s->next;
					c->nbfree--;
					s->next = NULL;
					for (pp = &op->slabs; *pp != NULL;
					    pp = &(*pp)->next)
						;
					*pp = s;
					if (!rd)
						memcpy(s->buf, (const uint8_t *)
						    op->src + off, len);
					sges[n][0].addr = (uintptr_t)s->buf;
					sges[n][0].lkey = c->bmr->lkey;
				}
				sges[n][0].length = len;
				w->wr_id = (uintptr_t)e;
				w->sg_list = sges[n];
				w->num_sge = 1;
				w->opcode = rd ? IBV_WR_RDMA_READ :
				    IBV_WR_RDMA_WRITE;
				w->wr.rdma.remote_addr = op->raddr + off;
				w->wr.rdma.rkey = op->rkey;
				e->kind = SQE_DATA;
				e->op = op;
				e->sbuf = NULL;
				e->msg = NULL;
				e->len = len;
				e->close_after = false;
				e->opcode = rd ? IBV_WC_RDMA_READ :
				    IBV_WC_RDMA_WRITE;
				if (n > 0)
					wrs[n - 1].next = w;
				n++;
			}
			op->parts_left = parts;
			op->state = OPS_POSTED;
			TAILQ_REMOVE(&q->outq, m, link);
			free(m);
			continue;
		}
		while (m->posted < m->total && n < room) {
			struct vb_sbuf *sb = NULL;
			struct vb_sqe *e = vb_slot(q, n);
			struct ibv_send_wr *w = &wrs[n];
			bool first = m->posted == 0;
			unsigned nsg = 0;

			if (first || m->zmr == NULL) {
				if (c->sfree == NULL)
					break;
				sb = c->sfree;
				c->sfree = sb->next;
				sges[n][0].addr = (uintptr_t)sb->buf;
				sges[n][0].length = (uint32_t)vb_msg_gather(m,
				    sb->buf, m->zmr == NULL ? VB_MSG_BUF :
				    FAM_PROTO_HDR_LEN);
				sges[n][0].lkey = c->smr->lkey;
				nsg = 1;
			}
			if (m->zmr != NULL)
				(void)vb_msg_sges(m, sges[n], VB_MAX_SGE,
				    VB_MSG_BUF - (nsg > 0 ? sges[n][0].length :
				    0), &nsg);
			memset(w, 0, sizeof *w);
			w->wr_id = (uintptr_t)e;
			w->sg_list = sges[n];
			w->num_sge = (int)nsg;
			w->opcode = IBV_WR_SEND;
			if (first) {
				/* Every message starts with its whole header. */
				uint32_t imm = vb_imm(sb->buf);

				w->opcode = IBV_WR_SEND_WITH_IMM;
				/* A test aid: the peer must refuse it. */
				if (c->opts.inject_bad_imm &&
				    sb->buf[5] != FAM_MSG_HELLO)
					imm ^= 0x00ff0000u;
				w->imm_data = htobe32(imm);
			}
			e->kind = SQE_SEND;
			e->sbuf = sb;
			e->msg = m->zmr != NULL && m->posted == m->total ?
			    m : NULL;
			e->op = NULL;
			e->opcode = IBV_WC_SEND;
			e->close_after = m->close_after &&
			    m->posted == m->total;
			if (e->close_after)
				w->send_flags = IBV_SEND_SIGNALED;
			if (n > 0)
				wrs[n - 1].next = w;
			n++;
		}
		if (m->posted < m->total)
			break; /* out of buffers or slots: the rest later */
		TAILQ_REMOVE(&q->outq, m, link);
		done_slot[ndone] = n - 1;
		done[ndone++] = m;
	}
	if (n == 0)
		return;
	/* Selective signalling: the last of the chain, every Nth. */
	for (uint32_t k = 0; k < n; k++) {
		if (k + 1 == n)
			wrs[k].send_flags |= IBV_SEND_SIGNALED;
		if (wrs[k].send_flags & IBV_SEND_SIGNALED)
			q->unsignalled = 0;
		else if (++q->unsignalled >= VB_SIGNAL_EVERY) {
			wrs[k].send_flags |= IBV_SEND_SIGNALED;
			q->unsignalled = 0;
		}
		if (wrs[k].send_flags & IBV_SEND_SIGNALED)
			c->stats.wrs_signalled++;
	}
	c->stats.doorbells++;
	c->stats.wrs += n;
	err = ibv_post_send(q->qp, wrs, &bad);
	if (err != 0) {
		/* Count what the HCA took; the rest is dropped with us. */
		uint32_t took = 0;

		for (struct ibv_send_wr *w = wrs; w != bad && w != NULL;
		    w = w->next)
			took++;
		q->used += took;
		log_notice("verbs: %s: ibv_post_send: %s; closing the "
		    "connection", vb_who(c, who, sizeof who), strerror(err));
		for (unsigned i = 0; i < ndone; i++) {
			/* A zero-copy one the HCA took retires with it. */
			if (done[i]->zmr != NULL && done_slot[i] < took)
				continue;
			if (done[i]->zmr != NULL)
				vb_slot(q, done_slot[i] - took)->msg = NULL;
			vb_msg_done(c, done[i]);
		}
		vb_close(c, -EIO);
		return;
	}
	q->used += n;
	for (unsigned i = 0; i < ndone; i++)
		vb_msg_posted(c, done[i]);
}

/* Posts queued work on every QP that is up. */
void
vb_post_all(struct vb_conn *c)
{
	for (unsigned i = 0; i < c->nqps && c->state < VBS_DRAINING; i++)
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

	if (c->state != VBS_OPEN)
		return c->state < VBS_OPEN ? 0 : -ENOTCONN;
	for (unsigned i = 0; i < c->nqps && c->state < VBS_DRAINING; i++)
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

/* Queues a response with no payload; closes the connection on failure. */
void
vb_reply_status(struct vb_conn *c, struct vb_qp *q, const struct fam_hdr *req,
    int status, bool close_after, int final_err)
{
	struct vb_msg *m;

	if (status < 0 || status > FAM_STATUS_MAX)
		status = EIO;
	m = vb_msg_new(0);
	if (m == NULL) {
		vb_close(c, -ENOMEM);
		return;
	}
	if (tp_resp_hdr(req, status, 0, m->inl) < 0) {
		free(m);
		vb_close(c, -EPROTO);
		return;
	}
	m->resp = true;
	m->close_after = close_after;
	if (close_after) {
		c->state = VBS_CLOSING;
		c->final_err = final_err;
		c->deadline = mono_ns() + c->timeout_ns;
		event_del(c->ev_timer);
		vb_arm_timer(c);
	}
	vb_msg_queue(c, q, m);
}

/* Returns true when h is a request we can answer (known type, flags). */
static bool
vb_answerable(const struct fam_hdr *h)
{
	return h != NULL && h->magic == FAM_PROTO_MAGIC &&
	    h->version == FAM_PROTO_VERSION && h->type >= 1 &&
	    h->type <= FAM_MSG_TYPE_MAX && (h->flags & ~FAM_F_ALL) == 0 &&
	    (h->flags & FAM_F_RESPONSE) == 0;
}

/*
 * A protocol violation: counted, logged with the peer, and the connection
 * closed (after an error response with status when h is a request we can
 * answer).
 */
void
vb_violation(struct vb_conn *c, const struct fam_hdr *h, int status, int err,
    const char *fmt, ...)
{
	char why[256], who[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	c->stats.bad_frames++;
	log_notice("verbs: %s: protocol violation: %s; closing the connection",
	    vb_who(c, who, sizeof who), why);
	if (status != 0 && vb_answerable(h) && c->state < VBS_CLOSING)
		vb_reply_status(c, &c->qps[0], h, status, true, err);
	else
		vb_close(c, err);
}

/* ---- operations -------------------------------------------------------- */

/* Puts an op on a QP's output queue: a request, or a one-sided transfer. */
int
vb_op_queue(struct vb_conn *c, struct vb_op *op)
{
	struct fam_hdr h = {
		.magic = FAM_PROTO_MAGIC,
		.version = FAM_PROTO_VERSION,
		.type = op->type,
		.flags = op->flags,
		.id = op->id,
	};
	struct vb_qp *q = op->kind == OP_HELLO ? &c->qps[0] : vb_pick_qp(c);
	struct vb_msg *m = vb_msg_new(1);
	uint8_t *body;
	size_t blen = 0;

	if (m == NULL)
		return -ENOMEM;
	m->op = op;
	op->state = OPS_QUEUED;
	if (op->onesided) {
		m->data = true;
		TAILQ_INSERT_TAIL(&q->outq, m, link);
		vb_kick(c);
		return 0;
	}
	body = m->inl + FAM_PROTO_HDR_LEN;
	switch (op->kind) {
	case OP_HELLO:
		blen = proto_put_hello(body, op->payload);
		h.len = (uint32_t)blen;
		break;
	case OP_READ:
		blen = proto_put_read(body, &op->rw);
		h.len = (uint32_t)blen;
		break;
	case OP_WRITE:
		blen = proto_put_write_hdr(body, &op->rw);
		h.len = (uint32_t)blen + op->rw.len;
		m->iov[1].iov_base = (void *)op->src;
		m->iov[1].iov_len = op->rw.len;
		m->iovcnt = 2;
		break;
	case OP_CALL:
		h.len = op->plen;
		if (op->plen > 0) {
			m->iov[1].iov_base = op->payload;
			m->iov[1].iov_len = op->plen;
			m->iovcnt = 2;
		}
		break;
	}
	proto_put_hdr(m->inl, &h);
	m->iov[0].iov_len = FAM_PROTO_HDR_LEN + blen;
	vb_msg_queue(c, q, m);
	return 0;
}

/* Moves waiting ops to the QPs while the connection is open and has room. */
void
vb_pump(struct vb_conn *c)
{
	struct vb_op *op;

	while (c->state == VBS_OPEN && c->nflight < c->opts.max_outstanding &&
	    (op = TAILQ_FIRST(&c->waitq)) != NULL) {
		TAILQ_REMOVE(&c->waitq, op, wait);
		if (vb_op_queue(c, op) < 0) {
			TAILQ_INSERT_HEAD(&c->waitq, op, wait);
			vb_close(c, -ENOMEM);
			return;
		}
		c->nflight++;
	}
}

/* Accepts a new op: numbers it, queues it, sends it when there is room. */
void
vb_op_submit(struct vb_conn *c, struct vb_op *op)
{
	op->id = c->next_id++;
	op->deadline = mono_ns() + c->timeout_ns;
	op->state = OPS_WAITING;
	TAILQ_INSERT_TAIL(&c->ops, op, all);
	TAILQ_INSERT_TAIL(&c->waitq, op, wait);
	c->nops++;
	c->stats.outstanding = c->nops;
	vb_pump(c);
	vb_arm_timer(c);
}

/* Returns -ENOTCONN unless new operations may be queued on c. */
int
vb_check_usable(const struct vb_conn *c)
{
	return c->state <= VBS_OPEN ? 0 : -ENOTCONN;
}

