/*
 * dpu-role.c - the dpu role: start and stop, the memory-node connections
 * (reconnected with back-off, our session there resumed), host sessions
 * and their regions, the control requests (REGION_CREATE, REGION_ADOPT,
 * REGION_FREE, REGION_ADVISE, STATS), status and the `regions` command.
 * READ and WRITE go to dpu-forward.c.
 *
 * Model:
 *   - Hosts connect to `listen` as to a memory node. A host's connection
 *     joins a session (struct dpu_session) when its hello is accepted; a
 *     host that reconnects with resume = token within session_grace gets
 *     the session and its regions back; when the grace runs out, the
 *     session's regions are freed on the memory nodes.
 *   - REGION_CREATE is forwarded to a memory node (the one whose instance
 *     the host names in `place`, else the next one up in turn), and
 *     answered with a region id of this dpu, plus where the region lives
 *     on the memory node (instance, id, key), which the host needs to
 *     reach it without us. REGION_ADOPT takes a handle on a region a host
 *     holds already (it switches to the dpu path, or this dpu restarted).
 *   - A dpu region stands for a region of our session on a memory node
 *     (struct dpu_mregion), shared by dpu regions for the same memory
 *     region, so that what is cached of it is cached once.
 *
 * Lock order: stat_lock is a leaf (status text of the memory nodes); the
 * rest of this file runs on the control loop or, for the memory nodes, on
 * the back loop, and shares only atomics (see dpu.h).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <event2/event.h>

#include "dpu/dpu.h"

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS   5000

static struct dpu *dpu_state;

static void node_connect(struct dpu_node *n);

/* Returns 64 random bits that are not zero. */
static uint64_t
dpu_random64(void)
{
	uint64_t v = 0;

	while (v == 0)
		if (getrandom(&v, sizeof v, 0) != sizeof v)
			v = mono_ns() ^ ((uint64_t)getpid() << 32);
	return v;
}

/* Returns the state of a memory node as the front sees it. */
static int
node_state(const struct dpu_node *n)
{
	return atomic_load_explicit(&n->state, memory_order_acquire);
}

/* Returns the instance of a memory node as the front sees it. */
static uint64_t
node_instance(const struct dpu_node *n)
{
	return atomic_load_explicit(&n->instance, memory_order_acquire);
}

/* ---- memory nodes (back loop) ------------------------------------------ */

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

	if (node_instance(n) != instance)
		return; /* that memory famd is gone, and the region with it */
	if (node_state(n) != DN_UP || n->conn == NULL) {
		node_defer_free(n, region);
		return;
	}
	proto_put_region_free(buf, region);
	if (fam_conn_call(n->conn, FAM_MSG_REGION_FREE, buf, sizeof buf,
	    node_free_done, NULL) < 0)
		node_defer_free(n, region);
}

/* The memory node accepted our hello. */
static void
node_connected(struct fam_conn *c, const struct fam_hello_resp *resp,
    void *arg)
{
	struct dpu_node *n = arg;
	struct dpu *dpu = n->dpu;
	uint64_t old = node_instance(n);
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
	struct timeval tv;

	n->backoff_ms = n->backoff_ms == 0 ? BACKOFF_FIRST_MS :
	    n->backoff_ms * 2;
	if (n->backoff_ms > BACKOFF_MAX_MS)
		n->backoff_ms = BACKOFF_MAX_MS;
	tv.tv_sec = n->backoff_ms / 1000;
	tv.tv_usec = (n->backoff_ms % 1000) * 1000;
	evtimer_add(n->retry, &tv);
}

/* The connection to a memory node is gone. */
static void
node_closed(struct fam_conn *c, int err, void *arg)
{
	struct dpu_node *n = arg;
	struct dpu *dpu = n->dpu;
	bool was_up = node_state(n) == DN_UP;
	const char *why = err != 0 ? strerror(err < 0 ? -err : err) : "closed";

	dpu_node_stats_sync(n);
	/* Released with the connection (transport.h). */
	n->staging_mr = NULL;
	n->conn = NULL;
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

/* Starts connecting to memory node n. Back loop. */
static void
node_connect(struct dpu_node *n)
{
	struct dpu *dpu = n->dpu;
	struct fam_conn_opts opts = { 0 };
	char *cause = NULL;

	opts.kind = (enum fam_transport_kind)cfg_int(dpu->d->cfg,
	    CFG_TRANSPORT);
	opts.hello.role = FAM_WIRE_ROLE_DPU;
	opts.hello.resume = n->session;
	snprintf(opts.hello.node, sizeof opts.hello.node, "%s",
	    dpu->node_name);
	memcpy(opts.hello.secret, dpu->secret, sizeof opts.hello.secret);
	opts.op_timeout_ms = dpu->op_timeout_ms;
	opts.qps_per_peer = (unsigned)cfg_int(dpu->d->cfg,
	    CFG_VERBS_QPS_PER_PEER);
	opts.inject_error_ppm = (uint32_t)cfg_int(dpu->d->cfg,
	    CFG_VERBS_INJECT_ERROR_PPM);
	opts.max_outstanding = 1024;
	opts.max_payload = FAM_PROTO_MAX_PAYLOAD;
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
	explicit_bzero(opts.hello.secret, sizeof opts.hello.secret);
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
	}
}

