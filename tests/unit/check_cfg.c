/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_cfg.c - the key table and the famd.conf parser, with every kind of
 * bad input an operator can write.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/famd.h"

static char tmpl[] = "/tmp/check_cfg.XXXXXX";

/* Writes text to a fresh temporary file and returns its path. */
static const char *
write_conf(const char *text)
{
	int fd;

	strcpy(tmpl, "/tmp/check_cfg.XXXXXX");
	fd = mkstemp(tmpl);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return tmpl;
}

/* Loads text; returns cfg_load's result with the errors in errs. */
static int
load_text(const char *text, struct cfg *cfg, struct cfg_errors *errs)
{
	int rc = cfg_load(cfg, write_conf(text), NULL, 0, errs);

	unlink(tmpl);
	return rc;
}

/* Asserts that text fails with exactly one error containing want. */
static void
assert_one_error(const char *text, const char *want)
{
	struct cfg cfg;
	struct cfg_errors errs = { 0 };

	ck_assert_int_lt(load_text(text, &cfg, &errs), 0);
	ck_assert_msg(errs.count == 1, "expected 1 error, got %zu (first: %s)",
	    errs.count, errs.count ? errs.msg[0] : "-");
	ck_assert_msg(strstr(errs.msg[0], want) != NULL,
	    "error '%s' does not contain '%s'", errs.msg[0], want);
	cfg_errors_free(&errs);
	cfg_free(&cfg);
}

START_TEST(test_every_key_is_described)
{
	for (int k = 0; k < CFG_NKEYS; k++) {
		const struct cfg_key_def *d = &cfg_keys[k];

		ck_assert_msg(d->section != NULL && d->name != NULL,
		    "key %d has no name", k);
		ck_assert_msg(d->help != NULL && strlen(d->help) > 10,
		    "%s has no help", d->name);
		ck_assert_msg(d->roles != 0, "%s is read by no role", d->name);
		ck_assert_int_eq(cfg_find(d->section, d->name), k);
		if (d->type == CFG_T_ENUM)
			ck_assert_ptr_nonnull(d->choices);
		if (d->type == CFG_T_INT || d->type == CFG_T_SIZE ||
		    d->type == CFG_T_DURATION)
			ck_assert_int_le(d->min, d->max);
	}
}
END_TEST

START_TEST(test_every_default_and_example_parses)
{
	for (int k = 0; k < CFG_NKEYS; k++) {
		const struct cfg_key_def *d = &cfg_keys[k];
		struct cfg_value v = { 0 };
		char *cause;

		if (d->def != NULL) {
			ck_assert_msg(cfg_parse_value(k, d->def, &v, &cause) == 0,
			    "default of %s: %s", d->name, cause);
			free(v.s);
			v.s = NULL;
		}
		if (d->example != NULL) {
			ck_assert_msg(cfg_parse_value(k, d->example, &v,
			    &cause) == 0, "example of %s: %s", d->name, cause);
			free(v.s);
		}
	}
}
END_TEST

START_TEST(test_generated_example_loads_for_each_role)
{
	for (int r = 0; r < ROLE_COUNT; r++) {
		char *text;
		size_t len;
		FILE *f = open_memstream(&text, &len);
		struct cfg cfg;
		struct cfg_errors errs = { 0 };

		cfg_write_example(f, (enum famd_role)r);
		fclose(f);
		ck_assert_msg(load_text(text, &cfg, &errs) == 0,
		    "example for %s: %s", cfg_role_names[r],
		    errs.count ? errs.msg[0] : "");
		ck_assert_int_eq(cfg_int(&cfg, CFG_ROLE), r);
		/* Every key of the role appears in its example. */
		for (int k = 0; k < CFG_NKEYS; k++) {
			char needle[80];

			if (!(cfg_keys[k].roles & CFG_ROLE_BIT(r)))
				continue;
			snprintf(needle, sizeof needle, "%s =", cfg_keys[k].name);
			ck_assert_msg(strstr(text, needle) != NULL,
			    "%s missing from the %s example", cfg_keys[k].name,
			    cfg_role_names[r]);
		}
		cfg_free(&cfg);
		free(text);
	}
}
END_TEST

