/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz-client.c - libFuzzer target: the active side of the tcp transport
 * (transport-tcp.c), as a host famd uses it towards a memory node, fed by
 * a memory node that may say anything.
 *
 * Each input is what the memory node sends. The harness listens on a
 * loopback port, connects to it with fam_connect() as a host does (node
 * name, role, max_outstanding and max_payload as host-role.c sets them)
 * and queues at once the operations of a host's region: REGION_CREATE,
 * two READs, a WRITE, STATS, REGION_FREE, REGION_ADVISE and REGION_ADOPT,
 * which go out (ids 2 to 9) once the hello (id 1) is answered. The input is then delivered a frame
 * at a time (as its headers delimit them), each once famd has handled the
 * one before, so answers come after the requests they answer, as from a
 * real peer; a header that cannot be a frame sends the rest at once.
 * The handshake: an AUTH response whose proof is all zero gets the right
 * proof (from famd's hello and the challenge sent before it, without a
 * secret), so inputs reach past the hello; any other proof goes as it is
 * (famd must refuse it). Then the memory node shuts its side, and the loop runs until the
 * connection is closed.
 *
 * transport.h's promises are checked: every operation completes exactly
 * once, before `closed`, which comes once; a READ that succeeds filled
 * its buffer; a successful REGION_CREATE answer decodes. What famd sends
 * must be protocol: requests with valid headers.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "core/famd.h"
#include "transport/transport.h"
#include "fuzz.h"

#define FUZZ_DEADLINE_S 20   /* the connection must be closed by then */
#define FUZZ_NOPS       8
#define FUZZ_READ_LEN   4096 /* the first READ; the second reads 64 */
#define FUZZ_WRITE_LEN  512

static struct event_base *fuzz_base;
static int fuzz_listen_fd = -1;
static char fuzz_addr[64];

/* One operation of the host and how it ended. */
struct fuzz_op {
	struct fuzz_run *run;
	uint8_t type;
	unsigned completions;
	int status;
	uint8_t *buf;  /* READ: where the data goes (exactly its length) */
	uint32_t len;
};

/* One input's connection. */
struct fuzz_run {
	struct fam_conn *conn;
	int fd;                    /* the memory node's end */
	unsigned closed;
	bool connected;
	bool late;                 /* the deadline passed */
	struct fuzz_op ops[FUZZ_NOPS];
	uint8_t wbuf[FUZZ_WRITE_LEN];
	/* famd's requests, as the memory node reads them */
	uint8_t hdr[FAM_PROTO_HDR_LEN];
	size_t hgot;
	uint64_t skip;
	/* the handshake: famd's hello, the challenge we sent */
	bool in_hello, have_hello, have_ch;
	uint8_t hello_raw[FAM_HELLO_LEN];
	size_t hello_got;
	struct fam_challenge ch;
};

/* Listens on a loopback port for the connections famd makes. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof sin;

	signal(SIGPIPE, SIG_IGN);
	log_open(LOG_DEST_STDERR, LOG_ERR);
	fuzz_base = event_base_new();
	fuzz_listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fuzz_base == NULL || fuzz_listen_fd < 0 ||
	    bind(fuzz_listen_fd, (struct sockaddr *)&sin, sizeof sin) < 0 ||
	    listen(fuzz_listen_fd, 16) < 0 ||
	    getsockname(fuzz_listen_fd, (struct sockaddr *)&sin, &len) < 0) {
		perror("fuzz-client: listen");
		exit(1);
	}
	snprintf(fuzz_addr, sizeof fuzz_addr, "127.0.0.1:%u",
	    ntohs(sin.sin_port));
	return 0;
}

/* An operation completed. */
static void
fuzz_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct fuzz_op *op = ctx;
	struct fam_region_info info;

	fuzz_assert(op->run->closed == 0);
	fuzz_assert(status <= 0 && status >= -FAM_STATUS_MAX);
	op->completions++;
	op->status = status;
	if (status < 0)
		return;
	switch (op->type) {
	case FAM_MSG_REGION_CREATE:
	case FAM_MSG_REGION_ADOPT:
		/* As the host does (host-session.c, alloc_stripe_done). */
		(void)proto_get_region_info(payload, len, &info);
		break;
	case FAM_MSG_READ:
		fuzz_assert(payload == NULL || len == op->len);
		break;
	default:
		break;
	}
}

/* The hello was answered. */
static void
fuzz_connected(struct fam_conn *c, const struct fam_hello_resp *resp,
    void *arg)
{
	struct fuzz_run *run = arg;

	fuzz_assert(!run->connected && run->closed == 0);
	fuzz_assert(resp->node[0] != '\0');
	run->connected = true;
}

/* The connection is gone: every operation must have completed, once. */
static void
fuzz_closed(struct fam_conn *c, int err, void *arg)
{
	struct fuzz_run *run = arg;

	fuzz_assert(err <= 0);
	for (int i = 0; i < FUZZ_NOPS; i++)
		fuzz_assert(run->ops[i].completions == 1);
	run->closed++;
}

