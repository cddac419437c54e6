/*
 * host-fork.c - fork(): a copy of a program's regions for its child, made
 * at the parent's FORK on the memory nodes, and the child's claim of it
 * (doc/fork.md). Below the sessions: it answers them through h->fork_done
 * and frees regions through h->region_gone.
 *
 * Owns: the copies (h->forks), each a list of regions made like the
 * parent's (same sizes, stripes on the same memory nodes, the same offsets
 * in arenas of the same lengths) and filled chunk by chunk from the
 * parent's buffer (resident chunks) or its memory nodes (the others).
 * Copy states (struct host_fork.state):
 *   FORK_COPYING  regions being created and filled; the parent's writes to
 *                 its regions wait (cl->forking: its write faults are not
 *                 served, and are woken when the copy ends)
 *   FORK_READY    copied: waits FORK_CLAIM_NS at most for the child's ADOPT
 *   FORK_FAILED   not copied (err): the child's ADOPT gets err
 *   FORK_CLAIMED  its regions are the child's; kept until every arena's
 *                 memfd went to the child, or the child's session ends
 * Locks: none; everything runs on the control loop.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <event2/event.h>

#include "host/host.h"
#include "host/host-uffd.h"

#define FORK_MAX_COPIES 16                     /* chunk copies in flight */
#define FORK_CLAIM_NS   (30ull * 1000000000u)  /* a copy waits for its child */
#define FORK_RETRY_US   1000                   /* no staging slot or route */

enum fork_state {
	FORK_COPYING,
	FORK_READY,
	FORK_FAILED,
	FORK_CLAIMED,
};

struct host_fork {
	struct host *h;
	uint64_t token;              /* random: the child's capability */
	uid_t uid;
	struct host_client *parent;  /* a reference, until the copy ends */
	struct host_client *child;   /* FORK_CLAIMED */
	enum fork_state state;
	int err;                     /* FORK_FAILED: positive errno */
	uint64_t since;              /* when the state was entered (ns) */
	struct region **src, **dst;  /* nregions each */
	uint32_t *dst_arena;         /* the parent's arena of each */
	size_t nregions;
	struct host_fork_arena *arenas;
	size_t narenas;
	size_t next_region;          /* the copy's cursor */
	uint64_t next_chunk;
	unsigned creating, copying;  /* REGION_CREATEs, chunk copies out */
	bool answered;               /* fork_done was called */
	struct event *retry;
	struct host_fork *next;
};

/* One REGION_CREATE of a copy's stripe. */
struct fork_create {
	struct host_fork *f;
	struct stripe *s;
};

/* One chunk being copied: read (unless it was resident), then written. */
struct fork_copy {
	struct host_fork *f;
	size_t k;          /* region */
	uint64_t c;        /* chunk */
	struct stripe *s;  /* the stripe its current operation is routed on */
	uint8_t *buf;
	bool staged;       /* buf is a staging slot, not malloc'd */
};

static void fork_pump(struct host_fork *f);

/* Frees what a copy owns; its regions too unless the child has them. */
static void
fork_free(struct host_fork *f)
{
	struct host *h = f->h;
	struct host_fork **pp;

	for (pp = &h->forks; *pp != NULL; pp = &(*pp)->next)
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	for (size_t k = 0; k < f->nregions && f->state != FORK_CLAIMED; k++) {
		struct region *r = f->dst[k];

		if (r == NULL)
			continue;
		r->dying = true;
		if (r->busy == 0)
			h->region_gone(r);
	}
	if (f->parent != NULL)
		host_client_put(f->parent);
	if (f->retry != NULL)
		event_free(f->retry);
	free(f->src);
	free(f->dst);
	free(f->dst_arena);
	free(f->arenas);
	free(f);
}

/* Lets the parent write again: wakes its threads waiting in write faults. */
static void
fork_thaw(struct host_fork *f)
{
	struct host_client *cl = f->parent;

	if (cl == NULL || !cl->forking)
		return;
	cl->forking = false;
	if (cl->dead || cl->uffd < 0)
		return;
	for (struct arena *ar = cl->arenas; ar != NULL; ar = ar->next)
		if (ar->uaddr != 0)
			uffd_wake(cl->uffd, ar->uaddr, ar->size);
}

/* Answers the parent's FORK once: the token, or err. */
static void
fork_answer(struct host_fork *f)
{
	struct host *h = f->h;

	if (f->answered)
		return;
	f->answered = true;
	fork_thaw(f);
	if (f->state == FORK_FAILED)
		h->stats.fork_errors++;
	if (f->parent != NULL && h->fork_done != NULL)
		h->fork_done(f->parent, f->state == FORK_READY ? f->token : 0,
		    f->state == FORK_READY ? 0 : f->err);
}

