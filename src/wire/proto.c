/* SPDX-License-Identifier: Apache-2.0 */
/*
 * proto.c - encoding and validation of famd's wire protocol (proto.h).
 *
 * Decoders return -EPROTO when a payload is malformed (wrong length,
 * reserved bytes set, broken NUL-padding, length fields that disagree with
 * the payload, an enum out of range): the sender does not speak the
 * protocol, and the connection is closed. They return -EINVAL (or -ERANGE)
 * when a well-formed request asks for something that cannot be done
 * (unknown region flags, a missing name or path, a zero length): the
 * sender gets that status and the connection stays.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "wire/proto.h"

/* Payload bounds of one message type: requests, and successful responses. */
struct proto_bounds {
	uint32_t req_min, req_max;
	uint32_t resp_min, resp_max;
};

static const struct proto_bounds proto_bounds[FAM_MSG_TYPE_MAX + 1] = {
	[FAM_MSG_HELLO] = { FAM_HELLO_LEN, FAM_HELLO_LEN,
	    FAM_CHALLENGE_LEN, FAM_CHALLENGE_LEN },
	[FAM_MSG_AUTH] = { FAM_AUTH_LEN, FAM_AUTH_LEN,
	    FAM_AUTH_RESP_LEN, FAM_AUTH_RESP_LEN },
	[FAM_MSG_REGION_CREATE] = { FAM_REGION_CREATE_MIN,
	    FAM_REGION_CREATE_MIN + FAM_NAME_MAX + FAM_PATH_MAX,
	    FAM_REGION_INFO_LEN, FAM_REGION_INFO_LEN },
	[FAM_MSG_REGION_FREE] = { FAM_REGION_FREE_LEN, FAM_REGION_FREE_LEN,
	    0, 0 },
	[FAM_MSG_READ] = { FAM_READ_LEN, FAM_READ_LEN, 0, FAM_RW_MAX },
	[FAM_MSG_WRITE] = { FAM_WRITE_HDR_LEN, FAM_WRITE_HDR_LEN + FAM_RW_MAX,
	    0, 0 },
	[FAM_MSG_STATS] = { 0, 0, 0, FAM_PROTO_MAX_PAYLOAD },
	[FAM_MSG_REGION_LEASE] = { FAM_REGION_LEASE_LEN, FAM_REGION_LEASE_LEN,
	    FAM_REGION_INFO_LEN, FAM_REGION_INFO_LEN },
	[FAM_MSG_REGION_ADOPT] = { FAM_REGION_ADOPT_LEN, FAM_REGION_ADOPT_LEN,
	    FAM_REGION_INFO_LEN, FAM_REGION_INFO_LEN },
	[FAM_MSG_REGION_ADVISE] = { FAM_REGION_ADVISE_LEN,
	    FAM_REGION_ADVISE_LEN, 0, 0 },
	[FAM_MSG_REGION_DISCARD] = { FAM_REGION_DISCARD_LEN,
	    FAM_REGION_DISCARD_LEN, 0, 0 },
};

static const char *const proto_type_names[FAM_MSG_TYPE_MAX + 1] = {
	[FAM_MSG_HELLO] = "hello",
	[FAM_MSG_REGION_CREATE] = "region_create",
	[FAM_MSG_REGION_FREE] = "region_free",
	[FAM_MSG_READ] = "read",
	[FAM_MSG_WRITE] = "write",
	[FAM_MSG_STATS] = "stats",
	[FAM_MSG_REGION_LEASE] = "region_lease",
	[FAM_MSG_REGION_ADOPT] = "region_adopt",
	[FAM_MSG_REGION_ADVISE] = "region_advise",
	[FAM_MSG_AUTH] = "auth",
	[FAM_MSG_REGION_DISCARD] = "region_discard",
};

/* Stores a 16-bit integer big-endian. */
static void
put_u16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* Stores a 32-bit integer big-endian. */
static void
put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Stores a 64-bit integer big-endian. */
static void
put_u64(uint8_t *p, uint64_t v)
{
	put_u32(p, (uint32_t)(v >> 32));
	put_u32(p + 4, (uint32_t)v);
}

/* Loads a big-endian 16-bit integer. */
static uint16_t
get_u16(const uint8_t *p)
{
	return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

/* Loads a big-endian 32-bit integer. */
static uint32_t
get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	    (uint32_t)p[2] << 8 | p[3];
}

