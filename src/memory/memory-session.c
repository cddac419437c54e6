/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memory-session.c - peers' sessions of the memory role, their hellos and
 * the leases that give them one-sided access.
 *
 * Owns: sessions (struct mem_session) and their grace timers; the hello
 * (new session, resumption with the token within session_grace, one more
 * connection of a live session with FAM_FEAT_JOIN); leases (a handle's
 * region exposed on the session's primary connection) and REGION_ADOPT.
 * States of a session: attached (nmc > 0), detached (grace running), ended
 * (freed). Calls down into memory-region.c only.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "memory/memory.h"

/* Prepares the session list; grace_ms is session_grace. */
void
mem_sessions_init(uint64_t grace_ms)
{
	TAILQ_INIT(&mem.sessions);
	mem.grace_ms = grace_ms;
	mem.next_serial = 0;
	mem.nsessions = mem.nattached = 0;
}

/* Ends a session: drops its handles, frees what nobody else holds. */
static void
mem_session_end(struct mem_session *s, const char *why)
{
	struct mem_handle *h;
	unsigned freed = 0, kept = 0;

	while ((h = LIST_FIRST(&s->handles)) != NULL) {
		if (mem_handle_drop(h, true, "its session ended"))
			freed++;
		else
			kept++;
	}
	if (!mem.stopping)
		log_notice("memory: session %" PRIu64 " of node %s ended (%s): "
		    "%u region%s freed, %u kept", s->serial, s->node, why,
		    freed, freed == 1 ? "" : "s", kept);
	for (unsigned i = 0; i < s->nmc; i++)
		s->mcs[i]->s = NULL;
	if (s->nmc > 0)
		mem.nattached--;
	s->nmc = 0;
	event_free(s->grace);
	TAILQ_REMOVE(&mem.sessions, s, link);
	mem.nsessions--;
	mem.n.sessions_ended++;
	free(s);
}

/* Ends every session (famd stops). */
void
mem_sessions_end_all(const char *why)
{
	struct mem_session *s;

	while ((s = TAILQ_FIRST(&mem.sessions)) != NULL)
		mem_session_end(s, why);
}

/* Zeroes the sessions' own counters. */
void
mem_sessions_stats_reset(void)
{
	struct mem_session *s;

	TAILQ_FOREACH(s, &mem.sessions, link)
		s->reads = s->writes = s->bytes_read = s->bytes_written = 0;
}

/* Appends each session to a status's peers. */
void
mem_sessions_status(json_t *peers)
{
	struct mem_session *s;

	TAILQ_FOREACH(s, &mem.sessions, link)
		json_array_append_new(peers, json_pack("{s:s,s:s,s:s,s:I,s:i,"
		    "s:I,s:I,s:I}",
		    "node", s->node,
		    "address", s->peer,
		    "state", s->nmc > 0 ? "connected" : "detached",
		    "session", (json_int_t)s->serial,
		    "regions", (int)s->nregions,
		    "bytes", (json_int_t)s->bytes,
		    "bytes_read", (json_int_t)s->bytes_read,
		    "bytes_written", (json_int_t)s->bytes_written));
}

/* The grace of a detached session ran out. */
static void
mem_grace_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mem_session *s = arg;

	mem_session_end(s, "no reconnection within session_grace");
}

/* Finds a session by token. */
static struct mem_session *
mem_session_find(uint64_t token)
{
	struct mem_session *s;

	TAILQ_FOREACH(s, &mem.sessions, link)
		if (s->token == token)
			return s;
	return NULL;
}

/*
 * Sets whom a session's quotas count against (memory.h, owner): the host
 * part of the peer's address ("[v6]:port" or "v4:port") with a secret,
 * else the node name. A peer that proved a key of its own (peer_secrets)
 * is "key:NODE" instead (mem_session_admit).
 */
static void
mem_session_owner(struct mem_session *s, const char *peer)
{
	const char *colon = strrchr(peer, ':');
	int n = colon != NULL ? (int)(colon - peer) : (int)strlen(peer);

	if (!mem.has_secret || peer[0] == '\0')
		snprintf(s->owner, sizeof s->owner, "%s", s->node);
	else
		snprintf(s->owner, sizeof s->owner, "%.*s", n, peer);
}

/*
 * Starts a session for a peer (address peer) whose hello was accepted;
 * NULL: no memory.
 */
struct mem_session *
mem_session_new(const struct fam_hello *req, const char *peer)
{
	struct mem_session *s = calloc(1, sizeof *s);

	if (s == NULL)
		return NULL;
	s->grace = evtimer_new(mem.d->base, mem_grace_cb, s);
	if (s->grace == NULL) {
		free(s);
		return NULL;
	}
	do
		s->token = mem_random64();
	while (mem_session_find(s->token) != NULL);
	s->serial = ++mem.next_serial;
	s->role = req->role;
	snprintf(s->node, sizeof s->node, "%s", req->node);
	mem_session_owner(s, peer);
	LIST_INIT(&s->handles);
	TAILQ_INSERT_TAIL(&mem.sessions, s, link);
	mem.nsessions++;
	mem.n.sessions_started++;
	return s;
}

