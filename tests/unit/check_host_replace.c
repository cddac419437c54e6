/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_host_replace.c - [host] replace_after (host-replace.c): a memory
 * role and a host role in this process on loopback, the host's memory
 * nodes that many sessions with that one role (a process has one memory
 * role), a second thread paging. A node out of reach past replace_after
 * has its copies moved to the node without a copy of their column, made
 * and rebuilt there: every byte readable when a second node goes; with no
 * such node, or replace_after = 0, nothing moves.
 * tests/e2e/host-replace.sh covers the same with memory famd processes
 * killed and stalled, and famtest.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"
#include "unit.h"

#define CHUNK  (64u << 10)
#define NCHUNK 48u /* 3 MiB through a 1 MiB buffer */

static struct event_base *base;
static struct unit_role memr, hostr;
static struct unit_prog prog;
static struct host *h;
static uint8_t *mem;
static unsigned nnodes;

/* Writes (or checks) the whole region with seed from a second thread. */
static uint64_t
pages(uint64_t seed, bool write)
{
	return unit_pages(base, mem, NCHUNK * CHUNK, seed, write);
}

/* Tells whether the host is connected to every memory node. */
static bool
all_up(void)
{
	for (unsigned i = 0; i < nnodes; i++)
		if (h->nodes[i].state != MN_UP)
			return false;
	return h->nnodes == nnodes;
}

/*
 * A memory role, a host with mode over n sessions with it (and keys,
 * more lines of [host]), a region on them.
 */
static void
start(unsigned n, const char *mode, const char *keys)
{
	const char *dir = unit_dir();
	char *a, *text, *list;
	char session[128];
	uint64_t handle;

	signal(SIGPIPE, SIG_IGN);
	log_open(LOG_DEST_STDERR, LOG_ERR);
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
	text = xasprintf("[famd]\nrole = memory\nnode_name = unit-memory\n"
	    "secret_file = %s/secret\nop_timeout = 1s\n"
	    "[memory]\nlisten = 127.0.0.1:0\ncapacity = 256M\n"
	    "preload_dir = %s\nsession_grace = 0\n", dir, dir);
	ck_assert_int_eq(unit_role_start(&memr, base, ROLE_MEMORY, text), 0);
	free(text);
	a = unit_role_listen(&memr, "memory");
	ck_assert_ptr_nonnull(a);
	list = xasprintf("%s", a);
	for (unsigned i = 1; i < n; i++) {
		char *more = xasprintf("%s, %s", list, a);

		free(list);
		list = more;
	}
	snprintf(session, sizeof session, "%s/session.sock", dir);
	text = xasprintf("[famd]\nrole = host\nnode_name = unit-host\n"
	    "secret_file = %s/secret\nop_timeout = 1s\n"
	    "[host]\nmemory_nodes = %s\nsession_socket = %s\n"
	    "arena_size = 1G\nbuffer_size = 1M\nchunk_size = 64K\n"
	    "prefetch = 0\nredundancy = %s\nreplace_after = 300ms\n%s", dir,
	    list, session, mode, keys);
	free(a);
	free(list);
	ck_assert_int_eq(unit_role_start(&hostr, base, ROLE_HOST, text), 0);
	free(text);
	h = hostr.d.role_state;
	nnodes = n;
	ck_assert(unit_run_until(base, all_up, 5000));
	ck_assert_int_eq(unit_prog_open(&prog, base, session), 0);
	ck_assert_int_eq(unit_prog_alloc(&prog, NCHUNK * CHUNK, &mem, &handle),
	    0);
}

/* Ends the session and stops the roles. */
static void
teardown(void)
{
	unit_prog_close(&prog);
	unit_role_stop(&hostr);
	unit_role_stop(&memr);
	if (base != NULL)
		event_base_free(base);
	base = NULL;
}

/* Returns the program's one region. */
static struct region *
region(void)
{
	ck_assert_ptr_nonnull(h->clients);
	ck_assert_ptr_nonnull(h->clients->regions);
	return h->clients->regions;
}

/* Tells whether the region's redundancy is healthy. */
static bool
healthy(void)
{
	uint64_t behind;

	return host_replica_state(h, region(), &behind) == HOST_RED_HEALTHY &&
	    behind == 0;
}

static unsigned gone_node;

/* Tells whether the host saw node gone_node go. */
static bool
node_down(void)
{
	return h->nodes[gone_node].state != MN_UP;
}

/* Takes memory node i out of the host's reach for good. */
static void
node_unreachable(unsigned i)
{
	free(h->nodes[i].addr);
	h->nodes[i].addr = strdup("127.0.0.1:1");
	ck_assert_ptr_nonnull(h->nodes[i].addr);
	fam_conn_close(h->nodes[i].conn);
	gone_node = i;
	ck_assert(unit_run_until(base, node_down, 5000));
}

/* Tells whether copies have moved. */
static bool
moved(void)
{
	return h->rp.moved > 0;
}

/* Tells whether copies are known to have nowhere to go. */
static bool
stuck(void)
{
	return h->rp.stuck > 0;
}

