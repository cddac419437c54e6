/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fetchbench.c - chunk fetch latency and bandwidth against a memory famd,
 * the way a host famd fetches: fam_conn_read() of one chunk into staging
 * buffers registered on the connection (with verbs: one RDMA READ per chunk
 * against the region's lease, straight into the staging buffer).
 *
 *   fetchbench [-T tcp|verbs] [-s secret] [-c CHUNK] [-S SIZE] [-n LAT]
 *              [-N BW] [-d DEPTH] host:port
 *
 * It creates a region of SIZE (default 16M), fills it with a pattern, then
 * measures LAT single reads (default 1000; one in flight: latency) and BW
 * reads with DEPTH in flight (default 2000 and 16: bandwidth), checks the
 * data of every read, frees the region and prints two lines:
 *   fetchbench lat CHUNK: n=LAT min=.. avg=.. p50=.. p99=.. us
 *   fetchbench bw CHUNK depth DEPTH: n=BW MiB/s=..
 * Exit status 0, or 1 on an error or wrong data.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "core/famd.h"
#include "transport/transport.h"

static struct {
	struct event_base *base;
	struct fam_conn *c;
	struct fam_remote r;
	bool open, closed;
	int closed_err;
	uint32_t chunk;
	uint64_t size;
	unsigned depth;
	uint8_t *staging;
	struct fam_mr *mr;
	/* the run in progress */
	unsigned inflight, issued, done, want;
	int status;
	uint64_t next_off;
	uint64_t *lat;
	unsigned *slots, nslots;  /* free staging slots */
	bool writing;
	uint8_t *src;
} fb = { .chunk = 65536, .size = 16u << 20, .depth = 16 };

/* Prints a failure and exits 1. */
static void __attribute__((noreturn, format(printf, 1, 2)))
fb_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fetchbench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

/* The byte of the pattern at offset off. */
static uint8_t
fb_pattern(uint64_t off)
{
	return (uint8_t)((off * 2654435761u) >> 11);
}

/* Parses a size with an optional K, M or G suffix. */
static uint64_t
fb_size(const char *s)
{
	char *end;
	uint64_t v = strtoull(s, &end, 10);

	switch (*end) {
	case 'k': case 'K': return v << 10;
	case 'm': case 'M': return v << 20;
	case 'g': case 'G': return v << 30;
	default: return v;
	}
}

static void
fb_connected(struct fam_conn *c, const struct fam_hello_resp *resp, void *arg)
{
	fb.open = true;
}

static void
fb_closed(struct fam_conn *c, int err, void *arg)
{
	fb.closed = true;
	fb.closed_err = err;
	fb.c = NULL;
	fb.mr = NULL;
}

static const struct fam_conn_handlers fb_handlers = {
	.connected = fb_connected,
	.closed = fb_closed,
};

/* Runs the loop until *flag or the connection closes. */
static void
fb_run(bool *flag)
{
	while (!*flag && !fb.closed)
		event_base_loop(fb.base, EVLOOP_ONCE);
	if (!*flag)
		fb_fail("connection lost: %s", strerror(-fb.closed_err));
}

struct fb_call {
	bool done;
	int status;
	uint8_t out[FAM_REGION_INFO_LEN];
	uint32_t len;
};

/* Completion of a call. */
static void
fb_call_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct fb_call *call = ctx;

	call->done = true;
	call->status = status;
	if (payload != NULL && len <= sizeof call->out) {
		memcpy(call->out, payload, len);
		call->len = len;
	}
}

static void fb_pump(void);

