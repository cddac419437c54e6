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
#include "config.h"

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

/* What every loop shares, under vb_lock (lock order: see the top). */
static pthread_mutex_t vb_lock = PTHREAD_MUTEX_INITIALIZER;
static LIST_HEAD(, vb_dev) vb_devs = LIST_HEAD_INITIALIZER(vb_devs);
static LIST_HEAD(, vb_conn) vb_conns = LIST_HEAD_INITIALIZER(vb_conns);
/* The memlock limit is low: said once, by whichever loop saw it first. */
static atomic_bool vb_memlock_warned;

static void vb_close(struct vb_conn *c, int err);
static void vb_kick(struct vb_conn *c);
static void vb_pump(struct vb_conn *c);
static void vb_arm_timer(struct vb_conn *c);
static void vb_post_all(struct vb_conn *c);
static void vb_violation(struct vb_conn *c, const struct fam_hdr *h,
    int status, int err, const char *fmt, ...) printflike(5, 6);
static void vb_cm_cb(evutil_socket_t fd, short what, void *arg);
static void vb_async_conn_cb(evutil_socket_t fd, short what, void *arg);
static void vb_cq_cb(evutil_socket_t fd, short what, void *arg);
static void vb_poll_cb(evutil_socket_t fd, short what, void *arg);
static void vb_timer_cb(evutil_socket_t fd, short what, void *arg);
static void vb_teardown_cb(evutil_socket_t fd, short what, void *arg);
static void vb_post_cb(evutil_socket_t fd, short what, void *arg);
static int vb_qp_connect(struct vb_qp *q, struct sockaddr *src);

/* Returns the verbs connection behind a transport connection. */
static struct vb_conn *
vb_conn_of(struct fam_conn *c)
{
	return (struct vb_conn *)c;
}

/* Returns the peer for log lines: address, and node name once known. */
static const char *
vb_who(struct vb_conn *c, char *buf, size_t len)
{
	if (c->node[0] != '\0')
		snprintf(buf, len, "%s (node %s)", c->peer, c->node);
	else
		snprintf(buf, len, "%s", c->peer);
	return buf;
}

/* ---- rdma_cm private data ---------------------------------------------- */

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

/* Encodes private data. */
static void
vb_priv_put(uint8_t out[VB_PRIV_LEN], const struct vb_priv *p)
{
	uint32_t magic = htobe32(FAM_PROTO_MAGIC), status = htobe32(p->status);
	uint64_t cookie = htobe64(p->cookie);

	memset(out, 0, VB_PRIV_LEN);
	memcpy(out, &magic, 4);
	out[4] = p->version;
	out[5] = p->index;
	out[6] = p->nqps;
	memcpy(out + 8, &status, 4);
	memcpy(out + 16, &cookie, 8);
}

/*
 * Decodes private data. Returns 0, -EPROTO (missing, short or not ours) or
 * -EPROTONOSUPPORT (another protocol version).
 */
static int
vb_priv_get(const void *in, size_t len, struct vb_priv *p)
{
	const uint8_t *b = in;
	uint32_t magic, status;
	uint64_t cookie;

	if (in == NULL || len < VB_PRIV_LEN)
		return -EPROTO;
	memcpy(&magic, b, 4);
	if (be32toh(magic) != FAM_PROTO_MAGIC)
		return -EPROTO;
	p->version = b[4];
	p->index = b[5];
	p->nqps = b[6];
	memcpy(&status, b + 8, 4);
	memcpy(&cookie, b + 16, 8);
	p->status = be32toh(status);
	p->cookie = be64toh(cookie);
	if (p->version != FAM_PROTO_VERSION)
		return -EPROTONOSUPPORT;
	return 0;
}

/* ---- limits and devices ------------------------------------------------ */

/* Returns true when the process holds CAP_IPC_LOCK (no memlock limit). */
static bool
vb_has_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data) < 0)
		return false;
	return (data[CAP_IPC_LOCK / 32].effective &
	    (1u << (CAP_IPC_LOCK % 32))) != 0;
}

/* Checks that bytes may be pinned; see transport.h. */
int
fam_memlock_check(uint64_t bytes, char **cause)
{
	struct rlimit rl;
	char lim[32], need[32];

	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	if ((uint64_t)rl.rlim_cur >= bytes || vb_has_ipc_lock())
		return 0;
	*cause = xasprintf("RLIMIT_MEMLOCK is %s but the verbs transport needs "
	    "to pin %s (registered memory cannot be swapped): raise it "
	    "(LimitMEMLOCK=infinity in famd.service, 'ulimit -l unlimited', "
	    "or memlock in /etc/security/limits.conf)",
	    fmt_bytes(lim, sizeof lim, rl.rlim_cur),
	    fmt_bytes(need, sizeof need, bytes));
	return -ENOMEM;
}

/* Bytes one connection of nqps QPs pins for its own buffers. */
static uint64_t
vb_conn_pinned(unsigned nqps)
{
	return (uint64_t)VB_RECV_BUFS(nqps) * VB_MSG_BUF +
	    (uint64_t)VB_SEND_BUFS * VB_MSG_BUF + (uint64_t)VB_SLABS * VB_SLAB;
}

/*
 * Checks the memlock limit before a listener or connection: an error when
 * not even one connection fits, a warning (once) when few do.
 */
static int
vb_memlock_gate(unsigned nqps, char **cause)
{
	uint64_t one = vb_conn_pinned(nqps);
	char *why = NULL;
	int err;

	err = fam_memlock_check(one, cause);
	if (err < 0)
		return err;
	if (!atomic_load(&vb_memlock_warned) &&
	    fam_memlock_check(one * 16, &why) < 0 &&
	    !atomic_exchange(&vb_memlock_warned, true)) {
		log_warn("verbs: %s for 16 connections; memory registrations "
		    "beyond the limit will fail", why);
	}
	free(why);
	return 0;
}

/* Returns a random 64-bit value (not zero). */
static uint64_t
vb_random64(void)
{
	uint64_t v = 0;

	while (v == 0)
		if (getrandom(&v, sizeof v, 0) != sizeof v)
			v = mono_ns() ^ ((uint64_t)getpid() << 40);
	return v;
}

/* Returns true for the events that name a QP, CQ or SRQ of a connection. */
static bool
vb_async_names_conn(enum ibv_event_type type)
{
	switch (type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_CQ_ERR:
	case IBV_EVENT_SRQ_ERR:
		return true;
	default:
		return false;
	}
}

/*
 * Closes c with err for an asynchronous event of its device: one naming
 * it (QP qp, its CQ or SRQ), or its port (port; 0: any) or device gone.
 * c's loop.
 */
static void
vb_async_close(struct vb_conn *c, enum ibv_event_type type, unsigned qp,
    uint8_t port, int err)
{
	const char *name = ibv_event_type_str(type);
	char who[160];

	if (vb_async_names_conn(type)) {
		if (c->state >= VBS_DRAINING)
			return;
		c->stats.completion_errors++;
		if (type == IBV_EVENT_CQ_ERR || type == IBV_EVENT_SRQ_ERR)
			log_notice("verbs: %s: %s; closing the connection",
			    vb_who(c, who, sizeof who), name);
		else
			log_notice("verbs: %s: QP %u: %s; closing the "
			    "connection", vb_who(c, who, sizeof who), qp, name);
	} else {
		if (port != 0 && (c->qps[0].id == NULL ||
		    c->qps[0].id->port_num != port))
			return;
		c->stats.completion_errors++;
	}
	vb_close(c, err);
}

/*
 * An asynchronous event read on dev's loop closes c: at once when c is
 * that loop's, else through c's own loop (ev_async). Under vb_lock.
 */
static void
vb_async_post(struct vb_dev *dev, struct vb_conn *c, enum ibv_event_type type,
    unsigned qp, uint8_t port, int err)
{
	if (c->evb == dev->evb) {
		vb_async_close(c, type, qp, port, err);
		return;
	}
	if (c->async_err == 0) {
		c->async_err = err;
		c->async_type = type;
		c->async_qp = qp;
		c->async_port = port;
	} else if (port == 0)
		c->async_port = 0;
	event_active(c->ev_async, EV_READ, 0);
}

/* An event another loop read for c: c's loop closes it. */
static void
vb_async_conn_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_conn *c = arg;
	enum ibv_event_type type;
	unsigned qp;
	uint8_t port;
	int err;

	pthread_mutex_lock(&vb_lock);
	err = c->async_err;
	type = c->async_type;
	qp = c->async_qp;
	port = c->async_port;
	c->async_err = 0;
	pthread_mutex_unlock(&vb_lock);
	if (err != 0)
		vb_async_close(c, type, qp, port, err);
}

/* Closes every connection on dev's device (port 0: any port) with err. */
static void
vb_dev_close_conns(struct vb_dev *dev, enum ibv_event_type type, uint8_t port,
    int err)
{
	struct vb_conn *c;

	pthread_mutex_lock(&vb_lock);
	LIST_FOREACH(c, &vb_conns, link)
		if (c->ctx == dev->ctx)
			vb_async_post(dev, c, type, 0, port, err);
	pthread_mutex_unlock(&vb_lock);
}

/*
 * Returns the connection owning a verbs object, checking it still lives.
 * Under vb_lock.
 */
static struct vb_conn *
vb_conn_find(struct vb_conn *want)
{
	struct vb_conn *c;

	LIST_FOREACH(c, &vb_conns, link)
		if (c == want)
			return c;
	return NULL;
}

/*
 * Reads a device's asynchronous events: QP, CQ, SRQ, port, device. The
 * objects an event names live until it is acknowledged (destroying them
 * waits for that), so qp_context and the like may be read until then.
 */
static void
vb_async_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_dev *dev = arg;
	struct ibv_async_event ev;
	struct vb_conn *c;
	struct vb_qp *q;

	while (ibv_get_async_event(dev->ctx, &ev) == 0) {
		switch (ev.event_type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_PATH_MIG_ERR:
			q = ev.element.qp->qp_context;
			pthread_mutex_lock(&vb_lock);
			c = q != NULL ? vb_conn_find(q->c) : NULL;
			if (c != NULL)
				vb_async_post(dev, c, ev.event_type, q->index,
				    0, -EIO);
			pthread_mutex_unlock(&vb_lock);
			break;
		case IBV_EVENT_CQ_ERR:
		case IBV_EVENT_SRQ_ERR:
			pthread_mutex_lock(&vb_lock);
			c = vb_conn_find(ev.event_type == IBV_EVENT_CQ_ERR ?
			    ev.element.cq->cq_context :
			    ev.element.srq->srq_context);
			if (c != NULL)
				vb_async_post(dev, c, ev.event_type, 0, 0, -EIO);
			pthread_mutex_unlock(&vb_lock);
			break;
		case IBV_EVENT_PORT_ERR: {
			struct ibv_port_attr pa;

			/* Read late (a quick bounce): the QPs may have lived. */
			if (ibv_query_port(dev->ctx, (uint8_t)ev.element.port_num,
			    &pa) == 0 && pa.state == IBV_PORT_ACTIVE) {
				log_info("verbs: %s port %d went down and is up "
				    "again", ibv_get_device_name(dev->ctx->device),
				    ev.element.port_num);
				break;
			}
			log_warn("verbs: %s port %d is down; closing its "
			    "connections", ibv_get_device_name(dev->ctx->device),
			    ev.element.port_num);
			vb_dev_close_conns(dev, ev.event_type,
			    (uint8_t)ev.element.port_num, -ENETDOWN);
			break;
		}
		case IBV_EVENT_DEVICE_FATAL:
			log_err("verbs: %s: fatal device error; closing every "
			    "connection on it",
			    ibv_get_device_name(dev->ctx->device));
			vb_dev_close_conns(dev, ev.event_type, 0, -ENODEV);
			break;
		case IBV_EVENT_QP_LAST_WQE_REACHED:
		case IBV_EVENT_SQ_DRAINED:
		case IBV_EVENT_COMM_EST:
		case IBV_EVENT_SRQ_LIMIT_REACHED:
			log_debug("verbs: %s: %s",
			    ibv_get_device_name(dev->ctx->device),
			    ibv_event_type_str(ev.event_type));
			break;
		default:
			log_info("verbs: %s: %s",
			    ibv_get_device_name(dev->ctx->device),
			    ibv_event_type_str(ev.event_type));
			break;
		}
		ibv_ack_async_event(&ev);
	}
}

/*
 * Takes a reference on the device of ctx for loop evb, which watches its
 * async events (each loop using a device watches it: whichever reads an
 * event handles it).
 */
