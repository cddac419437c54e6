/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport-tcp.c - transport.h over TCP, on the connection core
 * (transport-conn.c), libevent events and non-blocking sockets.
 *
 * Owns: the socket, input framing (enum tcp_rx), the output queue
 * (struct tcp_out); the listener's socket is transport-tcp-listen.c's.
 * States: enum tp_state (transport-int.h); tcp uses LINGER, not JOINING
 * or DRAINING. No locks: one loop.
 *
 * Input: headers and short bodies are read through a small staging buffer;
 * a payload with a destination (a fam_conn_read()'s buffer, or region
 * memory for a WRITE request, from `resolve`) is read straight into it
 * with readv(), which also collects the next frames. Other payloads go to
 * a buffer bounded by max_payload.
 *
 * Output: a queue of iovecs written with writev(); headers live in the
 * entries, payloads are referenced, and each entry's callback (reply sent,
 * hold released, request on the wire) fires once the kernel has all its
 * bytes. What is queued is written at the end of the loop's round
 * (ev_flush, no system call to arm it), so that a burst of requests goes
 * in one writev(), or at once by fam_conn_flush() (the host's reads a
 * fault waits for). The data served through resolve for a READ a fault
 * waits for (not FAM_F_BACKGROUND) is written at once too, with what is
 * queued before it: whatever else the round holds (other connections'
 * replies) would delay it. The socket is watched for room (ev_write)
 * only while it has none, or while connecting.
 * A read that returns fewer bytes than asked for has drained the socket:
 * input stops there until the loop says there is more (level-triggered).
 *
 * TLS (fam_conn_opts.tls): tls_readv() and tls_writev() (transport-tls.c)
 * stand in for readv() and writev(); the handshake runs inside them before
 * the hello, and a read that waits for room to write (or a write that
 * waits for input) arms the other event. Without TLS nothing else changes.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "base/base.h"
#include "transport/transport-int.h"
#include "transport/transport-tcp.h"

#define TCP_STAGE_LEN    4096      /* staging buffer: headers, short bodies */
#define TCP_INLINE_BODY  256       /* bodies up to this need no allocation */
#define TCP_IOV_BATCH    64        /* iovecs per writev() */
#define TCP_READ_BUDGET  (4u << 20) /* bytes handled per callback */
#define TCP_OUT_HIGH     (8u << 20) /* queued output that pauses input */
#define TCP_OUT_LOW      (2u << 20) /* ... and that resumes it */
#define TCP_LINGER_MS    2000u
#define TCP_KEEPIDLE_S   10
#define TCP_KEEPINTVL_S  5
#define TCP_KEEP_COUNT   3


/* What the bytes arriving next are. */
enum tcp_rx {
	RX_HDR,     /* a header: collected in rhdr */
	RX_BODY,    /* a payload (or a WRITE request's fixed part) in body */
	RX_DIRECT,  /* a payload going straight to dst */
	RX_DISCARD, /* the data of a refused WRITE, skipped */
};

enum tcp_out_kind {
	OUT_PLAIN, /* nothing to tell anyone */
	OUT_OP,    /* a request of ours: marks the op sent */
	OUT_REPLY, /* a reply: sent(ctx) */
	OUT_HOLD,  /* READ data from resolve: release(hold) */
};

/* One message in the output queue. */
struct tcp_out {
	struct tp_out out;        /* first: the core's part */
	TAILQ_ENTRY(tcp_out) link;
	enum tcp_out_kind kind;
	size_t left;              /* bytes not yet written */
	int iovpos;
};

TAILQ_HEAD(tcp_outq, tcp_out);

struct tcp_conn {
	struct tp_conn tc;
	int fd;
	struct tls_conn *tls;          /* NULL: plain tcp */
	struct event *ev_read, *ev_write;
	struct event *ev_flush;        /* writes the queue this loop round */
	bool reading, writing, paused;
	bool sending;       /* in tcp_send_queued() */
	bool throttled;     /* the role stopped our input */
	uint64_t rx_progress, tx_progress;

	/* Input. */
	enum tcp_rx rx;
	struct fam_hdr rh;             /* the frame being read */
	uint8_t rhdr[FAM_PROTO_HDR_LEN];
	uint32_t rhdr_got;
	uint8_t *stage;
	uint32_t stage_off, stage_len;
	uint8_t inl[TCP_INLINE_BODY];
	uint8_t *body;
	uint32_t body_len, body_got;
	bool rx_whdr;                  /* body is a WRITE's fixed part */
	uint8_t *dst;
	uint32_t dst_len, dst_got;
	uint32_t discard;
	int rx_status;                 /* refused WRITE: status to answer */
	struct tp_op *rop;             /* the op whose response is read */
	bool rx_holding;               /* dst is region memory under rhold */
	void *rhold;

