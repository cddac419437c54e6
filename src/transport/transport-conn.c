/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport-conn.c - the connection core under both transports: what a
 * connection is whatever the fabric (struct tp_conn, transport-int.h).
 *
 * Owns: the one state machine (enum tp_state), the operations (submit,
 * wait queue, max_outstanding, the table of requests sent by id, finish),
 * output entries, deadlines (one timer), connecting and listening, the
 * teardown order, and the API calls that are the same on every fabric.
 * What messages mean is transport-msg.c; the bytes are the transport's
 * (struct tp_conn_ops).
 *
 * Callbacks to the user run only from the event loop. Teardown (ev_defer):
 * the transport drops its output, every pending operation completes with
 * op_err, `closed` is called, then the transport frees the connection.
 * No locks: a connection belongs to its loop.
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

static void tp_timer_cb(evutil_socket_t fd, short what, void *arg);
static void tp_teardown_cb(evutil_socket_t fd, short what, void *arg);

/* ---- life -------------------------------------------------------------- */

/* Sets up the shared part of a new connection: options, table, events. */
int
tp_conn_init(struct tp_conn *c, const struct tp_conn_ops *tops,
    struct event_base *evb, const struct fam_conn_opts *opts, bool active)
{
	uint32_t size = 16;

	c->base.ops = tops->fam;
	c->tops = tops;
	c->evb = evb;
	c->active = active;
	tp_opts_fill(&c->opts, opts);
	c->timeout_ns = (uint64_t)c->opts.op_timeout_ms * 1000000u;
	c->has_secret = c->opts.secret[0] != '\0';
	if (proto_auth_secret_key(c->opts.secret, c->skey) < 0)
		return -EIO;
	explicit_bzero(c->opts.secret, sizeof c->opts.secret);
	while (size < 2 * c->opts.max_outstanding + 2 && size < (1u << 20))
		size *= 2;
	c->table = calloc(size, sizeof *c->table);
	c->table_mask = size - 1;
	c->next_id = 1;
	TAILQ_INIT(&c->ops);
	TAILQ_INIT(&c->waitq);
	c->ev_timer = evtimer_new(evb, tp_timer_cb, c);
	c->ev_defer = event_new(evb, -1, 0, tp_teardown_cb, c);
	if (c->table == NULL || c->ev_timer == NULL || c->ev_defer == NULL) {
		tp_conn_fini(c);
		return -ENOMEM;
	}
	return 0;
}

/* Frees what tp_conn_init() made, and forgets the secrets. */
void
tp_conn_fini(struct tp_conn *c)
{
	if (c->ev_timer != NULL)
		event_free(c->ev_timer);
	if (c->ev_defer != NULL)
		event_free(c->ev_defer);
	c->ev_timer = c->ev_defer = NULL;
	free(c->table);
	c->table = NULL;
	explicit_bzero(c->opts.secret, sizeof c->opts.secret);
	tp_auth_forget(c);
}

/* Forgets the handshake's keys (open, or torn down). */
void
tp_auth_forget(struct tp_conn *c)
{
	explicit_bzero(c->skey, sizeof c->skey);
	explicit_bzero(&c->auth, sizeof c->auth);
	explicit_bzero(&c->ch, sizeof c->ch);
	explicit_bzero(c->hello.nonce, sizeof c->hello.nonce);
}

/*
 * Listens on addr (fam_listen() of a transport, tops): resolves it, then
 * the transport binds the listener the core made.
 */
int
tp_listen(const struct tp_conn_ops *tops, struct event_base *base,
    const char *addr, const struct fam_conn_opts *opts, fam_accept_fn accept,
    void *arg, struct fam_listener **out, char **cause)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct tp_listener *l;
	int err;

	err = tp_resolve(addr, true, &ss, &sslen, cause);
	if (err < 0)
		return err;
	l = calloc(1, tops->listener_size);
	if (l == NULL) {
		*cause = xasprintf("listen %s: out of memory", addr);
		return -ENOMEM;
	}
	l->base.ops = tops->fam;
	l->evb = base;
	tp_opts_fill(&l->opts, opts);
	l->accept = accept;
	l->arg = arg;
	err = tops->bind(l, addr, &ss, sslen, cause);
	if (err < 0) {
		explicit_bzero(l->opts.secret, sizeof l->opts.secret);
		free(l);
		return err;
	}
	*out = &l->base;
	return 0;
}

