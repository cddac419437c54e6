/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu-role.c - the dpu role's lifecycle: start, reload, stop, status, and
 * its admin commands (regions, cache.set, memory.reconnect). The objects
 * it runs are each in their own file (README.md): host connections and
 * sessions (dpu-host.c), forwarding (dpu-forward.c), the caches
 * (dpu-cache*.c), staging (dpu-staging.c), the memory links
 * (dpu-memlink.c). This file is the top: it calls them all, none calls
 * it, and it registers the calls that go up (dpu->up) at start.
 *
 * Owns: struct dpu (one, dpu_state), from start to stop. Front loop.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "dpu/dpu-host.h"

static struct dpu *dpu_state;

/* Returns the bytes on each link, on-demand and background. */
static json_t *
dpu_links_json(struct dpu *dpu)
{
	return json_pack("{s:{s:I,s:I,s:I,s:I},s:{s:I,s:I,s:I,s:I}}",
	    "host",
	    "ondemand_bytes", (json_int_t)DPU_GET(dpu, host_ondemand_bytes),
	    "background_bytes", (json_int_t)DPU_GET(dpu, host_background_bytes),
	    "read_bytes", (json_int_t)DPU_GET(dpu, host_read_bytes),
	    "write_bytes", (json_int_t)DPU_GET(dpu, host_write_bytes),
	    "memory",
	    "ondemand_bytes", (json_int_t)DPU_GET(dpu, mem_ondemand_bytes),
	    "background_bytes", (json_int_t)DPU_GET(dpu, mem_background_bytes),
	    "read_bytes", (json_int_t)DPU_GET(dpu, mem_read_bytes),
	    "write_bytes", (json_int_t)DPU_GET(dpu, mem_write_bytes));
}

/* Adds the dpu role's state, peers and counters to a status object. */
static void
role_dpu_status(struct famd *d, json_t *st)
{
	struct dpu *dpu = d->role_state;
	json_t *peers = json_object_get(st, "peers");
	struct dpu_session *s;
	char inst[20];

	snprintf(inst, sizeof inst, "%016" PRIx64, dpu->instance);
	json_object_set_new(st, "dpu", json_pack("{s:s,s:s,s:s,s:I}",
	    "listen", dpu->listen,
	    "transport", dpu->opts.kind == FAM_TP_VERBS ? "verbs" : "tcp",
	    "instance", inst,
	    "session_grace_ms", (json_int_t)dpu->grace_ms));
	json_object_set_new(st, "counters", dpu_counters_json(dpu));
	json_object_set_new(st, "links", dpu_links_json(dpu));
	json_object_set_new(st, "forwarding", dpu_forward_json(dpu));
	json_object_set_new(st, "cache", dpu_cache_json(dpu));
	if (!json_is_array(peers))
		return;
	pthread_mutex_lock(&dpu->stat_lock);
	for (unsigned i = 0; i < dpu->nnodes; i++) {
		struct dpu_node *n = &dpu->nodes[i];
		int state = dpu_node_state(n);

		json_array_append_new(peers, json_pack(
		    "{s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:s}",
		    "role", "memory", "address", n->addr, "name", n->name,
		    "state", state == DN_UP ? "up" : state == DN_CONNECTING ?
		    "connecting" : "down",
		    "connects", (json_int_t)n->connects,
		    "disconnects", (json_int_t)n->disconnects,
		    "session", (json_int_t)0,
		    "regions", (json_int_t)0,
		    "last_error", n->last_error));
	}
	pthread_mutex_unlock(&dpu->stat_lock);
	TAILQ_FOREACH(s, &dpu->sessions, link)
		json_array_append_new(peers, json_pack(
		    "{s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:s}",
		    "role", "host", "address", s->peer, "name", s->node,
		    "state", s->nhc > 0 ? "connected" : "detached",
		    "connects", (json_int_t)0,
		    "disconnects", (json_int_t)0,
		    "session", (json_int_t)s->serial,
		    "regions", (json_int_t)s->nregions,
		    "last_error", ""));
}

/* regions: every region hosts hold through this dpu. */
static json_t *
cmd_regions(struct admin_req *req)
{
	struct dpu *dpu = dpu_state;
	json_t *list = json_array();

	for (unsigned b = 0; b < DPU_HASH_SIZE; b++)
		for (struct dpu_region *r = dpu->regions[b]; r != NULL;
		    r = r->hnext)
			json_array_append_new(list, json_pack(
			    "{s:I,s:s,s:I,s:s,s:I,s:I,s:s}",
			    "id", (json_int_t)r->id,
			    "host", r->s->node,
			    "size", (json_int_t)r->m->remote.size,
			    "memory_node", r->m->node->addr,
			    "memory_region", (json_int_t)r->m->remote.region,
			    "users", (json_int_t)r->m->users,
			    "name", r->m->name[0] ? r->m->name : "-"));
	return list;
}

