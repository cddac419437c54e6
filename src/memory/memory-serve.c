/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memory-serve.c - the memory role's request service.
 *
 * Owns: peers' connections (struct mem_conn) from accept to close, and the
 * handlers the transport calls on them: hello (memory-session.c), one
 * small handler per request kind, READ and WRITE through resolve/release
 * (a transfer holds its region), and the role's counters as JSON.
 * A request before the hello is accepted is answered EACCES; a malformed
 * one EPROTO, and its connection is closed. Calls down into
 * memory-session.c and memory-region.c only.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <event2/event.h>

#include "memory/memory.h"

/* Prepares the connection list. */
void
mem_serve_init(void)
{
	TAILQ_INIT(&mem.conns);
	TAILQ_INIT(&mem.preauth);
	mem.nconns = mem.npreauth = 0;
}

/* Returns the cumulative and current counters as JSON. */
json_t *
mem_serve_counters_json(void)
{
	const struct mem_counters *n = &mem.n;

	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
	    "s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
	    "s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
	    "reads", (json_int_t)n->reads,
	    "writes", (json_int_t)n->writes,
	    "bytes_read", (json_int_t)n->bytes_read,
	    "bytes_written", (json_int_t)n->bytes_written,
	    "rw_errors", (json_int_t)n->rw_errors,
	    "regions", (json_int_t)mem.nregions,
	    "bytes_reserved", (json_int_t)mem.reserved,
	    "regions_created", (json_int_t)n->regions_created,
	    "regions_opened", (json_int_t)n->regions_opened,
	    "regions_freed", (json_int_t)n->regions_freed,
	    "regions_adopted", (json_int_t)n->regions_adopted,
	    "handles_revoked", (json_int_t)n->handles_revoked,
	    "adopt_errors", (json_int_t)n->adopt_errors,
	    "create_errors", (json_int_t)n->create_errors,
	    "free_errors", (json_int_t)n->free_errors,
	    "lease_errors", (json_int_t)n->lease_errors,
	    "stats_requests", (json_int_t)n->stats_requests,
	    "connections", (json_int_t)n->connections,
	    "hello_refusals", (json_int_t)n->hello_refusals,
	    "bad_frames", (json_int_t)n->bad_frames,
	    "timeouts", (json_int_t)n->timeouts,
	    "input_pauses", (json_int_t)n->input_pauses,
	    "completion_errors", (json_int_t)n->completion_errors,
	    "sessions_connected", (json_int_t)mem.nattached,
	    "sessions_detached", (json_int_t)(mem.nsessions - mem.nattached),
	    "sessions_started", (json_int_t)n->sessions_started,
	    "sessions_resumed", (json_int_t)n->sessions_resumed,
	    "sessions_ended", (json_int_t)n->sessions_ended,
	    "quota_refusals", (json_int_t)n->quota_refusals,
	    "discards", (json_int_t)n->discards,
	    "discard_bytes", (json_int_t)n->discard_bytes,
	    "sparse_refusals", (json_int_t)n->sparse_refusals,
	    "connections_open", (json_int_t)mem.nconns,
	    "connections_unauthenticated", (json_int_t)mem.npreauth,
	    "preauth_evictions", (json_int_t)n->preauth_evictions,
	    "eacces_closes", (json_int_t)n->eacces_closes,
	    "crc_errors", (json_int_t)n->crc_errors);
}

/* Appends each connection still in its hello to a status's peers. */
void
mem_serve_status(json_t *peers)
{
	struct mem_conn *mc;

	TAILQ_FOREACH(mc, &mem.conns, link)
		if (mc->s == NULL)
			json_array_append_new(peers, json_pack("{s:s,s:s,s:s,"
			    "s:I,s:i,s:I,s:I,s:I}",
			    "node", "-",
			    "address", mc->peer,
			    "state", "hello",
			    "session", (json_int_t)0,
			    "regions", 0,
			    "bytes", (json_int_t)0,
			    "bytes_read", (json_int_t)0,
			    "bytes_written", (json_int_t)0));
}

