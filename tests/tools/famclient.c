/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famclient.c - a small client of a memory famd, for tests and for people
 * checking a memory node by hand.
 *
 * Steps run in order on one connection (the real transport):
 *   create SIZE [name=N] [file=PATH] [shared] [persistent]
 *                          create a region (or open one by name); it
 *                          becomes the current region
 *   use ID SIZE [lease=ADDR:RKEY]
 *                          make region ID the current one (after -r),
 *                          with no lease (two-sided) or the one given
 *   lease                  a new lease on the current region for this
 *                          connection (REGION_LEASE)
 *   adopt INST ID KEY [exclusive]
 *                          take a handle on region ID (of the memory node
 *                          running instance INST, hex; 0: this one) with
 *                          its KEY (hex); it becomes the current region
 *   advise static|random|normal   REGION_ADVISE on the current region
 *   write OFF LEN SEED     write pattern SEED (0: zeros) at OFF
 *   read OFF LEN SEED      read at OFF and check pattern SEED
 *   readfile OFF LEN FILE  read at OFF and compare with FILE at OFF
 *   free [ID]              free the current region (or region ID)
 *   stats                  print the memory node's counters (JSON)
 *   expect ERRNO           the next step must fail with ERRNO (ENOSPC...)
 *   hold [SECONDS]         keep the connection until SIGUSR1 (go on),
 *                          SIGTERM (exit 0) or SECONDS (default 60)
 *   rw SIZE [CHUNK [DEPTH]] create, write, read back, verify, free, and
 *                          print the throughput
 * Or one attack on raw sockets, which checks the daemon's answer:
 *   attack NAME            (famclient -h lists them)
 *
 * Output, one line per event, for scripts: "hello session=HEX
 * instance=HEX node=NAME", "region id=N size=N flags=N length=N", then
 * "where key=HEX mem_instance=HEX mem_region=N mem_key=HEX" (the mem_
 * fields are 0 but from a dpu; key is 0 from a dpu), with verbs "lease
 * addr=HEX rkey=HEX" (reads and writes are then one-sided, and the lease is
 * kept after `free`, so a read after it tries the old rkey), "holding".
 * -B (with -T verbs) sends every message after the hello with immediate
 * data naming another type than its header: the peer must refuse it.
 * -T verbs uses the verbs transport (default tcp); -R registers the
 * buffers of reads and writes (fam_mr_register) instead of leaving the
 * transport to bounce them.
 * Options may come before or after the address.
 * Exit status: 0 when everything went as expected, 1 when not, 64 usage.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "core/famd.h"
#include "transport/transport.h"

#define FC_CHUNK_DEFAULT (1u << 20)
#define FC_DEPTH_DEFAULT 16u
#define FC_RAW_TIMEOUT_MS 5000

static struct {
	const char *addr;
	char secret[FAM_SECRET_MAX + 1];
	char node[FAM_NAME_MAX + 1];
	uint64_t resume;
	uint32_t timeout_ms;
	enum fam_transport_kind kind;
	bool reg;
	bool bad_imm;
	bool quiet;
	struct event_base *base;
	struct fam_conn *c;
	bool open, closed;
	int closed_err;
	struct fam_hello_resp resp;
	struct fam_remote cur;     /* the current region */
	int expect;                /* errno the next step must fail with */
	int held_signal;
} fc = { .timeout_ms = 10000 };

/* Prints a failure and exits 1. */
static void __attribute__((noreturn, format(printf, 1, 2)))
fc_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "famclient: FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

/* Prints the usage message. */
static void
fc_usage(FILE *f)
{
	fprintf(f,
	    "usage: famclient [-BqR] [-s secret | -S file] [-n node] [-r token] "
	    "[-t ms] [-T tcp|verbs]\n"
	    "                 host:port step...\n"
	    "       famclient [options] host:port attack NAME\n"
	    "steps: create SIZE [name=N] [file=P] [shared] [persistent] | "
	    "use ID SIZE [lease=ADDR:RKEY] | lease |\n"
	    "       write OFF LEN SEED | read OFF LEN SEED | readfile OFF LEN "
	    "FILE |\n"
	    "       free [ID] | stats | expect ERRNO | hold [SECONDS] | "
	    "rw SIZE [CHUNK [DEPTH]] |\n"
	    "       adopt INSTANCE ID KEY [exclusive] | advise static|random|normal\n"
	    "attacks: bad-magic bad-version truncated huge-length "
	    "unknown-type bad-flags\n"
	    "         before-hello bad-secret reserved-set bad-create "
	    "second-hello\n"
	    "         response-frame unknown-region past-end shared-write "
	    "dup-writer\n"
	    "         foreign-region adopt-guess flood\n"
	    "flood: FLOOD_N requests (4096) of FLOOD_LEN bytes (256K) sent "
	    "unread; a line on\n"
	    "       stdin, then the answers are read and counted\n");
}

/* Returns the errno named name (ENOSPC, ...), or 0. */
static int
fc_errno(const char *name)
{
	for (int e = 1; e < 200; e++) {
		const char *n = strerrorname_np(e);

		if (n != NULL && strcmp(n, name) == 0)
			return e;
	}
	return 0;
}

/* Returns the name of errno e (negative or positive). */
static const char *
fc_errname(int e)
{
	const char *n;

	if (e < 0)
		e = -e;
	if (e == 0)
		return "success";
	n = strerrorname_np(e);
	return n != NULL ? n : "E?";
}

/* Parses a size with an optional K, M or G suffix. */
static uint64_t
fc_size(const char *s)
{
	char *end;
	uint64_t v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno != 0 || end == s)
		fc_fail("bad number '%s'", s);
	switch (*end) {
	case 'K': case 'k': v <<= 10; end++; break;
	case 'M': case 'm': v <<= 20; end++; break;
	case 'G': case 'g': v <<= 30; end++; break;
	case 'T': case 't': v <<= 40; end++; break;
	}
	if (*end != '\0')
		fc_fail("bad number '%s'", s);
	return v;
}

/* The byte of pattern seed at offset off of a region (seed 0: zeros). */
static uint8_t
fc_pattern(uint64_t off, unsigned seed)
{
	if (seed == 0)
		return 0;
	return (uint8_t)(((off >> 12) * 131u + (off & 4095) * 7u + seed * 29u) ^
	    (off >> 20));
}

/* ---- the transport client ------------------------------------------------ */

