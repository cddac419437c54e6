/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shim.c - libfamshim: preloaded in front of libc's malloc, it gives the
 * large requests (FAM_THRESHOLD bytes and more) fabric-attached memory from
 * the host famd through libfam (compiled in), and passes everything else to
 * libc; with FAM_HEAP=all, the small ones go to the FAM heap (jemalloc,
 * shim-heap.c). See libfamshim(7).
 *
 * It must survive real programs:
 * - dlsym() may call calloc() before the real functions are known: those
 *   requests come from a static bootstrap pool, which is never freed;
 * - anything libfam itself allocates (pthread_create's stack bookkeeping,
 *   pthread_atfork's list) goes straight to libc: a thread-local depth
 *   counter marks the inside of a FAM call;
 * - ownership is decided by address: a pointer in the FAM heap's spans is
 *   jemalloc's, one inside another arena is a FAM block, anything else is
 *   libc's (or the bootstrap pool's);
 * - free() keeps errno; nothing on these paths uses stdio.
 *
 * Fork (doc/fork.md): arenas are not inherited (MADV_DONTFORK); libfam's
 * fork handlers have the host famd copy them and the child map the copy at
 * the same addresses, with a session of its own. With FAM_FORK=0, the
 * parent's ranges are reserved PROT_NONE in the child instead: a touch
 * raises SIGSEGV and free() of such a pointer is ignored.
 */
#include "config.h"

#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire/session.h"
#include "client/libfam-internal.h"
#include "client/shim.h"
#include "client/shim-heap.h"

#define SHIM_DEFAULT_THRESHOLD ((size_t)1 << 20)
#define SHIM_BOOT_SIZE         (64 * 1024)
#define SHIM_BOOT_ALIGN        4096

#define SHIM_EXPORT __attribute__((visibility("default")))
#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

enum shim_state {
	SHIM_UNINIT,   /* nothing done yet */
	SHIM_BUSY,     /* looking up libc's functions: serve from the pool */
	SHIM_READY,    /* libc's functions known, environment read */
};

/* libc's allocator, found with dlsym(RTLD_NEXT). */
static struct {
	void *(*malloc)(size_t);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void (*free)(void *);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*memalign)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	size_t (*malloc_usable_size)(void *);
} real;

static _Atomic int shim_state;
bool shim_fam_on;      /* FAM_DISABLE not set */
bool shim_map_on;      /* mmap() may give FAM (FAM_MMAP) */
static int shim_own;   /* the program's own malloc: 0 none, 1 behind
                        * the shim, 2 ahead of it (shim_own_malloc()) */
bool shim_strict;      /* FAM_STRICT set */
size_t shim_threshold = SHIM_DEFAULT_THRESHOLD;
static bool shim_heap_want;   /* FAM_HEAP=all */
static _Atomic bool shim_failure_reported;
static _Atomic bool shim_bad_free_reported;

/* Nesting of FAM calls in this thread: inside one, everything is libc's. */
__thread unsigned shim_depth __attribute__((tls_model("initial-exec")));

/*
 * Calls the C library's allocator with the nesting of FAM calls raised:
 * what it maps for itself (jemalloc's extents, in a program linked with
 * it, call mmap) stays its own, and a mapping call made while it holds
 * its locks does not come back into it through libfam.
 */
#define LIBC(call) ({ shim_depth++; __auto_type libc_r_ = (call); \
	shim_depth--; libc_r_; })
#define LIBC_VOID(call) do { shim_depth++; call; shim_depth--; } while (0)

static _Alignas(SHIM_BOOT_ALIGN) unsigned char boot_pool[SHIM_BOOT_SIZE];
static _Atomic size_t boot_used;

/* ---- bootstrap pool ------------------------------------------------- */

