/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_secret.c - loading the shared secret: what is accepted, and every
 * file an operator could get wrong.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/famd.h"

static char path[] = "/tmp/check_secret.XXXXXX";

/* Writes len bytes to a fresh file of the given mode; returns its path. */
static const char *
secret_file(const char *text, size_t len, mode_t mode)
{
	int fd;

	strcpy(path, "/tmp/check_secret.XXXXXX");
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	close(fd);
	return path;
}

/* Loads text from a file of mode; returns the result, out and cause. */
static int
load(const char *text, size_t len, mode_t mode, char *out, char **cause)
{
	int rc;

	*cause = NULL;
	rc = secret_load(secret_file(text, len, mode), out, cause);
	unlink(path);
	return rc;
}

START_TEST(test_empty_path_means_no_secret)
{
	char out[FAM_SECRET_MAX + 1] = "junk";
	char *cause = NULL;

	ck_assert_int_eq(secret_load("", out, &cause), 0);
	ck_assert_str_eq(out, "");
	ck_assert_ptr_null(cause);
}
END_TEST

START_TEST(test_first_line_is_the_secret)
{
	char out[FAM_SECRET_MAX + 1];
	char *cause;

	ck_assert_int_eq(load("s3cret\nsecond line\n", 19, 0600, out, &cause),
	    0);
	ck_assert_str_eq(out, "s3cret");
	ck_assert_int_eq(load("crlf\r\n", 6, 0640, out, &cause), 0);
	ck_assert_str_eq(out, "crlf");
	ck_assert_int_eq(load("no-newline", 10, 0400, out, &cause), 0);
	ck_assert_str_eq(out, "no-newline");
}
END_TEST

START_TEST(test_longest_secret_accepted)
{
	char text[FAM_SECRET_MAX + 2], out[FAM_SECRET_MAX + 1];
	char *cause;

	memset(text, 'k', FAM_SECRET_MAX);
	text[FAM_SECRET_MAX] = '\n';
	ck_assert_int_eq(load(text, FAM_SECRET_MAX + 1, 0600, out, &cause), 0);
	ck_assert_uint_eq(strlen(out), FAM_SECRET_MAX);
}
END_TEST

START_TEST(test_overlong_secret_refused)
{
	char text[FAM_SECRET_MAX + 2], out[FAM_SECRET_MAX + 1];
	char *cause;

	memset(text, 'k', FAM_SECRET_MAX + 1);
	text[FAM_SECRET_MAX + 1] = '\n';
	ck_assert_int_eq(load(text, sizeof text, 0600, out, &cause), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cause, "longer than 64"));
	free(cause);
}
END_TEST

START_TEST(test_world_readable_file_refused)
{
	char out[FAM_SECRET_MAX + 1];
	char *cause;

	ck_assert_int_eq(load("s3cret\n", 7, 0644, out, &cause), -EPERM);
	ck_assert_ptr_nonnull(strstr(cause, "others"));
	ck_assert_ptr_nonnull(strstr(cause, "0644"));
	ck_assert_str_eq(out, "");
	free(cause);
	ck_assert_int_eq(load("s3cret\n", 7, 0602, out, &cause), -EPERM);
	free(cause);
}
END_TEST

START_TEST(test_empty_first_line_refused)
{
	char out[FAM_SECRET_MAX + 1];
	char *cause;

	ck_assert_int_eq(load("\nsecret\n", 8, 0600, out, &cause), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cause, "empty"));
	free(cause);
	ck_assert_int_eq(load("", 0, 0600, out, &cause), -EINVAL);
	free(cause);
}
END_TEST

START_TEST(test_nul_in_secret_refused)
{
	char out[FAM_SECRET_MAX + 1];
	char *cause;

	ck_assert_int_eq(load("ab\0cd\n", 6, 0600, out, &cause), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cause, "NUL"));
	free(cause);
}
END_TEST

START_TEST(test_missing_file_or_directory_refused)
{
	char out[FAM_SECRET_MAX + 1];
	char *cause = NULL;

	ck_assert_int_eq(secret_load("/nonexistent/secret", out, &cause),
	    -ENOENT);
	ck_assert_ptr_nonnull(strstr(cause, "/nonexistent/secret"));
	free(cause);
	ck_assert_int_eq(secret_load("/tmp", out, &cause), -EINVAL);
	ck_assert_ptr_nonnull(strstr(cause, "not a regular file"));
	free(cause);
}
END_TEST

