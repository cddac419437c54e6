/*
 * transport-verbs.c - transport.h over RDMA verbs (libibverbs, librdmacm),
 * on the event loop: rdma_cm event channels, completion channels and the
 * devices' asynchronous event descriptors are watched like sockets.
 *
 * A connection is one or more RC queue pairs (qps_per_peer, chosen by the
 * active side) that share a protection domain, one completion queue with
 * its completion channel, and one shared receive queue. Each QP has its
 * own rdma_cm id; QP 0 carries the hello, the others join the connection
 * once it is accepted, presenting the random cookie QP 0's accept gave.
 *
 * Connection states (enum vb_state), as transport.h:
 *   CONNECTING  active: QP 0 goes through rdma_cm (per QP, enum vb_qp_state:
 *               ADDR resolve address -> ROUTE resolve route -> CONNECT
 *               connect sent -> UP established); the hello op is queued
 *   HELLO       QP 0 up. Active: the hello is sent, its answer awaited.
 *               Passive: the hello is awaited; nothing else is accepted.
 *               Only our receive buffers (local access only) exist: no
 *               memory is reachable by the peer and no rkey has been sent
 *   JOINING     active: hello accepted; QPs 1.. go through rdma_cm
 *   OPEN        requests and one-sided operations both ways
 *   CLOSING     an error reply (refused hello, violation) is being sent;
 *               input is ignored; then we disconnect
 *   DRAINING    QPs moved to the error state (rdma_disconnect); a marker
 *               WR posted on each send queue flushes after everything
 *               posted before it, so its completion means the hardware is
 *               done with our buffers; operations complete (with an error)
 *               as their work requests flush
 *   CLOSED      teardown scheduled: the rest of the operations complete,
 *               `closed` is called, then everything is destroyed in order
 *               QP -> SRQ -> CQ -> completion channel -> MRs -> PD -> ids
 *
 * Messages (proto.h frames) travel as SENDs of at most VB_MSG_BUF bytes,
 * copied into registered send buffers; a longer message is cut into
 * consecutive SENDs on one QP, which RC delivers in order, and put back
 * together by the receiver (bounded by max_payload). The first SEND of a
 * message carries immediate data naming its type and flags (vb_imm()):
 * the receiver knows what a message is from its completion, and a SEND
 * whose immediate data disagrees with its header, or a continuation that
 * carries any, is a protocol violation. Replies to READ
 * requests served through `resolve` (tcp-style two-sided reads, used when
 * a lease has no rkey) are copied from region memory the same way.
 * Zero-copy replies (fam_conn_replyv() with a registration in this
 * connection's PD covering the payload): the header goes in a send
 * buffer, the payload is a further SGE into the caller's memory, and
 * `sent` is called only when the message's last SEND retires (completed,
 * or flushed at teardown), not when it is posted.
 *
 * One-sided operations: fam_conn_read()/fam_conn_write() with a lease that
 * has an rkey post RDMA READ/WRITE straight from/to the caller's buffer
 * when the caller registered it (fam_mr_register), otherwise through
 * registered bounce slabs (a write's data is copied into them when it is
 * posted, a read's copied out when it completes). The memory node's famd
 * takes no part in them.
 *
 * Work requests: every wr_id points at a tagged context (a receive buffer,
 * or a slot of a QP's send ring), so a completion is dispatched without
 * lookup. Requests are queued per QP during a callback and posted once,
 * chained, at its end (ev_post), or at once by fam_conn_flush() (one
 * ibv_post_send per QP: one doorbell for a dpu's batch); only the last
 * WR of a chain and every VB_SIGNAL_EVERY-th WR are signalled; a
 * signalled completion retires every older slot of its ring, finishing
 * the operations whose parts they were (a failed WR completes with its
 * error whether signalled or not). The connection counts doorbells, WRs and
 * signalled WRs (struct fam_conn_stats).
 * The completion channel cycle is: get event -> re-arm -> poll in bounded
 * batches (through vb_poll_cq(), which can turn completions into errors
 * for tests) -> acknowledge events in batches.
 *
 * A completion with an error status other than IBV_WC_WR_FLUSH_ERR (which
 * is teardown), a QP, CQ or SRQ async error, a protocol violation or a
 * missed deadline closes that connection only; it is counted and logged.
 *
 * Everything runs on the loop that created the connection; callbacks to the
 * user run only from that loop, never inside an API call. Loops may run on
 * threads of their own (a dpu's memory-node side): a connection and a
 * listener are touched only by their loop's thread, save that the lists
 * of devices and connections are shared (vb_lock). Each loop watches a
 * device's asynchronous events itself (struct vb_dev per device and
 * loop), and whichever loop reads an event closes the connections it
 * names that are its own; for another loop's it records the event on the
 * connection and activates that connection's ev_async, whose callback, on
 * its own loop, closes it.
 *
 * Lock order: vb_lock comes before libevent's locks (of any loop) and the
 * log's. It is held to look the lists up, link and unlink, add or free the
 * events of its own loop, record an event for another loop's connection
 * and activate its ev_async, or close a connection of its own (vb_close);
 * never while a verbs object is destroyed: that waits until the
 * asynchronous events naming it are acknowledged, which another loop may
 * be about to do once it has the lock.
 */