/* The hello was accepted. */
static void
fc_connected(struct fam_conn *c, const struct fam_hello_resp *resp,
    void *arg)
{
	fc.open = true;
	fc.resp = *resp;
}

/* The connection is gone. */
static void
fc_closed(struct fam_conn *c, int err, void *arg)
{
	fc.closed = true;
	fc.closed_err = err;
	fc.c = NULL;
}

static const struct fam_conn_handlers fc_handlers = {
	.connected = fc_connected,
	.closed = fc_closed,
};

/* Runs the loop until *flag is set or the connection closes. */
static void
fc_run(const bool *flag)
{
	while (!*flag && !fc.closed)
		event_base_loop(fc.base, EVLOOP_ONCE);
}

/* Connects and says hello; prints the session. */
static void
fc_connect(void)
{
	struct fam_conn_opts o = { .kind = fc.kind,
		.op_timeout_ms = fc.timeout_ms, .max_outstanding = 64,
		.inject_bad_imm = fc.bad_imm };
	char *cause = NULL;
	int err;

	o.hello.role = FAM_WIRE_ROLE_HOST;
	o.hello.resume = fc.resume;
	snprintf(o.hello.node, sizeof o.hello.node, "%s", fc.node);
	snprintf(o.secret, sizeof o.secret, "%s", fc.secret);
	err = fam_connect(fc.base, fc.addr, &o, &fc_handlers, NULL, &fc.c,
	    &cause);
	if (err < 0)
		fc_fail("%s", cause);
	fc_run(&fc.open);
	if (!fc.open)
		fc_fail("hello to %s refused or failed: %s", fc.addr,
		    fc_errname(fc.closed_err));
	printf("hello session=%016" PRIx64 " instance=%016" PRIx64
	    " node=%s\n", fc.resp.session, fc.resp.instance, fc.resp.node);
	fflush(stdout);
}

struct fc_call {
	bool done;
	int status;
	uint8_t *out;
	uint32_t len;
};

/* Completion of a call: keeps a copy of the response. */
static void
fc_call_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct fc_call *call = ctx;

	call->status = status;
	call->done = true;
	if (payload != NULL && len > 0) {
		call->out = malloc(len + 1);
		if (call->out == NULL)
			abort();
		memcpy(call->out, payload, len);
		call->out[len] = '\0';
		call->len = len;
	}
}

/* Sends a request and waits for its answer; returns the status. */
static int
fc_call(uint8_t type, const void *payload, uint32_t len, struct fc_call *call)
{
	int err;

	memset(call, 0, sizeof *call);
	err = fam_conn_call(fc.c, type, payload, len, fc_call_done, call);
	if (err < 0)
		return err;
	fc_run(&call->done);
	if (!call->done)
		fc_fail("connection lost: %s", fc_errname(fc.closed_err));
	return call->status;
}

/* Checks a step's status against what was expected of it. */
static bool
fc_check(const char *step, int status)
{
	int want = fc.expect;

	fc.expect = 0;
	if (want != 0) {
		if (status != -want)
			fc_fail("%s: expected %s, got %s", step,
			    fc_errname(want), fc_errname(status));
		if (!fc.quiet)
			printf("%s: %s as expected\n", step, fc_errname(want));
		return false;
	}
	if (status < 0)
		fc_fail("%s: %s", step, fc_errname(status));
	return true;
}

struct fc_xfer {
	bool write;
	uint8_t *buf;
	uint64_t off, len, chunk;
	uint64_t next;             /* offset of the next chunk to send */
	unsigned inflight, depth;
	int status;
	bool done;
	struct fam_mr *mr;         /* -R: the buffer's registration */
};

static void fc_xfer_pump(struct fc_xfer *x);

/* Completion of one chunk of a transfer. */
static void
fc_xfer_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct fc_xfer *x = ctx;

	x->inflight--;
	if (status < 0 && x->status == 0)
		x->status = status;
	fc_xfer_pump(x);
}

/* Keeps depth chunks in flight until the range is done. */
static void
fc_xfer_pump(struct fc_xfer *x)
{
	while (x->status == 0 && x->inflight < x->depth &&
	    x->next < x->len) {
		uint64_t n = x->len - x->next < x->chunk ? x->len - x->next :
		    x->chunk;
		int err;

		if (x->write)
			err = fam_conn_write(fc.c, &fc.cur, x->off + x->next,
			    (uint32_t)n, x->buf + x->next, x->mr, fc_xfer_done,
			    x);
		else
			err = fam_conn_read(fc.c, &fc.cur, x->off + x->next,
			    (uint32_t)n, x->buf + x->next, x->mr, fc_xfer_done,
			    x);
		if (err < 0) {
			x->status = err;
			break;
		}
		x->inflight++;
		x->next += n;
	}
	if (x->inflight == 0 && (x->next >= x->len || x->status != 0))
		x->done = true;
}

/* Reads or writes a range in chunks, depth in flight; returns a status. */
static int
fc_transfer(bool write, uint64_t off, uint64_t len, uint8_t *buf,
    uint64_t chunk, unsigned depth)
{
	struct fc_xfer x = { .write = write, .buf = buf, .off = off,
		.len = len, .chunk = chunk, .depth = depth };

	if (fc.c == NULL)
		fc_fail("not connected");
	if (fc.reg && len > 0) {
		x.mr = fam_mr_register(fc.c, buf, len);
		if (x.mr == NULL)
			fc_fail("cannot register %" PRIu64 " bytes: %s", len,
			    strerror(errno));
	}
	fc_xfer_pump(&x);
	fc_run(&x.done);
	if (!x.done)
		fc_fail("connection lost during a transfer: %s",
		    fc_errname(fc.closed_err));
	if (x.mr != NULL && !fc.closed)
		fam_mr_deregister(x.mr);
	return x.status;
}

