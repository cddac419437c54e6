/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-fork.c - fork() with copy on write (doc/fork.md): at the parent's
 * FORK, a copy of each of its regions that shares the parent's chunks
 * until either side writes one; the child's claim of the copies (ADOPT).
 * Below the faults: it answers the sessions through h->fork_done and frees
 * regions through h->region_gone.
 *
 * Owns: the forks (h->forks), each the copies made at one FORK, waiting
 * for the child's ADOPT; each copy's shared and pending bitmaps and its
 * place in its source's list of copies; the chunk copies that make a
 * shared chunk the copy's own (h->owns: whole copies being made their own).
 * Fork states (struct host_fork.state):
 *   FORK_MAKING   the copies' stripes are being created (and a parent that
 *                 is itself a copy is made its own first); the parent's
 *                 writes wait (cl->forking)
 *   FORK_READY    made: waits FORK_CLAIM_NS at most for the child's ADOPT
 *   FORK_FAILED   not made (err): the child's ADOPT gets err
 *   FORK_CLAIMED  the copies are the child's session's; kept until every
 *                 arena's memfd went to the child, or that session ends
 * A chunk c of a copy is:
 *   shared    its data is the source's chunk c (which the source has not
 *             written since the fork): a fault of the copy reads it from
 *             the source's buffer frame or stripe; the source's first write
 *             to it first writes it to the copy's stripe
 *   pending   (and shared) that read, or that write, is out: faults of
 *             either side on c wait, and are woken when it lands
 *   its own   neither: an ordinary chunk of the copy
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

#define FORK_MAX_COPIES 16                     /* a copy's chunk writes out */
#define FORK_CLAIM_NS   (30ull * 1000000000u)  /* a copy waits for its child */
#define FORK_RETRY_US   1000                   /* no staging slot or route */

enum fork_state {
	FORK_MAKING,
	FORK_READY,
	FORK_FAILED,
	FORK_CLAIMED,
};

struct host_fork {
	struct host *h;
	uint64_t token;              /* random: the child's capability */
	uid_t uid;
	struct host_client *parent;  /* a reference, until the claim */
	struct host_client *child;   /* FORK_CLAIMED */
	enum fork_state state;
	int err;                     /* FORK_FAILED: positive errno */
	uint64_t since;              /* when the state was entered (ns) */
	struct region **src, **dst;  /* nregions each */
	uint32_t *dst_arena;         /* the parent's arena of each */
	size_t nregions;
	struct host_fork_arena *arenas;
	size_t narenas;
	unsigned creating;           /* REGION_CREATEs out */
	unsigned owning;             /* the parent's copies made its own first */
	bool answered;               /* fork_done was called */
	struct event *later;         /* answers from the loop */
	struct host_fork *next;
};

/* One REGION_CREATE of a copy's stripe. */
struct fork_create {
	struct host_fork *f;
	struct stripe *s;
};

/* The source's data of a chunk, on its way to the copy's stripe. */
struct chunk_copy {
	struct host *h;
	struct region *copy, *src;
	uint64_t c;
	uint8_t *buf;
	bool staged;          /* buf is a staging slot, not malloc'd */
	struct stripe *rs;    /* the source's stripe its read was routed on */
	struct fork_own *own; /* the job it is part of, or NULL */
	struct chunk_copy *next;
};

/* Makes every shared chunk of a copy its own (its source goes, or it forks). */
struct fork_own {
	struct host *h;
	struct region *copy, *src; /* a reference (busy) on each */
	uint64_t next_chunk;       /* the cursor */
	unsigned out;              /* chunk copies out */
	struct chunk_copy *queue;  /* captured, to be written */
	struct event *retry;
	struct host_fork *f;       /* a FORK waiting for it, or NULL */
	struct fork_own *next;
};

static void fork_pump(struct host_fork *f);
static void own_pump(struct fork_own *o);

/* ---- bitmaps and links ---------------------------------------------- */

/* Tells whether bit c of map is set. */
static bool
bit_get(const uint64_t *map, uint64_t c)
{
	return (map[c / 64] >> (c % 64)) & 1;
}

/* Sets bit c of map. */
static void
bit_set(uint64_t *map, uint64_t c)
{
	map[c / 64] |= (uint64_t)1 << (c % 64);
}

