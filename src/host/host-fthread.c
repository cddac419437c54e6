/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-fthread.c - fault-service threads: chunk reads off the control loop.
 *
 * With [host] fault_threads above 1, the host famd starts that many less
 * one threads. Each has its own event loop and its own connection to each
 * memory node, joined to the host's session there (as the background
 * connection joins it), and receives the chunk reads the control loop
 * hands it: the socket's receive, the copy of every byte into its staging
 * slot or the arena, is the thread's, not the control loop's. Everything
 * else stays on the control loop: which chunk, which frame, which route,
 * the install, the wake-up, every failure's handling
 * (src/host/README.md, "More than one core on faults").
 *
 * Owns: struct host_fthreads (h->ft) and its threads: each thread's event
 * base, connections and counters; the two rings between the control loop
 * and each thread, and their eventfds.
 * Locks: none. Each ring has one producer and one consumer: the producer
 * writes a slot, then publishes it with a release store of the tail; the
 * consumer reads the tail with acquire, the slot, then frees it with a
 * release store of the head. An eventfd wakes the consumer. The data a
 * thread received is published by its completion's release store. What
 * the control loop keeps of a thread's connections (`cl_*`) is the
 * control loop's; what the thread keeps (`conn`) is the thread's; the
 * counters are relaxed atomics that status sums.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>
#include <jansson.h>

#include "host/host.h"

#define FT_RING      8192u /* slots per ring: more than reads in flight */
#define FT_RETRY_MS  1000u /* a thread's lost connection tried again */
#define FT_BACKOFF_MAX 5u  /* ... after 1 s, 2 s, ... at most 32 s */
/*
 * A thread's connections: two to each memory node, one for faults, one
 * for read-ahead (as the control loop's conn and bg), so that a fault
 * never queues behind read-ahead. Slot 2 * node + 1 is the background one.
 */
#define FT_SLOTS     (2 * HOST_MAX_NODES)

enum ft_op {
	FT_READ,     /* in: read into dst; out: its completion */
	FT_CONNECT,  /* in: connect a slot to its node, join the session */
	FT_CLOSE,    /* in: close a slot's connection */
	FT_STOP,     /* in: close everything and end */
	FT_UP,       /* out: joined (instance) */
	FT_DOWN,     /* out: a slot's connection is gone */
};

/* The control loop's view of a thread's connection to a node. */
enum ft_cl_state {
	CL_DOWN,    /* none (or lost): retried while the node is up */
	CL_JOINING, /* asked for */
	CL_UP,      /* joined: reads may go on it */
	CL_CLOSING, /* asked to close */
};

struct ft_msg {
	uint8_t op;
	uint8_t slot;               /* node * 2 + (background) */
	uint16_t flags;
	int status;
	uint32_t len;
	uint32_t gen;               /* FT_CONNECT, FT_UP, FT_DOWN: which */
	uint64_t off;
	uint64_t session, instance;
	struct fam_remote remote;
	uint8_t *dst;
	fam_done_fn done;
	void *ctx;
	struct fam_conn_opts *opts; /* FT_CONNECT: the thread frees it */
	char *addr;                 /* ... and this */
};

struct ft_ring {
	struct ft_msg *slot;
	_Atomic unsigned head, tail;
	int efd; /* the consumer's wake-up */
};

struct fthread {
	struct host_fthreads *ft;
	unsigned index;
	pthread_t tid;
	bool started;
	_Atomic bool exited;
	struct ft_ring in, out;
	struct event *out_ev;      /* on the control loop: completions */
	/* the thread's */
	struct event_base *base;
	struct event *in_ev;
	bool quit;
	unsigned nconns;
	struct ft_conn *conn[FT_SLOTS]; /* the current one of each */
	/* the control loop's view of each connection */
	uint8_t cl_state[FT_SLOTS]; /* enum ft_cl_state */
	uint32_t cl_gen[FT_SLOTS];  /* of the last FT_CONNECT sent */
	uint64_t cl_instance[FT_SLOTS];
	uint8_t cl_fails[FT_SLOTS]; /* lost or refused in a row */
	uint64_t cl_next_ns[FT_SLOTS]; /* ... not tried again before */
	unsigned cl_out; /* reads handed to it, completions not yet back */
	/* counters: the thread writes, status reads */
	_Atomic uint64_t reads, bytes, errors, connects, disconnects;
};