/* Loads a big-endian 64-bit integer. */
static uint64_t
get_u64(const uint8_t *p)
{
	return (uint64_t)get_u32(p) << 32 | get_u32(p + 4);
}

/* Returns true when len bytes at p are all zero. */
static bool
is_zero(const uint8_t *p, size_t len)
{
	uint8_t acc = 0;

	for (size_t i = 0; i < len; i++)
		acc |= p[i];
	return acc == 0;
}

/* Copies a string into a NUL-padded field of len bytes. */
static void
put_padded(uint8_t *p, size_t len, const char *s)
{
	size_t n = strnlen(s, len);

	memcpy(p, s, n);
	memset(p + n, 0, len - n);
}

/* Returns true when c may appear in a name or path: printable ASCII or UTF-8. */
static bool
is_name_char(uint8_t c)
{
	return c >= 0x20 && c != 0x7f;
}

/*
 * Returns true when len bytes at p are well-formed UTF-8: no stray or
 * missing continuation byte, no overlong form, no surrogate, nothing past
 * U+10FFFF (what JSON text may carry).
 */
bool
proto_utf8_valid(const void *p, size_t len)
{
	const uint8_t *s = p;
	size_t i = 0;

	while (i < len) {
		uint8_t c = s[i];
		uint32_t cp;
		size_t n;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
		} else
			return false;
		if (len - i - 1 < n)
			return false;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n + 1;
	}
	return true;
}

/*
 * Decodes a NUL-padded field of len bytes into out (len + 1 bytes): every
 * byte after the first NUL must be NUL. With printable, control characters
 * and text that is not UTF-8 are refused too. Returns 0 or -EPROTO.
 */
