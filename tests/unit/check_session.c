/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_session.c - the session messages' decoding and checks
 * (wire/session.c): the host's framing of a program's byte stream and its
 * checks of requests, libfam's checks of famd's replies.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <string.h>

#include "wire/session.h"

/* Returns a well-formed request of type. */
static struct fam_smsg
request(uint16_t type)
{
	struct fam_smsg m = { .magic = FAM_SESSION_MAGIC,
		.version = FAM_SESSION_VERSION, .type = type, .seq = 7 };

	return m;
}

START_TEST(test_take_waits_for_the_whole_message)
{
	uint8_t buf[sizeof(struct fam_smsg) + 8];
	struct fam_smsg m = request(FAM_S_ALLOC), got;
	char data[FAM_SESSION_MAX_DATA + 1];

	m.len = 8;
	m.b = FAM_S_ALLOC_FILE;
	memcpy(buf, &m, sizeof m);
	memcpy(buf + sizeof m, "data.bin", 8);
	ck_assert_uint_eq(fam_smsg_take(buf, sizeof m - 1, &got, data), 0);
	ck_assert_uint_eq(fam_smsg_take(buf, sizeof buf - 1, &got, data), 0);
	ck_assert_uint_eq(fam_smsg_take(buf, sizeof buf, &got, data),
	    sizeof buf);
	ck_assert_str_eq(data, "data.bin");
	ck_assert_uint_eq(got.len, 8);
	ck_assert_int_eq(fam_smsg_check_request(&got, true), 0);
	ck_assert_int_eq(fam_smsg_check_alloc(&got, 1ull << 30), 0);
}
END_TEST

START_TEST(test_take_two_messages_in_one_read)
{
	struct fam_smsg two[2] = { request(FAM_S_HELLO), request(FAM_S_UFFD) };
	struct fam_smsg got;
	char data[FAM_SESSION_MAX_DATA + 1];
	size_t used = fam_smsg_take(two, sizeof two, &got, data);

	ck_assert_uint_eq(used, sizeof two[0]);
	ck_assert_uint_eq(got.type, FAM_S_HELLO);
	ck_assert_str_eq(data, "");
	ck_assert_uint_eq(fam_smsg_take((uint8_t *)two + used,
	    sizeof two - used, &got, data), sizeof two[1]);
	ck_assert_uint_eq(got.type, FAM_S_UFFD);
}
END_TEST

START_TEST(test_path_with_nul_ends_the_session)
{
	uint8_t buf[sizeof(struct fam_smsg) + 5];
	struct fam_smsg m = request(FAM_S_ALLOC), got;
	char data[FAM_SESSION_MAX_DATA + 1];

	m.len = 5;
	m.b = FAM_S_ALLOC_FILE;
	memcpy(buf, &m, sizeof m);
	memcpy(buf + sizeof m, "a\0b/c", 5);
	ck_assert_uint_eq(fam_smsg_take(buf, sizeof buf, &got, data),
	    sizeof buf);
	ck_assert_int_eq(fam_smsg_check_request(&got, true), -EPROTO);
}
END_TEST

START_TEST(test_oversized_data_ends_the_session_unread)
{
	struct fam_smsg m = request(FAM_S_ALLOC), got;
	char data[FAM_SESSION_MAX_DATA + 1];

	m.len = FAM_SESSION_MAX_DATA + 1;
	m.b = FAM_S_ALLOC_FILE;
	/* Only the fixed part is taken: nothing waits for the data. */
	ck_assert_uint_eq(fam_smsg_take(&m, sizeof m, &got, data), sizeof m);
	ck_assert_int_eq(fam_smsg_check_request(&got, true), -EPROTO);
}
END_TEST

