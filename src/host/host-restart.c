/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-restart.c - the restart state: what a new host famd needs to take
 * over the sessions of the one before it (the programs keep their
 * userfaultfds and arenas, and hand them back: host-reclaim.c).
 *
 * Owns: h->restart, the state file (session_socket + ".state": JSON, mode
 * 0600, written to a temporary file renamed over it; read once at start,
 * refused whole when anything in it does not check), the sessions restored
 * from it.
 * A restored session (host_client.restored):
 *   waiting    its regions and arenas are known, its program not yet back
 *   reclaimed  its program sent RECLAIM: a live session again
 *   released   its process is gone, or RESTART_GRACE passed: its regions
 *              are freed on the memory nodes
 * When it is written: before the reply to an ALLOC, MAP, ADOPT or REARENA
 * that worked (a program never holds a region the file does not name),
 * the rows a copy of a replicated or erasure-coded region fell behind on or
 * caught up on before any chunk leaves the buffer, a copy gone at once
 * (host-restart-copies.c), and at the next tick after anything else (a
 * FREE, a session's end, a memory node's new session token, a copy moved,
 * made again or caught up).
 * Locks: none; the control loop.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "host/host.h"
#include "host/host-session.h"

#define RESTART_FORMAT  "famd-host-restart"
#define RESTART_VERSION 1
#define RESTART_GRACE_NS (60ull * 1000000000ull) /* a program's time to
                                                  * come back */
#define RESTART_MAX_FILE (64ull << 20)
#define RESTART_MAX_LINES 65536u /* journal lines before a snapshot */

/* ---- writing ------------------------------------------------------- */

/* A 64-bit value as JSON: a string of 16 hex digits (JSON numbers lose bits). */
static json_t *
json_u64(uint64_t v)
{
	return json_sprintf("%016" PRIx64, v);
}

/*
 * Tells whether copy s is to be taken as behind on every row after a
 * restart: its region there is gone, being made again, or on an instance
 * of the node before (or was, since the last snapshot: host_restart_behind).
 */
static bool
stripe_behind(const struct stripe *s)
{
	return s->behind_saved || s->gone || s->creating || s->node == NULL ||
	    s->instance != s->node->instance;
}

/*
 * Tells why region r cannot be served from its memory nodes after a
 * restart, or NULL when it can: every stripe direct, on the instance it
 * was made on, held by our session there.
 */
static const char *
region_unrestorable(const struct region *r)
{
	if (r->lost)
		return "its data was already lost";
	if (r->src != NULL)
		return "a fork's copy still sharing its source's chunks";
	for (unsigned i = 0; i < r->nstripes; i++) {
		const struct stripe *s = &r->stripes[i];

		if (s->node == NULL || s->path != SP_DIRECT || s->switching)
			return "a stripe reached through the dpu";
		/* a copy behind is made whole again from the others */
		if (r->ncopies > 1 && stripe_behind(s))
			continue;
		if (!s->owned || s->remote.size == 0 ||
		    s->instance != s->node->instance)
			return "a stripe not held";
	}
	return NULL;
}

/* Describes one region for the state file. */
static json_t *
state_region(const struct region *r)
{
	json_t *stripes = json_array();

	for (unsigned i = 0; i < r->nstripes; i++) {
		const struct stripe *s = &r->stripes[i];
		bool behind = r->ncopies > 1 && stripe_behind(s);
		json_t *js;

		js = json_pack("{s:i,s:I,s:I,s:o,s:o,s:b}",
		    "node", s->node != NULL ? (int)s->node->index : -1,
		    "region", (json_int_t)s->remote.region,
		    "size", (json_int_t)s->remote.size,
		    "key", json_u64(s->key),
		    "instance", json_u64(s->instance),
		    "behind", behind);
		/* its rows behind (host-restart-copies.c) */
		if (js != NULL && r->ncopies > 1 && s->nstale > 0 && !behind) {
			char *hex = host_restart_stale_hex(s);

			/* (out of memory: behind as a whole) */
			json_object_set_new(js, hex != NULL ? "stale" : "behind",
			    hex != NULL ? json_string(hex) : json_true());
			free(hex);
		}
		json_array_append_new(stripes, js);
	}
	return json_pack("{s:o,s:i,s:I,s:I,s:I,s:i,s:i,s:i,s:i,s:b,s:o}",
	    "handle", json_u64(r->handle), "arena", (int)r->ar->id,
	    "off", (json_int_t)r->off, "size", (json_int_t)r->size,
	    "length", (json_int_t)r->length, "flags", (int)r->flags,
	    "width", (int)r->width, "copies", (int)r->ncopies,
	    "ec_k", r->ec != NULL ? (int)host_ec_k(r) : 0,
	    "lost", region_unrestorable(r) != NULL, "stripes", stripes);
}

/* Describes one session for the state file. */
static json_t *
state_session(const struct host_client *cl)
{
	json_t *arenas = json_array(), *regions = json_array();

	for (const struct arena *ar = cl->arenas; ar != NULL; ar = ar->next)
		json_array_append_new(arenas, json_pack("{s:i,s:I,s:I}",
		    "id", (int)ar->id, "size", (json_int_t)ar->size,
		    "uaddr", (json_int_t)ar->uaddr));
	for (const struct region *r = cl->regions; r != NULL; r = r->next)
		if (r->listed && !r->dying && r->ar != NULL)
			json_array_append_new(regions, state_region(r));
	return json_pack("{s:o,s:i,s:i,s:i,s:i,s:o,s:o}",
	    "token", json_u64(cl->token), "pid", (int)cl->pid,
	    "uid", (int)cl->uid, "gid", (int)cl->gid,
	    "next_arena", (int)cl->next_arena, "arenas", arenas,
	    "regions", regions);
}