static struct vb_dev *
vb_dev_get(struct event_base *evb, struct ibv_context *ctx)
{
	struct ibv_device_attr attr;
	struct vb_dev *dev;
	bool first = true;

	pthread_mutex_lock(&vb_lock);
	LIST_FOREACH(dev, &vb_devs, link) {
		if (dev->ctx != ctx)
			continue;
		if (dev->evb == evb) {
			dev->refs++;
			pthread_mutex_unlock(&vb_lock);
			return dev;
		}
		first = false;
	}
	dev = calloc(1, sizeof *dev);
	if (dev == NULL)
		goto out_unlock;
	if (ibv_query_device(ctx, &attr) != 0)
		goto out_free;
	dev->ctx = ctx;
	dev->evb = evb;
	dev->refs = 1;
	dev->rd_atom = attr.max_qp_rd_atom < attr.max_qp_init_rd_atom ?
	    attr.max_qp_rd_atom : attr.max_qp_init_rd_atom;
	if (dev->rd_atom > VB_RD_ATOMIC)
		dev->rd_atom = VB_RD_ATOMIC;
	if (dev->rd_atom < 1)
		dev->rd_atom = 1;
	dev->max_cqe = attr.max_cqe;
	if (first && fd_set_nonblock(ctx->async_fd) == 0) {
		struct ibv_async_event ev;

		/* Events from before anyone here watched: nothing of ours. */
		while (ibv_get_async_event(ctx, &ev) == 0) {
			log_debug("verbs: %s: earlier %s ignored",
			    ibv_get_device_name(ctx->device),
			    ibv_event_type_str(ev.event_type));
			ibv_ack_async_event(&ev);
		}
	}
	if (fd_set_nonblock(ctx->async_fd) < 0 ||
	    (dev->ev = event_new(evb, ctx->async_fd, EV_READ | EV_PERSIST,
	    vb_async_cb, dev)) == NULL || event_add(dev->ev, NULL) < 0) {
		if (dev->ev != NULL)
			event_free(dev->ev);
		goto out_free;
	}
	LIST_INSERT_HEAD(&vb_devs, dev, link);
	pthread_mutex_unlock(&vb_lock);
	return dev;

out_free:
	free(dev);
	dev = NULL;
out_unlock:
	pthread_mutex_unlock(&vb_lock);
	return dev;
}

/* Drops a device reference (on the loop that took it). */
static void
vb_dev_put(struct vb_dev *dev)
{
	bool last;

	if (dev == NULL)
		return;
	pthread_mutex_lock(&vb_lock);
	last = --dev->refs == 0;
	if (last)
		LIST_REMOVE(dev, link);
	pthread_mutex_unlock(&vb_lock);
	if (!last)
		return;
	event_free(dev->ev);
	free(dev);
}

/* ---- the table of two-sided requests in flight ------------------------- */

/* Finds the request in flight with id, or NULL. */
static struct vb_op *
vb_table_find(struct vb_conn *c, uint64_t id)
{
	struct vb_op *op = c->table[id & c->table_mask];

	while (op != NULL && op->id != id)
		op = op->hnext;
	return op;
}

/* Adds a request to the table. */
static void
vb_table_add(struct vb_conn *c, struct vb_op *op)
{
	struct vb_op **slot = &c->table[op->id & c->table_mask];

	op->hnext = *slot;
	*slot = op;
}

/* Removes a request from the table. */
static void
vb_table_remove(struct vb_conn *c, struct vb_op *op)
{
	struct vb_op **pp = &c->table[op->id & c->table_mask];

	while (*pp != NULL && *pp != op)
		pp = &(*pp)->hnext;
	if (*pp == op)
		*pp = op->hnext;
	op->hnext = NULL;
}

/* ---- connection resources ---------------------------------------------- */

/* Allocates a connection (no verbs resources yet) with its events. */
static struct vb_conn *
vb_conn_new(struct event_base *evb, const struct fam_conn_opts *opts,
    bool active)
{
	struct vb_conn *c = calloc(1, sizeof *c);
	uint32_t size = 16;

	if (c == NULL)
		return NULL;
	c->base.ops = &verbs_transport_ops;
	c->evb = evb;
	c->active = active;
	tp_opts_fill(&c->opts, opts);
	if (c->opts.qps_per_peer > VB_MAX_QPS)
		c->opts.qps_per_peer = VB_MAX_QPS;
	if (c->opts.inject_error_ppm > 1000000)
		c->opts.inject_error_ppm = 1000000;
	c->timeout_ns = (uint64_t)c->opts.op_timeout_ms * 1000000u;
	while (size < 2 * c->opts.max_outstanding + 2 && size < (1u << 20))
		size *= 2;
	c->table = calloc(size, sizeof *c->table);
	c->table_mask = size - 1;
	c->next_id = 1;
	c->rng = vb_random64();
	TAILQ_INIT(&c->ops);
	TAILQ_INIT(&c->waitq);
	TAILQ_INIT(&c->mrs);
	for (unsigned i = 0; i < VB_MAX_QPS; i++) {
		c->qps[i].c = c;
		c->qps[i].index = i;
		TAILQ_INIT(&c->qps[i].outq);
	}
	c->ev_timer = evtimer_new(evb, vb_timer_cb, c);
	c->ev_defer = event_new(evb, -1, 0, vb_teardown_cb, c);
	c->ev_post = event_new(evb, -1, 0, vb_post_cb, c);
	c->ev_poll = event_new(evb, -1, 0, vb_poll_cb, c);
	c->ev_async = event_new(evb, -1, 0, vb_async_conn_cb, c);
	if (c->table == NULL || c->ev_timer == NULL || c->ev_defer == NULL ||
	    c->ev_post == NULL || c->ev_poll == NULL || c->ev_async == NULL) {
		if (c->ev_timer != NULL)
			event_free(c->ev_timer);
		if (c->ev_defer != NULL)
			event_free(c->ev_defer);
		if (c->ev_post != NULL)
			event_free(c->ev_post);
		if (c->ev_poll != NULL)
			event_free(c->ev_poll);
		if (c->ev_async != NULL)
			event_free(c->ev_async);
		free(c->table);
		free(c);
		return NULL;
	}
	pthread_mutex_lock(&vb_lock);
	LIST_INSERT_HEAD(&vb_conns, c, link);
	pthread_mutex_unlock(&vb_lock);
	return c;
}

/* Gives the connection its own rdma_cm event channel, in the loop. */
static int
vb_conn_channel(struct vb_conn *c)
{
	c->cmch = rdma_create_event_channel();
	if (c->cmch == NULL)
		return -errno;
	if (fd_set_nonblock(c->cmch->fd) < 0)
		return -errno;
	c->ev_cm = event_new(c->evb, c->cmch->fd, EV_READ | EV_PERSIST,
	    vb_cm_cb, c);
	if (c->ev_cm == NULL || event_add(c->ev_cm, NULL) < 0)
		return -ENOMEM;
	return 0;
}

/* Allocates page-aligned memory and registers it. */
static int
vb_buf_reg(struct vb_conn *c, size_t len, int access, uint8_t **mem,
    struct ibv_mr **mr)
{
	void *p = NULL;
	int err;

	err = posix_memalign(&p, (size_t)sysconf(_SC_PAGESIZE), len);
	if (err != 0)
		return -err;
	memset(p, 0, len);
	*mr = ibv_reg_mr(c->pd, p, len, access);
	if (*mr == NULL) {
		err = errno != 0 ? -errno : -ENOMEM;
		free(p);
		return err;
	}
	*mem = p;
	return 0;
}

/* Posts receive buffers (a chain) on the SRQ. Returns 0 or -errno. */
static int
vb_post_recvs(struct vb_conn *c, struct vb_rbuf *list)
{
	struct ibv_recv_wr wrs[VB_POLL_BATCH], *bad = NULL;
	struct ibv_sge sges[VB_POLL_BATCH];
	int n = 0, err;

	while (list != NULL) {
		struct vb_rbuf *rb = list;

		list = rb->next;
		rb->next = NULL;
		sges[n].addr = (uintptr_t)rb->buf;
		sges[n].length = VB_MSG_BUF;
		sges[n].lkey = c->rmr->lkey;
		wrs[n].wr_id = (uintptr_t)rb;
		wrs[n].sg_list = &sges[n];
		wrs[n].num_sge = 1;
		wrs[n].next = NULL;
		if (n > 0)
			wrs[n - 1].next = &wrs[n];
		if (++n == VB_POLL_BATCH || list == NULL) {
			err = ibv_post_srq_recv(c->srq, wrs, &bad);
			if (err != 0)
				return -err;
			n = 0;
		}
	}
	return 0;
}

/*
 * Creates what every QP of the connection shares, on the device of ctx:
 * PD, completion channel, CQ, SRQ, and the registered receive, send and
 * bounce buffers (receives posted). nqps sizes the CQ and the SRQ.
 */
static int
vb_conn_setup(struct vb_conn *c, struct ibv_context *ctx, unsigned nqps)
{
	struct ibv_srq_init_attr sattr = { 0 };
	struct vb_rbuf *list = NULL;
	int cqe, err;

	c->nqps = nqps;
	pthread_mutex_lock(&vb_lock);
	c->ctx = ctx; /* other loops' device events look for it */
	pthread_mutex_unlock(&vb_lock);
	c->dev = vb_dev_get(c->evb, ctx);
	if (c->dev == NULL)
		return -ENOMEM;
	c->rd_atom = c->dev->rd_atom;
	c->pd = ibv_alloc_pd(ctx);
	if (c->pd == NULL) {
		err = -ENOMEM;
		goto out_dev;
	}
	c->cchan = ibv_create_comp_channel(ctx);
	if (c->cchan == NULL) {
		err = errno != 0 ? -errno : -ENOMEM;
		goto out_pd;
	}
	if (fd_set_nonblock(c->cchan->fd) < 0) {
		err = -errno;
		goto out_cchan;
	}
	cqe = (int)(nqps * VB_SQ_DEPTH + VB_RECV_BUFS(nqps) + 16);
	if (c->dev->max_cqe > 0 && cqe > c->dev->max_cqe)
		cqe = c->dev->max_cqe;
	c->cq = ibv_create_cq(ctx, cqe, c, c->cchan, 0);
	if (c->cq == NULL) {
		err = errno != 0 ? -errno : -ENOMEM;
		goto out_cchan;
	}
	if ((err = ibv_req_notify_cq(c->cq, 0)) != 0) {
		err = -err;
		goto out_cq;
	}
	sattr.srq_context = c;
	sattr.attr.max_wr = VB_RECV_BUFS(nqps);
	sattr.attr.max_sge = 1;
	c->srq = ibv_create_srq(c->pd, &sattr);
	if (c->srq == NULL) {
		err = errno != 0 ? -errno : -ENOMEM;
		goto out_cq;
	}
	/* Receive buffers: written by our HCA only. */
	c->nrbufs = VB_RECV_BUFS(nqps);
	c->rlen = (size_t)c->nrbufs * VB_MSG_BUF;
	err = vb_buf_reg(c, c->rlen, IBV_ACCESS_LOCAL_WRITE, &c->rmem, &c->rmr);
	if (err < 0)
		goto out_srq;
	/* Send buffers: only read by the HCA. */
	c->slen = (size_t)VB_SEND_BUFS * VB_MSG_BUF;
	err = vb_buf_reg(c, c->slen, 0, &c->smem, &c->smr);
	if (err < 0)
		goto out_rmr;
	/* Bounce slabs: targets of RDMA READ, sources of RDMA WRITE. */
	c->blen = (size_t)VB_SLABS * VB_SLAB;
	err = vb_buf_reg(c, c->blen, IBV_ACCESS_LOCAL_WRITE, &c->bmem, &c->bmr);
	if (err < 0)
		goto out_smr;
	c->rbufs = calloc(c->nrbufs, sizeof *c->rbufs);
	c->sbufs = calloc(VB_SEND_BUFS, sizeof *c->sbufs);
	c->slabs = calloc(VB_SLABS, sizeof *c->slabs);
	if (c->rbufs == NULL || c->sbufs == NULL || c->slabs == NULL) {
		err = -ENOMEM;
		goto out_arrays;
	}
	for (unsigned i = 0; i < VB_SEND_BUFS; i++) {
		c->sbufs[i].buf = c->smem + (size_t)i * VB_MSG_BUF;
		c->sbufs[i].next = c->sfree;
		c->sfree = &c->sbufs[i];
	}
	for (unsigned i = 0; i < VB_SLABS; i++) {
		c->slabs[i].buf = c->bmem + (size_t)i * VB_SLAB;
		c->slabs[i].next = c->bfree;
		c->bfree = &c->slabs[i];
	}
	c->nbfree = VB_SLABS;
	for (unsigned i = 0; i < c->nrbufs; i++) {
		c->rbufs[i].tag = VB_TAG_RECV;
		c->rbufs[i].buf = c->rmem + (size_t)i * VB_MSG_BUF;
		c->rbufs[i].next = list;
		list = &c->rbufs[i];
	}
	err = vb_post_recvs(c, list);
	if (err < 0)
		goto out_arrays;
	c->ev_cq = event_new(c->evb, c->cchan->fd, EV_READ | EV_PERSIST,
	    vb_cq_cb, c);
	if (c->ev_cq == NULL || event_add(c->ev_cq, NULL) < 0) {
		err = -ENOMEM;
		goto out_event;
	}
	return 0;

out_event:
	if (c->ev_cq != NULL)
		event_free(c->ev_cq);
	c->ev_cq = NULL;
out_arrays:
	free(c->rbufs);
	free(c->sbufs);
	free(c->slabs);
	c->rbufs = NULL;
	c->sbufs = c->sfree = NULL;
	c->slabs = c->bfree = NULL;
	ibv_dereg_mr(c->bmr);
	free(c->bmem);
	c->bmr = NULL;
	c->bmem = NULL;
out_smr:
	ibv_dereg_mr(c->smr);
	free(c->smem);
	c->smr = NULL;
	c->smem = NULL;
out_rmr:
	ibv_dereg_mr(c->rmr);
	free(c->rmem);
	c->rmr = NULL;
	c->rmem = NULL;
out_srq:
	ibv_destroy_srq(c->srq);
	c->srq = NULL;
out_cq:
	ibv_destroy_cq(c->cq);
	c->cq = NULL;
out_cchan:
	ibv_destroy_comp_channel(c->cchan);
	c->cchan = NULL;
out_pd:
	ibv_dealloc_pd(c->pd);
	c->pd = NULL;
out_dev:
	vb_dev_put(c->dev);
	c->dev = NULL;
	return err;
}