START_TEST(test_forged_headers_refused)
{
	struct fam_smsg m;

	m = request(FAM_S_HELLO);
	ck_assert_int_eq(fam_smsg_check_request(&m, false), 0);
	m.magic ^= 1;
	ck_assert_int_eq(fam_smsg_check_request(&m, false), -EPROTO);
	m = request(FAM_S_HELLO);
	m.version = FAM_SESSION_VERSION + 1;
	ck_assert_int_eq(fam_smsg_check_request(&m, false), -EPROTO);
	m = request(0);
	ck_assert_int_eq(fam_smsg_check_request(&m, true), -EPROTO);
	m = request(FAM_S_TYPE_MAX + 1);
	ck_assert_int_eq(fam_smsg_check_request(&m, true), -EPROTO);
	m = request(FAM_S_FREE);
	m.status = EIO;
	ck_assert_int_eq(fam_smsg_check_request(&m, true), -EPROTO);
	m = request(FAM_S_FREE);
	m.reserved = 1;
	ck_assert_int_eq(fam_smsg_check_request(&m, true), -EPROTO);
	m = request(FAM_S_MAP);
	m.len = 3; /* data on anything but ALLOC */
	ck_assert_int_eq(fam_smsg_check_request(&m, true), -EPROTO);
}
END_TEST

START_TEST(test_nothing_but_hello_and_uffd_before_the_uffd)
{
	for (uint16_t t = 1; t <= FAM_S_TYPE_MAX; t++) {
		struct fam_smsg m = request(t);

		ck_assert_int_eq(fam_smsg_check_request(&m, false),
		    t <= FAM_S_UFFD || t == FAM_S_RECLAIM ? 0 : -EPROTO);
		ck_assert_int_eq(fam_smsg_check_request(&m, true),
		    t == FAM_S_RECLAIM ? -EPROTO : 0);
	}
}
END_TEST

START_TEST(test_alloc_arguments)
{
	const uint64_t arena = 1ull << 30;
	struct fam_smsg m = request(FAM_S_ALLOC);

	m.a = 1 << 20;
	ck_assert_int_eq(fam_smsg_check_alloc(&m, arena), 0);
	m.c = 1 << 21;
	ck_assert_int_eq(fam_smsg_check_alloc(&m, arena), 0);
	m.c = 3 << 20; /* not a power of two */
	ck_assert_int_eq(fam_smsg_check_alloc(&m, arena), EINVAL);
	m.c = arena << 1;
	ck_assert_int_eq(fam_smsg_check_alloc(&m, arena), EINVAL);
	m.c = 0;
	m.a = 0;
	ck_assert_int_eq(fam_smsg_check_alloc(&m, arena), EINVAL);
	m.a = FAM_SESSION_MAX_REGION + 1;
	ck_assert_int_eq(fam_smsg_check_alloc(&m, arena), EFBIG);
	m.a = 1 << 20;
	m.b = 0x80; /* an unknown flag */
	ck_assert_int_eq(fam_smsg_check_alloc(&m, arena), EINVAL);
	m.b = FAM_S_ALLOC_SHARED; /* shared without a file */
	ck_assert_int_eq(fam_smsg_check_alloc(&m, arena), EINVAL);
	m.b = FAM_S_ALLOC_FILE; /* a file without a path */
	ck_assert_int_eq(fam_smsg_check_alloc(&m, arena), EINVAL);
	m.len = 4;
	ck_assert_int_eq(fam_smsg_check_alloc(&m, arena), 0);
	m.b = FAM_S_ALLOC_FILE | FAM_S_ALLOC_SPARSE; /* a sparse file */
	ck_assert_int_eq(fam_smsg_check_alloc(&m, arena), EINVAL);
	m.b = 0; /* a path without the file flag */
	ck_assert_int_eq(fam_smsg_check_alloc(&m, arena), EINVAL);
	m.len = 0;
	m.b = FAM_S_ALLOC_SPARSE; /* a reservation */
	ck_assert_int_eq(fam_smsg_check_alloc(&m, arena), 0);
}
END_TEST

