/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-restart-inflight.c - the chunks of the buffer that may be dirty
 * while write-protected, in a table the next host famd reads
 * (session_socket + ".wb"). famd write-protects a dirty chunk for its
 * write-back (its memory nodes may then hold half of it) and to see the
 * next write (the clock's second chance): the program's page tables show
 * it clean. The next famd takes a chunk named here as dirty, and the other
 * resident chunks clean or dirty from their write-protect bits
 * (host-reclaim.c).
 *
 * Owns: the table file (mode 0600, mapped shared: an entry is set by one
 * store, which outlives a kill of famd), an entry per frame of the buffer
 * (its chunk, set when the chunk is write-protected dirty, cleared when
 * the frame is given back), and the entries the famd before left (after
 * the frames' until no restored session waits any more).
 * An entry: {handle, chunk + 1} (0: none).
 * Locks: none; the control loop.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host/host.h"
#include "host/host-session.h"

#define INFLIGHT_MAGIC "famd-wb"
#define INFLIGHT_VERSION 1u

struct inflight_slot {
	uint64_t handle;
	uint64_t chunk1; /* the chunk + 1; 0: free */
};

struct host_inflight {
	char magic[8];
	uint32_t version, nslots;
	uint64_t frames;   /* entries of the buffer's frames (the rest: the
	                    * famd before's) */
	uint64_t all;      /* every chunk of the famd before's sessions may
	                    * be dirty (it left no table) */
	uint64_t pad[4];
	struct inflight_slot slot[];
};

/* Returns the bytes of a table of n slots. */
static size_t
inflight_len(uint32_t n)
{
	return sizeof(struct host_inflight) + n * sizeof(struct inflight_slot);
}

/*
 * Keeps what the famd before left in the table at fd (its entries, or
 * that it was not written whole: old_all): read once at start.
 */
static void
inflight_read_old(struct host_restart *rs, int fd)
{
	struct host_inflight head;
	struct stat st;
	struct host_inflight *t;

	rs->old_all = true; /* unless the table checks */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 0077) != 0 ||
	    pread(fd, &head, sizeof head, 0) != (ssize_t)sizeof head ||
	    memcmp(head.magic, INFLIGHT_MAGIC, sizeof head.magic) != 0 ||
	    head.version != INFLIGHT_VERSION || head.nslots == 0 ||
	    head.nslots > (1u << 20) ||
	    (uint64_t)st.st_size != inflight_len(head.nslots))
		return;
	t = mmap(NULL, inflight_len(head.nslots), PROT_READ, MAP_SHARED, fd,
	    0);
	if (t == MAP_FAILED)
		return;
	rs->old = calloc(head.nslots, sizeof *rs->old);
	if (rs->old != NULL) {
		for (uint32_t i = 0; i < head.nslots; i++)
			if (t->slot[i].chunk1 != 0) {
				rs->old[rs->nold].handle = t->slot[i].handle;
				rs->old[rs->nold++].chunk = t->slot[i].chunk1 - 1;
			}
		rs->old_all = head.all != 0;
	}
	munmap(t, inflight_len(head.nslots));
}

/*
 * Sets the table up: reads what the famd before left (host_restart_init
 * calls it before reading the state), then makes a new one: an entry per
 * frame, then those left. Without a table the next famd takes every
 * resident chunk as dirty.
 */