/* Clears bit c of map. */
static void
bit_clr(uint64_t *map, uint64_t c)
{
	map[c / 64] &= ~((uint64_t)1 << (c % 64));
}

/* Tells whether chunk c of r is still its source's. */
bool
host_fork_shared(const struct region *r, uint64_t c)
{
	return r->src != NULL && r->shared != NULL && bit_get(r->shared, c);
}

/* Tells whether chunk c of r has its data on its way (faults wait). */
bool
host_fork_pending(const struct region *r, uint64_t c)
{
	return r->src != NULL && r->pending != NULL && bit_get(r->pending, c);
}

/* Takes copy r out of its source's list: nothing of it is shared any more. */
static void
copy_unlink(struct region *r)
{
	struct region **pp;

	if (r->src == NULL)
		return;
	for (pp = &r->src->copies; *pp != NULL; pp = &(*pp)->copy_next)
		if (*pp == r) {
			*pp = r->copy_next;
			break;
		}
	r->copy_next = NULL;
	r->src = NULL;
}

/* Wakes the threads of r's program waiting in a fault on chunk c. */
static void
chunk_wake(struct region *r, uint64_t c)
{
	struct host *h = r->cl->h;

	if (r->dying || r->cl->dead || r->cl->uffd < 0 || r->ar == NULL ||
	    r->ar->uaddr == 0)
		return;
	uffd_wake(r->cl->uffd, r->ar->uaddr + r->off + (c << h->chunk_shift),
	    h->chunk);
}

/* Chunk c of copy r landed (or failed to): not pending, maybe not shared. */
static void
copy_landed(struct region *r, struct region *src, uint64_t c, bool own)
{
	bit_clr(r->pending, c);
	if (own && bit_get(r->shared, c)) {
		bit_clr(r->shared, c);
		r->nshared--;
	}
	chunk_wake(src, c);
	chunk_wake(r, c);
}

/* ---- a copy's fault reads its source (host-fault.c) ----------------- */

/* A fault of copy r reads shared chunk c from its source: c is pending. */
void
host_fork_fetching(struct region *r, uint64_t c)
{
	bit_set(r->pending, c);
	r->src->busy++;
}

/*
 * The read of shared chunk c of copy r from src is over: landed, the chunk
 * is r's own now (dirty: r's stripe does not hold it).
 */
void
host_fork_fetched(struct region *r, uint64_t c, struct region *src,
    bool landed)
{
	if (r->src == src)
		copy_landed(r, src, c, landed);
	else
		bit_clr(r->pending, c);
	src->busy--;
	host_region_idle(src);
	if (r->src != NULL && r->nshared == 0)
		copy_unlink(r);
}

/* ---- chunk copies: the source's data written to the copy's stripe --- */

/* Frees a chunk copy's buffer and the references it held. */
static void
chunk_copy_end(struct chunk_copy *cc)
{
	struct region *copy = cc->copy, *src = cc->src;
	struct fork_own *o = cc->own;

	if (cc->staged)
		host_staging_put(cc->h, cc->buf, 1);
	else
		free(cc->buf);
	free(cc);
	copy->busy--;
	src->busy--;
	host_region_idle(copy);
	host_region_idle(src);
	if (o != NULL) {
		o->out--;
		event_active(o->retry, EV_TIMEOUT, 0); /* not from in here */
	}
}

/* Completion of the write of a source's chunk to its copy's stripe. */
static void
chunk_write_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct chunk_copy *cc = ctx;
	struct region *copy = cc->copy;
	struct host *h = cc->h;

	if (status == 0) {
		copy->chunks[cc->c].flags |= CH_REMOTE;
		h->stats.fork_bytes += h->chunk;
	} else if (!copy->dying && !copy->lost) {
		copy->lost = true;
		log_warn("pid %ld: fork: cannot write chunk %llu of region %llu "
		    "to its copy: %s; the copy is lost (its program gets "
		    "SIGBUS)", (long)copy->cl->pid, (unsigned long long)cc->c,
		    (unsigned long long)copy->handle, strerror(-status));
	}
	copy_landed(copy, cc->src, cc->c, true);
	if (cc->own == NULL && copy->src != NULL && copy->nshared == 0)
		copy_unlink(copy);
	chunk_copy_end(cc);
}

