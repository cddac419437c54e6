/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-path.c - which way a host's chunk reads and write-backs go:
 * straight to the memory node (direct) or through the dpu, chosen by
 * `path`, changed at run time (path.set), and, with fallback = direct,
 * around a dpu that is unreachable.
 *
 * Owns: each stripe's path, its requests in flight on it (host_route,
 * host_route_done), its adoption on the memory node.
 * States of a stripe: on DIRECT or DPU (enum stripe_path, host.h),
 *   SWITCHING while a fence or hand-over is out; it moves only when none
 *   of its requests is out on the old path, so a chunk is never fetched
 *   on one path while its write-back is still on the other. To direct: an
 *   exclusive REGION_ADOPT fences the region on the memory node (what the
 *   dpu still forwards is refused) and the dpu's copy is freed. To dpu: a
 *   fresh hand-over (REGION_ADOPT through the dpu). A region made through
 *   the dpu is adopted on its memory node at once, so it outlives the dpu.
 * Locks: none; everything runs on the control loop.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"

#define PATH_RETRY_NS     (1000ull * 1000000u) /* after a failed hand-over */
#define PATH_TICK_SWITCHES 64                  /* idle stripes moved a tick */

/* Returns true when the stripe's memory node is up, as the stripe knew it. */
static bool
stripe_direct_ok(const struct host *h, const struct stripe *s)
{
	return s->node != NULL && host_node_usable(h, s);
}

/* Returns true when the dpu holds the stripe for us now. */
static bool
stripe_dpu_ok(const struct host *h, const struct stripe *s)
{
	return host_dpu_usable(h) && s->dremote.region != 0 &&
	    s->dinstance == h->dpu.instance;
}

/* Returns the path the stripe should be on now. */
static int
stripe_want(const struct host *h, const struct stripe *s)
{
	bool can_direct = s->node != NULL;

	if (s->r->ncopies > 1)
		return SP_DIRECT; /* each copy to its own node */
	if (h->has_dpu && h->path == CFG_PATH_DPU) {
		if (host_dpu_usable(h) && mono_ns() >= s->r->dpu_retry_ns)
			return SP_DPU;
		if (h->fallback == CFG_FALLBACK_DIRECT && can_direct)
			return SP_DIRECT;
		return SP_DPU;
	}
	if (can_direct || !h->has_dpu)
		return SP_DIRECT;
	return SP_DPU; /* only the dpu knows that memory node */
}

/* Completion of a REGION_ADVISE nobody waits for. */
static void
path_advise_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	if (status < 0 && status != -ENOENT)
		log_debug("host: advice to the dpu: %s", strerror(-status));
}

/*
 * Drops the stripe's region on the dpu: now, or once our session there is
 * back (host_node_free; a host that stops leaves it to the end of that
 * session).
 */
static void
stripe_dpu_free(struct host *h, struct stripe *s)
{
	if (s->dremote.region == 0)
		return;
	host_node_free(&h->dpu, s->dinstance, s->dremote.region);
	s->dremote.region = 0;
	s->dremote.size = 0;
}

/*
 * Releases the stripe everywhere (its region is freed, and idle): on the
 * memory node when our session there holds it, on the dpu when it has it
 * for us; now, or once that session is back (host_node_free). A free needs
 * no lease, only our session's connection.
 */
void
host_stripe_free(struct host *h, struct stripe *s)
{
	if (s->owned && s->node != NULL)
		host_node_free(s->node, s->instance, s->remote.region);
	s->owned = false;
	stripe_dpu_free(h, s);
}

/* Sends REGION_ADVISE for the stripe's region on the dpu. */
static void
stripe_dpu_advise(struct host *h, struct stripe *s)
{
	uint8_t buf[FAM_REGION_ADVISE_LEN];

	if (!stripe_dpu_ok(h, s))
		return;
	proto_put_region_advise(buf, s->dremote.region, s->r->advice);
	if (fam_conn_call(h->dpu.conn, FAM_MSG_REGION_ADVISE, buf, sizeof buf,
	    path_advise_done, NULL) < 0)
		log_rl(LOG_INFO, "host: cannot pass advice to the dpu");
}

/* Passes a region's advice to the dpu, for the stripes it holds. */
void
host_region_advise(struct host *h, struct region *r)
{
	for (unsigned i = 0; i < r->nstripes; i++)
		stripe_dpu_advise(h, &r->stripes[i]);
}