void
host_restart_inflight_init(struct host *h)
{
	struct host_restart *rs = h->restart;
	char *path = xasprintf("%s.wb", h->session_path);
	char *tmp = xasprintf("%s.wb.tmp", h->session_path);
	uint64_t n = h->nframes + rs->nold;
	struct host_inflight *t = MAP_FAILED;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd >= 0) {
		inflight_read_old(rs, fd);
		close(fd);
	} else {
		/* (a state of a famd that kept no table: all may be dirty) */
		rs->old_all = true;
	}
	n = h->nframes + rs->nold;
	unlink(tmp);
	errno = 0;
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
	    0600);
	if (fd >= 0 && n <= UINT32_MAX &&
	    ftruncate(fd, (off_t)inflight_len((uint32_t)n)) == 0)
		t = mmap(NULL, inflight_len((uint32_t)n), PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, 0);
	if (t != MAP_FAILED) {
		memcpy(t->magic, INFLIGHT_MAGIC, sizeof t->magic);
		t->version = INFLIGHT_VERSION;
		t->nslots = (uint32_t)n;
		t->frames = h->nframes;
		t->all = rs->old_all; /* (until no session of before waits) */
		for (size_t i = 0; i < rs->nold; i++) {
			t->slot[h->nframes + i].handle = rs->old[i].handle;
			t->slot[h->nframes + i].chunk1 = rs->old[i].chunk + 1;
		}
	}
	if (t == MAP_FAILED || rename(tmp, path) < 0) {
		log_warn("host: cannot make the table of chunks write-protected "
		    "dirty %s: %s; after a restart of famd every resident "
		    "chunk is written back again", path,
		    strerror(errno != 0 ? errno : ENOMEM));
		if (t != MAP_FAILED)
			munmap(t, inflight_len((uint32_t)n));
		unlink(tmp);
		unlink(path); /* (the next famd takes every chunk as dirty) */
	} else {
		rs->inflight = t;
	}
	if (fd >= 0)
		close(fd);
	free(tmp);
	free(path);
}

/*
 * Returns true when chunk c of region handle may be dirty although
 * write-protected: the famd before said so (or left no table whole).
 */
bool
host_restart_inflight_was(const struct host *h, uint64_t handle, uint64_t c)
{
	const struct host_restart *rs = h->restart;

	if (rs == NULL || rs->old_all)
		return true;
	for (size_t i = 0; i < rs->nold; i++)
		if (rs->old[i].handle == handle && rs->old[i].chunk == c)
			return true;
	return false;
}

/*
 * No session of the famd before waits any more (each was taken back, its
 * chunks named here made dirty in frames of ours then, or released): its
 * entries are not needed.
 */
void
host_restart_inflight_tick(struct host *h)
{
	struct host_restart *rs = h->restart;

	if (rs == NULL || (rs->nold == 0 && !rs->old_all))
		return;
	for (const struct host_client *cl = h->clients; cl != NULL;
	    cl = cl->next)
		if (cl->restored && !cl->dead)
			return;
	if (rs->inflight != NULL) {
		for (size_t i = 0; i < rs->nold; i++)
			rs->inflight->slot[h->nframes + i].chunk1 = 0;
		rs->inflight->all = 0;
	}
	free(rs->old);
	rs->old = NULL;
	rs->nold = 0;
	rs->old_all = false;
}

/*
 * Chunk c of r (resident) is write-protected while dirty, or for its
 * write-back: its frame's entry names it until the frame is given back.
 */
void
host_restart_dirty_wp(struct host *h, const struct region *r, uint64_t c)
{
	struct host_restart *rs = h->restart;
	uint32_t f = r->chunks[c].frame;

	if (rs == NULL || rs->inflight == NULL || f >= h->nframes)
		return;
	rs->inflight->slot[f].handle = r->handle;
	__atomic_store_n(&rs->inflight->slot[f].chunk1, c + 1,
	    __ATOMIC_RELEASE);
}

/*
 * Frame f is given back: its chunk left the buffer (clean, or written
 * back), so what it left behind (stale copies) goes to the state file
 * first, then its entry is cleared.
 */
void
host_restart_frame_free(struct host *h, uint32_t f)
{
	struct host_restart *rs = h->restart;

	if (rs == NULL || rs->inflight == NULL || f >= h->nframes ||
	    rs->inflight->slot[f].chunk1 == 0)
		return;
	if (rs->pend_sets > 0)
		host_restart_flush(h);
	__atomic_store_n(&rs->inflight->slot[f].chunk1, 0, __ATOMIC_RELEASE);
}

/* Unmaps the table (it stays for the next famd) and frees the rest. */
void
host_restart_inflight_fini(struct host *h)
{
	struct host_restart *rs = h->restart;

	if (rs->inflight != NULL)
		munmap(rs->inflight, inflight_len(rs->inflight->nslots));
	rs->inflight = NULL;
	free(rs->old);
}
