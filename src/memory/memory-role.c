/*
 * memory-role.c - the memory role: lends this node's DRAM as regions that
 * hosts and dpus read and write over the transport.
 *
 * Model:
 *   - A connection (struct mem_conn) becomes part of a session (struct
 *     mem_session) when its hello is accepted. A session has a random
 *     token; a peer that reconnects with resume = token within
 *     session_grace gets the session, and its regions, back. When the grace
 *     runs out the session ends.
 *   - A region (struct mem_region) is anonymous memory (MAP_PRIVATE |
 *     MAP_ANONYMOUS | MAP_NORESERVE: zero-filled lazily), its size rounded
 *     up to the page size, its id never reused while this famd runs.
 *   - A session reaches a region through a handle (struct mem_handle): the
 *     creator's, or one per session that opened a shared region by name.
 *     READ and WRITE need a handle; anything else is ENOENT.
 *   - A region whose last handle goes is freed, except at the end of a
 *     session when it is FAM_RF_PERSISTENT: it then stays, without owner,
 *     until a session opens it again by name (or famd stops).
 *   - A region has a random key, given to its creator in the REGION_CREATE
 *     answer. A session that presents it in REGION_ADOPT
 *     gets a handle too: a dpu creates regions for a host, which adopts
 *     them so that it can reach them itself. REGION_ADOPT with
 *     FAM_ADOPT_EXCLUSIVE drops every other session's handle: requests
 *     that session still sends fail with ENOENT from then on, so that a
 *     host that changes path (or lost its dpu) is never overtaken by an
 *     older write the dpu forwards late.
 *   - A transfer holds its region (resolve/release): a region freed during
 *     a transfer is unlinked at once and unmapped when the last hold goes.
 *   - A handle has a lease on its session's connection (fam_conn_expose):
 *     with verbs, the region's memory registered for that connection only
 *     (remote read, and remote write unless the region is shared), whose
 *     address and rkey REGION_CREATE answers; the host's one-sided reads
 *     and writes then never reach this code. The lease ends with the
 *     handle (REGION_FREE, session end) and with the connection (a host
 *     that resumes asks for new ones with REGION_LEASE): after that the
 *     old rkey reaches nothing. With tcp a lease is a token and READ and
 *     WRITE come through resolve/release.
 *
 * Everything here runs on the control loop; nothing is locked.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <event2/event.h>

#include "core/famd.h"
#include "transport/transport.h"

#define MEM_MAX_REGIONS   (1u << 20)
#define MEM_MAX_CONNS     4096u
#define MEM_MAX_OUTSTANDING 64u
#define MEM_HASH_MIN      256u
#define MEM_PRELOAD_CHUNK (1u << 20)

struct mem_session;
struct mem_region;

/* A session's use of a region: created, or opened by name. */
struct mem_handle {
	LIST_ENTRY(mem_handle) by_session;
	LIST_ENTRY(mem_handle) by_region;
	struct mem_session *s;
	struct mem_region *r;
	unsigned refs;            /* opens by this session (shared regions) */
	struct fam_mr *lease;     /* on the session's connection, or NULL */
	uint64_t lease_addr;      /* verbs: remote address of byte 0 */
	uint32_t lease_rkey;      /* verbs: its rkey; tcp: 0 */
};

struct mem_region {
	uint32_t id;
	uint32_t key;             /* random, never 0: REGION_ADOPT's proof */
	uint32_t flags;           /* FAM_RF_* */
	uint64_t size;            /* bytes mapped, a multiple of the page */
	uint64_t length;          /* bytes of content (preloaded or asked) */
	void *mem;
	char name[FAM_NAME_MAX + 1];
	char *path;               /* FAM_RF_FILE: the file, under preload_dir */
	char node[FAM_NAME_MAX + 1]; /* node of the session that created it */
	uint64_t session;         /* serial of that session */
	unsigned holds;           /* transfers in progress */
	bool freed;               /* unlinked; unmapped when holds reach 0 */
	unsigned nhandles;
	LIST_HEAD(, mem_handle) handles;
	uint64_t reads, writes, bytes_read, bytes_written;
	struct mem_region *hnext; /* chain in the id table */
	TAILQ_ENTRY(mem_region) link;
};

struct mem_conn;

struct mem_session {
	uint64_t token;           /* random; the peer presents it to resume */
	uint64_t serial;          /* shown in status and logs instead */
	uint8_t role;             /* enum fam_role_wire of the peer */
	char node[FAM_NAME_MAX + 1];
	char peer[64];            /* address of the last connection */
	struct mem_conn *mcs[FAM_SESSION_CONNS]; /* its live connections */
	unsigned nmc;             /* 0 while detached */
	struct mem_conn *primary; /* the one that holds the leases (verbs) */
	struct event *grace;
	unsigned nregions;
	uint64_t bytes;
	uint64_t reads, writes, bytes_read, bytes_written;
	LIST_HEAD(, mem_handle) handles;
	TAILQ_ENTRY(mem_session) link;
};

struct mem_conn {
	struct fam_conn *c;
	struct mem_session *s;    /* once the hello is accepted */
	char peer[64];
	bool refused;             /* our hello handler said no */
	TAILQ_ENTRY(mem_conn) link;
};

/* Cumulative counters, zeroed by stats.reset. */
struct mem_counters {
	uint64_t reads, writes;
	uint64_t bytes_read, bytes_written;   /* to peers, from peers */
	uint64_t rw_errors;
	uint64_t regions_created, regions_opened, regions_freed;
	uint64_t regions_adopted, handles_revoked, adopt_errors;
	uint64_t create_errors, free_errors, lease_errors;
	uint64_t stats_requests;
	uint64_t connections, hello_refusals, bad_frames, timeouts;
	uint64_t input_pauses;
	uint64_t completion_errors;
	uint64_t sessions_started, sessions_resumed, sessions_ended;
	uint64_t quota_refusals;
};