/*
 * Attaches a connection to a session: its primary one (new or resumed), or
 * one more when it joins.
 */
static void
mem_session_attach(struct mem_session *s, struct mem_conn *mc, bool primary)
{
	evtimer_del(s->grace);
	if (s->nmc == 0)
		mem.nattached++;
	if (primary)
		s->primary = mc;
	s->mcs[s->nmc++] = mc;
	mc->s = s;
	snprintf(s->peer, sizeof s->peer, "%s", mc->peer);
}

/*
 * A connection of a session is gone: when it was the last one, keep the
 * session for the grace, or end it.
 */
void
mem_session_detach(struct mem_session *s, struct mem_conn *mc, int err)
{
	struct timeval tv = { (time_t)(mem.grace_ms / 1000),
		(suseconds_t)(mem.grace_ms % 1000 * 1000) };
	char gr[32];

	for (unsigned i = 0; i < s->nmc; i++)
		if (s->mcs[i] == mc) {
			s->mcs[i] = s->mcs[--s->nmc];
			break;
		}
	if (s->primary == mc)
		s->primary = NULL;
	mc->s = NULL;
	if (s->nmc > 0)
		return;
	mem.nattached--;
	if (mem.stopping)
		return;
	if (mem.grace_ms == 0) {
		mem_session_end(s, err == 0 ? "disconnected" : strerror(-err));
		return;
	}
	snprintf(gr, sizeof gr, "%" PRIu64 ".%03us", mem.grace_ms / 1000,
	    (unsigned)(mem.grace_ms % 1000));
	log_notice("memory: session %" PRIu64 " of node %s lost its "
	    "connection from %s (%s); %u region%s kept for %s", s->serial,
	    s->node, s->peer, err == 0 ? "closed" : strerror(-err),
	    s->nregions, s->nregions == 1 ? "" : "s", gr);
	evtimer_add(s->grace, &tv);
}

/* ---- hello -------------------------------------------------------------- */

/* Moves session s to connection mc: its old connections are closed. */
static void
mem_session_move(struct mem_session *s, struct mem_conn *mc)
{
	while (s->nmc > 0) {
		struct mem_conn *old = s->mcs[--s->nmc];

		log_notice("memory: session %" PRIu64 " of node %s moves from "
		    "%s to %s", s->serial, s->node, old->peer, mc->peer);
		mem_lease_end_all(s, true);
		old->s = NULL;
		if (s->nmc == 0)
			mem.nattached--;
		fam_conn_close(old->c);
	}
	mem_session_attach(s, mc, true);
	mem.n.sessions_resumed++;
	log_notice("memory: session %" PRIu64 " of node %s resumed from %s "
	    "with %u region%s", s->serial, s->node, mc->peer, s->nregions,
	    s->nregions == 1 ? "" : "s");
}

/*
 * Finds the session a hello belongs to: the live one it joins or resumes,
 * or a new one. Returns 0 or -errno (the hello is refused).
 */
static int
mem_session_admit(struct mem_conn *mc, const struct fam_hello *req,
    struct mem_session **out)
{
	struct mem_session *s = NULL;

	if (req->resume != 0)
		s = mem_session_find(req->resume);
	if (s != NULL && strcmp(s->node, req->node) != 0) {
		log_notice("memory: node %s from %s presented the session of "
		    "node %s; starting a new session", req->node, mc->peer,
		    s->node);
		s = NULL;
	}
	if (s != NULL && (req->features & FAM_FEAT_JOIN) && s->nmc > 0) {
		/* One more connection of a live session (background traffic). */
		if (s->nmc == FAM_SESSION_CONNS)
			return -EMFILE;
		mem_session_attach(s, mc, false);
		log_info("memory: session %" PRIu64 " of node %s: connection "
		    "%u from %s", s->serial, s->node, s->nmc, mc->peer);
	} else if (s != NULL) {
		mem_session_move(s, mc);
	} else {
		if (req->resume != 0)
			log_notice("memory: node %s from %s asked to resume a "
			    "session this famd does not have; its regions are "
			    "gone", req->node, mc->peer);
		s = mem_session_new(req, mc->peer);
		if (s == NULL)
			return -ENOMEM;
		if (fam_conn_identity(mc->c) != NULL)
			snprintf(s->owner, sizeof s->owner, "key:%s",
			    fam_conn_identity(mc->c));
		mem_session_attach(s, mc, true);
		log_notice("memory: session %" PRIu64 " of node %s started "
		    "from %s", s->serial, s->node, mc->peer);
	}
	*out = s;
	return 0;
}

/* A hello: a new session, or the resumption of one within its grace. */
int
mem_session_hello(struct fam_conn *c, const struct fam_hello *req,
    struct fam_hello_resp *resp, void *arg)
{
	struct mem_conn *mc = arg;
	struct mem_session *s;
	int err;

	err = mem_session_admit(mc, req, &s);
	if (err < 0) {
		mc->refused = true;
		return err;
	}
	resp->role = FAM_WIRE_ROLE_MEMORY;
	resp->features = 0;
	resp->session = s->token;
	resp->instance = mem.instance;
	snprintf(resp->node, sizeof resp->node, "%s", mem.node);
	return 0;
}

