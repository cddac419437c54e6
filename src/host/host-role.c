/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-role.c - the host role's lifecycle, the top of its layers.
 *
 * Owns: struct host (start, reload, stop), the 50 ms tick that drives
 * background work, status and stats.reset, the admin commands `regions`
 * and `path.set`. Registers the calls up that lower layers make
 * (h->node_up; the sessions register h->region_gone, the fault service
 * h->wake).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/event.h>

#include "host/host.h"

#define TICK_MS 50

static struct host *host_state;

/* Runs background work: parked fetches, eviction above the watermark. */
static void
host_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct host *h = arg;

	host_path_tick(h);
	host_replace_tick(h);
	host_replica_tick(h);
	host_session_retry(h);
	host_session_orphans(h);
	host_restart_tick(h);
	host_fork_tick(h);
	if (h->parked != NULL)
		host_fetch_unpark(h);
	host_evict_background(h);
	host_fetch_kick(h);
}

/* Reads the reloadable keys. */
static void
host_configure(struct host *h)
{
	h->high_pct = (unsigned)cfg_int(h->d->cfg, CFG_HOST_HIGH_WATERMARK);
	h->low_pct = (unsigned)cfg_int(h->d->cfg, CFG_HOST_LOW_WATERMARK);
	h->fallback = (int)cfg_int(h->d->cfg, CFG_HOST_FALLBACK);
}

/* Splits a comma-separated address list into the node table. */
static int
host_parse_nodes(struct host *h, const char *list)
{
	const char *p = list;

	while (p != NULL && *p != '\0' && h->nnodes < HOST_MAX_NODES) {
		struct mnode *n = &h->nodes[h->nnodes];
		size_t len;
		const char *item = list_item(p, &len, &p);

		n->addr = strndup(item, len);
		if (n->addr == NULL)
			return -1;
		n->h = h;
		n->index = h->nnodes++;
	}
	return 0;
}

/*
 * Returns how many fault-service threads to start: [host] fault_threads
 * less the control loop (auto: the online CPUs less one, at most 8); none
 * over verbs, where the NIC does the receive and a lease belongs to its
 * connection.
 */
static unsigned
role_fault_threads(const struct famd *d)
{
	long n = (long)cfg_int(d->cfg, CFG_HOST_FAULT_THREADS);

	if (cfg_int(d->cfg, CFG_TRANSPORT) != CFG_TRANSPORT_TCP)
		return 0;
	if (n < 0) /* auto */
		n = sysconf(_SC_NPROCESSORS_ONLN) - 1;
	if (n > 8)
		n = 8;
	return n > 1 ? (unsigned)n - 1 : 0;
}