static struct {
	struct famd *d;
	struct fam_listener *l;
	struct fam_conn_opts opts;
	char listen[64];
	char node[FAM_NAME_MAX + 1];
	uint64_t instance;
	uint64_t capacity;
	uint64_t reserved;        /* bytes mapped, freed-but-held included */
	uint64_t pagesize;
	uint64_t grace_ms;
	char *preload_dir;        /* ours: a reload frees the cfg's strings */
	uint32_t next_id;
	uint64_t next_serial;
	unsigned nregions, nconns, nsessions, nattached;
	bool stopping;
	struct mem_region **table;
	uint32_t table_size;
	TAILQ_HEAD(, mem_region) regions;
	TAILQ_HEAD(, mem_session) sessions;
	TAILQ_HEAD(, mem_conn) conns;
	struct mem_counters n;
} mem;

/* Rounds n up to the page size; 0 when it would overflow. */
static uint64_t
mem_round(uint64_t n)
{
	if (n > UINT64_MAX - (mem.pagesize - 1))
		return 0;
	return (n + mem.pagesize - 1) & ~(mem.pagesize - 1);
}

/* Returns 64 random bits that are not zero. */
static uint64_t
mem_random64(void)
{
	uint64_t v = 0;

	while (v == 0)
		if (getrandom(&v, sizeof v, 0) != sizeof v)
			v = mono_ns() ^ ((uint64_t)getpid() << 32);
	return v;
}

/* Formats a byte count for log lines. */
static const char *
mem_bytes(char *buf, size_t len, uint64_t n)
{
	return fmt_bytes(buf, len, n);
}

/* Returns the region flags as text: "file,shared,persistent" or "-". */
static const char *
mem_flags_text(char *buf, size_t len, uint32_t flags)
{
	snprintf(buf, len, "%s%s%s%s", flags & FAM_RF_FILE ? "file," : "",
	    flags & FAM_RF_SHARED ? "shared," : "",
	    flags & FAM_RF_PERSISTENT ? "persistent," : "",
	    flags == 0 ? "-" : "");
	if (flags != 0 && strlen(buf) > 0)
		buf[strlen(buf) - 1] = '\0';
	return buf;
}

/* ---- the region table ---------------------------------------------------- */

/* Finds a live region by id. */
static struct mem_region *
mem_region_find(uint32_t id)
{
	struct mem_region *r = mem.table[id & (mem.table_size - 1)];

	while (r != NULL && r->id != id)
		r = r->hnext;
	return r;
}

/* Doubles the id table when it gets crowded. */
static void
mem_table_grow(void)
{
	uint32_t size = mem.table_size * 2;
	struct mem_region **t = calloc(size, sizeof *t), *r;

	if (t == NULL)
		return; /* longer chains, still correct */
	TAILQ_FOREACH(r, &mem.regions, link) {
		r->hnext = t[r->id & (size - 1)];
		t[r->id & (size - 1)] = r;
	}
	free(mem.table);
	mem.table = t;
	mem.table_size = size;
}

/* Finds a live region by name. */
static struct mem_region *
mem_region_by_name(const char *name)
{
	struct mem_region *r;

	TAILQ_FOREACH(r, &mem.regions, link)
		if (r->name[0] != '\0' && strcmp(r->name, name) == 0)
			return r;
	return NULL;
}

/* Unmaps a freed region once no transfer holds it. */
static void
mem_region_unmap(struct mem_region *r)
{
	munmap(r->mem, r->size);
	mem.reserved -= r->size;
	free(r->path);
	free(r);
}

/* Frees a region: out of the table now, unmapped when no longer held. */
static void
mem_region_unlink(struct mem_region *r, const char *why)
{
	struct mem_region **pp = &mem.table[r->id & (mem.table_size - 1)];
	char sz[32];

	while (*pp != r)
		pp = &(*pp)->hnext;
	*pp = r->hnext;
	TAILQ_REMOVE(&mem.regions, r, link);
	mem.nregions--;
	mem.n.regions_freed++;
	r->freed = true;
	if (!mem.stopping)
		log_info("memory: region %" PRIu32 "%s%s%s freed (%s, node "
		    "%s): %s", r->id, r->name[0] ? " (" : "", r->name,
		    r->name[0] ? ")" : "", mem_bytes(sz, sizeof sz, r->size),
		    r->node, why);
	if (r->holds == 0)
		mem_region_unmap(r);
}

/* ---- handles ---------------------------------------------------------- */

/* Returns the handle session s has on region r, or NULL. */
static struct mem_handle *
mem_handle_find(struct mem_session *s, struct mem_region *r)
{
	struct mem_handle *h;

	LIST_FOREACH(h, &r->handles, by_region)
		if (h->s == s)
			return h;
	return NULL;
}

/* Gives session s a handle on region r. Returns 0 or -ENOMEM. */
static int
mem_handle_new(struct mem_session *s, struct mem_region *r)
{
	struct mem_handle *h = calloc(1, sizeof *h);

	if (h == NULL)
		return -ENOMEM;
	h->s = s;
	h->r = r;
	h->refs = 1;
	LIST_INSERT_HEAD(&s->handles, h, by_session);
	LIST_INSERT_HEAD(&r->handles, h, by_region);
	r->nhandles++;
	s->nregions++;
	s->bytes += r->size;
	return 0;
}

/*
 * Drops a handle. The region goes with its last handle, unless the session
 * is ending (ending) and the region is persistent. Returns true when the
 * region was freed.
 */
