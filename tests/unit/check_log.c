/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_log.c - famd's log (base/log.c): the rate limit of per-event lines
 * (log_rl, log_rate_msg), with the log written to a pipe read here.
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"

static int saved_stderr = -1, pipe_rd = -1;

/* Sends the log (stderr) into a pipe. */
static void
setup(void)
{
	int p[2];

	ck_assert_int_eq(pipe2(p, O_NONBLOCK), 0);
	fflush(stderr);
	saved_stderr = dup(STDERR_FILENO);
	dup2(p[1], STDERR_FILENO);
	close(p[1]);
	pipe_rd = p[0];
	log_open(LOG_DEST_STDERR, LOG_INFO);
}

/* Gives stderr back. */
static void
teardown(void)
{
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	close(pipe_rd);
}

/* Reads what the log wrote since the last call; counts lines with what. */
static unsigned
lines_with(const char *what)
{
	static char buf[1 << 16];
	ssize_t n = read(pipe_rd, buf, sizeof buf - 1);
	unsigned count = 0;

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	for (char *p = buf; (p = strstr(p, what)) != NULL; p++)
		count++;
	return count;
}

START_TEST(test_flood_of_one_event_writes_a_burst_then_a_count)
{
	struct log_rate rl = { 0 };
	struct timespec ts = { .tv_sec = 1, .tv_nsec = 50000000 };

	for (int i = 0; i < 1000; i++)
		log_rate_msg(&rl, LOG_WARNING, "fault %d", i);
	ck_assert_uint_eq(lines_with("fault "), LOG_RATE_BURST);
	nanosleep(&ts, NULL);
	log_rate_msg(&rl, LOG_WARNING, "fault again");
	ck_assert_uint_eq(lines_with("990 more messages like the next left "
	    "out"), 1);
}
END_TEST

START_TEST(test_each_call_site_has_its_own_limit)
{
	for (int i = 0; i < 100; i++) {
		log_rl(LOG_WARNING, "site one");
		log_rl(LOG_WARNING, "site two");
	}
	ck_assert_uint_eq(lines_with("site "), 2 * LOG_RATE_BURST);
}
END_TEST

START_TEST(test_lines_below_the_level_are_not_counted)
{
	struct log_rate rl = { 0 };

	for (int i = 0; i < 100; i++)
		log_rate_msg(&rl, LOG_DEBUG, "debug %d", i);
	ck_assert_uint_eq(rl.dropped, 0);
	ck_assert_uint_eq(lines_with("debug "), 0);
}
END_TEST

/* The suite. */
static Suite *
log_suite(void)
{
	Suite *s = suite_create("log");
	TCase *t = tcase_create("rate");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 10);
	tcase_add_test(t, test_flood_of_one_event_writes_a_burst_then_a_count);
	tcase_add_test(t, test_each_call_site_has_its_own_limit);
	tcase_add_test(t, test_lines_below_the_level_are_not_counted);
	suite_add_tcase(s, t);
	return s;
}

/* Runs the suite. */
int
main(void)
{
	SRunner *sr = srunner_create(log_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