/* cache.set: the dynamic cache's mode, off, on or adaptive. */
static json_t *
cmd_cache_set(struct admin_req *req)
{
	const char *v = json_string_value(json_object_get(req->params,
	    "dynamic"));
	int mode;

	if (strcmp(v, "off") == 0)
		mode = CFG_DYNAMIC_OFF;
	else if (strcmp(v, "on") == 0)
		mode = CFG_DYNAMIC_ON;
	else if (strcmp(v, "adaptive") == 0)
		mode = CFG_DYNAMIC_ADAPTIVE;
	else
		return admin_fail(req, ADMIN_ERR_PARAMS, "cache.set: dynamic is "
		    "off, on or adaptive, not '%s'", v);
	dpu_cache_set_dynamic(dpu_state, mode, "cache.set");
	return dpu_cache_json(dpu_state);
}

/*
 * memory.reconnect: drops every memory-node connection that is up; each is
 * made again after the usual back-off and our session there resumes (the
 * leases of the old connection end with it and are renewed). For
 * operators after a fabric change, and for tests.
 */
static json_t *
cmd_memory_reconnect(struct admin_req *req)
{
	struct dpu *dpu = dpu_state;

	if (dpu_nodes_reconnect(dpu) < 0)
		return admin_fail(req, ADMIN_ERR_INTERNAL, "memory.reconnect: "
		    "out of memory");
	return json_pack("{s:i}", "memory_nodes", (int)dpu->nnodes);
}

static const struct admin_param cache_set_params[] = {
	{ "dynamic", ADMIN_P_STRING, true },
	{ NULL, 0, false },
};

static const struct admin_cmd dpu_cmds[] = {
	{ "regions", "regions hosts hold through this dpu, with the memory "
	    "node and region each stands for", NULL, 0, cmd_regions },
	{ "cache.set", "the dynamic cache's mode, {\"dynamic\": \"off\"|"
	    "\"on\"|\"adaptive\"}", cache_set_params, ADMIN_F_CHANGE,
	    cmd_cache_set },
	{ "memory.reconnect", "drop the connections to the memory nodes and "
	    "make them again (sessions there resume, leases are renewed)",
	    NULL, ADMIN_F_CHANGE, cmd_memory_reconnect },
};

/* ---- role --------------------------------------------------------------- */

