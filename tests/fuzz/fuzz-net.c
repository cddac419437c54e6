/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz-net.c - the peers of a famd that listens for them (fuzz-memory,
 * fuzz-dpu): an input's streams sent on real loopback connections, and
 * what famd answers checked as a peer reads it (fuzz-net.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "core/famd.h"
#include "fuzz.h"
#include "fuzz-net.h"

#define FUZZ_DEADLINE_S 20 /* famd must have closed the connections by then */
#define FUZZ_MAX_PEERS  4
#define FUZZ_NEXT       "NEXTPEER" /* a stream once the others have closed */
#define FUZZ_WITH       "WITHPEER" /* a stream alongside the one before */
#define FUZZ_SEP_LEN    8

static char fuzz_dir[64];

/* Writes path with len bytes of text, or exits. */
static void
fuzz_file(const char *path, const char *text, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

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
		"preload/graphs", "preload", "secret", "peers" };
	char path[sizeof fuzz_dir + 32];

	for (size_t i = 0; i < nitems(names); i++) {
		snprintf(path, sizeof path, "%s/%s", fuzz_dir, names[i]);
		if (unlink(path) < 0)
			rmdir(path);
	}
	rmdir(fuzz_dir);
}

/*
 * Makes the private directory of the famds under test, removed at exit:
 * the secret ("sesame") in secret, peers (a peer_secrets file giving node
 * "keyed" that secret as its own), and under preload graphs/web.bin (10000
 * bytes), graphs/empty.bin and graphs/up, a link to the directory above.
 * Returns its path.
 */
const char *
fuzz_net_dir(const char *name)
{
	char path[sizeof fuzz_dir + 32], data[10000];

	snprintf(fuzz_dir, sizeof fuzz_dir, "/tmp/famd-fuzz-%s.XXXXXX", name);
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
	fuzz_file(path, data, sizeof data);
	snprintf(path, sizeof path, "%s/preload/graphs/empty.bin", fuzz_dir);
	fuzz_file(path, "", 0);
	snprintf(path, sizeof path, "%s/preload/graphs/up", fuzz_dir);
	if (symlink("../..", path) < 0) {
		perror(path);
		exit(1);
	}
	snprintf(path, sizeof path, "%s/secret", fuzz_dir);
	fuzz_file(path, "sesame\n", 7);
	snprintf(data, sizeof data, "keyed %s/secret\n", fuzz_dir);
	snprintf(path, sizeof path, "%s/peers", fuzz_dir);
	fuzz_file(path, data, strlen(data));
	return fuzz_dir;
}

/* Loads a configuration from text into cfg, or exits. */
void
fuzz_net_cfg(struct cfg *cfg, const char *text)
{
	struct cfg_errors errs = { 0 };
	FILE *f = fmemopen((void *)text, strlen(text), "r");

	if (f == NULL || cfg_load_file(cfg, f, "fuzz.conf", NULL, 0,
	    &errs) < 0) {
		for (size_t i = 0; i < errs.count; i++)
			fprintf(stderr, "fuzz: %s\n", errs.msg[i]);
		exit(1);
	}
	fclose(f);
}

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
	uint8_t body[FAM_AUTH_RESP_LEN];
	uint32_t left, bgot;
	/*
	 * The handshake: a stream that starts with a HELLO followed by an
	 * AUTH whose proof is all zero is held before that proof until the
	 * challenge comes, and the right proof (secret "sesame") goes in its
	 * place; any other proof goes as it is.
	 */
	struct fam_hello hello;
	size_t hold_at;           /* offset of the proof; SIZE_MAX: none */
	bool proof_ready, proof_sent;
	uint8_t proof[FAM_PROOF_LEN];
};

/* The challenge came: computes the proof the held stream sends. */
static void
fuzz_prove(struct fuzz_peer *p, const struct fam_challenge *ch)
{
	uint8_t key[FAM_KEY_LEN];
	struct fam_auth a;

	if (p->hold_at == SIZE_MAX || p->proof_ready)
		return;
	if (proto_auth_secret_key("sesame", key) < 0 ||
	    proto_auth_derive(&a, key, &p->hello, ch) < 0 ||
	    proto_auth_client_proof(&a, p->hello.resume, p->proof) < 0)
		abort();
	p->proof_ready = true;
	event_add(p->ev_write, NULL);
}

/* Finds the proof to hold back in a stream that starts with a handshake. */
static void
fuzz_find_proof(struct fuzz_peer *p)
{
	static const uint8_t zero[FAM_PROOF_LEN];
	const size_t auth = FAM_PROTO_HDR_LEN + FAM_HELLO_LEN;
	struct fam_hdr h;

	p->hold_at = SIZE_MAX;
	if (p->outlen < auth + FAM_PROTO_HDR_LEN + FAM_AUTH_LEN)
		return;
	proto_get_hdr(p->out, &h);
	if (h.type != FAM_MSG_HELLO || h.len != FAM_HELLO_LEN ||
	    proto_get_hello(p->out + FAM_PROTO_HDR_LEN, FAM_HELLO_LEN,
	    &p->hello) < 0)
		return;
	proto_get_hdr(p->out + auth, &h);
	if (h.type != FAM_MSG_AUTH || h.len != FAM_AUTH_LEN ||
	    memcmp(p->out + auth + FAM_PROTO_HDR_LEN, zero, FAM_PROOF_LEN) != 0)
		return;
	p->hold_at = auth + FAM_PROTO_HDR_LEN;
}

