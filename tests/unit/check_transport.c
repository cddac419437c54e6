/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_transport.c - the tcp transport between two ends in one process:
 * hello, calls, reads and writes through resolve, out-of-order completion,
 * max_outstanding, deadlines, refusals, and every protocol violation a peer
 * can commit, each of which must close that connection only, be counted,
 * and complete every operation exactly once. Then TLS under tcp (with
 * certificates made here by libcrypto) and per-peer keys.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "core/famd.h"
#include "transport/transport.h"
#include "unit.h"

#define MEM_SIZE (4u << 20)
/*
 * Deadlines of tests that are not about deadlines, and how long to wait for
 * what must happen: long, so that a loaded machine cannot fail them.
 */
#define T_OP     10000
#define T_WAIT   10000
#define MAX_HELD 64
#define MAX_OPS  64

/* The passive end: a listener and the one connection it accepted. */
static struct {
	struct fam_listener *l;
	struct fam_conn *c;
	uint8_t *mem;
	int hello_err;          /* what the hello handler returns */
	bool hold_requests;     /* keep requests unanswered */
	bool no_resolve;
	int resolve_err;
	struct fam_hdr held[MAX_HELD];
	int nheld, max_held;
	unsigned resolves, releases;
	uint64_t released_bytes;
	bool closed;
	int closed_err;
	uint64_t bad_frames;
	bool closed_inside_api;
	unsigned background;    /* requests that carried FAM_F_BACKGROUND */
} srv;

/* The active end. */
static struct {
	struct fam_conn *c;
	bool connected;
	struct fam_hello_resp resp;
	bool closed;
	int closed_err;
	uint64_t bad_frames;
	int ops_done;
	int status[MAX_OPS];
	int calls[MAX_OPS];     /* completions per op: must end at 1 */
	int order[MAX_OPS];
	char payload[MAX_OPS][32];
	bool in_api;
	bool closed_inside_api;
	bool closed_before_ops;
} cli;

static struct event_base *base;
static char srv_addr[64];
static struct fam_tls *srv_tls, *cli_tls;   /* NULL: plain tcp */
static const struct fam_peer_key *srv_keys; /* the server's peer_keys */
static size_t srv_nkeys;

/* A raw peer's socket and what it received. */
static int raw_fd = -1;
static uint8_t raw_buf[1 << 16];
static size_t raw_len;
static bool raw_eof;

/* Passive hello: accepts (or refuses) and names the server. */
static int
srv_hello(struct fam_conn *c, const struct fam_hello *req,
    struct fam_hello_resp *resp, void *arg)
{
	if (srv.hello_err != 0)
		return srv.hello_err;
	resp->role = FAM_WIRE_ROLE_MEMORY;
	resp->session = 0x5e55;
	resp->instance = 0x1;
	snprintf(resp->node, sizeof resp->node, "srv");
	ck_assert_str_eq(req->node, "cli");
	return 0;
}

/* Answers a request now: a short text naming its type and id. */
static void
srv_answer(struct fam_conn *c, const struct fam_hdr *h)
{
	char text[32];
	int n = snprintf(text, sizeof text, "%s/%llu", proto_type_name(h->type),
	    (unsigned long long)h->id);

	if (h->type == FAM_MSG_WRITE)
		n = 0; /* a WRITE response is empty */

	ck_assert_int_eq(fam_conn_reply(c, h, 0, text, (uint32_t)n, true,
	    NULL, NULL), 0);
}

/* Passive request: answered at once, or held for the test to answer. */
static void
srv_request(struct fam_conn *c, const struct fam_hdr *h,
    const uint8_t *payload, void *arg)
{
	if (h->flags & FAM_F_BACKGROUND)
		srv.background++;
	if (h->type == FAM_MSG_READ && !srv.hold_requests) {
		static uint8_t zeros[4096];
		struct fam_rw m;

		ck_assert_int_eq(proto_get_read(payload, h->len, &m), 0);
		ck_assert_uint_le(m.len, sizeof zeros);
		ck_assert_int_eq(fam_conn_reply(c, h, 0, zeros, m.len, true,
		    NULL, NULL), 0);
		return;
	}
	if (srv.hold_requests) {
		ck_assert_int_lt(srv.nheld, MAX_HELD);
		srv.held[srv.nheld++] = *h;
		if (srv.nheld > srv.max_held)
			srv.max_held = srv.nheld;
		return;
	}
	srv_answer(c, h);
}

/* Passive resolve: a range of the test memory. */
static int
srv_resolve(void *arg, uint32_t region, uint64_t off, uint32_t len,
    bool write, void **mem, void **hold)
{
	if (srv.resolve_err != 0)
		return srv.resolve_err;
	if (region != 1)
		return -ENOENT;
	if (off > MEM_SIZE || len > MEM_SIZE - off)
		return -ERANGE;
	srv.resolves++;
	*mem = srv.mem + off;
	*hold = &srv;
	return 0;
}

/* Passive release: counts. */
static void
srv_release(void *arg, void *hold, bool write, uint32_t len)
{
	ck_assert_ptr_eq(hold, &srv);
	srv.releases++;
	srv.released_bytes += len;
}

/* Passive closed: records why, checks every transfer was released. */
static void
srv_closed(struct fam_conn *c, int err, void *arg)
{
	srv.closed = true;
	srv.closed_err = err;
	srv.bad_frames = fam_conn_stats(c)->bad_frames;
	ck_assert_uint_eq(srv.resolves, srv.releases);
	srv.c = NULL;
}

static const struct fam_conn_handlers srv_handlers = {
	.hello = srv_hello,
	.request = srv_request,
	.resolve = srv_resolve,
	.release = srv_release,
	.closed = srv_closed,
};

static const struct fam_conn_handlers srv_handlers_noresolve = {
	.hello = srv_hello,
	.request = srv_request,
	.closed = srv_closed,
};

/* Takes the connection. */
static void
srv_accept(struct fam_listener *l, struct fam_conn *c, const char *peer,
    void *arg)
{
	srv.c = c;
	fam_conn_set_handlers(c, srv.no_resolve ? &srv_handlers_noresolve :
	    &srv_handlers, NULL);
}

/* Active connected. */
static void
cli_connected(struct fam_conn *c, const struct fam_hello_resp *resp,
    void *arg)
{
	cli.connected = true;
	cli.resp = *resp;
}

/* Active closed: records why; operations must all be complete by now. */
static void
cli_closed(struct fam_conn *c, int err, void *arg)
{
	cli.closed = true;
	cli.closed_err = err;
	cli.bad_frames = fam_conn_stats(c)->bad_frames;
	if (cli.in_api)
		cli.closed_inside_api = true;
	cli.c = NULL;
}

static const struct fam_conn_handlers cli_handlers = {
	.connected = cli_connected,
	.closed = cli_closed,
};

/* Completion of op number (intptr_t)ctx. */
static void
cli_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	int i = (int)(intptr_t)ctx;

	ck_assert_int_lt(i, MAX_OPS);
	if (cli.in_api)
		cli.closed_inside_api = true;
	cli.calls[i]++;
	cli.status[i] = status;
	cli.order[cli.ops_done++] = i;
	if (payload != NULL && len < sizeof cli.payload[i]) {
		memcpy(cli.payload[i], payload, len);
		cli.payload[i][len] = '\0';
	}
	if (cli.closed)
		cli.closed_before_ops = true;
}

static int want_done;

/* True once the client's hello is answered (or it closed). */
static bool
p_connected(void)
{
	return cli.connected || cli.closed;
}

/* True once want_done operations completed. */
static bool
p_done(void)
{
	return cli.ops_done >= want_done;
}

/* True once the client's closed handler ran. */
static bool
p_cli_closed(void)
{
	return cli.closed;
}

/* True once the server connection's closed handler ran. */
static bool
p_srv_closed(void)
{
	return srv.closed;
}

static int want_held;

/* True once the server holds want_held requests (or a side closed). */
static bool
p_held(void)
{
	return srv.nheld >= want_held || cli.closed || srv.closed;
}

/* True once the server resolved want_held reads. */
static bool
p_resolved(void)
{
	return srv.resolves >= (unsigned)want_held || srv.closed;
}

/* True once both ends are closed. */
static bool
p_both_closed(void)
{
	return cli.closed && srv.closed;
}

