/*
 * fuzz-memory.c - libFuzzer target: a memory famd's receive path, from the
 * socket to the regions: the tcp transport's framing (transport-tcp.c),
 * the decoders of proto.c and the memory role's requests, leases, reads
 * and writes (role-memory.c).
 *
 * Each input is what up to FUZZ_MAX_PEERS peers send. A memory famd is
 * started for it, as famd.c starts one (tcp on a loopback port, a secret,
 * quotas per peer, a preload directory with a file, an empty file and a
 * link out of it), so that region ids and counters start afresh and the
 * input replays exactly.
 * The input is cut into streams at each "NEXTPEER" or "WITHPEER": a stream
 * after NEXTPEER goes on a new connection once the connections before it
 * have closed (a later session finds what earlier ones left: persistent
 * regions), one after WITHPEER on a new connection at the same time as the
 * stream before it (two sessions at once: shared regions, a writer's
 * region taken). Each stream is sent on a real connection, which is then
 * shut down for writing; the loop runs until famd has closed every
 * connection of the group. The role is stopped at the end: everything the
 * input made famd allocate must then be freed.
 *
 * Whatever famd sends back must be protocol: every header passes
 * proto_check_hdr() as a response, and the payload of a successful HELLO,
 * REGION_CREATE or REGION_LEASE response decodes. What it tells its admin
 * must be whole: once the peers are gone, the admin command `regions` lists
 * as many regions (those kept, persistent) as status counts.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "famd.h"
#include "fuzz.h"

#define FUZZ_DEADLINE_S 20 /* famd must have closed the connections by then */
#define FUZZ_MAX_PEERS  4
#define FUZZ_NEXT       "NEXTPEER" /* a stream once the others have closed */
#define FUZZ_WITH       "WITHPEER" /* a stream alongside the one before */
#define FUZZ_SEP_LEN    8

static struct famd fuzz_famd;
static struct cfg fuzz_cfg;
static char fuzz_dir[] = "/tmp/famd-fuzz-memory.XXXXXX";

/* One connection's client side and what it has read of famd's answers. */
struct fuzz_peer {
	int fd;
	const uint8_t *out;
	size_t outlen, sent;
	bool shut, eof;
	struct event *ev_read, *ev_write;
	uint8_t hdr[FAM_PROTO_HDR_LEN];
	size_t hgot;
	struct fam_hdr h;
	uint8_t body[FAM_HELLO_RESP_LEN];
	uint32_t left, bgot;
};

/* Writes path with text and mode, or exits. */
static void
fuzz_file(const char *path, const char *text, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

	if (fd < 0 || write(fd, text, len) != (ssize_t)len || close(fd) < 0) {
		perror(path);
		exit(1);
	}
}

/* Removes the private directory at exit. */
static void
fuzz_cleanup(void)
{
	static const char *const names[] = { "preload/graphs/web.bin",
		"preload/graphs/empty.bin", "preload/graphs/up",
		"preload/graphs", "preload", "secret", "famd.conf" };
	char path[sizeof fuzz_dir + 32];

	for (size_t i = 0; i < nitems(names); i++) {
		snprintf(path, sizeof path, "%s/%s", fuzz_dir, names[i]);
		if (unlink(path) < 0)
			rmdir(path);
	}
	rmdir(fuzz_dir);
}