static int
get_padded(const uint8_t *p, size_t len, char *out, bool printable)
{
	size_t n = strnlen((const char *)p, len);

	if (!is_zero(p + n, len - n))
		return -EPROTO;
	if (printable) {
		for (size_t i = 0; i < n; i++)
			if (!is_name_char(p[i]))
				return -EPROTO;
		if (!proto_utf8_valid(p, n))
			return -EPROTO;
	}
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

/* Encodes a header. */
void
proto_put_hdr(uint8_t out[FAM_PROTO_HDR_LEN], const struct fam_hdr *h)
{
	put_u32(out, h->magic);
	out[4] = h->version;
	out[5] = h->type;
	put_u16(out + 6, h->flags);
	put_u32(out + 8, h->len);
	put_u32(out + 12, (uint32_t)h->status);
	put_u64(out + 16, h->id);
	put_u32(out + 24, h->crc);
	put_u32(out + 28, h->reserved);
}

/* Decodes a header; it still has to pass proto_check_hdr(). Returns 0. */
int
proto_get_hdr(const uint8_t in[FAM_PROTO_HDR_LEN], struct fam_hdr *h)
{
	h->magic = get_u32(in);
	h->version = in[4];
	h->type = in[5];
	h->flags = get_u16(in + 6);
	h->len = get_u32(in + 8);
	h->status = (int32_t)get_u32(in + 12);
	h->id = get_u64(in + 16);
	h->crc = get_u32(in + 24);
	h->reserved = get_u32(in + 28);
	return 0;
}

/* Sets the crc of an encoded header. */
void
proto_put_hdr_crc(uint8_t out[FAM_PROTO_HDR_LEN], uint32_t crc)
{
	put_u32(out + 24, crc);
}

/* Returns true when messages like h carry chunk data with a CRC. */
static bool
proto_has_crc(const struct fam_hdr *h)
{
	if (h->type == FAM_MSG_WRITE)
		return !(h->flags & FAM_F_RESPONSE);
	return h->type == FAM_MSG_READ && (h->flags & FAM_F_RESPONSE) &&
	    h->status == 0;
}

/*
 * Validates a decoded header against the protocol and a payload limit
 * (0 means FAM_PROTO_MAX_PAYLOAD): -EPROTO for a bad magic, type, flags,
 * status, a length outside the type's bounds, reserved bits set or a crc
 * on a message without chunk data, -EPROTONOSUPPORT for
 * another version, -EMSGSIZE for a payload over the limit.
 */
int
proto_check_hdr(const struct fam_hdr *h, uint32_t max_payload)
{
	const struct proto_bounds *b;
	bool resp;

	if (max_payload == 0 || max_payload > FAM_PROTO_MAX_PAYLOAD)
		max_payload = FAM_PROTO_MAX_PAYLOAD;
	if (h->magic != FAM_PROTO_MAGIC)
		return -EPROTO;
	if (h->version != FAM_PROTO_VERSION)
		return -EPROTONOSUPPORT;
	if (h->type == 0 || h->type > FAM_MSG_TYPE_MAX)
		return -EPROTO;
	if (h->flags & ~FAM_F_ALL)
		return -EPROTO;
	if (h->reserved != 0 || (h->crc != 0 && !proto_has_crc(h)))
		return -EPROTO;
	if ((h->flags & FAM_F_BACKGROUND) && ((h->flags & FAM_F_RESPONSE) ||
	    (h->type != FAM_MSG_READ && h->type != FAM_MSG_WRITE)))
		return -EPROTO;
	if (h->len > max_payload)
		return -EMSGSIZE;
	b = &proto_bounds[h->type];
	resp = (h->flags & FAM_F_RESPONSE) != 0;
	if (!resp) {
		if (h->status != 0)
			return -EPROTO;
		if (h->len < b->req_min || h->len > b->req_max)
			return -EPROTO;
		return 0;
	}
	if (h->status < 0 || h->status > FAM_STATUS_MAX)
		return -EPROTO;
	if (h->status != 0)
		return h->len == 0 ? 0 : -EPROTO;
	if (h->len < b->resp_min || h->len > b->resp_max)
		return -EPROTO;
	return 0;
}

/* Encodes a HELLO request; returns FAM_HELLO_LEN. */
size_t
proto_put_hello(uint8_t *out, const struct fam_hello *m)
{
	out[0] = m->role;
	memset(out + 1, 0, 3);
	put_u32(out + 4, m->features);
	put_u64(out + 8, m->resume);
	put_padded(out + 16, FAM_NAME_MAX, m->node);
	memcpy(out + 16 + FAM_NAME_MAX, m->nonce, FAM_NONCE_LEN);
	return FAM_HELLO_LEN;
}

/* Returns true when role is one of enum fam_role_wire. */
static bool
proto_role_ok(uint8_t role)
{
	return role >= FAM_WIRE_ROLE_HOST && role <= FAM_WIRE_ROLE_MEMORY;
}

/* Decodes and validates a HELLO request. */
int
proto_get_hello(const uint8_t *in, size_t len, struct fam_hello *m)
{
	if (len != FAM_HELLO_LEN)
		return -EPROTO;
	if (!proto_role_ok(in[0]) || !is_zero(in + 1, 3))
		return -EPROTO;
	m->role = in[0];
	m->features = get_u32(in + 4);
	m->resume = get_u64(in + 8);
	if (get_padded(in + 16, FAM_NAME_MAX, m->node, true) < 0 ||
	    m->node[0] == '\0')
		return -EPROTO;
	memcpy(m->nonce, in + 16 + FAM_NAME_MAX, FAM_NONCE_LEN);
	return 0;
}

/* Encodes a HELLO response (the challenge); returns FAM_CHALLENGE_LEN. */
size_t
proto_put_challenge(uint8_t *out, const struct fam_challenge *m)
{
	out[0] = m->role;
	memset(out + 1, 0, 3);
	memcpy(out + 4, m->nonce, FAM_NONCE_LEN);
	put_padded(out + 4 + FAM_NONCE_LEN, FAM_NAME_MAX, m->node);
	return FAM_CHALLENGE_LEN;
}

/* Decodes and validates a HELLO response (the challenge). */
int
proto_get_challenge(const uint8_t *in, size_t len, struct fam_challenge *m)
{
	if (len != FAM_CHALLENGE_LEN)
		return -EPROTO;
	if (!proto_role_ok(in[0]) || !is_zero(in + 1, 3))
		return -EPROTO;
	m->role = in[0];
	memcpy(m->nonce, in + 4, FAM_NONCE_LEN);
	if (get_padded(in + 4 + FAM_NONCE_LEN, FAM_NAME_MAX, m->node,
	    true) < 0 || m->node[0] == '\0')
		return -EPROTO;
	return 0;
}

/* Encodes what an AUTH response says after the proof; FAM_HELLO_RESP_LEN. */
size_t
proto_put_hello_resp(uint8_t *out, const struct fam_hello_resp *m)
{
	out[0] = m->role;
	out[1] = m->piece_shift;
	memset(out + 2, 0, 2);
	put_u32(out + 4, m->features);
	put_u64(out + 8, m->session);
	put_u64(out + 16, m->instance);
	put_padded(out + 24, FAM_NAME_MAX, m->node);
	return FAM_HELLO_RESP_LEN;
}

/* Decodes and validates what an AUTH response says after the proof. */
int
proto_get_hello_resp(const uint8_t *in, size_t len, struct fam_hello_resp *m)
{
	if (len != FAM_HELLO_RESP_LEN)
		return -EPROTO;
	if (!proto_role_ok(in[0]) || !is_zero(in + 2, 2) ||
	    (in[1] != 0 && (in[1] < 12 || in[1] > 30)))
		return -EPROTO;
	m->role = in[0];
	m->piece_shift = in[1];
	m->features = get_u32(in + 4);
	m->session = get_u64(in + 8);
	m->instance = get_u64(in + 16);
	if (get_padded(in + 24, FAM_NAME_MAX, m->node, true) < 0 ||
	    m->node[0] == '\0')
		return -EPROTO;
	return 0;
}

/*
 * Encodes a REGION_CREATE request into cap bytes; returns its length, or 0
 * when it does not fit or a name or path is too long.
 */
size_t
proto_put_region_create(uint8_t *out, size_t cap,
    const struct fam_region_create *m)
{
	size_t nlen = strnlen(m->name, FAM_NAME_MAX + 1);
	size_t plen = strnlen(m->path, FAM_PATH_MAX + 1);
	size_t len = FAM_REGION_CREATE_MIN + nlen + plen;

	if (nlen > FAM_NAME_MAX || plen > FAM_PATH_MAX || len > cap)
		return 0;
	put_u64(out, m->size);
	put_u32(out + 8, m->flags);
	put_u16(out + 12, (uint16_t)nlen);
	put_u16(out + 14, (uint16_t)plen);
	put_u64(out + 16, m->place);
	memcpy(out + FAM_REGION_CREATE_MIN, m->name, nlen);
	memcpy(out + FAM_REGION_CREATE_MIN + nlen, m->path, plen);
	return len;
}

/*
 * Returns true when len bytes at p hold no NUL and no control character,
 * and are UTF-8.
 */
static bool
proto_text_ok(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!is_name_char(p[i]))
			return false;
	return proto_utf8_valid(p, len);
}