/* Creates QP q on its rdma_cm id with the connection's PD, CQ and SRQ. */
static int
vb_qp_create(struct vb_qp *q)
{
	struct vb_conn *c = q->c;
	struct ibv_qp_init_attr attr = {
		.qp_context = q,
		.send_cq = c->cq,
		.recv_cq = c->cq,
		.srq = c->srq,
		.cap = { .max_send_wr = VB_SQ_DEPTH,
			.max_send_sge = VB_MAX_SGE,
			.max_recv_wr = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};

	if (q->id->verbs != c->ctx)
		return -EXDEV; /* every QP must share the PD: one device */
	q->ring = calloc(VB_SQ_DEPTH, sizeof *q->ring);
	if (q->ring == NULL)
		return -ENOMEM;
	if (rdma_create_qp(q->id, c->pd, &attr) != 0) {
		int err = -errno;

		free(q->ring);
		q->ring = NULL;
		return err;
	}
	q->qp = q->id->qp;
	q->qp_num = q->qp->qp_num;
	for (unsigned i = 0; i < VB_SQ_DEPTH; i++) {
		q->ring[i].tag = VB_TAG_SQ;
		q->ring[i].qp = q;
	}
	return 0;
}

/* Fills the connection parameters of a connect or an accept. */
static void
vb_conn_param(struct vb_conn *c, struct rdma_conn_param *p, uint8_t *priv,
    const struct vb_priv *pd)
{
	memset(p, 0, sizeof *p);
	vb_priv_put(priv, pd);
	p->private_data = priv;
	p->private_data_len = VB_PRIV_LEN;
	p->initiator_depth = (uint8_t)c->rd_atom;
	p->responder_resources = (uint8_t)c->rd_atom;
	p->retry_count = 7;
	p->rnr_retry_count = 7; /* receivers repost at once: wait, never fail */
}

/*
 * Destroys every verbs resource, paired with its creation: QPs, SRQ, CQ,
 * completion channel, MRs (the user's left over, then ours), PD, rdma_cm
 * ids, event channel. The send queues have been drained (or given up on).
 * Unlinked first: no other loop finds it (and activates ev_async) after.
 */
static void
vb_conn_destroy(struct vb_conn *c)
{
	struct vb_mr *m;

	pthread_mutex_lock(&vb_lock);
	LIST_REMOVE(c, link);
	pthread_mutex_unlock(&vb_lock);

	for (unsigned i = 0; i < VB_MAX_QPS; i++) {
		struct vb_qp *q = &c->qps[i];

		if (q->qp != NULL)
			rdma_destroy_qp(q->id);
		q->qp = NULL;
	}
	if (c->srq != NULL)
		ibv_destroy_srq(c->srq);
	if (c->ev_cq != NULL)
		event_free(c->ev_cq);
	if (c->cq != NULL) {
		if (c->cq_unacked > 0)
			ibv_ack_cq_events(c->cq, c->cq_unacked);
		ibv_destroy_cq(c->cq);
	}
	if (c->cchan != NULL)
		ibv_destroy_comp_channel(c->cchan);
	while ((m = TAILQ_FIRST(&c->mrs)) != NULL) {
		TAILQ_REMOVE(&c->mrs, m, link);
		ibv_dereg_mr(m->mr);
		free(m);
	}
	if (c->rmr != NULL)
		ibv_dereg_mr(c->rmr);
	if (c->smr != NULL)
		ibv_dereg_mr(c->smr);
	if (c->bmr != NULL)
		ibv_dereg_mr(c->bmr);
	if (c->pd != NULL)
		ibv_dealloc_pd(c->pd);
	vb_dev_put(c->dev);
	for (unsigned i = 0; i < VB_MAX_QPS; i++) {
		struct vb_qp *q = &c->qps[i];

		if (q->id != NULL)
			rdma_destroy_id(q->id);
		free(q->ring);
		if (q->rx.owned)
			free(q->rx.buf);
	}
	if (c->ev_cm != NULL)
		event_free(c->ev_cm);
	if (c->cmch != NULL)
		rdma_destroy_event_channel(c->cmch);
	free(c->rmem);
	free(c->smem);
	free(c->bmem);
	free(c->rbufs);
	free(c->sbufs);
	free(c->slabs);
	event_free(c->ev_timer);
	event_free(c->ev_defer);
	event_free(c->ev_post);
	event_free(c->ev_poll);
	event_free(c->ev_async);
	free(c->table);
	explicit_bzero(c->opts.secret, sizeof c->opts.secret);
	explicit_bzero(c->opts.hello.secret, sizeof c->opts.hello.secret);
	free(c);
}

/* ---- connection life --------------------------------------------------- */

/* Schedules the deadline timer for the earliest thing that can expire. */
static void
vb_arm_timer(struct vb_conn *c)
{
	uint64_t next = 0, now, d;
	struct vb_op *op;
	struct timeval tv;

	if (c->state == VBS_CLOSED || evtimer_pending(c->ev_timer, NULL))
		return;
	op = TAILQ_FIRST(&c->ops);
	if (op != NULL && c->state < VBS_DRAINING)
		next = op->deadline;
	if ((!c->active && c->state == VBS_HELLO) || c->state == VBS_CLOSING ||
	    c->state == VBS_DRAINING)
		if (next == 0 || c->deadline < next)
			next = c->deadline;
	if (next == 0)
		return;
	now = mono_ns();
	d = next > now ? next - now : 0;
	tv.tv_sec = (time_t)(d / 1000000000u);
	tv.tv_usec = (suseconds_t)(d % 1000000000u / 1000u + 1);
	evtimer_add(c->ev_timer, &tv);
}

/* The send queues are drained (or given up on): schedule the teardown. */
static void
vb_drained(struct vb_conn *c)
{
	if (c->state == VBS_CLOSED)
		return;
	c->state = VBS_CLOSED;
	event_del(c->ev_timer);
	event_active(c->ev_defer, EV_WRITE, 0);
}

/* Returns true once every QP's send queue has flushed its drain marker. */
static bool
vb_all_drained(const struct vb_conn *c)
{
	for (unsigned i = 0; i < VB_MAX_QPS; i++)
		if (c->qps[i].drain_posted && !c->qps[i].drained)
			return false;
	return true;
}

/* Posts the drain marker on q's send queue, if anything is posted there. */
static void
vb_qp_drain(struct vb_qp *q)
{
	struct ibv_send_wr wr = { 0 }, *bad = NULL;
	struct vb_sqe *e;
	uint32_t slot;

	if (q->qp == NULL || q->used == 0)
		return;
	slot = (q->head + q->used) % VB_SQ_DEPTH;
	e = &q->ring[slot];
	e->kind = SQE_DRAIN;
	e->sbuf = NULL;
	e->msg = NULL;
	e->op = NULL;
	e->close_after = false;
	wr.wr_id = (uintptr_t)e;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(q->qp, &wr, &bad) != 0)
		return; /* nothing will flush: the drain deadline decides */
	q->used++;
	q->drain_posted = true;
}

/*
 * Ends the connection: every QP to the error state (rdma_disconnect tells
 * the peer), then the send queues drain; the teardown and its callbacks run
 * from the loop.
 */
static void
vb_close(struct vb_conn *c, int err)
{
	if (c->state >= VBS_DRAINING)
		return;
	c->state = VBS_DRAINING;
	c->close_err = err;
	if (c->op_err == 0)
		c->op_err = err == -ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET;
	if (c->counted_hello && c->l != NULL) {
		c->l->nhello--;
		c->counted_hello = false;
	}
	event_del(c->ev_timer);
	for (unsigned i = 0; i < VB_MAX_QPS; i++) {
		struct vb_qp *q = &c->qps[i];
		struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

		if (q->id != NULL && (q->state == VQ_UP ||
		    q->state == VQ_CONNECT))
			(void)rdma_disconnect(q->id);
		if (q->qp != NULL)
			(void)ibv_modify_qp(q->qp, &attr, IBV_QP_STATE);
		q->state = q->id != NULL ? VQ_DOWN : VQ_IDLE;
		vb_qp_drain(q);
	}
	if (vb_all_drained(c)) {
		vb_drained(c);
		return;
	}
	c->deadline = mono_ns() + (uint64_t)VB_DRAIN_MS * 1000000u;
	vb_arm_timer(c);
}

/* Frees an op and what it holds (bounce slabs go back to the pool). */
static void
vb_op_free(struct vb_conn *c, struct vb_op *op)
{
	while (op->slabs != NULL) {
		struct vb_slab *s = op->slabs;

		op->slabs = s->next;
		s->next = c->bfree;
		c->bfree = s;
		c->nbfree++;
	}
	free(op->payload);
	free(op);
}

/* Completes an op with status: removes it, calls done, frees it. */
static void
vb_op_finish(struct vb_conn *c, struct vb_op *op, int status,
    const uint8_t *payload, uint32_t len)
{
	TAILQ_REMOVE(&c->ops, op, all);
	if (op->state == OPS_WAITING)
		TAILQ_REMOVE(&c->waitq, op, wait);
	else if (c->nflight > 0)
		c->nflight--;
	c->nops--;
	c->stats.outstanding = c->nops;
	if (op->done != NULL)
		op->done(op->ctx, status, payload, len);
	vb_op_free(c, op);
	if (c->state == VBS_OPEN)
		vb_pump(c);
}

/* Finishes a message that leaves the queue: tells whoever waits, frees it. */
static void
vb_msg_done(struct vb_conn *c, struct vb_msg *m)
{
	size_t hdr = m->total - m->payload_len;
	size_t sent = m->posted > hdr ? m->posted - hdr : 0;

	if (m->sent != NULL)
		m->sent(m->ctx);
	if (m->holding && c->h.release != NULL)
		c->h.release(c->harg, m->hold, false, (uint32_t)sent);
	free(m->copy);
	free(m);
}