START_TEST(test_man_page_lists_every_key)
{
	char *text;
	size_t len;
	FILE *f = open_memstream(&text, &len);

	cfg_write_man_keys(f);
	fclose(f);
	for (int k = 0; k < CFG_NKEYS; k++) {
		char needle[80];

		snprintf(needle, sizeof needle, ".It Ic %s ", cfg_keys[k].name);
		ck_assert_msg(strstr(text, needle) != NULL, "%s not in man page",
		    cfg_keys[k].name);
	}
	free(text);
}
END_TEST

START_TEST(test_values_and_defaults)
{
	struct cfg cfg;
	struct cfg_errors errs = { 0 };

	ck_assert_int_eq(load_text("# comment\n; another\n\n[famd]\n"
	    "role = memory ; inline comment\nadmin_idle_timeout = 1500ms\n"
	    "admin_max_clients=3\nlog_level = debug\n", &cfg, &errs), 0);
	ck_assert_int_eq(cfg_int(&cfg, CFG_ROLE), ROLE_MEMORY);
	ck_assert_int_eq(cfg_int(&cfg, CFG_ADMIN_IDLE_TIMEOUT), 1500);
	ck_assert_int_eq(cfg_int(&cfg, CFG_ADMIN_MAX_CLIENTS), 3);
	ck_assert_str_eq(cfg_str(&cfg, CFG_ADMIN_SOCKET), FAMD_DEFAULT_ADMIN);
	ck_assert(!cfg.v[CFG_ADMIN_SOCKET].set);
	ck_assert(cfg.v[CFG_ADMIN_MAX_CLIENTS].set);
	ck_assert_int_eq(cfg.v[CFG_ADMIN_MAX_CLIENTS].line, 7);
	cfg_free(&cfg);
}
END_TEST

START_TEST(test_durations_and_units)
{
	static const struct {
		const char *text;
		int64_t ms;
	} cases[] = {
		{ "60", 60000 }, { "2s", 2000 }, { "250ms", 250 },
		{ "3m", 180000 }, { "1h", 3600000 }, { "1 s", 1000 },
	};
	for (size_t i = 0; i < nitems(cases); i++) {
		struct cfg_value v = { 0 };
		char *cause;

		ck_assert_int_eq(cfg_parse_value(CFG_ADMIN_IDLE_TIMEOUT,
		    cases[i].text, &v, &cause), 0);
		ck_assert_int_eq(v.i, cases[i].ms);
		free(v.s);
	}
}
END_TEST

START_TEST(test_memory_reachable_from_the_network_without_secret_refused)
{
	struct cfg cfg;
	struct cfg_errors errs = { 0 };

	assert_one_error("[famd]\nrole = memory\n[memory]\n"
	    "listen = 0.0.0.0:7700\n", ":4: [memory] listen = 0.0.0.0:7700 is "
	    "reachable from other nodes, and [famd] secret_file is not set");
	assert_one_error("[famd]\nrole = memory\n[memory]\n"
	    "listen = [2001:db8::1]:7700\n", ":4: [memory] listen");
	/* Loopback, or a secret: fine. */
	ck_assert_int_eq(load_text("[famd]\nrole = memory\n[memory]\n"
	    "listen = 127.0.0.2:7700\n", &cfg, &errs), 0);
	cfg_free(&cfg);
	ck_assert_int_eq(load_text("[famd]\nrole = memory\n[memory]\n"
	    "listen = [::1]:0\n", &cfg, &errs), 0);
	cfg_free(&cfg);
	ck_assert_int_eq(load_text("[famd]\nrole = memory\n"
	    "secret_file = /etc/famd.secret\n", &cfg, &errs), 0);
	cfg_free(&cfg);
	/* The default listens on loopback only. */
	ck_assert_int_eq(load_text("[famd]\nrole = memory\n", &cfg, &errs), 0);
	ck_assert_str_eq(cfg_str(&cfg, CFG_MEMORY_LISTEN), "127.0.0.1:7700");
	cfg_free(&cfg);
	ck_assert_uint_eq(errs.count, 0);
}
END_TEST

START_TEST(test_error_unknown_section)
{
	assert_one_error("[famd]\nrole = dpu\n[nosuch]\nx = 1\n",
	    ":3: unknown section [nosuch]");
}
END_TEST

START_TEST(test_error_unknown_key)
{
	assert_one_error("[famd]\nrole = dpu\nrolez = 1\n",
	    ":3: unknown key 'rolez' in [famd]; did you mean [famd] role?");
}
END_TEST