	/* Output. */
	struct tcp_outq outq;
	size_t out_bytes;
	size_t resp_bytes;             /* part of out_bytes that is responses */
	unsigned out_notify;           /* entries whose end calls the user */
};

static struct fam_mr tcp_mr_none = { .ops = &tcp_transport_ops };

static const struct tp_conn_ops tcp_conn_ops;

static void tcp_send_queued(struct tcp_conn *c);
static void tcp_send_some(struct tcp_conn *c);

/* Returns the tcp connection behind a transport connection. */
static struct tcp_conn *
tcp_conn_of(void *c)
{
	return (struct tcp_conn *)c;
}

/* Sets the socket options every connection gets. */
static void
tcp_sockopts(int fd)
{
	int one = 1, idle = TCP_KEEPIDLE_S, intvl = TCP_KEEPINTVL_S;
	int cnt = TCP_KEEP_COUNT;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
	(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

/* ---- connection life --------------------------------------------------- */

/* Ends the connection now (tp_close): no more input or output. */
static void
tcp_close_hook(struct tp_conn *tc)
{
	struct tcp_conn *c = tcp_conn_of(tc);

	event_del(c->ev_read);
	event_del(c->ev_write);
	event_del(c->ev_flush);
	c->reading = c->writing = false;
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	tp_teardown(tc);
}

/*
 * Finishes an output entry: tells whoever waits on it, frees it. sent is
 * the count of its payload bytes that reached the kernel.
 */
static void
tcp_out_done(struct tcp_conn *c, struct tcp_out *o)
{
	size_t plen = o->out.payload_len;
	size_t sent = plen - (o->left < plen ? o->left : plen);

	if (o->left == 0) {
		c->tc.stats.msgs_out++;
		c->tc.stats.bytes_out += o->out.payload_len;
	}
	if (o->kind == OUT_REPLY || o->kind == OUT_HOLD)
		c->out_notify--;
	switch (o->kind) {
	case OUT_OP:
		if (o->out.op != NULL && o->left == 0)
			o->out.op->state = TP_OPS_SENT;
		break;
	case OUT_REPLY:
		if (o->out.sent != NULL)
			o->out.sent(o->out.ctx);
		break;
	case OUT_HOLD:
		if (c->tc.h.release != NULL)
			c->tc.h.release(c->tc.harg, o->out.hold, false,
			    (uint32_t)sent);
		break;
	case OUT_PLAIN:
		break;
	}
	free(o->out.copy);
	free(o);
}

/* Teardown: drops queued output (callbacks fire), ends a transfer. */
static void
tcp_drop(struct tp_conn *tc)
{
	struct tcp_conn *c = tcp_conn_of(tc);
	struct tcp_out *o;

	while ((o = TAILQ_FIRST(&c->outq)) != NULL) {
		TAILQ_REMOVE(&c->outq, o, link);
		tcp_out_done(c, o);
	}
	c->out_bytes = c->resp_bytes = 0;
	if (c->rx_holding) {
		c->rx_holding = false;
		if (c->tc.h.release != NULL)
			c->tc.h.release(c->tc.harg, c->rhold, true, c->dst_got);
	}
	if (c->body != NULL && c->body != c->inl)
		free(c->body);
	c->body = NULL;
	c->rop = NULL;
}

/*
 * Frees a connection, its output queue empty: tcp_drop() emptied it, or
 * nobody knew the connection and nothing was queued.
 */
static void
tcp_destroy(struct tp_conn *tc)
{
	struct tcp_conn *c = tcp_conn_of(tc);

	tls_conn_free(c->tls);
	if (c->fd >= 0)
		close(c->fd);
	if (c->ev_read != NULL)
		event_free(c->ev_read);
	if (c->ev_write != NULL)
		event_free(c->ev_write);
	if (c->ev_flush != NULL)
		event_free(c->ev_flush);
	tp_conn_fini(tc);
	free(c->stage);
	free(c);
}

static void tcp_read_cb(evutil_socket_t fd, short what, void *arg);
static void tcp_write_cb(evutil_socket_t fd, short what, void *arg);
static void tcp_flush_cb(evutil_socket_t fd, short what, void *arg);

/* Allocates a connection on fd (non-blocking) with its events. */
static struct tcp_conn *
tcp_conn_new(struct event_base *evb, int fd, const struct fam_conn_opts *opts,
    bool active)
{
	struct tcp_conn *c = calloc(1, sizeof *c);

	if (c == NULL)
		return NULL;
	c->fd = -1;
	TAILQ_INIT(&c->outq);
	if (tp_conn_init(&c->tc, &tcp_conn_ops, evb, opts, active) < 0) {
		tcp_destroy(&c->tc);
		return NULL;
	}
	c->stage = malloc(TCP_STAGE_LEN);
	c->ev_read = event_new(evb, fd, EV_READ | EV_PERSIST, tcp_read_cb, c);
	c->ev_write = event_new(evb, fd, EV_WRITE | EV_PERSIST, tcp_write_cb,
	    c);
	c->ev_flush = event_new(evb, -1, 0, tcp_flush_cb, c);
	if (opts->tls != NULL)
		c->tls = tls_conn_new(opts->tls, fd, active, c->tc.peer);
	if (c->stage == NULL || c->ev_read == NULL || c->ev_write == NULL ||
	    c->ev_flush == NULL || (opts->tls != NULL && c->tls == NULL)) {
		tcp_destroy(&c->tc);
		return NULL;
	}
	c->fd = fd;
	c->rx_progress = c->tx_progress = mono_ns();
	return c;
}

/* tcp's own deadlines: a frame stalled half-way, output not taken. */
static uint64_t
tcp_next_deadline(const struct tp_conn *tc)
{
	const struct tcp_conn *c = (const struct tcp_conn *)tc;
	uint64_t next = 0;

	if (c->rx != RX_HDR || c->rhdr_got > 0)
		next = c->rx_progress + tc->timeout_ns;
	if (!TAILQ_EMPTY(&c->outq) && (next == 0 ||
	    c->tx_progress + tc->timeout_ns < next))
		next = c->tx_progress + tc->timeout_ns;
	return next;
}

/* Says which of tcp's own deadlines passed, or NULL. */
static const char *
tcp_expired(struct tp_conn *tc, uint64_t now)
{
	struct tcp_conn *c = tcp_conn_of(tc);

	if ((c->rx != RX_HDR || c->rhdr_got > 0) &&
	    c->rx_progress + tc->timeout_ns <= now)
		return "a frame stalled half-way";
	if (!TAILQ_EMPTY(&c->outq) && c->tx_progress + tc->timeout_ns <= now)
		return "the peer does not read";
	return NULL;
}

/* Starts watching for input. */
static void
tcp_want_read(struct tcp_conn *c)
{
	if (!c->reading && !c->paused && !c->throttled &&
	    c->tc.state != TPS_CLOSED &&
	    c->tc.state != TPS_CONNECTING) {
		event_add(c->ev_read, NULL);
		c->reading = true;
	}
}

/* Starts watching for room to write. */
static void
tcp_want_write(struct tcp_conn *c)
{
	if (!c->writing && c->tc.state != TPS_CLOSED) {
		event_add(c->ev_write, NULL);
		c->writing = true;
	}
}

/* Stops watching for room to write. */
static void
tcp_stop_write(struct tcp_conn *c)
{
	if (c->writing) {
		event_del(c->ev_write);
		c->writing = false;
	}
}

/* ---- output ------------------------------------------------------------ */

/*
 * Asks for the queue to be written: at the end of this loop round, or
 * when the socket has room (connecting, or it had none the last time).
 */
static void
tcp_want_flush(struct tcp_conn *c)
{
	if (c->writing || c->tc.state == TPS_CLOSED)
		return;
	if (c->tc.state == TPS_CONNECTING)
		tcp_want_write(c);
	else
		event_active(c->ev_flush, EV_WRITE, 0);
}

/* Appends an entry to the output queue and asks for a write. */
static void
tcp_enqueue(struct tcp_conn *c, struct tcp_out *o)
{
	o->kind = o->out.op != NULL ? OUT_OP : o->out.holding ? OUT_HOLD :
	    o->out.notify ? OUT_REPLY : OUT_PLAIN;
	o->left = 0;
	for (int i = 0; i < o->out.iovcnt; i++)
		o->left += o->out.iov[i].iov_len;
	o->out.payload_len = o->left - FAM_PROTO_HDR_LEN;
	if (TAILQ_EMPTY(&c->outq))
		c->tx_progress = mono_ns();
	TAILQ_INSERT_TAIL(&c->outq, o, link);
	c->out_bytes += o->left;
	if (o->kind == OUT_REPLY || o->kind == OUT_HOLD)
		c->out_notify++;
	if (o->out.resp)
		c->resp_bytes += o->left;
	/* Requests pile up answers: stop taking them while answers wait. */
	if (c->resp_bytes > TCP_OUT_HIGH && c->reading &&
	    (c->tc.state == TPS_OPEN || c->tc.state == TPS_HELLO)) {
		event_del(c->ev_read);
		c->reading = false;
		c->paused = true;
		c->tc.stats.input_pauses++;
	}
	tcp_want_flush(c);
}

/* Accounts for w bytes written: finishes the entries fully sent. */
static void
tcp_out_advance(struct tcp_conn *c, size_t w)
{
	while (w > 0) {
		struct tcp_out *o = TAILQ_FIRST(&c->outq);
		struct iovec *v;
		size_t take;

		if (o == NULL)
			break;
		while (o->iovpos < o->out.iovcnt &&
		    o->out.iov[o->iovpos].iov_len == 0)
			o->iovpos++;
		if (o->iovpos < o->out.iovcnt) {
			v = &o->out.iov[o->iovpos];
			take = w < v->iov_len ? w : v->iov_len;
			v->iov_base = (uint8_t *)v->iov_base + take;
			v->iov_len -= take;
			o->left -= take;
			c->out_bytes -= take;
			if (o->out.resp)
				c->resp_bytes -= take;
			w -= take;
		}
		if (o->left == 0) {
			TAILQ_REMOVE(&c->outq, o, link);
			tcp_out_done(c, o);
		}
	}
	/* Entries with nothing left to send (an empty queue head). */
	while (!TAILQ_EMPTY(&c->outq) && TAILQ_FIRST(&c->outq)->left == 0) {
		struct tcp_out *o = TAILQ_FIRST(&c->outq);

		TAILQ_REMOVE(&c->outq, o, link);
		tcp_out_done(c, o);
	}
	if (c->paused && c->resp_bytes < TCP_OUT_LOW) {
		c->paused = false;
		if (c->tc.state == TPS_OPEN || c->tc.state == TPS_HELLO) {
			tcp_want_read(c);
			/* Frames may wait in the staging buffer. */
			event_active(c->ev_read, EV_READ, 0);
		}
	}
}

/* Starts lingering once an error response is out. */
static void
tcp_linger(struct tcp_conn *c)
{
	uint64_t ms = c->tc.opts.op_timeout_ms < TCP_LINGER_MS ?
	    c->tc.opts.op_timeout_ms : TCP_LINGER_MS;

	c->tc.state = TPS_LINGER;
	if (c->tls != NULL)
		tls_close_notify(c->tls);
	(void)shutdown(c->fd, SHUT_WR);
	c->tc.deadline = mono_ns() + ms * 1000000u;
	event_del(c->tc.ev_timer);
	tp_arm_timer(&c->tc);
}

/* Writes as much queued output as the socket takes. */
static void
tcp_send_queued(struct tcp_conn *c)
{
	if (c->sending)
		return; /* a callback of a write under way: it writes on */
	c->sending = true;
	tcp_send_some(c);
	c->sending = false;
}

/* tcp_send_queued()'s work. */
static void
tcp_send_some(struct tcp_conn *c)
{
	while (!TAILQ_EMPTY(&c->outq) && c->tc.state != TPS_CLOSED &&
	    c->tc.state != TPS_CONNECTING) {
		struct iovec iov[TCP_IOV_BATCH];
		struct tcp_out *o;
		int n = 0;
		ssize_t w;

		TAILQ_FOREACH(o, &c->outq, link) {
			for (int i = o->iovpos; i < o->out.iovcnt &&
			    n < TCP_IOV_BATCH; i++)
				if (o->out.iov[i].iov_len > 0)
					iov[n++] = o->out.iov[i];
			if (n == TCP_IOV_BATCH)
				break;
		}
		if (n == 0)
			break;
		w = c->tls == NULL ? writev(c->fd, iov, n) :
		    tls_writev(c->tls, iov, n);
		if (w < 0) {
			char who[160];

			if (errno == EINTR)
				continue;
			if ((errno == EAGAIN || errno == EWOULDBLOCK) &&
			    c->tls != NULL && tls_wants_read(c->tls)) {
				/* TLS waits for input: tcp_read_cb writes. */
				tcp_stop_write(c);
				tcp_want_read(c);
				return;
			}
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				tcp_want_write(c);
				return;
			}
			log_info("tcp: %s: write: %s", tp_who(&c->tc, who,
			    sizeof who), strerror(errno));
			tp_close(&c->tc, -ECONNRESET);
			return;
		}
		c->tx_progress = mono_ns();
		tcp_out_advance(c, (size_t)w);
	}
	if (TAILQ_EMPTY(&c->outq) || c->tc.state == TPS_CLOSED)
		tcp_stop_write(c);
	if (c->tc.state == TPS_CLOSING && TAILQ_EMPTY(&c->outq))
		tcp_linger(c);
}

/*
 * Queues an output entry of the core's (tp_conn_ops.out_queue). One that
 * ends the connection: input is discarded from now on.
 */
static void
tcp_out_queue(struct tp_conn *tc, struct tp_out *out, bool rx)
{
	struct tcp_conn *c = tcp_conn_of(tc);
	bool close_after = out->close_after, urgent = out->urgent;

	tcp_enqueue(c, (struct tcp_out *)out);
	if (close_after) {
		c->paused = false;
		c->throttled = false;
		c->rx = RX_HDR;
		c->rhdr_got = 0;
		tcp_want_read(c);
		tcp_want_write(c);
	}
	/* a reply a fault waits for, from the input's side: out now */
	if (urgent && rx && !c->writing && c->tc.state == TPS_OPEN)
		tcp_send_queued(c);
}

/* ---- operations -------------------------------------------------------- */

/* Puts an op's request in the output queue. Returns 0 or -ENOMEM. */
static int
tcp_op_start(struct tp_conn *tc, struct tp_op *op)
{
	struct tp_out *o = tp_op_out(tc, op);

	if (o == NULL)
		return -ENOMEM;
	tp_table_add(tc, op);
	tcp_enqueue(tcp_conn_of(tc), (struct tcp_out *)o);
	return 0;
}

/* ---- input ------------------------------------------------------------- */

/* Expects a body of len bytes in a bounded buffer (inline when short). */
static int
tcp_rx_body(struct tcp_conn *c, uint32_t len)
{
	if (len <= sizeof c->inl)
		c->body = c->inl;
	else {
		c->body = malloc(len);
		if (c->body == NULL) {
			tp_close(&c->tc, -ENOMEM);
			return -ENOMEM;
		}
	}
	c->body_len = len;
	c->body_got = 0;
	c->rx = RX_BODY;
	return 0;
}

static void tcp_on_body(struct tcp_conn *c);

/* Expects a body of len bytes; handles it at once when it is empty. */
static void
tcp_expect_body(struct tcp_conn *c, uint32_t len)
{
	if (tcp_rx_body(c, len) < 0)
		return;
	if (len == 0)
		tcp_on_body(c);
}

/* Expects a payload of len bytes straight into dst. */
static void
tcp_expect_direct(struct tcp_conn *c, void *dst, uint32_t len)
{
	c->dst = dst;
	c->dst_len = len;
	c->dst_got = 0;
	c->rx = RX_DIRECT;
}

/* A header is complete: validate it, then decide where the frame goes. */
static void
tcp_on_hdr(struct tcp_conn *c)
{
	struct fam_hdr *h = &c->rh;
	struct tp_op *op;

	if (tp_on_hdr(&c->tc, c->rhdr, h) < 0)
		return;
	if (h->flags & FAM_F_RESPONSE) {
		if ((op = tp_on_resp_hdr(&c->tc, h)) == NULL)
			return;
		c->rop = op;
		if (op->kind == TP_OP_READ && h->status == 0)
			tcp_expect_direct(c, op->dst, h->len);
		else
			tcp_expect_body(c, h->len);
		return;
	}
	if (tp_on_req_hdr(&c->tc, h) < 0)
		return;
	if (h->type == FAM_MSG_WRITE && c->tc.h.resolve != NULL) {
		c->rx_whdr = true;
		tcp_expect_body(c, FAM_WRITE_HDR_LEN);
		return;
	}
	tcp_expect_body(c, h->len);
}

/* The fixed part of a WRITE request arrived: find where its data goes. */
static void
tcp_on_write_hdr(struct tcp_conn *c, const uint8_t *whdr)
{
	const struct fam_hdr *h = &c->rh;
	uint32_t data = h->len - FAM_WRITE_HDR_LEN;
	void *mem = NULL, *hold = NULL;
	int st;

	st = tp_on_write_hdr(&c->tc, h, whdr, &mem, &hold);
	if (st < 0)
		return;
	if (st > 0) {
		c->rx_status = st;
		if (data == 0) {
			(void)tp_reply_status(&c->tc, h, st, false);
			return;
		}
		c->discard = data;
		c->rx = RX_DISCARD;
		return;
	}
	c->rx_holding = true;
	c->rhold = hold;
	c->rop = NULL;
	tcp_expect_direct(c, mem, data);
}

/* A body (or a WRITE's fixed part) is complete: hand it on. */
static void
tcp_on_body(struct tcp_conn *c)
{
	struct tp_op *op = c->rop;
	uint8_t *body = c->body;

	c->rx = RX_HDR;
	c->rop = NULL;
	if (c->rx_whdr) {
		c->rx_whdr = false;
		tcp_on_write_hdr(c, body);
	} else
		tp_on_msg(&c->tc, &c->rh, op, body, c->body_len);
	if (c->body == body)
		c->body = NULL;
	if (body != c->inl)
		free(body);
}

/* A payload read in place is complete. */
static void
tcp_on_direct(struct tcp_conn *c)
{
	struct tp_op *op = c->rop;

	c->rx = RX_HDR;
	c->rop = NULL;
	if (op != NULL) {
		tp_on_read_data(&c->tc, op, c->rh.crc, c->dst_len);
		return;
	}
	c->rx_holding = false;
	tp_on_write_data(&c->tc, &c->rh, c->dst, c->rhold, c->dst_len);
}

/* Returns true while input should be parsed (not closing, not paused). */
static bool
tcp_parsing(const struct tcp_conn *c)
{
	return (c->tc.state == TPS_HELLO || c->tc.state == TPS_OPEN) &&
	    !c->paused && !c->throttled;
}

/*
 * Copies staged bytes at p (avail of them) into buf, which has *got of its
 * need bytes. Returns the bytes taken.
 */
static uint32_t
tcp_stage_copy(uint8_t *buf, uint32_t *got, uint32_t need, const uint8_t *p,
    uint32_t avail)
{
	uint32_t take = need - *got < avail ? need - *got : avail;

	memcpy(buf + *got, p, take);
	*got += take;
	return take;
}

/* Takes staged bytes for a refused WRITE's data; answers at its end. */
static uint32_t
tcp_rx_discard(struct tcp_conn *c, uint32_t avail)
{
	uint32_t take = avail < c->discard ? avail : c->discard;

	c->discard -= take;
	if (c->discard == 0) {
		c->rx = RX_HDR;
		(void)tp_reply_status(&c->tc, &c->rh, c->rx_status, false);
	}
	return take;
}

/*
 * Takes staged bytes for what is being read (a header, a body, data in
 * place): copied, and handed on once complete. Returns the bytes taken.
 */
static uint32_t
tcp_rx_fill(struct tcp_conn *c, const uint8_t *p, uint32_t avail)
{
	uint8_t *buf = c->rhdr;
	uint32_t *got = &c->rhdr_got, need = FAM_PROTO_HDR_LEN, take;

	if (c->rx == RX_BODY) {
		buf = c->body;
		got = &c->body_got;
		need = c->body_len;
	} else if (c->rx == RX_DIRECT) {
		buf = c->dst;
		got = &c->dst_got;
		need = c->dst_len;
	}
	take = tcp_stage_copy(buf, got, need, p, avail);
	if (*got < need)
		return take;
	if (c->rx == RX_HDR) {
		c->rhdr_got = 0;
		tcp_on_hdr(c);
	} else if (c->rx == RX_BODY)
		tcp_on_body(c);
	else
		tcp_on_direct(c);
	return take;
}

/* Feeds the staged bytes to the framing state machine. */
static void
tcp_rx_stage(struct tcp_conn *c)
{
	while (c->stage_off < c->stage_len && tcp_parsing(c)) {
		const uint8_t *p = c->stage + c->stage_off;
		uint32_t avail = c->stage_len - c->stage_off;

		if (c->rx == RX_DISCARD)
			c->stage_off += tcp_rx_discard(c, avail);
		else
			c->stage_off += tcp_rx_fill(c, p, avail);
	}
	if (c->stage_off == c->stage_len)
		c->stage_off = c->stage_len = 0;
}

/* The peer closed its side: an orderly end, or a frame cut short. */
static void
tcp_on_eof(struct tcp_conn *c)
{
	char who[160];

	if (c->tc.state == TPS_CLOSING || c->tc.state == TPS_LINGER) {
		tp_close(&c->tc, c->tc.final_err);
		return;
	}
	if (c->rx != RX_HDR || c->rhdr_got > 0 || c->stage_len > c->stage_off) {
		c->tc.stats.bad_frames++;
		log_notice("tcp: %s: connection closed in the middle of a "
		    "frame", tp_who(&c->tc, who, sizeof who));
		tp_close(&c->tc, -EPROTO);
		return;
	}
	log_debug("tcp: %s: connection closed by the peer",
	    tp_who(&c->tc, who, sizeof who));
	tp_close(&c->tc, c->tc.nops > 0 ? -ECONNRESET : 0);
}

/* Reads what the socket has and runs the frames through. */
static void
tcp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_conn *c = arg;
	size_t budget = TCP_READ_BUDGET, asked;
	bool drained = false; /* a short read: the socket had no more */
	char who[160];

	while (budget > 0 && c->tc.state != TPS_CLOSED) {
		ssize_t n;

		if (c->tc.state == TPS_CLOSING || c->tc.state == TPS_LINGER)
			c->stage_off = c->stage_len = 0;
		if (c->stage_off < c->stage_len) {
			uint32_t before = c->stage_len - c->stage_off;

			tcp_rx_stage(c);
			budget -= before < budget ? before : budget;
			if (!tcp_parsing(c) && c->tc.state != TPS_CLOSING &&
			    c->tc.state != TPS_LINGER)
				break;
			continue;
		}
		if (c->paused || c->throttled || drained)
			break;
		c->stage_off = c->stage_len = 0;
		if (c->rx == RX_DIRECT && (c->tc.state == TPS_OPEN ||
		    c->tc.state == TPS_HELLO)) {
			struct iovec iov[2] = {
				{ c->dst + c->dst_got, c->dst_len - c->dst_got },
				{ c->stage, TCP_STAGE_LEN },
			};
			size_t direct;

			asked = iov[0].iov_len + iov[1].iov_len;
			n = c->tls == NULL ? readv(c->fd, iov, 2) :
			    tls_readv(c->tls, iov, 2);
			if (n > 0) {
				direct = (size_t)n < iov[0].iov_len ?
				    (size_t)n : iov[0].iov_len;
				c->dst_got += (uint32_t)direct;
				c->stage_len = (uint32_t)((size_t)n - direct);
			}
		} else {
			struct iovec iov = { c->stage, TCP_STAGE_LEN };

			asked = TCP_STAGE_LEN;
			n = c->tls == NULL ? read(c->fd, c->stage,
			    TCP_STAGE_LEN) : tls_readv(c->tls, &iov, 1);
			if (n > 0)
				c->stage_len = (uint32_t)n;
		}
		if (n == 0) {
			tcp_on_eof(c);
			break;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			log_info("tcp: %s: read: %s", tp_who(&c->tc, who,
			    sizeof who), strerror(errno));
			tp_close(&c->tc, c->tc.state == TPS_CLOSING ||
			    c->tc.state == TPS_LINGER ? c->tc.final_err :
			    -ECONNRESET);
			break;
		}
		c->rx_progress = mono_ns();
		/* TLS may hold more than the socket had: read on */
		drained = c->tls == NULL && (size_t)n < asked;
		budget -= (size_t)n < budget ? (size_t)n : budget;
		if (c->rx == RX_DIRECT && c->dst_got == c->dst_len &&
		    c->dst_len > 0)
			tcp_on_direct(c);
	}
	if (c->tc.state == TPS_CLOSED)
		return;
	tcp_send_queued(c);
	if (c->tc.state != TPS_CLOSED && c->reading &&
	    (c->stage_off < c->stage_len ||
	    (c->tls != NULL && tls_pending(c->tls))))
		event_active(c->ev_read, EV_READ, 0);
	/* TLS waits for room to write before it reads on. */
	if (c->tc.state != TPS_CLOSED && c->tls != NULL &&
	    tls_wants_write(c->tls))
		tcp_want_write(c);
	tp_arm_timer(&c->tc);
}

