/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_admin.c - the JSON-RPC layer of the admin socket: every rung of the
 * validation ladder and every error it can answer.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "core/famd.h"

static int echo_calls;

/* echo: returns its params; fails when asked to. */
static json_t *
cmd_echo(struct admin_req *req)
{
	echo_calls++;
	if (json_is_true(json_object_get(req->params, "fail")))
		return admin_fail(req, ADMIN_ERR_FAILED, "asked to fail");
	return json_incref(req->params);
}

/* change: a command only root may run. */
static json_t *
cmd_change(struct admin_req *req)
{
	return json_pack("{s:b}", "changed", 1);
}

/* broken: returns NULL without saying why. */
static json_t *
cmd_broken(struct admin_req *req)
{
	return NULL;
}

static const struct admin_param echo_params[] = {
	{ "text", ADMIN_P_STRING, true },
	{ "count", ADMIN_P_INT, false },
	{ "fail", ADMIN_P_BOOL, false },
	{ "opts", ADMIN_P_OBJECT, false },
	{ NULL, 0, false },
};

static const struct admin_cmd test_cmds[] = {
	{ "echo", "echo params", echo_params, 0, cmd_echo },
	{ "change", "root only", NULL, ADMIN_F_CHANGE, cmd_change },
	{ "broken", "fails silently", NULL, 0, cmd_broken },
};

static const struct admin_peer peer = { .pid = 42, .uid = 1000, .gid = 1000 };

static void
setup(void)
{
	admin_unregister_all();
	admin_register(test_cmds, nitems(test_cmds));
	echo_calls = 0;
}

/* Sends one line as an unprivileged (or privileged) peer; parses the reply. */
static json_t *
call(const char *line, bool may_change)
{
	char *out = admin_process(line, strlen(line), &peer, may_change);
	json_t *j;

	if (out == NULL)
		return NULL;
	j = json_loads(out, 0, NULL);
	ck_assert_msg(j != NULL, "reply is not JSON: %s", out);
	ck_assert_str_eq(json_string_value(json_object_get(j, "jsonrpc")),
	    "2.0");
	free(out);
	return j;
}

/* Asserts that line is answered with error code (and message part). */
static void
assert_error(const char *line, int code, const char *msg_part)
{
	json_t *j = call(line, false);
	json_t *err;

	ck_assert_ptr_nonnull(j);
	err = json_object_get(j, "error");
	ck_assert_msg(err != NULL, "no error for %s", line);
	ck_assert_ptr_null(json_object_get(j, "result"));
	ck_assert_int_eq(json_integer_value(json_object_get(err, "code")), code);
	if (msg_part != NULL)
		ck_assert_msg(strstr(json_string_value(json_object_get(err,
		    "message")), msg_part) != NULL, "message '%s' lacks '%s'",
		    json_string_value(json_object_get(err, "message")),
		    msg_part);
	json_decref(j);
}

START_TEST(test_success_echoes_id_and_result)
{
	json_t *j = call("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":"
	    "{\"text\":\"hi\",\"count\":3},\"id\":\"abc\"}", false);

	ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "abc");
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j,
	    "result"), "text")), "hi");
	ck_assert_ptr_null(json_object_get(j, "error"));
	json_decref(j);
}
END_TEST

START_TEST(test_garbage_is_parse_error)
{
	assert_error("this is not json", ADMIN_ERR_PARSE, "parse error");
	assert_error("{\"jsonrpc\":\"2.0\",", ADMIN_ERR_PARSE, NULL);
	assert_error("\x01\x02\xff", ADMIN_ERR_PARSE, NULL);
}
END_TEST

START_TEST(test_duplicate_members_rejected)
{
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"method\":"
	    "\"change\",\"id\":1}", ADMIN_ERR_PARSE, "duplicate");
}
END_TEST

START_TEST(test_non_object_requests)
{
	assert_error("[1,2]", ADMIN_ERR_INVALID, "batch");
	assert_error("42", ADMIN_ERR_INVALID, "must be an object");
	assert_error("\"status\"", ADMIN_ERR_INVALID, NULL);
}
END_TEST

START_TEST(test_bad_envelope)
{
	assert_error("{\"method\":\"echo\",\"id\":1}", ADMIN_ERR_INVALID,
	    "jsonrpc");
	assert_error("{\"jsonrpc\":\"1.0\",\"method\":\"echo\",\"id\":1}",
	    ADMIN_ERR_INVALID, "jsonrpc");
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":7,\"id\":1}",
	    ADMIN_ERR_INVALID, "method must be a string");
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":[1]}",
	    ADMIN_ERR_INVALID, "id must be");
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"id\":1,"
	    "\"extra\":true}", ADMIN_ERR_INVALID, "unknown member 'extra'");
}
END_TEST

START_TEST(test_unknown_method)
{
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":\"nosuch\",\"id\":1}",
	    ADMIN_ERR_NO_METHOD, "unknown method 'nosuch'");
}
END_TEST