/* ---- replies ------------------------------------------------------------ */

/* Closes a connection once its last reply has gone out. */
static void
mem_close_after_reply(void *arg)
{
	struct mem_conn *mc = arg;

	fam_conn_close(mc->c);
}

/* A malformed payload: answered with EPROTO, counted, the peer dropped. */
static void
mem_bad_request(struct mem_conn *mc, const struct fam_hdr *h)
{
	mem.n.bad_frames++;
	log_notice("memory: %s (node %s): malformed %s request; closing the "
	    "connection", mc->peer, mc->s != NULL ? mc->s->node : "?",
	    proto_type_name(h->type));
	if (fam_conn_reply(mc->c, h, EPROTO, NULL, 0, false,
	    mem_close_after_reply, mc) < 0)
		fam_conn_close(mc->c);
}

/* Answers a request with a status (0 or -errno) and no payload. */
static void
mem_reply_status(struct mem_conn *mc, const struct fam_hdr *h, int err)
{
	(void)fam_conn_reply(mc->c, h, -err, NULL, 0, false, NULL, NULL);
}

/* Answers a request with a region's info. */
static void
mem_reply_info(struct mem_conn *mc, const struct fam_hdr *h,
    const struct fam_region_info *info)
{
	uint8_t out[FAM_REGION_INFO_LEN];

	proto_put_region_info(out, info);
	(void)fam_conn_reply(mc->c, h, 0, out, sizeof out, true, NULL, NULL);
}

/* ---- requests ----------------------------------------------------------- */

/* REGION_CREATE: a new region (or one opened by name), leased. */
static void
mem_serve_create(struct mem_conn *mc, const struct fam_hdr *h,
    const uint8_t *payload)
{
	struct fam_region_create *req = malloc(sizeof *req);
	struct fam_region_info info;
	struct mem_region *r;
	int err;

	if (req == NULL) {
		mem_reply_status(mc, h, -ENOMEM);
		return;
	}
	err = proto_get_region_create(payload, h->len, req);
	if (err == -EPROTO) {
		free(req);
		mem_bad_request(mc, h);
		return;
	}
	if (err == 0)
		err = mem_region_create(mc->s, req, &r);
	if (err == 0)
		err = mem_lease_lend(mc->s, r, &info);
	free(req);
	if (err < 0) {
		mem.n.create_errors++;
		mem_reply_status(mc, h, err);
		return;
	}
	mem_reply_info(mc, h, &info);
}

/*
 * REGION_ADOPT: a handle on a region whose key the peer was given. A peer
 * (but a dpu, which adopts for many hosts) that presents FAM_EACCES_MAX
 * wrong keys is disconnected.
 */
static void
mem_serve_adopt(struct mem_conn *mc, const struct fam_hdr *h,
    const uint8_t *payload)
{
	struct fam_region_adopt ad;
	struct fam_region_info info;
	int err;

	err = proto_get_region_adopt(payload, h->len, &ad);
	if (err == -EPROTO) {
		mem_bad_request(mc, h);
		return;
	}
	if (err == 0)
		err = mem_session_adopt(mc->s, &ad, &info);
	if (err == -EACCES && ++mc->eacces >= FAM_EACCES_MAX &&
	    mc->s->role != FAM_WIRE_ROLE_DPU) {
		/* A peer guessing keys: answered, then cut off. */
		mem.n.adopt_errors++;
		mem.n.eacces_closes++;
		log_notice("memory: %s (node %s): %u wrong region keys; closing "
		    "the connection", mc->peer, mc->s->node, mc->eacces);
		if (fam_conn_reply(mc->c, h, EACCES, NULL, 0, false,
		    mem_close_after_reply, mc) < 0)
			fam_conn_close(mc->c);
		return;
	}
	if (err < 0) {
		mem.n.adopt_errors++;
		mem_reply_status(mc, h, err);
		return;
	}
	mem_reply_info(mc, h, &info);
}

