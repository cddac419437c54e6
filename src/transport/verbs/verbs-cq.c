/* SPDX-License-Identifier: Apache-2.0 */
/*
 * verbs-cq.c - completions: the completion channel cycle, polling in
 * bounded batches, dispatch on the wr_id tag, retiring send rings.
 */
#include "config.h"

#include "transport/verbs/verbs.h"

/* ---- completions ------------------------------------------------------- */

/*
 * Maps a bad completion to the errno its operation fails with. The peer
 * refusing the access (-EACCES: no such lease, or past its end) or the
 * request (-EINVAL) is the operation's own failure; anything else is the
 * connection failing (-ECONNRESET, as for every other operation on it),
 * which the caller may retry on a new connection.
 */
static int
vb_wc_errno(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_REM_ACCESS_ERR:
		return -EACCES;
	case IBV_WC_REM_INV_REQ_ERR:
		return -EINVAL;
	default:
		return -ECONNRESET;
	}
}

/*
 * Polls the CQ: ibv_poll_cq, then (a test aid, [verbs] inject_error_ppm)
 * turns a fraction of the successful completions into IBV_WC_GENERAL_ERR.
 */
static int
vb_poll_cq(struct vb_conn *c, int n, struct ibv_wc *wc)
{
	int got = ibv_poll_cq(c->cq, n, wc);

	if (got <= 0 || c->tc.opts.inject_error_ppm == 0)
		return got;
	for (int i = 0; i < got; i++) {
		uint64_t x = c->rng;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		c->rng = x;
		if (wc[i].status == IBV_WC_SUCCESS &&
		    x % 1000000u < c->tc.opts.inject_error_ppm) {
			wc[i].status = IBV_WC_GENERAL_ERR;
			log_info("verbs: injecting an error into a completion "
			    "(inject_error_ppm %u)",
			    c->tc.opts.inject_error_ppm);
		}
	}
	return got;
}

/* A bad completion: counted, logged, and the connection closed. */
static void
vb_wc_fail(struct vb_conn *c, const struct ibv_wc *wc, const char *what)
{
	char who[160];

	c->tc.stats.completion_errors++;
	if (c->tc.state < TPS_DRAINING)
		log_notice("verbs: %s: %s completion: %s (vendor error 0x%x); "
		    "closing the connection", tp_who(&c->tc, who, sizeof who),
		    what, ibv_wc_status_str(wc->status), wc->vendor_err);
	tp_close(&c->tc, -EIO);
}

/* A one-sided operation's last part retired: finish it. */
static void
vb_data_done(struct vb_conn *c, struct tp_op *op)
{
	int status = vb_opx(op)->status;

	if (status == 0 && op->kind == TP_OP_READ &&
	    vb_opx(op)->slabs != NULL) {
		uint32_t off = 0;

		for (struct vb_slab *s = vb_opx(op)->slabs; s != NULL;
		    s = s->next) {
			uint32_t len = op->rw.len - off < VB_SLAB ?
			    op->rw.len - off : VB_SLAB;

			memcpy((uint8_t *)op->dst + off, s->buf, len);
			off += len;
		}
	}
	if (status == 0) {
		if (op->kind == TP_OP_READ)
			c->tc.stats.bytes_in += op->rw.len;
		else
			c->tc.stats.bytes_out += op->rw.len;
	}
	tp_op_finish(&c->tc, op, status, NULL, status == 0 ? op->rw.len : 0);
}

/*
 * Retires q's send ring up to slot e, which completed with status (0, or
 * -errno for the failed or flushed WR itself; older unsignalled slots
 * completed before it).
 */
void
vb_retire(struct vb_conn *c, struct vb_qp *q, struct vb_sqe *e, int status)
{
	for (;;) {
		struct vb_sqe *x = &q->ring[q->head];
		bool last = x == e;
		int st = last ? status : 0;

		q->head = (q->head + 1) % VB_SQ_DEPTH;
		q->used--;
		switch (x->kind) {
		case SQE_SEND:
			if (x->sbuf != NULL) {
				x->sbuf->next = c->sfree;
				c->sfree = x->sbuf;
				x->sbuf = NULL;
			}
			if (x->msg != NULL) {
				struct vb_msg *m = x->msg;

				x->msg = NULL;
				vb_msg_done(c, m);
			}
			if (x->close_after && st == 0 &&
			    c->tc.state == TPS_CLOSING)
				tp_close(&c->tc, c->tc.final_err);
			break;
		case SQE_DATA: {
			struct tp_op *op = x->op;

			if (st != 0 && vb_opx(op)->status == 0)
				vb_opx(op)->status = st;
			if (--vb_opx(op)->parts_left == 0)
				vb_data_done(c, op);
			break;
		}
		case SQE_DRAIN:
			q->drained = true;
			break;
		}
		if (last || q->used == 0)
			break;
	}
}