/* Options with a secret and a deadline. */
static struct fam_conn_opts
opts(const char *secret, uint32_t timeout_ms, uint32_t outstanding)
{
	struct fam_conn_opts o = { .kind = FAM_TP_TCP,
		.op_timeout_ms = timeout_ms, .max_outstanding = outstanding };

	o.hello.role = FAM_WIRE_ROLE_HOST;
	snprintf(o.hello.node, sizeof o.hello.node, "cli");
	snprintf(o.secret, sizeof o.secret, "%s", secret);
	return o;
}

/* Starts a listener with a server secret. */
static void
start_server(const char *secret, uint32_t timeout_ms)
{
	struct fam_conn_opts o = opts(secret, timeout_ms, 0);
	char *cause = NULL;

	o.tls = srv_tls;
	o.peer_keys = srv_keys;
	o.npeer_keys = srv_nkeys;
	ck_assert_int_eq(fam_listen(base, "127.0.0.1:0", &o, srv_accept, NULL,
	    &srv.l, &cause), 0);
	snprintf(srv_addr, sizeof srv_addr, "%s", fam_listener_addr(srv.l));
	ck_assert_msg(strncmp(srv_addr, "127.0.0.1:", 10) == 0 &&
	    strcmp(srv_addr, "127.0.0.1:0") != 0, "bound to %s", srv_addr);
}

/* Connects the client with its secret, options as given. */
static void
start_client(const char *secret, uint32_t timeout_ms, uint32_t outstanding)
{
	struct fam_conn_opts o = opts(secret, timeout_ms, outstanding);
	char *cause = NULL;

	o.tls = cli_tls;
	ck_assert_int_eq(fam_connect(base, srv_addr, &o, &cli_handlers, NULL,
	    &cli.c, &cause), 0);
}

/* Fresh state and event loop for each test. */
static void
setup(void)
{
	memset(&srv, 0, sizeof srv);
	memset(&cli, 0, sizeof cli);
	want_done = 0;
	want_held = 0;
	srv.mem = calloc(1, MEM_SIZE);
	raw_fd = -1;
	raw_len = 0;
	raw_eof = false;
	srv_tls = cli_tls = NULL;
	srv_keys = NULL;
	srv_nkeys = 0;
	base = event_base_new();
	log_open(LOG_DEST_STDERR, LOG_WARNING);
}

/* Closes what is left; no operation completed twice. */
static void
teardown(void)
{
	if (cli.c != NULL)
		fam_conn_close(cli.c);
	if (srv.c != NULL)
		fam_conn_close(srv.c);
	unit_run_until(base, p_both_closed, T_WAIT);
	if (srv.l != NULL)
		fam_listener_free(srv.l);
	event_base_free(base);
	fam_tls_free(srv_tls);
	if (cli_tls != srv_tls)
		fam_tls_free(cli_tls);
	free(srv.mem);
	for (int i = 0; i < MAX_OPS; i++)
		ck_assert_int_le(cli.calls[i], 1);
}

/* Starts both ends and waits for the hello. */
static void
start_pair(uint32_t timeout_ms, uint32_t outstanding)
{
	start_server("s3cret", timeout_ms);
	start_client("s3cret", timeout_ms, outstanding);
	ck_assert(unit_run_until(base, p_connected, T_WAIT));
	ck_assert(cli.connected);
}

/* ---- raw peers ---------------------------------------------------------- */

/* A blocking socket connected to the listener. */
static int
raw_connect(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sin.sin_port = htons((uint16_t)atoi(strchr(srv_addr, ':') + 1));
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof sin), 0);
	return fd;
}

/* Sends a header and a payload on a raw socket. */
static void
raw_send(int fd, uint8_t type, uint16_t flags, uint64_t id, int32_t status,
    uint32_t len, const void *payload, size_t plen)
{
	struct fam_hdr h = { .magic = FAM_PROTO_MAGIC,
		.version = FAM_PROTO_VERSION, .type = type, .flags = flags,
		.len = len, .status = status, .id = id };
	uint8_t buf[FAM_PROTO_HDR_LEN];

	/* A whole WRITE carries the CRC32C of its data, as a client's does. */
	if (type == FAM_MSG_WRITE && !(flags & FAM_F_RESPONSE) &&
	    plen == len && len > FAM_WRITE_HDR_LEN)
		h.crc = proto_crc32c(0, (const uint8_t *)payload +
		    FAM_WRITE_HDR_LEN, len - FAM_WRITE_HDR_LEN);
	proto_put_hdr(buf, &h);
	ck_assert_int_eq(send(fd, buf, sizeof buf, MSG_NOSIGNAL),
	    (ssize_t)sizeof buf);
	if (plen > 0)
		ck_assert_int_eq(send(fd, payload, plen, MSG_NOSIGNAL),
		    (ssize_t)plen);
}

/* Collects what the raw socket has without blocking. */
static bool
p_raw_frame(void)
{
	struct pollfd pfd = { .fd = raw_fd, .events = POLLIN };

	while (!raw_eof && poll(&pfd, 1, 0) == 1) {
		ssize_t n = recv(raw_fd, raw_buf + raw_len,
		    sizeof raw_buf - raw_len, MSG_DONTWAIT);

		if (n <= 0) {
			raw_eof = true;
			break;
		}
		raw_len += (size_t)n;
	}
	return raw_len >= FAM_PROTO_HDR_LEN || raw_eof;
}

/* True once the raw socket saw the end of the stream. */
static bool
p_raw_eof(void)
{
	p_raw_frame();
	return raw_eof;
}

/* True once a whole frame (header and payload) is in raw_buf. */
static bool
p_raw_whole(void)
{
	struct fam_hdr h;

	p_raw_frame();
	if (raw_len < FAM_PROTO_HDR_LEN)
		return raw_eof;
	proto_get_hdr(raw_buf, &h);
	return raw_len >= FAM_PROTO_HDR_LEN + (size_t)h.len || raw_eof;
}

/* Receives one frame on the raw socket while running the loop. */
static bool
raw_recv(int fd, struct fam_hdr *h, uint8_t *payload)
{
	raw_fd = fd;
	if (!unit_run_until(base, p_raw_whole, T_WAIT) ||
	    raw_len < FAM_PROTO_HDR_LEN)
		return false;
	proto_get_hdr(raw_buf, h);
	if (h->len > sizeof raw_buf - FAM_PROTO_HDR_LEN ||
	    raw_len < FAM_PROTO_HDR_LEN + h->len)
		return false;
	if (payload != NULL)
		memcpy(payload, raw_buf + FAM_PROTO_HDR_LEN, h->len);
	memmove(raw_buf, raw_buf + FAM_PROTO_HDR_LEN + h->len,
	    raw_len - FAM_PROTO_HDR_LEN - h->len);
	raw_len -= FAM_PROTO_HDR_LEN + h->len;
	return true;
}

/*
 * Says hello on a raw socket, as a client does (HELLO, then AUTH with
 * the proof of secret), and returns the status of the AUTH response.
 */
static int
raw_handshake(int fd, const char *secret)
{
	struct fam_hello m = { .role = FAM_WIRE_ROLE_HOST };
	struct fam_challenge ch;
	struct fam_auth a;
	uint8_t buf[FAM_AUTH_RESP_LEN], key[FAM_KEY_LEN], proof[FAM_PROOF_LEN];
	struct fam_hdr h;

	snprintf(m.node, sizeof m.node, "cli");
	ck_assert_int_eq(proto_auth_nonce(m.nonce), 0);
	proto_put_hello(buf, &m);
	raw_send(fd, FAM_MSG_HELLO, 0, 1, 0, FAM_HELLO_LEN, buf,
	    FAM_HELLO_LEN);
	ck_assert(raw_recv(fd, &h, buf));
	ck_assert_int_eq(h.status, 0);
	ck_assert_uint_eq(h.len, FAM_CHALLENGE_LEN);
	ck_assert_int_eq(proto_get_challenge(buf, h.len, &ch), 0);
	ck_assert_int_eq(proto_auth_secret_key(secret, key), 0);
	ck_assert_int_eq(proto_auth_derive(&a, key, &m, &ch), 0);
	ck_assert_int_eq(proto_auth_client_proof(&a, 0, proof), 0);
	raw_send(fd, FAM_MSG_AUTH, 0, 2, 0, FAM_AUTH_LEN, proof, sizeof proof);
	ck_assert(raw_recv(fd, &h, buf));
	if (h.status == 0)
		ck_assert_uint_eq(h.len, FAM_AUTH_RESP_LEN);
	return h.status;
}

/* Says hello on a raw socket and expects it accepted. */
static void
raw_hello(int fd, const char *secret)
{
	ck_assert_int_eq(raw_handshake(fd, secret), 0);
}

