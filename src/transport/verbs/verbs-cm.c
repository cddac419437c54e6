/* SPDX-License-Identifier: Apache-2.0 */
/*
 * verbs-cm.c - rdma_cm: private data, the QPs' way to UP, accepting and
 * joining, the listener, and connecting.
 */
#include "config.h"

#include "transport/verbs/verbs.h"

/* ---- rdma_cm private data ---------------------------------------------- */


/* Encodes private data. */
void
vb_priv_put(uint8_t out[VB_PRIV_LEN], const struct vb_priv *p)
{
	uint32_t magic = htobe32(FAM_PROTO_MAGIC), status = htobe32(p->status);
	uint64_t cookie = htobe64(p->cookie);

	memset(out, 0, VB_PRIV_LEN);
	memcpy(out, &magic, 4);
	out[4] = p->version;
	out[5] = p->index;
	out[6] = p->nqps;
	memcpy(out + 8, &status, 4);
	memcpy(out + 16, &cookie, 8);
}

/*
 * Decodes private data. Returns 0, -EPROTO (missing, short or not ours) or
 * -EPROTONOSUPPORT (another protocol version).
 */
static int
vb_priv_get(const void *in, size_t len, struct vb_priv *p)
{
	const uint8_t *b = in;
	uint32_t magic, status;
	uint64_t cookie;

	if (in == NULL || len < VB_PRIV_LEN)
		return -EPROTO;
	memcpy(&magic, b, 4);
	if (be32toh(magic) != FAM_PROTO_MAGIC)
		return -EPROTO;
	p->version = b[4];
	p->index = b[5];
	p->nqps = b[6];
	memcpy(&status, b + 8, 4);
	memcpy(&cookie, b + 16, 8);
	p->status = be32toh(status);
	p->cookie = be64toh(cookie);
	if (p->version != FAM_PROTO_VERSION)
		return -EPROTONOSUPPORT;
	return 0;
}

/* ---- rdma_cm ----------------------------------------------------------- */

/* What the loop keeps of an rdma_cm event once it is acknowledged. */
struct vb_cm_event {
	enum rdma_cm_event_type type;
	int status;
	struct rdma_cm_id *id;
	uint8_t priv[64];
	uint8_t priv_len;
	uint8_t initiator_depth;
};

/* Reads one event off a channel, copies what we need, acknowledges it. */
static bool
vb_cm_get(struct rdma_event_channel *ch, struct vb_cm_event *e)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev) != 0)
		return false;
	memset(e, 0, sizeof *e);
	e->type = ev->event;
	e->status = ev->status;
	e->id = ev->id;
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ||
	    ev->event == RDMA_CM_EVENT_ESTABLISHED ||
	    ev->event == RDMA_CM_EVENT_REJECTED) {
		const struct rdma_conn_param *p = &ev->param.conn;

		if (p->private_data != NULL) {
			e->priv_len = p->private_data_len < sizeof e->priv ?
			    p->private_data_len : sizeof e->priv;
			memcpy(e->priv, p->private_data, e->priv_len);
		}
		e->initiator_depth = p->initiator_depth;
	}
	rdma_ack_cm_event(ev);
	return true;
}

/* Active side: starts QP q's way through rdma_cm (from src, when given). */
static int
vb_qp_connect(struct vb_qp *q, struct sockaddr *src)
{
	struct vb_conn *c = q->c;

	if (rdma_create_id(c->cmch, &q->id, q, RDMA_PS_TCP) != 0)
		return -errno;
	if (rdma_resolve_addr(q->id, src, (struct sockaddr *)&c->dst,
	    VB_RESOLVE_MS) != 0)
		return -errno;
	q->state = VQ_ADDR;
	return 0;
}

/*
 * The hello is accepted. Passive side: c no longer counts among those
 * awaiting theirs. Active side: with one QP the connection opens now
 * (returns true); the others join first, from the same local address
 * (device), and the last one up opens it.
 */
bool
vb_hello_done(struct tp_conn *tc, const struct fam_hello_resp *resp)
{
	struct vb_conn *c = vb_conn_of(tc);
	struct sockaddr_storage src;
	char who[160];

	if (!tc->active && c->counted_hello && c->l != NULL) {
		c->l->nhello--;
		c->counted_hello = false;
	}
	if (!tc->active || c->nqps <= 1)
		return true;
	memcpy(&src, rdma_get_local_addr(c->qps[0].id), sizeof src);
	if (src.ss_family == AF_INET)
		((struct sockaddr_in *)&src)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&src)->sin6_port = 0;
	c->tc.state = TPS_JOINING;
	c->joined_resp = *resp;
	for (unsigned i = 1; i < c->nqps; i++) {
		int err = vb_qp_connect(&c->qps[i], (struct sockaddr *)&src);

		if (err < 0) {
			log_notice("verbs: %s: QP %u: %s; closing the "
			    "connection", tp_who(tc, who, sizeof who), i,
			    strerror(-err));
			tp_close(tc, err);
			break;
		}
	}
	return false;
}

