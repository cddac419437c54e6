/*
 * transport-msg.c - what a message means, whatever the fabric: the part of
 * the connection core (transport-int.h) that reads. The transports hand
 * it headers and whole messages.
 *
 * Owns: header checks (version, limits, requests only when allowed), the
 * lookup of the request a response answers, the hello on both sides,
 * protocol violations (counted, logged, an error reply when one can be
 * understood, then the close), serving READ and WRITE requests through
 * `resolve`, and handing requests to the role. No locks: one loop.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "base/base.h"
#include "transport/transport-int.h"

/* Returns true when h is a request we can answer (known type, flags). */
static bool
tp_answerable(const struct fam_hdr *h)
{
	return h != NULL && h->magic == FAM_PROTO_MAGIC &&
	    h->version == FAM_PROTO_VERSION && h->type >= 1 &&
	    h->type <= FAM_MSG_TYPE_MAX && (h->flags & ~FAM_F_ALL) == 0 &&
	    (h->flags & FAM_F_RESPONSE) == 0;
}

/*
 * Queues a response with no payload to req (a status the protocol cannot
 * carry becomes EIO); close_after: the connection ends once it is out.
 * On failure the connection is closed: -EPROTO or -ENOMEM.
 */
int
tp_reply_status(struct tp_conn *c, const struct fam_hdr *req, int status,
    bool close_after)
{
	struct tp_out *o;

	if (status < 0 || status > FAM_STATUS_MAX)
		status = EIO;
	o = tp_out_new(c, 0);
	if (o == NULL) {
		tp_close(c, -ENOMEM);
		return -ENOMEM;
	}
	if (tp_resp_hdr(req, status, 0, o->inl) < 0) {
		free(o);
		tp_close(c, -EPROTO);
		return -EPROTO;
	}
	o->resp = true;
	o->close_after = close_after;
	c->tops->out_queue(c, o, true);
	return 0;
}

/*
 * Ends the connection after telling the peer why: an error response to
 * req, sent before the close. err goes to `closed`.
 */
void
tp_fail_reply(struct tp_conn *c, const struct fam_hdr *req, int status,
    int err)
{
	if (tp_reply_status(c, req, status, true) < 0 ||
	    c->state >= TPS_DRAINING)
		return;
	c->state = TPS_CLOSING;
	c->final_err = err;
	c->deadline = mono_ns() + c->timeout_ns;
	event_del(c->ev_timer);
	tp_arm_timer(c);
}

/*
 * A protocol violation: counted, logged with the peer, and the connection
 * closed (after an error response with status when h is a request we can
 * answer).
 */
