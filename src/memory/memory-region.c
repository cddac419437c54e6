/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memory-region.c - the bottom of the memory role: regions and handles.
 *
 * Owns: the region table (by id, never reused), handles (a session's use
 * of a region), capacity and per-peer quotas (peer_max_bytes,
 * peer_max_regions), file preloads beneath preload_dir, and the role's
 * state `mem` (memory.h), so that every file of the role reaches it
 * without reaching up.
 * States of a region: live; freed while held (unlinked, unmapped when the
 * last transfer lets go). Calls nothing of the role above it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "memory/memory.h"

struct mem_state mem;

/* Rounds n up to the page size; 0 when it would overflow. */
static uint64_t
mem_round(uint64_t n)
{
	if (n > UINT64_MAX - (mem.pagesize - 1))
		return 0;
	return (n + mem.pagesize - 1) & ~(mem.pagesize - 1);
}

/* Returns 64 random bits that are not zero. */
uint64_t
mem_random64(void)
{
	uint64_t v = 0;

	while (v == 0)
		if (getrandom(&v, sizeof v, 0) != sizeof v)
			v = mono_ns() ^ ((uint64_t)getpid() << 32);
	return v;
}

/* Formats a byte count for log lines. */
const char *
mem_bytes(char *buf, size_t len, uint64_t n)
{
	return fmt_bytes(buf, len, n);
}

/* Returns the region flags as text: "file,shared,persistent" or "-". */
const char *
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

/*
 * Prepares the region table of famd d: capacity and preload_dir from its
 * configuration (quotas are read from it at each creation). 0 or -ENOMEM.
 */
