/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-node.c - the host's links to its memory nodes and its dpu.
 *
 * Owns: per peer (struct mnode) the main connection and the background
 * one (read-ahead, write-back; tcp only), their staging registrations,
 * reconnection with back-off, the session token that lets a memory famd
 * resume us, the REGION_FREEs kept while a peer is away, new leases after
 * a resume.
 * States: MN_DOWN -> MN_CONNECTING -> MN_UP -> MN_DOWN (host.h).
 * Calls nothing above it: a peer coming back (or going) asks the fault
 * service to look at its parked fetches with host_wake(), and tells the
 * path through h->node_up, which the role sets at start.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "host/host.h"

static void node_connect(struct mnode *n);
static void node_connect_bg(struct mnode *n);
static void node_opts(struct mnode *n, struct fam_conn_opts *opts);

/*
 * Returns true if the stripe's node is connected to the instance holding
 * it and the stripe's lease is valid on that connection.
 */
bool
host_node_usable(const struct host *h, const struct stripe *s)
{
	return s->node != NULL && s->node->state == MN_UP &&
	    s->node->conn != NULL && s->node->instance == s->instance &&
	    !s->leasing;
}

/*
 * Returns the connection for an operation on the stripe's node: background
 * work (read-ahead, write-back) goes on the second connection when it is
 * up, so that it never queues in front of a fault.
 */
struct fam_conn *
host_node_conn(const struct stripe *s, bool background, struct fam_mr **mr)
{
	struct mnode *n = s->node;
	bool bg = background && n->bg_up;

	if (mr != NULL)
		*mr = bg ? n->bg_mr : n->mr;
	return bg ? n->bg : n->conn;
}

/* Returns true when the dpu is connected. */
bool
host_dpu_usable(const struct host *h)
{
	return h->has_dpu && h->dpu.state == MN_UP && h->dpu.conn != NULL;
}

/* Returns the memory node running instance, or NULL. */
struct mnode *
host_node_by_instance(struct host *h, uint64_t instance)
{
	for (unsigned i = 0; i < h->nnodes; i++)
		if (instance != 0 && h->nodes[i].instance == instance)
			return &h->nodes[i];
	return NULL;
}

/*
 * n restarted: a stripe on its old instance is gone. A region with one
 * copy is lost; a replicated one has a copy to make again (host-replica.c)
 * and is lost only where no other copy is left.
 */
static void
node_lost(struct host *h, struct mnode *n)
{
	uint64_t lost = 0, copies = 0;

	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next)
		for (struct region *r = cl->regions; r != NULL; r = r->next)
			for (unsigned i = 0; i < r->nstripes; i++) {
				struct stripe *s = &r->stripes[i];

				if (s->node != n || s->instance == n->instance ||
				    r->lost || s->gone)
					continue;
				if (r->ncopies > 1) {
					host_stripe_gone(s);
					s->owned = false;
					copies++;
				} else {
					r->lost = true;
					lost++;
				}
			}
	if (lost > 0)
		log_err("memory node %s restarted: the data of %llu regions "
		    "is gone; their programs get SIGBUS when they touch it",
		    n->addr, (unsigned long long)lost);
	if (copies > 0)
		log_warn("memory node %s restarted: %llu copies of replicated "
		    "regions are gone there; rebuilding them from the others",
		    n->addr, (unsigned long long)copies);
	host_wake(h, HOST_WAKE_UNPARK);
}

/* A REGION_FREE in flight. */
struct free_req {
	struct mnode *n;
	uint64_t instance;
	uint32_t region;
};

/* Keeps a region to free on n when its session is back. */
static void
node_free_later(struct mnode *n, uint32_t region)
{
	if (n->nfrees == n->frees_cap) {
		unsigned cap = n->frees_cap == 0 ? 16 : n->frees_cap * 2;
		uint32_t *f = realloc(n->frees, cap * sizeof *f);

		if (f == NULL) {
			log_err("memory node %s: no memory to remember that "
			    "region %u is to be freed; it stays until the "
			    "session ends", n->addr, region);
			return;
		}
		n->frees = f;
		n->frees_cap = cap;
	}
	n->frees[n->nfrees++] = region;
	n->h->stats.frees_deferred++;
}

