/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_libfam.c - libfam without a host famd: argument checks, what a
 * program gets when no famd listens, and the faults a peer on the session
 * socket can inflict (hanging up, garbage, a refusal, absurd parameters).
 * The peers are real processes on a real socket; every test runs in its own
 * process (Check's fork mode), so libfam starts fresh in each.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "famd-client/famd-client.h"
#include "wire/session.h"

static char dir[64];
static char sock_path[128];
static pid_t peer_pid = -1;

/* Gives each test a private directory and FAM_SOCKET inside it. */
static void
setup(void)
{
	snprintf(dir, sizeof dir, "/tmp/check_libfam.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(sock_path, sizeof sock_path, "%s/session.sock", dir);
	setenv("FAM_SOCKET", sock_path, 1);
	peer_pid = -1;
}

/* Stops the peer and removes the directory. */
static void
teardown(void)
{
	if (peer_pid > 0) {
		kill(peer_pid, SIGKILL);
		waitpid(peer_pid, NULL, 0);
	}
	unlink(sock_path);
	rmdir(dir);
}

/* A listening socket at sock_path. */
static int
listen_at(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	strcpy(sun.sun_path, sock_path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sun, sizeof sun), 0);
	ck_assert_int_eq(listen(fd, 8), 0);
	return fd;
}

enum peer_kind {
	PEER_HANG_UP,       /* reads the HELLO, closes */
	PEER_GARBAGE,       /* answers 64 random-looking bytes */
	PEER_WRONG_SEQ,     /* a well-formed reply to another request */
	PEER_REFUSES,       /* status EACCES */
	PEER_BAD_CHUNK,     /* chunk size 1000 */
	PEER_HUGE_DATA,     /* a reply announcing 1 MiB of data */
	PEER_SILENT_UFFD,   /* a good HELLO, then hangs up on UFFD */
};

/* Starts a process serving one connection on sock_path as kind says. */
static void
peer_start(enum peer_kind kind)
{
	int ls = listen_at();

	peer_pid = fork();
	ck_assert_int_ge(peer_pid, 0);
	if (peer_pid == 0) {
		struct fam_smsg m;
		int c = accept(ls, NULL, NULL);
		size_t i;

		if (c < 0 || recv(c, &m, sizeof m, MSG_WAITALL) != sizeof m)
			_exit(1);
		switch (kind) {
		case PEER_HANG_UP:
			break;
		case PEER_GARBAGE:
			for (i = 0; i < sizeof m; i++)
				((unsigned char *)&m)[i] = (unsigned char)(i * 77 + 3);
			send(c, &m, sizeof m, 0);
			break;
		case PEER_WRONG_SEQ:
			m.seq += 5;
			m.a = 65536;
			m.b = 1 << 30;
			send(c, &m, sizeof m, 0);
			break;
		case PEER_REFUSES:
			m.status = EACCES;
			send(c, &m, sizeof m, 0);
			break;
		case PEER_BAD_CHUNK:
			m.a = 1000;
			m.b = 1 << 30;
			send(c, &m, sizeof m, 0);
			break;
		case PEER_HUGE_DATA:
			m.len = 1 << 20;
			send(c, &m, sizeof m, 0);
			break;
		case PEER_SILENT_UFFD:
			m.a = 65536;
			m.b = 1 << 30;
			m.c = 0;
			send(c, &m, sizeof m, 0);
			recv(c, &m, sizeof m, MSG_WAITALL);
			break;
		}
		/* Let the client read before the hang-up. */
		usleep(100000);
		_exit(0);
	}
	close(ls);
}

/* Sends stderr to a file in the test directory; returns its path. */
static const char *
capture_stderr(void)
{
	static char path[160];
	int fd;

	snprintf(path, sizeof path, "%s/stderr", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	dup2(fd, STDERR_FILENO);
	close(fd);
	return path;
}

/* Lines of the file at path that contain needle. */
static int
count_lines(const char *path, const char *needle)
{
	char line[1024];
	FILE *f = fopen(path, "r");
	int n = 0;

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof line, f) != NULL)
		if (strstr(line, needle) != NULL)
			n++;
	fclose(f);
	unlink(path);
	return n;
}

START_TEST(test_no_famd_fails_with_the_connect_error)
{
	errno = 0;
	ck_assert_ptr_null(fam_alloc(1 << 20));
	ck_assert_int_eq(errno, ENOENT);
	ck_assert_int_eq(fam_owns(NULL), 0);
}
END_TEST

START_TEST(test_socket_without_listener_is_refused)
{
	close(listen_at()); /* leaves a socket file nobody listens on */
	errno = 0;
	ck_assert_ptr_null(fam_alloc(1 << 20));
	ck_assert_int_eq(errno, ECONNREFUSED);
}
END_TEST

START_TEST(test_outage_reported_once)
{
	const char *err = capture_stderr();
	int i;

	for (i = 0; i < 5; i++)
		ck_assert_ptr_null(fam_alloc(1 << 20));
	ck_assert_int_eq(count_lines(err, "cannot reach the host famd"), 1);
}
END_TEST

START_TEST(test_retry_waits_after_a_failure)
{
	int ls, c;

	ck_assert_ptr_null(fam_alloc(1 << 20));
	ck_assert_int_eq(errno, ENOENT);
	/* famd appears: within a second libfam does not try again. */
	ls = listen_at();
	errno = 0;
	ck_assert_ptr_null(fam_alloc(1 << 20));
	ck_assert_int_eq(errno, ENOENT);
	fcntl(ls, F_SETFL, O_NONBLOCK);
	c = accept(ls, NULL, NULL);
	ck_assert_int_lt(c, 0);
	close(ls);
}
END_TEST