/* Writes queued output; finishes a connect in progress first. */
static void
tcp_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_conn *c = arg;

	if (c->tc.state == TPS_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof err;

		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err != 0) {
			log_info("tcp: connect to %s: %s", c->tc.peer,
			    strerror(err));
			c->tc.op_err = -err;
			tp_close(&c->tc, -err);
			return;
		}
		c->tc.state = TPS_HELLO;
		tcp_want_read(c);
	}
	if (c->tls != NULL && tls_wants_write(c->tls) && c->reading)
		event_active(c->ev_read, EV_READ, 0);
	tcp_send_queued(c);
	tp_arm_timer(&c->tc);
}

/* Writes what was queued during this loop round (tcp_want_flush). */
static void
tcp_flush_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_conn *c = arg;

	if (c->writing || c->tc.state == TPS_CLOSED ||
	    c->tc.state == TPS_CONNECTING)
		return; /* the socket's own event writes */
	tcp_write_cb(c->fd, EV_WRITE, c);
}

/* ---- listener (transport-tcp-listen.c) ---------------------------------- */

/* A connection accepted on l's socket (fd): its own, handed to the role. */
void
tcp_accepted(struct tcp_listener *l, int fd, const struct sockaddr *sa,
    socklen_t salen)
{
	struct tcp_conn *c;

	c = tcp_conn_new(l->tl.evb, fd, &l->tl.opts, false);
	if (c == NULL) {
		log_warn("tcp: out of memory accepting a connection on %s",
		    l->tl.addr);
		close(fd);
		return;
	}
	tp_format_addr(sa, salen, c->tc.peer, sizeof c->tc.peer);
	tcp_sockopts(fd);
	c->tc.state = TPS_HELLO;
	c->tc.deadline = mono_ns() +
	    (uint64_t)c->tc.opts.hello_timeout_ms * 1000000u;
	log_debug("tcp: connection from %s on %s", c->tc.peer, l->tl.addr);
	l->tl.accept(&l->tl.base, &c->tc.base, c->tc.peer, l->tl.arg);
	if (c->tc.state == TPS_CLOSED)
		return;
	tcp_want_read(c);
	tp_arm_timer(&c->tc);
}

