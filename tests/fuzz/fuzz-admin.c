/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz-admin.c - libFuzzer target: the admin socket's JSON-RPC layer
 * (admin.c) and the commands of a memory famd (admin-cmds.c,
 * memory-role.c), driven as famctl drives them.
 *
 * Start-up builds a memory famd as famd.c does, from a configuration in a
 * private directory: its role listens on a loopback port, the admin
 * commands are registered, but no admin socket is opened. Each input is
 * then the byte stream of one admin connection: it is written into one end
 * of a bufferevent pair whose other end is served by admin_client_add(),
 * so it goes through the daemon's own line reader (admin_read_cb), the
 * validation ladder and the handlers, config.reload included. The stream
 * ends with EOF, and the connection must then close. The same input is
 * sent twice: by a peer that may not change famd, then by one that may
 * (famd's own user).
 *
 * Every line famd answers must be a JSON-RPC 2.0 response: an object with
 * the id and either a result or an error with a code and a message.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "core/famd.h"
#include "fuzz.h"

#define FUZZ_MAX_LOOPS 10000 /* loop turns for a connection to close */

static struct famd fuzz_famd;
static struct cfg fuzz_cfg;
static char fuzz_dir[] = "/tmp/famd-fuzz-admin.XXXXXX";
static char fuzz_conf[sizeof fuzz_dir + 16];

/* Removes the private directory at exit. */
static void
fuzz_cleanup(void)
{
	char path[sizeof fuzz_dir + 16];

	unlink(fuzz_conf);
	snprintf(path, sizeof path, "%s/preload", fuzz_dir);
	rmdir(path);
	rmdir(fuzz_dir);
}

/* Starts a memory famd without its admin socket, as famd.c's main() does. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct cfg_errors errs = { 0 };
	char preload[sizeof fuzz_dir + 16];
	FILE *f;

	if (mkdtemp(fuzz_dir) == NULL) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(fuzz_conf, sizeof fuzz_conf, "%s/famd.conf", fuzz_dir);
	snprintf(preload, sizeof preload, "%s/preload", fuzz_dir);
	atexit(fuzz_cleanup);
	if (mkdir(preload, 0700) < 0 || (f = fopen(fuzz_conf, "w")) == NULL) {
		perror(fuzz_dir);
		exit(1);
	}
	fprintf(f, "[famd]\nrole = memory\nnode_name = fuzz\n"
	    "admin_socket = %s/admin.sock\nlog_level = err\n"
	    "[memory]\nlisten = 127.0.0.1:0\ncapacity = 16M\n"
	    "preload_dir = %s\nsession_grace = 0\n", fuzz_dir, preload);
	if (fclose(f) != 0 ||
	    cfg_load(&fuzz_cfg, fuzz_conf, NULL, 0, &errs) < 0) {
		for (size_t i = 0; i < errs.count; i++)
			fprintf(stderr, "fuzz-admin: %s\n", errs.msg[i]);
		exit(1);
	}
	log_open(LOG_DEST_STDERR, LOG_ERR);
	famd = &fuzz_famd;
	famd->cfg = &fuzz_cfg;
	famd->cfg_path = fuzz_conf;
	famd->role = ROLE_MEMORY;
	famd->ops = &role_memory_ops;
	famd->base = event_base_new();
	if (famd->base == NULL)
		exit(1);
	time(&famd->started);
	clock_gettime(CLOCK_MONOTONIC, &famd->started_mono);
	admin_cmds_register();
	admin_reconfigure(famd->cfg);
	if (famd->ops->start(famd) < 0) {
		fprintf(stderr, "fuzz-admin: the memory role did not start\n");
		exit(1);
	}
	return 0;
}

/* Checks one line famd answered: a JSON-RPC 2.0 response. */
static void
fuzz_check_reply(const char *line, size_t len)
{
	json_t *r = json_loadb(line, len, 0, NULL), *err;

	fuzz_assert(json_is_object(r));
	fuzz_assert(json_is_string(json_object_get(r, "jsonrpc")));
	fuzz_assert(strcmp(json_string_value(json_object_get(r, "jsonrpc")),
	    "2.0") == 0);
	fuzz_assert(json_object_get(r, "id") != NULL);
	err = json_object_get(r, "error");
	fuzz_assert((err != NULL) != (json_object_get(r, "result") != NULL));
	if (err != NULL) {
		fuzz_assert(json_is_integer(json_object_get(err, "code")));
		fuzz_assert(json_is_string(json_object_get(err, "message")));
	}
	json_decref(r);
}

/* The client's end: reads and checks every line famd answers. */
static void
fuzz_client_read_cb(struct bufferevent *bev, void *arg)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len;
	char *line;

	while ((line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF)) != NULL) {
		fuzz_check_reply(line, len);
		free(line);
	}
}

/* Sends the input as one connection of a peer with uid; waits for its end. */
static void
fuzz_connection(const uint8_t *data, size_t size, uid_t uid)
{
	struct admin_peer peer = { .pid = 4242, .uid = uid, .gid = uid };
	struct bufferevent *pair[2];
	unsigned before = admin_clients();
	int loops = 0;

	if (bufferevent_pair_new(famd->base, BEV_OPT_DEFER_CALLBACKS, pair) < 0)
		abort();
	if (admin_client_add(pair[0], &peer) < 0)
		abort();
	bufferevent_setcb(pair[1], fuzz_client_read_cb, NULL, NULL, NULL);
	bufferevent_enable(pair[1], EV_READ | EV_WRITE);
	bufferevent_write(pair[1], data, size);
	bufferevent_flush(pair[1], EV_WRITE, BEV_FINISHED);
	while (admin_clients() > before && loops++ < FUZZ_MAX_LOOPS)
		event_base_loop(famd->base, EVLOOP_NONBLOCK);
	fuzz_assert(admin_clients() == before);
	/* Every answer arrived whole before the connection closed. */
	fuzz_client_read_cb(pair[1], NULL);
	fuzz_assert(evbuffer_get_length(bufferevent_get_input(pair[1])) == 0);
	bufferevent_free(pair[1]);
}

/* Sends one input on an admin connection, as each kind of peer. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uid_t self = geteuid();
	uid_t other = self == 0 ? 65534 : self + 1;

	fuzz_connection(data, size, other);
	fuzz_connection(data, size, self);
	/* Each input starts from the same log level. */
	log_set_level(LOG_ERR);
	return 0;
}