START_TEST(test_map_address)
{
	ck_assert_int_eq(fam_smsg_check_map(0x7f0000000000ull, 1ull << 30), 0);
	ck_assert_int_eq(fam_smsg_check_map(0, 1ull << 30), EINVAL);
	ck_assert_int_eq(fam_smsg_check_map(0x7f0000000001ull, 1ull << 30),
	    EINVAL);
	ck_assert_int_eq(fam_smsg_check_map(UINT64_MAX - 4095, 1ull << 30),
	    EINVAL);
}
END_TEST

START_TEST(test_reply_must_answer_the_request)
{
	struct fam_smsg m = request(FAM_S_ALLOC);

	ck_assert_int_eq(fam_smsg_check_reply(&m, FAM_S_ALLOC, 7), 0);
	m.status = ENOSPC;
	ck_assert_int_eq(fam_smsg_check_reply(&m, FAM_S_ALLOC, 7), 0);
	ck_assert_int_eq(fam_smsg_check_reply(&m, FAM_S_FREE, 7), -EPROTO);
	ck_assert_int_eq(fam_smsg_check_reply(&m, FAM_S_ALLOC, 8), -EPROTO);
	m.status = -1;
	ck_assert_int_eq(fam_smsg_check_reply(&m, FAM_S_ALLOC, 7), -EPROTO);
	m.status = 4096;
	ck_assert_int_eq(fam_smsg_check_reply(&m, FAM_S_ALLOC, 7), -EPROTO);
	m.status = 0;
	m.len = FAM_SESSION_MAX_DATA + 1;
	ck_assert_int_eq(fam_smsg_check_reply(&m, FAM_S_ALLOC, 7), -EPROTO);
}
END_TEST

START_TEST(test_hello_reply_sizes)
{
	struct fam_smsg m = request(FAM_S_HELLO);

	m.a = 64 << 10;
	m.b = 64ull << 30;
	ck_assert_int_eq(fam_smsg_check_hello_reply(&m, 4096), 0);
	m.a = 2048; /* below the page */
	ck_assert_int_eq(fam_smsg_check_hello_reply(&m, 4096), -EPROTO);
	m.a = 96 << 10; /* not a power of two */
	ck_assert_int_eq(fam_smsg_check_hello_reply(&m, 4096), -EPROTO);
	m.a = FAM_SESSION_MAX_CHUNK << 1;
	ck_assert_int_eq(fam_smsg_check_hello_reply(&m, 4096), -EPROTO);
	m.a = 64 << 10;
	m.b = (64 << 10) + 4096; /* not a multiple of the chunk */
	ck_assert_int_eq(fam_smsg_check_hello_reply(&m, 4096), -EPROTO);
	m.b = 32 << 10;
	ck_assert_int_eq(fam_smsg_check_hello_reply(&m, 4096), -EPROTO);
	m.b = FAM_SESSION_MAX_ARENA << 1;
	ck_assert_int_eq(fam_smsg_check_hello_reply(&m, 4096), -EPROTO);
}
END_TEST

static Suite *
session_suite(void)
{
	Suite *s = suite_create("session");
	TCase *t = tcase_create("take");

	tcase_add_test(t, test_take_waits_for_the_whole_message);
	tcase_add_test(t, test_take_two_messages_in_one_read);
	tcase_add_test(t, test_path_with_nul_ends_the_session);
	tcase_add_test(t, test_oversized_data_ends_the_session_unread);
	suite_add_tcase(s, t);

	t = tcase_create("requests");
	tcase_add_test(t, test_forged_headers_refused);
	tcase_add_test(t, test_nothing_but_hello_and_uffd_before_the_uffd);
	tcase_add_test(t, test_alloc_arguments);
	tcase_add_test(t, test_map_address);
	suite_add_tcase(s, t);

	t = tcase_create("replies");
	tcase_add_test(t, test_reply_must_answer_the_request);
	tcase_add_test(t, test_hello_reply_sizes);
	suite_add_tcase(s, t);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(session_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
