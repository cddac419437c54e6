/*
 * fuzz-session.c - libFuzzer target: the session messages of
 * fam-session.h, as the host famd takes them from a program's socket and
 * as libfam takes famd's replies (fam-session.c).
 *
 * The input is the byte stream a program sends. It is received into a
 * buffer of the host's size (struct host_client's inbuf) and drained as
 * session_read_cb() and session_drain() do: every complete message is
 * taken (fam_smsg_take) and checked (fam_smsg_check_request); one that
 * fails ends the session, and the stream with it. A request that passes
 * has its arguments checked as the host does (ALLOC, MAP); a UFFD request
 * stands for the descriptor the program would pass. The same stream is
 * received again in small pieces, and must give the same messages.
 *
 * Each message taken is also offered to libfam as a reply
 * (fam_smsg_check_reply, fam_smsg_check_hello_reply).
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fam-session.h"
#include "fuzz.h"

#define FUZZ_INBUF     (sizeof(struct fam_smsg) + FAM_SESSION_MAX_DATA)
#define FUZZ_PIECE     13u        /* bytes per read in the second pass */
#define FUZZ_ARENA     (1ull << 30) /* the host's arena_size */
#define FUZZ_MAX_MSGS  4096u

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

/* Checks a request's arguments as the host's handlers do. */
static void
fuzz_arguments(const struct fam_smsg *m, const char *data)
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
fuzz_receive(const uint8_t *stream, size_t size, size_t piece)
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
			if (m.type == FAM_S_UFFD)
				have_uffd = true;
			fuzz_arguments(&m, data);
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
	struct fuzz_pass whole = fuzz_receive(data, size, 0);
	struct fuzz_pass bits = fuzz_receive(data, size, FUZZ_PIECE);

	fuzz_assert(whole.nmsgs == bits.nmsgs);
	fuzz_assert(whole.ended == bits.ended);
	fuzz_assert(whole.digest == bits.digest);
	return 0;
}
