/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu-host.c - the dpu's side towards hosts: their connections, sessions
 * and regions, and the requests they send (READ and WRITE checked here and
 * handed to dpu-forward.c; REGION_CREATE, REGION_ADOPT, REGION_FREE,
 * REGION_ADVISE, STATS).
 *
 * Owns (front loop, no lock):
 *   struct dpu_hconn    a host's connection; refcounted (1 while open,
 *                       1 per request served), freed with the last
 *   struct dpu_session  a host's session: a connection joins it when its
 *                       hello is accepted; a host that reconnects with
 *                       resume = token within session_grace gets it and
 *                       its regions back; when the grace runs out, its
 *                       regions are freed on the memory nodes
 *   struct dpu_region   a region as a host knows it: our id for a region
 *                       record on a memory node (struct dpu_mregion,
 *                       shared by the dpu regions that stand for it, so
 *                       that what is cached of it is cached once)
 * Session states: attached (nhc > 0) -> detached (grace running) ->
 * attached again (resumed) or ended.
 *
 * REGION_CREATE is forwarded to a memory node (the one whose instance the
 * host names in `place`, else the next one up in turn) and answered with
 * a region id of this dpu, plus where the region lives on the memory node
 * (instance, id, key), which the host needs to reach it without us.
 * REGION_ADOPT takes a handle on a region a host holds already (it
 * switches to the dpu path, or this dpu restarted).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <event2/event.h>

#include "dpu/dpu-host.h"

/* Returns 64 random bits that are not zero. */
uint64_t
dpu_random64(void)
{
	uint64_t v = 0;

	while (v == 0)
		if (getrandom(&v, sizeof v, 0) != sizeof v)
			v = mono_ns() ^ ((uint64_t)getpid() << 32);
	return v;
}

/* ---- dpu regions (front) ------------------------------------------------ */

/* Finds session s's region id (NULL s: any session's). */
static struct dpu_region *
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
		dpu_mregion_unlist(dpu, m);
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

	session_end(s->dpu, s, "no reconnection within session_grace");
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
	s->dpu = dpu;
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
	struct dpu_reqq loads;
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
	m = dpu_mregion_get(dpu, q->node, q->instance, q->gen, &info, name);
	r = m != NULL ? region_new(dpu, hc->s, m) : NULL;
	if (r == NULL) {
		ctl_region_drop(dpu, q->node, q->instance, info.region);
		if (m != NULL && m->users == 0)
			dpu_mregion_unlist(dpu, m);
		hconn_status(hc, &q->h, -ENOMEM);
		goto out;
	}
	if (q->h.type == FAM_MSG_REGION_CREATE)
		DPU_INC(dpu, regions_created, 1);
	else
		DPU_INC(dpu, regions_adopted, 1);
	TAILQ_INIT(&loads);
	dpu_cache_region_new(dpu, m, &loads);
	dpu_submit_list(dpu, &loads);
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
	q->instance = dpu_node_instance(n);
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
	n = err == 0 ? dpu_node_place(dpu, req->place) : NULL;
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
	else if (err == 0 && dpu_node_state(n) != DN_UP)
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
	struct dpu_reqq loads;
	uint32_t id, advice;
	int err;

	err = proto_get_region_advise(payload, h->len, &id, &advice);
	if (err == -EPROTO) {
		hconn_bad_request(hc, h);
		return;
	}
	if (err == 0 && (r = dpu_region_find(hc->dpu, hc->s, id)) == NULL)
		err = -ENOENT;
	TAILQ_INIT(&loads);
	if (err == 0)
		err = dpu_cache_advise(hc->dpu, r->m, advice, &loads);
	dpu_submit_list(hc->dpu, &loads);
	hconn_status(hc, h, err == -ENOSPC ? 0 : err);
}

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

/*
 * A host's READ or WRITE: checked against its session's regions, then
 * handed to the forwarding with its data.
 */
static void
hconn_rw(struct dpu_hconn *hc, const struct fam_hdr *h,
    const uint8_t *payload)
{
	struct dpu *dpu = hc->dpu;
	struct dpu_region *r;
	struct fam_rw m;
	int err;

	if (h->type == FAM_MSG_READ) {
		DPU_INC(dpu, reads, 1);
		err = proto_get_read(payload, h->len, &m);
	} else {
		DPU_INC(dpu, writes, 1);
		err = proto_get_write_hdr(payload, h->len, &m);
	}
	if (err == -EPROTO) {
		/* The transport checked the lengths: this is a bad field. */
		dpu_forward_refuse(hc, h, EPROTO);
		return;
	}
	if (err < 0) {
		dpu_forward_refuse(hc, h, -err);
		return;
	}
	r = dpu_region_find(dpu, hc->s, m.region);
	if (r == NULL) {
		dpu_forward_refuse(hc, h, ENOENT);
		return;
	}
	if (m.offset > r->m->remote.size || m.len > r->m->remote.size -
	    m.offset) {
		dpu_forward_refuse(hc, h, ERANGE);
		return;
	}
	if (h->type == FAM_MSG_WRITE && (r->m->flags & FAM_RF_SHARED)) {
		dpu_forward_refuse(hc, h, EROFS);
		return;
	}
	dpu_forward_rw(hc, h, r->m, m.offset, m.len, h->type == FAM_MSG_WRITE ?
	    payload + FAM_WRITE_HDR_LEN : NULL);
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
		cpu_latency_busy(&hc->dpu->d->qos, mono_ns());
		hconn_rw(hc, h, payload);
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
	/* A host that asks learns the dynamic cache's entries, to cut at. */
	if ((req->features & FAM_FEAT_PIECE) && dpu->dc.mode != CFG_DYNAMIC_OFF &&
	    dpu->dc.entry_shift >= 12 && dpu->dc.entry_shift <= 30)
		resp->piece_shift = (uint8_t)dpu->dc.entry_shift;
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

/* A new host connection; the listener's callback. */
void
dpu_host_accept(struct fam_listener *l, struct fam_conn *c, const char *peer,
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

/*
 * Drops every host: their connections close, their sessions end (their
 * regions are freed on the memory nodes). Front, as the role stops.
 */
void
dpu_host_stop(struct dpu *dpu)
{
	struct dpu_hconn *hc;
	struct dpu_session *s;

	TAILQ_FOREACH(hc, &dpu->conns, link)
		fam_conn_close(hc->c);
	while ((s = TAILQ_FIRST(&dpu->sessions)) != NULL)
		session_end(dpu, s, "famd stops");
	/* Let the host connections close. */
	for (int i = 0; i < 50 && !TAILQ_EMPTY(&dpu->conns); i++)
		event_base_loop(dpu->base, EVLOOP_NONBLOCK);
}

/* Returns the counters as JSON (status, and a host's STATS). */
json_t *
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
