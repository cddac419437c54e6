/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport-msg.c - what a message means, whatever the fabric: the part of
 * the connection core (transport-int.h) that reads. The transports hand
 * it headers and whole messages.
 *
 * Owns: header checks (version, limits, requests only when allowed), the
 * lookup of the request a response answers, the handshake on both sides
 * (HELLO, AUTH: proto.h), the CRC32C of chunk data,
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
	uint8_t want = c->auth_step == 0 ? FAM_MSG_HELLO : FAM_MSG_AUTH;

	if (!c->active && c->state == TPS_HELLO) {
		if (h->type == want)
			return 0;
		tp_violation(c, h, EACCES, -EPROTO, "%s request %s",
		    proto_type_name(h->type), c->auth_step == 0 ?
		    "before hello" : "instead of the proof (auth)");
		return -1;
	}
	if (c->state != TPS_OPEN) {
		tp_violation(c, h, EPROTO, -EPROTO, "%s request before our "
		    "hello was answered", proto_type_name(h->type));
		return -1;
	}
	if (h->type == FAM_MSG_HELLO || h->type == FAM_MSG_AUTH) {
		tp_violation(c, h, EPROTO, -EPROTO, "second hello");
		return -1;
	}
	return 0;
}

/* Counts and logs a chunk whose data did not match its CRC. */
static void
tp_crc_error(struct tp_conn *c, const char *what, uint32_t len, uint32_t got,
    uint32_t want)
{
	char who[160];

	c->stats.crc_errors++;
	log_notice("%s: %s: %s of %u bytes does not match its CRC32C (0x%08x, "
	    "header 0x%08x): the chunk is lost", c->base.ops->name,
	    tp_who(c, who, sizeof who), what, len, got, want);
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

/*
 * The data of a WRITE served here is in place at mem: checked against its
 * CRC when it has one (a mismatch is answered EBADMSG: the peer writes it
 * again), then released and answered.
 */
void
tp_on_write_data(struct tp_conn *c, const struct fam_hdr *h,
    const void *mem, void *hold, uint32_t len)
{
	uint32_t crc = h->crc != 0 ? proto_crc32c(0, mem, len) : 0;
	int status = 0;

	c->stats.bytes_in += len;
	if (crc != h->crc) {
		tp_crc_error(c, "written data", len, crc, h->crc);
		status = EBADMSG;
	}
	if (c->h.release != NULL)
		c->h.release(c->harg, hold, true, len);
	(void)tp_reply_status(c, h, status, false);
}

/*
 * The data of our two-sided READ is in place: the op is done, with
 * -EBADMSG when it does not match crc (never wrong data as a success).
 */
void
tp_on_read_data(struct tp_conn *c, struct tp_op *op, uint32_t crc,
    uint32_t len)
{
	uint32_t got = proto_crc32c(0, op->dst, len);

	c->stats.bytes_in += len;
	if (got != crc) {
		tp_crc_error(c, "read data", len, got, crc);
		tp_op_finish(c, op, -EBADMSG, NULL, 0);
		return;
	}
	tp_op_finish(c, op, 0, NULL, len);
}

/* The server refused our HELLO or AUTH: the connection ends. */
static void
tp_refused(struct tp_conn *c, int status)
{
	char who[160];

	log_notice("%s: %s refused our hello: %s", c->base.ops->name,
	    tp_who(c, who, sizeof who), strerror(status));
	c->op_err = -status;
	tp_close(c, -status);
}

/* The server's challenge (HELLO response) arrived: prove the secret. */
static void
tp_on_challenge(struct tp_conn *c, uint64_t id, int status,
    const uint8_t *payload, uint32_t len)
{
	uint8_t proof[FAM_PROOF_LEN];
	struct tp_op *op;

	if (status != 0) {
		tp_refused(c, status);
		return;
	}
	if (proto_get_challenge(payload, len, &c->ch) < 0) {
		tp_violation(c, NULL, 0, -EPROTO, "malformed hello response");
		return;
	}
	snprintf(c->node, sizeof c->node, "%s", c->ch.node);
	if (proto_auth_derive(&c->auth, c->skey, &c->hello, &c->ch) < 0 ||
	    proto_auth_client_proof(&c->auth, c->hello.resume, proof) < 0 ||
	    (op = tp_handshake_op(c, FAM_MSG_AUTH, id, proof, sizeof proof)) ==
	    NULL || tp_op_start(c, op) < 0) {
		tp_close(c, -ENOMEM);
		return;
	}
	tp_arm_timer(c);
}

/*
 * The AUTH response arrived: the server's proof is checked before
 * anything else is believed; then open (or join), or refused.
 */
static void
tp_on_auth_resp(struct tp_conn *c, int status, const uint8_t *payload,
    uint32_t len)
{
	struct fam_hello_resp resp;
	uint8_t proof[FAM_PROOF_LEN];
	char who[160];

	if (status != 0) {
		tp_refused(c, status);
		return;
	}
	if (len != FAM_AUTH_RESP_LEN || proto_get_hello_resp(payload +
	    FAM_PROOF_LEN, len - FAM_PROOF_LEN, &resp) < 0) {
		tp_violation(c, NULL, 0, -EPROTO, "malformed auth response");
		return;
	}
	if (proto_auth_server_proof(&c->auth, payload + FAM_PROOF_LEN,
	    proof) < 0 || !proto_auth_equal(proof, payload, FAM_PROOF_LEN)) {
		log_notice("%s: %s did not prove the shared secret%s; closing",
		    c->base.ops->name, tp_who(c, who, sizeof who),
		    c->has_secret ? "" : " (we have none: secret_file)");
		c->op_err = -EACCES;
		tp_close(c, -EACCES);
		return;
	}
	snprintf(c->node, sizeof c->node, "%s", resp.node);
	if (c->tops->hello_done != NULL && !c->tops->hello_done(c, &resp))
		return;
	tp_conn_opened(c, &resp);
}

/* A handshake response: the challenge, or the AUTH response. */
static void
tp_on_handshake_resp(struct tp_conn *c, struct tp_op *op, int status,
    const uint8_t *payload, uint32_t len)
{
	uint8_t type = op->type;
	uint64_t id = op->id;

	tp_op_unlink(c, op);
	tp_op_free(c, op);
	if (type == FAM_MSG_HELLO)
		tp_on_challenge(c, id, status, payload, len);
	else
		tp_on_auth_resp(c, status, payload, len);
}

/* Queues a handshake response of len bytes (inline). 0 or closes. */
static int
tp_handshake_reply(struct tp_conn *c, const struct fam_hdr *h,
    const uint8_t *payload, uint32_t len)
{
	struct tp_out *o = tp_out_new(c, 0);

	if (o == NULL || tp_resp_hdr(h, 0, len, o->inl) < 0) {
		free(o);
		tp_close(c, o == NULL ? -ENOMEM : -EPROTO);
		return -1;
	}
	memcpy(o->inl + FAM_PROTO_HDR_LEN, payload, len);
	o->iov[0].iov_len += len;
	o->resp = true;
	c->tops->out_queue(c, o, true);
	return 0;
}

/*
 * Picks the key the peer of a passive connection must prove: its own when
 * its hello names a node of peer_keys, else the shared secret's. -EACCES
 * (logged) when there are peer keys, none is the peer's, and there is no
 * shared secret.
 */
static int
tp_peer_key(struct tp_conn *c, const uint8_t **key)
{
	char who[160];

	*key = c->skey;
	c->keyed = false;
	for (size_t i = 0; i < c->opts.npeer_keys; i++)
		if (strcmp(c->opts.peer_keys[i].name, c->hello.node) == 0) {
			*key = c->opts.peer_keys[i].key;
			c->keyed = true;
			return 0;
		}
	if (c->opts.npeer_keys == 0 || c->has_secret)
		return 0;
	log_rl(LOG_NOTICE, "%s: refused hello from %s: node %s has no key of "
	    "its own (peer_secrets) and there is no shared secret",
	    c->base.ops->name, tp_who(c, who, sizeof who), c->hello.node);
	return -EACCES;
}

/* A hello arrived on a passive connection: answer with the challenge. */
static void
tp_on_hello(struct tp_conn *c, const struct fam_hdr *h,
    const uint8_t *payload, uint32_t len)
{
	uint8_t out[FAM_CHALLENGE_LEN];
	const uint8_t *key;

	if (proto_get_hello(payload, len, &c->hello) < 0) {
		tp_violation(c, h, EPROTO, -EPROTO, "malformed hello");
		return;
	}
	snprintf(c->node, sizeof c->node, "%s", c->hello.node);
	if (tp_peer_key(c, &key) < 0) {
		tp_fail_reply(c, h, EACCES, -EACCES);
		return;
	}
	c->ch.role = c->opts.hello.role != 0 ? c->opts.hello.role :
	    FAM_WIRE_ROLE_MEMORY;
	snprintf(c->ch.node, sizeof c->ch.node, "%s",
	    c->opts.hello.node[0] != '\0' ? c->opts.hello.node : "famd");
	if (proto_auth_nonce(c->ch.nonce) < 0 ||
	    proto_auth_derive(&c->auth, key, &c->hello, &c->ch) < 0) {
		tp_close(c, -EIO);
		return;
	}
	proto_put_challenge(out, &c->ch);
	if (tp_handshake_reply(c, h, out, sizeof out) == 0)
		c->auth_step = 1;
}

/*
 * The client's proof (AUTH) arrived: checked (any proof, without a secret
 * of ours), then the role decides, and the answer carries our proof.
 */
static void
tp_on_auth(struct tp_conn *c, const struct fam_hdr *h,
    const uint8_t *payload, uint32_t len)
{
	uint8_t want[FAM_PROOF_LEN], out[FAM_AUTH_RESP_LEN];
	struct fam_hello_resp resp;
	char who[160];
	int err;

	if (proto_auth_client_proof(&c->auth, c->hello.resume, want) < 0) {
		tp_close(c, -EIO);
		return;
	}
	if ((c->has_secret || c->keyed) &&
	    !proto_auth_equal(want, payload, FAM_PROOF_LEN)) {
		log_notice("%s: refused hello from %s: wrong %s",
		    c->base.ops->name, tp_who(c, who, sizeof who), c->keyed ?
		    "key for its node name (peer_secrets)" : "secret");
		tp_fail_reply(c, h, EACCES, -EACCES);
		return;
	}
	memset(&resp, 0, sizeof resp);
	err = c->h.hello != NULL ? c->h.hello(&c->base, &c->hello, &resp,
	    c->harg) : -EACCES;
	if (c->state != TPS_HELLO)
		return; /* the role closed us */
	if (err < 0) {
		log_notice("%s: refused hello from %s: %s", c->base.ops->name,
		    tp_who(c, who, sizeof who), strerror(-err));
		tp_fail_reply(c, h, -err, err);
		return;
	}
	proto_put_hello_resp(out + FAM_PROOF_LEN, &resp);
	if (proto_auth_server_proof(&c->auth, out + FAM_PROOF_LEN, out) < 0) {
		tp_close(c, -EIO);
		return;
	}
	if (tp_handshake_reply(c, h, out, sizeof out) < 0)
		return;
	if (c->tops->hello_done != NULL)
		(void)c->tops->hello_done(c, &resp);
	c->state = TPS_OPEN;
	tp_auth_forget(c);
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
	proto_put_hdr_crc(o->inl, proto_crc32c(0, mem, m.len));
	o->iov[1].iov_base = mem;
	o->iov[1].iov_len = m.len;
	o->iovcnt = 2;
	o->resp = o->notify = o->holding = true;
	o->hold = hold;
	o->urgent = !(h->flags & FAM_F_BACKGROUND);
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
			tp_on_handshake_resp(c, op, h->status, payload, len);
		else
			tp_op_finish(c, op, h->status != 0 ? -h->status : 0,
			    payload, len);
		return;
	}
	if (h->type == FAM_MSG_HELLO) {
		tp_on_hello(c, h, payload, len);
		return;
	}
	if (h->type == FAM_MSG_AUTH) {
		tp_on_auth(c, h, payload, len);
		return;
	}
	if (h->type == FAM_MSG_READ && c->h.resolve != NULL) {
		tp_serve_read(c, h, payload);
		return;
	}
	if (h->type == FAM_MSG_WRITE && h->crc != 0 &&
	    len >= FAM_WRITE_HDR_LEN) {
		uint32_t crc = proto_crc32c(0, payload + FAM_WRITE_HDR_LEN,
		    len - FAM_WRITE_HDR_LEN);

		if (crc != h->crc) {
			tp_crc_error(c, "written data", len -
			    FAM_WRITE_HDR_LEN, crc, h->crc);
			(void)tp_reply_status(c, h, EBADMSG, false);
			return;
		}
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

