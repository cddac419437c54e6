/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport-int.h - private to src/transport: the table of functions each
 * transport fills in (fam_transport_ops), and the connection core both
 * build on (transport-conn.c, transport-msg.c): struct tp_conn with its one
 * state machine, operations and their table, deadlines, output entries,
 * hello, violations, headers.
 *
 * Every transport's connection, listener and memory registration starts
 * with the matching struct below, so transport.c can dispatch on it.
 */
#ifndef FAM_TRANSPORT_INT_H
#define FAM_TRANSPORT_INT_H

#include <sys/queue.h>
#include <sys/socket.h>

#include "base/base.h"
#include "transport/transport.h"

/* "[ipv6]:port" at most, NUL included. */
#define TP_ADDR_MAX 64

/* Defaults for the fields of struct fam_conn_opts left at 0. */
#define TP_DEFAULT_TIMEOUT_MS   10000u
#define TP_DEFAULT_OUTSTANDING  64u
#define TP_MAX_IOV              1024

struct fam_transport_ops {
	enum fam_transport_kind kind;
	const char *name;
	int (*listen)(struct event_base *base, const char *addr,
	    const struct fam_conn_opts *opts, fam_accept_fn accept, void *arg,
	    struct fam_listener **out, char **cause);
	void (*listener_free)(struct fam_listener *l);
	const char *(*listener_addr)(const struct fam_listener *l);
	int (*connect)(struct event_base *base, const char *addr,
	    const struct fam_conn_opts *opts,
	    const struct fam_conn_handlers *h, void *arg,
	    struct fam_conn **out, char **cause);
	void (*set_handlers)(struct fam_conn *c,
	    const struct fam_conn_handlers *h, void *arg);
	int (*call)(struct fam_conn *c, uint8_t type, const void *payload,
	    uint32_t len, fam_done_fn done, void *ctx);
	int (*read)(struct fam_conn *c, const struct fam_remote *r,
	    uint64_t off, uint32_t len, void *dst, struct fam_mr *mr,
	    uint16_t flags, fam_done_fn done, void *ctx);
	int (*write)(struct fam_conn *c, const struct fam_remote *r,
	    uint64_t off, uint32_t len, const void *src, struct fam_mr *mr,
	    uint16_t flags, fam_done_fn done, void *ctx);
	int (*flush)(struct fam_conn *c); /* NULL: nothing to do early */
	int (*reply)(struct fam_conn *c, const struct fam_hdr *req, int status,
	    const struct iovec *iov, int iovcnt, bool copy, struct fam_mr *mr,
	    fam_sent_fn sent, void *ctx);
	struct fam_mr *(*mr_register)(struct fam_conn *c, void *addr,
	    size_t len);
	void (*mr_deregister)(struct fam_mr *mr);
	int (*expose)(struct fam_conn *c, void *addr, size_t len,
	    bool writable, struct fam_mr **out, uint64_t *raddr,
	    uint32_t *rkey);
	void (*close)(struct fam_conn *c);
	const char *(*peer)(const struct fam_conn *c);
	const struct fam_conn_stats *(*stats)(const struct fam_conn *c);
	bool (*is_open)(const struct fam_conn *c);
	int (*throttle)(struct fam_conn *c, bool on); /* NULL: cannot */
};

struct fam_conn {
	const struct fam_transport_ops *ops;
};

struct fam_listener {
	const struct fam_transport_ops *ops;
};

struct fam_mr {
	const struct fam_transport_ops *ops;
};

/*
 * Connection states, both transports (transport.h), in this order:
 *   CONNECTING  active: connect in progress (socket, rdma_cm); hello queued
 *   HELLO       active: hello sent, its answer awaited; passive: the hello
 *               awaited (nothing else is accepted, no memory reachable)
 *   JOINING     verbs, active: hello accepted; QPs 1.. connecting
 *   OPEN        requests and one-sided operations both ways
 *   CLOSING     an error reply (refused hello, violation) is going out;
 *               input is ignored; a deadline bounds it
 *   LINGER      tcp: our side shut down once the reply is out; input is
 *               discarded until the peer closes or a short deadline passes
 *   DRAINING    verbs: QPs in the error state, send queues flushing
 *   CLOSED      teardown scheduled (ev_defer) or ran
 */
enum tp_state {
	TPS_CONNECTING,
	TPS_HELLO,
	TPS_JOINING,
	TPS_OPEN,
	TPS_CLOSING,
	TPS_LINGER,
	TPS_DRAINING,
	TPS_CLOSED,
};

enum tp_op_kind {
	TP_OP_HELLO,
	TP_OP_CALL,
	TP_OP_READ,
	TP_OP_WRITE,
};

