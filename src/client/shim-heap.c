/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shim-heap.c - FAM_HEAP=all: libfamshim's requests below FAM_THRESHOLD
 * go to jemalloc (Debian's libjemalloc2, called through its mallocx API)
 * in an arena of its own whose extent hooks take memory from libfam: the
 * whole heap lives in fabric-attached memory, the host's buffer caching it.
 *
 * Owns: the heap's arena (one per process: a forked child makes its own);
 * the span table, the address ranges libfam gave the hooks (filled under
 * span_lock, published by a release store of nspans, read without a lock);
 * the fork generation.
 * Extents: the alloc hook asks libfam for a region per call (jemalloc grows
 * its retained memory geometrically, so calls are few), zero-filled; the
 * memory is never given back (dalloc, decommit and purges opt out), split
 * and merge always succeed. The arena's metadata stays in local memory
 * (it is created with the default hooks, then given these), so jemalloc's
 * fork handlers never touch fabric-attached memory.
 * Fork: the child cannot use the parent's arena (its memory is not
 * inherited), so each generation makes an arena on first use, and each
 * thread flushes its jemalloc cache when it sees a new generation. The
 * parent's blocks stay in the span table: freeing one in the child does
 * nothing.
 * Locks: span_lock (leaf; taken inside jemalloc's locks, in the alloc
 * hook), arena_lock (around arenas.create; never inside jemalloc).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <strings.h>
#include <time.h>

#include <jemalloc/jemalloc.h>

#include "wire/session.h"
#include "client/libfam-internal.h"
#include "client/shim-heap.h"

#define HEAP_MAX_SPANS 4096
#define HEAP_BACKOFF_NS 1000000000ull /* no heap after a failure for 1 s */

struct heap_span {
	_Atomic uintptr_t base; /* first byte */
	_Atomic uintptr_t end;  /* byte after the last; grows when extended */
	unsigned gen;           /* fork generation that got it */
};

_Atomic bool shim_heap_on;

static struct heap_span spans[HEAP_MAX_SPANS];
static _Atomic size_t nspans;
static _Atomic uintptr_t heap_lo = UINTPTR_MAX, heap_hi;
static pthread_mutex_t span_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;

/* Fork generation: 1 in the first process, one more in each child. */
static _Atomic unsigned heap_gen = 1;
/* The heap's arena (mallocx flags) and the generation it was made for. */
static _Atomic int heap_flags;
static _Atomic unsigned heap_arena_gen;
/* No heap before this time (CLOCK_MONOTONIC ns), 0: no failure. */
static _Atomic uint64_t heap_retry_ns;

/* The generation whose arena this thread's jemalloc cache serves. */
static __thread unsigned heap_tgen __attribute__((tls_model("initial-exec")));
/* What the alloc hook met in this thread, for the caller's report. */
static __thread int hook_err __attribute__((tls_model("initial-exec")));
static __thread bool hook_quiet __attribute__((tls_model("initial-exec")));

/* ---- the span table ------------------------------------------------- */

/* The span holding p, or NULL; lock-free. */
static struct heap_span *
span_of(uintptr_t p)
{
	size_t n = atomic_load_explicit(&nspans, memory_order_acquire), i;

	if (n == 0 || p < atomic_load_explicit(&heap_lo, memory_order_relaxed) ||
	    p >= atomic_load_explicit(&heap_hi, memory_order_relaxed))
		return NULL;
	for (i = n; i-- > 0;)
		if (p - atomic_load_explicit(&spans[i].base,
		    memory_order_relaxed) < atomic_load_explicit(&spans[i].end,
		    memory_order_acquire) - atomic_load_explicit(&spans[i].base,
		    memory_order_relaxed))
			return &spans[i];
	return NULL;
}

/* Widens [heap_lo, heap_hi) to hold [base, end). */
static void
span_bounds(uintptr_t base, uintptr_t end)
{
	uintptr_t v = atomic_load(&heap_lo);

	while (base < v && !atomic_compare_exchange_weak(&heap_lo, &v, base))
		;
	v = atomic_load(&heap_hi);
	while (end > v && !atomic_compare_exchange_weak(&heap_hi, &v, end))
		;
}

