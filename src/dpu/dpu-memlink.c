/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu-memlink.c - the dpu's links to its memory nodes, and the records of
 * the regions it holds there.
 *
 * Owns:
 *   struct dpu_node     a memory node: its connection, made again with
 *                       back-off (our session there resumed), the regions
 *                       to free once it is back. Back loop.
 *   struct dpu_mregion  a region of our session on a memory node, shared
 *                       by the dpu regions that stand for it; in a table
 *                       (front), refcounted (any side). Its last reference
 *                       calls up.mregion_gone (the caches drop their copy).
 *
 * Node states (enum dpu_node_state): DOWN (a retry is scheduled) ->
 * CONNECTING -> UP (hello answered) -> DOWN when the connection closes.
 *
 * Locks: stat_lock, a leaf, over the text status shows (name, last error,
 * connects); state and instance are atomics the front reads.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "dpu/dpu-memlink.h"


static void node_connect(struct dpu_node *n);
static void node_opts(struct dpu_node *n, struct fam_conn_opts *opts);

/* Returns the state of a memory node as the front sees it. */
int
dpu_node_state(const struct dpu_node *n)
{
	return atomic_load_explicit(&n->state, memory_order_acquire);
}

/* Sends what was queued on n's connections (aggregation). Back. */
void
dpu_node_flush(struct dpu_node *n)
{
	if (n->conn != NULL)
		fam_conn_flush(n->conn);
	if (n->bg != NULL)
		fam_conn_flush(n->bg);
}

/* Returns the instance of a memory node as the front sees it. */
uint64_t
dpu_node_instance(const struct dpu_node *n)
{
	return atomic_load_explicit(&n->instance, memory_order_acquire);
}

/*
 * Adds what n's connection posted since the last look to the counters of
 * the memory link (doorbells, work requests, signalled ones). Back.
 */
void
dpu_node_stats_sync(struct dpu_node *n)
{
	struct dpu *dpu = n->dpu;
	const struct fam_conn_stats *st;

	if (n->conn == NULL)
		return;
	st = fam_conn_stats(n->conn);
	DPU_INC(dpu, mem_doorbells, st->doorbells - n->seen.doorbells);
	DPU_INC(dpu, mem_wrs, st->wrs - n->seen.wrs);
	DPU_INC(dpu, mem_wrs_signalled, st->wrs_signalled -
	    n->seen.wrs_signalled);
	n->seen = *st;
}

/* Remembers a region to free on n once it is back with the same instance. */
static void
node_defer_free(struct dpu_node *n, uint32_t region)
{
	if (n->npending_free == n->cap_pending_free) {
		unsigned cap = n->cap_pending_free ? n->cap_pending_free * 2 :
		    16;
		uint32_t *p = realloc(n->pending_free, cap * sizeof *p);

		if (p == NULL)
			return; /* freed with our session there, later */
		n->pending_free = p;
		n->cap_pending_free = cap;
	}
	n->pending_free[n->npending_free++] = region;
}

/* Completion of a REGION_FREE nobody waits for. */
static void
node_free_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	if (status < 0 && status != -ENOENT)
		log_debug("dpu: freeing a region on a memory node: %s",
		    strerror(-status));
}

/* Frees region on n now, or once n is back. Back loop. */
void
dpu_node_free_region(struct dpu_node *n, uint64_t instance, uint32_t region)
{
	uint8_t buf[FAM_REGION_FREE_LEN];

	if (dpu_node_instance(n) != instance)
		return; /* that memory famd is gone, and the region with it */
	if (dpu_node_state(n) != DN_UP || n->conn == NULL) {
		node_defer_free(n, region);
		return;
	}
	proto_put_region_free(buf, region);
	if (fam_conn_call(n->conn, FAM_MSG_REGION_FREE, buf, sizeof buf,
	    node_free_done, NULL) < 0)
		node_defer_free(n, region);
}

static void node_connect_bg(struct dpu_node *n);