/* The thread's: one of its connections (an older one may still close). */
struct ft_conn {
	struct fam_conn *conn;
	struct fam_mr *mr;
	unsigned slot;
	uint32_t gen;
	uint64_t session, instance;
	bool up;
	bool refused; /* the node did not let it join */
};

struct host_fthreads {
	struct host *h;
	unsigned n;
	bool stopping;
	struct event *retry;               /* lost connections, again */
	struct fam_conn_opts *opts[HOST_MAX_NODES]; /* last node_up's */
	struct fthread t[];
};

static _Thread_local struct fthread *ft_self;

/* Puts m on ring q (one producer); false when it is full. */
static bool
ring_push(struct ft_ring *q, const struct ft_msg *m)
{
	unsigned t = atomic_load_explicit(&q->tail, memory_order_relaxed);
	unsigned hd = atomic_load_explicit(&q->head, memory_order_acquire);
	uint64_t one = 1;

	if (t - hd >= FT_RING)
		return false;
	q->slot[t % FT_RING] = *m;
	atomic_store_explicit(&q->tail, t + 1, memory_order_release);
	/* cannot fail: a valid eventfd, its count far from the limit */
	(void)!write(q->efd, &one, sizeof one);
	return true;
}

/* Takes the oldest message off ring q (one consumer); false when empty. */
static bool
ring_pop(struct ft_ring *q, struct ft_msg *m)
{
	unsigned hd = atomic_load_explicit(&q->head, memory_order_relaxed);

	if (hd == atomic_load_explicit(&q->tail, memory_order_acquire))
		return false;
	*m = q->slot[hd % FT_RING];
	atomic_store_explicit(&q->head, hd + 1, memory_order_release);
	return true;
}

/* Clears an eventfd's count (it only wakes; the ring says what came). */
static void
efd_drain(int efd)
{
	uint64_t v;

	(void)!read(efd, &v, sizeof v); /* EAGAIN: nothing since */
}

/* Frees a copy of connection options: the secret in it first. */
static void
ft_opts_free(struct fam_conn_opts *opts)
{
	if (opts != NULL)
		explicit_bzero(opts, sizeof *opts);
	free(opts);
}

/*
 * The thread's: hands m back to the control loop. Its ring has room for
 * every read in flight; should it still be full, the control loop is
 * behind and will drain it: wait for room, never drop an answer.
 */
static void
ft_reply(struct fthread *t, const struct ft_msg *m)
{
	while (!ring_push(&t->out, m))
		sched_yield();
}

/* The thread's: leaves the loop once stopped and every connection gone. */
static void
ft_maybe_exit(struct fthread *t)
{
	if (t->quit && t->nconns == 0)
		event_base_loopbreak(t->base);
}

/* The thread's: a read is over. */
static void
ft_read_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct fthread *t = ft_self;
	struct ft_msg m = { .op = FT_READ, .status = status };

	(void)payload;
	(void)len;
	memcpy(&m.ctx, ctx, sizeof m.ctx);
	memcpy(&m.done, (const uint8_t *)ctx + sizeof m.ctx, sizeof m.done);
	free(ctx);
	if (status < 0)
		atomic_fetch_add_explicit(&t->errors, 1, memory_order_relaxed);
	ft_reply(t, &m);
}