/* Listens on addr. */
static int
tcp_listen(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, fam_accept_fn accept, void *arg,
    struct fam_listener **out, char **cause)
{
	return tp_listen(&tcp_conn_ops, base, addr, opts, accept, arg, out,
	    cause);
}

/* ---- the API ----------------------------------------------------------- */

/* Active side: a socket connecting to ss, and its connection. */
static int
tcp_dial(struct event_base *base, const char *addr,
    const struct sockaddr_storage *ss, socklen_t sslen,
    const struct fam_conn_opts *opts, struct tp_conn **out, char **cause)
{
	struct tcp_conn *c;
	int fd, err;

	fd = tcp_socket(ss, "connect", addr, cause);
	if (fd < 0)
		return fd;
	tcp_sockopts(fd);
	if (connect(fd, (const struct sockaddr *)ss, sslen) < 0 &&
	    errno != EINPROGRESS) {
		err = -errno;
		*cause = xasprintf("connect %s: %s", addr, strerror(errno));
		close(fd);
		return err;
	}
	c = tcp_conn_new(base, fd, opts, true);
	if (c == NULL) {
		close(fd);
		*cause = xasprintf("connect %s: out of memory", addr);
		return -ENOMEM;
	}
	snprintf(c->tc.peer, sizeof c->tc.peer, "%s", addr);
	c->tc.state = TPS_CONNECTING;
	*out = &c->tc;
	return 0;
}