/* The copy cannot be made: answers err (positive) once nothing is out. */
static void
fork_fail(struct host_fork *f, int err)
{
	if (f->state != FORK_COPYING)
		return;
	log_info("session pid %ld: fork: cannot copy its regions for the "
	    "child: %s", f->parent != NULL ? (long)f->parent->pid : 0L,
	    strerror(err));
	f->state = FORK_FAILED;
	f->err = err;
	f->since = mono_ns();
	fork_thaw(f);
}

/* Timer: tries again what waited for a staging slot or a route. */
static void
fork_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	fork_pump(arg);
}

/* Completion of the write of a copied chunk. */
static void
copy_write_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct fork_copy *op = ctx;
	struct host_fork *f = op->f;
	struct host *h = f->h;
	struct region *src = f->src[op->k], *dst = f->dst[op->k];

	if (op->staged)
		host_staging_put(h, op->buf, 1);
	else
		free(op->buf);
	if (status == 0) {
		dst->chunks[op->c].flags |= CH_REMOTE;
		h->stats.fork_bytes += h->chunk;
	} else
		fork_fail(f, -status);
	src->busy--;
	dst->busy--;
	host_region_idle(src);
	host_region_idle(dst);
	f->copying--;
	free(op);
	fork_pump(f);
}

/*
 * Writes a chunk's data (in op->buf) to the copy's stripe, direct to its
 * memory node whatever the path: the region is new, so no dpu holds a copy
 * of it, and its first use moves it to the path it should be on.
 */
static int
copy_write(struct fork_copy *op)
{
	struct host_fork *f = op->f;
	struct host *h = f->h;
	struct region *dst = f->dst[op->k];
	struct fam_conn *conn;
	struct fam_mr *mr;
	unsigned si;
	uint64_t off = host_stripe_offset(h, dst, op->c, &si);

	op->s = &dst->stripes[si];
	if (!op->s->owned || op->s->node == NULL ||
	    op->s->node->state != MN_UP)
		return -EHOSTDOWN;
	conn = host_node_conn(op->s, true, &mr);
	return fam_conn_writef(conn, &op->s->remote, off, (uint32_t)h->chunk,
	    op->buf, NULL, FAM_F_BACKGROUND, copy_write_done, op);
}

/* Ends a chunk copy that failed before its write went out. */
static void
copy_abort(struct fork_copy *op, int err)
{
	struct host_fork *f = op->f;
	struct host *h = f->h;

	if (op->staged)
		host_staging_put(h, op->buf, 1);
	else
		free(op->buf);
	f->src[op->k]->busy--;
	f->dst[op->k]->busy--;
	host_region_idle(f->src[op->k]);
	host_region_idle(f->dst[op->k]);
	f->copying--;
	fork_fail(f, err);
	free(op);
}

/* Completion of the read of a chunk from the parent's memory node. */
static void
copy_read_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct fork_copy *op = ctx;
	struct host_fork *f = op->f;

	host_route_done(f->h, op->s);
	if (status == 0 && f->state == FORK_COPYING)
		status = copy_write(op);
	else if (status == 0)
		status = -ECANCELED;
	if (status < 0) {
		copy_abort(op, -status);
		fork_pump(f);
	}
}

/*
 * Starts copying chunk c of the k-th region: from the parent's buffer when
 * it is there (its data cannot change: the parent's writes wait), else from
 * its memory node. Returns 1 when started, 0 when there is nothing to copy
 * (never written), -EAGAIN to try again later, or -errno.
 */