/* REGION_ADVISE: checked, nothing to do (the region is in DRAM). */
static void
mem_serve_advise(struct mem_conn *mc, const struct fam_hdr *h,
    const uint8_t *payload)
{
	struct mem_region *r;
	uint32_t id, advice;
	int err;

	err = proto_get_region_advise(payload, h->len, &id, &advice);
	if (err == -EPROTO) {
		mem_bad_request(mc, h);
		return;
	}
	if (err == 0 && ((r = mem_region_find(id)) == NULL ||
	    mem_handle_find(mc->s, r) == NULL))
		err = -ENOENT;
	mem_reply_status(mc, h, err);
}

/* Tells whether a verbs lease has r's memory registered (pinned). */
static bool
region_leased(const struct mem_region *r)
{
	const struct mem_handle *hd;

	if (mem.opts.kind != FAM_TP_VERBS)
		return false;
	LIST_FOREACH(hd, &r->handles, by_region)
		if (hd->lease != NULL)
			return true;
	return false;
}

/*
 * REGION_DISCARD: the sender will not read the range before writing it:
 * its whole pages are released (given back to the kernel, read as zeros
 * later), unless a verbs lease has the region's memory pinned, where
 * releasing would part the registration from the mapping.
 */
static void
mem_serve_discard(struct mem_conn *mc, const struct fam_hdr *h,
    const uint8_t *payload)
{
	struct fam_region_discard d;
	struct mem_region *r = NULL;
	uint64_t lo, hi;
	int err;

	err = proto_get_region_discard(payload, h->len, &d);
	if (err == -EPROTO) {
		mem_bad_request(mc, h);
		return;
	}
	if (err == 0 && ((r = mem_region_find(d.region)) == NULL ||
	    mem_handle_find(mc->s, r) == NULL))
		err = -ENOENT;
	if (err == 0 && ((r->flags & FAM_RF_FILE) || d.offset > r->size ||
	    d.len > r->size - d.offset))
		err = -EINVAL;
	if (err == 0) {
		mem.n.discards++;
		lo = (d.offset + mem.pagesize - 1) & ~(mem.pagesize - 1);
		hi = (d.offset + d.len) & ~(mem.pagesize - 1);
		if (lo < hi && !region_leased(r) &&
		    madvise((uint8_t *)r->mem + lo, hi - lo,
		    MADV_DONTNEED) == 0) {
			mem.n.discard_bytes += hi - lo;
			mem_region_uncharge(r, lo, hi);
		}
	}
	mem_reply_status(mc, h, err);
}

/* REGION_FREE: the session's use of a region ends. */
static void
mem_serve_free(struct mem_conn *mc, const struct fam_hdr *h,
    const uint8_t *payload)
{
	uint32_t id;
	int err;

	if (proto_get_region_free(payload, h->len, &id) < 0) {
		mem_bad_request(mc, h);
		return;
	}
	err = mem_region_free(mc->s, id);
	if (err < 0)
		mem.n.free_errors++;
	mem_reply_status(mc, h, err);
}

/* REGION_LEASE: a new lease on the session's current connection. */
static void
mem_serve_lease(struct mem_conn *mc, const struct fam_hdr *h,
    const uint8_t *payload)
{
	struct fam_region_info info;
	uint32_t id;
	int err;

	if (proto_get_region_free(payload, h->len, &id) < 0) {
		mem_bad_request(mc, h);
		return;
	}
	err = mem_lease_renew(mc->s, id, &info);
	if (err < 0) {
		mem_reply_status(mc, h, err);
		return;
	}
	mem_reply_info(mc, h, &info);
}

/* STATS: the counters as JSON text. */
static void
mem_serve_stats(struct mem_conn *mc, const struct fam_hdr *h,
    const uint8_t *payload)
{
	json_t *j = mem_serve_counters_json();
	char *text = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	mem.n.stats_requests++;
	if (text == NULL) {
		mem_reply_status(mc, h, -ENOMEM);
		return;
	}
	(void)fam_conn_reply(mc->c, h, 0, text, (uint32_t)strlen(text), true,
	    NULL, NULL);
	free(text);
}

