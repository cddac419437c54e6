/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_verbs.c - the verbs transport between two ends in one process, on
 * a real RDMA device (Soft-RoCE in the guest of tests/rxe/vm): hello and its
 * refusals, calls, one-sided reads and writes with the data checked (from
 * registered buffers and through bounce buffers, up to a whole chunk, many
 * outstanding), two-sided reads and writes through resolve when a lease has
 * no rkey, replies longer than one SEND, several QPs per peer, a stale rkey
 * refused, deadlines, injected completion errors and a killed peer - each
 * ending that connection only, every operation completing exactly once;
 * and two loops on two threads (a dpu's front and back with async = on)
 * using one device at once.
 *
 * Skips (exit 77) where there is no RDMA device. FAM_TEST_VERBS_ADDR (or
 * RXE_VM_IP) is the local address to listen on; default 192.168.77.1.
 */
#include "config.h"

#include <check.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>
#include <rdma/rdma_cma.h>

#include "core/famd.h"
#include "transport/transport-int.h"
#include "unit.h"

#define MEM_SIZE (4u << 20)
#define MAX_OPS  512
#define BIG_REPLY (100u * 1024u)

/* The passive end. */
static struct {
	struct fam_listener *l;
	struct fam_conn *c;
	uint8_t *mem;
	struct fam_mr *mr;        /* the exposed lease */
	int expose_before_hello;  /* fam_conn_expose() in the hello handler */
	bool hold_requests;
	unsigned hellos, resolves, releases;
	bool closed;
	int closed_err;
	unsigned ncloses;
	uint64_t completion_errors;
	uint8_t *big;
} srv;

/* The active end. */
static struct {
	struct fam_conn *c;
	bool connected;
	struct fam_hello_resp resp;
	bool closed;
	int closed_err;
	unsigned closed_calls;
	bool in_api;
	bool closed_inside_api;
	uint64_t completion_errors;
	int ops_done;
	int status[MAX_OPS];
	int calls[MAX_OPS];
	uint8_t *reply;
	uint32_t reply_len;
	struct fam_remote r;
} cli;

static struct event_base *base;
static char srv_addr[64];
static const char *local_ip;

/* ---- server ------------------------------------------------------------- */

/* Passive hello: accepts and names the server; tries an early expose. */
static int
srv_hello(struct fam_conn *c, const struct fam_hello *req,
    struct fam_hello_resp *resp, void *arg)
{
	struct fam_mr *mr = NULL;
	uint64_t a = 1;
	uint32_t k = 1;

	srv.hellos++;
	srv.expose_before_hello = fam_conn_expose(c, srv.mem, MEM_SIZE, true,
	    &mr, &a, &k);
	resp->role = FAM_WIRE_ROLE_MEMORY;
	resp->session = 0x5e55;
	resp->instance = 1;
	snprintf(resp->node, sizeof resp->node, "srv");
	return 0;
}

/*
 * Passive requests: REGION_CREATE exposes the test memory and answers with
 * the lease; REGION_FREE ends the lease; STATS answers BIG_REPLY bytes.
 */
static void
srv_request(struct fam_conn *c, const struct fam_hdr *h,
    const uint8_t *payload, void *arg)
{
	struct fam_region_info info = { .region = 1, .size = MEM_SIZE };
	uint8_t out[FAM_REGION_INFO_LEN];

	if (srv.hold_requests)
		return;
	switch (h->type) {
	case FAM_MSG_REGION_CREATE:
		ck_assert_int_eq(fam_conn_expose(c, srv.mem, MEM_SIZE, true,
		    &srv.mr, &info.addr, &info.rkey), 0);
		ck_assert_uint_ne(info.rkey, 0);
		/* An offset in a page, not where it sits in our memory. */
		ck_assert_uint_lt(info.addr, 4096);
		proto_put_region_info(out, &info);
		ck_assert_int_eq(fam_conn_reply(c, h, 0, out, sizeof out, true,
		    NULL, NULL), 0);
		break;
	case FAM_MSG_REGION_FREE:
		fam_mr_deregister(srv.mr);
		srv.mr = NULL;
		ck_assert_int_eq(fam_conn_reply(c, h, 0, NULL, 0, false, NULL,
		    NULL), 0);
		break;
	case FAM_MSG_STATS:
		ck_assert_int_eq(fam_conn_reply(c, h, 0, srv.big, BIG_REPLY,
		    false, NULL, NULL), 0);
		break;
	default:
		ck_assert_int_eq(fam_conn_reply(c, h, EOPNOTSUPP, NULL, 0,
		    false, NULL, NULL), 0);
	}
}

/* Two-sided READ/WRITE (a lease without rkey): the test memory. */
static int
srv_resolve(void *arg, uint32_t region, uint64_t off, uint32_t len,
    bool write, void **mem, void **hold)
{
	if (region != 1)
		return -ENOENT;
	if (off > MEM_SIZE || len > MEM_SIZE - off)
		return -ERANGE;
	srv.resolves++;
	*mem = srv.mem + off;
	*hold = &srv;
	return 0;
}

/* The transfer of a resolved range is over. */
static void
srv_release(void *arg, void *hold, bool write, uint32_t len)
{
	ck_assert_ptr_eq(hold, &srv);
	srv.releases++;
}

/* The passive end closed: every transfer was released. */
static void
srv_closed(struct fam_conn *c, int err, void *arg)
{
	srv.closed = true;
	srv.ncloses++;
	srv.closed_err = err;
	srv.completion_errors = fam_conn_stats(c)->completion_errors;
	ck_assert_uint_eq(srv.resolves, srv.releases);
	srv.mr = NULL; /* released with the connection */
	srv.c = NULL;
}

static const struct fam_conn_handlers srv_handlers = {
	.hello = srv_hello,
	.request = srv_request,
	.resolve = srv_resolve,
	.release = srv_release,
	.closed = srv_closed,
};

/* Takes the connection; exposing memory now must be refused. */
static void
srv_accept(struct fam_listener *l, struct fam_conn *c, const char *peer,
    void *arg)
{
	struct fam_mr *mr = NULL;
	uint64_t a;
	uint32_t k;

	ck_assert_int_eq(fam_conn_expose(c, srv.mem, MEM_SIZE, true, &mr, &a,
	    &k), -ENOTCONN);
	srv.c = c;
	fam_conn_set_handlers(c, &srv_handlers, NULL);
}

/* ---- client ------------------------------------------------------------- */

static void
cli_connected(struct fam_conn *c, const struct fam_hello_resp *resp,
    void *arg)
{
	cli.connected = true;
	cli.resp = *resp;
}

static void
cli_closed(struct fam_conn *c, int err, void *arg)
{
	cli.closed = true;
	cli.closed_calls++;
	cli.closed_err = err;
	cli.completion_errors = fam_conn_stats(c)->completion_errors;
	if (cli.in_api)
		cli.closed_inside_api = true;
	cli.c = NULL;
}

static const struct fam_conn_handlers cli_handlers = {
	.connected = cli_connected,
	.closed = cli_closed,
};

/* Completion of op number (intptr_t)ctx; keeps the payload of op 0. */
static void
cli_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	int i = (int)(intptr_t)ctx;

	ck_assert_int_lt(i, MAX_OPS);
	ck_assert(!cli.in_api);
	ck_assert(!cli.closed); /* every op completes before `closed` */
	cli.calls[i]++;
	cli.status[i] = status;
	cli.ops_done++;
	if (payload != NULL && len > 0) {
		free(cli.reply);
		cli.reply = malloc(len);
		memcpy(cli.reply, payload, len);
		cli.reply_len = len;
	}
}

