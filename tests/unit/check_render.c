/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_render.c - famctl's renderer: what a person sees for each shape of
 * answer famd sends.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/famctl.h"
#include "core/famd.h"

/* Renders the JSON text and returns what famctl would print. */
static char *
render(const char *json)
{
	json_t *j = json_loads(json, JSON_DECODE_ANY, NULL);
	char *out;
	size_t len;
	FILE *f = open_memstream(&out, &len);

	ck_assert_ptr_nonnull(j);
	render_value(f, j, 0);
	fclose(f);
	json_decref(j);
	return out;
}

START_TEST(test_object_keys_aligned)
{
	char *out = render("{\"role\":\"memory\",\"node_name\":\"m1\"}");

	ck_assert_str_eq(out, "role       memory\nnode_name  m1\n");
	free(out);
}
END_TEST

START_TEST(test_nested_object_indented)
{
	char *out = render("{\"admin\":{\"clients\":2},\"counters\":{}}");

	ck_assert_str_eq(out, "admin:\n  clients  2\ncounters:\n  (none)\n");
	free(out);
}
END_TEST

START_TEST(test_bytes_humanised_with_exact_value)
{
	char *out = render("{\"buffer_bytes\":1610612736,\"small_bytes\":12}");

	ck_assert_str_eq(out, "buffer_bytes  1.5 GiB (1610612736)\n"
	    "small_bytes   12\n");
	free(out);
}
END_TEST

START_TEST(test_uptime_as_duration)
{
	char *out = render("{\"uptime\":3725.5}");

	ck_assert_str_eq(out, "uptime  1h 2m 5s\n");
	free(out);
	out = render("{\"uptime\":2.25}");
	ck_assert_str_eq(out, "uptime  2.2s\n");
	free(out);
}
END_TEST

START_TEST(test_array_of_objects_is_table)
{
	char *out = render("{\"peers\":[{\"name\":\"mem1\",\"state\":\"up\"},"
	    "{\"name\":\"m2\",\"state\":\"connecting\"}]}");

	ck_assert_str_eq(out, "peers:\n"
	    "  name  state\n"
	    "  mem1  up\n"
	    "  m2    connecting\n");
	free(out);
}
END_TEST

START_TEST(test_empty_array_says_none)
{
	char *out = render("{\"peers\":[]}");

	ck_assert_str_eq(out, "peers  (none)\n");
	free(out);
}
END_TEST

START_TEST(test_scalars)
{
	char *out = render("{\"a\":true,\"b\":false,\"c\":null,\"d\":-3}");

	ck_assert_str_eq(out, "a  yes\nb  no\nc  -\nd  -3\n");
	free(out);
	out = render("[\"x\",2]");
	ck_assert_str_eq(out, "x\n2\n");
	free(out);
}
END_TEST

START_TEST(test_table_missing_cells)
{
	char *out = render("[{\"a\":1,\"b\":2},{\"a\":3}]");

	ck_assert_str_eq(out, "a  b\n1  2\n3  -\n");
	free(out);
}
END_TEST

static Suite *
render_suite(void)
{
	Suite *s = suite_create("render");
	TCase *t = tcase_create("render");

	tcase_add_test(t, test_object_keys_aligned);
	tcase_add_test(t, test_nested_object_indented);
	tcase_add_test(t, test_bytes_humanised_with_exact_value);
	tcase_add_test(t, test_uptime_as_duration);
	tcase_add_test(t, test_array_of_objects_is_table);
	tcase_add_test(t, test_empty_array_says_none);
	tcase_add_test(t, test_scalars);
	tcase_add_test(t, test_table_missing_cells);
	suite_add_tcase(s, t);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(render_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