#ifndef FAM_TRANSPORT_VERBS_H
#define FAM_TRANSPORT_VERBS_H


#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/event.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "base/base.h"
#include "transport/transport-int.h"

#define VB_MSG_BUF       4096u      /* one SEND: header and payload bytes */
#define VB_SEND_BUFS     128u       /* send buffers per connection */
/*
 * Receive buffers on the SRQ: twice what the peer can have in flight (its
 * send buffers), plus some per QP, so that a receiver a little behind
 * still never answers with an RNR NAK.
 */
#define VB_RECV_BUFS(nqps) (2u * VB_SEND_BUFS + 16u * (nqps))
#define VB_MIN_RNR_TIMER 12         /* 0.64 ms (rdma_cm leaves 655 ms) */
#define VB_SQ_DEPTH      256u       /* send WRs per QP (one kept for drain) */
#define VB_SLAB          (64u << 10) /* bounce slab */
#define VB_SLABS         40u        /* a FAM_RW_MAX operation always fits */
#define VB_POLL_BATCH    32
#define VB_POLL_BUDGET   8          /* batches per callback */
#define VB_ACK_BATCH     64u        /* CQ events acknowledged at once */
#define VB_SIGNAL_EVERY  16u
#define VB_MAX_QPS       16u
#define VB_MAX_HELLO     64u        /* passive connections awaiting hello */
#define VB_DRAIN_MS      2000u
#define VB_RESOLVE_MS    2000
#define VB_RD_ATOMIC     16
#define VB_PRIV_LEN      24u
#define VB_INLINE_BODY   160u
#define VB_IMM_MARK      0xfa000000u /* immediate data of a first SEND */
#define VB_MAX_SGE       4u         /* per SEND: header and payload parts */

_Static_assert(VB_INLINE_BODY >= FAM_HELLO_LEN, "a hello fits inline");
_Static_assert(VB_SLABS * VB_SLAB >= FAM_RW_MAX, "bounce covers a chunk");
_Static_assert(VB_MSG_BUF >= FAM_PROTO_HDR_LEN + FAM_WRITE_HDR_LEN,
    "a WRITE's fixed part fits the first SEND");

enum vb_state {
	VBS_CONNECTING,
	VBS_HELLO,
	VBS_JOINING,
	VBS_OPEN,
	VBS_CLOSING,
	VBS_DRAINING,
	VBS_CLOSED,
};

enum vb_qp_state {
	VQ_IDLE,    /* no rdma_cm id yet */
	VQ_ADDR,    /* active: rdma_resolve_addr() in progress */
	VQ_ROUTE,   /* active: rdma_resolve_route() in progress */
	VQ_CONNECT, /* rdma_connect() sent (active) or rdma_accept() (passive) */
	VQ_UP,      /* established */
	VQ_DOWN,    /* disconnected or failed */
};

/* What a wr_id points at (the first byte of its context). */
enum vb_tag {
	VB_TAG_RECV = 1, /* struct vb_rbuf */
	VB_TAG_SQ = 2,   /* struct vb_sqe: a slot of a send ring */
};

enum vb_sqe_kind {
	SQE_SEND,  /* a message fragment in a send buffer */
	SQE_DATA,  /* one part of a one-sided operation */
	SQE_DRAIN, /* the marker posted at teardown */
};

enum vb_op_kind {
	OP_HELLO,
	OP_CALL,
	OP_READ,
	OP_WRITE,
};

enum vb_op_state {
	OPS_WAITING, /* in waitq: before OPEN, or over max_outstanding */
	OPS_QUEUED,  /* in a QP's output queue */
	OPS_POSTED,  /* one-sided: its WRs are on the send queue */
	OPS_SENT,    /* two-sided: request posted, its response awaited */
};

