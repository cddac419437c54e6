/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famctl.c - asks a famd how it is doing, and tells it what to do, over its
 * admin socket (JSON-RPC 2.0, one object per line).
 *
 * Exit status: 0 ok, 1 famd answered with an error, 64 usage, 69 no famd
 * at the socket, 77 permission denied.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl/famctl.h"
#include "core/famd.h"

static const char *ctl_socket = FAMD_DEFAULT_ADMIN;
static int ctl_timeout_ms = 10000;

/* Prints the usage message. */
static void
ctl_usage(FILE *f)
{
	fprintf(f,
	    "usage: famctl [-jV] [-s socket] [-T seconds] command [args]\n"
	    "  -s socket   famd's admin socket (default %s, or $FAMD_SOCKET)\n"
	    "  -j, --json  print famd's answer as JSON\n"
	    "  -T seconds  how long to wait for an answer (default 10)\n"
	    "  -V, --version  print the version and exit\n"
	    "  -h, --help  print this and exit\n"
	    "commands:\n"
	    "  status                  role, uptime, peers and counters\n"
	    "  regions                 host: programs using fabric-attached memory;\n"
	    "                          memory: the regions it lends\n"
	    "  config                  every configuration key\n"
	    "  reload                  reload the configuration file\n"
	    "  log-level [LEVEL]       show or set the log level\n"
	    "  metrics                 the status as OpenMetrics text "
	    "(Prometheus)\n"
	    "  stats-reset             zero the counters (a debugging aid)\n"
	    "  commands                list every command famd answers\n"
	    "  call METHOD [PARAMS]    call any command; PARAMS is a JSON "
	    "object\n", FAMD_DEFAULT_ADMIN);
}

/* Connects to famd's admin socket or exits with 69 or 77. */
static int
ctl_connect(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(ctl_socket) >= sizeof sun.sun_path) {
		fprintf(stderr, "famctl: socket path too long: %s\n",
		    ctl_socket);
		exit(FAMD_EX_USAGE);
	}
	strcpy(sun.sun_path, ctl_socket);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "famctl: socket: %s\n", strerror(errno));
		exit(FAMD_EX_UNAVAILABLE);
	}
	if (connect(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
		int e = errno;

		if (e == EACCES || e == EPERM) {
			fprintf(stderr, "famctl: permission denied on %s\n",
			    ctl_socket);
			exit(FAMD_EX_NOPERM);
		}
		fprintf(stderr, "famctl: no famd at %s: %s\n", ctl_socket,
		    strerror(e));
		exit(FAMD_EX_UNAVAILABLE);
	}
	return fd;
}

/* Reads one line (the answer) within the timeout, or exits with 69. */
static char *
ctl_read_line(int fd)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	uint64_t deadline = mono_ns() + (uint64_t)ctl_timeout_ms * 1000000u;

	if (buf == NULL)
		abort();
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int64_t left = (int64_t)(deadline - mono_ns()) / 1000000;
		char *nl;
		ssize_t n;

		if (left <= 0 || poll(&pfd, 1, (int)left) == 0) {
			fprintf(stderr, "famctl: no answer from famd at %s "
			    "within %d s\n", ctl_socket, ctl_timeout_ms / 1000);
			free(buf);
			exit(FAMD_EX_UNAVAILABLE);
		}
		if (len + 1 >= cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			if (buf == NULL)
				abort();
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "famctl: famd at %s closed the "
			    "connection%s%s\n", ctl_socket, n < 0 ? ": " : "",
			    n < 0 ? strerror(errno) : "");
			free(buf);
			exit(FAMD_EX_UNAVAILABLE);
		}
		len += (size_t)n;
		buf[len] = '\0';
		nl = strchr(buf, '\n');
		if (nl != NULL) {
			*nl = '\0';
			return buf;
		}
	}
}

/*
 * Calls method with params (owned) and returns the result, or exits with
 * famd's error: 77 for a refusal, 1 for anything else.
 */
