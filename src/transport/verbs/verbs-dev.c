/* SPDX-License-Identifier: Apache-2.0 */
/*
 * verbs-dev.c - RDMA devices and their asynchronous events, and the memlock
 * limit: one struct vb_dev per device and loop, shared lists under vb_lock.
 */
#include "config.h"

#include "transport/verbs/verbs.h"

/* What every loop shares, under vb_lock (lock order: verbs.h). */
pthread_mutex_t vb_lock = PTHREAD_MUTEX_INITIALIZER;
struct vb_dev_list vb_devs = LIST_HEAD_INITIALIZER(vb_devs);
struct vb_conn_list vb_conns = LIST_HEAD_INITIALIZER(vb_conns);
/* The memlock limit is low: said once, by whichever loop saw it first. */
static atomic_bool vb_memlock_warned;

/* ---- limits and devices ------------------------------------------------ */

/* Returns true when the process holds CAP_IPC_LOCK (no memlock limit). */
static bool
vb_has_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = {
		.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data) < 0)
		return false;
	return (data[CAP_IPC_LOCK / 32].effective &
	    (1u << (CAP_IPC_LOCK % 32))) != 0;
}

/* Checks that bytes may be pinned; see transport.h. */
int
fam_memlock_check(uint64_t bytes, char **cause)
{
	struct rlimit rl;
	char lim[32], need[32];

	if (getrlimit(RLIMIT_MEMLOCK, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	if ((uint64_t)rl.rlim_cur >= bytes || vb_has_ipc_lock())
		return 0;
	*cause = xasprintf("RLIMIT_MEMLOCK is %s but the verbs transport needs "
	    "to pin %s (registered memory cannot be swapped): raise it "
	    "(LimitMEMLOCK=infinity in famd.service, 'ulimit -l unlimited', "
	    "or memlock in /etc/security/limits.conf)",
	    fmt_bytes(lim, sizeof lim, rl.rlim_cur),
	    fmt_bytes(need, sizeof need, bytes));
	return -ENOMEM;
}

/* Bytes one connection of nqps QPs pins for its own buffers. */
static uint64_t
vb_conn_pinned(unsigned nqps)
{
	return (uint64_t)VB_RECV_BUFS(nqps) * VB_MSG_BUF +
	    (uint64_t)VB_SEND_BUFS * VB_MSG_BUF + (uint64_t)VB_SLABS * VB_SLAB;
}

/*
 * Checks the memlock limit before a listener or connection: an error when
 * not even one connection fits, a warning (once) when few do.
 */
int
vb_memlock_gate(unsigned nqps, char **cause)
{
	uint64_t one = vb_conn_pinned(nqps);
	char *why = NULL;
	int err;

	err = fam_memlock_check(one, cause);
	if (err < 0)
		return err;
	if (!atomic_load(&vb_memlock_warned) &&
	    fam_memlock_check(one * 16, &why) < 0 &&
	    !atomic_exchange(&vb_memlock_warned, true)) {
		log_warn("verbs: %s for 16 connections; memory registrations "
		    "beyond the limit will fail", why);
	}
	free(why);
	return 0;
}

/* Returns a random 64-bit value (not zero). */
uint64_t
vb_random64(void)
{
	uint64_t v = 0;

	while (v == 0)
		if (getrandom(&v, sizeof v, 0) != sizeof v)
			v = mono_ns() ^ ((uint64_t)getpid() << 40);
	return v;
}

/*
 * Watches fd for reading on loop evb (persistent): *out, or -ENOMEM with
 * nothing left.
 */
int
vb_watch(struct event_base *evb, int fd, event_callback_fn cb, void *arg,
    struct event **out)
{
	*out = event_new(evb, fd, EV_READ | EV_PERSIST, cb, arg);
	if (*out != NULL && event_add(*out, NULL) == 0)
		return 0;
	if (*out != NULL)
		event_free(*out);
	*out = NULL;
	return -ENOMEM;
}

/* Returns true for the events that name a QP, CQ or SRQ of a connection. */
static bool
vb_async_names_conn(enum ibv_event_type type)
{
	switch (type) {
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_CQ_ERR:
	case IBV_EVENT_SRQ_ERR:
		return true;
	default:
		return false;
	}
}

/*
 * Closes c with err for an asynchronous event of its device: one naming
 * it (QP qp, its CQ or SRQ), or its port (port; 0: any) or device gone.
 * c's loop.
 */
static void
vb_async_close(struct vb_conn *c, enum ibv_event_type type, unsigned qp,
    uint8_t port, int err)
{
	const char *name = ibv_event_type_str(type);
	char who[160];

	if (vb_async_names_conn(type)) {
		if (c->tc.state >= TPS_DRAINING)
			return;
		c->tc.stats.completion_errors++;
		if (type == IBV_EVENT_CQ_ERR || type == IBV_EVENT_SRQ_ERR)
			log_notice("verbs: %s: %s; closing the connection",
			    tp_who(&c->tc, who, sizeof who), name);
		else
			log_notice("verbs: %s: QP %u: %s; closing the "
			    "connection", tp_who(&c->tc, who, sizeof who), qp,
			    name);
	} else {
		if (port != 0 && (c->qps[0].id == NULL ||
		    c->qps[0].id->port_num != port))
			return;
		c->tc.stats.completion_errors++;
	}
	tp_close(&c->tc, err);
}

/*
 * An asynchronous event read on dev's loop closes c: at once when c is
 * that loop's, else through c's own loop (ev_async). Under vb_lock.
 */
static void
vb_async_post(struct vb_dev *dev, struct vb_conn *c, enum ibv_event_type type,
    unsigned qp, uint8_t port, int err)
{
	if (c->tc.evb == dev->evb) {
		vb_async_close(c, type, qp, port, err);
		return;
	}
	if (c->async_err == 0) {
		c->async_err = err;
		c->async_type = type;
		c->async_qp = qp;
		c->async_port = port;
	} else if (port == 0)
		c->async_port = 0;
	event_active(c->ev_async, EV_READ, 0);
}

/* An event another loop read for c: c's loop closes it. */
void
vb_async_conn_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_conn *c = arg;
	enum ibv_event_type type;
	unsigned qp;
	uint8_t port;
	int err;

	pthread_mutex_lock(&vb_lock);
	err = c->async_err;
	type = c->async_type;
	qp = c->async_qp;
	port = c->async_port;
	c->async_err = 0;
	pthread_mutex_unlock(&vb_lock);
	if (err != 0)
		vb_async_close(c, type, qp, port, err);
}

/* Closes every connection on dev's device (port 0: any port) with err. */
static void
vb_dev_close_conns(struct vb_dev *dev, enum ibv_event_type type, uint8_t port,
    int err)
{
	struct vb_conn *c;

	pthread_mutex_lock(&vb_lock);
	LIST_FOREACH(c, &vb_conns, link)
		if (c->ctx == dev->ctx)
			vb_async_post(dev, c, type, 0, port, err);
	pthread_mutex_unlock(&vb_lock);
}

/*
 * Returns the connection owning a verbs object, checking it still lives.
 * Under vb_lock.
 */
static struct vb_conn *
vb_conn_find(struct vb_conn *want)
{
	struct vb_conn *c;

	LIST_FOREACH(c, &vb_conns, link)
		if (c == want)
			return c;
	return NULL;
}

/*
 * Reads a device's asynchronous events: QP, CQ, SRQ, port, device. The
 * objects an event names live until it is acknowledged (destroying them
 * waits for that), so qp_context and the like may be read until then.
 */
static void
vb_async_cb(evutil_socket_t fd, short what, void *arg)
{
	struct vb_dev *dev = arg;
	struct ibv_async_event ev;
	struct vb_conn *c;
	struct vb_qp *q;

	while (ibv_get_async_event(dev->ctx, &ev) == 0) {
		switch (ev.event_type) {
		case IBV_EVENT_QP_FATAL:
		case IBV_EVENT_QP_REQ_ERR:
		case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_PATH_MIG_ERR:
			q = ev.element.qp->qp_context;
			pthread_mutex_lock(&vb_lock);
			c = q != NULL ? vb_conn_find(q->c) : NULL;
			if (c != NULL)
				vb_async_post(dev, c, ev.event_type, q->index,
				    0, -EIO);
			pthread_mutex_unlock(&vb_lock);
			break;
		case IBV_EVENT_CQ_ERR:
		case IBV_EVENT_SRQ_ERR:
			pthread_mutex_lock(&vb_lock);
			c = vb_conn_find(ev.event_type == IBV_EVENT_CQ_ERR ?
			    ev.element.cq->cq_context :
			    ev.element.srq->srq_context);
			if (c != NULL)
				vb_async_post(dev, c, ev.event_type, 0, 0, -EIO);
			pthread_mutex_unlock(&vb_lock);
			break;
		case IBV_EVENT_PORT_ERR: {
			struct ibv_port_attr pa;

			/* Read late (a quick bounce): the QPs may have lived. */
			if (ibv_query_port(dev->ctx, (uint8_t)ev.element.port_num,
			    &pa) == 0 && pa.state == IBV_PORT_ACTIVE) {
				log_info("verbs: %s port %d went down and is up "
				    "again", ibv_get_device_name(dev->ctx->device),
				    ev.element.port_num);
				break;
			}
			log_warn("verbs: %s port %d is down; closing its "
			    "connections", ibv_get_device_name(dev->ctx->device),
			    ev.element.port_num);
			vb_dev_close_conns(dev, ev.event_type,
			    (uint8_t)ev.element.port_num, -ENETDOWN);
			break;
		}
		case IBV_EVENT_DEVICE_FATAL:
			log_err("verbs: %s: fatal device error; closing every "
			    "connection on it",
			    ibv_get_device_name(dev->ctx->device));
			vb_dev_close_conns(dev, ev.event_type, 0, -ENODEV);
			break;
		case IBV_EVENT_QP_LAST_WQE_REACHED:
		case IBV_EVENT_SQ_DRAINED:
		case IBV_EVENT_COMM_EST:
		case IBV_EVENT_SRQ_LIMIT_REACHED:
			log_debug("verbs: %s: %s",
			    ibv_get_device_name(dev->ctx->device),
			    ibv_event_type_str(ev.event_type));
			break;
		default:
			log_info("verbs: %s: %s",
			    ibv_get_device_name(dev->ctx->device),
			    ibv_event_type_str(ev.event_type));
			break;
		}
		ibv_ack_async_event(&ev);
	}
}

/*
 * Takes a reference on the device of ctx for loop evb, which watches its
 * async events (each loop using a device watches it: whichever reads an
 * event handles it).
 */
struct vb_dev *
vb_dev_get(struct event_base *evb, struct ibv_context *ctx)
{
	struct ibv_device_attr attr;
	struct vb_dev *dev;
	bool first = true;

	pthread_mutex_lock(&vb_lock);
	LIST_FOREACH(dev, &vb_devs, link) {
		if (dev->ctx != ctx)
			continue;
		if (dev->evb == evb) {
			dev->refs++;
			pthread_mutex_unlock(&vb_lock);
			return dev;
		}
		first = false;
	}
	dev = calloc(1, sizeof *dev);
	if (dev == NULL)
		goto out_unlock;
	if (ibv_query_device(ctx, &attr) != 0)
		goto out_free;
	dev->ctx = ctx;
	dev->evb = evb;
	dev->refs = 1;
	dev->rd_atom = attr.max_qp_rd_atom < attr.max_qp_init_rd_atom ?
	    attr.max_qp_rd_atom : attr.max_qp_init_rd_atom;
	if (dev->rd_atom > VB_RD_ATOMIC)
		dev->rd_atom = VB_RD_ATOMIC;
	if (dev->rd_atom < 1)
		dev->rd_atom = 1;
	dev->max_cqe = attr.max_cqe;
	if (first && fd_set_nonblock(ctx->async_fd) == 0) {
		struct ibv_async_event ev;

		/* Events from before anyone here watched: nothing of ours. */
		while (ibv_get_async_event(ctx, &ev) == 0) {
			log_debug("verbs: %s: earlier %s ignored",
			    ibv_get_device_name(ctx->device),
			    ibv_event_type_str(ev.event_type));
			ibv_ack_async_event(&ev);
		}
	}
	if (fd_set_nonblock(ctx->async_fd) < 0 ||
	    vb_watch(evb, ctx->async_fd, vb_async_cb, dev, &dev->ev) < 0)
		goto out_free;
	LIST_INSERT_HEAD(&vb_devs, dev, link);
	pthread_mutex_unlock(&vb_lock);
	return dev;

out_free:
	free(dev);
	dev = NULL;
out_unlock:
	pthread_mutex_unlock(&vb_lock);
	return dev;
}

/* Drops a device reference (on the loop that took it). */
void
vb_dev_put(struct vb_dev *dev)
{
	bool last;

	if (dev == NULL)
		return;
	pthread_mutex_lock(&vb_lock);
	last = --dev->refs == 0;
	if (last)
		LIST_REMOVE(dev, link);
	pthread_mutex_unlock(&vb_lock);
	if (!last)
		return;
	event_free(dev->ev);
	free(dev);
}