static const struct fam_conn_handlers fuzz_handlers = {
	.connected = fuzz_connected,
	.closed = fuzz_closed,
};

/* Queues a host's operations on a region; they go out once connected. */
static void
fuzz_queue_ops(struct fuzz_run *run)
{
	struct fam_region_create rc = { .size = 1 << 20 };
	struct fam_remote r = { .region = 1, .size = 1 << 20 };
	struct fam_region_adopt ad = { .instance = 42, .region = 3,
		.key = 0xbeefbeefbeefull };
	uint8_t p[FAM_REGION_CREATE_MIN + FAM_NAME_MAX + FAM_PATH_MAX];
	size_t n;

	for (int i = 0; i < FUZZ_NOPS; i++)
		run->ops[i].run = run;
	n = proto_put_region_create(p, sizeof p, &rc);
	run->ops[0].type = FAM_MSG_REGION_CREATE;
	fuzz_assert(fam_conn_call(run->conn, FAM_MSG_REGION_CREATE, p,
	    (uint32_t)n, fuzz_done, &run->ops[0]) == 0);
	run->ops[1].type = run->ops[2].type = FAM_MSG_READ;
	run->ops[1].len = FUZZ_READ_LEN;
	run->ops[2].len = 64;
	for (int i = 1; i <= 2; i++) {
		run->ops[i].buf = malloc(run->ops[i].len);
		if (run->ops[i].buf == NULL)
			abort();
		fuzz_assert(fam_conn_read(run->conn, &r, 8192 * (uint64_t)i,
		    run->ops[i].len, run->ops[i].buf, NULL, fuzz_done,
		    &run->ops[i]) == 0);
	}
	memset(run->wbuf, 0x5a, sizeof run->wbuf);
	run->ops[3].type = FAM_MSG_WRITE;
	fuzz_assert(fam_conn_write(run->conn, &r, 0, sizeof run->wbuf,
	    run->wbuf, NULL, fuzz_done, &run->ops[3]) == 0);
	run->ops[4].type = FAM_MSG_STATS;
	fuzz_assert(fam_conn_call(run->conn, FAM_MSG_STATS, NULL, 0, fuzz_done,
	    &run->ops[4]) == 0);
	n = proto_put_region_free(p, 1);
	run->ops[5].type = FAM_MSG_REGION_FREE;
	fuzz_assert(fam_conn_call(run->conn, FAM_MSG_REGION_FREE, p,
	    (uint32_t)n, fuzz_done, &run->ops[5]) == 0);
	n = proto_put_region_advise(p, 1, FAM_ADVICE_STATIC);
	run->ops[6].type = FAM_MSG_REGION_ADVISE;
	fuzz_assert(fam_conn_call(run->conn, FAM_MSG_REGION_ADVISE, p,
	    (uint32_t)n, fuzz_done, &run->ops[6]) == 0);
	n = proto_put_region_adopt(p, &ad);
	run->ops[7].type = FAM_MSG_REGION_ADOPT;
	fuzz_assert(fam_conn_call(run->conn, FAM_MSG_REGION_ADOPT, p,
	    (uint32_t)n, fuzz_done, &run->ops[7]) == 0);
}

/* Reads what famd sent; its headers must be valid requests or replies. */
static void
fuzz_drain(struct fuzz_run *run)
{
	uint8_t buf[16384];
	ssize_t n;

	while ((n = recv(run->fd, buf, sizeof buf, MSG_DONTWAIT)) > 0) {
		const uint8_t *b = buf;
		size_t left = (size_t)n;

		while (left > 0) {
			size_t take;

			if (run->skip > 0) {
				take = run->skip < left ? run->skip : left;
				if (run->in_hello && run->hello_got + take <=
				    FAM_HELLO_LEN) {
					memcpy(run->hello_raw + run->hello_got,
					    b, take);
					run->hello_got += take;
					run->have_hello = run->hello_got ==
					    FAM_HELLO_LEN;
				}
				run->skip -= take;
				b += take;
				left -= take;
				continue;
			}
			take = FAM_PROTO_HDR_LEN - run->hgot;
			take = take < left ? take : left;
			memcpy(run->hdr + run->hgot, b, take);
			run->hgot += take;
			b += take;
			left -= take;
			if (run->hgot == FAM_PROTO_HDR_LEN) {
				struct fam_hdr h;

				proto_get_hdr(run->hdr, &h);
				fuzz_assert(proto_check_hdr(&h, 0) == 0);
				run->skip = h.len;
				run->hgot = 0;
				run->in_hello = h.type == FAM_MSG_HELLO &&
				    !(h.flags & FAM_F_RESPONSE);
				run->hello_got = 0;
			}
		}
	}
}

/* Runs the loop until famd has nothing left to do for now. */
static void
fuzz_settle(struct fuzz_run *run)
{
	for (int i = 0; i < 4; i++) {
		event_base_loop(fuzz_base, EVLOOP_NONBLOCK);
		fuzz_drain(run);
	}
}

