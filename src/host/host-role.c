/*
 * host-role.c - the host role: start and stop, connections to the memory
 * nodes (reconnected with back-off; resumed when the memory famd kept our
 * session, regions marked lost when it restarted), status and the
 * `regions` command.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "host/host.h"

#define TICK_MS          50
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS   5000

static struct host *host_state;

static void node_connect(struct mnode *n);
static void node_connect_bg(struct mnode *n);

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

/* Marks every region with a stripe on n's old instance as lost. */
void
host_node_lost(struct host *h, struct mnode *n)
{
	uint64_t lost = 0;

	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next)
		for (struct region *r = cl->regions; r != NULL; r = r->next)
			for (unsigned i = 0; i < r->nstripes; i++)
				if (r->stripes[i].node == n && !r->lost &&
				    r->stripes[i].instance != n->instance) {
					r->lost = true;
					lost++;
				}
	if (lost > 0)
		log_err("memory node %s restarted: the data of %llu regions "
		    "is gone; their programs get SIGBUS when they touch it",
		    n->addr, (unsigned long long)lost);
	host_fetch_unpark(h);
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

/* A stripe whose lease could not be renewed: its data is out of reach. */
static void
stripe_unlet(struct stripe *s, const void *arg)
{
	s->leasing = false;
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
		log_err("memory node %s: no new lease on region %u: %s; its "
		    "data is out of reach", n->addr, lr->region,
		    strerror(status < 0 ? -status : EPROTO));
		node_stripes(h, n, lr->region, stripe_unlet, NULL);
	}
	free(lr);
	host_fetch_unpark(h);
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
		host_node_lost(h, n);
	node_free_deferred(n, resumed);
	if (resumed && !n->is_dpu)
		node_relet(h, n);
	host_path_node_up(h, n, resumed);
	node_connect_bg(n);
	host_fetch_unpark(h);
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
	struct mnode *n = arg;
	bool was_up = n->state == MN_UP;

	n->conn = NULL;
	n->mr = NULL; /* released with the connection */
	n->state = MN_DOWN;
	if (n->bg != NULL)
		fam_conn_close(n->bg);
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
		host_fetch_unpark(n->h); /* fall back, or wait, as configured */
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
	opts->hello.resume = n->session;
	snprintf(opts->hello.node, sizeof opts->hello.node, "%s", name);
	memcpy(opts->hello.secret, h->secret, sizeof opts->hello.secret);
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
	opts.hello.features = FAM_FEAT_JOIN;
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

/* Runs background work: parked fetches, eviction above the watermark. */
static void
host_tick_cb(evutil_socket_t fd, short what, void *arg)
{
	struct host *h = arg;

	host_path_tick(h);
	host_session_retry(h);
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

	while (*p != '\0' && h->nnodes < HOST_MAX_NODES) {
		const char *e = strchr(p, ',');
		size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
		struct mnode *n = &h->nodes[h->nnodes];

		while (len > 0 && *p == ' ') {
			p++;
			len--;
		}
		while (len > 0 && p[len - 1] == ' ')
			len--;
		n->addr = strndup(p, len);
		if (n->addr == NULL)
			return -1;
		n->h = h;
		n->index = h->nnodes++;
		if (e == NULL)
			break;
		p = e + 1;
	}
	return 0;
}

