/*
 * transport-tcp.c - transport.h over TCP, on libevent events and
 * non-blocking sockets.
 *
 * Input is a framing state machine (enum tcp_rx). Headers and short bodies
 * are read through a small staging buffer; a payload with a destination
 * (the buffer of a fam_conn_read(), or region memory for a WRITE request,
 * from `resolve`) is read straight into it: at most the part of it that
 * arrived in the same staging read as its header is copied, the rest is
 * read in place with readv(), which also collects the next frames. Every
 * other payload goes to a buffer bounded by max_payload.
 *
 * Output is a queue of iovecs written with writev(): headers live in the
 * queue entries, payloads are referenced, not copied, and each entry's
 * callback (reply sent, hold released, request on the wire) fires once the
 * kernel has all its bytes.
 *
 * Callbacks to the user (done, sent, release, closed, ...) run only from the
 * event loop, never inside an API call. A connection that ends is torn down
 * from a deferred event: queued output is dropped (its callbacks fire),
 * a transfer in progress is released, every pending operation completes
 * with an error, then `closed` is called and the connection is freed.
 *
 * Connection states (enum tcp_state), as transport.h, plus two on the way
 * out:
 *   CONNECTING  active: non-blocking connect in progress; hello queued
 *   HELLO       active: hello sent, its response awaited; passive: the
 *               hello awaited (nothing else is accepted)
 *   OPEN        requests both ways
 *   CLOSING     an error response is being flushed; input is discarded
 *   LINGER      our side is shut down; input is discarded until the peer
 *               closes or a short deadline passes, so that the peer reads
 *               the error before a reset could destroy it
 *   CLOSED      torn down (the teardown event is scheduled or ran)
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

#define TCP_STAGE_LEN    4096      /* staging buffer: headers, short bodies */
#define TCP_INLINE_BODY  256       /* bodies up to this need no allocation */
#define TCP_OUT_INLINE   160       /* short payloads kept in the queue entry */
#define TCP_IOV_BATCH    64        /* iovecs per writev() */
#define TCP_READ_BUDGET  (4u << 20) /* bytes handled per callback */
#define TCP_OUT_HIGH     (8u << 20) /* queued output that pauses input */
#define TCP_OUT_LOW      (2u << 20) /* ... and that resumes it */
#define TCP_LINGER_MS    2000u
#define TCP_KEEPIDLE_S   10
#define TCP_KEEPINTVL_S  5
#define TCP_KEEP_COUNT   3

_Static_assert(TCP_OUT_INLINE >= FAM_HELLO_LEN, "a hello fits inline");

enum tcp_state {
	TCS_CONNECTING,
	TCS_HELLO,
	TCS_OPEN,
	TCS_CLOSING,
	TCS_LINGER,
	TCS_CLOSED,
};

/* What the bytes arriving next are. */
enum tcp_rx {
	RX_HDR,     /* a header: collected in rhdr */
	RX_BODY,    /* a payload (or a WRITE request's fixed part) in body */
	RX_DIRECT,  /* a payload going straight to dst */
	RX_DISCARD, /* the data of a refused WRITE, skipped */
};

enum tcp_op_kind {
	OP_HELLO,
	OP_CALL,
	OP_READ,
	OP_WRITE,
};

enum tcp_op_state {
	OPS_WAITING, /* queued: over max_outstanding, or before OPEN */
	OPS_SENDING, /* in the output queue */
	OPS_SENT,    /* on the wire; its response may arrive */
};

/* An operation of ours awaiting its response. */
struct tcp_op {
	TAILQ_ENTRY(tcp_op) all;  /* every pending op, oldest first */
	TAILQ_ENTRY(tcp_op) wait; /* ops not yet sent */
	struct tcp_op *hnext;     /* chain in the table of ops in flight */
	enum tcp_op_kind kind;
	enum tcp_op_state state;
	uint8_t type;
	uint64_t id;
	uint64_t deadline;        /* CLOCK_MONOTONIC ns */
	fam_done_fn done;
	void *ctx;
	struct fam_rw rw;         /* READ/WRITE: region, len, offset */
	void *dst;                /* READ: where the data goes */
	const void *src;          /* WRITE: where it comes from */
	void *payload;            /* CALL: our copy of the request payload */
	uint32_t plen;
	uint16_t flags;           /* READ/WRITE: FAM_F_BACKGROUND */
};

enum tcp_out_kind {
	OUT_PLAIN, /* nothing to tell anyone */
	OUT_OP,    /* a request of ours: marks the op sent */
	OUT_REPLY, /* a reply: sent(ctx) */
	OUT_HOLD,  /* READ data from resolve: release(hold) */
};

/* One message in the output queue. */
struct tcp_out {
	TAILQ_ENTRY(tcp_out) link;
	enum tcp_out_kind kind;
	struct tcp_op *op;
	fam_sent_fn sent;
	void *ctx;
	void *hold;
	void *copy;               /* owned payload copy, freed when done */
	bool resp;                /* a response of ours (counts in resp_bytes) */
	size_t left;              /* bytes not yet written */
	size_t payload_len;       /* bytes after the header */
	int iovpos, iovcnt;
	uint8_t inl[FAM_PROTO_HDR_LEN + TCP_OUT_INLINE];
	struct iovec iov[];
};

TAILQ_HEAD(tcp_outq, tcp_out);
TAILQ_HEAD(tcp_opq, tcp_op);

struct tcp_listener {
	struct fam_listener base;
	struct event_base *evb;
	struct evconnlistener *lev;
	struct event *backoff;
	struct fam_conn_opts opts;
	fam_accept_fn accept;
	void *arg;
	char addr[TP_ADDR_MAX];
};

struct tcp_conn {
	struct fam_conn base;
	struct event_base *evb;
	int fd;
	enum tcp_state state;
	bool active;
	struct fam_conn_opts opts;
	struct fam_conn_handlers h;
	void *harg;
	char peer[TP_ADDR_MAX];
	char node[FAM_NAME_MAX + 1];  /* the peer's node name, once known */
	struct fam_conn_stats stats;
	struct event *ev_read, *ev_write, *ev_timer, *ev_defer;
	bool reading, writing, paused;
	bool throttled;     /* the role stopped our input */
	int close_err;      /* given to closed */
	int op_err;         /* given to the operations still pending */
	int final_err;      /* CLOSING, LINGER: close_err once finished */
	uint64_t deadline;  /* passive HELLO, CLOSING, LINGER: give up at */
	uint64_t timeout_ns;
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
	struct tcp_op *rop;            /* the op whose response is read */
	bool rx_holding;               /* dst is region memory under rhold */
	void *rhold;

	/* Output. */
	struct tcp_outq outq;
	size_t out_bytes;
	size_t resp_bytes;             /* part of out_bytes that is responses */
	unsigned out_notify;           /* entries whose end calls the user */

	/* Operations. */
	uint64_t next_id;
	struct tcp_opq ops;
	struct tcp_opq waitq;
	struct tcp_op **table;
	uint32_t table_mask;
	uint32_t nflight;
	uint32_t nops;
};

static struct fam_mr tcp_mr_none = { .ops = &tcp_transport_ops };

static void tcp_flush(struct tcp_conn *c);
static void tcp_pump(struct tcp_conn *c);
static void tcp_violation(struct tcp_conn *c, const struct fam_hdr *h,
    int status, int err, const char *fmt, ...) printflike(5, 6);

/* Returns the tcp connection behind a transport connection. */
static struct tcp_conn *
tcp_conn_of(struct fam_conn *c)
{
	return (struct tcp_conn *)c;
}