/* The memory node accepted our hello. */
static void
node_connected(struct fam_conn *c, const struct fam_hello_resp *resp,
    void *arg)
{
	struct dpu_node *n = arg;
	struct dpu *dpu = n->dpu;
	uint64_t old = dpu_node_instance(n);
	bool resumed = old != 0 && resp->instance == old &&
	    resp->session == n->session;
	unsigned pending = n->npending_free;

	n->session = resp->session;
	n->backoff_ms = 0;
	/* Leases of earlier connections are dead: they renew on first use. */
	n->gen++;
	memset(&n->seen, 0, sizeof n->seen);
	if (dpu->arena != NULL) {
		/* RDMA READs land in the staging arena, WRITEs leave it. */
		n->staging_mr = fam_mr_register(c, dpu->arena,
		    dpu->arena_size);
		if (n->staging_mr == NULL)
			log_warn("dpu: memory node %s: cannot register the "
			    "staging arena (%s); transfers go through bounce "
			    "buffers", n->addr, strerror(errno));
	}
	pthread_mutex_lock(&dpu->stat_lock);
	snprintf(n->name, sizeof n->name, "%s", resp->node);
	n->last_error[0] = '\0';
	n->connects++;
	pthread_mutex_unlock(&dpu->stat_lock);
	atomic_store_explicit(&n->instance, resp->instance,
	    memory_order_release);
	atomic_store_explicit(&n->state, DN_UP, memory_order_release);
	atomic_store_explicit(&dpu->reached, true, memory_order_release);
	log_notice("dpu: memory node %s (%s) %s", n->addr, resp->node,
	    old == 0 ? "connected" : resumed ? "reconnected; session resumed" :
	    resp->instance == old ? "reconnected; our session there had "
	    "ended" : "reconnected as a new instance: the regions we had there "
	    "are gone");
	n->npending_free = 0;
	if (resumed)
		for (unsigned i = 0; i < pending; i++)
			dpu_node_free_region(n, resp->instance,
			    n->pending_free[i]);
	node_connect_bg(n);
}

/* The loads' connection joined our session. Back loop. */
static void
node_bg_connected(struct fam_conn *c, const struct fam_hello_resp *resp,
    void *arg)
{
	struct dpu_node *n = arg;

	(void)c;
	if (resp->session != n->session) {
		/* Not ours (the session ended meanwhile): not used. */
		fam_conn_close(n->bg);
		return;
	}
	n->bg_up = true;
	log_info("dpu: memory node %s: loads on a connection of their own",
	    n->addr);
}

/* The loads' connection is gone; loads go on conn. Back loop. */
static void
node_bg_closed(struct fam_conn *c, int err, void *arg)
{
	struct dpu_node *n = arg;
	struct dpu *dpu = n->dpu;

	(void)c;
	(void)err;
	n->bg = NULL;
	n->bg_up = false;
	if (dpu->back_stopping && dpu->async && dpu_nodes_closed(dpu))
		event_base_loopexit(dpu->back_base, NULL);
}

static const struct fam_conn_handlers node_bg_handlers = {
	.connected = node_bg_connected,
	.closed = node_bg_closed,
};

/*
 * Over tcp, with a dynamic cache, the cache's loads get a connection of
 * their own, joined to the session of conn: a forwarded read of a host
 * then shares the link with the loads instead of waiting behind them on
 * one stream. Back loop.
 */
static void
node_connect_bg(struct dpu_node *n)
{
	struct dpu *dpu = n->dpu;
	struct fam_conn_opts opts;
	char *cause = NULL;

	if (n->bg != NULL || dpu->dc.mode == CFG_DYNAMIC_OFF ||
	    cfg_int(dpu->d->cfg, CFG_TRANSPORT) != CFG_TRANSPORT_TCP)
		return;
	node_opts(n, &opts);
	opts.hello.features = FAM_FEAT_JOIN;
	if (fam_connect(dpu->back_base, n->addr, &opts, &node_bg_handlers, n,
	    &n->bg, &cause) < 0) {
		log_debug("dpu: memory node %s: loads' connection: %s",
		    n->addr, cause);
		free(cause);
		n->bg = NULL;
	}
	explicit_bzero(opts.secret, sizeof opts.secret);
}