/* Completion of one chunk read or write; ctx is its staging slot. */
static void
fb_rw_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	uint64_t slot = (uint64_t)(uintptr_t)ctx & 0xffff;
	uint64_t off = (uint64_t)(uintptr_t)ctx >> 16;

	fb.inflight--;
	fb.done++;
	fb.slots[fb.nslots++] = (unsigned)slot;
	if (status < 0 && fb.status == 0)
		fb.status = status;
	if (status == 0 && !fb.writing) {
		const uint8_t *p = fb.staging + slot * fb.chunk;

		for (uint32_t i = 0; i < fb.chunk; i += 512)
			if (p[i] != fb_pattern(off + i))
				fb_fail("wrong byte at offset %" PRIu64, off + i);
	}
	fb_pump();
}

/* Keeps fb.depth operations in flight until fb.want were issued. */
static void
fb_pump(void)
{
	while (fb.status == 0 && fb.inflight < fb.depth && fb.issued < fb.want) {
		uint64_t off = fb.next_off, slot = fb.slots[--fb.nslots];
		void *ctx = (void *)(uintptr_t)(off << 16 | slot);
		int err;

		fb.next_off = (fb.next_off + fb.chunk) % fb.size;
		if (fb.writing)
			err = fam_conn_write(fb.c, &fb.r, off, fb.chunk,
			    fb.src + off, NULL, fb_rw_done, ctx);
		else
			err = fam_conn_read(fb.c, &fb.r, off, fb.chunk,
			    fb.staging + slot * fb.chunk, fb.mr, fb_rw_done,
			    ctx);
		if (err < 0)
			fb_fail("%s: %s", fb.writing ? "write" : "read",
			    strerror(-err));
		fb.issued++;
		fb.inflight++;
	}
}

/* Issues n operations, depth in flight; returns the nanoseconds taken. */
static uint64_t
fb_batch(unsigned n, unsigned depth, bool writing)
{
	uint64_t t0 = mono_ns();

	fb.writing = writing;
	fb.depth = depth;
	fb.want = n;
	fb.issued = fb.done = fb.inflight = 0;
	fb.status = 0;
	fb.nslots = 0;
	for (unsigned i = depth; i-- > 0;)
		fb.slots[fb.nslots++] = i;
	fb_pump();
	while (fb.done < n && !fb.closed)
		event_base_loop(fb.base, EVLOOP_ONCE);
	if (fb.done < n || fb.status != 0)
		fb_fail("%s: %s", writing ? "write" : "read",
		    strerror(fb.status != 0 ? -fb.status : -fb.closed_err));
	return mono_ns() - t0;
}

