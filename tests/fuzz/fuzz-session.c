/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz-session.c - libFuzzer target: the session messages of
 * wire/session.h, as the host famd takes them from a program's socket and
 * as libfam takes famd's replies (wire/session.c).
 *
 * The input is the byte stream a program sends. It is received into a
 * buffer of the host's size (struct host_client's inbuf) and drained as
 * session_read_cb() and session_drain() do: every complete message is
 * taken (fam_smsg_take) and checked (fam_smsg_check_request); one that
 * fails ends the session, and the stream with it. A request that passes
 * has its arguments checked as the host does (ALLOC, MAP); a UFFD (or
 * RECLAIM) request stands for the descriptor the program would pass. The same stream is
 * received again in small pieces, and must give the same messages.
 *
 * Each message taken is also offered to libfam as a reply
 * (fam_smsg_check_reply, fam_smsg_check_hello_reply).
 *
 * The ALLOCs that pass are placed in an arena's free list as the host
 * places regions (host-extent.c: chunks of FUZZ_CHUNK, alignment in
 * chunks), FREE gives them back by handle, and at the end of the stream
 * every region left is given back: no two regions may share a chunk, each
 * starts on its alignment, and the free list ends as one whole arena.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire/session.h"
#include "host/host.h"
#include "fuzz.h"

#define FUZZ_INBUF     (sizeof(struct fam_smsg) + FAM_SESSION_MAX_DATA)
#define FUZZ_PIECE     13u        /* bytes per read in the second pass */
#define FUZZ_ARENA     (1ull << 30) /* the host's arena_size */
#define FUZZ_MAX_MSGS  4096u
#define FUZZ_CHUNK_SHIFT 16u        /* 64 KiB chunks */
#define FUZZ_CHUNKS    1024u        /* an arena of 64 MiB for the placements */
#define FUZZ_REGIONS   512u

/* An arena as the host carves it, and the regions placed in it. */
struct fuzz_arena {
	struct extent *free;
	uint8_t used[FUZZ_CHUNKS];   /* chunk in a region */
	struct {
		uint64_t off, len;   /* chunks; len 0: a free slot */
	} regions[FUZZ_REGIONS];
	uint64_t nregions;           /* handles given: 1 to nregions */
};

/* What one pass over the stream saw: a digest of every message taken. */
struct fuzz_pass {
	size_t nmsgs;
	bool ended;            /* a message failed: the session ended */
	uint64_t digest;
};

/* Mixes len bytes into a running digest (FNV-1a). */
static uint64_t
fuzz_mix(uint64_t h, const void *p, size_t len)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < len; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* Offers a message to libfam's reply checks, as the reply to itself. */
static void
fuzz_as_reply(const struct fam_smsg *m)
{
	int rc = fam_smsg_check_reply(m, m->type, m->seq);

	if (rc == 0) {
		fuzz_assert(m->magic == FAM_SESSION_MAGIC);
		fuzz_assert(m->len <= FAM_SESSION_MAX_DATA);
		fuzz_assert(m->status >= 0 && m->status < 4096);
	}
	fuzz_assert(fam_smsg_check_reply(m, (uint16_t)(m->type + 1),
	    m->seq) != 0);
	fuzz_assert(fam_smsg_check_reply(m, m->type, m->seq + 1) != 0);
	if (fam_smsg_check_hello_reply(m, 4096) == 0) {
		fuzz_assert(m->a >= 4096 && (m->a & (m->a - 1)) == 0);
		fuzz_assert(m->a <= FAM_SESSION_MAX_CHUNK);
		fuzz_assert(m->b >= m->a && m->b % m->a == 0);
		fuzz_assert(m->b <= FAM_SESSION_MAX_ARENA);
	}
}

/* Places an ALLOC that passed its checks, as region_place() does. */
static void
fuzz_place(struct fuzz_arena *a, const struct fam_smsg *m)
{
	uint64_t chunk = 1ull << FUZZ_CHUNK_SHIFT;
	uint64_t len = m->b & FAM_S_ALLOC_FILE ? 1 :
	    ((m->a + chunk - 1) & ~(chunk - 1)) >> FUZZ_CHUNK_SHIFT;
	uint64_t al = m->c > chunk ? m->c >> FUZZ_CHUNK_SHIFT : 1;
	int64_t off;

	if (a->nregions == FUZZ_REGIONS)
		return;
	off = host_extent_take(&a->free, len, al);
	if (off < 0)
		return;
	fuzz_assert((uint64_t)off % al == 0);
	fuzz_assert((uint64_t)off + len <= FUZZ_CHUNKS);
	for (uint64_t c = (uint64_t)off; c < (uint64_t)off + len; c++) {
		fuzz_assert(!a->used[c]);
		a->used[c] = 1;
	}
	a->regions[a->nregions].off = (uint64_t)off;
	a->regions[a->nregions].len = len;
	a->nregions++;
}

/* Gives a region back by handle (1 to nregions), as FREE does. */
static void
fuzz_unplace(struct fuzz_arena *a, uint64_t handle)
{
	uint64_t off, len;

	if (handle == 0 || handle > a->nregions ||
	    a->regions[handle - 1].len == 0)
		return;
	off = a->regions[handle - 1].off;
	len = a->regions[handle - 1].len;
	a->regions[handle - 1].len = 0;
	for (uint64_t c = off; c < off + len; c++)
		a->used[c] = 0;
	fuzz_assert(host_extent_give(&a->free, off, len) == 0);
}

