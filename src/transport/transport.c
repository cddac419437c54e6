/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport.c - the public face of transport.h: chooses the transport by
 * kind, dispatches every call to it, and holds helpers that need no
 * connection (parsing and printing addresses, option defaults, validated
 * response headers). The connection core is transport-conn.c.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "transport/transport-int.h"

/* Returns the transport of a kind, or NULL (not built in) with *cause. */
static const struct fam_transport_ops *
tp_ops(enum fam_transport_kind kind, char **cause)
{
	switch (kind) {
	case FAM_TP_TCP:
		return &tcp_transport_ops;
	case FAM_TP_VERBS:
		return &verbs_transport_ops;
	}
	*cause = xasprintf("transport %s is not built into this famd",
	    kind == FAM_TP_VERBS ? "verbs" : "?");
	return NULL;
}

/*
 * Resolves "host:port" or "[v6]:port" into one socket address (the first
 * the resolver gives). Returns 0 or -errno with *cause.
 */
int
tp_resolve(const char *addr, bool passive, struct sockaddr_storage *ss,
    socklen_t *sslen, char **cause)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0) };
	struct addrinfo *res = NULL;
	char host[256];
	const char *colon, *port;
	size_t hlen;
	int rc;

	if (addr[0] == '[') {
		const char *rb = strchr(addr, ']');

		if (rb == NULL || rb[1] != ':') {
			*cause = xasprintf("%s: expected [address]:port", addr);
			return -EINVAL;
		}
		hlen = (size_t)(rb - addr - 1);
		memcpy(host, addr + 1, hlen < sizeof host ? hlen : 0);
		colon = rb + 1;
	} else {
		colon = strrchr(addr, ':');
		if (colon == NULL || colon == addr) {
			*cause = xasprintf("%s: expected host:port", addr);
			return -EINVAL;
		}
		hlen = (size_t)(colon - addr);
		memcpy(host, addr, hlen < sizeof host ? hlen : 0);
	}
	if (hlen == 0 || hlen >= sizeof host) {
		*cause = xasprintf("%s: bad host", addr);
		return -EINVAL;
	}
	host[hlen] = '\0';
	port = colon + 1;
	if (*port == '\0') {
		*cause = xasprintf("%s: missing port", addr);
		return -EINVAL;
	}
	rc = getaddrinfo(host, port, &hints, &res);
	if (rc != 0) {
		*cause = xasprintf("%s: %s", addr, gai_strerror(rc));
		return rc == EAI_SYSTEM ? -errno : -EADDRNOTAVAIL;
	}
	if (res->ai_addrlen > sizeof *ss) {
		freeaddrinfo(res);
		*cause = xasprintf("%s: address too long", addr);
		return -EINVAL;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sslen = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* Prints a socket address as "1.2.3.4:port" or "[::1]:port". */
void
tp_format_addr(const struct sockaddr *sa, socklen_t len, char *buf,
    size_t size)
{
	char host[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *sin = (const void *)sa;

		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof host);
		snprintf(buf, size, "%s:%u", host, ntohs(sin->sin_port));
	} else if (sa->sa_family == AF_INET6 &&
	    len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *sin6 = (const void *)sa;

		inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof host);
		snprintf(buf, size, "[%s]:%u", host, ntohs(sin6->sin6_port));
	} else
		snprintf(buf, size, "?");
}

/* Copies options, giving defaults to the limits left at 0. */
void
tp_opts_fill(struct fam_conn_opts *out, const struct fam_conn_opts *in)
{
	*out = *in;
	if (out->op_timeout_ms == 0)
		out->op_timeout_ms = TP_DEFAULT_TIMEOUT_MS;
	if (out->max_outstanding == 0)
		out->max_outstanding = TP_DEFAULT_OUTSTANDING;
	if (out->max_payload == 0 || out->max_payload > FAM_PROTO_MAX_PAYLOAD)
		out->max_payload = FAM_PROTO_MAX_PAYLOAD;
	if (out->qps_per_peer == 0)
		out->qps_per_peer = 1;
	if (out->hello_timeout_ms == 0 ||
	    out->hello_timeout_ms > out->op_timeout_ms)
		out->hello_timeout_ms = out->op_timeout_ms;
	out->secret[FAM_SECRET_MAX] = '\0';
}

/*
 * Encodes the header of the response to req, checked as the peer will
 * check it. Returns 0, or -EINVAL (bad status or request) or -EMSGSIZE.
 */
int
tp_resp_hdr(const struct fam_hdr *req, int status, size_t len,
    uint8_t out[FAM_PROTO_HDR_LEN])
{
	struct fam_hdr h = {
		.magic = FAM_PROTO_MAGIC,
		.version = FAM_PROTO_VERSION,
		.type = req->type,
		.flags = FAM_F_RESPONSE,
		.len = (uint32_t)len,
		.status = status,
		.id = req->id,
	};
	int err;

	if (req->flags & FAM_F_RESPONSE)
		return -EINVAL;
	if (len > FAM_PROTO_MAX_PAYLOAD)
		return -EMSGSIZE;
	err = proto_check_hdr(&h, 0);
	if (err == -EMSGSIZE)
		return err;
	if (err < 0)
		return -EINVAL;
	proto_put_hdr(out, &h);
	return 0;
}

/* Listens on addr with the transport opts->kind names. */
int
fam_listen(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, fam_accept_fn accept, void *arg,
    struct fam_listener **out, char **cause)
{
	const struct fam_transport_ops *ops = tp_ops(opts->kind, cause);

	if (ops == NULL)
		return -EPROTONOSUPPORT;
	return ops->listen(base, addr, opts, accept, arg, out, cause);
}

/* Stops listening; connections already accepted stay. */
void
fam_listener_free(struct fam_listener *l)
{
	if (l != NULL)
		l->ops->listener_free(l);
}

