/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-fault.c - the fault service: programs' page faults and the chunk
 * fetches that serve them.
 *
 * Owns: the fetch queues (demand, read-ahead, parked), the reads in flight
 * (h->inflight), installs (UFFDIO_COPY from a staging
 * slot, or, with install = continue over tcp, UFFDIO_CONTINUE of the pages
 * the read filled in the arena's memfd through famd's mapping), and
 * h->wake, the deferred wake-up lower layers activate (host_wake).
 * A fetch: queued -> frame reserved -> read out (or zero-filled) ->
 *   installed; or parked while its stripe cannot be reached, until its node
 *   returns or op_timeout passes; or failed (its waiters get SIGBUS: the
 *   chunk's missing pages poisoned, or a signal: host-sigbus.c).
 * Fetches of chunks that follow each other on one memory node go out as
 * one read (up to FETCH_RUN_BYTES), routed once, and go in with one
 * UFFDIO_COPY (or UFFDIO_CONTINUE) when adjacent in the program; each chunk
 * succeeds or fails on its own. A read the dpu failed gets a new deadline
 * to go direct.
 * Read into the arena (fetch.direct): the chunk's pages are in the memfd
 * before they are mapped, so a touch meanwhile is a minor fault, which
 * waits on the fetch like a missing one; a read that fails punches what it
 * left there; a region freed while such reads are out keeps its arena
 * space until they are over (region.filling, keep_space).
 * Locks: none; everything runs on the control loop.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <event2/event.h>

#include "host/host.h"
#include "host/host-uffd.h"

#define FAULT_BATCH     64
#define PAGE            4096u
#define RA_PROBE        8 /* a writing run: 1 read-ahead in 8 protected */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

_Static_assert(FETCH_RUN_BYTES <= FAM_RW_MAX, "a run is one READ");

/* Returns the program's address of chunk c of r. */
static uint64_t
chunk_uaddr(const struct host *h, const struct region *r, uint64_t c)
{
	return r->ar->uaddr + r->off + (c << h->chunk_shift);
}

/* Returns famd's own mapping of chunk c of r (in its arena's memfd). */
static uint8_t *
chunk_local(const struct host *h, const struct region *r, uint64_t c)
{
	return r->ar->local + r->off + (c << h->chunk_shift);
}

/*
 * Adds a served fault's stages to the breakdown: from the fault to its
 * read going out, the read on the wire, the install (now).
 */
static void
fault_breakdown(struct host *h, const struct fetch *f, uint64_t now)
{
	uint64_t sent = f->sent_ns > f->fault_ns ? f->sent_ns : f->fault_ns;

	if (f->sent_ns == 0 || f->reply_ns < sent || now < f->reply_ns)
		return;
	h->stats.bd_reads++;
	h->stats.bd_queue_ns += sent - f->fault_ns;
	h->stats.bd_wire_ns += f->reply_ns - sent;
	h->stats.bd_install_ns += now - f->reply_ns;
}

/* Appends f to a queue. */
static void
queue_push(struct fetch **head, struct fetch **tail, struct fetch *f)
{
	f->next = NULL;
	if (*tail != NULL)
		(*tail)->next = f;
	else
		*head = f;
	*tail = f;
}

/*
 * Installs len bytes of f's read, from chunk f->chunk on (adjacent in the
 * program): maps the pages the read filled (direct), or copies them in.
 */
static int
fetch_install(struct host *h, struct fetch *f, uint64_t len)
{
	struct region *r = f->r;
	uint64_t at = (uint64_t)f->g_first << h->grain_shift;

	if (f->direct)
		return uffd_continue(r->cl->uffd, chunk_uaddr(h, r, f->chunk),
		    len, true);
	if (f->g_n > 0) /* its grains (fetch = adaptive) */
		len = host_grain_bytes(h, f);
	f->writable = host_fetch_writable(h, f);
	return uffd_copy(r->cl->uffd, chunk_uaddr(h, r, f->chunk) + at,
	    f->zero ? h->zero : f->staging, len, !f->writable);
}

/* Drops what a read into the arena left of f's chunk (it is not served). */
static void
fetch_unfill(struct host *h, struct fetch *f)
{
	if (f->direct && f->r->ar != NULL)
		host_chunks_punch(h, f->r, f->chunk, 1);
	f->direct = false;
}

static void fault(struct host_client *cl, uint64_t addr, uint64_t flags,
    pid_t tid);

/*
 * A partial fetch is over: its waiters whose page it did not bring are
 * served again (their page is still missing, or now in place: woken).
 */
static void
fetch_reserve(struct host *h, struct fetch *f)
{
	struct chunk *ch = &f->r->chunks[f->chunk];
	uint64_t base = chunk_uaddr(h, f->r, f->chunk);

	for (unsigned i = 0; i < f->nwaiters; i++)
		if (f->waddr[i] != 0 && (f->waddr[i] < base ||
		    f->waddr[i] - base >= h->chunk ||
		    !host_grain_has(h, ch, f->waddr[i] - base)))
			fault(f->r->cl, f->waddr[i], 0, f->waiters[i]);
		else if (f->waddr[i] != 0 && ch->state != CH_ABSENT)
			uffd_wake(f->r->cl->uffd,
			    f->waddr[i] & ~(uint64_t)(PAGE - 1), PAGE);
}

/* Finishes a fetch: installs the chunk or fails its waiters. */
static void
fetch_complete(struct host *h, struct fetch *f, int status)
{
	struct region *r = f->r;
	struct host_client *cl = r->cl;
	struct chunk *ch = &r->chunks[f->chunk];

	if (r->dying || cl->dead) {
		if (f->frame >= 0)
			host_frame_put(h, (uint32_t)f->frame);
		if (f->grow)
			host_grain_ungrown(h, f);
		status = -ESRCH;
		goto out;
	}
	if (status == 0 && !f->installed)
		status = fetch_install(h, f, h->chunk);
	if (f->grow && status == 0) {
		host_grain_installed(h, f); /* more of a partial chunk */
		host_grain_written(h, f);
		goto out;
	}
	if (status == 0) {
		enum host_admit admit = host_chunk_admitted(h, ch,
		    f->fault_ns != 0);
		bool ahead = f->prefetch && f->nwaiters == 0; /* read ahead */

		ch->state = CH_RESIDENT;
		ch->frame = (uint32_t)f->frame;
		ch->fetch = NULL;
		if (admit == HOST_ADMIT_REFAULT) /* heated */
			host_frame_heat(h, ch->frame, r->ra_window == 0);
		host_grain_installed(h, f);
		host_grain_written(h, f);
		/*
		 * Scan resistance: a chunk brought in by a sequential run
		 * (read ahead, or faulted while the run's window is open)
		 * gets no second chance, so a stream does not push out the
		 * chunks used at random.
		 */
		if (ahead) {
			ch->flags |= CH_PREFETCH;
			ch->flags &= ~CH_REF; /* went in writable: no chance */
		} else if (r->ra_window == 0) {
			ch->flags |= CH_REF;
			if (admit == HOST_ADMIT_REFAULT)
				host_loop_refault(h); /* used at random */
		}
		if (ahead || r->ra_window != 0) /* a run's */
			host_loop_keep(h, r, (uint32_t)f->frame,
			    admit != HOST_ADMIT_NEW);
		r->resident++;
		if (f->src != NULL && !(ch->flags & CH_DIRTY)) {
			/* the source's data: not on this region's stripe yet */
			ch->flags |= CH_DIRTY;
			r->dirty++;
			h->dirty++;
		}
		if (f->fault_ns != 0) {
			uint64_t done = f->done_ns != 0 ? f->done_ns :
			    mono_ns();

			host_fault_latency(h, done > f->fault_ns ?
			    done - f->fault_ns : 0);
			fault_breakdown(h, f, done);
		}
		goto out;
	}
	/* Not served: the chunk stays absent (or partial); waiters: SIGBUS. */
	if (f->grow) {
		host_grain_written(h, f); /* what went in may be written */
		host_grain_ungrown(h, f);
	} else {
		fetch_unfill(h, f);
		ch->state = CH_ABSENT;
		ch->fetch = NULL;
		if (f->frame >= 0)
			host_frame_put(h, (uint32_t)f->frame);
	}
	if (status != -ESRCH) {
		uint64_t at, len;
		char why[240];
		int n;

		h->stats.fetch_errors += !f->zero && status != -ENOSPC;
		n = snprintf(why, sizeof why, "cannot bring in chunk %llu of "
		    "region %llu: %s", (unsigned long long)f->chunk,
		    (unsigned long long)r->handle, strerror(-status));
		if (status == -ENOBUFS && h->writeback_err < 0 && n > 0 &&
		    (size_t)n < sizeof why)
			snprintf(why + n, sizeof why - (size_t)n, " (the "
			    "buffer is full of dirty chunks, and writing them "
			    "back fails: %s)", strerror(-h->writeback_err));
		for (unsigned i = 0; i < f->nwaiters; i++) {
			host_grain_span(h, f, i, &at, &len);
			host_sigbus(h, cl, f->waiters[i], at, len, why);
		}
		if (f->nwaiters == 0 && status != -ENOSPC)
			log_rl(LOG_INFO, "pid %ld: read-ahead failed: %s",
			    (long)cl->pid, why);
	}
out:
	if (f->src != NULL)
		host_fork_fetched(r, f->chunk, f->src, status == 0);
	if (status == 0 && f->g_n > 0)
		fetch_reserve(h, f);
	r->busy--;
	host_region_idle(r);
	free(f);
}

/*
 * Returns true if a failed read of f should wait for its node to return.
 * A read the dpu failed (its link lost or timed out) gets one new deadline
 * when the host may go around the dpu (fallback = direct).
 */
static bool
fetch_may_park(struct host *h, struct fetch *f, struct stripe *s, int status)
{
	uint64_t limit = (uint64_t)cfg_int(h->d->cfg, CFG_OP_TIMEOUT) * 1000000u;

	if (f->r->dying || f->r->lost || f->r->cl->dead)
		return false;
	if (host_replica_failover(h, s, f->chunk, status)) {
		f->start_ns = mono_ns(); /* another copy has it: a new try */
		return true;
	}
	if (f->via_dpu && !f->retried && h->fallback == CFG_FALLBACK_DIRECT &&
	    (status == -ECONNRESET || status == -ETIMEDOUT ||
	    status == -EHOSTDOWN || status == -ENOTCONN)) {
		f->retried = true;
		f->start_ns = mono_ns();
		return true;
	}
	/*
	 * Over verbs, a memory famd that dies deregisters its memory before
	 * its connections fail, and a READ posted in between completes with
	 * a remote access error (the connection is closed then): tried once
	 * more, at the next tick, when its node can be reached again (parked
	 * until then). A lease refused again is the read's own failure.
	 */
	if (status == -EACCES && !f->denied_once &&
	    mono_ns() - f->start_ns < limit) {
		f->denied_once = true;
		return true;
	}
	return (status == -ECONNRESET || status == -EHOSTDOWN ||
	    status == -ENOTCONN) && mono_ns() - f->start_ns < limit;
}

/*
 * Fails, or parks until its node returns (or for another copy), each chunk
 * of a read from stripe s (NULL: none was read).
 */
static void
fetch_run_failed(struct host *h, struct fetch *f, struct stripe *s,
    int status)
{
	while (f != NULL) {
		struct fetch *next = f->run;

		f->run = NULL;
		f->nrun = 0;
		f->staging = NULL;
		fetch_unfill(h, f);
		if (fetch_may_park(h, f, s, status))
			queue_push(&h->parked, &h->parked_tail, f);
		else
			fetch_complete(h, f, status);
		f = next;
	}
}

/*
 * Installs a read of several chunks adjacent in the program (one stripe):
 * first the chunks threads wait for, each on its own, so that those
 * threads wake before the rest is copied; then the others, a span of
 * adjacent ones per UFFDIO_COPY (or UFFDIO_CONTINUE). A chunk whose install
 * failed is tried again on its own by fetch_complete() (pages already in
 * place are skipped).
 */
static void
fetch_install_run(struct host *h, struct fetch *f)
{
	struct fetch *span = NULL, *g;
	unsigned nspan = 0;
	bool sw = false; /* the span goes in writable */

	for (g = f; g != NULL; g = g->run)
		if (g->nwaiters > 0 && fetch_install(h, g, h->chunk) == 0) {
			g->installed = true;
			g->done_ns = mono_ns();
		}
	for (g = f;; g = g->run) {
		if (g != NULL && !g->installed && (nspan == 0 ||
		    (g->chunk == span->chunk + nspan &&
		    host_fetch_writable(h, g) == sw))) {
			if (nspan++ == 0) {
				span = g;
				sw = host_fetch_writable(h, g);
			}
			continue;
		}
		if (nspan > 0 && fetch_install(h, span,
		    (uint64_t)nspan << h->chunk_shift) == 0) {
			bool writable = span->writable;

			for (unsigned i = 0; i < nspan; i++, span = span->run) {
				span->installed = true;
				span->writable = writable; /* as it went in */
				span->done_ns = mono_ns();
			}
		}
		nspan = 0;
		if (g == NULL)
			break;
		if (!g->installed) {
			span = g;
			nspan = 1;
			sw = host_fetch_writable(h, g);
		}
	}
}

/* Completion of a read of one or more chunks from a memory node. */
static void
fetch_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct fetch *f = ctx, *next;
	struct region *r = f->r;
	struct host *h = r->cl->h;
	struct stripe *s = NULL;
	uint8_t *staging = f->direct ? NULL : f->staging;
	unsigned n = f->nrun;
	uint64_t now = mono_ns();

	if (f->direct)
		r->filling--;
	for (struct fetch *g = f; g != NULL; g = g->run)
		g->reply_ns = now;
	h->inflight -= n;
	if (f->s != NULL) {
		/* the read was routed once, for all its chunks */
		host_route_done(h, f->s);
		s = f->s;
		f->s = NULL;
	}
	if (status < 0) {
		if (staging != NULL)
			host_staging_put(h, staging, n);
		fetch_run_failed(h, f, s, status);
		host_fetch_kick(h);
		return;
	}
	if (n > 1 && r->width == 1 && !r->dying && !r->cl->dead)
		fetch_install_run(h, f);
	for (; f != NULL; f = next) {
		next = f->run;
		if (f->prefetch && f->nwaiters == 0) {
			h->stats.prefetches++;
			h->stats.prefetch_bytes += h->chunk;
		} else {
			h->stats.fetches++;
			h->stats.fetch_bytes += host_grain_bytes(h, f);
		}
		fetch_complete(h, f, 0);
	}
	if (staging != NULL)
		host_staging_put(h, staging, n);
	host_fetch_kick(h);
}

