/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_host_path.c - the host's path (host-path.c): a memory role, a dpu
 * role and a host role in this process on loopback, the suite the program
 * paging through a second thread. Switching the path under writes loses
 * and reorders nothing; with the dpu gone the host goes direct (fallback
 * = direct). tests/e2e/dpu-path.sh covers the same with famtest's
 * patterns, a killed dpu process and its return.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"
#include "unit.h"

#define CHUNK  (64u << 10)
#define NCHUNK 48u /* 3 MiB through a 1 MiB buffer */

static struct unit_famds u;
static struct unit_prog prog;
static struct host *h;
static uint8_t *mem;

/* Writes (or checks) the whole region with seed from a second thread. */
static uint64_t
pages(uint64_t seed, bool write)
{
	return unit_pages(u.base, mem, NCHUNK * CHUNK, seed, write);
}

/* Starts the three roles (host_keys for the host) and allocates a region. */
static void
start(const char *host_keys)
{
	uint64_t handle;

	ck_assert_int_eq(unit_famds_start_dpu(&u, host_keys), 0);
	h = unit_famds_host(&u);
	ck_assert_int_eq(unit_prog_open(&prog, u.base, u.session), 0);
	ck_assert_int_eq(unit_prog_alloc(&prog, NCHUNK * CHUNK, &mem, &handle),
	    0);
}

/* Ends the session and stops the roles. */
static void
teardown(void)
{
	unit_prog_close(&prog);
	unit_famds_stop(&u);
}

/* Tells whether no stripe of any region is switching or busy. */
static bool
stripes_idle(void)
{
	for (struct region *r = h->clients->regions; r != NULL; r = r->next)
		for (unsigned i = 0; i < r->nstripes; i++)
			if (r->stripes[i].switching || r->stripes[i].inflight)
				return false;
	return h->writebacks_inflight == 0;
}

START_TEST(test_path_dpu_sends_reads_and_writebacks_through_it)
{
	start("path = dpu\n");
	ck_assert_uint_eq(pages(11, true), 0);
	ck_assert_uint_eq(pages(11, false), 0);
	ck_assert_uint_gt(h->stats.ops_dpu, 0);
	ck_assert_uint_eq(h->stats.ops_direct, 0);
	ck_assert_uint_gt(h->stats.writebacks, 0);
	ck_assert_uint_gt(h->stats.fetches, 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
}
END_TEST

START_TEST(test_stripe_waits_while_switching_then_takes_the_new_path)
{
	struct stripe *s;
	struct fam_conn *conn;
	struct fam_mr *mr;
	const struct fam_remote *remote;

	start("path = dpu\n");
	ck_assert_uint_eq(pages(5, true), 0);
	ck_assert(unit_run_until(u.base, stripes_idle, 5000));
	s = &h->clients->regions->stripes[0];
	ck_assert_uint_eq(s->path, SP_DPU);
	host_path_set(h, CFG_PATH_DIRECT, "test");
	/* the fence on the memory node is out: requests wait */
	ck_assert(s->switching);
	ck_assert_int_eq(host_route(h, s, false, &conn, &mr, &remote),
	    -EAGAIN);
	ck_assert(unit_run_until(u.base, stripes_idle, 5000));
	ck_assert_uint_eq(s->path, SP_DIRECT);
	ck_assert_int_eq(host_route(h, s, false, &conn, &mr, &remote), 0);
	ck_assert_ptr_eq(conn, h->nodes[0].conn);
	host_route_done(h, s);
	ck_assert_uint_eq(h->stats.fences, 1);
	/* and back: a fresh hand-over to the dpu */
	host_path_set(h, CFG_PATH_DPU, "test");
	ck_assert(s->switching);
	ck_assert(unit_run_until(u.base, stripes_idle, 5000));
	ck_assert_uint_eq(s->path, SP_DPU);
	ck_assert_int_eq(host_route(h, s, true, &conn, &mr, &remote), 0);
	ck_assert(conn == h->dpu.conn || conn == h->dpu.bg);
	host_route_done(h, s);
	ck_assert_uint_eq(h->stats.handovers, 1);
	ck_assert_uint_eq(h->stats.switch_errors, 0);
	ck_assert_uint_eq(pages(5, false), 0);
}
END_TEST

/* Flips the path, as path.set does, every few milliseconds. */
static void
flip_cb(evutil_socket_t fd, short what, void *arg)
{
	unsigned *n = arg;

	host_path_set(h, ++*n % 2 ? CFG_PATH_DIRECT : CFG_PATH_DPU, "test");
}

START_TEST(test_switching_paths_under_writes_loses_no_write)
{
	unsigned flips = 0;
	struct event *flip;
	struct timeval tv = { 0, 10000 };
	uint64_t seed;

	start("path = dpu\n");
	flip = event_new(u.base, -1, EV_PERSIST, flip_cb, &flips);
	ck_assert_ptr_nonnull(flip);
	event_add(flip, &tv);
	/* whole rounds of writes while the path flips, 8 flips at least */
	for (seed = 1; seed <= 4 || (flips < 8 && seed <= 200); seed++)
		ck_assert_uint_eq(pages(seed, true), 0);
	event_free(flip);
	ck_assert_uint_eq(pages(seed - 1, false), 0);
	ck_assert_uint_ge(flips, 8);
	ck_assert_uint_gt(h->stats.fences, 0);
	ck_assert_uint_gt(h->stats.handovers, 0);
	ck_assert_uint_gt(h->stats.ops_direct, 0);
	ck_assert_uint_gt(h->stats.ops_dpu, 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
	ck_assert_uint_eq(h->stats.fetch_errors, 0);
	ck_assert_uint_eq(h->stats.writeback_errors, 0);
}
END_TEST

START_TEST(test_dpu_down_falls_back_to_direct)
{
	uint64_t direct;

	start("path = dpu\nfallback = direct\n");
	ck_assert_uint_eq(pages(21, true), 0);
	ck_assert_uint_gt(h->stats.ops_dpu, 0);
	direct = h->stats.ops_direct;
	unit_role_stop(&u.dpu);
	ck_assert_uint_eq(pages(21, false), 0);
	ck_assert_uint_eq(pages(22, true), 0);
	ck_assert_uint_eq(pages(22, false), 0);
	ck_assert_uint_gt(h->stats.ops_direct, direct);
	ck_assert_uint_ne(h->dpu.state, MN_UP);
	ck_assert_uint_eq(h->stats.sigbus, 0);
}
END_TEST

/* The suite's tests. */
static Suite *
host_path_suite(void)
{
	Suite *s = suite_create("host_path");
	TCase *t = tcase_create("path");

	tcase_add_checked_fixture(t, NULL, teardown);
	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_path_dpu_sends_reads_and_writebacks_through_it);
	tcase_add_test(t,
	    test_stripe_waits_while_switching_then_takes_the_new_path);
	tcase_add_test(t, test_switching_paths_under_writes_loses_no_write);
	tcase_add_test(t, test_dpu_down_falls_back_to_direct);
	suite_add_tcase(s, t);
	return s;
}

/* Runs the suite; exits 0 when every test passed. */
int
main(void)
{
	SRunner *sr = srunner_create(host_path_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
