/* SPDX-License-Identifier: Apache-2.0 */
/*
 * verbs.h - private to src/transport/verbs/: transport.h over RDMA verbs
 * (libibverbs, librdmacm) on the connection core (transport-conn.c).
 *
 * Owns, per connection: RC QPs (qps_per_peer; QP 0 carries the hello, the
 * others join with the cookie QP 0's accept gave), one PD, one CQ with its
 * completion channel, one SRQ, registered receive and send buffers and
 * bounce slabs. Files: verbs-dev.c devices and async events, verbs-conn.c
 * resources and life, verbs-post.c posting, verbs-cq.c completions,
 * verbs-recv.c receive, verbs-cm.c rdma_cm and the listener.
 *
 * States: enum tp_state (transport-int.h): CONNECTING (QP 0 through
 * rdma_cm, per QP enum vb_qp_state), HELLO, JOINING (QPs 1..), OPEN,
 * CLOSING, DRAINING (QPs in the error state; a marker WR per send queue
 * flushes after all before it), CLOSED (then destroyed in the order
 * QP -> SRQ -> CQ -> completion channel -> MRs -> PD -> ids).
 *
 * Locks: vb_lock guards the lists of devices and connections, which every
 * loop shares; it comes before libevent's locks and the log's, and is
 * never held while a verbs object is destroyed (that waits for the async
 * events naming it to be acknowledged, maybe by another loop wanting the
 * lock). A device's async events are read by each loop using it; an event
 * for another loop's connection is recorded on it and its ev_async closes
 * it there. Everything else belongs to the connection's loop.
 *
 * Messages: SENDs of at most VB_MSG_BUF bytes (a longer one cut into
 * consecutive SENDs on one QP); the first carries immediate data naming
 * type and flags (vb_imm()), checked by the receiver. Zero-copy replies
 * send their payload from the caller's registration and call `sent` when
 * the last SEND retires. One-sided READ/WRITE go straight from or to a
 * registered buffer, or through bounce slabs.
 *
 * Work requests: every wr_id points at a tagged context (a receive
 * buffer, a slot of a QP's send ring): completions dispatch without
 * lookup. Work is queued per QP during a callback and posted as one chain
 * at its end (or by fam_conn_flush()), selectively signalled. The CQ
 * cycle: get event, re-arm, poll in bounded batches, ack in batches. A
 * bad completion (not IBV_WC_WR_FLUSH_ERR, which is teardown) closes that
 * connection only.
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
#define VB_IMM_MARK      0xfa000000u /* immediate data of a first SEND */
#define VB_MAX_SGE       4u         /* per SEND: header and payload parts */

_Static_assert(VB_SLABS * VB_SLAB >= FAM_RW_MAX, "bounce covers a chunk");
_Static_assert(VB_MSG_BUF >= FAM_PROTO_HDR_LEN + FAM_WRITE_HDR_LEN,
    "a WRITE's fixed part fits the first SEND");

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

/* What the bytes of the message being received go to. */
enum vb_rx_kind {
	RXK_BODY,    /* a buffer, handed on whole */
	RXK_DST,     /* the destination of our two-sided READ */
	RXK_WRITE,   /* region memory from `resolve` (a WRITE request) */
	RXK_DISCARD, /* the data of a refused WRITE */
};

struct vb_conn;
struct vb_qp;

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
	struct tp_op *op;     /* DATA */
	uint32_t len;         /* DATA: bytes of this part */
	uint8_t opcode;       /* the ibv_wc_opcode a success must carry */
};

/* A message (or a one-sided operation) waiting to be posted on a QP. */
struct vb_msg {
	struct tp_out out;    /* first: the core's part */
	TAILQ_ENTRY(vb_msg) link;
	bool data;            /* a one-sided operation (out.op) */
	struct ibv_mr *zmr;   /* zero-copy: the payload's registration */
	size_t total, posted;
	int iovpos;
	size_t iovoff;
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
	struct tp_op *op;
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

/* What an op of ours holds on verbs (struct tp_op's priv). */
struct vb_opx {
	bool onesided;
	struct ibv_mr *lmr;     /* the caller's registration covering dst/src */
	uint64_t raddr;
	uint32_t rkey;
	unsigned parts_left;
	int status;
	struct vb_slab *slabs;  /* bounce, in order */
};


struct vb_mr {
	struct fam_mr base;
	TAILQ_ENTRY(vb_mr) link;
	struct vb_conn *c;
	struct ibv_mr *mr;
	bool zero_based;        /* a lease: addressed by offset, remote only */
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
	struct tp_listener tl;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct event *ev;
	struct vb_dev *dev;      /* its device, when bound to one address */
	unsigned nhello;
};

struct vb_conn {
	struct tp_conn tc;
	LIST_ENTRY(vb_conn) link;
	bool counted_hello;        /* in the listener's nhello */
	struct vb_listener *l;
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