/* Returns the peer for log lines: address, and node name once known. */
static const char *
tcp_who(struct tcp_conn *c, char *buf, size_t len)
{
	if (c->node[0] != '\0')
		snprintf(buf, len, "%s (node %s)", c->peer, c->node);
	else
		snprintf(buf, len, "%s", c->peer);
	return buf;
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

/* ---- the table of operations in flight --------------------------------- */

/* Finds the op in flight with id, or NULL. */
static struct tcp_op *
tcp_table_find(struct tcp_conn *c, uint64_t id)
{
	struct tcp_op *op = c->table[id & c->table_mask];

	while (op != NULL && op->id != id)
		op = op->hnext;
	return op;
}

/* Adds an op to the table of ops in flight. */
static void
tcp_table_add(struct tcp_conn *c, struct tcp_op *op)
{
	struct tcp_op **slot = &c->table[op->id & c->table_mask];

	op->hnext = *slot;
	*slot = op;
	c->nflight++;
}

/* Removes an op from the table of ops in flight. */
static void
tcp_table_remove(struct tcp_conn *c, struct tcp_op *op)
{
	struct tcp_op **pp = &c->table[op->id & c->table_mask];

	while (*pp != NULL && *pp != op)
		pp = &(*pp)->hnext;
	if (*pp == op) {
		*pp = op->hnext;
		c->nflight--;
	}
	op->hnext = NULL;
}

/* ---- connection life --------------------------------------------------- */

/* Schedules the deadline timer for the earliest thing that can expire. */
static void
tcp_arm_timer(struct tcp_conn *c)
{
	uint64_t next = 0, now, d;
	struct tcp_op *op;
	struct timeval tv;

	if (c->state == TCS_CLOSED ||
	    evtimer_pending(c->ev_timer, NULL))
		return;
#define TCP_EARLIER(t) do { d = (t); if (next == 0 || d < next) next = d; } \
	while (0)
	op = TAILQ_FIRST(&c->ops);
	if (op != NULL)
		TCP_EARLIER(op->deadline);
	if ((!c->active && c->state == TCS_HELLO) || c->state == TCS_CLOSING ||
	    c->state == TCS_LINGER)
		TCP_EARLIER(c->deadline);
	if (c->rx != RX_HDR || c->rhdr_got > 0)
		TCP_EARLIER(c->rx_progress + c->timeout_ns);
	if (!TAILQ_EMPTY(&c->outq))
		TCP_EARLIER(c->tx_progress + c->timeout_ns);
#undef TCP_EARLIER
	if (next == 0)
		return;
	now = mono_ns();
	d = next > now ? next - now : 0;
	tv.tv_sec = (time_t)(d / 1000000000u);
	tv.tv_usec = (suseconds_t)(d % 1000000000u / 1000u + 1);
	evtimer_add(c->ev_timer, &tv);
}

/*
 * Ends the connection now: no more input or output; the teardown (and
 * every callback it makes) runs from the event loop.
 */
static void
tcp_close(struct tcp_conn *c, int err)
{
	if (c->state == TCS_CLOSED)
		return;
	c->state = TCS_CLOSED;
	c->close_err = err;
	if (c->op_err == 0)
		c->op_err = err == -ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET;
	event_del(c->ev_read);
	event_del(c->ev_write);
	event_del(c->ev_timer);
	c->reading = c->writing = false;
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	event_active(c->ev_defer, EV_WRITE, 0);
}

/* Frees an op (our copy of its payload too). */
static void
tcp_op_free(struct tcp_op *op)
{
	free(op->payload);
	free(op);
}

/*
 * Finishes an output entry: tells whoever waits on it, frees it. sent is
 * the count of its payload bytes that reached the kernel.
 */
static void
tcp_out_done(struct tcp_conn *c, struct tcp_out *o)
{
	size_t sent = o->payload_len - (o->left < o->payload_len ? o->left :
	    o->payload_len);

	if (o->left == 0) {
		c->stats.msgs_out++;
		c->stats.bytes_out += o->payload_len;
	}
	if (o->kind == OUT_REPLY || o->kind == OUT_HOLD)
		c->out_notify--;
	switch (o->kind) {
	case OUT_OP:
		if (o->op != NULL && o->left == 0)
			o->op->state = OPS_SENT;
		break;
	case OUT_REPLY:
		if (o->sent != NULL)
			o->sent(o->ctx);
		break;
	case OUT_HOLD:
		if (c->h.release != NULL)
			c->h.release(c->harg, o->hold, false, (uint32_t)sent);
		break;
	case OUT_PLAIN:
		break;
	}
	free(o->copy);
	free(o);
}

/* Tears a closed connection down and frees it (deferred event). */
static void
tcp_teardown_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_conn *c = arg;
	struct tcp_out *o;
	struct tcp_op *op;

	while ((o = TAILQ_FIRST(&c->outq)) != NULL) {
		TAILQ_REMOVE(&c->outq, o, link);
		tcp_out_done(c, o);
	}
	c->out_bytes = c->resp_bytes = 0;
	if (c->rx_holding) {
		c->rx_holding = false;
		if (c->h.release != NULL)
			c->h.release(c->harg, c->rhold, true, c->dst_got);
	}
	if (c->body != NULL && c->body != c->inl)
		free(c->body);
	c->body = NULL;
	c->rop = NULL;
	while ((op = TAILQ_FIRST(&c->ops)) != NULL) {
		TAILQ_REMOVE(&c->ops, op, all);
		c->nops--;
		c->stats.outstanding = c->nops;
		if (op->done != NULL)
			op->done(op->ctx, c->op_err, NULL, 0);
		tcp_op_free(op);
	}
	if (c->h.closed != NULL)
		c->h.closed(&c->base, c->close_err, c->harg);
	event_free(c->ev_read);
	event_free(c->ev_write);
	event_free(c->ev_timer);
	event_free(c->ev_defer);
	free(c->table);
	free(c->stage);
	free(c);
}

static void tcp_read_cb(evutil_socket_t fd, short what, void *arg);
static void tcp_write_cb(evutil_socket_t fd, short what, void *arg);
static void tcp_timer_cb(evutil_socket_t fd, short what, void *arg);

/* Allocates a connection on fd (non-blocking) with its events. */
static struct tcp_conn *
tcp_conn_new(struct event_base *evb, int fd, const struct fam_conn_opts *opts,
    bool active)
{
	struct tcp_conn *c = calloc(1, sizeof *c);
	uint32_t size = 16;

	if (c == NULL)
		return NULL;
	c->base.ops = &tcp_transport_ops;
	c->evb = evb;
	c->fd = fd;
	c->active = active;
	tp_opts_fill(&c->opts, opts);
	c->timeout_ns = (uint64_t)c->opts.op_timeout_ms * 1000000u;
	while (size < 2 * c->opts.max_outstanding + 2 && size < (1u << 20))
		size *= 2;
	c->table = calloc(size, sizeof *c->table);
	c->table_mask = size - 1;
	c->stage = malloc(TCP_STAGE_LEN);
	c->next_id = 1;
	TAILQ_INIT(&c->outq);
	TAILQ_INIT(&c->ops);
	TAILQ_INIT(&c->waitq);
	c->ev_read = event_new(evb, fd, EV_READ | EV_PERSIST, tcp_read_cb, c);
	c->ev_write = event_new(evb, fd, EV_WRITE | EV_PERSIST, tcp_write_cb,
	    c);
	c->ev_timer = evtimer_new(evb, tcp_timer_cb, c);
	c->ev_defer = event_new(evb, -1, 0, tcp_teardown_cb, c);
	if (c->table == NULL || c->stage == NULL || c->ev_read == NULL ||
	    c->ev_write == NULL || c->ev_timer == NULL || c->ev_defer == NULL) {
		if (c->ev_read != NULL)
			event_free(c->ev_read);
		if (c->ev_write != NULL)
			event_free(c->ev_write);
		if (c->ev_timer != NULL)
			event_free(c->ev_timer);
		if (c->ev_defer != NULL)
			event_free(c->ev_defer);
		free(c->table);
		free(c->stage);
		free(c);
		return NULL;
	}
	c->rx_progress = c->tx_progress = mono_ns();
	return c;
}