/* The thread's: its connection to a node joined the session, or not. */
static void
ft_connected(struct fam_conn *c, const struct fam_hello_resp *resp,
    void *arg)
{
	struct ft_conn *fc = arg;
	struct fthread *t = ft_self;
	struct ft_msg m = { .op = FT_UP, .slot = (uint8_t)fc->slot,
	    .gen = fc->gen, .instance = resp->instance };

	if (resp->session != fc->session || resp->instance != fc->instance ||
	    t->conn[fc->slot] != fc) {
		fc->refused = t->conn[fc->slot] == fc;
		fam_conn_close(c); /* FT_DOWN from ft_closed */
		return;
	}
	fc->mr = fam_mr_register(c, t->ft->h->staging,
	    (size_t)t->ft->h->nstaging * t->ft->h->chunk);
	fc->up = true;
	atomic_fetch_add_explicit(&t->connects, 1, memory_order_relaxed);
	ft_reply(t, &m);
}

/* The thread's: a connection is gone (its reads failed before this). */
static void
ft_closed(struct fam_conn *c, int err, void *arg)
{
	struct ft_conn *fc = arg;
	struct fthread *t = ft_self;
	struct ft_msg m = { .op = FT_DOWN, .slot = (uint8_t)fc->slot,
	    .gen = fc->gen, .status = fc->refused ? -EPERM : err };

	(void)c;
	if (fc->up)
		atomic_fetch_add_explicit(&t->disconnects, 1,
		    memory_order_relaxed);
	if (t->conn[fc->slot] == fc)
		t->conn[fc->slot] = NULL;
	free(fc);
	t->nconns--;
	ft_reply(t, &m);
	ft_maybe_exit(t);
}

static const struct fam_conn_handlers ft_handlers = {
	.connected = ft_connected,
	.closed = ft_closed,
};

/* The thread's: starts its connection to a node (closing an old one). */
static void
ft_connect(struct fthread *t, struct ft_msg *m)
{
	struct ft_conn *fc = t->quit ? NULL : calloc(1, sizeof *fc);
	struct ft_msg down = { .op = FT_DOWN, .slot = m->slot, .gen = m->gen,
	    .status = -ENOTCONN };
	char *cause = NULL;

	if (t->conn[m->slot] != NULL) /* its FT_DOWN names its generation */
		fam_conn_close(t->conn[m->slot]->conn);
	t->conn[m->slot] = NULL;
	if (fc != NULL) {
		fc->slot = m->slot;
		fc->gen = m->gen;
		fc->session = m->session;
		fc->instance = m->instance;
		if (fam_connect(t->base, m->addr, m->opts, &ft_handlers, fc,
		    &fc->conn, &cause) == 0) {
			t->conn[m->slot] = fc;
			t->nconns++;
		} else {
			log_debug("fault thread %u: memory node %s: %s",
			    t->index, m->addr, cause);
			free(cause);
			free(fc);
			ft_reply(t, &down);
		}
	} else {
		ft_reply(t, &down);
	}
	ft_opts_free(m->opts);
	free(m->addr);
}

/* The thread's: sends a read the control loop handed it. */
static void
ft_read(struct fthread *t, const struct ft_msg *m)
{
	struct ft_conn *fc = t->conn[m->slot];
	const struct host *h = t->ft->h;
	struct ft_msg fail = *m;
	uint8_t *ctx = NULL;
	int rc = -ENOTCONN;

	/* what the completion needs back: the caller's ctx and done */
	if (fc != NULL && fc->up &&
	    (ctx = malloc(sizeof m->ctx + sizeof m->done)) == NULL)
		rc = -ENOMEM;
	if (ctx != NULL) {
		memcpy(ctx, &m->ctx, sizeof m->ctx);
		memcpy(ctx + sizeof m->ctx, &m->done, sizeof m->done);
		rc = fam_conn_readf(fc->conn, &m->remote, m->off, m->len,
		    m->dst, m->dst >= h->staging && m->dst < h->staging +
		    (size_t)h->nstaging * h->chunk ? fc->mr : NULL, m->flags,
		    ft_read_done, ctx);
		if (rc < 0)
			free(ctx);
		else if (!(m->flags & FAM_F_BACKGROUND))
			(void)fam_conn_flush(fc->conn); /* a fault waits */
	}
	if (rc == 0) {
		atomic_fetch_add_explicit(&t->reads, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&t->bytes, m->len,
		    memory_order_relaxed);
		return;
	}
	atomic_fetch_add_explicit(&t->errors, 1, memory_order_relaxed);
	fail.status = rc;
	ft_reply(t, &fail);
}

