/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_host_hedge.c - reads to the fastest copy and hedged reads
 * (host-hedge.c): a memory role and a host role with replicate:2 in this
 * process on loopback, each of the host's two memory nodes reached
 * through a relay on the same loop that can delay what the node sends (a
 * slow node) or hold it back (a node that stalls: its requests arrive,
 * its answers do not), a second thread paging. Reads go to the copy that
 * answers first; a stalled copy's reads are answered by the other copy
 * long before op_timeout; its late answers, once let through, are dropped
 * and install nothing (the program's newer writes stay); hedge_after = 0
 * hedges nothing.
 * tests/e2e/host-hedge.sh covers the same with a memory famd stopped
 * (SIGSTOP) under famtest, host-hedge-netns.sh a slow link.
 */
#include "config.h"

#include <arpa/inet.h>
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>

#include "host/host.h"
#include "unit.h"

#define CHUNK  (64u << 10)
#define NCHUNK 48u /* 3 MiB through a 1 MiB buffer */
#define WIN    4u  /* chunks written and checked together */
#define RELAY_PIPES 8

struct relay;

/* A connection through a relay: the host's side and the node's. */
struct relay_pipe {
	struct relay *rl;
	struct bufferevent *down, *up;
	struct evbuffer *late;  /* the node's answers, delayed */
	struct event *timer;    /* ... let through then */
};

/*
 * A tcp relay to the memory role that can hold back what the node
 * answers (hold), or let it through delay_ms late.
 */
struct relay {
	struct evconnlistener *l;
	struct sockaddr_in to;
	bool hold;
	unsigned delay_ms;
	struct relay_pipe pipes[RELAY_PIPES];
	char addr[64];
};

static struct event_base *base;
static struct relay relays[3]; /* one per memory node of the host */
static unsigned nrelays;
static struct unit_role memr, hostr;
static struct unit_prog prog;
static struct host *h;
static uint8_t *mem;

/* Lets a pipe's delayed answers through. */
static void
relay_late_cb(evutil_socket_t fd, short what, void *arg)
{
	struct relay_pipe *p = arg;

	if (!p->rl->hold && p->down != NULL)
		bufferevent_write_buffer(p->down, p->late);
}

/*
 * Forwards what arrived on one side to the other: the node's answers
 * unless held, delay_ms late when the relay delays.
 */
static void
relay_read_cb(struct bufferevent *bev, void *arg)
{
	struct relay_pipe *p = arg;
	struct timeval tv = { 0, (suseconds_t)p->rl->delay_ms * 1000 };

	if (bev == p->down) {
		bufferevent_write_buffer(p->up, bufferevent_get_input(bev));
		return;
	}
	if (p->rl->hold)
		return; /* kept in its input buffer */
	if (p->rl->delay_ms == 0) {
		bufferevent_write_buffer(p->down, bufferevent_get_input(bev));
		return;
	}
	evbuffer_add_buffer(p->late, bufferevent_get_input(bev));
	if (!evtimer_pending(p->timer, NULL))
		evtimer_add(p->timer, &tv);
}

/* Frees a pipe's two sides. */
static void
relay_pipe_free(struct relay_pipe *p)
{
	if (p->down == NULL)
		return;
	bufferevent_free(p->down);
	bufferevent_free(p->up);
	evbuffer_free(p->late);
	event_free(p->timer);
	p->down = p->up = NULL;
}

/* One side of a pipe closed: both go. */
static void
relay_event_cb(struct bufferevent *bev, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		relay_pipe_free(arg);
}

/* A connection to a relay: a pipe to the memory role. */
static void
relay_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int len, void *arg)
{
	struct relay *rl = arg;
	struct relay_pipe *p = NULL;

	for (unsigned i = 0; i < RELAY_PIPES && p == NULL; i++)
		if (rl->pipes[i].down == NULL)
			p = &rl->pipes[i];
	if (p == NULL) {
		evutil_closesocket(fd);
		return;
	}
	p->rl = rl;
	p->down = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
	p->up = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	p->late = evbuffer_new();
	p->timer = evtimer_new(base, relay_late_cb, p);
	ck_assert(p->down != NULL && p->up != NULL && p->late != NULL &&
	    p->timer != NULL);
	bufferevent_setcb(p->down, relay_read_cb, NULL, relay_event_cb, p);
	bufferevent_setcb(p->up, relay_read_cb, NULL, relay_event_cb, p);
	ck_assert_int_eq(bufferevent_socket_connect(p->up,
	    (struct sockaddr *)&rl->to, sizeof rl->to), 0);
	bufferevent_enable(p->down, EV_READ | EV_WRITE);
	bufferevent_enable(p->up, EV_READ | EV_WRITE);
}