int
mem_regions_init(struct famd *d)
{
	mem.d = d;
	TAILQ_INIT(&mem.regions);
	mem.pagesize = (uint64_t)sysconf(_SC_PAGESIZE);
	mem.capacity = (uint64_t)cfg_int(d->cfg, CFG_MEMORY_CAPACITY);
	mem.reserved = 0;
	mem.sparse_ok = cfg_int(d->cfg, CFG_TRANSPORT) != CFG_TRANSPORT_VERBS;
	mem.nregions = 0;
	mem.preload_dir = strdup(cfg_str(d->cfg, CFG_MEMORY_PRELOAD_DIR));
	mem.next_id = 1;
	mem.table_size = MEM_HASH_MIN;
	mem.table = calloc(mem.table_size, sizeof *mem.table);
	if (mem.table == NULL || mem.preload_dir == NULL) {
		free(mem.table);
		mem.table = NULL;
		free(mem.preload_dir);
		mem.preload_dir = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* Frees every region left (no handle may remain) and the table. */
void
mem_regions_fini(void)
{
	struct mem_region *r;

	while ((r = TAILQ_FIRST(&mem.regions)) != NULL)
		mem_region_unlink(r, "famd stops");
	free(mem.table);
	mem.table = NULL;
	free(mem.preload_dir);
	mem.preload_dir = NULL;
}

/* Zeroes the regions' own counters. */
void
mem_regions_stats_reset(void)
{
	struct mem_region *r;

	TAILQ_FOREACH(r, &mem.regions, link)
		r->reads = r->writes = r->bytes_read = r->bytes_written = 0;
}

/* Finds a live region by id. */
struct mem_region *
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
	mem.reserved -= r->held;
	free(r->charged);
	free(r->path);
	free(r);
}

/* Frees a region: out of the table now, unmapped when no longer held. */
void
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

static int mem_peer_quota(const struct mem_session *s, uint64_t size);
static uint64_t granule_len(const struct mem_region *r, uint64_t g);

/*
 * A WRITE to [off, off + len) of sparse region r by session s: takes the
 * capacity of the granules written there for the first time. 0, or
 * -ENOSPC (the node is full) or -EDQUOT (the peer's quota); nothing is
 * taken then, and the write is refused whole.
 */
static int
mem_region_charge(struct mem_session *s, struct mem_region *r, uint64_t off,
    uint32_t len)
{
	uint64_t g0 = off / MEM_GRANULE, g1 = (off + len - 1) / MEM_GRANULE;
	uint64_t need = 0;
	char a[32], b[32];
	int err;

	for (uint64_t g = g0; g <= g1; g++)
		if (!(r->charged[g / 64] & ((uint64_t)1 << (g % 64))))
			need += granule_len(r, g);
	if (need == 0)
		return 0;
	if (need > mem.capacity - mem.reserved) {
		mem.n.sparse_refusals++;
		log_rl(LOG_WARNING, "memory: node %s wrote to region %" PRIu32
		    ", a reservation, past the capacity: %s left of %s; the "
		    "host keeps the data", s->node, r->id,
		    mem_bytes(a, sizeof a, mem.capacity - mem.reserved),
		    mem_bytes(b, sizeof b, mem.capacity));
		return -ENOSPC;
	}
	if ((err = mem_peer_quota(s, need)) < 0) {
		mem.n.sparse_refusals++;
		return err;
	}
	for (uint64_t g = g0; g <= g1; g++)
		r->charged[g / 64] |= (uint64_t)1 << (g % 64);
	r->held += need;
	mem.reserved += need;
	return 0;
}

/*
 * Checks that session s may READ (or WRITE) len bytes at off of region id:
 * -ENOENT without a handle, -EROFS writing a shared one, -ERANGE past its
 * end; a first write to part of a sparse region takes its capacity
 * (-ENOSPC, -EDQUOT). On 0, *out is the region.
 */
int
mem_region_access(struct mem_session *s, uint32_t id, uint64_t off,
    uint32_t len, bool write, struct mem_region **out)
{
	struct mem_region *r = mem_region_find(id);

	if (s == NULL || r == NULL || mem_handle_find(s, r) == NULL)
		return -ENOENT;
	if (write && (r->flags & FAM_RF_SHARED))
		return -EROFS;
	if (off > r->size || len > r->size - off)
		return -ERANGE;
	if (write && r->charged != NULL && len > 0) {
		int err = mem_region_charge(s, r, off, len);

		if (err < 0)
			return err;
	}
	*out = r;
	return 0;
}

/* Bytes of granule g of sparse region r (the last may be short). */
static uint64_t
granule_len(const struct mem_region *r, uint64_t g)
{
	uint64_t lo = g * MEM_GRANULE;

	return r->size - lo < MEM_GRANULE ? r->size - lo : MEM_GRANULE;
}

/* Gives back the capacity of sparse region r's whole granules in [lo, hi). */
void
mem_region_uncharge(struct mem_region *r, uint64_t lo, uint64_t hi)
{
	uint64_t g0 = (lo + MEM_GRANULE - 1) / MEM_GRANULE, g1;

	if (r->charged == NULL || hi <= lo)
		return;
	g1 = hi >= r->size ? (r->size + MEM_GRANULE - 1) / MEM_GRANULE :
	    hi / MEM_GRANULE;
	for (uint64_t g = g0; g < g1; g++) {
		uint64_t bit = (uint64_t)1 << (g % 64);

		if (!(r->charged[g / 64] & bit))
			continue;
		r->charged[g / 64] &= ~bit;
		r->held -= granule_len(r, g);
		mem.reserved -= granule_len(r, g);
	}
}

/* A transfer starts: r stays mapped until it lets go. */
void
mem_region_hold(struct mem_region *r)
{
	r->holds++;
}

/* A transfer is over: unmaps r when it was freed meanwhile. */
void
mem_region_let_go(struct mem_region *r)
{
	if (--r->holds == 0 && r->freed)
		mem_region_unmap(r);
}

/* Fills the REGION_CREATE answer for region r with the lease of handle h. */
void
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

/* ---- handles ---------------------------------------------------------- */

/* Returns the handle session s has on region r, or NULL. */
struct mem_handle *
mem_handle_find(struct mem_session *s, struct mem_region *r)
{
	struct mem_handle *h;

	LIST_FOREACH(h, &r->handles, by_region)
		if (h->s == s)
			return h;
	return NULL;
}

/* Gives session s a handle on region r. Returns 0 or -ENOMEM. */
int
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
bool
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

/* ---- creation ----------------------------------------------------------- */

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
 * Checks the quota of s's owner (peer_max_bytes, peer_max_regions; the
 * owner is the authenticated peer, memory.h) for one more region of size
 * bytes: every region its sessions created and that is not freed counts,
 * persistent ones and those of its detached sessions too.
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
	char a[32], b[32], who[160];

	if (max_bytes == 0 && max_regions == 0)
		return 0;
	TAILQ_FOREACH(r, &mem.regions, link) {
		if (r->freed || strcmp(r->owner, s->owner) != 0)
			continue;
		bytes += r->held;
		regions++;
	}
	if ((max_regions == 0 || regions + 1 <= max_regions) &&
	    (max_bytes == 0 || (size <= max_bytes && bytes <= max_bytes - size)))
		return 0;
	mem.n.quota_refusals++;
	if (mem.has_secret)
		snprintf(who, sizeof who, "peer %s (node %s)", s->owner, s->node);
	else
		snprintf(who, sizeof who, "node %s", s->node);
	log_info("memory: %s is over its quota: %" PRIu64 " regions, %s "
	    "held, %s more asked (peer_max_regions %" PRIu64 ", "
	    "peer_max_bytes %s; 0: none)", who, regions,
	    mem_bytes(a, sizeof a, bytes), mem_bytes(b, sizeof b, size),
	    max_regions, mem_bytes((char[32]){ 0 }, 32, max_bytes));
	return -EDQUOT;
}

