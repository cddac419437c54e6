/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_extent.c - an arena's free list (host-extent.c): taking aligned
 * ranges, giving them back in any order, merging, running out.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>

#include "host/host.h"

/* Returns how many extents the list has. */
static int
count(const struct extent *e)
{
	int n = 0;

	for (; e != NULL; e = e->next)
		n++;
	return n;
}

/* A list holding one extent of len chunks. */
static struct extent *
whole(uint64_t len)
{
	struct extent *list = NULL;

	ck_assert_int_eq(host_extent_give(&list, 0, len), 0);
	return list;
}

START_TEST(test_take_in_order_until_full)
{
	struct extent *list = whole(16);

	ck_assert_int_eq(host_extent_take(&list, 4, 1), 0);
	ck_assert_int_eq(host_extent_take(&list, 4, 1), 4);
	ck_assert_int_eq(host_extent_take(&list, 8, 1), 8);
	ck_assert_ptr_null(list);
	ck_assert_int_eq(host_extent_take(&list, 1, 1), -1);
}
END_TEST

START_TEST(test_alignment_leaves_the_padding_free)
{
	struct extent *list = whole(16);

	ck_assert_int_eq(host_extent_take(&list, 1, 1), 0);
	ck_assert_int_eq(host_extent_take(&list, 4, 4), 4);
	/* Chunks 1 to 3 stay free, before the rest. */
	ck_assert_int_eq(count(list), 2);
	ck_assert_uint_eq(list->off, 1);
	ck_assert_uint_eq(list->len, 3);
	ck_assert_int_eq(host_extent_take(&list, 3, 1), 1);
	ck_assert_int_eq(host_extent_take(&list, 8, 8), 8);
	ck_assert_int_eq(host_extent_take(&list, 1, 1), -1);
	host_extent_free(&list);
}
END_TEST

START_TEST(test_give_back_in_any_order_merges)
{
	struct extent *list = whole(12);

	ck_assert_int_eq(host_extent_take(&list, 4, 1), 0);
	ck_assert_int_eq(host_extent_take(&list, 4, 1), 4);
	ck_assert_int_eq(host_extent_take(&list, 4, 1), 8);
	ck_assert_int_eq(host_extent_give(&list, 8, 4), 0);
	ck_assert_int_eq(host_extent_give(&list, 0, 4), 0);
	ck_assert_int_eq(count(list), 2);
	/* The middle joins both neighbours into the whole arena. */
	ck_assert_int_eq(host_extent_give(&list, 4, 4), 0);
	ck_assert_int_eq(count(list), 1);
	ck_assert_uint_eq(list->off, 0);
	ck_assert_uint_eq(list->len, 12);
	host_extent_free(&list);
	ck_assert_ptr_null(list);
}
END_TEST

START_TEST(test_too_large_or_misaligned_refused)
{
	struct extent *list = whole(16);

	ck_assert_int_eq(host_extent_take(&list, 17, 1), -1);
	ck_assert_int_eq(host_extent_take(&list, 16, 32), 0);
	ck_assert_int_eq(host_extent_give(&list, 0, 16), 0);
	ck_assert_int_eq(host_extent_take(&list, 2, 1), 0);
	ck_assert_int_eq(host_extent_take(&list, 14, 4), -1);
	ck_assert_int_eq(host_extent_take(&list, 14, 1), 2);
	host_extent_free(&list);
}
END_TEST

static Suite *
extent_suite(void)
{
	Suite *s = suite_create("extent");
	TCase *t = tcase_create("free_list");

	tcase_add_test(t, test_take_in_order_until_full);
	tcase_add_test(t, test_alignment_leaves_the_padding_free);
	tcase_add_test(t, test_give_back_in_any_order_merges);
	tcase_add_test(t, test_too_large_or_misaligned_refused);
	suite_add_tcase(s, t);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(extent_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