/* Frees a connection nobody was told about: no callbacks. */
static void
tcp_conn_destroy(struct tcp_conn *c)
{
	struct tcp_out *o;

	while ((o = TAILQ_FIRST(&c->outq)) != NULL) {
		TAILQ_REMOVE(&c->outq, o, link);
		free(o->copy);
		free(o);
	}
	if (c->fd >= 0)
		close(c->fd);
	event_free(c->ev_read);
	event_free(c->ev_write);
	event_free(c->ev_timer);
	event_free(c->ev_defer);
	free(c->table);
	free(c->stage);
	free(c);
}

/* Starts watching for input. */
static void
tcp_want_read(struct tcp_conn *c)
{
	if (!c->reading && !c->paused && !c->throttled &&
	    c->state != TCS_CLOSED &&
	    c->state != TCS_CONNECTING) {
		event_add(c->ev_read, NULL);
		c->reading = true;
	}
}

/* Starts watching for room to write. */
static void
tcp_want_write(struct tcp_conn *c)
{
	if (!c->writing && c->state != TCS_CLOSED) {
		event_add(c->ev_write, NULL);
		c->writing = true;
	}
}

/* ---- output ------------------------------------------------------------ */

/* Allocates an output entry with room for niov iovecs after the header. */
static struct tcp_out *
tcp_out_new(int niov)
{
	struct tcp_out *o = calloc(1, sizeof *o +
	    (size_t)(niov + 1) * sizeof(struct iovec));

	if (o == NULL)
		return NULL;
	o->iov[0].iov_base = o->inl;
	o->iov[0].iov_len = FAM_PROTO_HDR_LEN;
	o->iovcnt = 1;
	return o;
}