static int
copy_chunk(struct host_fork *f, size_t k, uint64_t c)
{
	struct host *h = f->h;
	struct region *src = f->src[k];
	struct chunk *ch = &src->chunks[c];
	bool resident = ch->state == CH_RESIDENT || ch->state == CH_EVICTING;
	struct fam_conn *conn;
	struct fam_mr *mr;
	const struct fam_remote *remote;
	struct fork_copy *op;
	unsigned si, n = 1;
	uint64_t off;
	int rc;

	if (!resident && !(ch->flags & CH_REMOTE))
		return 0;
	op = calloc(1, sizeof *op);
	if (op == NULL)
		return -ENOMEM;
	op->f = f;
	op->k = k;
	op->c = c;
	if (resident) {
		op->buf = malloc(h->chunk);
		if (op->buf == NULL) {
			free(op);
			return -ENOMEM;
		}
		memcpy(op->buf, src->ar->local + src->off + (c << h->chunk_shift),
		    h->chunk);
	} else {
		op->buf = host_staging_get(h, &n);
		if (op->buf == NULL) {
			free(op);
			return -EAGAIN;
		}
		op->staged = true;
	}
	src->busy++;
	f->dst[k]->busy++;
	f->copying++;
	if (resident)
		rc = copy_write(op);
	else {
		off = host_stripe_offset(h, src, c, &si);
		op->s = &src->stripes[si];
		rc = host_route(h, op->s, true, &conn, &mr, &remote);
		if (rc == 0) {
			rc = fam_conn_readf(conn, remote, off, (uint32_t)h->chunk,
			    op->buf, mr, FAM_F_BACKGROUND, copy_read_done, op);
			if (rc < 0)
				host_route_done(h, op->s);
		}
	}
	if (rc == -EAGAIN) {
		/* the route is changing: the same chunk again, later */
		op->f->copying--;
		src->busy--;
		f->dst[k]->busy--;
		if (op->staged)
			host_staging_put(h, op->buf, 1);
		else
			free(op->buf);
		free(op);
		return -EAGAIN;
	}
	if (rc < 0) {
		copy_abort(op, -rc);
		return rc;
	}
	return 1;
}

/*
 * Moves the copy on: starts chunk copies up to FORK_MAX_COPIES, and
 * answers the parent when every one is done (or the copy failed).
 */
static void
fork_pump(struct host_fork *f)
{
	struct host *h = f->h;
	uint64_t limit = (uint64_t)cfg_int(h->d->cfg, CFG_OP_TIMEOUT) * 1000000u;

	while (f->state == FORK_COPYING && f->creating == 0 &&
	    f->copying < FORK_MAX_COPIES && f->next_region < f->nregions) {
		size_t k = f->next_region;
		int rc;

		if (f->src[k]->dying || f->parent->dead) {
			fork_fail(f, ECANCELED);
			break;
		}
		if (f->next_chunk == f->dst[k]->nchunks || f->src[k]->lost) {
			f->dst[k]->lost = f->src[k]->lost;
			f->next_region++;
			f->next_chunk = 0;
			continue;
		}
		rc = copy_chunk(f, k, f->next_chunk);
		if (rc == -EAGAIN && mono_ns() - f->since >= limit)
			rc = -ETIMEDOUT;
		if (rc == -EAGAIN) {
			struct timeval tv = { 0, FORK_RETRY_US };

			evtimer_add(f->retry, &tv);
			break;
		}
		if (rc < 0)
			break; /* failed */
		f->next_chunk++;
	}
	if (f->creating > 0 || f->copying > 0)
		return;
	if (f->state == FORK_COPYING && f->next_region == f->nregions) {
		f->state = FORK_READY;
		f->since = mono_ns();
		log_debug("session pid %ld: fork: %zu regions copied for the "
		    "child", (long)f->parent->pid, f->nregions);
	}
	if (f->state != FORK_COPYING)
		fork_answer(f);
}

/* Completion of REGION_CREATE for one stripe of a copy. */
static void
fork_create_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct fork_create *fc = ctx;
	struct host_fork *f = fc->f;
	struct stripe *s = fc->s;
	struct fam_region_info info;

	free(fc);
	if (status == 0 && proto_get_region_info(payload, len, &info) < 0)
		status = -EPROTO;
	if (status == 0) {
		s->remote.region = info.region;
		s->remote.rkey = info.rkey;
		s->remote.addr = info.addr;
		s->remote.size = info.size;
		s->key = info.key;
		s->path = SP_DIRECT;
		s->owned = true;
	} else
		fork_fail(f, -status);
	s->r->busy--;
	host_region_idle(s->r);
	f->creating--;
	fork_pump(f);
}

/* Makes the copy of region src (not reserved anywhere yet): its struct. */
static struct region *
fork_region_new(struct host_fork *f, struct region *src)
{
	struct region *r = calloc(1, sizeof *r);

	if (r == NULL)
		return NULL;
	r->chunks = calloc(src->nchunks, sizeof *r->chunks);
	if (r->chunks == NULL) {
		free(r);
		return NULL;
	}
	r->cl = src->cl;
	r->cl->refs++;
	r->handle = src->handle; /* the child's table names it so */
	r->off = src->off;
	r->size = src->size;
	r->nchunks = src->nchunks;
	r->advice = src->advice;
	r->last_fault = UINT64_MAX;
	r->nstripes = src->nstripes;
	return r;
}