static int
fb_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	struct fam_conn_opts o = { .kind = FAM_TP_VERBS, .op_timeout_ms = 30000,
		.max_outstanding = 256 };
	struct fam_region_create req = { 0 };
	struct fam_region_info info;
	uint8_t buf[FAM_REGION_CREATE_MIN];
	unsigned nlat = 1000, nbw = 2000, depth = 16;
	struct fb_call call = { 0 };
	char *cause = NULL;
	uint64_t t, sum = 0;
	int ch;

	while ((ch = getopt(argc, argv, "c:d:n:N:s:S:T:")) != -1) {
		switch (ch) {
		case 'c': fb.chunk = (uint32_t)fb_size(optarg); break;
		case 'd': depth = (unsigned)atoi(optarg); break;
		case 'n': nlat = (unsigned)atoi(optarg); break;
		case 'N': nbw = (unsigned)atoi(optarg); break;
		case 's': snprintf(o.secret, sizeof o.secret, "%s",
		    optarg); break;
		case 'S': fb.size = fb_size(optarg); break;
		case 'T': o.kind = strcmp(optarg, "tcp") == 0 ? FAM_TP_TCP :
		    FAM_TP_VERBS; break;
		default:
			fprintf(stderr, "usage: fetchbench [-T tcp|verbs] [-s secret] "
			    "[-c CHUNK] [-S SIZE] [-n LAT] [-N BW] [-d DEPTH] "
			    "host:port\n");
			return 64;
		}
	}
	if (optind != argc - 1 || fb.chunk == 0 || fb.chunk > FAM_RW_MAX ||
	    fb.size < fb.chunk || depth == 0 || depth > 1024 || nlat == 0)
		fb_fail("bad arguments (fetchbench -h)");
	fb.size -= fb.size % fb.chunk;
	log_open(LOG_DEST_STDERR, LOG_WARNING);
	fb.base = event_base_new();
	o.hello.role = FAM_WIRE_ROLE_HOST;
	snprintf(o.hello.node, sizeof o.hello.node, "fetchbench");
	if (fam_connect(fb.base, argv[optind], &o, &fb_handlers, NULL, &fb.c,
	    &cause) < 0)
		fb_fail("%s", cause);
	fb_run(&fb.open);

	req.size = fb.size;
	proto_put_region_create(buf, sizeof buf, &req);
	if (fam_conn_call(fb.c, FAM_MSG_REGION_CREATE, buf, FAM_REGION_CREATE_MIN,
	    fb_call_done, &call) < 0)
		fb_fail("create: cannot send");
	fb_run(&call.done);
	if (call.status < 0 || proto_get_region_info(call.out, call.len,
	    &info) < 0)
		fb_fail("create: %s", strerror(-call.status));
	fb.r.region = info.region;
	fb.r.rkey = info.rkey;
	fb.r.addr = info.addr;
	fb.r.size = info.size;

	/* Staging as the host has it: registered once on the connection. */
	/* Room for the 16-deep fill below, and for depth. */
	fb.staging = aligned_alloc(4096, (size_t)(depth > 16 ? depth : 16) *
	    fb.chunk);
	fb.src = malloc(fb.size);
	fb.slots = calloc(depth > 16 ? depth : 16, sizeof *fb.slots);
	if (fb.staging == NULL || fb.src == NULL || fb.slots == NULL)
		fb_fail("out of memory");
	fb.mr = fam_mr_register(fb.c, fb.staging, (size_t)(depth > 16 ? depth :
	    16) * fb.chunk);
	if (fb.mr == NULL)
		fb_fail("cannot register the staging buffers: %s",
		    strerror(errno));
	for (uint64_t i = 0; i < fb.size; i++)
		fb.src[i] = fb_pattern(i);
	fb_batch((unsigned)(fb.size / fb.chunk), 16, true);

	/* Latency: one read at a time. */
	fb.lat = calloc(nlat, sizeof *fb.lat);
	for (unsigned i = 0; i < nlat; i++) {
		t = fb_batch(1, 1, false);
		fb.lat[i] = t;
		sum += t;
	}
	qsort(fb.lat, nlat, sizeof *fb.lat, fb_cmp);
	printf("fetchbench lat %u: n=%u min=%.1f avg=%.1f p50=%.1f p99=%.1f "
	    "us\n", fb.chunk, nlat, (double)fb.lat[0] / 1e3,
	    (double)sum / nlat / 1e3, (double)fb.lat[nlat / 2] / 1e3,
	    (double)fb.lat[(size_t)nlat * 99 / 100] / 1e3);

	/* Bandwidth: depth reads in flight. */
	t = fb_batch(nbw, depth, false);
	printf("fetchbench bw %u depth %u: n=%u MiB/s=%.2f\n", fb.chunk, depth,
	    nbw, (double)nbw * fb.chunk / 1048576.0 / ((double)t / 1e9));
	fflush(stdout);

	fam_mr_deregister(fb.mr);
	fb.mr = NULL;
	proto_put_region_free(buf, fb.r.region);
	call.done = false;
	if (fam_conn_call(fb.c, FAM_MSG_REGION_FREE, buf, FAM_REGION_FREE_LEN,
	    fb_call_done, &call) == 0)
		fb_run(&call.done);
	fam_conn_close(fb.c);
	while (!fb.closed)
		event_base_loop(fb.base, EVLOOP_ONCE);
	event_base_free(fb.base);
	free(fb.lat);
	free(fb.src);
	free(fb.staging);
	free(fb.slots);
	return 0;
}
