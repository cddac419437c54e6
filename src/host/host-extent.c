/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-extent.c - an arena's space: its free list (extents, ranges of
 * chunks sorted by offset, none empty, none touching the next, that
 * regions are carved from and given back to) and its regions sorted by
 * offset, by which a fault's address finds its region; and
 * host_region_idle(), by which any layer tells the sessions (through
 * h->region_gone) that a dying region's last operation is over.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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

/* Adds r to its arena's sorted region table. */
int
host_arena_add_region(struct arena *ar, struct region *r)
{
	size_t i;

	if (ar->nregions == ar->cap) {
		size_t cap = ar->cap ? ar->cap * 2 : 16;
		struct region **n = realloc(ar->regions, cap * sizeof *n);

		if (n == NULL)
			return -ENOMEM;
		ar->regions = n;
		ar->cap = cap;
	}
	for (i = ar->nregions; i > 0 && ar->regions[i - 1]->off > r->off; i--)
		ar->regions[i] = ar->regions[i - 1];
	ar->regions[i] = r;
	ar->nregions++;
	return 0;
}

/* Removes r from its arena's region table. */
void
host_arena_del_region(struct arena *ar, struct region *r)
{
	for (size_t i = 0; i < ar->nregions; i++)
		if (ar->regions[i] == r) {
			memmove(&ar->regions[i], &ar->regions[i + 1],
			    (ar->nregions - i - 1) * sizeof *ar->regions);
			ar->nregions--;
			return;
		}
}

/* Finds the region holding the program's address uaddr. */
struct region *
host_region_find(struct host_client *cl, uint64_t uaddr, struct arena **arp)
{
	for (struct arena *ar = cl->arenas; ar != NULL; ar = ar->next) {
		size_t lo = 0, hi;
		uint64_t off;

		if (ar->uaddr == 0 || uaddr < ar->uaddr ||
		    uaddr >= ar->uaddr + ar->size)
			continue;
		off = uaddr - ar->uaddr;
		hi = ar->nregions;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			struct region *r = ar->regions[mid];

			if (off < r->off)
				hi = mid;
			else if (off >= r->off + r->size)
				lo = mid + 1;
			else {
				if (arp != NULL)
					*arp = ar;
				return r->dying ? NULL : r;
			}
		}
		return NULL;
	}
	return NULL;
}

/*
 * Tells the region's owner when the last operation of a dying region has
 * completed (h->region_gone, set by the sessions).
 */
void
host_region_idle(struct region *r)
{
	if (r->dying && r->busy == 0 && r->cl->h->region_gone != NULL)
		r->cl->h->region_gone(r);
}