/* Asks the memory nodes for the stripes of the copy dst of src. */
static int
fork_region_create(struct host_fork *f, struct region *src,
    struct region *dst)
{
	uint8_t buf[FAM_REGION_CREATE_MIN + FAM_NAME_MAX + FAM_PATH_MAX];

	for (unsigned i = 0; i < src->nstripes; i++) {
		struct fam_region_create rc = { 0 };
		struct stripe *s = &dst->stripes[i];
		struct fork_create *fc;
		size_t len;
		int err;

		s->r = dst;
		s->node = src->stripes[i].node;
		if (s->node == NULL || s->node->state != MN_UP)
			return -EHOSTDOWN;
		s->instance = s->node->instance;
		s->path = SP_DIRECT;
		rc.size = src->stripes[i].remote.size;
		len = proto_put_region_create(buf, sizeof buf, &rc);
		fc = calloc(1, sizeof *fc);
		if (fc == NULL)
			return -ENOMEM;
		fc->f = f;
		fc->s = s;
		err = fam_conn_call(s->node->conn, FAM_MSG_REGION_CREATE, buf,
		    (uint32_t)len, fork_create_done, fc);
		if (err < 0) {
			free(fc);
			return err;
		}
		dst->busy++;
		f->creating++;
	}
	return 0;
}

/*
 * Write-protects the parent's chunks it writes without faulting, so that
 * from now on each of its writes waits for the copy.
 */
static int
fork_freeze(struct host_client *cl)
{
	struct host *h = cl->h;

	cl->forking = true;
	for (struct region *r = cl->regions; r != NULL; r = r->next)
		for (uint64_t c = 0; c < r->nchunks; c++) {
			struct chunk *ch = &r->chunks[c];
			int rc;

			if (ch->state != CH_RESIDENT || !(ch->flags & CH_UNPROT))
				continue;
			rc = uffd_protect(cl->uffd, r->ar->uaddr + r->off +
			    (c << h->chunk_shift), h->chunk, true);
			if (rc < 0 && rc != -ESRCH)
				return rc;
			ch->flags &= ~CH_UNPROT;
		}
	return 0;
}

/* Lists the parent's arenas and regions (not files) in the copy. */
static int
fork_list(struct host_fork *f, struct host_client *cl)
{
	size_t n = 0, na = 0;

	for (struct arena *ar = cl->arenas; ar != NULL; ar = ar->next)
		na += ar->uaddr != 0;
	for (struct region *r = cl->regions; r != NULL; r = r->next)
		n += !(r->flags & FAM_S_ALLOC_FILE);
	f->arenas = calloc(na + 1, sizeof *f->arenas);
	f->src = calloc(n + 1, sizeof *f->src);
	f->dst = calloc(n + 1, sizeof *f->dst);
	f->dst_arena = calloc(n + 1, sizeof *f->dst_arena);
	if (f->arenas == NULL || f->src == NULL || f->dst == NULL ||
	    f->dst_arena == NULL)
		return -ENOMEM;
	for (struct arena *ar = cl->arenas; ar != NULL; ar = ar->next)
		if (ar->uaddr != 0)
			f->arenas[f->narenas++] = (struct host_fork_arena){
				.id = ar->id, .size = ar->size,
				.uaddr = ar->uaddr,
			};
	for (struct region *r = cl->regions; r != NULL; r = r->next) {
		if (r->flags & FAM_S_ALLOC_FILE)
			continue;
		f->src[f->nregions] = r;
		f->dst_arena[f->nregions] = r->ar->id;
		f->dst[f->nregions] = fork_region_new(f, r);
		if (f->dst[f->nregions++] == NULL)
			return -ENOMEM;
	}
	return 0;
}

/*
 * FORK: starts copying the program's regions for its child; h->fork_done
 * answers (never from inside this call). Returns 0, or -errno at once.
 */
