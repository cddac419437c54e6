/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz-memory.c - libFuzzer target: a memory famd's receive path, from the
 * socket to the regions: the tcp transport's framing (transport-tcp.c),
 * the decoders of proto.c and the memory role's requests, leases, reads
 * and writes (src/memory/memory-*.c).
 *
 * Each input is what up to four peers send (fuzz-net.h). A memory famd is
 * started for it, as famd.c starts one (tcp on a loopback port, a secret,
 * quotas per peer, a preload directory with a file, an empty file and a
 * link out of it), so that region ids and counters start afresh and the
 * input replays exactly, and stopped at the end: everything the input made
 * famd allocate must then be freed. What it tells its admin must be whole:
 * once the peers are gone, the admin command `regions` lists as many
 * regions (those kept, persistent) as status counts.
 */
#include "config.h"

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "core/famd.h"
#include "fuzz.h"
#include "fuzz-net.h"

static struct famd fuzz_famd;
static struct cfg fuzz_cfg;

/* Prepares a memory famd's configuration; the role starts per input. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = fuzz_net_dir("memory");
	char *text = xasprintf("[famd]\nrole = memory\nnode_name = fuzz\n"
	    "admin_socket = %s/admin.sock\nlog_level = err\n"
	    "secret_file = %s/secret\nop_timeout = 2s\n"
	    "[memory]\nlisten = 127.0.0.1:0\ncapacity = 16M\n"
	    "preload_dir = %s/preload\nsession_grace = 0\n"
	    "peer_max_bytes = 8M\npeer_max_regions = 16\n"
	    "peer_secrets = %s/peers\n", dir, dir, dir, dir);

	fuzz_net_cfg(&fuzz_cfg, text);
	free(text);
	signal(SIGPIPE, SIG_IGN);
	log_open(LOG_DEST_STDERR, LOG_ERR);
	famd = &fuzz_famd;
	famd->cfg = &fuzz_cfg;
	famd->cfg_path = fuzz_cfg.path;
	famd->role = ROLE_MEMORY;
	famd->ops = &role_memory_ops;
	famd->base = event_base_new();
	if (famd->base == NULL)
		exit(1);
	time(&famd->started);
	clock_gettime(CLOCK_MONOTONIC, &famd->started_mono);
	return 0;
}

/* Checks that `regions` lists every region status counts. */
static void
fuzz_check_views(void)
{
	static const char line[] = "{\"jsonrpc\":\"2.0\",\"method\":"
	    "\"regions\",\"id\":1}";
	static const struct admin_peer peer = { .pid = 1 };
	json_t *st = json_pack("{s:[]}", "peers"), *answer, *list;
	char *out = admin_process(line, sizeof line - 1, &peer, false);
	json_int_t regions;

	famd->ops->status(famd, st);
	regions = json_integer_value(json_object_get(json_object_get(st,
	    "memory"), "regions"));
	answer = json_loads(out, 0, NULL);
	list = json_object_get(answer, "result");
	fuzz_assert(json_is_array(list));
	fuzz_assert((json_int_t)json_array_size(list) == regions);
	json_decref(answer);
	json_decref(st);
	free(out);
}

/* Runs one input's streams through a memory famd of its own. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	admin_unregister_all();
	if (famd->ops->start(famd) < 0)
		abort();
	fuzz_streams(famd->base, fuzz_listen_port(famd, "memory"), data,
	    size);
	fuzz_check_views();
	famd->ops->stop(famd);
	return 0;
}