/* Returns true once no memory-node connection is left. Back loop. */
bool
dpu_nodes_closed(struct dpu *dpu)
{
	for (unsigned i = 0; i < dpu->nnodes; i++)
		if (dpu->nodes[i].conn != NULL)
			return false;
	return true;
}

/* Splits the comma-separated memory_nodes into the node table. */
static int
dpu_parse_nodes(struct dpu *dpu, const char *list)
{
	const char *p = list;

	while (*p != '\0' && dpu->nnodes < DPU_MAX_NODES) {
		const char *e = strchr(p, ',');
		size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
		struct dpu_node *n = &dpu->nodes[dpu->nnodes];

		while (len > 0 && *p == ' ') {
			p++;
			len--;
		}
		while (len > 0 && p[len - 1] == ' ')
			len--;
		n->addr = strndup(p, len);
		if (n->addr == NULL)
			return -ENOMEM;
		n->dpu = dpu;
		n->index = dpu->nnodes++;
		if (e == NULL)
			break;
		p = e + 1;
	}
	return 0;
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
		dpu_cache_mregion_gone(m);
		free(m);
	}
}

/* Takes m out of the table (its last dpu region is gone). */
static void
mregion_unlist(struct dpu *dpu, struct dpu_mregion *m)
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

/* Returns our record of a memory-node region, made from info if new. */
static struct dpu_mregion *
mregion_get(struct dpu *dpu, struct dpu_node *n, uint64_t instance,
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

/* ---- dpu regions (front) ------------------------------------------------ */

/* Finds session s's region id (NULL s: any session's). */
struct dpu_region *
dpu_region_find(struct dpu *dpu, struct dpu_session *s, uint32_t id)
{
	struct dpu_region *r = dpu->regions[id & (DPU_HASH_SIZE - 1)];

	while (r != NULL && r->id != id)
		r = r->hnext;
	if (r != NULL && s != NULL && r->s != s)
		return NULL;
	return r;
}

/* Makes a dpu region of session s for m (which gains a user). */
static struct dpu_region *
region_new(struct dpu *dpu, struct dpu_session *s, struct dpu_mregion *m)
{
	struct dpu_region *r = calloc(1, sizeof *r);
	unsigned b;

	if (r == NULL)
		return NULL;
	do {
		r->id = ++dpu->next_region;
		if (r->id == 0)
			r->id = ++dpu->next_region;
	} while (dpu_region_find(dpu, NULL, r->id) != NULL);
	r->s = s;
	r->m = m;
	m->users++;
	b = r->id & (DPU_HASH_SIZE - 1);
	r->hnext = dpu->regions[b];
	dpu->regions[b] = r;
	dpu->nregions++;
	LIST_INSERT_HEAD(&s->regions, r, link);
	s->nregions++;
	s->bytes += m->remote.size;
	return r;
}

/*
 * Frees a region on the memory node: our reference there goes. With
 * `held`, m is a record requests may still use: the free holds it, so
 * that the back sends it only once our RDMA against m's lease is over.
 */
static void
mregion_free_remote(struct dpu *dpu, struct dpu_mregion *m, bool held)
{
	uint8_t buf[FAM_REGION_FREE_LEN];
	struct dpu_req *q;

	proto_put_region_free(buf, m->remote.region);
	q = dpu_call_new(dpu, m->node, FAM_MSG_REGION_FREE, buf, sizeof buf,
	    NULL, NULL);
	if (q == NULL) {
		log_warn("dpu: out of memory freeing region %" PRIu32 " on %s",
		    m->remote.region, m->node->addr);
		return;
	}
	q->instance = m->instance;
	if (held) {
		q->m = m;
		atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
	}
	dpu_submit(dpu, q);
}

/* Frees a dpu region: the memory node is told, the record goes. */
static void
region_free(struct dpu *dpu, struct dpu_region *r)
{
	struct dpu_region **pp = &dpu->regions[r->id & (DPU_HASH_SIZE - 1)];
	struct dpu_mregion *m = r->m;

	while (*pp != NULL && *pp != r)
		pp = &(*pp)->hnext;
	if (*pp == r)
		*pp = r->hnext;
	dpu->nregions--;
	LIST_REMOVE(r, link);
	r->s->nregions--;
	r->s->bytes -= m->remote.size;
	DPU_INC(dpu, regions_freed, 1);
	mregion_free_remote(dpu, m, true);
	if (--m->users == 0)
		mregion_unlist(dpu, m);
	free(r);
}

/* ---- sessions (front) --------------------------------------------------- */

/* Ends a session: frees its regions on the memory nodes. */
static void
session_end(struct dpu *dpu, struct dpu_session *s, const char *why)
{
	unsigned n = s->nregions;

	while (!LIST_EMPTY(&s->regions))
		region_free(dpu, LIST_FIRST(&s->regions));
	if (!dpu->stopping)
		log_notice("dpu: session %" PRIu64 " of node %s ended (%s): %u "
		    "region%s freed", s->serial, s->node, why, n,
		    n == 1 ? "" : "s");
	for (unsigned i = 0; i < s->nhc; i++)
		s->hcs[i]->s = NULL;
	if (s->nhc > 0)
		dpu->nattached--;
	s->nhc = 0;
	event_free(s->grace);
	TAILQ_REMOVE(&dpu->sessions, s, link);
	dpu->nsessions--;
	DPU_INC(dpu, sessions_ended, 1);
	free(s);
}

/* The grace of a detached session ran out. */
static void
session_grace_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dpu_session *s = arg;

	session_end(dpu_state, s, "no reconnection within session_grace");
}