typedef void (*mem_serve_fn)(struct mem_conn *mc, const struct fam_hdr *h,
    const uint8_t *payload);

/* The handler of each request kind; READ and WRITE go through resolve. */
static const mem_serve_fn mem_serve_table[FAM_MSG_TYPE_MAX + 1] = {
	[FAM_MSG_REGION_CREATE] = mem_serve_create,
	[FAM_MSG_REGION_ADOPT] = mem_serve_adopt,
	[FAM_MSG_REGION_ADVISE] = mem_serve_advise,
	[FAM_MSG_REGION_DISCARD] = mem_serve_discard,
	[FAM_MSG_REGION_FREE] = mem_serve_free,
	[FAM_MSG_REGION_LEASE] = mem_serve_lease,
	[FAM_MSG_STATS] = mem_serve_stats,
};

/* Dispatches a request of an accepted peer to its kind's handler. */
static void
mem_serve_request(struct fam_conn *c, const struct fam_hdr *h,
    const uint8_t *payload, void *arg)
{
	struct mem_conn *mc = arg;

	if (mc->s == NULL) {
		mem_reply_status(mc, h, -EACCES);
		return;
	}
	if (h->type > FAM_MSG_TYPE_MAX || mem_serve_table[h->type] == NULL) {
		mem_reply_status(mc, h, -EOPNOTSUPP);
		return;
	}
	mem_serve_table[h->type](mc, h, payload);
}

/* ---- reads and writes --------------------------------------------------- */

/* Maps a READ or WRITE to region memory, holding the region. */
static int
mem_serve_resolve(void *arg, uint32_t region, uint64_t off, uint32_t len,
    bool write, void **m, void **hold)
{
	struct mem_conn *mc = arg;
	struct mem_region *r;
	int err;

	cpu_latency_busy(&mem.d->qos, mono_ns());
	if (write)
		mem.n.writes++;
	else
		mem.n.reads++;
	err = mem_region_access(mc->s, region, off, len, write, &r);
	if (err < 0) {
		mem.n.rw_errors++;
		return err;
	}
	mem_region_hold(r);
	*m = (uint8_t *)r->mem + off;
	*hold = r;
	return 0;
}

/* A transfer is over: counts its bytes, lets go of the region. */
static void
mem_serve_release(void *arg, void *hold, bool write, uint32_t len)
{
	struct mem_conn *mc = arg;
	struct mem_region *r = hold;
	struct mem_session *s = mc->s;

	if (write) {
		mem.n.bytes_written += len;
		r->writes++;
		r->bytes_written += len;
		if (s != NULL) {
			s->writes++;
			s->bytes_written += len;
		}
	} else {
		mem.n.bytes_read += len;
		r->reads++;
		r->bytes_read += len;
		if (s != NULL) {
			s->reads++;
			s->bytes_read += len;
		}
	}
	mem_region_let_go(r);
}

/* ---- connections -------------------------------------------------------- */

/* A connection is gone: its session waits for the grace; counts why. */
static void
mem_serve_closed(struct fam_conn *c, int err, void *arg)
{
	struct mem_conn *mc = arg;
	const struct fam_conn_stats *st = fam_conn_stats(c);

	mem.n.bad_frames += st->bad_frames;
	mem.n.input_pauses += st->input_pauses;
	if (err == -ETIMEDOUT)
		mem.n.timeouts++;
	mem.n.completion_errors += st->completion_errors;
	mem.n.crc_errors += st->crc_errors;
	mem_serve_proved(mc);
	if (mc->s != NULL) {
		if (mc->s->primary == mc)
			mem_lease_end_all(mc->s, false);
		mem_session_detach(mc->s, mc, err);
	}
	else if (mc->refused || err == -EACCES || err == -EPROTONOSUPPORT)
		mem.n.hello_refusals++;
	log_msg(mc->s != NULL || mc->refused ? LOG_INFO : LOG_DEBUG,
	    "memory: connection from %s closed%s%s", mc->peer,
	    err != 0 ? ": " : "", err != 0 ? strerror(-err) : "");
	TAILQ_REMOVE(&mem.conns, mc, link);
	mem.nconns--;
	free(mc);
}