/* Completion of a REGION_DISCARD nobody waits for. */
static void
path_discard_done(void *ctx, int status, const uint8_t *payload,
    uint32_t len)
{
	if (status < 0 && status != -ENOENT)
		log_debug("host: discard on a memory node: %s",
		    strerror(-status));
}

/*
 * Tells the memory nodes that chunks [first, first + n) of r were
 * discarded, so that they release that memory: one REGION_DISCARD per
 * stripe, on our own session with its node (a stripe we do not hold
 * there, or whose node is away, keeps its memory until it is freed).
 */
void
host_region_discard(struct host *h, struct region *r, uint64_t first,
    uint64_t n)
{
	unsigned ns = r->width;

	for (unsigned j = 0; j < r->nstripes && n > 0; j++) {
		struct stripe *s = &r->stripes[j];
		unsigned i = j % ns; /* its column */
		uint64_t c0 = first + (i + ns - first % ns) % ns, c1;
		struct fam_region_discard d;
		uint8_t buf[FAM_REGION_DISCARD_LEN];

		if (c0 >= first + n || !s->owned || s->node == NULL ||
		    s->node->state != MN_UP || s->node->conn == NULL ||
		    s->instance != s->node->instance)
			continue;
		c1 = first + n - 1 - (first + n - 1 + ns - i) % ns;
		d.region = s->remote.region;
		d.offset = (c0 / ns) * host_replica_unit(h, r);
		d.len = (c1 / ns + 1) * host_replica_unit(h, r) - d.offset;
		if (d.offset >= s->remote.size)
			continue;
		if (d.len > s->remote.size - d.offset)
			d.len = s->remote.size - d.offset;
		proto_put_region_discard(buf, &d);
		(void)fam_conn_call(s->node->conn, FAM_MSG_REGION_DISCARD, buf,
		    sizeof buf, path_discard_done, NULL);
	}
}

/* Sends REGION_ADOPT for the stripe's memory region to peer n. */
static int
stripe_send_adopt(struct stripe *s, struct mnode *n, uint32_t flags,
    fam_done_fn done)
{
	struct fam_region_adopt req = {
		.instance = n->is_dpu ? s->instance : 0,
		.region = s->remote.region,
		.key = s->key,
		.flags = flags,
	};
	uint8_t buf[FAM_REGION_ADOPT_LEN];
	int rc;

	proto_put_region_adopt(buf, &req);
	rc = fam_conn_call(n->conn, FAM_MSG_REGION_ADOPT, buf, sizeof buf,
	    done, s);
	if (rc == 0)
		s->r->busy++;
	return rc;
}

/*
 * Takes the lease an adoption's answer carries (verbs: the region's address
 * and rkey on our connection to the memory node; tcp: zeros). Returns 0 or
 * -EPROTO.
 */
static int
stripe_take_lease(struct stripe *s, const uint8_t *payload, uint32_t len)
{
	struct fam_region_info info;

	if (proto_get_region_info(payload, len, &info) < 0 ||
	    info.region != s->remote.region)
		return -EPROTO;
	s->remote.rkey = info.rkey;
	s->remote.addr = info.addr;
	return 0;
}

/* Completion of a plain adoption on the memory node (background). */
static void
adopt_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct stripe *s = ctx;
	struct region *r = s->r;
	struct host *h = r->cl->h;

	s->adopting = false;
	r->busy--;
	if (status == 0)
		status = stripe_take_lease(s, payload, len);
	if (status == 0) {
		/* A dying region is freed there once it is idle. */
		h->stats.adoptions++;
		s->owned = true;
	} else if (status == -ENOENT && !r->dying && r->ncopies > 1) {
		host_stripe_gone(s); /* its copy is made again (host-replica.c) */
	} else if (!r->dying)
		log_rl(LOG_INFO,
		    "pid %ld: region %llu: cannot adopt it on memory node "
		    "%s: %s", (long)r->cl->pid, (unsigned long long)r->handle,
		    s->node->addr, strerror(-status));
	host_region_idle(r);
}

/*
 * Makes our session on the memory node hold the stripe's region too (made
 * through the dpu, or our session there was lost), so that the region
 * outlives the dpu.
 */
void
host_stripe_adopt(struct host *h, struct stripe *s)
{
	if (s->owned || s->adopting || s->switching || s->r->dying ||
	    s->r->lost || s->gone || !stripe_direct_ok(h, s) || s->key == 0)
		return;
	if (stripe_send_adopt(s, s->node, 0, adopt_done) == 0)
		s->adopting = true;
}