/*
 * Writes cc's data to the copy's stripe, direct to its memory node
 * whatever the path: the region is its own there, no dpu holds data of it
 * yet, and its next use moves it to the path it should be on.
 */
static void
chunk_write(struct chunk_copy *cc)
{
	struct host *h = cc->h;
	struct region *copy = cc->copy;
	struct fam_conn *conn;
	struct fam_mr *mr;
	unsigned si;
	uint64_t off = host_stripe_offset(h, copy, cc->c, &si);
	struct stripe *s = &copy->stripes[si];
	int rc = -EHOSTDOWN;

	if (s->owned && s->node != NULL && s->node->state == MN_UP) {
		conn = host_node_conn(s, true, &mr);
		rc = fam_conn_writef(conn, &s->remote, off, (uint32_t)h->chunk,
		    cc->buf, NULL, FAM_F_BACKGROUND, chunk_write_done, cc);
	}
	if (rc < 0)
		chunk_write_done(cc, rc, NULL, 0);
}

/*
 * Captures chunk c of src (in the buffer: its data of the fork, since the
 * copy shares it) for copy: c becomes pending. Returns the chunk copy, or
 * NULL when memory is short (the copy is then lost, never wrong).
 */
static struct chunk_copy *
chunk_capture(struct region *src, struct region *copy, uint64_t c,
    struct fork_own *o)
{
	struct host *h = src->cl->h;
	struct chunk_copy *cc = calloc(1, sizeof *cc);

	if (cc != NULL)
		cc->buf = malloc(h->chunk);
	if (cc == NULL || cc->buf == NULL) {
		free(cc);
		copy->lost = true;
		copy_landed(copy, src, c, true);
		return NULL;
	}
	memcpy(cc->buf, src->ar->local + src->off + (c << h->chunk_shift),
	    h->chunk);
	cc->h = h;
	cc->copy = copy;
	cc->src = src;
	cc->c = c;
	cc->own = o;
	bit_set(copy->pending, c);
	copy->busy++;
	src->busy++;
	return cc;
}

/*
 * A write fault of source r on chunk c: each copy still sharing c gets
 * r's data first. Returns 1 when the writer must wait (it is woken when
 * the last copy lands), 0 when nothing is shared.
 */
int
host_fork_unshare(struct region *r, uint64_t c)
{
	struct region *copy, *next;
	int wait = 0;

	for (copy = r->copies; copy != NULL; copy = next) {
		struct chunk_copy *cc;

		next = copy->copy_next;
		if (!bit_get(copy->shared, c))
			continue;
		wait = 1;
		if (bit_get(copy->pending, c))
			continue;
		cc = chunk_capture(r, copy, c, NULL);
		if (cc != NULL)
			chunk_write(cc);
	}
	/* A copy that failed at once has let c go: look again. */
	for (copy = r->copies, wait = 0; copy != NULL; copy = copy->copy_next)
		wait |= bit_get(copy->shared, c);
	return wait;
}

/* ---- discards (DISCARD of the program's range) ----------------------- */

/*
 * Tells whether a copy of source r shares one of chunks [first, first + n)
 * with it: r cannot drop them (a copy reads them from r, and gets them
 * from r's buffer at r's first write), so the program writes zeros over
 * them instead, which copies them out first.
 */
bool
host_fork_source_shares(const struct region *r, uint64_t first, uint64_t n)
{
	for (const struct region *copy = r->copies; copy != NULL;
	    copy = copy->copy_next)
		for (uint64_t c = first; c < first + n; c++)
			if (bit_get(copy->shared, c))
				return true;
	return false;
}

/*
 * Copy r discards chunks [first, first + n): they are no longer its
 * source's. Returns -EBUSY, changing nothing, while one of them is on its
 * way from the source.
 */
int
host_fork_copy_discard(struct region *r, uint64_t first, uint64_t n)
{
	if (r->src == NULL || r->shared == NULL)
		return 0;
	for (uint64_t c = first; c < first + n; c++)
		if (r->pending != NULL && bit_get(r->pending, c))
			return -EBUSY;
	for (uint64_t c = first; c < first + n; c++)
		if (bit_get(r->shared, c)) {
			bit_clr(r->shared, c);
			r->nshared--;
		}
	if (r->nshared == 0)
		copy_unlink(r);
	return 0;
}