/* Decodes and validates a REGION_CREATE request. */
int
proto_get_region_create(const uint8_t *in, size_t len,
    struct fam_region_create *m)
{
	uint16_t nlen, plen;

	if (len < FAM_REGION_CREATE_MIN)
		return -EPROTO;
	m->size = get_u64(in);
	m->flags = get_u32(in + 8);
	nlen = get_u16(in + 12);
	plen = get_u16(in + 14);
	m->place = get_u64(in + 16);
	if (nlen > FAM_NAME_MAX || plen > FAM_PATH_MAX ||
	    len != FAM_REGION_CREATE_MIN + (size_t)nlen + plen)
		return -EPROTO;
	memcpy(m->name, in + FAM_REGION_CREATE_MIN, nlen);
	m->name[nlen] = '\0';
	memcpy(m->path, in + FAM_REGION_CREATE_MIN + nlen, plen);
	m->path[plen] = '\0';
	if (!proto_text_ok(in + FAM_REGION_CREATE_MIN, nlen) ||
	    !proto_text_ok(in + FAM_REGION_CREATE_MIN + nlen, plen))
		return -EINVAL;
	if (m->flags & ~FAM_RF_ALL)
		return -EINVAL;
	if ((m->flags & FAM_RF_SPARSE) &&
	    (m->flags & (FAM_RF_FILE | FAM_RF_SHARED)))
		return -EINVAL;
	if ((m->flags & FAM_RF_SHARED) && nlen == 0)
		return -EINVAL;
	if ((m->flags & FAM_RF_FILE) != 0 ? plen == 0 : plen != 0)
		return -EINVAL;
	if (m->size == 0 && !(m->flags & FAM_RF_FILE))
		return -EINVAL;
	return 0;
}

