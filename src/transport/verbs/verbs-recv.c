/*
 * verbs-recv.c - input: SENDs put back together into messages, and the
 * messages handed on (hello, responses, requests).
 */
#include "config.h"

#include "transport/verbs/verbs.h"

/* ---- input ------------------------------------------------------------- */

/* The hello response to our hello arrived: join, open, or refused. */
static void
vb_on_hello_resp(struct vb_conn *c, struct vb_op *op, int status,
    const uint8_t *payload, uint32_t len)
{
	struct fam_hello_resp resp;
	struct sockaddr_storage src;
	char who[160];

	TAILQ_REMOVE(&c->ops, op, all);
	c->nops--;
	if (c->nflight > 0)
		c->nflight--;
	c->stats.outstanding = c->nops;
	vb_op_free(c, op);
	if (status != 0) {
		log_notice("verbs: %s refused our hello: %s",
		    vb_who(c, who, sizeof who), strerror(status));
		c->op_err = -status;
		vb_close(c, -status);
		return;
	}
	if (proto_get_hello_resp(payload, len, &resp) < 0) {
		vb_violation(c, NULL, 0, -EPROTO, "malformed hello response");
		return;
	}
	snprintf(c->node, sizeof c->node, "%s", resp.node);
	if (c->nqps > 1) {
		/* The other QPs join from the same local address (device). */
		memcpy(&src, rdma_get_local_addr(c->qps[0].id), sizeof src);
		if (src.ss_family == AF_INET)
			((struct sockaddr_in *)&src)->sin_port = 0;
		else
			((struct sockaddr_in6 *)&src)->sin6_port = 0;
		c->state = VBS_JOINING;
		c->joined_resp = resp;
		for (unsigned i = 1; i < c->nqps; i++) {
			int err = vb_qp_connect(&c->qps[i],
			    (struct sockaddr *)&src);

			if (err < 0) {
				log_notice("verbs: %s: QP %u: %s; closing the "
				    "connection", vb_who(c, who, sizeof who), i,
				    strerror(-err));
				vb_close(c, err);
				return;
			}
		}
		return;
	}
	c->state = VBS_OPEN;
	log_debug("verbs: %s: connected", vb_who(c, who, sizeof who));
	if (c->h.connected != NULL)
		c->h.connected(&c->base, &resp, c->harg);
	vb_pump(c);
}

/* A hello arrived on a passive connection: check it, ask the role. */
static void
vb_on_hello(struct vb_conn *c, struct vb_qp *q, const struct fam_hdr *h,
    const uint8_t *payload, uint32_t len)
{
	struct fam_hello m;
	struct fam_hello_resp resp;
	struct vb_msg *out;
	char who[160];
	int err;

	if (proto_get_hello(payload, len, &m) < 0) {
		vb_violation(c, h, EPROTO, -EPROTO, "malformed hello");
		return;
	}
	snprintf(c->node, sizeof c->node, "%s", m.node);
	if (c->opts.secret[0] != '\0' &&
	    !proto_secret_equal(m.secret, c->opts.secret)) {
		explicit_bzero(&m, sizeof m);
		log_notice("verbs: refused hello from %s: wrong secret",
		    vb_who(c, who, sizeof who));
		vb_reply_status(c, q, h, EACCES, true, -EACCES);
		return;
	}
	explicit_bzero(m.secret, sizeof m.secret);
	memset(&resp, 0, sizeof resp);
	err = c->h.hello != NULL ? c->h.hello(&c->base, &m, &resp, c->harg) :
	    -EACCES;
	if (c->state != VBS_HELLO)
		return; /* the role closed us */
	if (err < 0) {
		log_notice("verbs: refused hello from %s: %s",
		    vb_who(c, who, sizeof who), strerror(-err));
		vb_reply_status(c, q, h, -err, true, err);
		return;
	}
	out = vb_msg_new(0);
	if (out == NULL) {
		vb_close(c, -ENOMEM);
		return;
	}
	if (tp_resp_hdr(h, 0, FAM_HELLO_RESP_LEN, out->inl) < 0) {
		free(out);
		vb_close(c, -EPROTO);
		return;
	}
	out->iov[0].iov_len += proto_put_hello_resp(out->inl +
	    FAM_PROTO_HDR_LEN, &resp);
	out->resp = true;
	vb_msg_queue(c, q, out);
	c->state = VBS_OPEN;
	if (c->counted_hello && c->l != NULL) {
		c->l->nhello--;
		c->counted_hello = false;
	}
	log_debug("verbs: %s: hello accepted", vb_who(c, who, sizeof who));
	vb_pump(c);
}