/* Completion of the fence on the memory node: the stripe goes direct. */
static void
switch_direct_done(void *ctx, int status, const uint8_t *payload,
    uint32_t len)
{
	struct stripe *s = ctx;
	struct region *r = s->r;
	struct host *h = r->cl->h;

	s->switching = false;
	r->busy--;
	if (status == 0)
		status = stripe_take_lease(s, payload, len);
	if (status == 0) {
		s->owned = true;
		if (!r->dying) {
			s->path = SP_DIRECT;
			h->stats.path_switches++;
			if (!(r->flags & FAM_S_ALLOC_SHARED)) {
				h->stats.fences++;
				stripe_dpu_free(h, s);
			}
		}
	} else if (status == -ENOENT && !r->dying && r->ncopies > 1) {
		host_stripe_gone(s); /* its copy is made again (host-replica.c) */
		s->owned = false;
	} else if (status == -ENOENT && !r->dying) {
		r->lost = true;
		log_rl(LOG_ERR,
		    "pid %ld: region %llu is gone from memory node %s; its "
		    "program gets SIGBUS when it touches it", (long)r->cl->pid,
		    (unsigned long long)r->handle, s->node->addr);
	} else if (!r->dying) {
		h->stats.switch_errors++;
		log_rl(LOG_INFO,
		    "pid %ld: region %llu: cannot take it direct on %s: "
		    "%s; retrying", (long)r->cl->pid,
		    (unsigned long long)r->handle, s->node->addr,
		    strerror(-status));
	}
	host_region_idle(r);
	host_wake(h, HOST_WAKE_UNPARK);
}

/* Completion of the hand-over to the dpu: the stripe goes through it. */
static void
switch_dpu_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct stripe *s = ctx;
	struct region *r = s->r;
	struct host *h = r->cl->h;
	struct fam_region_info info;

	s->switching = false;
	r->busy--;
	if (status == 0 && proto_get_region_info(payload, len, &info) < 0)
		status = -EPROTO;
	if (status == 0) {
		if (r->dying) {
			if (host_dpu_usable(h))
				host_node_free(&h->dpu, h->dpu.instance,
				    info.region);
		} else {
			s->dremote.region = info.region;
			s->dremote.size = info.size;
			s->dinstance = h->dpu.instance;
			s->path = SP_DPU;
			h->stats.path_switches++;
			h->stats.handovers++;
			if (r->advice != FAM_ADVICE_NORMAL)
				stripe_dpu_advise(h, s);
		}
	} else if (!r->dying) {
		h->stats.switch_errors++;
		r->dpu_retry_ns = mono_ns() + PATH_RETRY_NS;
		log_rl(LOG_INFO,
		    "pid %ld: region %llu: the dpu cannot take it: %s; "
		    "retrying in a second", (long)r->cl->pid,
		    (unsigned long long)r->handle, strerror(-status));
	}
	host_region_idle(r);
	host_wake(h, HOST_WAKE_UNPARK);
}

/* Starts moving an idle stripe to path `to`. */
static void
stripe_switch(struct host *h, struct stripe *s, int to)
{
	bool shared = (s->r->flags & FAM_S_ALLOC_SHARED) != 0;

	if (s->switching || s->inflight > 0 || s->r->dying || s->r->lost ||
	    s->gone)
		return;
	if (to == SP_DIRECT) {
		if (!stripe_direct_ok(h, s) || s->adopting)
			return; /* wait for the node (or the adoption) */
		if (shared && s->owned) {
			s->path = SP_DIRECT;
			h->stats.path_switches++;
			return;
		}
		if (stripe_send_adopt(s, s->node, shared ? 0 :
		    FAM_ADOPT_EXCLUSIVE, switch_direct_done) == 0)
			s->switching = true;
		return;
	}
	if (!host_dpu_usable(h) || s->instance == 0)
		return;
	if (shared && stripe_dpu_ok(h, s)) {
		s->path = SP_DPU;
		h->stats.path_switches++;
		return;
	}
	/* A stale dpu region goes first: on the same connection, in order. */
	stripe_dpu_free(h, s);
	if (stripe_send_adopt(s, &h->dpu, 0, switch_dpu_done) == 0)
		s->switching = true;
}

/*
 * Chooses the connection and region for a read or write on stripe s
 * (background: read-ahead or write-back, which go on the peer's
 * background connection when it has one, the dpu's too), and the staging
 * buffers' registration on that connection: returns 0 (the request counts as in flight on the stripe's path until
 * host_route_done), -EAGAIN when it must wait (the path is changing, or
 * unreachable), or -EIO when the region is lost.
 */
