/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shim-heap.h - FAM_HEAP=all in libfamshim: the requests below
 * FAM_THRESHOLD served by jemalloc from an arena whose extents are
 * fabric-attached memory (shim-heap.c). Hidden: libfamshim exports only
 * the malloc family.
 *
 * Functions return 0 or -errno unless said otherwise. None takes a lock on
 * the free path; the allocation path may wait for famd (the extent hook).
 */
#ifndef SHIM_HEAP_H
#define SHIM_HEAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#pragma GCC visibility push(hidden)

/* Nesting of FAM calls in this thread (shim.c): inside one, libc serves. */
extern __thread unsigned shim_depth __attribute__((tls_model("initial-exec")));

/* Set once the heap's arena exists: FAM_HEAP=all, and jemalloc agreed. */
extern _Atomic bool shim_heap_on;

/* Creates the heap's jemalloc arena; once, from the shim's constructor. */
int shim_heap_init(void);

/* Tells whether the heap should be asked now (not backing off a failure). */
bool shim_heap_usable_now(void);

/*
 * Allocates size bytes aligned to align (0, or a power of two), zeroed when
 * zero. On failure *quiet tells whether it was reported already.
 */
int shim_heap_alloc(size_t size, size_t align, bool zero, void **out,
    bool *quiet);

/* Resizes the heap block p in the heap; -ENOMEM leaves it as it was. */
int shim_heap_resize(void *p, size_t size, void **out);

/* Tells whether p lies in the heap's memory (this process's or a parent's). */
bool shim_heap_owns(const void *p);

/* Tells whether the heap block p was inherited across fork(). */
bool shim_heap_inherited(const void *p);

/* Tells whether the inherited heap block p can still be read. */
bool shim_heap_readable(const void *p);

/* Releases the heap block p; inherited blocks are left alone. */
void shim_heap_free(void *p);

/* The bytes usable at the heap block p. */
size_t shim_heap_usable(const void *p);

#pragma GCC visibility pop

#endif /* SHIM_HEAP_H */