/*
 * Answers a client's handshake on a raw socket as a server does: the
 * challenge, then (the client's proof unchecked) resp with our proof.
 */
static void
raw_serve_hello(int fd, const char *secret, const struct fam_hello_resp *resp)
{
	struct fam_hello m;
	struct fam_challenge ch = { .role = FAM_WIRE_ROLE_MEMORY };
	struct fam_auth a;
	uint8_t buf[256], key[FAM_KEY_LEN];
	struct fam_hdr h;

	ck_assert(raw_recv(fd, &h, buf));
	ck_assert_uint_eq(h.type, FAM_MSG_HELLO);
	ck_assert_int_eq(proto_get_hello(buf, h.len, &m), 0);
	snprintf(ch.node, sizeof ch.node, "%s", resp->node);
	ck_assert_int_eq(proto_auth_nonce(ch.nonce), 0);
	proto_put_challenge(buf, &ch);
	raw_send(fd, FAM_MSG_HELLO, FAM_F_RESPONSE, h.id, 0,
	    FAM_CHALLENGE_LEN, buf, FAM_CHALLENGE_LEN);
	ck_assert(raw_recv(fd, &h, buf));
	ck_assert_uint_eq(h.type, FAM_MSG_AUTH);
	ck_assert_int_eq(proto_auth_secret_key(secret, key), 0);
	ck_assert_int_eq(proto_auth_derive(&a, key, &m, &ch), 0);
	proto_put_hello_resp(buf + FAM_PROOF_LEN, resp);
	ck_assert_int_eq(proto_auth_server_proof(&a, buf + FAM_PROOF_LEN, buf),
	    0);
	raw_send(fd, FAM_MSG_AUTH, FAM_F_RESPONSE, h.id, 0,
	    FAM_AUTH_RESP_LEN, buf, FAM_AUTH_RESP_LEN);
}

/* A listening socket on a loopback port of its own, named in srv_addr. */
static int
raw_listen(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t slen = sizeof sin;
	int lfd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sin, sizeof sin), 0);
	ck_assert_int_eq(listen(lfd, 1), 0);
	ck_assert_int_eq(getsockname(lfd, (struct sockaddr *)&sin, &slen), 0);
	snprintf(srv_addr, sizeof srv_addr, "127.0.0.1:%u",
	    ntohs(sin.sin_port));
	return lfd;
}

/*
 * Connects the client (options o) to a raw server, which answers its
 * hello as memory node `node` proving `secret`; returns the server's
 * socket once the hello is over (the listener's in *lfd).
 */
static int
raw_serve_client(const struct fam_conn_opts *o, const char *secret,
    const char *node, int *lfd)
{
	struct fam_hello_resp resp = { .role = FAM_WIRE_ROLE_MEMORY };
	char *cause = NULL;
	int fd;

	*lfd = raw_listen();
	ck_assert_int_eq(fam_connect(base, srv_addr, o, &cli_handlers, NULL,
	    &cli.c, &cause), 0);
	unit_run_until(base, p_connected, 50);
	fd = accept(*lfd, NULL, NULL);
	snprintf(resp.node, sizeof resp.node, "%s", node);
	raw_serve_hello(fd, secret, &resp);
	ck_assert(unit_run_until(base, p_connected, T_WAIT));
	return fd;
}

/* ---- tests -------------------------------------------------------------- */

START_TEST(test_hello_then_call_round_trip)
{
	start_pair(T_OP, 0);
	ck_assert_uint_eq(cli.resp.session, 0x5e55);
	ck_assert_str_eq(cli.resp.node, "srv");
	ck_assert(fam_conn_is_open(cli.c));
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0, cli_done,
	    (void *)0), 0);
	want_done = 1;
	ck_assert(unit_run_until(base, p_done, T_WAIT));
	ck_assert_int_eq(cli.status[0], 0);
	ck_assert_str_eq(cli.payload[0], "stats/2");
}
END_TEST

START_TEST(test_calls_queued_before_hello_are_sent_after_it)
{
	start_server("s3cret", T_OP);
	start_client("s3cret", T_OP, 0);
	/* Not open yet: the call waits for the hello. */
	ck_assert(!fam_conn_is_open(cli.c));
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0, cli_done,
	    (void *)0), 0);
	want_done = 1;
	ck_assert(unit_run_until(base, p_done, T_WAIT));
	ck_assert_int_eq(cli.status[0], 0);
	ck_assert(cli.connected);
}
END_TEST

START_TEST(test_read_and_write_through_resolve)
{
	struct fam_remote r = { .region = 1, .size = MEM_SIZE };
	size_t len = 65536;
	uint8_t *src = malloc(len), *dst = calloc(1, len);

	for (size_t i = 0; i < len; i++)
		src[i] = (uint8_t)(i * 7 + 3);
	start_pair(T_OP, 0);
	ck_assert_ptr_nonnull(fam_mr_register(cli.c, dst, len));
	ck_assert_int_eq(fam_conn_write(cli.c, &r, 4096, (uint32_t)len, src,
	    NULL, cli_done, (void *)0), 0);
	want_done = 1;
	ck_assert(unit_run_until(base, p_done, T_WAIT));
	ck_assert_int_eq(cli.status[0], 0);
	ck_assert_mem_eq(srv.mem + 4096, src, len);
	ck_assert_int_eq(fam_conn_read(cli.c, &r, 4096, (uint32_t)len, dst,
	    NULL, cli_done, (void *)1), 0);
	want_done = 2;
	ck_assert(unit_run_until(base, p_done, T_WAIT));
	ck_assert_int_eq(cli.status[1], 0);
	ck_assert_mem_eq(dst, src, len);
	ck_assert_uint_eq(srv.resolves, 2);
	ck_assert_uint_eq(srv.releases, 2);
	ck_assert_uint_eq(srv.released_bytes, 2 * len);
	ck_assert_uint_eq(fam_conn_stats(cli.c)->bytes_in,
	    len + FAM_CHALLENGE_LEN + FAM_AUTH_RESP_LEN);
	ck_assert_uint_ge(fam_conn_stats(cli.c)->bytes_out, len);
	free(src);
	free(dst);
}
END_TEST

START_TEST(test_largest_chunks_round_trip)
{
	struct fam_remote r = { .region = 1, .size = MEM_SIZE };
	uint8_t *src = malloc(FAM_RW_MAX), *dst = calloc(1, FAM_RW_MAX);

	for (size_t i = 0; i < FAM_RW_MAX; i++)
		src[i] = (uint8_t)(i ^ (i >> 9));
	start_pair(T_OP, 0);
	ck_assert_int_eq(fam_conn_write(cli.c, &r, MEM_SIZE - FAM_RW_MAX,
	    FAM_RW_MAX, src, NULL, cli_done, (void *)0), 0);
	ck_assert_int_eq(fam_conn_read(cli.c, &r, MEM_SIZE - FAM_RW_MAX,
	    FAM_RW_MAX, dst, NULL, cli_done, (void *)1), 0);
	want_done = 2;
	ck_assert(unit_run_until(base, p_done, T_WAIT));
	ck_assert_int_eq(cli.status[0], 0);
	ck_assert_int_eq(cli.status[1], 0);
	ck_assert_mem_eq(dst, src, FAM_RW_MAX);
	free(src);
	free(dst);
}
END_TEST

START_TEST(test_out_of_order_completion)
{
	start_pair(T_OP, 0);
	srv.hold_requests = true;
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0,
		    cli_done, (void *)(intptr_t)i), 0);
	want_done = 8;
	want_held = 8;
	ck_assert(unit_run_until(base, p_held, T_WAIT));
	ck_assert_int_eq(srv.nheld, 8);
	ck_assert_int_eq(cli.ops_done, 0);
	for (int i = 7; i >= 0; i--)
		srv_answer(srv.c, &srv.held[i]);
	ck_assert(unit_run_until(base, p_done, T_WAIT));
	for (int i = 0; i < 8; i++) {
		char want[32];

		ck_assert_int_eq(cli.order[i], 7 - i);
		ck_assert_int_eq(cli.status[i], 0);
		snprintf(want, sizeof want, "stats/%d", i + 2);
		ck_assert_str_eq(cli.payload[i], want);
	}
}
END_TEST