int
host_route(struct host *h, struct stripe *s, bool background,
    struct fam_conn **conn, struct fam_mr **mr,
    const struct fam_remote **remote)
{
	int want;

	if (s->r->lost || (s->node == NULL && !h->has_dpu))
		return -EIO; /* no way to it at all */
	want = stripe_want(h, s);
	if (!s->switching && s->path == want) {
		if (want == SP_DIRECT && s->owned && stripe_direct_ok(h, s)) {
			*conn = host_node_conn(s, background, mr);
			*remote = &s->remote;
			h->stats.ops_direct++;
			s->inflight++;
			return 0;
		}
		if (want == SP_DPU && stripe_dpu_ok(h, s)) {
			bool bg = background && h->dpu.bg_up;

			*conn = bg ? h->dpu.bg : h->dpu.conn;
			*mr = bg ? h->dpu.bg_mr : h->dpu.mr;
			*remote = &s->dremote;
			h->stats.ops_dpu++;
			s->inflight++;
			return 0;
		}
	}
	stripe_switch(h, s, want);
	return -EAGAIN;
}

/* A read or write routed by host_route() is over. */
void
host_route_done(struct host *h, struct stripe *s)
{
	if (--s->inflight == 0 && !s->r->dying && stripe_want(h, s) != s->path)
		stripe_switch(h, s, stripe_want(h, s));
}

/*
 * A memory node is up: find the stripes that live there and adopt those we
 * do not hold (our session there ended unless it was resumed). The dpu:
 * nothing (its stripes move back to it as they go idle).
 */
void
host_path_node_up(struct host *h, struct mnode *n, bool resumed)
{
	if (n->is_dpu)
		return;
	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next)
		for (struct region *r = cl->regions; r != NULL; r = r->next)
			for (unsigned i = 0; i < r->nstripes; i++) {
				struct stripe *s = &r->stripes[i];

				if (s->node == NULL && s->instance == n->instance)
					s->node = n;
				if (s->node != n)
					continue;
				if (!resumed)
					s->owned = false;
				host_stripe_adopt(h, s);
			}
}

/* Moves idle stripes to the path they should be on (a few per tick). */
void
host_path_tick(struct host *h)
{
	unsigned budget = PATH_TICK_SWITCHES;

	for (struct host_client *cl = h->clients; cl != NULL && budget > 0;
	    cl = cl->next)
		for (struct region *r = cl->regions; r != NULL && budget > 0;
		    r = r->next)
			for (unsigned i = 0; i < r->nstripes; i++) {
				struct stripe *s = &r->stripes[i];
				int want = stripe_want(h, s);

				if (!s->owned && !s->adopting)
					host_stripe_adopt(h, s);
				if (s->switching || s->inflight > 0 ||
				    (want == s->path && (want == SP_DIRECT ||
				    stripe_dpu_ok(h, s))))
					continue;
				stripe_switch(h, s, want);
				budget--;
			}
}

/* Sets where requests should go; stripes follow as they go idle. */
void
host_path_set(struct host *h, int path, const char *why)
{
	if (path == h->path)
		return;
	h->path = path;
	log_notice("host: path is now %s (%s)", path == CFG_PATH_DPU ? "dpu" :
	    "direct", why);
	host_path_tick(h);
	host_wake(h, HOST_WAKE_UNPARK);
}

/* Describes the path settings and where the stripes are. */
json_t *
host_path_json(struct host *h)
{
	uint64_t direct = 0, dpu = 0, switching = 0, unowned = 0;

	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next)
		for (struct region *r = cl->regions; r != NULL; r = r->next)
			for (unsigned i = 0; i < r->nstripes; i++) {
				struct stripe *s = &r->stripes[i];

				if (s->switching)
					switching++;
				else if (s->path == SP_DPU)
					dpu++;
				else
					direct++;
				unowned += !s->owned;
			}
	return json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I}",
	    "path", h->path == CFG_PATH_DPU ? "dpu" : "direct",
	    "fallback", h->fallback == CFG_FALLBACK_DIRECT ? "direct" : "none",
	    "dpu", h->has_dpu ? h->dpu.addr : "",
	    "dpu_piece_bytes", (json_int_t)(h->has_dpu &&
	    h->dpu.piece_shift != 0 ? 1ull << h->dpu.piece_shift : 0),
	    "stripes_direct", (json_int_t)direct,
	    "stripes_dpu", (json_int_t)dpu,
	    "stripes_switching", (json_int_t)switching,
	    "stripes_not_adopted", (json_int_t)unowned);
}