/* Starts the host role. */
static int
role_host_start(struct famd *d)
{
	struct host *h = calloc(1, sizeof *h);
	char *cause = NULL;
	int rc;

	if (h == NULL)
		return -1;
	host_state = h;
	d->role_state = h;
	h->d = d;
	h->base = d->base;
	h->listen_fd = -1;
	h->session_lock = -1;
	h->chunk = (uint64_t)cfg_int(d->cfg, CFG_HOST_CHUNK_SIZE);
	h->chunk_shift = (unsigned)__builtin_ctzll(h->chunk);
	h->arena_size = (uint64_t)cfg_int(d->cfg, CFG_HOST_ARENA_SIZE);
	host_configure(h);

	if (secret_load(cfg_str(d->cfg, CFG_SECRET_FILE), h->secret,
	    &cause) < 0)
		goto fail;
	if (cfg_int(d->cfg, CFG_TLS) && fam_tls_new(cfg_str(d->cfg,
	    CFG_TLS_CERT), cfg_str(d->cfg, CFG_TLS_KEY), cfg_str(d->cfg,
	    CFG_TLS_CA), &h->tls, &cause) < 0)
		goto fail;
	if (host_uffd_probe(h, &cause) < 0)
		goto fail;
	if (host_parse_nodes(h, cfg_str(d->cfg, CFG_HOST_MEMORY_NODES)) < 0) {
		cause = xasprintf("out of memory");
		goto fail;
	}
	h->numa_node = host_numa_pick(h, h->nodes[0].addr);
	host_grain_init(h);
	if (host_buffer_init(h, (uint64_t)cfg_int(d->cfg, CFG_HOST_BUFFER_SIZE),
	    &cause) < 0)
		goto fail;
	if (host_fault_init(h) < 0 || host_replica_init(h) < 0 ||
	    host_hedge_init(h) < 0) {
		cause = xasprintf("out of memory");
		goto fail;
	}
	/* cfg_check made sure it parses and the memory nodes suffice */
	if (cfg_redundancy_parse(cfg_str(d->cfg, CFG_HOST_REDUNDANCY),
	    &h->copies) < 0 || h->copies > h->nnodes)
		h->copies = 1;
	if (cfg_redundancy_parse_ec(cfg_str(d->cfg, CFG_HOST_REDUNDANCY),
	    &h->ec_k, &h->ec_m) < 0 || h->ec_k + h->ec_m > h->nnodes)
		h->ec_k = h->ec_m = 0;
	if (cfg_write_quorum_parse(cfg_str(d->cfg, CFG_HOST_WRITE_QUORUM),
	    &h->write_quorum) < 0)
		h->write_quorum = 0;
	h->node_up = host_path_node_up;
	if (host_session_open(h, &cause) < 0)
		goto fail;
	/* Before the nodes: it names the sessions to resume there. */
	if (host_restart_init(h) < 0) {
		cause = xasprintf("out of memory");
		goto fail;
	}
	h->path = (int)cfg_int(d->cfg, CFG_HOST_PATH);
	if (*cfg_str(d->cfg, CFG_HOST_DPU) != '\0') {
		h->has_dpu = true;
		h->dpu.h = h;
		h->dpu.is_dpu = true;
		h->dpu.index = HOST_MAX_NODES;
		h->dpu.addr = strdup(cfg_str(d->cfg, CFG_HOST_DPU));
		if (h->dpu.addr == NULL) {
			cause = xasprintf("out of memory");
			goto fail;
		}
	}
	rc = host_fthreads_start(h, role_fault_threads(d));
	if (rc < 0) {
		cause = xasprintf("cannot start the fault-service threads: %s",
		    strerror(-rc));
		goto fail;
	}
	for (unsigned i = 0; i < h->nnodes + h->has_dpu; i++) {
		if (host_node_start(i < h->nnodes ? &h->nodes[i] :
		    &h->dpu) < 0) {
			cause = xasprintf("out of memory");
			goto fail;
		}
	}
	h->tick = event_new(h->base, -1, EV_PERSIST, host_tick_cb, h);
	if (h->tick != NULL) {
		struct timeval tv = { 0, TICK_MS * 1000 };

		event_add(h->tick, &tv);
	}
	host_admin_register();
	log_info("host: buffer %llu pages in %llu frames, chunks of %llu "
	    "bytes, fetch %s, %u memory node(s), %s%s, path %s, sessions on "
	    "%s", (unsigned long long)h->npages, (unsigned long long)h->nframes,
	    (unsigned long long)h->chunk, h->adaptive ? "adaptive" : "chunk",
	    h->nnodes,
	    h->has_dpu ? "dpu " : "no dpu", h->has_dpu ? h->dpu.addr : "",
	    h->path == CFG_PATH_DPU ? "dpu" : "direct", h->session_path);
	return 0;
fail:
	log_err("host: %s", cause != NULL ? cause : "cannot start");
	free(cause);
	return -1;
}

/* Applies the reloadable host keys. */
static void
role_host_reload(struct famd *d, const struct cfg *old)
{
	struct host *h = d->role_state;
	int path = (int)cfg_int(d->cfg, CFG_HOST_PATH);

	host_configure(h);
	if (path == CFG_PATH_DPU && !h->has_dpu)
		log_warn("host: path = dpu needs [host] dpu at start; the path "
		    "stays direct");
	else
		host_path_set(h, path, "reload");
	host_evict_background(h);
}