/* The answer to a REGION_FREE: lost with the connection, it is sent again. */
static void
node_free_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct free_req *fr = ctx;

	if (!fr->n->h->stopping && (status == -ECONNRESET ||
	    status == -ETIMEDOUT))
		host_node_free(fr->n, fr->instance, fr->region);
	else if (status < 0)
		log_debug("memory node %s: freeing region %u: %s", fr->n->addr,
		    fr->region, strerror(-status));
	free(fr);
}

/*
 * Frees a region on memory node n (created on its instance): now if the
 * node is up, else when the session is resumed. A new instance has lost
 * the region already.
 */
void
host_node_free(struct mnode *n, uint64_t instance, uint32_t region)
{
	uint8_t buf[FAM_REGION_FREE_LEN];
	struct free_req *fr;

	if (instance != n->instance || n->h->stopping)
		return;
	if (n->state != MN_UP || n->conn == NULL) {
		node_free_later(n, region);
		return;
	}
	fr = malloc(sizeof *fr);
	if (fr == NULL) {
		node_free_later(n, region);
		return;
	}
	*fr = (struct free_req){ .n = n, .instance = instance,
		.region = region };
	proto_put_region_free(buf, region);
	if (fam_conn_call(n->conn, FAM_MSG_REGION_FREE, buf, sizeof buf,
	    node_free_done, fr) < 0) {
		free(fr);
		node_free_later(n, region);
	}
}

/* The session is back: frees what was freed while the node was away. */
static void
node_free_deferred(struct mnode *n, bool resumed)
{
	uint32_t *frees = n->frees;
	unsigned nfrees = n->nfrees;

	n->frees = NULL;
	n->nfrees = n->frees_cap = 0;
	if (nfrees > 0)
		log_info("memory node %s: %s %u region%s freed while it was "
		    "out of reach", n->addr, resumed ? "freeing" :
		    "a new instance: forgetting", nfrees, nfrees == 1 ? "" :
		    "s");
	for (unsigned i = 0; resumed && i < nfrees; i++)
		host_node_free(n, n->instance, frees[i]);
	free(frees);
}

/* A REGION_LEASE request in flight: which node, connection and region. */
struct lease_req {
	struct mnode *n;
	uint64_t connects;
	uint32_t region;
};

/* Applies f to every stripe of n's current instance with remote region id. */
static void
node_stripes(struct host *h, struct mnode *n, uint32_t id,
    void (*f)(struct stripe *s, const void *arg), const void *arg)
{
	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next)
		for (struct region *r = cl->regions; r != NULL; r = r->next)
			for (unsigned i = 0; i < r->nstripes; i++) {
				struct stripe *s = &r->stripes[i];

				if (s->node == n && s->instance == n->instance &&
				    s->remote.size != 0 && s->remote.region == id)
					f(s, arg);
			}
}

/* Gives a stripe its new lease. */
static void
stripe_relet(struct stripe *s, const void *arg)
{
	const struct fam_region_info *info = arg;

	s->remote.rkey = info->rkey;
	s->remote.addr = info->addr;
	s->leasing = false;
}

/*
 * A stripe whose lease could not be renewed: its data is out of reach (a
 * replicated region's copy is made again).
 */
static void
stripe_unlet(struct stripe *s, const void *arg)
{
	s->leasing = false;
	if (s->r->ncopies > 1) {
		host_stripe_gone(s);
		s->owned = false;
	} else
		s->r->lost = true;
}