static int want_done;

static bool
p_connected(void)
{
	return cli.connected || cli.closed;
}

static bool
p_done(void)
{
	return cli.ops_done >= want_done;
}

static bool
p_both_closed(void)
{
	return cli.closed && (srv.closed || srv.c == NULL);
}

static bool
p_cli_closed(void)
{
	return cli.closed;
}

/* Options with a secret and a deadline. */
static struct fam_conn_opts
opts(const char *secret, uint32_t timeout_ms)
{
	struct fam_conn_opts o = { .kind = FAM_TP_VERBS,
		.op_timeout_ms = timeout_ms, .max_outstanding = MAX_OPS };

	o.hello.role = FAM_WIRE_ROLE_HOST;
	snprintf(o.hello.node, sizeof o.hello.node, "cli");
	snprintf(o.secret, sizeof o.secret, "%s", secret);
	return o;
}

/* Starts a listener on the local RDMA address, any port. */
static void
start_server(const char *secret)
{
	struct fam_conn_opts o = opts(secret, 5000);
	char addr[64], *cause = NULL;

	snprintf(addr, sizeof addr, "%s:0", local_ip);
	ck_assert_msg(fam_listen(base, addr, &o, srv_accept, NULL, &srv.l,
	    &cause) == 0, "listen: %s", cause);
	snprintf(srv_addr, sizeof srv_addr, "%s", fam_listener_addr(srv.l));
	ck_assert_msg(atoi(strrchr(srv_addr, ':') + 1) > 0, "bound to %s",
	    srv_addr);
}

/* Connects the client. */
static void
start_client(const char *secret, uint32_t timeout_ms, unsigned qps,
    uint32_t inject_ppm)
{
	struct fam_conn_opts o = opts(secret, timeout_ms);
	char *cause = NULL;

	o.qps_per_peer = qps;
	o.inject_error_ppm = inject_ppm;
	cli.in_api = true;
	ck_assert_msg(fam_connect(base, srv_addr, &o, &cli_handlers, NULL,
	    &cli.c, &cause) == 0, "connect: %s", cause);
	cli.in_api = false;
}

/* Starts both ends, waits for the hello, gets the lease of the memory. */
static void
start_pair(uint32_t timeout_ms, unsigned qps, uint32_t inject_ppm)
{
	uint8_t buf[FAM_REGION_CREATE_MIN];
	struct fam_region_create req = { .size = MEM_SIZE };
	struct fam_region_info info;
	size_t len;

	start_server("s3cret");
	start_client("s3cret", timeout_ms, qps, inject_ppm);
	ck_assert(unit_run_until(base, p_connected, 10000));
	ck_assert_msg(cli.connected, "not connected: %s",
	    strerror(-cli.closed_err));
	ck_assert_int_eq(srv.expose_before_hello, -ENOTCONN);
	len = proto_put_region_create(buf, sizeof buf, &req);
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_REGION_CREATE, buf,
	    (uint32_t)len, cli_done, (void *)0), 0);
	want_done = 1;
	ck_assert(unit_run_until(base, p_done, 10000));
	ck_assert_int_eq(cli.status[0], 0);
	ck_assert_int_eq(proto_get_region_info(cli.reply, cli.reply_len,
	    &info), 0);
	cli.r.region = info.region;
	cli.r.rkey = info.rkey;
	cli.r.addr = info.addr;
	cli.r.size = info.size;
	memset(cli.calls, 0, sizeof cli.calls);
	cli.ops_done = 0;
}