/*
 * Opens the file a FAM_RF_FILE region is preloaded from into *fd (-1 for
 * another region) and settles *size (0 asked: the file's). 0 or -errno.
 */
static int
mem_region_file(const struct mem_session *s,
    const struct fam_region_create *req, struct stat *st, uint64_t *size,
    int *fd)
{
	*fd = -1;
	if (!(req->flags & FAM_RF_FILE))
		return 0;
	*fd = mem_open_preload(req->path, st);
	if (*fd < 0) {
		log_info("memory: node %s may not preload '%s': %s", s->node,
		    req->path, strerror(-*fd));
		return *fd;
	}
	if (*size == 0)
		*size = (uint64_t)st->st_size;
	if (*size == 0) {
		close(*fd);
		*fd = -1;
		return -EINVAL;
	}
	return 0;
}

/*
 * Admits a new region of size bytes for session s: within the capacity
 * left (-ENOSPC), the region count (-EMFILE), the node's quota (-EDQUOT).
 * *rounded is the size to map.
 */
static int
mem_region_admit(const struct mem_session *s, uint64_t size, bool sparse,
    uint64_t *rounded)
{
	char sz[32];

	if (sparse) {
		/* Nothing taken now: mem_region_charge, as it is written. */
		*rounded = size <= MEM_SPARSE_MAX ? mem_round(size) : 0;
		if (*rounded == 0)
			return -ENOSPC;
		if (mem.nregions >= MEM_MAX_REGIONS ||
		    mem.next_id == UINT32_MAX)
			return -EMFILE;
		return mem_peer_quota(s, 0);
	}
	*rounded = size <= mem.capacity ? mem_round(size) : 0;
	if (*rounded == 0 || *rounded > mem.capacity - mem.reserved) {
		log_info("memory: node %s asked for %s: only %s of %s left",
		    s->node, mem_bytes(sz, sizeof sz, size),
		    mem_bytes((char[32]){ 0 }, 32, mem.capacity -
		    mem.reserved), mem_bytes((char[32]){ 0 }, 32,
		    mem.capacity));
		return -ENOSPC;
	}
	if (mem.nregions >= MEM_MAX_REGIONS || mem.next_id == UINT32_MAX)
		return -EMFILE;
	return mem_peer_quota(s, *rounded);
}

/*
 * Maps r->size bytes for r, zero-filled, then copies flen bytes of fd in
 * (fd >= 0); a shared region becomes read-only. Returns 0 or -errno.
 */
static int
mem_region_map(struct mem_region *r, uint32_t flags, int fd, uint64_t flen)
{
	char sz[32];
	void *m;
	int err;

	m = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED) {
		err = -errno;
		log_warn("memory: cannot map %s: %s", mem_bytes(sz, sizeof sz,
		    r->size), strerror(errno));
		return err == -ENOMEM ? -ENOSPC : err;
	}
	(void)madvise(m, r->size, MADV_DONTDUMP);
	if (fd >= 0) {
		err = mem_preload(fd, m, flen);
		if (err < 0) {
			log_warn("memory: preloading %s/%s: %s",
			    mem.preload_dir, r->path, strerror(-err));
			munmap(m, r->size);
			return -EIO;
		}
	}
	if (flags & FAM_RF_SHARED)
		(void)mprotect(m, r->size, PROT_READ);
	r->mem = m;
	return 0;
}