/* Tears a closed connection down and frees it (deferred event). */
static void
vb_teardown_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_conn *c = arg;
	struct vb_op *op;

	for (unsigned i = 0; i < VB_MAX_QPS; i++) {
		struct vb_qp *q = &c->qps[i];
		struct vb_msg *m;

		/*
		 * Zero-copy messages whose sends never completed (the drain
		 * deadline passed): the QP is in the error state, their
		 * payload is read no more.
		 */
		for (uint32_t k = 0; q->ring != NULL && k < q->used; k++) {
			struct vb_sqe *x = &q->ring[(q->head + k) %
			    VB_SQ_DEPTH];

			if (x->kind == SQE_SEND && x->msg != NULL) {
				m = x->msg;
				x->msg = NULL;
				vb_msg_done(c, m);
			}
		}
		while ((m = TAILQ_FIRST(&q->outq)) != NULL) {
			TAILQ_REMOVE(&q->outq, m, link);
			if (m->data)
				free(m);
			else
				vb_msg_done(c, m);
		}
		if (q->rx.holding) {
			q->rx.holding = false;
			if (c->h.release != NULL)
				c->h.release(c->harg, q->rx.hold, true,
				    q->rx.got);
		}
	}
	while ((op = TAILQ_FIRST(&c->ops)) != NULL) {
		TAILQ_REMOVE(&c->ops, op, all);
		if (op->state == OPS_WAITING)
			TAILQ_REMOVE(&c->waitq, op, wait);
		c->nops--;
		c->stats.outstanding = c->nops;
		if (op->done != NULL)
			op->done(op->ctx, c->op_err, NULL, 0);
		vb_op_free(c, op);
	}
	if (c->h.closed != NULL)
		c->h.closed(&c->base, c->close_err, c->harg);
	vb_conn_destroy(c);
}

/* ---- output ------------------------------------------------------------ */

/*
 * Returns the registration a reply's payload can be sent from without a
 * copy: mr, when it is a verbs registration in c's protection domain that
 * covers every iovec; NULL otherwise (the payload is copied).
 */
static struct ibv_mr *
vb_zc_mr(struct vb_conn *c, struct fam_mr *mr, const struct iovec *iov,
    int iovcnt)
{
	struct vb_mr *m = (struct vb_mr *)mr;
	uintptr_t lo, hi;

	if (mr == NULL || mr->ops != &verbs_transport_ops || m->mr == NULL ||
	    m->mr->pd != c->pd)
		return NULL;
	lo = (uintptr_t)m->mr->addr;
	hi = lo + m->mr->length;
	for (int i = 0; i < iovcnt; i++) {
		uintptr_t p = (uintptr_t)iov[i].iov_base;

		if (iov[i].iov_len > 0 && (p < lo || p > hi ||
		    iov[i].iov_len > hi - p))
			return NULL;
	}
	return m->mr;
}

/* Schedules posting queued work at the end of the current callbacks. */
static void
vb_kick(struct vb_conn *c)
{
	if (!c->post_pending && c->state < VBS_DRAINING) {
		c->post_pending = true;
		event_active(c->ev_post, EV_WRITE, 0);
	}
}

/* Picks the QP for a new message or operation (round robin over UP). */
static struct vb_qp *
vb_pick_qp(struct vb_conn *c)
{
	for (unsigned n = 0; n < c->nqps; n++) {
		struct vb_qp *q = &c->qps[c->rr++ % c->nqps];

		if (q->state == VQ_UP)
			return q;
	}
	return &c->qps[0];
}

/* Allocates a message with room for niov payload iovecs. */
static struct vb_msg *
vb_msg_new(int niov)
{
	struct vb_msg *m = calloc(1, sizeof *m +
	    (size_t)(niov + 1) * sizeof(struct iovec));

	if (m == NULL)
		return NULL;
	m->iov[0].iov_base = m->inl;
	m->iov[0].iov_len = FAM_PROTO_HDR_LEN;
	m->iovcnt = 1;
	return m;
}

/* Queues a message on q (its length computed from its iovecs). */
static void
vb_msg_queue(struct vb_conn *c, struct vb_qp *q, struct vb_msg *m)
{
	m->total = 0;
	for (int i = 0; i < m->iovcnt; i++)
		m->total += m->iov[i].iov_len;
	m->payload_len = m->total - FAM_PROTO_HDR_LEN;
	TAILQ_INSERT_TAIL(&q->outq, m, link);
	vb_kick(c);
}

/*
 * Takes the next piece of m's remaining payload, max bytes at most: sets
 * *p to it and returns its length (0 when nothing is left).
 */
static size_t
vb_msg_take(struct vb_msg *m, size_t max, uint8_t **p)
{
	struct iovec *v;
	size_t take;

	while (m->iovpos < m->iovcnt && m->iovoff == m->iov[m->iovpos].iov_len) {
		m->iovpos++; /* an empty piece */
		m->iovoff = 0;
	}
	if (m->iovpos >= m->iovcnt || max == 0)
		return 0;
	v = &m->iov[m->iovpos];
	take = v->iov_len - m->iovoff;
	if (take > max)
		take = max;
	*p = (uint8_t *)v->iov_base + m->iovoff;
	m->iovoff += take;
	if (m->iovoff == v->iov_len) {
		m->iovpos++;
		m->iovoff = 0;
	}
	m->posted += take;
	return take;
}

/* Copies up to len bytes of m's remaining data into dst. */
static size_t
vb_msg_gather(struct vb_msg *m, uint8_t *dst, size_t len)
{
	size_t n = 0, take;
	uint8_t *p;

	while ((take = vb_msg_take(m, len - n, &p)) > 0) {
		memcpy(dst + n, p, take);
		n += take;
	}
	return n;
}

/*
 * Zero-copy: describes up to max SGEs (len bytes at most) of m's remaining
 * payload, in m's registration; returns the bytes they cover.
 */
static size_t
vb_msg_sges(struct vb_msg *m, struct ibv_sge *sg, unsigned max, size_t len,
    unsigned *nsg)
{
	size_t n = 0, take;
	uint8_t *p;

	while (*nsg < max && (take = vb_msg_take(m, len - n, &p)) > 0) {
		sg[*nsg].addr = (uintptr_t)p;
		sg[*nsg].length = (uint32_t)take;
		sg[*nsg].lkey = m->zmr->lkey;
		(*nsg)++;
		n += take;
	}
	return n;
}

/*
 * The immediate data of a message's first SEND (host byte order): a
 * marker, the message type and its header flags, from the header at p.
 */
static uint32_t
vb_imm(const uint8_t *p)
{
	/* Header bytes: magic (4), version, type, flags (2, big-endian). */
	return VB_IMM_MARK | (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7];
}

/* Returns the slot for the next WR of q (the caller fills it). */
static struct vb_sqe *
vb_slot(struct vb_qp *q, uint32_t k)
{
	return &q->ring[(q->head + q->used + k) % VB_SQ_DEPTH];
}

/* A message is fully posted: its request is in flight, its reply out. */
static void
vb_msg_posted(struct vb_conn *c, struct vb_msg *m)
{
	c->stats.msgs_out++;
	c->stats.bytes_out += m->payload_len;
	if (m->op != NULL) {
		m->op->state = OPS_SENT;
		vb_table_add(c, m->op);
	}
	/* Zero-copy: finished when its last send retires (vb_retire()). */
	if (m->zmr == NULL)
		vb_msg_done(c, m);
}

/*
 * Builds and posts, as one chain, what q's output queue allows: message
 * fragments while send buffers and ring slots last, one-sided operations
 * whole (with their bounce slabs). Keeps FIFO order per QP. A zero-copy
 * message's header goes in a send buffer, its payload straight from its
 * registration (further SENDs need no send buffer); its last fragment's
 * slot holds it until that send retires.
 */
static void
vb_qp_post(struct vb_qp *q, bool api)
{
	struct vb_conn *c = q->c;
	struct ibv_send_wr wrs[VB_SQ_DEPTH], *bad = NULL;
	struct ibv_sge sges[VB_SQ_DEPTH][VB_MAX_SGE];
	struct vb_msg *done[VB_SQ_DEPTH];
	uint32_t done_slot[VB_SQ_DEPTH];
	uint32_t n = 0, room = VB_SQ_DEPTH - 1 - q->used;
	unsigned ndone = 0;
	struct vb_msg *m;
	char who[160];
	int err;

	while ((m = TAILQ_FIRST(&q->outq)) != NULL && n < room) {
		/*
		 * From an API call (fam_conn_flush), a response stops the
		 * chain: posting it could call its `sent` there. It and what
		 * follows go with the deferred post, in order.
		 */
		if (api && m->resp)
			break;
		if (m->data) {
			struct vb_op *op = m->op;
			bool rd = op->kind == OP_READ;
			uint32_t parts = op->lmr != NULL ? 1 :
			    (op->rw.len + VB_SLAB - 1) / VB_SLAB;

			if (parts > room - n ||
			    (op->lmr == NULL && parts > c->nbfree))
				break;
			for (uint32_t k = 0; k < parts; k++) {
				struct vb_sqe *e = vb_slot(q, n);
				struct ibv_send_wr *w = &wrs[n];
				uint32_t off = k * VB_SLAB;
				uint32_t len = op->lmr != NULL ? op->rw.len :
				    (op->rw.len - off < VB_SLAB ?
				    op->rw.len - off : VB_SLAB);

				memset(w, 0, sizeof *w);
				if (op->lmr != NULL) {
					sges[n][0].addr = (uintptr_t)(rd ?
					    op->dst : op->src);
					sges[n][0].lkey = op->lmr->lkey;
				} else {
					struct vb_slab *s = c->bfree, **pp;

					c->bfree = s->next;
					c->nbfree--;
					s->next = NULL;
					for (pp = &op->slabs; *pp != NULL;
					    pp = &(*pp)->next)
						;
					*pp = s;
					if (!rd)
						memcpy(s->buf, (const uint8_t *)
						    op->src + off, len);
					sges[n][0].addr = (uintptr_t)s->buf;
					sges[n][0].lkey = c->bmr->lkey;
				}
				sges[n][0].length = len;
				w->wr_id = (uintptr_t)e;
				w->sg_list = sges[n];
				w->num_sge = 1;
				w->opcode = rd ? IBV_WR_RDMA_READ :
				    IBV_WR_RDMA_WRITE;
				w->wr.rdma.remote_addr = op->raddr + off;
				w->wr.rdma.rkey = op->rkey;
				e->kind = SQE_DATA;
				e->op = op;
				e->sbuf = NULL;
				e->msg = NULL;
				e->len = len;
				e->close_after = false;
				e->opcode = rd ? IBV_WC_RDMA_READ :
				    IBV_WC_RDMA_WRITE;
				if (n > 0)
					wrs[n - 1].next = w;
				n++;
			}
			op->parts_left = parts;
			op->state = OPS_POSTED;
			TAILQ_REMOVE(&q->outq, m, link);
			free(m);
			continue;
		}
		while (m->posted < m->total && n < room) {
			struct vb_sbuf *sb = NULL;
			struct vb_sqe *e = vb_slot(q, n);
			struct ibv_send_wr *w = &wrs[n];
			bool first = m->posted == 0;
			unsigned nsg = 0;

			if (first || m->zmr == NULL) {
				if (c->sfree == NULL)
					break;
				sb = c->sfree;
				c->sfree = sb->next;
				sges[n][0].addr = (uintptr_t)sb->buf;
				sges[n][0].length = (uint32_t)vb_msg_gather(m,
				    sb->buf, m->zmr == NULL ? VB_MSG_BUF :
				    FAM_PROTO_HDR_LEN);
				sges[n][0].lkey = c->smr->lkey;
				nsg = 1;
			}
			if (m->zmr != NULL)
				(void)vb_msg_sges(m, sges[n], VB_MAX_SGE,
				    VB_MSG_BUF - (nsg > 0 ? sges[n][0].length :
				    0), &nsg);
			memset(w, 0, sizeof *w);
			w->wr_id = (uintptr_t)e;
			w->sg_list = sges[n];
			w->num_sge = (int)nsg;
			w->opcode = IBV_WR_SEND;
			if (first) {
				/* Every message starts with its whole header. */
				uint32_t imm = vb_imm(sb->buf);

				w->opcode = IBV_WR_SEND_WITH_IMM;
				/* A test aid: the peer must refuse it. */
				if (c->opts.inject_bad_imm &&
				    sb->buf[5] != FAM_MSG_HELLO)
					imm ^= 0x00ff0000u;
				w->imm_data = htobe32(imm);
			}
			e->kind = SQE_SEND;
			e->sbuf = sb;
			e->msg = m->zmr != NULL && m->posted == m->total ?
			    m : NULL;
			e->op = NULL;
			e->opcode = IBV_WC_SEND;
			e->close_after = m->close_after &&
			    m->posted == m->total;
			if (e->close_after)
				w->send_flags = IBV_SEND_SIGNALED;
			if (n > 0)
				wrs[n - 1].next = w;
			n++;
		}
		if (m->posted < m->total)
			break; /* out of buffers or slots: the rest later */
		TAILQ_REMOVE(&q->outq, m, link);
		done_slot[ndone] = n - 1;
		done[ndone++] = m;
	}
	if (n == 0)
		return;
	/* Selective signalling: the last of the chain, every Nth. */
	for (uint32_t k = 0; k < n; k++) {
		if (k + 1 == n)
			wrs[k].send_flags |= IBV_SEND_SIGNALED;
		if (wrs[k].send_flags & IBV_SEND_SIGNALED)
			q->unsignalled = 0;
		else if (++q->unsignalled >= VB_SIGNAL_EVERY) {
			wrs[k].send_flags |= IBV_SEND_SIGNALED;
			q->unsignalled = 0;
		}
		if (wrs[k].send_flags & IBV_SEND_SIGNALED)
			c->stats.wrs_signalled++;
	}
	c->stats.doorbells++;
	c->stats.wrs += n;
	err = ibv_post_send(q->qp, wrs, &bad);
	if (err != 0) {
		/* Count what the HCA took; the rest is dropped with us. */
		uint32_t took = 0;

		for (struct ibv_send_wr *w = wrs; w != bad && w != NULL;
		    w = w->next)
			took++;
		q->used += took;
		log_notice("verbs: %s: ibv_post_send: %s; closing the "
		    "connection", vb_who(c, who, sizeof who), strerror(err));
		for (unsigned i = 0; i < ndone; i++) {
			/* A zero-copy one the HCA took retires with it. */
			if (done[i]->zmr != NULL && done_slot[i] < took)
				continue;
			if (done[i]->zmr != NULL)
				vb_slot(q, done_slot[i] - took)->msg = NULL;
			vb_msg_done(c, done[i]);
		}
		vb_close(c, -EIO);
		return;
	}
	q->used += n;
	for (unsigned i = 0; i < ndone; i++)
		vb_msg_posted(c, done[i]);
}