/* The byte of pattern seed at offset off. */
static uint8_t
pat(uint64_t off, unsigned seed)
{
	return (uint8_t)((off * 2654435761u) >> 13 ^ seed);
}

static void
setup(void)
{
	memset(&srv, 0, sizeof srv);
	memset(&cli, 0, sizeof cli);
	want_done = 0;
	srv.mem = calloc(1, MEM_SIZE);
	srv.big = malloc(BIG_REPLY);
	for (uint32_t i = 0; i < BIG_REPLY; i++)
		srv.big[i] = pat(i, 7);
	base = event_base_new();
	log_open(LOG_DEST_STDERR, getenv("FAM_TEST_DEBUG") != NULL ?
	    LOG_DEBUG : LOG_WARNING);
}

static void
teardown(void)
{
	if (cli.c != NULL)
		fam_conn_close(cli.c);
	if (srv.c != NULL)
		fam_conn_close(srv.c);
	unit_run_until(base, p_both_closed, 5000);
	if (srv.l != NULL)
		fam_listener_free(srv.l);
	event_base_free(base);
	free(srv.mem);
	free(srv.big);
	free(cli.reply);
	for (int i = 0; i < MAX_OPS; i++)
		ck_assert_int_le(cli.calls[i], 1);
	ck_assert_uint_le(cli.closed_calls, 1);
}

/*
 * Issues a read or write of len at off, op number i; returns what the
 * transport said (0, or -errno when it refused the operation).
 */
static int
rw_try(bool write, int i, uint64_t off, uint32_t len, void *buf,
    struct fam_mr *mr)
{
	int err;

	cli.in_api = true;
	if (write)
		err = fam_conn_write(cli.c, &cli.r, off, len, buf, mr, cli_done,
		    (void *)(intptr_t)i);
	else
		err = fam_conn_read(cli.c, &cli.r, off, len, buf, mr, cli_done,
		    (void *)(intptr_t)i);
	cli.in_api = false;
	return err;
}

/* Issues a read or write of len at off, op number i, which must be taken. */
static void
rw(bool write, int i, uint64_t off, uint32_t len, void *buf,
    struct fam_mr *mr)
{
	ck_assert_int_eq(rw_try(write, i, off, len, buf, mr), 0);
}

/* Waits for n more completions. */
static void
wait_ops(int n)
{
	want_done = cli.ops_done + n;
	ck_assert_msg(unit_run_until(base, p_done, 30000), "%d of %d ops done",
	    cli.ops_done, want_done);
}

/* ---- tests -------------------------------------------------------------- */

START_TEST(test_hello_then_call_round_trip)
{
	start_pair(5000, 1, 0);
	ck_assert_uint_eq(cli.resp.session, 0x5e55);
	ck_assert_str_eq(cli.resp.node, "srv");
	ck_assert(fam_conn_is_open(cli.c));
	ck_assert_uint_ne(cli.r.rkey, 0);
	/* The lease names bytes by offset: never the server's address. */
	ck_assert_uint_eq(cli.r.addr, (uintptr_t)srv.mem & 4095);
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_REGION_FREE,
	    "\0\0\0\1\0\0\0\0", FAM_REGION_FREE_LEN, cli_done, (void *)1), 0);
	wait_ops(1);
	ck_assert_int_eq(cli.status[1], 0);
}
END_TEST

START_TEST(test_wrong_secret_refused_before_any_exposure)
{
	start_server("s3cret");
	start_client("wrong", 5000, 1, 0);
	ck_assert(unit_run_until(base, p_both_closed, 10000));
	ck_assert(!cli.connected);
	ck_assert_int_eq(cli.closed_err, -EACCES);
	ck_assert_int_eq(srv.closed_err, -EACCES);
	ck_assert_uint_eq(srv.hellos, 0); /* the role never saw it */
	ck_assert_ptr_null(srv.mr);
}
END_TEST

START_TEST(test_missing_secret_refused)
{
	start_server("s3cret");
	start_client("", 5000, 1, 0);
	ck_assert(unit_run_until(base, p_both_closed, 10000));
	ck_assert_int_eq(cli.closed_err, -EACCES);
	ck_assert_uint_eq(srv.hellos, 0);
}
END_TEST

/*
 * A connect request that is not famd's (another protocol version in its
 * private data) is rejected by rdma_cm before any QP exists.
 */