/*
 * Returns how many chunks to read with f, at most room (and at least 1):
 * f and the fetches queued right after it that continue it on the same
 * memory node, whole chunks each, given a frame here (without evicting).
 * f is at foff of its stripe s (the copy read, which must hold each of
 * them up to date). Through the dpu (via_dpu) a read does not cross a
 * multiple of the piece size the dpu gave at hello (its dynamic cache's
 * entries), or of FETCH_RUN_BYTES: its caches serve a read within one
 * piece best.
 */
static unsigned
fetch_run_len(struct host *h, struct fetch *f, const struct stripe *s,
    uint64_t foff, bool via_dpu, unsigned room)
{
	unsigned limit = FETCH_RUN_BYTES >> h->chunk_shift, n = 1;
	struct fetch *last = f;

	if (via_dpu) {
		uint64_t piece = FETCH_RUN_BYTES;

		if (h->dpu.piece_shift != 0 &&
		    (1ull << h->dpu.piece_shift) < piece)
			piece = 1ull << h->dpu.piece_shift;
		if (piece < h->chunk)
			piece = h->chunk;
		limit = (unsigned)((piece - (foff & (piece - 1))) >>
		    h->chunk_shift);
	}
	if (limit > room)
		limit = room;
	for (struct fetch *g = f->next; g != NULL && n < limit; g = g->next) {
		unsigned si;
		uint64_t off;

		if (g->r != f->r || g->zero || g->src != NULL || g->g_n > 0 ||
		    g->chunk != last->chunk + f->r->width ||
		    (f->r->ncopies > 1 && !host_replica_valid(s,
		    g->chunk / f->r->width)))
			break;
		off = host_stripe_offset(h, g->r, g->chunk, &si);
		if (host_stripe_len(h, &g->r->stripes[si], off) != h->chunk)
			break;
		if (g->frame < 0) {
			int64_t fr = host_frame_get(h);

			if (fr < 0)
				break;
			g->frame = fr;
			h->frames[fr].r = g->r;
			h->frames[fr].chunk = g->chunk;
		}
		last = g;
		n++;
	}
	return n;
}