/* Enters [base, base + len) for generation gen, extending the last span. */
static int
span_add(uintptr_t base, size_t len, unsigned gen)
{
	size_t n;
	int rc = 0;

	pthread_mutex_lock(&span_lock);
	n = atomic_load_explicit(&nspans, memory_order_relaxed);
	span_bounds(base, base + len);
	if (n > 0 && spans[n - 1].gen == gen &&
	    atomic_load(&spans[n - 1].end) == base) {
		atomic_store_explicit(&spans[n - 1].end, base + len,
		    memory_order_release);
	} else if (n < HEAP_MAX_SPANS) {
		atomic_store_explicit(&spans[n].base, base,
		    memory_order_relaxed);
		atomic_store_explicit(&spans[n].end, base + len,
		    memory_order_relaxed);
		spans[n].gen = gen;
		atomic_store_explicit(&nspans, n + 1, memory_order_release);
	} else {
		rc = -ENOMEM;
	}
	pthread_mutex_unlock(&span_lock);
	return rc;
}

/* ---- extent hooks --------------------------------------------------- */

/* jemalloc's alloc hook: a new libfam region, zero-filled, committed. */
static void *
hook_alloc(extent_hooks_t *hooks, void *new_addr, size_t size,
    size_t alignment, bool *zero, bool *commit, unsigned arena_ind)
{
	void *p;
	bool quiet;
	int rc;

	if (new_addr != NULL)
		return NULL; /* no growing in place */
	/* Called inside mallocx() or rallocx(): shim_depth is raised. */
	rc = libfam_alloc(size, alignment, 0, &p, NULL, &quiet);
	if (rc == 0) {
		rc = span_add((uintptr_t)p, size, atomic_load(&heap_gen));
		if (rc < 0) {
			libfam_free(p);
			quiet = false;
		}
	}
	if (rc < 0) {
		hook_err = rc;
		hook_quiet = quiet;
		return NULL;
	}
	*zero = true;
	*commit = true;
	return p;
}

/* jemalloc's commit hook: the memory is always committed. */
static bool
hook_commit(extent_hooks_t *hooks, void *addr, size_t size, size_t offset,
    size_t length, unsigned arena_ind)
{
	return false;
}

/* jemalloc's split hook: any extent may be split. */
static bool
hook_split(extent_hooks_t *hooks, void *addr, size_t size, size_t size_a,
    size_t size_b, bool committed, unsigned arena_ind)
{
	return false;
}

/* jemalloc's merge hook: adjacent extents may be merged. */
static bool
hook_merge(extent_hooks_t *hooks, void *addr_a, size_t size_a, void *addr_b,
    size_t size_b, bool committed, unsigned arena_ind)
{
	return false;
}

/* NULL hooks opt out: memory is retained, never decommitted or purged. */
static extent_hooks_t heap_hooks = {
	.alloc = hook_alloc,
	.commit = hook_commit,
	.split = hook_split,
	.merge = hook_merge,
};

/* ---- the arena ------------------------------------------------------ */

/* Sets arena ind's control name (arena.0.NAME) to the value at v. */
static int
arena_ctl_set(unsigned ind, const char *name, void *v, size_t len)
{
	size_t mib[3], miblen = 3;
	int rc;

	rc = mallctlnametomib(name, mib, &miblen);
	if (rc != 0)
		return -rc;
	mib[1] = ind;
	return -mallctlbymib(mib, miblen, NULL, NULL, v, len);
}

/* Makes the arena of generation gen, unless one exists. */
static int
heap_arena_make(unsigned gen)
{
	extent_hooks_t *hooks = &heap_hooks;
	ssize_t never = -1;
	unsigned ind;
	size_t len = sizeof ind;
	int rc = 0;

	pthread_mutex_lock(&arena_lock);
	if (atomic_load(&heap_arena_gen) == gen)
		goto out;
	/* Default hooks first: the arena's metadata stays local. */
	rc = -mallctl("arenas.create", &ind, &len, NULL, 0);
	if (rc == 0)
		rc = arena_ctl_set(ind, "arena.0.dirty_decay_ms", &never,
		    sizeof never);
	if (rc == 0)
		rc = arena_ctl_set(ind, "arena.0.muzzy_decay_ms", &never,
		    sizeof never);
	if (rc == 0)
		rc = arena_ctl_set(ind, "arena.0.extent_hooks", &hooks,
		    sizeof hooks);
	if (rc == 0) {
		atomic_store(&heap_flags, MALLOCX_ARENA(ind));
		atomic_store(&heap_arena_gen, gen);
	}
out:
	pthread_mutex_unlock(&arena_lock);
	return rc;
}

/* In the child after fork(): a new generation, and unlocked locks. */
static void
heap_atfork_child(void)
{
	pthread_mutex_init(&span_lock, NULL);
	pthread_mutex_init(&arena_lock, NULL);
	atomic_fetch_add(&heap_gen, 1);
	atomic_store(&heap_retry_ns, 0);
}