/* Appends an entry to the output queue and asks for a write. */
static void
tcp_enqueue(struct tcp_conn *c, struct tcp_out *o)
{
	o->left = 0;
	for (int i = 0; i < o->iovcnt; i++)
		o->left += o->iov[i].iov_len;
	o->payload_len = o->left - FAM_PROTO_HDR_LEN;
	if (TAILQ_EMPTY(&c->outq))
		c->tx_progress = mono_ns();
	TAILQ_INSERT_TAIL(&c->outq, o, link);
	c->out_bytes += o->left;
	if (o->kind == OUT_REPLY || o->kind == OUT_HOLD)
		c->out_notify++;
	o->resp = o->kind != OUT_OP;
	if (o->resp)
		c->resp_bytes += o->left;
	/* Requests pile up answers: stop taking them while answers wait. */
	if (c->resp_bytes > TCP_OUT_HIGH && c->reading &&
	    (c->state == TCS_OPEN || c->state == TCS_HELLO)) {
		event_del(c->ev_read);
		c->reading = false;
		c->paused = true;
		c->stats.input_pauses++;
	}
	tcp_want_write(c);
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
		while (o->iovpos < o->iovcnt && o->iov[o->iovpos].iov_len == 0)
			o->iovpos++;
		if (o->iovpos < o->iovcnt) {
			v = &o->iov[o->iovpos];
			take = w < v->iov_len ? w : v->iov_len;
			v->iov_base = (uint8_t *)v->iov_base + take;
			v->iov_len -= take;
			o->left -= take;
			c->out_bytes -= take;
			if (o->resp)
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
		if (c->state == TCS_OPEN || c->state == TCS_HELLO) {
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
	uint64_t ms = c->opts.op_timeout_ms < TCP_LINGER_MS ?
	    c->opts.op_timeout_ms : TCP_LINGER_MS;

	c->state = TCS_LINGER;
	(void)shutdown(c->fd, SHUT_WR);
	c->deadline = mono_ns() + ms * 1000000u;
	event_del(c->ev_timer);
	tcp_arm_timer(c);
}

/* Writes as much queued output as the socket takes. */
static void
tcp_flush(struct tcp_conn *c)
{
	while (!TAILQ_EMPTY(&c->outq) && c->state != TCS_CLOSED &&
	    c->state != TCS_CONNECTING) {
		struct iovec iov[TCP_IOV_BATCH];
		struct tcp_out *o;
		int n = 0;
		ssize_t w;

		TAILQ_FOREACH(o, &c->outq, link) {
			for (int i = o->iovpos; i < o->iovcnt &&
			    n < TCP_IOV_BATCH; i++)
				if (o->iov[i].iov_len > 0)
					iov[n++] = o->iov[i];
			if (n == TCP_IOV_BATCH)
				break;
		}
		if (n == 0)
			break;
		w = writev(c->fd, iov, n);
		if (w < 0) {
			char who[160];

			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				tcp_want_write(c);
				return;
			}
			log_info("tcp: %s: write: %s", tcp_who(c, who,
			    sizeof who), strerror(errno));
			tcp_close(c, -ECONNRESET);
			return;
		}
		c->tx_progress = mono_ns();
		tcp_out_advance(c, (size_t)w);
	}
	if (c->writing && (TAILQ_EMPTY(&c->outq) || c->state == TCS_CLOSED)) {
		event_del(c->ev_write);
		c->writing = false;
	}
	if (c->state == TCS_CLOSING && TAILQ_EMPTY(&c->outq))
		tcp_linger(c);
}

/*
 * Queues a response with no payload. On failure (no memory, a status the
 * protocol cannot carry) the connection is closed.
 */
static void
tcp_reply_status(struct tcp_conn *c, const struct fam_hdr *req, int status)
{
	struct tcp_out *o;

	if (status < 0 || status > FAM_STATUS_MAX)
		status = EIO;
	o = tcp_out_new(0);
	if (o == NULL) {
		tcp_close(c, -ENOMEM);
		return;
	}
	if (tp_resp_hdr(req, status, 0, o->inl) < 0) {
		free(o);
		tcp_close(c, -EPROTO);
		return;
	}
	tcp_enqueue(c, o);
}

/*
 * Ends the connection after telling the peer why: an error response to
 * req, flushed before the close. err goes to `closed`.
 */
static void
tcp_fail_reply(struct tcp_conn *c, const struct fam_hdr *req, int status,
    int err)
{
	tcp_reply_status(c, req, status);
	if (c->state == TCS_CLOSED)
		return;
	c->state = TCS_CLOSING;
	c->final_err = err;
	c->deadline = mono_ns() + c->timeout_ns;
	c->paused = false;
	c->throttled = false;
	c->rx = RX_HDR;
	c->rhdr_got = 0;
	tcp_want_read(c);
	tcp_want_write(c);
}

/* Returns true when h is a request we can answer (known type, flags). */
static bool
tcp_answerable(const struct fam_hdr *h)
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
static void
tcp_violation(struct tcp_conn *c, const struct fam_hdr *h, int status,
    int err, const char *fmt, ...)
{
	char why[256], who[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	c->stats.bad_frames++;
	log_notice("tcp: %s: protocol violation: %s; closing the connection",
	    tcp_who(c, who, sizeof who), why);
	if (status != 0 && tcp_answerable(h) && c->state != TCS_CONNECTING)
		tcp_fail_reply(c, h, status, err);
	else
		tcp_close(c, err);
}

/* ---- operations -------------------------------------------------------- */

/* Puts an op's request in the output queue. Returns 0 or -ENOMEM. */
static int
tcp_op_send(struct tcp_conn *c, struct tcp_op *op)
{
	struct fam_hdr h = {
		.magic = FAM_PROTO_MAGIC,
		.version = FAM_PROTO_VERSION,
		.type = op->type,
		.flags = op->flags,
		.id = op->id,
	};
	struct tcp_out *o = tcp_out_new(1);
	uint8_t *body;
	size_t blen = 0;

	if (o == NULL)
		return -ENOMEM;
	body = o->inl + FAM_PROTO_HDR_LEN;
	switch (op->kind) {
	case OP_HELLO:
		blen = proto_put_hello(body, (const struct fam_hello *)
		    op->payload);
		h.len = (uint32_t)blen;
		break;
	case OP_READ:
		blen = proto_put_read(body, &op->rw);
		h.len = (uint32_t)blen;
		break;
	case OP_WRITE:
		blen = proto_put_write_hdr(body, &op->rw);
		h.len = (uint32_t)blen + op->rw.len;
		o->iov[1].iov_base = (void *)op->src;
		o->iov[1].iov_len = op->rw.len;
		o->iovcnt = 2;
		break;
	case OP_CALL:
		h.len = op->plen;
		if (op->plen > 0) {
			o->iov[1].iov_base = op->payload;
			o->iov[1].iov_len = op->plen;
			o->iovcnt = 2;
		}
		break;
	}
	proto_put_hdr(o->inl, &h);
	o->iov[0].iov_len = FAM_PROTO_HDR_LEN + blen;
	o->kind = OUT_OP;
	o->op = op;
	op->state = OPS_SENDING;
	tcp_table_add(c, op);
	tcp_enqueue(c, o);
	return 0;
}

/* Sends queued ops while the connection is open and has room. */
static void
tcp_pump(struct tcp_conn *c)
{
	struct tcp_op *op;

	while (c->state == TCS_OPEN && c->nflight < c->opts.max_outstanding &&
	    (op = TAILQ_FIRST(&c->waitq)) != NULL) {
		TAILQ_REMOVE(&c->waitq, op, wait);
		if (tcp_op_send(c, op) < 0) {
			TAILQ_INSERT_HEAD(&c->waitq, op, wait);
			tcp_close(c, -ENOMEM);
			return;
		}
	}
}

/* Accepts a new op: numbers it, queues it, sends it when there is room. */
static void
tcp_op_submit(struct tcp_conn *c, struct tcp_op *op)
{
	op->id = c->next_id++;
	op->deadline = mono_ns() + c->timeout_ns;
	op->state = OPS_WAITING;
	TAILQ_INSERT_TAIL(&c->ops, op, all);
	TAILQ_INSERT_TAIL(&c->waitq, op, wait);
	c->nops++;
	c->stats.outstanding = c->nops;
	tcp_pump(c);
	tcp_arm_timer(c);
}

/* Completes an op with status: removes it, calls done, sends more. */
static void
tcp_op_finish(struct tcp_conn *c, struct tcp_op *op, int status,
    const uint8_t *payload, uint32_t len)
{
	TAILQ_REMOVE(&c->ops, op, all);
	c->nops--;
	c->stats.outstanding = c->nops;
	if (op->done != NULL)
		op->done(op->ctx, status, payload, len);
	tcp_op_free(op);
	tcp_pump(c);
}

/* Returns -ENOTCONN unless new operations may be queued on c. */
static int
tcp_check_usable(const struct tcp_conn *c)
{
	switch (c->state) {
	case TCS_CONNECTING:
	case TCS_HELLO:
	case TCS_OPEN:
		return 0;
	default:
		return -ENOTCONN;
	}
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
			tcp_close(c, -ENOMEM);
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

/* The hello response to our hello arrived: open, or refused. */
static void
tcp_on_hello_resp(struct tcp_conn *c, const uint8_t *payload, uint32_t len)
{
	struct fam_hello_resp resp;
	struct tcp_op *op = c->rop;
	char who[160];
	int status = c->rh.status;

	c->rop = NULL;
	TAILQ_REMOVE(&c->ops, op, all);
	c->nops--;
	c->stats.outstanding = c->nops;
	tcp_op_free(op);
	if (status != 0) {
		log_notice("tcp: %s refused our hello: %s",
		    tcp_who(c, who, sizeof who), strerror(status));
		c->op_err = -status;
		tcp_close(c, -status);
		return;
	}
	if (proto_get_hello_resp(payload, len, &resp) < 0) {
		tcp_violation(c, NULL, 0, -EPROTO, "malformed hello response");
		return;
	}
	snprintf(c->node, sizeof c->node, "%s", resp.node);
	c->state = TCS_OPEN;
	log_debug("tcp: %s: connected", tcp_who(c, who, sizeof who));
	if (c->h.connected != NULL)
		c->h.connected(&c->base, &resp, c->harg);
	tcp_pump(c);
}

/* The response being read is complete. */
static void
tcp_on_resp(struct tcp_conn *c, const uint8_t *payload, uint32_t len)
{
	struct tcp_op *op = c->rop;

	if (op->kind == OP_HELLO) {
		tcp_on_hello_resp(c, payload, len);
		return;
	}
	c->rop = NULL;
	tcp_op_finish(c, op, c->rh.status != 0 ? -c->rh.status : 0, payload,
	    len);
}

/* A response header arrived: find its op and where its payload goes. */
static void
tcp_on_resp_hdr(struct tcp_conn *c)
{
	const struct fam_hdr *h = &c->rh;
	struct tcp_op *op = tcp_table_find(c, h->id);

	if (op == NULL) {
		tcp_violation(c, h, 0, -EPROTO, "%s response to unknown "
		    "request id %llu", proto_type_name(h->type),
		    (unsigned long long)h->id);
		return;
	}
	if (op->type != h->type) {
		tcp_violation(c, h, 0, -EPROTO, "%s response to %s request "
		    "id %llu", proto_type_name(h->type),
		    proto_type_name(op->type), (unsigned long long)h->id);
		return;
	}
	if (op->state != OPS_SENT) {
		tcp_violation(c, h, 0, -EPROTO, "response to request id %llu "
		    "before it was sent", (unsigned long long)h->id);
		return;
	}
	tcp_table_remove(c, op);
	c->rop = op;
	if (op->kind == OP_READ && h->status == 0) {
		if (h->len != op->rw.len) {
			tcp_violation(c, h, 0, -EPROTO, "read response of %u "
			    "bytes to a read of %u", h->len, op->rw.len);
			return;
		}
		c->dst = op->dst;
		c->dst_len = h->len;
		c->dst_got = 0;
		c->rx = RX_DIRECT;
		return;
	}
	tcp_expect_body(c, h->len);
}

/* A request header arrived: decide what may follow and where it goes. */
static void
tcp_on_req_hdr(struct tcp_conn *c)
{
	const struct fam_hdr *h = &c->rh;

	if (!c->active && c->state == TCS_HELLO) {
		if (h->type != FAM_MSG_HELLO) {
			tcp_violation(c, h, EACCES, -EPROTO, "%s request "
			    "before hello", proto_type_name(h->type));
			return;
		}
		tcp_expect_body(c, h->len);
		return;
	}
	if (c->state != TCS_OPEN) {
		tcp_violation(c, h, EPROTO, -EPROTO, "%s request before our "
		    "hello was answered", proto_type_name(h->type));
		return;
	}
	if (h->type == FAM_MSG_HELLO) {
		tcp_violation(c, h, EPROTO, -EPROTO, "second hello");
		return;
	}
	if (h->type == FAM_MSG_WRITE && c->h.resolve != NULL) {
		c->rx_whdr = true;
		tcp_expect_body(c, FAM_WRITE_HDR_LEN);
		return;
	}
	tcp_expect_body(c, h->len);
}

/* A header is complete: validate it, then route the frame. */
static void
tcp_on_hdr(struct tcp_conn *c)
{
	struct fam_hdr *h = &c->rh;
	char who[160];
	int err;

	proto_get_hdr(c->rhdr, h);
	c->stats.msgs_in++;
	err = proto_check_hdr(h, c->opts.max_payload);
	if (err == -EPROTONOSUPPORT && !c->active && c->state == TCS_HELLO &&
	    h->type == FAM_MSG_HELLO && !(h->flags & FAM_F_RESPONSE)) {
		log_notice("tcp: refused hello from %s: protocol version %u "
		    "(this famd speaks %u)", tcp_who(c, who, sizeof who),
		    h->version, FAM_PROTO_VERSION);
		c->op_err = -EPROTONOSUPPORT;
		h->version = FAM_PROTO_VERSION;
		tcp_fail_reply(c, h, EPROTONOSUPPORT, -EPROTONOSUPPORT);
		return;
	}
	if (err < 0) {
		if (err == -EPROTONOSUPPORT)
			tcp_violation(c, NULL, 0, err, "protocol version %u",
			    h->version);
		else if (h->magic != FAM_PROTO_MAGIC)
			tcp_violation(c, NULL, 0, err, "bad magic 0x%08x",
			    h->magic);
		else if (err == -EMSGSIZE)
			tcp_violation(c, h, EMSGSIZE, err, "%s of %u bytes "
			    "(limit %u)", proto_type_name(h->type), h->len,
			    c->opts.max_payload);
		else
			tcp_violation(c, h, EPROTO, err, "bad header (type %u, "
			    "flags 0x%x, length %u, status %d)", h->type,
			    h->flags, h->len, h->status);
		return;
	}
	if (h->flags & FAM_F_RESPONSE)
		tcp_on_resp_hdr(c);
	else
		tcp_on_req_hdr(c);
}

/* A hello arrived on a passive connection: check it, ask the role. */
static void
tcp_on_hello(struct tcp_conn *c, const uint8_t *payload, uint32_t len)
{
	struct fam_hello m;
	struct fam_hello_resp resp;
	struct tcp_out *o;
	char who[160];
	int err;

	if (proto_get_hello(payload, len, &m) < 0) {
		tcp_violation(c, &c->rh, EPROTO, -EPROTO, "malformed hello");
		return;
	}
	snprintf(c->node, sizeof c->node, "%s", m.node);
	if (c->opts.secret[0] != '\0' &&
	    !proto_secret_equal(m.secret, c->opts.secret)) {
		explicit_bzero(&m, sizeof m);
		log_notice("tcp: refused hello from %s: wrong secret",
		    tcp_who(c, who, sizeof who));
		tcp_fail_reply(c, &c->rh, EACCES, -EACCES);
		return;
	}
	explicit_bzero(m.secret, sizeof m.secret);
	memset(&resp, 0, sizeof resp);
	err = c->h.hello != NULL ? c->h.hello(&c->base, &m, &resp, c->harg) :
	    -EACCES;
	if (c->state == TCS_CLOSED)
		return;
	if (err < 0) {
		log_notice("tcp: refused hello from %s: %s",
		    tcp_who(c, who, sizeof who), strerror(-err));
		tcp_fail_reply(c, &c->rh, -err, err);
		return;
	}
	o = tcp_out_new(0);
	if (o == NULL) {
		tcp_close(c, -ENOMEM);
		return;
	}
	if (tp_resp_hdr(&c->rh, 0, FAM_HELLO_RESP_LEN, o->inl) < 0) {
		free(o);
		tcp_close(c, -EPROTO);
		return;
	}
	o->iov[0].iov_len += proto_put_hello_resp(o->inl + FAM_PROTO_HDR_LEN,
	    &resp);
	tcp_enqueue(c, o);
	c->state = TCS_OPEN;
	log_debug("tcp: %s: hello accepted", tcp_who(c, who, sizeof who));
	tcp_pump(c);
}

/* Serves a READ request through resolve: the reply references the memory. */
static void
tcp_serve_read(struct tcp_conn *c, const uint8_t *payload)
{
	const struct fam_hdr *h = &c->rh;
	struct fam_rw m;
	struct tcp_out *o;
	void *mem = NULL, *hold = NULL;
	int err;

	err = proto_get_read(payload, FAM_READ_LEN, &m);
	if (err == -EPROTO) {
		tcp_violation(c, h, EPROTO, err, "malformed read request");
		return;
	}
	c->stats.reads++;
	if (err == 0)
		err = c->h.resolve(c->harg, m.region, m.offset, m.len, false,
		    &mem, &hold);
	if (err < 0) {
		tcp_reply_status(c, h, -err);
		return;
	}
	o = tcp_out_new(1);
	if (o == NULL || tp_resp_hdr(h, 0, m.len, o->inl) < 0) {
		free(o);
		if (c->h.release != NULL)
			c->h.release(c->harg, hold, false, 0);
		tcp_close(c, -ENOMEM);
		return;
	}
	o->iov[1].iov_base = mem;
	o->iov[1].iov_len = m.len;
	o->iovcnt = 2;
	o->kind = OUT_HOLD;
	o->hold = hold;
	tcp_enqueue(c, o);
}

/* The fixed part of a WRITE request arrived: find where its data goes. */
static void
tcp_on_write_hdr(struct tcp_conn *c, const uint8_t *whdr)
{
	const struct fam_hdr *h = &c->rh;
	uint32_t data = h->len - FAM_WRITE_HDR_LEN;
	struct fam_rw m;
	void *mem = NULL, *hold = NULL;
	int err;

	err = proto_get_write_hdr(whdr, h->len, &m);
	if (err == -EPROTO) {
		tcp_violation(c, h, EPROTO, err, "write request of %u bytes "
		    "in a frame of %u", m.len, data);
		return;
	}
	c->stats.writes++;
	if (err == 0)
		err = c->h.resolve(c->harg, m.region, m.offset, m.len, true,
		    &mem, &hold);
	if (err < 0) {
		c->rx_status = -err;
		if (data == 0) {
			tcp_reply_status(c, h, c->rx_status);
			return;
		}
		c->discard = data;
		c->rx = RX_DISCARD;
		return;
	}
	c->rx_holding = true;
	c->rhold = hold;
	c->dst = mem;
	c->dst_len = m.len;
	c->dst_got = 0;
	c->rop = NULL;
	c->rx = RX_DIRECT;
}

/* A body (or a WRITE's fixed part) is complete: hand it on. */
static void
tcp_on_body(struct tcp_conn *c)
{
	const struct fam_hdr *h = &c->rh;
	uint8_t *body = c->body;
	uint32_t len = c->body_len;

	c->rx = RX_HDR;
	c->stats.bytes_in += len;
	if (h->flags & FAM_F_RESPONSE)
		tcp_on_resp(c, body, len);
	else if (c->rx_whdr) {
		c->rx_whdr = false;
		c->stats.bytes_in -= len;
		tcp_on_write_hdr(c, body);
	} else if (h->type == FAM_MSG_HELLO)
		tcp_on_hello(c, body, len);
	else if (h->type == FAM_MSG_READ && c->h.resolve != NULL)
		tcp_serve_read(c, body);
	else {
		if (h->type == FAM_MSG_READ)
			c->stats.reads++;
		else if (h->type == FAM_MSG_WRITE)
			c->stats.writes++;
		else
			c->stats.calls++;
		if (c->h.request != NULL)
			c->h.request(&c->base, h, body, c->harg);
		else
			tcp_reply_status(c, h, EOPNOTSUPP);
	}
	if (c->body == body)
		c->body = NULL;
	if (body != c->inl)
		free(body);
}

/* A payload read in place is complete. */
static void
tcp_on_direct(struct tcp_conn *c)
{
	c->rx = RX_HDR;
	c->stats.bytes_in += c->dst_len;
	if (c->rop != NULL) {
		struct tcp_op *op = c->rop;

		c->rop = NULL;
		tcp_op_finish(c, op, 0, NULL, op->rw.len);
		return;
	}
	c->rx_holding = false;
	if (c->h.release != NULL)
		c->h.release(c->harg, c->rhold, true, c->dst_len);
	tcp_reply_status(c, &c->rh, 0);
}

/* Returns true while input should be parsed (not closing, not paused). */
static bool
tcp_parsing(const struct tcp_conn *c)
{
	return (c->state == TCS_HELLO || c->state == TCS_OPEN) &&
	    !c->paused && !c->throttled;
}

/* Feeds the staged bytes to the framing state machine. */
static void
tcp_rx_stage(struct tcp_conn *c)
{
	while (c->stage_off < c->stage_len && tcp_parsing(c)) {
		const uint8_t *p = c->stage + c->stage_off;
		uint32_t avail = c->stage_len - c->stage_off, take;

		switch (c->rx) {
		case RX_HDR:
			take = FAM_PROTO_HDR_LEN - c->rhdr_got;
			take = avail < take ? avail : take;
			memcpy(c->rhdr + c->rhdr_got, p, take);
			c->rhdr_got += take;
			c->stage_off += take;
			if (c->rhdr_got == FAM_PROTO_HDR_LEN) {
				c->rhdr_got = 0;
				tcp_on_hdr(c);
			}
			break;
		case RX_BODY:
			take = c->body_len - c->body_got;
			take = avail < take ? avail : take;
			memcpy(c->body + c->body_got, p, take);
			c->body_got += take;
			c->stage_off += take;
			if (c->body_got == c->body_len)
				tcp_on_body(c);
			break;
		case RX_DIRECT:
			take = c->dst_len - c->dst_got;
			take = avail < take ? avail : take;
			memcpy(c->dst + c->dst_got, p, take);
			c->dst_got += take;
			c->stage_off += take;
			if (c->dst_got == c->dst_len)
				tcp_on_direct(c);
			break;
		case RX_DISCARD:
			take = avail < c->discard ? avail : c->discard;
			c->discard -= take;
			c->stage_off += take;
			if (c->discard == 0) {
				c->rx = RX_HDR;
				tcp_reply_status(c, &c->rh, c->rx_status);
			}
			break;
		}
	}
	if (c->stage_off == c->stage_len)
		c->stage_off = c->stage_len = 0;
}

/* The peer closed its side: an orderly end, or a frame cut short. */
static void
tcp_on_eof(struct tcp_conn *c)
{
	char who[160];

	if (c->state == TCS_CLOSING || c->state == TCS_LINGER) {
		tcp_close(c, c->final_err);
		return;
	}
	if (c->rx != RX_HDR || c->rhdr_got > 0 || c->stage_len > c->stage_off) {
		c->stats.bad_frames++;
		log_notice("tcp: %s: connection closed in the middle of a "
		    "frame", tcp_who(c, who, sizeof who));
		tcp_close(c, -EPROTO);
		return;
	}
	log_debug("tcp: %s: connection closed by the peer",
	    tcp_who(c, who, sizeof who));
	tcp_close(c, c->nops > 0 ? -ECONNRESET : 0);
}

/* Reads what the socket has and runs the frames through. */
static void
tcp_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_conn *c = arg;
	size_t budget = TCP_READ_BUDGET;
	char who[160];

	while (budget > 0 && c->state != TCS_CLOSED) {
		ssize_t n;

		if (c->state == TCS_CLOSING || c->state == TCS_LINGER)
			c->stage_off = c->stage_len = 0;
		if (c->stage_off < c->stage_len) {
			uint32_t before = c->stage_len - c->stage_off;

			tcp_rx_stage(c);
			budget -= before < budget ? before : budget;
			if (!tcp_parsing(c) && c->state != TCS_CLOSING &&
			    c->state != TCS_LINGER)
				break;
			continue;
		}
		if (c->paused || c->throttled)
			break;
		c->stage_off = c->stage_len = 0;
		if (c->rx == RX_DIRECT && (c->state == TCS_OPEN ||
		    c->state == TCS_HELLO)) {
			struct iovec iov[2] = {
				{ c->dst + c->dst_got, c->dst_len - c->dst_got },
				{ c->stage, TCP_STAGE_LEN },
			};
			size_t direct;

			n = readv(c->fd, iov, 2);
			if (n > 0) {
				direct = (size_t)n < iov[0].iov_len ?
				    (size_t)n : iov[0].iov_len;
				c->dst_got += (uint32_t)direct;
				c->stage_len = (uint32_t)((size_t)n - direct);
			}
		} else {
			n = read(c->fd, c->stage, TCP_STAGE_LEN);
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
			log_info("tcp: %s: read: %s", tcp_who(c, who,
			    sizeof who), strerror(errno));
			tcp_close(c, c->state == TCS_CLOSING ||
			    c->state == TCS_LINGER ? c->final_err :
			    -ECONNRESET);
			break;
		}
		c->rx_progress = mono_ns();
		budget -= (size_t)n < budget ? (size_t)n : budget;
		if (c->rx == RX_DIRECT && c->dst_got == c->dst_len &&
		    c->dst_len > 0)
			tcp_on_direct(c);
	}
	if (c->state == TCS_CLOSED)
		return;
	tcp_flush(c);
	if (c->state != TCS_CLOSED && c->reading &&
	    c->stage_off < c->stage_len)
		event_active(c->ev_read, EV_READ, 0);
	tcp_arm_timer(c);
}

/* Writes queued output; finishes a connect in progress first. */
static void
tcp_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_conn *c = arg;

	if (c->state == TCS_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof err;

		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err != 0) {
			log_info("tcp: connect to %s: %s", c->peer,
			    strerror(err));
			c->op_err = -err;
			tcp_close(c, -err);
			return;
		}
		c->state = TCS_HELLO;
		tcp_want_read(c);
	}
	tcp_flush(c);
	tcp_arm_timer(c);
}