/* A send-side completion. */
static void
vb_wc_send(struct vb_conn *c, const struct ibv_wc *wc)
{
	struct vb_sqe *e = (struct vb_sqe *)(uintptr_t)wc->wr_id;
	struct vb_qp *q = e->qp;
	uint32_t slot = (uint32_t)(e - q->ring);
	int status = 0;

	if ((slot + VB_SQ_DEPTH - q->head) % VB_SQ_DEPTH >= q->used)
		return; /* retired already (not posted any more) */
	if (wc->status == IBV_WC_WR_FLUSH_ERR) {
		if (c->tc.state < TPS_DRAINING) {
			char who[160];

			log_info("verbs: %s: send queue flushed; closing the "
			    "connection", tp_who(&c->tc, who, sizeof who));
			tp_close(&c->tc, -ECONNRESET);
		}
		status = c->tc.op_err != 0 ? c->tc.op_err : -ECONNRESET;
	} else if (wc->status != IBV_WC_SUCCESS) {
		status = vb_wc_errno(wc->status);
		vb_wc_fail(c, wc, e->kind == SQE_DATA ? (e->opcode ==
		    IBV_WC_RDMA_READ ? "RDMA READ" : "RDMA WRITE") : "SEND");
	} else if (e->kind != SQE_DRAIN && (wc->opcode != e->opcode ||
	    (e->opcode == IBV_WC_RDMA_READ && wc->byte_len != e->len))) {
		struct ibv_wc bad = *wc;

		bad.status = IBV_WC_GENERAL_ERR;
		status = -EIO;
		vb_wc_fail(c, &bad, "unexpected (opcode or length)");
	}
	vb_retire(c, q, e, status);
	if (c->tc.state == TPS_DRAINING && vb_all_drained(c))
		vb_drained(c);
}

/* Finds the QP of a receive completion. */
static struct vb_qp *
vb_qp_by_num(struct vb_conn *c, uint32_t qp_num)
{
	for (unsigned i = 0; i < c->nqps; i++)
		if (c->qps[i].qp != NULL && c->qps[i].qp_num == qp_num)
			return &c->qps[i];
	return NULL;
}


/* A receive completion: one SEND of the peer's. */
static void
vb_wc_recv(struct vb_conn *c, const struct ibv_wc *wc)
{
	struct vb_rbuf *rb = (struct vb_rbuf *)(uintptr_t)wc->wr_id;
	struct vb_qp *q;

	if (c->tc.state >= TPS_DRAINING)
		return; /* not posted again: the SRQ goes with us */
	if (wc->status == IBV_WC_WR_FLUSH_ERR) {
		char who[160];

		log_info("verbs: %s: receives flushed; closing the connection",
		    tp_who(&c->tc, who, sizeof who));
		tp_close(&c->tc, -ECONNRESET);
		return;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		vb_wc_fail(c, wc, "receive");
		return;
	}
	if (c->tc.state == TPS_CLOSING) {
		rb->next = c->repost;
		c->repost = rb;
		return; /* input is ignored while an error reply goes out */
	}
	q = vb_qp_by_num(c, wc->qp_num);
	if (wc->opcode != IBV_WC_RECV || q == NULL ||
	    wc->byte_len > VB_MSG_BUF) {
		struct ibv_wc bad = *wc;

		bad.status = IBV_WC_GENERAL_ERR;
		vb_wc_fail(c, &bad, "unexpected receive (opcode, QP or length)");
		return;
	}
	vb_rx(q, rb->buf, wc->byte_len, (wc->wc_flags & IBV_WC_WITH_IMM) != 0,
	    be32toh(wc->imm_data));
	rb->next = c->repost;
	c->repost = rb;
}

/* Handles one completion, dispatched on its wr_id's tag. */
static void
vb_wc(struct vb_conn *c, const struct ibv_wc *wc)
{
	uint8_t tag = *(const uint8_t *)(uintptr_t)wc->wr_id;

	if (tag == VB_TAG_RECV)
		vb_wc_recv(c, wc);
	else
		vb_wc_send(c, wc);
}

/*
 * Polls the CQ in batches, at most VB_POLL_BUDGET of them; when more may
 * wait, polls again from the loop. Receive buffers go back to the SRQ in one
 * chain per batch; queued work is posted at the end.
 */
void
vb_cq_poll(struct vb_conn *c)
{
	struct ibv_wc wc[VB_POLL_BATCH];
	int n = 0;

	for (int b = 0; b < VB_POLL_BUDGET; b++) {
		n = vb_poll_cq(c, VB_POLL_BATCH, wc);
		if (n < 0) {
			log_notice("verbs: %s: ibv_poll_cq failed; closing the "
			    "connection", c->tc.peer);
			c->tc.stats.completion_errors++;
			tp_close(&c->tc, -EIO);
			break;
		}
		for (int i = 0; i < n; i++)
			vb_wc(c, &wc[i]);
		if (c->repost != NULL) {
			struct vb_rbuf *list = c->repost;

			c->repost = NULL;
			if (c->tc.state < TPS_DRAINING &&
			    vb_post_recvs(c, list) < 0) {
				log_notice("verbs: %s: cannot post receives; "
				    "closing the connection", c->tc.peer);
				tp_close(&c->tc, -EIO);
			}
		}
		if (n < VB_POLL_BATCH)
			break;
	}
	if (n == VB_POLL_BATCH)
		event_active(c->ev_poll, EV_WRITE, 0);
	if (c->tc.state < TPS_DRAINING)
		vb_post_all(c);
	tp_arm_timer(&c->tc);
}

/* The completion channel is readable: get the event, re-arm, poll. */
void
vb_cq_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_conn *c = arg;
	struct ibv_cq *cq;
	void *ctx;

	while (ibv_get_cq_event(c->cchan, &cq, &ctx) == 0) {
		c->cq_unacked++;
		(void)ibv_req_notify_cq(cq, 0);
	}
	vb_cq_poll(c);
	if (c->cq_unacked >= VB_ACK_BATCH) {
		ibv_ack_cq_events(c->cq, c->cq_unacked);
		c->cq_unacked = 0;
	}
}

/* Polls again after a callback used its budget. */
void
vb_poll_cb(evutil_socket_t fd, short what, void *arg)
{
	vb_cq_poll(arg);
}