/* Returns the stripes of r on node n. */
static unsigned
on_node(const struct region *r, const struct mnode *n)
{
	unsigned k = 0;

	for (unsigned i = 0; i < r->nstripes; i++)
		k += r->stripes[i].node == n;
	return k;
}

START_TEST(test_copies_of_a_node_gone_move_and_serve_when_another_goes)
{
	struct region *r;

	start(3, "replicate:2", "");
	ck_assert_uint_eq(pages(21, true), 0);
	ck_assert_uint_eq(pages(22, true), 0);
	r = region();
	ck_assert_uint_eq(r->width, 3);
	ck_assert_uint_eq(on_node(r, &h->nodes[0]), 2);
	node_unreachable(0);
	ck_assert(unit_run_until(base, moved, 5000));
	ck_assert(unit_run_until(base, healthy, 20000));
	ck_assert_uint_eq(h->rp.moved, 2);
	ck_assert_uint_eq(on_node(r, &h->nodes[0]), 0);
	/* two copies of a column never on one node */
	for (unsigned col = 0; col < r->width; col++)
		ck_assert_ptr_ne(r->stripes[col].node,
		    r->stripes[r->width + col].node);
	ck_assert_uint_gt(h->rb.done, 0);
	/* node 1 goes too: column 0 is only where its copy moved */
	node_unreachable(1);
	ck_assert_uint_eq(pages(22, false), 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
	ck_assert(unit_run_until(base, stuck, 5000));
	ck_assert_uint_eq(h->rp.moved, 2);
}
END_TEST

START_TEST(test_fragments_of_a_node_gone_move_to_the_fourth)
{
	struct region *r;

	start(4, "ec:2+1", "");
	ck_assert_uint_eq(pages(31, true), 0);
	ck_assert_uint_eq(pages(32, true), 0);
	r = region();
	node_unreachable(2);
	ck_assert(unit_run_until(base, moved, 5000));
	ck_assert(unit_run_until(base, healthy, 20000));
	ck_assert_uint_eq(on_node(r, &h->nodes[2]), 0);
	for (unsigned col = 0; col < r->width; col++)
		for (unsigned a = 0; a < r->ncopies; a++)
			for (unsigned b = a + 1; b < r->ncopies; b++)
				ck_assert_ptr_ne(r->stripes[a * r->width +
				    col].node, r->stripes[b * r->width +
				    col].node);
	node_unreachable(0);
	ck_assert_uint_eq(pages(32, false), 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
}
END_TEST

START_TEST(test_copies_with_no_node_to_take_them_stay)
{
	struct region *r;
	uint64_t behind;

	start(2, "replicate:2", "");
	ck_assert_uint_eq(pages(41, true), 0);
	r = region();
	node_unreachable(0);
	ck_assert(unit_run_until(base, stuck, 5000));
	ck_assert_uint_eq(h->rp.moved, 0);
	ck_assert_uint_eq(on_node(r, &h->nodes[0]), 2);
	ck_assert_int_eq(host_replica_state(h, r, &behind), HOST_RED_DEGRADED);
	ck_assert_uint_eq(pages(41, false), 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
}
END_TEST

/* Never true: unit_run_until() with it runs the loop for its time. */
static bool
never(void)
{
	return false;
}

START_TEST(test_replace_after_zero_never_moves)
{
	struct region *r;

	start(3, "replicate:2", "");
	hostr.cfg.v[CFG_HOST_REPLACE_AFTER].i = 0; /* as a reload does */
	ck_assert_uint_eq(pages(51, true), 0);
	r = region();
	node_unreachable(0);
	ck_assert(!unit_run_until(base, never, 1500));
	ck_assert_uint_eq(h->rp.moved, 0);
	ck_assert_uint_eq(h->rp.stuck, 0);
	ck_assert_uint_eq(on_node(r, &h->nodes[0]), 2);
	/* back to 300 ms: they move */
	hostr.cfg.v[CFG_HOST_REPLACE_AFTER].i = 300;
	ck_assert(unit_run_until(base, moved, 5000));
	ck_assert(unit_run_until(base, healthy, 20000));
	ck_assert_uint_eq(pages(51, false), 0);
}
END_TEST

/* The suite's tests. */
static Suite *
host_replace_suite(void)
{
	Suite *s = suite_create("host_replace");
	TCase *l = tcase_create("loop");

	tcase_add_checked_fixture(l, NULL, teardown);
	tcase_set_timeout(l, 120);
	tcase_add_test(l,
	    test_copies_of_a_node_gone_move_and_serve_when_another_goes);
	tcase_add_test(l, test_fragments_of_a_node_gone_move_to_the_fourth);
	tcase_add_test(l, test_copies_with_no_node_to_take_them_stay);
	tcase_add_test(l, test_replace_after_zero_never_moves);
	suite_add_tcase(s, l);
	return s;
}

/* Runs the suite; exits 0 when every test passed. */
int
main(void)
{
	SRunner *sr = srunner_create(host_replace_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