/* A deadline may have passed: an op, the hello, a stalled transfer. */
static void
tcp_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_conn *c = arg;
	uint64_t now = mono_ns();
	struct tcp_op *op = TAILQ_FIRST(&c->ops);
	const char *why = NULL;
	char who[160];

	if (c->state == TCS_CLOSING || c->state == TCS_LINGER) {
		if (now >= c->deadline) {
			tcp_close(c, c->final_err);
			return;
		}
	} else if (op != NULL && op->deadline <= now)
		why = op->kind == OP_HELLO ? "no answer to our hello" :
		    "a request got no answer";
	else if (!c->active && c->state == TCS_HELLO && c->deadline <= now)
		why = "no hello";
	else if ((c->rx != RX_HDR || c->rhdr_got > 0) &&
	    c->rx_progress + c->timeout_ns <= now)
		why = "a frame stalled half-way";
	else if (!TAILQ_EMPTY(&c->outq) && c->tx_progress + c->timeout_ns <=
	    now)
		why = "the peer does not read";
	if (why != NULL) {
		c->stats.timeouts += c->nops > 0 ? c->nops : 1;
		log_notice("tcp: %s: %s within %u ms; closing",
		    tcp_who(c, who, sizeof who), why, c->opts.op_timeout_ms);
		c->op_err = -ETIMEDOUT;
		tcp_close(c, -ETIMEDOUT);
		return;
	}
	tcp_arm_timer(c);
}