/* The thread's: what the control loop sent. */
static void
ft_in_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fthread *t = arg;
	struct ft_msg m;

	(void)what;
	efd_drain(fd);
	while (ring_pop(&t->in, &m)) {
		switch (m.op) {
		case FT_READ:
			ft_read(t, &m);
			break;
		case FT_CONNECT:
			ft_connect(t, &m);
			break;
		case FT_CLOSE:
			if (t->conn[m.slot] != NULL)
				fam_conn_close(t->conn[m.slot]->conn);
			break;
		case FT_STOP:
			t->quit = true;
			for (unsigned i = 0; i < FT_SLOTS; i++)
				if (t->conn[i] != NULL)
					fam_conn_close(t->conn[i]->conn);
			ft_maybe_exit(t);
			break;
		}
	}
}

/* A fault-service thread: its loop, until told to stop. */
static void *
ft_main(void *arg)
{
	struct fthread *t = arg;

	ft_self = t;
	event_base_dispatch(t->base);
	event_free(t->in_ev);
	t->in_ev = NULL;
	event_base_free(t->base);
	t->base = NULL;
	atomic_store_explicit(&t->exited, true, memory_order_release);
	return NULL;
}

/* The control loop's: lost connections tried again in a while. */
static void
ft_retry_arm(struct host_fthreads *ft)
{
	struct timeval tv = { FT_RETRY_MS / 1000, FT_RETRY_MS % 1000 * 1000 };

	if (!ft->stopping && !evtimer_pending(ft->retry, NULL))
		evtimer_add(ft->retry, &tv);
}

/*
 * The control loop's: thread t's connection in a slot is gone, or was
 * never joined. One it closed itself may be asked for again at once;
 * one lost or refused, after 1 s, then twice as long each time in a row,
 * at most 32 s.
 */
static void
ft_down(struct fthread *t, const struct ft_msg *m)
{
	struct host_fthreads *ft = t->ft;
	unsigned k = t->cl_fails[m->slot];

	if (m->status == -EPERM || m->status == -EMFILE)
		log_rl(LOG_WARNING, "fault thread %u: memory node %s did not "
		    "let its connection join the host's session (%s); the "
		    "reads meant for it go on the control loop's connections",
		    t->index, ft->h->nodes[m->slot / 2].addr,
		    m->status == -EMFILE ? "too many connections in a "
		    "session there" : "another session or instance");
	if (t->cl_state[m->slot] == CL_CLOSING) {
		t->cl_next_ns[m->slot] = 0;
	} else {
		t->cl_next_ns[m->slot] = mono_ns() + ((uint64_t)FT_RETRY_MS <<
		    (k < FT_BACKOFF_MAX ? k : FT_BACKOFF_MAX)) * 1000000u;
		if (k < 255)
			t->cl_fails[m->slot] = (uint8_t)(k + 1);
	}
	t->cl_state[m->slot] = CL_DOWN;
	ft_retry_arm(ft);
}