/* Adds the counters of refused or contained abuse to counters. */
static void
host_security_counters(const struct host *h, json_t *counters)
{
	const struct host_stats *s = &h->stats;
	const struct {
		const char *name;
		uint64_t v;
	} c[] = {
		{ "sigbus_poisoned", s->sigbus_poisoned },
		{ "sessions_given_up", s->sessions_given_up },
		{ "sessions_orphaned", s->sessions_orphaned },
		{ "sessions_refused", s->sessions_refused },
	};

	for (size_t i = 0; i < nitems(c); i++)
		json_object_set_new(counters, c[i].name,
		    json_integer((json_int_t)c[i].v));
}

/* Records a fault service time in the log2-microseconds histogram. */
void
host_fault_latency(struct host *h, uint64_t ns)
{
	uint64_t us = ns / 1000;
	unsigned b = 0;

	while (us > 1 && b < 31) {
		us >>= 1;
		b++;
	}
	h->stats.lat_hist[b]++;
	h->stats.lat_count++;
	h->stats.lat_sum_ns += ns;
}

/* Returns the p-th percentile of the fault latency, in microseconds. */
static uint64_t
host_latency_pct(const struct host *h, unsigned p)
{
	uint64_t want = (h->stats.lat_count * p + 99) / 100, seen = 0;

	if (h->stats.lat_count == 0)
		return 0;
	for (unsigned b = 0; b < 32; b++) {
		seen += h->stats.lat_hist[b];
		if (seen >= want)
			return (uint64_t)1 << (b + 1);
	}
	return (uint64_t)1 << 32;
}

/*
 * The fault service times as a histogram: bucket b of lat_hist holds the
 * times under 2^(b+1) microseconds (le, in seconds), "sum" in seconds.
 */
static json_t *
host_latency_hist(const struct host *h)
{
	json_t *le = json_array(), *counts = json_array();

	for (unsigned b = 0; b < 32; b++) {
		json_array_append_new(le, json_real((double)(1ull << (b + 1)) /
		    1e6));
		json_array_append_new(counts,
		    json_integer((json_int_t)h->stats.lat_hist[b]));
	}
	return json_pack("{s:o,s:o,s:f}", "le", le, "counts", counts, "sum",
	    (double)h->stats.lat_sum_ns / 1e9);
}

/*
 * Where the faults served by a read spent their time, on average in
 * microseconds: queued (room in the buffer, a read slot), on the wire,
 * installed; and the whole service time of every fault.
 */
static json_t *
host_breakdown(const struct host *h)
{
	const struct host_stats *s = &h->stats;
	double n = s->bd_reads > 0 ? (double)s->bd_reads : 1;

	return json_pack("{s:I,s:f,s:f,s:f,s:f}",
	    "reads", (json_int_t)s->bd_reads,
	    "queued", (double)s->bd_queue_ns / n / 1e3,
	    "wire", (double)s->bd_wire_ns / n / 1e3,
	    "install", (double)s->bd_install_ns / n / 1e3,
	    "total", s->lat_count > 0 ?
	    (double)s->lat_sum_ns / (double)s->lat_count / 1e3 : 0.0);
}

