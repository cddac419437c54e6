/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-session.c - the host role's side of wire/session.h: programs connect
 * to `session_socket`, hand over their userfaultfd, and ask for regions,
 * which famd carves out of arenas (memfds the program maps once each) and
 * reserves on the memory nodes.
 *
 * A program waits for each reply, so a session has at most one request in
 * service; requests that need the memory nodes are answered from the
 * completion of the last REGION_CREATE.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/userfaultfd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "host/host.h"
#include "host/host-session.h"
#include "host/host-uffd.h"
#include "wire/fdpass.h"

/* Sends a reply to the program, with a descriptor when fd >= 0. */
int
session_reply(struct host_client *cl, int status, uint32_t flags, uint64_t a,
    uint64_t b, uint64_t c, uint64_t d, int fd)
{
	struct fam_smsg m = {
		.magic = FAM_SESSION_MAGIC,
		.version = FAM_SESSION_VERSION,
		.type = cl->req.type,
		.status = status,
		.flags = flags,
		.seq = cl->req.seq,
		.a = a, .b = b, .c = c, .d = d,
	};
	struct iovec iov = { &m, sizeof m };
	ssize_t n;

	cl->busy = false;
	host_restart_replied(cl, status, d);
	n = fdpass_send(cl->fd, &iov, 1, fd, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n != (ssize_t)sizeof m) {
		/* The program does not read its replies: end the session. */
		log_rl(LOG_INFO, "session pid %ld: cannot reply: %s",
		    (long)cl->pid,
		    n < 0 ? strerror((int)-n) : "short write");
		return -EPIPE;
	}
	return 0;
}

/* Replies with an error status only. */
int
session_fail(struct host_client *cl, int err)
{
	return session_reply(cl, err, 0, 0, 0, 0, 0, -1);
}

/* Returns the arena called id, or NULL. */
static struct arena *
arena_find(struct host_client *cl, uint32_t id)
{
	for (struct arena *ar = cl->arenas; ar != NULL; ar = ar->next)
		if (ar->id == id)
			return ar;
	return NULL;
}

/*
 * Seals an arena's memfd: the program may not shrink it (famd's write-back
 * would read past its end: EFAULT over tcp, SIGBUS in famd over verbs) nor
 * add seals (F_SEAL_FUTURE_WRITE would stop famd punching holes). Only
 * famd sizes it, and only up.
 */
static int
arena_seal(int memfd)
{
	int seals;

	if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
		return -errno;
	seals = fcntl(memfd, F_GET_SEALS);
	if (seals < 0)
		return -errno;
	if ((seals & (F_SEAL_SHRINK | F_SEAL_SEAL)) !=
	    (F_SEAL_SHRINK | F_SEAL_SEAL))
		return -EPERM;
	return 0;
}

/* Creates an arena of size bytes: a sealed memfd that famd maps too. */
struct arena *
arena_new(struct host_client *cl, uint64_t size)
{
	struct host *h = cl->h;
	struct arena *ar = calloc(1, sizeof *ar);
	char name[32];
	int rc;

	if (ar == NULL)
		return NULL;
	snprintf(name, sizeof name, "famd-arena-%ld", (long)cl->pid);
	ar->memfd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (ar->memfd < 0 || ftruncate(ar->memfd, (off_t)size) < 0)
		goto fail;
	if ((rc = arena_seal(ar->memfd)) < 0) {
		errno = -rc;
		goto fail;
	}
	ar->local = mmap(NULL, size, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_NORESERVE, ar->memfd, 0);
	if (ar->local == MAP_FAILED) {
		ar->local = NULL;
		goto fail;
	}
	host_numa_bind(h, ar->local, size);
	ar->free = calloc(1, sizeof *ar->free);
	if (ar->free == NULL)
		goto fail;
	ar->free->off = 0;
	ar->free->len = size >> h->chunk_shift;
	ar->cl = cl;
	ar->size = size;
	ar->id = ++cl->next_arena;
	ar->next = cl->arenas;
	cl->arenas = ar;
	return ar;
fail:
	log_rl(LOG_WARNING, "session pid %ld: cannot create an arena of %llu "
	    "bytes: %s", (long)cl->pid, (unsigned long long)size,
	    strerror(errno));
	if (ar->local != NULL)
		munmap(ar->local, size);
	if (ar->memfd >= 0)
		close(ar->memfd);
	free(ar);
	return NULL;
}

/* Frees an arena famd no longer needs (its regions are gone). */
void
arena_free(struct host *h, struct arena *ar)
{
	host_extent_free(&ar->free);
	if (ar->local != NULL)
		munmap(ar->local, ar->size);
	if (ar->memfd >= 0)
		close(ar->memfd);
	free(ar->regions);
	free(ar);
}

static void region_free_remote(struct host *h, struct region *r);
static bool arena_drop_unmapped(struct host_client *cl, struct arena *ar);

/*
 * Punches a freed region's arena space and gives it back for reuse (when
 * it is freed, or once the reads into it in flight then are over).
 */