enum tp_op_state {
	TP_OPS_WAITING, /* in waitq: before OPEN, or over max_outstanding */
	TP_OPS_QUEUED,  /* handed to the transport (output queue) */
	TP_OPS_POSTED,  /* verbs one-sided: its WRs are on a send queue */
	TP_OPS_SENT,    /* request out, in the table: its response may come */
};

/* An operation of ours awaiting its completion. */
struct tp_op {
	TAILQ_ENTRY(tp_op) all;   /* every pending op, oldest first */
	TAILQ_ENTRY(tp_op) wait;  /* ops not yet handed to the transport */
	struct tp_op *hnext;      /* chain in the table of requests sent */
	enum tp_op_kind kind;
	enum tp_op_state state;
	uint8_t type;
	uint16_t flags;           /* READ/WRITE: FAM_F_BACKGROUND */
	uint64_t id;
	uint64_t deadline;        /* CLOCK_MONOTONIC ns */
	fam_done_fn done;
	void *ctx;
	struct fam_rw rw;         /* READ/WRITE: region, len, offset */
	void *dst;                /* READ: where the data goes */
	const void *src;          /* WRITE: where it comes from */
	void *payload;            /* CALL, HELLO: our copy of the payload */
	uint32_t plen;
	uint64_t priv[];          /* the transport's (tp_conn_ops.op_priv) */
};

TAILQ_HEAD(tp_opq, tp_op);

/* Short payloads kept in an output entry itself (a hello fits). */
#define TP_OUT_INLINE 160
_Static_assert(TP_OUT_INLINE >= FAM_HELLO_LEN, "a hello fits inline");
_Static_assert(TP_OUT_INLINE >= FAM_CHALLENGE_LEN, "so does its answer");
_Static_assert(TP_OUT_INLINE >= FAM_AUTH_RESP_LEN, "and the AUTH's");
_Static_assert(TP_OUT_INLINE >= FAM_WRITE_HDR_LEN, "a WRITE's fixed part");

/*
 * A message of ours on its way out: the first member of each transport's
 * output entry (tcp_out, vb_msg), which the transport allocates with room
 * for its iovecs and frees once the message is out.
 */
struct tp_out {
	struct tp_op *op;         /* a request of ours: its op */
	bool resp;                /* a response of ours */
	bool notify;              /* its end calls the user: sent, release */
	bool holding;             /* READ data from resolve: release(hold) */
	bool close_after;         /* the connection ends once it is out */
	bool urgent;              /* a reply a fault waits for: written at
	                           * once, not at the loop round's end */
	fam_sent_fn sent;         /* a reply: sent(ctx) once out */
	void *ctx;
	void *hold;
	void *copy;               /* owned payload copy, freed with it */
	struct fam_mr *mr;        /* a reply's registration (verbs zero copy) */
	size_t payload_len;       /* bytes after the header (once queued) */
	int iovcnt;
	struct iovec *iov;        /* [0] the header at inl, then the payload */
	uint8_t inl[FAM_PROTO_HDR_LEN + TP_OUT_INLINE];
};

/* The part of a listener both transports share (first member). */
struct tp_listener {
	struct fam_listener base;
	struct event_base *evb;
	struct fam_conn_opts opts;
	fam_accept_fn accept;
	void *arg;
	char addr[TP_ADDR_MAX];
};

struct tp_conn;

/* What a transport does for the core; NULL hooks: nothing to do. */
struct tp_conn_ops {
	const struct fam_transport_ops *fam; /* the transport's op table */
	size_t op_priv;           /* bytes after each struct tp_op */
	size_t out_size;          /* bytes of an output entry (tp_out first) */
	size_t listener_size;     /* bytes of a listener (tp_listener first) */
	/* Passive side: listens on ss for l (set up by the core). */
	int (*bind)(struct tp_listener *l, const char *addr,
	    struct sockaddr_storage *ss, socklen_t sslen, char **cause);
	/* Stops the fabric (errors set): ends in DRAINING or CLOSED. */
	void (*close)(struct tp_conn *c);
	/* Queues op's request or transfer: 0 or -ENOMEM. */
	int (*op_start)(struct tp_conn *c, struct tp_op *op);
	/* Releases what the transport holds for op, before it is freed. */
	void (*op_release)(struct tp_conn *c, struct tp_op *op);
	/* Checks and fills a READ/WRITE with the lease and registration. */
	void (*rw_prepare)(struct tp_conn *c, struct tp_op *op,
	    const struct fam_remote *r, struct fam_mr *mr);
	/* Active side: a new connection to ss, connecting (peer set). */
	int (*dial)(struct event_base *base, const char *addr,
	    const struct sockaddr_storage *ss, socklen_t sslen,
	    const struct fam_conn_opts *opts, struct tp_conn **out,
	    char **cause);
	/*
	 * Queues an output entry (the transport's from now on); rx: it
	 * answers the message being handled now.
	 */
	void (*out_queue)(struct tp_conn *c, struct tp_out *o, bool rx);
	/*
	 * The hello is accepted (resp: the peer's answer, or ours on the
	 * passive side); false when the transport opens c later itself.
	 */
	bool (*hello_done)(struct tp_conn *c,
	    const struct fam_hello_resp *resp);
	/* The transport's own earliest deadline (0: none), and its reason. */
	uint64_t (*next_deadline)(const struct tp_conn *c);
	const char *(*expired)(struct tp_conn *c, uint64_t now);
	/* DRAINING outlived its deadline. */
	void (*drain_expired)(struct tp_conn *c);
	/* Teardown: drops queued output, ends transfers (before ops fail). */
	void (*drop)(struct tp_conn *c);
	/* Frees the connection (tp_conn_fini() included). */
	void (*destroy)(struct tp_conn *c);
};