/* The whole state as JSON. */
static json_t *
state_json(struct host *h)
{
	json_t *nodes = json_array(), *sessions = json_array();

	for (unsigned i = 0; i < h->nnodes; i++)
		json_array_append_new(nodes, json_pack("{s:s,s:o,s:o}",
		    "addr", h->nodes[i].addr,
		    "session", json_u64(h->nodes[i].session),
		    "instance", json_u64(h->nodes[i].instance)));
	for (const struct host_client *cl = h->clients; cl != NULL;
	    cl = cl->next)
		if (!cl->dead && !cl->orphan && cl->token != 0 &&
		    (cl->uffd >= 0 || cl->restored))
			json_array_append_new(sessions, state_session(cl));
	return json_pack("{s:s,s:i,s:I,s:s,s:I,s:o,s:o,s:o}",
	    "format", RESTART_FORMAT, "version", RESTART_VERSION,
	    "chunk", (json_int_t)h->chunk,
	    "fetch", h->adaptive ? "adaptive" : "chunk",
	    "uffd_features", (json_int_t)h->uffd_features,
	    "next_handle", json_u64(h->next_handle),
	    "nodes", nodes, "sessions", sessions);
}

/* Counts the sessions a snapshot names. */
static uint64_t
state_sessions(const struct host *h)
{
	uint64_t n = 0;

	for (const struct host_client *cl = h->clients; cl != NULL;
	    cl = cl->next)
		n += !cl->dead && !cl->orphan && cl->token != 0 &&
		    (cl->uffd >= 0 || cl->restored);
	return n;
}

/* Counts the regions of every session. */
static uint64_t
state_regions(const struct host *h)
{
	uint64_t n = 0;

	for (const struct host_client *cl = h->clients; cl != NULL;
	    cl = cl->next)
		n += cl->nregions;
	return n;
}

/*
 * A snapshot was written: it has every copy's stale rows and which copies
 * are behind as a whole, so the records not written yet are not needed.
 */
static void
restart_stale_saved(struct host *h)
{
	h->restart->pend_len = 0;
	h->restart->pend_n = 0;
	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next)
		for (struct region *r = cl->regions; r != NULL; r = r->next)
			for (unsigned i = 0; i < r->nstripes; i++)
				r->stripes[i].behind_saved = false;
}

/*
 * Writes a snapshot of the state (a temporary file renamed over the state
 * file), and opens it for the journal lines that follow.
 */
int
host_restart_save(struct host *h)
{
	struct host_restart *rs = h->restart;
	json_t *st;
	char *tmp;
	int fd, rc = 0;

	if (rs == NULL || rs->off)
		return 0;
	st = state_json(h);
	tmp = xasprintf("%s.tmp", rs->path);
	if (st == NULL) {
		free(tmp);
		return -ENOMEM;
	}
	unlink(tmp);
	errno = 0;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	if (fd < 0 || json_dumpfd(st, fd, JSON_COMPACT) < 0 ||
	    write(fd, "\n", 1) != 1)
		rc = -(errno != 0 ? errno : EIO);
	if (fd >= 0 && close(fd) < 0 && rc == 0)
		rc = -errno;
	if (rc == 0 && rename(tmp, rs->path) < 0)
		rc = -errno;
	if (rs->jfd >= 0)
		close(rs->jfd);
	rs->jfd = -1;
	if (rc == 0)
		rs->jfd = open(rs->path, O_WRONLY | O_APPEND | O_NOFOLLOW |
		    O_CLOEXEC);
	if (rc < 0) {
		unlink(tmp);
		rs->save_errors++;
		rs->dirty = true;
		log_rl(LOG_ERR, "host: cannot write the restart state %s: %s; "
		    "a restart of famd now would lose programs", rs->path,
		    strerror(-rc));
	} else {
		rs->saves++;
		rs->dirty = false;
		rs->jlines = 0;
		rs->sessions = state_sessions(h);
		for (unsigned i = 0; i < h->nnodes; i++) {
			rs->node_session[i] = h->nodes[i].session;
			rs->node_instance[i] = h->nodes[i].instance;
		}
		rs->copies_placed = h->rp.moved + h->rb.recreated;
		restart_stale_saved(h);
	}
	free(tmp);
	json_decref(st);
	return rc;
}

/*
 * Appends one change of cl's session (e, taken) to the state file: one
 * line, one write(2), naming the session; a snapshot instead when the
 * journal is long or cannot be written.
 */
void
host_restart_append(struct host_client *cl, json_t *e)
{
	struct host *h = cl->h;
	struct host_restart *rs = h->restart;
	char *text = NULL, *line = NULL;
	size_t len = 0;

	if (e != NULL && json_object_set_new(e, "s", json_u64(cl->token)) == 0 &&
	    json_object_set_new(e, "pid", json_integer(cl->pid)) == 0 &&
	    json_object_set_new(e, "uid", json_integer(cl->uid)) == 0 &&
	    json_object_set_new(e, "gid", json_integer(cl->gid)) == 0 &&
	    json_object_set_new(e, "next_arena",
	    json_integer(cl->next_arena)) == 0)
		text = json_dumps(e, JSON_COMPACT);
	json_decref(e);
	host_restart_flush(h); /* the copies' stale rows first, in order */
	if (text != NULL)
		line = xasprintf("%s\n", text);
	if (line != NULL)
		len = strlen(line);
	if (line == NULL || rs->jfd < 0 || rs->jlines >= RESTART_MAX_LINES ||
	    write(rs->jfd, line, len) != (ssize_t)len)
		host_restart_save(h);
	else
		rs->jlines++;
	free(text);
	free(line);
}

