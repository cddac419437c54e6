/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz-dpu.c - libFuzzer target: a dpu famd's receive path from hosts: the
 * tcp transport, the decoders, and the dpu role's sessions, the control
 * requests it forwards to a memory node (REGION_CREATE, REGION_ADOPT,
 * REGION_FREE, REGION_ADVISE, STATS), reads and writes with aggregation
 * and the static cache (src/dpu/: dpu-host.c, dpu-forward.c, dpu-cache*.c).
 *
 * Each input is what up to four hosts send (fuzz-net.h). For it, a memory
 * famd and a dpu famd are started in this process, on one event loop, as
 * famd.c starts them (tcp on loopback ports, a secret; the dpu forwards on
 * that loop, async = no, caches regions named "web" whole and keeps a small
 * dynamic cache, whose prefetch workers are threads); the input goes to
 * the dpu once its memory node is up. Both are stopped at the end:
 * everything the input made either allocate must then be freed.
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

#define FUZZ_UP_DEADLINE_S 10 /* for the dpu to reach its memory node */

static struct famd fuzz_mem, fuzz_dpu;
static struct cfg fuzz_mem_cfg;
static const char *fuzz_dir;

/* Prepares both famds; the roles start per input. */
int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct event_base *base;
	char *text;

	fuzz_dir = fuzz_net_dir("dpu");
	text = xasprintf("[famd]\nrole = memory\nnode_name = fuzz-memory\n"
	    "log_level = err\nsecret_file = %s/secret\nop_timeout = 2s\n"
	    "[memory]\nlisten = 127.0.0.1:0\ncapacity = 16M\n"
	    "preload_dir = %s/preload\nsession_grace = 0\n", fuzz_dir,
	    fuzz_dir);
	fuzz_net_cfg(&fuzz_mem_cfg, text);
	free(text);
	signal(SIGPIPE, SIG_IGN);
	log_open(LOG_DEST_STDERR, LOG_ERR);
	base = event_base_new();
	if (base == NULL)
		exit(1);
	fuzz_mem.cfg = &fuzz_mem_cfg;
	fuzz_mem.cfg_path = fuzz_mem_cfg.path;
	fuzz_mem.role = ROLE_MEMORY;
	fuzz_mem.ops = &role_memory_ops;
	fuzz_mem.base = base;
	fuzz_dpu.role = ROLE_DPU;
	fuzz_dpu.ops = &role_dpu_ops;
	fuzz_dpu.base = base;
	time(&fuzz_mem.started);
	clock_gettime(CLOCK_MONOTONIC, &fuzz_mem.started_mono);
	fuzz_dpu.started = fuzz_mem.started;
	fuzz_dpu.started_mono = fuzz_mem.started_mono;
	famd = &fuzz_dpu;
	return 0;
}

/* Returns true once the dpu's memory node is up, as its status says. */
static bool
fuzz_dpu_ready(void)
{
	json_t *st = json_pack("{s:[]}", "peers");
	const char *state;
	bool up;

	fuzz_dpu.ops->status(&fuzz_dpu, st);
	state = json_string_value(json_object_get(json_array_get(
	    json_object_get(st, "peers"), 0), "state"));
	up = state != NULL && strcmp(state, "up") == 0;
	json_decref(st);
	return up;
}

/* The dpu never reached its memory node. */
static void
fuzz_up_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	bool *late = arg;

	*late = true;
}

/* Starts a memory famd, then a dpu famd that forwards to it. */
static void
fuzz_start(struct cfg *dpu_cfg)
{
	struct timeval deadline = { FUZZ_UP_DEADLINE_S, 0 };
	struct event *ev;
	bool late = false;
	char *text;

	/* Each role registers its own `regions`. */
	admin_unregister_all();
	if (fuzz_mem.ops->start(&fuzz_mem) < 0)
		abort();
	text = xasprintf("[famd]\nrole = dpu\nnode_name = fuzz-dpu\n"
	    "log_level = err\nsecret_file = %s/secret\nop_timeout = 2s\n"
	    "[dpu]\nlisten = 127.0.0.1:0\nmemory_nodes = 127.0.0.1:%u\n"
	    "session_grace = 0\nasync = no\nstatic_regions = web\n"
	    "static_size = 1M\ndynamic_cache = on\ncache_size = 1M\n"
	    "cache_entry_size = 64K\n",
	    fuzz_dir, fuzz_listen_port(&fuzz_mem, "memory"));
	fuzz_net_cfg(dpu_cfg, text);
	free(text);
	fuzz_dpu.cfg = dpu_cfg;
	fuzz_dpu.cfg_path = dpu_cfg->path;
	admin_unregister_all();
	if (fuzz_dpu.ops->start(&fuzz_dpu) < 0)
		abort();
	ev = evtimer_new(fuzz_dpu.base, fuzz_up_deadline_cb, &late);
	if (ev == NULL)
		abort();
	evtimer_add(ev, &deadline);
	while (!fuzz_dpu_ready() && !late)
		event_base_loop(fuzz_dpu.base, EVLOOP_ONCE);
	fuzz_assert(!late);
	event_free(ev);
}

/* Runs one input's streams through a dpu famd and a memory famd of its own. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cfg dpu_cfg;

	fuzz_start(&dpu_cfg);
	fuzz_streams(fuzz_dpu.base, fuzz_listen_port(&fuzz_dpu, "dpu"), data,
	    size);
	fuzz_dpu.ops->stop(&fuzz_dpu);
	fuzz_mem.ops->stop(&fuzz_mem);
	cfg_free(&dpu_cfg);
	return 0;
}