/* Connects to addr; the hello goes once the socket is connected. */
static int
tcp_connect(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, const struct fam_conn_handlers *h,
    void *arg, struct fam_conn **out, char **cause)
{
	return tp_connect(&tcp_conn_ops, base, addr, opts, h, arg, out, cause);
}

/*
 * Writes the queued output now rather than when the loop next runs. When
 * replies wait in the queue, their `sent` callbacks must not run inside
 * this call: the write is left to the loop.
 */
static int
tcp_flush(struct fam_conn *fc)
{
	struct tcp_conn *c = tcp_conn_of(fc);

	if (c->tc.state != TPS_OPEN)
		return c->tc.state == TPS_CLOSED ? -ENOTCONN : 0;
	if (c->out_notify > 0)
		return 0;
	tcp_send_queued(c);
	if (c->tc.state != TPS_CLOSED)
		tp_arm_timer(&c->tc);
	return 0;
}

/* Nothing to register on tcp: returns the token every call accepts. */
static struct fam_mr *
tcp_mr_register(struct fam_conn *fc, void *addr, size_t len)
{
	return &tcp_mr_none;
}

/* Nothing to release on tcp. */
static void
tcp_mr_deregister(struct fam_mr *mr)
{
}

/* Nothing to expose on tcp: the peer's reads and writes use resolve. */
static int
tcp_expose(struct fam_conn *fc, void *addr, size_t len, bool writable,
    struct fam_mr **out, uint64_t *raddr, uint32_t *rkey)
{
	*out = &tcp_mr_none;
	*raddr = 0;
	*rkey = 0;
	return 0;
}