/* Checks the payload of a successful response that has one to decode. */
static void
fuzz_check_body(struct fuzz_peer *p)
{
	struct fam_hello_resp hr;
	struct fam_challenge ch;
	struct fam_region_info ri;

	switch (p->h.type) {
	case FAM_MSG_HELLO:
		fuzz_assert(proto_get_challenge(p->body, p->bgot, &ch) == 0);
		fuzz_prove(p, &ch);
		break;
	case FAM_MSG_AUTH:
		fuzz_assert(p->bgot == FAM_AUTH_RESP_LEN);
		fuzz_assert(proto_get_hello_resp(p->body + FAM_PROOF_LEN,
		    p->bgot - FAM_PROOF_LEN, &hr) == 0);
		break;
	case FAM_MSG_REGION_CREATE:
	case FAM_MSG_REGION_LEASE:
	case FAM_MSG_REGION_ADOPT:
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
		size_t end = p->outlen;
		const uint8_t *from = p->out + p->sent;
		ssize_t n;

		if (p->hold_at != SIZE_MAX && !p->proof_sent) {
			if (p->sent == p->hold_at && !p->proof_ready) {
				event_del(p->ev_write); /* until the challenge */
				return;
			}
			if (p->sent == p->hold_at) {
				from = p->proof;
				end = p->sent + FAM_PROOF_LEN;
			} else
				end = p->hold_at;
		}
		n = send(fd, from, end - p->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			break; /* famd closed: the rest is not needed */
		}
		if (from == p->proof && (size_t)n != FAM_PROOF_LEN)
			break; /* 32 bytes on a fresh socket: never short */
		if (from == p->proof)
			p->proof_sent = true;
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

/* Connects to port on the loopback, without blocking. */
static int
fuzz_connect(uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd;

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

/* Returns the port famd listens on, which status shows in section. */
uint16_t
fuzz_listen_port(struct famd *d, const char *section)
{
	json_t *st = json_pack("{s:[]}", "peers");
	const char *addr, *colon;
	uint16_t port;

	d->ops->status(d, st);
	addr = json_string_value(json_object_get(json_object_get(st,
	    section), "listen"));
	fuzz_assert(addr != NULL && (colon = strrchr(addr, ':')) != NULL);
	port = (uint16_t)atoi(colon + 1);
	json_decref(st);
	return port;
}

/* Starts sending a stream on a new connection. */
static void
fuzz_peer_start(struct fuzz_peer *p, struct event_base *base, uint16_t port,
    const uint8_t *out, size_t len)
{
	memset(p, 0, sizeof *p);
	p->out = out;
	p->outlen = len;
	fuzz_find_proof(p);
	p->fd = fuzz_connect(port);
	p->ev_read = event_new(base, p->fd, EV_READ | EV_PERSIST,
	    fuzz_read_cb, p);
	p->ev_write = event_new(base, p->fd, EV_WRITE | EV_PERSIST,
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

/*
 * Sends the streams of an input to port, each on a connection of its own,
 * as fuzz-net.h says, and returns once famd has closed them all.
 */
void
fuzz_streams(struct event_base *base, uint16_t port, const uint8_t *data,
    size_t size)
{
	struct fuzz_peer peers[FUZZ_MAX_PEERS];
	struct timeval deadline = { FUZZ_DEADLINE_S, 0 };
	struct event *ev_deadline;
	size_t off = 0;
	unsigned npeers = 0;
	bool late = false;

	ev_deadline = evtimer_new(base, fuzz_deadline_cb, &late);
	if (ev_deadline == NULL)
		abort();
	evtimer_add(ev_deadline, &deadline);
	while (npeers < FUZZ_MAX_PEERS) {
		unsigned first = npeers;
		bool with;

		/* A group: a stream and those that follow it WITHPEER. */
		do {
			size_t len = fuzz_next_sep(data + off, size - off);

			fuzz_peer_start(&peers[npeers++], base, port,
			    data + off, len);
			off += len;
			with = size - off >= FUZZ_SEP_LEN &&
			    memcmp(data + off, FUZZ_WITH, FUZZ_SEP_LEN) == 0;
			if (size - off >= FUZZ_SEP_LEN)
				off += FUZZ_SEP_LEN;
		} while (with && npeers < FUZZ_MAX_PEERS);
		for (unsigned i = first; i < npeers && !late; i++)
			while (!peers[i].eof && !late)
				event_base_loop(base, EVLOOP_ONCE);
		fuzz_assert(!late);
		for (unsigned i = first; i < npeers; i++)
			fuzz_peer_end(&peers[i]);
		if (off >= size)
			break;
	}
	event_free(ev_deadline);
}