/* Retries the connection after the back-off. */
static void
node_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	node_connect(arg);
}

/* Schedules the next connection attempt, backing off up to 5 s. */
static void
node_schedule(struct dpu_node *n)
{
	backoff_schedule(n->retry, &n->backoff_ms);
}

/* The connection to a memory node is gone. */
static void
node_closed(struct fam_conn *c, int err, void *arg)
{
	struct dpu_node *n = arg;
	struct dpu *dpu = n->dpu;
	bool was_up = dpu_node_state(n) == DN_UP;
	const char *why = err != 0 ? strerror(err < 0 ? -err : err) : "closed";

	dpu_node_stats_sync(n);
	/* Released with the connection (transport.h). */
	n->staging_mr = NULL;
	n->conn = NULL;
	if (n->bg != NULL)
		fam_conn_close(n->bg); /* joined to the session conn had */
	atomic_store_explicit(&n->state, DN_DOWN, memory_order_release);
	pthread_mutex_lock(&dpu->stat_lock);
	snprintf(n->last_error, sizeof n->last_error, "%s", why);
	if (was_up)
		n->disconnects++;
	pthread_mutex_unlock(&dpu->stat_lock);
	if (dpu->back_stopping) {
		if (dpu->async && dpu_nodes_closed(dpu))
			event_base_loopexit(dpu->back_base, NULL);
		return;
	}
	if (was_up)
		log_warn("dpu: memory node %s lost: %s; reconnecting", n->addr,
		    why);
	else if (n->backoff_ms == 0)
		log_warn("dpu: memory node %s unreachable: %s; retrying",
		    n->addr, why);
	node_schedule(n);
}

static const struct fam_conn_handlers node_handlers = {
	.connected = node_connected,
	.closed = node_closed,
};

/* Fills the options of a connection to memory node n. */
static void
node_opts(struct dpu_node *n, struct fam_conn_opts *opts)
{
	struct dpu *dpu = n->dpu;

	memset(opts, 0, sizeof *opts);
	opts->kind = (enum fam_transport_kind)cfg_int(dpu->d->cfg,
	    CFG_TRANSPORT);
	opts->hello.role = FAM_WIRE_ROLE_DPU;
	opts->hello.resume = n->session;
	snprintf(opts->hello.node, sizeof opts->hello.node, "%s",
	    dpu->node_name);
	memcpy(opts->secret, dpu->secret, sizeof opts->secret);
	opts->tls = dpu->opts.tls;
	opts->op_timeout_ms = dpu->op_timeout_ms;
	opts->qps_per_peer = (unsigned)cfg_int(dpu->d->cfg,
	    CFG_VERBS_QPS_PER_PEER);
	opts->inject_error_ppm = (uint32_t)cfg_int(dpu->d->cfg,
	    CFG_VERBS_INJECT_ERROR_PPM);
	opts->max_outstanding = 1024;
	opts->max_payload = FAM_PROTO_MAX_PAYLOAD;
}

/* Starts connecting to memory node n. Back loop. */
static void
node_connect(struct dpu_node *n)
{
	struct dpu *dpu = n->dpu;
	struct fam_conn_opts opts;
	char *cause = NULL;

	node_opts(n, &opts);
	atomic_store_explicit(&n->state, DN_CONNECTING, memory_order_release);
	if (fam_connect(dpu->back_base, n->addr, &opts, &node_handlers, n,
	    &n->conn, &cause) < 0) {
		atomic_store_explicit(&n->state, DN_DOWN, memory_order_release);
		n->conn = NULL;
		if (n->backoff_ms == 0)
			log_warn("dpu: memory node %s: %s; retrying", n->addr,
			    cause);
		pthread_mutex_lock(&dpu->stat_lock);
		snprintf(n->last_error, sizeof n->last_error, "%s", cause);
		pthread_mutex_unlock(&dpu->stat_lock);
		free(cause);
		node_schedule(n);
	}
	explicit_bzero(opts.secret, sizeof opts.secret);
}