START_TEST(test_foreign_connect_request_rejected)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct sockaddr_storage ss;
	socklen_t sslen;
	struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
		.max_send_sge = 1, .max_recv_sge = 1 } };
	struct rdma_conn_param p = { 0 };
	uint8_t priv[24] = { 'F', 'A', 'M', 'D', 99 };
	char *cause = NULL;
	bool rejected = false;
	uint32_t status = 0;

	start_server("s3cret");
	ck_assert_int_eq(tp_resolve(srv_addr, false, &ss, &sslen, &cause), 0);
	ck_assert_ptr_nonnull(ch = rdma_create_event_channel());
	ck_assert_int_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	ck_assert_int_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&ss,
	    2000), 0);
	ck_assert_int_eq(rdma_get_cm_event(ch, &ev), 0);
	ck_assert_int_eq(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	rdma_ack_cm_event(ev);
	ck_assert_int_eq(rdma_resolve_route(id, 2000), 0);
	ck_assert_int_eq(rdma_get_cm_event(ch, &ev), 0);
	ck_assert_int_eq(ev->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
	rdma_ack_cm_event(ev);
	ck_assert_int_eq(rdma_create_qp(id, NULL, &qa), 0);
	p.private_data = priv;
	p.private_data_len = sizeof priv;
	p.retry_count = 7;
	ck_assert_int_eq(rdma_connect(id, &p), 0);
	/* The listener runs in this loop: let it answer. */
	ck_assert_int_eq(fd_set_nonblock(ch->fd), 0);
	for (int i = 0; i < 2000 && !rejected; i++) {
		struct timeval tv = { 0, 5000 };

		event_base_loopexit(base, &tv);
		event_base_loop(base, EVLOOP_ONCE);
		if (rdma_get_cm_event(ch, &ev) == 0) {
			ck_assert_int_eq(ev->event, RDMA_CM_EVENT_REJECTED);
			if (ev->param.conn.private_data != NULL) {
				memcpy(&status, (const uint8_t *)
				    ev->param.conn.private_data + 8, 4);
				status = be32toh(status);
			}
			rejected = true;
			rdma_ack_cm_event(ev);
		}
	}
	ck_assert(rejected);
	ck_assert_uint_eq(status, EPROTONOSUPPORT);
	ck_assert_ptr_null(srv.c); /* never became a connection */
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	cli.closed = true;
}
END_TEST

START_TEST(test_one_sided_reads_and_writes_move_the_data)
{
	static const uint32_t sizes[] = { 1, 4096, 65536, 100000, 1u << 20,
		FAM_RW_MAX };
	uint8_t *src = malloc(FAM_RW_MAX), *dst = malloc(FAM_RW_MAX);
	uint8_t *reg = malloc(FAM_RW_MAX);
	struct fam_mr *mr;
	int op = 1;

	start_pair(10000, 1, 0);
	mr = fam_mr_register(cli.c, reg, FAM_RW_MAX);
	ck_assert_ptr_nonnull(mr);
	for (unsigned s = 0; s < nitems(sizes); s++) {
		uint32_t len = sizes[s];
		uint64_t off = (s * 12345u) % (MEM_SIZE - len);

		/* Write from unregistered memory (through bounce slabs). */
		for (uint32_t i = 0; i < len; i++)
			src[i] = pat(off + i, s);
		rw(true, op++, off, len, src, NULL);
		wait_ops(1);
		ck_assert_int_eq(cli.status[op - 1], 0);
		ck_assert_msg(memcmp(srv.mem + off, src, len) == 0,
		    "write of %u bytes did not land", len);
		/* Read into registered memory, then into unregistered. */
		memset(reg, 0xa5, len);
		rw(false, op++, off, len, reg, mr);
		memset(dst, 0x5a, len);
		rw(false, op++, off, len, dst, NULL);
		wait_ops(2);
		ck_assert_int_eq(cli.status[op - 2], 0);
		ck_assert_int_eq(cli.status[op - 1], 0);
		ck_assert_msg(memcmp(reg, src, len) == 0, "registered read of "
		    "%u bytes differs", len);
		ck_assert_msg(memcmp(dst, src, len) == 0, "bounce read of %u "
		    "bytes differs", len);
		/* A write from registered memory. */
		for (uint32_t i = 0; i < len; i++)
			reg[i] = pat(off + i, s + 100);
		rw(true, op++, off, len, reg, mr);
		wait_ops(1);
		ck_assert_int_eq(cli.status[op - 1], 0);
		ck_assert(memcmp(srv.mem + off, reg, len) == 0);
	}
	ck_assert_uint_eq(srv.resolves, 0); /* the server's CPU took no part */
	fam_mr_deregister(mr);
	free(src);
	free(dst);
	free(reg);
}
END_TEST

START_TEST(test_many_reads_outstanding_complete_once_with_their_data)
{
	const uint32_t len = 16384;
	const int n = 300;
	uint8_t *dst = malloc((size_t)n * len);
	struct fam_mr *mr;

	start_pair(30000, 1, 0);
	for (uint32_t i = 0; i < MEM_SIZE; i++)
		srv.mem[i] = pat(i, 3);
	mr = fam_mr_register(cli.c, dst, (size_t)n * len);
	ck_assert_ptr_nonnull(mr);
	for (int i = 0; i < n; i++)
		rw(false, i, ((uint64_t)i * 7919u * len) % (MEM_SIZE - len),
		    len, dst + (size_t)i * len, i % 2 ? mr : NULL);
	ck_assert_uint_eq(fam_conn_stats(cli.c)->outstanding, (uint32_t)n);
	wait_ops(n);
	for (int i = 0; i < n; i++) {
		uint64_t off = ((uint64_t)i * 7919u * len) % (MEM_SIZE - len);

		ck_assert_int_eq(cli.calls[i], 1);
		ck_assert_int_eq(cli.status[i], 0);
		ck_assert(memcmp(dst + (size_t)i * len, srv.mem + off, len) ==
		    0);
	}
	fam_mr_deregister(mr);
	free(dst);
}
END_TEST

START_TEST(test_lease_without_rkey_goes_through_resolve)
{
	uint8_t *src = malloc(FAM_RW_MAX), *dst = malloc(FAM_RW_MAX);

	start_pair(10000, 1, 0);
	cli.r.rkey = 0; /* as a tcp lease: the peer serves READ and WRITE */
	for (uint32_t i = 0; i < FAM_RW_MAX; i++)
		src[i] = pat(i, 9);
	rw(true, 1, 4096, FAM_RW_MAX, src, NULL);
	wait_ops(1);
	ck_assert_int_eq(cli.status[1], 0);
	ck_assert(memcmp(srv.mem + 4096, src, FAM_RW_MAX) == 0);
	rw(false, 2, 4096, FAM_RW_MAX, dst, NULL);
	rw(false, 3, 1, 100, dst, NULL);
	wait_ops(2);
	ck_assert_int_eq(cli.status[2], 0);
	ck_assert_int_eq(cli.status[3], 0);
	ck_assert(memcmp(dst, srv.mem + 1, 100) == 0);
	ck_assert_uint_eq(srv.resolves, 3);
	ck_assert_uint_eq(srv.releases, 3);
	/* An error from resolve reaches the op; the connection stays. */
	cli.r.region = 2;
	rw(false, 4, 0, 100, dst, NULL);
	wait_ops(1);
	ck_assert_int_eq(cli.status[4], -ENOENT);
	ck_assert(fam_conn_is_open(cli.c));
	free(src);
	free(dst);
}
END_TEST

START_TEST(test_reply_longer_than_a_send_is_put_back_together)
{
	start_pair(10000, 1, 0);
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0, cli_done,
	    (void *)1), 0);
	wait_ops(1);
	ck_assert_int_eq(cli.status[1], 0);
	ck_assert_uint_eq(cli.reply_len, BIG_REPLY);
	ck_assert(memcmp(cli.reply, srv.big, BIG_REPLY) == 0);
}
END_TEST

