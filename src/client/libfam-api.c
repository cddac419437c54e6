/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libfam-api.c - the fam_*() API of famd-client.h, and the entry points
 * libfamshim calls (libfam-internal.h): regions asked of the host famd,
 * entered in the tables, released, described.
 *
 * This code may run inside malloc (libfamshim compiles it in): it never
 * allocates and never uses stdio; messages live on the stack.
 * Owns: nothing of its own; the tables are libfam-arena.c's, the session
 * libfam-session.c's.
 * Locks: libfam.lock around every round trip and table change, never while
 * touching a region's memory (the caller's path or fam_stat may be there).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "famd-client/famd-client.h"
#include "wire/session.h"
#include "client/libfam-internal.h"

#define LIBFAM_MAX_ARENA FAM_SESSION_MAX_ARENA

static pthread_once_t libfam_once = PTHREAD_ONCE_INIT;

/* FAM_ALLOC_* (the public header) are ALLOC's d (wire/session.h). */
_Static_assert(FAM_ALLOC_EC(3, 2) == (FAM_SESSION_EC | 3u << 8 | 2u) &&
    FAM_ALLOC_REPLICATE(FAM_SESSION_MAX_COPIES) == FAM_SESSION_MAX_COPIES,
    "FAM_ALLOC_* and ALLOC's d differ");