static bool
mem_handle_drop(struct mem_handle *h, bool ending, const char *why)
{
	struct mem_region *r = h->r;
	struct mem_session *s = h->s;

	if (h->lease != NULL)
		fam_mr_deregister(h->lease);
	LIST_REMOVE(h, by_session);
	LIST_REMOVE(h, by_region);
	r->nhandles--;
	s->nregions--;
	s->bytes -= r->size;
	free(h);
	if (r->nhandles > 0)
		return false;
	if (ending && (r->flags & FAM_RF_PERSISTENT)) {
		if (!mem.stopping)
			log_info("memory: region %" PRIu32 "%s%s%s of node %s "
			    "kept after its session: persistent", r->id,
			    r->name[0] ? " (" : "", r->name,
			    r->name[0] ? ")" : "", r->node);
		return false;
	}
	mem_region_unlink(r, why);
	return true;
}

/*
 * Gives h's session a lease on h's region on the session's connection.
 * Returns 0 or -errno (-ENOTCONN while detached).
 */
static int
mem_handle_lease(struct mem_handle *h)
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
static void
mem_session_unlease(struct mem_session *s, bool dereg)
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

/* ---- sessions ----------------------------------------------------------- */

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

/* Starts a session for a connection whose hello was accepted. */
static struct mem_session *
mem_session_new(struct mem_conn *mc, const struct fam_hello *req)
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
static void
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

/* ---- preload files ------------------------------------------------------ */

/*
 * Opens path beneath dfd without following symlinks at all: the fallback
 * when the kernel has no openat2(). Returns a descriptor or -errno.
 */
static int
mem_open_nofollow(int dfd, const char *path)
{
	char *copy = strdup(path), *p, *slash;
	int fd = -1, cur = dfd, err = 0;

	if (copy == NULL)
		return -ENOMEM;
	for (p = copy; (slash = strchr(p, '/')) != NULL; p = slash + 1) {
		*slash = '\0';
		if (*p == '\0' || strcmp(p, ".") == 0)
			continue;
		fd = openat(cur, p, O_PATH | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC);
		if (cur != dfd)
			close(cur);
		if (fd < 0) {
			err = -errno;
			free(copy);
			return err;
		}
		cur = fd;
	}
	fd = openat(cur, p, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK |
	    O_CLOEXEC);
	if (fd < 0)
		err = -errno;
	if (cur != dfd)
		close(cur);
	free(copy);
	return fd < 0 ? err : fd;
}

/*
 * Opens a file to preload: a relative path resolved beneath preload_dir,
 * never leaving it (no "..", no absolute path, no symlink out), and a
 * regular file. Returns a descriptor, or -EACCES, -ENOENT, -errno.
 */
static int
mem_open_preload(const char *path, struct stat *st)
{
	struct open_how how = {
		.flags = O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	const char *p;
	int dfd, fd, err;

	if (path[0] == '/')
		return -EACCES;
	for (p = path; *p != '\0'; p += strcspn(p, "/"), p += *p == '/') {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return -EACCES;
	}
	dfd = open(mem.preload_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		err = -errno;
		log_warn("memory: preload_dir %s: %s", mem.preload_dir,
		    strerror(errno));
		return err == -ENOENT ? -ENOENT : -EACCES;
	}
	fd = (int)syscall(SYS_openat2, dfd, path, &how, sizeof how);
	if (fd < 0 && (errno == ENOSYS || errno == EPERM)) {
		fd = mem_open_nofollow(dfd, path);
		if (fd < 0)
			errno = -fd;
	}
	err = fd < 0 ? errno : 0;
	close(dfd);
	if (fd < 0) {
		switch (err) {
		case ENOENT:
		case ENOTDIR:
			return -ENOENT;
		case ENAMETOOLONG:
			return -EINVAL;
		default: /* EXDEV, ELOOP (an escape), EACCES, ... */
			return -EACCES;
		}
	}
	if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
		close(fd);
		return -EACCES;
	}
	return fd;
}