/* Takes size bytes aligned to align from the bootstrap pool (zero-filled). */
static void *
boot_alloc(size_t size, size_t align)
{
	size_t old, start;

	if (align < 16)
		align = 16;
	if (align > SHIM_BOOT_ALIGN) {
		errno = ENOMEM;
		return NULL;
	}
	old = atomic_load(&boot_used);
	do {
		start = (old + sizeof(size_t) + align - 1) & ~(align - 1);
		if (size > SHIM_BOOT_SIZE || start > SHIM_BOOT_SIZE - size) {
			errno = ENOMEM;
			return NULL;
		}
	} while (!atomic_compare_exchange_weak(&boot_used, &old, start + size));
	memcpy(boot_pool + start - sizeof(size_t), &size, sizeof size);
	return boot_pool + start;
}

/* Tells whether p came from the bootstrap pool. */
static inline bool
boot_owns(const void *p)
{
	return (const unsigned char *)p >= boot_pool &&
	    (const unsigned char *)p < boot_pool + SHIM_BOOT_SIZE;
}

/* The size asked for a block of the bootstrap pool. */
static size_t
boot_size(const void *p)
{
	size_t size;

	memcpy(&size, (const unsigned char *)p - sizeof(size_t), sizeof size);
	return size;
}

/* ---- set-up --------------------------------------------------------- */

/* Tells whether the environment variable name is set to anything but 0. */
bool
shim_env_on(const char *name)
{
	const char *v = getenv(name);

	return v != NULL && *v != '\0' && strcmp(v, "0") != 0;
}

/* Parses a size: digits with an optional K, M or G (powers of 1024). */
static int
shim_parse_size(const char *s, size_t *out)
{
	uint64_t v = 0, mul = 1;

	if (*s < '0' || *s > '9')
		return -EINVAL;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	switch (*s) {
	case 'k':
	case 'K':
		mul = 1ull << 10;
		s++;
		break;
	case 'm':
	case 'M':
		mul = 1ull << 20;
		s++;
		break;
	case 'g':
	case 'G':
		mul = 1ull << 30;
		s++;
		break;
	}
	if (*s != '\0' || v == 0)
		return -EINVAL;
	if (v > SIZE_MAX / mul)
		return -ERANGE;
	*out = (size_t)(v * mul);
	return 0;
}

/* Looks up libc's name, dies if it is missing. */
static void *
shim_sym(const char *name)
{
	void *f = dlsym(RTLD_NEXT, name);

	if (f == NULL) {
		libfam_configure("libfamshim", NULL);
		libfam_say("no ", name, " after libfamshim in the program's "
		    "libraries", NULL);
		abort();
	}
	return f;
}

/*
 * The C library's and the dynamic loader's images: what they allocate for
 * themselves stays in libc's memory, whatever FAM_HEAP says. A forked
 * child's C library touches some of it (the NSS state) before any fork
 * handler runs, so before the child has mapped its copy of the FAM heap.
 */
static struct { uintptr_t lo, hi; } sys_image[2];

/* dl_iterate_phdr callback: notes libc's (holding *data) and ld.so's. */
static int
sys_image_note(struct dl_phdr_info *info, size_t len, void *data)
{
	uintptr_t lo = UINTPTR_MAX, hi = 0, at = (uintptr_t)data;
	const char *name = info->dlpi_name != NULL ? info->dlpi_name : "";
	unsigned i;

	(void)len;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD)
			continue;
		if (info->dlpi_addr + ph->p_vaddr < lo)
			lo = info->dlpi_addr + ph->p_vaddr;
		if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > hi)
			hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	if (lo >= hi)
		return 0;
	if (at >= lo && at < hi)
		sys_image[0].lo = lo, sys_image[0].hi = hi;
	else if (strstr(name, "/ld-linux") != NULL)
		sys_image[1].lo = lo, sys_image[1].hi = hi;
	return 0;
}

/* Tells whether caller (a return address) is in libc or ld.so. */
static inline bool
shim_from_sys(const void *caller)
{
	uintptr_t a = (uintptr_t)caller;

	return (a >= sys_image[0].lo && a < sys_image[0].hi) ||
	    (a >= sys_image[1].lo && a < sys_image[1].hi);
}