/* Takes the fetch at the head of a queue off it. */
static struct fetch *
queue_pop(struct fetch **head, struct fetch **tail)
{
	struct fetch *f = *head;

	if ((*head = f->next) == NULL)
		*tail = NULL;
	f->next = NULL;
	return f;
}

/* Takes f, the head of its queue (demand or read-ahead), off it. */
static void
fetch_dequeue(struct host *h, struct fetch *f, bool demand)
{
	if (demand) {
		if ((h->demandq = f->next) == NULL)
			h->demandq_tail = NULL;
	} else if ((h->prefetchq = f->next) == NULL)
		h->prefetchq_tail = NULL;
}

/*
 * Takes room in the buffer for f: a frame (returned), or more pages for
 * its resident chunk's frame when it grows one (returns 0); -1 when full.
 */
static int64_t
fetch_room(struct host *h, struct fetch *f)
{
	uint32_t pages = host_grain_pages(h, f);

	if (!f->grow)
		return host_frame_take(h, pages);
	if (host_frame_grow(h, f->r->chunks[f->chunk].frame, pages) < 0)
		return -1;
	f->g_pages = pages;
	return 0;
}

/*
 * Gives f a frame (evicting for a fetch a thread waits for, never for
 * read-ahead): 0 when it has one, -EAGAIN when it waits for a write-back
 * to make room, or the status to fail it with: -ENOSPC (no room to read
 * ahead), -ENOBUFS (a fault waited op_timeout for room: the buffer is
 * full of dirty chunks whose memory node is unreachable).
 */