/* Describes one arena for the state file. */
static json_t *
state_arena(const struct arena *ar)
{
	return json_pack("{s:i,s:I,s:I}", "id", (int)ar->id,
	    "size", (json_int_t)ar->size, "uaddr", (json_int_t)ar->uaddr);
}

/*
 * Called with each reply (d: its d): what a program may now hold is in the
 * state file before it learns of it; the rest within a tick.
 */
void
host_restart_replied(struct host_client *cl, int status, uint64_t d)
{
	struct host_restart *rs = cl->h->restart;
	struct region *r = cl->regions;
	struct arena *ar;

	if (rs == NULL || rs->off || cl->h->handover || status != 0 ||
	    cl->token == 0)
		return;
	switch (cl->req.type) {
	case FAM_S_ALLOC:
		while (r != NULL && r->handle != d)
			r = r->next;
		if (r == NULL || r->ar == NULL)
			break;
		host_restart_append(cl, json_pack("{s:o,s:o}", "arena",
		    state_arena(r->ar), "region", state_region(r)));
		break;
	case FAM_S_MAP:
		for (ar = cl->arenas; ar != NULL && ar->id != cl->req.a;
		    ar = ar->next)
			;
		if (ar != NULL)
			host_restart_append(cl, json_pack("{s:o}", "arena",
			    state_arena(ar)));
		break;
	case FAM_S_FREE:
		host_restart_append(cl, json_pack("{s:o}", "free",
		    json_u64(cl->req.a)));
		break;
	case FAM_S_ADOPT:
	case FAM_S_REARENA:
		host_restart_save(cl->h);
		break;
	case FAM_S_RECLAIM:
		rs->dirty = true;
		break;
	default:
		break;
	}
}

/* ---- reading and checking ------------------------------------------ */

/* Reads a 64-bit value written by json_u64(). */
static int
get_u64(json_t *o, const char *key, uint64_t *out)
{
	const char *s = json_string_value(json_object_get(o, key));
	char *end;

	if (s == NULL || strlen(s) != 16)
		return -EINVAL;
	errno = 0;
	*out = strtoull(s, &end, 16);
	return *end == '\0' && errno == 0 ? 0 : -EINVAL;
}

/* Reads a JSON integer within [lo, hi]. */
static int
get_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < lo ||
	    json_integer_value(v) > hi)
		return -EINVAL;
	*out = json_integer_value(v);
	return 0;
}

/* Fails the load with a reason (a static string or one made with xasprintf). */
#define BAD(...) do { *why = xasprintf(__VA_ARGS__); return -EINVAL; } while (0)

/* Rebuilds one stripe of a restored region. */
static int
load_stripe(struct host *h, struct region *r, unsigned i, json_t *js,
    char **why)
{
	struct stripe *s = &r->stripes[i];
	unsigned col = i % r->width;
	uint64_t chunks = r->nchunks / r->width + (col < r->nchunks % r->width);
	uint64_t unit = host_replica_unit(h, r);
	int64_t node, region, size;
	json_t *behind, *stale;

	if (get_int(js, "node", -1, (int64_t)h->nnodes - 1, &node) < 0 ||
	    get_int(js, "region", 0, UINT32_MAX, &region) < 0 ||
	    get_int(js, "size", 0, INT64_MAX, &size) < 0 ||
	    get_u64(js, "key", &s->key) < 0 ||
	    get_u64(js, "instance", &s->instance) < 0)
		BAD("region %" PRIx64 ": a bad stripe", r->handle);
	behind = json_object_get(js, "behind");
	stale = json_object_get(js, "stale");
	if ((behind != NULL && !json_is_boolean(behind)) ||
	    (stale != NULL && (!json_is_string(stale) || r->ncopies < 2)))
		BAD("region %" PRIx64 ": a bad stripe", r->handle);
	s->r = r;
	s->node = node >= 0 ? &h->nodes[node] : NULL;
	s->remote.region = (uint32_t)region;
	s->remote.size = (uint64_t)size;
	s->path = SP_DIRECT;
	s->owned = node >= 0;
	if (r->lost)
		return 0;
	if (node < 0)
		BAD("region %" PRIx64 ": stripe %u on no node", r->handle, i);
	if (r->ncopies > 1 && json_is_true(behind)) {
		/* taken as behind on every row (restart_behind_rows) */
		s->behind_saved = true;
		/* its node restarted, or its region not made yet: made again */
		if (size == 0 || s->instance != h->restart->node_instance[node]) {
			s->gone = true;
			s->owned = false;
			if (size == 0)
				s->remote.size = chunks * unit;
		}
	}
	if (!s->gone && (uint64_t)size < ((r->flags & FAM_S_ALLOC_FILE) ?
	    r->size - h->chunk + 1 : chunks * unit))
		BAD("region %" PRIx64 ": stripe %u is smaller than its "
		    "chunks", r->handle, i);
	/* a copy is on any node (replace_after moves them), one a column */
	if (r->ncopies == 1 && node != (int64_t)host_replica_node(col, 0,
	    h->nnodes))
		BAD("region %" PRIx64 ": stripe %u on the wrong node",
		    r->handle, i);
	for (unsigned k = col; k < i; k += r->width)
		if (r->stripes[k].node == s->node)
			BAD("region %" PRIx64 ": two copies of column %u on "
			    "node %" PRId64, r->handle, col, node);
	return 0;
}