/* ---- leases ------------------------------------------------------------- */

/*
 * Gives h's session a lease on h's region on the session's connection.
 * Returns 0 or -errno (-ENOTCONN while detached).
 */
static int
mem_lease_grant(struct mem_handle *h)
{
	struct mem_region *r = h->r;
	struct mem_session *s = h->s;
	char sz[32];
	int err;

	if (h->lease != NULL)
		return 0;
	if (s->primary == NULL)
		return -ENOTCONN;
	err = fam_conn_expose(s->primary->c, r->mem, r->size,
	    !(r->flags & FAM_RF_SHARED), &h->lease, &h->lease_addr,
	    &h->lease_rkey);
	if (err < 0) {
		h->lease = NULL;
		mem.n.lease_errors++;
		log_warn("memory: cannot lend region %" PRIu32 " (%s) to node %s "
		    "on %s: %s", r->id, mem_bytes(sz, sizeof sz, r->size),
		    s->node, s->primary->peer, strerror(-err));
		return err;
	}
	return 0;
}

/*
 * The session's connection goes: so do its leases. dereg: end them now
 * (the connection stays open), or leave them to the transport (inside
 * its `closed` handler, which releases them afterwards).
 */
void
mem_lease_end_all(struct mem_session *s, bool dereg)
{
	struct mem_handle *h;

	LIST_FOREACH(h, &s->handles, by_session) {
		if (dereg && h->lease != NULL)
			fam_mr_deregister(h->lease);
		h->lease = NULL;
		h->lease_addr = 0;
		h->lease_rkey = 0;
	}
}

/*
 * Leases region r (just created or opened) to session s and fills the
 * answer; when no lease can be had the create or open is undone.
 */
int
mem_lease_lend(struct mem_session *s, struct mem_region *r,
    struct fam_region_info *info)
{
	struct mem_handle *h = mem_handle_find(s, r);
	int err = mem_lease_grant(h);

	if (err < 0) {
		mem_region_free(s, r->id);
		return err;
	}
	mem_region_info(r, h, info);
	return 0;
}

/* Renews session s's lease on region id on its current connection. */
int
mem_lease_renew(struct mem_session *s, uint32_t id,
    struct fam_region_info *info)
{
	struct mem_region *r = mem_region_find(id);
	struct mem_handle *h;
	int err;

	if (r == NULL || (h = mem_handle_find(s, r)) == NULL)
		return -ENOENT;
	err = mem_lease_grant(h);
	if (err < 0)
		return err;
	mem_region_info(r, h, info);
	return 0;
}

/* Drops every handle on r but session s's (FAM_ADOPT_EXCLUSIVE). */
static unsigned
mem_session_revoke_others(struct mem_session *s, struct mem_region *r)
{
	struct mem_handle *h, *next;
	unsigned revoked = 0;

	for (h = LIST_FIRST(&r->handles); h != NULL; h = next) {
		next = LIST_NEXT(h, by_region);
		if (h->s == s)
			continue;
		revoked++;
		mem_handle_drop(h, false, "revoked");
	}
	mem.n.handles_revoked += revoked;
	return revoked;
}

/*
 * Gives session s a handle on region id created by another session, which
 * handed on its key; with FAM_ADOPT_EXCLUSIVE, every other handle goes.
 */
int
mem_session_adopt(struct mem_session *s, const struct fam_region_adopt *req,
    struct fam_region_info *info)
{
	struct mem_region *r = mem_region_find(req->region);
	struct mem_handle *mine;
	unsigned revoked = 0;
	bool fresh = false;
	int err;

	if (req->instance != 0 && req->instance != mem.instance)
		return -ENOENT;
	if (r == NULL)
		return -ENOENT;
	if (r->key != req->key)
		return -EACCES;
	if ((req->flags & FAM_ADOPT_EXCLUSIVE) && (r->flags & FAM_RF_SHARED))
		return -EINVAL;
	mine = mem_handle_find(s, r);
	if (mine == NULL) {
		if (mem_handle_new(s, r) < 0)
			return -ENOMEM;
		mine = mem_handle_find(s, r);
		fresh = true;
	}
	/* The adopter reaches the region with a lease of its own. */
	err = mem_lease_grant(mine);
	if (err < 0) {
		if (fresh)
			(void)mem_handle_drop(mine, true, "no lease");
		return err;
	}
	if (!fresh && !(req->flags & FAM_ADOPT_EXCLUSIVE))
		mine->refs++;
	/*
	 * A host that changed path (or lost its dpu) is never overtaken by an
	 * older write the dpu forwards late: that session's handle goes.
	 */
	if (req->flags & FAM_ADOPT_EXCLUSIVE)
		revoked = mem_session_revoke_others(s, r);
	mem.n.regions_adopted++;
	log_info("memory: region %" PRIu32 " adopted by node %s (session %"
	    PRIu64 ")%s", r->id, s->node, s->serial, revoked > 0 ?
	    ", every other handle revoked" : "");
	mem_region_info(r, mine, info);
	return 0;
}