static int
fetch_frame(struct host *h, struct fetch *f, bool urgent, uint64_t limit)
{
	int64_t fr;

	if (f->frame >= 0 || (f->grow && f->g_pages > 0))
		return 0;
	fr = fetch_room(h, f);
	if (fr < 0 && !urgent)
		return -ENOSPC;
	while (fr < 0 && host_evict_for_room(h))
		fr = fetch_room(h, f);
	if (fr < 0 && mono_ns() - f->start_ns >= limit)
		return -ENOBUFS;
	if (fr < 0) {
		if (!f->counted_wait) {
			h->stats.fault_waits_for_room++;
			f->counted_wait = true;
		}
		return -EAGAIN;
	}
	if (f->grow)
		return 0;
	f->frame = fr;
	h->frames[fr].r = f->r;
	h->frames[fr].chunk = f->chunk;
	return 0;
}

/*
 * f, the head of its queue, has no route now (host_route's rc): it fails
 * (EIO: its region is lost) or is parked until its node is back.
 */
static void
fetch_unrouted(struct host *h, struct fetch *f, bool demand, int rc)
{
	fetch_dequeue(h, f, demand);
	if (rc == -EIO)
		fetch_complete(h, f, -EIO);
	else
		queue_push(&h->parked, &h->parked_tail, f);
}

/*
 * Tells whether f's read may go straight into its arena (install =
 * continue): a chunk of the memory nodes, not a fork's copy of another
 * region's, in an arena the program has mapped, not a read that may be
 * hedged.
 */
static bool
fetch_direct_ok(const struct host *h, const struct fetch *f)
{
	const struct arena *ar = f->r->ar;

	return h->cont_ok && f->src == NULL && !f->zero && f->g_n == 0 &&
	    ar != NULL && ar->local != NULL && ar->uaddr != 0 &&
	    !host_hedge_on(h, f->r); /* a late answer would land there */
}

/*
 * Gives f's read of *n chunks its destination: the chunks' pages in the
 * arena when they follow each other there, allocated and mapped in famd
 * now (MADV_POPULATE_WRITE: one call, not a page fault per page, and an
 * allocation failure is an error here, not a SIGBUS in famd mid-receive),
 * or else staging slots (*n may shrink). Returns whether the read goes
 * into the arena.
 */
static bool
fetch_dest(struct host *h, struct fetch *f, unsigned *n)
{
	/* a run of a striped region: its chunks are apart in the arena */
	if (fetch_direct_ok(h, f) && (*n == 1 || f->r->nstripes == 1)) {
		uint8_t *dst = chunk_local(h, f->r, f->chunk);

		if (madvise(dst, (size_t)*n << h->chunk_shift,
		    MADV_POPULATE_WRITE) == 0) {
			f->staging = dst;
			return true;
		}
		log_rl(LOG_INFO, "pid %ld: cannot allocate chunks in its arena "
		    "(%s): reading into staging buffers", (long)f->r->cl->pid,
		    strerror(errno));
	}
	f->staging = host_staging_get(h, n);
	return false;
}