/*
 * A restored region's copies marked behind: every row stale (made whole
 * again from the others by the rebuild), or gone (made again first).
 */
static void
restart_behind_rows(struct host *h, struct region *r)
{
	for (unsigned i = 0; i < r->nstripes; i++) {
		struct stripe *s = &r->stripes[i];

		if (!s->behind_saved || s->gone)
			continue;
		for (uint64_t row = 0; row < host_replica_rows(h, r,
		    i % r->width); row++)
			host_stale_set(s, row);
	}
}

/* Returns the arena called id of cl, or NULL. */
static struct arena *
load_arena_find(struct host_client *cl, int64_t id)
{
	for (struct arena *ar = cl->arenas; ar != NULL; ar = ar->next)
		if (ar->id == id)
			return ar;
	return NULL;
}

/* Rebuilds one region of a restored session, every chunk on the node. */
static int
load_region(struct host_client *cl, json_t *jr, char **why)
{
	struct host *h = cl->h;
	struct region *r;
	struct arena *ar;
	json_t *stripes = json_object_get(jr, "stripes");
	int64_t arena, off, size, length, flags, width, copies, ec_k = 0;
	uint64_t handle;

	if (get_u64(jr, "handle", &handle) < 0 || handle == 0 ||
	    get_int(jr, "arena", 1, UINT32_MAX, &arena) < 0 ||
	    get_int(jr, "off", 0, INT64_MAX, &off) < 0 ||
	    get_int(jr, "size", 1, (int64_t)FAM_SESSION_MAX_ARENA, &size) < 0 ||
	    get_int(jr, "length", 0, size, &length) < 0 ||
	    get_int(jr, "flags", 0, FAM_S_ALLOC_ALL, &flags) < 0 ||
	    get_int(jr, "width", 1, h->nnodes, &width) < 0 ||
	    get_int(jr, "copies", 1, h->nnodes, &copies) < 0 ||
	    !json_is_boolean(json_object_get(jr, "lost")) ||
	    !json_is_array(stripes) ||
	    json_array_size(stripes) != (size_t)(width * copies) ||
	    (json_object_get(jr, "ec_k") != NULL && get_int(jr, "ec_k", 0,
	    copies - 1, &ec_k) < 0))
		BAD("session pid %ld: a bad region", (long)cl->pid);
	ar = load_arena_find(cl, arena);
	if (ar == NULL || (off | size) & (int64_t)(h->chunk - 1) ||
	    (uint64_t)off > ar->size || (uint64_t)size > ar->size - (uint64_t)off)
		BAD("region %" PRIx64 ": outside its arena", handle);
	for (size_t i = 0; i < ar->nregions; i++) {
		const struct region *o = ar->regions[i];

		if ((uint64_t)off < o->off + o->size &&
		    o->off < (uint64_t)(off + size))
			BAD("region %" PRIx64 ": overlaps region %" PRIx64,
			    handle, o->handle);
	}
	for (const struct region *o = cl->regions; o != NULL; o = o->next)
		if (o->handle == handle)
			BAD("region %" PRIx64 ": named twice", handle);
	r = calloc(1, sizeof *r);
	if (r == NULL)
		BAD("out of memory");
	r->cl = cl;
	cl->refs++;
	r->ar = ar;
	r->handle = handle;
	r->off = (uint64_t)off;
	r->size = (uint64_t)size;
	r->length = (uint64_t)length;
	r->nchunks = r->size >> h->chunk_shift;
	r->flags = (uint32_t)flags;
	r->width = (unsigned)width;
	r->ncopies = (unsigned)copies;
	r->lost = json_is_true(json_object_get(jr, "lost"));
	host_ra_reset(r);
	r->next = cl->regions;
	cl->regions = r;
	r->listed = true;
	cl->nregions++;
	cl->bytes += r->size;
	r->stripes = calloc((size_t)(width * copies), sizeof *r->stripes);
	if (r->stripes != NULL)
		r->nstripes = (unsigned)(width * copies);
	r->chunks = calloc(r->nchunks, sizeof *r->chunks);
	if (r->stripes == NULL || r->chunks == NULL ||
	    host_arena_add_region(ar, r) < 0)
		BAD("out of memory");
	if (ec_k > 0 && host_ec_new(h, r, (unsigned)ec_k,
	    (unsigned)(copies - ec_k)) < 0)
		BAD("region %" PRIx64 ": ec:%" PRId64 "+%" PRId64 " cannot be "
		    "set up", handle, ec_k, copies - ec_k);
	for (uint64_t c = 0; c < r->nchunks; c++)
		r->chunks[c].flags = CH_REMOTE; /* never written reads zeros */
	if ((r->flags & FAM_S_ALLOC_FILE) && (r->width != 1 || copies != 1))
		BAD("region %" PRIx64 ": a file striped or copied", handle);
	for (unsigned i = 0; i < r->nstripes; i++)
		if (load_stripe(h, r, i, json_array_get(stripes, i), why) < 0)
			return -EINVAL;
	if (host_replica_alloc(h, r) < 0 || host_ec_restored(r) < 0)
		BAD("out of memory");
	for (unsigned i = 0; i < r->nstripes && !r->lost; i++) {
		json_t *st = json_object_get(json_array_get(stripes, i), "stale");

		if (st != NULL && !r->stripes[i].behind_saved &&
		    host_restart_stale_parse(h, &r->stripes[i],
		    json_string_value(st)) < 0)
			BAD("region %" PRIx64 ": stripe %u: bad stale rows",
			    handle, i);
	}
	restart_behind_rows(h, r);
	if (handle >= h->next_handle)
		h->next_handle = handle;
	return 0;
}