START_TEST(test_params_validated_strictly)
{
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":[1],"
	    "\"id\":1}", ADMIN_ERR_PARAMS, "must be an object");
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":{},"
	    "\"id\":1}", ADMIN_ERR_PARAMS, "missing parameter 'text'");
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":"
	    "{\"text\":1},\"id\":1}", ADMIN_ERR_PARAMS,
	    "'text' must be a string");
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":"
	    "{\"text\":\"a\",\"count\":\"3\"},\"id\":1}", ADMIN_ERR_PARAMS,
	    "'count' must be an integer");
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":"
	    "{\"text\":\"a\",\"count\":1.5},\"id\":1}", ADMIN_ERR_PARAMS,
	    "'count' must be an integer");
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":"
	    "{\"text\":\"a\",\"opts\":[]},\"id\":1}", ADMIN_ERR_PARAMS,
	    "'opts' must be an object");
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":"
	    "{\"text\":\"a\",\"bogus\":1},\"id\":1}", ADMIN_ERR_PARAMS,
	    "unknown parameter 'bogus'");
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":\"change\",\"params\":"
	    "{\"x\":1},\"id\":1}", ADMIN_ERR_PERMISSION, NULL);
	ck_assert_int_eq(echo_calls, 0);
}
END_TEST

START_TEST(test_change_needs_privilege)
{
	json_t *j;

	assert_error("{\"jsonrpc\":\"2.0\",\"method\":\"change\",\"id\":1}",
	    ADMIN_ERR_PERMISSION, "permission denied");
	j = call("{\"jsonrpc\":\"2.0\",\"method\":\"change\",\"id\":1}", true);
	ck_assert(json_is_true(json_object_get(json_object_get(j, "result"),
	    "changed")));
	json_decref(j);
}
END_TEST

START_TEST(test_handler_errors)
{
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":"
	    "{\"text\":\"a\",\"fail\":true},\"id\":1}", ADMIN_ERR_FAILED,
	    "asked to fail");
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":\"broken\",\"id\":1}",
	    ADMIN_ERR_INTERNAL, "broken failed");
}
END_TEST

START_TEST(test_notification_gets_no_reply)
{
	ck_assert_ptr_null(call("{\"jsonrpc\":\"2.0\",\"method\":\"echo\","
	    "\"params\":{\"text\":\"a\"}}", false));
	ck_assert_int_eq(echo_calls, 1);
	/* A broken notification is still answered: it had no valid method. */
	assert_error("{\"jsonrpc\":\"2.0\",\"method\":5}", ADMIN_ERR_INVALID,
	    NULL);
}
END_TEST

START_TEST(test_null_id_answered_with_null)
{
	json_t *j = call("{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":"
	    "{\"text\":\"a\"},\"id\":null}", false);

	ck_assert_ptr_nonnull(j);
	ck_assert(json_is_null(json_object_get(j, "id")));
	json_decref(j);
}
END_TEST

START_TEST(test_oversized_request)
{
	size_t n = ADMIN_MAX_REQUEST + 10;
	char *big = malloc(n + 1);
	char *out;
	json_t *j;

	memset(big, ' ', n);
	big[n] = '\0';
	out = admin_process(big, n, &peer, true);
	j = json_loads(out, 0, NULL);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j,
	    "error"), "code")), ADMIN_ERR_TOO_LARGE);
	json_decref(j);
	free(out);
	free(big);
}
END_TEST

/* A parse error quotes the request, whose bytes need not be UTF-8. */
START_TEST(test_request_not_utf8_gets_parse_error)
{
	static const char line[] = "\"\\\xdd\xa7/\0000`\0";
	char *out = admin_process(line, sizeof line - 1, &peer, false);
	json_t *j, *err;

	ck_assert_ptr_nonnull(out);
	j = json_loads(out, 0, NULL);
	ck_assert_msg(j != NULL, "answer is not JSON: %s", out);
	err = json_object_get(j, "error");
	ck_assert_int_eq(json_integer_value(json_object_get(err, "code")),
	    ADMIN_ERR_PARSE);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(err,
	    "message")), "parse error: invalid escape"));
	json_decref(j);
	free(out);
}
END_TEST

START_TEST(test_error_message_not_utf8_made_ascii)
{
	char *s = admin_error_line(NULL, ADMIN_ERR_FAILED,
	    "unknown key 'log_\377level' in [famd], caf\xc3\xa9");
	json_t *j = json_loads(s, 0, NULL);

	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j,
	    "error"), "message")), "unknown key 'log_?level' in [famd], caf??");
	json_decref(j);
	free(s);
	/* Valid UTF-8 is kept as it is. */
	s = admin_error_line(NULL, ADMIN_ERR_FAILED, "caf\xc3\xa9");
	j = json_loads(s, 0, NULL);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j,
	    "error"), "message")), "caf\xc3\xa9");
	json_decref(j);
	free(s);
}
END_TEST