/*
 * Sends the read of f, the head of its queue, and of the fetches after it
 * that continue it on the same memory node (one read, one route), or
 * parks or fails f when its stripe cannot be reached now.
 */
static void
fetch_send(struct host *h, struct fetch *f, bool demand, bool urgent,
    unsigned max)
{
	struct fam_conn *conn;
	const struct fam_remote *remote;
	struct fam_mr *mr;
	struct fetch *last = f;
	unsigned si, n;
	uint64_t off = host_stripe_offset(h, f->r, f->chunk, &si);
	struct stripe *s;
	uint32_t len;
	bool via_dpu, direct;
	int rc = host_chunk_route(h, f->r, f->chunk, !urgent, &s, &conn, &mr,
	    &remote);

	if (rc < 0) {
		fetch_unrouted(h, f, demand, rc);
		return;
	}
	via_dpu = h->has_dpu && (conn == h->dpu.conn || conn == h->dpu.bg);
	len = host_stripe_len(h, s, off);
	n = len == h->chunk && f->g_n == 0 ? fetch_run_len(h, f, s, off,
	    via_dpu, max - h->inflight) : 1;
	if (f->g_n > 0) { /* its grains only (fetch = adaptive) */
		off += (uint64_t)f->g_first << h->grain_shift;
		len = (uint32_t)host_grain_bytes(h, f);
	}
	direct = fetch_dest(h, f, &n);
	/* f and the n - 1 fetches after it in its queue: one read. */
	for (unsigned i = 0; i < n; i++) {
		struct fetch *g = demand ?
		    queue_pop(&h->demandq, &h->demandq_tail) :
		    queue_pop(&h->prefetchq, &h->prefetchq_tail);

		g->staging = f->staging + ((size_t)i << h->chunk_shift);
		g->direct = direct;
		g->via_dpu = via_dpu;
		last->run = g == f ? NULL : g;
		last = g;
	}
	last->run = NULL;
	f->nrun = n;
	f->s = s;
	if (len < h->chunk && f->g_n == 0) /* a file's end: zeros after */
		memset(f->staging + len, 0, h->chunk - len);
	for (struct fetch *g = f; g != NULL; g = g->run)
		g->sent_ns = mono_ns();
	f->r->filling += direct;
	len += (uint32_t)((uint64_t)(n - 1) << h->chunk_shift);
	/* a region of one copy, direct: a fault-service thread's, if any */
	rc = via_dpu || f->r->ncopies > 1 ? -EAGAIN : host_fthread_read(h,
	    f->r, f->chunk, s, remote, off, len, f->staging,
	    urgent ? 0 : FAM_F_BACKGROUND, fetch_done, f);
	if (rc == -EAGAIN) {
		rc = host_hedge_read(h, f, s, conn, remote, direct ? NULL : mr,
		    off, len, urgent ? 0 : FAM_F_BACKGROUND, fetch_done);
		if (rc == 0 && urgent) /* a fault waits: not at the round's end */
			(void)fam_conn_flush(conn);
	}
	if (rc < 0) {
		f->r->filling -= direct;
		f->s = NULL;
		host_route_done(h, s);
		if (!direct)
			host_staging_put(h, f->staging, n);
		fetch_run_failed(h, f, s, rc);
		return;
	}
	h->inflight += n;
	h->stats.reads++;
	h->stats.reads_coalesced += n > 1;
}

/*
 * Brings in chunk f->chunk of a copy from its source (host-fork.c): from
 * the source's buffer frame when it is there, else from the source's
 * stripe, else zeros; or (no source) of a region with ec:K+M, from K of
 * its fragments. f heads its queue; a staging slot is free.
 */
static void
fetch_send_src(struct host *h, struct fetch *f, bool demand, bool urgent)
{
	struct region *src = f->src != NULL ? f->src : f->r;
	const struct chunk *sc = &src->chunks[f->chunk];
	struct fam_conn *conn;
	const struct fam_remote *remote;
	struct fam_mr *mr;
	unsigned si, n = 1;
	uint64_t off = host_stripe_offset(h, src, f->chunk, &si);
	struct stripe *s = NULL;
	uint8_t *staging;
	int rc;
	bool from_node = src->dying || (sc->state != CH_RESIDENT &&
	    sc->state != CH_EVICTING);

	if (from_node) {
		if (!(sc->flags & CH_REMOTE)) {
			fetch_dequeue(h, f, demand);
			f->zero = true;
			fetch_complete(h, f, 0);
			return;
		}
		rc = src->ec != NULL ? host_ec_check(h, src, f->chunk) :
		    host_chunk_route(h, src, f->chunk, !urgent, &s, &conn,
		    &mr, &remote);
		if (rc < 0) {
			fetch_unrouted(h, f, demand, rc);
			return;
		}
	}
	fetch_dequeue(h, f, demand);
	f->staging = host_staging_get(h, &n);
	f->nrun = 1;
	h->stats.fork_reads += f->src != NULL;
	if (from_node) {
		f->s = s; /* NULL: ec:K+M, K fragments read (host_ec_read) */
		rc = src->ec != NULL ? host_ec_read(h, src, f->chunk,
		    f->staging, !urgent, fetch_done, f) :
		    fam_conn_readf(conn, remote, off, (uint32_t)h->chunk,
		    f->staging, mr, urgent ? 0 : FAM_F_BACKGROUND, fetch_done, f);
		if (rc < 0) {
			f->s = NULL;
			if (s != NULL)
				host_route_done(h, s);
			host_staging_put(h, f->staging, 1);
			fetch_run_failed(h, f, NULL, rc);
			return;
		}
		h->inflight++;
		h->stats.reads++;
		return;
	}
	staging = f->staging;
	memcpy(staging, src->ar->local + src->off +
	    (f->chunk << h->chunk_shift), h->chunk);
	fetch_complete(h, f, 0); /* installs it, and frees f */
	host_staging_put(h, staging, 1);
}