/* Finds a session by token. */
static struct dpu_session *
session_find(struct dpu *dpu, uint64_t token)
{
	struct dpu_session *s;

	TAILQ_FOREACH(s, &dpu->sessions, link)
		if (s->token == token)
			return s;
	return NULL;
}

/* Starts a session for a host whose hello was accepted. */
static struct dpu_session *
session_new(struct dpu *dpu, const struct fam_hello *req)
{
	struct dpu_session *s = calloc(1, sizeof *s);

	if (s == NULL)
		return NULL;
	s->grace = evtimer_new(dpu->base, session_grace_cb, s);
	if (s->grace == NULL) {
		free(s);
		return NULL;
	}
	do
		s->token = dpu_random64();
	while (session_find(dpu, s->token) != NULL);
	s->serial = ++dpu->next_serial;
	snprintf(s->node, sizeof s->node, "%s", req->node);
	LIST_INIT(&s->regions);
	TAILQ_INSERT_TAIL(&dpu->sessions, s, link);
	dpu->nsessions++;
	DPU_INC(dpu, sessions_started, 1);
	return s;
}

/* Attaches a host connection to a session (its first, or one more). */
static void
session_attach(struct dpu *dpu, struct dpu_session *s, struct dpu_hconn *hc)
{
	evtimer_del(s->grace);
	if (s->nhc == 0) {
		dpu->nattached++;
		snprintf(s->peer, sizeof s->peer, "%s", hc->peer);
	}
	s->hcs[s->nhc++] = hc;
	hc->s = s;
}

/*
 * A connection of a session is gone: when it was the last one, keep the
 * session for the grace, or end it.
 */
static void
session_detach(struct dpu *dpu, struct dpu_session *s, struct dpu_hconn *hc,
    int err)
{
	struct timeval tv = { (time_t)(dpu->grace_ms / 1000),
		(suseconds_t)(dpu->grace_ms % 1000 * 1000) };

	for (unsigned i = 0; i < s->nhc; i++)
		if (s->hcs[i] == hc) {
			s->hcs[i] = s->hcs[--s->nhc];
			break;
		}
	hc->s = NULL;
	if (s->nhc > 0)
		return;
	dpu->nattached--;
	if (dpu->stopping)
		return;
	if (dpu->grace_ms == 0) {
		session_end(dpu, s, err == 0 ? "disconnected" : strerror(-err));
		return;
	}
	log_notice("dpu: session %" PRIu64 " of node %s lost its connection "
	    "from %s (%s); %u region%s kept for %" PRIu64 " ms", s->serial,
	    s->node, s->peer, err == 0 ? "closed" : strerror(-err),
	    s->nregions, s->nregions == 1 ? "" : "s", dpu->grace_ms);
	evtimer_add(s->grace, &tv);
}