/* Starts relay rl to the memory role at addr ("127.0.0.1:port"). */
static void
relay_start(struct relay *rl, const char *addr)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof sin;

	memset(rl, 0, sizeof *rl);
	rl->to.sin_family = AF_INET;
	rl->to.sin_port = htons((uint16_t)atoi(strchr(addr, ':') + 1));
	rl->to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	rl->l = evconnlistener_new_bind(base, relay_accept_cb, rl,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 16,
	    (struct sockaddr *)&sin, sizeof sin);
	ck_assert_ptr_nonnull(rl->l);
	ck_assert_int_eq(getsockname(evconnlistener_get_fd(rl->l),
	    (struct sockaddr *)&sin, &len), 0);
	snprintf(rl->addr, sizeof rl->addr, "127.0.0.1:%u",
	    ntohs(sin.sin_port));
}

/* Lets what the node answered through again, and what rl held. */
static void
relay_release(struct relay *rl)
{
	rl->hold = false;
	for (unsigned i = 0; i < RELAY_PIPES; i++)
		if (rl->pipes[i].up != NULL) {
			relay_late_cb(-1, 0, &rl->pipes[i]);
			relay_read_cb(rl->pipes[i].up, &rl->pipes[i]);
		}
}

/* Closes relay rl and its pipes. */
static void
relay_stop(struct relay *rl)
{
	for (unsigned i = 0; i < RELAY_PIPES; i++)
		relay_pipe_free(&rl->pipes[i]);
	if (rl->l != NULL)
		evconnlistener_free(rl->l);
	rl->l = NULL;
}

/* Writes (or checks) chunks [first, first + n) with seed from a thread. */
static uint64_t
pages(unsigned first, unsigned n, uint64_t seed, bool write)
{
	return unit_pages(base, mem + (size_t)first * CHUNK, (uint64_t)n * CHUNK,
	    seed, write);
}

/* Writes (or checks) the region with seed, WIN chunks at a time. */
static uint64_t
region_pages(uint64_t seed, bool write)
{
	uint64_t wrong = 0;

	for (unsigned w = 0; w < NCHUNK && wrong != UINT64_MAX; w += WIN) {
		uint64_t n = pages(w, WIN, seed, write);

		wrong = n == UINT64_MAX ? n : wrong + n;
	}
	return wrong;
}

/* Tells whether the host is connected to every memory node. */
static bool
all_up(void)
{
	if (h->nnodes != nrelays)
		return false;
	for (unsigned i = 0; i < h->nnodes; i++)
		if (h->nodes[i].state != MN_UP)
			return false;
	return true;
}

static void start_nodes(unsigned n, const char *red, const char *keys);

/* The same with replicate:2 over two memory nodes. */
static void
start(const char *keys)
{
	start_nodes(2, "replicate:2", keys);
}

/*
 * A memory role, a host with n sessions with it (memory nodes), each
 * through a relay, op_timeout 30 s, redundancy red (and keys, more lines
 * of [host]), a region of NCHUNK chunks on them.
 */
static void
start_nodes(unsigned n, const char *red, const char *keys)
{
	const char *dir = unit_dir();
	char *a, *text;
	char session[128];
	uint64_t handle;

	signal(SIGPIPE, SIG_IGN);
	log_open(LOG_DEST_STDERR, LOG_ERR);
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
	text = xasprintf("[famd]\nrole = memory\nnode_name = unit-memory\n"
	    "secret_file = %s/secret\nop_timeout = 30s\n"
	    "[memory]\nlisten = 127.0.0.1:0\ncapacity = 256M\n"
	    "preload_dir = %s\n", dir, dir);
	ck_assert_int_eq(unit_role_start(&memr, base, ROLE_MEMORY, text), 0);
	free(text);
	a = unit_role_listen(&memr, "memory");
	ck_assert_ptr_nonnull(a);
	nrelays = n;
	for (unsigned i = 0; i < n; i++)
		relay_start(&relays[i], a);
	snprintf(session, sizeof session, "%s/session.sock", dir);
	text = xasprintf("[famd]\nrole = host\nnode_name = unit-host\n"
	    "secret_file = %s/secret\nop_timeout = 30s\n"
	    "[host]\nmemory_nodes = %s, %s%s%s\nsession_socket = %s\n"
	    "arena_size = 1G\nbuffer_size = 1M\nchunk_size = 64K\n"
	    "prefetch = 0\nredundancy = %s\n%s", dir, relays[0].addr,
	    relays[1].addr, n > 2 ? ", " : "", n > 2 ? relays[2].addr : "",
	    session, red, keys);
	free(a);
	ck_assert_int_eq(unit_role_start(&hostr, base, ROLE_HOST, text), 0);
	free(text);
	h = hostr.d.role_state;
	ck_assert(unit_run_until(base, all_up, 5000));
	ck_assert_int_eq(unit_prog_open(&prog, base, session), 0);
	ck_assert_int_eq(unit_prog_alloc(&prog, NCHUNK * CHUNK, &mem, &handle),
	    0);
}

