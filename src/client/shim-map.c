/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shim-map.c - libfamshim's mapping calls: mmap, munmap, mremap and
 * madvise keep the kernel's meaning on fabric-attached memory, and large
 * private anonymous mappings become fabric-attached memory. See
 * libfamshim(7), "MAPPINGS".
 *
 * A FAM block is part of an arena (a shared mapping of famd's memfd that
 * famd serves with userfaultfd), so the calls a program makes on it cannot
 * reach the kernel as they are: unmapping part of an arena would leave a
 * hole another block gets later, advice would split the arena's mapping,
 * and DONTNEED on a shared mapping does not zero anything. Here:
 * - madvise: DONTNEED, DONTNEED_LOCKED, FREE and REMOVE discard (famd drops
 *   the chunks, the range reads back as zeros); hints that would only split
 *   the mapping (HUGEPAGE, NOHUGEPAGE, SEQUENTIAL, RANDOM, NORMAL, WILLNEED,
 *   COLD, PAGEOUT, MERGEABLE, UNMERGEABLE, COLLAPSE) are taken and ignored;
 *   DONTFORK and WIPEONFORK are kept in a table (DOFORK and KEEPONFORK
 *   take them back) and carried out in the child of a fork, once famd's
 *   copy is adopted: a DONTFORK range is inaccessible there (PROT_NONE,
 *   SIGSEGV on a touch, as where the kernel maps nothing), a WIPEONFORK
 *   range reads back as zeros; the rest go to the kernel;
 * - a mapped block (mmap(MAP_PRIVATE | MAP_ANONYMOUS) of FAM_THRESHOLD
 *   bytes or more, shim_map_on: FAM_MMAP) is a FAM region, whatever its
 *   protection; munmap of part of it discards that part and makes it
 *   inaccessible (PROT_NONE), and the region is released once every page
 *   is unmapped; mmap(MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS) over it
 *   discards and sets the protection in place (a runtime committing or
 *   uncommitting its heap); any other MAP_FIXED mapping over it retires
 *   the block: the kernel's from then on, its region kept until the
 *   session ends;
 * - mremap of a FAM block shrinks in place, or moves (MREMAP_MAYMOVE) by
 *   copying into a new mapping.
 * Calls made inside libfam (shim_depth) and on memory that is not FAM go
 * straight to the kernel, through syscall(2): no dlsym, no allocation.
 *
 * Owns: the table of mapped blocks, the ranges retired to the kernel, and
 * the fork advice (two sets of disjoint ranges).
 * Locks: map_lock around both tables, taken before libfam's lock, held
 * while a discard touches the block (a fault there never needs map_lock);
 * fork takes it (pthread_atfork) so that the child finds it free.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "client/libfam-internal.h"
#include "client/shim.h"
#include "famd-client/famd-client.h"
#include "wire/session.h"

#define SHIM_EXPORT __attribute__((visibility("default")))
#define PAGE        4096ul
#define MAX_BLOCKS  65536
#define MAX_RETIRED 4096
#define MAX_ADVICE  1024

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* A mapped block: a FAM region the program got from mmap(). */
struct mblock {
	uintptr_t addr;
	size_t len;     /* bytes mapped, a multiple of the page size */
	size_t live;    /* pages not unmapped */
	uint64_t *gone; /* a bit per page: unmapped by the program */
	size_t gone_len; /* bytes of that bitmap (its own mapping) */
};

/* A range handed back to the kernel: its calls pass straight through. */
struct retired {
	uintptr_t lo, hi;
};

/* A set of disjoint page ranges, sorted: where one fork advice holds. */
struct rset {
	struct retired *r;
	size_t n;
};

/* The fork advice sets. */
enum { ADV_DONTFORK, ADV_WIPEONFORK, ADV_SETS };

static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mblock *blocks;      /* sorted by addr */
static size_t nblocks;
static struct retired *retired;
static size_t nretired;
static pthread_once_t map_once = PTHREAD_ONCE_INIT;
static bool map_on;                /* shim_map_on, once the tables are */
static struct rset fadv[ADV_SETS];

/* ---- the kernel's calls --------------------------------------------- */

/* mmap(2) itself. */
static void *
sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