static void
region_give_space(struct host *h, struct region *r)
{
	/* Handing over (a restart) or never handed back: the program's data. */
	if (!h->handover && r->ar->memfd >= 0 &&
	    fallocate(r->ar->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
	    (off_t)r->off, (off_t)r->size) < 0)
		log_rl(LOG_WARNING, "session pid %ld: punching a freed region: "
		    "%s", (long)r->cl->pid, strerror(errno));
	if (host_extent_give(&r->ar->free, r->off >> h->chunk_shift,
	    r->size >> h->chunk_shift) < 0)
		log_err("out of memory returning arena space; it is leaked");
	r->keep_space = false;
	if (arena_drop_unmapped(r->cl, r->ar))
		r->ar = NULL;
}

/*
 * Frees a region struct once nothing is in flight for it, and only then
 * its stripes on the memory nodes, so that no read or write of it (on
 * either connection) can arrive after the free.
 */
static void
region_destroy(struct region *r)
{
	struct host_client *cl = r->cl;

	if (r->keep_space)
		region_give_space(cl->h, r);
	region_free_remote(cl->h, r);
	host_replica_free(r);
	free(r->stripes);
	free(r->chunks);
	free(r->shared);
	free(r->pending);
	free(r);
	host_client_put(cl);
}

/* Allocates a region struct for cl, reserved nowhere yet. */
static struct region *
region_new(struct host_client *cl)
{
	struct region *r = calloc(1, sizeof *r);

	if (r == NULL)
		return NULL;
	r->cl = cl;
	r->handle = ++cl->h->next_handle;
	host_ra_reset(r);
	cl->refs++;
	return r;
}

/* Asks each memory node to free its stripe of r (now or once it is back). */
static void
region_free_remote(struct host *h, struct region *r)
{
	if (h->handover)
		return; /* the next famd takes the regions over */
	for (unsigned i = 0; i < r->nstripes; i++) {
		struct stripe *s = &r->stripes[i];

		if (s->remote.size == 0)
			continue;
		host_stripe_free(h, s);
		s->remote.size = 0;
	}
}

/*
 * Frees a region: its chunks leave the buffer and the program's page tables
 * now, its arena space is reusable now, the memory nodes are told, and the
 * struct goes when its last operation in flight completes.
 */
void
host_region_free(struct region *r)
{
	struct host *h = r->cl->h;
	struct host_client *cl = r->cl;
	struct region **pp;

	if (r->dying)
		return;
	host_fork_region_gone(r); /* before its chunks leave the buffer */
	r->dying = true;
	if (r->ar != NULL) {
		host_region_drop_chunks(h, r);
		host_arena_del_region(r->ar, r);
		/*
		 * A read into the arena still out would land in whatever
		 * region got the space next: it waits for the last of them.
		 */
		if (r->filling > 0)
			r->keep_space = true;
		else
			region_give_space(h, r);
	}
	if (r->listed) {
		for (pp = &cl->regions; *pp != NULL; pp = &(*pp)->next)
			if (*pp == r) {
				*pp = r->next;
				break;
			}
		cl->nregions--;
		cl->bytes -= r->size;
		r->listed = false;
	}
	if (r->busy == 0)
		region_destroy(r);
}

/* Drops a reference to a client; frees it with the last one. */
void
host_client_put(struct host_client *cl)
{
	struct arena *ar, *next;

	if (--cl->refs > 0)
		return;
	for (ar = cl->arenas; ar != NULL; ar = next) {
		next = ar->next;
		arena_free(cl->h, ar);
	}
	free(cl);
}

/*
 * Tells whether the program's user is in uffd_device_group: its gid or
 * one of its supplementary groups (SO_PEERGROUPS, taken at connect).
 */
