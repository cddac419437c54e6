/*
 * host-extent.c - the free space of an arena: a list of extents (ranges of
 * chunks) sorted by offset, none empty, none touching the next, that
 * regions are carved from and given back to.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#include "host/host.h"

/*
 * Takes len chunks aligned to align chunks from the list; returns the
 * offset in chunks or -1.
 */
int64_t
host_extent_take(struct extent **list, uint64_t len, uint64_t align)
{
	struct extent **pp, *e;

	for (pp = list; (e = *pp) != NULL; pp = &e->next) {
		uint64_t start = (e->off + align - 1) / align * align;
		uint64_t pad = start - e->off;

		if (pad + len > e->len)
			continue;
		if (pad > 0) {
			struct extent *lead = malloc(sizeof *lead);

			if (lead == NULL)
				return -1;
			lead->off = e->off;
			lead->len = pad;
			lead->next = e;
			*pp = lead;
			pp = &lead->next;
			e->off += pad;
			e->len -= pad;
		}
		e->off += len;
		e->len -= len;
		if (e->len == 0) {
			*pp = e->next;
			free(e);
		}
		return (int64_t)start;
	}
	return -1;
}

/*
 * Returns len chunks at off to the list, merging neighbours. Returns 0, or
 * -ENOMEM when a new extent is needed and cannot be had: the space is lost.
 */
int
host_extent_give(struct extent **list, uint64_t off, uint64_t len)
{
	struct extent **pp, *e, *n;

	for (pp = list; (e = *pp) != NULL && e->off < off; pp = &e->next)
		;
	/* e is the first extent after off; the one before ends at or before. */
	if (pp != list) {
		struct extent *prev = (struct extent *)((char *)pp -
		    offsetof(struct extent, next));

		if (prev->off + prev->len == off) {
			prev->len += len;
			if (e != NULL && prev->off + prev->len == e->off) {
				prev->len += e->len;
				prev->next = e->next;
				free(e);
			}
			return 0;
		}
	}
	if (e != NULL && off + len == e->off) {
		e->off = off;
		e->len += len;
		return 0;
	}
	n = malloc(sizeof *n);
	if (n == NULL)
		return -ENOMEM;
	n->off = off;
	n->len = len;
	n->next = e;
	*pp = n;
	return 0;
}

/* Frees every extent of the list. */
void
host_extent_free(struct extent **list)
{
	struct extent *e, *next;

	for (e = *list; e != NULL; e = next) {
		next = e->next;
		free(e);
	}
	*list = NULL;
}