/* famd's CPU time so far, and per GB it moved to and from memory nodes. */
static json_t *
host_cpu(const struct host *h)
{
	const struct host_stats *s = &h->stats;
	struct rusage ru;
	double cpu = 0, gb = (double)(s->fetch_bytes + s->prefetch_bytes +
	    s->writeback_bytes) / 1e9;

	if (getrusage(RUSAGE_SELF, &ru) == 0)
		cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
		    (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
	return json_pack("{s:f,s:f,s:f}", "seconds", cpu, "gb_moved", gb,
	    "seconds_per_gb", gb > 0 ? cpu / gb : 0.0);
}

/* The fetch size's mode and what partial reads moved, for status. */
static json_t *
host_fetch_json(const struct host *h)
{
	return json_pack("{s:s,s:I,s:I,s:I,s:I}",
	    "mode", h->adaptive ? "adaptive" : "chunk",
	    "grain_bytes", (json_int_t)1 << h->grain_shift,
	    "partial_fetches", (json_int_t)h->stats.grain_fetches,
	    "partial_bytes", (json_int_t)h->stats.grain_bytes,
	    "grows", (json_int_t)h->stats.grain_grows);
}

/*
 * Returns the operations on one of a node's connections: reads, writes,
 * and over verbs the doorbells that posted them (more work requests than
 * doorbells: chains).
 */
static json_t *
host_link_json(struct fam_conn *c)
{
	const struct fam_conn_stats *cs = c != NULL ? fam_conn_stats(c) : NULL;
	struct fam_conn_stats t = { 0 };

	if (cs != NULL)
		t = *cs;
	return json_pack("{s:I,s:I,s:I,s:I,s:I}", "reads", (json_int_t)t.reads,
	    "writes", (json_int_t)t.writes, "onesided", (json_int_t)t.onesided,
	    "doorbells", (json_int_t)t.doorbells,
	    "work_requests", (json_int_t)t.wrs);
}

/* Appends each memory node's and the dpu's link state to peers. */
static void
host_peers_json(struct host *h, json_t *peers)
{
	for (unsigned i = 0; i < h->nnodes + h->has_dpu; i++) {
		struct mnode *n = i < h->nnodes ? &h->nodes[i] : &h->dpu;
		const struct fam_conn_stats *cs = n->conn != NULL ?
		    fam_conn_stats(n->conn) : NULL;

		json_array_append_new(peers, json_pack(
		    "{s:s,s:s,s:s,s:s,s:b,s:I,s:I,s:I,s:I,s:s,s:o,s:o}",
		    "role", n->is_dpu ? "dpu" : "memory", "address", n->addr,
		    "name", n->name,
		    "state", n->state == MN_UP ? "up" :
		    n->state == MN_CONNECTING ? "connecting" : "down",
		    "background", n->bg_up,
		    "connects", (json_int_t)n->connects,
		    "disconnects", (json_int_t)n->disconnects,
		    "outstanding", (json_int_t)(cs != NULL ? cs->outstanding : 0),
		    "frees_pending", (json_int_t)n->nfrees,
		    "last_error", n->last_error != NULL ? n->last_error : "",
		    "link", host_link_json(n->conn),
		    "background_link", host_link_json(n->bg)));
	}
}

/* Adds the host role's state and counters to a status object. */
static void
role_host_status(struct famd *d, json_t *st)
{
	struct host *h = d->role_state;
	struct host_stats *s = &h->stats;
	json_t *peers = json_object_get(st, "peers"), *red;
	uint64_t clients = 0, regions = 0, bytes = 0;

	host_peers_json(h, peers);
	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next) {
		clients++;
		regions += cl->nregions;
		bytes += cl->bytes;
	}
	json_object_set_new(st, "buffer", json_pack(
	    "{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:i}",
	    "size_bytes", (json_int_t)(h->npages << 12),
	    "chunk_bytes", (json_int_t)h->chunk,
	    "used_bytes", (json_int_t)(h->pages_used << 12),
	    "dirty_bytes", (json_int_t)(h->dirty << h->chunk_shift),
	    "loop_kept_bytes", (json_int_t)(h->kept_pages << 12),
	    "hot_bytes", (json_int_t)(h->hot_pages << 12),
	    "fetches_in_flight", (json_int_t)h->inflight,
	    "writebacks_in_flight", (json_int_t)h->writebacks_inflight,
	    "eviction", cfg_int(d->cfg, CFG_HOST_EVICTION) ==
	    CFG_EVICTION_CLOCK ? "clock" : "fifo",
	    "numa_node", h->numa_node));
	json_object_set_new(st, "path", host_path_json(h));
	host_hedge_peers_json(h, peers);
	red = host_replica_json(h);
	host_replace_json(h, red);
	json_object_set_new(st, "redundancy", red);
	json_object_set_new(st, "restart", host_restart_json(h));
	json_object_set_new(st, "programs", json_pack("{s:I,s:I,s:I}",
	    "sessions", (json_int_t)clients, "regions", (json_int_t)regions,
	    "bytes", (json_int_t)bytes));
	json_object_set_new(st, "counters", json_pack(
	    "{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
	    "s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
	    "faults_missing", (json_int_t)s->faults_missing,
	    "faults_write", (json_int_t)s->faults_wp,
	    "faults_stale", (json_int_t)s->faults_stale,
	    "faults_invalid", (json_int_t)s->faults_invalid,
	    "zero_fills", (json_int_t)s->zero_fills,
	    "fetches", (json_int_t)s->fetches,
	    "ondemand_bytes", (json_int_t)s->fetch_bytes,
	    "fetch_errors", (json_int_t)s->fetch_errors,
	    "prefetches", (json_int_t)s->prefetches,
	    "prefetch_zero_fills", (json_int_t)s->prefetch_zero,
	    "background_read_bytes", (json_int_t)s->prefetch_bytes,
	    "reads", (json_int_t)s->reads,
	    "reads_coalesced", (json_int_t)s->reads_coalesced,
	    "evictions_clean", (json_int_t)s->evictions_clean,
	    "evictions_dirty", (json_int_t)s->evictions_dirty,
	    "evictions_cancelled", (json_int_t)s->evictions_cancelled,
	    "writebacks", (json_int_t)s->writebacks,
	    "background_write_bytes", (json_int_t)s->writeback_bytes,
	    "writeback_errors", (json_int_t)s->writeback_errors,
	    "fault_waits_for_room", (json_int_t)s->fault_waits_for_room,
	    "sigbus", (json_int_t)s->sigbus,
	    "sessions", (json_int_t)s->sessions,
	    "bad_messages", (json_int_t)s->bad_messages,
	    "allocs", (json_int_t)s->allocs,
	    "alloc_errors", (json_int_t)s->alloc_errors,
	    "frees", (json_int_t)s->frees,
	    "frees_deferred", (json_int_t)s->frees_deferred,
	    "quota_refusals", (json_int_t)s->quota_refusals,
	    "faults_served", (json_int_t)s->lat_count));
	json_object_set_new(st, "fetch", host_fetch_json(h));
	json_object_set_new(json_object_get(st, "counters"), "forks",
	    json_integer((json_int_t)s->forks));
	json_object_set_new(json_object_get(st, "counters"), "refaults",
	    json_integer((json_int_t)s->refaults));
	json_object_set_new(json_object_get(st, "counters"), "fork_errors",
	    json_integer((json_int_t)s->fork_errors));
	json_object_set_new(json_object_get(st, "counters"), "fork_copy_bytes",
	    json_integer((json_int_t)s->fork_bytes));
	json_object_set_new(json_object_get(st, "counters"), "forks_adopted",
	    json_integer((json_int_t)s->fork_adopted));
	json_object_set_new(json_object_get(st, "counters"), "fork_shared_reads",
	    json_integer((json_int_t)s->fork_reads));
	json_object_set_new(json_object_get(st, "counters"), "ops_direct",
	    json_integer((json_int_t)s->ops_direct));
	json_object_set_new(json_object_get(st, "counters"), "ops_dpu",
	    json_integer((json_int_t)s->ops_dpu));
	json_object_set_new(json_object_get(st, "counters"), "discards",
	    json_integer((json_int_t)s->discards));
	json_object_set_new(json_object_get(st, "counters"), "allocs_redone",
	    json_integer((json_int_t)s->allocs_redone));
	json_object_set_new(json_object_get(st, "counters"), "path_switches",
	    json_integer((json_int_t)s->path_switches));
	json_object_set_new(json_object_get(st, "counters"), "fences",
	    json_integer((json_int_t)s->fences));
	json_object_set_new(json_object_get(st, "counters"), "handovers",
	    json_integer((json_int_t)s->handovers));
	json_object_set_new(json_object_get(st, "counters"), "adoptions",
	    json_integer((json_int_t)s->adoptions));
	json_object_set_new(json_object_get(st, "counters"), "switch_errors",
	    json_integer((json_int_t)s->switch_errors));
	host_security_counters(h, json_object_get(st, "counters"));
	json_object_set_new(st, "fault_latency_us", json_pack("{s:I,s:I}",
	    "p50", (json_int_t)host_latency_pct(h, 50),
	    "p99", (json_int_t)host_latency_pct(h, 99)));
	json_object_set_new(st, "fault_service_seconds", host_latency_hist(h));
	json_object_set_new(st, "fault_breakdown_us", host_breakdown(h));
	json_object_set_new(st, "cpu", host_cpu(h));
	json_object_set_new(st, "fault_threads", host_fthreads_json(h));
}