/* mprotect(2) itself. */
static int
sys_mprotect(uintptr_t addr, size_t len, int prot)
{
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

/* ---- set-up ---------------------------------------------------------- */

/* fork: the child finds map_lock free. */
static void
map_prepare(void)
{
	pthread_mutex_lock(&map_lock);
}

/* fork, in the parent: releases map_lock. */
static void
map_release(void)
{
	pthread_mutex_unlock(&map_lock);
}

static void advice_fork_child(void);

/*
 * fork, in the child, after libfam's handler adopted the copies:
 * releases map_lock and carries out the fork advice.
 */
static void
map_child(void)
{
	libfam_fork_child_pending();
	pthread_mutex_unlock(&map_lock);
	advice_fork_child();
}

/* Maps the tables and takes shim_map_on (FAM_MMAP), once. */
static void
map_init(void)
{
	void *b, *r, *a;

	b = sys_mmap(NULL, MAX_BLOCKS * sizeof *blocks, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	r = sys_mmap(NULL, MAX_RETIRED * sizeof *retired, PROT_READ |
	    PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	a = sys_mmap(NULL, ADV_SETS * MAX_ADVICE * sizeof *retired,
	    PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
	    MAP_NORESERVE, -1, 0);
	if (b == MAP_FAILED || r == MAP_FAILED || a == MAP_FAILED)
		return;
	retired = r;
	for (int k = 0; k < ADV_SETS; k++)
		fadv[k].r = (struct retired *)a + k * MAX_ADVICE;
	blocks = b;
	map_on = shim_map_on;
	/*
	 * Registered after libfam's (shim set-up comes first), so that in
	 * the child map_child runs once the copies are adopted.
	 */
	shim_depth++;
	pthread_atfork(map_prepare, map_release, map_child);
	shim_depth--;
}

/* Tells whether the mapping calls may look at FAM at all. */
static bool
map_ready(void)
{
	if (!shim_is_ready() || shim_depth != 0)
		return false;
	pthread_once(&map_once, map_init);
	return blocks != NULL;
}

/* ---- the tables (map_lock held) --------------------------------------- */

/* The index of the first block ending after addr (nblocks if none). */
static size_t
block_after(uintptr_t addr)
{
	size_t lo = 0, hi = nblocks;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (blocks[mid].addr + blocks[mid].len <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Enters a block of len bytes at addr; returns 0 or -ENOMEM. */
static int
block_add(uintptr_t addr, size_t len)
{
	size_t i = block_after(addr), pages = len / PAGE;
	size_t glen = ((pages + 63) / 64) * sizeof(uint64_t);
	void *g;

	if (nblocks == MAX_BLOCKS)
		return -ENOMEM;
	g = sys_mmap(NULL, glen, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	if (g == MAP_FAILED)
		return -ENOMEM;
	memmove(&blocks[i + 1], &blocks[i], (nblocks - i) * sizeof *blocks);
	blocks[i] = (struct mblock){ .addr = addr, .len = len, .live = pages,
	    .gone = g, .gone_len = glen };
	nblocks++;
	return 0;
}

/* Forgets block i. */
static void
block_del(size_t i)
{
	syscall(SYS_munmap, blocks[i].gone, blocks[i].gone_len);
	memmove(&blocks[i], &blocks[i + 1], (nblocks - i - 1) * sizeof *blocks);
	nblocks--;
}

/* Tells whether [addr, addr + len) touches a retired range. */
static bool
retired_has(uintptr_t addr, size_t len)
{
	for (size_t i = 0; i < nretired; i++)
		if (addr < retired[i].hi && addr + len > retired[i].lo)
			return true;
	return false;
}

/*
 * Takes [lo, hi) out of set s (splitting a range that covers it); returns
 * 0, or -ENOMEM when a split finds the set full.
 */
static int
rset_del(struct rset *s, uintptr_t lo, uintptr_t hi)
{
	for (size_t i = 0; i < s->n; i++) {
		struct retired *r = &s->r[i];

		if (r->hi <= lo || r->lo >= hi)
			continue;
		if (r->lo < lo && r->hi > hi) {
			if (s->n == MAX_ADVICE)
				return -ENOMEM;
			memmove(r + 1, r, (s->n - i) * sizeof *r);
			s->n++;
			r[0].hi = lo;
			r[1].lo = hi;
			return 0;
		}
		if (r->lo < lo) {
			r->hi = lo;
		} else if (r->hi > hi) {
			r->lo = hi;
		} else {
			memmove(r, r + 1, (s->n - i - 1) * sizeof *r);
			s->n--;
			i--;
		}
	}
	return 0;
}

/* Adds [lo, hi) to set s, merged with its neighbours; 0 or -ENOMEM. */
static int
rset_add(struct rset *s, uintptr_t lo, uintptr_t hi)
{
	size_t i = 0;

	for (size_t j = 0; j < s->n; j++) {
		if (s->r[j].hi < lo || s->r[j].lo > hi)
			continue;
		/* Touching or overlapping: widen [lo, hi) to cover it. */
		lo = s->r[j].lo < lo ? s->r[j].lo : lo;
		hi = s->r[j].hi > hi ? s->r[j].hi : hi;
	}
	rset_del(s, lo, hi); /* cannot split: [lo, hi) covers what it meets */
	if (s->n == MAX_ADVICE)
		return -ENOMEM;
	while (i < s->n && s->r[i].lo < lo)
		i++;
	memmove(&s->r[i + 1], &s->r[i], (s->n - i) * sizeof *s->r);
	s->r[i] = (struct retired){ lo, hi };
	s->n++;
	return 0;
}

/* Forgets the fork advice on [lo, hi): unmapped or freed. */
static void
advice_forget(uintptr_t lo, uintptr_t hi)
{
	for (int k = 0; k < ADV_SETS; k++)
		if (rset_del(&fadv[k], lo, hi) < 0)
			/* Full: forgetting all is safer than a stale range. */
			fadv[k].n = 0;
}

/* Records fork advice on [lo, hi); returns 0 or -ENOMEM. */
static int
advice_take(int adv, uintptr_t lo, uintptr_t hi)
{
	switch (adv) {
	case MADV_DONTFORK:
		return rset_add(&fadv[ADV_DONTFORK], lo, hi);
	case MADV_DOFORK:
		return rset_del(&fadv[ADV_DONTFORK], lo, hi);
	case MADV_WIPEONFORK:
		return rset_add(&fadv[ADV_WIPEONFORK], lo, hi);
	case MADV_KEEPONFORK:
		return rset_del(&fadv[ADV_WIPEONFORK], lo, hi);
	default:
		return 0;
	}
}

/*
 * In the child of a fork: WIPEONFORK ranges read back as zeros, DONTFORK
 * ranges are gone (inaccessible). The kernel's child inherits
 * WIPEONFORK, and has no DONTFORK mapping left to advise.
 */
static void
advice_fork_child(void)
{
	struct rset *w = &fadv[ADV_WIPEONFORK], *d = &fadv[ADV_DONTFORK];

	for (size_t i = 0; i < w->n; i++)
		if (libfam_owns((void *)w->r[i].lo)) {
			shim_depth++;
			libfam_discard((void *)w->r[i].lo,
			    w->r[i].hi - w->r[i].lo);
			shim_depth--;
		}
	for (size_t i = 0; i < d->n; i++)
		if (libfam_owns((void *)d->r[i].lo)) {
			shim_depth++;
			libfam_discard((void *)d->r[i].lo,
			    d->r[i].hi - d->r[i].lo);
			shim_depth--;
			sys_mprotect(d->r[i].lo, d->r[i].hi - d->r[i].lo,
			    PROT_NONE);
		}
	d->n = 0;
}

/* Marks pages [lo, hi) of block b unmapped (gone) or mapped again. */
static void
block_mark(struct mblock *b, uintptr_t lo, uintptr_t hi, bool gone)
{
	for (uintptr_t a = lo; a < hi; a += PAGE) {
		size_t p = (a - b->addr) / PAGE;
		uint64_t bit = 1ull << (p % 64);
		bool was = (b->gone[p / 64] & bit) != 0;

		if (was == gone)
			continue;
		b->gone[p / 64] ^= bit;
		if (gone)
			b->live--;
		else
			b->live++;
	}
}

/* ---- FAM memory ------------------------------------------------------ */

/*
 * Makes [lo, hi) of FAM read back as zeros with protection prot (the range
 * is made writable while it is zeroed).
 */
static void
fam_reset(uintptr_t lo, uintptr_t hi, int prot)
{
	sys_mprotect(lo, hi - lo, PROT_READ | PROT_WRITE);
	shim_depth++;
	libfam_discard((void *)lo, hi - lo);
	shim_depth--;
	if (prot != (PROT_READ | PROT_WRITE))
		sys_mprotect(lo, hi - lo, prot);
}

/*
 * Unmaps [lo, hi) of FAM: the blocks' parts are discarded and made
 * inaccessible, a block whose every page is gone is released. Parts in no
 * mapped block (a malloc'd block, free arena space) are left alone.
 */
static void
fam_unmap(uintptr_t lo, uintptr_t hi)
{
	size_t i = block_after(lo);

	while (i < nblocks && blocks[i].addr < hi) {
		struct mblock *b = &blocks[i];
		uintptr_t s = lo > b->addr ? lo : b->addr;
		uintptr_t e = hi < b->addr + b->len ? hi : b->addr + b->len;

		fam_reset(s, e, PROT_NONE);
		block_mark(b, s, e, true);
		advice_forget(s, e);
		if (b->live > 0) {
			i++;
			continue;
		}
		shim_depth++;
		libfam_free((void *)b->addr);
		shim_depth--;
		block_del(i);
	}
}

/* Takes [lo, hi) out of the FAM tables: the kernel's from now on. */
static int
fam_retire(uintptr_t lo, uintptr_t hi)
{
	size_t i = block_after(lo);

	if (nretired == MAX_RETIRED)
		return -ENOMEM;
	/* Retire whole blocks, so that no block is half the kernel's. */
	while (i < nblocks && blocks[i].addr < hi) {
		if (blocks[i].addr < lo)
			lo = blocks[i].addr;
		if (blocks[i].addr + blocks[i].len > hi)
			hi = blocks[i].addr + blocks[i].len;
		block_del(i);
	}
	retired[nretired++] = (struct retired){ lo, hi };
	advice_forget(lo, hi);
	return 0;
}

/*
 * Tells whether [addr, addr + len) is FAM that this file must handle:
 * it touches an arena and no retired range.
 */
static bool
is_fam(uintptr_t addr, size_t len)
{
	if (len == 0)
		return false;
	if (!libfam_owns((void *)addr) &&
	    !libfam_owns((void *)(addr + len - 1)))
		return false;
	return !retired_has(addr, len);
}

/* ---- mmap ------------------------------------------------------------ */

/* Tells whether a new mapping with these arguments should be FAM. */
static bool
wants_fam(size_t len, int flags, int fd)
{
	int bad = MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_HUGETLB | MAP_GROWSDOWN |
	    MAP_STACK;

	return map_on && shim_fam_on && len >= shim_threshold &&
	    (flags & MAP_TYPE) == MAP_PRIVATE && (flags & MAP_ANONYMOUS) &&
	    !(flags & bad) && fd == -1;
}

/*
 * A new FAM mapping of len bytes with protection prot (MAP_NORESERVE in
 * flags: a sparse region, capacity taken as written); MAP_FAILED (errno
 * set) under FAM_STRICT, NULL when the kernel should map it instead.
 */
static void *
map_fam(size_t len, int prot, int flags)
{
	void *p = NULL;
	int rc;

	len = (len + PAGE - 1) & ~(PAGE - 1);
	if (!shim_fam(len, 0, (flags & MAP_NORESERVE) ? FAM_S_ALLOC_SPARSE : 0,
	    &p))
		return NULL;
	if (p == NULL)
		return MAP_FAILED;
	if (prot != (PROT_READ | PROT_WRITE) &&
	    sys_mprotect((uintptr_t)p, len, prot) < 0) {
		shim_depth++;
		libfam_free(p);
		shim_depth--;
		return NULL; /* e.g. PROT_EXEC refused: the kernel's then */
	}
	pthread_mutex_lock(&map_lock);
	rc = block_add((uintptr_t)p, len);
	pthread_mutex_unlock(&map_lock);
	if (rc < 0) {
		sys_mprotect((uintptr_t)p, len, PROT_READ | PROT_WRITE);
		shim_depth++;
		libfam_free(p);
		shim_depth--;
		return NULL;
	}
	return p;
}

/*
 * MAP_FIXED (or MAP_FIXED_NOREPLACE) over FAM. A private anonymous
 * mapping over one mapped block is done in place; anything else retires
 * the range and goes to the kernel. Returns the mapping or MAP_FAILED.
 */
static void *
map_fixed(uintptr_t addr, size_t len, int prot, int flags, int fd, off_t off)
{
	uintptr_t end = addr + ((len + PAGE - 1) & ~(PAGE - 1));
	size_t i;
	void *p;

	pthread_mutex_lock(&map_lock);
	i = block_after(addr);
	if ((flags & MAP_TYPE) == MAP_PRIVATE && (flags & MAP_ANONYMOUS) &&
	    fd == -1 && i < nblocks && blocks[i].addr <= addr &&
	    end <= blocks[i].addr + blocks[i].len) {
		struct mblock *b = &blocks[i];

		if ((flags & MAP_FIXED_NOREPLACE) && !(flags & MAP_FIXED)) {
			for (uintptr_t a = addr; a < end; a += PAGE) {
				size_t pg = (a - b->addr) / PAGE;

				if (!(b->gone[pg / 64] & (1ull << (pg % 64)))) {
					pthread_mutex_unlock(&map_lock);
					errno = EEXIST;
					return MAP_FAILED;
				}
			}
		}
		fam_reset(addr, end, prot);
		block_mark(b, addr, end, false);
		pthread_mutex_unlock(&map_lock);
		return (void *)addr;
	}
	fam_unmap(addr, end);
	if (fam_retire(addr, end) < 0) {
		pthread_mutex_unlock(&map_lock);
		errno = ENOMEM;
		return MAP_FAILED;
	}
	p = sys_mmap((void *)addr, len, prot, (flags & ~MAP_FIXED_NOREPLACE) |
	    MAP_FIXED, fd, off);
	pthread_mutex_unlock(&map_lock);
	return p;
}

/* mmap(2). */
SHIM_EXPORT void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	void *p;

	if (!map_ready())
		return sys_mmap(addr, len, prot, flags, fd, off);
	if ((flags & (MAP_FIXED | MAP_FIXED_NOREPLACE)) &&
	    is_fam((uintptr_t)addr, len) && ((uintptr_t)addr & (PAGE - 1)) == 0)
		return map_fixed((uintptr_t)addr, len, prot, flags, fd, off);
	if (wants_fam(len, flags, fd)) {
		p = map_fam(len, prot, flags);
		if (p != NULL)
			return p;
	}
	return sys_mmap(addr, len, prot, flags, fd, off);
}

/* mmap64: the same on 64-bit. */
SHIM_EXPORT void *
mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap(addr, len, prot, flags, fd, off);
}

/* ---- munmap, mremap ------------------------------------------------- */

/* munmap(2). */
SHIM_EXPORT int
munmap(void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;

	if (!map_ready() || !is_fam(a, len))
		return (int)syscall(SYS_munmap, addr, len);
	if ((a & (PAGE - 1)) != 0) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&map_lock);
	fam_unmap(a, a + ((len + PAGE - 1) & ~(PAGE - 1)));
	pthread_mutex_unlock(&map_lock);
	return 0;
}

/*
 * The fork advice on [lo, hi) given again at to, where mremap moved it
 * (the kernel's flags move with the mapping).
 */
static void
advice_move(uintptr_t lo, uintptr_t hi, uintptr_t to)
{
	static const int adv[ADV_SETS] = {
		[ADV_DONTFORK] = MADV_DONTFORK,
		[ADV_WIPEONFORK] = MADV_WIPEONFORK,
	};
	struct retired r[8];
	int kind[8];
	size_t n = 0;

	pthread_mutex_lock(&map_lock);
	for (int k = 0; k < ADV_SETS; k++)
		for (size_t i = 0; i < fadv[k].n && n < 8; i++) {
			uintptr_t s = fadv[k].r[i].lo, e = fadv[k].r[i].hi;

			if (e <= lo || s >= hi)
				continue;
			r[n] = (struct retired){ s > lo ? s : lo,
			    e < hi ? e : hi };
			kind[n++] = adv[k];
		}
	pthread_mutex_unlock(&map_lock);
	for (size_t i = 0; i < n; i++)
		madvise((void *)(to + r[i].lo - lo), r[i].hi - r[i].lo, kind[i]);
}

/*
 * mremap of FAM: shrinking stays in place (the tail is unmapped); growing
 * or moving copies into a new mapping (FAM when large enough) and unmaps
 * the old one, or discards it under MREMAP_DONTUNMAP.
 */
static void *
remap_fam(uintptr_t old, size_t osize, size_t nsize, int flags, void *to)
{
	uintptr_t oend = old + ((osize + PAGE - 1) & ~(PAGE - 1));
	uintptr_t nend = old + ((nsize + PAGE - 1) & ~(PAGE - 1));
	int mflags = MAP_PRIVATE | MAP_ANONYMOUS;
	void *p;

	if ((old & (PAGE - 1)) != 0 || osize == 0 || nsize == 0) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	if (nend <= oend && !(flags & MREMAP_FIXED)) {
		munmap((void *)nend, oend - nend);
		return (void *)old;
	}
	if (!(flags & MREMAP_MAYMOVE)) {
		errno = ENOMEM;
		return MAP_FAILED;
	}
	if (flags & MREMAP_FIXED)
		mflags |= MAP_FIXED;
	p = mmap((flags & MREMAP_FIXED) ? to : NULL, nsize,
	    PROT_READ | PROT_WRITE, mflags, -1, 0);
	if (p == MAP_FAILED)
		return MAP_FAILED;
	memcpy(p, (void *)old, osize < nsize ? osize : nsize);
	advice_move(old, oend < old + nsize ? oend : nend, (uintptr_t)p);
	if (flags & MREMAP_DONTUNMAP) {
		pthread_mutex_lock(&map_lock);
		fam_reset(old, oend, PROT_READ | PROT_WRITE);
		pthread_mutex_unlock(&map_lock);
	} else {
		munmap((void *)old, oend - old);
	}
	return p;
}

/* mremap(2). */
SHIM_EXPORT void *
mremap(void *old, size_t osize, size_t nsize, int flags, ...)
{
	void *to = NULL;
	va_list ap;

	if (flags & MREMAP_FIXED) {
		va_start(ap, flags);
		to = va_arg(ap, void *);
		va_end(ap);
	}
	if (!map_ready() || !is_fam((uintptr_t)old, osize ? osize : 1))
		return (void *)syscall(SYS_mremap, old, osize, nsize, flags,
		    to);
	return remap_fam((uintptr_t)old, osize, nsize, flags, to);
}

/* ---- madvise ---------------------------------------------------------- */

/*
 * What advice on FAM does: 1 discard, 0 nothing (a hint, or about fork),
 * -1 the kernel's.
 */
static int
advice_kind(int advice)
{
	switch (advice) {
	case MADV_DONTNEED:
	case MADV_DONTNEED_LOCKED:
	case MADV_FREE:
	case MADV_REMOVE:
		return 1;
	case MADV_NORMAL:
	case MADV_RANDOM:
	case MADV_SEQUENTIAL:
	case MADV_WILLNEED:
	case MADV_HUGEPAGE:
	case MADV_NOHUGEPAGE:
	case MADV_COLLAPSE:
	case MADV_COLD:
	case MADV_PAGEOUT:
	case MADV_MERGEABLE:
	case MADV_UNMERGEABLE:
	case MADV_DONTFORK:
	case MADV_DOFORK:
	case MADV_WIPEONFORK:
	case MADV_KEEPONFORK:
		return 0;
	default:
		return -1;
	}
}

/* madvise(2). */
SHIM_EXPORT int
madvise(void *addr, size_t len, int advice)
{
	uintptr_t a = (uintptr_t)addr;
	int kind;

	if (!map_ready() || !is_fam(a, len) ||
	    (kind = advice_kind(advice)) < 0)
		return (int)syscall(SYS_madvise, addr, len, advice);
	if ((a & (PAGE - 1)) != 0) {
		errno = EINVAL;
		return -1;
	}
	len = (len + PAGE - 1) & ~(PAGE - 1);
	if (kind == 1) {
		shim_depth++;
		libfam_discard(addr, len);
		shim_depth--;
		return 0;
	}
	if (advice == MADV_RANDOM || advice == MADV_NORMAL ||
	    advice == MADV_SEQUENTIAL) {
		shim_depth++;
		libfam_hint(addr, len, advice == MADV_RANDOM ?
		    FAM_ADVISE_RANDOM : FAM_ADVISE_NORMAL);
		shim_depth--;
	}
	pthread_mutex_lock(&map_lock);
	kind = advice_take(advice, a, a + len);
	pthread_mutex_unlock(&map_lock);
	if (kind < 0) {
		errno = -kind;
		return -1;
	}
	return 0;
}

/* free() of FAM at [addr, addr + len): its fork advice goes with it. */
void
shim_map_forget(void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;

	if (blocks == NULL || len == 0)
		return;
	pthread_mutex_lock(&map_lock);
	advice_forget(a, a + ((len + PAGE - 1) & ~(PAGE - 1)));
	pthread_mutex_unlock(&map_lock);
}

/* posix_madvise(3): the same advice, the error returned. */
SHIM_EXPORT int
posix_madvise(void *addr, size_t len, int advice)
{
	/* POSIX_MADV_DONTNEED is a hint that never discards. */
	if (advice == POSIX_MADV_DONTNEED)
		return 0;
	return madvise(addr, len, advice) == 0 ? 0 : errno;
}