/* Makes the memory nodes' retry timers on the back loop. */
int
dpu_nodes_init(struct dpu *dpu)
{
	for (unsigned i = 0; i < dpu->nnodes; i++) {
		dpu->nodes[i].retry = evtimer_new(dpu->back_base,
		    node_retry_cb, &dpu->nodes[i]);
		if (dpu->nodes[i].retry == NULL)
			return -ENOMEM;
	}
	return 0;
}

/* Starts connecting to every memory node. Back loop. */
void
dpu_nodes_connect(struct dpu *dpu)
{
	for (unsigned i = 0; i < dpu->nnodes; i++)
		node_connect(&dpu->nodes[i]);
}

/* Closes every memory-node connection for good. Back loop. */
void
dpu_nodes_close(struct dpu *dpu)
{
	for (unsigned i = 0; i < dpu->nnodes; i++) {
		struct dpu_node *n = &dpu->nodes[i];

		if (n->retry != NULL)
			evtimer_del(n->retry);
		if (n->conn != NULL)
			fam_conn_close(n->conn);
		if (n->bg != NULL)
			fam_conn_close(n->bg);
	}
}

/* Returns true once no memory-node connection is left. Back loop. */
bool
dpu_nodes_closed(struct dpu *dpu)
{
	for (unsigned i = 0; i < dpu->nnodes; i++)
		if (dpu->nodes[i].conn != NULL || dpu->nodes[i].bg != NULL)
			return false;
	return true;
}

/* Splits the comma-separated memory_nodes into the node table. */
int
dpu_nodes_parse(struct dpu *dpu, const char *list)
{
	const char *p = list;

	while (p != NULL && *p != '\0' && dpu->nnodes < DPU_MAX_NODES) {
		struct dpu_node *n = &dpu->nodes[dpu->nnodes];
		size_t len;
		const char *item = list_item(p, &len, &p);

		n->addr = strndup(item, len);
		if (n->addr == NULL)
			return -ENOMEM;
		n->dpu = dpu;
		n->index = dpu->nnodes++;
	}
	return 0;
}

/* Frees what the node table holds (the back's loop no longer runs). */
void
dpu_nodes_fini(struct dpu *dpu)
{
	for (unsigned i = 0; i < dpu->nnodes; i++) {
		struct dpu_node *n = &dpu->nodes[i];

		if (n->retry != NULL)
			event_free(n->retry);
		free(n->addr);
		free(n->pending_free);
	}
}

/* Drops the connections to the memory nodes; they are made again. Back. */
static void
nodes_reconnect_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dpu *dpu = arg;

	for (unsigned i = 0; i < dpu->nnodes; i++)
		if (dpu->nodes[i].conn != NULL &&
		    dpu_node_state(&dpu->nodes[i]) == DN_UP) {
			log_notice("dpu: memory node %s: reconnecting "
			    "(memory.reconnect)", dpu->nodes[i].addr);
			fam_conn_close(dpu->nodes[i].conn);
		}
}

/*
 * Has the back drop every memory-node connection that is up; each is made
 * again after the usual back-off. Front.
 */
int
dpu_nodes_reconnect(struct dpu *dpu)
{
	struct timeval now = { 0, 0 };

	if (event_base_once(dpu->back_base, -1, EV_TIMEOUT, nodes_reconnect_cb,
	    dpu, &now) < 0)
		return -ENOMEM;
	return 0;
}

/*
 * Chooses the memory node for a new region: the one whose instance the
 * host names, else the next one that is up. Front.
 */