/* ---- making a whole copy its own ------------------------------------ */

/* Timer: tries again what waited for a staging slot, a route or a fetch. */
static void
own_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	own_pump(arg);
}

/* Completion of the read of a source's chunk from its stripe. */
static void
chunk_read_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct chunk_copy *cc = ctx;

	if (cc->rs != NULL) /* NULL: read from fragments (ec:K+M) */
		host_route_done(cc->h, cc->rs);
	if (status == 0)
		chunk_write(cc);
	else
		chunk_write_done(cc, status, NULL, 0);
}

/*
 * Starts reading chunk c of the job's source from its stripe, for the
 * copy. Returns 0, or -EAGAIN to try again later.
 */
static int
own_read(struct fork_own *o, uint64_t c)
{
	struct host *h = o->h;
	struct chunk_copy *cc;
	struct fam_conn *conn;
	struct fam_mr *mr;
	const struct fam_remote *remote;
	unsigned si, n = 1;
	uint64_t off = host_stripe_offset(h, o->src, c, &si);
	int rc;

	cc = calloc(1, sizeof *cc);
	if (cc == NULL)
		return -EAGAIN;
	cc->buf = host_staging_get(h, &n);
	if (cc->buf == NULL) {
		free(cc);
		return -EAGAIN;
	}
	cc->staged = true;
	rc = o->src->ec != NULL ? host_ec_check(h, o->src, c) :
	    host_chunk_route(h, o->src, c, true, &cc->rs, &conn, &mr,
	    &remote);
	if (rc == -EAGAIN) {
		host_staging_put(h, cc->buf, 1);
		free(cc);
		return -EAGAIN;
	}
	cc->h = h;
	cc->copy = o->copy;
	cc->src = o->src;
	cc->c = c;
	cc->own = o;
	bit_set(o->copy->pending, c);
	o->copy->busy++;
	o->src->busy++;
	o->out++;
	if (rc == 0 && o->src->ec != NULL) {
		cc->rs = NULL;
		rc = host_ec_read(h, o->src, c, cc->buf, true, chunk_read_done,
		    cc);
	} else if (rc == 0) {
		rc = fam_conn_readf(conn, remote, off, (uint32_t)h->chunk, cc->buf,
		    mr, FAM_F_BACKGROUND, chunk_read_done, cc);
		if (rc < 0)
			host_route_done(h, cc->rs);
	}
	if (rc < 0)
		chunk_write_done(cc, rc, NULL, 0);
	return 0;
}

/* The job is over: the copy shares nothing; references go. */
static void
own_finish(struct fork_own *o)
{
	struct host *h = o->h;
	struct fork_own **pp;

	for (pp = &h->owns; *pp != NULL; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			break;
		}
	if (o->copy->src == o->src)
		copy_unlink(o->copy);
	o->copy->busy--;
	o->src->busy--;
	host_region_idle(o->copy);
	host_region_idle(o->src);
	if (o->f != NULL) {
		o->f->owning--;
		fork_pump(o->f);
	}
	event_free(o->retry);
	free(o);
}

/*
 * Moves the job on: writes what was captured, reads the other shared
 * chunks from the source's stripe (up to FORK_MAX_COPIES out); chunks a
 * fault is reading are left to it. Over when nothing is shared.
 */