/* Returns the peer for log lines: address, and node name once known. */
const char *
tp_who(const struct tp_conn *c, char *buf, size_t len)
{
	if (c->node[0] != '\0')
		snprintf(buf, len, "%s (node %s)", c->peer, c->node);
	else
		snprintf(buf, len, "%s", c->peer);
	return buf;
}

/*
 * Ends the connection: records why (err for `closed`, and what the pending
 * operations get), then the transport stops; the teardown and every
 * callback it makes run from the loop.
 */
void
tp_close(struct tp_conn *c, int err)
{
	if (c->state >= TPS_DRAINING)
		return;
	c->close_err = err;
	if (c->op_err == 0)
		c->op_err = err == -ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET;
	c->tops->close(c);
}

/* Schedules the teardown (the transport is done with the fabric). */
void
tp_teardown(struct tp_conn *c)
{
	c->state = TPS_CLOSED;
	event_del(c->ev_timer);
	event_active(c->ev_defer, EV_WRITE, 0);
}

/* Tears a closed connection down and frees it (deferred event). */
static void
tp_teardown_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tp_conn *c = arg;
	struct tp_op *op;

	if (c->tops->drop != NULL)
		c->tops->drop(c);
	while ((op = TAILQ_FIRST(&c->ops)) != NULL) {
		TAILQ_REMOVE(&c->ops, op, all);
		if (op->state == TP_OPS_WAITING)
			TAILQ_REMOVE(&c->waitq, op, wait);
		c->nops--;
		c->stats.outstanding = c->nops;
		if (op->done != NULL)
			op->done(op->ctx, c->op_err, NULL, 0);
		tp_op_free(c, op);
	}
	if (c->h.closed != NULL)
		c->h.closed(&c->base, c->close_err, c->harg);
	c->tops->destroy(c);
}

/* Keeps the earlier of *next and t (0: none). */
static void
tp_earlier(uint64_t *next, uint64_t t)
{
	if (t != 0 && (*next == 0 || t < *next))
		*next = t;
}

/* Schedules the deadline timer for the earliest thing that can expire. */
void
tp_arm_timer(struct tp_conn *c)
{
	uint64_t next = 0, now, d;
	struct tp_op *op;
	struct timeval tv;

	if (c->state == TPS_CLOSED || evtimer_pending(c->ev_timer, NULL))
		return;
	if (c->state >= TPS_CLOSING)
		next = c->deadline;
	else {
		op = TAILQ_FIRST(&c->ops);
		if (op != NULL)
			next = op->deadline;
		if (!c->active && c->state == TPS_HELLO)
			tp_earlier(&next, c->deadline);
		if (c->tops->next_deadline != NULL)
			tp_earlier(&next, c->tops->next_deadline(c));
	}
	if (next == 0)
		return;
	now = mono_ns();
	d = next > now ? next - now : 0;
	tv.tv_sec = (time_t)(d / 1000000000u);
	tv.tv_usec = (suseconds_t)(d % 1000000000u / 1000u + 1);
	evtimer_add(c->ev_timer, &tv);
}