/* Rebuilds an arena's free list from its regions (sorted by offset). */
static int
load_arena_free(struct host *h, struct arena *ar)
{
	uint64_t at = 0;

	for (size_t i = 0; i <= ar->nregions; i++) {
		uint64_t end = i < ar->nregions ? ar->regions[i]->off : ar->size;

		if (end > at && host_extent_give(&ar->free, at >> h->chunk_shift,
		    (end - at) >> h->chunk_shift) < 0)
			return -ENOMEM;
		if (i < ar->nregions)
			at = ar->regions[i]->off + ar->regions[i]->size;
	}
	return 0;
}

/* Rebuilds one arena of a restored session (its memfd comes with REARENA). */
static int
load_arena(struct host_client *cl, json_t *ja, char **why)
{
	struct host *h = cl->h;
	struct arena *ar;
	int64_t id, size, uaddr;

	if (get_int(ja, "id", 1, cl->next_arena, &id) < 0 ||
	    get_int(ja, "size", (int64_t)h->chunk,
	    (int64_t)FAM_SESSION_MAX_ARENA, &size) < 0 ||
	    get_int(ja, "uaddr", 0, INT64_MAX, &uaddr) < 0 ||
	    (size & (int64_t)(h->chunk - 1)) != 0 ||
	    (uaddr != 0 && fam_smsg_check_map((uint64_t)uaddr,
	    (uint64_t)size) != 0) || load_arena_find(cl, id) != NULL)
		BAD("session pid %ld: a bad arena", (long)cl->pid);
	ar = calloc(1, sizeof *ar);
	if (ar == NULL)
		BAD("out of memory");
	ar->cl = cl;
	ar->id = (uint32_t)id;
	ar->memfd = -1;
	ar->size = (uint64_t)size;
	ar->uaddr = (uint64_t)uaddr;
	ar->next = cl->arenas;
	cl->arenas = ar;
	return 0;
}

/* Rebuilds one session, waiting for its program. */
static int
load_session(struct host *h, json_t *js, char **why)
{
	json_t *arenas = json_object_get(js, "arenas");
	json_t *regions = json_object_get(js, "regions");
	struct host_client *cl;
	int64_t pid, uid, gid, next_arena;
	uint64_t token;
	size_t i;
	json_t *v;

	if (get_u64(js, "token", &token) < 0 || token == 0 ||
	    get_int(js, "pid", 1, INT32_MAX, &pid) < 0 ||
	    get_int(js, "uid", 0, UINT32_MAX, &uid) < 0 ||
	    get_int(js, "gid", 0, UINT32_MAX, &gid) < 0 ||
	    get_int(js, "next_arena", 0, UINT32_MAX, &next_arena) < 0 ||
	    !json_is_array(arenas) || !json_is_array(regions))
		BAD("a bad session");
	for (cl = h->clients; cl != NULL; cl = cl->next)
		if (cl->token == token)
			BAD("session pid %ld named twice", (long)pid);
	cl = calloc(1, sizeof *cl);
	if (cl == NULL)
		BAD("out of memory");
	cl->h = h;
	cl->fd = cl->uffd = cl->pidfd = cl->pending_fd = -1;
	cl->pid = (pid_t)pid;
	cl->uid = (uid_t)uid;
	cl->gid = (gid_t)gid;
	cl->token = token;
	cl->next_arena = (uint32_t)next_arena;
	cl->refs = 1;
	cl->restored = true;
	cl->restored_ns = mono_ns();
	cl->next = h->clients;
	h->clients = cl;
	json_array_foreach(arenas, i, v)
		if (load_arena(cl, v, why) < 0)
			return -EINVAL;
	json_array_foreach(regions, i, v)
		if (load_region(cl, v, why) < 0)
			return -EINVAL;
	for (struct arena *ar = cl->arenas; ar != NULL; ar = ar->next)
		if (load_arena_free(h, ar) < 0)
			BAD("out of memory");
	return 0;
}

/*
 * A famd before with fetch = adaptive may have left partial chunks, whose
 * grains in place may hold the only copy of a write: a famd that reads
 * whole chunks would punch them (host-reclaim.c). When the state names
 * sessions and was made with fetch = adaptive (or does not say: made
 * before it said), this famd keeps fetch = adaptive until it stops; if it
 * cannot, *why says so (the state is refused).
 */
static void
load_fetch(struct host *h, json_t *st, char **why)
{
	const char *fetch = json_string_value(json_object_get(st, "fetch"));
	json_t *sessions = json_object_get(st, "sessions");
	char *cause = NULL;

	if (h->adaptive || json_array_size(sessions) == 0 ||
	    (fetch != NULL && strcmp(fetch, "adaptive") != 0))
		return;
	if (host_buffer_adapt(h, &cause) < 0) {
		*why = xasprintf("made with fetch = adaptive, and this famd "
		    "cannot turn it on: %s", cause);
		free(cause);
		return;
	}
	log_warn("host: fetch = adaptive kept: the restart state %s was made "
	    "with it%s, and its programs' partial chunks may hold writes; "
	    "fetch = chunk applies from a start with no session to take back",
	    h->restart->path, fetch == NULL ? " (or does not say)" : "");
}