/* Copies len bytes of fd into mem. Returns 0 or -errno. */
static int
mem_preload(int fd, uint8_t *dst, uint64_t len)
{
	uint64_t off = 0;

	while (off < len) {
		size_t want = len - off > MEM_PRELOAD_CHUNK ? MEM_PRELOAD_CHUNK :
		    (size_t)(len - off);
		ssize_t n = pread(fd, dst + off, want, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break; /* the file shrank: the rest stays zero */
		off += (uint64_t)n;
	}
	return 0;
}

/* ---- requests ----------------------------------------------------------- */

/* Fills the REGION_CREATE answer for region r with the lease of handle h. */
static void
mem_region_info(const struct mem_region *r, const struct mem_handle *h,
    struct fam_region_info *info)
{
	memset(info, 0, sizeof *info);
	info->region = r->id;
	info->key = r->key;
	info->size = r->size;
	info->flags = r->flags;
	info->length = r->length;
	if (h != NULL) {
		info->addr = h->lease_addr;
		info->rkey = h->lease_rkey;
	}
}

static int mem_region_free(struct mem_session *s, uint32_t id);

/*
 * Leases region r (just created or opened) to session s and fills the
 * answer; when no lease can be had the create or open is undone.
 */
static int
mem_region_lend(struct mem_session *s, struct mem_region *r,
    struct fam_region_info *info)
{
	struct mem_handle *h = mem_handle_find(s, r);
	int err = mem_handle_lease(h);

	if (err < 0) {
		mem_region_free(s, r->id);
		return err;
	}
	mem_region_info(r, h, info);
	return 0;
}

/* Opens an existing region by name for session s. Returns 0 or -errno. */
static int
mem_region_open(struct mem_session *s, struct mem_region *r, uint32_t flags)
{
	struct mem_handle *h;

	if ((flags & FAM_RF_SHARED) != (r->flags & FAM_RF_SHARED))
		return -EBUSY; /* the name is in use by the other kind */
	if (!(r->flags & FAM_RF_SHARED)) {
		/* One writer: only a region nobody holds can be taken over. */
		if (r->nhandles > 0)
			return -EBUSY;
		if (mem_handle_new(s, r) < 0)
			return -ENOMEM;
		log_notice("memory: region %" PRIu32 " (%s) reopened by node "
		    "%s (session %" PRIu64 ")", r->id, r->name, s->node,
		    s->serial);
		mem.n.regions_opened++;
		return 0;
	}
	h = mem_handle_find(s, r);
	if (h != NULL)
		h->refs++;
	else if (mem_handle_new(s, r) < 0)
		return -ENOMEM;
	mem.n.regions_opened++;
	log_info("memory: shared region %" PRIu32 " (%s) opened by node %s "
	    "(%u user%s)", r->id, r->name, s->node, r->nhandles,
	    r->nhandles == 1 ? "" : "s");
	return 0;
}

/*
 * Checks the quota of s's node (peer_max_bytes, peer_max_regions) for one
 * more region of size bytes: every region it created and that is not
 * freed counts, persistent ones and those of its detached sessions too.
 */
static int
mem_peer_quota(const struct mem_session *s, uint64_t size)
{
	uint64_t max_bytes = (uint64_t)cfg_int(mem.d->cfg,
	    CFG_MEMORY_PEER_MAX_BYTES);
	uint64_t max_regions = (uint64_t)cfg_int(mem.d->cfg,
	    CFG_MEMORY_PEER_MAX_REGIONS);
	uint64_t bytes = 0, regions = 0;
	const struct mem_region *r;
	char a[32], b[32];

	if (max_bytes == 0 && max_regions == 0)
		return 0;
	TAILQ_FOREACH(r, &mem.regions, link) {
		if (r->freed || strcmp(r->node, s->node) != 0)
			continue;
		bytes += r->size;
		regions++;
	}
	if ((max_regions == 0 || regions + 1 <= max_regions) &&
	    (max_bytes == 0 || (size <= max_bytes && bytes <= max_bytes - size)))
		return 0;
	mem.n.quota_refusals++;
	log_info("memory: node %s is over its quota: %" PRIu64 " regions, %s "
	    "held, %s more asked (peer_max_regions %" PRIu64 ", "
	    "peer_max_bytes %s; 0: none)", s->node, regions,
	    mem_bytes(a, sizeof a, bytes), mem_bytes(b, sizeof b, size),
	    max_regions, mem_bytes((char[32]){ 0 }, 32, max_bytes));
	return -EDQUOT;
}

/* Creates (or opens, by name) a region for session s. */
static int
mem_region_create(struct mem_session *s, const struct fam_region_create *req,
    struct fam_region_info *info)
{
	struct mem_region *r;
	struct stat st;
	uint64_t size = req->size, rounded;
	void *m;
	int fd = -1, err;
	char sz[32];

	if ((req->flags & FAM_RF_PERSISTENT) && req->name[0] == '\0')
		return -EINVAL; /* nobody could ever find it again */
	if (req->name[0] != '\0' && (r = mem_region_by_name(req->name)) !=
	    NULL) {
		err = mem_region_open(s, r, req->flags);
		if (err == 0)
			err = mem_region_lend(s, r, info);
		return err;
	}
	if (req->flags & FAM_RF_FILE) {
		fd = mem_open_preload(req->path, &st);
		if (fd < 0) {
			log_info("memory: node %s may not preload '%s': %s",
			    s->node, req->path, strerror(-fd));
			return fd;
		}
		if (size == 0)
			size = (uint64_t)st.st_size;
		if (size == 0) {
			close(fd);
			return -EINVAL;
		}
	}
	rounded = size <= mem.capacity ? mem_round(size) : 0;
	if (rounded == 0 || rounded > mem.capacity - mem.reserved) {
		if (fd >= 0)
			close(fd);
		log_info("memory: node %s asked for %s: only %s of %s left",
		    s->node, mem_bytes(sz, sizeof sz, size),
		    mem_bytes((char[32]){ 0 }, 32, mem.capacity -
		    mem.reserved), mem_bytes((char[32]){ 0 }, 32,
		    mem.capacity));
		return -ENOSPC;
	}
	if (mem.nregions >= MEM_MAX_REGIONS || mem.next_id == UINT32_MAX) {
		if (fd >= 0)
			close(fd);
		return -EMFILE;
	}
	if ((err = mem_peer_quota(s, rounded)) < 0) {
		if (fd >= 0)
			close(fd);
		return err;
	}
	r = calloc(1, sizeof *r);
	if (r == NULL || (req->path[0] != '\0' &&
	    (r->path = strdup(req->path)) == NULL)) {
		free(r);
		if (fd >= 0)
			close(fd);
		return -ENOMEM;
	}
	m = mmap(NULL, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		err = -errno;
		log_warn("memory: cannot map %s: %s", mem_bytes(sz, sizeof sz,
		    rounded), strerror(errno));
		free(r->path);
		free(r);
		if (fd >= 0)
			close(fd);
		return err == -ENOMEM ? -ENOSPC : err;
	}
	(void)madvise(m, rounded, MADV_DONTDUMP);
	if (fd >= 0) {
		uint64_t flen = (uint64_t)st.st_size < size ?
		    (uint64_t)st.st_size : size;

		err = mem_preload(fd, m, flen);
		close(fd);
		if (err < 0) {
			log_warn("memory: preloading %s/%s: %s",
			    mem.preload_dir, req->path, strerror(-err));
			munmap(m, rounded);
			free(r->path);
			free(r);
			return -EIO;
		}
	}
	if (req->flags & FAM_RF_SHARED)
		(void)mprotect(m, rounded, PROT_READ);
	r->id = mem.next_id++;
	r->key = (uint32_t)mem_random64();
	if (r->key == 0)
		r->key = 1;
	r->flags = req->flags;
	r->size = rounded;
	r->length = (req->flags & FAM_RF_FILE) && (uint64_t)st.st_size < size ?
	    (uint64_t)st.st_size : size;
	r->mem = m;
	snprintf(r->name, sizeof r->name, "%s", req->name);
	snprintf(r->node, sizeof r->node, "%s", s->node);
	r->session = s->serial;
	LIST_INIT(&r->handles);
	if (mem_handle_new(s, r) < 0) {
		munmap(m, rounded);
		free(r->path);
		free(r);
		return -ENOMEM;
	}
	TAILQ_INSERT_TAIL(&mem.regions, r, link);
	r->hnext = mem.table[r->id & (mem.table_size - 1)];
	mem.table[r->id & (mem.table_size - 1)] = r;
	mem.nregions++;
	mem.reserved += rounded;
	mem.n.regions_created++;
	if (mem.nregions > 2 * mem.table_size)
		mem_table_grow();
	log_info("memory: region %" PRIu32 " created for node %s: %s%s%s%s"
	    "%s%s", r->id, s->node, mem_bytes(sz, sizeof sz, rounded),
	    r->name[0] ? ", name " : "", r->name, r->path != NULL ?
	    ", file " : "", r->path != NULL ? r->path : "",
	    r->flags & FAM_RF_PERSISTENT ? ", persistent" : "");
	return mem_region_lend(s, r, info);
}

/* Renews session s's lease on region id on its current connection. */
static int
mem_region_lease(struct mem_session *s, uint32_t id,
    struct fam_region_info *info)
{
	struct mem_region *r = mem_region_find(id);
	struct mem_handle *h;
	int err;

	if (r == NULL || (h = mem_handle_find(s, r)) == NULL)
		return -ENOENT;
	err = mem_handle_lease(h);
	if (err < 0)
		return err;
	mem_region_info(r, h, info);
	return 0;
}

/* Frees session s's use of a region. */
static int
mem_region_free(struct mem_session *s, uint32_t id)
{
	struct mem_region *r = mem_region_find(id);
	struct mem_handle *h;
	char why[96];

	if (r == NULL || (h = mem_handle_find(s, r)) == NULL)
		return -ENOENT;
	if (--h->refs > 0)
		return 0;
	snprintf(why, sizeof why, "freed by node %s", s->node);
	mem_handle_drop(h, false, why);
	return 0;
}

/*
 * Gives session s a handle on region id created by another session, which
 * handed on its key; with FAM_ADOPT_EXCLUSIVE, every other handle goes.
 */
static int
mem_region_adopt(struct mem_session *s, const struct fam_region_adopt *req,
    struct fam_region_info *info)
{
	struct mem_region *r = mem_region_find(req->region);
	struct mem_handle *h, *mine, *next;
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
	err = mem_handle_lease(mine);
	if (err < 0) {
		if (fresh)
			(void)mem_handle_drop(mine, true, "no lease");
		return err;
	}
	if (!fresh && !(req->flags & FAM_ADOPT_EXCLUSIVE))
		mine->refs++;
	if (req->flags & FAM_ADOPT_EXCLUSIVE) {
		for (h = LIST_FIRST(&r->handles); h != NULL; h = next) {
			next = LIST_NEXT(h, by_region);
			if (h->s == s)
				continue;
			revoked++;
			mem_handle_drop(h, false, "revoked");
		}
		mem.n.handles_revoked += revoked;
	}
	mem.n.regions_adopted++;
	log_info("memory: region %" PRIu32 " adopted by node %s (session %"
	    PRIu64 ")%s", r->id, s->node, s->serial, revoked > 0 ?
	    ", every other handle revoked" : "");
	mem_region_info(r, mine, info);
	return 0;
}

/* Returns the cumulative and current counters as JSON. */
static json_t *
mem_counters_json(void)
{
	const struct mem_counters *n = &mem.n;

	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
	    "s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
	    "s:I,s:I,s:I}",
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
	    "connections_open", (json_int_t)mem.nconns);
}

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