static bool
session_in_device_group(struct host_client *cl)
{
	const char *name = cfg_str(cl->h->d->cfg, CFG_HOST_UFFD_DEVICE_GROUP);
	gid_t groups[256];
	socklen_t len = sizeof groups;
	struct group *gr;

	if (*name == '\0' || (gr = getgrnam(name)) == NULL)
		return false;
	if (cl->gid == gr->gr_gid)
		return true;
	if (getsockopt(cl->fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
		return false;
	for (size_t i = 0; i < len / sizeof groups[0]; i++)
		if (groups[i] == gr->gr_gid)
			return true;
	return false;
}

/*
 * HELLO: the program says who it is; a member of uffd_device_group is
 * offered /dev/userfaultfd (anyone holding it can create userfaultfds
 * that catch kernel faults, which vm.unprivileged_userfaultfd = 0
 * forbids); others create a user-mode-only one themselves.
 */
static int
session_hello(struct host_client *cl)
{
	struct host *h = cl->h;
	int devfd = -1, rc;

	if (cl->req.a != FAM_SESSION_VERSION)
		return session_fail(cl, EPROTONOSUPPORT);
	if (session_in_device_group(cl))
		devfd = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	rc = session_reply(cl, 0, devfd >= 0 ? FAM_S_FEAT_DEVFD : 0, h->chunk,
	    h->arena_size, devfd >= 0 ? FAM_S_FEAT_DEVFD : 0, cl->token, devfd);
	if (devfd >= 0)
		close(devfd);
	return rc;
}

/*
 * A program's fault messages: served by the fault service; a session whose
 * thread faults again and again on a page it was sent SIGBUS for (no
 * UFFDIO_POISON here) is ended.
 */
void
session_uffd_cb(evutil_socket_t fd, short what, void *arg)
{
	struct host_client *cl = arg;

	host_uffd_cb(fd, what, cl);
	if (cl->give_up && !cl->dead) {
		cl->h->stats.sessions_given_up++;
		host_client_release(cl);
	}
}

/* UFFD: the program's userfaultfd arrives; famd does the API handshake. */
static int
session_uffd(struct host_client *cl)
{
	struct host *h = cl->h;
	char *cause = NULL;
	int fd = cl->pending_fd;

	if (fd < 0)
		return session_fail(cl, EBADF);
	if (cl->uffd >= 0)
		return session_fail(cl, EEXIST);
	cl->pending_fd = -1;
	if (host_uffd_setup(h, fd, &cause) < 0) {
		log_rl(LOG_WARNING, "session pid %ld: %s", (long)cl->pid,
		    cause);
		free(cause);
		close(fd);
		return session_fail(cl, EINVAL);
	}
	cl->uffd = fd;
	cl->uffd_ev = event_new(h->base, fd, EV_READ | EV_PERSIST,
	    session_uffd_cb, cl);
	if (cl->uffd_ev == NULL || event_add(cl->uffd_ev, NULL) < 0)
		return session_fail(cl, ENOMEM);
	return session_reply(cl, 0, 0, 0, 0, 0, 0, -1);
}

/*
 * Checks that cl may have one more arena: none of its own still unmapped
 * (EBUSY: an ALLOC whose arena is never mapped would otherwise make a new
 * one each time), and its user within uid_max_arenas (EDQUOT). Each arena
 * is arena_size bytes of famd's address space and a descriptor.
 */
static int
arena_admit(struct host_client *cl)
{
	struct host *h = cl->h;
	uint64_t max = (uint64_t)cfg_int(h->d->cfg, CFG_HOST_UID_MAX_ARENAS);
	uint64_t n = 0;

	for (struct arena *ar = cl->arenas; ar != NULL; ar = ar->next)
		if (ar->uaddr == 0)
			return EBUSY;
	for (struct host_client *c = h->clients; c != NULL; c = c->next) {
		if (c->uid != cl->uid || c->dead)
			continue;
		for (struct arena *ar = c->arenas; ar != NULL; ar = ar->next)
			n++;
	}
	if (n < max)
		return 0;
	h->stats.quota_refusals++;
	log_rl(LOG_INFO, "session pid %ld uid %ld: over the user's quota of "
	    "%llu arenas", (long)cl->pid, (long)cl->uid,
	    (unsigned long long)max);
	return EDQUOT;
}

/*
 * Unlinks and frees an arena the program never mapped, once it is empty
 * (nothing of it was ever resident); returns whether it did.
 */
static bool
arena_drop_unmapped(struct host_client *cl, struct arena *ar)
{
	struct arena **pp;

	if (ar->uaddr != 0 || ar->nregions > 0)
		return false;
	for (pp = &cl->arenas; *pp != NULL; pp = &(*pp)->next)
		if (*pp == ar) {
			*pp = ar->next;
			arena_free(cl->h, ar);
			return true;
		}
	return false;
}

/* Places a reserved region in an arena (a new one if need be). */
static int
region_place(struct host_client *cl, struct region *r, uint64_t align,
    struct arena **new_arena)
{
	struct host *h = cl->h;
	uint64_t len = r->size >> h->chunk_shift;
	uint64_t al = align > h->chunk ? align >> h->chunk_shift : 1;
	struct arena *ar;
	int64_t off = -1;

	*new_arena = NULL;
	for (ar = cl->arenas; ar != NULL; ar = ar->next)
		if (ar->uaddr != 0 &&
		    (off = host_extent_take(&ar->free, len, al)) >= 0)
			break;
	if (ar == NULL) {
		uint64_t size = r->size > h->arena_size ? r->size : h->arena_size;
		int err = arena_admit(cl);

		if (err != 0)
			return -err;
		ar = arena_new(cl, size);
		if (ar == NULL)
			return -ENOMEM;
		off = host_extent_take(&ar->free, len, al);
		if (off < 0)
			return -ENOMEM;
		*new_arena = ar;
	}
	r->ar = ar;
	r->off = (uint64_t)off << h->chunk_shift;
	r->nchunks = len;
	/* Pages poisoned for a fault there (host_sigbus) go with a punch. */
	if (ar->poisoned && fallocate(ar->memfd, FALLOC_FL_PUNCH_HOLE |
	    FALLOC_FL_KEEP_SIZE, (off_t)r->off, (off_t)r->size) < 0)
		log_rl(LOG_WARNING, "session pid %ld: punching a new region: "
		    "%s",
		    (long)cl->pid, strerror(errno));
	r->chunks = calloc(len, sizeof *r->chunks);
	if (r->chunks == NULL || host_arena_add_region(ar, r) < 0) {
		if (host_extent_give(&ar->free, (uint64_t)off, len) < 0)
			log_err("out of memory returning arena space; it is "
			    "leaked");
		r->ar = NULL;
		return -ENOMEM;
	}
	if (r->flags & FAM_S_ALLOC_FILE)
		for (uint64_t c = 0; c < len; c++)
			r->chunks[c].flags = CH_REMOTE;
	return 0;
}

/*
 * Checks uid's quota (uid_max_bytes, uid_max_regions) for one more region
 * of size bytes (0: not known yet); returns 0 or EDQUOT. Regions being
 * created count. except: a region not to count (the one being finished).
 */
int
uid_quota(struct host *h, uid_t uid, uint64_t size, pid_t pid,
    const struct region *except)
{
	uint64_t max_bytes = (uint64_t)cfg_int(h->d->cfg, CFG_HOST_UID_MAX_BYTES);
	uint64_t max_regions = (uint64_t)cfg_int(h->d->cfg,
	    CFG_HOST_UID_MAX_REGIONS);
	uint64_t bytes = 0, regions = 0;

	if (max_bytes == 0 && max_regions == 0)
		return 0;
	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next) {
		if (cl->uid != uid || cl->dead)
			continue;
		bytes += cl->bytes;
		regions += cl->nregions;
		if (cl->pending_region != NULL && cl->pending_region != except) {
			bytes += cl->pending_region->size;
			regions++;
		}
	}
	host_fork_held(h, uid, &bytes, &regions);
	if ((max_regions == 0 || regions + 1 <= max_regions) &&
	    (max_bytes == 0 || (size <= max_bytes && bytes <= max_bytes - size)))
		return 0;
	h->stats.quota_refusals++;
	log_rl(LOG_INFO, "session pid %ld uid %ld: over the user's quota: %llu "
	    "regions and %llu bytes held, %llu more asked; the limits are %llu "
	    "regions and %llu bytes (0: none)", (long)pid, (long)uid,
	    (unsigned long long)regions, (unsigned long long)bytes,
	    (unsigned long long)size, (unsigned long long)max_regions,
	    (unsigned long long)max_bytes);
	return EDQUOT;
}

/* Answers the pending ALLOC once every stripe is reserved (or one failed). */
static void
alloc_finish(struct host_client *cl)
{
	struct region *r = cl->pending_region;
	struct host *h = cl->h;
	struct arena *ar = NULL;
	int err = cl->pending_err;

	cl->pending_region = NULL;
	if (err == 0) {
		uint64_t size = r->stripes[0].remote.size;

		if (r->flags & FAM_S_ALLOC_FILE)
			r->size = (size + h->chunk - 1) & ~(h->chunk - 1);
		if (r->size == 0)
			err = EINVAL;
		else if (r->flags & FAM_S_ALLOC_FILE)
			err = uid_quota(h, cl->uid, r->size, cl->pid, r);
		if (err == 0)
			err = -region_place(cl, r, cl->req.c, &ar);
		if (err == 0)
			err = -host_replica_alloc(h, r);
	}
	if (err != 0) {
		h->stats.alloc_errors++;
		host_region_free(r);
		if (session_fail(cl, err) < 0)
			host_client_release(cl);
		return;
	}
	for (unsigned i = 0; i < r->nstripes; i++)
		host_stripe_adopt(h, &r->stripes[i]);
	r->next = cl->regions;
	cl->regions = r;
	r->listed = true;
	cl->nregions++;
	cl->bytes += r->size;
	h->stats.allocs++;
	log_debug("session pid %ld: region %llu of %llu bytes at +%llu in "
	    "arena %u", (long)cl->pid, (unsigned long long)r->handle,
	    (unsigned long long)r->size, (unsigned long long)r->off,
	    r->ar->id);
	/* For a file the program learns the file's length. */
	if (session_reply(cl, 0, ar != NULL ? FAM_S_NEW_ARENA : 0, r->ar->id,
	    r->off, (r->flags & FAM_S_ALLOC_FILE) ? r->length : r->size,
	    r->handle, ar != NULL ? ar->memfd : -1) < 0)
		host_client_release(cl);
}

static int session_alloc(struct host_client *cl);

/* Returns true when err (positive) says the connection went away. */
static bool
conn_lost(int err)
{
	return err == ECONNRESET || err == ENOTCONN || err == ECONNABORTED ||
	    err == EPIPE || err == ESHUTDOWN;
}

/*
 * The dpu went away under the pending ALLOC: drop what was made and serve
 * the ALLOC again, as the path now says (waiting for the dpu, or direct).
 */
static void
alloc_redo(struct host_client *cl)
{
	struct region *r = cl->pending_region;

	cl->pending_redo = false;
	cl->pending_region = NULL;
	host_region_free(r);
	cl->h->stats.allocs_redone++;
	cl->refs++; /* the session may end */
	cl->busy = false;
	if (session_alloc(cl) < 0)
		host_client_release(cl);
	else if (!cl->busy)
		session_resume(cl);
	host_client_put(cl);
}

/* Completion of REGION_CREATE for one stripe of the pending region. */
static void
alloc_stripe_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct stripe *s = ctx;
	struct region *r = s->r;
	struct host_client *cl = r->cl;
	struct fam_region_info info;

	if (status == 0 && proto_get_region_info(payload, len, &info) < 0)
		status = -EPROTO;
	if (status < 0 && s->path == SP_DPU && conn_lost(-status)) {
		/*
		 * The dpu went away with the request: ask again, as the path
		 * now says (the dpu once back, or direct). A region it made
		 * meanwhile ends with its session on the memory node.
		 */
		cl->pending_redo = true;
		if (!cl->dead)
			log_info("session pid %ld: the dpu went away during an "
			    "allocation (%s); asking again", (long)cl->pid,
			    strerror(-status));
	} else if (status < 0) {
		if (cl->pending_err == 0)
			cl->pending_err = -status;
		if (!cl->dead)
			log_rl(LOG_INFO, "session pid %ld: memory node %s "
			    "refused a "
			    "region: %s", (long)cl->pid, s->node->addr,
			    strerror(-status));
	} else if (s->path == SP_DPU && info.mem_instance != 0) {
		/* Through our dpu: it says where the region lives. */
		struct host *h = cl->h;

		s->dremote.region = info.region;
		s->dremote.size = info.size;
		s->dinstance = h->dpu.instance;
		/* Our own lease there comes with the adoption. */
		s->remote.region = info.mem_region;
		s->remote.rkey = 0;
		s->remote.addr = 0;
		s->remote.size = info.size;
		s->key = info.mem_key;
		s->instance = info.mem_instance;
		s->node = host_node_by_instance(h, info.mem_instance);
		s->path = SP_DPU;
		s->owned = false;
		if (s == &r->stripes[0])
			r->length = info.length;
	} else {
		s->remote.region = info.region;
		s->remote.rkey = info.rkey;
		s->remote.addr = info.addr;
		s->remote.size = info.size;
		s->key = info.key;
		s->path = SP_DIRECT;
		s->owned = true;
		if (s == &r->stripes[0])
			r->length = info.length;
	}
	r->busy--;
	if (--cl->pending_calls > 0)
		return;
	if (cl->dead || r->dying) {
		/* The session ended meanwhile: give the stripes back. */
		cl->pending_region = NULL;
		cl->pending_redo = false;
		r->dying = false;
		host_region_free(r);
		return;
	}
	if (cl->pending_redo && cl->pending_err == 0) {
		alloc_redo(cl);
		return;
	}
	cl->pending_redo = false;
	cl->refs++; /* alloc_finish() may end the session */
	alloc_finish(cl);
	session_resume(cl);
	host_client_put(cl);
}

