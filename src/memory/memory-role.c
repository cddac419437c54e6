/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memory-role.c - the memory role's lifecycle: lends this node's DRAM as
 * regions that hosts and dpus read and write over the transport.
 *
 * Owns: start (configuration, secret, listener), reload (session_grace),
 * status and stats.reset, stop (connections, then sessions, then regions),
 * and the admin commands `regions` and `region.free`. The objects below it
 * are in memory.h; they never call back into this file.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memory/memory.h"

/* ---- admin -------------------------------------------------------------- */

/* regions: every region with its size, flags, name and owner. */
static json_t *
cmd_regions(struct admin_req *req)
{
	json_t *list = json_array();
	struct mem_region *r;
	char fl[48];

	TAILQ_FOREACH(r, &mem.regions, link) {
		struct mem_handle *h = LIST_FIRST(&r->handles);

		json_array_append_new(list, json_pack("{s:I,s:I,s:I,s:s,s:s,"
		    "s:s,s:s,s:I,s:i,s:s,s:I,s:I}",
		    "id", (json_int_t)r->id,
		    "size", (json_int_t)r->size,
		    "length", (json_int_t)r->length,
		    "flags", mem_flags_text(fl, sizeof fl, r->flags),
		    "name", r->name[0] ? r->name : "-",
		    "file", r->path != NULL ? r->path : "-",
		    "node", r->node,
		    "session", (json_int_t)(h != NULL ? h->s->serial : 0),
		    "users", (int)r->nhandles,
		    "state", r->nhandles > 0 ? "in use" : "kept",
		    "bytes_read", (json_int_t)r->bytes_read,
		    "bytes_written", (json_int_t)r->bytes_written));
	}
	return list;
}

/* region.free: frees a region no session uses (a kept persistent one). */
static json_t *
cmd_region_free(struct admin_req *req)
{
	json_int_t id = json_integer_value(json_object_get(req->params, "id"));
	struct mem_region *r;
	char why[64];

	if (id <= 0 || id > UINT32_MAX ||
	    (r = mem_region_find((uint32_t)id)) == NULL)
		return admin_fail(req, ADMIN_ERR_PARAMS,
		    "region.free: no region %" JSON_INTEGER_FORMAT, id);
	if (r->nhandles > 0)
		return admin_fail(req, ADMIN_ERR_FAILED, "region.free: region "
		    "%" JSON_INTEGER_FORMAT " is in use by %u session%s", id,
		    r->nhandles, r->nhandles == 1 ? "" : "s");
	snprintf(why, sizeof why, "freed by uid %ld", (long)req->peer->uid);
	mem_region_unlink(r, why);
	return json_pack("{s:I}", "id", id);
}

static const struct admin_param region_free_params[] = {
	{ "id", ADMIN_P_INT, true },
	{ NULL, 0, false },
};

static const struct admin_cmd mem_cmds[] = {
	{ "regions", "list the regions this memory node lends", NULL, 0,
	    cmd_regions },
	{ "region.free", "free a region that no session uses, "
	    "{\"id\": N}", region_free_params, ADMIN_F_CHANGE,
	    cmd_region_free },
};

/* ---- role --------------------------------------------------------------- */