/* A deadline may have passed: an op, the hello, an error reply, a drain. */
static void
tp_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tp_conn *c = arg;
	uint64_t now = mono_ns();
	struct tp_op *op = TAILQ_FIRST(&c->ops);
	const char *why = NULL;
	char who[160];

	if (c->state >= TPS_CLOSING) {
		if (now >= c->deadline) {
			if (c->state == TPS_DRAINING)
				c->tops->drain_expired(c);
			else
				tp_close(c, c->final_err);
			return;
		}
	} else if (op != NULL && op->deadline <= now)
		why = op->kind == TP_OP_HELLO ? (c->state == TPS_CONNECTING ?
		    "no connection" : "no answer to our hello") :
		    "an operation did not complete";
	else if (!c->active && c->state == TPS_HELLO && c->deadline <= now)
		why = "no hello";
	else if (c->tops->expired != NULL)
		why = c->tops->expired(c, now);
	if (why != NULL) {
		bool hello = !c->active && c->state == TPS_HELLO;

		c->stats.timeouts += c->nops > 0 ? c->nops : 1;
		/* A stranger's silence is counted, not logged line by line. */
		log_msg(hello ? LOG_DEBUG : LOG_NOTICE, "%s: %s: %s within %u "
		    "ms; closing", c->base.ops->name, tp_who(c, who,
		    sizeof who), why, hello ? c->opts.hello_timeout_ms :
		    c->opts.op_timeout_ms);
		c->op_err = -ETIMEDOUT;
		tp_close(c, -ETIMEDOUT);
		return;
	}
	tp_arm_timer(c);
}

/* The hello is done both ways: open, tell the role, send what waited. */
void
tp_conn_opened(struct tp_conn *c, const struct fam_hello_resp *resp)
{
	char who[160];

	c->state = TPS_OPEN;
	tp_auth_forget(c);
	log_debug("%s: %s: connected", c->base.ops->name,
	    tp_who(c, who, sizeof who));
	if (c->h.connected != NULL)
		c->h.connected(&c->base, resp, c->harg);
	tp_pump(c);
}

/* ---- operations -------------------------------------------------------- */

/* Allocates an op with the transport's part after it. */
struct tp_op *
tp_op_new(struct tp_conn *c)
{
	return calloc(1, sizeof(struct tp_op) + c->tops->op_priv);
}

/* Frees an op (the transport's hold on it, our copy of its payload). */
void
tp_op_free(struct tp_conn *c, struct tp_op *op)
{
	if (c->tops->op_release != NULL)
		c->tops->op_release(c, op);
	free(op->payload);
	free(op);
}

/* Finds the request sent with id, or NULL. */
struct tp_op *
tp_table_find(struct tp_conn *c, uint64_t id)
{
	struct tp_op *op = c->table[id & c->table_mask];

	while (op != NULL && op->id != id)
		op = op->hnext;
	return op;
}

/* Adds a request to the table: its response may come. */
void
tp_table_add(struct tp_conn *c, struct tp_op *op)
{
	struct tp_op **slot = &c->table[op->id & c->table_mask];

	op->hnext = *slot;
	*slot = op;
}

/* Removes a request from the table. */
void
tp_table_remove(struct tp_conn *c, struct tp_op *op)
{
	struct tp_op **pp = &c->table[op->id & c->table_mask];

	while (*pp != NULL && *pp != op)
		pp = &(*pp)->hnext;
	if (*pp == op)
		*pp = op->hnext;
	op->hnext = NULL;
}

/*
 * Hands an op to the transport (it counts as in flight). Returns 0 or
 * -ENOMEM.
 */
int
tp_op_start(struct tp_conn *c, struct tp_op *op)
{
	int err;

	op->state = TP_OPS_QUEUED;
	err = c->tops->op_start(c, op);
	if (err < 0) {
		op->state = TP_OPS_WAITING;
		return err;
	}
	c->nflight++;
	return 0;
}

/* Hands waiting ops to the transport while open and under the bound. */
void
tp_pump(struct tp_conn *c)
{
	struct tp_op *op;

	while (c->state == TPS_OPEN && c->nflight < c->opts.max_outstanding &&
	    (op = TAILQ_FIRST(&c->waitq)) != NULL) {
		TAILQ_REMOVE(&c->waitq, op, wait);
		if (tp_op_start(c, op) < 0) {
			TAILQ_INSERT_HEAD(&c->waitq, op, wait);
			tp_close(c, -ENOMEM);
			return;
		}
	}
}