/* The answer to a REGION_LEASE. */
static void
node_lease_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct lease_req *lr = ctx;
	struct mnode *n = lr->n;
	struct host *h = n->h;
	struct fam_region_info info;

	if (h->stopping || n->connects != lr->connects) {
		free(lr); /* a later connection asks again */
		return;
	}
	if (status == 0 && proto_get_region_info(payload, len, &info) == 0 &&
	    info.region == lr->region)
		node_stripes(h, n, lr->region, stripe_relet, &info);
	else if (status != -ECONNRESET && status != -ETIMEDOUT) {
		log_rl(LOG_ERR,
		    "memory node %s: no new lease on region %u: %s; its "
		    "data is out of reach", n->addr, lr->region,
		    strerror(status < 0 ? -status : EPROTO));
		node_stripes(h, n, lr->region, stripe_unlet, NULL);
	}
	free(lr);
	host_wake(h, HOST_WAKE_UNPARK);
}

/* Marks a stripe as waiting for its new lease. */
static void
stripe_mark(struct stripe *s, const void *arg)
{
	s->leasing = true;
}

/*
 * The session was resumed on a new connection: leases with an rkey died
 * with the old one (verbs). Asks for new ones; the stripes wait meanwhile.
 */
static void
node_relet(struct host *h, struct mnode *n)
{
	unsigned asked = 0;

	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next)
		for (struct region *r = cl->regions; r != NULL; r = r->next)
			for (unsigned i = 0; i < r->nstripes; i++) {
				struct stripe *s = &r->stripes[i];
				struct lease_req *lr;
				uint8_t buf[FAM_REGION_LEASE_LEN];

				if (s->node != n || s->instance != n->instance ||
				    s->remote.size == 0 ||
				    (s->remote.rkey == 0 && !s->leasing))
					continue;
				lr = calloc(1, sizeof *lr);
				if (lr == NULL) {
					r->lost = true;
					continue;
				}
				lr->n = n;
				lr->connects = n->connects;
				lr->region = s->remote.region;
				proto_put_region_free(buf, s->remote.region);
				node_stripes(h, n, lr->region, stripe_mark, NULL);
				if (fam_conn_call(n->conn, FAM_MSG_REGION_LEASE,
				    buf, sizeof buf, node_lease_done, lr) < 0) {
					free(lr);
					continue; /* the connection is going */
				}
				asked++;
			}
	if (asked > 0)
		log_info("memory node %s: asked for %u new lease%s", n->addr,
		    asked, asked == 1 ? "" : "s");
}

/* The memory node accepted our hello. */
static void
node_connected(struct fam_conn *c, const struct fam_hello_resp *resp,
    void *arg)
{
	struct mnode *n = arg;
	struct host *h = n->h;
	bool resumed = n->instance != 0 && resp->instance == n->instance &&
	    resp->session == n->session;
	uint64_t old = n->instance;

	n->state = MN_UP;
	n->backoff_ms = 0;
	n->connects++;
	snprintf(n->name, sizeof n->name, "%s", resp->node);
	n->session = resp->session;
	n->instance = resp->instance;
	n->piece_shift = resp->piece_shift;
	free(n->last_error);
	n->last_error = NULL;
	log_notice("%s %s (%s) %s", n->is_dpu ? "dpu" : "memory node", n->addr,
	    n->name, old == 0 ? "connected" : resumed ?
	    "reconnected; session resumed" : resp->instance == old ?
	    "reconnected; our session there had ended" :
	    "reconnected as a new instance");
	/* Chunk reads land in the staging buffers: register them here. */
	n->mr = fam_mr_register(c, h->staging, (size_t)h->nstaging * h->chunk);
	if (n->mr == NULL)
		log_warn("%s %s: cannot register the staging buffers (%s); "
		    "chunk reads go through bounce buffers", n->is_dpu ? "dpu" :
		    "memory node", n->addr, strerror(errno));
	if (old != 0 && !resumed && !n->is_dpu)
		node_lost(h, n);
	node_free_deferred(n, resumed);
	if (resumed && !n->is_dpu)
		node_relet(h, n);
	if (h->node_up != NULL)
		h->node_up(h, n, resumed);
	node_connect_bg(n);
	host_wake(h, HOST_WAKE_UNPARK);
}

