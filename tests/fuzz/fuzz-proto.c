/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz-proto.c - libFuzzer target: the wire protocol decoder (proto.c).
 *
 * The input is what a peer sends on a connection: frames of a 24-byte
 * header and its payload. Each header is decoded and checked as the
 * transports do (proto_get_hdr, proto_check_hdr, with the default limit
 * and a small one); a frame that passes goes to the decoder of its type,
 * as a request or a response by its flags, and the stream stops at the
 * first bad header, as the connection would close. Every payload is also
 * offered to every decoder, whatever the header says.
 *
 * What a decoder accepts must come back byte for byte when encoded again:
 * the decoders check every reserved byte and every padding, so the wire
 * form of a valid message is unique. Every name and path it accepts must
 * be a string JSON can carry (jansson's json_string): famctl shows them.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "wire/proto.h"
#include "fuzz.h"

#define FUZZ_SMALL_LIMIT 4096u /* a receiver's max_payload below the default */

/* Checks that text is a string JSON can carry. */
static void
fuzz_json_text(const char *text)
{
	json_t *j = json_string(text);

	fuzz_assert(j != NULL);
	json_decref(j);
}

/* Decodes a HELLO request; what passes must encode to the same bytes. */
static void
fuzz_hello(const uint8_t *p, size_t len)
{
	struct fam_hello m;
	uint8_t out[FAM_HELLO_LEN];

	memset(&m, 0xa5, sizeof m);
	if (proto_get_hello(p, len, &m) != 0)
		return;
	fuzz_assert(len == FAM_HELLO_LEN);
	fuzz_assert(m.node[0] != '\0' && strlen(m.node) <= FAM_NAME_MAX);
	fuzz_json_text(m.node);
	fuzz_assert(proto_put_hello(out, &m) == FAM_HELLO_LEN);
	fuzz_assert(memcmp(out, p, FAM_HELLO_LEN) == 0);
}

/*
 * Decodes a challenge (HELLO response); what passes must encode to the
 * same bytes, and the keys of a handshake with it agree on both sides.
 */
static void
fuzz_challenge(const uint8_t *p, size_t len)
{
	struct fam_challenge m;
	struct fam_hello hello = { .role = FAM_WIRE_ROLE_HOST, .node = "h" };
	struct fam_auth a, b;
	uint8_t out[FAM_CHALLENGE_LEN], key[FAM_KEY_LEN];
	uint8_t pa[FAM_PROOF_LEN], pb[FAM_PROOF_LEN];

	memset(&m, 0xa5, sizeof m);
	if (proto_get_challenge(p, len, &m) != 0)
		return;
	fuzz_assert(len == FAM_CHALLENGE_LEN);
	fuzz_assert(m.node[0] != '\0' && strlen(m.node) <= FAM_NAME_MAX);
	fuzz_json_text(m.node);
	fuzz_assert(proto_put_challenge(out, &m) == FAM_CHALLENGE_LEN);
	fuzz_assert(memcmp(out, p, FAM_CHALLENGE_LEN) == 0);
	memcpy(hello.nonce, p, FAM_NONCE_LEN < len ? FAM_NONCE_LEN : len);
	fuzz_assert(proto_auth_secret_key(m.node, key) == 0);
	fuzz_assert(proto_auth_derive(&a, key, &hello, &m) == 0);
	fuzz_assert(proto_auth_derive(&b, key, &hello, &m) == 0);
	fuzz_assert(proto_auth_client_proof(&a, 1, pa) == 0);
	fuzz_assert(proto_auth_client_proof(&b, 1, pb) == 0);
	fuzz_assert(proto_auth_equal(pa, pb, FAM_PROOF_LEN));
	fuzz_assert(proto_auth_client_proof(&b, 2, pb) == 0);
	fuzz_assert(!proto_auth_equal(pa, pb, FAM_PROOF_LEN));
}

/* Decodes a HELLO response; what passes must encode to the same bytes. */
static void
fuzz_hello_resp(const uint8_t *p, size_t len)
{
	struct fam_hello_resp m;
	uint8_t out[FAM_HELLO_RESP_LEN];

	memset(&m, 0xa5, sizeof m);
	if (proto_get_hello_resp(p, len, &m) != 0)
		return;
	fuzz_assert(len == FAM_HELLO_RESP_LEN);
	fuzz_assert(m.node[0] != '\0' && strlen(m.node) <= FAM_NAME_MAX);
	fuzz_json_text(m.node);
	fuzz_assert(proto_put_hello_resp(out, &m) == FAM_HELLO_RESP_LEN);
	fuzz_assert(memcmp(out, p, FAM_HELLO_RESP_LEN) == 0);
}

/* Decodes a REGION_CREATE request; what passes must encode the same. */
static void
fuzz_region_create(const uint8_t *p, size_t len)
{
	struct fam_region_create m;
	uint8_t out[FAM_REGION_CREATE_MIN + FAM_NAME_MAX + FAM_PATH_MAX];
	int rc;

	memset(&m, 0xa5, sizeof m);
	rc = proto_get_region_create(p, len, &m);
	if (rc != 0) {
		fuzz_assert(rc == -EPROTO || rc == -EINVAL);
		return;
	}
	fuzz_assert(strlen(m.name) <= FAM_NAME_MAX);
	fuzz_assert(strlen(m.path) <= FAM_PATH_MAX);
	fuzz_json_text(m.name);
	fuzz_json_text(m.path);
	fuzz_assert(!(m.flags & ~FAM_RF_ALL));
	fuzz_assert(proto_put_region_create(out, sizeof out, &m) == len);
	fuzz_assert(memcmp(out, p, len) == 0);
	/* Too small a buffer is refused, never overrun. */
	fuzz_assert(proto_put_region_create(out, len - 1, &m) == 0);
}

/* Decodes a REGION_CREATE (or LEASE) response; what passes must re-encode. */
static void
fuzz_region_info(const uint8_t *p, size_t len)
{
	struct fam_region_info m;
	uint8_t out[FAM_REGION_INFO_LEN];

	memset(&m, 0xa5, sizeof m);
	if (proto_get_region_info(p, len, &m) != 0)
		return;
	fuzz_assert(m.region != 0 && m.length <= m.size);
	fuzz_assert(proto_put_region_info(out, &m) == FAM_REGION_INFO_LEN);
	fuzz_assert(memcmp(out, p, FAM_REGION_INFO_LEN) == 0);
}

/* Decodes a REGION_FREE (or LEASE) request; what passes must re-encode. */
static void
fuzz_region_free(const uint8_t *p, size_t len)
{
	uint8_t out[FAM_REGION_FREE_LEN];
	uint32_t region;

	if (proto_get_region_free(p, len, &region) != 0)
		return;
	fuzz_assert(proto_put_region_free(out, region) == FAM_REGION_FREE_LEN);
	fuzz_assert(memcmp(out, p, FAM_REGION_FREE_LEN) == 0);
}

/* Decodes a REGION_DISCARD request; what passes must re-encode. */
static void
fuzz_region_discard(const uint8_t *p, size_t len)
{
	struct fam_region_discard m;
	uint8_t out[FAM_REGION_DISCARD_LEN];

	if (proto_get_region_discard(p, len, &m) != 0)
		return;
	fuzz_assert(m.region != 0 && m.len != 0 && m.offset + m.len > m.offset);
	fuzz_assert(proto_put_region_discard(out, &m) ==
	    FAM_REGION_DISCARD_LEN);
	fuzz_assert(memcmp(out, p, FAM_REGION_DISCARD_LEN) == 0);
}

/* Decodes a REGION_ADOPT request; what passes must re-encode. */
static void
fuzz_region_adopt(const uint8_t *p, size_t len)
{
	struct fam_region_adopt m;
	uint8_t out[FAM_REGION_ADOPT_LEN];
	int rc;

	memset(&m, 0xa5, sizeof m);
	rc = proto_get_region_adopt(p, len, &m);
	if (rc != 0) {
		fuzz_assert(rc == -EPROTO || rc == -EINVAL);
		return;
	}
	fuzz_assert(m.region != 0 && !(m.flags & ~FAM_ADOPT_ALL));
	fuzz_assert(proto_put_region_adopt(out, &m) == FAM_REGION_ADOPT_LEN);
	fuzz_assert(memcmp(out, p, FAM_REGION_ADOPT_LEN) == 0);
}

/* Decodes a REGION_ADVISE request; what passes must re-encode. */
static void
fuzz_region_advise(const uint8_t *p, size_t len)
{
	uint8_t out[FAM_REGION_ADVISE_LEN];
	uint32_t region, advice;
	int rc = proto_get_region_advise(p, len, &region, &advice);

	if (rc != 0) {
		fuzz_assert(rc == -EPROTO || rc == -EINVAL);
		return;
	}
	fuzz_assert(advice <= FAM_ADVICE_MAX);
	fuzz_assert(proto_put_region_advise(out, region, advice) ==
	    FAM_REGION_ADVISE_LEN);
	fuzz_assert(memcmp(out, p, FAM_REGION_ADVISE_LEN) == 0);
}

/* Decodes a READ request; what passes must re-encode and stay in range. */
static void
fuzz_read(const uint8_t *p, size_t len)
{
	struct fam_rw m;
	uint8_t out[FAM_READ_LEN];
	int rc;

	memset(&m, 0xa5, sizeof m);
	rc = proto_get_read(p, len, &m);
	if (rc != 0) {
		fuzz_assert(rc == -EPROTO || rc == -EINVAL || rc == -ERANGE);
		return;
	}
	fuzz_assert(m.len > 0 && m.len <= FAM_RW_MAX);
	fuzz_assert(m.offset + m.len >= m.offset);
	fuzz_assert(proto_put_read(out, &m) == FAM_READ_LEN);
	fuzz_assert(memcmp(out, p, FAM_READ_LEN) == 0);
}

/* Decodes the fixed part of a WRITE of len payload bytes. */
static void
fuzz_write_hdr(const uint8_t *p, size_t len)
{
	struct fam_rw m;
	uint8_t out[FAM_WRITE_HDR_LEN];
	int rc;

	memset(&m, 0xa5, sizeof m);
	rc = proto_get_write_hdr(p, len, &m);
	if (rc != 0) {
		fuzz_assert(rc == -EPROTO || rc == -EINVAL || rc == -ERANGE);
		return;
	}
	fuzz_assert(m.len > 0 && (size_t)m.len + FAM_WRITE_HDR_LEN == len);
	fuzz_assert(m.offset + m.len >= m.offset);
	fuzz_assert(proto_put_write_hdr(out, &m) == FAM_WRITE_HDR_LEN);
	fuzz_assert(memcmp(out, p, FAM_WRITE_HDR_LEN) == 0);
}

/* Offers a payload to every decoder. */
static void
fuzz_every_decoder(const uint8_t *p, size_t len)
{
	fuzz_hello(p, len);
	fuzz_hello_resp(p, len);
	fuzz_challenge(p, len);
	fuzz_region_create(p, len);
	fuzz_region_info(p, len);
	fuzz_region_free(p, len);
	fuzz_region_adopt(p, len);
	fuzz_region_advise(p, len);
	fuzz_read(p, len);
	fuzz_write_hdr(p, len);
}

/* Decodes a payload as the transports do for a header that passed. */
static void
fuzz_typed(const struct fam_hdr *h, const uint8_t *p, size_t len)
{
	bool resp = (h->flags & FAM_F_RESPONSE) != 0;

	if (resp && h->status != 0)
		return; /* an error response has no payload */
	switch (h->type) {
	case FAM_MSG_HELLO:
		if (resp)
			fuzz_challenge(p, len);
		else
			fuzz_hello(p, len);
		break;
	case FAM_MSG_AUTH:
		if (resp && len >= FAM_PROOF_LEN)
			fuzz_hello_resp(p + FAM_PROOF_LEN, len - FAM_PROOF_LEN);
		break;
	case FAM_MSG_REGION_CREATE:
		if (resp)
			fuzz_region_info(p, len);
		else
			fuzz_region_create(p, len);
		break;
	case FAM_MSG_REGION_FREE:
		if (!resp)
			fuzz_region_free(p, len);
		break;
	case FAM_MSG_REGION_LEASE:
		if (resp)
			fuzz_region_info(p, len);
		else
			fuzz_region_free(p, len);
		break;
	case FAM_MSG_REGION_ADOPT:
		if (resp)
			fuzz_region_info(p, len);
		else
			fuzz_region_adopt(p, len);
		break;
	case FAM_MSG_REGION_ADVISE:
		if (!resp)
			fuzz_region_advise(p, len);
		break;
	case FAM_MSG_REGION_DISCARD:
		if (!resp)
			fuzz_region_discard(p, len);
		break;
	case FAM_MSG_READ:
		if (!resp)
			fuzz_read(p, len);
		break;
	case FAM_MSG_WRITE:
		if (!resp)
			fuzz_write_hdr(p, len);
		break;
	default:
		break;
	}
}

/* Decodes one header; returns proto_check_hdr()'s verdict. */
static int
fuzz_hdr(const uint8_t *p, struct fam_hdr *h)
{
	uint8_t out[FAM_PROTO_HDR_LEN];
	int rc, small;

	fuzz_assert(proto_get_hdr(p, h) == 0);
	proto_put_hdr(out, h);
	fuzz_assert(memcmp(out, p, FAM_PROTO_HDR_LEN) == 0);
	fuzz_assert(proto_type_name(h->type) != NULL);
	rc = proto_check_hdr(h, 0);
	small = proto_check_hdr(h, FUZZ_SMALL_LIMIT);
	/* A smaller limit refuses more (as too large), never less. */
	if (rc == 0)
		fuzz_assert(h->len <= FAM_PROTO_MAX_PAYLOAD);
	if (small != rc)
		fuzz_assert(small == -EMSGSIZE && h->len > FUZZ_SMALL_LIMIT &&
		    rc != -EMSGSIZE);
	return rc;
}

/* Decodes one input as the frames a peer sends. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	while (size - off >= FAM_PROTO_HDR_LEN) {
		struct fam_hdr h;
		const uint8_t *payload = data + off + FAM_PROTO_HDR_LEN;
		size_t left = size - off - FAM_PROTO_HDR_LEN, len;
		uint8_t *copy;

		if (fuzz_hdr(data + off, &h) < 0)
			break;
		len = h.len < left ? h.len : left;
		/* A copy of its exact length, so a read past it is caught. */
		copy = malloc(len > 0 ? len : 1);
		if (copy == NULL)
			abort();
		memcpy(copy, payload, len);
		if (len == h.len)
			fuzz_typed(&h, copy, len);
		fuzz_every_decoder(copy, len);
		free(copy);
		off += FAM_PROTO_HDR_LEN + len;
	}
	if (off < size) {
		size_t len = size - off;
		uint8_t *copy = malloc(len);

		if (copy == NULL)
			abort();
		memcpy(copy, data + off, len);
		fuzz_every_decoder(copy, len);
		free(copy);
	}
	return 0;
}