/* Ends the session and stops the roles and the relays. */
static void
teardown(void)
{
	for (unsigned i = 0; i < nrelays; i++)
		relay_release(&relays[i]);
	unit_prog_close(&prog);
	unit_role_stop(&hostr);
	for (unsigned i = 0; i < nrelays; i++)
		relay_stop(&relays[i]);
	unit_role_stop(&memr);
	if (base != NULL)
		event_base_free(base);
	base = NULL;
}

/* Returns a counter of the hedged reads (redundancy.hedge in status). */
static int64_t
hedge_stat(const char *name)
{
	json_t *o = host_hedge_json(h);
	int64_t v = json_integer_value(json_object_get(o, name));

	json_decref(o);
	return v;
}

/* Returns a field of memory node i's reads (as in its peers entry). */
static int64_t
node_stat(unsigned i, const char *name)
{
	json_t *o = json_array();
	int64_t v;

	for (unsigned k = 0; k < h->nnodes + h->has_dpu; k++)
		json_array_append_new(o, json_object());
	host_hedge_peers_json(h, o);
	v = json_integer_value(json_object_get(json_array_get(o, i), name));
	json_decref(o);
	return v;
}

/* Tells whether every hedge sent is settled and node 0 has nothing out. */
static bool
settled(void)
{
	return hedge_stat("sent") == hedge_stat("won") + hedge_stat("wasted") &&
	    node_stat(0, "reads_in_flight") == 0;
}

/* Tells whether the copies are all up to date. */
static bool
healthy(void)
{
	uint64_t behind;

	return host_replica_state(h, h->clients->regions, &behind) ==
	    HOST_RED_HEALTHY && behind == 0;
}

/*
 * Writes the region with seed, node 1's answers delay_ms late, and reads
 * it back once: the estimates have their samples, every chunk is clean.
 */
static void
start_written(const char *keys, uint64_t seed, unsigned delay_ms)
{
	start(keys);
	relays[1].delay_ms = delay_ms;
	ck_assert_uint_eq(region_pages(seed, true), 0);
	ck_assert_uint_eq(region_pages(seed, false), 0);
}

START_TEST(test_reads_go_to_the_copy_that_answers_first)
{
	int64_t r0, r1;

	/* the routing alone, node 1 far slower than the noise of a busy CPU */
	start_written("hedge_after = 0\n", 61, 100);
	r0 = node_stat(0, "reads");
	r1 = node_stat(1, "reads");
	ck_assert_uint_eq(region_pages(61, false), 0);
	ck_assert_uint_eq(region_pages(61, false), 0);
	r0 = node_stat(0, "reads") - r0;
	r1 = node_stat(1, "reads") - r1;
	/* one copy always read first: each node would get half */
	ck_assert_int_gt(r0, 2 * r1);
	ck_assert_uint_eq(h->stats.sigbus, 0);
}
END_TEST

/*
 * With node 0's answers held, reads the region's windows in turn (each
 * long before op_timeout) until one was answered by a hedge while node
 * 0's read of it is held; returns that window's first chunk. (Node 0 is
 * sent a read once it is expected to answer first: at the latest when
 * its unsampled estimate has decayed.)
 */
static unsigned
read_until_hedged(uint64_t seed)
{
	for (unsigned i = 0; i < 16 * NCHUNK / WIN; i++) {
		unsigned w = i * WIN % NCHUNK;
		int64_t won = hedge_stat("won");
		int64_t out = node_stat(0, "reads_in_flight");
		uint64_t t0 = mono_ns();

		ck_assert_uint_eq(pages(w, WIN, seed, false), 0);
		ck_assert_uint_lt(mono_ns() - t0, 30ull * 1000000000u);
		if (hedge_stat("won") > won &&
		    node_stat(0, "reads_in_flight") > out)
			return w;
	}
	ck_abort_msg("no read of node 0 was hedged");
	return 0;
}