/* Active side: a QP is established. */
static void
vb_qp_established(struct vb_conn *c, struct vb_qp *q,
    const struct vb_cm_event *e)
{
	struct vb_priv p;

	q->state = VQ_UP;
	c->nup++;
	if (q->index == 0) {
		if (vb_priv_get(e->priv, e->priv_len, &p) < 0) {
			c->tc.stats.bad_frames++;
			log_notice("verbs: %s accepted us without famd's "
			    "private data; closing", c->tc.peer);
			c->tc.op_err = -EPROTO;
			tp_close(&c->tc, -EPROTO);
			return;
		}
		c->cookie = p.cookie;
		c->tc.state = TPS_HELLO; /* the hello goes: vb_kick() */
		return;
	}
	if (c->tc.state == TPS_JOINING && c->nup == c->nqps)
		tp_conn_opened(&c->tc, &c->joined_resp);
}

/*
 * Lowers the RNR NAK delay our side asks of a sender when no receive is
 * posted (RTS -> RTS): rdma_cm leaves the largest, 655 ms.
 */
static void
vb_qp_tune(struct vb_qp *q)
{
	struct ibv_qp_attr attr = { .min_rnr_timer = VB_MIN_RNR_TIMER };
	int err;

	if (q->qp == NULL)
		return;
	err = ibv_modify_qp(q->qp, &attr, IBV_QP_MIN_RNR_TIMER);
	if (err != 0)
		log_debug("verbs: %s: QP %u: cannot set min_rnr_timer: %s",
		    q->c->tc.peer, q->index, strerror(err));
}

/* Returns the errno an rdma_cm failure event stands for. */
static int
vb_cm_errno(const struct vb_cm_event *e)
{
	struct vb_priv p;

	switch (e->type) {
	case RDMA_CM_EVENT_REJECTED:
		if (vb_priv_get(e->priv, e->priv_len, &p) == 0 &&
		    p.status > 0 && p.status <= FAM_STATUS_MAX)
			return -(int)p.status;
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_ADDR_ERROR:
		return -EHOSTUNREACH;
	case RDMA_CM_EVENT_ROUTE_ERROR:
		return -ENETUNREACH;
	case RDMA_CM_EVENT_UNREACHABLE:
		return -EHOSTUNREACH;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return -ECONNREFUSED;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return -ENODEV;
	default:
		return -EIO;
	}
}

/*
 * One rdma_cm event of a connection's QP. Active QPs go ADDR -> ROUTE ->
 * CONNECT -> UP; passive ones CONNECT (accepted) -> UP; any failure closes
 * the whole connection.
 */
static void
vb_cm_event(struct vb_conn *c, const struct vb_cm_event *e)
{
	struct vb_qp *q = e->id->context;
	struct rdma_conn_param param;
	struct vb_priv p = { 0 };
	uint8_t priv[VB_PRIV_LEN];
	char who[160];
	int err = 0;

	if (c->tc.state >= TPS_DRAINING &&
	    e->type != RDMA_CM_EVENT_DISCONNECTED)
		return;
	switch (e->type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (c->pd == NULL)
			err = vb_conn_setup(c, q->id->verbs, c->nqps);
		if (err == 0 && rdma_resolve_route(q->id, VB_RESOLVE_MS) != 0)
			err = -errno;
		if (err < 0)
			break;
		q->state = VQ_ROUTE;
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		err = vb_qp_create(q);
		if (err < 0)
			break;
		p.version = FAM_PROTO_VERSION;
		p.index = (uint8_t)q->index;
		p.nqps = (uint8_t)c->nqps;
		p.cookie = q->index == 0 ? 0 : c->cookie;
		vb_conn_param(c, &param, priv, &p);
		if (rdma_connect(q->id, &param) != 0) {
			err = -errno;
			break;
		}
		q->state = VQ_CONNECT;
		return;
	case RDMA_CM_EVENT_ESTABLISHED:
		vb_qp_tune(q);
		if (c->tc.active) {
			vb_qp_established(c, q, e);
		} else {
			q->state = VQ_UP;
			c->nup++;
		}
		vb_kick(c); /* what was queued for this QP meanwhile */
		return;
	case RDMA_CM_EVENT_DISCONNECTED:
		q->state = VQ_DOWN;
		if (c->tc.state >= TPS_DRAINING)
			return;
		/* Take in what arrived before the disconnect first. */
		vb_cq_poll(c);
		if (c->tc.state >= TPS_DRAINING)
			return;
		if (c->tc.state == TPS_CLOSING) {
			tp_close(&c->tc, c->tc.final_err);
			return;
		}
		log_debug("verbs: %s: disconnected by the peer",
		    tp_who(&c->tc, who, sizeof who));
		tp_close(&c->tc, c->tc.nops > 0 ? -ECONNRESET : 0);
		return;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		err = vb_cm_errno(e);
		log_info("verbs: %s: QP %u: %s (status %d): %s",
		    tp_who(&c->tc, who, sizeof who), q->index,
		    rdma_event_str(e->type), e->status, strerror(-err));
		c->tc.op_err = err;
		tp_close(&c->tc, err);
		return;
	default:
		log_debug("verbs: %s: QP %u: %s",
		    tp_who(&c->tc, who, sizeof who), q->index,
		    rdma_event_str(e->type));
		return;
	}
	log_info("verbs: %s: QP %u: %s", tp_who(&c->tc, who, sizeof who),
	    q->index, strerror(-err));
	c->tc.op_err = err;
	tp_close(&c->tc, err);
}