/* Gives back every region left: the arena must be whole again. */
static void
fuzz_arena_end(struct fuzz_arena *a)
{
	uint64_t prev_end = 0;

	/* Sorted, none empty, none touching the next, nothing in use. */
	for (struct extent *e = a->free; e != NULL; e = e->next) {
		fuzz_assert(e->len > 0);
		fuzz_assert(e == a->free || e->off > prev_end);
		fuzz_assert(e->off + e->len <= FUZZ_CHUNKS);
		for (uint64_t c = e->off; c < e->off + e->len; c++)
			fuzz_assert(!a->used[c]);
		prev_end = e->off + e->len;
	}
	for (uint64_t h = 1; h <= a->nregions; h++)
		fuzz_unplace(a, h);
	fuzz_assert(a->free != NULL && a->free->off == 0 &&
	    a->free->len == FUZZ_CHUNKS && a->free->next == NULL);
	host_extent_free(&a->free);
}

/* Checks a request's arguments as the host's handlers do. */
static void
fuzz_arguments(const struct fam_smsg *m, const char *data,
    struct fuzz_arena *a)
{
	int err;

	switch (m->type) {
	case FAM_S_ALLOC:
		err = fam_smsg_check_alloc(m, FUZZ_ARENA);
		fuzz_assert(err == 0 || err == EINVAL || err == EFBIG);
		if (err != 0)
			break;
		if (m->b & FAM_S_ALLOC_FILE) {
			fuzz_assert(m->len > 0 && strlen(data) == m->len);
		} else {
			uint64_t chunk = 4096, size;

			fuzz_assert(m->len == 0 && m->a > 0);
			fuzz_assert(m->a <= FAM_SESSION_MAX_REGION);
			/* The host rounds the size up to chunks: no wrap. */
			size = (m->a + chunk - 1) & ~(chunk - 1);
			fuzz_assert(size >= m->a);
		}
		fuzz_assert(m->c <= FUZZ_ARENA && (m->c & (m->c - 1)) == 0);
		if (a != NULL)
			fuzz_place(a, m);
		break;
	case FAM_S_FREE:
		if (a != NULL)
			fuzz_unplace(a, m->a);
		break;
	case FAM_S_MAP:
		err = fam_smsg_check_map(m->b, FUZZ_ARENA);
		if (err == 0)
			fuzz_assert(m->b != 0 && m->b + FUZZ_ARENA > m->b);
		(void)fam_smsg_check_map(m->b, m->a);
		break;
	default:
		break;
	}
}

/*
 * Receives the stream piece bytes at a time (0: as much as fits) and
 * drains it as the host does; returns what it saw.
 */
static struct fuzz_pass
fuzz_receive(const uint8_t *stream, size_t size, size_t piece,
    struct fuzz_arena *a)
{
	struct fuzz_pass pass = { .digest = 0xcbf29ce484222325ull };
	uint8_t *inbuf = malloc(FUZZ_INBUF);
	char data[FAM_SESSION_MAX_DATA + 1];
	size_t inlen = 0, off = 0;
	bool have_uffd = false;

	if (inbuf == NULL)
		abort();
	while (!pass.ended && pass.nmsgs < FUZZ_MAX_MSGS) {
		size_t room = FUZZ_INBUF - inlen, n = size - off, used;
		struct fam_smsg m;

		if (piece != 0 && n > piece)
			n = piece;
		if (n > room)
			n = room;
		if (n == 0)
			break; /* end of stream, or a full buffer: never both */
		memcpy(inbuf + inlen, stream + off, n);
		inlen += n;
		off += n;
		while ((used = fam_smsg_take(inbuf, inlen, &m, data)) > 0) {
			fuzz_assert(used <= inlen);
			fuzz_assert(used >= sizeof m);
			fuzz_assert(strlen(data) <= FAM_SESSION_MAX_DATA);
			memmove(inbuf, inbuf + used, inlen - used);
			inlen -= used;
			pass.nmsgs++;
			pass.digest = fuzz_mix(pass.digest, &m, sizeof m);
			pass.digest = fuzz_mix(pass.digest, data, strlen(data));
			fuzz_as_reply(&m);
			if (fam_smsg_check_request(&m, have_uffd) < 0) {
				pass.ended = true;
				break;
			}
			fuzz_assert(m.len == strlen(data));
			/* RECLAIM hands over the descriptor too (a restart) */
			if (m.type == FAM_S_UFFD || m.type == FAM_S_RECLAIM)
				have_uffd = true;
			fuzz_arguments(&m, data, a);
			if (pass.nmsgs == FUZZ_MAX_MSGS)
				break;
		}
		/* A full buffer holds a complete message: it was taken. */
		fuzz_assert(inlen < FUZZ_INBUF || pass.ended ||
		    pass.nmsgs == FUZZ_MAX_MSGS);
	}
	free(inbuf);
	return pass;
}

/* Receives one input as a program's stream, whole and in pieces. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_arena *a = calloc(1, sizeof *a);
	struct fuzz_pass whole, bits;

	if (a == NULL || host_extent_give(&a->free, 0, FUZZ_CHUNKS) < 0)
		abort();
	whole = fuzz_receive(data, size, 0, a);
	bits = fuzz_receive(data, size, FUZZ_PIECE, NULL);
	fuzz_arena_end(a);
	free(a);

	fuzz_assert(whole.nmsgs == bits.nmsgs);
	fuzz_assert(whole.ended == bits.ended);
	fuzz_assert(whole.digest == bits.digest);
	return 0;
}