/* ---- host connections (front) ------------------------------------------- */

/* Drops a reference to a host connection; frees it with the last. */
void
dpu_hconn_put(struct dpu_hconn *hc)
{
	if (--hc->refs == 0)
		free(hc);
}

/* Closes a host connection once its last reply has gone out. */
static void
hconn_close_after_reply(void *arg)
{
	struct dpu_hconn *hc = arg;

	if (!hc->closed)
		fam_conn_close(hc->c);
	dpu_hconn_put(hc);
}

/* A malformed request: answered with EPROTO, counted, the host dropped. */
static void
hconn_bad_request(struct dpu_hconn *hc, const struct fam_hdr *h)
{
	struct dpu *dpu = hc->dpu;

	DPU_INC(dpu, bad_frames, 1);
	log_notice("dpu: %s (node %s): malformed %s request; closing the "
	    "connection", hc->peer, hc->s != NULL ? hc->s->node : "?",
	    proto_type_name(h->type));
	hc->refs++;
	if (fam_conn_reply(hc->c, h, EPROTO, NULL, 0, false,
	    hconn_close_after_reply, hc) < 0) {
		hc->refs--;
		fam_conn_close(hc->c);
	}
}

/* Answers a control request with a status and no payload. */
static void
hconn_status(struct dpu_hconn *hc, const struct fam_hdr *h, int err)
{
	if (!hc->closed)
		(void)fam_conn_reply(hc->c, h, err < 0 ? -err : err, NULL, 0,
		    false, NULL, NULL);
}

/* Maps an error of the memory link to what the host is told. */
static int
dpu_host_errno(int err)
{
	switch (err) {
	case -ECONNRESET:
	case -ETIMEDOUT:
	case -ENOTCONN:
	case -ECONNREFUSED:
		return -EHOSTDOWN;
	default:
		return err;
	}
}

/* Frees a region of node n (instance) that no dpu region stands for. */
static void
ctl_region_drop(struct dpu *dpu, struct dpu_node *n, uint64_t instance,
    uint32_t region)
{
	struct dpu_mregion m0 = { .node = n, .instance = instance };

	m0.remote.region = region;
	mregion_free_remote(dpu, &m0, false);
}

/*
 * Completion of REGION_CREATE or REGION_ADOPT on a memory node: records the
 * region and answers the host with our id and where it lives.
 */
static void
ctl_region_done(struct dpu_req *q)
{
	struct dpu *dpu = q->dpu;
	struct dpu_hconn *hc = q->hc;
	struct fam_region_info info, out;
	struct dpu_mregion *m;
	struct dpu_region *r;
	uint8_t buf[FAM_REGION_INFO_LEN];
	char *name = q->arg;
	int err = q->status;

	if (err == 0 && proto_get_region_info(q->resp, q->rlen, &info) < 0)
		err = -EPROTO;
	if (err == 0 && (hc->closed || hc->s == NULL)) {
		/* The host is gone: it will never know the region. */
		ctl_region_drop(dpu, q->node, q->instance, info.region);
		goto out;
	}
	if (err < 0) {
		DPU_INC(dpu, create_errors, 1);
		hconn_status(hc, &q->h, dpu_host_errno(err));
		goto out;
	}
	m = mregion_get(dpu, q->node, q->instance, q->gen, &info, name);
	r = m != NULL ? region_new(dpu, hc->s, m) : NULL;
	if (r == NULL) {
		ctl_region_drop(dpu, q->node, q->instance, info.region);
		if (m != NULL && m->users == 0)
			mregion_unlist(dpu, m);
		hconn_status(hc, &q->h, -ENOMEM);
		goto out;
	}
	if (q->h.type == FAM_MSG_REGION_CREATE)
		DPU_INC(dpu, regions_created, 1);
	else
		DPU_INC(dpu, regions_adopted, 1);
	dpu_cache_region_new(dpu, m);
	memset(&out, 0, sizeof out);
	out.region = r->id;
	out.size = info.size;
	out.flags = info.flags;
	out.length = info.length;
	out.mem_instance = q->instance;
	out.mem_region = info.region;
	out.mem_key = info.key;
	log_debug("dpu: region %" PRIu32 " of node %s is region %" PRIu32
	    " on %s", r->id, hc->s->node, info.region, q->node->addr);
	proto_put_region_info(buf, &out);
	(void)fam_conn_reply(hc->c, &q->h, 0, buf, sizeof buf, true, NULL,
	    NULL);
out:
	free(name);
}