START_TEST(test_several_qps_per_peer_carry_everything)
{
	const uint32_t len = 65536;
	uint8_t *dst = malloc(64 * len);

	start_pair(30000, 4, 0);
	for (uint32_t i = 0; i < MEM_SIZE; i++)
		srv.mem[i] = pat(i, 5);
	for (int i = 1; i <= 64; i++)
		rw(false, i, (uint64_t)(i - 1) * len, len,
		    dst + (size_t)(i - 1) * len, NULL);
	for (int i = 65; i < 75; i++)
		ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0,
		    cli_done, (void *)(intptr_t)i), 0);
	wait_ops(74);
	for (int i = 1; i < 75; i++)
		ck_assert_int_eq(cli.status[i], 0);
	ck_assert(memcmp(dst, srv.mem, 64 * len) == 0);
	free(dst);
}
END_TEST

START_TEST(test_stale_rkey_after_lease_end_reads_nothing)
{
	uint8_t buf[4096];

	start_pair(10000, 1, 0);
	memset(srv.mem, 0x11, 4096);
	rw(false, 1, 0, 4096, buf, NULL);
	wait_ops(1);
	ck_assert_int_eq(cli.status[1], 0);
	ck_assert_int_eq(buf[100], 0x11);
	/* The lease ends (REGION_FREE here deregisters it). */
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_REGION_FREE,
	    "\0\0\0\1\0\0\0\0", FAM_REGION_FREE_LEN, cli_done, (void *)2), 0);
	wait_ops(1);
	ck_assert_int_eq(cli.status[2], 0);
	memset(srv.mem, 0x22, 4096);
	memset(buf, 0, sizeof buf);
	rw(false, 3, 0, 4096, buf, NULL);
	wait_ops(1);
	ck_assert_int_eq(cli.status[3], -EACCES);
	ck_assert_int_ne(buf[100], 0x22);
	ck_assert(unit_run_until(base, p_both_closed, 10000));
	ck_assert_int_eq(cli.closed_err, -EIO);
	ck_assert_uint_ge(cli.completion_errors, 1);
}
END_TEST

START_TEST(test_deadline_fails_every_op_and_closes)
{
	start_pair(3000, 1, 0);
	srv.hold_requests = true;
	for (int i = 1; i <= 5; i++)
		ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0,
		    cli_done, (void *)(intptr_t)i), 0);
	ck_assert(unit_run_until(base, p_cli_closed, 10000));
	for (int i = 1; i <= 5; i++) {
		ck_assert_int_eq(cli.calls[i], 1);
		ck_assert_int_eq(cli.status[i], -ETIMEDOUT);
	}
	ck_assert_int_eq(cli.closed_err, -ETIMEDOUT);
	ck_assert(!cli.closed_inside_api);
}
END_TEST

/*
 * With [verbs] inject_error_ppm, completions turn into errors: the
 * connection (whichever stage it is at: an error may hit the handshake
 * too) closes with -EIO, the peer sees the disconnect, every operation
 * completes once, nothing hangs.
 */