START_TEST(test_max_outstanding_queues_the_excess)
{
	start_pair(T_OP, 2);
	srv.hold_requests = true;
	want_done = 10;
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0,
		    cli_done, (void *)(intptr_t)i), 0);
	ck_assert_uint_eq(fam_conn_stats(cli.c)->outstanding, 10);
	for (int answered = 0; answered < 10;) {
		want_held = 1;
		ck_assert(unit_run_until(base, p_held, T_WAIT));
		ck_assert(!cli.closed && !srv.closed);
		unit_run_until(base, p_done, 20);
		ck_assert_int_le(srv.nheld, 2);
		for (int i = 0; i < srv.nheld; i++)
			srv_answer(srv.c, &srv.held[i]);
		answered += srv.nheld;
		srv.nheld = 0;
		if (answered < 10)
			ck_assert_int_lt(cli.ops_done, 10);
	}
	ck_assert(unit_run_until(base, p_done, T_WAIT));
	ck_assert_int_eq(srv.max_held, 2);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(cli.status[i], 0);
	ck_assert_uint_eq(fam_conn_stats(cli.c)->outstanding, 0);
}
END_TEST

START_TEST(test_deadline_fails_every_op_and_closes)
{
	start_pair(1000, 2);
	srv.hold_requests = true;
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0,
		    cli_done, (void *)(intptr_t)i), 0);
	want_done = 5;
	ck_assert(unit_run_until(base, p_done, T_WAIT));
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(cli.status[i], -ETIMEDOUT);
	ck_assert(unit_run_until(base, p_cli_closed, T_WAIT));
	ck_assert_int_eq(cli.closed_err, -ETIMEDOUT);
	ck_assert(!cli.closed_before_ops);
	/* The server sees the connection go. */
	ck_assert(unit_run_until(base, p_srv_closed, T_WAIT));
}
END_TEST

START_TEST(test_closed_is_never_called_inside_an_api_call)
{
	start_pair(T_OP, 0);
	srv.hold_requests = true;
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0, cli_done,
	    (void *)0), 0);
	want_done = 1;
	want_held = 1;
	ck_assert(unit_run_until(base, p_held, T_WAIT));
	ck_assert_int_eq(srv.nheld, 1);
	ck_assert_int_eq(cli.ops_done, 0);
	cli.in_api = true;
	fam_conn_close(cli.c);
	ck_assert(!cli.closed);
	ck_assert_int_eq(cli.ops_done, 0);
	/* Closed, but not yet freed: calls are refused, not crashed. */
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0, cli_done,
	    (void *)1), -ENOTCONN);
	ck_assert(!fam_conn_is_open(cli.c));
	cli.in_api = false;
	ck_assert(unit_run_until(base, p_cli_closed, T_WAIT));
	ck_assert(!cli.closed_inside_api);
	ck_assert_int_eq(cli.ops_done, 1);
	ck_assert_int_eq(cli.status[0], -ECONNRESET);
	ck_assert_int_eq(cli.calls[1], 0);
	ck_assert_int_eq(cli.closed_err, 0);
	ck_assert(!cli.closed_before_ops);
	ck_assert(unit_run_until(base, p_srv_closed, T_WAIT));
}
END_TEST

START_TEST(test_peer_loss_completes_every_op_once)
{
	struct fam_remote r = { .region = 1, .size = MEM_SIZE };
	static uint8_t dst[8192];

	start_pair(T_OP, 0);
	srv.hold_requests = true;
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0,
		    cli_done, (void *)(intptr_t)i), 0);
	want_done = 5;
	want_held = 4;
	ck_assert(unit_run_until(base, p_held, T_WAIT));
	ck_assert_int_eq(srv.nheld, 4);
	ck_assert_int_eq(cli.ops_done, 0);
	ck_assert_ptr_nonnull(srv.c);
	fam_conn_close(srv.c);
	ck_assert_int_eq(fam_conn_read(cli.c, &r, 0, sizeof dst, dst, NULL,
	    cli_done, (void *)4), 0);
	want_done = 5;
	ck_assert(unit_run_until(base, p_done, T_WAIT));
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(cli.calls[i], 1);
		ck_assert_int_eq(cli.status[i], -ECONNRESET);
	}
	ck_assert(unit_run_until(base, p_cli_closed, T_WAIT));
	ck_assert_int_eq(cli.closed_err, -ECONNRESET);
}
END_TEST

START_TEST(test_wrong_secret_refused)
{
	start_server("s3cret", T_OP);
	start_client("guess", T_OP, 0);
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0, cli_done,
	    (void *)0), 0);
	ck_assert(unit_run_until(base, p_both_closed, T_WAIT));
	ck_assert(!cli.connected);
	ck_assert_int_eq(cli.closed_err, -EACCES);
	ck_assert_int_eq(cli.status[0], -EACCES);
	ck_assert_int_eq(srv.closed_err, -EACCES);
	ck_assert_uint_eq(srv.bad_frames, 0);
}
END_TEST

START_TEST(test_missing_secret_refused)
{
	start_server("s3cret", T_OP);
	start_client("", T_OP, 0);
	ck_assert(unit_run_until(base, p_both_closed, T_WAIT));
	ck_assert_int_eq(cli.closed_err, -EACCES);
}
END_TEST

START_TEST(test_role_refusal_reaches_the_peer)
{
	srv.hello_err = -EPERM;
	start_server("", T_OP);
	start_client("", T_OP, 0);
	ck_assert(unit_run_until(base, p_both_closed, T_WAIT));
	ck_assert(!cli.connected);
	ck_assert_int_eq(cli.closed_err, -EPERM);
	ck_assert_int_eq(srv.closed_err, -EPERM);
}
END_TEST

START_TEST(test_connection_refused_reported_once)
{
	char *cause = NULL;
	struct fam_conn_opts o = opts("", T_OP, 0);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sin;
	int rc;

	/* A port nobody listens on: bound, never listening. */
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	snprintf(srv_addr, sizeof srv_addr, "127.0.0.1:%u",
	    ntohs(sin.sin_port));
	rc = fam_connect(base, srv_addr, &o, &cli_handlers, NULL, &cli.c,
	    &cause);
	if (rc == 0) {
		ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0,
		    cli_done, (void *)0), 0);
		ck_assert(unit_run_until(base, p_cli_closed, T_WAIT));
		ck_assert_int_eq(cli.closed_err, -ECONNREFUSED);
		ck_assert_int_eq(cli.status[0], -ECONNREFUSED);
	} else {
		ck_assert_int_eq(rc, -ECONNREFUSED);
		ck_assert_ptr_nonnull(cause);
		free(cause);
	}
	srv.closed = true;
	close(fd);
}
END_TEST

START_TEST(test_resolve_errors_answered_and_stream_stays_in_sync)
{
	struct fam_remote r = { .region = 1, .size = MEM_SIZE };
	size_t len = 1 << 20;
	uint8_t *src = calloc(1, len), *dst = calloc(1, 4096);

	start_pair(T_OP, 0);
	srv.resolve_err = -EROFS;
	ck_assert_int_eq(fam_conn_write(cli.c, &r, 0, (uint32_t)len, src, NULL,
	    cli_done, (void *)0), 0);
	want_done = 1;
	ck_assert(unit_run_until(base, p_done, T_WAIT));
	ck_assert_int_eq(cli.status[0], -EROFS);
	srv.resolve_err = 0;
	r.region = 9;
	r.size = 0;
	ck_assert_int_eq(fam_conn_read(cli.c, &r, 0, 4096, dst, NULL, cli_done,
	    (void *)1), 0);
	r.region = 1;
	ck_assert_int_eq(fam_conn_read(cli.c, &r, MEM_SIZE, 4096, dst, NULL,
	    cli_done, (void *)2), 0);
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0, cli_done,
	    (void *)3), 0);
	want_done = 4;
	ck_assert(unit_run_until(base, p_done, T_WAIT));
	ck_assert_int_eq(cli.status[1], -ENOENT);
	ck_assert_int_eq(cli.status[2], -ERANGE);
	ck_assert_int_eq(cli.status[3], 0);
	ck_assert(fam_conn_is_open(cli.c));
	ck_assert_uint_eq(fam_conn_stats(srv.c)->bad_frames, 0);
	free(src);
	free(dst);
}
END_TEST

START_TEST(test_reads_and_writes_go_to_request_without_resolve)
{
	struct fam_remote r = { .region = 1, .size = MEM_SIZE };
	uint8_t src[64] = { 1 };

	srv.no_resolve = true;
	start_pair(T_OP, 0);
	ck_assert_int_eq(fam_conn_write(cli.c, &r, 0, sizeof src, src, NULL,
	    cli_done, (void *)0), 0);
	want_done = 1;
	ck_assert(unit_run_until(base, p_done, T_WAIT));
	ck_assert_int_eq(cli.status[0], 0);
	ck_assert_uint_eq(fam_conn_stats(srv.c)->writes, 1);
}
END_TEST