/* Checks the head of the state: this famd's chunk, features and nodes. */
static int
load_head(struct host *h, json_t *st, char **why)
{
	json_t *nodes = json_object_get(st, "nodes"), *n;
	const char *format = json_string_value(json_object_get(st, "format"));
	int64_t version, chunk, features;
	uint64_t next;
	size_t i;

	if (format == NULL || strcmp(format, RESTART_FORMAT) != 0 ||
	    get_int(st, "version", 0, INT32_MAX, &version) < 0)
		BAD("not a restart state of famd");
	if (version != RESTART_VERSION)
		BAD("version %" PRId64 ", this famd reads %d", version,
		    RESTART_VERSION);
	if (get_int(st, "chunk", 1, INT64_MAX, &chunk) < 0 ||
	    (uint64_t)chunk != h->chunk)
		BAD("made with another chunk size");
	if (get_int(st, "uffd_features", 0, INT64_MAX, &features) < 0 ||
	    (uint64_t)features != h->uffd_features)
		BAD("made with other userfaultfd features (%#llx, now %#llx)",
		    (unsigned long long)features,
		    (unsigned long long)h->uffd_features);
	if (get_u64(st, "next_handle", &next) < 0)
		BAD("no next_handle");
	if (!json_is_array(nodes) || json_array_size(nodes) != h->nnodes)
		BAD("made with other memory_nodes");
	json_array_foreach(nodes, i, n) {
		const char *addr = json_string_value(json_object_get(n, "addr"));

		if (addr == NULL || strcmp(addr, h->nodes[i].addr) != 0 ||
		    get_u64(n, "session", &h->restart->node_session[i]) < 0 ||
		    get_u64(n, "instance", &h->restart->node_instance[i]) < 0)
			BAD("made with other memory_nodes");
	}
	if (next > h->next_handle)
		h->next_handle = next;
	return 0;
}

/* Opens the state file if it is safe to read: ours, a plain file, 0600. */
static int
load_open(const char *path, char **why)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT)
		return -ENOENT;
	if (fd < 0) {
		*why = xasprintf("cannot open it: %s", strerror(errno));
		return -EINVAL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 077) != 0 ||
	    (uint64_t)st.st_size > RESTART_MAX_FILE) {
		*why = xasprintf("not a private file of famd's user (mode "
		    "0600, at most %llu bytes)",
		    (unsigned long long)RESTART_MAX_FILE);
		close(fd);
		return -EINVAL;
	}
	return fd;
}

/* Forgets every restored session (the state was refused half read). */
static void
load_undo(struct host *h)
{
	struct host_client **pp = &h->clients;

	h->handover = true; /* nothing of theirs is freed or punched */
	while (*pp != NULL) {
		struct host_client *cl = *pp;

		if (!cl->restored) {
			pp = &cl->next;
			continue;
		}
		*pp = cl->next;
		cl->next = NULL;
		while (cl->regions != NULL)
			host_region_free(cl->regions);
		host_client_put(cl);
	}
	h->handover = false;
}

/* The key of arena a in the model: its id, in decimal. */
static const char *
arena_key(json_t *a, char key[24])
{
	snprintf(key, 24, "%" PRId64, (int64_t)json_integer_value(
	    json_object_get(a, "id")));
	return key;
}

/*
 * The sessions of a snapshot as the journal changes them: an object of
 * sessions by token, each with its arenas by id and its regions by handle.
 */
static json_t *
replay_model(json_t *st)
{
	json_t *model = json_object(), *sessions = json_object_get(st,
	    "sessions"), *s, *v;
	char key[24];
	size_t i, j;

	json_array_foreach(sessions, i, s) {
		json_t *arenas = json_object(), *regions = json_object();
		const char *tok = json_string_value(json_object_get(s,
		    "token"));

		json_array_foreach(json_object_get(s, "arenas"), j, v)
			json_object_set(arenas, arena_key(v, key), v);
		json_array_foreach(json_object_get(s, "regions"), j, v)
			json_object_set(regions, json_string_value(
			    json_object_get(v, "handle")) ?: "", v);
		json_object_set_new(s, "arenas", arenas);
		json_object_set_new(s, "regions", regions);
		if (tok != NULL)
			json_object_set(model, tok, s);
	}
	return model;
}

/*
 * Applies a journal line's "behind" (b) to session s of the model: a copy
 * of a region fell behind. A region the model no longer has was freed
 * after it: nothing to do. 0 or -EINVAL.
 */
static int
replay_behind(json_t *s, json_t *b)
{
	const char *handle = json_string_value(json_object_get(b, "region"));
	json_t *stripe = json_object_get(b, "stripe"), *r, *js;

	if (handle == NULL || !json_is_integer(stripe))
		return -EINVAL;
	r = json_object_get(json_object_get(s, "regions"), handle);
	if (r == NULL)
		return 0;
	js = json_array_get(json_object_get(r, "stripes"),
	    (size_t)json_integer_value(stripe));
	if (!json_is_object(js) || json_integer_value(stripe) < 0)
		return -EINVAL;
	return json_object_set_new(js, "behind", json_true()) == 0 ? 0 :
	    -ENOMEM;
}