/* create SIZE [name=N] [file=P] [shared] [persistent] */
static int
fc_step_create(char **argv, int argc)
{
	struct fam_region_create *req = calloc(1, sizeof *req);
	struct fam_region_info info;
	struct fc_call call;
	uint8_t buf[FAM_REGION_CREATE_MIN + FAM_NAME_MAX + FAM_PATH_MAX];
	size_t len;
	int used = 1, st;

	if (req == NULL)
		abort();
	if (argc < 1)
		fc_fail("create: SIZE missing");
	req->size = fc_size(argv[0]);
	for (; used < argc; used++) {
		if (strncmp(argv[used], "name=", 5) == 0)
			snprintf(req->name, sizeof req->name, "%s",
			    argv[used] + 5);
		else if (strncmp(argv[used], "file=", 5) == 0) {
			snprintf(req->path, sizeof req->path, "%s",
			    argv[used] + 5);
			req->flags |= FAM_RF_FILE;
		} else if (strcmp(argv[used], "shared") == 0)
			req->flags |= FAM_RF_SHARED;
		else if (strcmp(argv[used], "persistent") == 0)
			req->flags |= FAM_RF_PERSISTENT;
		else
			break;
	}
	len = proto_put_region_create(buf, sizeof buf, req);
	free(req);
	if (len == 0)
		fc_fail("create: name or path too long");
	st = fc_call(FAM_MSG_REGION_CREATE, buf, (uint32_t)len, &call);
	if (fc_check("create", st)) {
		if (proto_get_region_info(call.out, call.len, &info) < 0)
			fc_fail("create: malformed answer");
		fc.cur.region = info.region;
		fc.cur.size = info.size;
		fc.cur.rkey = info.rkey;
		fc.cur.addr = info.addr;
		printf("region id=%" PRIu32 " size=%" PRIu64 " flags=%" PRIu32
		    " length=%" PRIu64 "\n", info.region, info.size,
		    info.flags, info.length);
		printf("where key=%016" PRIx64 " mem_instance=%016" PRIx64
		    " mem_region=%" PRIu32 " mem_key=%016" PRIx64 "\n",
		    info.key, info.mem_instance, info.mem_region,
		    info.mem_key);
		if (info.rkey != 0)
			printf("lease addr=%" PRIx64 " rkey=%" PRIx32 "\n",
			    info.addr, info.rkey);
		fflush(stdout);
	}
	free(call.out);
	return used;
}

/* adopt INSTANCE ID KEY [exclusive] */
static int
fc_step_adopt(char **argv, int argc)
{
	struct fam_region_adopt req = { 0 };
	struct fam_region_info info;
	struct fc_call call;
	uint8_t buf[FAM_REGION_ADOPT_LEN];
	int used = 3, st;

	if (argc < 3)
		fc_fail("adopt: INSTANCE ID KEY");
	req.instance = strtoull(argv[0], NULL, 16);
	req.region = (uint32_t)strtoul(argv[1], NULL, 10);
	req.key = strtoull(argv[2], NULL, 16);
	if (argc > 3 && strcmp(argv[3], "exclusive") == 0) {
		req.flags = FAM_ADOPT_EXCLUSIVE;
		used++;
	}
	proto_put_region_adopt(buf, &req);
	st = fc_call(FAM_MSG_REGION_ADOPT, buf, sizeof buf, &call);
	if (fc_check("adopt", st)) {
		if (proto_get_region_info(call.out, call.len, &info) < 0)
			fc_fail("adopt: malformed answer");
		fc.cur.region = info.region;
		fc.cur.size = info.size;
		fc.cur.rkey = info.rkey;
		fc.cur.addr = info.addr;
		printf("region id=%" PRIu32 " size=%" PRIu64 " flags=%" PRIu32
		    "\n", info.region, info.size, info.flags);
		if (info.rkey != 0)
			printf("lease addr=%" PRIx64 " rkey=%" PRIx32 "\n",
			    info.addr, info.rkey);
		fflush(stdout);
	}
	free(call.out);
	return used;
}

/* advise static|random|normal */
static int
fc_step_advise(char **argv, int argc)
{
	uint8_t buf[FAM_REGION_ADVISE_LEN];
	struct fc_call call;
	int st;

	if (argc < 1)
		fc_fail("advise: static, random or normal");
	proto_put_region_advise(buf, fc.cur.region,
	    strcmp(argv[0], "static") == 0 ? FAM_ADVICE_STATIC :
	    strcmp(argv[0], "random") == 0 ? FAM_ADVICE_RANDOM :
	    FAM_ADVICE_NORMAL);
	st = fc_call(FAM_MSG_REGION_ADVISE, buf, sizeof buf, &call);
	if (fc_check("advise", st))
		printf("advised %s\n", argv[0]);
	free(call.out);
	return 1;
}

/* write/read OFF LEN SEED: a pattern out, or a pattern checked. */
static int
fc_step_rw(bool write, char **argv, int argc)
{
	uint64_t off, len;
	unsigned seed;
	uint8_t *buf;
	int st;

	if (argc < 3)
		fc_fail("%s: OFF LEN SEED", write ? "write" : "read");
	off = fc_size(argv[0]);
	len = fc_size(argv[1]);
	seed = (unsigned)fc_size(argv[2]);
	buf = malloc(len > 0 ? len : 1);
	if (buf == NULL)
		fc_fail("no memory for %" PRIu64 " bytes", len);
	if (write)
		for (uint64_t i = 0; i < len; i++)
			buf[i] = fc_pattern(off + i, seed);
	else
		memset(buf, 0xa5, len);
	st = fc_transfer(write, off, len, buf, FC_CHUNK_DEFAULT,
	    FC_DEPTH_DEFAULT);
	if (fc_check(write ? "write" : "read", st)) {
		if (!write)
			for (uint64_t i = 0; i < len; i++)
				if (buf[i] != fc_pattern(off + i, seed))
					fc_fail("read: byte %" PRIu64 " is 0x%02x"
					    ", expected 0x%02x", off + i,
					    buf[i], fc_pattern(off + i, seed));
		if (!fc.quiet)
			printf("%s: %" PRIu64 " bytes at %" PRIu64 " ok\n",
			    write ? "write" : "read", len, off);
	}
	free(buf);
	return 3;
}

/* readfile OFF LEN FILE: read and compare with a local file. */
static int
fc_step_readfile(char **argv, int argc)
{
	uint64_t off, len;
	uint8_t *buf, *want;
	FILE *f;
	size_t got;
	int st;

	if (argc < 3)
		fc_fail("readfile: OFF LEN FILE");
	off = fc_size(argv[0]);
	len = fc_size(argv[1]);
	buf = malloc(len);
	want = calloc(1, len);
	if (buf == NULL || want == NULL)
		abort();
	f = fopen(argv[2], "rb");
	if (f == NULL || fseeko(f, (off_t)off, SEEK_SET) < 0)
		fc_fail("readfile: %s: %s", argv[2], strerror(errno));
	got = fread(want, 1, len, f);
	fclose(f);
	st = fc_transfer(false, off, len, buf, FC_CHUNK_DEFAULT,
	    FC_DEPTH_DEFAULT);
	if (fc_check("readfile", st)) {
		if (memcmp(buf, want, len) != 0)
			fc_fail("readfile: region differs from %s (%zu bytes of "
			    "file, rest zeros)", argv[2], got);
		if (!fc.quiet)
			printf("readfile: %" PRIu64 " bytes match %s\n", len,
			    argv[2]);
	}
	free(buf);
	free(want);
	return 3;
}