START_TEST(test_background_flag_reaches_the_request_handler)
{
	struct fam_remote r = { .region = 1, .size = MEM_SIZE };
	static uint8_t src[4096], dst[4096];

	srv.no_resolve = true;
	start_pair(2000, 0);
	ck_assert_int_eq(fam_conn_writef(cli.c, &r, 0, sizeof src, src, NULL,
	    FAM_F_BACKGROUND, cli_done, (void *)0), 0);
	ck_assert_int_eq(fam_conn_readf(cli.c, &r, 0, 16, dst, NULL, 0,
	    cli_done, (void *)1), 0);
	ck_assert_int_eq(fam_conn_readf(cli.c, &r, 0, 64, dst, NULL,
	    FAM_F_BACKGROUND, cli_done, (void *)2), 0);
	ck_assert_int_eq(fam_conn_readf(cli.c, &r, 0, 64, dst, NULL, 0x4,
	    cli_done, (void *)3), -EINVAL);
	/* Put on the wire inside the call: no callback may run in it. */
	cli.in_api = true;
	ck_assert_int_eq(fam_conn_flush(cli.c), 0);
	cli.in_api = false;
	ck_assert(!cli.closed_inside_api);
	want_done = 1;
	ck_assert(unit_run_until(base, p_done, 2000));
	ck_assert_int_eq(cli.status[0], 0);
	want_done = 3;
	unit_run_until(base, p_done, 500);
	ck_assert_uint_eq(srv.background, 2);
	ck_assert_uint_eq(fam_conn_stats(srv.c)->reads, 2);
	ck_assert_uint_eq(fam_conn_stats(srv.c)->bad_frames, 0);
}
END_TEST

START_TEST(test_api_misuse_returns_errors)
{
	struct fam_remote r = { .region = 1, .size = 8192 };
	uint8_t buf[16];
	static uint8_t big[FAM_PROTO_MAX_PAYLOAD + 1];
	struct fam_hdr req = { .type = FAM_MSG_STATS, .id = 5 };

	start_pair(T_OP, 0);
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_HELLO, buf, 16, cli_done,
	    NULL), -EINVAL);
	ck_assert_int_eq(fam_conn_call(cli.c, 0, NULL, 0, cli_done, NULL),
	    -EINVAL);
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, buf, 16, cli_done,
	    NULL), -EINVAL);
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_WRITE, big, sizeof big,
	    cli_done, NULL), -EMSGSIZE);
	ck_assert_int_eq(fam_conn_read(cli.c, &r, 0, 0, buf, NULL, cli_done,
	    NULL), -EINVAL);
	ck_assert_int_eq(fam_conn_read(cli.c, &r, 8000, 500, buf, NULL,
	    cli_done, NULL), -ERANGE);
	ck_assert_int_eq(fam_conn_read(cli.c, &r, UINT64_MAX, 16, buf, NULL,
	    cli_done, NULL), -ERANGE);
	ck_assert_int_eq(fam_conn_write(cli.c, &r, 0, FAM_RW_MAX + 1, big,
	    NULL, cli_done, NULL), -EINVAL);
	ck_assert_int_eq(fam_conn_reply(cli.c, &req, -5, NULL, 0, false, NULL,
	    NULL), -EINVAL);
	ck_assert_int_eq(fam_conn_reply(cli.c, &req, ENOENT, buf, 4, true,
	    NULL, NULL), -EINVAL);
	ck_assert_int_eq(cli.ops_done, 0);
	ck_assert(fam_conn_is_open(cli.c));
}
END_TEST

START_TEST(test_connect_without_node_name_refused_at_once)
{
	struct fam_conn_opts o = opts("", T_OP, 0);
	char *cause = NULL;

	start_server("", T_OP);
	o.hello.node[0] = '\0';
	ck_assert_int_eq(fam_connect(base, srv_addr, &o, &cli_handlers, NULL,
	    &cli.c, &cause), -EINVAL);
	ck_assert_ptr_nonnull(cause);
	free(cause);
	cli.c = NULL;
	o = opts("", T_OP, 0);
	o.hello.role = 0;
	ck_assert_int_eq(fam_connect(base, srv_addr, &o, &cli_handlers, NULL,
	    &cli.c, &cause), -EINVAL);
	free(cause);
	cli.c = NULL;
	cli.closed = srv.closed = true;
}
END_TEST

START_TEST(test_unknown_response_id_closes_that_connection)
{
	struct fam_conn_opts o = opts("", T_OP, 0);
	int lfd, fd;

	fd = raw_serve_client(&o, "", "raw", &lfd);
	ck_assert(cli.connected);
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0, cli_done,
	    (void *)0), 0);
	raw_send(fd, FAM_MSG_STATS, FAM_F_RESPONSE, 999, 0, 0, NULL, 0);
	want_done = 1;
	ck_assert(unit_run_until(base, p_cli_closed, T_WAIT));
	ck_assert_int_eq(cli.closed_err, -EPROTO);
	ck_assert_uint_eq(cli.bad_frames, 1);
	ck_assert_int_eq(cli.status[0], -ECONNRESET);
	ck_assert_int_eq(cli.calls[0], 1);
	srv.closed = true;
	close(fd);
	close(lfd);
}
END_TEST

START_TEST(test_wrong_read_response_length_closes_that_connection)
{
	struct fam_conn_opts o = opts("", T_OP, 0);
	struct fam_remote r = { .region = 1, .size = 1 << 20 };
	int lfd, fd;
	static uint8_t buf[8192], dst[4096];
	struct fam_hdr h;

	fd = raw_serve_client(&o, "", "raw", &lfd);
	ck_assert_int_eq(fam_conn_read(cli.c, &r, 0, sizeof dst, dst, NULL,
	    cli_done, (void *)0), 0);
	ck_assert(raw_recv(fd, &h, buf));
	ck_assert_uint_eq(h.type, FAM_MSG_READ);
	/* 8 KiB of data for a 4 KiB read: must not overrun dst. */
	memset(buf, 0xee, sizeof buf);
	raw_send(fd, FAM_MSG_READ, FAM_F_RESPONSE, h.id, 0, sizeof buf, buf,
	    sizeof buf);
	ck_assert(unit_run_until(base, p_cli_closed, T_WAIT));
	ck_assert_int_eq(cli.closed_err, -EPROTO);
	ck_assert_uint_eq(cli.bad_frames, 1);
	ck_assert_int_eq(cli.status[0], -ECONNRESET);
	ck_assert_uint_eq(dst[0], 0);
	srv.closed = true;
	close(fd);
	close(lfd);
}
END_TEST