/* Zeroes the host role's counters. */
static void
role_host_stats_reset(struct famd *d)
{
	struct host *h = d->role_state;

	memset(&h->stats, 0, sizeof h->stats);
}

/* Stops the host role: sessions end, connections close, memory is freed. */
static void
role_host_stop(struct famd *d)
{
	struct host *h = d->role_state;

	if (h == NULL)
		return;
	h->stopping = true;
	host_restart_stop(h);
	host_session_close(h);
	if (h->tick != NULL)
		event_free(h->tick);
	/* their reads complete (failed) here, and park */
	host_fthreads_stop(h);
	for (unsigned i = 0; i < h->nnodes; i++)
		host_node_close(&h->nodes[i]);
	if (h->has_dpu)
		host_node_close(&h->dpu);
	/*
	 * Connections are torn down from the loop (which completes what was
	 * in flight on them): let it run that.
	 */
	for (int i = 0; i < 100 && host_nodes_open(h); i++)
		event_base_loop(h->base, EVLOOP_NONBLOCK);
	if (host_nodes_open(h))
		log_warn("host: memory node or dpu connections did not "
		    "close");
	/* The last regions go with their parked fetches: nodes still known. */
	host_fetch_unpark(h);
	host_fork_fini(h);
	host_fault_fini(h);
	host_replica_fini(h);
	host_hedge_fini(h);
	for (unsigned i = 0; i < h->nnodes; i++)
		host_node_fini(&h->nodes[i]);
	if (h->has_dpu)
		host_node_fini(&h->dpu);
	host_buffer_fini(h);
	host_restart_fini(h);
	fam_tls_free(h->tls);
	free(h);
	d->role_state = NULL;
	host_state = NULL;
}