/*
 * Starts what the queues allow: frames for waiting fetches, zero-fills at
 * once, reads up to max_fetches. A fault that waited one and a half
 * op_timeout for room fails: the write-backs that make its room, started
 * as it began to wait, may each take op_timeout (a copy's node that stalls
 * is given up on then, and the write-back succeeds on the others).
 */
void
host_fetch_kick(struct host *h)
{
	unsigned max = (unsigned)cfg_int(h->d->cfg, CFG_HOST_MAX_FETCHES);
	uint64_t limit = (uint64_t)cfg_int(h->d->cfg, CFG_OP_TIMEOUT) *
	    1500000u;

	if (max > h->nstaging)
		max = h->nstaging;
	for (;;) {
		bool demand = h->demandq != NULL, urgent;
		struct fetch *f = demand ? h->demandq : h->prefetchq;
		int status = 0;

		if (f == NULL)
			return;
		urgent = demand || f->nwaiters > 0; /* a thread waits for it */
		if (!f->r->dying && !f->r->cl->dead) {
			status = fetch_frame(h, f, urgent, limit);
			if (status == -EAGAIN)
				return; /* a write-back will make room */
			if (status == 0 && !f->zero) {
				if (h->inflight >= max || h->nstaging_free == 0)
					return;
				if (f->src != NULL || f->r->ec != NULL)
					fetch_send_src(h, f, demand, urgent);
				else
					fetch_send(h, f, demand, urgent, max);
				continue;
			}
			if (status == 0 && urgent)
				h->stats.zero_fills++;
			else if (status == 0)
				h->stats.prefetch_zero++;
		}
		fetch_dequeue(h, f, demand);
		fetch_complete(h, f, status);
	}
}

/*
 * Moves parked fetches whose node is back to the queues and fails those
 * past their deadline.
 */
void
host_fetch_unpark(struct host *h)
{
	struct fetch *f = h->parked, *next;
	uint64_t limit = (uint64_t)cfg_int(h->d->cfg, CFG_OP_TIMEOUT) * 1000000u;
	uint64_t now = mono_ns();

	h->parked = h->parked_tail = NULL;
	/* Those that still cannot go are parked again by host_fetch_kick(). */
	for (; f != NULL; f = next) {
		next = f->next;
		if (f->r->dying || f->r->cl->dead)
			fetch_complete(h, f, 0);
		else if (f->r->lost)
			fetch_complete(h, f, -EIO);
		else if (now - f->start_ns >= limit)
			fetch_complete(h, f, -ETIMEDOUT);
		else
			queue_push(f->nwaiters > 0 ? &h->demandq : &h->prefetchq,
			    f->nwaiters > 0 ? &h->demandq_tail :
			    &h->prefetchq_tail, f);
	}
	host_fetch_kick(h);
}

/* The deferred wake-up: runs what lower layers asked for (host_wake). */
static void
fault_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct host *h = arg;
	unsigned want = h->wake_what;

	h->wake_what = 0;
	if (want & HOST_WAKE_UNPARK)
		host_fetch_unpark(h);
	else if (want & HOST_WAKE_KICK)
		host_fetch_kick(h);
}

/* Background eviction's next slice, then what its room lets start. */
static void
evict_cb(evutil_socket_t fd, short what, void *arg)
{
	struct host *h = arg;

	if (h->stopping)
		return;
	host_evict_background(h);
	host_fetch_kick(h);
}

/*
 * Runs background eviction after the loop has polled its descriptors
 * again (a timer of no delay): reads asked for go out first.
 */
void
host_evict_soon(struct host *h)
{
	static const struct timeval now;

	if (h->evict_ev != NULL && !evtimer_pending(h->evict_ev, NULL))
		evtimer_add(h->evict_ev, &now);
}

/* Creates the deferred wake-up and eviction on the host's loop. */
int
host_fault_init(struct host *h)
{
	h->wake = event_new(h->base, -1, 0, fault_wake_cb, h);
	h->evict_ev = evtimer_new(h->base, evict_cb, h);
	return h->wake != NULL && h->evict_ev != NULL ? 0 : -ENOMEM;
}

/* Frees the deferred wake-up (whatever it was still asked for is dropped). */
void
host_fault_fini(struct host *h)
{
	if (h->wake != NULL)
		event_free(h->wake);
	h->wake = NULL;
	if (h->evict_ev != NULL)
		event_free(h->evict_ev);
	h->evict_ev = NULL;
	h->wake_what = 0;
}