START_TEST(test_truncated_header_then_close_counted)
{
	int fd;
	uint8_t junk[10] = "FAMD";

	start_server("", T_OP);
	fd = raw_connect();
	raw_hello(fd, "");
	ck_assert_int_eq(send(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
	unit_run_until(base, p_srv_closed, 50);
	close(fd);
	ck_assert(unit_run_until(base, p_srv_closed, T_WAIT));
	ck_assert_int_eq(srv.closed_err, -EPROTO);
	ck_assert_uint_eq(srv.bad_frames, 1);
	cli.closed = true;
}
END_TEST

START_TEST(test_request_before_hello_refused)
{
	int fd;
	struct fam_hdr h;
	struct fam_rw m = { .region = 1, .len = 4096 };
	uint8_t buf[FAM_READ_LEN];

	start_server("", T_OP);
	fd = raw_connect();
	proto_put_read(buf, &m);
	raw_send(fd, FAM_MSG_READ, 0, 77, 0, FAM_READ_LEN, buf, sizeof buf);
	ck_assert(raw_recv(fd, &h, NULL));
	ck_assert_uint_eq(h.id, 77);
	ck_assert_uint_eq(h.flags, FAM_F_RESPONSE);
	ck_assert_int_eq(h.status, EACCES);
	ck_assert(unit_run_until(base, p_raw_eof, T_WAIT));
	close(fd);
	ck_assert(unit_run_until(base, p_srv_closed, T_WAIT));
	ck_assert_uint_eq(srv.bad_frames, 1);
	ck_assert_uint_eq(srv.resolves, 0);
	cli.closed = true;
}
END_TEST

START_TEST(test_huge_length_answered_and_closed)
{
	int fd;
	struct fam_hdr h;

	start_server("", T_OP);
	fd = raw_connect();
	raw_hello(fd, "");
	raw_send(fd, FAM_MSG_WRITE, 0, 8, 0, 0xfffffff0u, NULL, 0);
	ck_assert(raw_recv(fd, &h, NULL));
	ck_assert_uint_eq(h.id, 8);
	ck_assert_int_eq(h.status, EMSGSIZE);
	ck_assert(unit_run_until(base, p_raw_eof, T_WAIT));
	close(fd);
	ck_assert(unit_run_until(base, p_srv_closed, T_WAIT));
	ck_assert_uint_eq(srv.bad_frames, 1);
	cli.closed = true;
}
END_TEST

START_TEST(test_bad_magic_dropped)
{
	int fd;
	const char *get = "GET / HTTP/1.1\r\nHost: example.org\r\n\r\n";

	start_server("", T_OP);
	fd = raw_connect();
	ck_assert_int_eq(send(fd, get, strlen(get), 0), (ssize_t)strlen(get));
	raw_fd = fd;
	ck_assert(unit_run_until(base, p_raw_eof, T_WAIT));
	ck_assert_uint_eq(raw_len, 0);
	ck_assert(unit_run_until(base, p_srv_closed, T_WAIT));
	ck_assert_uint_eq(srv.bad_frames, 1);
	ck_assert_int_eq(srv.closed_err, -EPROTO);
	close(fd);
	cli.closed = true;
}
END_TEST

START_TEST(test_wrong_version_hello_refused)
{
	int fd;
	struct fam_hdr h = { .magic = FAM_PROTO_MAGIC, .version = 9,
		.type = FAM_MSG_HELLO, .len = FAM_HELLO_LEN, .id = 3 }, r;
	uint8_t buf[FAM_PROTO_HDR_LEN + FAM_HELLO_LEN] = { 0 };

	start_server("", T_OP);
	fd = raw_connect();
	proto_put_hdr(buf, &h);
	ck_assert_int_eq(send(fd, buf, sizeof buf, 0), (ssize_t)sizeof buf);
	ck_assert(raw_recv(fd, &r, NULL));
	ck_assert_int_eq(r.status, EPROTONOSUPPORT);
	ck_assert_uint_eq(r.version, FAM_PROTO_VERSION);
	ck_assert_uint_eq(r.id, 3);
	ck_assert(unit_run_until(base, p_raw_eof, T_WAIT));
	close(fd);
	ck_assert(unit_run_until(base, p_srv_closed, T_WAIT));
	ck_assert_int_eq(srv.closed_err, -EPROTONOSUPPORT);
	ck_assert_uint_eq(srv.bad_frames, 0);
	cli.closed = true;
}
END_TEST

START_TEST(test_silent_peer_dropped_after_deadline)
{
	int fd;

	start_server("", 200);
	fd = raw_connect();
	raw_fd = fd;
	ck_assert(unit_run_until(base, p_raw_eof, T_WAIT));
	ck_assert(unit_run_until(base, p_srv_closed, T_WAIT));
	ck_assert_int_eq(srv.closed_err, -ETIMEDOUT);
	close(fd);
	cli.closed = true;
}
END_TEST

START_TEST(test_stalled_write_data_dropped_and_hold_released)
{
	int fd;
	struct fam_rw m = { .region = 1, .len = 65536 };
	uint8_t buf[FAM_WRITE_HDR_LEN + 100];

	start_server("", 1000);
	fd = raw_connect();
	raw_hello(fd, "");
	proto_put_write_hdr(buf, &m);
	memset(buf + FAM_WRITE_HDR_LEN, 0x5a, 100);
	raw_send(fd, FAM_MSG_WRITE, 0, 2, 0, FAM_WRITE_HDR_LEN + 65536, buf,
	    sizeof buf);
	ck_assert(unit_run_until(base, p_srv_closed, T_WAIT));
	ck_assert_int_eq(srv.closed_err, -ETIMEDOUT);
	ck_assert_uint_eq(srv.resolves, 1);
	ck_assert_uint_eq(srv.releases, 1);
	ck_assert_uint_eq(srv.released_bytes, 100);
	ck_assert_uint_eq(srv.mem[99], 0x5a);
	close(fd);
	cli.closed = true;
}
END_TEST

START_TEST(test_rogue_server_without_the_secret_is_refused_before_any_request)
{
	struct fam_conn_opts o = opts("s3cret", T_OP, 0);
	int lfd, fd;
	struct fam_hello_resp resp = { .role = FAM_WIRE_ROLE_MEMORY };
	char *cause = NULL;

	lfd = raw_listen();
	ck_assert_int_eq(fam_connect(base, srv_addr, &o, &cli_handlers, NULL,
	    &cli.c, &cause), 0);
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0, cli_done,
	    (void *)0), 0);
	unit_run_until(base, p_connected, 50);
	fd = accept(lfd, NULL, NULL);
	/* A server that does not know the secret proves with another one. */
	snprintf(resp.node, sizeof resp.node, "rogue");
	raw_serve_hello(fd, "guess", &resp);
	want_done = 1;
	ck_assert(unit_run_until(base, p_cli_closed, T_WAIT));
	ck_assert(!cli.connected);
	ck_assert_int_eq(cli.closed_err, -EACCES);
	ck_assert_int_eq(cli.status[0], -EACCES);
	/* Nothing but the hello and the proof reached it: no request. */
	raw_fd = fd;
	ck_assert(unit_run_until(base, p_raw_eof, T_WAIT));
	ck_assert_uint_eq(raw_len, 0);
	srv.closed = true;
	close(fd);
	close(lfd);
}
END_TEST

/*
 * Reads queued wait for the end of the loop's round, to go in one burst,
 * unless fam_conn_flush() puts them on the wire inside the call (the
 * host's reads a fault waits for): the read-ahead queued before the
 * fault's read goes with it, in order.
 */
static void
fault_read_written_at_once(bool flush)
{
	struct fam_conn_opts o = opts("s3cret", T_OP, 0);
	int lfd, fd;
	struct fam_remote r = { .region = 1, .size = MEM_SIZE };
	static uint8_t dst[2][4096];
	struct pollfd p;
	struct fam_hdr h;

	fd = raw_serve_client(&o, "s3cret", "mem", &lfd);
	ck_assert(cli.connected);

	ck_assert_int_eq(fam_conn_readf(cli.c, &r, 0, 4096, dst[0], NULL,
	    FAM_F_BACKGROUND, cli_done, (void *)0), 0);
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	ck_assert_int_eq(poll(&p, 1, 100), 0); /* the loop has not run */
	ck_assert_int_eq(fam_conn_readf(cli.c, &r, 4096, 4096, dst[1], NULL,
	    0, cli_done, (void *)1), 0);
	if (flush)
		ck_assert_int_eq(fam_conn_flush(cli.c), 0);
	/* nor has it now */
	ck_assert_int_eq(poll(&p, 1, flush ? T_WAIT : 100), flush ? 1 : 0);
	ck_assert(raw_recv(fd, &h, NULL));
	ck_assert_uint_eq(h.type, FAM_MSG_READ);
	ck_assert_uint_eq(h.flags & FAM_F_BACKGROUND, FAM_F_BACKGROUND);
	ck_assert(raw_recv(fd, &h, NULL));
	ck_assert_uint_eq(h.type, FAM_MSG_READ);
	ck_assert_uint_eq(h.flags & FAM_F_BACKGROUND, 0);
	srv.closed = true;
	close(fd);
	close(lfd);
}

START_TEST(test_flushed_fault_read_goes_at_once_with_the_read_ahead_before_it)
{
	fault_read_written_at_once(true);
}
END_TEST

START_TEST(test_without_a_flush_every_read_waits_for_round_end)
{
	fault_read_written_at_once(false);
}
END_TEST

