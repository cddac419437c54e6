/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport.h - how roles talk to each other, whatever the fabric.
 *
 * A transport moves the messages of proto.h between two famd processes and
 * performs chunk reads and writes against a peer's regions. Roles use only
 * this interface; `tcp` (transport-tcp.c) and `verbs` (verbs/)
 * implement it, chosen by `transport` in famd.conf.
 *
 * Operations:
 *  - fam_conn_call(): a two-sided request; the response payload is handed
 *    to the completion.
 *  - fam_conn_read() / fam_conn_write(): a chunk read into, or written from,
 *    local memory. On verbs these are one-sided RDMA READ/WRITE against the
 *    region's lease (remote address and rkey); on tcp they are READ/WRITE
 *    requests that the passive side's loop serves, with the data read from
 *    the socket straight into `dst` and written straight from `src`.
 *    fam_conn_readf() / fam_conn_writef() take FAM_F_BACKGROUND, which the
 *    request carries to a dpu (read-ahead, write-back): traffic off the
 *    critical path, counted apart.
 *  - fam_conn_flush(): puts what was queued on the wire now, in as few
 *    system calls (tcp: writev) or doorbells (verbs: one chain of work
 *    requests) as it takes, instead of when the loop next runs. A dpu
 *    aggregating requests queues a batch, then flushes once.
 *  - On the passive side, READ and WRITE are served by the transport itself
 *    through the `resolve` handler (like a NIC serving one-sided verbs), or,
 *    when `resolve` is NULL, handed to `request` like any other message (the
 *    dpu does this to look into its cache first).
 *
 * Every operation completes exactly once, with 0 or -errno: -ECONNRESET when
 * the connection is lost, -ETIMEDOUT when its deadline (op_timeout_ms)
 * passes, or the peer's status negated. When a connection closes, every
 * pending operation completes with an error before `closed` is called.
 *
 * A connection belongs to the event loop it was created on: every callback
 * runs there, and every call must be made from there.
 *
 * Connection states (both transports):
 *   CONNECTING  socket/rdma_cm connect in progress (active side)
 *   HELLO       connected; hello sent (active) or awaited (passive); no
 *               region memory is reachable yet
 *   OPEN        hello accepted: requests and one-sided access allowed
 *   CLOSED      torn down; pending operations have completed with errors
 */
#ifndef FAM_TRANSPORT_H
#define FAM_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "wire/proto.h"

struct event_base;
struct fam_conn;
struct fam_listener;
struct fam_mr;

enum fam_transport_kind {
	FAM_TP_TCP,
	FAM_TP_VERBS,
};

/* A peer's region as one-sided access needs it (from REGION_CREATE). */
struct fam_remote {
	uint32_t region;
	uint32_t rkey;
	uint64_t addr;
	uint64_t size;
};

/*
 * Completion of an operation: status 0 or -errno; for fam_conn_call() the
 * response payload (valid only during the callback).
 */
typedef void (*fam_done_fn)(void *ctx, int status, const uint8_t *payload,
    uint32_t len);

/* Called when a reply's payload buffer is no longer needed. */
typedef void (*fam_sent_fn)(void *ctx);

struct fam_conn_handlers {
	/*
	 * Passive side: a peer proved the secret (HELLO, then AUTH: the
	 * transport checked the version and the peer's proof); fill `resp`
	 * and return 0, or -errno to refuse (the peer gets that status).
	 */
	int (*hello)(struct fam_conn *c, const struct fam_hello *req,
	    struct fam_hello_resp *resp, void *arg);
	/* Active side: the server accepted our hello and proved the secret. */
	void (*connected)(struct fam_conn *c, const struct fam_hello_resp *resp,
	    void *arg);
	/*
	 * A request arrived (any type but HELLO, and READ/WRITE only when
	 * `resolve` is NULL). `payload` is valid during the call; answer now
	 * or later with fam_conn_reply().
	 */
	void (*request)(struct fam_conn *c, const struct fam_hdr *h,
	    const uint8_t *payload, void *arg);
	/*
	 * Passive side of READ/WRITE: map region/offset/len to local memory.
	 * Return 0 with *mem and a *hold token that keeps the memory valid
	 * until release(hold), or -errno (ENOENT, ERANGE, EROFS, EINVAL),
	 * which is sent back to the peer.
	 */
	int (*resolve)(void *arg, uint32_t region, uint64_t off, uint32_t len,
	    bool write, void **mem, void **hold);
	/*
	 * The transfer of a resolved range is over: `len` bytes actually
	 * moved (fewer than resolved when the connection died mid-way).
	 * Called before `closed` for every transfer of the connection.
	 */
	void (*release)(void *arg, void *hold, bool write, uint32_t len);
	/* The connection is gone (err 0 for an orderly close). */
	void (*closed)(struct fam_conn *c, int err, void *arg);
};