/* A connection's rdma_cm channel is readable. */
void
vb_cm_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_conn *c = arg;
	struct vb_cm_event e;

	while (c->tc.state != TPS_CLOSED && vb_cm_get(c->cmch, &e))
		vb_cm_event(c, &e);
	if (c->tc.state != TPS_CLOSED)
		tp_arm_timer(&c->tc);
}

/* Refuses a connect request with a status the peer can read. */
static void
vb_reject(struct rdma_cm_id *id, int status)
{
	struct vb_priv p = { .version = FAM_PROTO_VERSION,
		.status = (uint32_t)status };
	uint8_t priv[VB_PRIV_LEN];

	vb_priv_put(priv, &p);
	(void)rdma_reject(id, priv, VB_PRIV_LEN);
}

/* Accepts QP q of passive connection c (its id migrated, QP created). */
static int
vb_accept_qp(struct vb_conn *c, struct vb_qp *q, uint8_t initiator_depth)
{
	struct rdma_conn_param param;
	struct vb_priv p = { .version = FAM_PROTO_VERSION,
		.index = (uint8_t)q->index, .nqps = (uint8_t)c->nqps,
		.cookie = c->cookie };
	uint8_t priv[VB_PRIV_LEN];
	int err;

	if (rdma_migrate_id(q->id, c->cmch) != 0)
		return -errno;
	err = vb_qp_create(q);
	if (err < 0)
		return err;
	vb_conn_param(c, &param, priv, &p);
	if (initiator_depth < param.responder_resources)
		param.responder_resources = initiator_depth;
	if (rdma_accept(q->id, &param) != 0)
		return -errno;
	q->state = VQ_CONNECT;
	return 0;
}

/* A connect request for QP 0: a new connection. */
static void
vb_on_connect0(struct vb_listener *l, struct rdma_cm_id *id,
    const struct vb_priv *p, const struct vb_cm_event *e, const char *peer)
{
	struct vb_conn *c;
	int err;

	if (p->nqps < 1 || p->nqps > VB_MAX_QPS) {
		log_notice("verbs: refused %s on %s: %u QPs asked", peer,
		    l->tl.addr, p->nqps);
		vb_reject(id, EINVAL);
		rdma_destroy_id(id);
		return;
	}
	if (l->nhello >= VB_MAX_HELLO) {
		log_warn("verbs: refused %s on %s: %u connections await their "
		    "hello", peer, l->tl.addr, l->nhello);
		vb_reject(id, EBUSY);
		rdma_destroy_id(id);
		return;
	}
	c = vb_conn_new(l->tl.evb, &l->tl.opts, false);
	if (c == NULL) {
		vb_reject(id, ENOMEM);
		rdma_destroy_id(id);
		return;
	}
	c->l = l;
	snprintf(c->tc.peer, sizeof c->tc.peer, "%s", peer);
	c->cookie = vb_random64();
	c->qps[0].id = id;
	id->context = &c->qps[0];
	err = vb_conn_channel(c);
	if (err == 0)
		err = vb_conn_setup(c, id->verbs, p->nqps);
	if (err == 0)
		err = vb_accept_qp(c, &c->qps[0], e->initiator_depth);
	if (err < 0) {
		log_warn("verbs: cannot accept %s on %s: %s", peer, l->tl.addr,
		    strerror(-err));
		vb_reject(id, -err > 0 && -err <= FAM_STATUS_MAX ? -err : EIO);
		vb_conn_destroy(c);
		return;
	}
	c->tc.state = TPS_HELLO;
	c->tc.deadline = mono_ns() +
	    (uint64_t)c->tc.opts.hello_timeout_ms * 1000000u;
	c->counted_hello = true;
	l->nhello++;
	log_debug("verbs: connection from %s on %s (%u QPs)", peer, l->tl.addr,
	    c->nqps);
	l->tl.accept(&l->tl.base, &c->tc.base, c->tc.peer, l->tl.arg);
	tp_arm_timer(&c->tc);
}