static json_t *
ctl_call(const char *method, json_t *params)
{
	json_t *req, *resp, *err, *result;
	json_error_t jerr;
	char *line, *ans;
	int fd = ctl_connect();
	size_t len, off = 0;

	req = json_pack("{s:s,s:s,s:i}", "jsonrpc", "2.0", "method", method,
	    "id", 1);
	if (params != NULL)
		json_object_set_new(req, "params", params);
	line = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	len = strlen(line);
	line[len++] = '\n'; /* replaces the NUL; the length is tracked */
	while (off < len) {
		ssize_t n = send(fd, line + off, len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break; /* famd may have said why before closing */
		off += (size_t)n;
	}
	free(line);
	ans = ctl_read_line(fd);
	close(fd);
	resp = json_loads(ans, 0, &jerr);
	if (resp == NULL || !json_is_object(resp)) {
		fprintf(stderr, "famctl: unreadable answer from famd: %s\n",
		    resp == NULL ? jerr.text : "not an object");
		json_decref(resp);
		free(ans);
		exit(FAMD_EX_FAIL);
	}
	free(ans);
	err = json_object_get(resp, "error");
	if (err != NULL) {
		json_t *code = json_object_get(err, "code");
		json_t *msg = json_object_get(err, "message");
		int rc = json_integer_value(code) == ADMIN_ERR_PERMISSION ?
		    FAMD_EX_NOPERM : FAMD_EX_FAIL;

		const char *text = json_is_string(msg) ?
		    json_string_value(msg) : "error";
		size_t ml = strlen(method);

		/* famd's message may name the method already. */
		if (strncmp(text, method, ml) == 0 && text[ml] == ':')
			fprintf(stderr, "famctl: %s\n", text);
		else
			fprintf(stderr, "famctl: %s: %s\n", method, text);
		json_decref(resp); /* nothing left for a leak checker */
		exit(rc);
	}
	result = json_incref(json_object_get(resp, "result"));
	json_decref(resp);
	if (result == NULL) {
		fprintf(stderr, "famctl: answer without a result\n");
		exit(FAMD_EX_FAIL);
	}
	return result;
}

/* Prints list-commands as a table: name, changes, parameters, help. */
static void
ctl_print_commands(json_t *list)
{
	size_t i, w = 4;
	json_t *c;

	json_array_foreach(list, i, c) {
		size_t n = strlen(json_string_value(json_object_get(c,
		    "name")) ?: "");

		if (n > w)
			w = n;
	}
	printf("%-*s  %-7s  %-16s  %s\n", (int)w, "NAME", "CHANGES", "PARAMS",
	    "HELP");
	json_array_foreach(list, i, c) {
		char params[128] = "-";
		size_t j, off = 0;
		json_t *p;

		json_array_foreach(json_object_get(c, "params"), j, p) {
			int n = snprintf(params + off, sizeof params - off,
			    "%s%s%s", j > 0 ? "," : "",
			    json_string_value(json_object_get(p, "name")) ?: "",
			    json_is_true(json_object_get(p, "required")) ?
			    "" : "?");

			if (n < 0 || (size_t)n >= sizeof params - off)
				break;
			off += (size_t)n;
		}
		printf("%-*s  %-7s  %-16s  %s\n", (int)w,
		    json_string_value(json_object_get(c, "name")) ?: "",
		    json_is_true(json_object_get(c, "changes")) ? "yes" : "no",
		    params, json_string_value(json_object_get(c, "help")) ?:
		    "");
	}
}

/*
 * Prints config.show as the file famd would read: a section header, then
 * "key = value" per key, "# default" after the ones not set.
 */
static void
ctl_print_config(json_t *result)
{
	json_t *keys = json_object_get(result, "keys"), *sec, *k;
	const char *sname, *kname;

	printf("# %s\n", json_string_value(json_object_get(result, "file")) ?:
	    "");
	json_object_foreach(keys, sname, sec) {
		printf("[%s]\n", sname);
		json_object_foreach(sec, kname, k) {
			const char *text = json_string_value(json_object_get(k,
			    "text")) ?: "";
			bool def = json_is_true(json_object_get(k, "default"));

			printf("%s = %s%s\n", kname, text,
			    def ? "  # default" : "");
		}
	}
}

/* Prints a result as JSON or for people. */
static void
ctl_print(json_t *result, bool as_json)
{
	if (as_json) {
		char *s = json_dumps(result, JSON_INDENT(2) | JSON_ENCODE_ANY);

		printf("%s\n", s);
		free(s);
	} else
		render_value(stdout, result, 0);
}

int
main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "socket", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *env = getenv("FAMD_SOCKET"), *cmd, *method;
	json_t *params = NULL, *result;
	bool as_json = false;
	int ch;

	if (env != NULL && *env != '\0')
		ctl_socket = env;
	while ((ch = getopt_long(argc, argv, "+hjs:T:V", longopts, NULL)) != -1) {
		switch (ch) {
		case 'j':
			as_json = true;
			break;
		case 's':
			ctl_socket = optarg;
			break;
		case 'T':
			ctl_timeout_ms = atoi(optarg) * 1000;
			if (ctl_timeout_ms <= 0) {
				fprintf(stderr, "famctl: bad timeout %s\n",
				    optarg);
				return FAMD_EX_USAGE;
			}
			break;
		case 'h':
			ctl_usage(stdout);
			return FAMD_EX_OK;
		case 'V':
			printf("famctl %s\n", PACKAGE_VERSION);
			return FAMD_EX_OK;
		default:
			ctl_usage(stderr);
			return FAMD_EX_USAGE;
		}
	}
	if (optind >= argc) {
		ctl_usage(stderr);
		return FAMD_EX_USAGE;
	}
	cmd = argv[optind++];
	/* Options may also follow the command: famctl status --json. */
	while (optind < argc && (strcmp(argv[optind], "--json") == 0 ||
	    strcmp(argv[optind], "-j") == 0)) {
		as_json = true;
		optind++;
	}

	if (strcmp(cmd, "call") == 0) {
		json_error_t jerr;

		if (optind >= argc || argc - optind > 2) {
			ctl_usage(stderr);
			return FAMD_EX_USAGE;
		}
		method = argv[optind++];
		if (optind < argc) {
			params = json_loads(argv[optind++],
			    JSON_REJECT_DUPLICATES, &jerr);
			if (params == NULL) {
				fprintf(stderr, "famctl: PARAMS is not JSON: "
				    "%s\n", jerr.text);
				return FAMD_EX_USAGE;
			}
		}
		as_json = true;
	} else if (strcmp(cmd, "status") == 0)
		method = "status";
	else if (strcmp(cmd, "regions") == 0)
		method = "regions";
	else if (strcmp(cmd, "config") == 0)
		method = "config.show";
	else if (strcmp(cmd, "reload") == 0)
		method = "config.reload";
	else if (strcmp(cmd, "stats-reset") == 0)
		method = "stats.reset";
	else if (strcmp(cmd, "metrics") == 0)
		method = "metrics";
	else if (strcmp(cmd, "commands") == 0)
		method = "list-commands";
	else if (strcmp(cmd, "log-level") == 0) {
		method = "log.level";
		if (optind < argc)
			params = json_pack("{s:s}", "level", argv[optind++]);
	} else {
		fprintf(stderr, "famctl: unknown command '%s'\n", cmd);
		ctl_usage(stderr);
		return FAMD_EX_USAGE;
	}
	if (optind < argc) {
		fprintf(stderr, "famctl: unexpected argument '%s'\n",
		    argv[optind]);
		return FAMD_EX_USAGE;
	}
	result = ctl_call(method, params);
	if (strcmp(cmd, "metrics") == 0 && !as_json &&
	    json_is_string(json_object_get(result, "text")))
		fputs(json_string_value(json_object_get(result, "text")),
		    stdout);
	else if (strcmp(cmd, "commands") == 0 && !as_json &&
	    json_is_array(result))
		ctl_print_commands(result);
	else if (strcmp(cmd, "config") == 0 && !as_json &&
	    json_is_object(json_object_get(result, "keys")))
		ctl_print_config(result);
	else
		ctl_print(result, as_json);
	json_decref(result);
	return FAMD_EX_OK;
}