/* What the bytes of the message being received go to. */
enum vb_rx_kind {
	RXK_BODY,    /* a buffer, handed on whole */
	RXK_DST,     /* the destination of our two-sided READ */
	RXK_WRITE,   /* region memory from `resolve` (a WRITE request) */
	RXK_DISCARD, /* the data of a refused WRITE */
};

struct vb_conn;
struct vb_qp;
struct vb_op;

struct vb_rbuf {
	uint8_t tag;
	uint8_t *buf;
	struct vb_rbuf *next; /* repost chain */
};

struct vb_sbuf {
	struct vb_sbuf *next;
	uint8_t *buf;
};

struct vb_slab {
	struct vb_slab *next;
	uint8_t *buf;
};

/* A slot of a QP's send ring. */
struct vb_sqe {
	uint8_t tag;
	uint8_t kind;
	bool close_after;     /* an error reply: disconnect once it is out */
	struct vb_qp *qp;
	struct vb_sbuf *sbuf; /* SEND: its send buffer (NULL: payload only) */
	struct vb_msg *msg;   /* SEND: the zero-copy message this fragment
	                       * ends, finished when it retires */
	struct vb_op *op;     /* DATA */
	uint32_t len;         /* DATA: bytes of this part */
	uint8_t opcode;       /* the ibv_wc_opcode a success must carry */
};

/* A message (or a one-sided operation) waiting to be posted on a QP. */
struct vb_msg {
	TAILQ_ENTRY(vb_msg) link;
	bool data;            /* a one-sided operation (op) */
	struct vb_op *op;     /* our request, or the one-sided operation */
	bool resp;            /* a response of ours */
	bool close_after;
	fam_sent_fn sent;
	void *ctx;
	bool holding;         /* READ data from resolve: release(hold) */
	void *hold;
	void *copy;           /* owned payload copy */
	struct ibv_mr *zmr;   /* zero-copy: the payload's registration */
	size_t total, posted;
	size_t payload_len;
	int iovpos;
	size_t iovoff;
	int iovcnt;
	uint8_t inl[FAM_PROTO_HDR_LEN + VB_INLINE_BODY];
	struct iovec iov[];
};

TAILQ_HEAD(vb_msgq, vb_msg);

/* The message being received on a QP. */
struct vb_rx {
	bool active;
	enum vb_rx_kind kind;
	struct fam_hdr h;
	uint8_t *buf;
	uint32_t len, got;
	bool owned;
	struct vb_op *op;
	bool holding;
	void *hold;
	int status;
};

struct vb_qp {
	struct vb_conn *c;
	unsigned index;
	enum vb_qp_state state;
	struct rdma_cm_id *id;
	struct ibv_qp *qp;
	uint32_t qp_num;
	struct vb_sqe *ring;
	uint32_t head, used;   /* oldest posted slot; slots posted */
	uint32_t unsignalled;
	bool drain_posted, drained;
	struct vb_msgq outq;
	struct vb_rx rx;
};

struct vb_op {
	TAILQ_ENTRY(vb_op) all;
	TAILQ_ENTRY(vb_op) wait;
	struct vb_op *hnext;
	enum vb_op_kind kind;
	enum vb_op_state state;
	bool onesided;
	uint8_t type;
	uint16_t flags;         /* READ/WRITE requests: FAM_F_BACKGROUND */
	uint64_t id;
	uint64_t deadline;
	fam_done_fn done;
	void *ctx;
	struct fam_rw rw;
	void *dst;
	const void *src;
	struct ibv_mr *lmr;     /* the caller's registration covering dst/src */
	uint64_t raddr;
	uint32_t rkey;
	void *payload;
	uint32_t plen;
	unsigned parts_left;
	int status;
	struct vb_slab *slabs;  /* bounce, in order */
};

TAILQ_HEAD(vb_opq, vb_op);

struct vb_mr {
	struct fam_mr base;
	TAILQ_ENTRY(vb_mr) link;
	struct vb_conn *c;
	struct ibv_mr *mr;
};

/*
 * An RDMA device in use by a loop, with its asynchronous event descriptor
 * watched there (several loops: each its own record; vb_lock).
 */
struct vb_dev {
	LIST_ENTRY(vb_dev) link;
	struct ibv_context *ctx;
	struct event_base *evb;
	struct event *ev;
	unsigned refs;
	int rd_atom;
	int max_cqe;
};

struct vb_listener {
	struct fam_listener base;
	struct event_base *evb;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct event *ev;
	struct vb_dev *dev;      /* its device, when bound to one address */
	struct fam_conn_opts opts;
	fam_accept_fn accept;
	void *arg;
	unsigned nhello;
	char addr[TP_ADDR_MAX];
};