struct dpu_node *
dpu_node_place(struct dpu *dpu, uint64_t place)
{
	if (place != 0)
		for (unsigned i = 0; i < dpu->nnodes; i++)
			if (dpu_node_state(&dpu->nodes[i]) == DN_UP &&
			    dpu_node_instance(&dpu->nodes[i]) == place)
				return &dpu->nodes[i];
	for (unsigned k = 0; k < dpu->nnodes; k++) {
		struct dpu_node *n = &dpu->nodes[(dpu->next_place + k) %
		    dpu->nnodes];

		if (dpu_node_state(n) == DN_UP) {
			dpu->next_place = (n->index + 1) % dpu->nnodes;
			return n;
		}
	}
	return NULL;
}

/* Finds the memory node running instance. Front. */
struct dpu_node *
dpu_node_by_instance(struct dpu *dpu, uint64_t instance)
{
	for (unsigned i = 0; i < dpu->nnodes; i++)
		if (dpu_node_instance(&dpu->nodes[i]) == instance)
			return &dpu->nodes[i];
	return NULL;
}

/* ---- memory-node regions (front) --------------------------------------- */

/* Returns the bucket of a memory-node region. */
static unsigned
mregion_bucket(const struct dpu_node *n, uint64_t instance, uint32_t id)
{
	return (unsigned)((id * 2654435761u) ^ n->index ^ instance) &
	    (DPU_HASH_SIZE - 1);
}

/* Finds our record of region id of node n's instance. */
static struct dpu_mregion *
mregion_find(struct dpu *dpu, struct dpu_node *n, uint64_t instance,
    uint32_t id)
{
	struct dpu_mregion *m = dpu->mregions[mregion_bucket(n, instance, id)];

	while (m != NULL && !(m->node == n && m->instance == instance &&
	    m->remote.region == id))
		m = m->hnext;
	return m;
}

/* Drops a reference to a memory-node region; frees it with the last. */
void
dpu_mregion_put(struct dpu_mregion *m)
{
	if (atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) ==
	    1) {
		struct dpu *dpu = m->node->dpu;

		if (dpu->up.mregion_gone != NULL)
			dpu->up.mregion_gone(m);
		free(m);
	}
}

/* Takes m out of the table (its last dpu region is gone). Front. */
void
dpu_mregion_unlist(struct dpu *dpu, struct dpu_mregion *m)
{
	struct dpu_mregion **pp = &dpu->mregions[mregion_bucket(m->node,
	    m->instance, m->remote.region)];

	while (*pp != NULL && *pp != m)
		pp = &(*pp)->hnext;
	if (*pp == m)
		*pp = m->hnext;
	m->listed = false;
	dpu->nmregions--;
	dpu_mregion_put(m);
}

/*
 * Returns our record of a memory-node region, made from info if new (the
 * table holds its first reference). Front.
 */
struct dpu_mregion *
dpu_mregion_get(struct dpu *dpu, struct dpu_node *n, uint64_t instance,
    uint64_t gen, const struct fam_region_info *info, const char *name)
{
	struct dpu_mregion *m = mregion_find(dpu, n, instance, info->region);
	unsigned b;

	if (m != NULL)
		return m;
	m = calloc(1, sizeof *m);
	if (m == NULL)
		return NULL;
	m->node = n;
	m->instance = instance;
	/*
	 * With verbs the answer carries our lease on the connection it came
	 * on (gen): reads and writes go one-sided against it, and the back
	 * renews it on a later connection (dpu-forward.c). remote keeps
	 * only the region's id and size.
	 */
	m->remote.region = info->region;
	m->remote.rkey = 0;
	m->remote.addr = 0;
	m->remote.size = info->size;
	m->lease_rkey = info->rkey;
	m->lease_addr = info->addr;
	m->lease_gen = gen;
	m->leased = info->rkey != 0;
	m->flags = info->flags;
	snprintf(m->name, sizeof m->name, "%s", name);
	atomic_init(&m->refs, 1);
	m->listed = true;
	b = mregion_bucket(n, instance, info->region);
	m->hnext = dpu->mregions[b];
	dpu->mregions[b] = m;
	dpu->nmregions++;
	return m;
}