/* Serves a two-sided READ through resolve: the reply copies the memory. */
static void
vb_serve_read(struct vb_conn *c, struct vb_qp *q, const struct fam_hdr *h,
    const uint8_t *payload)
{
	struct fam_rw m;
	struct vb_msg *out;
	void *mem = NULL, *hold = NULL;
	int err;

	err = proto_get_read(payload, FAM_READ_LEN, &m);
	if (err == -EPROTO) {
		vb_violation(c, h, EPROTO, err, "malformed read request");
		return;
	}
	c->stats.reads++;
	if (err == 0)
		err = c->h.resolve(c->harg, m.region, m.offset, m.len, false,
		    &mem, &hold);
	if (err < 0) {
		vb_reply_status(c, q, h, -err, false, 0);
		return;
	}
	out = vb_msg_new(1);
	if (out == NULL || tp_resp_hdr(h, 0, m.len, out->inl) < 0) {
		free(out);
		if (c->h.release != NULL)
			c->h.release(c->harg, hold, false, 0);
		vb_close(c, -ENOMEM);
		return;
	}
	out->iov[1].iov_base = mem;
	out->iov[1].iov_len = m.len;
	out->iovcnt = 2;
	out->resp = true;
	out->holding = true;
	out->hold = hold;
	vb_msg_queue(c, q, out);
}

/* A whole message arrived: hand it on. */
static void
vb_on_msg(struct vb_qp *q, const struct fam_hdr *h, const uint8_t *payload,
    uint32_t len)
{
	struct vb_conn *c = q->c;
	struct vb_op *op = q->rx.op;

	q->rx.op = NULL;
	c->stats.bytes_in += len;
	if (h->flags & FAM_F_RESPONSE) {
		if (op->kind == OP_HELLO) {
			vb_on_hello_resp(c, op, h->status, payload, len);
			return;
		}
		vb_op_finish(c, op, h->status != 0 ? -h->status : 0, payload,
		    len);
		return;
	}
	if (h->type == FAM_MSG_HELLO) {
		vb_on_hello(c, q, h, payload, len);
		return;
	}
	if (h->type == FAM_MSG_READ && c->h.resolve != NULL) {
		vb_serve_read(c, q, h, payload);
		return;
	}
	if (h->type == FAM_MSG_READ)
		c->stats.reads++;
	else if (h->type == FAM_MSG_WRITE)
		c->stats.writes++;
	else
		c->stats.calls++;
	if (c->h.request != NULL)
		c->h.request(&c->base, h, payload, c->harg);
	else
		vb_reply_status(c, q, h, EOPNOTSUPP, false, 0);
}