/* Queues the fetch of absent chunk c of r; tid > 0 for a fault at addr. */
void
host_fetch_start(struct host *h, struct region *r, uint64_t c, bool prefetch,
    pid_t tid, uint64_t addr)
{
	struct chunk *ch = &r->chunks[c];
	struct fetch *f = calloc(1, sizeof *f);

	if (f == NULL) {
		if (tid > 0)
			host_sigbus(h, r->cl, tid, chunk_uaddr(h, r, c),
			    h->chunk, "out of memory");
		return;
	}
	f->r = r;
	f->chunk = c;
	f->frame = -1;
	f->prefetch = prefetch;
	/* every RA_PROBE-th still protected: does the run write it? */
	f->wfault = prefetch && r->ra_writes && ++r->ra_probe % RA_PROBE != 0;
	f->zero = !(ch->flags & CH_REMOTE);
	if (host_fork_shared(r, c)) {
		/* a forked copy: the chunk is still its source's */
		f->src = r->src;
		f->zero = false;
		host_fork_fetching(r, c);
	}
	f->start_ns = mono_ns();
	if (tid > 0) {
		f->fault_ns = f->start_ns;
		f->waddr[f->nwaiters] = addr;
		f->waiters[f->nwaiters++] = tid;
		host_grain_start(h, f, addr - chunk_uaddr(h, r, 0));
	}
	ch->state = CH_FETCHING;
	ch->fetch = f;
	r->busy++;
	if (prefetch)
		queue_push(&h->prefetchq, &h->prefetchq_tail, f);
	else
		queue_push(&h->demandq, &h->demandq_tail, f);
}

/*
 * A minor fault on a resident chunk (install = continue): the page is in
 * the memfd but the program's mapping lost it (it was zapped, say by
 * MADV_DONTNEED without the shim): maps it again, write-protected unless
 * the chunk's protection is lifted.
 */
static void
fault_remap(struct host *h, struct region *r, uint64_t c, uint64_t addr,
    pid_t tid)
{
	struct chunk *ch = &r->chunks[c];
	uint64_t page = addr & ~(uint64_t)(PAGE - 1);
	unsigned si;
	uint64_t off = host_stripe_offset(h, r, c, &si);
	uint64_t held = host_stripe_len(h, &r->stripes[si], off);
	bool wp = ch->state == CH_EVICTING || !(ch->flags & CH_UNPROT) ||
	    page - chunk_uaddr(h, r, c) >= held;
	int rc = uffd_continue(r->cl->uffd, page, PAGE, wp);

	if (rc < 0 && rc != -ESRCH) {
		char why[128];

		snprintf(why, sizeof why, "cannot map chunk %llu of region "
		    "%llu again: %s", (unsigned long long)c,
		    (unsigned long long)r->handle, strerror(-rc));
		host_sigbus(h, r->cl, tid, addr, 0, why);
	}
}

/*
 * A fault on a grain of partial chunk c of r that is not in place: waits
 * for the read of more of it that is out, or starts one.
 */
static void
fault_grain(struct host *h, struct region *r, uint64_t c, uint64_t addr,
    pid_t tid)
{
	struct chunk *ch = &r->chunks[c];
	struct fetch *f;

	if (ch->flags & CH_GROWING) {
		if (!host_grain_wait(ch->fetch, tid, addr))
			uffd_wake(r->cl->uffd, addr & ~(uint64_t)(PAGE - 1),
			    PAGE);
		return;
	}
	f = host_grain_grow(h, r, c, addr - chunk_uaddr(h, r, 0), tid, addr);
	if (f == NULL) {
		host_sigbus(h, r->cl, tid, addr, PAGE, "out of memory");
		return;
	}
	queue_push(&h->demandq, &h->demandq_tail, f);
}

/*
 * A write to a page of chunk c of r that is in place, write-protected: the
 * chunk is dirty from now on, its protection lifted.
 */
static void
fault_wp(struct host_client *cl, struct region *r, uint64_t c, uint64_t addr,
    pid_t tid)
{
	struct host *h = cl->h;
	struct chunk *ch = &r->chunks[c];
	unsigned si;
	uint64_t off = host_stripe_offset(h, r, c, &si);
	uint64_t held = host_stripe_len(h, &r->stripes[si], off);
	char why[160];
	int rc;

	if (cl->forking)
		return; /* a fork is being made: woken then */
	if (r->copies != NULL && host_fork_unshare(r, c) != 0)
		return; /* copies get the data first: woken then */
	h->stats.faults_wp++;
	if (r->flags & FAM_S_ALLOC_SHARED) {
		host_sigbus(h, cl, tid, addr, 0, "write to a read-only "
		    "shared region");
		return;
	}
	/*
	 * The last chunk of a file may extend past what the memory
	 * node holds: what is written there could not be written
	 * back, so that part stays write-protected.
	 */
	if (addr - chunk_uaddr(h, r, c) >= held) {
		host_sigbus(h, cl, tid, addr, 0, "write past the end "
		    "of a file's copy on the memory node");
		return;
	}
	if (!(ch->flags & CH_DIRTY)) {
		ch->flags |= CH_DIRTY;
		r->dirty++;
		h->dirty++;
	} else if (ch->state == CH_RESIDENT) {
		host_tenure_bump(&h->frames[ch->frame]); /* written again */
	}
	if (ch->flags & CH_PREFETCH)
		r->ra_writes = true; /* read ahead, then written */
	ch->flags |= CH_REF | CH_UNPROT;
	ch->flags &= ~CH_PREFETCH;
	rc = uffd_protect(cl->uffd, chunk_uaddr(h, r, c),
	    (held + PAGE - 1) & ~(uint64_t)(PAGE - 1), false);
	if (rc == -EAGAIN) /* the address space is changing: again */
		uffd_wake(cl->uffd, addr & ~(uint64_t)(PAGE - 1), PAGE);
	else if (rc < 0) {
		/* Waking it would only fault again, forever. */
		snprintf(why, sizeof why, "cannot lift write protection "
		    "of chunk %llu of region %llu: %s",
		    (unsigned long long)c,
		    (unsigned long long)r->handle, strerror(-rc));
		host_sigbus(h, cl, tid, addr, 0, why);
	}
}