/* Posts queued work on every QP that is up. */
static void
vb_post_all(struct vb_conn *c)
{
	for (unsigned i = 0; i < c->nqps && c->state < VBS_DRAINING; i++)
		if (c->qps[i].state == VQ_UP && c->qps[i].qp != NULL)
			vb_qp_post(&c->qps[i], false);
}

/*
 * fam_conn_flush(): posts what is queued now, one chain (one doorbell)
 * per QP, instead of at the end of the loop's pass; responses wait for
 * that pass (see vb_qp_post()).
 */
static int
vb_flush(struct fam_conn *fc)
{
	struct vb_conn *c = vb_conn_of(fc);

	if (c->state != VBS_OPEN)
		return c->state < VBS_OPEN ? 0 : -ENOTCONN;
	for (unsigned i = 0; i < c->nqps && c->state < VBS_DRAINING; i++)
		if (c->qps[i].state == VQ_UP && c->qps[i].qp != NULL)
			vb_qp_post(&c->qps[i], true);
	return 0;
}

/* The deferred post: what API calls queued since the last callback. */
static void
vb_post_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_conn *c = arg;

	c->post_pending = false;
	vb_post_all(c);
}

/* Queues a response with no payload; closes the connection on failure. */
static void
vb_reply_status(struct vb_conn *c, struct vb_qp *q, const struct fam_hdr *req,
    int status, bool close_after, int final_err)
{
	struct vb_msg *m;

	if (status < 0 || status > FAM_STATUS_MAX)
		status = EIO;
	m = vb_msg_new(0);
	if (m == NULL) {
		vb_close(c, -ENOMEM);
		return;
	}
	if (tp_resp_hdr(req, status, 0, m->inl) < 0) {
		free(m);
		vb_close(c, -EPROTO);
		return;
	}
	m->resp = true;
	m->close_after = close_after;
	if (close_after) {
		c->state = VBS_CLOSING;
		c->final_err = final_err;
		c->deadline = mono_ns() + c->timeout_ns;
		event_del(c->ev_timer);
		vb_arm_timer(c);
	}
	vb_msg_queue(c, q, m);
}

/* Returns true when h is a request we can answer (known type, flags). */
static bool
vb_answerable(const struct fam_hdr *h)
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
vb_violation(struct vb_conn *c, const struct fam_hdr *h, int status, int err,
    const char *fmt, ...)
{
	char why[256], who[160];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	c->stats.bad_frames++;
	log_notice("verbs: %s: protocol violation: %s; closing the connection",
	    vb_who(c, who, sizeof who), why);
	if (status != 0 && vb_answerable(h) && c->state < VBS_CLOSING)
		vb_reply_status(c, &c->qps[0], h, status, true, err);
	else
		vb_close(c, err);
}

/* ---- operations -------------------------------------------------------- */

/* Puts an op on a QP's output queue: a request, or a one-sided transfer. */
static int
vb_op_queue(struct vb_conn *c, struct vb_op *op)
{
	struct fam_hdr h = {
		.magic = FAM_PROTO_MAGIC,
		.version = FAM_PROTO_VERSION,
		.type = op->type,
		.flags = op->flags,
		.id = op->id,
	};
	struct vb_qp *q = op->kind == OP_HELLO ? &c->qps[0] : vb_pick_qp(c);
	struct vb_msg *m = vb_msg_new(1);
	uint8_t *body;
	size_t blen = 0;

	if (m == NULL)
		return -ENOMEM;
	m->op = op;
	op->state = OPS_QUEUED;
	if (op->onesided) {
		m->data = true;
		TAILQ_INSERT_TAIL(&q->outq, m, link);
		vb_kick(c);
		return 0;
	}
	body = m->inl + FAM_PROTO_HDR_LEN;
	switch (op->kind) {
	case OP_HELLO:
		blen = proto_put_hello(body, op->payload);
		h.len = (uint32_t)blen;
		break;
	case OP_READ:
		blen = proto_put_read(body, &op->rw);
		h.len = (uint32_t)blen;
		break;
	case OP_WRITE:
		blen = proto_put_write_hdr(body, &op->rw);
		h.len = (uint32_t)blen + op->rw.len;
		m->iov[1].iov_base = (void *)op->src;
		m->iov[1].iov_len = op->rw.len;
		m->iovcnt = 2;
		break;
	case OP_CALL:
		h.len = op->plen;
		if (op->plen > 0) {
			m->iov[1].iov_base = op->payload;
			m->iov[1].iov_len = op->plen;
			m->iovcnt = 2;
		}
		break;
	}
	proto_put_hdr(m->inl, &h);
	m->iov[0].iov_len = FAM_PROTO_HDR_LEN + blen;
	vb_msg_queue(c, q, m);
	return 0;
}

/* Moves waiting ops to the QPs while the connection is open and has room. */
static void
vb_pump(struct vb_conn *c)
{
	struct vb_op *op;

	while (c->state == VBS_OPEN && c->nflight < c->opts.max_outstanding &&
	    (op = TAILQ_FIRST(&c->waitq)) != NULL) {
		TAILQ_REMOVE(&c->waitq, op, wait);
		if (vb_op_queue(c, op) < 0) {
			TAILQ_INSERT_HEAD(&c->waitq, op, wait);
			vb_close(c, -ENOMEM);
			return;
		}
		c->nflight++;
	}
}

/* Accepts a new op: numbers it, queues it, sends it when there is room. */
static void
vb_op_submit(struct vb_conn *c, struct vb_op *op)
{
	op->id = c->next_id++;
	op->deadline = mono_ns() + c->timeout_ns;
	op->state = OPS_WAITING;
	TAILQ_INSERT_TAIL(&c->ops, op, all);
	TAILQ_INSERT_TAIL(&c->waitq, op, wait);
	c->nops++;
	c->stats.outstanding = c->nops;
	vb_pump(c);
	vb_arm_timer(c);
}

/* Returns -ENOTCONN unless new operations may be queued on c. */
static int
vb_check_usable(const struct vb_conn *c)
{
	return c->state <= VBS_OPEN ? 0 : -ENOTCONN;
}

/* ---- completions ------------------------------------------------------- */

/*
 * Maps a bad completion to the errno its operation fails with. The peer
 * refusing the access (-EACCES: no such lease, or past its end) or the
 * request (-EINVAL) is the operation's own failure; anything else is the
 * connection failing (-ECONNRESET, as for every other operation on it),
 * which the caller may retry on a new connection.
 */
static int
vb_wc_errno(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_REM_ACCESS_ERR:
		return -EACCES;
	case IBV_WC_REM_INV_REQ_ERR:
		return -EINVAL;
	default:
		return -ECONNRESET;
	}
}

/*
 * Polls the CQ: ibv_poll_cq, then (a test aid, [verbs] inject_error_ppm)
 * turns a fraction of the successful completions into IBV_WC_GENERAL_ERR.
 */
static int
vb_poll_cq(struct vb_conn *c, int n, struct ibv_wc *wc)
{
	int got = ibv_poll_cq(c->cq, n, wc);

	if (got <= 0 || c->opts.inject_error_ppm == 0)
		return got;
	for (int i = 0; i < got; i++) {
		uint64_t x = c->rng;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		c->rng = x;
		if (wc[i].status == IBV_WC_SUCCESS &&
		    x % 1000000u < c->opts.inject_error_ppm) {
			wc[i].status = IBV_WC_GENERAL_ERR;
			log_info("verbs: injecting an error into a completion "
			    "(inject_error_ppm %u)", c->opts.inject_error_ppm);
		}
	}
	return got;
}

/* A bad completion: counted, logged, and the connection closed. */
static void
vb_wc_fail(struct vb_conn *c, const struct ibv_wc *wc, const char *what)
{
	char who[160];

	c->stats.completion_errors++;
	if (c->state < VBS_DRAINING)
		log_notice("verbs: %s: %s completion: %s (vendor error 0x%x); "
		    "closing the connection", vb_who(c, who, sizeof who), what,
		    ibv_wc_status_str(wc->status), wc->vendor_err);
	vb_close(c, -EIO);
}

/* A one-sided operation's last part retired: finish it. */
static void
vb_data_done(struct vb_conn *c, struct vb_op *op)
{
	int status = op->status;

	if (status == 0 && op->kind == OP_READ && op->slabs != NULL) {
		uint32_t off = 0;

		for (struct vb_slab *s = op->slabs; s != NULL; s = s->next) {
			uint32_t len = op->rw.len - off < VB_SLAB ?
			    op->rw.len - off : VB_SLAB;

			memcpy((uint8_t *)op->dst + off, s->buf, len);
			off += len;
		}
	}
	if (status == 0) {
		if (op->kind == OP_READ)
			c->stats.bytes_in += op->rw.len;
		else
			c->stats.bytes_out += op->rw.len;
	}
	vb_op_finish(c, op, status, NULL, status == 0 ? op->rw.len : 0);
}

/*
 * Retires q's send ring up to slot e, which completed with status (0, or
 * -errno for the failed or flushed WR itself; older unsignalled slots
 * completed before it).
 */
static void
vb_retire(struct vb_conn *c, struct vb_qp *q, struct vb_sqe *e, int status)
{
	for (;;) {
		struct vb_sqe *x = &q->ring[q->head];
		bool last = x == e;
		int st = last ? status : 0;

		q->head = (q->head + 1) % VB_SQ_DEPTH;
		q->used--;
		switch (x->kind) {
		case SQE_SEND:
			if (x->sbuf != NULL) {
				x->sbuf->next = c->sfree;
				c->sfree = x->sbuf;
				x->sbuf = NULL;
			}
			if (x->msg != NULL) {
				struct vb_msg *m = x->msg;

				x->msg = NULL;
				vb_msg_done(c, m);
			}
			if (x->close_after && st == 0 &&
			    c->state == VBS_CLOSING)
				vb_close(c, c->final_err);
			break;
		case SQE_DATA: {
			struct vb_op *op = x->op;

			if (st != 0 && op->status == 0)
				op->status = st;
			if (--op->parts_left == 0)
				vb_data_done(c, op);
			break;
		}
		case SQE_DRAIN:
			q->drained = true;
			break;
		}
		if (last || q->used == 0)
			break;
	}
}

/* A send-side completion. */
static void
vb_wc_send(struct vb_conn *c, const struct ibv_wc *wc)
{
	struct vb_sqe *e = (struct vb_sqe *)(uintptr_t)wc->wr_id;
	struct vb_qp *q = e->qp;
	uint32_t slot = (uint32_t)(e - q->ring);
	int status = 0;

	if ((slot + VB_SQ_DEPTH - q->head) % VB_SQ_DEPTH >= q->used)
		return; /* retired already (not posted any more) */
	if (wc->status == IBV_WC_WR_FLUSH_ERR) {
		if (c->state < VBS_DRAINING) {
			char who[160];

			log_info("verbs: %s: send queue flushed; closing the "
			    "connection", vb_who(c, who, sizeof who));
			vb_close(c, -ECONNRESET);
		}
		status = c->op_err != 0 ? c->op_err : -ECONNRESET;
	} else if (wc->status != IBV_WC_SUCCESS) {
		status = vb_wc_errno(wc->status);
		vb_wc_fail(c, wc, e->kind == SQE_DATA ? (e->opcode ==
		    IBV_WC_RDMA_READ ? "RDMA READ" : "RDMA WRITE") : "SEND");
	} else if (e->kind != SQE_DRAIN && (wc->opcode != e->opcode ||
	    (e->opcode == IBV_WC_RDMA_READ && wc->byte_len != e->len))) {
		struct ibv_wc bad = *wc;

		bad.status = IBV_WC_GENERAL_ERR;
		status = -EIO;
		vb_wc_fail(c, &bad, "unexpected (opcode or length)");
	}
	vb_retire(c, q, e, status);
	if (c->state == VBS_DRAINING && vb_all_drained(c))
		vb_drained(c);
}