/* Prepares a memory famd's configuration; the role starts per input. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct cfg_errors errs = { 0 };
	char path[sizeof fuzz_dir + 32], conf[sizeof fuzz_dir + 32], *text;
	char data[10000];

	if (mkdtemp(fuzz_dir) == NULL) {
		perror("mkdtemp");
		exit(1);
	}
	atexit(fuzz_cleanup);
	snprintf(path, sizeof path, "%s/preload", fuzz_dir);
	mkdir(path, 0700);
	snprintf(path, sizeof path, "%s/preload/graphs", fuzz_dir);
	mkdir(path, 0700);
	for (size_t i = 0; i < sizeof data; i++)
		data[i] = (char)(i * 7);
	snprintf(path, sizeof path, "%s/preload/graphs/web.bin", fuzz_dir);
	fuzz_file(path, data, sizeof data, 0600);
	snprintf(path, sizeof path, "%s/preload/graphs/empty.bin", fuzz_dir);
	fuzz_file(path, "", 0, 0600);
	snprintf(path, sizeof path, "%s/preload/graphs/up", fuzz_dir);
	if (symlink("../..", path) < 0) {
		perror(path);
		exit(1);
	}
	snprintf(path, sizeof path, "%s/secret", fuzz_dir);
	fuzz_file(path, "sesame\n", 7, 0600);
	text = xasprintf("[famd]\nrole = memory\nnode_name = fuzz\n"
	    "admin_socket = %s/admin.sock\nlog_level = err\n"
	    "secret_file = %s/secret\nop_timeout = 2s\n"
	    "[memory]\nlisten = 127.0.0.1:0\ncapacity = 16M\n"
	    "preload_dir = %s/preload\nsession_grace = 0\n"
	    "peer_max_bytes = 8M\npeer_max_regions = 16\n", fuzz_dir,
	    fuzz_dir, fuzz_dir);
	snprintf(conf, sizeof conf, "%s/famd.conf", fuzz_dir);
	fuzz_file(conf, text, strlen(text), 0600);
	free(text);
	if (cfg_load(&fuzz_cfg, conf, NULL, 0, &errs) < 0) {
		for (size_t i = 0; i < errs.count; i++)
			fprintf(stderr, "fuzz-memory: %s\n", errs.msg[i]);
		exit(1);
	}
	signal(SIGPIPE, SIG_IGN);
	log_open(LOG_DEST_STDERR, LOG_ERR);
	famd = &fuzz_famd;
	famd->cfg = &fuzz_cfg;
	famd->cfg_path = fuzz_cfg.path;
	famd->role = ROLE_MEMORY;
	famd->ops = &role_memory_ops;
	famd->base = event_base_new();
	if (famd->base == NULL)
		exit(1);
	time(&famd->started);
	clock_gettime(CLOCK_MONOTONIC, &famd->started_mono);
	return 0;
}

/* Checks the payload of a successful response that has one to decode. */
static void
fuzz_check_body(struct fuzz_peer *p)
{
	struct fam_hello_resp hr;
	struct fam_region_info ri;

	switch (p->h.type) {
	case FAM_MSG_HELLO:
		fuzz_assert(proto_get_hello_resp(p->body, p->bgot, &hr) == 0);
		break;
	case FAM_MSG_REGION_CREATE:
	case FAM_MSG_REGION_LEASE:
		fuzz_assert(proto_get_region_info(p->body, p->bgot, &ri) == 0);
		break;
	default:
		break;
	}
}

/* Runs famd's answers through the checks, as a peer would read them. */
static void
fuzz_parse(struct fuzz_peer *p, const uint8_t *b, size_t n)
{
	while (n > 0) {
		size_t take;

		if (p->left == 0 && p->hgot < FAM_PROTO_HDR_LEN) {
			take = FAM_PROTO_HDR_LEN - p->hgot;
			take = take < n ? take : n;
			memcpy(p->hdr + p->hgot, b, take);
			p->hgot += take;
			b += take;
			n -= take;
			if (p->hgot < FAM_PROTO_HDR_LEN)
				break;
			proto_get_hdr(p->hdr, &p->h);
			fuzz_assert(proto_check_hdr(&p->h, 0) == 0);
			fuzz_assert(p->h.flags & FAM_F_RESPONSE);
			p->left = p->h.len;
			p->bgot = 0;
			p->hgot = 0;
			if (p->left == 0)
				continue;
		}
		take = p->left < n ? p->left : n;
		if (p->h.status == 0 && p->bgot + take <= sizeof p->body)
			memcpy(p->body + p->bgot, b, take);
		p->bgot += (uint32_t)take;
		p->left -= (uint32_t)take;
		b += take;
		n -= take;
		if (p->left == 0 && p->h.status == 0)
			fuzz_check_body(p);
	}
}

/* The peer's socket is readable: reads famd's answers, or its close. */
static void
fuzz_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fuzz_peer *p = arg;
	uint8_t buf[65536];
	ssize_t n;

	while ((n = read(fd, buf, sizeof buf)) > 0)
		fuzz_parse(p, buf, (size_t)n);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		p->eof = true;
		event_del(p->ev_read);
	}
}

/* The peer's socket is writable: sends more of the input, then shuts down. */
static void
fuzz_write_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fuzz_peer *p = arg;
	socklen_t elen = sizeof(int);
	int err = 0;

	if (p->sent == 0 && !p->shut) {
		/* The connection is made, or it failed. */
		fuzz_assert(getsockopt(fd, SOL_SOCKET, SO_ERROR, &err,
		    &elen) == 0 && err == 0);
	}
	while (p->sent < p->outlen) {
		ssize_t n = send(fd, p->out + p->sent, p->outlen - p->sent,
		    MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			break; /* famd closed: the rest is not needed */
		}
		p->sent += (size_t)n;
	}
	shutdown(fd, SHUT_WR);
	p->shut = true;
	event_del(p->ev_write);
}

/* famd never closed a connection. */
static void
fuzz_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	bool *late = arg;

	*late = true;
}