START_TEST(test_injected_completion_errors_close_cleanly)
{
	const uint32_t len = 8192;
	uint8_t *dst = malloc(100 * len);
	struct fam_conn_opts o;
	char *cause = NULL;
	int issued = 0, ok = 0;
	bool refused = false;

	start_server("s3cret");
	for (int attempt = 0; attempt < 20 && !cli.connected; attempt++) {
		memset(&cli, 0, sizeof cli);
		o = opts("s3cret", 10000);
		o.qps_per_peer = 2;
		o.inject_error_ppm = 20000; /* one completion in fifty */
		ck_assert_int_eq(fam_connect(base, srv_addr, &o, &cli_handlers,
		    NULL, &cli.c, &cause), 0);
		ck_assert(unit_run_until(base, p_connected, 10000));
		if (!cli.connected) {
			ck_assert_int_eq(cli.closed_err, -EIO);
			ck_assert_uint_eq(cli.closed_calls, 1);
			unit_run_until(base, p_both_closed, 5000);
		}
	}
	ck_assert(cli.connected);
	/* A lease for one-sided operations (if the call survives). */
	{
		uint8_t buf[FAM_REGION_CREATE_MIN];
		struct fam_region_create req = { .size = MEM_SIZE };
		struct fam_region_info info;
		size_t blen = proto_put_region_create(buf, sizeof buf, &req);

		ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_REGION_CREATE,
		    buf, (uint32_t)blen, cli_done, (void *)0), 0);
		issued = 1;
		want_done = 1;
		ck_assert(unit_run_until(base, p_done, 10000));
		if (cli.status[0] == 0 && proto_get_region_info(cli.reply,
		    cli.reply_len, &info) == 0) {
			cli.r.rkey = info.rkey;
			cli.r.addr = info.addr;
		}
	}
	cli.r.region = 1;
	cli.r.size = MEM_SIZE;
	while (!cli.closed && !refused && issued < MAX_OPS - 100) {
		for (int k = 0; k < 100 && !cli.closed; k++) {
			struct fam_remote save = cli.r;
			int err;

			if (issued % 2)
				cli.r.rkey = 0; /* two-sided, through resolve */
			err = rw_try(issued % 3 == 0, issued, (uint64_t)k * len,
			    len, dst + (size_t)k * len, NULL);
			cli.r = save;
			/*
			 * An injected error may close the connection between
			 * two completions, before its closed callback runs:
			 * the transport then refuses new operations.
			 */
			if (err == -ENOTCONN) {
				refused = true;
				break;
			}
			ck_assert_int_eq(err, 0);
			issued++;
		}
		want_done = issued;
		ck_assert_msg(unit_run_until(base, p_done, 30000),
		    "%d of %d ops done", cli.ops_done, issued);
	}
	ck_assert_msg(unit_run_until(base, p_both_closed, 30000),
	    "no clean close: client closed %d server closed %d", cli.closed,
	    srv.closed);
	for (int i = 0; i < issued; i++) {
		ck_assert_int_eq(cli.calls[i], 1);
		ok += cli.status[i] == 0;
	}
	ck_assert_int_lt(ok, issued);
	ck_assert_int_eq(cli.closed_err, -EIO);
	ck_assert_uint_ge(cli.completion_errors, 1);
	ck_assert_uint_eq(srv.resolves, srv.releases);
	free(dst);
}
END_TEST

START_TEST(test_closed_is_never_called_inside_an_api_call)
{
	start_pair(5000, 1, 0);
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0, cli_done,
	    (void *)1), 0);
	cli.in_api = true;
	fam_conn_close(cli.c);
	cli.in_api = false;
	ck_assert(!cli.closed);
	ck_assert(unit_run_until(base, p_cli_closed, 5000));
	ck_assert_int_eq(cli.calls[1], 1);
	ck_assert_int_eq(cli.status[1], -ECONNRESET);
	ck_assert_int_eq(cli.closed_err, 0);
	ck_assert(!cli.closed_inside_api);
}
END_TEST

START_TEST(test_nobody_listening_is_reported_once)
{
	char addr[64];
	struct fam_conn_opts o = opts("s3cret", 5000);
	char *cause = NULL;

	snprintf(addr, sizeof addr, "%s:1", local_ip);
	ck_assert_int_eq(fam_connect(base, addr, &o, &cli_handlers, NULL,
	    &cli.c, &cause), 0);
	ck_assert(unit_run_until(base, p_cli_closed, 10000));
	ck_assert_uint_eq(cli.closed_calls, 1);
	ck_assert(!cli.connected);
	ck_assert_int_ne(cli.closed_err, 0);
}
END_TEST

START_TEST(test_api_misuse_returns_errors)
{
	uint8_t buf[16];
	struct fam_mr *mr = NULL;
	uint64_t a;
	uint32_t k;

	start_pair(5000, 1, 0);
	ck_assert_int_eq(fam_conn_read(cli.c, &cli.r, 0, 0, buf, NULL,
	    cli_done, NULL), -EINVAL);
	ck_assert_int_eq(fam_conn_read(cli.c, &cli.r, MEM_SIZE - 8, 16, buf,
	    NULL, cli_done, NULL), -ERANGE);
	ck_assert_int_eq(fam_conn_write(cli.c, &cli.r, 0, 16, NULL, NULL,
	    cli_done, NULL), -EINVAL);
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_HELLO, NULL, 0, cli_done,
	    NULL), -EINVAL);
	ck_assert_int_eq(fam_conn_expose(cli.c, NULL, 16, false, &mr, &a, &k),
	    -EINVAL);
	fam_conn_close(cli.c);
	ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0, cli_done,
	    NULL), -ENOTCONN);
	ck_assert_int_eq(fam_conn_expose(cli.c, buf, 16, false, &mr, &a, &k),
	    -ENOTCONN);
}
END_TEST