/* Puts a new region of session s in the table, with s's handle on it. */
static int
mem_region_insert(struct mem_session *s, struct mem_region *r)
{
	char sz[32];

	r->id = mem.next_id++;
	r->key = mem_random64();
	snprintf(r->node, sizeof r->node, "%s", s->node);
	snprintf(r->owner, sizeof r->owner, "%s", s->owner);
	r->session = s->serial;
	LIST_INIT(&r->handles);
	if (mem_handle_new(s, r) < 0)
		return -ENOMEM;
	TAILQ_INSERT_TAIL(&mem.regions, r, link);
	r->hnext = mem.table[r->id & (mem.table_size - 1)];
	mem.table[r->id & (mem.table_size - 1)] = r;
	mem.nregions++;
	mem.reserved += r->held;
	mem.n.regions_created++;
	if (mem.nregions > 2 * mem.table_size)
		mem_table_grow();
	log_info("memory: region %" PRIu32 " created for node %s: %s%s%s%s"
	    "%s%s", r->id, s->node, mem_bytes(sz, sizeof sz, r->size),
	    r->name[0] ? ", name " : "", r->name, r->path != NULL ?
	    ", file " : "", r->path != NULL ? r->path : "",
	    r->flags & FAM_RF_PERSISTENT ? ", persistent" : "");
	return 0;
}

/*
 * Creates a region for session s, or opens the live one of that name;
 * *out is it, with s's handle on it (no lease yet). Returns 0 or -errno.
 */
int
mem_region_create(struct mem_session *s, const struct fam_region_create *req,
    struct mem_region **out)
{
	struct mem_region *r;
	struct stat st;
	uint64_t size = req->size, rounded;
	bool sparse;
	int fd, err;

	if ((req->flags & FAM_RF_PERSISTENT) && req->name[0] == '\0')
		return -EINVAL; /* nobody could ever find it again */
	if (req->name[0] != '\0' && (r = mem_region_by_name(req->name)) !=
	    NULL) {
		/* A name that is another file's: never that file's bytes. */
		if ((req->flags & FAM_RF_FILE) && (r->path == NULL ||
		    strcmp(r->path, req->path) != 0))
			return -EEXIST;
		err = mem_region_open(s, r, req->flags);
		if (err == 0)
			*out = r;
		return err;
	}
	if ((err = mem_region_file(s, req, &st, &size, &fd)) < 0)
		return err;
	/* Over verbs, writes are one-sided: a sparse region is taken whole. */
	sparse = (req->flags & FAM_RF_SPARSE) && mem.sparse_ok;
	if ((err = mem_region_admit(s, size, sparse, &rounded)) < 0)
		goto out_close;
	r = calloc(1, sizeof *r);
	if (r == NULL || (req->path[0] != '\0' &&
	    (r->path = strdup(req->path)) == NULL) || (sparse &&
	    (r->charged = calloc((rounded / MEM_GRANULE + 64) / 64,
	    sizeof *r->charged)) == NULL)) {
		err = -ENOMEM;
		goto out_free;
	}
	r->flags = req->flags & (sparse ? FAM_RF_ALL : ~FAM_RF_SPARSE);
	r->size = rounded;
	r->held = sparse ? 0 : rounded;
	r->length = fd >= 0 && (uint64_t)st.st_size < size ?
	    (uint64_t)st.st_size : size;
	snprintf(r->name, sizeof r->name, "%s", req->name);
	err = mem_region_map(r, req->flags, fd, r->length);
	if (err < 0)
		goto out_free;
	if (fd >= 0)
		close(fd);
	fd = -1;
	if ((err = mem_region_insert(s, r)) < 0) {
		munmap(r->mem, r->size);
		goto out_free;
	}
	*out = r;
	return 0;
out_free:
	if (r != NULL) {
		free(r->path);
		free(r->charged);
	}
	free(r);
out_close:
	if (fd >= 0)
		close(fd);
	return err;
}

/* Frees session s's use of a region. */
int
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