/*
 * Chooses the memory node for a new region: the one whose instance the
 * host names, else the next one that is up.
 */
static struct dpu_node *
dpu_place(struct dpu *dpu, uint64_t place)
{
	if (place != 0)
		for (unsigned i = 0; i < dpu->nnodes; i++)
			if (node_state(&dpu->nodes[i]) == DN_UP &&
			    node_instance(&dpu->nodes[i]) == place)
				return &dpu->nodes[i];
	for (unsigned k = 0; k < dpu->nnodes; k++) {
		struct dpu_node *n = &dpu->nodes[(dpu->next_place + k) %
		    dpu->nnodes];

		if (node_state(n) == DN_UP) {
			dpu->next_place = (n->index + 1) % dpu->nnodes;
			return n;
		}
	}
	return NULL;
}

/* Finds the memory node running instance, up. */
static struct dpu_node *
dpu_node_by_instance(struct dpu *dpu, uint64_t instance)
{
	for (unsigned i = 0; i < dpu->nnodes; i++)
		if (node_instance(&dpu->nodes[i]) == instance)
			return &dpu->nodes[i];
	return NULL;
}

/* Sends a region request on to node n; the answer goes to ctl_region_done. */
static void
ctl_forward(struct dpu_hconn *hc, const struct fam_hdr *h,
    struct dpu_node *n, const void *payload, uint32_t len, const char *name)
{
	struct dpu *dpu = hc->dpu;
	struct dpu_req *q;
	char *copy = strdup(name);

	q = copy != NULL ? dpu_call_new(dpu, n, h->type, payload, len,
	    ctl_region_done, copy) : NULL;
	if (q == NULL) {
		free(copy);
		hconn_status(hc, h, -ENOMEM);
		return;
	}
	q->hc = hc;
	hc->refs++;
	hc->inflight++;
	dpu->inflight++;
	q->h = *h;
	q->instance = node_instance(n);
	dpu_submit(dpu, q);
}

/* REGION_CREATE: placed on a memory node, created there in our session. */
static void
ctl_create(struct dpu_hconn *hc, const struct fam_hdr *h,
    const uint8_t *payload)
{
	struct dpu *dpu = hc->dpu;
	struct fam_region_create *req = malloc(sizeof *req);
	uint8_t *buf;
	struct dpu_node *n;
	size_t len;
	int err;

	if (req == NULL) {
		hconn_status(hc, h, -ENOMEM);
		return;
	}
	err = proto_get_region_create(payload, h->len, req);
	if (err == -EPROTO) {
		free(req);
		hconn_bad_request(hc, h);
		return;
	}
	n = err == 0 ? dpu_place(dpu, req->place) : NULL;
	if (err == 0 && n == NULL)
		err = -EHOSTDOWN;
	if (err < 0) {
		DPU_INC(dpu, create_errors, 1);
		free(req);
		hconn_status(hc, h, err);
		return;
	}
	req->place = 0;
	buf = malloc(FAM_REGION_CREATE_MIN + FAM_NAME_MAX + FAM_PATH_MAX);
	len = buf != NULL ? proto_put_region_create(buf, FAM_REGION_CREATE_MIN +
	    FAM_NAME_MAX + FAM_PATH_MAX, req) : 0;
	if (len == 0)
		hconn_status(hc, h, -ENOMEM);
	else
		ctl_forward(hc, h, n, buf, (uint32_t)len, req->name[0] != '\0' ?
		    req->name : req->path);
	free(buf);
	free(req);
}

