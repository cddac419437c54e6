/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shim.h - what libfamshim's files share: the settings read from the
 * environment, the nesting of FAM calls, and the allocation entry point.
 * Everything here is hidden: libfamshim exports only what shim.sym lists.
 */
#ifndef FAM_SHIM_H
#define FAM_SHIM_H

#include <stdbool.h>
#include <stddef.h>

#pragma GCC visibility push(hidden)

extern bool shim_fam_on;      /* FAM_DISABLE not set */
extern bool shim_map_on;      /* mmap() may give FAM (FAM_MMAP) */
extern bool shim_strict;      /* FAM_STRICT set */
extern size_t shim_threshold; /* FAM_THRESHOLD */

/* Nesting of FAM calls in this thread: inside one, everything is libc's. */
extern __thread unsigned shim_depth __attribute__((tls_model("initial-exec")));

/* Tells whether the environment variable name is set to anything but 0. */
bool shim_env_on(const char *name);

/* Tells whether libc's functions are known; sets them up on first use. */
bool shim_is_ready(void);

/* Reports, once, an allocation famd did not grant. */
void shim_report_failure(size_t size, int err);

/*
 * Tries to allocate size bytes (aligned to align, or 0) of FAM; flags 0,
 * or FAM_S_ALLOC_SPARSE for a reservation. Returns
 * true when the request is settled: *out is the memory, or NULL with errno
 * ENOMEM under FAM_STRICT. Returns false when libc should serve it.
 */
bool shim_fam(size_t size, size_t align, unsigned flags, void **out);

/* free() of FAM at [addr, addr + len): forgets its fork advice. */
void shim_map_forget(void *addr, size_t len);

#pragma GCC visibility pop

#endif /* FAM_SHIM_H */