/* Chooses the name this node gives its peers. */
static void
mem_set_node(const struct cfg *cfg)
{
	const char *name = cfg_str(cfg, CFG_NODE_NAME);
	char host[256] = "";

	if (*name == '\0') {
		gethostname(host, sizeof host - 1);
		name = host;
	}
	snprintf(mem.node, sizeof mem.node, "%s", *name ? name : "memory");
	for (char *p = mem.node; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

/* Sets the transport's options from the configuration and the secret. */
static int
mem_set_opts(const struct cfg *cfg)
{
	char *cause = NULL;
	int err;

	mem.opts.kind = cfg_int(cfg, CFG_TRANSPORT) == CFG_TRANSPORT_VERBS ?
	    FAM_TP_VERBS : FAM_TP_TCP;
	mem.opts.op_timeout_ms = (uint32_t)cfg_int(cfg, CFG_OP_TIMEOUT);
	mem.opts.hello_timeout_ms = (uint32_t)cfg_int(cfg,
	    CFG_MEMORY_HELLO_TIMEOUT);
	mem.opts.max_outstanding = MEM_MAX_OUTSTANDING;
	mem.opts.inject_error_ppm = (uint32_t)cfg_int(cfg,
	    CFG_VERBS_INJECT_ERROR_PPM);
	mem.opts.max_payload = FAM_PROTO_MAX_PAYLOAD;
	mem.opts.hello.role = FAM_WIRE_ROLE_MEMORY;
	snprintf(mem.opts.hello.node, sizeof mem.opts.hello.node, "%s",
	    mem.node);
	err = secret_load(cfg_str(cfg, CFG_SECRET_FILE), mem.opts.secret,
	    &cause);
	if (err < 0) {
		log_err("memory: %s", cause);
		free(cause);
		return err;
	}
	mem.has_secret = mem.opts.secret[0] != '\0';
	err = secret_peers_load(cfg_str(cfg, CFG_MEMORY_PEER_SECRETS),
	    &mem.peer_keys, &mem.npeer_keys, &cause);
	if (err < 0) {
		log_err("memory: %s", cause);
		free(cause);
		return err;
	}
	mem.opts.peer_keys = mem.peer_keys;
	mem.opts.npeer_keys = mem.npeer_keys;
	mem.has_secret |= mem.npeer_keys > 0;
	if (cfg_int(cfg, CFG_TLS) && fam_tls_new(cfg_str(cfg, CFG_TLS_CERT),
	    cfg_str(cfg, CFG_TLS_KEY), cfg_str(cfg, CFG_TLS_CA),
	    &mem.opts.tls, &cause) < 0) {
		log_err("memory: %s", cause);
		free(cause);
		return -EINVAL;
	}
	if (mem.opts.kind == FAM_TP_VERBS &&
	    fam_memlock_check(mem.capacity, &cause) < 0) {
		log_warn("memory: %s; regions beyond it cannot be lent", cause);
		free(cause);
	}
	return 0;
}

/* Wipes and frees the per-peer keys. */
static void
mem_peer_keys_free(void)
{
	if (mem.peer_keys != NULL)
		explicit_bzero(mem.peer_keys, mem.npeer_keys *
		    sizeof *mem.peer_keys);
	free(mem.peer_keys);
	mem.peer_keys = NULL;
	mem.npeer_keys = 0;
	mem.opts.peer_keys = NULL;
	mem.opts.npeer_keys = 0;
}

/* Starts the memory role: listens for hosts and dpus. */
static int
role_memory_start(struct famd *d)
{
	const struct cfg *cfg = d->cfg;
	char *cause = NULL, cap[32];
	struct stat st;
	int err;

	memset(&mem, 0, sizeof mem);
	d->role_state = &mem;
	mem.instance = mem_random64();
	if (mem_regions_init(d) < 0)
		return -ENOMEM;
	mem_sessions_init((uint64_t)cfg_int(cfg, CFG_MEMORY_SESSION_GRACE));
	mem_serve_init();
	mem_set_node(cfg);
	if (mem_set_opts(cfg) < 0)
		goto fail;
	if (stat(mem.preload_dir, &st) < 0 || !S_ISDIR(st.st_mode))
		log_warn("memory: preload_dir %s is not a directory; file "
		    "regions will fail until it exists", mem.preload_dir);
	err = fam_listen(d->base, cfg_str(cfg, CFG_MEMORY_LISTEN), &mem.opts,
	    mem_serve_accept, NULL, &mem.l, &cause);
	if (err < 0) {
		log_err("memory: %s", cause);
		free(cause);
		goto fail;
	}
	snprintf(mem.listen, sizeof mem.listen, "%s", fam_listener_addr(mem.l));
	admin_register(mem_cmds, nitems(mem_cmds));
	log_notice("memory: listening on %s as %s (capacity %s, preload_dir "
	    "%s, session_grace %" PRIu64 " ms%s%s)", mem.listen, mem.node,
	    mem_bytes(cap, sizeof cap, mem.capacity), mem.preload_dir,
	    mem.grace_ms, mem.opts.secret[0] ? ", secret required" : "",
	    mem.npeer_keys > 0 ? ", peers' own keys" : "");
	return 0;
fail:
	explicit_bzero(mem.opts.secret, sizeof mem.opts.secret);
	fam_tls_free(mem.opts.tls);
	mem.opts.tls = NULL;
	mem_peer_keys_free();
	mem_regions_fini();
	return -1;
}

/* Applies reloadable keys of the memory role. */
static void
role_memory_reload(struct famd *d, const struct cfg *old)
{
	uint64_t grace = (uint64_t)cfg_int(d->cfg, CFG_MEMORY_SESSION_GRACE);

	if (grace != mem.grace_ms) {
		log_notice("memory: session_grace is now %" PRIu64 " ms (for "
		    "sessions that lose their connection from now on)", grace);
		mem.grace_ms = grace;
	}
}

/* Adds the memory role's state, peers and counters to a status object. */
static void
role_memory_status(struct famd *d, json_t *st)
{
	json_t *peers = json_object_get(st, "peers");
	char inst[20];

	snprintf(inst, sizeof inst, "%016" PRIx64, mem.instance);
	json_object_set_new(st, "memory", json_pack("{s:s,s:s,s:s,s:I,s:I,"
	    "s:I,s:s,s:I}",
	    "listen", mem.listen,
	    "transport", mem.opts.kind == FAM_TP_VERBS ? "verbs" : "tcp",
	    "instance", inst,
	    "capacity", (json_int_t)mem.capacity,
	    "bytes_reserved", (json_int_t)mem.reserved,
	    "regions", (json_int_t)mem.nregions,
	    "preload_dir", mem.preload_dir,
	    "session_grace_ms", (json_int_t)mem.grace_ms));
	json_object_set_new(st, "counters", mem_serve_counters_json());
	if (!json_is_array(peers))
		return;
	mem_sessions_status(peers);
	mem_serve_status(peers);
}

/* Zeroes the memory role's counters (not the regions and sessions). */
static void
role_memory_stats_reset(struct famd *d)
{
	memset(&mem.n, 0, sizeof mem.n);
	mem_sessions_stats_reset();
	mem_regions_stats_reset();
}

/* Stops the memory role: closes every connection, frees every region. */
static void
role_memory_stop(struct famd *d)
{
	unsigned regions = mem.nregions;

	if (mem.table == NULL)
		return;
	mem.stopping = true;
	if (mem.l != NULL)
		fam_listener_free(mem.l);
	mem.l = NULL;
	mem_serve_close_all();
	mem_sessions_end_all("famd stops");
	mem_regions_fini();
	explicit_bzero(mem.opts.secret, sizeof mem.opts.secret);
	fam_tls_free(mem.opts.tls);
	mem.opts.tls = NULL;
	mem_peer_keys_free();
	log_notice("memory: stopped; %u region%s freed", regions,
	    regions == 1 ? "" : "s");
}

const struct role_ops role_memory_ops = {
	.name = "memory",
	.start = role_memory_start,
	.reload = role_memory_reload,
	.status = role_memory_status,
	.stats_reset = role_memory_stats_reset,
	.stop = role_memory_stop,
};