START_TEST(test_read_data_that_fails_its_crc_is_lost_not_delivered)
{
	struct fam_conn_opts o = opts("", T_OP, 0);
	struct fam_remote r = { .region = 1, .size = 1 << 20 };
	int lfd, fd;
	static uint8_t buf[4096], dst[4096];
	uint8_t hb[FAM_PROTO_HDR_LEN];
	struct fam_hdr h, rh;

	fd = raw_serve_client(&o, "", "raw", &lfd);
	ck_assert_int_eq(fam_conn_read(cli.c, &r, 0, sizeof dst, dst, NULL,
	    cli_done, (void *)0), 0);
	ck_assert(raw_recv(fd, &h, buf));
	ck_assert_uint_eq(h.type, FAM_MSG_READ);
	/* The data, with the CRC of other data: one bit flipped on the way. */
	memset(buf, 0x11, sizeof buf);
	rh = (struct fam_hdr){ .magic = FAM_PROTO_MAGIC,
		.version = FAM_PROTO_VERSION, .type = FAM_MSG_READ,
		.flags = FAM_F_RESPONSE, .len = sizeof buf, .id = h.id,
		.crc = proto_crc32c(0, buf, sizeof buf) };
	buf[100] ^= 0x04;
	proto_put_hdr(hb, &rh);
	ck_assert_int_eq(send(fd, hb, sizeof hb, 0), (ssize_t)sizeof hb);
	ck_assert_int_eq(send(fd, buf, sizeof buf, 0), (ssize_t)sizeof buf);
	want_done = 1;
	ck_assert(unit_run_until(base, p_done, T_WAIT));
	ck_assert_int_eq(cli.status[0], -EBADMSG);
	ck_assert_uint_eq(fam_conn_stats(cli.c)->crc_errors, 1);
	ck_assert(fam_conn_is_open(cli.c));
	close(fd);
	close(lfd);
	ck_assert(unit_run_until(base, p_cli_closed, T_WAIT));
	srv.closed = true;
}
END_TEST

START_TEST(test_write_data_that_fails_its_crc_is_answered_ebadmsg)
{
	int fd;
	struct fam_rw m = { .region = 1, .len = 100 };
	uint8_t buf[FAM_PROTO_HDR_LEN + FAM_WRITE_HDR_LEN + 100];
	struct fam_hdr h = { .magic = FAM_PROTO_MAGIC,
		.version = FAM_PROTO_VERSION, .type = FAM_MSG_WRITE,
		.len = FAM_WRITE_HDR_LEN + 100, .id = 2 };

	start_server("", T_OP);
	fd = raw_connect();
	raw_hello(fd, "");
	memset(buf + FAM_PROTO_HDR_LEN + FAM_WRITE_HDR_LEN, 0x5a, 100);
	h.crc = proto_crc32c(0, buf + FAM_PROTO_HDR_LEN + FAM_WRITE_HDR_LEN,
	    100) ^ 1;
	proto_put_hdr(buf, &h);
	proto_put_write_hdr(buf + FAM_PROTO_HDR_LEN, &m);
	ck_assert_int_eq(send(fd, buf, sizeof buf, 0), (ssize_t)sizeof buf);
	ck_assert(raw_recv(fd, &h, NULL));
	ck_assert_int_eq(h.status, EBADMSG);
	ck_assert_uint_eq(fam_conn_stats(srv.c)->crc_errors, 1);
	/* The connection goes on: the next request is answered. */
	raw_send(fd, FAM_MSG_STATS, 0, 3, 0, 0, NULL, 0);
	ck_assert(raw_recv(fd, &h, NULL));
	ck_assert_uint_eq(h.id, 3);
	close(fd);
	cli.closed = true;
}
END_TEST

START_TEST(test_second_hello_is_a_violation)
{
	int fd;
	struct fam_hdr h;
	struct fam_hello m = { .role = FAM_WIRE_ROLE_HOST };
	uint8_t buf[FAM_HELLO_LEN];

	start_server("", T_OP);
	fd = raw_connect();
	raw_hello(fd, "");
	snprintf(m.node, sizeof m.node, "cli");
	proto_put_hello(buf, &m);
	raw_send(fd, FAM_MSG_HELLO, 0, 2, 0, FAM_HELLO_LEN, buf, sizeof buf);
	ck_assert(raw_recv(fd, &h, NULL));
	ck_assert_int_eq(h.status, EPROTO);
	ck_assert(unit_run_until(base, p_raw_eof, T_WAIT));
	close(fd);
	ck_assert(unit_run_until(base, p_srv_closed, T_WAIT));
	ck_assert_uint_eq(srv.bad_frames, 1);
	cli.closed = true;
}
END_TEST

/* Bytes drained from a raw socket, and how many are expected. */
static size_t drained, drain_want;

/* Reads and counts whatever the raw socket has; true once all arrived. */
static bool
p_drained(void)
{
	static uint8_t sink[1 << 16];
	ssize_t n;

	while ((n = recv(raw_fd, sink, sizeof sink, MSG_DONTWAIT)) > 0)
		drained += (size_t)n;
	return drained >= drain_want;
}

/* Never true: runs the loop for the whole time given. */
static bool
p_never(void)
{
	return false;
}

START_TEST(test_pipelined_reads_pause_input_until_answers_drain)
{
	struct fam_rw m = { .region = 1, .len = 1 << 20 };
	uint8_t buf[FAM_READ_LEN];
	int fd, n = 32, rcvbuf = 1 << 16;

	start_server("", T_OP);
	fd = raw_connect();
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
	raw_hello(fd, "");
	proto_put_read(buf, &m);
	for (int i = 0; i < n; i++)
		raw_send(fd, FAM_MSG_READ, 0, 10 + (uint64_t)i, 0,
		    FAM_READ_LEN, buf, sizeof buf);
	/* Nobody reads the answers: the server stops taking requests. */
	want_held = 8;
	ck_assert(unit_run_until(base, p_resolved, T_WAIT));
	unit_run_until(base, p_never, 300);
	ck_assert_uint_lt(srv.resolves, (unsigned)n);
	/* Reading them lets it go on, to the last one. */
	raw_fd = fd;
	drain_want = (size_t)n * (FAM_PROTO_HDR_LEN + m.len);
	ck_assert(unit_run_until(base, p_drained, T_WAIT));
	ck_assert_uint_eq(drained, drain_want);
	ck_assert_uint_eq(srv.resolves, (unsigned)n);
	ck_assert_uint_eq(srv.releases, (unsigned)n);
	ck_assert_uint_eq(srv.released_bytes, (uint64_t)n * m.len);
	close(fd);
	ck_assert(unit_run_until(base, p_srv_closed, T_WAIT));
	ck_assert_int_eq(srv.closed_err, 0);
	cli.closed = true;
}
END_TEST

/* ---- TLS and per-peer keys ---------------------------------------------- */

/*
 * Writes dir/name.crt and dir/name.key: a P-256 key and its certificate,
 * signed by ca (its key cakey), or self-signed as a CA when ca is NULL.
 * Returns the certificate (the caller frees it) and *key.
 */