/* The control loop's: what the threads sent back. */
static void
ft_out_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fthread *t = arg;
	struct host_fthreads *ft = t->ft;
	struct ft_msg m;

	(void)what;
	efd_drain(fd);
	while (ring_pop(&t->out, &m)) {
		switch (m.op) {
		case FT_READ:
			t->cl_out--;
			m.done(m.ctx, m.status, NULL, 0);
			break;
		case FT_UP:
			if (m.gen != t->cl_gen[m.slot] ||
			    t->cl_state[m.slot] != CL_JOINING)
				break; /* an older one, or closed since */
			t->cl_state[m.slot] = CL_UP;
			t->cl_fails[m.slot] = 0;
			t->cl_instance[m.slot] = m.instance;
			if (ft->h->nodes[m.slot / 2].state != MN_UP ||
			    ft->h->nodes[m.slot / 2].instance != m.instance)
				host_fthreads_node_down(ft->h,
				    &ft->h->nodes[m.slot / 2]);
			break;
		case FT_DOWN:
			if (m.gen != t->cl_gen[m.slot])
				break; /* an older one's end */
			ft_down(t, &m);
			break;
		}
	}
}

/* The control loop's: hands m to thread t, waiting for room if must. */
static bool
ft_send(struct fthread *t, const struct ft_msg *m, bool must)
{
	while (!ring_push(&t->in, m)) {
		if (!must || atomic_load(&t->exited))
			return false;
		sched_yield();
	}
	return true;
}

/* The control loop's: asks thread t to connect a slot to its node n. */
static void
ft_connect_slot(struct fthread *t, const struct mnode *n, unsigned slot)
{
	struct host_fthreads *ft = t->ft;
	struct ft_msg m = { .op = FT_CONNECT, .slot = (uint8_t)slot,
	    .gen = t->cl_gen[slot] + 1, .session = n->session,
	    .instance = n->instance };

	m.opts = malloc(sizeof *m.opts);
	m.addr = strdup(n->addr);
	if (m.opts == NULL || m.addr == NULL)
		goto fail;
	*m.opts = *ft->opts[n->index];
	m.opts->hello.resume = n->session;
	if (!ft_send(t, &m, false))
		goto fail;
	t->cl_gen[slot] = m.gen;
	t->cl_state[slot] = CL_JOINING;
	return;
fail:
	ft_opts_free(m.opts);
	free(m.addr);
	ft_retry_arm(ft);
}

/* The control loop's: connects what was lost, for nodes still up. */
static void
ft_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct host_fthreads *ft = arg;
	struct host *h = ft->h;
	uint64_t now = mono_ns();
	bool later = false;

	(void)fd;
	(void)what;
	for (unsigned slot = 0; slot < 2 * h->nnodes; slot++) {
		struct mnode *n = &h->nodes[slot / 2];

		if (n->state != MN_UP || ft->opts[n->index] == NULL)
			continue;
		for (unsigned k = 0; k < ft->n; k++) {
			if (ft->t[k].cl_state[slot] != CL_DOWN)
				continue;
			if (ft->t[k].cl_next_ns[slot] > now)
				later = true;
			else
				ft_connect_slot(&ft->t[k], n, slot);
		}
	}
	if (later)
		ft_retry_arm(ft);
}

/*
 * Memory node n is up (a new session or one resumed) with these options,
 * and its background connection joined: each thread connects to it twice
 * and joins that session.
 */
void
host_fthreads_node_up(struct host *h, struct mnode *n,
    const struct fam_conn_opts *opts)
{
	struct host_fthreads *ft = h->ft;

	if (ft == NULL || ft->stopping || n->is_dpu)
		return;
	if (ft->opts[n->index] == NULL &&
	    (ft->opts[n->index] = malloc(sizeof *opts)) == NULL)
		return; /* its reads stay on the control loop */
	*ft->opts[n->index] = *opts;
	ft->opts[n->index]->hello.features |= FAM_FEAT_JOIN;
	for (unsigned k = 0; k < ft->n; k++) {
		ft->t[k].cl_fails[2 * n->index] = 0;
		ft->t[k].cl_fails[2 * n->index + 1] = 0;
		ft_connect_slot(&ft->t[k], n, 2 * n->index);
		ft_connect_slot(&ft->t[k], n, 2 * n->index + 1);
	}
}