	struct vb_qp *rxq;         /* the QP whose message is handled now */
	struct event *ev_cm, *ev_cq, *ev_post, *ev_poll;
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
	uint64_t rng;

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

extern const struct tp_conn_ops vb_conn_ops;

/* What every loop shares, under vb_lock (lock order: see the top). */
extern pthread_mutex_t vb_lock;
extern LIST_HEAD(vb_dev_list, vb_dev) vb_devs;
extern LIST_HEAD(vb_conn_list, vb_conn) vb_conns;

/* Returns the verbs connection behind a transport connection. */
static inline struct vb_conn *
vb_conn_of(void *c)
{
	return (struct vb_conn *)c;
}

/* Returns the verbs part of an op. */
static inline struct vb_opx *
vb_opx(struct tp_op *op)
{
	return (struct vb_opx *)op->priv;
}

/* verbs-cm.c */
void vb_priv_put(uint8_t out[VB_PRIV_LEN], const struct vb_priv *p);
void vb_cm_cb(evutil_socket_t fd, short what, void *arg);
int vb_bind(struct tp_listener *tl, const char *addr,
    struct sockaddr_storage *ss, socklen_t sslen, char **cause);
int vb_dial(struct event_base *base, const char *addr,
    const struct sockaddr_storage *ss, socklen_t sslen,
    const struct fam_conn_opts *opts, struct tp_conn **out, char **cause);
bool vb_hello_done(struct tp_conn *tc, const struct fam_hello_resp *resp);
int vb_listen(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, fam_accept_fn accept, void *arg,
    struct fam_listener **out, char **cause);
void vb_listener_free(struct fam_listener *fl);
int vb_connect(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, const struct fam_conn_handlers *h,
    void *arg, struct fam_conn **out, char **cause);

/* verbs-conn.c */
struct vb_conn *vb_conn_new(struct event_base *evb,
    const struct fam_conn_opts *opts, bool active);
int vb_conn_channel(struct vb_conn *c);
int vb_post_recvs(struct vb_conn *c, struct vb_rbuf *list);
int vb_conn_setup(struct vb_conn *c, struct ibv_context *ctx, unsigned nqps);
int vb_qp_create(struct vb_qp *q);
void vb_conn_param(struct vb_conn *c, struct rdma_conn_param *p,
    uint8_t *priv, const struct vb_priv *pd);
void vb_conn_destroy(struct vb_conn *c);
void vb_drained(struct vb_conn *c);
bool vb_all_drained(const struct vb_conn *c);
void vb_msg_done(struct vb_conn *c, struct vb_msg *m);

/* verbs-cq.c */
void vb_retire(struct vb_conn *c, struct vb_qp *q, struct vb_sqe *e,
    int status);
void vb_cq_poll(struct vb_conn *c);
void vb_cq_cb(evutil_socket_t fd, short what, void *arg);
void vb_poll_cb(evutil_socket_t fd, short what, void *arg);

/* verbs-dev.c */
int vb_memlock_gate(unsigned nqps, char **cause);
uint64_t vb_random64(void);
int vb_watch(struct event_base *evb, int fd, event_callback_fn cb, void *arg,
    struct event **out);
void vb_async_conn_cb(evutil_socket_t fd, short what, void *arg);
struct vb_dev *vb_dev_get(struct event_base *evb, struct ibv_context *ctx);
void vb_dev_put(struct vb_dev *dev);

/* verbs-post.c */
void vb_kick(struct vb_conn *c);
uint32_t vb_imm(const uint8_t *p);
void vb_post_all(struct vb_conn *c);
void vb_post_cb(evutil_socket_t fd, short what, void *arg);
void vb_out_queue(struct tp_conn *tc, struct tp_out *o, bool rx);
int vb_op_start(struct tp_conn *tc, struct tp_op *op);
int vb_flush(struct fam_conn *fc);

/* verbs-recv.c */
void vb_rx(struct vb_qp *q, const uint8_t *p, uint32_t n, bool has_imm,
    uint32_t imm);

#endif /* FAM_TRANSPORT_VERBS_H */
