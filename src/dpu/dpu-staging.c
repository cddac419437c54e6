/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu-staging.c - the dpu's staging buffers: where a forwarded READ's data
 * lands and a WRITE's data waits for the memory node.
 *
 * Owns:
 *   bufs       buffers kept for reuse, by power-of-two size class
 *   the arena  (verbs) slots registered on every connection, taken in
 *              adjacent runs, so that RDMA lands in them and a READ's
 *              reply goes from them without a copy
 *
 * Front only: buffers and slots are taken and given back on the front's
 * loop; no lock.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "dpu/dpu-staging.h"

/* Staging buffers kept for reuse, by power-of-two size class. */
#define DPU_BUF_MIN_SHIFT 12   /* 4 KiB */
#define DPU_BUF_CLASSES   10   /* up to 2 MiB */
#define DPU_BUF_KEEP      64   /* per class */

/*
 * With verbs, staging comes first from an arena registered on every
 * memory-node connection, so that RDMA READs land in it and RDMA WRITEs
 * go from it (no bounce copy): slots of a chunk, a request taking as many
 * adjacent ones as it needs (a host's read-ahead run is up to 1 MiB). A
 * longer request, or one when no run of slots is free, gets a buffer of
 * its own, which the transport bounces. The arena is registered on each
 * host connection too (at its first READ reply), so that a READ's reply
 * is sent from the slots its data landed in, no copy.
 *
 * With async = on the arena is made before the back thread starts and not
 * moved after; its slots are taken and given back by the front alone (as
 * are the buffers kept in `bufs`), and a slot's bytes pass between the
 * sides with its request, through the queues. Each registration belongs
 * to its connection and is made on that connection's loop: the memory
 * nodes' by the back (dpu-memlink.c), the hosts' by the front.
 */
#define DPU_ARENA_SLOT    (64u << 10)
#define DPU_ARENA_SLOTS   256u
#define DPU_ARENA_RUN     16u  /* slots one request may take */

static struct {
	void *free[DPU_BUF_CLASSES][DPU_BUF_KEEP];
	unsigned nfree[DPU_BUF_CLASSES];
} bufs;

/* Returns the size class of a buffer of len bytes, or -1 if none fits. */
static int
buf_class(uint32_t len)
{
	int c = 0;

	while (c < DPU_BUF_CLASSES && ((size_t)1 << (c + DPU_BUF_MIN_SHIFT)) <
	    len)
		c++;
	return c < DPU_BUF_CLASSES ? c : -1;
}

/* Returns true when p is a slot of the registered arena. */
bool
dpu_arena_has(const struct dpu *dpu, const uint8_t *p)
{
	return dpu->arena != NULL && p >= dpu->arena &&
	    p < dpu->arena + dpu->arena_size;
}

/* Sets the registered staging arena up (verbs). Front, before the back. */
int
dpu_arena_init(struct dpu *dpu)
{
	dpu->arena_size = (size_t)DPU_ARENA_SLOTS * DPU_ARENA_SLOT;
	dpu->arena = aligned_alloc(4096, dpu->arena_size);
	dpu->arena_busy = calloc(DPU_ARENA_SLOTS / 64, sizeof *dpu->arena_busy);
	if (dpu->arena == NULL || dpu->arena_busy == NULL) {
		free(dpu->arena);
		free(dpu->arena_busy);
		dpu->arena = NULL;
		dpu->arena_busy = NULL;
		dpu->arena_size = 0;
		return -ENOMEM;
	}
	dpu->arena_nfree = DPU_ARENA_SLOTS;
	return 0;
}

/* Returns true when arena slot i is taken. */
static bool
arena_slot_taken(const struct dpu *dpu, unsigned i)
{
	return dpu->arena_busy[i / 64] >> (i % 64) & 1;
}