/* Serves one fault message. */
static void
fault(struct host_client *cl, uint64_t addr, uint64_t flags, pid_t tid)
{
	struct host *h = cl->h;
	struct arena *ar;
	struct region *r = host_region_find(cl, addr, &ar);
	struct chunk *ch;
	uint64_t c;

	if (r == NULL) {
		char why[96];

		h->stats.faults_invalid++;
		snprintf(why, sizeof why, "address %#llx is in no region "
		    "(freed or never allocated)", (unsigned long long)addr);
		host_sigbus(h, cl, tid, addr, PAGE, why);
		return;
	}
	c = (addr - ar->uaddr - r->off) >> h->chunk_shift;
	ch = &r->chunks[c];

	/*
	 * A write-protect fault on a chunk that is not resident: when a
	 * write-protected page is punched out, the kernel keeps a uffd-wp
	 * marker in its page table entry, and a write there reports WP, not
	 * MISSING. Serve it as the missing fault it is.
	 */
	if ((flags & UFFD_PAGEFAULT_FLAG_WP) &&
	    (ch->state == CH_RESIDENT || ch->state == CH_EVICTING) &&
	    host_grain_has(h, ch, addr - chunk_uaddr(h, r, c))) {
		fault_wp(cl, r, c, addr, tid);
		return;
	}

	h->stats.faults_missing++;
	switch (ch->state) {
	case CH_FETCHING: {
		struct fetch *f = ch->fetch;

		if (!host_grain_wait(f, tid, addr) && f->g_n > 0)
			uffd_wake(cl->uffd, addr & ~(uint64_t)(PAGE - 1), PAGE);
		host_fetch_wants_write(ch, flags);
		if (f->fault_ns == 0)
			f->fault_ns = mono_ns();
		if (f->g_n == 0)
			host_prefetch(h, r, c);
		return;
	}
	case CH_RESIDENT:
	case CH_EVICTING:
		if (!host_grain_has(h, ch, addr - chunk_uaddr(h, r, c))) {
			fault_grain(h, r, c, addr, tid);
			host_fetch_wants_write(ch, flags);
			return;
		}
		h->stats.faults_stale++;
		if (flags & UFFD_PAGEFAULT_FLAG_MINOR)
			fault_remap(h, r, c, addr, tid);
		else
			uffd_wake(cl->uffd, addr & ~(uint64_t)(PAGE - 1), PAGE);
		return;
	default:
		break;
	}
	if (host_fork_pending(r, c))
		return; /* a fork's copy of it is on its way: woken then */
	if (r->lost) {
		host_sigbus(h, cl, tid, chunk_uaddr(h, r, c), h->chunk,
		    "the memory node holding this region restarted and its "
		    "data is gone");
		return;
	}
	/* An absent chunk's page in the memfd is nobody's data: out it goes. */
	if (flags & UFFD_PAGEFAULT_FLAG_MINOR)
		host_chunks_punch(h, r, c, 1);
	host_fetch_start(h, r, c, false, tid, addr);
	host_fetch_wants_write(ch, flags);
	if (!(flags & UFFD_PAGEFAULT_FLAG_WRITE))
		r->ra_writes = false; /* the run reads first */
	if (ch->state != CH_FETCHING || ch->fetch->g_n == 0)
		host_prefetch(h, r, c);
}

/* Reads a program's fault messages in batches and serves them. */
void
host_uffd_cb(int fd, short what, void *arg)
{
	struct host_client *cl = arg;
	struct host *h = cl->h;
	struct uffd_msg msgs[FAULT_BATCH];

	cpu_latency_busy(&h->d->qos, mono_ns());
	for (int round = 0; round < 8 && !cl->dead; round++) {
		ssize_t n = read(fd, msgs, sizeof msgs);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				log_rl(LOG_WARNING, "pid %ld: reading faults: "
				    "%s", (long)cl->pid, strerror(errno));
			break;
		}
		for (size_t i = 0; i < (size_t)n / sizeof msgs[0]; i++)
			if (msgs[i].event == UFFD_EVENT_PAGEFAULT)
				fault(cl, msgs[i].arg.pagefault.address,
				    msgs[i].arg.pagefault.flags,
				    (pid_t)msgs[i].arg.pagefault.feat.ptid);
		if ((size_t)n < sizeof msgs)
			break;
	}
	host_fetch_kick(h);
	host_evict_soon(h);
}
