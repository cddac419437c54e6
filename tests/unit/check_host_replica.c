/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_host_replica.c - replicate:N (host-replica.c): where the copies
 * of a column live, the stale bits and the redundancy state they give;
 * then a memory role and a host role with replicate:2 in this process on
 * loopback, the host's two memory nodes two sessions with that one role
 * (a process has one memory role), a second thread paging: write-backs
 * reach both copies, a copy behind is not read and is rebuilt, a node out
 * of reach leaves every byte readable from the other; with write_quorum
 * = 1, a copy whose write is still out after the write-back was
 * acknowledged is stale until it lands, and if it fails, until rebuilt.
 * tests/e2e/host-replicate.sh covers the same with memory famd processes
 * killed and started again empty, and famtest.
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

START_TEST(test_copies_of_a_column_are_on_distinct_nodes)
{
	for (unsigned nnodes = 2; nnodes <= HOST_MAX_NODES; nnodes++)
		for (unsigned copies = 2; copies <= nnodes; copies++)
			for (unsigned col = 0; col < nnodes; col++) {
				uint32_t seen = 0;

				ck_assert_uint_eq(host_replica_node(col, 0,
				    nnodes), col);
				for (unsigned k = 0; k < copies; k++) {
					unsigned n = host_replica_node(col, k,
					    nnodes);

					ck_assert_uint_lt(n, nnodes);
					ck_assert(!(seen & (1u << n)));
					seen |= 1u << n;
				}
			}
}
END_TEST

START_TEST(test_redundancy_parses_none_and_replicate_only)
{
	unsigned copies = 0;

	ck_assert_int_eq(cfg_redundancy_parse("none", &copies), 0);
	ck_assert_uint_eq(copies, 1);
	ck_assert_int_eq(cfg_redundancy_parse("replicate:2", &copies), 0);
	ck_assert_uint_eq(copies, 2);
	ck_assert_int_eq(cfg_redundancy_parse("replicate:16", &copies), 0);
	ck_assert_uint_eq(copies, 16);
	ck_assert_int_eq(cfg_redundancy_parse("replicate:1", &copies), -EINVAL);
	ck_assert_int_eq(cfg_redundancy_parse("replicate:17", &copies),
	    -EINVAL);
	ck_assert_int_eq(cfg_redundancy_parse("replicate:", &copies), -EINVAL);
	ck_assert_int_eq(cfg_redundancy_parse("replicate:-2", &copies),
	    -EINVAL);
	ck_assert_int_eq(cfg_redundancy_parse("replicate:2x", &copies),
	    -EINVAL);
	ck_assert_int_eq(cfg_redundancy_parse("ec:2+1", &copies), -EINVAL);
	ck_assert_int_eq(cfg_redundancy_parse("", &copies), -EINVAL);
}
END_TEST

START_TEST(test_stale_bits_count_each_row_once)
{
	uint64_t bits[3] = { 0 };
	struct stripe s = { .stale = bits, .remote = { .size = CHUNK } };

	ck_assert(host_replica_valid(&s, 70));
	host_stale_set(&s, 70);
	host_stale_set(&s, 70);
	host_stale_set(&s, 0);
	host_stale_set(&s, 129);
	ck_assert_uint_eq(s.nstale, 3);
	ck_assert(!host_replica_valid(&s, 70));
	ck_assert(host_replica_valid(&s, 71));
	host_stale_clear(&s, 70);
	host_stale_clear(&s, 70);
	host_stale_clear(&s, 5);
	ck_assert_uint_eq(s.nstale, 2);
	ck_assert(host_replica_valid(&s, 70));
	s.gone = true;
	ck_assert(!host_replica_valid(&s, 70));
}
END_TEST

START_TEST(test_unreplicated_stripe_has_no_stale_bits)
{
	struct stripe s = { .remote = { .size = CHUNK } };

	host_stale_set(&s, 3);
	ck_assert_uint_eq(s.nstale, 0);
	ck_assert(host_replica_valid(&s, 3));
}
END_TEST

/* Writes (or checks) the whole region with seed from a second thread. */
static uint64_t
pages(uint64_t seed, bool write)
{
	return unit_pages(base, mem, NCHUNK * CHUNK, seed, write);
}