/* Tells whether v is a power of two. */
static bool
is_pow2(uint64_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

/* ---- regions -------------------------------------------------------- */

/*
 * Parses the decimal number (1 to 16) at *p and moves *p past it; 0 when
 * there is none or it is out of range.
 */
static uint64_t
alloc_num(const char **p)
{
	uint64_t n = 0;

	if (**p < '0' || **p > '9')
		return 0;
	for (; **p >= '0' && **p <= '9'; (*p)++)
		if ((n = n * 10 + (uint64_t)(**p - '0')) > 16)
			return 0;
	return n;
}

/* Returns ALLOC's d for "ec:K+M" (K and M from 1 to 16), or 0. */
static uint64_t
alloc_ec(const char *v)
{
	uint64_t k, m;

	v += 3;
	k = alloc_num(&v);
	if (k == 0 || *v++ != '+')
		return 0;
	m = alloc_num(&v);
	if (m == 0 || *v != '\0')
		return 0;
	return FAM_SESSION_EC | k << 8 | m;
}

/*
 * Returns the copies FAM_REDUNDANCY asks for (wire/session.h, ALLOC's d):
 * 1 for "none", N for "replicate:N" (2 to FAM_SESSION_MAX_COPIES),
 * FAM_SESSION_EC | K << 8 | M for "ec:K+M", 0 (famd's [host] redundancy)
 * when it is unset or says anything else.
 */
static uint64_t
alloc_copies(void)
{
	const char *v = getenv("FAM_REDUNDANCY");
	uint64_t n = 0;

	if (v == NULL)
		return 0;
	if (strcmp(v, "none") == 0)
		return 1;
	if (strncmp(v, "ec:", 3) == 0)
		return alloc_ec(v);
	if (strncmp(v, "replicate:", 10) != 0 || v[10] == '\0')
		return 0;
	for (v += 10; *v != '\0'; v++) {
		if (*v < '0' || *v > '9' || n > FAM_SESSION_MAX_COPIES)
			return 0;
		n = n * 10 + (uint64_t)(*v - '0');
	}
	return n >= 2 && n <= FAM_SESSION_MAX_COPIES ? n : 0;
}

/* Asks famd to release a region the caller did not keep. */
static void
region_release(uint64_t handle)
{
	struct fam_smsg m;

	memset(&m, 0, sizeof m);
	m.a = handle;
	session_call(FAM_S_FREE, &m, NULL, -1, NULL);
}

/*
 * Maps the new arena famd attached to an ALLOC reply and tells famd where
 * (wire/session.h, step 3). The region [off, off + reserved) was checked.
 */
static int
alloc_new_arena(int memfd, uint64_t id, size_t len, struct libfam_arena **ap)
{
	struct libfam_arena *a = NULL;
	struct fam_smsg m;
	uintptr_t base = 0;
	int rc;

	rc = arena_prepare(len, &a);
	if (rc < 0)
		return rc;
	rc = arena_map(memfd, len, &base);
	if (rc < 0) {
		arena_unprepare(a);
		return rc;
	}
	memset(&m, 0, sizeof m);
	m.a = id;
	m.b = base;
	rc = session_call(FAM_S_MAP, &m, NULL, -1, NULL);
	if (rc < 0) {
		/* Nobody has a pointer into it yet. */
		libfam_munmap((void *)base, len);
		arena_unprepare(a);
		return rc;
	}
	arena_publish(a, id, base, len);
	arena_keep_memfd(a, memfd);
	*ap = a;
	return 0;
}

/*
 * Asks famd for a region (size, or the file path of plen bytes) and enters
 * it in the tables. Called with the lock held and a live session.
 */
static int
alloc_locked(size_t size, size_t align, unsigned flags, const char *path,
    size_t plen, uint64_t copies, uintptr_t *addrp, size_t *lenp)
{
	struct libfam_arena *a = NULL;
	struct libfam_region r;
	struct fam_smsg m;
	struct stat st;
	uint64_t off, len, reserved, alen;
	int rc, memfd = -1;

	memset(&m, 0, sizeof m);
	m.len = (uint32_t)plen;
	m.a = size;
	m.b = flags;
	m.c = align > libfam.chunk ? align : 0;
	m.d = copies;
	rc = session_call(FAM_S_ALLOC, &m, path, -1, &memfd);
	if (rc < 0)
		return rc;
	off = m.b;
	len = m.c;
	reserved = (len + libfam.chunk - 1) & ~(uint64_t)(libfam.chunk - 1);
	r.handle = m.d;
	r.flags = flags;

	/* Check the reply before anything is mapped. */
	if ((m.flags & ~FAM_S_NEW_ARENA) != 0 ||
	    !(m.flags & FAM_S_NEW_ARENA) != (memfd < 0) || len == 0 ||
	    reserved < len || (!(flags & FAM_S_ALLOC_FILE) && len < size) ||
	    off % libfam.chunk != 0)
		goto proto;
	if (memfd >= 0) {
		if (arena_by_id(m.a) != NULL || fstat(memfd, &st) < 0 ||
		    st.st_size <= 0 || (uint64_t)st.st_size > LIBFAM_MAX_ARENA ||
		    (uint64_t)st.st_size % libfam.chunk != 0)
			goto proto;
		alen = (uint64_t)st.st_size;
	} else {
		a = arena_by_id(m.a);
		if (a == NULL)
			goto proto;
		alen = a->len;
	}
	if (off > alen || reserved > alen - off)
		goto proto;

	if (memfd >= 0) {
		rc = alloc_new_arena(memfd, m.a, (size_t)alen, &a);
		if (rc < 0)
			close(memfd); /* else the arena keeps it */
		memfd = -1;
		if (rc < 0) {
			if (libfam.state == LIBFAM_S_LIVE)
				region_release(r.handle);
			return rc;
		}
	}
	r.addr = a->base + off;
	r.size = (size_t)reserved;
	r.arena = (uint32_t)(a - arenas);
	if (arena_busy(a, off / libfam.chunk, reserved / libfam.chunk))
		goto proto; /* two live regions on one chunk: never */
	if (align != 0 && r.addr % align != 0) {
		region_release(r.handle);
		return -EINVAL;
	}
	rc = region_add(&r);
	if (rc == 0 && (flags & FAM_S_ALLOC_SHARED) &&
	    mprotect((void *)r.addr, r.size, PROT_READ) < 0) {
		rc = -errno;
		region_del(region_find(r.addr));
	}
	if (rc < 0) {
		region_release(r.handle);
		return rc;
	}
	arena_mark(a, off / libfam.chunk, reserved / libfam.chunk, true);
	*addrp = r.addr;
	*lenp = (flags & FAM_S_ALLOC_FILE) ? (size_t)len : r.size;
	return 0;

proto:
	close_fd(memfd);
	session_break(-EPROTO);
	return -EPROTO;
}

/*
 * Allocates a zero-filled region of at least size bytes, aligned to align,
 * each chunk on as many memory nodes as copies asks (ALLOC's d).
 */
static int
alloc_region(size_t size, size_t align, unsigned flags, uint64_t copies,
    void **ptr, size_t *usable, bool *quiet)
{
	uintptr_t addr;
	size_t len;
	int rc, cancel;

	if (quiet != NULL)
		*quiet = true;
	if (size == 0 || (align != 0 && !is_pow2(align)) ||
	    (flags & ~FAM_S_ALLOC_SPARSE))
		return -EINVAL;
	if (align > FAM_SESSION_ARENA_ALIGN)
		return -EINVAL;
	if (size > LIBFAM_MAX_ARENA)
		return -ENOMEM;
	if (quiet != NULL)
		*quiet = false;
	pthread_once(&libfam_once, libfam_init);
	cancel = libfam_lock();
	rc = session_get(quiet);
	if (rc == 0)
		rc = alloc_locked(size, align, flags, NULL, 0, copies, &addr,
		    &len);
	libfam_unlock(cancel);
	if (rc < 0)
		return rc;
	*ptr = (void *)addr;
	if (usable != NULL)
		*usable = len;
	return 0;
}

/* Allocates a zero-filled region of at least size bytes, aligned to align. */
int
libfam_alloc(size_t size, size_t align, unsigned flags, void **ptr,
    size_t *usable, bool *quiet)
{
	return alloc_region(size, align, flags, alloc_copies(), ptr, usable,
	    quiet);
}

/* Allocates a region holding the file path, preloaded on the memory node. */
int
libfam_alloc_file(const char *path, unsigned flags, void **ptr, size_t *len)
{
	char buf[FAM_SESSION_MAX_DATA];
	uintptr_t addr;
	size_t plen, l;
	int rc, cancel;

	if (!(flags & FAM_S_ALLOC_FILE) || (flags & ~FAM_S_ALLOC_ALL))
		return -EINVAL;
	/* The path may be in a region: copy it before taking the lock. */
	plen = strnlen(path, sizeof buf + 1);
	if (plen == 0)
		return -EINVAL;
	if (plen > sizeof buf)
		return -ENAMETOOLONG;
	memcpy(buf, path, plen);
	pthread_once(&libfam_once, libfam_init);
	cancel = libfam_lock();
	rc = session_get(NULL);
	if (rc == 0)
		rc = alloc_locked(0, 0, flags, buf, plen, alloc_copies(), &addr,
		    &l);
	libfam_unlock(cancel);
	if (rc < 0)
		return rc;
	*ptr = (void *)addr;
	*len = l;
	return 0;
}

/* Releases the region starting at ptr. */
int
libfam_free(void *ptr)
{
	struct libfam_arena *a = arena_of((uintptr_t)ptr);
	struct libfam_region *r;
	struct fam_smsg m;
	uintptr_t addr;
	size_t size;
	int rc = 0, cancel;

	if (a == NULL)
		return -EINVAL;
	if (atomic_load(&a->state) == LIBFAM_A_INHERITED)
		return 1;
	cancel = libfam_lock();
	r = region_find((uintptr_t)ptr);
	if (r == NULL) {
		rc = atomic_load(&a->state) == LIBFAM_A_INHERITED ? 1 :
		    -EINVAL;
		goto out;
	}
	if (!arena_served(a)) {
		/* The session is gone, and the region with it. */
		region_drop(r);
		goto out;
	}
	addr = r->addr;
	size = r->size;
	memset(&m, 0, sizeof m);
	m.a = r->handle;
	rc = session_call(FAM_S_FREE, &m, NULL, -1, NULL);
	if (rc < 0 && rc != -ENOENT && libfam.state == LIBFAM_S_LIVE)
		goto out; /* famd keeps it; so do we */
	region_drop(region_find(addr));
	if (rc == -ECONNRESET || rc == -EPROTO)
		rc = 0; /* released with the session */
	/*
	 * Whatever protection the program gave its block (mprotect, or a
	 * mapping call libfamshim emulated), its chunks are writable again
	 * before another block gets them.
	 */
	if (libfam.state == LIBFAM_S_LIVE)
		mprotect((void *)addr, size, PROT_READ | PROT_WRITE);
out:
	libfam_unlock(cancel);
	return rc;
}

/* Tells whether ptr lies in an arena of this process; lock-free. */
bool
libfam_owns(const void *ptr)
{
	return arena_of((uintptr_t)ptr) != NULL;
}

/* Bytes reserved for the region starting at ptr, 0 if none. */
size_t
libfam_usable_size(const void *ptr)
{
	struct libfam_region *r;
	size_t size = 0;
	int cancel;

	if (!libfam_owns(ptr))
		return 0;
	cancel = libfam_lock();
	r = region_find((uintptr_t)ptr);
	if (r != NULL)
		size = r->size;
	libfam_unlock(cancel);
	return size;
}

/* Asks famd about the region holding ptr. */
static int
libfam_stat(const void *ptr, struct fam_stat *st)
{
	struct libfam_arena *a = arena_of((uintptr_t)ptr);
	struct fam_smsg m;
	int rc, cancel;

	if (a == NULL)
		return -EINVAL;
	memset(&m, 0, sizeof m);
	cancel = libfam_lock();
	if (!arena_served(a)) {
		rc = -ENOTCONN;
	} else {
		m.a = (uintptr_t)ptr;
		rc = session_call(FAM_S_STAT, &m, NULL, -1, NULL);
		if (rc == 0 && ((m.flags & ~FAM_S_ALLOC_ALL) != 0 ||
		    m.b == 0 || m.b % libfam.chunk != 0 || m.c > m.b ||
		    m.d > m.c)) {
			session_break(-EPROTO);
			rc = -EPROTO;
		}
	}
	libfam_unlock(cancel);
	if (rc < 0)
		return rc;
	/* st may be in a region: written without the lock. */
	memset(st, 0, sizeof *st);
	st->size = (size_t)m.b;
	st->resident = (size_t)m.c;
	st->dirty = (size_t)m.d;
	st->handle = m.a;
	st->flags = ((m.flags & FAM_S_ALLOC_FILE) ? FAM_STAT_FILE : 0) |
	    ((m.flags & FAM_S_ALLOC_SHARED) ? FAM_STAT_READONLY : 0);
	return 0;
}

/* Passes advice about the region holding ptr to famd; under the lock. */
static int
advise_locked(uintptr_t ptr, int advice)
{
	struct libfam_arena *a = arena_of(ptr);
	struct fam_smsg m;

	if (a == NULL)
		return -EINVAL;
	if (!arena_served(a))
		return -ENOTCONN;
	memset(&m, 0, sizeof m);
	m.a = ptr;
	m.b = (uint64_t)advice;
	return session_call(FAM_S_ADVISE, &m, NULL, -1, NULL);
}

/* Passes advice about the region holding ptr to famd. */
static int
libfam_advise(const void *ptr, int advice)
{
	int rc, cancel;

	if (advice < FAM_ADVISE_NORMAL || advice > FAM_ADVISE_RANDOM)
		return -EINVAL;
	cancel = libfam_lock();
	rc = advise_locked((uintptr_t)ptr, advice);
	libfam_unlock(cancel);
	return rc;
}

/* An access hint for the regions [addr, addr + len) half covers at least. */
void
libfam_hint(void *addr, size_t len, int advice)
{
	uintptr_t start = (uintptr_t)addr, end = start + len;
	int cancel;

	if (len == 0 || end < start)
		return;
	cancel = libfam_lock();
	for (size_t i = 0; i < libfam.region_cap; i++) {
		const struct libfam_region *r = &libfam.regions[i];
		uintptr_t lo, hi;

		if (r->addr == 0)
			continue;
		lo = r->addr > start ? r->addr : start;
		hi = r->addr + r->size < end ? r->addr + r->size : end;
		if (hi > lo && (hi - lo) * 2 >= r->size)
			(void)advise_locked(r->addr, advice);
	}
	libfam_unlock(cancel);
}

/*
 * Asks famd to discard the whole chunks of [lo, hi) that lie in regions,
 * one region per round trip. Returns 0 or the first error; -EAGAIN with
 * *stop the chunk a fork's copy shares (famd cannot drop it: it is to be
 * written with zeros).
 */
static int
discard_chunks(uintptr_t lo, uintptr_t hi, uintptr_t *stop)
{
	uintptr_t pos = lo;
	size_t chunk = libfam.chunk;
	int rc = 0, cancel;

	cancel = libfam_lock();
	while (pos < hi && rc == 0) {
		struct libfam_arena *a = arena_of(pos);
		struct fam_smsg m;

		if (a == NULL || !arena_served(a) ||
		    !arena_busy(a, (pos - a->base) / chunk, 1)) {
			pos += chunk;
			continue;
		}
		memset(&m, 0, sizeof m);
		m.a = pos;
		m.b = hi - pos;
		rc = session_call(FAM_S_DISCARD, &m, NULL, -1, NULL);
		if (rc == 0 && (m.a == 0 || m.a > hi - pos ||
		    (m.a & (chunk - 1)) != 0)) {
			session_break(-EPROTO);
			rc = -EPROTO;
		}
		if (rc == -ENOENT) {
			rc = 0; /* freed meanwhile */
			m.a = chunk;
		}
		if (rc == -EAGAIN) {
			*stop = pos;
			break;
		}
		pos += (uintptr_t)m.a;
	}
	libfam_unlock(cancel);
	return rc;
}

/* Writes zeros over [lo, hi), inside one chunk, if that chunk is in use. */
static void
discard_bytes(uintptr_t lo, uintptr_t hi)
{
	struct libfam_arena *a = arena_of(lo);

	if (lo >= hi || a == NULL || !arena_served(a) ||
	    !arena_busy(a, (lo - a->base) / libfam.chunk, 1))
		return;
	memset((void *)lo, 0, hi - lo);
}

/*
 * Makes [addr, addr + len) read back as zeros: famd discards the whole
 * chunks (dropped from the buffer without a write-back, their data
 * forgotten), the parts of chunks at either end are written with zeros.
 * Bytes outside every region are left alone.
 */
int
libfam_discard(void *addr, size_t len)
{
	uintptr_t start = (uintptr_t)addr, end = start + len;
	uintptr_t mask = (uintptr_t)libfam.chunk - 1, lo, hi;
	int rc = 0;

	if (len == 0 || end < start)
		return len == 0 ? 0 : -EINVAL;
	if (libfam.chunk == 0)
		return -ENOTCONN;
	lo = (start + mask) & ~mask;
	hi = end & ~mask;
	if (lo >= hi) {
		/* No whole chunk: zeros, at most over two chunks. */
		uintptr_t mid = (start | mask) + 1;

		discard_bytes(start, mid < end ? mid : end);
		discard_bytes(mid, end);
		return 0;
	}
	discard_bytes(start, lo);
	discard_bytes(hi, end);
	while (lo < hi) {
		uintptr_t stop = hi;

		rc = discard_chunks(lo, hi, &stop);
		if (rc != -EAGAIN)
			break;
		discard_bytes(stop, stop + mask + 1); /* shared with a copy */
		lo = stop + mask + 1;
		rc = 0;
	}
	return rc;
}

/* ---- the public API (famd-client.h) --------------------------------- */

/* Zero-filled memory of at least size bytes, aligned to the chunk size. */
void *
fam_alloc(size_t size)
{
	void *p;
	int rc = libfam_alloc(size, 0, 0, &p, NULL, NULL);

	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	return p;
}

/*
 * Returns ALLOC's d for a FAM_ALLOC_* redundancy (the same encoding), or
 * -1 when it is none that famd knows.
 */
static int64_t
alloc_redundancy(unsigned red)
{
	unsigned k = red >> 8 & 0xff, m = red & 0xff;

	if (red == FAM_ALLOC_DEFAULT)
		return (int64_t)alloc_copies();
	if (red <= FAM_SESSION_MAX_COPIES)
		return red;
	if ((red & ~(FAM_SESSION_EC | 0xffffu)) == 0 &&
	    (red & FAM_SESSION_EC) && k >= 1 && k <= 16 && m >= 1 && m <= 16)
		return red;
	return -1;
}

/* Zero-filled memory of at least size bytes, kept as redundancy asks. */
void *
fam_alloc_redundant(size_t size, unsigned redundancy)
{
	int64_t d = alloc_redundancy(redundancy);
	void *p;
	int rc = d < 0 ? -EINVAL : alloc_region(size, 0, 0, (uint64_t)d, &p,
	    NULL, NULL);

	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	return p;
}

/* Memory holding the file path, loaded on the memory node. */
void *
fam_alloc_file(const char *path, int mode, size_t *size)
{
	unsigned flags;
	void *p;
	int rc;

	if (path == NULL || size == NULL) {
		errno = EINVAL;
		return NULL;
	}
	if (mode == FAM_FILE_SHARED)
		flags = FAM_S_ALLOC_FILE | FAM_S_ALLOC_SHARED;
	else if (mode == FAM_FILE_PRIVATE)
		flags = FAM_S_ALLOC_FILE;
	else {
		errno = EINVAL;
		return NULL;
	}
	rc = libfam_alloc_file(path, flags, &p, size);
	if (rc < 0) {
		errno = -rc;
		return NULL;
	}
	return p;
}

/* Releases memory from fam_alloc() or fam_alloc_file(). */
int
fam_free(void *ptr)
{
	int rc;

	if (ptr == NULL)
		return 0;
	rc = libfam_free(ptr);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}

/* Describes the region holding ptr. */
int
fam_stat(const void *ptr, struct fam_stat *st)
{
	int rc;

	if (st == NULL) {
		errno = EINVAL;
		return -1;
	}
	rc = libfam_stat(ptr, st);
	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}

/* Returns 1 if ptr lies in fabric-attached memory of this process. */
int
fam_owns(const void *ptr)
{
	return libfam_owns(ptr) ? 1 : 0;
}

/* Bytes usable from ptr, the start of a region; 0 if not one. */
size_t
fam_usable_size(const void *ptr)
{
	return libfam_usable_size(ptr);
}

/*
 * Tells famd how the region holding ptr is used. Visible even where the
 * rest is hidden: libfamshim.so exports it too (shim.sym).
 */
__attribute__((visibility("default"))) int
fam_advise(const void *ptr, int advice)
{
	int rc = libfam_advise(ptr, advice);

	if (rc < 0) {
		errno = -rc;
		return -1;
	}
	return 0;
}