/* Answers REGION_CREATE, REGION_FREE and STATS. */
static void
mem_request(struct fam_conn *c, const struct fam_hdr *h,
    const uint8_t *payload, void *arg)
{
	struct mem_conn *mc = arg;
	struct mem_session *s = mc->s;
	struct fam_region_create *req;
	struct fam_region_info info;
	uint8_t out[FAM_REGION_INFO_LEN];
	uint32_t id;
	int err;

	if (s == NULL) {
		(void)fam_conn_reply(c, h, EACCES, NULL, 0, false, NULL, NULL);
		return;
	}
	switch (h->type) {
	case FAM_MSG_REGION_CREATE:
		req = malloc(sizeof *req);
		if (req == NULL) {
			(void)fam_conn_reply(c, h, ENOMEM, NULL, 0, false, NULL,
			    NULL);
			return;
		}
		err = proto_get_region_create(payload, h->len, req);
		if (err == -EPROTO) {
			free(req);
			mem_bad_request(mc, h);
			return;
		}
		if (err == 0)
			err = mem_region_create(s, req, &info);
		free(req);
		if (err < 0) {
			mem.n.create_errors++;
			(void)fam_conn_reply(c, h, -err, NULL, 0, false, NULL,
			    NULL);
			return;
		}
		proto_put_region_info(out, &info);
		(void)fam_conn_reply(c, h, 0, out, sizeof out, true, NULL,
		    NULL);
		return;
	case FAM_MSG_REGION_ADOPT: {
		struct fam_region_adopt ad;

		err = proto_get_region_adopt(payload, h->len, &ad);
		if (err == -EPROTO) {
			mem_bad_request(mc, h);
			return;
		}
		if (err == 0)
			err = mem_region_adopt(s, &ad, &info);
		if (err < 0) {
			mem.n.adopt_errors++;
			(void)fam_conn_reply(c, h, -err, NULL, 0, false, NULL,
			    NULL);
			return;
		}
		proto_put_region_info(out, &info);
		(void)fam_conn_reply(c, h, 0, out, sizeof out, true, NULL,
		    NULL);
		return;
	}
	case FAM_MSG_REGION_ADVISE: {
		struct mem_region *r;
		uint32_t advice;

		err = proto_get_region_advise(payload, h->len, &id, &advice);
		if (err == -EPROTO) {
			mem_bad_request(mc, h);
			return;
		}
		/* Nothing to do with advice here: the region is in DRAM. */
		if (err == 0 && ((r = mem_region_find(id)) == NULL ||
		    mem_handle_find(s, r) == NULL))
			err = -ENOENT;
		(void)fam_conn_reply(c, h, -err, NULL, 0, false, NULL, NULL);
		return;
	}
	case FAM_MSG_REGION_FREE:
		if (proto_get_region_free(payload, h->len, &id) < 0) {
			mem_bad_request(mc, h);
			return;
		}
		err = mem_region_free(s, id);
		if (err < 0)
			mem.n.free_errors++;
		(void)fam_conn_reply(c, h, -err, NULL, 0, false, NULL, NULL);
		return;
	case FAM_MSG_REGION_LEASE:
		if (proto_get_region_free(payload, h->len, &id) < 0) {
			mem_bad_request(mc, h);
			return;
		}
		err = mem_region_lease(s, id, &info);
		if (err < 0) {
			(void)fam_conn_reply(c, h, -err, NULL, 0, false, NULL,
			    NULL);
			return;
		}
		proto_put_region_info(out, &info);
		(void)fam_conn_reply(c, h, 0, out, sizeof out, true, NULL,
		    NULL);
		return;
	case FAM_MSG_STATS: {
		json_t *j = mem_counters_json();
		char *text = json_dumps(j, JSON_COMPACT);

		json_decref(j);
		mem.n.stats_requests++;
		if (text == NULL) {
			(void)fam_conn_reply(c, h, ENOMEM, NULL, 0, false,
			    NULL, NULL);
			return;
		}
		(void)fam_conn_reply(c, h, 0, text, (uint32_t)strlen(text),
		    true, NULL, NULL);
		free(text);
		return;
	}
	default:
		(void)fam_conn_reply(c, h, EOPNOTSUPP, NULL, 0, false, NULL,
		    NULL);
		return;
	}
}

