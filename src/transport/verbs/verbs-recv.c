/* SPDX-License-Identifier: Apache-2.0 */
/*
 * verbs-recv.c - input: SENDs put back together into messages, and the
 * messages handed on (hello, responses, requests).
 */
#include "config.h"

#include "transport/verbs/verbs.h"

/* ---- input ------------------------------------------------------------- */

/* A message being received is complete: hand it to the core. */
static void
vb_rx_complete(struct vb_qp *q, const uint8_t *inplace)
{
	struct vb_conn *c = q->c;
	struct vb_rx *rx = &q->rx;
	struct fam_hdr h = rx->h;
	struct tp_op *op = rx->op;
	uint8_t *buf = rx->buf;
	bool owned = rx->owned;

	rx->active = false;
	rx->buf = NULL;
	rx->owned = false;
	rx->op = NULL;
	switch (rx->kind) {
	case RXK_BODY:
		tp_on_msg(&c->tc, &h, op, inplace != NULL ? inplace : buf,
		    rx->len);
		break;
	case RXK_DST:
		tp_on_read_data(&c->tc, op, h.crc, rx->len);
		break;
	case RXK_WRITE:
		rx->holding = false;
		tp_on_write_data(&c->tc, &h, buf, rx->hold, rx->len);
		break;
	case RXK_DISCARD:
		(void)tp_reply_status(&c->tc, &h, rx->status, false);
		break;
	}
	if (owned)
		free(buf);
}

/* Expects a body of len bytes in a buffer of its own (bounded). */
static int
vb_rx_body(struct vb_qp *q, uint32_t len)
{
	struct vb_rx *rx = &q->rx;

	rx->kind = RXK_BODY;
	rx->len = len;
	rx->got = 0;
	rx->buf = malloc(len > 0 ? len : 1);
	if (rx->buf == NULL) {
		tp_close(&q->c->tc, -ENOMEM);
		return -ENOMEM;
	}
	rx->owned = true;
	return 0;
}

/*
 * A response header arrived: find its op and where its payload goes.
 * Returns 0, or -1 when the connection is closing.
 */
static int
vb_rx_resp(struct vb_qp *q, const struct fam_hdr *h)
{
	struct tp_op *op = tp_on_resp_hdr(&q->c->tc, h);

	if (op == NULL)
		return -1;
	q->rx.op = op;
	q->rx.kind = RXK_BODY;
	q->rx.len = h->len;
	if (op->kind == TP_OP_READ && h->status == 0) {
		q->rx.kind = RXK_DST;
		q->rx.buf = op->dst;
	}
	return 0;
}

/*
 * A request header arrived, with the first n bytes of its payload at p:
 * decide what may follow and where it goes. Returns 0, or -1 when the
 * connection is closing.
 */
static int
vb_rx_req(struct vb_qp *q, const struct fam_hdr *h, const uint8_t *p,
    uint32_t n)
{
	struct vb_conn *c = q->c;
	struct vb_rx *rx = &q->rx;
	void *mem = NULL, *hold = NULL;
	int st;

	if (tp_on_req_hdr(&c->tc, h) < 0)
		return -1;
	rx->kind = RXK_BODY;
	rx->len = h->len;
	if (h->type != FAM_MSG_WRITE || c->tc.h.resolve == NULL)
		return 0;
	/* A WRITE served here: its data goes straight to region memory. */
	if (n < FAM_WRITE_HDR_LEN) {
		tp_violation(&c->tc, h, EPROTO, -EPROTO, "write request split "
		    "inside its fixed part");
		return -1;
	}
	st = tp_on_write_hdr(&c->tc, h, p, &mem, &hold);
	if (st < 0)
		return -1;
	rx->len = h->len - FAM_WRITE_HDR_LEN;
	if (st > 0) {
		rx->kind = RXK_DISCARD;
		rx->status = st;
		return 0;
	}
	rx->kind = RXK_WRITE;
	rx->buf = mem;
	rx->holding = true;
	rx->hold = hold;
	return 0;
}

/* The first SEND of a message: its header decides where the rest goes. */
static void
vb_rx_start(struct vb_qp *q, const uint8_t *p, uint32_t n)
{
	struct vb_conn *c = q->c;
	struct vb_rx *rx = &q->rx;
	struct fam_hdr *h = &rx->h;

	rx->op = NULL;
	rx->buf = NULL;
	rx->owned = false;
	rx->got = 0;
	if (tp_on_hdr(&c->tc, p, h) < 0)
		return;
	p += FAM_PROTO_HDR_LEN;
	n -= FAM_PROTO_HDR_LEN;
	if (n > h->len) {
		tp_violation(&c->tc, h, EPROTO, -EPROTO, "a SEND of %u bytes "
		    "for a %s of %u", n + FAM_PROTO_HDR_LEN,
		    proto_type_name(h->type), h->len);
		return;
	}
	if ((h->flags & FAM_F_RESPONSE) ? vb_rx_resp(q, h) < 0 :
	    vb_rx_req(q, h, p, n) < 0)
		return;
	if (rx->kind == RXK_WRITE || rx->kind == RXK_DISCARD) {
		p += FAM_WRITE_HDR_LEN;
		n -= FAM_WRITE_HDR_LEN;
	}
	if (rx->kind == RXK_BODY && n == rx->len) {
		/* Whole in this SEND: handed on from the receive buffer. */
		rx->active = true;
		vb_rx_complete(q, p);
		return;
	}
	if (rx->kind == RXK_BODY && vb_rx_body(q, rx->len) < 0)
		return;
	rx->active = true;
	if (rx->kind != RXK_DISCARD && n > 0)
		memcpy(rx->buf, p, n);
	rx->got = n;
	if (rx->got == rx->len)
		vb_rx_complete(q, NULL);
}

/*
 * One SEND arrived on q: a new message (with immediate data that names it),
 * or the next part of one (without).
 */
void
vb_rx(struct vb_qp *q, const uint8_t *p, uint32_t n, bool has_imm,
    uint32_t imm)
{
	struct vb_rx *rx = &q->rx;

	q->c->rxq = q;
	if (!rx->active) {
		if (!has_imm || n < FAM_PROTO_HDR_LEN || imm != vb_imm(p)) {
			tp_violation(&q->c->tc, NULL, 0, -EPROTO, "a message's "
			    "first SEND %s immediate data 0x%08x", has_imm ?
			    "disagrees with its header:" : "without",
			    has_imm ? imm : 0);
			return;
		}
		vb_rx_start(q, p, n);
		return;
	}
	if (has_imm) {
		tp_violation(&q->c->tc, NULL, 0, -EPROTO, "immediate data "
		    "0x%08x on the continuation of a %s", imm,
		    proto_type_name(rx->h.type));
		return;
	}
	if (n == 0 || n > rx->len - rx->got) {
		tp_violation(&q->c->tc, NULL, 0, -EPROTO, "a SEND of %u bytes "
		    "with %u left of a %s", n, rx->len - rx->got,
		    proto_type_name(rx->h.type));
		return;
	}
	if (rx->kind != RXK_DISCARD)
		memcpy(rx->buf + rx->got, p, n);
	rx->got += n;
	if (rx->got == rx->len)
		vb_rx_complete(q, NULL);
}