/* Memory node n's session is gone: no read goes to it on a thread. */
void
host_fthreads_node_down(struct host *h, struct mnode *n)
{
	struct host_fthreads *ft = h->ft;

	if (ft == NULL || n->is_dpu)
		return;
	for (unsigned k = 0; k < ft->n; k++) {
		for (unsigned slot = 2 * n->index; slot < 2 * n->index + 2;
		    slot++) {
			struct ft_msg m = { .op = FT_CLOSE,
			    .slot = (uint8_t)slot };

			if (ft->t[k].cl_state[slot] == CL_DOWN ||
			    ft->t[k].cl_state[slot] == CL_CLOSING)
				continue;
			ft->t[k].cl_state[slot] = CL_CLOSING; /* none routed */
			ft_send(&ft->t[k], &m, true);
		}
	}
}

/*
 * Hands the read of len bytes at off of stripe s (remote, on its node)
 * into dst to a thread, on its background connection to the node if flags
 * say FAM_F_BACKGROUND: done(ctx, status, NULL, 0) on the control loop
 * once it is over, as the transport would call it. The thread is picked
 * from the region and the chunk (a run of 16 adjacent chunks keeps to
 * one). Returns 0, or -EAGAIN: that thread has no such connection joined
 * to the stripe's node in its current instance (or no thread runs): the
 * caller reads on its own connection.
 */
int
host_fthread_read(struct host *h, const struct region *r, uint64_t chunk,
    const struct stripe *s, const struct fam_remote *remote, uint64_t off,
    uint32_t len, uint8_t *dst, uint16_t flags, fam_done_fn done, void *ctx)
{
	struct host_fthreads *ft = h->ft;
	struct fthread *t;
	unsigned slot;
	struct ft_msg m = { .op = FT_READ, .flags = flags, .len = len,
	    .off = off, .remote = *remote, .dst = dst, .done = done,
	    .ctx = ctx };

	if (ft == NULL || ft->stopping || s->node == NULL || s->node->is_dpu)
		return -EAGAIN;
	slot = 2 * s->node->index + ((flags & FAM_F_BACKGROUND) != 0);
	t = &ft->t[(r->handle * 0x9e3779b97f4a7c15ull ^ (chunk >> 4)) %
	    ft->n];
	if (t->cl_state[slot] != CL_UP || t->cl_instance[slot] != s->instance)
		return -EAGAIN;
	m.slot = (uint8_t)slot;
	if (!ft_send(t, &m, false))
		return -EAGAIN;
	t->cl_out++;
	return 0;
}

/* Status: each thread's reads, and its connections joined. */
json_t *
host_fthreads_json(const struct host *h)
{
	const struct host_fthreads *ft = h->ft;
	json_t *a = json_array();

	for (unsigned k = 0; ft != NULL && k < ft->n; k++) {
		const struct fthread *t = &ft->t[k];
		unsigned up = 0;

		for (unsigned slot = 0; slot < 2 * h->nnodes; slot++)
			up += t->cl_state[slot] == CL_UP;
		json_array_append_new(a, json_pack("{s:I,s:I,s:I,s:I,s:I,"
		    "s:I,s:I}",
		    "reads", (json_int_t)atomic_load(&t->reads),
		    "read_bytes", (json_int_t)atomic_load(&t->bytes),
		    "errors", (json_int_t)atomic_load(&t->errors),
		    "in_flight", (json_int_t)t->cl_out,
		    "connections_joined", (json_int_t)up,
		    "connects", (json_int_t)atomic_load(&t->connects),
		    "disconnects", (json_int_t)atomic_load(&t->disconnects)));
	}
	return a;
}