/*
 * The pending ALLOC waits for the dpu, as reads and writes do: served
 * again at each tick (host_session_retry), op_timeout at most since it
 * began to wait (waited: it already was); then EHOSTDOWN.
 */
static int
alloc_wait_dpu(struct host_client *cl, bool waited)
{
	uint64_t limit = (uint64_t)cfg_int(cl->h->d->cfg, CFG_OP_TIMEOUT) *
	    1000000u;

	if (!waited)
		cl->wait_since = mono_ns();
	if (mono_ns() - cl->wait_since < limit) {
		cl->waits_dpu = true;
		cl->busy = true;
		return 0;
	}
	cl->waits_dpu = false;
	cl->busy = false;
	return session_fail(cl, EHOSTDOWN);
}

/* Returns the 64-bit FNV-1a hash of s, from the offset basis seed. */
static uint64_t
fnv1a64(const char *s, uint64_t seed)
{
	uint64_t v = seed;

	for (; *s != '\0'; s++)
		v = (v ^ (uint8_t)*s) * 0x100000001b3ull;
	return v;
}

/*
 * Names the shared region of a file on the memory node, which finds a
 * shared region by its name: the path itself when it fits FAM_NAME_MAX,
 * else its start, '#' and 128 bits of hash of the whole path, so that
 * paths with a common start of FAM_NAME_MAX characters are two regions.
 * The memory node checks a found region's path against the one asked for.
 */