/*
 * The peer process is killed (SIGKILL) with requests of ours in flight:
 * they fail, `closed` comes once, nothing hangs.
 */
START_TEST(test_killed_peer_completes_every_op_once)
{
	int pfd[2];
	pid_t pid;

	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* The server, in a process of its own. */
		close(pfd[0]);
		event_base_free(base);
		base = event_base_new();
		start_server("s3cret");
		srv.hold_requests = true;
		ck_assert_int_eq(write(pfd[1], srv_addr, sizeof srv_addr),
		    (ssize_t)sizeof srv_addr);
		for (;;)
			event_base_loop(base, EVLOOP_ONCE);
	}
	close(pfd[1]);
	ck_assert_int_eq(read(pfd[0], srv_addr, sizeof srv_addr),
	    (ssize_t)sizeof srv_addr);
	close(pfd[0]);
	start_client("s3cret", 20000, 1, 0);
	ck_assert(unit_run_until(base, p_connected, 10000));
	ck_assert(cli.connected);
	for (int i = 1; i <= 4; i++)
		ck_assert_int_eq(fam_conn_call(cli.c, FAM_MSG_STATS, NULL, 0,
		    cli_done, (void *)(intptr_t)i), 0);
	/* Let the requests reach the peer, which holds them. */
	unit_run_until(base, p_cli_closed, 500);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	ck_assert_msg(unit_run_until(base, p_cli_closed, 20000),
	    "no close after the peer died");
	for (int i = 1; i <= 4; i++)
		ck_assert_int_le(cli.calls[i], 1);
	ck_assert_uint_eq(cli.closed_calls, 1);
	srv.l = NULL;
}
END_TEST

/*
 * The client of test_two_loops_on_two_threads_share_the_device: its loop
 * runs on a thread of its own; `cli` is this thread's alone meanwhile.
 */
#define T2_ROUNDS 6
#define T2_LEN    (256u << 10)

static struct {
	struct event_base *base;
	_Atomic bool done;
	int rounds;          /* connected, data right, closed */
	char why[160];       /* the first thing that went wrong */
} t2;

/* Runs the client thread's loop until pred() holds or ms pass. */
static bool
t2_run_until(bool (*pred)(void), int ms)
{
	uint64_t end = mono_ns() + (uint64_t)ms * 1000000u;

	while (!pred() && mono_ns() < end) {
		struct timeval tv = { 0, 5000 };

		event_base_loopexit(t2.base, &tv);
		event_base_loop(t2.base, EVLOOP_ONCE);
	}
	return pred();
}

/* Waits on the client thread for n more completions. */
static bool
t2_wait_ops(int n)
{
	want_done = cli.ops_done + n;
	return t2_run_until(p_done, 30000);
}

/*
 * One round on the client thread: connect (2 QPs), take the lease, write
 * a pattern one-sided, read it back into registered and unregistered
 * memory, close. Returns NULL or what went wrong.
 */
static const char *
t2_round(int round, uint8_t *src, uint8_t *dst, uint8_t *reg)
{
	uint8_t buf[FAM_REGION_CREATE_MIN];
	struct fam_region_create req = { .size = MEM_SIZE };
	struct fam_conn_opts o = opts("s3cret", 10000);
	struct fam_region_info info;
	uint64_t off = (uint64_t)round * T2_LEN;
	struct fam_mr *mr;
	char *cause = NULL;
	size_t len;

	free(cli.reply);
	memset(&cli, 0, sizeof cli);
	o.qps_per_peer = 2;
	if (fam_connect(t2.base, srv_addr, &o, &cli_handlers, NULL, &cli.c,
	    &cause) != 0)
		return "connect";
	if (!t2_run_until(p_connected, 10000) || !cli.connected)
		return "no hello answered";
	len = proto_put_region_create(buf, sizeof buf, &req);
	if (fam_conn_call(cli.c, FAM_MSG_REGION_CREATE, buf, (uint32_t)len,
	    cli_done, (void *)0) != 0 || !t2_wait_ops(1) ||
	    cli.status[0] != 0 || proto_get_region_info(cli.reply,
	    cli.reply_len, &info) != 0 || info.rkey == 0)
		return "no lease";
	cli.r.region = info.region;
	cli.r.rkey = info.rkey;
	cli.r.addr = info.addr;
	cli.r.size = info.size;
	mr = fam_mr_register(cli.c, reg, T2_LEN);
	if (mr == NULL)
		return "registration";
	for (uint32_t i = 0; i < T2_LEN; i++)
		src[i] = pat(off + i, (unsigned)round);
	rw(true, 1, off, T2_LEN, src, NULL);
	if (!t2_wait_ops(1) || cli.status[1] != 0)
		return "write";
	memset(reg, 0, T2_LEN);
	memset(dst, 0, T2_LEN);
	rw(false, 2, off, T2_LEN, reg, mr);
	rw(false, 3, off, T2_LEN, dst, NULL);
	if (!t2_wait_ops(2) || cli.status[2] != 0 || cli.status[3] != 0)
		return "read";
	if (memcmp(reg, src, T2_LEN) != 0 || memcmp(dst, src, T2_LEN) != 0)
		return "the data read back differs";
	fam_conn_close(cli.c);
	if (!t2_run_until(p_cli_closed, 10000) || cli.closed_calls != 1)
		return "no close";
	return NULL;
}