/* Accepts a new op: numbers it, queues it, starts it when there is room. */
static void
tp_op_submit(struct tp_conn *c, struct tp_op *op)
{
	op->id = c->next_id++;
	op->deadline = mono_ns() + c->timeout_ns;
	op->state = TP_OPS_WAITING;
	TAILQ_INSERT_TAIL(&c->ops, op, all);
	TAILQ_INSERT_TAIL(&c->waitq, op, wait);
	c->nops++;
	c->stats.outstanding = c->nops;
	tp_pump(c);
	tp_arm_timer(c);
}

/* Removes an op from the pending ones (not yet freed). */
void
tp_op_unlink(struct tp_conn *c, struct tp_op *op)
{
	TAILQ_REMOVE(&c->ops, op, all);
	if (op->state == TP_OPS_WAITING)
		TAILQ_REMOVE(&c->waitq, op, wait);
	else if (c->nflight > 0)
		c->nflight--;
	c->nops--;
	c->stats.outstanding = c->nops;
}

/* Completes an op with status: removes it, calls done, sends more. */
void
tp_op_finish(struct tp_conn *c, struct tp_op *op, int status,
    const uint8_t *payload, uint32_t len)
{
	tp_op_unlink(c, op);
	if (op->done != NULL)
		op->done(op->ctx, status, payload, len);
	tp_op_free(c, op);
	tp_pump(c);
}

/*
 * Encodes op's request: header and fixed part into buf (returns their
 * length), and in *data the payload that follows them (len 0: none).
 */
static size_t
tp_op_encode(const struct tp_op *op, uint8_t *buf, struct iovec *data)
{
	struct fam_hdr h = {
		.magic = FAM_PROTO_MAGIC,
		.version = FAM_PROTO_VERSION,
		.type = op->type,
		.flags = op->flags,
		.id = op->id,
	};
	uint8_t *body = buf + FAM_PROTO_HDR_LEN;
	size_t blen = 0;

	data->iov_base = NULL;
	data->iov_len = 0;
	switch (op->kind) {
	case TP_OP_HELLO:
		if (op->type == FAM_MSG_HELLO)
			blen = proto_put_hello(body, op->payload);
		else {
			memcpy(body, op->payload, op->plen);
			blen = op->plen;
		}
		break;
	case TP_OP_READ:
		blen = proto_put_read(body, &op->rw);
		break;
	case TP_OP_WRITE:
		blen = proto_put_write_hdr(body, &op->rw);
		data->iov_base = (void *)op->src;
		data->iov_len = op->rw.len;
		break;
	case TP_OP_CALL:
		data->iov_base = op->payload;
		data->iov_len = op->plen;
		break;
	}
	h.len = (uint32_t)(blen + data->iov_len);
	proto_put_hdr(buf, &h);
	return FAM_PROTO_HDR_LEN + blen;
}

/*
 * Allocates an output entry of c's transport with room for niov payload
 * iovecs after the header (at inl, iov[0]). NULL when out of memory.
 */
struct tp_out *
tp_out_new(struct tp_conn *c, int niov)
{
	size_t size = c->tops->out_size;
	struct tp_out *o = calloc(1, size + (size_t)(niov + 1) *
	    sizeof(struct iovec));

	if (o == NULL)
		return NULL;
	o->iov = (struct iovec *)((uint8_t *)o + size);
	o->iov[0].iov_base = o->inl;
	o->iov[0].iov_len = FAM_PROTO_HDR_LEN;
	o->iovcnt = 1;
	return o;
}

/* Returns op's request as an output entry, or NULL (no memory). */
struct tp_out *
tp_op_out(struct tp_conn *c, struct tp_op *op)
{
	struct tp_out *o = tp_out_new(c, 1);

	if (o == NULL)
		return NULL;
	o->iov[0].iov_len = tp_op_encode(op, o->inl, &o->iov[1]);
	if (o->iov[1].iov_len > 0)
		o->iovcnt = 2;
	o->op = op;
	return o;
}