static void
file_region_name(char name[FAM_NAME_MAX + 1], const char *path)
{
	size_t len = strlen(path);

	if (len <= FAM_NAME_MAX) {
		memcpy(name, path, len + 1);
		return;
	}
	snprintf(name, FAM_NAME_MAX + 1, "%.*s#%016llx%016llx",
	    (int)(FAM_NAME_MAX - 33), path,
	    (unsigned long long)fnv1a64(path, 0xcbf29ce484222325ull),
	    (unsigned long long)fnv1a64(path, 0x84222325cbf29ce4ull));
}

/*
 * ALLOC: reserve the region's stripes on the memory nodes; the reply comes
 * from the last completion.
 */
static int
session_alloc(struct host_client *cl)
{
	struct host *h = cl->h;
	struct fam_smsg *m = &cl->req;
	struct region *r;
	uint8_t buf[FAM_REGION_CREATE_MIN + FAM_NAME_MAX + FAM_PATH_MAX];
	unsigned nstripes, copies, ek, em, place[HOST_MAX_NODES * HOST_MAX_NODES];
	uint64_t chunks, size;
	bool via_dpu = h->has_dpu && h->path == CFG_PATH_DPU &&
	    host_dpu_usable(h);
	bool waited;
	int err;

	if (cl->uffd < 0)
		return session_fail(cl, EBADF);
	err = fam_smsg_check_alloc(m, h->arena_size);
	if (err != 0)
		return session_fail(cl, err);
	size = (m->a + h->chunk - 1) & ~(h->chunk - 1);
	chunks = size >> h->chunk_shift;
	/* A file lives whole on the first memory node; the rest is striped. */
	nstripes = (m->b & FAM_S_ALLOC_FILE) ? 1 :
	    (chunks < h->nnodes ? (unsigned)chunks : h->nnodes);
	copies = host_replica_copies(h, m->d, (m->b & FAM_S_ALLOC_FILE) != 0,
	    &ek, &em);
	if (copies > h->nnodes)
		return session_fail(cl, EINVAL);
	if (copies > 1)
		via_dpu = false; /* the copies go direct, each to its node */
	if (h->has_dpu && copies == 1 && h->path == CFG_PATH_DPU && !via_dpu &&
	    h->fallback == CFG_FALLBACK_NONE)
		return alloc_wait_dpu(cl, cl->waits_dpu);
	waited = cl->waits_dpu;
	cl->waits_dpu = false;
	/* (through the dpu: where the dpu places it; the dpu answers) */
	if (host_replica_place(h, nstripes, copies, ek, !via_dpu, place) < 0)
		return session_fail(cl, EHOSTDOWN);
	/* A file's size is known once a memory node has opened it. */
	if (uid_quota(h, cl->uid, (m->b & FAM_S_ALLOC_FILE) ? 0 : size,
	    cl->pid, NULL) != 0)
		return session_fail(cl, EDQUOT);

	r = region_new(cl);
	if (r == NULL)
		return session_fail(cl, ENOMEM);
	r->flags = (uint32_t)m->b;
	r->size = (m->b & FAM_S_ALLOC_FILE) ? 0 : size;
	r->width = nstripes;
	r->ncopies = copies;
	r->stripes = calloc(nstripes * copies, sizeof *r->stripes);
	r->nstripes = r->stripes != NULL ? nstripes * copies : 0;
	if (r->stripes == NULL || (ek > 0 && host_ec_new(h, r, ek, em) < 0)) {
		host_region_free(r);
		return session_fail(cl, ENOMEM);
	}
	cl->pending_region = r;
	cl->pending_err = 0;
	cl->pending_calls = 0;
	cl->busy = true;
	for (unsigned i = 0; i < r->nstripes; i++) {
		struct fam_region_create rc = { 0 };
		struct stripe *s = &r->stripes[i];
		unsigned col = i % nstripes;
		uint64_t n = chunks / nstripes + (col < chunks % nstripes);
		size_t len;
		int rc2;

		s->r = r;
		s->node = &h->nodes[place[i] % h->nnodes];
		s->instance = s->node->instance;
		s->path = via_dpu ? SP_DPU : SP_DIRECT;
		if (place[i] >= h->nnodes) {
			host_replica_defer(h, s, n);
			continue;
		}
		if (via_dpu && s->node->state == MN_UP)
			rc.place = s->node->instance;
		rc.size = n * host_replica_unit(h, r);
		rc.flags = (m->b & FAM_S_ALLOC_SPARSE) ? FAM_RF_SPARSE : 0;
		if (m->b & FAM_S_ALLOC_FILE) {
			rc.size = 0;
			rc.flags = FAM_RF_FILE;
			if (m->b & FAM_S_ALLOC_SHARED) {
				rc.flags |= FAM_RF_SHARED;
				file_region_name(rc.name, cl->data);
			}
			snprintf(rc.path, sizeof rc.path, "%s", cl->data);
		}
		len = proto_put_region_create(buf, sizeof buf, &rc);
		rc2 = fam_conn_call(via_dpu ? h->dpu.conn : s->node->conn,
		    FAM_MSG_REGION_CREATE, buf, (uint32_t)len,
		    alloc_stripe_done, s);
		if (rc2 < 0 && via_dpu && conn_lost(-rc2)) {
			cl->pending_redo = true;
			break;
		}
		if (rc2 < 0) {
			if (cl->pending_err == 0)
				cl->pending_err = -rc2;
			break;
		}
		r->busy++;
		cl->pending_calls++;
	}
	if (cl->pending_calls == 0 && cl->pending_redo &&
	    cl->pending_err == 0) {
		/*
		 * The dpu looked up but its connection is gone: ask again
		 * at the next tick, when its state says so.
		 */
		cl->pending_redo = false;
		cl->pending_region = NULL;
		host_region_free(r);
		return alloc_wait_dpu(cl, waited);
	}
	cl->pending_redo = false;
	if (cl->pending_calls == 0)
		alloc_finish(cl);
	return 0;
}