/* Maps a READ or WRITE to region memory, holding the region. */
static int
mem_resolve(void *arg, uint32_t region, uint64_t off, uint32_t len,
    bool write, void **m, void **hold)
{
	struct mem_conn *mc = arg;
	struct mem_region *r = mem_region_find(region);
	int err = 0;

	if (write)
		mem.n.writes++;
	else
		mem.n.reads++;
	if (mc->s == NULL || r == NULL || mem_handle_find(mc->s, r) == NULL)
		err = -ENOENT;
	else if (write && (r->flags & FAM_RF_SHARED))
		err = -EROFS;
	else if (off > r->size || len > r->size - off)
		err = -ERANGE;
	if (err < 0) {
		mem.n.rw_errors++;
		return err;
	}
	r->holds++;
	*m = (uint8_t *)r->mem + off;
	*hold = r;
	return 0;
}

/* A transfer is over: counts its bytes, lets go of the region. */
static void
mem_release(void *arg, void *hold, bool write, uint32_t len)
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
	if (--r->holds == 0 && r->freed)
		mem_region_unmap(r);
}

/* A hello: a new session, or the resumption of one within its grace. */
static int
mem_hello(struct fam_conn *c, const struct fam_hello *req,
    struct fam_hello_resp *resp, void *arg)
{
	struct mem_conn *mc = arg;
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
		if (s->nmc == FAM_SESSION_CONNS) {
			mc->refused = true;
			return -EMFILE;
		}
		mem_session_attach(s, mc, false);
		log_info("memory: session %" PRIu64 " of node %s: connection "
		    "%u from %s", s->serial, s->node, s->nmc, mc->peer);
	} else if (s != NULL) {
		while (s->nmc > 0) {
			struct mem_conn *old = s->mcs[--s->nmc];

			log_notice("memory: session %" PRIu64 " of node %s "
			    "moves from %s to %s", s->serial, s->node,
			    old->peer, mc->peer);
			mem_session_unlease(s, true);
			old->s = NULL;
			if (s->nmc == 0)
				mem.nattached--;
			fam_conn_close(old->c);
		}
		mem_session_attach(s, mc, true);
		mem.n.sessions_resumed++;
		log_notice("memory: session %" PRIu64 " of node %s resumed from "
		    "%s with %u region%s", s->serial, s->node, mc->peer,
		    s->nregions, s->nregions == 1 ? "" : "s");
	} else {
		if (req->resume != 0)
			log_notice("memory: node %s from %s asked to resume a "
			    "session this famd does not have; its regions are "
			    "gone", req->node, mc->peer);
		s = mem_session_new(mc, req);
		if (s == NULL) {
			mc->refused = true;
			return -ENOMEM;
		}
		mem_session_attach(s, mc, true);
		log_notice("memory: session %" PRIu64 " of node %s started "
		    "from %s", s->serial, s->node, mc->peer);
	}
	resp->role = FAM_WIRE_ROLE_MEMORY;
	resp->features = 0;
	resp->session = s->token;
	resp->instance = mem.instance;
	snprintf(resp->node, sizeof resp->node, "%s", mem.node);
	return 0;
}