/* Checks what an active connection's hello needs. 0 or -EINVAL, *cause. */
static int
tp_connect_check(const struct fam_conn_opts *opts, const char *addr,
    char **cause)
{
	if (opts->hello.node[0] == '\0' ||
	    opts->hello.role < FAM_WIRE_ROLE_HOST ||
	    opts->hello.role > FAM_WIRE_ROLE_MEMORY) {
		*cause = xasprintf("connect %s: the hello needs a node name "
		    "and a role", addr);
		return -EINVAL;
	}
	return 0;
}

/*
 * Active side: makes a handshake op (HELLO or AUTH, which takes the id
 * of the HELLO it follows) with its payload, pending ahead of every other
 * op. NULL when out of memory.
 */
struct tp_op *
tp_handshake_op(struct tp_conn *c, uint8_t type, uint64_t id,
    const void *payload, uint32_t len)
{
	struct tp_op *op = tp_op_new(c);

	if (op == NULL || (op->payload = malloc(len)) == NULL) {
		free(op);
		return NULL;
	}
	memcpy(op->payload, payload, len);
	op->plen = len;
	op->kind = TP_OP_HELLO;
	op->type = type;
	op->id = id;
	op->deadline = mono_ns() + c->timeout_ns;
	op->state = TP_OPS_WAITING;
	TAILQ_INSERT_HEAD(&c->ops, op, all);
	c->nops++;
	c->stats.outstanding = c->nops;
	return op;
}

/*
 * Active side: makes the hello op (pending), with a fresh nonce, and
 * sets the handlers. NULL when out of memory or without randomness.
 */
static struct tp_op *
tp_hello_op(struct tp_conn *c, const struct fam_conn_handlers *h, void *arg)
{
	struct tp_op *op;

	c->hello = c->opts.hello;
	if (proto_auth_nonce(c->hello.nonce) < 0)
		return NULL;
	op = tp_handshake_op(c, FAM_MSG_HELLO, c->next_id++, &c->hello,
	    sizeof c->hello);
	if (op == NULL)
		return NULL;
	if (h != NULL)
		c->h = *h;
	c->harg = arg;
	return op;
}

/*
 * Connects to addr (fam_conn_connect() of a transport, tops): checks the
 * hello, resolves, dials, and queues the hello, which goes out once the
 * fabric is up.
 */
int
tp_connect(const struct tp_conn_ops *tops, struct event_base *base,
    const char *addr, const struct fam_conn_opts *opts,
    const struct fam_conn_handlers *h, void *arg, struct fam_conn **out,
    char **cause)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct tp_conn *c;
	struct tp_op *op;
	int err;

	err = tp_connect_check(opts, addr, cause);
	if (err == 0)
		err = tp_resolve(addr, false, &ss, &sslen, cause);
	if (err == 0)
		err = tops->dial(base, addr, &ss, sslen, opts, &c, cause);
	if (err < 0)
		return err;
	op = tp_hello_op(c, h, arg);
	if (op == NULL || tp_op_start(c, op) < 0) {
		if (op != NULL)
			tp_op_free(c, op);
		tops->destroy(c);
		*cause = xasprintf("connect %s: out of memory", addr);
		return -ENOMEM;
	}
	tp_arm_timer(c);
	*out = &c->base;
	return 0;
}

/* ---- the API ----------------------------------------------------------- */

/* Sets the handlers (of an accepted connection). */
void
tp_set_handlers(struct fam_conn *fc, const struct fam_conn_handlers *h,
    void *arg)
{
	struct tp_conn *c = (struct tp_conn *)fc;

	if (h != NULL)
		c->h = *h;
	else
		memset(&c->h, 0, sizeof c->h);
	c->harg = arg;
}

/* Returns -ENOTCONN unless new operations may be queued on c. */
static int
tp_check_usable(const struct tp_conn *c)
{
	return c->state <= TPS_OPEN ? 0 : -ENOTCONN;
}