int
host_fork_start(struct host_client *cl)
{
	struct host *h = cl->h;
	struct host_fork *f;
	int rc;

	f = calloc(1, sizeof *f);
	if (f == NULL)
		return -ENOMEM;
	f->h = h;
	f->uid = cl->uid;
	f->parent = cl;
	cl->refs++;
	f->since = mono_ns();
	f->state = FORK_COPYING;
	f->next = h->forks;
	h->forks = f;
	while (f->token == 0)
		if (getrandom(&f->token, sizeof f->token, 0) !=
		    (ssize_t)sizeof f->token) {
			f->token = 0;
			rc = -errno;
			goto fail;
		}
	f->retry = evtimer_new(h->base, fork_retry_cb, f);
	rc = f->retry == NULL ? -ENOMEM : fork_list(f, cl);
	for (size_t k = 0; rc == 0 && k < f->nregions; k++)
		rc = fork_region_create(f, f->src[k], f->dst[k]);
	if (rc == 0)
		rc = fork_freeze(cl);
	if (rc < 0)
		goto fail;
	h->stats.forks++;
	if (f->creating == 0) /* nothing to create: answer from the loop */
		event_active(f->retry, EV_TIMEOUT, 0);
	return 0;
fail:
	cl->forking = false;
	if (f->creating > 0) {
		/* answered when the creations come back */
		fork_fail(f, -rc);
		f->answered = true;
		return rc;
	}
	fork_free(f);
	return rc;
}

/* The copy whose token this is, or NULL. */
struct host_fork *
host_fork_find(struct host *h, uint64_t token)
{
	for (struct host_fork *f = h->forks; f != NULL; f = f->next)
		if (f->token == token && token != 0)
			return f;
	return NULL;
}

/*
 * The child's first ADOPT: gives its session the copied regions (their
 * arenas are the session's to make: the parent's arena of each region in
 * *region_arena) and the parent's arenas; *first when it was this call.
 * Returns 0, or -errno: the copy failed, or is someone else's.
 */
int
host_fork_claim(struct host_fork *f, struct host_client *cl,
    struct host_fork_arena **arenas, size_t *narenas,
    struct region ***regions, uint32_t **region_arena, size_t *nregions,
    bool *first)
{
	*first = f->state == FORK_READY;
	if (f->uid != cl->uid)
		return -EPERM;
	if (f->state == FORK_FAILED)
		return -f->err;
	if (f->state == FORK_COPYING)
		return -EAGAIN;
	if (f->state == FORK_CLAIMED && f->child != cl)
		return -EALREADY;
	if (f->state == FORK_READY) {
		for (size_t k = 0; k < f->nregions; k++) {
			struct region *r = f->dst[k];

			cl->refs++;
			host_client_put(r->cl);
			r->cl = cl;
		}
		if (f->parent != NULL)
			host_client_put(f->parent);
		f->parent = NULL;
		f->child = cl;
		f->state = FORK_CLAIMED;
		cl->h->stats.fork_adopted++;
	}
	*arenas = f->arenas;
	*narenas = f->narenas;
	*regions = f->dst;
	*region_arena = f->dst_arena;
	*nregions = f->nregions;
	return 0;
}

/* An arena's memfd went to the child: the copy goes with the last. */
void
host_fork_handed(struct host_fork *f)
{
	for (size_t i = 0; i < f->narenas; i++)
		if (!f->arenas[i].handed)
			return;
	fork_free(f);
}

/* A session ended: the copies it claimed are done with. */
void
host_fork_client_gone(struct host_client *cl)
{
	struct host_fork *f, *next;

	for (f = cl->h->forks; f != NULL; f = next) {
		next = f->next;
		if (f->child == cl)
			fork_free(f);
	}
}

/* Adds the bytes and regions of uid's copies no child holds yet. */
void
host_fork_held(struct host *h, uid_t uid, uint64_t *bytes, uint64_t *regions)
{
	for (struct host_fork *f = h->forks; f != NULL; f = f->next) {
		if (f->uid != uid || f->state == FORK_CLAIMED)
			continue;
		for (size_t k = 0; k < f->nregions; k++) {
			*bytes += f->dst[k]->size;
			(*regions)++;
		}
	}
}

/* Frees the copies no child claimed in FORK_CLAIM_NS (a child that died). */
void
host_fork_tick(struct host *h)
{
	struct host_fork *f, *next;
	uint64_t now = mono_ns();

	for (f = h->forks; f != NULL; f = next) {
		next = f->next;
		if ((f->state == FORK_READY || f->state == FORK_FAILED) &&
		    f->creating == 0 && f->copying == 0 &&
		    now - f->since >= FORK_CLAIM_NS) {
			log_info("fork: a copy of %zu regions was not claimed "
			    "by a child in %llu s; released", f->nregions,
			    (unsigned long long)(FORK_CLAIM_NS / 1000000000u));
			fork_free(f);
		}
	}
}

/*
 * Frees the copies famd stops with; one with an operation still out stays
 * (its completion would find it freed).
 */
void
host_fork_fini(struct host *h)
{
	struct host_fork *f, *next;

	for (f = h->forks; f != NULL; f = next) {
		next = f->next;
		if (f->creating == 0 && f->copying == 0)
			fork_free(f);
	}
}