/* A peer proved the secret: its hello goes to its session. */
static int
mem_serve_hello(struct fam_conn *c, const struct fam_hello *req,
    struct fam_hello_resp *resp, void *arg)
{
	struct mem_conn *mc = arg;

	mem_serve_proved(mc);
	return mem_session_hello(c, req, resp, arg);
}

static const struct fam_conn_handlers mem_handlers = {
	.hello = mem_serve_hello,
	.request = mem_serve_request,
	.resolve = mem_serve_resolve,
	.release = mem_serve_release,
	.closed = mem_serve_closed,
};

/*
 * A connection proved the secret (or closed): it no longer counts among
 * the unauthenticated ones.
 */
void
mem_serve_proved(struct mem_conn *mc)
{
	if (!mc->preauth)
		return;
	mc->preauth = false;
	TAILQ_REMOVE(&mem.preauth, mc, plink);
	mem.npreauth--;
}

/*
 * Makes room for a new connection: at max_unauthenticated connections
 * that proved nothing (or 4096 in all), the oldest of those is closed.
 * Returns false when there is no room (every connection is a peer's).
 */
static bool
mem_serve_room(const char *peer)
{
	unsigned max = (unsigned)cfg_int(mem.d->cfg,
	    CFG_MEMORY_MAX_UNAUTHENTICATED);
	struct mem_conn *old;
	uint64_t now;

	if (mem.npreauth < max && mem.nconns < MEM_MAX_CONNS)
		return true;
	old = TAILQ_FIRST(&mem.preauth);
	if (old == NULL)
		return false;
	mem_serve_proved(old);
	mem.n.preauth_evictions++;
	now = mono_ns();
	if (now - mem.evict_logged >= 1000000000u) {
		mem.evict_logged = now;
		log_warn("memory: %u connections have not proved the secret "
		    "(max_unauthenticated %u): closing the oldest (%s) for %s; "
		    "%" PRIu64 " so closed", max, max, old->peer, peer,
		    mem.n.preauth_evictions);
	}
	fam_conn_close(old->c);
	return true;
}

/* A new connection: tracked until it closes. */
void
mem_serve_accept(struct fam_listener *l, struct fam_conn *c,
    const char *peer, void *arg)
{
	struct mem_conn *mc;

	if (!mem_serve_room(peer)) {
		log_warn("memory: refusing %s: %u connections open", peer,
		    mem.nconns);
		fam_conn_close(c);
		return;
	}
	mc = calloc(1, sizeof *mc);
	if (mc == NULL) {
		fam_conn_close(c);
		return;
	}
	mc->c = c;
	snprintf(mc->peer, sizeof mc->peer, "%s", peer);
	TAILQ_INSERT_TAIL(&mem.conns, mc, link);
	mem.nconns++;
	mc->preauth = true;
	TAILQ_INSERT_TAIL(&mem.preauth, mc, plink);
	mem.npreauth++;
	mem.n.connections++;
	fam_conn_set_handlers(c, &mem_handlers, mc);
	log_debug("memory: connection from %s", peer);
}

/* Closes every connection and runs the loop until they are gone. */
void
mem_serve_close_all(void)
{
	struct mem_conn *mc;

	TAILQ_FOREACH(mc, &mem.conns, link)
		fam_conn_close(mc->c);
	/* Connections are torn down from the loop: let it run that. */
	for (int i = 0; i < 100 && !TAILQ_EMPTY(&mem.conns); i++)
		event_base_loop(mem.d->base, EVLOOP_NONBLOCK);
	if (!TAILQ_EMPTY(&mem.conns))
		log_warn("memory: %u connections did not close", mem.nconns);
}