/* Finds the QP of a receive completion. */
static struct vb_qp *
vb_qp_by_num(struct vb_conn *c, uint32_t qp_num)
{
	for (unsigned i = 0; i < c->nqps; i++)
		if (c->qps[i].qp != NULL && c->qps[i].qp_num == qp_num)
			return &c->qps[i];
	return NULL;
}

static void vb_rx(struct vb_qp *q, const uint8_t *p, uint32_t n, bool has_imm,
    uint32_t imm);

/* A receive completion: one SEND of the peer's. */
static void
vb_wc_recv(struct vb_conn *c, const struct ibv_wc *wc)
{
	struct vb_rbuf *rb = (struct vb_rbuf *)(uintptr_t)wc->wr_id;
	struct vb_qp *q;

	if (c->state >= VBS_DRAINING)
		return; /* not posted again: the SRQ goes with us */
	if (wc->status == IBV_WC_WR_FLUSH_ERR) {
		char who[160];

		log_info("verbs: %s: receives flushed; closing the connection",
		    vb_who(c, who, sizeof who));
		vb_close(c, -ECONNRESET);
		return;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		vb_wc_fail(c, wc, "receive");
		return;
	}
	if (c->state == VBS_CLOSING) {
		rb->next = c->repost;
		c->repost = rb;
		return; /* input is ignored while an error reply goes out */
	}
	q = vb_qp_by_num(c, wc->qp_num);
	if (wc->opcode != IBV_WC_RECV || q == NULL ||
	    wc->byte_len > VB_MSG_BUF) {
		struct ibv_wc bad = *wc;

		bad.status = IBV_WC_GENERAL_ERR;
		vb_wc_fail(c, &bad, "unexpected receive (opcode, QP or length)");
		return;
	}
	vb_rx(q, rb->buf, wc->byte_len, (wc->wc_flags & IBV_WC_WITH_IMM) != 0,
	    be32toh(wc->imm_data));
	rb->next = c->repost;
	c->repost = rb;
}

/* Handles one completion, dispatched on its wr_id's tag. */
static void
vb_wc(struct vb_conn *c, const struct ibv_wc *wc)
{
	uint8_t tag = *(const uint8_t *)(uintptr_t)wc->wr_id;

	if (tag == VB_TAG_RECV)
		vb_wc_recv(c, wc);
	else
		vb_wc_send(c, wc);
}

/*
 * Polls the CQ in batches, at most VB_POLL_BUDGET of them; when more may
 * wait, polls again from the loop. Receive buffers go back to the SRQ in one
 * chain per batch; queued work is posted at the end.
 */
static void
vb_cq_poll(struct vb_conn *c)
{
	struct ibv_wc wc[VB_POLL_BATCH];
	int n = 0;

	for (int b = 0; b < VB_POLL_BUDGET; b++) {
		n = vb_poll_cq(c, VB_POLL_BATCH, wc);
		if (n < 0) {
			log_notice("verbs: %s: ibv_poll_cq failed; closing the "
			    "connection", c->peer);
			c->stats.completion_errors++;
			vb_close(c, -EIO);
			break;
		}
		for (int i = 0; i < n; i++)
			vb_wc(c, &wc[i]);
		if (c->repost != NULL) {
			struct vb_rbuf *list = c->repost;

			c->repost = NULL;
			if (c->state < VBS_DRAINING &&
			    vb_post_recvs(c, list) < 0) {
				log_notice("verbs: %s: cannot post receives; "
				    "closing the connection", c->peer);
				vb_close(c, -EIO);
			}
		}
		if (n < VB_POLL_BATCH)
			break;
	}
	if (n == VB_POLL_BATCH)
		event_active(c->ev_poll, EV_WRITE, 0);
	if (c->state < VBS_DRAINING)
		vb_post_all(c);
	vb_arm_timer(c);
}

/* The completion channel is readable: get the event, re-arm, poll. */
static void
vb_cq_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_conn *c = arg;
	struct ibv_cq *cq;
	void *ctx;

	while (ibv_get_cq_event(c->cchan, &cq, &ctx) == 0) {
		c->cq_unacked++;
		(void)ibv_req_notify_cq(cq, 0);
	}
	vb_cq_poll(c);
	if (c->cq_unacked >= VB_ACK_BATCH) {
		ibv_ack_cq_events(c->cq, c->cq_unacked);
		c->cq_unacked = 0;
	}
}

/* Polls again after a callback used its budget. */
static void
vb_poll_cb(evutil_socket_t fd, short what, void *arg)
{
	vb_cq_poll(arg);
}

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
static void
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

/* ---- rdma_cm ----------------------------------------------------------- */

/* What the loop keeps of an rdma_cm event once it is acknowledged. */
struct vb_cm_event {
	enum rdma_cm_event_type type;
	int status;
	struct rdma_cm_id *id;
	uint8_t priv[64];
	uint8_t priv_len;
	uint8_t initiator_depth;
};

/* Reads one event off a channel, copies what we need, acknowledges it. */
static bool
vb_cm_get(struct rdma_event_channel *ch, struct vb_cm_event *e)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev) != 0)
		return false;
	memset(e, 0, sizeof *e);
	e->type = ev->event;
	e->status = ev->status;
	e->id = ev->id;
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ||
	    ev->event == RDMA_CM_EVENT_ESTABLISHED ||
	    ev->event == RDMA_CM_EVENT_REJECTED) {
		const struct rdma_conn_param *p = &ev->param.conn;

		if (p->private_data != NULL) {
			e->priv_len = p->private_data_len < sizeof e->priv ?
			    p->private_data_len : sizeof e->priv;
			memcpy(e->priv, p->private_data, e->priv_len);
		}
		e->initiator_depth = p->initiator_depth;
	}
	rdma_ack_cm_event(ev);
	return true;
}

/* Active side: starts QP q's way through rdma_cm (from src, when given). */
static int
vb_qp_connect(struct vb_qp *q, struct sockaddr *src)
{
	struct vb_conn *c = q->c;

	if (rdma_create_id(c->cmch, &q->id, q, RDMA_PS_TCP) != 0)
		return -errno;
	if (rdma_resolve_addr(q->id, src, (struct sockaddr *)&c->dst,
	    VB_RESOLVE_MS) != 0)
		return -errno;
	q->state = VQ_ADDR;
	return 0;
}

/* Active side: the first QP is up; send the hello on it. */
static void
vb_send_hello(struct vb_conn *c)
{
	struct vb_op *op;

	TAILQ_FOREACH(op, &c->waitq, wait)
		if (op->kind == OP_HELLO)
			break;
	if (op == NULL)
		return;
	TAILQ_REMOVE(&c->waitq, op, wait);
	if (vb_op_queue(c, op) < 0) {
		TAILQ_INSERT_HEAD(&c->waitq, op, wait);
		vb_close(c, -ENOMEM);
		return;
	}
	explicit_bzero(((struct fam_hello *)op->payload)->secret,
	    FAM_SECRET_MAX + 1);
	c->nflight++;
}

/* Active side: a QP is established. */
static void
vb_qp_established(struct vb_conn *c, struct vb_qp *q,
    const struct vb_cm_event *e)
{
	struct vb_priv p;
	char who[160];

	q->state = VQ_UP;
	c->nup++;
	if (q->index == 0) {
		if (vb_priv_get(e->priv, e->priv_len, &p) < 0) {
			c->stats.bad_frames++;
			log_notice("verbs: %s accepted us without famd's private "
			    "data; closing", c->peer);
			c->op_err = -EPROTO;
			vb_close(c, -EPROTO);
			return;
		}
		c->cookie = p.cookie;
		c->state = VBS_HELLO;
		vb_send_hello(c);
		return;
	}
	if (c->state == VBS_JOINING && c->nup == c->nqps) {
		c->state = VBS_OPEN;
		log_debug("verbs: %s: connected with %u QPs",
		    vb_who(c, who, sizeof who), c->nqps);
		if (c->h.connected != NULL)
			c->h.connected(&c->base, &c->joined_resp, c->harg);
		vb_pump(c);
	}
}

/*
 * Lowers the RNR NAK delay our side asks of a sender when no receive is
 * posted (RTS -> RTS): rdma_cm leaves the largest, 655 ms.
 */
static void
vb_qp_tune(struct vb_qp *q)
{
	struct ibv_qp_attr attr = { .min_rnr_timer = VB_MIN_RNR_TIMER };
	int err;

	if (q->qp == NULL)
		return;
	err = ibv_modify_qp(q->qp, &attr, IBV_QP_MIN_RNR_TIMER);
	if (err != 0)
		log_debug("verbs: %s: QP %u: cannot set min_rnr_timer: %s",
		    q->c->peer, q->index, strerror(err));
}

/* Returns the errno an rdma_cm failure event stands for. */
static int
vb_cm_errno(const struct vb_cm_event *e)
{
	struct vb_priv p;

	switch (e->type) {
	case RDMA_CM_EVENT_REJECTED:
		if (vb_priv_get(e->priv, e->priv_len, &p) == 0 &&
		    p.status > 0 && p.status <= FAM_STATUS_MAX)
			return -(int)p.status;
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_ADDR_ERROR:
		return -EHOSTUNREACH;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return -ENETUNREACH;
	case RDMA_CM_EVENT_UNREACHABLE:
		return -EHOSTUNREACH;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return -ENODEV;
	default:
		return -EIO;
	}
}

/*
 * One rdma_cm event of a connection's QP. Active QPs go ADDR -> ROUTE ->
 * CONNECT -> UP; passive ones CONNECT (accepted) -> UP; any failure closes
 * the whole connection.
 */
static void
vb_cm_event(struct vb_conn *c, const struct vb_cm_event *e)
{
	struct vb_qp *q = e->id->context;
	struct rdma_conn_param param;
	struct vb_priv p = { 0 };
	uint8_t priv[VB_PRIV_LEN];
	char who[160];
	int err = 0;

	if (c->state >= VBS_DRAINING && e->type != RDMA_CM_EVENT_DISCONNECTED)
		return;
	switch (e->type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (c->pd == NULL)
			err = vb_conn_setup(c, q->id->verbs, c->nqps);
		if (err == 0 && rdma_resolve_route(q->id, VB_RESOLVE_MS) != 0)
			err = -errno;
		if (err < 0)
			break;
		q->state = VQ_ROUTE;
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		err = vb_qp_create(q);
		if (err < 0)
			break;
		p.version = FAM_PROTO_VERSION;
		p.index = (uint8_t)q->index;
		p.nqps = (uint8_t)c->nqps;
		p.cookie = q->index == 0 ? 0 : c->cookie;
		vb_conn_param(c, &param, priv, &p);
		if (rdma_connect(q->id, &param) != 0) {
			err = -errno;
			break;
		}
		q->state = VQ_CONNECT;
		return;
	case RDMA_CM_EVENT_ESTABLISHED:
		vb_qp_tune(q);
		if (c->active) {
			vb_qp_established(c, q, e);
		} else {
			q->state = VQ_UP;
			c->nup++;
		}
		vb_kick(c); /* what was queued for this QP meanwhile */
		return;
	case RDMA_CM_EVENT_DISCONNECTED:
		q->state = VQ_DOWN;
		if (c->state >= VBS_DRAINING)
			return;
		/* Take in what arrived before the disconnect first. */
		vb_cq_poll(c);
		if (c->state >= VBS_DRAINING)
			return;
		if (c->state == VBS_CLOSING) {
			vb_close(c, c->final_err);
			return;
		}
		log_debug("verbs: %s: disconnected by the peer",
		    vb_who(c, who, sizeof who));
		vb_close(c, c->nops > 0 ? -ECONNRESET : 0);
		return;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		err = vb_cm_errno(e);
		log_info("verbs: %s: QP %u: %s (status %d): %s",
		    vb_who(c, who, sizeof who), q->index,
		    rdma_event_str(e->type), e->status, strerror(-err));
		c->op_err = err;
		vb_close(c, err);
		return;
	default:
		log_debug("verbs: %s: QP %u: %s", vb_who(c, who, sizeof who),
		    q->index, rdma_event_str(e->type));
		return;
	}
	log_info("verbs: %s: QP %u: %s", vb_who(c, who, sizeof who), q->index,
	    strerror(-err));
	c->op_err = err;
	vb_close(c, err);
}