/* A connect request for QP 1..: joins the open connection it names. */
static void
vb_on_connect_join(struct vb_listener *l, struct rdma_cm_id *id,
    const struct vb_priv *p, const struct vb_cm_event *e, const char *peer)
{
	struct vb_conn *c;
	struct vb_qp *q;
	int err;

	pthread_mutex_lock(&vb_lock);
	LIST_FOREACH(c, &vb_conns, link)
		if (c->tc.evb == l->tl.evb && !c->tc.active && c->l == l &&
		    c->cookie == p->cookie)
			break;
	pthread_mutex_unlock(&vb_lock);
	if (c == NULL || c->tc.state != TPS_OPEN || p->index >= c->nqps ||
	    c->qps[p->index].id != NULL || id->verbs != c->ctx) {
		log_notice("verbs: refused QP %u from %s on %s: it names no "
		    "open connection of its own", p->index, peer, l->tl.addr);
		vb_reject(id, ENOENT);
		rdma_destroy_id(id);
		return;
	}
	q = &c->qps[p->index];
	q->id = id;
	id->context = q;
	err = vb_accept_qp(c, q, e->initiator_depth);
	if (err < 0) {
		char who[160];

		log_notice("verbs: %s: cannot accept QP %u: %s; closing the "
		    "connection", tp_who(&c->tc, who, sizeof who), q->index,
		    strerror(-err));
		vb_reject(id, EIO);
		tp_close(&c->tc, err);
	}
}

/* The listener's rdma_cm channel: connect requests. */
static void
vb_listen_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_listener *l = arg;
	struct vb_cm_event e;

	while (vb_cm_get(l->ch, &e)) {
		struct sockaddr *sa;
		char peer[TP_ADDR_MAX];
		struct vb_priv p;
		int err;

		if (e.type != RDMA_CM_EVENT_CONNECT_REQUEST) {
			if (e.id == l->id)
				log_warn("verbs: listener %s: %s", l->tl.addr,
				    rdma_event_str(e.type));
			continue;
		}
		sa = rdma_get_peer_addr(e.id);
		tp_format_addr(sa, sa->sa_family == AF_INET6 ?
		    sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in),
		    peer, sizeof peer);
		err = vb_priv_get(e.priv, e.priv_len, &p);
		if (err < 0) {
			log_notice("verbs: refused %s on %s: %s", peer,
			    l->tl.addr, err == -EPROTONOSUPPORT ?
			    "another protocol version" :
			    "not a famd connect request");
			vb_reject(e.id, err == -EPROTONOSUPPORT ?
			    EPROTONOSUPPORT : EPROTO);
			rdma_destroy_id(e.id);
			continue;
		}
		if (p.index == 0)
			vb_on_connect0(l, e.id, &p, &e, peer);
		else
			vb_on_connect_join(l, e.id, &p, &e, peer);
	}
}

/* ---- listener ---------------------------------------------------------- */

/* Opens an rdma_cm event channel, non-blocking; NULL with *cause. */
static struct rdma_event_channel *
vb_channel_open(const char *what, char **cause)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();

	if (ch == NULL) {
		*cause = xasprintf("%s: rdma_cm: %s (no RDMA device here? "
		    "/dev/infiniband/rdma_cm needs an RDMA NIC or rdma_rxe)",
		    what, strerror(errno));
		return NULL;
	}
	if (fd_set_nonblock(ch->fd) < 0) {
		*cause = xasprintf("%s: %s", what, strerror(errno));
		rdma_destroy_event_channel(ch);
		return NULL;
	}
	return ch;
}