START_TEST(test_unknown_key_suggests_the_closest_known_one)
{
	/* A typo, the right key in the wrong section, nothing close. */
	assert_one_error("[famd]\nrole = memory\n[memory]\ncapacty = 1G\n",
	    ":4: unknown key 'capacty' in [memory]; did you mean [memory] "
	    "capacity?");
	assert_one_error("[famd]\nrole = memory\ncapacity = 1G\n",
	    ":3: unknown key 'capacity' in [famd]; did you mean [memory] "
	    "capacity?");
	struct cfg cfg;
	struct cfg_errors errs = { 0 };

	ck_assert_int_lt(load_text("[famd]\nrole = memory\nzzzzqqq = 1\n", &cfg,
	    &errs), 0);
	ck_assert_uint_eq(errs.count, 1);
	ck_assert_ptr_null(strstr(errs.msg[0], "did you mean"));
	cfg_errors_free(&errs);
	cfg_free(&cfg);
}
END_TEST

START_TEST(test_error_bad_enum)
{
	assert_one_error("[famd]\nrole = hots\n", ":2: [famd] role: 'hots' "
	    "is not one of: host, dpu, memory");
}
END_TEST

START_TEST(test_error_integer_malformed)
{
	assert_one_error("[famd]\nrole = dpu\nadmin_max_clients = 12a\n",
	    ":3: [famd] admin_max_clients: '12a' is not an integer");
}
END_TEST

START_TEST(test_error_integer_out_of_range)
{
	assert_one_error("[famd]\nrole = dpu\nadmin_max_clients = 5000\n",
	    "out of range (1 to 1024)");
	assert_one_error("[famd]\nrole = dpu\nadmin_max_clients = -1\n",
	    "out of range");
	assert_one_error("[famd]\nrole = dpu\n"
	    "admin_max_clients = 99999999999999999999999\n", "not an integer");
}
END_TEST

START_TEST(test_error_duration_malformed_and_range)
{
	assert_one_error("[famd]\nrole = dpu\nadmin_idle_timeout = 5 days\n",
	    "is not a duration");
	assert_one_error("[famd]\nrole = dpu\nadmin_idle_timeout = 10ms\n",
	    "out of range (100ms to 24h)");
	assert_one_error("[famd]\nrole = dpu\nadmin_idle_timeout = -5\n",
	    "is not a duration");
}
END_TEST

START_TEST(test_error_path_not_absolute)
{
	assert_one_error("[famd]\nrole = dpu\nadmin_socket = run/x.sock\n",
	    "'run/x.sock' is not an absolute path");
}
END_TEST