/* A connection's rdma_cm channel is readable. */
static void
vb_cm_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_conn *c = arg;
	struct vb_cm_event e;

	while (c->state != VBS_CLOSED && vb_cm_get(c->cmch, &e))
		vb_cm_event(c, &e);
	if (c->state != VBS_CLOSED)
		vb_arm_timer(c);
}

/* Refuses a connect request with a status the peer can read. */
static void
vb_reject(struct rdma_cm_id *id, int status)
{
	struct vb_priv p = { .version = FAM_PROTO_VERSION,
		.status = (uint32_t)status };
	uint8_t priv[VB_PRIV_LEN];

	vb_priv_put(priv, &p);
	(void)rdma_reject(id, priv, VB_PRIV_LEN);
}

/* Accepts QP q of passive connection c (its id migrated, QP created). */
static int
vb_accept_qp(struct vb_conn *c, struct vb_qp *q, uint8_t initiator_depth)
{
	struct rdma_conn_param param;
	struct vb_priv p = { .version = FAM_PROTO_VERSION,
		.index = (uint8_t)q->index, .nqps = (uint8_t)c->nqps,
		.cookie = c->cookie };
	uint8_t priv[VB_PRIV_LEN];
	int err;

	if (rdma_migrate_id(q->id, c->cmch) != 0)
		return -errno;
	err = vb_qp_create(q);
	if (err < 0)
		return err;
	vb_conn_param(c, &param, priv, &p);
	if (initiator_depth < param.responder_resources)
		param.responder_resources = initiator_depth;
	if (rdma_accept(q->id, &param) != 0)
		return -errno;
	q->state = VQ_CONNECT;
	return 0;
}

/* A connect request for QP 0: a new connection. */
static void
vb_on_connect0(struct vb_listener *l, struct rdma_cm_id *id,
    const struct vb_priv *p, const struct vb_cm_event *e, const char *peer)
{
	struct vb_conn *c;
	int err;

	if (p->nqps < 1 || p->nqps > VB_MAX_QPS) {
		log_notice("verbs: refused %s on %s: %u QPs asked", peer,
		    l->addr, p->nqps);
		vb_reject(id, EINVAL);
		rdma_destroy_id(id);
		return;
	}
	if (l->nhello >= VB_MAX_HELLO) {
		log_warn("verbs: refused %s on %s: %u connections await their "
		    "hello", peer, l->addr, l->nhello);
		vb_reject(id, EBUSY);
		rdma_destroy_id(id);
		return;
	}
	c = vb_conn_new(l->evb, &l->opts, false);
	if (c == NULL) {
		vb_reject(id, ENOMEM);
		rdma_destroy_id(id);
		return;
	}
	c->l = l;
	snprintf(c->peer, sizeof c->peer, "%s", peer);
	c->cookie = vb_random64();
	c->qps[0].id = id;
	id->context = &c->qps[0];
	err = vb_conn_channel(c);
	if (err == 0)
		err = vb_conn_setup(c, id->verbs, p->nqps);
	if (err == 0)
		err = vb_accept_qp(c, &c->qps[0], e->initiator_depth);
	if (err < 0) {
		log_warn("verbs: cannot accept %s on %s: %s", peer, l->addr,
		    strerror(-err));
		vb_reject(id, -err > 0 && -err <= FAM_STATUS_MAX ? -err : EIO);
		vb_conn_destroy(c);
		return;
	}
	c->state = VBS_HELLO;
	c->deadline = mono_ns() + c->timeout_ns;
	c->counted_hello = true;
	l->nhello++;
	log_debug("verbs: connection from %s on %s (%u QPs)", peer, l->addr,
	    c->nqps);
	l->accept(&l->base, &c->base, c->peer, l->arg);
	vb_arm_timer(c);
}

/* A connect request for QP 1..: joins the open connection it names. */
static void
vb_on_connect_join(struct vb_listener *l, struct rdma_cm_id *id,
    const struct vb_priv *p, const struct vb_cm_event *e, const char *peer)
{
	struct vb_conn *c;
	struct vb_qp *q;
	int err;

	pthread_mutex_lock(&vb_lock);
	LIST_FOREACH(c, &vb_conns, link)
		if (c->evb == l->evb && !c->active && c->l == l &&
		    c->cookie == p->cookie)
			break;
	pthread_mutex_unlock(&vb_lock);
	if (c == NULL || c->state != VBS_OPEN || p->index >= c->nqps ||
	    c->qps[p->index].id != NULL || id->verbs != c->ctx) {
		log_notice("verbs: refused QP %u from %s on %s: it names no "
		    "open connection of its own", p->index, peer, l->addr);
		vb_reject(id, ENOENT);
		rdma_destroy_id(id);
		return;
	}
	q = &c->qps[p->index];
	q->id = id;
	id->context = q;
	err = vb_accept_qp(c, q, e->initiator_depth);
	if (err < 0) {
		char who[160];

		log_notice("verbs: %s: cannot accept QP %u: %s; closing the "
		    "connection", vb_who(c, who, sizeof who), q->index,
		    strerror(-err));
		vb_reject(id, EIO);
		vb_close(c, err);
	}
}

/* The listener's rdma_cm channel: connect requests. */
static void
vb_listen_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_listener *l = arg;
	struct vb_cm_event e;

	while (vb_cm_get(l->ch, &e)) {
		struct sockaddr *sa;
		char peer[TP_ADDR_MAX];
		struct vb_priv p;
		int err;

		if (e.type != RDMA_CM_EVENT_CONNECT_REQUEST) {
			if (e.id == l->id)
				log_warn("verbs: listener %s: %s", l->addr,
				    rdma_event_str(e.type));
			continue;
		}
		sa = rdma_get_peer_addr(e.id);
		tp_format_addr(sa, sa->sa_family == AF_INET6 ?
		    sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in),
		    peer, sizeof peer);
		err = vb_priv_get(e.priv, e.priv_len, &p);
		if (err < 0) {
			log_notice("verbs: refused %s on %s: %s", peer, l->addr,
			    err == -EPROTONOSUPPORT ? "another protocol "
			    "version" : "not a famd connect request");
			vb_reject(e.id, err == -EPROTONOSUPPORT ?
			    EPROTONOSUPPORT : EPROTO);
			rdma_destroy_id(e.id);
			continue;
		}
		if (p.index == 0)
			vb_on_connect0(l, e.id, &p, &e, peer);
		else
			vb_on_connect_join(l, e.id, &p, &e, peer);
	}
}

/* ---- deadlines --------------------------------------------------------- */

/* A deadline may have passed: an op, the hello, an error reply, a drain. */
static void
vb_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_conn *c = arg;
	uint64_t now = mono_ns();
	struct vb_op *op = TAILQ_FIRST(&c->ops);
	const char *why = NULL;
	char who[160];

	if (c->state == VBS_DRAINING) {
		if (now >= c->deadline) {
			log_notice("verbs: %s: send queues did not flush within "
			    "%u ms; destroying the connection anyway",
			    vb_who(c, who, sizeof who), VB_DRAIN_MS);
			vb_drained(c);
			return;
		}
	} else if (c->state == VBS_CLOSING) {
		if (now >= c->deadline) {
			vb_close(c, c->final_err);
			return;
		}
	} else if (op != NULL && op->deadline <= now)
		why = op->kind == OP_HELLO ? (c->state == VBS_CONNECTING ?
		    "no connection" : "no answer to our hello") :
		    "an operation did not complete";
	else if (!c->active && c->state == VBS_HELLO && c->deadline <= now)
		why = "no hello";
	if (why != NULL) {
		c->stats.timeouts += c->nops > 0 ? c->nops : 1;
		log_notice("verbs: %s: %s within %u ms; closing",
		    vb_who(c, who, sizeof who), why, c->opts.op_timeout_ms);
		c->op_err = -ETIMEDOUT;
		vb_close(c, -ETIMEDOUT);
		return;
	}
	vb_arm_timer(c);
}

/* ---- listener ---------------------------------------------------------- */

/* Opens an rdma_cm event channel, non-blocking; NULL with *cause. */
static struct rdma_event_channel *
vb_channel_open(const char *what, char **cause)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();

	if (ch == NULL) {
		*cause = xasprintf("%s: rdma_cm: %s (no RDMA device here? "
		    "/dev/infiniband/rdma_cm needs an RDMA NIC or rdma_rxe)",
		    what, strerror(errno));
		return NULL;
	}
	if (fd_set_nonblock(ch->fd) < 0) {
		*cause = xasprintf("%s: %s", what, strerror(errno));
		rdma_destroy_event_channel(ch);
		return NULL;
	}
	return ch;
}

/* Listens on addr with rdma_cm. */
static int
vb_listen(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, fam_accept_fn accept, void *arg,
    struct fam_listener **out, char **cause)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct vb_listener *l;
	struct sockaddr *sa;
	int err;

	err = vb_memlock_gate(1, cause);
	if (err < 0)
		return err;
	err = tp_resolve(addr, true, &ss, &sslen, cause);
	if (err < 0)
		return err;
	l = calloc(1, sizeof *l);
	if (l == NULL) {
		*cause = xasprintf("listen %s: out of memory", addr);
		return -ENOMEM;
	}
	l->base.ops = &verbs_transport_ops;
	l->evb = base;
	tp_opts_fill(&l->opts, opts);
	l->accept = accept;
	l->arg = arg;
	l->ch = vb_channel_open("listen", cause);
	if (l->ch == NULL) {
		err = -ENODEV;
		goto out_free;
	}
	if (rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP) != 0) {
		err = -errno;
		*cause = xasprintf("listen %s: rdma_create_id: %s", addr,
		    strerror(errno));
		goto out_channel;
	}
	if (rdma_bind_addr(l->id, (struct sockaddr *)&ss) != 0 ||
	    rdma_listen(l->id, 128) != 0) {
		err = -errno;
		*cause = xasprintf("listen %s: %s", addr, strerror(errno));
		goto out_id;
	}
	sa = rdma_get_local_addr(l->id);
	tp_format_addr(sa, sa->sa_family == AF_INET6 ?
	    sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in), l->addr,
	    sizeof l->addr);
	/* Watch the device's events while listening, not only while connected. */
	if (l->id->verbs != NULL)
		l->dev = vb_dev_get(base, l->id->verbs);
	l->ev = event_new(base, l->ch->fd, EV_READ | EV_PERSIST, vb_listen_cb,
	    l);
	if (l->ev == NULL || event_add(l->ev, NULL) < 0) {
		err = -ENOMEM;
		*cause = xasprintf("listen %s: out of memory", addr);
		goto out_event;
	}
	*out = &l->base;
	return 0;

out_event:
	if (l->ev != NULL)
		event_free(l->ev);
	vb_dev_put(l->dev);
out_id:
	rdma_destroy_id(l->id);
out_channel:
	rdma_destroy_event_channel(l->ch);
out_free:
	explicit_bzero(l->opts.secret, sizeof l->opts.secret);
	free(l);
	return err;
}

/* Stops listening; accepted connections stay. */
static void
vb_listener_free(struct fam_listener *fl)
{
	struct vb_listener *l = (struct vb_listener *)fl;
	struct vb_conn *c;

	pthread_mutex_lock(&vb_lock);
	LIST_FOREACH(c, &vb_conns, link)
		if (c->evb == l->evb && c->l == l) {
			c->l = NULL;
			c->counted_hello = false;
		}
	pthread_mutex_unlock(&vb_lock);
	event_free(l->ev);
	vb_dev_put(l->dev);
	rdma_destroy_id(l->id);
	rdma_destroy_event_channel(l->ch);
	explicit_bzero(l->opts.secret, sizeof l->opts.secret);
	free(l);
}

/* Returns the bound address. */
static const char *
vb_listener_addr(const struct fam_listener *fl)
{
	return ((const struct vb_listener *)fl)->addr;
}

/* ---- the API ----------------------------------------------------------- */