/* Encodes a REGION_CREATE response; returns FAM_REGION_INFO_LEN. */
size_t
proto_put_region_info(uint8_t *out, const struct fam_region_info *m)
{
	put_u32(out, m->region);
	put_u32(out + 4, m->rkey);
	put_u64(out + 8, m->size);
	put_u64(out + 16, m->addr);
	put_u32(out + 24, m->flags);
	put_u32(out + 28, 0);
	put_u64(out + 32, m->key);
	put_u64(out + 40, m->length);
	put_u64(out + 48, m->mem_instance);
	put_u32(out + 56, m->mem_region);
	put_u32(out + 60, 0);
	put_u64(out + 64, m->mem_key);
	return FAM_REGION_INFO_LEN;
}

/*
 * Decodes and validates a REGION_CREATE response: the mem_* fields are
 * all zero (a memory node's answer) or name a region (a dpu's); the
 * content length is within the size.
 */
int
proto_get_region_info(const uint8_t *in, size_t len, struct fam_region_info *m)
{
	if (len != FAM_REGION_INFO_LEN || !is_zero(in + 28, 4) ||
	    !is_zero(in + 60, 4))
		return -EPROTO;
	m->region = get_u32(in);
	m->rkey = get_u32(in + 4);
	m->size = get_u64(in + 8);
	m->addr = get_u64(in + 16);
	m->flags = get_u32(in + 24);
	m->key = get_u64(in + 32);
	m->length = get_u64(in + 40);
	m->mem_instance = get_u64(in + 48);
	m->mem_region = get_u32(in + 56);
	m->mem_key = get_u64(in + 64);
	if (m->region == 0 || m->size == 0 || (m->flags & ~FAM_RF_ALL) ||
	    m->length > m->size)
		return -EPROTO;
	if ((m->mem_instance == 0) != (m->mem_region == 0) ||
	    (m->mem_instance == 0 && m->mem_key != 0))
		return -EPROTO;
	return 0;
}

/* Encodes a REGION_FREE request; returns FAM_REGION_FREE_LEN. */
size_t
proto_put_region_free(uint8_t *out, uint32_t region)
{
	put_u32(out, region);
	put_u32(out + 4, 0);
	return FAM_REGION_FREE_LEN;
}

/* Decodes and validates a REGION_FREE request. */
int
proto_get_region_free(const uint8_t *in, size_t len, uint32_t *region)
{
	if (len != FAM_REGION_FREE_LEN || !is_zero(in + 4, 4))
		return -EPROTO;
	*region = get_u32(in);
	return 0;
}

/* Encodes a REGION_ADOPT request; returns FAM_REGION_ADOPT_LEN. */
size_t
proto_put_region_adopt(uint8_t *out, const struct fam_region_adopt *m)
{
	put_u64(out, m->instance);
	put_u32(out + 8, m->region);
	put_u32(out + 12, m->flags);
	put_u64(out + 16, m->key);
	put_u64(out + 24, 0);
	return FAM_REGION_ADOPT_LEN;
}

/* Decodes and validates a REGION_ADOPT request. */
int
proto_get_region_adopt(const uint8_t *in, size_t len,
    struct fam_region_adopt *m)
{
	if (len != FAM_REGION_ADOPT_LEN || !is_zero(in + 24, 8))
		return -EPROTO;
	m->instance = get_u64(in);
	m->region = get_u32(in + 8);
	m->flags = get_u32(in + 12);
	m->key = get_u64(in + 16);
	if (m->region == 0 || (m->flags & ~FAM_ADOPT_ALL))
		return -EINVAL;
	return 0;
}

/* Encodes a REGION_DISCARD request; returns FAM_REGION_DISCARD_LEN. */
size_t
proto_put_region_discard(uint8_t *out, const struct fam_region_discard *m)
{
	put_u32(out, m->region);
	put_u32(out + 4, 0);
	put_u64(out + 8, m->offset);
	put_u64(out + 16, m->len);
	return FAM_REGION_DISCARD_LEN;
}

/* Decodes and validates a REGION_DISCARD request. */
int
proto_get_region_discard(const uint8_t *in, size_t len,
    struct fam_region_discard *m)
{
	if (len != FAM_REGION_DISCARD_LEN || !is_zero(in + 4, 4))
		return -EPROTO;
	m->region = get_u32(in);
	m->offset = get_u64(in + 8);
	m->len = get_u64(in + 16);
	if (m->region == 0 || m->len == 0 || m->offset + m->len < m->offset)
		return -EINVAL;
	return 0;
}