struct vb_conn {
	struct fam_conn base;
	LIST_ENTRY(vb_conn) link;
	struct event_base *evb;
	enum vb_state state;
	bool active;
	bool counted_hello;        /* in the listener's nhello */
	struct vb_listener *l;
	struct fam_conn_opts opts;
	struct fam_conn_handlers h;
	void *harg;
	char peer[TP_ADDR_MAX];
	char node[FAM_NAME_MAX + 1];
	struct fam_conn_stats stats;
	struct sockaddr_storage dst;
	uint64_t cookie;
	struct fam_hello_resp joined_resp; /* JOINING: for `connected` */
	unsigned nqps, nup, rr;
	struct vb_qp qps[VB_MAX_QPS];

	struct rdma_event_channel *cmch;
	struct vb_dev *dev;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *cchan;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	uint8_t *rmem, *smem, *bmem;
	size_t rlen, slen, blen;
	struct ibv_mr *rmr, *smr, *bmr;
	struct vb_rbuf *rbufs;
	unsigned nrbufs;
	struct vb_sbuf *sbufs, *sfree;
	struct vb_slab *slabs, *bfree;
	unsigned nbfree;
	unsigned cq_unacked;
	int rd_atom;
	struct vb_rbuf *repost;    /* receive buffers to post again */

	struct event *ev_cm, *ev_cq, *ev_timer, *ev_defer, *ev_post, *ev_poll;
	/*
	 * An asynchronous event another loop read for this connection
	 * (under vb_lock): ev_async closes it on its own loop.
	 */
	struct event *ev_async;
	int async_err;             /* 0: none recorded */
	enum ibv_event_type async_type;
	unsigned async_qp;         /* a QP event's QP */
	uint8_t async_port;        /* a port event's port; 0: any */
	bool post_pending;
	int close_err;
	int op_err;
	int final_err;
	uint64_t deadline;         /* passive HELLO, CLOSING, DRAINING */
	uint64_t timeout_ns;
	uint64_t rng;

	uint64_t next_id;
	struct vb_opq ops;
	struct vb_opq waitq;
	struct vb_op **table;
	uint32_t table_mask;
	uint32_t nflight;
	uint32_t nops;
	TAILQ_HEAD(, vb_mr) mrs;
};

/*
 * Private data of connect requests, accepts and rejects, 24 bytes, all
 * integers big-endian:
 *   u32 magic           FAM_PROTO_MAGIC
 *   u8  version         FAM_PROTO_VERSION
 *   u8  index           QP index within the connection (0: the first)
 *   u8  nqps            QPs the active side will connect (1..16)
 *   u8  reserved        zero
 *   u32 status          reject: a positive errno; otherwise 0
 *   u32 reserved        zero
 *   u64 cookie          accept of QP 0: names the connection; connect
 *                       request of QP 1..: the cookie QP 0 got; else 0
 */
struct vb_priv {
	uint8_t version;
	uint8_t index;
	uint8_t nqps;
	uint32_t status;
	uint64_t cookie;
};

/* What every loop shares, under vb_lock (lock order: see the top). */
extern pthread_mutex_t vb_lock;
extern LIST_HEAD(vb_dev_list, vb_dev) vb_devs;
extern LIST_HEAD(vb_conn_list, vb_conn) vb_conns;

/* Returns the verbs connection behind a transport connection. */
static inline struct vb_conn *
vb_conn_of(struct fam_conn *c)
{
	return (struct vb_conn *)c;
}

/* Returns the peer for log lines: address, and node name once known. */
static inline const char *
vb_who(struct vb_conn *c, char *buf, size_t len)
{
	if (c->node[0] != '\0')
		snprintf(buf, len, "%s (node %s)", c->peer, c->node);
	else
		snprintf(buf, len, "%s", c->peer);
	return buf;
}

/* verbs-cm.c */
void vb_priv_put(uint8_t out[VB_PRIV_LEN], const struct vb_priv *p);
/* verbs-cm.c */
int vb_qp_connect(struct vb_qp *q, struct sockaddr *src);
/* verbs-cm.c */
void vb_cm_cb(evutil_socket_t fd, short what, void *arg);
/* verbs-cm.c */
struct rdma_event_channel *vb_channel_open(const char *what, char **cause);
/* verbs-cm.c */
int vb_listen(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, fam_accept_fn accept, void *arg,
    struct fam_listener **out, char **cause);