/* Applies one journal line e to the model; 0 or -EINVAL. */
static int
replay_line(json_t *model, json_t *e)
{
	const char *tok = json_string_value(json_object_get(e, "s"));
	json_t *s, *v;
	char key[24];

	if (tok == NULL || !json_is_object(e))
		return -EINVAL;
	s = json_object_get(model, tok);
	if (s == NULL) {
		s = json_pack("{s:s,s:{},s:{}}", "token", tok, "arenas",
		    "regions");
		if (s == NULL || json_object_set_new(model, tok, s) < 0)
			return -ENOMEM;
	}
	json_object_set(s, "pid", json_object_get(e, "pid"));
	json_object_set(s, "uid", json_object_get(e, "uid"));
	json_object_set(s, "gid", json_object_get(e, "gid"));
	json_object_set(s, "next_arena", json_object_get(e, "next_arena"));
	if ((v = json_object_get(e, "arena")) != NULL)
		json_object_set(json_object_get(s, "arenas"), arena_key(v, key),
		    v);
	if ((v = json_object_get(e, "region")) != NULL) {
		if (json_string_value(json_object_get(v, "handle")) == NULL)
			return -EINVAL;
		json_object_set(json_object_get(s, "regions"),
		    json_string_value(json_object_get(v, "handle")), v);
	}
	if ((v = json_object_get(e, "free")) != NULL &&
	    json_object_del(json_object_get(s, "regions"),
	    json_string_value(v) ?: "") < 0)
		return -EINVAL;
	if ((v = json_object_get(e, "behind")) != NULL)
		return replay_behind(s, v);
	return 0;
}

/* Turns the model back into the snapshot's sessions (arrays). */
static void
replay_unmodel(json_t *st, json_t *model)
{
	json_t *sessions = json_array(), *s, *v;
	const char *k;

	json_object_foreach(model, k, s) {
		json_t *arenas = json_array(), *regions = json_array();
		const char *k2;

		json_object_foreach(json_object_get(s, "arenas"), k2, v)
			json_array_append(arenas, v);
		json_object_foreach(json_object_get(s, "regions"), k2, v)
			json_array_append(regions, v);
		json_object_set_new(s, "arenas", arenas);
		json_object_set_new(s, "regions", regions);
		json_array_append(sessions, s);
	}
	json_object_set_new(st, "sessions", sessions);
}

/*
 * Reads the state file: a snapshot on its first line, then journal lines
 * (host_restart_append), each applied in turn; the records of "stale"
 * lines go onto stale, in order (applied once the regions are back). A
 * last line cut short (famd died writing it, before its reply) is left
 * out; any other bad line refuses the whole. Returns the state in the
 * snapshot's form, or NULL and *why.
 */