/* REGION_ADOPT: a region the host holds on a memory node, through us. */
static void
ctl_adopt(struct dpu_hconn *hc, const struct fam_hdr *h,
    const uint8_t *payload)
{
	struct dpu *dpu = hc->dpu;
	struct fam_region_adopt req;
	uint8_t buf[FAM_REGION_ADOPT_LEN];
	struct dpu_node *n;
	int err;

	err = proto_get_region_adopt(payload, h->len, &req);
	if (err == -EPROTO) {
		hconn_bad_request(hc, h);
		return;
	}
	/* A fence is the host's to put up, on its own path. */
	if (err == 0 && (req.flags & FAM_ADOPT_EXCLUSIVE))
		err = -EINVAL;
	n = err == 0 ? dpu_node_by_instance(dpu, req.instance) : NULL;
	if (err == 0 && n == NULL)
		err = -ENOENT;
	else if (err == 0 && node_state(n) != DN_UP)
		err = -EHOSTDOWN;
	if (err < 0) {
		DPU_INC(dpu, create_errors, 1);
		hconn_status(hc, h, err);
		return;
	}
	req.instance = 0;
	proto_put_region_adopt(buf, &req);
	ctl_forward(hc, h, n, buf, sizeof buf, "");
}

/* REGION_FREE: the host's region goes, and our reference on the node. */
static void
ctl_free(struct dpu_hconn *hc, const struct fam_hdr *h,
    const uint8_t *payload)
{
	struct dpu_region *r;
	uint32_t id;

	if (proto_get_region_free(payload, h->len, &id) < 0) {
		hconn_bad_request(hc, h);
		return;
	}
	r = dpu_region_find(hc->dpu, hc->s, id);
	if (r == NULL) {
		hconn_status(hc, h, -ENOENT);
		return;
	}
	region_free(hc->dpu, r);
	hconn_status(hc, h, 0);
}

/* REGION_ADVISE: a hint about a region's use. */
static void
ctl_advise(struct dpu_hconn *hc, const struct fam_hdr *h,
    const uint8_t *payload)
{
	struct dpu_region *r = NULL;
	uint32_t id, advice;
	int err;

	err = proto_get_region_advise(payload, h->len, &id, &advice);
	if (err == -EPROTO) {
		hconn_bad_request(hc, h);
		return;
	}
	if (err == 0 && (r = dpu_region_find(hc->dpu, hc->s, id)) == NULL)
		err = -ENOENT;
	if (err == 0)
		err = dpu_cache_advise(hc->dpu, r->m, advice);
	hconn_status(hc, h, err == -ENOSPC ? 0 : err);
}

static json_t *dpu_counters_json(struct dpu *dpu);

/* STATS: our counters as JSON text. */
static void
ctl_stats(struct dpu_hconn *hc, const struct fam_hdr *h)
{
	json_t *j = dpu_counters_json(hc->dpu);
	char *text = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	if (text == NULL) {
		hconn_status(hc, h, -ENOMEM);
		return;
	}
	(void)fam_conn_reply(hc->c, h, 0, text, (uint32_t)strlen(text), true,
	    NULL, NULL);
	free(text);
}

/* A request from a host. */
static void
hconn_request(struct fam_conn *c, const struct fam_hdr *h,
    const uint8_t *payload, void *arg)
{
	struct dpu_hconn *hc = arg;

	if (hc->s == NULL) {
		hconn_status(hc, h, -EACCES);
		return;
	}
	switch (h->type) {
	case FAM_MSG_READ:
	case FAM_MSG_WRITE:
		dpu_forward_request(hc, h, payload);
		return;
	case FAM_MSG_REGION_CREATE:
		ctl_create(hc, h, payload);
		return;
	case FAM_MSG_REGION_ADOPT:
		ctl_adopt(hc, h, payload);
		return;
	case FAM_MSG_REGION_FREE:
		ctl_free(hc, h, payload);
		return;
	case FAM_MSG_REGION_ADVISE:
		ctl_advise(hc, h, payload);
		return;
	case FAM_MSG_STATS:
		ctl_stats(hc, h);
		return;
	default:
		hconn_status(hc, h, -EOPNOTSUPP);
		return;
	}
}

/* A hello: a new session, or the resumption of one within its grace. */
static int
hconn_hello(struct fam_conn *c, const struct fam_hello *req,
    struct fam_hello_resp *resp, void *arg)
{
	struct dpu_hconn *hc = arg;
	struct dpu *dpu = hc->dpu;
	struct dpu_session *s = NULL;