/*
 * Tells whether the program brings its own malloc: 2 for one ahead of the
 * shim's (linked into the executable, as rustc links jemalloc), 1 for one
 * behind it that is not libc's (a malloc library the program links), 0
 * for libc's. Such an allocator calls mmap() itself, perhaps holding its
 * own lock, and its fork handler may run before libfam's.
 */
static int
shim_own_malloc(void)
{
	static const char anchor;
	Dl_info self, first, next;
	void *m = dlsym(RTLD_DEFAULT, "malloc"), *n;

	memcpy(&n, &real.malloc, sizeof n);
	if (m == NULL || dladdr(&anchor, &self) == 0 || dladdr(m, &first) == 0)
		return 0;
	/*
	 * Only a definition counts: a non-PIE executable that takes
	 * malloc's address has a PLT entry of that name, which calls the
	 * shim's malloc.
	 */
	if (first.dli_fbase != self.dli_fbase && first.dli_saddr == m &&
	    first.dli_sname != NULL && strcmp(first.dli_sname, "malloc") == 0)
		return 2;
	return dladdr(n, &next) != 0 && next.dli_fname != NULL &&
	    strstr(next.dli_fname, "/libc.so") == NULL;
}

typedef int register_atfork_fn(void (*)(void), void (*)(void),
    void (*)(void), void *);
static register_atfork_fn *_Atomic next_register_atfork;

/* libc's __register_atfork, found once (shim_init, or a first handler). */
static register_atfork_fn *
shim_register_atfork_next(void)
{
	register_atfork_fn *reg = atomic_load(&next_register_atfork);

	if (reg == NULL) {
		shim_depth++;
		reg = (register_atfork_fn *)dlsym(RTLD_NEXT,
		    "__register_atfork");
		shim_depth--;
		atomic_store(&next_register_atfork, reg);
	}
	return reg;
}

/* Finds libc's functions and reads the environment, once. */
static void
shim_init(void)
{
	int expect = SHIM_UNINIT;
	const char *t;

	if (!atomic_compare_exchange_strong(&shim_state, &expect, SHIM_BUSY))
		return;
	real.malloc = shim_sym("malloc");
	real.calloc = shim_sym("calloc");
	real.realloc = shim_sym("realloc");
	real.free = shim_sym("free");
	real.posix_memalign = shim_sym("posix_memalign");
	real.aligned_alloc = shim_sym("aligned_alloc");
	real.memalign = shim_sym("memalign");
	real.valloc = shim_sym("valloc");
	real.pvalloc = shim_sym("pvalloc");
	real.malloc_usable_size = shim_sym("malloc_usable_size");
	/* not later, from libfam_init's first handler: see there */
	(void)shim_register_atfork_next();

	shim_fam_on = !shim_env_on("FAM_DISABLE");
	shim_strict = shim_env_on("FAM_STRICT");
	t = getenv("FAM_HEAP");
	shim_heap_want = shim_fam_on && t != NULL && strcmp(t, "all") == 0;
	if (shim_heap_want)
		libfam_configure("libfamshim", shim_strict ?
		    "allocations fail (FAM_STRICT=1)" :
		    "allocations use libc memory");
	else
		libfam_configure("libfamshim", shim_strict ?
		    "large allocations fail (FAM_STRICT=1)" :
		    "large allocations use libc memory");
	if (shim_fam_on && t != NULL && *t != '\0' && !shim_heap_want &&
	    strcmp(t, "large") != 0)
		libfam_say("FAM_HEAP=", t, " is neither all nor large; using "
		    "large", NULL);
	/*
	 * A malloc ahead of the shim never asks it for memory: its own
	 * mmap() calls are what is FAM of it (its fork handler runs after
	 * libfam's first one: see __register_atfork below).
	 */
	shim_own = shim_own_malloc();
	t = getenv("FAM_MMAP");
	shim_map_on = shim_fam_on && (t == NULL || *t == '\0' ||
	    strcmp(t, "0") != 0);
	t = getenv("FAM_THRESHOLD");
	if (shim_fam_on && t != NULL && *t != '\0' &&
	    shim_parse_size(t, &shim_threshold) < 0) {
		shim_threshold = SHIM_DEFAULT_THRESHOLD;
		libfam_say("FAM_THRESHOLD=", t, " is not a size (a number with "
		    "an optional K, M or G); using 1M", NULL);
	}
	atomic_store_explicit(&shim_state, SHIM_READY, memory_order_release);
}

