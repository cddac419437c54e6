/*
 * libfam-internal.h - libfam's entry points for libfamshim, which compiles
 * libfam.c in (it must work when preloaded alone) and hides them.
 *
 * Every function here may be called from inside malloc: none allocates, none
 * uses stdio. All return 0 or -errno unless said otherwise.
 */
#ifndef LIBFAM_INTERNAL_H
#define LIBFAM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Allocates a zero-filled region of at least size bytes whose address is a
 * multiple of align (0, or a power of two). *usable receives the bytes
 * reserved. On failure, *quiet (when not NULL) tells whether there is
 * nothing more to report: no session could be had (reported on stderr
 * already), or the request was one famd could never meet.
 */
int libfam_alloc(size_t size, size_t align, void **ptr, size_t *usable,
    bool *quiet);

/*
 * Allocates a region holding the file path (FAM_S_ALLOC_FILE, and maybe
 * FAM_S_ALLOC_SHARED in flags); *len receives the file's length.
 */
int libfam_alloc_file(const char *path, unsigned flags, void **ptr,
    size_t *len);

/*
 * Releases the region starting at ptr. Returns 1 (and does nothing) for
 * memory inherited from the parent across fork(), -EINVAL for an address
 * that does not start a region.
 */
int libfam_free(void *ptr);

/* Tells whether ptr lies in an arena of this process; lock-free. */
bool libfam_owns(const void *ptr);

/* Bytes reserved for the region starting at ptr, 0 if none. */
size_t libfam_usable_size(const void *ptr);

/*
 * Names the messages' author ("libfam" by default) and what becomes of
 * allocations when famd cannot be reached (appended to that warning).
 */
void libfam_configure(const char *ident, const char *fallback);

/* Writes "ident: " and the strings up to NULL as one line on stderr. */
void libfam_say(const char *first, ...) __attribute__((sentinel));

/* Formats v in decimal into buf (at least 21 bytes); returns buf. */
char *libfam_fmt_u64(char *buf, uint64_t v);

/* Formats err as "description (ENAME)" into buf of len bytes; returns buf. */
const char *libfam_fmt_errno(char *buf, size_t len, int err);

#endif /* LIBFAM_INTERNAL_H */