/* ---- listener ---------------------------------------------------------- */

/* Re-enables accepting after a descriptor shortage. */
static void
tcp_backoff_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_listener *l = arg;

	evconnlistener_enable(l->lev);
}

/* Backs off for a second when accept fails (EMFILE) instead of spinning. */
static void
tcp_accept_error_cb(struct evconnlistener *lev, void *arg)
{
	struct tcp_listener *l = arg;
	struct timeval tv = { 1, 0 };

	log_warn("tcp: accept on %s: %s; pausing for 1s", l->addr,
	    strerror(errno));
	evconnlistener_disable(lev);
	evtimer_add(l->backoff, &tv);
}

/* Takes a new connection and hands it to the role. */
static void
tcp_accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct tcp_listener *l = arg;
	struct tcp_conn *c;

	c = tcp_conn_new(l->evb, fd, &l->opts, false);
	if (c == NULL) {
		log_warn("tcp: out of memory accepting a connection on %s",
		    l->addr);
		close(fd);
		return;
	}
	tp_format_addr(sa, (socklen_t)salen, c->peer, sizeof c->peer);
	tcp_sockopts(fd);
	c->state = TCS_HELLO;
	c->deadline = mono_ns() + c->timeout_ns;
	log_debug("tcp: connection from %s on %s", c->peer, l->addr);
	l->accept(&l->base, &c->base, c->peer, l->arg);
	if (c->state == TCS_CLOSED)
		return;
	tcp_want_read(c);
	tcp_arm_timer(c);
}