/*
 * Serves again the ALLOCs that wait for the dpu (it is back, or time) and
 * the DISCARDs that wait for their chunks' reads and write-backs.
 */
void
host_session_retry(struct host *h)
{
	struct host_client *cl, *next;

	for (cl = h->clients; cl != NULL; cl = next) {
		int rc;

		next = cl->next;
		if (cl->dead || cl->pending_region != NULL ||
		    (!cl->waits_dpu && !cl->waits_discard))
			continue;
		cl->busy = false;
		cl->refs++; /* the session may end */
		rc = cl->waits_discard ? session_discard(cl) :
		    session_alloc(cl);
		if (rc < 0)
			host_client_release(cl);
		else if (!cl->busy)
			session_resume(cl); /* answered: what came meanwhile */
		host_client_put(cl);
	}
}

/* MAP: the program mapped a new arena; register it for faults. */
static int
session_map(struct host_client *cl)
{
	struct host *h = cl->h;
	struct arena *ar = arena_find(cl, (uint32_t)cl->req.a);
	uint64_t addr = cl->req.b;
	int rc;

	if (ar == NULL || ar->uaddr != 0)
		return session_fail(cl, ENOENT);
	if (fam_smsg_check_map(addr, ar->size) != 0)
		return session_fail(cl, EINVAL);
	rc = uffd_register(cl->uffd, addr, ar->size, h->wp_ok, h->cont_ok);
	if (rc < 0) {
		log_rl(LOG_WARNING, "session pid %ld: cannot register arena "
		    "%u at %#llx: "
		    "%s", (long)cl->pid, ar->id, (unsigned long long)addr,
		    strerror(-rc));
		return session_fail(cl, -rc);
	}
	ar->uaddr = addr;
	return session_reply(cl, 0, 0, 0, 0, 0, 0, -1);
}