/* Encodes a REGION_ADVISE request; returns FAM_REGION_ADVISE_LEN. */
size_t
proto_put_region_advise(uint8_t *out, uint32_t region, uint32_t advice)
{
	put_u32(out, region);
	put_u32(out + 4, advice);
	return FAM_REGION_ADVISE_LEN;
}

/* Decodes and validates a REGION_ADVISE request. */
int
proto_get_region_advise(const uint8_t *in, size_t len, uint32_t *region,
    uint32_t *advice)
{
	if (len != FAM_REGION_ADVISE_LEN)
		return -EPROTO;
	*region = get_u32(in);
	*advice = get_u32(in + 4);
	if (*advice > FAM_ADVICE_MAX)
		return -EINVAL;
	return 0;
}

/* Encodes a READ request; returns FAM_READ_LEN. */
size_t
proto_put_read(uint8_t *out, const struct fam_rw *m)
{
	put_u32(out, m->region);
	put_u32(out + 4, m->len);
	put_u64(out + 8, m->offset);
	put_u64(out + 16, m->dest_addr);
	put_u32(out + 24, m->dest_rkey);
	put_u32(out + 28, 0);
	return FAM_READ_LEN;
}

/* Checks the length and offset of a READ or WRITE. */
static int
proto_check_rw(const struct fam_rw *m)
{
	if (m->len == 0 || m->len > FAM_RW_MAX)
		return -EINVAL;
	if (m->offset > UINT64_MAX - m->len)
		return -ERANGE;
	return 0;
}

/* Decodes and validates a READ request. */
int
proto_get_read(const uint8_t *in, size_t len, struct fam_rw *m)
{
	if (len != FAM_READ_LEN || !is_zero(in + 28, 4))
		return -EPROTO;
	m->region = get_u32(in);
	m->len = get_u32(in + 4);
	m->offset = get_u64(in + 8);
	m->dest_addr = get_u64(in + 16);
	m->dest_rkey = get_u32(in + 24);
	return proto_check_rw(m);
}

/* Encodes the fixed part of a WRITE request; returns FAM_WRITE_HDR_LEN. */
size_t
proto_put_write_hdr(uint8_t *out, const struct fam_rw *m)
{
	put_u32(out, m->region);
	put_u32(out + 4, m->len);
	put_u64(out + 8, m->offset);
	return FAM_WRITE_HDR_LEN;
}

/*
 * Decodes the fixed part of a WRITE request. len is the whole payload
 * (fixed part and data); only the first FAM_WRITE_HDR_LEN bytes of in are
 * read, and the data length they give must be len - FAM_WRITE_HDR_LEN.
 */
int
proto_get_write_hdr(const uint8_t *in, size_t len, struct fam_rw *m)
{
	if (len < FAM_WRITE_HDR_LEN)
		return -EPROTO;
	m->region = get_u32(in);
	m->len = get_u32(in + 4);
	m->offset = get_u64(in + 8);
	m->dest_addr = 0;
	m->dest_rkey = 0;
	if ((size_t)m->len != len - FAM_WRITE_HDR_LEN)
		return -EPROTO;
	return proto_check_rw(m);
}

/* Returns the name of a message type for logs. */
const char *
proto_type_name(unsigned type)
{
	if (type == 0 || type > FAM_MSG_TYPE_MAX)
		return "unknown";
	return proto_type_names[type];
}

/*
 * Compares two secrets (NUL-terminated, at most FAM_SECRET_MAX characters)
 * in time that does not depend on where they differ.
 */
bool
proto_secret_equal(const char *a, const char *b)
{
	uint8_t pa[FAM_SECRET_MAX + 1] = { 0 }, pb[FAM_SECRET_MAX + 1] = { 0 };
	volatile uint8_t diff = 0;
	size_t la = strnlen(a, FAM_SECRET_MAX + 1);
	size_t lb = strnlen(b, FAM_SECRET_MAX + 1);

	memcpy(pa, a, la);
	memcpy(pb, b, lb);
	for (size_t i = 0; i < sizeof pa; i++)
		diff |= pa[i] ^ pb[i];
	return diff == 0;
}