/* A message being received is complete. */
static void
vb_rx_complete(struct vb_qp *q, const uint8_t *inplace)
{
	struct vb_conn *c = q->c;
	struct vb_rx *rx = &q->rx;
	struct fam_hdr h = rx->h;
	uint8_t *buf = rx->buf;
	bool owned = rx->owned;

	rx->active = false;
	rx->buf = NULL;
	rx->owned = false;
	switch (rx->kind) {
	case RXK_BODY:
		vb_on_msg(q, &h, inplace != NULL ? inplace : buf, rx->len);
		break;
	case RXK_DST: {
		struct vb_op *op = rx->op;

		rx->op = NULL;
		c->stats.bytes_in += rx->len;
		vb_op_finish(c, op, 0, NULL, rx->len);
		break;
	}
	case RXK_WRITE:
		rx->holding = false;
		c->stats.bytes_in += rx->len;
		if (c->h.release != NULL)
			c->h.release(c->harg, rx->hold, true, rx->len);
		vb_reply_status(c, q, &h, 0, false, 0);
		break;
	case RXK_DISCARD:
		vb_reply_status(c, q, &h, rx->status, false, 0);
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
		vb_close(q->c, -ENOMEM);
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
	struct vb_conn *c = q->c;
	struct vb_op *op = vb_table_find(c, h->id);

	if (op == NULL) {
		vb_violation(c, h, 0, -EPROTO, "%s response to unknown request "
		    "id %llu", proto_type_name(h->type),
		    (unsigned long long)h->id);
		return -1;
	}
	if (op->type != h->type) {
		vb_violation(c, h, 0, -EPROTO, "%s response to %s request id "
		    "%llu", proto_type_name(h->type), proto_type_name(op->type),
		    (unsigned long long)h->id);
		return -1;
	}
	vb_table_remove(c, op);
	q->rx.op = op;
	if (op->kind == OP_READ && h->status == 0) {
		if (h->len != op->rw.len) {
			vb_violation(c, h, 0, -EPROTO, "read response of %u "
			    "bytes to a read of %u", h->len, op->rw.len);
			return -1;
		}
		q->rx.kind = RXK_DST;
		q->rx.buf = op->dst;
		q->rx.len = h->len;
		q->rx.got = 0;
		return 0;
	}
	q->rx.kind = RXK_BODY;
	q->rx.len = h->len;
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
	struct fam_rw m;
	void *mem = NULL, *hold = NULL;
	int err;

	if (!c->active && c->state == VBS_HELLO) {
		if (h->type != FAM_MSG_HELLO) {
			vb_violation(c, h, EACCES, -EPROTO, "%s request before "
			    "hello", proto_type_name(h->type));
			return -1;
		}
	} else if (c->state != VBS_OPEN) {
		vb_violation(c, h, EPROTO, -EPROTO, "%s request before our "
		    "hello was answered", proto_type_name(h->type));
		return -1;
	} else if (h->type == FAM_MSG_HELLO) {
		vb_violation(c, h, EPROTO, -EPROTO, "second hello");
		return -1;
	}
	rx->kind = RXK_BODY;
	rx->len = h->len;
	if (h->type != FAM_MSG_WRITE || c->h.resolve == NULL)
		return 0;
	/* A WRITE served here: its data goes straight to region memory. */
	if (n < FAM_WRITE_HDR_LEN) {
		vb_violation(c, h, EPROTO, -EPROTO, "write request split "
		    "inside its fixed part");
		return -1;
	}
	err = proto_get_write_hdr(p, h->len, &m);
	if (err == -EPROTO) {
		vb_violation(c, h, EPROTO, err, "write request of %u bytes in a "
		    "frame of %u", m.len, h->len - FAM_WRITE_HDR_LEN);
		return -1;
	}
	c->stats.writes++;
	if (err == 0)
		err = c->h.resolve(c->harg, m.region, m.offset, m.len, true,
		    &mem, &hold);
	rx->len = h->len - FAM_WRITE_HDR_LEN;
	rx->got = 0;
	if (err < 0) {
		rx->kind = RXK_DISCARD;
		rx->status = -err;
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
	char who[160];
	int err;

	if (n < FAM_PROTO_HDR_LEN) {
		vb_violation(c, NULL, 0, -EPROTO, "a message of %u bytes", n);
		return;
	}
	proto_get_hdr(p, h);
	c->stats.msgs_in++;
	p += FAM_PROTO_HDR_LEN;
	n -= FAM_PROTO_HDR_LEN;
	rx->op = NULL;
	rx->buf = NULL;
	rx->owned = false;
	rx->got = 0;
	err = proto_check_hdr(h, c->opts.max_payload);
	if (err == -EPROTONOSUPPORT && !c->active && c->state == VBS_HELLO &&
	    h->type == FAM_MSG_HELLO && !(h->flags & FAM_F_RESPONSE)) {
		log_notice("verbs: refused hello from %s: protocol version %u "
		    "(this famd speaks %u)", vb_who(c, who, sizeof who),
		    h->version, FAM_PROTO_VERSION);
		c->op_err = -EPROTONOSUPPORT;
		h->version = FAM_PROTO_VERSION;
		vb_reply_status(c, q, h, EPROTONOSUPPORT, true,
		    -EPROTONOSUPPORT);
		return;
	}
	if (err < 0) {
		if (err == -EPROTONOSUPPORT)
			vb_violation(c, NULL, 0, err, "protocol version %u",
			    h->version);
		else if (h->magic != FAM_PROTO_MAGIC)
			vb_violation(c, NULL, 0, err, "bad magic 0x%08x",
			    h->magic);
		else if (err == -EMSGSIZE)
			vb_violation(c, h, EMSGSIZE, err, "%s of %u bytes "
			    "(limit %u)", proto_type_name(h->type), h->len,
			    c->opts.max_payload);
		else
			vb_violation(c, h, EPROTO, err, "bad header (type %u, "
			    "flags 0x%x, length %u, status %d)", h->type,
			    h->flags, h->len, h->status);
		return;
	}
	if (n > h->len) {
		vb_violation(c, h, EPROTO, -EPROTO, "a SEND of %u bytes for a "
		    "%s of %u", n + FAM_PROTO_HDR_LEN, proto_type_name(h->type),
		    h->len);
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

	if (!rx->active) {
		if (!has_imm || n < FAM_PROTO_HDR_LEN || imm != vb_imm(p)) {
			vb_violation(q->c, NULL, 0, -EPROTO, "a message's first "
			    "SEND %s immediate data 0x%08x", has_imm ?
			    "disagrees with its header:" : "without",
			    has_imm ? imm : 0);
			return;
		}
		vb_rx_start(q, p, n);
		return;
	}
	if (has_imm) {
		vb_violation(q->c, NULL, 0, -EPROTO, "immediate data 0x%08x on "
		    "the continuation of a %s", imm,
		    proto_type_name(rx->h.type));
		return;
	}
	if (n == 0 || n > rx->len - rx->got) {
		vb_violation(q->c, NULL, 0, -EPROTO, "a SEND of %u bytes with "
		    "%u left of a %s", n, rx->len - rx->got,
		    proto_type_name(rx->h.type));
		return;
	}
	if (rx->kind != RXK_DISCARD)
		memcpy(rx->buf + rx->got, p, n);
	rx->got += n;
	if (rx->got == rx->len)
		vb_rx_complete(q, NULL);
}