/* FREE: the program releases a region. */
static int
session_free(struct host_client *cl)
{
	for (struct region *r = cl->regions; r != NULL; r = r->next)
		if (r->handle == cl->req.a) {
			host_region_free(r);
			cl->h->stats.frees++;
			return session_reply(cl, 0, 0, 0, 0, 0, 0, -1);
		}
	return session_fail(cl, ENOENT);
}

/* STAT: describes the region holding an address. */
static int
session_stat(struct host_client *cl)
{
	struct region *r = host_region_find(cl, cl->req.a, NULL);

	if (r == NULL)
		return session_fail(cl, ENOENT);
	return session_reply(cl, 0, r->flags, r->handle, r->size,
	    r->resident << cl->h->chunk_shift, r->dirty << cl->h->chunk_shift,
	    -1);
}

/* ADVISE: how the program uses a region; passed on to the dpu. */
static int
session_advise(struct host_client *cl)
{
	struct region *r = host_region_find(cl, cl->req.a, NULL);

	if (r == NULL)
		return session_fail(cl, ENOENT);
	if (cl->req.b > FAM_ADVICE_MAX)
		return session_fail(cl, EINVAL);
	r->advice = (uint32_t)cl->req.b;
	host_region_advise(cl->h, r);
	return session_reply(cl, 0, 0, 0, 0, 0, 0, -1);
}

/* Validates one request and serves it; returns -1 to end the session. */
static int
session_dispatch(struct host_client *cl)
{
	struct fam_smsg *m = &cl->req;
	int rc;

	if (fam_smsg_check_request(m, cl->uffd >= 0) < 0) {
		cl->h->stats.bad_messages++;
		log_rl(LOG_INFO, "session pid %ld: malformed message (type "
		    "%u); ending the session", (long)cl->pid, m->type);
		return -1;
	}
	if (m->type != FAM_S_UFFD && m->type != FAM_S_RECLAIM &&
	    m->type != FAM_S_REARENA && cl->pending_fd >= 0) {
		close(cl->pending_fd);
		cl->pending_fd = -1;
	}
	switch (m->type) {
	case FAM_S_HELLO: rc = session_hello(cl); break;
	case FAM_S_UFFD: rc = session_uffd(cl); break;
	case FAM_S_ALLOC: rc = session_alloc(cl); break;
	case FAM_S_MAP: rc = session_map(cl); break;
	case FAM_S_FREE: rc = session_free(cl); break;
	case FAM_S_STAT: rc = session_stat(cl); break;
	case FAM_S_ADVISE: rc = session_advise(cl); break;
	case FAM_S_DISCARD: rc = session_discard(cl); break;
	case FAM_S_FORK: rc = session_fork(cl); break;
	case FAM_S_ADOPT: rc = session_adopt(cl); break;
	case FAM_S_RECLAIM: rc = session_reclaim(cl); break;
	case FAM_S_REARENA: rc = session_rearena(cl); break;
	default: rc = -1; break;
	}
	return rc < 0 ? -1 : 0;
}

/*
 * Serves the complete requests received, in order, until one waits for the
 * memory nodes (the rest are served when it is answered). May end the
 * session.
 */