/* free [ID] */
static int
fc_step_free(char **argv, int argc)
{
	uint8_t buf[FAM_REGION_FREE_LEN];
	uint32_t id = fc.cur.region;
	struct fc_call call;
	int used = 0, st;

	if (argc > 0 && argv[0][0] >= '0' && argv[0][0] <= '9') {
		id = (uint32_t)fc_size(argv[0]);
		used = 1;
	}
	proto_put_region_free(buf, id);
	st = fc_call(FAM_MSG_REGION_FREE, buf, sizeof buf, &call);
	if (fc_check("free", st) && !fc.quiet)
		printf("free: region %" PRIu32 " freed\n", id);
	free(call.out);
	return used;
}

/* lease: a new lease on the current region for this connection. */
static void
fc_step_lease(void)
{
	uint8_t buf[FAM_REGION_LEASE_LEN];
	struct fam_region_info info;
	struct fc_call call;
	int st;

	proto_put_region_free(buf, fc.cur.region);
	st = fc_call(FAM_MSG_REGION_LEASE, buf, sizeof buf, &call);
	if (fc_check("lease", st)) {
		if (proto_get_region_info(call.out, call.len, &info) < 0)
			fc_fail("lease: malformed answer");
		fc.cur.rkey = info.rkey;
		fc.cur.addr = info.addr;
		printf("lease addr=%" PRIx64 " rkey=%" PRIx32 "\n", info.addr,
		    info.rkey);
		fflush(stdout);
	}
	free(call.out);
}

/* stats: the memory node's counters. */
static void
fc_step_stats(void)
{
	struct fc_call call;
	int st = fc_call(FAM_MSG_STATS, NULL, 0, &call);

	if (fc_check("stats", st))
		printf("%s\n", call.out != NULL ? (char *)call.out : "{}");
	free(call.out);
}

/* A signal during hold. */
static void
fc_hold_signal(evutil_socket_t sig, short what, void *arg)
{
	fc.held_signal = (int)sig;
}

/* hold [SECONDS]: keeps the session until a signal. */
static int
fc_step_hold(char **argv, int argc)
{
	struct event *sigs[3], *timer;
	static const int signums[3] = { SIGTERM, SIGINT, SIGUSR1 };
	uint64_t secs = 60;
	struct timeval tv;
	int used = 0;

	if (argc > 0 && argv[0][0] >= '0' && argv[0][0] <= '9') {
		secs = fc_size(argv[0]);
		used = 1;
	}
	for (int i = 0; i < 3; i++) {
		sigs[i] = evsignal_new(fc.base, signums[i], fc_hold_signal,
		    NULL);
		evsignal_add(sigs[i], NULL);
	}
	timer = evtimer_new(fc.base, fc_hold_signal, NULL);
	tv.tv_sec = (time_t)secs;
	tv.tv_usec = 0;
	evtimer_add(timer, &tv);
	fc.held_signal = 0;
	printf("holding\n");
	fflush(stdout);
	while (fc.held_signal == 0 && !fc.closed)
		event_base_loop(fc.base, EVLOOP_ONCE);
	for (int i = 0; i < 3; i++)
		event_free(sigs[i]);
	event_free(timer);
	if (fc.closed)
		fc_fail("hold: the connection closed: %s",
		    fc_errname(fc.closed_err));
	if (fc.held_signal == SIGTERM || fc.held_signal == SIGINT)
		exit(0);
	if (!fc.quiet)
		printf("hold: going on\n");
	return used;
}

/* rw SIZE [CHUNK [DEPTH]]: a whole round trip with figures. */
static int
fc_step_roundtrip(char **argv, int argc)
{
	uint64_t size, chunk = 64 << 10, t0, t1, t2;
	unsigned depth = FC_DEPTH_DEFAULT;
	char create[32];
	char *cargv[1] = { create };
	uint8_t *buf;
	int used = 1, st;

	if (argc < 1)
		fc_fail("rw: SIZE missing");
	size = fc_size(argv[0]);
	if (argc > 1 && argv[1][0] >= '0' && argv[1][0] <= '9') {
		chunk = fc_size(argv[1]);
		used++;
		if (argc > 2 && argv[2][0] >= '0' && argv[2][0] <= '9') {
			depth = (unsigned)fc_size(argv[2]);
			used++;
		}
	}
	if (chunk == 0 || chunk > FAM_RW_MAX || depth == 0)
		fc_fail("rw: CHUNK must be 1 to %u, DEPTH at least 1",
		    FAM_RW_MAX);
	snprintf(create, sizeof create, "%" PRIu64, size);
	fc_step_create(cargv, 1);
	buf = malloc(size);
	if (buf == NULL)
		abort();
	for (uint64_t i = 0; i < size; i++)
		buf[i] = fc_pattern(i, 7);
	t0 = mono_ns();
	st = fc_transfer(true, 0, size, buf, chunk, depth);
	if (st < 0)
		fc_fail("rw: write: %s", fc_errname(st));
	t1 = mono_ns();
	memset(buf, 0, size);
	st = fc_transfer(false, 0, size, buf, chunk, depth);
	if (st < 0)
		fc_fail("rw: read: %s", fc_errname(st));
	t2 = mono_ns();
	for (uint64_t i = 0; i < size; i++)
		if (buf[i] != fc_pattern(i, 7))
			fc_fail("rw: byte %" PRIu64 " differs after the round "
			    "trip", i);
	free(buf);
	fc_step_free(NULL, 0);
	printf("rw: %" PRIu64 " bytes in chunks of %" PRIu64 ", %u in flight: "
	    "write %.1f MiB/s, read %.1f MiB/s, verified\n", size, chunk,
	    depth, (double)size / 1048576.0 / ((double)(t1 - t0) / 1e9),
	    (double)size / 1048576.0 / ((double)(t2 - t1) / 1e9));
	return used;
}

