/*
 * transport-int.h - what the transports share behind transport.h: the
 * table of functions each one fills in, and helpers that do not depend on
 * the fabric (addresses, options, response headers).
 *
 * Every transport's connection, listener and memory registration starts
 * with the matching struct below, so transport.c can dispatch on it.
 */
#ifndef FAM_TRANSPORT_INT_H
#define FAM_TRANSPORT_INT_H

#include <sys/socket.h>

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

extern const struct fam_transport_ops tcp_transport_ops;
extern const struct fam_transport_ops verbs_transport_ops;

int tp_resolve(const char *addr, bool passive, struct sockaddr_storage *ss,
    socklen_t *sslen, char **cause);
void tp_format_addr(const struct sockaddr *sa, socklen_t len, char *buf,
    size_t size);
void tp_opts_fill(struct fam_conn_opts *out, const struct fam_conn_opts *in);
int tp_resp_hdr(const struct fam_hdr *req, int status, size_t len,
    uint8_t out[FAM_PROTO_HDR_LEN]);

#endif /* FAM_TRANSPORT_INT_H */