/* The part of a connection both transports share (first member). */
struct tp_conn {
	struct fam_conn base;
	const struct tp_conn_ops *tops;
	struct event_base *evb;
	enum tp_state state;
	bool active;
	struct fam_conn_opts opts;
	struct fam_conn_handlers h;
	void *harg;
	char peer[TP_ADDR_MAX];
	char node[FAM_NAME_MAX + 1];  /* the peer's node name, once known */
	/*
	 * The handshake (proto.h): K of our secret, the hello (ours or the
	 * peer's), the challenge, the connection's key; passive side:
	 * awaiting the HELLO (0) or the AUTH (1). Wiped once open.
	 */
	uint8_t skey[FAM_KEY_LEN];
	bool has_secret;
	bool keyed;         /* passive: the peer proves its own key
	                     * (peer_keys), so node is who it is */
	uint8_t auth_step;
	struct fam_hello hello;
	struct fam_challenge ch;
	struct fam_auth auth;
	struct fam_conn_stats stats;
	int close_err;      /* given to closed */
	int op_err;         /* given to the operations still pending */
	int final_err;      /* CLOSING, LINGER: close_err once finished */
	uint64_t deadline;  /* passive HELLO, CLOSING, LINGER, DRAINING */
	uint64_t timeout_ns;
	struct event *ev_timer, *ev_defer;

	uint64_t next_id;
	struct tp_opq ops;      /* every pending op */
	struct tp_opq waitq;    /* ops not yet handed to the transport */
	struct tp_op **table;   /* requests sent, by id */
	uint32_t table_mask;
	uint32_t nflight;       /* ops handed to the transport */
	uint32_t nops;
};


/* transport-conn.c: life. */
int tp_conn_init(struct tp_conn *c, const struct tp_conn_ops *tops,
    struct event_base *evb, const struct fam_conn_opts *opts, bool active);
void tp_conn_fini(struct tp_conn *c);
void tp_auth_forget(struct tp_conn *c);
const char *tp_who(const struct tp_conn *c, char *buf, size_t len);
void tp_close(struct tp_conn *c, int err);
void tp_teardown(struct tp_conn *c);
void tp_arm_timer(struct tp_conn *c);
void tp_conn_opened(struct tp_conn *c, const struct fam_hello_resp *resp);
int tp_listen(const struct tp_conn_ops *tops, struct event_base *base,
    const char *addr, const struct fam_conn_opts *opts, fam_accept_fn accept,
    void *arg, struct fam_listener **out, char **cause);

/* transport-conn.c: operations. */
struct tp_out *tp_out_new(struct tp_conn *c, int niov);
struct tp_out *tp_op_out(struct tp_conn *c, struct tp_op *op);
struct tp_op *tp_op_new(struct tp_conn *c);
void tp_op_free(struct tp_conn *c, struct tp_op *op);
void tp_table_add(struct tp_conn *c, struct tp_op *op);
struct tp_op *tp_table_find(struct tp_conn *c, uint64_t id);
void tp_table_remove(struct tp_conn *c, struct tp_op *op);
void tp_op_unlink(struct tp_conn *c, struct tp_op *op);
int tp_op_start(struct tp_conn *c, struct tp_op *op);
void tp_pump(struct tp_conn *c);
void tp_op_finish(struct tp_conn *c, struct tp_op *op, int status,
    const uint8_t *payload, uint32_t len);
struct tp_op *tp_handshake_op(struct tp_conn *c, uint8_t type, uint64_t id,
    const void *payload, uint32_t len);
int tp_connect(const struct tp_conn_ops *tops, struct event_base *base,
    const char *addr, const struct fam_conn_opts *opts,
    const struct fam_conn_handlers *h, void *arg, struct fam_conn **out,
    char **cause);

/* transport-msg.c: input. */
void tp_violation(struct tp_conn *c, const struct fam_hdr *h, int status,
    int err, const char *fmt, ...) printflike(5, 6);