static json_t *
load_replay(int fd, json_t *stale, char **why)
{
	char *buf = malloc(RESTART_MAX_FILE + 1), *p, *nl;
	json_t *st = NULL, *model = NULL, *e;
	json_error_t jerr;
	size_t len = 0, line = 1;
	ssize_t n;

	if (buf == NULL) {
		*why = xasprintf("out of memory");
		return NULL;
	}
	while (len < RESTART_MAX_FILE && (n = read(fd, buf + len,
	    RESTART_MAX_FILE - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	for (p = buf; *why == NULL && p < buf + len; p = nl + 1, line++) {
		nl = memchr(p, '\n', (size_t)(buf + len - p));
		if (nl == NULL)
			break; /* cut short: never acknowledged */
		e = json_loadb(p, (size_t)(nl - p), JSON_REJECT_DUPLICATES,
		    &jerr);
		if (e == NULL && nl + 1 == buf + len && line > 1)
			break;
		if (e == NULL)
			*why = xasprintf("line %zu is not JSON: %s", line,
			    jerr.text);
		else if (st == NULL && !json_is_array(json_object_get(e,
		    "sessions")))
			*why = xasprintf("line 1 is not a snapshot");
		else if (st == NULL) {
			st = json_incref(e);
			model = replay_model(st);
		} else if (json_is_array(json_object_get(e, "stale")))
			json_array_extend(stale, json_object_get(e, "stale"));
		else if (replay_line(model, e) < 0)
			*why = xasprintf("line %zu is not a change of a session",
			    line);
		json_decref(e);
	}
	if (*why == NULL && st == NULL)
		*why = xasprintf("empty");
	if (*why == NULL)
		replay_unmodel(st, model);
	json_decref(model);
	free(buf);
	if (*why != NULL) {
		json_decref(st);
		return NULL;
	}
	return st;
}

/* Reads the state file: the sessions of the famd before this one. */
static void
restart_load(struct host *h)
{
	struct host_restart *rs = h->restart;
	char *why = NULL, *bad;
	json_t *st = NULL, *sessions, *v, *stale = json_array();
	size_t i;
	int fd = load_open(rs->path, &why);

	if (fd == -ENOENT) {
		json_decref(stale);
		return;
	}
	rs->loading = true;
	if (fd >= 0 && stale == NULL)
		why = xasprintf("out of memory");
	else if (fd >= 0)
		st = load_replay(fd, stale, &why);
	if (fd >= 0)
		close(fd);
	if (st != NULL && load_head(h, st, &why) == 0) {
		sessions = json_object_get(st, "sessions");
		if (!json_is_array(sessions))
			why = xasprintf("no sessions");
		json_array_foreach(sessions, i, v) {
			if (why != NULL || load_session(h, v, &why) < 0)
				break;
			rs->restored++;
		}
		/* (before any REARENA: no chunk is taken back yet) */
		if (why == NULL)
			load_fetch(h, st, &why);
	}
	json_decref(st);
	if (why == NULL)
		host_restart_stale_apply(h, stale);
	json_decref(stale);
	rs->loading = false;
	if (why == NULL) {
		for (unsigned n = 0; n < h->nnodes; n++) {
			h->nodes[n].session = rs->node_session[n];
			h->nodes[n].instance = rs->node_instance[n];
		}
		log_notice("host: restart state %s: %llu sessions of the famd "
		    "before this one wait for their programs", rs->path,
		    (unsigned long long)rs->restored);
		return;
	}
	load_undo(h);
	rs->restored = 0;
	memset(rs->node_session, 0, sizeof rs->node_session);
	memset(rs->node_instance, 0, sizeof rs->node_instance);
	bad = xasprintf("%s.refused", rs->path);
	rename(rs->path, bad);
	log_err("host: restart state %s refused (kept as %s): %s; the "
	    "programs of the famd before this one get SIGBUS when they touch "
	    "their fabric-attached memory", rs->path, bad, why);
	free(bad);
	free(why);
}

/* ---- lifecycle ----------------------------------------------------- */

/* Sets the restart state up and reads what the famd before left. */
int
host_restart_init(struct host *h)
{
	struct host_restart *rs = calloc(1, sizeof *rs);

	if (rs == NULL)
		return -ENOMEM;
	h->restart = rs;
	rs->jfd = -1;
	rs->path = xasprintf("%s.state", h->session_path);
	if (h->cont_ok) {
		rs->off = true;
		if (unlink(rs->path) == 0)
			log_warn("host: install = continue: programs do not "
			    "outlive a restart of famd (an arena's pages in "
			    "flight cannot be told from installed ones); the "
			    "restart state %s is removed", rs->path);
		return 0;
	}
	restart_load(h);
	rs->dirty = true;
	return 0;
}

/*
 * Releases the restored sessions whose process is gone or whose grace is
 * over, and saves the state when it changed.
 */
void
host_restart_tick(struct host *h)
{
	struct host_restart *rs = h->restart;
	struct host_client *cl, *next;
	uint64_t now = mono_ns();

	if (rs == NULL || rs->off)
		return;
	for (cl = h->clients; cl != NULL; cl = next) {
		bool gone;

		next = cl->next;
		if (!cl->restored || cl->dead)
			continue;
		gone = kill(cl->pid, 0) < 0 && errno == ESRCH;
		if (!gone && now - cl->restored_ns < RESTART_GRACE_NS)
			continue;
		log_notice("host: session pid %ld of the famd before this one "
		    "%s: its %llu regions are freed", (long)cl->pid, gone ?
		    "ended with its process" : "was not taken back within "
		    "60 s", (unsigned long long)cl->nregions);
		rs->released++;
		host_client_release(cl);
		rs->dirty = true;
	}
	for (unsigned i = 0; i < h->nnodes; i++)
		if (rs->node_session[i] != h->nodes[i].session ||
		    rs->node_instance[i] != h->nodes[i].instance)
			rs->dirty = true;
	host_restart_flush(h); /* copies' rows gone stale or caught up */
	/* Copies moved (replace_after) or made again: their stripes changed. */
	if (rs->copies_placed != h->rp.moved + h->rb.recreated)
		rs->dirty = true;
	/* A session ended; or the journal outgrew a snapshot. */
	if (state_sessions(h) != rs->sessions || (rs->jlines > 1024 &&
	    rs->jlines > 2 * state_regions(h)))
		rs->dirty = true;
	if (rs->dirty)
		host_restart_save(h);
}

/*
 * famd stops (SIGTERM, famctl stop): the sessions are handed over to the
 * next host famd instead of released, when there is a state to hand.
 */
void
host_restart_stop(struct host *h)
{
	struct host_restart *rs = h->restart;
	unsigned n = 0;

	if (rs == NULL || rs->off)
		return;
	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next)
		n += !cl->dead && !cl->orphan && cl->token != 0 &&
		    (cl->uffd >= 0 || cl->restored);
	if (host_restart_save(h) < 0 || n == 0)
		return;
	h->handover = true;
	log_notice("host: stopping: %u sessions kept for the next host famd "
	    "(%s); their programs wait for it", n, rs->path);
}

/* Frees the restart state. */
void
host_restart_fini(struct host *h)
{
	if (h->restart == NULL)
		return;
	if (h->restart->jfd >= 0)
		close(h->restart->jfd);
	free(h->restart->pend);
	free(h->restart->path);
	free(h->restart);
	h->restart = NULL;
}

/* The restart state for famctl status. */
json_t *
host_restart_json(struct host *h)
{
	struct host_restart *rs = h->restart;
	uint64_t waiting = 0;

	if (rs == NULL)
		return json_null();
	for (const struct host_client *cl = h->clients; cl != NULL;
	    cl = cl->next)
		waiting += cl->restored && !cl->dead;
	return json_pack("{s:s,s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
	    "state_file", rs->path, "enabled", !rs->off,
	    "stale_records", (json_int_t)rs->stale_records,
	    "behind_lines", (json_int_t)rs->behind_lines,
	    "saves", (json_int_t)rs->saves,
	    "save_errors", (json_int_t)rs->save_errors,
	    "sessions_restored", (json_int_t)rs->restored,
	    "sessions_waiting", (json_int_t)waiting,
	    "sessions_reclaimed", (json_int_t)rs->reclaimed,
	    "sessions_released", (json_int_t)rs->released,
	    "chunks_resident", (json_int_t)rs->chunks_resident,
	    "chunks_partial", (json_int_t)rs->chunks_partial,
	    "chunks_punched", (json_int_t)rs->chunks_punched);
}