/* The background connection joined our session. */
static void
node_bg_connected(struct fam_conn *c, const struct fam_hello_resp *resp,
    void *arg)
{
	struct mnode *n = arg;

	if (resp->session != n->session || resp->instance != n->instance ||
	    n->state != MN_UP) {
		/* The peer did not let it join: do without. */
		log_info("%s %s: background connection not joined; "
		    "read-ahead and write-back share the main one",
		    n->is_dpu ? "dpu" : "memory node", n->addr);
		fam_conn_close(c);
		return;
	}
	n->bg_mr = fam_mr_register(c, n->h->staging,
	    (size_t)n->h->nstaging * n->h->chunk);
	n->bg_up = true;
	log_debug("%s %s: background connection up", n->is_dpu ? "dpu" :
	    "memory node", n->addr);
	/* then the fault-service threads' (after it: it must not be refused) */
	if (!n->is_dpu && n->h->ft != NULL) {
		struct fam_conn_opts opts;

		node_opts(n, &opts);
		host_fthreads_node_up(n->h, n, &opts);
		explicit_bzero(opts.secret, sizeof opts.secret);
	}
}

/* Retries the background connection. */
static void
node_bg_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	node_connect_bg(arg);
}

/* The background connection is gone; retried while the node is up. */
static void
node_bg_closed(struct fam_conn *c, int err, void *arg)
{
	struct mnode *n = arg;
	struct timeval tv = { 1, 0 };

	n->bg = NULL;
	n->bg_mr = NULL; /* released with the connection */
	n->bg_up = false;
	if (n->state == MN_UP && !n->h->stopping)
		evtimer_add(n->bg_retry, &tv);
}

static const struct fam_conn_handlers node_bg_handlers = {
	.connected = node_bg_connected,
	.closed = node_bg_closed,
};

/* Retries the connection after the back-off. */
static void
node_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	node_connect(arg);
}

/* Schedules the next connection attempt, backing off up to 5 s. */
static void
node_schedule(struct mnode *n)
{
	backoff_schedule(n->retry, &n->backoff_ms);
}

/* The connection to a memory node is gone. */
static void
node_closed(struct fam_conn *c, int err, void *arg)
{
	struct mnode *n = arg;
	bool was_up = n->state == MN_UP;

	n->conn = NULL;
	n->mr = NULL; /* released with the connection */
	n->state = MN_DOWN;
	if (n->bg != NULL)
		fam_conn_close(n->bg);
	host_fthreads_node_down(n->h, n);
	if (n->h->stopping)
		return; /* we closed it */
	if (was_up) {
		n->disconnects++;
		log_warn("%s %s lost: %s; reconnecting", n->is_dpu ? "dpu" :
		    "memory node", n->addr,
		    err != 0 ? strerror(err < 0 ? -err : err) : "closed");
	} else if (n->backoff_ms >= BACKOFF_MAX_MS) {
		log_debug("%s %s: still unreachable: %s", n->is_dpu ? "dpu" :
		    "memory node", n->addr, strerror(err < 0 ? -err : err));
	} else if (n->backoff_ms == 0) {
		log_warn("%s %s unreachable: %s; retrying", n->is_dpu ? "dpu" :
		    "memory node", n->addr, strerror(err < 0 ? -err : err));
	}
	free(n->last_error);
	n->last_error = strdup(err != 0 ? strerror(err < 0 ? -err : err) :
	    "closed");
	node_schedule(n);
	if (was_up && n->is_dpu)
		host_wake(n->h, HOST_WAKE_UNPARK); /* fall back, or wait */
}

static const struct fam_conn_handlers node_handlers = {
	.connected = node_connected,
	.closed = node_closed,
};