/* Listens on addr. */
static int
tcp_listen(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, fam_accept_fn accept, void *arg,
    struct fam_listener **out, char **cause)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct tcp_listener *l;
	int fd, one = 1, err;

	err = tp_resolve(addr, true, &ss, &sslen, cause);
	if (err < 0)
		return err;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (fd < 0) {
		err = -errno;
		*cause = xasprintf("listen %s: socket: %s", addr,
		    strerror(errno));
		return err;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&ss, sslen) < 0) {
		err = -errno;
		*cause = xasprintf("listen %s: bind: %s", addr,
		    strerror(errno));
		close(fd);
		return err;
	}
	sslen = sizeof ss;
	if (getsockname(fd, (struct sockaddr *)&ss, &sslen) < 0) {
		err = -errno;
		*cause = xasprintf("listen %s: %s", addr, strerror(errno));
		close(fd);
		return err;
	}
	errno = 0;
	l = calloc(1, sizeof *l);
	if (l == NULL) {
		close(fd);
		*cause = xasprintf("listen %s: out of memory", addr);
		return -ENOMEM;
	}
	l->base.ops = &tcp_transport_ops;
	l->evb = base;
	tp_opts_fill(&l->opts, opts);
	l->accept = accept;
	l->arg = arg;
	tp_format_addr((struct sockaddr *)&ss, sslen, l->addr, sizeof l->addr);
	l->lev = evconnlistener_new(base, tcp_accept_cb, l,
	    LEV_OPT_CLOSE_ON_FREE, 128, fd);
	l->backoff = evtimer_new(base, tcp_backoff_cb, l);
	if (l->lev == NULL || l->backoff == NULL) {
		err = errno != 0 ? -errno : -ENOMEM;
		*cause = xasprintf("listen %s: %s", addr, strerror(-err));
		if (l->lev != NULL)
			evconnlistener_free(l->lev);
		else
			close(fd);
		if (l->backoff != NULL)
			event_free(l->backoff);
		free(l);
		return err;
	}
	evconnlistener_set_error_cb(l->lev, tcp_accept_error_cb);
	*out = &l->base;
	return 0;
}

/* Stops listening. */
static void
tcp_listener_free(struct fam_listener *fl)
{
	struct tcp_listener *l = (struct tcp_listener *)fl;

	evconnlistener_free(l->lev);
	event_free(l->backoff);
	explicit_bzero(l->opts.secret, sizeof l->opts.secret);
	free(l);
}

/* Returns the bound address. */
static const char *
tcp_listener_addr(const struct fam_listener *fl)
{
	return ((const struct tcp_listener *)fl)->addr;
}

/* ---- the API ----------------------------------------------------------- */

/* Connects to addr and queues the hello. */
static int
tcp_connect(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, const struct fam_conn_handlers *h,
    void *arg, struct fam_conn **out, char **cause)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct tcp_conn *c;
	struct tcp_op *op;
	int fd, err;

	if (opts->hello.node[0] == '\0' ||
	    opts->hello.role < FAM_WIRE_ROLE_HOST ||
	    opts->hello.role > FAM_WIRE_ROLE_MEMORY) {
		*cause = xasprintf("connect %s: the hello needs a node name and "
		    "a role", addr);
		return -EINVAL;
	}
	err = tp_resolve(addr, false, &ss, &sslen, cause);
	if (err < 0)
		return err;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (fd < 0) {
		err = -errno;
		*cause = xasprintf("connect %s: socket: %s", addr,
		    strerror(errno));
		return err;
	}
	tcp_sockopts(fd);
	if (connect(fd, (struct sockaddr *)&ss, sslen) < 0 &&
	    errno != EINPROGRESS) {
		err = -errno;
		*cause = xasprintf("connect %s: %s", addr, strerror(errno));
		close(fd);
		return err;
	}
	c = tcp_conn_new(base, fd, opts, true);
	op = calloc(1, sizeof *op);
	if (c == NULL || op == NULL ||
	    (op->payload = malloc(sizeof(struct fam_hello))) == NULL) {
		free(op);
		if (c != NULL)
			tcp_conn_destroy(c);
		else
			close(fd);
		*cause = xasprintf("connect %s: out of memory", addr);
		return -ENOMEM;
	}
	snprintf(c->peer, sizeof c->peer, "%s", addr);
	c->state = TCS_CONNECTING;
	memcpy(op->payload, &c->opts.hello, sizeof c->opts.hello);
	explicit_bzero(c->opts.hello.secret, sizeof c->opts.hello.secret);
	op->kind = OP_HELLO;
	op->type = FAM_MSG_HELLO;
	op->id = c->next_id++;
	op->deadline = mono_ns() + c->timeout_ns;
	if (tcp_op_send(c, op) < 0) {
		tcp_op_free(op);
		tcp_conn_destroy(c);
		*cause = xasprintf("connect %s: out of memory", addr);
		return -ENOMEM;
	}
	explicit_bzero(op->payload, sizeof(struct fam_hello));
	TAILQ_INSERT_TAIL(&c->ops, op, all);
	c->nops++;
	c->stats.outstanding = c->nops;
	if (h != NULL)
		c->h = *h;
	c->harg = arg;
	tcp_arm_timer(c);
	*out = &c->base;
	return 0;
}