/* Connects to addr: rdma_cm for QP 0, the hello queued behind it. */
static int
vb_connect(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, const struct fam_conn_handlers *h,
    void *arg, struct fam_conn **out, char **cause)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct vb_conn *c;
	struct vb_op *op;
	int err;

	if (opts->hello.node[0] == '\0' ||
	    opts->hello.role < FAM_WIRE_ROLE_HOST ||
	    opts->hello.role > FAM_WIRE_ROLE_MEMORY) {
		*cause = xasprintf("connect %s: the hello needs a node name and "
		    "a role", addr);
		return -EINVAL;
	}
	err = vb_memlock_gate(opts->qps_per_peer > 0 ? opts->qps_per_peer : 1,
	    cause);
	if (err < 0)
		return err;
	err = tp_resolve(addr, false, &ss, &sslen, cause);
	if (err < 0)
		return err;
	c = vb_conn_new(base, opts, true);
	op = calloc(1, sizeof *op);
	if (c == NULL || op == NULL ||
	    (op->payload = malloc(sizeof(struct fam_hello))) == NULL) {
		free(op);
		if (c != NULL)
			vb_conn_destroy(c);
		*cause = xasprintf("connect %s: out of memory", addr);
		return -ENOMEM;
	}
	snprintf(c->peer, sizeof c->peer, "%s", addr);
	memcpy(&c->dst, &ss, sizeof ss);
	c->nqps = c->opts.qps_per_peer;
	c->cmch = vb_channel_open("connect", cause);
	if (c->cmch == NULL) {
		vb_op_free(c, op);
		vb_conn_destroy(c);
		return -ENODEV;
	}
	c->ev_cm = event_new(base, c->cmch->fd, EV_READ | EV_PERSIST, vb_cm_cb,
	    c);
	if (c->ev_cm == NULL || event_add(c->ev_cm, NULL) < 0 ||
	    (err = vb_qp_connect(&c->qps[0], NULL)) < 0) {
		err = c->ev_cm == NULL ? -ENOMEM : err < 0 ? err : -ENOMEM;
		*cause = xasprintf("connect %s: %s", addr, strerror(-err));
		vb_op_free(c, op);
		vb_conn_destroy(c);
		return err;
	}
	c->state = VBS_CONNECTING;
	memcpy(op->payload, &c->opts.hello, sizeof c->opts.hello);
	explicit_bzero(c->opts.hello.secret, sizeof c->opts.hello.secret);
	op->kind = OP_HELLO;
	op->type = FAM_MSG_HELLO;
	op->id = c->next_id++;
	op->deadline = mono_ns() + c->timeout_ns;
	op->state = OPS_WAITING;
	TAILQ_INSERT_TAIL(&c->ops, op, all);
	TAILQ_INSERT_TAIL(&c->waitq, op, wait);
	c->nops++;
	c->stats.outstanding = c->nops;
	if (h != NULL)
		c->h = *h;
	c->harg = arg;
	vb_arm_timer(c);
	*out = &c->base;
	return 0;
}

/* Sets the handlers (of an accepted connection). */
static void
vb_set_handlers(struct fam_conn *fc, const struct fam_conn_handlers *h,
    void *arg)
{
	struct vb_conn *c = vb_conn_of(fc);

	if (h != NULL)
		c->h = *h;
	else
		memset(&c->h, 0, sizeof c->h);
	c->harg = arg;
}

/* Queues a request of any type but HELLO. */
static int
vb_call(struct fam_conn *fc, uint8_t type, const void *payload, uint32_t len,
    fam_done_fn done, void *ctx)
{
	struct vb_conn *c = vb_conn_of(fc);
	struct fam_hdr h = { .magic = FAM_PROTO_MAGIC,
		.version = FAM_PROTO_VERSION, .type = type, .len = len };
	struct vb_op *op;
	int err;

	if ((err = vb_check_usable(c)) < 0)
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
	vb_op_submit(c, op);
	return 0;
}

/* Returns the registration of mr covering [p, p + len) on c, or NULL. */
static struct ibv_mr *
vb_mr_covering(struct vb_conn *c, struct fam_mr *mr, const void *p,
    uint32_t len)
{
	struct vb_mr *m = (struct vb_mr *)mr;
	uintptr_t a = (uintptr_t)p, lo, hi;

	if (mr == NULL || mr->ops != &verbs_transport_ops || m->c != c)
		return NULL;
	lo = (uintptr_t)m->mr->addr;
	hi = lo + m->mr->length;
	if (a < lo || a > hi || len > hi - a)
		return NULL;
	return m->mr;
}

/*
 * Checks and queues a READ or WRITE: one-sided when the lease has an
 * rkey, otherwise a request served by the peer (through its resolve).
 */
static int
vb_rw(struct vb_conn *c, enum vb_op_kind kind, const struct fam_remote *r,
    uint64_t off, uint32_t len, void *dst, const void *src,
    struct fam_mr *mr, uint16_t flags, fam_done_fn done, void *ctx)
{
	struct vb_op *op;
	int err;

	if ((err = vb_check_usable(c)) < 0)
		return err;
	if (r == NULL || done == NULL || (dst == NULL && src == NULL))
		return -EINVAL;
	if (len == 0 || len > FAM_RW_MAX ||
	    len + (kind == OP_WRITE ? FAM_WRITE_HDR_LEN : 0) >
	    c->opts.max_payload)
		return -EINVAL;
	if (off > UINT64_MAX - len || (r->size != 0 && off + len > r->size))
		return -ERANGE;
	if (r->rkey != 0 && r->addr > UINT64_MAX - off - len)
		return -ERANGE;
	op = calloc(1, sizeof *op);
	if (op == NULL)
		return -ENOMEM;
	op->kind = kind;
	op->type = kind == OP_READ ? FAM_MSG_READ : FAM_MSG_WRITE;
	op->rw.region = r->region;
	op->rw.len = len;
	op->rw.offset = off;
	op->flags = flags;
	op->dst = dst;
	op->src = src;
	op->done = done;
	op->ctx = ctx;
	if (r->rkey != 0) {
		c->stats.onesided++;
		op->onesided = true;
		op->raddr = r->addr + off;
		op->rkey = r->rkey;
		op->lmr = vb_mr_covering(c, mr, kind == OP_READ ? dst : src,
		    len);
	}
	if (kind == OP_READ)
		c->stats.reads++;
	else
		c->stats.writes++;
	vb_op_submit(c, op);
	return 0;
}

/* Queues a READ into dst. */
static int
vb_read(struct fam_conn *fc, const struct fam_remote *r, uint64_t off,
    uint32_t len, void *dst, struct fam_mr *mr, uint16_t flags,
    fam_done_fn done, void *ctx)
{
	if (dst == NULL)
		return -EINVAL;
	return vb_rw(vb_conn_of(fc), OP_READ, r, off, len, dst, NULL, mr,
	    flags, done, ctx);
}

/* Queues a WRITE from src (referenced until posted or done). */
static int
vb_write(struct fam_conn *fc, const struct fam_remote *r, uint64_t off,
    uint32_t len, const void *src, struct fam_mr *mr, uint16_t flags,
    fam_done_fn done, void *ctx)
{
	if (src == NULL)
		return -EINVAL;
	return vb_rw(vb_conn_of(fc), OP_WRITE, r, off, len, NULL, src, mr,
	    flags, done, ctx);
}

/* Queues the response to a request. */
static int
vb_reply(struct fam_conn *fc, const struct fam_hdr *req, int status,
    const struct iovec *iov, int iovcnt, bool copy, struct fam_mr *mr,
    fam_sent_fn sent, void *ctx)
{
	struct vb_conn *c = vb_conn_of(fc);
	struct ibv_mr *zmr;
	struct vb_msg *m;
	size_t len = 0;
	int err;

	if (c->state != VBS_OPEN)
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
	zmr = copy || len == 0 ? NULL : vb_zc_mr(c, mr, iov, iovcnt);
	m = vb_msg_new(copy ? 1 : iovcnt);
	if (m == NULL)
		return -ENOMEM;
	err = tp_resp_hdr(req, status, len, m->inl);
	if (err < 0) {
		free(m);
		return err;
	}
	if (copy && len > 0) {
		uint8_t *p;

		m->copy = malloc(len);
		if (m->copy == NULL) {
			free(m);
			return -ENOMEM;
		}
		p = m->copy;
		for (int i = 0; i < iovcnt; i++) {
			memcpy(p, iov[i].iov_base, iov[i].iov_len);
			p += iov[i].iov_len;
		}
		m->iov[1].iov_base = m->copy;
		m->iov[1].iov_len = len;
		m->iovcnt = 2;
	} else {
		for (int i = 0; i < iovcnt; i++)
			if (iov[i].iov_len > 0)
				m->iov[m->iovcnt++] = iov[i];
	}
	m->resp = true;
	m->sent = sent;
	m->ctx = ctx;
	m->zmr = zmr;
	if (zmr != NULL)
		c->stats.bytes_zero_copy += len;
	vb_msg_queue(c, vb_pick_qp(c), m);
	return 0;
}

/* Registers [addr, addr + len) with the access flags given. */
static struct vb_mr *
vb_mr_new(struct vb_conn *c, void *addr, size_t len, int access)
{
	struct vb_mr *m;
	int err;

	if (c->pd == NULL || c->state >= VBS_DRAINING) {
		errno = ENOTCONN;
		return NULL;
	}
	m = calloc(1, sizeof *m);
	if (m == NULL)
		return NULL;
	m->mr = ibv_reg_mr(c->pd, addr, len, access);
	if (m->mr == NULL) {
		err = errno != 0 ? errno : ENOMEM;
		free(m);
		errno = err;
		return NULL;
	}
	m->base.ops = &verbs_transport_ops;
	m->c = c;
	TAILQ_INSERT_TAIL(&c->mrs, m, link);
	return m;
}

/* Registers local memory as the target or source of one-sided operations. */
static struct fam_mr *
vb_mr_register(struct fam_conn *fc, void *addr, size_t len)
{
	struct vb_mr *m = vb_mr_new(vb_conn_of(fc), addr, len,
	    IBV_ACCESS_LOCAL_WRITE);

	return m != NULL ? &m->base : NULL;
}

/* Releases a registration (a lease ends: its rkey reaches nothing). */
static void
vb_mr_deregister(struct fam_mr *mr)
{
	struct vb_mr *m = (struct vb_mr *)mr;

	TAILQ_REMOVE(&m->c->mrs, m, link);
	(void)ibv_dereg_mr(m->mr);
	free(m);
}

/* Exposes memory to the peer's one-sided operations, least access. */
static int
vb_expose(struct fam_conn *fc, void *addr, size_t len, bool writable,
    struct fam_mr **out, uint64_t *raddr, uint32_t *rkey)
{
	struct vb_conn *c = vb_conn_of(fc);
	struct vb_mr *m;
	int access = IBV_ACCESS_REMOTE_READ;

	if (c->state != VBS_OPEN)
		return -ENOTCONN; /* never before the hello is accepted */
	if (writable)
		access |= IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;
	m = vb_mr_new(c, addr, len, access);
	if (m == NULL)
		return errno != 0 ? -errno : -ENOMEM;
	*out = &m->base;
	*raddr = (uint64_t)(uintptr_t)addr;
	*rkey = m->mr->rkey;
	return 0;
}

/* Closes the connection (orderly, from our side). */
static void
vb_close_api(struct fam_conn *fc)
{
	struct vb_conn *c = vb_conn_of(fc);

	vb_close(c, c->state == VBS_CLOSING ? c->final_err : 0);
}

/* Returns the peer's address. */
static const char *
vb_peer(const struct fam_conn *fc)
{
	return ((const struct vb_conn *)fc)->peer;
}

/* Returns the connection's counters. */
static const struct fam_conn_stats *
vb_stats(const struct fam_conn *fc)
{
	return &((const struct vb_conn *)fc)->stats;
}

/* Returns true while the connection is open. */
static bool
vb_is_open(const struct fam_conn *fc)
{
	return ((const struct vb_conn *)fc)->state == VBS_OPEN;
}

const struct fam_transport_ops verbs_transport_ops = {
	.kind = FAM_TP_VERBS,
	.name = "verbs",
	.listen = vb_listen,
	.listener_free = vb_listener_free,
	.listener_addr = vb_listener_addr,
	.connect = vb_connect,
	.set_handlers = vb_set_handlers,
	.call = vb_call,
	.read = vb_read,
	.write = vb_write,
	.flush = vb_flush,
	.reply = vb_reply,
	.mr_register = vb_mr_register,
	.mr_deregister = vb_mr_deregister,
	.expose = vb_expose,
	.close = vb_close_api,
	.peer = vb_peer,
	.stats = vb_stats,
	.is_open = vb_is_open,
};