/* Fills the options of a connection to memory node n. */
static void
node_opts(struct mnode *n, struct fam_conn_opts *opts)
{
	struct host *h = n->h;
	char host[256] = "";
	const char *name = cfg_str(h->d->cfg, CFG_NODE_NAME);

	if (*name == '\0') {
		gethostname(host, sizeof host - 1);
		name = host;
	}
	memset(opts, 0, sizeof *opts);
	opts->kind = (enum fam_transport_kind)cfg_int(h->d->cfg, CFG_TRANSPORT);
	opts->hello.role = FAM_WIRE_ROLE_HOST;
	opts->hello.features = n->is_dpu ? FAM_FEAT_PIECE : 0;
	opts->hello.resume = n->session;
	snprintf(opts->hello.node, sizeof opts->hello.node, "%s", name);
	memcpy(opts->secret, h->secret, sizeof opts->secret);
	opts->tls = h->tls;
	opts->op_timeout_ms = (uint32_t)cfg_int(h->d->cfg, CFG_OP_TIMEOUT);
	opts->qps_per_peer = (unsigned)cfg_int(h->d->cfg,
	    CFG_VERBS_QPS_PER_PEER);
	opts->inject_error_ppm = (uint32_t)cfg_int(h->d->cfg,
	    CFG_VERBS_INJECT_ERROR_PPM);
	opts->max_outstanding = 1024;
	opts->max_payload = FAM_PROTO_MAX_PAYLOAD;
}

/*
 * Opens the background connection, joining the session of the main one
 * (tcp only: over verbs a lease belongs to its connection, and the queue
 * pairs of one connection already keep faults apart from the rest).
 */
static void
node_connect_bg(struct mnode *n)
{
	struct fam_conn_opts opts;
	char *cause = NULL;

	if (n->bg != NULL || n->state != MN_UP || n->h->stopping ||
	    cfg_int(n->h->d->cfg, CFG_TRANSPORT) != CFG_TRANSPORT_TCP)
		return;
	node_opts(n, &opts);
	opts.hello.features |= FAM_FEAT_JOIN;
	if (fam_connect(n->h->base, n->addr, &opts, &node_bg_handlers, n,
	    &n->bg, &cause) < 0) {
		log_debug("memory node %s: background connection: %s", n->addr,
		    cause);
		free(cause);
		n->bg = NULL;
	}
}

/* Starts connecting to memory node n. */
static void
node_connect(struct mnode *n)
{
	struct host *h = n->h;
	struct fam_conn_opts opts;
	char *cause = NULL;

	node_opts(n, &opts);
	n->state = MN_CONNECTING;
	if (fam_connect(h->base, n->addr, &opts, &node_handlers, n, &n->conn,
	    &cause) < 0) {
		n->state = MN_DOWN;
		n->conn = NULL;
		if (n->backoff_ms == 0)
			log_warn("%s %s: %s; retrying", n->is_dpu ? "dpu" :
			    "memory node", n->addr, cause);
		free(n->last_error);
		n->last_error = cause;
		node_schedule(n);
	}
}

/* Tells whether a memory node connection is still to be torn down. */
bool
host_nodes_open(const struct host *h)
{
	for (unsigned i = 0; i < h->nnodes; i++)
		if (h->nodes[i].conn != NULL || h->nodes[i].bg != NULL)
			return true;
	return h->has_dpu && (h->dpu.conn != NULL || h->dpu.bg != NULL);
}

/* Closes a peer's connections and its timers for good (host stop). */
void
host_node_close(struct mnode *n)
{
	if (n->retry != NULL)
		event_free(n->retry);
	n->retry = NULL;
	if (n->bg_retry != NULL)
		event_free(n->bg_retry);
	n->bg_retry = NULL;
	if (n->bg != NULL)
		fam_conn_close(n->bg);
	if (n->conn != NULL)
		fam_conn_close(n->conn);
}

/* Frees what a peer keeps once its connections are closed. */
void
host_node_fini(struct mnode *n)
{
	free(n->frees);
	free(n->addr);
	free(n->last_error);
	n->frees = NULL;
	n->addr = n->last_error = NULL;
}

/* Makes peer n's timers and starts connecting to it; 0 or -ENOMEM. */
int
host_node_start(struct mnode *n)
{
	n->retry = evtimer_new(n->h->base, node_retry_cb, n);
	n->bg_retry = evtimer_new(n->h->base, node_bg_retry_cb, n);
	if (n->retry == NULL || n->bg_retry == NULL)
		return -ENOMEM;
	node_connect(n);
	return 0;
}