/* Starts the host role. */
static int
role_host_start(struct famd *d)
{
	struct host *h = calloc(1, sizeof *h);
	char *cause = NULL;

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
	if (host_uffd_probe(h, &cause) < 0)
		goto fail;
	if (host_parse_nodes(h, cfg_str(d->cfg, CFG_HOST_MEMORY_NODES)) < 0) {
		cause = xasprintf("out of memory");
		goto fail;
	}
	h->numa_node = host_numa_pick(h, h->nodes[0].addr);
	if (host_buffer_init(h, (uint64_t)cfg_int(d->cfg, CFG_HOST_BUFFER_SIZE),
	    &cause) < 0)
		goto fail;
	if (host_session_open(h, &cause) < 0)
		goto fail;
	h->path = (int)cfg_int(d->cfg, CFG_HOST_PATH);
	if (*cfg_str(d->cfg, CFG_HOST_DPU) != '\0') {
		h->has_dpu = true;
		h->dpu.h = h;
		h->dpu.is_dpu = true;
		h->dpu.index = HOST_MAX_NODES;
		h->dpu.addr = strdup(cfg_str(d->cfg, CFG_HOST_DPU));
		h->dpu.retry = evtimer_new(h->base, node_retry_cb, &h->dpu);
		h->dpu.bg_retry = evtimer_new(h->base, node_bg_retry_cb,
		    &h->dpu);
		if (h->dpu.addr == NULL || h->dpu.retry == NULL ||
		    h->dpu.bg_retry == NULL) {
			cause = xasprintf("out of memory");
			goto fail;
		}
	}
	for (unsigned i = 0; i < h->nnodes; i++) {
		h->nodes[i].retry = evtimer_new(h->base, node_retry_cb,
		    &h->nodes[i]);
		h->nodes[i].bg_retry = evtimer_new(h->base, node_bg_retry_cb,
		    &h->nodes[i]);
		node_connect(&h->nodes[i]);
	}
	if (h->has_dpu)
		node_connect(&h->dpu);
	h->tick = event_new(h->base, -1, EV_PERSIST, host_tick_cb, h);
	if (h->tick != NULL) {
		struct timeval tv = { 0, TICK_MS * 1000 };

		event_add(h->tick, &tv);
	}
	host_admin_register();
	log_info("host: buffer %llu frames of %llu bytes, %u memory node(s), "
	    "%s%s, path %s, sessions on %s", (unsigned long long)h->nframes,
	    (unsigned long long)h->chunk, h->nnodes,
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

/* Adds the host role's state and counters to a status object. */
static void
role_host_status(struct famd *d, json_t *st)
{
	struct host *h = d->role_state;
	struct host_stats *s = &h->stats;
	json_t *peers = json_object_get(st, "peers");
	uint64_t clients = 0, regions = 0, bytes = 0;

	for (unsigned i = 0; i < h->nnodes + h->has_dpu; i++) {
		struct mnode *n = i < h->nnodes ? &h->nodes[i] : &h->dpu;
		const struct fam_conn_stats *cs = n->conn != NULL ?
		    fam_conn_stats(n->conn) : NULL;

		json_array_append_new(peers, json_pack(
		    "{s:s,s:s,s:s,s:s,s:b,s:I,s:I,s:I,s:I,s:s}",
		    "role", n->is_dpu ? "dpu" : "memory", "address", n->addr,
		    "name", n->name,
		    "state", n->state == MN_UP ? "up" :
		    n->state == MN_CONNECTING ? "connecting" : "down",
		    "background", n->bg_up,
		    "connects", (json_int_t)n->connects,
		    "disconnects", (json_int_t)n->disconnects,
		    "outstanding", (json_int_t)(cs != NULL ? cs->outstanding : 0),
		    "frees_pending", (json_int_t)n->nfrees,
		    "last_error", n->last_error != NULL ? n->last_error : ""));
	}
	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next) {
		clients++;
		regions += cl->nregions;
		bytes += cl->bytes;
	}
	json_object_set_new(st, "buffer", json_pack(
	    "{s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:i}",
	    "size_bytes", (json_int_t)(h->nframes << h->chunk_shift),
	    "chunk_bytes", (json_int_t)h->chunk,
	    "used_bytes", (json_int_t)(h->used << h->chunk_shift),
	    "dirty_bytes", (json_int_t)(h->dirty << h->chunk_shift),
	    "fetches_in_flight", (json_int_t)h->inflight,
	    "writebacks_in_flight", (json_int_t)h->writebacks_inflight,
	    "eviction", cfg_int(d->cfg, CFG_HOST_EVICTION) ==
	    CFG_EVICTION_CLOCK ? "clock" : "fifo",
	    "numa_node", h->numa_node));
	json_object_set_new(st, "path", host_path_json(h));
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
	json_object_set_new(json_object_get(st, "counters"), "ops_direct",
	    json_integer((json_int_t)s->ops_direct));
	json_object_set_new(json_object_get(st, "counters"), "ops_dpu",
	    json_integer((json_int_t)s->ops_dpu));
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
	json_object_set_new(st, "fault_latency_us", json_pack("{s:I,s:I}",
	    "p50", (json_int_t)host_latency_pct(h, 50),
	    "p99", (json_int_t)host_latency_pct(h, 99)));
}

/* Zeroes the host role's counters. */
static void
role_host_stats_reset(struct famd *d)
{
	struct host *h = d->role_state;

	memset(&h->stats, 0, sizeof h->stats);
}

/* Tells whether a memory node connection is still to be torn down. */
static bool
host_conns_open(const struct host *h)
{
	for (unsigned i = 0; i < h->nnodes; i++)
		if (h->nodes[i].conn != NULL || h->nodes[i].bg != NULL)
			return true;
	return h->has_dpu && (h->dpu.conn != NULL || h->dpu.bg != NULL);
}

/* Closes a peer's connections and its timers for good (host stop). */
static void
node_close(struct mnode *n)
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

/* Stops the host role: sessions end, connections close, memory is freed. */
static void
role_host_stop(struct famd *d)
{
	struct host *h = d->role_state;

	if (h == NULL)
		return;
	h->stopping = true;
	host_session_close(h);
	if (h->tick != NULL)
		event_free(h->tick);
	for (unsigned i = 0; i < h->nnodes; i++)
		node_close(&h->nodes[i]);
	if (h->has_dpu)
		node_close(&h->dpu);
	/*
	 * Connections are torn down from the loop (which completes what was
	 * in flight on them): let it run that.
	 */
	for (int i = 0; i < 100 && host_conns_open(h); i++)
		event_base_loop(h->base, EVLOOP_NONBLOCK);
	if (host_conns_open(h))
		log_warn("host: memory node or dpu connections did not "
		    "close");
	/* The last regions go with their parked fetches: nodes still known. */
	host_fetch_unpark(h);
	for (unsigned i = 0; i < h->nnodes; i++) {
		free(h->nodes[i].frees);
		free(h->nodes[i].addr);
		free(h->nodes[i].last_error);
	}
	if (h->has_dpu) {
		free(h->dpu.addr);
		free(h->dpu.last_error);
		free(h->dpu.frees);
	}
	host_buffer_fini(h);
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