/* Listens on ss for l with rdma_cm, its device's events watched. */
int
vb_bind(struct tp_listener *tl, const char *addr,
    struct sockaddr_storage *ss, socklen_t sslen, char **cause)
{
	struct vb_listener *l = (struct vb_listener *)tl;
	struct sockaddr *sa;
	int err;

	err = vb_memlock_gate(1, cause);
	if (err < 0)
		return err;
	l->ch = vb_channel_open("listen", cause);
	if (l->ch == NULL)
		return -ENODEV;
	if (rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP) != 0) {
		err = -errno;
		*cause = xasprintf("listen %s: rdma_create_id: %s", addr,
		    strerror(errno));
		goto out_channel;
	}
	if (rdma_bind_addr(l->id, (struct sockaddr *)ss) != 0 ||
	    rdma_listen(l->id, 128) != 0) {
		err = -errno;
		*cause = xasprintf("listen %s: %s", addr, strerror(errno));
		goto out_id;
	}
	sa = rdma_get_local_addr(l->id);
	tp_format_addr(sa, sa->sa_family == AF_INET6 ?
	    sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in), tl->addr,
	    sizeof tl->addr);
	/* Watch the device's events while listening, not only while connected. */
	if (l->id->verbs != NULL)
		l->dev = vb_dev_get(tl->evb, l->id->verbs);
	err = vb_watch(tl->evb, l->ch->fd, vb_listen_cb, l, &l->ev);
	if (err < 0) {
		*cause = xasprintf("listen %s: out of memory", addr);
		goto out_dev;
	}
	return 0;

out_dev:
	vb_dev_put(l->dev);
out_id:
	rdma_destroy_id(l->id);
out_channel:
	rdma_destroy_event_channel(l->ch);
	return err;
}

/* Listens on addr with rdma_cm. */
int
vb_listen(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, fam_accept_fn accept, void *arg,
    struct fam_listener **out, char **cause)
{
	return tp_listen(&vb_conn_ops, base, addr, opts, accept, arg, out,
	    cause);
}

/* Stops listening; accepted connections stay. */
void
vb_listener_free(struct fam_listener *fl)
{
	struct vb_listener *l = (struct vb_listener *)fl;
	struct vb_conn *c;

	pthread_mutex_lock(&vb_lock);
	LIST_FOREACH(c, &vb_conns, link)
		if (c->tc.evb == l->tl.evb && c->l == l) {
			c->l = NULL;
			c->counted_hello = false;
		}
	pthread_mutex_unlock(&vb_lock);
	event_free(l->ev);
	vb_dev_put(l->dev);
	rdma_destroy_id(l->id);
	rdma_destroy_event_channel(l->ch);
	explicit_bzero(l->tl.opts.secret, sizeof l->tl.opts.secret);
	free(l);
}

/* Active side: a connection whose QP 0 starts through rdma_cm to ss. */
int
vb_dial(struct event_base *base, const char *addr,
    const struct sockaddr_storage *ss, socklen_t sslen,
    const struct fam_conn_opts *opts, struct tp_conn **out, char **cause)
{
	struct vb_conn *c;
	int err;

	err = vb_memlock_gate(opts->qps_per_peer > 0 ? opts->qps_per_peer : 1,
	    cause);
	if (err < 0)
		return err;
	c = vb_conn_new(base, opts, true);
	if (c == NULL) {
		*cause = xasprintf("connect %s: out of memory", addr);
		return -ENOMEM;
	}
	snprintf(c->tc.peer, sizeof c->tc.peer, "%s", addr);
	memcpy(&c->dst, ss, sizeof *ss);
	c->nqps = c->tc.opts.qps_per_peer;
	c->cmch = vb_channel_open("connect", cause);
	if (c->cmch == NULL) {
		vb_conn_destroy(c);
		return -ENODEV;
	}
	err = vb_watch(base, c->cmch->fd, vb_cm_cb, c, &c->ev_cm);
	if (err == 0)
		err = vb_qp_connect(&c->qps[0], NULL);
	if (err < 0) {
		*cause = xasprintf("connect %s: %s", addr, strerror(-err));
		vb_conn_destroy(c);
		return err;
	}
	c->tc.state = TPS_CONNECTING;
	*out = &c->tc;
	return 0;
}

/* Connects to addr: rdma_cm for QP 0, the hello queued behind it. */
int
vb_connect(struct event_base *base, const char *addr,
    const struct fam_conn_opts *opts, const struct fam_conn_handlers *h,
    void *arg, struct fam_conn **out, char **cause)
{
	return tp_connect(&vb_conn_ops, base, addr, opts, h, arg, out, cause);
}