START_TEST(test_socket_path_too_long)
{
	char path[300];

	memset(path, 'x', sizeof path - 1);
	path[0] = '/';
	path[sizeof path - 1] = '\0';
	setenv("FAM_SOCKET", path, 1);
	errno = 0;
	ck_assert_ptr_null(fam_alloc(1 << 20));
	ck_assert_int_eq(errno, ENAMETOOLONG);
}
END_TEST

START_TEST(test_bad_arguments_rejected)
{
	char path[FAM_SESSION_MAX_DATA + 2];
	struct fam_stat st;
	size_t size;
	int local = 0;
	void *heap = malloc(64);

	errno = 0;
	ck_assert_ptr_null(fam_alloc(0));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(fam_alloc((size_t)-1));
	ck_assert_int_eq(errno, ENOMEM);
	errno = 0;
	ck_assert_ptr_null(fam_alloc_file(NULL, FAM_FILE_SHARED, &size));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(fam_alloc_file("f", 0, &size));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(fam_alloc_file("f", 3, &size));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(fam_alloc_file("", FAM_FILE_PRIVATE, &size));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(fam_alloc_file("f", FAM_FILE_PRIVATE, NULL));
	ck_assert_int_eq(errno, EINVAL);
	memset(path, 'a', sizeof path - 1);
	path[sizeof path - 1] = '\0';
	errno = 0;
	ck_assert_ptr_null(fam_alloc_file(path, FAM_FILE_PRIVATE, &size));
	ck_assert_int_eq(errno, ENAMETOOLONG);

	ck_assert_int_eq(fam_free(NULL), 0);
	errno = 0;
	ck_assert_int_eq(fam_free(&local), -1);
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_int_eq(fam_free(heap), -1);
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_int_eq(fam_stat(&local, &st), -1);
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_int_eq(fam_stat(&local, NULL), -1);
	ck_assert_int_eq(errno, EINVAL);
	ck_assert_int_eq(fam_owns(&local), 0);
	ck_assert_int_eq(fam_owns(heap), 0);
	ck_assert_uint_eq(fam_usable_size(heap), 0);
	ck_assert_uint_eq(fam_usable_size(NULL), 0);
	free(heap);
}
END_TEST

START_TEST(test_peer_hangs_up_during_hello)
{
	peer_start(PEER_HANG_UP);
	errno = 0;
	ck_assert_ptr_null(fam_alloc(1 << 20));
	ck_assert_int_eq(errno, ECONNRESET);
}
END_TEST

START_TEST(test_garbage_reply_is_a_protocol_error)
{
	peer_start(PEER_GARBAGE);
	errno = 0;
	ck_assert_ptr_null(fam_alloc(1 << 20));
	ck_assert_int_eq(errno, EPROTO);
}
END_TEST

START_TEST(test_reply_to_another_request_is_a_protocol_error)
{
	peer_start(PEER_WRONG_SEQ);
	errno = 0;
	ck_assert_ptr_null(fam_alloc(1 << 20));
	ck_assert_int_eq(errno, EPROTO);
}
END_TEST

START_TEST(test_refused_hello_passes_famds_errno)
{
	const char *err = capture_stderr();

	peer_start(PEER_REFUSES);
	errno = 0;
	ck_assert_ptr_null(fam_alloc(1 << 20));
	ck_assert_int_eq(errno, EACCES);
	ck_assert_int_eq(count_lines(err, "cannot open a session"), 1);
}
END_TEST

START_TEST(test_absurd_chunk_size_is_a_protocol_error)
{
	peer_start(PEER_BAD_CHUNK);
	errno = 0;
	ck_assert_ptr_null(fam_alloc(1 << 20));
	ck_assert_int_eq(errno, EPROTO);
}
END_TEST

START_TEST(test_oversized_reply_data_is_a_protocol_error)
{
	peer_start(PEER_HUGE_DATA);
	errno = 0;
	ck_assert_ptr_null(fam_alloc(1 << 20));
	ck_assert_int_eq(errno, EPROTO);
}
END_TEST

START_TEST(test_peer_hangs_up_on_the_userfaultfd)
{
	peer_start(PEER_SILENT_UFFD);
	errno = 0;
	ck_assert_ptr_null(fam_alloc(1 << 20));
	/* EPERM where this user may not create a userfaultfd at all. */
	ck_assert(errno == ECONNRESET || errno == EPERM);
}
END_TEST

/* Every test of libfam without famd. */
static Suite *
libfam_suite(void)
{
	Suite *s = suite_create("libfam");
	TCase *t = tcase_create("no famd");

	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 10);
	tcase_add_test(t, test_no_famd_fails_with_the_connect_error);
	tcase_add_test(t, test_socket_without_listener_is_refused);
	tcase_add_test(t, test_outage_reported_once);
	tcase_add_test(t, test_retry_waits_after_a_failure);
	tcase_add_test(t, test_socket_path_too_long);
	tcase_add_test(t, test_bad_arguments_rejected);
	tcase_add_test(t, test_peer_hangs_up_during_hello);
	tcase_add_test(t, test_garbage_reply_is_a_protocol_error);
	tcase_add_test(t, test_reply_to_another_request_is_a_protocol_error);
	tcase_add_test(t, test_refused_hello_passes_famds_errno);
	tcase_add_test(t, test_absurd_chunk_size_is_a_protocol_error);
	tcase_add_test(t, test_oversized_reply_data_is_a_protocol_error);
	tcase_add_test(t, test_peer_hangs_up_on_the_userfaultfd);
	suite_add_tcase(s, t);
	return s;
}

/* Runs the suite. */
int
main(void)
{
	SRunner *sr = srunner_create(libfam_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