/* Queues a request of any type but HELLO. */
int
tp_call(struct fam_conn *fc, uint8_t type, const void *payload, uint32_t len,
    fam_done_fn done, void *ctx)
{
	struct tp_conn *c = (struct tp_conn *)fc;
	struct fam_hdr h = { .magic = FAM_PROTO_MAGIC,
		.version = FAM_PROTO_VERSION, .type = type, .len = len };
	struct tp_op *op;
	int err;

	if ((err = tp_check_usable(c)) < 0)
		return err;
	if (done == NULL || type == FAM_MSG_HELLO || (len > 0 && payload ==
	    NULL))
		return -EINVAL;
	err = proto_check_hdr(&h, c->opts.max_payload);
	if (err < 0)
		return err == -EMSGSIZE ? err : -EINVAL;
	op = tp_op_new(c);
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
	op->kind = TP_OP_CALL;
	op->type = type;
	op->done = done;
	op->ctx = ctx;
	c->stats.calls++;
	tp_op_submit(c, op);
	return 0;
}

/* Checks and queues a READ or WRITE (the transport picks how). */
static int
tp_rw(struct tp_conn *c, enum tp_op_kind kind, const struct fam_remote *r,
    uint64_t off, uint32_t len, void *dst, const void *src,
    struct fam_mr *mr, uint16_t flags, fam_done_fn done, void *ctx)
{
	struct tp_op *op;
	int err;

	if ((err = tp_check_usable(c)) < 0)
		return err;
	if (r == NULL || done == NULL || (dst == NULL && src == NULL))
		return -EINVAL;
	if (len == 0 || len > FAM_RW_MAX ||
	    len + (kind == TP_OP_WRITE ? FAM_WRITE_HDR_LEN : 0) >
	    c->opts.max_payload)
		return -EINVAL;
	if (off > UINT64_MAX - len || (r->size != 0 && off + len > r->size))
		return -ERANGE;
	if (r->rkey != 0 && r->addr > UINT64_MAX - off - len)
		return -ERANGE;
	op = tp_op_new(c);
	if (op == NULL)
		return -ENOMEM;
	op->kind = kind;
	op->type = kind == TP_OP_READ ? FAM_MSG_READ : FAM_MSG_WRITE;
	op->rw.region = r->region;
	op->rw.len = len;
	op->rw.offset = off;
	op->dst = dst;
	op->src = src;
	op->flags = flags;
	op->done = done;
	op->ctx = ctx;
	if (c->tops->rw_prepare != NULL)
		c->tops->rw_prepare(c, op, r, mr);
	if (kind == TP_OP_READ)
		c->stats.reads++;
	else
		c->stats.writes++;
	tp_op_submit(c, op);
	return 0;
}

/* Queues a READ into dst. */
int
tp_read(struct fam_conn *fc, const struct fam_remote *r, uint64_t off,
    uint32_t len, void *dst, struct fam_mr *mr, uint16_t flags,
    fam_done_fn done, void *ctx)
{
	if (dst == NULL)
		return -EINVAL;
	return tp_rw((struct tp_conn *)fc, TP_OP_READ, r, off, len, dst, NULL,
	    mr, flags, done, ctx);
}

/* Queues a WRITE from src (referenced until it is out, or done). */
int
tp_write(struct fam_conn *fc, const struct fam_remote *r, uint64_t off,
    uint32_t len, const void *src, struct fam_mr *mr, uint16_t flags,
    fam_done_fn done, void *ctx)
{
	if (src == NULL)
		return -EINVAL;
	return tp_rw((struct tp_conn *)fc, TP_OP_WRITE, r, off, len, NULL, src,
	    mr, flags, done, ctx);
}

/*
 * Checks a reply before the transport builds it: c open, the arguments,
 * the payload's size (*len). Returns 0 or -errno.
 */