/* In a forked child: its spare watchdog, as shim_ctor starts it. */
static void
shim_spare_child(void)
{
	shim_depth++;
	libfam_watchdog_spare_child();
	shim_depth--;
}

/*
 * Runs the set-up before main() when nothing needed it earlier, and makes
 * the heap's arena: jemalloc, a library the shim needs, is set up by now.
 * A program with its own malloc gets the session's watchdog thread now:
 * made later, from inside its allocator's mmap(), pthread_create() would
 * call that allocator back for the thread's TLS, and wait for its lock.
 */
__attribute__((constructor)) static void
shim_ctor(void)
{
	char ebuf[128];
	int rc;

	shim_init();
	/*
	 * The spare's pthread_create() may be the allocator's first call: what
	 * it maps setting itself up stays the kernel's (libfam's lock is held).
	 */
	if (atomic_load(&shim_state) == SHIM_READY && shim_map_on &&
	    shim_own != 0) {
		shim_depth++;
		libfam_watchdog_spare(shim_spare_child);
		shim_depth--;
	}
	if (!shim_heap_want || atomic_load(&shim_state) != SHIM_READY)
		return;
	dl_iterate_phdr(sys_image_note, (void *)real.malloc);
	rc = shim_heap_init();
	if (rc < 0)
		libfam_say("FAM_HEAP=all: jemalloc gave no arena: ",
		    libfam_fmt_errno(ebuf, sizeof ebuf, -rc),
		    "; small allocations use libc memory", NULL);
}

/* Tells whether libc's functions are known; sets them up on first use. */
static inline bool
shim_ready(void)
{
	int s = atomic_load_explicit(&shim_state, memory_order_acquire);

	if (likely(s == SHIM_READY))
		return true;
	if (s == SHIM_UNINIT)
		shim_init();
	return atomic_load_explicit(&shim_state, memory_order_acquire) ==
	    SHIM_READY;
}

/*
 * Tells whether libc's functions are known and the environment read (for
 * shim-map.c); sets nothing up: a mapping call made while the C library's
 * allocator starts (jemalloc's, in a program linked with it) must not
 * re-enter it through dlsym().
 */
bool
shim_is_ready(void)
{
	return atomic_load_explicit(&shim_state, memory_order_acquire) ==
	    SHIM_READY;
}

/* ---- the FAM side --------------------------------------------------- */

/* Tells whether a request of size bytes should be fabric-attached memory. */
static inline bool
shim_wants_fam(size_t size)
{
	return shim_fam_on && size >= shim_threshold && shim_depth == 0;
}

/* Reports, once, an allocation famd did not grant. */
void
shim_report_failure(size_t size, int err)
{
	char nbuf[21], ebuf[128];

	if (atomic_exchange(&shim_failure_reported, true))
		return;
	libfam_say("no fabric-attached memory for ", libfam_fmt_u64(nbuf, size),
	    " bytes: ", libfam_fmt_errno(ebuf, sizeof ebuf, err),
	    shim_strict ? "; such allocations fail (FAM_STRICT=1)" :
	    "; such allocations use libc memory", NULL);
}

/*
 * Tries to allocate size bytes (aligned to align, or 0) of FAM. Returns
 * true when the request is settled: *out is the memory, or NULL with errno
 * ENOMEM under FAM_STRICT. Returns false when libc should serve it.
 */