static void
own_pump(struct fork_own *o)
{
	struct region *copy = o->copy, *src = o->src;
	struct timeval tv = { 0, FORK_RETRY_US };

	while (o->out < FORK_MAX_COPIES && o->queue != NULL) {
		struct chunk_copy *cc = o->queue;

		o->queue = cc->next;
		o->out++;
		chunk_write(cc);
	}
	while (o->out < FORK_MAX_COPIES && o->next_chunk < copy->nchunks &&
	    !copy->dying) {
		uint64_t c = o->next_chunk;
		struct chunk *ch = &src->chunks[c];
		struct chunk_copy *cc;

		if (!bit_get(copy->shared, c) || bit_get(copy->pending, c)) {
			o->next_chunk++;
			continue;
		}
		if (!src->dying && (ch->state == CH_RESIDENT ||
		    ch->state == CH_EVICTING)) {
			cc = chunk_capture(src, copy, c, o);
			if (cc != NULL) {
				o->out++;
				chunk_write(cc);
			}
		} else if (src->lost) {
			copy->lost = true;
			copy_landed(copy, src, c, true);
		} else if (ch->flags & CH_REMOTE) {
			if (own_read(o, c) < 0) {
				evtimer_add(o->retry, &tv);
				return;
			}
		} else
			copy_landed(copy, src, c, true); /* zeros on both sides */
		o->next_chunk++;
	}
	if (o->out > 0 || o->queue != NULL)
		return;
	if (copy->nshared > 0 && !copy->dying) {
		/* faults are reading some: look again once they landed */
		o->next_chunk = 0;
		evtimer_add(o->retry, &tv);
		return;
	}
	own_finish(o);
}

/*
 * Starts making copy its own. capture: its source is being freed now, so
 * its chunks in the buffer are captured at once (they leave the buffer
 * when this returns).
 */
static int
own_start(struct region *copy, struct host_fork *f, bool capture)
{
	struct host *h = copy->cl->h;
	struct fork_own *o = calloc(1, sizeof *o);
	struct region *src = copy->src;

	if (o == NULL || (o->retry = evtimer_new(h->base, own_retry_cb, o)) ==
	    NULL) {
		free(o);
		return -ENOMEM;
	}
	o->h = h;
	o->copy = copy;
	o->src = src;
	o->f = f;
	copy->busy++;
	src->busy++;
	o->next = h->owns;
	h->owns = o;
	for (uint64_t c = 0; capture && c < copy->nchunks; c++) {
		struct chunk *ch = &src->chunks[c];
		struct chunk_copy *cc;

		if (!bit_get(copy->shared, c) || bit_get(copy->pending, c) ||
		    (ch->state != CH_RESIDENT && ch->state != CH_EVICTING))
			continue;
		cc = chunk_capture(src, copy, c, o);
		if (cc != NULL) {
			cc->next = o->queue;
			o->queue = cc;
		}
	}
	if (f != NULL)
		f->owning++;
	event_active(o->retry, EV_TIMEOUT, 0);
	return 0;
}

/*
 * Region r is being freed (its chunks leave the buffer right after): a
 * copy stops sharing; a source's copies get its data first (its stripes
 * stay until they have).
 */
void
host_fork_region_gone(struct region *r)
{
	copy_unlink(r);
	while (r->copies != NULL) {
		struct region *copy = r->copies;

		r->copies = copy->copy_next;
		copy->copy_next = NULL;
		if (own_start(copy, NULL, true) < 0) {
			log_warn("pid %ld: fork: out of memory; the copy of "
			    "region %llu is lost", (long)copy->cl->pid,
			    (unsigned long long)r->handle);
			copy->lost = true;
			copy->src = NULL;
		}
	}
}

/* ---- forks ---------------------------------------------------------- */

/* Frees what a fork owns; its copies too unless the child has them. */
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
		copy_unlink(r);
		r->dying = true;
		if (r->busy == 0)
			h->region_gone(r);
	}
	if (f->parent != NULL)
		host_client_put(f->parent);
	if (f->later != NULL)
		event_free(f->later);
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

/* The fork cannot be made: err (positive) once nothing is out. */
static void
fork_fail(struct host_fork *f, int err)
{
	if (f->state != FORK_MAKING)
		return;
	log_info("session pid %ld: fork: cannot copy its regions for the "
	    "child: %s", (long)f->parent->pid, strerror(err));
	f->state = FORK_FAILED;
	f->err = err;
	f->since = mono_ns();
}

/*
 * The copies' stripes exist and the parent shares nothing with its own
 * source any more: each copy shares the chunks the parent has data of.
 */