/* Chooses the name this node gives its peers. */
static void
dpu_set_node(struct dpu *dpu, const struct cfg *cfg)
{
	const char *name = cfg_str(cfg, CFG_NODE_NAME);
	char host[256] = "";

	if (*name == '\0') {
		gethostname(host, sizeof host - 1);
		name = host;
	}
	snprintf(dpu->node_name, sizeof dpu->node_name, "%s",
	    *name ? name : "dpu");
	for (char *p = dpu->node_name; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

/* Starts the dpu role: connects to the memory nodes, listens for hosts. */
static int
role_dpu_start(struct famd *d)
{
	const struct cfg *cfg = d->cfg;
	struct dpu *dpu = calloc(1, sizeof *dpu);
	char *cause = NULL;
	int err;

	if (dpu == NULL)
		return -ENOMEM;
	dpu_state = dpu;
	d->role_state = dpu;
	dpu->d = d;
	dpu->up.mregion_gone = dpu_cache_mregion_gone;
	dpu->up.hconn_put = dpu_hconn_put;
	dpu->up.loads = dpu_submit_from;
	dpu->base = d->base;
	dpu->back_base = d->base;
	pthread_mutex_init(&dpu->stat_lock, NULL);
	TAILQ_INIT(&dpu->sessions);
	TAILQ_INIT(&dpu->conns);
	dpu->instance = dpu_random64();
	dpu->grace_ms = (uint64_t)cfg_int(cfg, CFG_DPU_SESSION_GRACE);
	dpu->op_timeout_ms = (uint32_t)cfg_int(cfg, CFG_OP_TIMEOUT);
	dpu_set_node(dpu, cfg);
	err = secret_load(cfg_str(cfg, CFG_SECRET_FILE), dpu->secret, &cause);
	if (err < 0)
		goto fail;
	if (*cfg_str(cfg, CFG_DPU_MEMORY_NODES) == '\0') {
		cause = xasprintf("[dpu] memory_nodes is empty: there is "
		    "nothing to forward to");
		goto fail;
	}
	if (dpu_nodes_parse(dpu, cfg_str(cfg, CFG_DPU_MEMORY_NODES)) < 0) {
		cause = xasprintf("out of memory");
		goto fail;
	}
	dpu->opts.kind = cfg_int(cfg, CFG_TRANSPORT) == CFG_TRANSPORT_VERBS ?
	    FAM_TP_VERBS : FAM_TP_TCP;
	dpu->opts.op_timeout_ms = dpu->op_timeout_ms;
	dpu->opts.inject_error_ppm = (uint32_t)cfg_int(cfg,
	    CFG_VERBS_INJECT_ERROR_PPM);
	dpu->opts.max_outstanding = 64;
	dpu->opts.max_payload = FAM_PROTO_MAX_PAYLOAD;
	memcpy(dpu->opts.secret, dpu->secret, sizeof dpu->opts.secret);
	if (cfg_int(cfg, CFG_TLS) && fam_tls_new(cfg_str(cfg, CFG_TLS_CERT),
	    cfg_str(cfg, CFG_TLS_KEY), cfg_str(cfg, CFG_TLS_CA),
	    &dpu->opts.tls, &cause) < 0)
		goto fail;
	dpu->opts.hello.role = FAM_WIRE_ROLE_DPU;
	snprintf(dpu->opts.hello.node, sizeof dpu->opts.hello.node, "%s",
	    dpu->node_name);
	err = fam_listen(d->base, cfg_str(cfg, CFG_DPU_LISTEN), &dpu->opts,
	    dpu_host_accept, dpu, &dpu->l, &cause);
	if (err < 0)
		goto fail;
	snprintf(dpu->listen, sizeof dpu->listen, "%s",
	    fam_listener_addr(dpu->l));
	if (dpu_cache_start(dpu, &cause) < 0 ||
	    dpu_forward_start(dpu, &cause) < 0)
		goto fail;
	admin_register(dpu_cmds, nitems(dpu_cmds));
	log_notice("dpu: listening on %s as %s, forwarding to %u memory "
	    "node%s (%s, aggregation %s)%s", dpu->listen, dpu->node_name,
	    dpu->nnodes, dpu->nnodes == 1 ? "" : "s", dpu->async ?
	    "asynchronous" : "one loop", atomic_load(&dpu->aggregate) ?
	    "on" : "off", dpu->secret[0] ? ", secret required" : "");
	return 0;
fail:
	log_err("dpu: %s", cause != NULL ? cause : "cannot start");
	free(cause);
	return -1;
}

/* Applies the reloadable keys of the dpu role. */
static void
role_dpu_reload(struct famd *d, const struct cfg *old)
{
	struct dpu *dpu = d->role_state;
	uint64_t grace = (uint64_t)cfg_int(d->cfg, CFG_DPU_SESSION_GRACE);

	if (grace != dpu->grace_ms) {
		log_notice("dpu: session_grace is now %" PRIu64 " ms", grace);
		dpu->grace_ms = grace;
	}
	dpu_forward_configure(dpu);
	dpu_cache_configure(dpu);
}

/* Zeroes the dpu role's counters. */
static void
role_dpu_stats_reset(struct famd *d)
{
	struct dpu *dpu = d->role_state;
	_Atomic uint64_t *p = (_Atomic uint64_t *)&dpu->n;

	for (size_t i = 0; i < sizeof dpu->n / sizeof *p; i++)
		atomic_store_explicit(&p[i], 0, memory_order_relaxed);
}

/* Stops the dpu role: hosts are dropped, regions freed, nodes closed. */
static void
role_dpu_stop(struct famd *d)
{
	struct dpu *dpu = d->role_state;

	if (dpu == NULL)
		return;
	dpu->stopping = true;
	if (dpu->l != NULL)
		fam_listener_free(dpu->l);
	dpu->l = NULL;
	dpu_host_stop(dpu);
	/* The frees go to the memory nodes, then their connections close. */
	dpu_cache_quiesce(dpu);
	dpu_forward_stop(dpu);
	dpu_cache_stop(dpu);
	dpu_nodes_fini(dpu);
	if (dpu->back_base != NULL && dpu->back_base != dpu->base)
		event_base_free(dpu->back_base);
	explicit_bzero(dpu->secret, sizeof dpu->secret);
	explicit_bzero(dpu->opts.secret, sizeof dpu->opts.secret);
	fam_tls_free(dpu->opts.tls);
	pthread_mutex_destroy(&dpu->stat_lock);
	log_notice("dpu: stopped");
	d->role_state = NULL;
	dpu_state = NULL;
	free(dpu);
}

const struct role_ops role_dpu_ops = {
	.name = "dpu",
	.start = role_dpu_start,
	.reload = role_dpu_reload,
	.status = role_dpu_status,
	.stats_reset = role_dpu_stats_reset,
	.stop = role_dpu_stop,
};