/* Connects to the memory role's listener, whose address status shows. */
static int
fuzz_connect(void)
{
	json_t *st = json_pack("{s:[]}", "peers");
	const char *addr, *colon;
	struct sockaddr_in sin = { .sin_family = AF_INET };
	int fd;

	famd->ops->status(famd, st);
	addr = json_string_value(json_object_get(json_object_get(st,
	    "memory"), "listen"));
	fuzz_assert(addr != NULL && (colon = strrchr(addr, ':')) != NULL);
	sin.sin_port = htons((uint16_t)atoi(colon + 1));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	json_decref(st);
	/*
	 * Non-blocking: a signal (libFuzzer's timer) cannot interrupt it, and
	 * the write callback sees it complete. Local ports can run short
	 * while closed connections wait out TIME_WAIT: then wait a little.
	 */
	for (int tries = 0;; tries++) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
		if (fd < 0)
			abort();
		if (connect(fd, (struct sockaddr *)&sin, sizeof sin) == 0 ||
		    errno == EINPROGRESS || errno == EINTR)
			return fd;
		close(fd);
		if (errno != EADDRNOTAVAIL || tries == 100)
			abort();
		usleep(10000);
	}
}

/* Checks that `regions` lists every region status counts. */
static void
fuzz_check_views(void)
{
	static const char line[] = "{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"regions\",\"id\":1}";
	static const struct admin_peer peer = { .pid = 1 };
	json_t *st = json_pack("{s:[]}", "peers"), *answer, *list;
	char *out = admin_process(line, sizeof line - 1, &peer, false);
	json_int_t regions;

	famd->ops->status(famd, st);
	regions = json_integer_value(json_object_get(json_object_get(st,
	    "memory"), "regions"));
	answer = json_loads(out, 0, NULL);
	list = json_object_get(answer, "result");
	fuzz_assert(json_is_array(list));
	fuzz_assert((json_int_t)json_array_size(list) == regions);
	json_decref(answer);
	json_decref(st);
	free(out);
}

/* Starts sending a stream on a new connection. */
static void
fuzz_peer_start(struct fuzz_peer *p, const uint8_t *out, size_t len)
{
	memset(p, 0, sizeof *p);
	p->out = out;
	p->outlen = len;
	p->fd = fuzz_connect();
	p->ev_read = event_new(famd->base, p->fd, EV_READ | EV_PERSIST,
	    fuzz_read_cb, p);
	p->ev_write = event_new(famd->base, p->fd, EV_WRITE | EV_PERSIST,
	    fuzz_write_cb, p);
	if (p->ev_read == NULL || p->ev_write == NULL)
		abort();
	event_add(p->ev_read, NULL);
	event_add(p->ev_write, NULL);
}

/* Frees a connection famd has closed. */
static void
fuzz_peer_end(struct fuzz_peer *p)
{
	event_free(p->ev_read);
	event_free(p->ev_write);
	close(p->fd);
}

/* Returns where the next separator starts in the len bytes at b, or len. */
static size_t
fuzz_next_sep(const uint8_t *b, size_t len)
{
	for (size_t i = 0; i + FUZZ_SEP_LEN <= len; i++)
		if (memcmp(b + i, FUZZ_NEXT, FUZZ_SEP_LEN) == 0 ||
		    memcmp(b + i, FUZZ_WITH, FUZZ_SEP_LEN) == 0)
			return i;
	return len;
}

/* Runs one input's streams through a memory famd of its own. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_peer peers[FUZZ_MAX_PEERS];
	struct timeval deadline = { FUZZ_DEADLINE_S, 0 };
	struct event *ev_deadline;
	size_t off = 0;
	unsigned npeers = 0;
	bool late = false;

	admin_unregister_all();
	if (famd->ops->start(famd) < 0)
		abort();
	ev_deadline = evtimer_new(famd->base, fuzz_deadline_cb, &late);
	if (ev_deadline == NULL)
		abort();
	evtimer_add(ev_deadline, &deadline);
	while (npeers < FUZZ_MAX_PEERS) {
		unsigned first = npeers;
		bool with;

		/* A group: a stream and those that follow it WITHPEER. */
		do {
			size_t len = fuzz_next_sep(data + off, size - off);

			fuzz_peer_start(&peers[npeers++], data + off, len);
			off += len;
			with = size - off >= FUZZ_SEP_LEN &&
			    memcmp(data + off, FUZZ_WITH, FUZZ_SEP_LEN) == 0;
			if (size - off >= FUZZ_SEP_LEN)
				off += FUZZ_SEP_LEN;
		} while (with && npeers < FUZZ_MAX_PEERS);
		for (unsigned i = first; i < npeers && !late; i++)
			while (!peers[i].eof && !late)
				event_base_loop(famd->base, EVLOOP_ONCE);
		fuzz_assert(!late);
		for (unsigned i = first; i < npeers; i++)
			fuzz_peer_end(&peers[i]);
		if (off >= size)
			break;
	}
	event_free(ev_deadline);
	fuzz_check_views();
	famd->ops->stop(famd);
	return 0;
}