static int
tp_reply_check(const struct tp_conn *c, const struct fam_hdr *req,
    int status, const struct iovec *iov, int iovcnt, size_t *len)
{
	*len = 0;
	if (c->state != TPS_OPEN)
		return -ENOTCONN;
	if (req == NULL || iovcnt < 0 || iovcnt > TP_MAX_IOV ||
	    (iovcnt > 0 && iov == NULL))
		return -EINVAL;
	for (int i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > FAM_PROTO_MAX_PAYLOAD)
			return -EMSGSIZE;
		*len += iov[i].iov_len;
	}
	if (status != 0 && *len != 0)
		return -EINVAL;
	return 0;
}

/* Copies a reply's payload into o: inline when it fits, else o->copy. */
static int
tp_out_copy(struct tp_out *o, const struct iovec *iov, int iovcnt,
    size_t len)
{
	uint8_t *p = o->inl + FAM_PROTO_HDR_LEN;

	if (len > TP_OUT_INLINE) {
		o->copy = malloc(len);
		if (o->copy == NULL)
			return -ENOMEM;
		p = o->copy;
		o->iov[1].iov_base = p;
		o->iov[1].iov_len = len;
		o->iovcnt = 2;
	} else
		o->iov[0].iov_len += len;
	for (int i = 0; i < iovcnt; i++) {
		memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	return 0;
}

/*
 * Queues the response to a request (fam_conn_reply(), fam_conn_replyv()):
 * its payload copied (copy), or referenced until sent(ctx), from mr when
 * the transport can use it.
 */
int
tp_reply(struct fam_conn *fc, const struct fam_hdr *req, int status,
    const struct iovec *iov, int iovcnt, bool copy, struct fam_mr *mr,
    fam_sent_fn sent, void *ctx)
{
	struct tp_conn *c = (struct tp_conn *)fc;
	struct tp_out *o;
	size_t len;
	int err;

	err = tp_reply_check(c, req, status, iov, iovcnt, &len);
	if (err < 0)
		return err;
	o = tp_out_new(c, copy ? 1 : iovcnt);
	if (o == NULL)
		return -ENOMEM;
	err = tp_resp_hdr(req, status, len, o->inl);
	if (err == 0 && req->type == FAM_MSG_READ && status == 0) {
		uint32_t crc = 0;

		for (int i = 0; i < iovcnt; i++)
			crc = proto_crc32c(crc, iov[i].iov_base,
			    iov[i].iov_len);
		proto_put_hdr_crc(o->inl, crc);
	}
	if (err == 0 && copy && len > 0)
		err = tp_out_copy(o, iov, iovcnt, len);
	if (err < 0) {
		free(o);
		return err;
	}
	if (!copy) {
		for (int i = 0; i < iovcnt; i++)
			if (iov[i].iov_len > 0)
				o->iov[o->iovcnt++] = iov[i];
		if (len > 0)
			o->mr = mr;
	}
	o->resp = o->notify = true;
	o->sent = sent;
	o->ctx = ctx;
	c->tops->out_queue(c, o, false);
	return 0;
}

/* Closes the connection (orderly, from our side). */
void
tp_close_api(struct fam_conn *fc)
{
	struct tp_conn *c = (struct tp_conn *)fc;

	tp_close(c, c->state == TPS_CLOSING || c->state == TPS_LINGER ?
	    c->final_err : 0);
}

/* Returns the peer's address. */
const char *
tp_peer(const struct fam_conn *fc)
{
	return ((const struct tp_conn *)fc)->peer;
}

/* Returns the connection's counters. */
const struct fam_conn_stats *
tp_stats(const struct fam_conn *fc)
{
	return &((const struct tp_conn *)fc)->stats;
}

/* Returns true while the connection is open. */
bool
tp_is_open(const struct fam_conn *fc)
{
	return ((const struct tp_conn *)fc)->state == TPS_OPEN;
}

/* Returns the address a listener is bound to. */
const char *
tp_listener_addr(const struct fam_listener *fl)
{
	return ((const struct tp_listener *)fl)->addr;
}