struct fam_conn_opts {
	enum fam_transport_kind kind;
	struct fam_hello hello;      /* active side: what we send (the
	                              * nonce is the transport's); passive
	                              * side: role and node of our challenge */
	char secret[FAM_SECRET_MAX + 1]; /* what both sides prove (empty:
	                              * none: the passive side takes any
	                              * proof, the active side takes only a
	                              * peer without a secret) */
	uint32_t op_timeout_ms;      /* deadline of every operation */
	uint32_t hello_timeout_ms;   /* passive side: the whole handshake
	                              * (0: op_timeout_ms) */
	uint32_t max_outstanding;    /* requests in flight per connection */
	uint32_t max_payload;        /* largest payload accepted */
	unsigned qps_per_peer;       /* verbs, active side: RC QPs per peer */
	uint32_t inject_error_ppm;   /* verbs, a test aid: completions per
	                              * million turned into errors */
	bool inject_bad_imm;         /* verbs, a test aid: every message
	                              * after the hello goes with immediate
	                              * data that names another type */
	const struct fam_peer_key *peer_keys; /* passive side: a peer whose
	                              * hello names one of these nodes
	                              * proves that node's key, not the
	                              * secret; with some, a peer named in
	                              * none needs the secret (the caller
	                              * keeps them alive) */
	size_t npeer_keys;
	struct fam_tls *tls;         /* tcp: TLS 1.3 with these settings
	                              * before the hello (NULL: none); the
	                              * caller keeps it alive meanwhile */
};

/* Counters of one connection (bytes exclude headers). */
struct fam_conn_stats {
	uint64_t msgs_in, msgs_out;
	uint64_t bytes_in, bytes_out;
	uint64_t reads, writes, calls;
	uint64_t bad_frames;  /* protocol violations (connection closed) */
	uint64_t crc_errors;  /* chunks whose data did not match their CRC */
	uint64_t timeouts;
	uint64_t completion_errors; /* verbs: bad work completions, injected
	                             * ones included (connection closed) */
	uint64_t input_pauses; /* times input stopped: answers piled up
	                        * unread, or the role throttled it */
	uint64_t doorbells;   /* verbs: ibv_post_send calls (chains posted) */
	uint64_t wrs;         /* verbs: send work requests in them */
	uint64_t wrs_signalled; /* verbs: of which asked for a completion */
	uint64_t onesided;    /* verbs: READs and WRITEs done one-sided */
	uint64_t bytes_zero_copy; /* verbs: reply payload bytes sent straight
	                           * from the caller's registered memory */
	uint32_t outstanding; /* requests awaiting a response now */
};

typedef void (*fam_accept_fn)(struct fam_listener *l, struct fam_conn *c,
    const char *peer, void *arg);

/*
 * Passive side: listen on "host:port" (port 0: any free port); each new
 * connection goes to accept, which sets its handlers (or closes it).
 */
int fam_listen(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, fam_accept_fn accept, void *arg,
    struct fam_listener **out, char **cause);
void fam_listener_free(struct fam_listener *l);
/* The address actually bound, "host:port", with the port chosen for 0. */
const char *fam_listener_addr(const struct fam_listener *l);

/* Sets the handlers of a new (accepted) connection. */
void fam_conn_set_handlers(struct fam_conn *c,
    const struct fam_conn_handlers *h, void *arg);

/* Active side: connect to "host:port" and send opts->hello. */
int fam_connect(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, const struct fam_conn_handlers *h,
    void *arg, struct fam_conn **out, char **cause);

int fam_conn_call(struct fam_conn *c, uint8_t type, const void *payload,
    uint32_t len, fam_done_fn done, void *ctx);
int fam_conn_read(struct fam_conn *c, const struct fam_remote *r,
    uint64_t off, uint32_t len, void *dst, struct fam_mr *mr,
    fam_done_fn done, void *ctx);
int fam_conn_write(struct fam_conn *c, const struct fam_remote *r,
    uint64_t off, uint32_t len, const void *src, struct fam_mr *mr,
    fam_done_fn done, void *ctx);