static X509 *
pki_make(const char *dir, const char *name, X509 *ca, EVP_PKEY *cakey,
    EVP_PKEY **key)
{
	static long serial = 1;
	X509 *x = X509_new();
	X509_NAME *n;
	X509_EXTENSION *ext;
	char path[512];
	FILE *f;

	*key = EVP_EC_gen("P-256");
	ck_assert_ptr_nonnull(*key);
	ck_assert_ptr_nonnull(x);
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, *key);
	n = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
	    (const unsigned char *)name, -1, -1, 0);
	X509_set_issuer_name(x, ca != NULL ? X509_get_subject_name(ca) : n);
	ext = X509V3_EXT_conf_nid(NULL, NULL, NID_basic_constraints,
	    ca == NULL ? "critical,CA:TRUE" : "CA:FALSE");
	X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	ck_assert_int_gt(X509_sign(x, ca != NULL ? cakey : *key,
	    EVP_sha256()), 0);
	snprintf(path, sizeof path, "%s/%s.crt", dir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(PEM_write_X509(f, x), 1);
	fclose(f);
	snprintf(path, sizeof path, "%s/%s.key", dir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(PEM_write_PrivateKey(f, *key, NULL, NULL, 0, NULL,
	    NULL), 1);
	fclose(f);
	return x;
}

/* TLS settings of dir/name's certificate and key, trusting dir/ca. */
static struct fam_tls *
pki_tls(const char *dir, const char *name, const char *ca)
{
	char cert[512], key[512], cap[512], *cause = NULL;
	struct fam_tls *t = NULL;

	snprintf(cert, sizeof cert, "%s/%s.crt", dir, name);
	snprintf(key, sizeof key, "%s/%s.key", dir, name);
	snprintf(cap, sizeof cap, "%s/%s.crt", dir, ca);
	ck_assert_msg(fam_tls_new(cert, key, cap, &t, &cause) == 0, "%s",
	    cause);
	return t;
}

/*
 * Makes, in a fresh directory, a CA "ca" with certificates "srv" and
 * "cli", and a CA "other" with a certificate "stranger".
 */
static const char *
pki_setup(void)
{
	static char dir[] = "/tmp/check_tls.XXXXXX";
	EVP_PKEY *cak, *ok, *k;
	X509 *ca, *other;

	strcpy(dir, "/tmp/check_tls.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ca = pki_make(dir, "ca", NULL, NULL, &cak);
	other = pki_make(dir, "other", NULL, NULL, &ok);
	X509_free(pki_make(dir, "srv", ca, cak, &k));
	EVP_PKEY_free(k);
	X509_free(pki_make(dir, "cli", ca, cak, &k));
	EVP_PKEY_free(k);
	X509_free(pki_make(dir, "stranger", other, ok, &k));
	EVP_PKEY_free(k);
	X509_free(ca);
	X509_free(other);
	EVP_PKEY_free(cak);
	EVP_PKEY_free(ok);
	return dir;
}

/* Removes what pki_setup() made. */
static void
pki_cleanup(const char *dir)
{
	static const char *const names[] = { "ca", "other", "srv", "cli",
		"stranger" };
	char path[512];

	for (size_t i = 0; i < nitems(names); i++) {
		snprintf(path, sizeof path, "%s/%s.crt", dir, names[i]);
		unlink(path);
		snprintf(path, sizeof path, "%s/%s.key", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
}

START_TEST(test_tls_largest_chunks_round_trip_both_ways)
{
	struct fam_remote r = { .region = 1, .size = MEM_SIZE };
	uint8_t *src = malloc(FAM_RW_MAX), *dst = calloc(1, FAM_RW_MAX);
	uint64_t step = (MEM_SIZE - FAM_RW_MAX) / 7 / 4096 * 4096;
	const char *dir = pki_setup();

	for (size_t i = 0; i < FAM_RW_MAX; i++)
		src[i] = (uint8_t)(i ^ (i >> 9));
	srv_tls = pki_tls(dir, "srv", "ca");
	cli_tls = pki_tls(dir, "cli", "ca");
	start_pair(T_OP, 0);
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(fam_conn_write(cli.c, &r, (uint64_t)i * step,
		    FAM_RW_MAX, src, NULL, cli_done, (void *)(intptr_t)i), 0);
	ck_assert_int_eq(fam_conn_read(cli.c, &r, MEM_SIZE - FAM_RW_MAX,
	    FAM_RW_MAX, dst, NULL, cli_done, (void *)8), 0);
	want_done = 9;
	ck_assert(unit_run_until(base, p_done, T_WAIT));
	for (int i = 0; i < 9; i++)
		ck_assert_int_eq(cli.status[i], 0);
	ck_assert_mem_eq(srv.mem + 7 * step, src, FAM_RW_MAX);
	ck_assert_int_eq(fam_conn_read(cli.c, &r, 7 * step,
	    FAM_RW_MAX, dst, NULL, cli_done, (void *)9), 0);
	want_done = 10;
	ck_assert(unit_run_until(base, p_done, T_WAIT));
	ck_assert_int_eq(cli.status[9], 0);
	ck_assert_mem_eq(dst, src, FAM_RW_MAX);
	pki_cleanup(dir);
	free(src);
	free(dst);
}
END_TEST

START_TEST(test_tls_peer_without_tls_refused)
{
	const char *dir = pki_setup();

	srv_tls = pki_tls(dir, "srv", "ca");
	start_server("s3cret", T_OP);
	start_client("s3cret", T_OP, 0);
	ck_assert(unit_run_until(base, p_both_closed, T_WAIT));
	ck_assert(!cli.connected);
	ck_assert_int_ne(cli.closed_err, 0);
	ck_assert_int_ne(srv.closed_err, 0);
	pki_cleanup(dir);
}
END_TEST

START_TEST(test_tls_certificate_of_another_ca_refused)
{
	const char *dir = pki_setup();

	srv_tls = pki_tls(dir, "srv", "ca");
	cli_tls = pki_tls(dir, "stranger", "ca");
	start_server("s3cret", T_OP);
	start_client("s3cret", T_OP, 0);
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0, cli_done,
	    (void *)0), 0);
	ck_assert(unit_run_until(base, p_both_closed, T_WAIT));
	ck_assert(!cli.connected);
	ck_assert_int_ne(cli.status[0], 0);
	ck_assert_int_ne(srv.closed_err, 0);
	pki_cleanup(dir);
}
END_TEST

START_TEST(test_peer_key_proves_the_name_and_no_other_key_does)
{
	static struct fam_peer_key keys[1];

	snprintf(keys[0].name, sizeof keys[0].name, "cli");
	ck_assert_int_eq(proto_auth_secret_key("cli-own-key", keys[0].key), 0);
	srv_keys = keys;
	srv_nkeys = 1;
	/* The shared secret does not pass for a node with a key of its own. */
	start_server("s3cret", T_OP);
	start_client("s3cret", T_OP, 0);
	ck_assert(unit_run_until(base, p_both_closed, T_WAIT));
	ck_assert(!cli.connected);
	ck_assert_int_eq(cli.closed_err, -EACCES);
	/* Its own key does, and the server knows who it is. */
	cli.closed = srv.closed = false;
	start_client("cli-own-key", T_OP, 0);
	ck_assert(unit_run_until(base, p_connected, T_WAIT));
	ck_assert(cli.connected);
	ck_assert_ptr_nonnull(srv.c);
	ck_assert_str_eq(fam_conn_identity(srv.c), "cli");
	ck_assert_ptr_null(fam_conn_identity(cli.c));
}
END_TEST

/* Builds the suite. */
static Suite *
transport_suite(void)
{
	Suite *s = suite_create("transport");
	TCase *t = tcase_create("tcp");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_hello_then_call_round_trip);
	tcase_add_test(t, test_calls_queued_before_hello_are_sent_after_it);
	tcase_add_test(t, test_read_and_write_through_resolve);
	tcase_add_test(t, test_largest_chunks_round_trip);
	tcase_add_test(t, test_out_of_order_completion);
	tcase_add_test(t, test_max_outstanding_queues_the_excess);
	tcase_add_test(t, test_deadline_fails_every_op_and_closes);
	tcase_add_test(t, test_closed_is_never_called_inside_an_api_call);
	tcase_add_test(t, test_peer_loss_completes_every_op_once);
	tcase_add_test(t, test_wrong_secret_refused);
	tcase_add_test(t, test_missing_secret_refused);
	tcase_add_test(t, test_role_refusal_reaches_the_peer);
	tcase_add_test(t, test_connection_refused_reported_once);
	tcase_add_test(t, test_resolve_errors_answered_and_stream_stays_in_sync);
	tcase_add_test(t, test_reads_and_writes_go_to_request_without_resolve);
	tcase_add_test(t, test_background_flag_reaches_the_request_handler);
	tcase_add_test(t, test_flushed_fault_read_goes_at_once_with_the_read_ahead_before_it);
	tcase_add_test(t, test_without_a_flush_every_read_waits_for_round_end);
	tcase_add_test(t, test_api_misuse_returns_errors);
	tcase_add_test(t, test_connect_without_node_name_refused_at_once);
	tcase_add_test(t, test_unknown_response_id_closes_that_connection);
	tcase_add_test(t, test_wrong_read_response_length_closes_that_connection);
	tcase_add_test(t, test_truncated_header_then_close_counted);
	tcase_add_test(t, test_request_before_hello_refused);
	tcase_add_test(t, test_huge_length_answered_and_closed);
	tcase_add_test(t, test_bad_magic_dropped);
	tcase_add_test(t, test_wrong_version_hello_refused);
	tcase_add_test(t, test_silent_peer_dropped_after_deadline);
	tcase_add_test(t, test_stalled_write_data_dropped_and_hold_released);
	tcase_add_test(t, test_second_hello_is_a_violation);
	tcase_add_test(t,
	    test_rogue_server_without_the_secret_is_refused_before_any_request);
	tcase_add_test(t,
	    test_read_data_that_fails_its_crc_is_lost_not_delivered);
	tcase_add_test(t,
	    test_write_data_that_fails_its_crc_is_answered_ebadmsg);
	tcase_add_test(t, test_pipelined_reads_pause_input_until_answers_drain);
	tcase_add_test(t, test_tls_largest_chunks_round_trip_both_ways);
	tcase_add_test(t, test_tls_peer_without_tls_refused);
	tcase_add_test(t, test_tls_certificate_of_another_ca_refused);
	tcase_add_test(t, test_peer_key_proves_the_name_and_no_other_key_does);
	suite_add_tcase(s, t);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(transport_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