/* The client thread: rounds until one fails. */
static void *
t2_main(void *arg)
{
	uint8_t *src = malloc(T2_LEN), *dst = malloc(T2_LEN);
	uint8_t *reg = malloc(T2_LEN);
	const char *why = NULL;

	for (int round = 0; round < T2_ROUNDS && why == NULL; round++) {
		why = t2_round(round, src, dst, reg);
		if (why == NULL)
			t2.rounds++;
		else
			snprintf(t2.why, sizeof t2.why, "round %d: %s", round,
			    why);
	}
	if (cli.c != NULL && !cli.closed) {
		fam_conn_close(cli.c);
		t2_run_until(p_cli_closed, 10000);
	}
	free(src);
	free(dst);
	free(reg);
	atomic_store(&t2.done, true);
	return NULL;
}

static bool
p_t2_done(void)
{
	return atomic_load(&t2.done);
}

static bool
p_srv_all_closed(void)
{
	return srv.ncloses >= (unsigned)t2.rounds && srv.c == NULL;
}

/*
 * Two loops on two threads, as a dpu with async = on has them: the server
 * on this thread's loop, a client on another's, on one device (each loop
 * watches its asynchronous events). Connections are made and destroyed
 * on both at once (a joining QP is looked up among the other loop's
 * connections), the data moves right and each close reaches the peer.
 */
START_TEST(test_two_loops_on_two_threads_share_the_device)
{
	pthread_t th;

	start_server("s3cret");
	t2.base = event_base_new();
	ck_assert_ptr_nonnull(t2.base);
	atomic_store(&t2.done, false);
	ck_assert_int_eq(pthread_create(&th, NULL, t2_main, NULL), 0);
	unit_run_until(base, p_t2_done, 300000);
	ck_assert_msg(p_t2_done(), "the client thread hangs");
	pthread_join(th, NULL);
	event_base_free(t2.base);
	ck_assert_msg(t2.rounds == T2_ROUNDS, "%d of %d rounds: %s", t2.rounds,
	    T2_ROUNDS, t2.why);
	ck_assert_msg(unit_run_until(base, p_srv_all_closed, 10000),
	    "the server saw %u closes of %d", srv.ncloses, t2.rounds);
	ck_assert_uint_eq(srv.resolves, 0);
}
END_TEST

/* Is there an RDMA device here? */
static bool
have_rdma(void)
{
	DIR *d = opendir("/sys/class/infiniband");
	struct dirent *e;
	bool any = false;

	if (d == NULL)
		return false;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			any = true;
	closedir(d);
	return any && access("/dev/infiniband/rdma_cm", R_OK | W_OK) == 0;
}

/* Builds the suite. */
static Suite *
verbs_suite(void)
{
	Suite *s = suite_create("verbs");
	TCase *t = tcase_create("verbs");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_hello_then_call_round_trip);
	tcase_add_test(t, test_wrong_secret_refused_before_any_exposure);
	tcase_add_test(t, test_missing_secret_refused);
	tcase_add_test(t, test_foreign_connect_request_rejected);
	tcase_add_test(t, test_one_sided_reads_and_writes_move_the_data);
	tcase_add_test(t,
	    test_many_reads_outstanding_complete_once_with_their_data);
	tcase_add_test(t, test_lease_without_rkey_goes_through_resolve);
	tcase_add_test(t, test_reply_longer_than_a_send_is_put_back_together);
	tcase_add_test(t, test_several_qps_per_peer_carry_everything);
	tcase_add_test(t, test_stale_rkey_after_lease_end_reads_nothing);
	tcase_add_test(t, test_deadline_fails_every_op_and_closes);
	tcase_add_test(t, test_injected_completion_errors_close_cleanly);
	tcase_add_test(t, test_closed_is_never_called_inside_an_api_call);
	tcase_add_test(t, test_nobody_listening_is_reported_once);
	tcase_add_test(t, test_api_misuse_returns_errors);
	tcase_add_test(t, test_killed_peer_completes_every_op_once);
	tcase_add_test(t, test_two_loops_on_two_threads_share_the_device);
	suite_add_tcase(s, t);
	return s;
}

int
main(void)
{
	SRunner *sr;
	int failed;

	if (!have_rdma()) {
		printf("SKIP: no RDMA device here (run it in the Soft-RoCE "
		    "guest: make check-rxe)\n");
		return 77;
	}
	local_ip = getenv("FAM_TEST_VERBS_ADDR");
	if (local_ip == NULL)
		local_ip = getenv("RXE_VM_IP");
	if (local_ip == NULL)
		local_ip = "192.168.77.1";
	/* As famd: loops may be woken from other threads. */
	if (evthread_use_pthreads() < 0)
		return EXIT_FAILURE;
	sr = srunner_create(verbs_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