/* As fam_conn_read() and fam_conn_write(), with FAM_F_BACKGROUND or 0. */
int fam_conn_readf(struct fam_conn *c, const struct fam_remote *r,
    uint64_t off, uint32_t len, void *dst, struct fam_mr *mr, uint16_t flags,
    fam_done_fn done, void *ctx);
int fam_conn_writef(struct fam_conn *c, const struct fam_remote *r,
    uint64_t off, uint32_t len, const void *src, struct fam_mr *mr,
    uint16_t flags, fam_done_fn done, void *ctx);
/* Sends what is queued now (see above); 0 or -ENOTCONN. */
int fam_conn_flush(struct fam_conn *c);

/*
 * Answers request `req` with status (0 or positive errno) and a payload,
 * which must stay valid until sent(ctx) is called (sent may be NULL when
 * the payload is copied or empty: set copy = true to have it copied).
 * An error response carries no payload. When the call fails (-ENOTCONN
 * once the connection is closing, -EINVAL, -EMSGSIZE), sent is not called
 * and the payload stays the caller's.
 */
int fam_conn_reply(struct fam_conn *c, const struct fam_hdr *req,
    int status, const void *payload, uint32_t len, bool copy,
    fam_sent_fn sent, void *ctx);
/*
 * fam_conn_replyv(): the payload gathered from iov. With mr (a registration
 * covering every iovec), verbs sends it from there without copying it when
 * mr is in the connection's protection domain (bytes_zero_copy counts it),
 * and copies it otherwise; sent(ctx) comes only once the send completed
 * (or failed). NULL mr: as fam_conn_reply() without copy. tcp ignores mr.
 */
int fam_conn_replyv(struct fam_conn *c, const struct fam_hdr *req,
    int status, const struct iovec *iov, int iovcnt, struct fam_mr *mr,
    fam_sent_fn sent, void *ctx);

/*
 * Registers local memory for read/write (verbs). On tcp nothing needs
 * registering: it returns a token that every call accepts (as it accepts
 * NULL), and deregistering it does nothing. NULL means failure.
 */
struct fam_mr *fam_mr_register(struct fam_conn *c, void *addr, size_t len);
void fam_mr_deregister(struct fam_mr *mr);

/*
 * Passive side (the memory role): makes len bytes at addr reachable by the
 * peer's one-sided operations on this connection only - RDMA READ, and
 * RDMA WRITE too when writable - and returns the lease to put in the
 * REGION_CREATE answer: the remote address of addr (verbs: 0, offsets
 * from there) and the rkey. Allowed only once the peer's hello is
 * accepted (-ENOTCONN before). The lease
 * ends with fam_mr_deregister(*out) or with the connection: after that the
 * rkey reaches nothing. On tcp the peer's READ/WRITE requests go through
 * `resolve` instead: *out is a token, *raddr and *rkey are 0.
 *
 * Registrations (both kinds) belong to their connection: once its `closed`
 * handler has returned, those not deregistered are released by the
 * transport and their pointers must be forgotten.
 */
int fam_conn_expose(struct fam_conn *c, void *addr, size_t len,
    bool writable, struct fam_mr **out, uint64_t *raddr, uint32_t *rkey);

/*
 * Returns 0 when this process may pin `bytes` of memory for the verbs
 * transport (RLIMIT_MEMLOCK, or CAP_IPC_LOCK), or -ENOMEM with a cause
 * naming the limit and how to raise it.
 */
int fam_memlock_check(uint64_t bytes, char **cause);

/* TLS for tcp (transport-tls.c): certificate, key, CA of every peer. */
struct fam_tls;
int fam_tls_new(const char *cert, const char *key, const char *ca,
    struct fam_tls **out, char **cause);
void fam_tls_free(struct fam_tls *t);

/* Closes the connection: pending operations fail, `closed` is called. */
void fam_conn_close(struct fam_conn *c);
const char *fam_conn_peer(const struct fam_conn *c);
const char *fam_conn_identity(const struct fam_conn *c);
const struct fam_conn_stats *fam_conn_stats(const struct fam_conn *c);
bool fam_conn_is_open(const struct fam_conn *c);
/*
 * Stops (on) or resumes taking requests from c, for a role whose work for
 * this peer piled up; -EOPNOTSUPP where the transport cannot (the role
 * then refuses what is over its bound).
 */
int fam_conn_throttle(struct fam_conn *c, bool on);

#endif /* FAM_TRANSPORT_H */