/* Stops or resumes reading requests from a connection, for its role. */
static int
tcp_throttle(struct fam_conn *fc, bool on)
{
	struct tcp_conn *c = (struct tcp_conn *)fc;

	if (c->tc.state != TPS_OPEN && c->tc.state != TPS_HELLO)
		return -ENOTCONN;
	if (on == c->throttled)
		return 0;
	c->throttled = on;
	if (on) {
		c->tc.stats.input_pauses++;
		if (c->reading) {
			event_del(c->ev_read);
			c->reading = false;
		}
		return 0;
	}
	tcp_want_read(c);
	/* Frames may wait in the staging buffer. */
	if (c->reading)
		event_active(c->ev_read, EV_READ, 0);
	return 0;
}

static const struct tp_conn_ops tcp_conn_ops = {
	.fam = &tcp_transport_ops, .out_size = sizeof(struct tcp_out),
	.listener_size = sizeof(struct tcp_listener), .bind = tcp_bind,
	.dial = tcp_dial, .close = tcp_close_hook, .op_start = tcp_op_start,
	.out_queue = tcp_out_queue, .drop = tcp_drop, .destroy = tcp_destroy,
	.next_deadline = tcp_next_deadline, .expired = tcp_expired,
};

const struct fam_transport_ops tcp_transport_ops =
    TP_TRANSPORT_OPS(tcp, FAM_TP_TCP, "tcp", tcp_throttle);