/* Runs the steps on one connection. */
static int
fc_steps(char **argv, int argc)
{
	fc_connect();
	for (int i = 0; i < argc;) {
		const char *step = argv[i++];

		if (strcmp(step, "create") == 0)
			i += fc_step_create(argv + i, argc - i);
		else if (strcmp(step, "use") == 0) {
			if (argc - i < 2)
				fc_fail("use: ID SIZE");
			fc.cur.region = (uint32_t)fc_size(argv[i]);
			fc.cur.size = fc_size(argv[i + 1]);
			fc.cur.addr = 0;
			fc.cur.rkey = 0;
			i += 2;
			if (i < argc && strncmp(argv[i], "lease=", 6) == 0) {
				if (sscanf(argv[i] + 6, "%" SCNx64 ":%" SCNx32,
				    &fc.cur.addr, &fc.cur.rkey) != 2)
					fc_fail("use: lease=ADDR:RKEY in hex");
				i++;
			}
		} else if (strcmp(step, "lease") == 0)
			fc_step_lease();
		else if (strcmp(step, "adopt") == 0)
			i += fc_step_adopt(argv + i, argc - i);
		else if (strcmp(step, "advise") == 0)
			i += fc_step_advise(argv + i, argc - i);
		else if (strcmp(step, "write") == 0)
			i += fc_step_rw(true, argv + i, argc - i);
		else if (strcmp(step, "read") == 0)
			i += fc_step_rw(false, argv + i, argc - i);
		else if (strcmp(step, "readfile") == 0)
			i += fc_step_readfile(argv + i, argc - i);
		else if (strcmp(step, "free") == 0)
			i += fc_step_free(argv + i, argc - i);
		else if (strcmp(step, "stats") == 0)
			fc_step_stats();
		else if (strcmp(step, "expect") == 0) {
			if (i >= argc || (fc.expect = fc_errno(argv[i])) == 0)
				fc_fail("expect: an errno name such as ENOSPC");
			i++;
		} else if (strcmp(step, "hold") == 0)
			i += fc_step_hold(argv + i, argc - i);
		else if (strcmp(step, "rw") == 0)
			i += fc_step_roundtrip(argv + i, argc - i);
		else {
			fc_usage(stderr);
			return FAMD_EX_USAGE;
		}
	}
	if (fc.expect != 0)
		fc_fail("expect %s: no step followed", fc_errname(fc.expect));
	if (fc.c != NULL)
		fam_conn_close(fc.c);
	while (!fc.closed)
		event_base_loop(fc.base, EVLOOP_ONCE);
	return 0;
}

/* ---- raw attacks --------------------------------------------------------- */

/* Connects a blocking socket with a receive timeout. */
static int
raw_open(void)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	struct timeval tv = { FC_RAW_TIMEOUT_MS / 1000, 0 };
	int one = 1;
	char host[256];
	const char *colon = strrchr(fc.addr, ':');
	int fd;

	if (colon == NULL || (size_t)(colon - fc.addr) >= sizeof host)
		fc_fail("bad address %s", fc.addr);
	memcpy(host, fc.addr, (size_t)(colon - fc.addr));
	host[colon - fc.addr] = '\0';
	if (host[0] == '[') {
		memmove(host, host + 1, strlen(host));
		host[strcspn(host, "]")] = '\0';
	}
	if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
		fc_fail("cannot resolve %s", fc.addr);
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0)
		fc_fail("connect %s: %s", fc.addr, strerror(errno));
	freeaddrinfo(res);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return fd;
}