void
tp_violation(struct tp_conn *c, const struct fam_hdr *h, int status, int err,
    const char *fmt, ...)
{
	char why[256], who[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	c->stats.bad_frames++;
	log_notice("%s: %s: protocol violation: %s; closing the connection",
	    c->base.ops->name, tp_who(c, who, sizeof who), why);
	if (status != 0 && tp_answerable(h) && c->state > TPS_CONNECTING &&
	    c->state < TPS_CLOSING)
		tp_fail_reply(c, h, status, err);
	else
		tp_close(c, err);
}

/*
 * A header arrived (raw): decodes it into h and checks it. Returns 0 when
 * the message may go on, -1 when it was refused (the connection ends).
 */
int
tp_on_hdr(struct tp_conn *c, const uint8_t *raw, struct fam_hdr *h)
{
	char who[160];
	int err;

	proto_get_hdr(raw, h);
	c->stats.msgs_in++;
	err = proto_check_hdr(h, c->opts.max_payload);
	if (err == -EPROTONOSUPPORT && !c->active && c->state == TPS_HELLO &&
	    h->type == FAM_MSG_HELLO && !(h->flags & FAM_F_RESPONSE)) {
		log_notice("%s: refused hello from %s: protocol version %u "
		    "(this famd speaks %u)", c->base.ops->name,
		    tp_who(c, who, sizeof who), h->version, FAM_PROTO_VERSION);
		c->op_err = -EPROTONOSUPPORT;
		h->version = FAM_PROTO_VERSION;
		tp_fail_reply(c, h, EPROTONOSUPPORT, -EPROTONOSUPPORT);
		return -1;
	}
	if (err == 0)
		return 0;
	if (err == -EPROTONOSUPPORT)
		tp_violation(c, NULL, 0, err, "protocol version %u",
		    h->version);
	else if (h->magic != FAM_PROTO_MAGIC)
		tp_violation(c, NULL, 0, err, "bad magic 0x%08x", h->magic);
	else if (err == -EMSGSIZE)
		tp_violation(c, h, EMSGSIZE, err, "%s of %u bytes (limit %u)",
		    proto_type_name(h->type), h->len, c->opts.max_payload);
	else
		tp_violation(c, h, EPROTO, err, "bad header (type %u, flags "
		    "0x%x, length %u, status %d)", h->type, h->flags, h->len,
		    h->status);
	return -1;
}

/*
 * A response header arrived: returns its request (out of the table), or
 * NULL when it answers none (the connection ends).
 */
struct tp_op *
tp_on_resp_hdr(struct tp_conn *c, const struct fam_hdr *h)
{
	struct tp_op *op = tp_table_find(c, h->id);

	if (op == NULL) {
		tp_violation(c, h, 0, -EPROTO, "%s response to unknown request "
		    "id %llu", proto_type_name(h->type),
		    (unsigned long long)h->id);
		return NULL;
	}
	if (op->type != h->type) {
		tp_violation(c, h, 0, -EPROTO, "%s response to %s request id "
		    "%llu", proto_type_name(h->type), proto_type_name(op->type),
		    (unsigned long long)h->id);
		return NULL;
	}
	if (op->state != TP_OPS_SENT) {
		tp_violation(c, h, 0, -EPROTO, "response to request id %llu "
		    "before it was sent", (unsigned long long)h->id);
		return NULL;
	}
	tp_table_remove(c, op);
	if (op->kind == TP_OP_READ && h->status == 0 && h->len != op->rw.len) {
		tp_violation(c, h, 0, -EPROTO, "read response of %u bytes to a "
		    "read of %u", h->len, op->rw.len);
		return NULL;
	}
	return op;
}

/*
 * A request header arrived: may it come now? Returns 0, or -1 when not
 * (the connection ends).
 */
int
tp_on_req_hdr(struct tp_conn *c, const struct fam_hdr *h)
{
	if (!c->active && c->state == TPS_HELLO) {
		if (h->type == FAM_MSG_HELLO)
			return 0;
		tp_violation(c, h, EACCES, -EPROTO, "%s request before hello",
		    proto_type_name(h->type));
		return -1;
	}
	if (c->state != TPS_OPEN) {
		tp_violation(c, h, EPROTO, -EPROTO, "%s request before our "
		    "hello was answered", proto_type_name(h->type));
		return -1;
	}
	if (h->type == FAM_MSG_HELLO) {
		tp_violation(c, h, EPROTO, -EPROTO, "second hello");
		return -1;
	}
	return 0;
}

/*
 * The fixed part of a WRITE request served here arrived: resolves where
 * its data goes. Returns 0 with *mem and *hold, a positive status to
 * answer once the data is skipped, or -1 (a violation: the connection
 * ends).
 */
int
tp_on_write_hdr(struct tp_conn *c, const struct fam_hdr *h,
    const uint8_t *whdr, void **mem, void **hold)
{
	struct fam_rw m;
	int err;

	err = proto_get_write_hdr(whdr, h->len, &m);
	if (err == -EPROTO) {
		tp_violation(c, h, EPROTO, err, "write request of %u bytes in "
		    "a frame of %u", m.len, h->len - FAM_WRITE_HDR_LEN);
		return -1;
	}
	c->stats.writes++;
	if (err == 0)
		err = c->h.resolve(c->harg, m.region, m.offset, m.len, true,
		    mem, hold);
	return err < 0 ? -err : 0;
}

/* The data of a WRITE served here is in place: release it, answer. */
void
tp_on_write_data(struct tp_conn *c, const struct fam_hdr *h, void *hold,
    uint32_t len)
{
	c->stats.bytes_in += len;
	if (c->h.release != NULL)
		c->h.release(c->harg, hold, true, len);
	(void)tp_reply_status(c, h, 0, false);
}

/* The data of our two-sided READ is in place: the op is done. */
void
tp_on_read_data(struct tp_conn *c, struct tp_op *op, uint32_t len)
{
	c->stats.bytes_in += len;
	tp_op_finish(c, op, 0, NULL, len);
}

/* The hello response to our hello arrived: open (or join), or refused. */
static void
tp_on_hello_resp(struct tp_conn *c, struct tp_op *op, int status,
    const uint8_t *payload, uint32_t len)
{
	struct fam_hello_resp resp;
	char who[160];

	tp_op_unlink(c, op);
	tp_op_free(c, op);
	if (status != 0) {
		log_notice("%s: %s refused our hello: %s", c->base.ops->name,
		    tp_who(c, who, sizeof who), strerror(status));
		c->op_err = -status;
		tp_close(c, -status);
		return;
	}
	if (proto_get_hello_resp(payload, len, &resp) < 0) {
		tp_violation(c, NULL, 0, -EPROTO, "malformed hello response");
		return;
	}
	snprintf(c->node, sizeof c->node, "%s", resp.node);
	if (c->tops->hello_done != NULL && !c->tops->hello_done(c, &resp))
		return;
	tp_conn_opened(c, &resp);
}

/* A hello arrived on a passive connection: check it, ask the role. */
static void
tp_on_hello(struct tp_conn *c, const struct fam_hdr *h,
    const uint8_t *payload, uint32_t len)
{
	struct tp_out *o;
	struct fam_hello m;
	struct fam_hello_resp resp;
	char who[160];
	int err;

	if (proto_get_hello(payload, len, &m) < 0) {
		tp_violation(c, h, EPROTO, -EPROTO, "malformed hello");
		return;
	}
	snprintf(c->node, sizeof c->node, "%s", m.node);
	if (c->opts.secret[0] != '\0' &&
	    !proto_secret_equal(m.secret, c->opts.secret)) {
		explicit_bzero(&m, sizeof m);
		log_notice("%s: refused hello from %s: wrong secret",
		    c->base.ops->name, tp_who(c, who, sizeof who));
		tp_fail_reply(c, h, EACCES, -EACCES);
		return;
	}
	explicit_bzero(m.secret, sizeof m.secret);
	memset(&resp, 0, sizeof resp);
	err = c->h.hello != NULL ? c->h.hello(&c->base, &m, &resp, c->harg) :
	    -EACCES;
	if (c->state != TPS_HELLO)
		return; /* the role closed us */
	if (err < 0) {
		log_notice("%s: refused hello from %s: %s", c->base.ops->name,
		    tp_who(c, who, sizeof who), strerror(-err));
		tp_fail_reply(c, h, -err, err);
		return;
	}
	o = tp_out_new(c, 0);
	if (o == NULL || tp_resp_hdr(h, 0, FAM_HELLO_RESP_LEN, o->inl) < 0) {
		free(o);
		tp_close(c, o == NULL ? -ENOMEM : -EPROTO);
		return;
	}
	o->iov[0].iov_len += proto_put_hello_resp(o->inl + FAM_PROTO_HDR_LEN,
	    &resp);
	o->resp = true;
	c->tops->out_queue(c, o, true);
	if (c->tops->hello_done != NULL)
		(void)c->tops->hello_done(c, &resp);
	c->state = TPS_OPEN;
	log_debug("%s: %s: hello accepted", c->base.ops->name,
	    tp_who(c, who, sizeof who));
	tp_pump(c);
}

/* Serves a two-sided READ through resolve. */
static void
tp_serve_read(struct tp_conn *c, const struct fam_hdr *h,
    const uint8_t *payload)
{
	struct tp_out *o;
	struct fam_rw m;
	void *mem = NULL, *hold = NULL;
	int err;

	err = proto_get_read(payload, FAM_READ_LEN, &m);
	if (err == -EPROTO) {
		tp_violation(c, h, EPROTO, err, "malformed read request");
		return;
	}
	c->stats.reads++;
	if (err == 0)
		err = c->h.resolve(c->harg, m.region, m.offset, m.len, false,
		    &mem, &hold);
	if (err < 0) {
		(void)tp_reply_status(c, h, -err, false);
		return;
	}
	o = tp_out_new(c, 1);
	if (o == NULL || tp_resp_hdr(h, 0, m.len, o->inl) < 0) {
		free(o);
		if (c->h.release != NULL)
			c->h.release(c->harg, hold, false, 0);
		tp_close(c, -ENOMEM);
		return;
	}
	o->iov[1].iov_base = mem;
	o->iov[1].iov_len = m.len;
	o->iovcnt = 2;
	o->resp = o->notify = o->holding = true;
	o->hold = hold;
	c->tops->out_queue(c, o, true);
}

/*
 * A whole message arrived: a response to op (the hello's too), or a
 * request, handed to the role unless served here.
 */
void
tp_on_msg(struct tp_conn *c, const struct fam_hdr *h, struct tp_op *op,
    const uint8_t *payload, uint32_t len)
{
	c->stats.bytes_in += len;
	if (h->flags & FAM_F_RESPONSE) {
		if (op->kind == TP_OP_HELLO)
			tp_on_hello_resp(c, op, h->status, payload, len);
		else
			tp_op_finish(c, op, h->status != 0 ? -h->status : 0,
			    payload, len);
		return;
	}
	if (h->type == FAM_MSG_HELLO) {
		tp_on_hello(c, h, payload, len);
		return;
	}
	if (h->type == FAM_MSG_READ && c->h.resolve != NULL) {
		tp_serve_read(c, h, payload);
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
		(void)tp_reply_status(c, h, EOPNOTSUPP, false);
}