static void
fork_share(struct host_fork *f)
{
	for (size_t k = 0; k < f->nregions; k++) {
		struct region *src = f->src[k], *dst = f->dst[k];

		if (src->lost || src->dying) {
			dst->lost = true;
			continue;
		}
		for (uint64_t c = 0; c < src->nchunks; c++) {
			const struct chunk *ch = &src->chunks[c];

			if (ch->state == CH_RESIDENT || ch->state == CH_EVICTING ||
			    (ch->flags & CH_REMOTE)) {
				bit_set(dst->shared, c);
				dst->nshared++;
			}
		}
		if (dst->nshared > 0) {
			dst->src = src;
			dst->copy_next = src->copies;
			src->copies = dst;
		}
	}
}

/* Answers the parent once the copies are made (or could not be). */
static void
fork_pump(struct host_fork *f)
{
	struct host *h = f->h;

	if (f->creating > 0 || f->owning > 0 || f->answered)
		return;
	if (f->state == FORK_MAKING && f->parent->dead)
		fork_fail(f, ECANCELED);
	if (f->state == FORK_MAKING && host_grain_settle(f->parent) > 0) {
		/* partial chunks leave first (fetch = adaptive) */
		struct timeval tv = { 0, FORK_RETRY_US };

		evtimer_add(f->later, &tv);
		return;
	}
	if (f->state == FORK_MAKING) {
		fork_share(f);
		f->state = FORK_READY;
		f->since = mono_ns();
	}
	f->answered = true;
	fork_thaw(f);
	if (f->state == FORK_FAILED)
		h->stats.fork_errors++;
	if (h->fork_done != NULL)
		h->fork_done(f->parent, f->state == FORK_READY ? f->token : 0,
		    f->state == FORK_READY ? 0 : f->err);
}

/* From the loop: answers a fork that had nothing to wait for. */
static void
fork_later_cb(evutil_socket_t fd, short what, void *arg)
{
	fork_pump(arg);
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

/* Makes the copy of region src (reserved nowhere yet): its struct. */
static struct region *
fork_region_new(struct region *src)
{
	struct region *r = calloc(1, sizeof *r);
	size_t words = (src->nchunks + 63) / 64;

	if (r == NULL)
		return NULL;
	r->chunks = calloc(src->nchunks, sizeof *r->chunks);
	r->shared = calloc(words, sizeof *r->shared);
	r->pending = calloc(words, sizeof *r->pending);
	r->stripes = calloc(src->width, sizeof *r->stripes);
	if (r->chunks == NULL || r->shared == NULL || r->pending == NULL ||
	    r->stripes == NULL) {
		free(r->stripes);
		free(r->chunks);
		free(r->shared);
		free(r->pending);
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
	host_ra_reset(r);
	/* A copy is not replicated: one copy of each column, the first. */
	r->width = src->width;
	r->ncopies = 1;
	r->nstripes = src->width;
	return r;
}

/* Asks the memory nodes for the stripes of the copy dst of src. */
static int
fork_region_create(struct host_fork *f, struct region *src,
    struct region *dst)
{
	uint8_t buf[FAM_REGION_CREATE_MIN + FAM_NAME_MAX + FAM_PATH_MAX];

	for (unsigned i = 0; i < dst->nstripes; i++) {
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
		/* ec:K+M: a copy is not coded, its stripe holds whole chunks */
		rc.size = src->stripes[i].remote.size;
		if (src->ec != NULL)
			rc.size = rc.size / host_ec_frag(src) *
			    src->cl->h->chunk;
		if (src->flags & FAM_S_ALLOC_SPARSE)
			rc.flags = FAM_RF_SPARSE;
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
 * each of its writes is seen: waits until the fork is made, then gives the
 * copies sharing that chunk their data first.
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

			/* (written while written back: EVICTING, unprotected) */
			if ((ch->state != CH_RESIDENT &&
			    ch->state != CH_EVICTING) || !(ch->flags & CH_UNPROT))
				continue;
			rc = uffd_protect(cl->uffd, r->ar->uaddr + r->off +
			    (c << h->chunk_shift), h->chunk, true);
			if (rc < 0 && rc != -ESRCH)
				return rc;
			ch->flags &= ~CH_UNPROT;
		}
	return 0;
}

/* Lists the parent's arenas and regions (not files) in the fork. */
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
		f->dst[f->nregions] = fork_region_new(r);
		if (f->dst[f->nregions++] == NULL)
			return -ENOMEM;
	}
	return 0;
}