static void
session_drain(struct host_client *cl)
{
	while (!cl->dead && !cl->busy) {
		size_t need = fam_smsg_take(cl->inbuf, cl->inlen, &cl->req,
		    cl->data);

		if (need == 0)
			break;
		memmove(cl->inbuf, cl->inbuf + need, cl->inlen - need);
		cl->inlen -= need;
		if (session_dispatch(cl) < 0) {
			host_client_release(cl);
			return;
		}
	}
}

/*
 * After an asynchronous request is answered: serves what the program sent
 * meanwhile and listens to it again.
 */
void
session_resume(struct host_client *cl)
{
	if (cl->dead || cl->busy)
		return;
	if (event_add(cl->sock_ev, NULL) < 0) {
		log_warn("session pid %ld: cannot watch the session socket; "
		    "ending the session", (long)cl->pid);
		host_client_release(cl);
		return;
	}
	session_drain(cl);
}

/* Reads requests (and a passed descriptor) from a program. */
static void
session_read_cb(evutil_socket_t fd, short what, void *arg)
{
	struct host_client *cl = arg;
	bool truncated = false;
	int got = -1;
	ssize_t n;

	if (cl->busy) {
		/*
		 * The program sent more before its reply: stop watching
		 * (a level-triggered event would spin) until the reply.
		 */
		event_del(cl->sock_ev);
		return;
	}
	n = fdpass_recv(fd, cl->inbuf + cl->inlen, sizeof cl->inbuf - cl->inlen,
	    &got, &truncated, MSG_DONTWAIT);
	if (n == -EAGAIN)
		return;
	if (got >= 0) {
		if (cl->pending_fd >= 0)
			close(cl->pending_fd);
		cl->pending_fd = got;
	}
	if (n <= 0 || truncated) {
		if (truncated) {
			cl->h->stats.bad_messages++;
			log_rl(LOG_INFO, "session pid %ld: too many "
			    "descriptors on one message; ending the session",
			    (long)cl->pid);
		} else if (n == 0 && cl->inlen > 0) {
			cl->h->stats.bad_messages++;
			log_rl(LOG_INFO, "session pid %ld: closed in the "
			    "middle of a message (%zu bytes of it came)",
			    (long)cl->pid, cl->inlen);
		} else if (n == 0 && session_orphan(cl)) {
			return;
		}
		host_client_release(cl);
		return;
	}
	cl->inlen += (size_t)n;
	session_drain(cl);
}

/*
 * Starts the session of a program that connected on fd (cred from
 * SO_PEERCRED, pidfd of its process or -1, which the session then owns).
 * Returns 0, or -ENOMEM with the pidfd closed and fd left to the caller.
 */
int
host_client_new(struct host *h, int fd, const struct ucred *cred, int pidfd)
{
	struct host_client *cl = calloc(1, sizeof *cl);

	if (cl == NULL)
		goto fail;
	cl->h = h;
	cl->fd = fd;
	cl->pid = cred->pid;
	cl->uid = cred->uid;
	cl->gid = cred->gid;
	cl->pidfd = pidfd;
	cl->uffd = -1;
	cl->pending_fd = -1;
	cl->refs = 1;
	/* The session's name for RECLAIM: 0 says it has none. */
	if (h->restart == NULL || h->restart->off ||
	    getrandom(&cl->token, sizeof cl->token, 0) != sizeof cl->token)
		cl->token = 0;
	cl->sock_ev = event_new(h->base, fd, EV_READ | EV_PERSIST,
	    session_read_cb, cl);
	if (cl->sock_ev == NULL || event_add(cl->sock_ev, NULL) < 0) {
		if (cl->sock_ev != NULL)
			event_free(cl->sock_ev);
		free(cl);
		goto fail;
	}
	cl->next = h->clients;
	h->clients = cl;
	h->stats.sessions++;
	log_rl(LOG_INFO, "session pid %ld uid %ld started", (long)cl->pid,
	    (long)cl->uid);
	return 0;
fail:
	if (pidfd >= 0)
		close(pidfd);
	return -ENOMEM;
}

/* Sets what the sessions register with the layers below. */
void
host_session_init(struct host *h)
{
	h->region_gone = region_destroy;
	h->fork_done = session_fork_done;
}

/* Describes every program: pid, regions, bytes, resident and dirty. */
json_t *
host_clients_json(struct host *h)
{
	json_t *a = json_array();

	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next) {
		uint64_t res = 0, dirty = 0;
		json_t *grain = json_array();

		for (struct region *r = cl->regions; r != NULL; r = r->next) {
			res += r->resident;
			dirty += r->dirty;
			json_array_append_new(grain, host_grain_json(h, r));
		}
		json_array_append_new(a, json_pack("{s:i,s:i,s:I,s:I,s:I,s:I,"
		    "s:o}", "pid", (int)cl->pid, "uid", (int)cl->uid,
		    "regions", (json_int_t)cl->nregions,
		    "bytes", (json_int_t)cl->bytes,
		    "resident_bytes", (json_int_t)(res << h->chunk_shift),
		    "dirty_bytes", (json_int_t)(dirty << h->chunk_shift),
		    "fetch", grain));
	}
	return a;
}