/* Sends len bytes from the memory node, as the socket takes them. */
static void
fuzz_send(struct fuzz_run *run, const uint8_t *p, size_t len)
{
	while (len > 0 && run->closed == 0 && !run->late) {
		ssize_t n = send(run->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return; /* famd closed: the rest is not needed */
		if (n > 0) {
			p += n;
			len -= (size_t)n;
		}
		fuzz_settle(run);
	}
	fuzz_settle(run);
}

/* Returns the length of the frame at p (len bytes left), or len. */
static size_t
fuzz_frame_len(const uint8_t *p, size_t len)
{
	struct fam_hdr h;

	if (len < FAM_PROTO_HDR_LEN)
		return len;
	proto_get_hdr(p, &h);
	if (h.len > len - FAM_PROTO_HDR_LEN)
		return len;
	return FAM_PROTO_HDR_LEN + h.len;
}

/*
 * Before a frame of the memory node goes out: remembers a challenge, and
 * gives an AUTH response with an all-zero proof the right one (frame is
 * the input's copy, len bytes).
 */
static void
fuzz_handshake(struct fuzz_run *run, uint8_t *frame, size_t len)
{
	uint8_t key[FAM_KEY_LEN], zero[FAM_PROOF_LEN] = { 0 };
	uint8_t *body = frame + FAM_PROTO_HDR_LEN;
	struct fam_hello m;
	struct fam_auth a;
	struct fam_hdr h;

	if (len < FAM_PROTO_HDR_LEN)
		return;
	proto_get_hdr(frame, &h);
	if (!(h.flags & FAM_F_RESPONSE) || h.status != 0 ||
	    h.len != len - FAM_PROTO_HDR_LEN)
		return;
	if (h.type == FAM_MSG_HELLO)
		run->have_ch = proto_get_challenge(body, h.len, &run->ch) == 0;
	if (h.type != FAM_MSG_AUTH || h.len != FAM_AUTH_RESP_LEN ||
	    memcmp(body, zero, FAM_PROOF_LEN) != 0 || !run->have_ch ||
	    !run->have_hello ||
	    proto_get_hello(run->hello_raw, FAM_HELLO_LEN, &m) < 0)
		return;
	if (proto_auth_secret_key("", key) == 0 &&
	    proto_auth_derive(&a, key, &m, &run->ch) == 0)
		(void)proto_auth_server_proof(&a, body + FAM_PROOF_LEN, body);
}

/* famd never closed the connection. */
static void
fuzz_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fuzz_run *run = arg;

	run->late = true;
}

/* Answers a host's connection with one input, a frame at a time. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_run run = { .fd = -1 };
	struct fam_conn_opts opts = { .kind = FAM_TP_TCP,
		.hello = { .role = FAM_WIRE_ROLE_HOST, .node = "fuzz-host" },
		.op_timeout_ms = 10000, .max_outstanding = 1024,
		.max_payload = FAM_PROTO_MAX_PAYLOAD };
	struct timeval deadline = { FUZZ_DEADLINE_S, 0 };
	struct event *ev_deadline;
	char *cause = NULL;
	size_t off = 0;

	if (fam_connect(fuzz_base, fuzz_addr, &opts, &fuzz_handlers, &run,
	    &run.conn, &cause) < 0) {
		fprintf(stderr, "fuzz-client: %s\n", cause);
		abort();
	}
	fuzz_queue_ops(&run);
	do
		run.fd = accept4(fuzz_listen_fd, NULL, NULL, SOCK_CLOEXEC);
	while (run.fd < 0 && errno == EINTR);
	if (run.fd < 0)
		abort();
	ev_deadline = evtimer_new(fuzz_base, fuzz_deadline_cb, &run);
	if (ev_deadline == NULL)
		abort();
	evtimer_add(ev_deadline, &deadline);
	fuzz_settle(&run);
	while (off < size && run.closed == 0 && !run.late) {
		size_t len = fuzz_frame_len(data + off, size - off);
		uint8_t *frame = malloc(len > 0 ? len : 1);

		if (frame == NULL)
			abort();
		memcpy(frame, data + off, len);
		fuzz_handshake(&run, frame, len);
		fuzz_send(&run, frame, len);
		free(frame);
		off += len;
	}
	shutdown(run.fd, SHUT_WR);
	while (run.closed == 0 && !run.late) {
		event_base_loop(fuzz_base, EVLOOP_ONCE);
		fuzz_drain(&run);
	}
	fuzz_assert(!run.late);
	fuzz_assert(run.closed == 1);
	event_free(ev_deadline);
	/* The teardown ran from the loop; nothing of famd's may be left. */
	event_base_loop(fuzz_base, EVLOOP_NONBLOCK);
	close(run.fd);
	free(run.ops[1].buf);
	free(run.ops[2].buf);
	return 0;
}