/* Marks n arena slots from i taken (on) or free. */
static void
arena_mark(struct dpu *dpu, unsigned i, unsigned n, bool on)
{
	for (unsigned k = i; k < i + n; k++) {
		if (on)
			dpu->arena_busy[k / 64] |= 1ull << (k % 64);
		else
			dpu->arena_busy[k / 64] &= ~(1ull << (k % 64));
	}
	if (on)
		dpu->arena_nfree -= n;
	else
		dpu->arena_nfree += n;
}

/* Takes n adjacent free arena slots (first fit); NULL when there are none. */
static uint8_t *
arena_take(struct dpu *dpu, unsigned n)
{
	unsigned run = 0;

	if (dpu->arena_nfree < n)
		return NULL;
	for (unsigned i = 0; i < DPU_ARENA_SLOTS; i++) {
		if (arena_slot_taken(dpu, i)) {
			run = 0;
			continue;
		}
		if (++run == n) {
			arena_mark(dpu, i + 1 - n, n, true);
			return dpu->arena + (size_t)(i + 1 - n) * DPU_ARENA_SLOT;
		}
	}
	return NULL;
}

/* Slots a request of len bytes takes in the arena. */
static unsigned
arena_slots(uint32_t len)
{
	return (len + DPU_ARENA_SLOT - 1) / DPU_ARENA_SLOT;
}

/* Frees the arena (no connection holds it registered any more). */
void
dpu_arena_fini(struct dpu *dpu)
{
	free(dpu->arena);
	free(dpu->arena_busy);
	dpu->arena = NULL;
	dpu->arena_busy = NULL;
	dpu->arena_size = 0;
	dpu->arena_nfree = 0;
}

/* Takes a staging buffer of at least len bytes. Front. */
uint8_t *
dpu_buf_get(struct dpu *dpu, uint32_t len)
{
	int c = buf_class(len);
	size_t size = c >= 0 ? (size_t)1 << (c + DPU_BUF_MIN_SHIFT) : len;
	void *p;

	if (dpu->arena != NULL) {
		unsigned n = arena_slots(len);

		p = len > 0 && n <= DPU_ARENA_RUN ? arena_take(dpu, n) : NULL;
		if (p != NULL) {
			DPU_INC(dpu, staging_registered, 1);
			dpu->staging_bytes += (size_t)n * DPU_ARENA_SLOT;
			if (dpu->staging_bytes > dpu->staging_peak)
				dpu->staging_peak = dpu->staging_bytes;
			return p;
		}
		DPU_INC(dpu, staging_bounced, 1);
	}
	if (c >= 0 && bufs.nfree[c] > 0)
		p = bufs.free[c][--bufs.nfree[c]];
	else
		p = malloc(size);
	if (p == NULL) {
		DPU_INC(dpu, staging_failures, 1);
		return NULL;
	}
	dpu->staging_bytes += size;
	if (dpu->staging_bytes > dpu->staging_peak)
		dpu->staging_peak = dpu->staging_bytes;
	return p;
}

/* Gives a staging buffer back. Front. */
void
dpu_buf_put(struct dpu *dpu, uint8_t *p, uint32_t len)
{
	int c = buf_class(len);
	size_t size = c >= 0 ? (size_t)1 << (c + DPU_BUF_MIN_SHIFT) : len;

	if (p == NULL)
		return;
	if (dpu_arena_has(dpu, p)) {
		unsigned n = arena_slots(len);

		dpu->staging_bytes -= (size_t)n * DPU_ARENA_SLOT;
		arena_mark(dpu, (unsigned)((size_t)(p - dpu->arena) /
		    DPU_ARENA_SLOT), n, false);
		return;
	}
	dpu->staging_bytes -= size;
	if (c >= 0 && bufs.nfree[c] < DPU_BUF_KEEP)
		bufs.free[c][bufs.nfree[c]++] = p;
	else
		free(p);
}

/* Frees every staging buffer kept for reuse. */
void
dpu_buf_fini(void)
{
	for (int c = 0; c < DPU_BUF_CLASSES; c++)
		while (bufs.nfree[c] > 0)
			free(bufs.free[c][--bufs.nfree[c]]);
}