/* A connection is gone: its session waits for the grace; counts why. */
static void
mem_closed(struct fam_conn *c, int err, void *arg)
{
	struct mem_conn *mc = arg;
	const struct fam_conn_stats *st = fam_conn_stats(c);

	mem.n.bad_frames += st->bad_frames;
	mem.n.input_pauses += st->input_pauses;
	if (err == -ETIMEDOUT)
		mem.n.timeouts++;
	mem.n.completion_errors += st->completion_errors;
	if (mc->s != NULL) {
		if (mc->s->primary == mc)
			mem_session_unlease(mc->s, false);
		mem_session_detach(mc->s, mc, err);
	}
	else if (mc->refused || err == -EACCES || err == -EPROTONOSUPPORT)
		mem.n.hello_refusals++;
	log_info("memory: connection from %s closed%s%s", mc->peer,
	    err != 0 ? ": " : "", err != 0 ? strerror(-err) : "");
	TAILQ_REMOVE(&mem.conns, mc, link);
	mem.nconns--;
	free(mc);
}

static const struct fam_conn_handlers mem_handlers = {
	.hello = mem_hello,
	.request = mem_request,
	.resolve = mem_resolve,
	.release = mem_release,
	.closed = mem_closed,
};

/* A new connection: tracked until it closes. */
static void
mem_accept(struct fam_listener *l, struct fam_conn *c, const char *peer,
    void *arg)
{
	struct mem_conn *mc;

	if (mem.nconns >= MEM_MAX_CONNS) {
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
	mem.n.connections++;
	fam_conn_set_handlers(c, &mem_handlers, mc);
	log_info("memory: connection from %s", peer);
}

/* ---- admin -------------------------------------------------------------- */

/* regions: every region with its size, flags, name and owner. */
static json_t *
cmd_regions(struct admin_req *req)
{
	json_t *list = json_array();
	struct mem_region *r;
	char fl[48];

	TAILQ_FOREACH(r, &mem.regions, link) {
		struct mem_handle *h = LIST_FIRST(&r->handles);

		json_array_append_new(list, json_pack("{s:I,s:I,s:I,s:s,s:s,"
		    "s:s,s:s,s:I,s:i,s:s,s:I,s:I}",
		    "id", (json_int_t)r->id,
		    "size", (json_int_t)r->size,
		    "length", (json_int_t)r->length,
		    "flags", mem_flags_text(fl, sizeof fl, r->flags),
		    "name", r->name[0] ? r->name : "-",
		    "file", r->path != NULL ? r->path : "-",
		    "node", r->node,
		    "session", (json_int_t)(h != NULL ? h->s->serial : 0),
		    "users", (int)r->nhandles,
		    "state", r->nhandles > 0 ? "in use" : "kept",
		    "bytes_read", (json_int_t)r->bytes_read,
		    "bytes_written", (json_int_t)r->bytes_written));
	}
	return list;
}

/* region.free: frees a region no session uses (a kept persistent one). */
static json_t *
cmd_region_free(struct admin_req *req)
{
	json_int_t id = json_integer_value(json_object_get(req->params, "id"));
	struct mem_region *r;
	char why[64];

	if (id <= 0 || id > UINT32_MAX ||
	    (r = mem_region_find((uint32_t)id)) == NULL)
		return admin_fail(req, ADMIN_ERR_PARAMS,
		    "region.free: no region %" JSON_INTEGER_FORMAT, id);
	if (r->nhandles > 0)
		return admin_fail(req, ADMIN_ERR_FAILED, "region.free: region "
		    "%" JSON_INTEGER_FORMAT " is in use by %u session%s", id,
		    r->nhandles, r->nhandles == 1 ? "" : "s");
	snprintf(why, sizeof why, "freed by uid %ld", (long)req->peer->uid);
	mem_region_unlink(r, why);
	return json_pack("{s:I}", "id", id);
}

static const struct admin_param region_free_params[] = {
	{ "id", ADMIN_P_INT, true },
	{ NULL, 0, false },
};

static const struct admin_cmd mem_cmds[] = {
	{ "regions", "list the regions this memory node lends", NULL, 0,
	    cmd_regions },
	{ "region.free", "free a region that no session uses, "
	    "{\"id\": N}", region_free_params, ADMIN_F_CHANGE,
	    cmd_region_free },
};

/* ---- role --------------------------------------------------------------- */

/* Chooses the name this node gives its peers. */
static void
mem_set_node(const struct cfg *cfg)
{
	const char *name = cfg_str(cfg, CFG_NODE_NAME);
	char host[256] = "";

	if (*name == '\0') {
		gethostname(host, sizeof host - 1);
		name = host;
	}
	snprintf(mem.node, sizeof mem.node, "%s", *name ? name : "memory");
	for (char *p = mem.node; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

/* Starts the memory role: listens for hosts and dpus. */
static int
role_memory_start(struct famd *d)
{
	const struct cfg *cfg = d->cfg;
	char *cause = NULL, cap[32];
	struct stat st;
	int err;

	memset(&mem, 0, sizeof mem);
	mem.d = d;
	d->role_state = &mem;
	TAILQ_INIT(&mem.regions);
	TAILQ_INIT(&mem.sessions);
	TAILQ_INIT(&mem.conns);
	mem.pagesize = (uint64_t)sysconf(_SC_PAGESIZE);
	mem.instance = mem_random64();
	mem.capacity = (uint64_t)cfg_int(cfg, CFG_MEMORY_CAPACITY);
	mem.grace_ms = (uint64_t)cfg_int(cfg, CFG_MEMORY_SESSION_GRACE);
	mem.preload_dir = strdup(cfg_str(cfg, CFG_MEMORY_PRELOAD_DIR));
	mem.next_id = 1;
	mem.table_size = MEM_HASH_MIN;
	mem.table = calloc(mem.table_size, sizeof *mem.table);
	if (mem.table == NULL || mem.preload_dir == NULL) {
		free(mem.table);
		free(mem.preload_dir);
		return -ENOMEM;
	}
	mem_set_node(cfg);

	mem.opts.kind = cfg_int(cfg, CFG_TRANSPORT) == CFG_TRANSPORT_VERBS ?
	    FAM_TP_VERBS : FAM_TP_TCP;
	mem.opts.op_timeout_ms = (uint32_t)cfg_int(cfg, CFG_OP_TIMEOUT);
	mem.opts.max_outstanding = MEM_MAX_OUTSTANDING;
	mem.opts.inject_error_ppm = (uint32_t)cfg_int(cfg,
	    CFG_VERBS_INJECT_ERROR_PPM);
	mem.opts.max_payload = FAM_PROTO_MAX_PAYLOAD;
	err = secret_load(cfg_str(cfg, CFG_SECRET_FILE), mem.opts.secret,
	    &cause);
	if (err < 0) {
		log_err("memory: %s", cause);
		free(cause);
		goto fail;
	}
	if (mem.opts.kind == FAM_TP_VERBS &&
	    fam_memlock_check(mem.capacity, &cause) < 0) {
		log_warn("memory: %s; regions beyond it cannot be lent", cause);
		free(cause);
		cause = NULL;
	}
	if (stat(mem.preload_dir, &st) < 0 || !S_ISDIR(st.st_mode))
		log_warn("memory: preload_dir %s is not a directory; file "
		    "regions will fail until it exists", mem.preload_dir);
	err = fam_listen(d->base, cfg_str(cfg, CFG_MEMORY_LISTEN), &mem.opts,
	    mem_accept, NULL, &mem.l, &cause);
	if (err < 0) {
		log_err("memory: %s", cause);
		free(cause);
		goto fail;
	}
	snprintf(mem.listen, sizeof mem.listen, "%s", fam_listener_addr(mem.l));
	admin_register(mem_cmds, nitems(mem_cmds));
	log_notice("memory: listening on %s as %s (capacity %s, preload_dir "
	    "%s, session_grace %" PRIu64 " ms%s)", mem.listen, mem.node,
	    mem_bytes(cap, sizeof cap, mem.capacity), mem.preload_dir,
	    mem.grace_ms, mem.opts.secret[0] ? ", secret required" : "");
	return 0;
fail:
	explicit_bzero(mem.opts.secret, sizeof mem.opts.secret);
	free(mem.table);
	mem.table = NULL;
	free(mem.preload_dir);
	mem.preload_dir = NULL;
	return -1;
}

/* Applies reloadable keys of the memory role. */
static void
role_memory_reload(struct famd *d, const struct cfg *old)
{
	uint64_t grace = (uint64_t)cfg_int(d->cfg, CFG_MEMORY_SESSION_GRACE);

	if (grace != mem.grace_ms) {
		log_notice("memory: session_grace is now %" PRIu64 " ms (for "
		    "sessions that lose their connection from now on)", grace);
		mem.grace_ms = grace;
	}
}

/* Adds the memory role's state, peers and counters to a status object. */
static void
role_memory_status(struct famd *d, json_t *st)
{
	json_t *peers = json_object_get(st, "peers");
	struct mem_session *s;
	struct mem_conn *mc;
	char inst[20];

	snprintf(inst, sizeof inst, "%016" PRIx64, mem.instance);
	json_object_set_new(st, "memory", json_pack("{s:s,s:s,s:s,s:I,s:I,"
	    "s:I,s:s,s:I}",
	    "listen", mem.listen,
	    "transport", mem.opts.kind == FAM_TP_VERBS ? "verbs" : "tcp",
	    "instance", inst,
	    "capacity", (json_int_t)mem.capacity,
	    "bytes_reserved", (json_int_t)mem.reserved,
	    "regions", (json_int_t)mem.nregions,
	    "preload_dir", mem.preload_dir,
	    "session_grace_ms", (json_int_t)mem.grace_ms));
	json_object_set_new(st, "counters", mem_counters_json());
	if (!json_is_array(peers))
		return;
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

/* Zeroes the memory role's counters (not the regions and sessions). */
static void
role_memory_stats_reset(struct famd *d)
{
	struct mem_session *s;
	struct mem_region *r;

	memset(&mem.n, 0, sizeof mem.n);
	TAILQ_FOREACH(s, &mem.sessions, link)
		s->reads = s->writes = s->bytes_read = s->bytes_written = 0;
	TAILQ_FOREACH(r, &mem.regions, link)
		r->reads = r->writes = r->bytes_read = r->bytes_written = 0;
}

/* Stops the memory role: closes every connection, frees every region. */
static void
role_memory_stop(struct famd *d)
{
	struct mem_conn *mc;
	struct mem_session *s;
	struct mem_region *r;
	unsigned regions = mem.nregions;

	if (mem.table == NULL)
		return;
	mem.stopping = true;
	if (mem.l != NULL)
		fam_listener_free(mem.l);
	mem.l = NULL;
	TAILQ_FOREACH(mc, &mem.conns, link)
		fam_conn_close(mc->c);
	/* Connections are torn down from the loop: let it run that. */
	for (int i = 0; i < 100 && !TAILQ_EMPTY(&mem.conns); i++)
		event_base_loop(d->base, EVLOOP_NONBLOCK);
	if (!TAILQ_EMPTY(&mem.conns))
		log_warn("memory: %u connections did not close", mem.nconns);
	while ((s = TAILQ_FIRST(&mem.sessions)) != NULL)
		mem_session_end(s, "famd stops");
	while ((r = TAILQ_FIRST(&mem.regions)) != NULL)
		mem_region_unlink(r, "famd stops");
	free(mem.table);
	mem.table = NULL;
	free(mem.preload_dir);
	mem.preload_dir = NULL;
	explicit_bzero(mem.opts.secret, sizeof mem.opts.secret);
	log_notice("memory: stopped; %u region%s freed", regions,
	    regions == 1 ? "" : "s");
}

const struct role_ops role_memory_ops = {
	.name = "memory",
	.start = role_memory_start,
	.reload = role_memory_reload,
	.status = role_memory_status,
	.stats_reset = role_memory_stats_reset,
	.stop = role_memory_stop,
};