/* verbs-cm.c */
void vb_listener_free(struct fam_listener *fl);
/* verbs-cm.c */
const char *vb_listener_addr(const struct fam_listener *fl);
/* verbs-conn.c */
struct vb_op *vb_table_find(struct vb_conn *c, uint64_t id);
/* verbs-conn.c */
void vb_table_add(struct vb_conn *c, struct vb_op *op);
/* verbs-conn.c */
void vb_table_remove(struct vb_conn *c, struct vb_op *op);
/* verbs-conn.c */
struct vb_conn *vb_conn_new(struct event_base *evb, const struct fam_conn_opts *opts,
    bool active);
/* verbs-conn.c */
int vb_conn_channel(struct vb_conn *c);
/* verbs-conn.c */
int vb_post_recvs(struct vb_conn *c, struct vb_rbuf *list);
/* verbs-conn.c */
int vb_conn_setup(struct vb_conn *c, struct ibv_context *ctx, unsigned nqps);
/* verbs-conn.c */
int vb_qp_create(struct vb_qp *q);
/* verbs-conn.c */
void vb_conn_param(struct vb_conn *c, struct rdma_conn_param *p, uint8_t *priv,
    const struct vb_priv *pd);
/* verbs-conn.c */
void vb_conn_destroy(struct vb_conn *c);
/* verbs-conn.c */
void vb_arm_timer(struct vb_conn *c);
/* verbs-conn.c */
void vb_drained(struct vb_conn *c);
/* verbs-conn.c */
bool vb_all_drained(const struct vb_conn *c);
/* verbs-conn.c */
void vb_close(struct vb_conn *c, int err);
/* verbs-conn.c */
void vb_op_free(struct vb_conn *c, struct vb_op *op);
/* verbs-conn.c */
void vb_op_finish(struct vb_conn *c, struct vb_op *op, int status,
    const uint8_t *payload, uint32_t len);
/* verbs-conn.c */
void vb_msg_done(struct vb_conn *c, struct vb_msg *m);
/* verbs-cq.c */
void vb_retire(struct vb_conn *c, struct vb_qp *q, struct vb_sqe *e, int status);
/* verbs-cq.c */
void vb_cq_poll(struct vb_conn *c);
/* verbs-cq.c */
void vb_cq_cb(evutil_socket_t fd, short what, void *arg);
/* verbs-cq.c */
void vb_poll_cb(evutil_socket_t fd, short what, void *arg);
/* verbs-dev.c */
int vb_memlock_gate(unsigned nqps, char **cause);
/* verbs-dev.c */
uint64_t vb_random64(void);
/* verbs-dev.c */
void vb_async_conn_cb(evutil_socket_t fd, short what, void *arg);
/* verbs-dev.c */
struct vb_dev *vb_dev_get(struct event_base *evb, struct ibv_context *ctx);
/* verbs-dev.c */
void vb_dev_put(struct vb_dev *dev);
/* verbs-post.c */
struct ibv_mr *vb_zc_mr(struct vb_conn *c, struct fam_mr *mr, const struct iovec *iov,
    int iovcnt);
/* verbs-post.c */
void vb_kick(struct vb_conn *c);
/* verbs-post.c */
struct vb_qp *vb_pick_qp(struct vb_conn *c);
/* verbs-post.c */
struct vb_msg *vb_msg_new(int niov);
/* verbs-post.c */
void vb_msg_queue(struct vb_conn *c, struct vb_qp *q, struct vb_msg *m);
/* verbs-post.c */
uint32_t vb_imm(const uint8_t *p);
/* verbs-post.c */
void vb_post_all(struct vb_conn *c);
/* verbs-post.c */
int vb_flush(struct fam_conn *fc);
/* verbs-post.c */
void vb_post_cb(evutil_socket_t fd, short what, void *arg);
/* verbs-post.c */
void vb_reply_status(struct vb_conn *c, struct vb_qp *q, const struct fam_hdr *req,
    int status, bool close_after, int final_err);
/* verbs-post.c */
void vb_violation(struct vb_conn *c, const struct fam_hdr *h, int status, int err,
    const char *fmt, ...) printflike(5, 6);
/* verbs-post.c */
int vb_op_queue(struct vb_conn *c, struct vb_op *op);
/* verbs-post.c */
void vb_pump(struct vb_conn *c);
/* verbs-post.c */
void vb_op_submit(struct vb_conn *c, struct vb_op *op);
/* verbs-post.c */
int vb_check_usable(const struct vb_conn *c);
/* verbs-recv.c */
void vb_rx(struct vb_qp *q, const uint8_t *p, uint32_t n, bool has_imm,
    uint32_t imm);

#endif /* FAM_TRANSPORT_VERBS_H */