bool
shim_fam(size_t size, size_t align, unsigned flags, void **out)
{
	bool quiet;
	int rc, saved = errno;
	void *p;

	shim_depth++;
	rc = libfam_alloc(size, align, flags, &p, NULL, &quiet);
	shim_depth--;
	if (rc == 0) {
		errno = saved;
		*out = p;
		return true;
	}
	if (!quiet)
		shim_report_failure(size, -rc);
	if (shim_strict) {
		*out = NULL;
		errno = ENOMEM;
		return true;
	}
	errno = saved;
	return false;
}

/* Releases FAM memory at p; ignores what libfam cannot release. */
static void
shim_fam_free(void *p)
{
	int rc;

	if (shim_depth != 0)
		return; /* never happens: libfam does not free FAM memory */
	shim_map_forget(p, libfam_usable_size(p));
	shim_depth++;
	rc = libfam_free(p);
	shim_depth--;
	if (rc == -EINVAL && !atomic_exchange(&shim_bad_free_reported, true))
		libfam_say("free() of an address inside fabric-attached "
		    "memory that starts no block: ignored", NULL);
}

/* The bytes usable at p, FAM memory. */
static size_t
shim_fam_usable(const void *p)
{
	return libfam_usable_size(p);
}

/* Tells whether a request of size bytes should go to the FAM heap. */
static inline bool
shim_wants_heap(size_t size)
{
	return atomic_load_explicit(&shim_heap_on, memory_order_relaxed) &&
	    size < shim_threshold && shim_depth == 0;
}

/* As shim_wants_heap(), for a request made at caller (a return address). */
static inline bool
shim_wants_heap_for(size_t size, const void *caller)
{
	return shim_wants_heap(size) && !shim_from_sys(caller);
}

/*
 * Tries the FAM heap for size bytes (aligned to align, zeroed when zero).
 * Returns true when settled, as shim_fam() does; false when libc should
 * serve it. After a failure, the heap is not asked for a second.
 */
static bool
shim_heap(size_t size, size_t align, bool zero, void **out)
{
	bool quiet = true;
	int rc = -EAGAIN, saved = errno;
	void *p;

	if (shim_heap_usable_now())
		rc = shim_heap_alloc(size, align, zero, &p, &quiet);
	if (rc == 0) {
		errno = saved;
		*out = p;
		return true;
	}
	if (!quiet)
		shim_report_failure(size, -rc);
	if (shim_strict && rc != -EINVAL) {
		*out = NULL;
		errno = ENOMEM;
		return true;
	}
	errno = saved;
	return false;
}

/*
 * Serves a request from FAM: a block of its own when large, the heap when
 * small and FAM_HEAP=all. Returns true when settled (*out is the memory,
 * or NULL under FAM_STRICT); false when libc should serve it.
 */
static inline bool
shim_place_at(size_t size, size_t align, bool zero, void **out,
    const void *caller)
{
	if (shim_wants_fam(size))
		return shim_fam(size, align, 0, out);
	if (shim_wants_heap_for(size, caller))
		return shim_heap(size, align, zero, out);
	return false;
}
/* ... for a request made by the caller of the function it is used in */
#define shim_place(size, align, zero, out) \
	shim_place_at(size, align, zero, out, __builtin_return_address(0))

/* As shim_place(), when align is a power of two famd can meet. */
static inline bool
shim_place_aligned_at(size_t align, size_t size, void **out,
    const void *caller)
{
	if (align == 0 || (align & (align - 1)) != 0 ||
	    align > FAM_SESSION_ARENA_ALIGN)
		return false;
	return shim_place_at(size, align, false, out, caller);
}
#define shim_place_aligned(align, size, out) \
	shim_place_aligned_at(align, size, out, __builtin_return_address(0))

/* Moves the block old (osize bytes to keep) to a new one of size bytes. */
static void *
shim_move(void *old, size_t osize, size_t size, const void *caller)
{
	void *p = NULL;

	if (!shim_place_at(size, 0, false, &p, caller))
		p = LIBC(real.malloc(size));
	if (p == NULL)
		return NULL;
	memcpy(p, old, osize < size ? osize : size);
	if (shim_heap_owns(old))
		shim_heap_free(old);
	else
		shim_fam_free(old);
	return p;
}

