/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-replace.c - [host] replace_after: the copies (replicate:N) and
 * fragments (ec:K+M) of a memory node down that long move to other nodes.
 *
 * Owns: h->rp: when each memory node was first seen down, the moves. A
 * copy moves to a node that is up and holds no copy of its column (two
 * copies never share a node), the one holding fewest of its region's;
 * it is then "gone" there, and host-replica.c makes its region
 * (REGION_CREATE), marks every row stale and rebuilds it at rebuild_rate,
 * as for a node that restarted empty. Its old region is freed on the old
 * node (at once if reachable, else when our session there resumes; a node
 * that restarted has lost it anyway): nothing points at it any more.
 * A copy moves only when nothing of it is in flight. With no node to take
 * it, it stays (degraded) until its node returns; logged once per outage.
 * Locks: none; everything runs on the control loop.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "host/host.h"

/* Returns true when nothing of copy s is in flight: it may move. */
static bool
replace_idle(const struct host *h, const struct stripe *s)
{
	const struct host_rebuild *rb = &h->rb;

	return s->inflight == 0 && !s->switching && !s->adopting &&
	    !s->creating && !(rb->busy && (rb->src == s || rb->dst == s));
}

/*
 * Returns the memory node to take copy s of r (its node down): up, holding
 * no copy of s's column, and of those the one holding fewest copies of r
 * (ties: the first after s's node, shifted by the column); or NULL.
 */
static struct mnode *
replace_target(struct host *h, const struct stripe *s)
{
	const struct region *r = s->r;
	unsigned col = (unsigned)(s - r->stripes) % r->width;
	unsigned start = s->node->index + 1 + col, best_load = 0;
	struct mnode *best = NULL;

	for (unsigned j = 0; j < h->nnodes; j++) {
		struct mnode *n = &h->nodes[(start + j) % h->nnodes];
		unsigned load = 0;
		bool taken = false;

		if (n == s->node || n->state != MN_UP || n->conn == NULL)
			continue;
		for (unsigned i = 0; i < r->nstripes; i++) {
			if (r->stripes[i].node != n)
				continue;
			load++;
			taken |= i % r->width == col;
		}
		if (!taken && (best == NULL || load < best_load)) {
			best = n;
			best_load = load;
		}
	}
	return best;
}

/*
 * Moves copy s to node to: its old region freed on its old node, the
 * copy gone on the new one (made and rebuilt there by host-replica.c).
 */
static void
replace_move(struct host *h, struct stripe *s, struct mnode *to)
{
	if (s->owned && s->node != NULL)
		host_node_free(s->node, s->instance, s->remote.region);
	s->node = to;
	s->instance = to->instance;
	s->remote.region = 0;
	s->remote.rkey = 0;
	s->remote.addr = 0;
	s->key = 0;
	s->owned = false;
	s->leasing = false;
	s->path = SP_DIRECT;
	host_stripe_gone(s);
	h->rp.moved++;
}

/* Logs the copies of node n that moved, and where, in one line. */
static void
replace_log(const struct host *h, const struct mnode *n, uint64_t down_ms,
    const unsigned to[HOST_MAX_NODES], unsigned moved)
{
	char where[HOST_MAX_NODES * 64] = "";
	size_t len = 0;

	for (unsigned j = 0; j < h->nnodes; j++) {
		int w;

		if (to[j] == 0)
			continue;
		w = snprintf(where + len, sizeof where - len, "%s%u to %s",
		    len > 0 ? ", " : "", to[j], h->nodes[j].addr);
		if (w < 0 || (size_t)w >= sizeof where - len)
			break;
		len += (size_t)w;
	}
	log_warn("memory node %s down for %llu.%llu s (replace_after): %u "
	    "cop%s of its regions moved (%s); rebuilding them there",
	    n->addr, (unsigned long long)(down_ms / 1000),
	    (unsigned long long)(down_ms % 1000 / 100), moved,
	    moved == 1 ? "y" : "ies", where);
}

/*
 * Moves the copies of redundant regions on node n (down past
 * replace_after) to other nodes; returns the copies no node can take.
 */
static uint64_t
replace_node(struct host *h, struct mnode *n, uint64_t down_ms)
{
	unsigned to[HOST_MAX_NODES] = { 0 }, moved = 0;
	uint64_t stuck = 0;

	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next)
		for (struct region *r = cl->regions; r != NULL; r = r->next)
			for (unsigned i = 0; i < r->nstripes; i++) {
				struct stripe *s = &r->stripes[i];
				struct mnode *t;

				if (s->node != n || r->ncopies <= 1 ||
				    r->dying || r->lost ||
				    r == cl->pending_region ||
				    s->remote.size == 0 || !replace_idle(h, s))
					continue;
				t = replace_target(h, s);
				if (t == NULL) {
					stuck++;
					continue;
				}
				log_debug("pid %ld: region %llu: copy %u of "
				    "column %u moves from memory node %s to %s",
				    (long)cl->pid, (unsigned long long)r->handle,
				    i / r->width, i % r->width, n->addr, t->addr);
				replace_move(h, s, t);
				to[t->index]++;
				moved++;
			}
	if (moved > 0)
		replace_log(h, n, down_ms, to, moved);
	if (stuck > 0 && !h->rp.told[n->index])
		log_warn("memory node %s down for %llu.%llu s "
		    "(replace_after): %llu copies of its regions have no "
		    "other memory node to go to (each one up holds a copy of "
		    "the same chunks); they stay degraded until it returns",
		    n->addr, (unsigned long long)(down_ms / 1000),
		    (unsigned long long)(down_ms % 1000 / 100),
		    (unsigned long long)stuck);
	h->rp.told[n->index] |= stuck > 0;
	return stuck;
}

/*
 * Each tick: notes when each memory node went down, and moves the copies
 * of those down past replace_after (0: never).
 */
void
host_replace_tick(struct host *h)
{
	struct host_replace *rp = &h->rp;
	uint64_t after = (uint64_t)cfg_int(h->d->cfg, CFG_HOST_REPLACE_AFTER) *
	    1000000u, now = mono_ns(), stuck = 0;

	for (unsigned i = 0; i < h->nnodes; i++) {
		struct mnode *n = &h->nodes[i];

		if (n->state == MN_UP) {
			rp->down_ns[i] = 0;
			rp->told[i] = false;
			continue;
		}
		if (rp->down_ns[i] == 0)
			rp->down_ns[i] = now;
		else if (after != 0 && now - rp->down_ns[i] >= after &&
		    !h->stopping)
			stuck += replace_node(h, n,
			    (now - rp->down_ns[i]) / 1000000u);
	}
	rp->stuck = stuck;
}

/* Adds the moves to the redundancy status red: setting, moved, stuck. */
void
host_replace_json(const struct host *h, json_t *red)
{
	json_object_set_new(red, "replace_after_ms", json_integer((json_int_t)
	    cfg_int(h->d->cfg, CFG_HOST_REPLACE_AFTER)));
	json_object_set_new(red, "copies_moved",
	    json_integer((json_int_t)h->rp.moved));
	json_object_set_new(red, "copies_stuck",
	    json_integer((json_int_t)h->rp.stuck));
}