/* Creates the heap's jemalloc arena; once, from the shim's constructor. */
int
shim_heap_init(void)
{
	int rc;

	shim_depth++;
	rc = -pthread_atfork(NULL, NULL, heap_atfork_child);
	if (rc == 0)
		rc = heap_arena_make(atomic_load(&heap_gen));
	shim_depth--;
	if (rc == 0)
		atomic_store(&shim_heap_on, true);
	return rc;
}

/* Makes sure this thread allocates from this generation's arena. */
static int
heap_thread_ready(void)
{
	unsigned gen = atomic_load_explicit(&heap_gen, memory_order_relaxed);
	int rc;

	if (__builtin_expect(heap_tgen == gen, 1))
		return 0;
	rc = heap_arena_make(gen);
	if (rc < 0)
		return rc;
	/* Blocks cached for the parent's arena must not be handed out. */
	mallctl("thread.tcache.flush", NULL, NULL, NULL, 0);
	heap_tgen = gen;
	return 0;
}

/* ---- the entry points ----------------------------------------------- */

/* The monotonic clock in ns. */
static uint64_t
heap_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Tells whether the heap should be asked now (not backing off a failure). */
bool
shim_heap_usable_now(void)
{
	uint64_t t = atomic_load_explicit(&heap_retry_ns, memory_order_relaxed);

	if (__builtin_expect(t == 0, 1))
		return true;
	if (heap_now() < t)
		return false;
	atomic_store(&heap_retry_ns, 0);
	return true;
}

/* Allocates size bytes aligned to align from the heap, zeroed when zero. */
int
shim_heap_alloc(size_t size, size_t align, bool zero, void **out, bool *quiet)
{
	int flags, rc;
	void *p;

	*quiet = false;
	if (align != 0 && (align & (align - 1)) != 0)
		return -EINVAL;
	shim_depth++;
	rc = heap_thread_ready();
	if (rc < 0) {
		shim_depth--;
		return rc;
	}
	flags = atomic_load_explicit(&heap_flags, memory_order_relaxed);
	if (align > 16)
		flags |= MALLOCX_ALIGN(align);
	if (zero)
		flags |= MALLOCX_ZERO;
	hook_err = 0;
	/* Whatever jemalloc allocates through malloc() is libc's. */
	p = mallocx(size != 0 ? size : 1, flags);
	shim_depth--;
	if (p == NULL) {
		rc = hook_err != 0 ? hook_err : -ENOMEM;
		*quiet = hook_err != 0 && hook_quiet;
		atomic_store(&heap_retry_ns, heap_now() + HEAP_BACKOFF_NS);
		return rc;
	}
	*out = p;
	return 0;
}

/* Resizes the heap block p in the heap; -ENOMEM leaves it as it was. */
int
shim_heap_resize(void *p, size_t size, void **out)
{
	void *q = NULL;

	shim_depth++;
	if (heap_thread_ready() == 0)
		q = rallocx(p, size != 0 ? size : 1,
		    atomic_load_explicit(&heap_flags, memory_order_relaxed));
	shim_depth--;
	if (q == NULL) {
		atomic_store(&heap_retry_ns, heap_now() + HEAP_BACKOFF_NS);
		return -ENOMEM;
	}
	*out = q;
	return 0;
}

/* Tells whether p lies in the heap's memory (this process's or a parent's). */
bool
shim_heap_owns(const void *p)
{
	return span_of((uintptr_t)p) != NULL;
}

/* Tells whether the heap block p was inherited across fork(). */
bool
shim_heap_inherited(const void *p)
{
	struct heap_span *s = span_of((uintptr_t)p);

	return s != NULL && s->gen != atomic_load_explicit(&heap_gen,
	    memory_order_relaxed);
}

/* Tells whether the inherited heap block p can still be read. */
bool
shim_heap_readable(const void *p)
{
	struct libfam_arena *a = arena_of((uintptr_t)p);

	return a != NULL && atomic_load(&a->state) != LIBFAM_A_INHERITED;
}

/* Releases the heap block p; inherited blocks are left alone. */
void
shim_heap_free(void *p)
{
	if (shim_heap_inherited(p))
		return;
	shim_depth++;
	dallocx(p, 0);
	shim_depth--;
}

/* The bytes usable at the heap block p. */
size_t
shim_heap_usable(const void *p)
{
	size_t n;

	shim_depth++;
	n = sallocx(p, 0);
	shim_depth--;
	return n;
}