/* realloc() of a block of the FAM heap. */
static void *
shim_realloc_heap(void *ptr, size_t size, const void *caller)
{
	bool inherited = shim_heap_inherited(ptr);
	void *p;

	if (inherited && !shim_heap_readable(ptr)) {
		errno = ENOMEM;
		return NULL;
	}
	if (size == 0) {
		shim_heap_free(ptr);
		return NULL;
	}
	if (!inherited && shim_wants_heap(size) && shim_heap_usable_now()) {
		if (shim_heap_resize(ptr, size, &p) == 0)
			return p;
		if (shim_strict) {
			errno = ENOMEM;
			return NULL;
		}
	}
	return shim_move(ptr, shim_heap_usable(ptr), size, caller);
}

/* ---- the malloc family ---------------------------------------------- */

/* malloc(3). */
SHIM_EXPORT void *
malloc(size_t size)
{
	void *p;

	if (unlikely(!shim_ready()))
		return boot_alloc(size, 16);
	if (shim_place(size, 0, false, &p))
		return p;
	return LIBC(real.malloc(size));
}

/* calloc(3): FAM regions are zero-filled already, and stay untouched. */
SHIM_EXPORT void *
calloc(size_t nmemb, size_t size)
{
	size_t total;
	void *p;

	if (__builtin_mul_overflow(nmemb, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	if (unlikely(!shim_ready()))
		return boot_alloc(total, 16);
	if (shim_place(total, 0, true, &p))
		return p;
	return LIBC(real.calloc(nmemb, size));
}

/* free(3): keeps errno. */
SHIM_EXPORT void
free(void *ptr)
{
	int saved;

	if (ptr == NULL || boot_owns(ptr))
		return;
	saved = errno;
	if (shim_heap_owns(ptr))
		shim_heap_free(ptr);
	else if (libfam_owns(ptr))
		shim_fam_free(ptr);
	else if (likely(shim_ready()))
		LIBC_VOID(real.free(ptr));
	errno = saved;
}

/* realloc(3): moves between libc, the FAM heap and FAM blocks. */
static void *
shim_realloc(void *ptr, size_t size, const void *caller)
{
	size_t osize;
	void *p;

	if (ptr == NULL) {
		if (unlikely(!shim_ready()))
			return malloc(size);
		if (shim_place_at(size, 0, false, &p, caller))
			return p;
		return LIBC(real.malloc(size));
	}
	if (unlikely(!shim_ready()) || boot_owns(ptr)) {
		osize = boot_owns(ptr) ? boot_size(ptr) : 0;
		p = malloc(size);
		if (p != NULL && osize > 0)
			memcpy(p, ptr, osize < size ? osize : size);
		return p;
	}
	if (shim_heap_owns(ptr))
		return shim_realloc_heap(ptr, size, caller);
	if (libfam_owns(ptr)) {
		osize = shim_fam_usable(ptr);
		if (osize == 0 || shim_depth != 0) {
			/* Inherited across fork, or not a block. */
			errno = ENOMEM;
			return NULL;
		}
		if (size == 0) {
			shim_fam_free(ptr);
			return NULL;
		}
		if (size <= osize && shim_wants_fam(size))
			return ptr; /* shrink in place */
		return shim_move(ptr, osize, size, caller);
	}
	if (shim_wants_fam(size) || shim_wants_heap_for(size, caller)) {
		if (!shim_place_at(size, 0, false, &p, caller))
			return LIBC(real.realloc(ptr, size));
		if (p == NULL)
			return NULL;
		osize = LIBC(real.malloc_usable_size(ptr));
		memcpy(p, ptr, osize < size ? osize : size);
		LIBC_VOID(real.free(ptr));
		return p;
	}
	return LIBC(real.realloc(ptr, size));
}

/* realloc(3). */
SHIM_EXPORT void *
realloc(void *ptr, size_t size)
{
	return shim_realloc(ptr, size, __builtin_return_address(0));
}

/* reallocarray(3). */
SHIM_EXPORT void *
reallocarray(void *ptr, size_t nmemb, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(nmemb, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return shim_realloc(ptr, total, __builtin_return_address(0));
}

/* posix_memalign(3). */
SHIM_EXPORT int
posix_memalign(void **memptr, size_t alignment, size_t size)
{
	int saved = errno;
	void *p;

	if (alignment == 0 || (alignment & (alignment - 1)) != 0 ||
	    alignment % sizeof(void *) != 0)
		return EINVAL;
	if (unlikely(!shim_ready())) {
		p = boot_alloc(size, alignment);
		errno = saved;
		if (p == NULL)
			return ENOMEM;
		*memptr = p;
		return 0;
	}
	if (shim_place_aligned(alignment, size, &p)) {
		errno = saved;
		if (p == NULL)
			return ENOMEM;
		*memptr = p;
		return 0;
	}
	return LIBC(real.posix_memalign(memptr, alignment, size));
}

/* aligned_alloc(3). */
SHIM_EXPORT void *
aligned_alloc(size_t alignment, size_t size)
{
	void *p;

	if (unlikely(!shim_ready()))
		return boot_alloc(size, alignment);
	if (shim_place_aligned(alignment, size, &p))
		return p;
	return LIBC(real.aligned_alloc(alignment, size));
}

/* memalign(3). */
SHIM_EXPORT void *
memalign(size_t alignment, size_t size)
{
	void *p;

	if (unlikely(!shim_ready()))
		return boot_alloc(size, alignment);
	if (shim_place_aligned(alignment, size, &p))
		return p;
	return LIBC(real.memalign(alignment, size));
}

/* valloc(3): page-aligned (FAM regions always are). */
SHIM_EXPORT void *
valloc(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *p;

	if (unlikely(!shim_ready()))
		return boot_alloc(size, page);
	if (shim_place(size, page, false, &p))
		return p;
	return LIBC(real.valloc(size));
}

/* pvalloc(3): page-aligned, size rounded up to whole pages. */
SHIM_EXPORT void *
pvalloc(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), rounded;
	void *p;

	if (size > SIZE_MAX - page) {
		errno = ENOMEM;
		return NULL;
	}
	rounded = (size + page - 1) & ~(page - 1);
	if (rounded == 0)
		rounded = page;
	if (unlikely(!shim_ready()))
		return boot_alloc(rounded, page);
	if (shim_place(rounded, page, false, &p))
		return p;
	return LIBC(real.pvalloc(size));
}

/* malloc_usable_size(3). */
SHIM_EXPORT size_t
malloc_usable_size(void *ptr)
{
	if (ptr == NULL)
		return 0;
	if (boot_owns(ptr))
		return boot_size(ptr);
	if (shim_heap_owns(ptr))
		return shim_heap_usable(ptr);
	if (libfam_owns(ptr))
		return shim_fam_usable(ptr);
	if (unlikely(!shim_ready()))
		return 0;
	return LIBC(real.malloc_usable_size(ptr));
}

/*
 * Every fork handler is registered here (pthread_atfork(3) calls it, from
 * libc_nonshared): libfam's child handler goes ahead of the first one, so
 * that in a forked child the parent's fabric-attached memory is the
 * child's before any allocator's child handler touches what it keeps
 * there (libfam_atfork_first).
 */
SHIM_EXPORT int __register_atfork(void (*prepare)(void), void (*parent)(void),
    void (*child)(void), void *dso);

SHIM_EXPORT int
__register_atfork(void (*prepare)(void), void (*parent)(void),
    void (*child)(void), void *dso)
{
	register_atfork_fn *reg = shim_register_atfork_next();

	if (reg == NULL)
		return ENOSYS;
	libfam_atfork_first();
	return reg(prepare, parent, child, dso);
}
