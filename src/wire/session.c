/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.c - decoding and validation of the messages of
 * wire/session.h: the requests the host famd takes from a program's byte
 * stream, and the replies libfam takes from famd.
 *
 * libfam compiles this file in and may run it inside malloc: nothing here
 * allocates, uses stdio or touches anything but its arguments.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "wire/session.h"

/* Tells whether v is a power of two. */
static bool
smsg_pow2(uint64_t v)
{
	return v != 0 && (v & (v - 1)) == 0;
}

/*
 * Takes the first message of the len bytes received at buf: its fixed part
 * into *m, its data into data, NUL-terminated. Returns the bytes taken, or
 * 0 while the message is incomplete. A len over FAM_SESSION_MAX_DATA takes
 * the fixed part alone; data holding a NUL sets m->len to UINT32_MAX.
 * Either then fails fam_smsg_check_request().
 */
size_t
fam_smsg_take(const void *buf, size_t len, struct fam_smsg *m,
    char data[FAM_SESSION_MAX_DATA + 1])
{
	size_t dlen;

	if (len < sizeof *m)
		return 0;
	memcpy(m, buf, sizeof *m);
	dlen = m->len <= FAM_SESSION_MAX_DATA ? m->len : 0;
	if (len - sizeof *m < dlen)
		return 0;
	memcpy(data, (const char *)buf + sizeof *m, dlen);
	data[dlen] = '\0';
	if (memchr(data, '\0', dlen) != NULL)
		m->len = UINT32_MAX; /* a NUL in a path */
	return sizeof *m + dlen;
}

/*
 * Checks the fixed part of a request: magic, version, type, no status, a
 * zero reserved field, data on ALLOC only and within FAM_SESSION_MAX_DATA,
 * nothing but HELLO, UFFD and RECLAIM before the program's userfaultfd came
 * (have_uffd), and RECLAIM only then. Returns 0, or -EPROTO: the session
 * ends.
 */
int
fam_smsg_check_request(const struct fam_smsg *m, bool have_uffd)
{
	if (m->magic != FAM_SESSION_MAGIC || m->version != FAM_SESSION_VERSION ||
	    m->type == 0 || m->type > FAM_S_TYPE_MAX || m->status != 0 ||
	    m->reserved != 0 || m->len > FAM_SESSION_MAX_DATA ||
	    (m->len != 0 && m->type != FAM_S_ALLOC) ||
	    (!have_uffd && m->type > FAM_S_UFFD &&
	    m->type != FAM_S_RECLAIM) ||
	    (have_uffd && m->type == FAM_S_RECLAIM))
		return -EPROTO;
	return 0;
}

/* Returns true when ALLOC's d asks for a valid ec:K+M (FAM_SESSION_EC). */
static bool
fam_smsg_ec_ok(uint64_t d)
{
	uint64_t k = d >> 8 & 0xff, m = d & 0xff;

	return (d & ~(uint64_t)(FAM_SESSION_EC | 0xffff)) == 0 &&
	    (d & FAM_SESSION_EC) && k >= 1 && k <= 16 && m >= 1 && m <= 16;
}

/*
 * Checks the arguments of an ALLOC request (a: size, b: flags, c:
 * alignment, len: the path) for a host whose arenas are arena_size bytes.
 * Returns 0, or EINVAL or EFBIG for the program's reply.
 */
int
fam_smsg_check_alloc(const struct fam_smsg *m, uint64_t arena_size)
{
	bool file = (m->b & FAM_S_ALLOC_FILE) != 0;

	if ((m->b & ~(uint64_t)FAM_S_ALLOC_ALL) != 0 ||
	    (m->c & (m->c - 1)) != 0 || m->c > arena_size ||
	    !file != (m->len == 0) ||
	    ((m->b & FAM_S_ALLOC_SHARED) && !file) ||
	    ((m->b & FAM_S_ALLOC_SPARSE) && file) ||
	    (m->d > FAM_SESSION_MAX_COPIES && !fam_smsg_ec_ok(m->d)))
		return EINVAL;
	if (!file && m->a == 0)
		return EINVAL;
	if (!file && m->a > FAM_SESSION_MAX_REGION)
		return EFBIG;
	return 0;
}

/*
 * Checks the address at which a program mapped an arena of arena_len bytes
 * (MAP's b). Returns 0 or EINVAL.
 */
int
fam_smsg_check_map(uint64_t addr, uint64_t arena_len)
{
	if (addr == 0 || (addr & 4095) != 0 || addr + arena_len < addr)
		return EINVAL;
	return 0;
}

/*
 * Checks the fixed part of a reply to the request of this type and seq:
 * magic, version, type, seq, data length, status 0 or an errno. Returns 0
 * or -EPROTO: the session is broken.
 */
int
fam_smsg_check_reply(const struct fam_smsg *m, uint16_t type, uint64_t seq)
{
	if (m->magic != FAM_SESSION_MAGIC || m->version != FAM_SESSION_VERSION ||
	    m->type != type || m->seq != seq || m->len > FAM_SESSION_MAX_DATA ||
	    m->status < 0 || m->status >= 4096)
		return -EPROTO;
	return 0;
}

/*
 * Checks a successful HELLO reply: a chunk size (a) that is a power of two
 * from the page size (page) to FAM_SESSION_MAX_CHUNK, an arena size (b)
 * that is a multiple of it up to FAM_SESSION_MAX_ARENA. Returns 0 or
 * -EPROTO.
 */
int
fam_smsg_check_hello_reply(const struct fam_smsg *m, uint64_t page)
{
	if (!smsg_pow2(m->a) || m->a < page || m->a > FAM_SESSION_MAX_CHUNK ||
	    m->b < m->a || m->b % m->a != 0 || m->b > FAM_SESSION_MAX_ARENA)
		return -EPROTO;
	return 0;
}