/* Makes thread t's rings, eventfds and loop, and starts it. */
static int
ft_start_one(struct host_fthreads *ft, struct fthread *t)
{
	struct host *h = ft->h;

	t->ft = ft;
	t->in.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	t->out.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	t->in.slot = calloc(FT_RING, sizeof *t->in.slot);
	t->out.slot = calloc(FT_RING, sizeof *t->out.slot);
	if (t->in.efd < 0 || t->out.efd < 0 || t->in.slot == NULL ||
	    t->out.slot == NULL)
		return -errno;
	t->base = event_base_new();
	if (t->base == NULL)
		return -ENOMEM;
	t->in_ev = event_new(t->base, t->in.efd, EV_READ | EV_PERSIST,
	    ft_in_cb, t);
	t->out_ev = event_new(h->base, t->out.efd, EV_READ | EV_PERSIST,
	    ft_out_cb, t);
	if (t->in_ev == NULL || t->out_ev == NULL ||
	    event_add(t->in_ev, NULL) < 0 || event_add(t->out_ev, NULL) < 0)
		return -ENOMEM;
	if (pthread_create(&t->tid, NULL, ft_main, t) != 0)
		return -EAGAIN;
	t->started = true;
	return 0;
}

/*
 * Starts n fault-service threads (0: none, every read on the control
 * loop). Returns 0, or -errno with none running.
 */
int
host_fthreads_start(struct host *h, unsigned n)
{
	struct host_fthreads *ft;
	int rc = 0;

	if (n == 0)
		return 0;
	ft = calloc(1, sizeof *ft + n * sizeof ft->t[0]);
	if (ft == NULL)
		return -ENOMEM;
	ft->h = h;
	ft->n = n;
	h->ft = ft;
	for (unsigned k = 0; k < n; k++)
		ft->t[k].in.efd = ft->t[k].out.efd = -1;
	ft->retry = evtimer_new(h->base, ft_retry_cb, ft);
	if (ft->retry == NULL)
		rc = -ENOMEM;
	for (unsigned k = 0; k < n && rc == 0; k++) {
		ft->t[k].index = k;
		rc = ft_start_one(ft, &ft->t[k]);
	}
	if (rc < 0)
		host_fthreads_stop(h);
	return rc;
}

/*
 * Stops the threads: each closes its connections (their reads complete,
 * failed, through their done functions here) and ends; then frees them.
 */
void
host_fthreads_stop(struct host *h)
{
	struct host_fthreads *ft = h->ft;
	struct ft_msg stop = { .op = FT_STOP };

	if (ft == NULL)
		return;
	ft->stopping = true;
	for (unsigned k = 0; k < ft->n; k++) {
		struct fthread *t = &ft->t[k];

		if (!t->started)
			continue;
		ft_send(t, &stop, true);
		while (!atomic_load_explicit(&t->exited, memory_order_acquire)) {
			ft_out_cb(t->out.efd, EV_READ, t);
			usleep(1000);
		}
		pthread_join(t->tid, NULL);
		ft_out_cb(t->out.efd, EV_READ, t);
	}
	for (unsigned k = 0; k < ft->n; k++) {
		struct fthread *t = &ft->t[k];
		struct ft_msg m;

		while (ring_pop(&t->in, &m)) /* never taken: it stopped */
			if (m.op == FT_CONNECT) {
				ft_opts_free(m.opts);
				free(m.addr);
			}
		if (t->out_ev != NULL)
			event_free(t->out_ev);
		if (!t->started) {
			if (t->in_ev != NULL)
				event_free(t->in_ev);
			if (t->base != NULL)
				event_base_free(t->base);
		}
		if (t->in.efd >= 0)
			close(t->in.efd);
		if (t->out.efd >= 0)
			close(t->out.efd);
		free(t->in.slot);
		free(t->out.slot);
	}
	if (ft->retry != NULL)
		event_free(ft->retry);
	for (unsigned i = 0; i < HOST_MAX_NODES; i++)
		ft_opts_free(ft->opts[i]);
	free(ft);
	h->ft = NULL;
}