	/*
	 * Just started, before any memory node answered: a host would get
	 * EHOSTDOWN for its every request (a restarted dpu's hosts are back
	 * within milliseconds, its memory link may take longer). It is
	 * refused and comes back: hosts reconnect with back-off.
	 */
	if (!atomic_load_explicit(&dpu->reached, memory_order_acquire)) {
		log_info("dpu: %s is early: no memory node has answered yet",
		    hc->peer);
		return -EHOSTDOWN;
	}
	if (req->resume != 0)
		s = session_find(dpu, req->resume);
	if (s != NULL && strcmp(s->node, req->node) != 0)
		s = NULL;
	if (s != NULL && (req->features & FAM_FEAT_JOIN) && s->nhc > 0) {
		/* One more connection of a live session (background traffic). */
		if (s->nhc == FAM_SESSION_CONNS)
			return -EMFILE;
		session_attach(dpu, s, hc);
		log_info("dpu: session %" PRIu64 " of node %s: connection %u "
		    "from %s", s->serial, s->node, s->nhc, hc->peer);
	} else if (s != NULL) {
		while (s->nhc > 0) {
			struct dpu_hconn *old = s->hcs[--s->nhc];

			old->s = NULL;
			if (s->nhc == 0)
				dpu->nattached--;
			fam_conn_close(old->c);
		}
		session_attach(dpu, s, hc);
		DPU_INC(dpu, sessions_resumed, 1);
		log_notice("dpu: session %" PRIu64 " of node %s resumed from %s "
		    "with %u region%s", s->serial, s->node, hc->peer,
		    s->nregions, s->nregions == 1 ? "" : "s");
	} else {
		s = session_new(dpu, req);
		if (s == NULL)
			return -ENOMEM;
		session_attach(dpu, s, hc);
		log_notice("dpu: session %" PRIu64 " of node %s started from %s",
		    s->serial, s->node, hc->peer);
	}
	resp->role = FAM_WIRE_ROLE_DPU;
	resp->features = 0;
	resp->session = s->token;
	resp->instance = dpu->instance;
	snprintf(resp->node, sizeof resp->node, "%s", dpu->node_name);
	return 0;
}

/* A host connection is gone. */
static void
hconn_closed(struct fam_conn *c, int err, void *arg)
{
	struct dpu_hconn *hc = arg;
	struct dpu *dpu = hc->dpu;
	const struct fam_conn_stats *st = fam_conn_stats(c);

	DPU_INC(dpu, bad_frames, st->bad_frames);
	DPU_INC(dpu, input_pauses, st->input_pauses);
	if (err == -ETIMEDOUT)
		DPU_INC(dpu, timeouts, 1);
	if (err == -EACCES || err == -EPROTONOSUPPORT)
		DPU_INC(dpu, hello_refusals, 1);
	hc->closed = true;
	hc->arena_mr = NULL; /* released with the connection */
	if (hc->s != NULL)
		session_detach(dpu, hc->s, hc, err);
	hc->s = NULL;
	log_info("dpu: connection from %s closed%s%s", hc->peer,
	    err != 0 ? ": " : "", err != 0 ? strerror(-err) : "");
	TAILQ_REMOVE(&dpu->conns, hc, link);
	dpu->nconns--;
	dpu_hconn_put(hc);
}

static const struct fam_conn_handlers hconn_handlers = {
	.hello = hconn_hello,
	.request = hconn_request,
	.closed = hconn_closed,
};

/* A new host connection. */
static void
dpu_accept(struct fam_listener *l, struct fam_conn *c, const char *peer,
    void *arg)
{
	struct dpu *dpu = arg;
	struct dpu_hconn *hc;

	if (dpu->nconns >= DPU_MAX_CONNS) {
		log_warn("dpu: refusing %s: %u connections open", peer,
		    dpu->nconns);
		fam_conn_close(c);
		return;
	}
	hc = calloc(1, sizeof *hc);
	if (hc == NULL) {
		fam_conn_close(c);
		return;
	}
	hc->dpu = dpu;
	hc->c = c;
	hc->refs = 1;
	snprintf(hc->peer, sizeof hc->peer, "%s", peer);
	TAILQ_INSERT_TAIL(&dpu->conns, hc, link);
	dpu->nconns++;
	DPU_INC(dpu, connections, 1);
	fam_conn_set_handlers(c, &hconn_handlers, hc);
	log_info("dpu: connection from %s", peer);
}

/* ---- status and admin ----------------------------------------------------- */