START_TEST(test_error_line_is_valid_json)
{
	char *s = admin_error_line(NULL, ADMIN_ERR_PARSE, "quote \" and \\");
	json_t *j = json_loads(s, 0, NULL);

	ck_assert_ptr_nonnull(j);
	ck_assert(json_is_null(json_object_get(j, "id")));
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j,
	    "error"), "message")), "quote \" and \\");
	json_decref(j);
	free(s);
}
END_TEST

/*
 * Sends text on a connection served by admin_client_add() (one end of a
 * bufferevent pair), then EOF; returns the answer lines, joined.
 */
static char *
converse(const char *text, uid_t uid)
{
	struct event_base *base = event_base_new();
	struct admin_peer p = { .pid = 42, .uid = uid, .gid = uid };
	struct bufferevent *pair[2];
	struct evbuffer *in;
	char *out;
	size_t len;

	ck_assert_ptr_nonnull(base);
	ck_assert_int_eq(bufferevent_pair_new(base, BEV_OPT_DEFER_CALLBACKS,
	    pair), 0);
	ck_assert_int_eq(admin_client_add(pair[0], &p), 0);
	ck_assert_uint_eq(admin_clients(), 1);
	bufferevent_enable(pair[1], EV_READ | EV_WRITE);
	bufferevent_write(pair[1], text, strlen(text));
	bufferevent_flush(pair[1], EV_WRITE, BEV_FINISHED);
	for (int i = 0; i < 100 && admin_clients() > 0; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	ck_assert_uint_eq(admin_clients(), 0);
	in = bufferevent_get_input(pair[1]);
	len = evbuffer_get_length(in);
	out = calloc(1, len + 1);
	evbuffer_remove(in, out, len);
	bufferevent_free(pair[1]);
	event_base_free(base);
	return out;
}

START_TEST(test_connection_answers_each_line_then_closes_at_eof)
{
	char *out = converse("\r\n\n{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"echo\",\"params\":{\"text\":\"one\"},\"id\":1}\r\n"
	    "{\"jsonrpc\":\"2.0\",\"method\":\"change\",\"id\":2}\n"
	    "{\"jsonrpc\":\"2.0\",\"method\":\"echo\",\"params\":"
	    "{\"text\":\"unterminated\"},\"id\":3}", 1000);
	char *second = strchr(out, '\n') + 1;
	json_t *a, *b;

	/* Blank lines are skipped; the last line, with no newline, is not. */
	ck_assert_ptr_nonnull(second);
	ck_assert_ptr_null(strstr(out, "unterminated"));
	a = json_loadb(out, (size_t)(second - out), 0, NULL);
	b = json_loads(second, 0, NULL);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(json_integer_value(json_object_get(a, "id")), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(a,
	    "result"), "text")), "one");
	/* uid 1000 is neither root nor famd's user (unless it runs as 1000). */
	if (geteuid() != 1000)
		ck_assert_int_eq(json_integer_value(json_object_get(
		    json_object_get(b, "error"), "code")),
		    ADMIN_ERR_PERMISSION);
	ck_assert_int_eq(echo_calls, 1);
	json_decref(a);
	json_decref(b);
	free(out);
}
END_TEST

START_TEST(test_connection_of_famd_user_may_change)
{
	char *out = converse("{\"jsonrpc\":\"2.0\",\"method\":\"change\","
	    "\"id\":1}\n", geteuid());
	json_t *j = json_loads(out, 0, NULL);

	ck_assert(json_is_true(json_object_get(json_object_get(j, "result"),
	    "changed")));
	json_decref(j);
	free(out);
}
END_TEST

static Suite *
admin_suite(void)
{
	Suite *s = suite_create("admin");
	TCase *t = tcase_create("jsonrpc");

	tcase_add_checked_fixture(t, setup, NULL);
	tcase_add_test(t, test_success_echoes_id_and_result);
	tcase_add_test(t, test_garbage_is_parse_error);
	tcase_add_test(t, test_duplicate_members_rejected);
	tcase_add_test(t, test_non_object_requests);
	tcase_add_test(t, test_bad_envelope);
	tcase_add_test(t, test_unknown_method);
	tcase_add_test(t, test_params_validated_strictly);
	tcase_add_test(t, test_change_needs_privilege);
	tcase_add_test(t, test_handler_errors);
	tcase_add_test(t, test_notification_gets_no_reply);
	tcase_add_test(t, test_null_id_answered_with_null);
	tcase_add_test(t, test_oversized_request);
	tcase_add_test(t, test_error_line_is_valid_json);
	tcase_add_test(t, test_request_not_utf8_gets_parse_error);
	tcase_add_test(t, test_error_message_not_utf8_made_ascii);
	suite_add_tcase(s, t);

	t = tcase_create("connection");
	tcase_add_checked_fixture(t, setup, NULL);
	tcase_add_test(t, test_connection_answers_each_line_then_closes_at_eof);
	tcase_add_test(t, test_connection_of_famd_user_may_change);
	suite_add_tcase(s, t);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(admin_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