START_TEST(test_peer_line_splits_node_and_file)
{
	char line[] = "  hosta\t/etc/famd/hosta.secret   # its key\n";
	char blank[] = "   # only a comment\r\n";
	const char *name = NULL, *file = NULL, *why = NULL;

	ck_assert_int_eq(secret_peer_line(line, &name, &file, &why), 1);
	ck_assert_str_eq(name, "hosta");
	ck_assert_str_eq(file, "/etc/famd/hosta.secret");
	ck_assert_int_eq(secret_peer_line(blank, &name, &file, &why), 0);
}
END_TEST

START_TEST(test_peer_line_malformed_refused)
{
	char one[] = "hosta\n", rel[] = "hosta hosta.secret\n";
	char three[] = "hosta /a /b\n";
	char lng[100];
	const char *name, *file, *why;

	ck_assert_int_eq(secret_peer_line(one, &name, &file, &why), -EINVAL);
	ck_assert_str_eq(why, "expected NODE SECRET_FILE");
	ck_assert_int_eq(secret_peer_line(rel, &name, &file, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "absolute"));
	ck_assert_int_eq(secret_peer_line(three, &name, &file, &why), -EINVAL);
	memset(lng, 'n', 65);
	strcpy(lng + 65, " /x");
	ck_assert_int_eq(secret_peer_line(lng, &name, &file, &why), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "64"));
}
END_TEST

START_TEST(test_peers_file_gives_each_node_its_key)
{
	char peers[] = "/tmp/check_peers.XXXXXX", a[64], text[256];
	struct fam_peer_key *keys, *k2;
	uint8_t want[FAM_KEY_LEN];
	char *cause = NULL;
	size_t n, n2;
	int fd;

	snprintf(a, sizeof a, "%s", secret_file("alpha-key\n", 10, 0600));
	fd = mkstemp(peers);
	ck_assert_int_ge(fd, 0);
	snprintf(text, sizeof text, "# peers\nalpha %s\n", a);
	ck_assert_int_eq(write(fd, text, strlen(text)),
	    (ssize_t)strlen(text));
	close(fd);
	ck_assert_int_eq(secret_peers_load(peers, &keys, &n, &cause), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(keys[0].name, "alpha");
	ck_assert_int_eq(proto_auth_secret_key("alpha-key", want), 0);
	ck_assert_mem_eq(keys[0].key, want, FAM_KEY_LEN);
	free(keys);
	/* The same node twice: refused, with file:line. */
	snprintf(text, sizeof text, "alpha %s\nalpha %s\n", a, a);
	fd = open(peers, O_WRONLY | O_TRUNC);
	ck_assert_int_eq(write(fd, text, strlen(text)),
	    (ssize_t)strlen(text));
	close(fd);
	ck_assert_int_eq(secret_peers_load(peers, &k2, &n2, &cause), -EINVAL);
	ck_assert_ptr_null(k2);
	ck_assert_ptr_nonnull(strstr(cause, ":2: node alpha is listed twice"));
	free(cause);
	unlink(a);
	unlink(peers);
}
END_TEST

/* Builds the suite. */
static Suite *
secret_suite(void)
{
	Suite *s = suite_create("secret");
	TCase *t = tcase_create("load");

	tcase_add_test(t, test_empty_path_means_no_secret);
	tcase_add_test(t, test_first_line_is_the_secret);
	tcase_add_test(t, test_longest_secret_accepted);
	tcase_add_test(t, test_overlong_secret_refused);
	tcase_add_test(t, test_world_readable_file_refused);
	tcase_add_test(t, test_empty_first_line_refused);
	tcase_add_test(t, test_nul_in_secret_refused);
	tcase_add_test(t, test_missing_file_or_directory_refused);
	tcase_add_test(t, test_peer_line_splits_node_and_file);
	tcase_add_test(t, test_peer_line_malformed_refused);
	tcase_add_test(t, test_peers_file_gives_each_node_its_key);
	suite_add_tcase(s, t);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(secret_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