/* Sets the handlers (of an accepted connection). */
static void
tcp_set_handlers(struct fam_conn *fc, const struct fam_conn_handlers *h,
    void *arg)
{
	struct tcp_conn *c = tcp_conn_of(fc);

	if (h != NULL)
		c->h = *h;
	else
		memset(&c->h, 0, sizeof c->h);
	c->harg = arg;
}

/* Queues a request of any type but HELLO. */
static int
tcp_call(struct fam_conn *fc, uint8_t type, const void *payload, uint32_t len,
    fam_done_fn done, void *ctx)
{
	struct tcp_conn *c = tcp_conn_of(fc);
	struct fam_hdr h = { .magic = FAM_PROTO_MAGIC,
		.version = FAM_PROTO_VERSION, .type = type, .len = len };
	struct tcp_op *op;
	int err;

	if ((err = tcp_check_usable(c)) < 0)
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
	tcp_op_submit(c, op);
	return 0;
}

/* Checks and queues a READ or WRITE. */
static int
tcp_rw(struct tcp_conn *c, enum tcp_op_kind kind, const struct fam_remote *r,
    uint64_t off, uint32_t len, void *dst, const void *src, uint16_t flags,
    fam_done_fn done, void *ctx)
{
	struct tcp_op *op;
	int err;

	if ((err = tcp_check_usable(c)) < 0)
		return err;
	if (r == NULL || done == NULL || (dst == NULL && src == NULL))
		return -EINVAL;
	if (len == 0 || len > FAM_RW_MAX ||
	    len + (kind == OP_WRITE ? FAM_WRITE_HDR_LEN : 0) >
	    c->opts.max_payload)
		return -EINVAL;
	if (off > UINT64_MAX - len || (r->size != 0 && off + len > r->size))
		return -ERANGE;
	op = calloc(1, sizeof *op);
	if (op == NULL)
		return -ENOMEM;
	op->kind = kind;
	op->type = kind == OP_READ ? FAM_MSG_READ : FAM_MSG_WRITE;
	op->rw.region = r->region;
	op->rw.len = len;
	op->rw.offset = off;
	op->dst = dst;
	op->src = src;
	op->flags = flags;
	op->done = done;
	op->ctx = ctx;
	if (kind == OP_READ)
		c->stats.reads++;
	else
		c->stats.writes++;
	tcp_op_submit(c, op);
	return 0;
}

/* Queues a READ into dst. */
static int
tcp_read(struct fam_conn *fc, const struct fam_remote *r, uint64_t off,
    uint32_t len, void *dst, struct fam_mr *mr, uint16_t flags,
    fam_done_fn done, void *ctx)
{
	if (dst == NULL)
		return -EINVAL;
	return tcp_rw(tcp_conn_of(fc), OP_READ, r, off, len, dst, NULL, flags,
	    done, ctx);
}

/* Queues a WRITE from src (referenced until done). */
static int
tcp_write(struct fam_conn *fc, const struct fam_remote *r, uint64_t off,
    uint32_t len, const void *src, struct fam_mr *mr, uint16_t flags,
    fam_done_fn done, void *ctx)
{
	if (src == NULL)
		return -EINVAL;
	return tcp_rw(tcp_conn_of(fc), OP_WRITE, r, off, len, NULL, src, flags,
	    done, ctx);
}

/*
 * Writes the queued output now rather than when the loop next runs. When
 * replies wait in the queue, their `sent` callbacks must not run inside
 * this call: the write is left to the loop.
 */
static int
tcp_flush_api(struct fam_conn *fc)
{
	struct tcp_conn *c = tcp_conn_of(fc);

	if (c->state != TCS_OPEN)
		return c->state == TCS_CLOSED ? -ENOTCONN : 0;
	if (c->out_notify > 0)
		return 0;
	tcp_flush(c);
	if (c->state != TCS_CLOSED)
		tcp_arm_timer(c);
	return 0;
}

/* Queues the response to a request (mr: nothing to register on tcp). */
static int
tcp_reply(struct fam_conn *fc, const struct fam_hdr *req, int status,
    const struct iovec *iov, int iovcnt, bool copy, struct fam_mr *mr,
    fam_sent_fn sent, void *ctx)
{
	struct tcp_conn *c = tcp_conn_of(fc);
	struct tcp_out *o;
	size_t len = 0;
	int err;

	if (c->state != TCS_OPEN)
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
	o = tcp_out_new(copy ? 1 : iovcnt);
	if (o == NULL)
		return -ENOMEM;
	err = tp_resp_hdr(req, status, len, o->inl);
	if (err < 0) {
		free(o);
		return err;
	}
	if (copy && len > 0) {
		uint8_t *p = o->inl + FAM_PROTO_HDR_LEN;

		if (len > TCP_OUT_INLINE) {
			o->copy = malloc(len);
			if (o->copy == NULL) {
				free(o);
				return -ENOMEM;
			}
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
	} else {
		for (int i = 0; i < iovcnt; i++)
			if (iov[i].iov_len > 0)
				o->iov[o->iovcnt++] = iov[i];
	}
	o->kind = OUT_REPLY;
	o->sent = sent;
	o->ctx = ctx;
	tcp_enqueue(c, o);
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

/* Closes the connection (orderly, from our side). */
static void
tcp_close_api(struct fam_conn *fc)
{
	struct tcp_conn *c = tcp_conn_of(fc);

	if (c->state == TCS_CLOSING || c->state == TCS_LINGER)
		tcp_close(c, c->final_err);
	else
		tcp_close(c, 0);
}

/* Returns the peer's address. */
static const char *
tcp_peer(const struct fam_conn *fc)
{
	return ((const struct tcp_conn *)fc)->peer;
}

/* Returns the connection's counters. */
static const struct fam_conn_stats *
tcp_stats(const struct fam_conn *fc)
{
	return &((const struct tcp_conn *)fc)->stats;
}

/* Returns true while the connection is open. */
static bool
tcp_is_open(const struct fam_conn *fc)
{
	return ((const struct tcp_conn *)fc)->state == TCS_OPEN;
}

/* Stops or resumes reading requests from a connection, for its role. */
static int
tcp_throttle(struct fam_conn *fc, bool on)
{
	struct tcp_conn *c = (struct tcp_conn *)fc;

	if (c->state != TCS_OPEN && c->state != TCS_HELLO)
		return -ENOTCONN;
	if (on == c->throttled)
		return 0;
	c->throttled = on;
	if (on) {
		c->stats.input_pauses++;
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

const struct fam_transport_ops tcp_transport_ops = {
	.kind = FAM_TP_TCP,
	.name = "tcp",
	.listen = tcp_listen,
	.listener_free = tcp_listener_free,
	.listener_addr = tcp_listener_addr,
	.connect = tcp_connect,
	.set_handlers = tcp_set_handlers,
	.call = tcp_call,
	.read = tcp_read,
	.write = tcp_write,
	.reply = tcp_reply,
	.flush = tcp_flush_api,
	.mr_register = tcp_mr_register,
	.mr_deregister = tcp_mr_deregister,
	.expose = tcp_expose,
	.close = tcp_close_api,
	.peer = tcp_peer,
	.stats = tcp_stats,
	.is_open = tcp_is_open,
	.throttle = tcp_throttle,
};