int tp_reply_status(struct tp_conn *c, const struct fam_hdr *req, int status,
    bool close_after);
void tp_fail_reply(struct tp_conn *c, const struct fam_hdr *req, int status,
    int err);
int tp_on_hdr(struct tp_conn *c, const uint8_t *raw, struct fam_hdr *h);
struct tp_op *tp_on_resp_hdr(struct tp_conn *c, const struct fam_hdr *h);
int tp_on_req_hdr(struct tp_conn *c, const struct fam_hdr *h);
int tp_on_write_hdr(struct tp_conn *c, const struct fam_hdr *h,
    const uint8_t *whdr, void **mem, void **hold);
void tp_on_msg(struct tp_conn *c, const struct fam_hdr *h, struct tp_op *op,
    const uint8_t *payload, uint32_t len);
void tp_on_read_data(struct tp_conn *c, struct tp_op *op, uint32_t crc,
    uint32_t len);
void tp_on_write_data(struct tp_conn *c, const struct fam_hdr *h,
    const void *mem, void *hold, uint32_t len);

/* transport-conn.c: the API both fill their fam_transport_ops with. */
void tp_set_handlers(struct fam_conn *fc, const struct fam_conn_handlers *h,
    void *arg);
int tp_call(struct fam_conn *fc, uint8_t type, const void *payload,
    uint32_t len, fam_done_fn done, void *ctx);
int tp_read(struct fam_conn *fc, const struct fam_remote *r, uint64_t off,
    uint32_t len, void *dst, struct fam_mr *mr, uint16_t flags,
    fam_done_fn done, void *ctx);
int tp_write(struct fam_conn *fc, const struct fam_remote *r, uint64_t off,
    uint32_t len, const void *src, struct fam_mr *mr, uint16_t flags,
    fam_done_fn done, void *ctx);
int tp_reply(struct fam_conn *fc, const struct fam_hdr *req, int status,
    const struct iovec *iov, int iovcnt, bool copy, struct fam_mr *mr,
    fam_sent_fn sent, void *ctx);
void tp_close_api(struct fam_conn *fc);
const char *tp_peer(const struct fam_conn *fc);
const struct fam_conn_stats *tp_stats(const struct fam_conn *fc);
bool tp_is_open(const struct fam_conn *fc);
const char *tp_listener_addr(const struct fam_listener *fl);

/*
 * The op table of transport pfx: the core's entries, and pfx_listen(),
 * pfx_listener_free(), pfx_connect(), pfx_flush(),
 * pfx_mr_register(), pfx_mr_deregister() and pfx_expose() of its own;
 * throttle may be NULL.
 */
#define TP_TRANSPORT_OPS(pfx, k, nm, thr) {				\
	.kind = (k), .name = (nm),					\
	.listen = pfx##_listen, .listener_free = pfx##_listener_free,	\
	.listener_addr = tp_listener_addr, .connect = pfx##_connect,	\
	.set_handlers = tp_set_handlers, .call = tp_call,		\
	.read = tp_read, .write = tp_write, .flush = pfx##_flush,	\
	.reply = tp_reply, .mr_register = pfx##_mr_register,		\
	.mr_deregister = pfx##_mr_deregister, .expose = pfx##_expose,	\
	.close = tp_close_api, .peer = tp_peer, .stats = tp_stats,	\
	.is_open = tp_is_open, .throttle = (thr),			\
}

extern const struct fam_transport_ops tcp_transport_ops;
extern const struct fam_transport_ops verbs_transport_ops;

int tp_resolve(const char *addr, bool passive, struct sockaddr_storage *ss,
    socklen_t *sslen, char **cause);
void tp_format_addr(const struct sockaddr *sa, socklen_t len, char *buf,
    size_t size);
void tp_opts_fill(struct fam_conn_opts *out, const struct fam_conn_opts *in);
int tp_resp_hdr(const struct fam_hdr *req, int status, size_t len,
    uint8_t out[FAM_PROTO_HDR_LEN]);

/* transport-tls.c: a tcp connection's TLS, in place of readv and writev. */
struct tls_conn;
struct tls_conn *tls_conn_new(struct fam_tls *t, int fd, bool active,
    const char *peer);
void tls_conn_free(struct tls_conn *s);
ssize_t tls_readv(struct tls_conn *s, const struct iovec *iov, int n);
ssize_t tls_writev(struct tls_conn *s, const struct iovec *iov, int n);
bool tls_wants_read(const struct tls_conn *s);
bool tls_wants_write(const struct tls_conn *s);
bool tls_pending(const struct tls_conn *s);
void tls_close_notify(struct tls_conn *s);

#endif /* FAM_TRANSPORT_INT_H */