START_TEST(test_stalled_copy_is_read_from_the_other_long_before_op_timeout)
{
	uint64_t t0, took;
	int64_t reads1;

	start_written("", 31, 20);
	relays[0].hold = true; /* node 0 stalls */
	reads1 = node_stat(1, "reads");
	(void)read_until_hedged(31);
	t0 = mono_ns();
	ck_assert_uint_eq(region_pages(31, false), 0);
	took = mono_ns() - t0;
	ck_assert_uint_lt(took, 30ull * 1000000000u); /* op_timeout */
	ck_assert_int_gt(hedge_stat("sent"), 0);
	ck_assert_int_gt(node_stat(1, "reads"), reads1);
	/* once stuck, node 0 is passed over: it is not sent every read */
	ck_assert_int_lt(node_stat(0, "reads_in_flight"), NCHUNK / 4);
	ck_assert_uint_eq(h->stats.sigbus, 0);
	ck_assert(all_up());
	relay_release(&relays[0]);
	ck_assert(unit_run_until(base, settled, 20000));
	ck_assert_uint_eq(region_pages(31, false), 0);
	ck_assert(healthy());
	ck_assert_uint_eq(h->stats.fetch_errors, 0);
}
END_TEST

START_TEST(test_late_answer_of_a_hedged_read_installs_nothing)
{
	unsigned w;

	start_written("", 41, 20);
	relays[0].hold = true;
	w = read_until_hedged(41);
	/* the program writes the chunks just read while old data is out */
	ck_assert_uint_eq(pages(w, WIN, 42, true), 0);
	relay_release(&relays[0]);
	ck_assert(unit_run_until(base, settled, 20000));
	ck_assert_uint_eq(pages(w, WIN, 42, false), 0);
	for (unsigned v = 0; v < NCHUNK; v += WIN)
		ck_assert_uint_eq(pages(v, WIN, v == w ? 42 : 41, false), 0);
	ck_assert_uint_eq(pages(w, WIN, 42, false), 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
	ck_assert_uint_eq(h->stats.fetch_errors, 0);
}
END_TEST

/* Tells whether no fragment read of the region is out any more. */
static bool
ec_idle(void)
{
	return h->clients->regions->busy == 0;
}

START_TEST(test_ec_fragment_a_stalled_node_holds_is_replaced)
{
	uint64_t t0, hedges;

	start_nodes(3, "ec:2+1", "");
	ck_assert_uint_eq(region_pages(71, true), 0);
	ck_assert_uint_eq(region_pages(71, false), 0);
	hedges = h->stats.ec_hedges;
	relays[0].hold = true; /* its fragments do not come */
	t0 = mono_ns();
	ck_assert_uint_eq(region_pages(71, false), 0);
	ck_assert_uint_lt(mono_ns() - t0, 30ull * 1000000000u); /* op_timeout */
	ck_assert_uint_gt(h->stats.ec_hedges, hedges);
	ck_assert_uint_gt(h->stats.ec_hedges_won, 0);
	ck_assert_uint_gt(h->stats.ec_decodes, 0);
	relay_release(&relays[0]);
	ck_assert(unit_run_until(base, ec_idle, 20000)); /* late ones dropped */
	ck_assert_uint_eq(region_pages(71, false), 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
	ck_assert(healthy());
}
END_TEST

START_TEST(test_hedge_after_zero_hedges_nothing)
{
	start_written("hedge_after = 0\n", 51, 100);
	ck_assert_uint_eq(region_pages(51, false), 0);
	ck_assert_int_eq(hedge_stat("hedge_after_ms"), 0);
	ck_assert_int_eq(hedge_stat("sent"), 0);
	ck_assert_int_gt(node_stat(0, "reads"), node_stat(1, "reads"));
}
END_TEST

/* The suite's tests. */
static Suite *
host_hedge_suite(void)
{
	Suite *s = suite_create("host_hedge");
	TCase *l = tcase_create("loop");

	tcase_add_checked_fixture(l, NULL, teardown);
	tcase_set_timeout(l, 180);
	tcase_add_test(l, test_reads_go_to_the_copy_that_answers_first);
	tcase_add_test(l,
	    test_stalled_copy_is_read_from_the_other_long_before_op_timeout);
	tcase_add_test(l, test_late_answer_of_a_hedged_read_installs_nothing);
	tcase_add_test(l, test_ec_fragment_a_stalled_node_holds_is_replaced);
	tcase_add_test(l, test_hedge_after_zero_hedges_nothing);
	suite_add_tcase(s, l);
	return s;
}

/* Runs the suite; exits 0 when every test passed. */
int
main(void)
{
	SRunner *sr = srunner_create(host_hedge_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