START_TEST(test_error_string_too_long_or_control)
{
	char buf[256];

	snprintf(buf, sizeof buf, "[famd]\nrole = dpu\nnode_name = %s\n",
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
	assert_one_error(buf, "longer than 63 characters");
	assert_one_error("[famd]\nrole = dpu\nnode_name = a\x01" "b\n",
	    "control character");
}
END_TEST

START_TEST(test_error_duplicate_key)
{
	assert_one_error("[famd]\nrole = dpu\nlog_level = info\n\n"
	    "log_level = debug\n", ":5: [famd] log_level set twice (first on "
	    "line 3)");
}
END_TEST

START_TEST(test_error_key_outside_section)
{
	assert_one_error("role = dpu\n[famd]\nrole = dpu\n",
	    ":1: key 'role' outside any section");
}
END_TEST

START_TEST(test_error_line_without_equals)
{
	assert_one_error("[famd]\nrole = dpu\nlog_level debug\n",
	    ":3: expected key = value");
	assert_one_error("[famd]\nrole = dpu\n= debug\n",
	    ":3: expected key = value");
	assert_one_error("[famd]\nrole = dpu\nlog_level: debug\n",
	    ":3: expected key = value");
}
END_TEST

START_TEST(test_error_malformed_section_header)
{
	/* Keys under a broken header are not blamed as well. */
	assert_one_error("[famd]\nrole = dpu\n[famd\nlog_level = x\n",
	    ":3: malformed section header");
	assert_one_error("[famd]\nrole = dpu\n[famd] junk\nlog_level = x\n",
	    ":3: malformed section header");
}
END_TEST

START_TEST(test_error_continuation_line)
{
	assert_one_error("[famd]\nrole = dpu\nlog_level = info\n  debug\n",
	    ":4: indented line");
}
END_TEST

START_TEST(test_error_line_too_long)
{
	char buf[600];

	snprintf(buf, sizeof buf, "[famd]\nrole = dpu\n# %0400d\n", 0);
	assert_one_error(buf, ":3: line longer than");
}
END_TEST

START_TEST(test_error_nul_byte)
{
	const char text[] = "[famd]\nrole = dpu\nlog_level = in\0fo\n";
	struct cfg cfg;
	struct cfg_errors errs = { 0 };
	FILE *f;

	strcpy(tmpl, "/tmp/check_cfg.XXXXXX");
	close(mkstemp(tmpl));
	f = fopen(tmpl, "w");
	fwrite(text, 1, sizeof text - 1, f);
	fclose(f);
	ck_assert_int_lt(cfg_load(&cfg, tmpl, NULL, 0, &errs), 0);
	unlink(tmpl);
	ck_assert_uint_eq(errs.count, 1);
	ck_assert_ptr_nonnull(strstr(errs.msg[0], ":3: NUL byte"));
	cfg_errors_free(&errs);
	cfg_free(&cfg);
}
END_TEST

START_TEST(test_error_role_required)
{
	assert_one_error("[famd]\nlog_level = info\n", "[famd] role is required");
	assert_one_error("", "[famd] role is required");
}
END_TEST

START_TEST(test_error_missing_file)
{
	struct cfg cfg;
	struct cfg_errors errs = { 0 };

	ck_assert_int_lt(cfg_load(&cfg, "/nonexistent/famd.conf", NULL, 0,
	    &errs), 0);
	ck_assert_uint_eq(errs.count, 1);
	ck_assert_ptr_nonnull(strstr(errs.msg[0], "cannot open"));
	cfg_errors_free(&errs);
	cfg_free(&cfg);
}
END_TEST

START_TEST(test_every_error_reported_at_once)
{
	struct cfg cfg;
	struct cfg_errors errs = { 0 };

	ck_assert_int_lt(load_text("[famd]\nrole = x\nfoo = 1\n[bar]\n"
	    "admin_max_clients = 0\n", &cfg, &errs), 0);
	/* role bad, foo unknown, [bar] unknown (its key is not blamed). */
	ck_assert_uint_eq(errs.count, 3);
	cfg_errors_free(&errs);
	cfg_free(&cfg);
}
END_TEST

START_TEST(test_overrides)
{
	char *good[] = { "famd.log_level=debug", "famd.admin_max_clients=2" };
	char *bad[] = { "famd.nosuch=1", "nodot=1", "famd.log_level=loud" };
	struct cfg cfg;
	struct cfg_errors errs = { 0 };
	const char *path = write_conf("[famd]\nrole = dpu\nlog_level = info\n");

	ck_assert_int_eq(cfg_load(&cfg, path, good, 2, &errs), 0);
	ck_assert_int_eq(cfg_int(&cfg, CFG_LOG_LEVEL), 4);
	ck_assert_int_eq(cfg_int(&cfg, CFG_ADMIN_MAX_CLIENTS), 2);
	cfg_free(&cfg);
	ck_assert_int_lt(cfg_load(&cfg, path, bad, 3, &errs), 0);
	ck_assert_uint_eq(errs.count, 3);
	ck_assert_ptr_nonnull(strstr(errs.msg[0], "unknown key"));
	ck_assert_ptr_nonnull(strstr(errs.msg[1], "expected section.key=value"));
	ck_assert_ptr_nonnull(strstr(errs.msg[2], "is not one of"));
	cfg_errors_free(&errs);
	cfg_free(&cfg);
	unlink(path);
}
END_TEST

START_TEST(test_to_json)
{
	struct cfg cfg;
	struct cfg_errors errs = { 0 };
	json_t *j, *k;

	ck_assert_int_eq(load_text("[famd]\nrole = dpu\n"
	    "admin_idle_timeout = 2m\n", &cfg, &errs), 0);
	j = cfg_to_json(&cfg);
	k = json_object_get(json_object_get(j, "famd"), "admin_idle_timeout");
	ck_assert_int_eq(json_integer_value(json_object_get(k, "value")),
	    120000);
	ck_assert_str_eq(json_string_value(json_object_get(k, "text")), "2m");
	ck_assert(json_is_false(json_object_get(k, "default")));
	ck_assert(json_is_true(json_object_get(k, "reloadable")));
	json_decref(j);
	cfg_free(&cfg);
}
END_TEST


START_TEST(test_error_size_malformed_range_pow2)
{
	assert_one_error("[famd]\nrole = host\n[host]\nmemory_nodes = a:1\n"
	    "chunk_size = 64Q\n", ":5: [host] chunk_size: '64Q' is not a size");
	assert_one_error("[famd]\nrole = host\n[host]\nmemory_nodes = a:1\n"
	    "chunk_size = 48K\n", "'48K' is not a power of two");
	assert_one_error("[famd]\nrole = host\n[host]\nmemory_nodes = a:1\n"
	    "chunk_size = 4M\n", "out of range (4K to 2M)");
	assert_one_error("[famd]\nrole = host\n[host]\nmemory_nodes = a:1\n"
	    "buffer_size = 99999999999T\n", "buffer_size");
}
END_TEST

START_TEST(test_error_addresses)
{
	assert_one_error("[famd]\nrole = memory\n[memory]\nlisten = 7700\n",
	    "'7700': expected host:port");
	assert_one_error("[famd]\nrole = memory\n[memory]\nlisten = a:-1\n",
	    "port must be 0 to 65535");
	assert_one_error("[famd]\nrole = memory\n[memory]\nlisten = a:99999\n",
	    "port must be 0 to 65535");
	assert_one_error("[famd]\nrole = host\n[host]\nmemory_nodes = a:0\n",
	    "port must be 1 to 65535");
	assert_one_error("[famd]\nrole = memory\n[memory]\nlisten = [::1\n",
	    "expected [address]:port");
	assert_one_error("[famd]\nrole = host\n[host]\n"
	    "memory_nodes = a:1, b:2,\n", "'': empty address");
	assert_one_error("[famd]\nrole = host\n[host]\n"
	    "memory_nodes = a:1,:2\n", "missing host");
}
END_TEST

START_TEST(test_addresses_and_auto)
{
	struct cfg cfg;
	struct cfg_errors errs = { 0 };

	ck_assert_int_eq(load_text("[famd]\nrole = host\nsecret_file =\n"
	    "[host]\nmemory_nodes = 10.0.0.1:7700, [fe80::1]:7701\n"
	    "numa_node = 1\n", &cfg, &errs), 0);
	ck_assert_int_eq(cfg_int(&cfg, CFG_HOST_MEMORY_NODES), 2);
	ck_assert_int_eq(cfg_int(&cfg, CFG_HOST_NUMA_NODE), 1);
	ck_assert_str_eq(cfg_str(&cfg, CFG_SECRET_FILE), "");
	cfg_free(&cfg);
	/* A listener may take any free port. */
	ck_assert_int_eq(load_text("[famd]\nrole = memory\n[memory]\n"
	    "listen = 127.0.0.1:0\n", &cfg, &errs), 0);
	ck_assert_str_eq(cfg_str(&cfg, CFG_MEMORY_LISTEN), "127.0.0.1:0");
	cfg_free(&cfg);
	ck_assert_int_eq(load_text("[famd]\nrole = host\n[host]\n"
	    "memory_nodes = m:1\n", &cfg, &errs), 0);
	ck_assert_int_eq(cfg_int(&cfg, CFG_HOST_NUMA_NODE), -1);
	ck_assert_int_eq(cfg_int(&cfg, CFG_HOST_CHUNK_SIZE), 65536);
	cfg_free(&cfg);
	assert_one_error("[famd]\nrole = host\n[host]\nmemory_nodes = m:1\n"
	    "numa_node = near\n", "'near' is not an integer");
}
END_TEST

START_TEST(test_duration_takes_auto_where_allowed)
{
	struct cfg cfg;
	struct cfg_errors errs = { 0 };
	struct cfg_value v = { 0 };
	char *cause, *text;

	ck_assert_int_eq(load_text("[famd]\nrole = host\n[host]\n"
	    "memory_nodes = m:1\n", &cfg, &errs), 0);
	ck_assert_int_eq(cfg_int(&cfg, CFG_HOST_HEDGE_AFTER), -1);
	text = cfg_format_value(CFG_HOST_HEDGE_AFTER,
	    &cfg.v[CFG_HOST_HEDGE_AFTER]);
	ck_assert_str_eq(text, "auto");
	free(text);
	cfg_free(&cfg);
	ck_assert_int_eq(load_text("[famd]\nrole = host\n[host]\n"
	    "memory_nodes = m:1\nhedge_after = 5ms\n", &cfg, &errs), 0);
	ck_assert_int_eq(cfg_int(&cfg, CFG_HOST_HEDGE_AFTER), 5);
	cfg_free(&cfg);
	ck_assert_int_eq(load_text("[famd]\nrole = host\n[host]\n"
	    "memory_nodes = m:1\nhedge_after = 0\n", &cfg, &errs), 0);
	ck_assert_int_eq(cfg_int(&cfg, CFG_HOST_HEDGE_AFTER), 0);
	cfg_free(&cfg);
	/* a duration without auto_ok refuses it */
	ck_assert_int_lt(cfg_parse_value(CFG_OP_TIMEOUT, "auto", &v, &cause),
	    0);
	free(cause);
	free(v.s);
	assert_one_error("[famd]\nrole = host\n[host]\nmemory_nodes = m:1\n"
	    "hedge_after = 2h\n", "hedge_after");
}
END_TEST

START_TEST(test_int_takes_off_where_allowed)
{
	struct cfg cfg;
	struct cfg_errors errs = { 0 };
	struct cfg_value v = { 0 };
	char *cause, *text;

	ck_assert_int_eq(load_text("[famd]\nrole = memory\n", &cfg, &errs), 0);
	ck_assert_int_eq(cfg_int(&cfg, CFG_CPU_LATENCY), 0);
	cfg_free(&cfg);
	ck_assert_int_eq(load_text("[famd]\nrole = memory\ncpu_latency = off\n",
	    &cfg, &errs), 0);
	ck_assert_int_eq(cfg_int(&cfg, CFG_CPU_LATENCY), -1);
	text = cfg_format_value(CFG_CPU_LATENCY, &cfg.v[CFG_CPU_LATENCY]);
	ck_assert_str_eq(text, "off");
	free(text);
	cfg_free(&cfg);
	ck_assert_int_eq(load_text("[famd]\nrole = memory\ncpu_latency = 20\n",
	    &cfg, &errs), 0);
	ck_assert_int_eq(cfg_int(&cfg, CFG_CPU_LATENCY), 20);
	cfg_free(&cfg);
	/* not "auto", not negative, and "off" only where allowed */
	assert_one_error("[famd]\nrole = memory\ncpu_latency = auto\n",
	    "cpu_latency");
	assert_one_error("[famd]\nrole = memory\ncpu_latency = -1\n",
	    "cpu_latency");
	ck_assert_int_lt(cfg_parse_value(CFG_ADMIN_MAX_CLIENTS, "off", &v,
	    &cause), 0);
	free(cause);
	free(v.s);
}
END_TEST

START_TEST(test_error_required_only_for_its_role)
{
	struct cfg cfg;
	struct cfg_errors errs = { 0 };

	assert_one_error("[famd]\nrole = host\n",
	    "[host] memory_nodes is required");
	ck_assert_int_eq(load_text("[famd]\nrole = memory\n", &cfg, &errs), 0);
	cfg_free(&cfg);
}
END_TEST

START_TEST(test_error_watermarks_crossed)
{
	assert_one_error("[famd]\nrole = host\n[host]\nmemory_nodes = m:1\n"
	    "high_watermark = 80\nlow_watermark = 90\n",
	    ":6: [host] low_watermark (90) must be below high_watermark (80)");
	assert_one_error("[famd]\nrole = host\n[host]\nmemory_nodes = m:1\n"
	    "buffer_size = 1M\nchunk_size = 512K\n", "at least 4 chunks");
}
END_TEST

/* A value famd could not show in config.show or send in its hello. */
START_TEST(test_error_value_not_utf8)
{
	assert_one_error("[famd]\nrole = memory\nnode_name = h\xf4te\n",
	    ":3: [famd] node_name: not valid UTF-8");
	assert_one_error("[famd]\nrole = memory\nadmin_socket = /run/\xff\n",
	    ":3: [famd] admin_socket: not valid UTF-8");
}
END_TEST

START_TEST(test_list_items_are_trimmed_and_empty_ones_kept)
{
	const char *p = " a:1 ,b:2,, c:3 ", *item;
	const char *want[] = { "a:1", "b:2", "", "c:3" };
	size_t len, n = 0;

	while (p != NULL) {
		item = list_item(p, &len, &p);
		ck_assert_uint_lt(n, 4);
		ck_assert_uint_eq(len, strlen(want[n]));
		ck_assert(strncmp(item, want[n], len) == 0);
		n++;
	}
	ck_assert_uint_eq(n, 4);
}
END_TEST

START_TEST(test_load_from_a_stream)
{
	char bad[] = "[famd]\nrole = memory\n[memory]\ncapacity = 2G\n"
	    "listen = nohost\n";
	char good[] = "[famd]\nrole = memory\n[memory]\ncapacity = 2G\n";
	char *o[] = { "memory.listen=127.0.0.1:0" };
	struct cfg cfg;
	struct cfg_errors errs = { 0 };
	FILE *f = fmemopen(bad, strlen(bad), "r");

	/* Errors name the file as the caller does. */
	ck_assert_ptr_nonnull(f);
	ck_assert_int_lt(cfg_load_file(&cfg, f, "stream.conf", NULL, 0,
	    &errs), 0);
	fclose(f);
	ck_assert_uint_eq(errs.count, 1);
	ck_assert_ptr_nonnull(strstr(errs.msg[0], "stream.conf:5:"));
	cfg_errors_free(&errs);
	cfg_free(&cfg);

	/* Overrides apply after the stream, defaults after them. */
	f = fmemopen(good, strlen(good), "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(cfg_load_file(&cfg, f, "stream.conf", o, 1, &errs),
	    0);
	fclose(f);
	ck_assert_str_eq(cfg.path, "stream.conf");
	ck_assert_int_eq(cfg_int(&cfg, CFG_MEMORY_CAPACITY), 2ll << 30);
	ck_assert_str_eq(cfg_str(&cfg, CFG_MEMORY_LISTEN), "127.0.0.1:0");
	ck_assert(!cfg.v[CFG_MEMORY_SESSION_GRACE].set);
	cfg_free(&cfg);
}
END_TEST

static Suite *
cfg_suite(void)
{
	Suite *s = suite_create("cfg");
	TCase *t = tcase_create("table");

	tcase_add_test(t, test_every_key_is_described);
	tcase_add_test(t, test_every_default_and_example_parses);
	tcase_add_test(t, test_generated_example_loads_for_each_role);
	tcase_add_test(t, test_man_page_lists_every_key);
	suite_add_tcase(s, t);

	t = tcase_create("parse");
	tcase_add_test(t, test_values_and_defaults);
	tcase_add_test(t, test_durations_and_units);
	tcase_add_test(t, test_overrides);
	tcase_add_test(t, test_to_json);
	tcase_add_test(t, test_load_from_a_stream);
	suite_add_tcase(s, t);

	t = tcase_create("bad_input");
	tcase_add_test(t, test_error_unknown_section);
	tcase_add_test(t,
	    test_memory_reachable_from_the_network_without_secret_refused);
	tcase_add_test(t, test_error_unknown_key);
	tcase_add_test(t, test_unknown_key_suggests_the_closest_known_one);
	tcase_add_test(t, test_error_bad_enum);
	tcase_add_test(t, test_error_integer_malformed);
	tcase_add_test(t, test_error_integer_out_of_range);
	tcase_add_test(t, test_error_duration_malformed_and_range);
	tcase_add_test(t, test_error_path_not_absolute);
	tcase_add_test(t, test_error_string_too_long_or_control);
	tcase_add_test(t, test_error_value_not_utf8);
	tcase_add_test(t, test_error_duplicate_key);
	tcase_add_test(t, test_error_key_outside_section);
	tcase_add_test(t, test_error_line_without_equals);
	tcase_add_test(t, test_error_malformed_section_header);
	tcase_add_test(t, test_error_continuation_line);
	tcase_add_test(t, test_error_line_too_long);
	tcase_add_test(t, test_error_nul_byte);
	tcase_add_test(t, test_error_role_required);
	tcase_add_test(t, test_error_missing_file);
	tcase_add_test(t, test_every_error_reported_at_once);
	tcase_add_test(t, test_error_size_malformed_range_pow2);
	tcase_add_test(t, test_error_addresses);
	tcase_add_test(t, test_addresses_and_auto);
	tcase_add_test(t, test_duration_takes_auto_where_allowed);
	tcase_add_test(t, test_int_takes_off_where_allowed);
	tcase_add_test(t, test_error_required_only_for_its_role);
	tcase_add_test(t, test_error_watermarks_crossed);
	tcase_add_test(t, test_list_items_are_trimmed_and_empty_ones_kept);
	suite_add_tcase(s, t);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(cfg_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? 0 : 1;
}