/*
 * FORK: makes a copy of each of the program's regions for its child, each
 * sharing the program's chunks; h->fork_done answers (never from inside
 * this call). Returns 0, or -errno at once.
 */
int
host_fork_start(struct host_client *cl)
{
	struct host *h = cl->h;
	struct host_fork *f = calloc(1, sizeof *f);
	int rc;

	if (f == NULL)
		return -ENOMEM;
	f->h = h;
	f->uid = cl->uid;
	f->parent = cl;
	cl->refs++;
	f->since = mono_ns();
	f->state = FORK_MAKING;
	f->next = h->forks;
	h->forks = f;
	rc = getrandom(&f->token, sizeof f->token, 0) ==
	    (ssize_t)sizeof f->token ? 0 : -EIO;
	if (rc == 0 && f->token == 0)
		f->token = 1;
	f->later = evtimer_new(h->base, fork_later_cb, f);
	if (rc == 0)
		rc = f->later == NULL ? -ENOMEM : fork_list(f, cl);
	for (size_t k = 0; rc == 0 && k < f->nregions; k++)
		rc = fork_region_create(f, f->src[k], f->dst[k]);
	if (rc == 0)
		rc = fork_freeze(cl);
	/* A parent that is itself a copy: its shared chunks become its own. */
	for (size_t k = 0; rc == 0 && k < f->nregions; k++)
		if (f->src[k]->src != NULL)
			rc = own_start(f->src[k], f, false);
	if (rc < 0) {
		fork_fail(f, -rc);
		f->answered = true; /* the session answers rc */
		fork_thaw(f);
		if (f->creating == 0 && f->owning == 0)
			fork_free(f);
		return rc;
	}
	h->stats.forks++;
	event_active(f->later, EV_TIMEOUT, 0);
	return 0;
}

/* The fork whose token this is, or NULL. */
struct host_fork *
host_fork_find(struct host *h, uint64_t token)
{
	for (struct host_fork *f = h->forks; f != NULL; f = f->next)
		if (f->token == token && token != 0)
			return f;
	return NULL;
}

/*
 * The child's ADOPT: gives its session the copies (their arenas are the
 * session's to make: the parent's arena of each region in *region_arena)
 * and the parent's arenas; *first when this call claimed them. Returns 0,
 * or -errno: the fork failed, or is someone else's.
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
	if (f->state == FORK_MAKING)
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

/* An arena's memfd went to the child: the fork goes with the last. */
void
host_fork_handed(struct host_fork *f)
{
	for (size_t i = 0; i < f->narenas; i++)
		if (!f->arenas[i].handed)
			return;
	fork_free(f);
}

/* A session ended: the forks its child claimed are done with. */
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

/* Frees the forks no child claimed in FORK_CLAIM_NS (a child that died). */
void
host_fork_tick(struct host *h)
{
	struct host_fork *f, *next;
	uint64_t now = mono_ns();

	for (f = h->forks; f != NULL; f = next) {
		next = f->next;
		if ((f->state == FORK_READY || f->state == FORK_FAILED) &&
		    f->creating == 0 && f->owning == 0 &&
		    now - f->since >= FORK_CLAIM_NS) {
			log_info("fork: copies of %zu regions were not claimed "
			    "by a child in %llu s; released", f->nregions,
			    (unsigned long long)(FORK_CLAIM_NS / 1000000000u));
			fork_free(f);
		}
	}
}

/*
 * Frees the forks and jobs famd stops with (its connections are closed:
 * nothing is out any more but a job's wait for its timer).
 */
void
host_fork_fini(struct host *h)
{
	struct host_fork *f, *next;

	while (h->owns != NULL && h->owns->out == 0) {
		struct fork_own *o = h->owns;

		while (o->queue != NULL) {
			struct chunk_copy *cc = o->queue;

			o->queue = cc->next;
			cc->own = NULL;
			chunk_copy_end(cc);
		}
		o->copy->nshared = 0;
		own_finish(o);
	}
	for (f = h->forks; f != NULL; f = next) {
		next = f->next;
		if (f->creating == 0 && f->owning == 0)
			fork_free(f);
	}
}
