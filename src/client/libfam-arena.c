/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libfam-arena.c - the arena table and the region table: arenas mapped from
 * the host famd's memfds, and the regions carved from them, with a bitmap
 * of the chunks in use per arena (the free lists).
 *
 * Owns: arenas[] (slots never move: filled, then published by a release
 * store of narenas), the region table libfam.regions (open addressing,
 * mmap'd), each arena's chunk bitmap.
 * Arena states (struct libfam_arena.state):
 *   LIBFAM_A_LIVE       mapped, registered with famd, faults served
 *   LIBFAM_A_LOST       famd gone: mapped onto an empty file, so every access
 *                       raises SIGBUS
 *   LIBFAM_A_INHERITED  a parent's arena seen in a forked child with
 *                       FAM_FORK=0: not mapped (MADV_DONTFORK), reserved
 *                       PROT_NONE (SIGSEGV). With the copy, the child's
 *                       adopted arena is LIVE again, of its own session.
 * Arenas keep their slot and their address range for the life of the
 * process, so an address once FAM stays FAM: free() of it never reaches
 * libc.
 * Locks: callers hold libfam.lock, but arena_of() reads without it.
 */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "wire/session.h"
#include "client/libfam-internal.h"

#define LIBFAM_MIN_REGIONS 256 /* slots of a new region table */

struct libfam_arena arenas[LIBFAM_MAX_ARENAS];
_Atomic size_t narenas;
static _Atomic uintptr_t arenas_lo = UINTPTR_MAX;
static _Atomic uintptr_t arenas_hi;

/* ---- the kernel's mapping calls ------------------------------------ */

/* mmap(2) itself. */
void *
libfam_mmap(void *addr, size_t len, int prot, int flags, int fd, long off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

/* munmap(2) itself. */
int
libfam_munmap(void *addr, size_t len)
{
	return (int)syscall(SYS_munmap, addr, len);
}

/* madvise(2) itself. */
int
libfam_madvise(void *addr, size_t len, int advice)
{
	return (int)syscall(SYS_madvise, addr, len, advice);
}

/* ---- arena table ---------------------------------------------------- */

/* The arena holding addr, or NULL; lock-free. */
struct libfam_arena *
arena_of(uintptr_t addr)
{
	size_t n = atomic_load_explicit(&narenas, memory_order_acquire), i;

	if (n == 0 || addr < atomic_load_explicit(&arenas_lo,
	    memory_order_relaxed) || addr >= atomic_load_explicit(&arenas_hi,
	    memory_order_relaxed))
		return NULL;
	for (i = 0; i < n; i++)
		if (addr - arenas[i].base < arenas[i].len)
			return &arenas[i];
	return NULL;
}

/* The live arena famd calls id in the current session, or NULL. */
struct libfam_arena *
arena_by_id(uint64_t id)
{
	size_t n = atomic_load_explicit(&narenas, memory_order_relaxed), i;

	for (i = 0; i < n; i++)
		if (arenas[i].id == id && arenas[i].session == libfam.gen &&
		    atomic_load(&arenas[i].state) == LIBFAM_A_LIVE)
			return &arenas[i];
	return NULL;
}

/* Tells whether famd serves arena a now: live, of the live session. */
bool
arena_served(const struct libfam_arena *a)
{
	return atomic_load(&a->state) == LIBFAM_A_LIVE &&
	    a->session == libfam.gen && libfam.state == LIBFAM_S_LIVE;
}

/* Sets (on) or clears the bits of chunks [first, first + count). */
void
arena_mark(struct libfam_arena *a, size_t first, size_t count, bool on)
{
	size_t i;

	for (i = first; i < first + count; i++) {
		if (on)
			a->used[i / 64] |= 1ull << (i % 64);
		else
			a->used[i / 64] &= ~(1ull << (i % 64));
	}
}

/* Tells whether any chunk of [first, first + count) is in a region. */
bool
arena_busy(const struct libfam_arena *a, size_t first, size_t count)
{
	size_t i;

	for (i = first; i < first + count; i++) {
		if (i % 64 == 0 && i + 64 <= first + count) {
			if (a->used[i / 64] != 0)
				return true;
			i += 63;
			continue;
		}
		if (a->used[i / 64] & (1ull << (i % 64)))
			return true;
	}
	return false;
}

/*
 * Maps memfd, famd's new arena, at an address aligned as wire/session.h
 * says, and keeps it from forked children. Returns its base.
 */
int
arena_map(int memfd, size_t len, uintptr_t *basep)
{
	size_t align = FAM_SESSION_ARENA_ALIGN;
	uintptr_t resv, base;
	void *p;

	while (align > len)
		align >>= 1;
	if (align < (size_t)sysconf(_SC_PAGESIZE))
		align = (size_t)sysconf(_SC_PAGESIZE);
	p = libfam_mmap(NULL, len + align, PROT_NONE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	resv = (uintptr_t)p;
	base = (resv + align - 1) & ~(uintptr_t)(align - 1);
	p = libfam_mmap((void *)base, len, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_FIXED | MAP_NORESERVE, memfd, 0);
	if (p == MAP_FAILED) {
		int rc = -errno;

		libfam_munmap((void *)resv, len + align);
		return rc;
	}
	if (base > resv)
		libfam_munmap((void *)resv, base - resv);
	if (resv + align > base)
		libfam_munmap((void *)(base + len), resv + align - base);
	if (libfam_madvise((void *)base, len, MADV_DONTFORK) < 0) {
		int rc = -errno;

		libfam_munmap((void *)base, len);
		return rc;
	}
	*basep = base;
	return 0;
}

/* Prepares the next free slot for an arena of len bytes: its chunk bitmap. */
int
arena_prepare(size_t len, struct libfam_arena **ap)
{
	size_t n = atomic_load_explicit(&narenas, memory_order_relaxed);
	size_t blen = ((len / libfam.chunk + 63) / 64) * 8;
	struct libfam_arena *a;
	void *p;

	if (n >= LIBFAM_MAX_ARENAS)
		return -ENOMEM;
	a = &arenas[n];
	blen = (blen + 4095) & ~(size_t)4095;
	p = libfam_mmap(NULL, blen, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	a->used = p;
	a->used_len = blen;
	*ap = a;
	return 0;
}

/* Frees what arena_prepare() got for a slot left unused. */
void
arena_unprepare(struct libfam_arena *a)
{
	libfam_munmap(a->used, a->used_len);
	a->used = NULL;
	a->used_len = 0;
}

/* Publishes the prepared arena a, mapped at base. */
void
arena_publish(struct libfam_arena *a, uint64_t id, uintptr_t base, size_t len)
{
	a->base = base;
	a->len = len;
	a->id = id;
	a->session = libfam.gen;
	atomic_store(&a->state, LIBFAM_A_LIVE);
	if (base < atomic_load(&arenas_lo))
		atomic_store(&arenas_lo, base);
	if (base + len > atomic_load(&arenas_hi))
		atomic_store(&arenas_hi, base + len);
	atomic_store_explicit(&narenas, (size_t)(a - arenas) + 1,
	    memory_order_release);
}

/*
 * Replaces a live arena's mapping by one of an empty file, so that every
 * access raises SIGBUS (or, failing that, SIGSEGV). Returns -errno when the
 * old mapping is still there.
 */
int
arena_replace(struct libfam_arena *a)
{
	void *p = MAP_FAILED;

	if (libfam.lost_fd >= 0)
		p = libfam_mmap((void *)a->base, a->len, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_FIXED | MAP_NORESERVE, libfam.lost_fd, 0);
	if (p == MAP_FAILED)
		p = libfam_mmap((void *)a->base, a->len, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
		    -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	atomic_store(&a->state, LIBFAM_A_LOST);
	arena_drop_memfd(a);
	return 0;
}

/* ---- region table --------------------------------------------------- */

/* Home slot of addr in a table of cap slots. */
static size_t
region_home(uintptr_t addr, size_t cap)
{
	uint64_t h = (uint64_t)addr * 0x9e3779b97f4a7c15ull;

	return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

/* The region starting at addr, or NULL. */
struct libfam_region *
region_find(uintptr_t addr)
{
	size_t cap = libfam.region_cap, i;

	if (cap == 0 || addr == 0)
		return NULL;
	for (i = region_home(addr, cap);; i = (i + 1) & (cap - 1)) {
		if (libfam.regions[i].addr == addr)
			return &libfam.regions[i];
		if (libfam.regions[i].addr == 0)
			return NULL;
	}
}

/* Puts r in table t of cap slots, which has a free one. */
static void
region_put(struct libfam_region *t, size_t cap, const struct libfam_region *r)
{
	size_t i = region_home(r->addr, cap);

	while (t[i].addr != 0)
		i = (i + 1) & (cap - 1);
	t[i] = *r;
}

/* Adds r, growing the table (kept at most half full). */
int
region_add(const struct libfam_region *r)
{
	struct libfam_region *t;
	size_t cap, i;

	if ((libfam.nregions + 1) * 2 > libfam.region_cap) {
		cap = libfam.region_cap != 0 ? libfam.region_cap * 2 :
		    LIBFAM_MIN_REGIONS;
		t = libfam_mmap(NULL, cap * sizeof *t, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (t == MAP_FAILED)
			return -ENOMEM;
		for (i = 0; i < libfam.region_cap; i++)
			if (libfam.regions[i].addr != 0)
				region_put(t, cap, &libfam.regions[i]);
		if (libfam.regions != NULL)
			libfam_munmap(libfam.regions,
			    libfam.region_cap * sizeof *libfam.regions);
		libfam.regions = t;
		libfam.region_cap = cap;
	}
	region_put(libfam.regions, libfam.region_cap, r);
	libfam.nregions++;
	return 0;
}

/* Removes the region in slot r (backward-shift deletion). */
void
region_del(struct libfam_region *r)
{
	size_t cap = libfam.region_cap, i, j, k;

	i = (size_t)(r - libfam.regions);
	for (j = i;;) {
		j = (j + 1) & (cap - 1);
		if (libfam.regions[j].addr == 0)
			break;
		k = region_home(libfam.regions[j].addr, cap);
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		libfam.regions[i] = libfam.regions[j];
		i = j;
	}
	libfam.regions[i].addr = 0;
	libfam.nregions--;
}

/* Forgets region r: its chunks become free in its arena. */
void
region_drop(struct libfam_region *r)
{
	struct libfam_arena *a = &arenas[r->arena];

	arena_mark(a, (r->addr - a->base) / libfam.chunk,
	    r->size / libfam.chunk, false);
	region_del(r);
}