/* Returns the counters as JSON. */
static json_t *
dpu_counters_json(struct dpu *dpu)
{
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
	    "s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
	    "s:I}",
	    "reads", (json_int_t)DPU_GET(dpu, reads),
	    "writes", (json_int_t)DPU_GET(dpu, writes),
	    "rw_errors", (json_int_t)DPU_GET(dpu, rw_errors),
	    "memory_reads", (json_int_t)DPU_GET(dpu, mem_reads),
	    "memory_writes", (json_int_t)DPU_GET(dpu, mem_writes),
	    "memory_errors", (json_int_t)DPU_GET(dpu, mem_errors),
	    "regions", (json_int_t)dpu->nregions,
	    "memory_regions", (json_int_t)dpu->nmregions,
	    "regions_created", (json_int_t)DPU_GET(dpu, regions_created),
	    "regions_adopted", (json_int_t)DPU_GET(dpu, regions_adopted),
	    "regions_freed", (json_int_t)DPU_GET(dpu, regions_freed),
	    "create_errors", (json_int_t)DPU_GET(dpu, create_errors),
	    "connections", (json_int_t)DPU_GET(dpu, connections),
	    "connections_open", (json_int_t)dpu->nconns,
	    "hello_refusals", (json_int_t)DPU_GET(dpu, hello_refusals),
	    "bad_frames", (json_int_t)DPU_GET(dpu, bad_frames),
	    "timeouts", (json_int_t)DPU_GET(dpu, timeouts),
	    "sessions_connected", (json_int_t)dpu->nattached,
	    "sessions_detached", (json_int_t)(dpu->nsessions - dpu->nattached),
	    "sessions_started", (json_int_t)DPU_GET(dpu, sessions_started),
	    "sessions_resumed", (json_int_t)DPU_GET(dpu, sessions_resumed),
	    "sessions_ended", (json_int_t)DPU_GET(dpu, sessions_ended),
	    "host_throttles", (json_int_t)DPU_GET(dpu, host_throttles),
	    "flow_refusals", (json_int_t)DPU_GET(dpu, flow_refusals),
	    "input_pauses", (json_int_t)DPU_GET(dpu, input_pauses),
	    "staging_bytes", (json_int_t)dpu->staging_bytes,
	    "staging_peak_bytes", (json_int_t)dpu->staging_peak,
	    "staging_failures", (json_int_t)DPU_GET(dpu, staging_failures));
}

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
		int state = node_state(n);

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

/* Drops the connections to the memory nodes; they are made again. Back. */
static void
nodes_reconnect_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dpu *dpu = arg;

	for (unsigned i = 0; i < dpu->nnodes; i++)
		if (dpu->nodes[i].conn != NULL &&
		    node_state(&dpu->nodes[i]) == DN_UP) {
			log_notice("dpu: memory node %s: reconnecting "
			    "(memory.reconnect)", dpu->nodes[i].addr);
			fam_conn_close(dpu->nodes[i].conn);
		}
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
	struct timeval now = { 0, 0 };

	if (event_base_once(dpu->back_base, -1, EV_TIMEOUT, nodes_reconnect_cb,
	    dpu, &now) < 0)
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
	if (dpu_parse_nodes(dpu, cfg_str(cfg, CFG_DPU_MEMORY_NODES)) < 0) {
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
	err = fam_listen(d->base, cfg_str(cfg, CFG_DPU_LISTEN), &dpu->opts,
	    dpu_accept, dpu, &dpu->l, &cause);
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
	struct dpu_hconn *hc;
	struct dpu_session *s;

	if (dpu == NULL)
		return;
	dpu->stopping = true;
	if (dpu->l != NULL)
		fam_listener_free(dpu->l);
	dpu->l = NULL;
	TAILQ_FOREACH(hc, &dpu->conns, link)
		fam_conn_close(hc->c);
	while ((s = TAILQ_FIRST(&dpu->sessions)) != NULL)
		session_end(dpu, s, "famd stops");
	/* Let the host connections close. */
	for (int i = 0; i < 50 && !TAILQ_EMPTY(&dpu->conns); i++)
		event_base_loop(d->base, EVLOOP_NONBLOCK);
	/* The frees go to the memory nodes, then their connections close. */
	dpu_cache_quiesce(dpu);
	dpu_forward_stop(dpu);
	dpu_cache_stop(dpu);
	for (unsigned i = 0; i < dpu->nnodes; i++) {
		struct dpu_node *n = &dpu->nodes[i];

		if (n->retry != NULL)
			event_free(n->retry);
		free(n->addr);
		free(n->pending_free);
	}
	if (dpu->back_base != NULL && dpu->back_base != dpu->base)
		event_base_free(dpu->back_base);
	explicit_bzero(dpu->secret, sizeof dpu->secret);
	explicit_bzero(dpu->opts.secret, sizeof dpu->opts.secret);
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