/* Starts a memory role on a loopback port; returns its address. */
static char *
start_memory(struct unit_role *ur, const char *name)
{
	const char *dir = unit_dir();
	char *text = xasprintf("[famd]\nrole = memory\nnode_name = %s\n"
	    "secret_file = %s/secret\nop_timeout = 1s\n"
	    "[memory]\nlisten = 127.0.0.1:0\ncapacity = 256M\n"
	    "preload_dir = %s\nsession_grace = 0\n", name, dir, dir);
	char *addr;

	ck_assert_int_eq(unit_role_start(ur, base, ROLE_MEMORY, text), 0);
	free(text);
	addr = unit_role_listen(ur, "memory");
	ck_assert_ptr_nonnull(addr);
	return addr;
}

/* Tells whether the host is connected to both memory nodes. */
static bool
both_up(void)
{
	return h->nnodes == 2 && h->nodes[0].state == MN_UP &&
	    h->nodes[1].state == MN_UP;
}

/*
 * A memory role, a host with replicate:2 on two sessions with it (and
 * keys, more lines of [host]), a region on them.
 */
static void
start(const char *keys)
{
	const char *dir = unit_dir();
	char *a, *text;
	char session[128];
	uint64_t handle;

	signal(SIGPIPE, SIG_IGN);
	log_open(LOG_DEST_STDERR, LOG_ERR);
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
	a = start_memory(&memr, "unit-memory");
	snprintf(session, sizeof session, "%s/session.sock", dir);
	text = xasprintf("[famd]\nrole = host\nnode_name = unit-host\n"
	    "secret_file = %s/secret\nop_timeout = 1s\n"
	    "[host]\nmemory_nodes = %s, %s\nsession_socket = %s\n"
	    "arena_size = 1G\nbuffer_size = 1M\nchunk_size = 64K\n"
	    "prefetch = 0\nredundancy = replicate:2\n%s", dir, a, a, session,
	    keys);
	free(a);
	ck_assert_int_eq(unit_role_start(&hostr, base, ROLE_HOST, text), 0);
	free(text);
	h = hostr.d.role_state;
	ck_assert(unit_run_until(base, both_up, 5000));
	ck_assert_uint_eq(h->copies, 2);
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

/* Tells whether every region's redundancy is healthy again. */
static bool
healthy(void)
{
	uint64_t behind;

	return host_replica_state(h, region(), &behind) == HOST_RED_HEALTHY &&
	    behind == 0;
}

START_TEST(test_region_has_two_copies_on_distinct_nodes)
{
	struct region *r;

	start("");
	r = region();
	ck_assert_uint_eq(r->ncopies, 2);
	ck_assert_uint_eq(r->width, 2);
	ck_assert_uint_eq(r->nstripes, 4);
	for (unsigned col = 0; col < r->width; col++) {
		ck_assert_ptr_eq(r->stripes[col].node, &h->nodes[col]);
		ck_assert_ptr_eq(r->stripes[r->width + col].node,
		    &h->nodes[(col + 1) % 2]);
		ck_assert_uint_eq(r->stripes[col].remote.size,
		    r->stripes[r->width + col].remote.size);
	}
}
END_TEST

START_TEST(test_writeback_reaches_every_copy)
{
	uint64_t bytes0;

	start("");
	bytes0 = h->stats.writeback_bytes;
	ck_assert_uint_eq(pages(7, true), 0);
	ck_assert_uint_eq(pages(7, false), 0);
	ck_assert_uint_gt(h->stats.writebacks, 0);
	/* each write-back is written twice: once per copy */
	ck_assert_uint_eq(h->stats.writeback_bytes - bytes0,
	    2 * h->stats.writebacks * CHUNK);
	ck_assert(healthy());
}
END_TEST

START_TEST(test_stale_copy_is_not_read_and_is_rebuilt)
{
	struct region *r;
	uint64_t rebuilt;

	uint64_t failovers;

	/* 4K/s: not one chunk rebuilt in the first 16 s */
	start("rebuild_rate = 4K\n");
	ck_assert_uint_eq(pages(11, true), 0);
	ck_assert_uint_eq(pages(12, true), 0); /* seed 11 written back */
	r = region();
	/* the first copy of every column falls behind: it still has 11 */
	for (unsigned col = 0; col < r->width; col++)
		for (uint64_t row = 0; row < host_replica_rows(h, r, col); row++)
			host_stale_set(&r->stripes[col], row);
	rebuilt = h->rb.done;
	failovers = h->stats.replica_failovers;
	ck_assert(!healthy());
	ck_assert_uint_eq(pages(12, false), 0); /* read from the second */
	ck_assert_uint_gt(h->stats.replica_failovers, failovers);
	ck_assert_uint_eq(h->rb.done, rebuilt);
	/* as a reload does: faster */
	hostr.cfg.v[CFG_HOST_REBUILD_RATE].i = 64 << 20;
	ck_assert(unit_run_until(base, healthy, 10000));
	ck_assert_uint_gt(h->rb.done, rebuilt);
	ck_assert_uint_eq(pages(12, false), 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
}
END_TEST

/* Tells whether the host saw node 0 go. */
static bool
node0_down(void)
{
	return h->nodes[0].state != MN_UP;
}

/* Tells whether the host saw node 1 go. */
static bool
node1_down(void)
{
	return h->nodes[1].state != MN_UP;
}

/*
 * Takes memory node i out of the host's reach: its connection closed, its
 * address a dead one; returns the old address.
 */
static char *
node_unreachable(unsigned i)
{
	char *addr = h->nodes[i].addr;

	h->nodes[i].addr = strdup("127.0.0.1:1");
	ck_assert_ptr_nonnull(h->nodes[i].addr);
	fam_conn_close(h->nodes[i].conn);
	ck_assert(unit_run_until(base, i == 0 ? node0_down : node1_down,
	    5000));
	return addr;
}

START_TEST(test_reads_go_to_the_other_copy_when_a_node_is_out_of_reach)
{
	uint64_t behind;

	start("");
	ck_assert_uint_eq(pages(13, true), 0);
	ck_assert_uint_eq(pages(13, false), 0);
	free(node_unreachable(0));
	ck_assert_uint_eq(pages(13, false), 0);
	ck_assert_uint_gt(h->stats.replica_failovers, 0);
	ck_assert_uint_eq(pages(14, true), 0);
	ck_assert_uint_eq(pages(14, false), 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
	ck_assert_int_eq(host_replica_state(h, region(), &behind),
	    HOST_RED_DEGRADED);
	ck_assert_uint_gt(behind, 0); /* the write-backs it missed */
}
END_TEST

START_TEST(test_copy_whose_session_ended_is_made_again_and_rebuilt)
{
	char *addr;
	uint64_t made;

	start("");
	ck_assert_uint_eq(pages(15, true), 0);
	ck_assert_uint_eq(pages(16, true), 0);
	/* session_grace = 0: node 0's regions go with our session there */
	addr = node_unreachable(0);
	ck_assert_uint_eq(pages(17, true), 0);
	made = h->rb.recreated;
	free(h->nodes[0].addr);
	h->nodes[0].addr = addr; /* back: the same instance, a new session */
	ck_assert(unit_run_until(base, both_up, 10000));
	ck_assert(unit_run_until(base, healthy, 20000));
	ck_assert_uint_gt(h->rb.recreated, made);
	/* now only node 0's copies, made again and rebuilt, are left */
	free(node_unreachable(1));
	ck_assert_uint_eq(pages(17, false), 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
}
END_TEST

static uint64_t touch_seed;

/* Writes unit_pages' pattern of touch_seed over the region at arg. */
static void
touch_write(void *arg)
{
	volatile uint8_t *p = arg;

	for (uint64_t off = 0; off < NCHUNK * CHUNK; off += 4096)
		*(volatile uint64_t *)(p + off) =
		    (off * 0x9e3779b97f4a7c15ull) ^ touch_seed;
}

/* Tells whether a write-back is late (acknowledged, a write still out). */
static bool
late_out(void)
{
	return h->nlate > 0;
}

/* Tells whether no write-back is late. */
static bool
none_late(void)
{
	return h->nlate == 0;
}

/*
 * Checks each chunk of r whose write-back is late: exactly one copy stale
 * (the one being written), and a read routed to the other. Returns the
 * memory node of a late copy (or 2: none).
 */
static unsigned
late_copies_stale(struct region *r)
{
	unsigned node = 2;

	for (uint64_t c = 0; c < r->nchunks; c++) {
		unsigned col = (unsigned)(c % r->width), stale = 0;
		uint64_t row = c / r->width;
		struct stripe *s;
		struct fam_conn *conn;
		struct fam_mr *mr;
		const struct fam_remote *remote;

		if (r->chunks[c].late == 0)
			continue;
		for (unsigned k = 0; k < r->ncopies; k++) {
			s = &r->stripes[k * r->width + col];
			if (host_stale_test(s, row)) {
				stale++;
				node = s->node->index;
			}
		}
		ck_assert_uint_eq(stale, 1);
		ck_assert_int_eq(host_chunk_route(h, r, c, true, &s, &conn, &mr,
		    &remote), 0);
		ck_assert(!host_stale_test(s, row));
		host_route_done(h, s);
	}
	return node;
}

START_TEST(test_late_copy_is_stale_until_its_write_lands)
{
	struct unit_touch t;
	unsigned node;

	start("write_quorum = 1\n");
	ck_assert_uint_eq(h->write_quorum, 1);
	ck_assert_uint_eq(pages(21, true), 0);
	ck_assert_uint_eq(pages(21, false), 0);
	/* the first copy to answer acknowledges, the other lands later */
	ck_assert_uint_gt(h->stats.writebacks_early, 0);
	ck_assert(unit_run_until(base, none_late, 10000));
	ck_assert(healthy()); /* their writes made them up to date */
	ck_assert_uint_eq(h->rb.done, 0);
	/*
	 * Node 1's write-backs go unanswered (the host reads nothing more
	 * of its background connection): they are late, their copies stale
	 * and not read meanwhile.
	 */
	ck_assert_ptr_nonnull(h->nodes[1].bg);
	ck_assert_int_eq(fam_conn_throttle(h->nodes[1].bg, true), 0);
	touch_seed = 22;
	ck_assert_int_eq(unit_touch_start(&t, touch_write, mem), 0);
	ck_assert(unit_run_until(base, late_out, 10000));
	node = late_copies_stale(region());
	ck_assert_uint_eq(node, 1);
	/* that late write fails: the copy stays stale, the rebuild mends it */
	fam_conn_close(h->nodes[node].conn);
	ck_assert(unit_touch_wait(base, &t, 60000));
	ck_assert(!t.sigbus);
	ck_assert_uint_gt(h->stats.late_failed, 0);
	ck_assert(unit_run_until(base, both_up, 10000));
	ck_assert(unit_run_until(base, healthy, 20000));
	ck_assert_uint_eq(pages(22, false), 0);
	/* the other node out of reach: read from the copies mended */
	free(node_unreachable(1 - node));
	ck_assert_uint_eq(pages(22, false), 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
}
END_TEST

/* The suite's tests. */
static Suite *
host_replica_suite(void)
{
	Suite *s = suite_create("host_replica");
	TCase *t = tcase_create("bookkeeping");
	TCase *l = tcase_create("loop");

	tcase_add_test(t, test_copies_of_a_column_are_on_distinct_nodes);
	tcase_add_test(t, test_redundancy_parses_none_and_replicate_only);
	tcase_add_test(t, test_stale_bits_count_each_row_once);
	tcase_add_test(t, test_unreplicated_stripe_has_no_stale_bits);
	suite_add_tcase(s, t);
	tcase_add_checked_fixture(l, NULL, teardown);
	tcase_set_timeout(l, 120);
	tcase_add_test(l, test_region_has_two_copies_on_distinct_nodes);
	tcase_add_test(l, test_writeback_reaches_every_copy);
	tcase_add_test(l, test_stale_copy_is_not_read_and_is_rebuilt);
	tcase_add_test(l,
	    test_reads_go_to_the_other_copy_when_a_node_is_out_of_reach);
	tcase_add_test(l, test_copy_whose_session_ended_is_made_again_and_rebuilt);
	tcase_add_test(l, test_late_copy_is_stale_until_its_write_lands);
	suite_add_tcase(s, l);
	return s;
}

/* Runs the suite; exits 0 when every test passed. */
int
main(void)
{
	SRunner *sr = srunner_create(host_replica_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