/* Sends all of buf. */
static void
raw_write(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fc_fail("send: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

/* Sends one frame: a header as given, then plen bytes of payload. */
static void
raw_frame(int fd, uint8_t version, uint8_t type, uint16_t flags, uint64_t id,
    uint32_t len, const void *payload, size_t plen)
{
	struct fam_hdr h = { .magic = FAM_PROTO_MAGIC, .version = version,
		.type = type, .flags = flags, .len = len, .id = id };
	uint8_t buf[FAM_PROTO_HDR_LEN];

	/* A whole WRITE carries the CRC32C of its data, as a client's does. */
	if (type == FAM_MSG_WRITE && !(flags & FAM_F_RESPONSE) &&
	    plen == len && len > FAM_WRITE_HDR_LEN)
		h.crc = proto_crc32c(0, (const uint8_t *)payload +
		    FAM_WRITE_HDR_LEN, len - FAM_WRITE_HDR_LEN);
	proto_put_hdr(buf, &h);
	raw_write(fd, buf, sizeof buf);
	if (plen > 0)
		raw_write(fd, payload, plen);
}

/*
 * Reads exactly len bytes; returns len, or fewer when the peer closed (0
 * on a reset), or fails on a timeout.
 */
static size_t
raw_read(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = recv(fd, (uint8_t *)buf + got, len - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			fc_fail("no answer within %d ms", FC_RAW_TIMEOUT_MS);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got;
}

/* Reads one response and checks its id and status; returns its length. */
static uint32_t
raw_expect(int fd, uint64_t id, int status, void *payload, size_t cap)
{
	uint8_t buf[FAM_PROTO_HDR_LEN];
	struct fam_hdr h;
	uint8_t *tmp;

	if (raw_read(fd, buf, sizeof buf) != sizeof buf)
		fc_fail("expected a response with status %s, the connection "
		    "closed", fc_errname(status));
	proto_get_hdr(buf, &h);
	if (proto_check_hdr(&h, 0) < 0 || !(h.flags & FAM_F_RESPONSE))
		fc_fail("malformed response (type %u, flags 0x%x, len %u)",
		    h.type, h.flags, h.len);
	if (h.id != id)
		fc_fail("response to id %" PRIu64 ", expected %" PRIu64, h.id,
		    id);
	if (h.status != status)
		fc_fail("status %s, expected %s", fc_errname(h.status),
		    fc_errname(status));
	tmp = malloc(h.len + 1);
	if (tmp == NULL || raw_read(fd, tmp, h.len) != h.len)
		fc_fail("response payload cut short");
	if (payload != NULL)
		memcpy(payload, tmp, h.len < cap ? h.len : cap);
	free(tmp);
	return h.len;
}

/* Expects the daemon to close the connection without saying more. */
static void
raw_expect_close(int fd)
{
	uint8_t b;
	ssize_t n;

	n = recv(fd, &b, 1, 0);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		fc_fail("the connection stayed open");
	if (n > 0)
		fc_fail("got data where the daemon should have closed");
}

/*
 * Says hello as a client does (HELLO, the challenge, AUTH with the proof
 * of secret as given); checks the status of the answer that ends it (a
 * refused HELLO, or the AUTH's).
 */
static void
raw_hello_with(int fd, const char *secret, int status)
{
	struct fam_hello m = { .role = FAM_WIRE_ROLE_HOST };
	struct fam_challenge ch;
	struct fam_auth a;
	uint8_t buf[FAM_AUTH_RESP_LEN], key[FAM_KEY_LEN], proof[FAM_PROOF_LEN];
	uint32_t len;

	snprintf(m.node, sizeof m.node, "%s", fc.node);
	if (proto_auth_nonce(m.nonce) < 0)
		fc_fail("no random nonce");
	proto_put_hello(buf, &m);
	raw_frame(fd, FAM_PROTO_VERSION, FAM_MSG_HELLO, 0, 1, FAM_HELLO_LEN,
	    buf, FAM_HELLO_LEN);
	if (status != 0 && status != EACCES) {
		raw_expect(fd, 1, status, NULL, 0);
		return;
	}
	len = raw_expect(fd, 1, 0, buf, sizeof buf);
	if (proto_get_challenge(buf, len, &ch) < 0)
		fc_fail("malformed challenge");
	if (proto_auth_secret_key(secret, key) < 0 ||
	    proto_auth_derive(&a, key, &m, &ch) < 0 ||
	    proto_auth_client_proof(&a, 0, proof) < 0)
		fc_fail("cannot compute the proof");
	raw_frame(fd, FAM_PROTO_VERSION, FAM_MSG_AUTH, 0, 1, FAM_AUTH_LEN,
	    proof, sizeof proof);
	raw_expect(fd, 1, status, NULL, 0);
}

/* Opens a connection and says hello with the right secret. */
static int
raw_session(void)
{
	int fd = raw_open();

	raw_hello_with(fd, fc.secret, 0);
	return fd;
}

/* Checks that the connection still answers (a STATS request). */
static void
raw_alive(int fd, uint64_t id)
{
	raw_frame(fd, FAM_PROTO_VERSION, FAM_MSG_STATS, 0, id, 0, NULL, 0);
	raw_expect(fd, id, 0, NULL, 0);
}

/* Creates a region on a raw connection; returns its id (status 0). */
static uint32_t
raw_create(int fd, uint64_t id, uint64_t size, uint32_t flags,
    const char *name, int status)
{
	struct fam_region_create req = { .size = size, .flags = flags };
	struct fam_region_info info = { 0 };
	uint8_t buf[FAM_REGION_CREATE_MIN + FAM_NAME_MAX];
	uint8_t out[FAM_REGION_INFO_LEN];
	size_t len;

	snprintf(req.name, sizeof req.name, "%s", name);
	len = proto_put_region_create(buf, sizeof buf, &req);
	raw_frame(fd, FAM_PROTO_VERSION, FAM_MSG_REGION_CREATE, 0, id,
	    (uint32_t)len, buf, len);
	if (raw_expect(fd, id, status, out, sizeof out) > 0 &&
	    proto_get_region_info(out, FAM_REGION_INFO_LEN, &info) < 0)
		fc_fail("malformed region info");
	return info.region;
}

/* Sends a REGION_ADOPT of region with key and checks its status. */
static void
raw_adopt(int fd, uint64_t id, uint32_t region, uint64_t key, int status)
{
	struct fam_region_adopt m = { .region = region, .key = key };
	uint8_t buf[FAM_REGION_ADOPT_LEN], out[FAM_REGION_INFO_LEN];

	proto_put_region_adopt(buf, &m);
	raw_frame(fd, FAM_PROTO_VERSION, FAM_MSG_REGION_ADOPT, 0, id,
	    sizeof buf, buf, sizeof buf);
	raw_expect(fd, id, status, out, sizeof out);
}

/* Sends a READ and checks its status (data, if any, is read and dropped). */
static void
raw_read_req(int fd, uint64_t id, uint32_t region, uint64_t off, uint32_t len,
    int status)
{
	struct fam_rw m = { .region = region, .len = len, .offset = off };
	uint8_t buf[FAM_READ_LEN];

	proto_put_read(buf, &m);
	raw_frame(fd, FAM_PROTO_VERSION, FAM_MSG_READ, 0, id, FAM_READ_LEN, buf,
	    sizeof buf);
	if (raw_expect(fd, id, status, NULL, 0) != (status == 0 ? len : 0))
		fc_fail("read answered with the wrong length");
}

/* Sends a WRITE of len bytes and checks its status. */
static void
raw_write_req(int fd, uint64_t id, uint32_t region, uint64_t off,
    uint32_t len, int status)
{
	struct fam_rw m = { .region = region, .len = len, .offset = off };
	uint8_t hdr[FAM_WRITE_HDR_LEN];
	uint8_t *data = calloc(1, len);

	if (data == NULL)
		abort();
	proto_put_write_hdr(hdr, &m);
	raw_frame(fd, FAM_PROTO_VERSION, FAM_MSG_WRITE, 0, id,
	    FAM_WRITE_HDR_LEN + len, hdr, sizeof hdr);
	raw_write(fd, data, len);
	free(data);
	raw_expect(fd, id, status, NULL, 0);
}

/* Reads a size from the environment (fc_size's suffixes), or def. */
static uint64_t
fc_env_size(const char *name, uint64_t def)
{
	const char *v = getenv(name);

	return v == NULL || *v == '\0' ? def : fc_size(v);
}

/*
 * flood: READs sent as fast as the daemon takes them and their answers
 * left unread, as a client that floods would; then, on a line from stdin,
 * every answer read and checked (each id once, full length, zeros).
 * Prints what was sent and what was answered; fails on a wrong answer.
 */
static int
fc_flood(void)
{
	uint64_t n = fc_env_size("FLOOD_N", 4096);
	uint64_t len = fc_env_size("FLOOD_LEN", 256 << 10);
	struct timeval tv = { 2, 0 };
	uint8_t hbuf[FAM_PROTO_HDR_LEN], rbuf[FAM_READ_LEN];
	uint8_t *seen, *data;
	uint64_t sent = 0, answered = 0;
	char line[64];
	bool closed = false;
	uint32_t r;
	int fd;

	if (n == 0 || n > (1u << 20) || len == 0 || len > (16u << 20))
		fc_fail("FLOOD_N or FLOOD_LEN out of range");
	seen = calloc(n, 1);
	data = malloc(len);
	if (seen == NULL || data == NULL)
		abort();
	fd = raw_session();
	r = raw_create(fd, 2, len, 0, "", 0);
	/* A send that cannot go on for 2 s: the daemon stopped taking. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	for (sent = 0; sent < n; sent++) {
		struct fam_rw m = { .region = r, .len = (uint32_t)len };
		struct fam_hdr h = { .magic = FAM_PROTO_MAGIC,
			.version = FAM_PROTO_VERSION, .type = FAM_MSG_READ,
			.len = FAM_READ_LEN, .id = 100 + sent };
		uint8_t frame[sizeof hbuf + sizeof rbuf];
		size_t off = 0;

		proto_put_hdr(frame, &h);
		proto_put_read(frame + sizeof hbuf, &m);
		while (off < sizeof frame) {
			ssize_t w = send(fd, frame + off, sizeof frame - off,
			    MSG_NOSIGNAL);

			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
			    off == 0)
				goto blocked;
			if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				continue; /* never leave half a frame */
			if (w < 0)
				fc_fail("send: %s", strerror(errno));
			off += (size_t)w;
		}
	}
blocked:
	printf("flood: %" PRIu64 " requests of %" PRIu64 " bytes sent%s, "
	    "answers unread\n", sent, len, sent < n ? " (then blocked)" : "");
	fflush(stdout);
	if (fgets(line, sizeof line, stdin) == NULL)
		line[0] = '\0';
	while (answered < sent) {
		struct fam_hdr h;
		uint64_t k;

		if (raw_read(fd, hbuf, sizeof hbuf) != sizeof hbuf) {
			closed = true;
			break;
		}
		proto_get_hdr(hbuf, &h);
		if (proto_check_hdr(&h, 0) < 0 || !(h.flags & FAM_F_RESPONSE))
			fc_fail("malformed answer");
		k = h.id - 100;
		if (h.id < 100 || k >= sent || seen[k])
			fc_fail("answer to id %" PRIu64 ", not asked or twice",
			    h.id);
		seen[k] = 1;
		if (h.status != 0 || h.len != len)
			fc_fail("answer %" PRIu64 ": status %s, %u bytes", h.id,
			    fc_errname(h.status), h.len);
		if (raw_read(fd, data, len) != len) {
			closed = true;
			break;
		}
		for (uint64_t i = 0; i < len; i++)
			if (data[i] != 0)
				fc_fail("answer %" PRIu64 ": wrong byte at %"
				    PRIu64, h.id, i);
		answered++;
	}
	printf("flood: %" PRIu64 " of %" PRIu64 " answered%s\n", answered,
	    sent, closed ? "; the daemon closed the connection" : "");
	free(seen);
	free(data);
	close(fd);
	return 0;
}

/* Runs one attack; exits 1 if the daemon did not behave as specified. */
static int
fc_attack(const char *name)
{
	char uniq[FAM_NAME_MAX + 1];
	int fd, fd2;

	snprintf(uniq, sizeof uniq, "famclient-%ld-%s", (long)getpid(), name);
	if (strcmp(name, "bad-magic") == 0) {
		const char *get = "GET / HTTP/1.1\r\nHost: memory\r\n\r\n";

		fd = raw_open();
		raw_write(fd, get, strlen(get));
		raw_expect_close(fd);
	} else if (strcmp(name, "bad-version") == 0) {
		uint8_t body[FAM_HELLO_LEN] = { FAM_WIRE_ROLE_HOST };

		fd = raw_open();
		raw_frame(fd, FAM_PROTO_VERSION + 1, FAM_MSG_HELLO, 0, 1,
		    FAM_HELLO_LEN, body, sizeof body);
		raw_expect(fd, 1, EPROTONOSUPPORT, NULL, 0);
		raw_expect_close(fd);
	} else if (strcmp(name, "truncated") == 0) {
		fd = raw_session();
		raw_write(fd, "FAMD\x01\x06", 6);
		shutdown(fd, SHUT_WR);
		raw_expect_close(fd);
	} else if (strcmp(name, "huge-length") == 0) {
		fd = raw_session();
		raw_frame(fd, FAM_PROTO_VERSION, FAM_MSG_WRITE, 0, 2,
		    0xfffffff0u, NULL, 0);
		raw_expect(fd, 2, EMSGSIZE, NULL, 0);
		raw_expect_close(fd);
	} else if (strcmp(name, "unknown-type") == 0) {
		fd = raw_session();
		raw_frame(fd, FAM_PROTO_VERSION, 42, 0, 2, 0, NULL, 0);
		raw_expect_close(fd);
	} else if (strcmp(name, "bad-flags") == 0) {
		fd = raw_session();
		raw_frame(fd, FAM_PROTO_VERSION, FAM_MSG_STATS, 0x0100, 2, 0,
		    NULL, 0);
		raw_expect_close(fd);
	} else if (strcmp(name, "before-hello") == 0) {
		fd = raw_open();
		raw_read_req(fd, 5, 1, 0, 4096, EACCES);
		raw_expect_close(fd);
	} else if (strcmp(name, "bad-secret") == 0) {
		char wrong[FAM_SECRET_MAX + 1];
		size_t n = strlen(fc.secret);

		/* The right secret with its last character changed. */
		memcpy(wrong, fc.secret, sizeof wrong);
		if (n == 0)
			snprintf(wrong, sizeof wrong, "guess");
		else
			wrong[n - 1] = wrong[n - 1] == 'x' ? 'y' : 'x';
		fd = raw_open();
		raw_hello_with(fd, wrong, EACCES);
		raw_expect_close(fd);
	} else if (strcmp(name, "reserved-set") == 0) {
		uint8_t body[FAM_REGION_FREE_LEN];

		fd = raw_session();
		proto_put_region_free(body, 1);
		body[5] = 0xff;
		raw_frame(fd, FAM_PROTO_VERSION, FAM_MSG_REGION_FREE, 0, 2,
		    sizeof body, body, sizeof body);
		raw_expect(fd, 2, EPROTO, NULL, 0);
		raw_expect_close(fd);
	} else if (strcmp(name, "bad-create") == 0) {
		struct fam_region_create req = { .size = 4096 };
		uint8_t body[FAM_REGION_CREATE_MIN + 3];

		fd = raw_session();
		snprintf(req.name, sizeof req.name, "abc");
		proto_put_region_create(body, sizeof body, &req);
		body[13] = 10; /* name_len 10, 3 bytes follow */
		raw_frame(fd, FAM_PROTO_VERSION, FAM_MSG_REGION_CREATE, 0, 2,
		    sizeof body, body, sizeof body);
		raw_expect(fd, 2, EPROTO, NULL, 0);
		raw_expect_close(fd);
	} else if (strcmp(name, "second-hello") == 0) {
		fd = raw_session();
		raw_hello_with(fd, fc.secret, EPROTO);
		raw_expect_close(fd);
	} else if (strcmp(name, "response-frame") == 0) {
		fd = raw_session();
		raw_frame(fd, FAM_PROTO_VERSION, FAM_MSG_STATS, FAM_F_RESPONSE,
		    12345, 0, NULL, 0);
		raw_expect_close(fd);
	} else if (strcmp(name, "unknown-region") == 0) {
		fd = raw_session();
		raw_read_req(fd, 2, 0xfffffff0u, 0, 4096, ENOENT);
		raw_write_req(fd, 3, 0xfffffff0u, 0, 4096, ENOENT);
		raw_alive(fd, 4);
	} else if (strcmp(name, "past-end") == 0) {
		uint32_t r;

		fd = raw_session();
		r = raw_create(fd, 2, 4096, 0, "", 0);
		raw_read_req(fd, 3, r, 4096, 4096, ERANGE);
		raw_read_req(fd, 4, r, 0, 8192, ERANGE);
		raw_read_req(fd, 5, r, UINT64_MAX - 4095, 8192, ERANGE);
		raw_write_req(fd, 6, r, 2048, 4096, ERANGE);
		raw_read_req(fd, 7, r, 0, 4096, 0);
		raw_alive(fd, 8);
	} else if (strcmp(name, "shared-write") == 0) {
		uint32_t r;

		fd = raw_session();
		r = raw_create(fd, 2, 8192, FAM_RF_SHARED, uniq, 0);
		raw_write_req(fd, 3, r, 0, 4096, EROFS);
		raw_read_req(fd, 4, r, 0, 4096, 0);
		raw_alive(fd, 5);
	} else if (strcmp(name, "dup-writer") == 0) {
		fd = raw_session();
		raw_create(fd, 2, 4096, 0, uniq, 0);
		fd2 = raw_session();
		raw_create(fd2, 2, 4096, 0, uniq, EBUSY);
		raw_create(fd2, 3, 4096, FAM_RF_SHARED, uniq, EBUSY);
		raw_alive(fd2, 4);
		raw_alive(fd, 3);
		close(fd2);
	} else if (strcmp(name, "adopt-guess") == 0) {
		uint32_t r;

		/* Guessing a region's key: refused, then cut off. */
		fd = raw_session();
		r = raw_create(fd, 2, 4096, 0, "", 0);
		for (unsigned i = 0; i < FAM_EACCES_MAX; i++)
			raw_adopt(fd, 3 + i, r, 0x1000 + i, EACCES);
		raw_expect_close(fd);
	} else if (strcmp(name, "flood") == 0) {
		return fc_flood();
	} else if (strcmp(name, "foreign-region") == 0) {
		uint8_t body[FAM_REGION_FREE_LEN];
		uint32_t r;

		fd = raw_session();
		r = raw_create(fd, 2, 4096, 0, "", 0);
		fd2 = raw_session();
		raw_read_req(fd2, 2, r, 0, 4096, ENOENT);
		raw_write_req(fd2, 3, r, 0, 4096, ENOENT);
		proto_put_region_free(body, r);
		raw_frame(fd2, FAM_PROTO_VERSION, FAM_MSG_REGION_FREE, 0, 4,
		    sizeof body, body, sizeof body);
		raw_expect(fd2, 4, ENOENT, NULL, 0);
		raw_read_req(fd, 3, r, 0, 4096, 0);
		close(fd2);
	} else {
		fc_usage(stderr);
		return FAMD_EX_USAGE;
	}
	close(fd);
	printf("attack %s: the daemon behaved as specified\n", name);
	return 0;
}

int
main(int argc, char **argv)
{
	char *cause = NULL;
	int ch, rc;

	signal(SIGPIPE, SIG_IGN);
	log_open(LOG_DEST_STDERR, LOG_WARNING);
	snprintf(fc.node, sizeof fc.node, "famclient");
	/* Options may come anywhere: no step starts with '-'. */
	while ((ch = getopt(argc, argv, "Bhn:qRr:s:S:t:T:")) != -1) {
		switch (ch) {
		case 'B':
			fc.bad_imm = true;
			break;
		case 'R':
			fc.reg = true;
			break;
		case 'T':
			if (strcmp(optarg, "verbs") == 0)
				fc.kind = FAM_TP_VERBS;
			else if (strcmp(optarg, "tcp") == 0)
				fc.kind = FAM_TP_TCP;
			else {
				fc_usage(stderr);
				return FAMD_EX_USAGE;
			}
			break;
		case 'n':
			snprintf(fc.node, sizeof fc.node, "%s", optarg);
			break;
		case 'q':
			fc.quiet = true;
			break;
		case 'r':
			fc.resume = strtoull(optarg, NULL, 16);
			break;
		case 's':
			if (strlen(optarg) > FAM_SECRET_MAX) {
				fprintf(stderr, "famclient: secret too long\n");
				return FAMD_EX_USAGE;
			}
			snprintf(fc.secret, sizeof fc.secret, "%s", optarg);
			break;
		case 'S':
			if (secret_load(optarg, fc.secret, &cause) < 0) {
				fprintf(stderr, "famclient: %s\n", cause);
				return FAMD_EX_USAGE;
			}
			break;
		case 't':
			fc.timeout_ms = (uint32_t)atoi(optarg);
			break;
		case 'h':
			fc_usage(stdout);
			return 0;
		default:
			fc_usage(stderr);
			return FAMD_EX_USAGE;
		}
	}
	if (argc - optind < 2) {
		fc_usage(stderr);
		return FAMD_EX_USAGE;
	}
	fc.addr = argv[optind++];
	if (strcmp(argv[optind], "attack") == 0) {
		if (argc - optind != 2) {
			fc_usage(stderr);
			return FAMD_EX_USAGE;
		}
		return fc_attack(argv[optind + 1]);
	}
	fc.base = event_base_new();
	if (fc.base == NULL)
		fc_fail("libevent");
	rc = fc_steps(argv + optind, argc - optind);
	event_base_free(fc.base);
	return rc;
}