/* regions: every program using fabric-attached memory. */
static json_t *
cmd_regions(struct admin_req *req)
{
	return host_clients_json(host_state);
}

/* path.set: where chunk reads and write-backs go, direct or dpu. */
static json_t *
cmd_path_set(struct admin_req *req)
{
	struct host *h = host_state;
	const char *p = json_string_value(json_object_get(req->params,
	    "path"));
	int path;

	if (strcmp(p, "direct") == 0)
		path = CFG_PATH_DIRECT;
	else if (strcmp(p, "dpu") == 0)
		path = CFG_PATH_DPU;
	else
		return admin_fail(req, ADMIN_ERR_PARAMS, "path.set: path is "
		    "direct or dpu, not '%s'", p);
	if (path == CFG_PATH_DPU && !h->has_dpu)
		return admin_fail(req, ADMIN_ERR_FAILED, "path.set: this host "
		    "has no dpu ([host] dpu)");
	host_path_set(h, path, "path.set");
	return host_path_json(h);
}

static const struct admin_param path_set_params[] = {
	{ "path", ADMIN_P_STRING, true },
	{ NULL, 0, false },
};

static const struct admin_cmd host_cmds[] = {
	{ "regions", "programs using fabric-attached memory: pid, regions, "
	    "bytes, resident and dirty bytes", NULL, 0, cmd_regions },
	{ "path.set", "send chunk reads and write-backs direct or through the "
	    "dpu, {\"path\": \"direct\"|\"dpu\"}", path_set_params,
	    ADMIN_F_CHANGE, cmd_path_set },
};

/* Registers the host role's admin commands. */
void
host_admin_register(void)
{
	admin_register(host_cmds, nitems(host_cmds));
}

const struct role_ops role_host_ops = {
	.name = "host",
	.start = role_host_start,
	.reload = role_host_reload,
	.status = role_host_status,
	.stats_reset = role_host_stats_reset,
	.stop = role_host_stop,
};