/* Returns the address a listener is bound to (the port chosen for 0). */
const char *
fam_listener_addr(const struct fam_listener *l)
{
	return l->ops->listener_addr(l);
}

/* Sets the handlers of a new (accepted) connection. */
void
fam_conn_set_handlers(struct fam_conn *c, const struct fam_conn_handlers *h,
    void *arg)
{
	c->ops->set_handlers(c, h, arg);
}

/* Connects to addr with the transport opts->kind names. */
int
fam_connect(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, const struct fam_conn_handlers *h,
    void *arg, struct fam_conn **out, char **cause)
{
	const struct fam_transport_ops *ops = tp_ops(opts->kind, cause);

	if (ops == NULL)
		return -EPROTONOSUPPORT;
	return ops->connect(base, addr, opts, h, arg, out, cause);
}

/* Sends a request; done gets the response. */
int
fam_conn_call(struct fam_conn *c, uint8_t type, const void *payload,
    uint32_t len, fam_done_fn done, void *ctx)
{
	return c->ops->call(c, type, payload, len, done, ctx);
}

/* Reads len bytes at off of a peer's region into dst. */
int
fam_conn_read(struct fam_conn *c, const struct fam_remote *r, uint64_t off,
    uint32_t len, void *dst, struct fam_mr *mr, fam_done_fn done, void *ctx)
{
	return c->ops->read(c, r, off, len, dst, mr, 0, done, ctx);
}

/* Writes len bytes from src at off of a peer's region. */
int
fam_conn_write(struct fam_conn *c, const struct fam_remote *r, uint64_t off,
    uint32_t len, const void *src, struct fam_mr *mr, fam_done_fn done,
    void *ctx)
{
	return c->ops->write(c, r, off, len, src, mr, 0, done, ctx);
}

/* Reads as fam_conn_read(), marked background or not. */
int
fam_conn_readf(struct fam_conn *c, const struct fam_remote *r, uint64_t off,
    uint32_t len, void *dst, struct fam_mr *mr, uint16_t flags,
    fam_done_fn done, void *ctx)
{
	if (flags & ~FAM_F_BACKGROUND)
		return -EINVAL;
	return c->ops->read(c, r, off, len, dst, mr, flags, done, ctx);
}

/* Writes as fam_conn_write(), marked background or not. */
int
fam_conn_writef(struct fam_conn *c, const struct fam_remote *r, uint64_t off,
    uint32_t len, const void *src, struct fam_mr *mr, uint16_t flags,
    fam_done_fn done, void *ctx)
{
	if (flags & ~FAM_F_BACKGROUND)
		return -EINVAL;
	return c->ops->write(c, r, off, len, src, mr, flags, done, ctx);
}

/* Puts queued requests on the wire now. */
int
fam_conn_flush(struct fam_conn *c)
{
	return c->ops->flush != NULL ? c->ops->flush(c) : 0;
}

/* Answers a request with one payload buffer. */
int
fam_conn_reply(struct fam_conn *c, const struct fam_hdr *req, int status,
    const void *payload, uint32_t len, bool copy, fam_sent_fn sent,
    void *ctx)
{
	struct iovec iov = { .iov_base = (void *)payload, .iov_len = len };

	return c->ops->reply(c, req, status, &iov, len > 0 ? 1 : 0, copy,
	    NULL, sent, ctx);
}

/* Answers a request with a payload gathered from several buffers. */
int
fam_conn_replyv(struct fam_conn *c, const struct fam_hdr *req, int status,
    const struct iovec *iov, int iovcnt, struct fam_mr *mr, fam_sent_fn sent,
    void *ctx)
{
	return c->ops->reply(c, req, status, iov, iovcnt, false, mr, sent,
	    ctx);
}

/* Registers local memory for reads and writes on c. */
struct fam_mr *
fam_mr_register(struct fam_conn *c, void *addr, size_t len)
{
	return c->ops->mr_register(c, addr, len);
}

/* Releases a registration (NULL is ignored). */
void
fam_mr_deregister(struct fam_mr *mr)
{
	if (mr != NULL)
		mr->ops->mr_deregister(mr);
}

/* Lets the peer reach local memory with one-sided operations. */
int
fam_conn_expose(struct fam_conn *c, void *addr, size_t len, bool writable,
    struct fam_mr **out, uint64_t *raddr, uint32_t *rkey)
{
	if (addr == NULL || len == 0 || out == NULL || raddr == NULL ||
	    rkey == NULL)
		return -EINVAL;
	return c->ops->expose(c, addr, len, writable, out, raddr, rkey);
}

/* Closes a connection. */
void
fam_conn_close(struct fam_conn *c)
{
	c->ops->close(c);
}

/* Returns the peer's address. */
const char *
fam_conn_peer(const struct fam_conn *c)
{
	return c->ops->peer(c);
}

/*
 * Returns the node name the peer proved with a key of its own (peer_keys),
 * or NULL when it proved the shared secret (or none).
 */
const char *
fam_conn_identity(const struct fam_conn *c)
{
	const struct tp_conn *tc = (const struct tp_conn *)c;

	return tc->keyed ? tc->node : NULL;
}

/* Returns the connection's counters. */
const struct fam_conn_stats *
fam_conn_stats(const struct fam_conn *c)
{
	return c->ops->stats(c);
}

/* Returns true once the hello is done and until the connection closes. */
bool
fam_conn_is_open(const struct fam_conn *c)
{
	return c->ops->is_open(c);
}

/* Stops or resumes taking requests from c. */
int
fam_conn_throttle(struct fam_conn *c, bool on)
{
	if (c->ops->throttle == NULL)
		return -EOPNOTSUPP;
	return c->ops->throttle(c, on);
}
