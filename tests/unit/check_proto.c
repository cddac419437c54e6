/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_proto.c - the wire protocol: every message survives a round trip,
 * and every malformed header or payload a peer could send is refused with
 * the right error before any field is used.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/proto.h"

/* A valid header of type and flags with a payload of len bytes. */
static struct fam_hdr
hdr(uint8_t type, uint16_t flags, uint32_t len)
{
	struct fam_hdr h = {
		.magic = FAM_PROTO_MAGIC,
		.version = FAM_PROTO_VERSION,
		.type = type,
		.flags = flags,
		.len = len,
		.id = 42,
	};

	return h;
}

/* Encodes h and decodes it again, as a receiver would. */
static struct fam_hdr
wire(const struct fam_hdr *h)
{
	uint8_t buf[FAM_PROTO_HDR_LEN];
	struct fam_hdr out;

	proto_put_hdr(buf, h);
	ck_assert_int_eq(proto_get_hdr(buf, &out), 0);
	return out;
}

/* A valid encoded HELLO request from node "n1" with nonce 0x5a... */
static void
hello_bytes(uint8_t out[FAM_HELLO_LEN])
{
	struct fam_hello m = { .role = FAM_WIRE_ROLE_HOST, .features = 3,
		.resume = 7 };

	strcpy(m.node, "n1");
	memset(m.nonce, 0x5a, sizeof m.nonce);
	ck_assert_uint_eq(proto_put_hello(out, &m), FAM_HELLO_LEN);
}

/* Encodes a REGION_CREATE by hand: the fields as given, then name, path. */
static size_t
create_bytes(uint8_t *out, uint64_t size, uint32_t flags, uint16_t nlen,
    uint16_t plen, const char *name, const char *path)
{
	struct fam_region_create m = { .size = size, .flags = flags };
	size_t len;

	snprintf(m.name, sizeof m.name, "%s", name);
	snprintf(m.path, sizeof m.path, "%s", path);
	len = proto_put_region_create(out, 2048, &m);
	ck_assert_uint_gt(len, 0);
	out[12] = (uint8_t)(nlen >> 8);
	out[13] = (uint8_t)nlen;
	out[14] = (uint8_t)(plen >> 8);
	out[15] = (uint8_t)plen;
	return len;
}

START_TEST(test_header_round_trip)
{
	struct fam_hdr h = hdr(FAM_MSG_READ, FAM_F_RESPONSE, 4096), out;
	uint8_t buf[FAM_PROTO_HDR_LEN];

	h.status = 0;
	h.id = 0x0102030405060708ull;
	out = wire(&h);
	ck_assert_uint_eq(out.magic, FAM_PROTO_MAGIC);
	ck_assert_uint_eq(out.version, FAM_PROTO_VERSION);
	ck_assert_uint_eq(out.type, FAM_MSG_READ);
	ck_assert_uint_eq(out.flags, FAM_F_RESPONSE);
	ck_assert_uint_eq(out.len, 4096);
	ck_assert_uint_eq(out.id, h.id);
	ck_assert_int_eq(proto_check_hdr(&out, 0), 0);
	proto_put_hdr(buf, &h);
	/* Big-endian on the wire: "FAMD" first, the id's high byte first. */
	ck_assert_mem_eq(buf, "FAMD", 4);
	ck_assert_uint_eq(buf[16], 0x01);
	ck_assert_uint_eq(buf[23], 0x08);
}
END_TEST

START_TEST(test_error_status_round_trip)
{
	struct fam_hdr h = hdr(FAM_MSG_REGION_CREATE, FAM_F_RESPONSE, 0), out;

	h.status = ENOSPC;
	out = wire(&h);
	ck_assert_int_eq(out.status, ENOSPC);
	ck_assert_int_eq(proto_check_hdr(&out, 0), 0);
}
END_TEST

START_TEST(test_bad_magic_rejected)
{
	struct fam_hdr h = hdr(FAM_MSG_STATS, 0, 0);

	h.magic = 0x47455420; /* "GET " */
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
}
END_TEST

START_TEST(test_wrong_version_rejected)
{
	struct fam_hdr h = hdr(FAM_MSG_HELLO, 0, FAM_HELLO_LEN);

	h.version = FAM_PROTO_VERSION + 1;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTONOSUPPORT);
	h.version = 0;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTONOSUPPORT);
}
END_TEST

START_TEST(test_unknown_type_rejected)
{
	struct fam_hdr h = hdr(0, 0, 0);

	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h.type = FAM_MSG_TYPE_MAX + 1;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h.type = 0xff;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
}
END_TEST

START_TEST(test_unknown_flags_rejected)
{
	struct fam_hdr h = hdr(FAM_MSG_STATS, 0x8000, 0);

	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h.flags = FAM_F_RESPONSE | 0x0002;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
}
END_TEST

START_TEST(test_huge_length_rejected)
{
	struct fam_hdr h = hdr(FAM_MSG_WRITE, 0, 0xffffffffu);

	ck_assert_int_eq(proto_check_hdr(&h, 0), -EMSGSIZE);
	h.len = FAM_PROTO_MAX_PAYLOAD + 1;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EMSGSIZE);
}
END_TEST

START_TEST(test_length_over_receiver_limit_rejected)
{
	struct fam_hdr h = hdr(FAM_MSG_WRITE, 0, FAM_WRITE_HDR_LEN + 65536);

	ck_assert_int_eq(proto_check_hdr(&h, 0), 0);
	ck_assert_int_eq(proto_check_hdr(&h, 65536), -EMSGSIZE);
	ck_assert_int_eq(proto_check_hdr(&h, 65536 + FAM_WRITE_HDR_LEN), 0);
}
END_TEST

START_TEST(test_truncated_hello_length_rejected)
{
	struct fam_hdr h = hdr(FAM_MSG_HELLO, 0, FAM_HELLO_LEN - 1);

	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h.len = FAM_HELLO_LEN + 1;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h.len = 0;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
}
END_TEST

START_TEST(test_length_outside_type_bounds_rejected)
{
	struct fam_hdr h;

	h = hdr(FAM_MSG_READ, 0, FAM_READ_LEN + 8);
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h = hdr(FAM_MSG_REGION_FREE, 0, 4);
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h = hdr(FAM_MSG_REGION_CREATE, 0, FAM_REGION_CREATE_MIN - 1);
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h = hdr(FAM_MSG_REGION_CREATE, 0,
	    FAM_REGION_CREATE_MIN + FAM_NAME_MAX + FAM_PATH_MAX + 1);
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h = hdr(FAM_MSG_STATS, 0, 1);
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h = hdr(FAM_MSG_WRITE, 0, FAM_WRITE_HDR_LEN - 1);
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h = hdr(FAM_MSG_WRITE, FAM_F_RESPONSE, 1);
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h = hdr(FAM_MSG_READ, FAM_F_RESPONSE, FAM_RW_MAX + 1);
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h = hdr(FAM_MSG_HELLO, FAM_F_RESPONSE, FAM_HELLO_LEN);
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h = hdr(FAM_MSG_REGION_CREATE, FAM_F_RESPONSE, 0);
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
}
END_TEST

START_TEST(test_largest_messages_accepted)
{
	struct fam_hdr h;

	h = hdr(FAM_MSG_WRITE, 0, FAM_WRITE_HDR_LEN + FAM_RW_MAX);
	ck_assert_int_eq(proto_check_hdr(&h, 0), 0);
	h = hdr(FAM_MSG_READ, FAM_F_RESPONSE, FAM_RW_MAX);
	ck_assert_int_eq(proto_check_hdr(&h, 0), 0);
	h = hdr(FAM_MSG_STATS, FAM_F_RESPONSE, FAM_PROTO_MAX_PAYLOAD);
	ck_assert_int_eq(proto_check_hdr(&h, 0), 0);
}
END_TEST

START_TEST(test_request_with_status_rejected)
{
	struct fam_hdr h = hdr(FAM_MSG_STATS, 0, 0);

	h.status = EIO;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
}
END_TEST

START_TEST(test_negative_or_huge_status_rejected)
{
	struct fam_hdr h = hdr(FAM_MSG_STATS, FAM_F_RESPONSE, 0);

	h.status = -1;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h.status = FAM_STATUS_MAX + 1;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h.status = 0x7fffffff;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
}
END_TEST

START_TEST(test_error_response_with_payload_rejected)
{
	struct fam_hdr h = hdr(FAM_MSG_READ, FAM_F_RESPONSE, 4096);

	h.status = ENOENT;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
}
END_TEST

START_TEST(test_hello_round_trip)
{
	uint8_t buf[FAM_HELLO_LEN];
	struct fam_hello m;

	hello_bytes(buf);
	ck_assert_int_eq(proto_get_hello(buf, sizeof buf, &m), 0);
	ck_assert_uint_eq(m.role, FAM_WIRE_ROLE_HOST);
	ck_assert_uint_eq(m.features, 3);
	ck_assert_uint_eq(m.resume, 7);
	ck_assert_str_eq(m.node, "n1");
	ck_assert_uint_eq(m.nonce[0], 0x5a);
	ck_assert_uint_eq(m.nonce[FAM_NONCE_LEN - 1], 0x5a);
}
END_TEST

START_TEST(test_hello_full_length_fields_round_trip)
{
	uint8_t buf[FAM_HELLO_LEN];
	struct fam_hello m = { .role = FAM_WIRE_ROLE_DPU }, out;

	memset(m.node, 'n', FAM_NAME_MAX);
	memset(m.nonce, 's', FAM_NONCE_LEN);
	proto_put_hello(buf, &m);
	ck_assert_int_eq(proto_get_hello(buf, sizeof buf, &out), 0);
	ck_assert_uint_eq(strlen(out.node), FAM_NAME_MAX);
	ck_assert_int_eq(memcmp(out.nonce, m.nonce, FAM_NONCE_LEN), 0);
	ck_assert_str_eq(out.node, m.node);
}
END_TEST

START_TEST(test_truncated_hello_rejected)
{
	uint8_t buf[FAM_HELLO_LEN];
	struct fam_hello m;

	hello_bytes(buf);
	ck_assert_int_eq(proto_get_hello(buf, FAM_HELLO_LEN - 1, &m), -EPROTO);
	ck_assert_int_eq(proto_get_hello(buf, 0, &m), -EPROTO);
}
END_TEST

START_TEST(test_hello_reserved_bytes_rejected)
{
	uint8_t buf[FAM_HELLO_LEN];
	struct fam_hello m;

	hello_bytes(buf);
	buf[2] = 1;
	ck_assert_int_eq(proto_get_hello(buf, sizeof buf, &m), -EPROTO);
}
END_TEST

START_TEST(test_hello_unknown_role_rejected)
{
	uint8_t buf[FAM_HELLO_LEN];
	struct fam_hello m;

	hello_bytes(buf);
	buf[0] = 0;
	ck_assert_int_eq(proto_get_hello(buf, sizeof buf, &m), -EPROTO);
	buf[0] = FAM_WIRE_ROLE_MEMORY + 1;
	ck_assert_int_eq(proto_get_hello(buf, sizeof buf, &m), -EPROTO);
}
END_TEST

START_TEST(test_hello_bytes_smuggled_after_node_nul_rejected)
{
	uint8_t buf[FAM_HELLO_LEN];
	struct fam_hello m;

	hello_bytes(buf);
	buf[16 + 10] = 'x'; /* "n1\0\0...x": garbage in the padding */
	ck_assert_int_eq(proto_get_hello(buf, sizeof buf, &m), -EPROTO);
}
END_TEST

START_TEST(test_hello_carries_a_nonce_and_no_secret)
{
	struct fam_hello m = { .role = FAM_WIRE_ROLE_HOST }, out;
	uint8_t buf[FAM_HELLO_LEN];

	/* Protocol 2: the last 32 bytes are the nonce, any bytes at all. */
	strcpy(m.node, "n1");
	memset(m.nonce, 0, sizeof m.nonce);
	m.nonce[FAM_NONCE_LEN - 1] = 'x';
	proto_put_hello(buf, &m);
	ck_assert_uint_eq(buf[FAM_HELLO_LEN - 1], 'x');
	ck_assert_int_eq(proto_get_hello(buf, sizeof buf, &out), 0);
	ck_assert_uint_eq(out.nonce[FAM_NONCE_LEN - 1], 'x');
	ck_assert_uint_eq(FAM_HELLO_LEN, 16 + FAM_NAME_MAX + FAM_NONCE_LEN);
}
END_TEST

START_TEST(test_hello_control_characters_in_node_rejected)
{
	uint8_t buf[FAM_HELLO_LEN];
	struct fam_hello m;

	hello_bytes(buf);
	buf[17] = '\n'; /* a node name that would forge log lines */
	ck_assert_int_eq(proto_get_hello(buf, sizeof buf, &m), -EPROTO);
	hello_bytes(buf);
	buf[17] = 0x1b;
	ck_assert_int_eq(proto_get_hello(buf, sizeof buf, &m), -EPROTO);
}
END_TEST

/* A node name that is not UTF-8 would vanish from famctl's JSON. */
START_TEST(test_hello_node_name_not_utf8_rejected)
{
	uint8_t buf[FAM_HELLO_LEN];
	struct fam_hello m;
	uint8_t rbuf[FAM_HELLO_RESP_LEN];
	struct fam_hello_resp r = { .role = FAM_WIRE_ROLE_MEMORY }, rout;

	hello_bytes(buf);
	buf[17] = 0xff;
	ck_assert_int_eq(proto_get_hello(buf, sizeof buf, &m), -EPROTO);
	hello_bytes(buf);
	buf[17] = 0xc3; /* a sequence cut short by the padding */
	ck_assert_int_eq(proto_get_hello(buf, sizeof buf, &m), -EPROTO);
	hello_bytes(buf);
	memcpy(buf + 16, "n\xc3\xa9", 3); /* U+00E9: fine */
	ck_assert_int_eq(proto_get_hello(buf, sizeof buf, &m), 0);
	ck_assert_str_eq(m.node, "n\xc3\xa9");
	/* The secret is not text: any byte but NUL may be in it. */
	hello_bytes(buf);
	buf[16 + FAM_NAME_MAX] = 0xff;
	ck_assert_int_eq(proto_get_hello(buf, sizeof buf, &m), 0);
	strcpy(r.node, "mem\x80");
	proto_put_hello_resp(rbuf, &r);
	ck_assert_int_eq(proto_get_hello_resp(rbuf, sizeof rbuf, &rout),
	    -EPROTO);
}
END_TEST

START_TEST(test_hello_empty_node_rejected)
{
	uint8_t buf[FAM_HELLO_LEN];
	struct fam_hello m;

	hello_bytes(buf);
	memset(buf + 16, 0, FAM_NAME_MAX);
	ck_assert_int_eq(proto_get_hello(buf, sizeof buf, &m), -EPROTO);
}
END_TEST

START_TEST(test_hello_resp_round_trip)
{
	struct fam_hello_resp m = { .role = FAM_WIRE_ROLE_MEMORY,
		.features = 1, .session = 0xdeadbeefcafef00dull,
		.instance = 0x1122334455667788ull }, out;
	uint8_t buf[FAM_HELLO_RESP_LEN];

	strcpy(m.node, "mem0");
	ck_assert_uint_eq(proto_put_hello_resp(buf, &m), FAM_HELLO_RESP_LEN);
	ck_assert_int_eq(proto_get_hello_resp(buf, sizeof buf, &out), 0);
	ck_assert_uint_eq(out.role, FAM_WIRE_ROLE_MEMORY);
	ck_assert_uint_eq(out.features, 1);
	ck_assert_uint_eq(out.session, m.session);
	ck_assert_uint_eq(out.instance, m.instance);
	ck_assert_str_eq(out.node, "mem0");
	ck_assert_int_eq(proto_get_hello_resp(buf, sizeof buf - 1, &out),
	    -EPROTO);
	buf[3] = 1;
	ck_assert_int_eq(proto_get_hello_resp(buf, sizeof buf, &out), -EPROTO);
}
END_TEST

START_TEST(test_hello_resp_piece_shift_in_range_only)
{
	struct fam_hello_resp m = { .role = FAM_WIRE_ROLE_DPU,
		.piece_shift = 18, .session = 1, .instance = 2 }, out;
	uint8_t buf[FAM_HELLO_RESP_LEN];

	strcpy(m.node, "dpu0");
	proto_put_hello_resp(buf, &m);
	ck_assert_int_eq(proto_get_hello_resp(buf, sizeof buf, &out), 0);
	ck_assert_uint_eq(out.piece_shift, 18);
	buf[1] = 11;
	ck_assert_int_eq(proto_get_hello_resp(buf, sizeof buf, &out), -EPROTO);
	buf[1] = 31;
	ck_assert_int_eq(proto_get_hello_resp(buf, sizeof buf, &out), -EPROTO);
	buf[1] = 0;
	ck_assert_int_eq(proto_get_hello_resp(buf, sizeof buf, &out), 0);
	ck_assert_uint_eq(out.piece_shift, 0);
}
END_TEST

START_TEST(test_region_create_round_trip)
{
	struct fam_region_create m = { .size = 1 << 20,
		.flags = FAM_RF_FILE | FAM_RF_SHARED }, out;
	uint8_t buf[2048];
	size_t len;

	strcpy(m.name, "graph");
	strcpy(m.path, "sub/graph.bin");
	len = proto_put_region_create(buf, sizeof buf, &m);
	ck_assert_uint_eq(len, FAM_REGION_CREATE_MIN + 5 + 13);
	ck_assert_int_eq(proto_get_region_create(buf, len, &out), 0);
	ck_assert_uint_eq(out.size, 1 << 20);
	ck_assert_uint_eq(out.flags, FAM_RF_FILE | FAM_RF_SHARED);
	ck_assert_str_eq(out.name, "graph");
	ck_assert_str_eq(out.path, "sub/graph.bin");
}
END_TEST

START_TEST(test_region_create_longest_name_and_path_round_trip)
{
	struct fam_region_create *m = calloc(1, sizeof *m), *out;
	uint8_t buf[2048];
	size_t len;

	out = calloc(1, sizeof *out);
	m->flags = FAM_RF_FILE | FAM_RF_SHARED;
	memset(m->name, 'a', FAM_NAME_MAX);
	memset(m->path, 'p', FAM_PATH_MAX);
	len = proto_put_region_create(buf, sizeof buf, m);
	ck_assert_uint_eq(len, FAM_REGION_CREATE_MIN + FAM_NAME_MAX +
	    FAM_PATH_MAX);
	ck_assert_int_eq(proto_get_region_create(buf, len, out), 0);
	ck_assert_str_eq(out->name, m->name);
	ck_assert_str_eq(out->path, m->path);
	/* No room: nothing is written. */
	ck_assert_uint_eq(proto_put_region_create(buf, len - 1, m), 0);
	free(m);
	free(out);
}
END_TEST

START_TEST(test_region_create_name_length_over_max_rejected)
{
	uint8_t buf[2048];
	size_t len;
	struct fam_region_create m;

	len = create_bytes(buf, 4096, 0, FAM_NAME_MAX + 1, 0, "", "");
	memset(buf + len, 'x', FAM_NAME_MAX + 1);
	len += FAM_NAME_MAX + 1;
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EPROTO);
}
END_TEST

START_TEST(test_region_create_path_length_over_max_rejected)
{
	uint8_t buf[2048];
	size_t len;
	struct fam_region_create m;

	len = create_bytes(buf, 4096, FAM_RF_FILE, 0, FAM_PATH_MAX + 1, "",
	    "");
	memset(buf + len, 'x', FAM_PATH_MAX + 1);
	len += FAM_PATH_MAX + 1;
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EPROTO);
}
END_TEST

START_TEST(test_region_create_lengths_past_payload_rejected)
{
	uint8_t buf[2048];
	size_t len;
	struct fam_region_create m;

	/* name_len claims 10 bytes, the payload carries 3. */
	len = create_bytes(buf, 4096, 0, 10, 0, "abc", "");
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EPROTO);
	/* Trailing bytes no length accounts for. */
	len = create_bytes(buf, 4096, 0, 1, 0, "abc", "");
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EPROTO);
	ck_assert_int_eq(proto_get_region_create(buf, 10, &m), -EPROTO);
}
END_TEST

START_TEST(test_region_create_place_round_trip)
{
	struct fam_region_create m = { .size = 4096,
		.place = 0x1122334455667788ull }, out;
	uint8_t buf[2048];
	size_t len;

	len = proto_put_region_create(buf, sizeof buf, &m);
	ck_assert_uint_eq(buf[16], 0x11);
	ck_assert_int_eq(proto_get_region_create(buf, len, &out), 0);
	ck_assert_uint_eq(out.place, m.place);
}
END_TEST

START_TEST(test_region_create_unknown_flags_refused)
{
	uint8_t buf[2048];
	size_t len;
	struct fam_region_create m;

	len = create_bytes(buf, 4096, 0x100, 0, 0, "", "");
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EINVAL);
}
END_TEST

START_TEST(test_region_create_inconsistent_fields_refused)
{
	uint8_t buf[2048];
	size_t len;
	struct fam_region_create m;

	/* Shared without a name. */
	len = create_bytes(buf, 4096, FAM_RF_SHARED, 0, 0, "", "");
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EINVAL);
	/* A file without a path. */
	len = create_bytes(buf, 0, FAM_RF_FILE, 0, 0, "", "");
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EINVAL);
	/* A path without FAM_RF_FILE. */
	len = create_bytes(buf, 4096, 0, 0, 1, "", "f");
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EINVAL);
	/* Size 0 of a region that is not a file. */
	len = create_bytes(buf, 0, 0, 0, 0, "", "");
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EINVAL);
	/* A sparse file, or a sparse shared region: never. */
	len = create_bytes(buf, 0, FAM_RF_FILE | FAM_RF_SPARSE, 0, 1, "", "f");
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EINVAL);
	len = create_bytes(buf, 4096, FAM_RF_SHARED | FAM_RF_SPARSE, 1, 0, "n",
	    "");
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EINVAL);
	/* A sparse region of its own. */
	len = create_bytes(buf, 1ull << 40, FAM_RF_SPARSE, 0, 0, "", "");
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), 0);
	ck_assert_uint_eq(m.flags, FAM_RF_SPARSE);
	/* Size 0 of a file means the file's size. */
	len = create_bytes(buf, 0, FAM_RF_FILE, 0, 1, "", "f");
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), 0);
}
END_TEST

START_TEST(test_region_create_nul_or_control_in_name_refused)
{
	uint8_t buf[2048];
	size_t len;
	struct fam_region_create m;

	len = create_bytes(buf, 4096, 0, 3, 0, "abc", "");
	buf[FAM_REGION_CREATE_MIN + 1] = '\0';
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EINVAL);
	buf[FAM_REGION_CREATE_MIN + 1] = '\n';
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EINVAL);
	len = create_bytes(buf, 0, FAM_RF_FILE, 0, 3, "", "a/b");
	buf[FAM_REGION_CREATE_MIN + 2] = '\0';
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EINVAL);
}
END_TEST

START_TEST(test_region_create_name_or_path_not_utf8_refused)
{
	uint8_t buf[2048];
	size_t len;
	struct fam_region_create m;

	len = create_bytes(buf, 4096, FAM_RF_PERSISTENT, 4, 0, "kep\xff", "");
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EINVAL);
	len = create_bytes(buf, 0, FAM_RF_FILE, 0, 5, "", "a/\xed\xa0\x80");
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), -EINVAL);
	len = create_bytes(buf, 0, FAM_RF_FILE, 0, 4, "", "\xe2\x82\xac!");
	ck_assert_int_eq(proto_get_region_create(buf, len, &m), 0);
}
END_TEST

START_TEST(test_utf8_validation)
{
	static const struct {
		const char *s;
		bool ok;
	} cases[] = {
		{ "plain ascii", true },
		{ "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", true },
		{ "\xc3", false },                 /* cut short */
		{ "\xa9", false },                 /* a stray continuation */
		{ "\xc3(", false },                /* a missing continuation */
		{ "\xc0\xaf", false },             /* overlong '/' */
		{ "\xe0\x80\xaf", false },         /* overlong '/' */
		{ "\xf0\x80\x80\xaf", false },     /* overlong '/' */
		{ "\xed\xa0\x80", false },         /* a surrogate */
		{ "\xf4\x90\x80\x80", false },     /* past U+10FFFF */
		{ "\xf8\x88\x80\x80\x80", false }, /* five bytes */
		{ "\xef\xbf\xbf\xf4\x8f\xbf\xbf", true }, /* U+FFFF, U+10FFFF */
	};

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		ck_assert_msg(proto_utf8_valid(cases[i].s, strlen(cases[i].s)) ==
		    cases[i].ok, "case %zu", i);
}
END_TEST

START_TEST(test_region_info_round_trip)
{
	struct fam_region_info m = { .region = 9, .rkey = 0x1234,
		.size = 1 << 21, .addr = 0x7f0000000000ull,
		.flags = FAM_RF_PERSISTENT, .length = 2000001 }, out;
	uint8_t buf[FAM_REGION_INFO_LEN];

	ck_assert_uint_eq(proto_put_region_info(buf, &m), FAM_REGION_INFO_LEN);
	ck_assert_int_eq(proto_get_region_info(buf, sizeof buf, &out), 0);
	ck_assert_uint_eq(out.region, 9);
	ck_assert_uint_eq(out.rkey, 0x1234);
	ck_assert_uint_eq(out.size, 1 << 21);
	ck_assert_uint_eq(out.addr, m.addr);
	ck_assert_uint_eq(out.flags, FAM_RF_PERSISTENT);
	ck_assert_uint_eq(out.length, 2000001);
	ck_assert_uint_eq(out.key, 0);
	ck_assert_uint_eq(out.mem_instance, 0);
	ck_assert_uint_eq(out.mem_region, 0);
}
END_TEST

START_TEST(test_region_info_key_apart_from_lease_rkey)
{
	struct fam_region_info m = { .region = 9, .rkey = 0x1234,
		.size = 4096, .key = 0x89abcdef01234567ull, .length = 4096 },
		out;
	uint8_t buf[FAM_REGION_INFO_LEN];

	proto_put_region_info(buf, &m);
	/* The key, 64 bits, after a reserved word; the rkey stays put. */
	ck_assert_uint_eq(buf[32], 0x89);
	ck_assert_uint_eq(buf[39], 0x67);
	ck_assert_uint_eq(buf[7], 0x34);
	ck_assert_int_eq(proto_get_region_info(buf, sizeof buf, &out), 0);
	ck_assert_uint_eq(out.key, 0x89abcdef01234567ull);
	ck_assert_uint_eq(out.rkey, 0x1234);
	ck_assert_uint_eq(out.length, 4096);
}
END_TEST

START_TEST(test_region_info_from_dpu_round_trip)
{
	struct fam_region_info m = { .region = 3, .size = 65536,
		.length = 60000, .mem_instance = 0xfeedfacecafebeefull,
		.mem_region = 12, .mem_key = 0xabcdef01 }, out;
	uint8_t buf[FAM_REGION_INFO_LEN];

	proto_put_region_info(buf, &m);
	ck_assert_int_eq(proto_get_region_info(buf, sizeof buf, &out), 0);
	ck_assert_uint_eq(out.mem_instance, m.mem_instance);
	ck_assert_uint_eq(out.mem_region, 12);
	ck_assert_uint_eq(out.mem_key, 0xabcdef01);
	ck_assert_uint_eq(out.length, 60000);
	ck_assert_uint_eq(out.key, 0);
}
END_TEST

START_TEST(test_region_info_half_memory_location_rejected)
{
	struct fam_region_info m = { .region = 3, .size = 65536,
		.mem_instance = 5 }, out;
	uint8_t buf[FAM_REGION_INFO_LEN];

	proto_put_region_info(buf, &m);
	ck_assert_int_eq(proto_get_region_info(buf, sizeof buf, &out), -EPROTO);
	m.mem_instance = 0;
	m.mem_region = 4;
	proto_put_region_info(buf, &m);
	ck_assert_int_eq(proto_get_region_info(buf, sizeof buf, &out), -EPROTO);
	m.mem_region = 0;
	m.mem_key = 9;
	proto_put_region_info(buf, &m);
	ck_assert_int_eq(proto_get_region_info(buf, sizeof buf, &out), -EPROTO);
}
END_TEST

START_TEST(test_region_adopt_round_trip)
{
	struct fam_region_adopt m = { .instance = 0x0102030405060708ull,
		.region = 77, .key = 0xdeadbeef, .flags = FAM_ADOPT_EXCLUSIVE },
		out;
	uint8_t buf[FAM_REGION_ADOPT_LEN];

	ck_assert_uint_eq(proto_put_region_adopt(buf, &m),
	    FAM_REGION_ADOPT_LEN);
	ck_assert_uint_eq(buf[0], 0x01);
	ck_assert_int_eq(proto_get_region_adopt(buf, sizeof buf, &out), 0);
	ck_assert_uint_eq(out.instance, m.instance);
	ck_assert_uint_eq(out.region, 77);
	ck_assert_uint_eq(out.key, 0xdeadbeef);
	ck_assert_uint_eq(out.flags, FAM_ADOPT_EXCLUSIVE);
}
END_TEST

START_TEST(test_region_adopt_malformed_or_bad_refused)
{
	struct fam_region_adopt m = { .region = 1 }, out;
	uint8_t buf[FAM_REGION_ADOPT_LEN];

	proto_put_region_adopt(buf, &m);
	ck_assert_int_eq(proto_get_region_adopt(buf, FAM_REGION_ADOPT_LEN - 1,
	    &out), -EPROTO);
	buf[FAM_REGION_ADOPT_LEN - 1] = 1;
	ck_assert_int_eq(proto_get_region_adopt(buf, sizeof buf, &out),
	    -EPROTO);
	m.flags = 0x10;
	proto_put_region_adopt(buf, &m);
	ck_assert_int_eq(proto_get_region_adopt(buf, sizeof buf, &out),
	    -EINVAL);
	m.flags = 0;
	m.region = 0;
	proto_put_region_adopt(buf, &m);
	ck_assert_int_eq(proto_get_region_adopt(buf, sizeof buf, &out),
	    -EINVAL);
}
END_TEST

START_TEST(test_region_advise_round_trip_and_unknown_advice_refused)
{
	uint8_t buf[FAM_REGION_ADVISE_LEN];
	uint32_t region, advice;

	proto_put_region_advise(buf, 5, FAM_ADVICE_STATIC);
	ck_assert_int_eq(proto_get_region_advise(buf, sizeof buf, &region,
	    &advice), 0);
	ck_assert_uint_eq(region, 5);
	ck_assert_uint_eq(advice, FAM_ADVICE_STATIC);
	ck_assert_int_eq(proto_get_region_advise(buf, 7, &region, &advice),
	    -EPROTO);
	proto_put_region_advise(buf, 5, FAM_ADVICE_MAX + 1);
	ck_assert_int_eq(proto_get_region_advise(buf, sizeof buf, &region,
	    &advice), -EINVAL);
}
END_TEST

START_TEST(test_background_flag_only_on_read_write_requests)
{
	struct fam_hdr h = hdr(FAM_MSG_READ, FAM_F_BACKGROUND, FAM_READ_LEN);

	ck_assert_int_eq(proto_check_hdr(&h, 0), 0);
	h = hdr(FAM_MSG_WRITE, FAM_F_BACKGROUND, FAM_WRITE_HDR_LEN + 64);
	ck_assert_int_eq(proto_check_hdr(&h, 0), 0);
	h = hdr(FAM_MSG_REGION_CREATE, FAM_F_BACKGROUND, FAM_REGION_CREATE_MIN);
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h = hdr(FAM_MSG_READ, FAM_F_BACKGROUND | FAM_F_RESPONSE, 64);
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
}
END_TEST

START_TEST(test_region_info_malformed_rejected)
{
	struct fam_region_info m = { .region = 9, .size = 4096 }, out;
	uint8_t buf[FAM_REGION_INFO_LEN];

	proto_put_region_info(buf, &m);
	ck_assert_int_eq(proto_get_region_info(buf, sizeof buf - 1, &out),
	    -EPROTO);
	buf[40] = 1; /* the length's top byte */
	ck_assert_int_eq(proto_get_region_info(buf, sizeof buf, &out), -EPROTO);
	/* More content than room. */
	m.length = 4097;
	proto_put_region_info(buf, &m);
	ck_assert_int_eq(proto_get_region_info(buf, sizeof buf, &out), -EPROTO);
	m.length = 0;
	m.flags = 0x80;
	proto_put_region_info(buf, &m);
	ck_assert_int_eq(proto_get_region_info(buf, sizeof buf, &out), -EPROTO);
	m.flags = 0;
	m.region = 0;
	proto_put_region_info(buf, &m);
	ck_assert_int_eq(proto_get_region_info(buf, sizeof buf, &out), -EPROTO);
}
END_TEST

START_TEST(test_region_free_round_trip)
{
	uint8_t buf[FAM_REGION_FREE_LEN];
	uint32_t id = 0;

	ck_assert_uint_eq(proto_put_region_free(buf, 77), FAM_REGION_FREE_LEN);
	ck_assert_int_eq(proto_get_region_free(buf, sizeof buf, &id), 0);
	ck_assert_uint_eq(id, 77);
}
END_TEST

START_TEST(test_region_free_reserved_set_rejected)
{
	uint8_t buf[FAM_REGION_FREE_LEN];
	uint32_t id;

	proto_put_region_free(buf, 77);
	buf[7] = 1;
	ck_assert_int_eq(proto_get_region_free(buf, sizeof buf, &id), -EPROTO);
	ck_assert_int_eq(proto_get_region_free(buf, 4, &id), -EPROTO);
}
END_TEST

START_TEST(test_read_round_trip)
{
	struct fam_rw m = { .region = 3, .len = 65536, .offset = 1 << 30,
		.dest_addr = 0xabcdef, .dest_rkey = 5 }, out;
	uint8_t buf[FAM_READ_LEN];

	ck_assert_uint_eq(proto_put_read(buf, &m), FAM_READ_LEN);
	ck_assert_int_eq(proto_get_read(buf, sizeof buf, &out), 0);
	ck_assert_uint_eq(out.region, 3);
	ck_assert_uint_eq(out.len, 65536);
	ck_assert_uint_eq(out.offset, 1 << 30);
	ck_assert_uint_eq(out.dest_addr, 0xabcdef);
	ck_assert_uint_eq(out.dest_rkey, 5);
}
END_TEST

START_TEST(test_read_reserved_set_rejected)
{
	struct fam_rw m = { .region = 3, .len = 4096 }, out;
	uint8_t buf[FAM_READ_LEN];

	proto_put_read(buf, &m);
	buf[28] = 0x80;
	ck_assert_int_eq(proto_get_read(buf, sizeof buf, &out), -EPROTO);
	ck_assert_int_eq(proto_get_read(buf, 16, &out), -EPROTO);
}
END_TEST

START_TEST(test_read_zero_or_oversized_length_refused)
{
	struct fam_rw m = { .region = 3, .len = 0 }, out;
	uint8_t buf[FAM_READ_LEN];

	proto_put_read(buf, &m);
	ck_assert_int_eq(proto_get_read(buf, sizeof buf, &out), -EINVAL);
	m.len = FAM_RW_MAX + 1;
	proto_put_read(buf, &m);
	ck_assert_int_eq(proto_get_read(buf, sizeof buf, &out), -EINVAL);
	m.len = FAM_RW_MAX;
	proto_put_read(buf, &m);
	ck_assert_int_eq(proto_get_read(buf, sizeof buf, &out), 0);
}
END_TEST

START_TEST(test_read_offset_wrapping_around_refused)
{
	struct fam_rw m = { .region = 3, .len = 8192,
		.offset = UINT64_MAX - 4095 }, out;
	uint8_t buf[FAM_READ_LEN];

	proto_put_read(buf, &m);
	ck_assert_int_eq(proto_get_read(buf, sizeof buf, &out), -ERANGE);
}
END_TEST

START_TEST(test_write_hdr_round_trip)
{
	struct fam_rw m = { .region = 4, .len = 100, .offset = 12 }, out;
	uint8_t buf[FAM_WRITE_HDR_LEN];

	ck_assert_uint_eq(proto_put_write_hdr(buf, &m), FAM_WRITE_HDR_LEN);
	ck_assert_int_eq(proto_get_write_hdr(buf, FAM_WRITE_HDR_LEN + 100,
	    &out), 0);
	ck_assert_uint_eq(out.region, 4);
	ck_assert_uint_eq(out.len, 100);
	ck_assert_uint_eq(out.offset, 12);
}
END_TEST

START_TEST(test_write_length_disagreeing_with_payload_rejected)
{
	struct fam_rw m = { .region = 4, .len = 100 }, out;
	uint8_t buf[FAM_WRITE_HDR_LEN];

	proto_put_write_hdr(buf, &m);
	ck_assert_int_eq(proto_get_write_hdr(buf, FAM_WRITE_HDR_LEN + 99, &out),
	    -EPROTO);
	ck_assert_int_eq(proto_get_write_hdr(buf, FAM_WRITE_HDR_LEN + 101,
	    &out), -EPROTO);
	ck_assert_int_eq(proto_get_write_hdr(buf, 8, &out), -EPROTO);
}
END_TEST

START_TEST(test_write_zero_length_refused)
{
	struct fam_rw m = { .region = 4, .len = 0 }, out;
	uint8_t buf[FAM_WRITE_HDR_LEN];

	proto_put_write_hdr(buf, &m);
	ck_assert_int_eq(proto_get_write_hdr(buf, FAM_WRITE_HDR_LEN, &out),
	    -EINVAL);
}
END_TEST

START_TEST(test_write_offset_wrapping_around_refused)
{
	struct fam_rw m = { .region = 4, .len = 4096, .offset = UINT64_MAX },
	    out;
	uint8_t buf[FAM_WRITE_HDR_LEN];

	proto_put_write_hdr(buf, &m);
	ck_assert_int_eq(proto_get_write_hdr(buf, FAM_WRITE_HDR_LEN + 4096,
	    &out), -ERANGE);
}
END_TEST

START_TEST(test_secret_compare)
{
	char a[FAM_SECRET_MAX + 1], b[FAM_SECRET_MAX + 1];

	ck_assert(proto_secret_equal("", ""));
	ck_assert(proto_secret_equal("s3cret", "s3cret"));
	ck_assert(!proto_secret_equal("s3cret", "s3creT"));
	ck_assert(!proto_secret_equal("s3cret", "s3cre"));
	ck_assert(!proto_secret_equal("s3cre", "s3cret"));
	ck_assert(!proto_secret_equal("", "x"));
	ck_assert(!proto_secret_equal("x", ""));
	memset(a, 'k', FAM_SECRET_MAX);
	a[FAM_SECRET_MAX] = '\0';
	memcpy(b, a, sizeof b);
	ck_assert(proto_secret_equal(a, b));
	b[FAM_SECRET_MAX - 1] = 'j';
	ck_assert(!proto_secret_equal(a, b));
}
END_TEST

START_TEST(test_crc32c_matches_the_castagnoli_check_value)
{
	static uint8_t big[1 << 16];

	ck_assert_uint_eq(proto_crc32c(0, "123456789", 9), 0xe3069283u);
	ck_assert_uint_eq(proto_crc32c(0, "", 0), 0);
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (uint8_t)(i * 31 + 7);
	/* In pieces or at once, and any odd tail: the same value. */
	ck_assert_uint_eq(proto_crc32c(proto_crc32c(0, big, 1001), big + 1001,
	    sizeof big - 1001), proto_crc32c(0, big, sizeof big));
}
END_TEST

/* CRC32C a bit at a time: the definition, to check the fast ones by. */
static uint32_t
crc32c_bitwise(const uint8_t *p, size_t len)
{
	uint32_t crc = 0xffffffffu;

	while (len-- > 0) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = crc & 1 ? crc >> 1 ^ 0x82f63b78u : crc >> 1;
	}
	return ~crc;
}

START_TEST(test_crc32c_of_long_runs_matches_the_definition)
{
	static const size_t lens[] = { 7, 255, 767, 768, 769, 4096, 24575,
	    24576, 24577, 65536, 65536 + 769, 3 * 8192 * 5 + 3 * 256 + 9,
	    1 << 20 };
	size_t max = (1 << 20) + 16;
	uint8_t *buf = malloc(max);

	ck_assert_ptr_nonnull(buf);
	for (size_t i = 0; i < max; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	/* every stream length, at aligned and odd addresses */
	for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
		for (size_t off = 0; off < 16; off += 5)
			ck_assert_uint_eq(proto_crc32c(0, buf + off, lens[i]),
			    crc32c_bitwise(buf + off, lens[i]));
	/* a flipped bit anywhere in a long run changes it */
	buf[3 * 8192 + 100] ^= 4;
	ck_assert_uint_eq(proto_crc32c(0, buf, 1 << 16),
	    crc32c_bitwise(buf, 1 << 16));
	free(buf);
}
END_TEST

START_TEST(test_crc_only_on_chunk_data)
{
	struct fam_hdr h = hdr(FAM_MSG_WRITE, 0, FAM_WRITE_HDR_LEN + 64);

	h.crc = 0x1234;
	ck_assert_int_eq(proto_check_hdr(&h, 0), 0);
	h = hdr(FAM_MSG_STATS, 0, 0);
	h.crc = 1;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h = hdr(FAM_MSG_STATS, 0, 0);
	h.reserved = 1;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
}
END_TEST

/* Runs a whole handshake's keys: the proofs both sides compute. */
static void
auth_proofs(const char *cs, const char *ss, uint8_t pc[FAM_PROOF_LEN],
    uint8_t pc_want[FAM_PROOF_LEN])
{
	struct fam_hello m = { .role = FAM_WIRE_ROLE_HOST, .resume = 5 };
	struct fam_challenge ch = { .role = FAM_WIRE_ROLE_MEMORY };
	struct fam_auth ac, as;
	uint8_t kc[FAM_KEY_LEN], ks[FAM_KEY_LEN];

	strcpy(m.node, "h");
	strcpy(ch.node, "m");
	ck_assert_int_eq(proto_auth_nonce(m.nonce), 0);
	ck_assert_int_eq(proto_auth_nonce(ch.nonce), 0);
	ck_assert_int_eq(proto_auth_secret_key(cs, kc), 0);
	ck_assert_int_eq(proto_auth_secret_key(ss, ks), 0);
	ck_assert_int_eq(proto_auth_derive(&ac, kc, &m, &ch), 0);
	ck_assert_int_eq(proto_auth_derive(&as, ks, &m, &ch), 0);
	ck_assert_int_eq(proto_auth_client_proof(&ac, 5, pc), 0);
	ck_assert_int_eq(proto_auth_client_proof(&as, 5, pc_want), 0);
}

START_TEST(test_auth_proof_holds_only_with_the_same_secret)
{
	uint8_t a[FAM_PROOF_LEN], b[FAM_PROOF_LEN], c[FAM_PROOF_LEN],
	    d[FAM_PROOF_LEN];

	auth_proofs("s3cret", "s3cret", a, b);
	ck_assert(proto_auth_equal(a, b, FAM_PROOF_LEN));
	auth_proofs("s3cre", "s3cret", a, b);
	ck_assert(!proto_auth_equal(a, b, FAM_PROOF_LEN));
	auth_proofs("", "s3cret", a, b);
	ck_assert(!proto_auth_equal(a, b, FAM_PROOF_LEN));
	/* Fresh nonces each time: no proof is ever the same twice. */
	auth_proofs("s3cret", "s3cret", a, b);
	auth_proofs("s3cret", "s3cret", c, d);
	ck_assert(!proto_auth_equal(a, c, FAM_PROOF_LEN));
}
END_TEST

START_TEST(test_message_types_have_distinct_wire_numbers_and_names)
{
	/* On the wire: a peer of another build must read the same numbers. */
	ck_assert_int_eq(FAM_MSG_REGION_LEASE, 7);
	ck_assert_int_eq(FAM_MSG_REGION_ADOPT, 8);
	ck_assert_int_eq(FAM_MSG_REGION_ADVISE, 9);
	ck_assert_int_eq(FAM_MSG_AUTH, 10);
	ck_assert_int_eq(FAM_MSG_REGION_DISCARD, 11);
	ck_assert_int_eq(FAM_MSG_TYPE_MAX, 11);
	for (unsigned a = 1; a <= FAM_MSG_TYPE_MAX; a++) {
		ck_assert_str_ne(proto_type_name(a), "unknown");
		for (unsigned b = a + 1; b <= FAM_MSG_TYPE_MAX; b++)
			ck_assert_str_ne(proto_type_name(a),
			    proto_type_name(b));
	}
}
END_TEST

START_TEST(test_lease_adopt_advise_lengths_checked)
{
	struct fam_hdr h = hdr(FAM_MSG_REGION_LEASE, 0, FAM_REGION_LEASE_LEN);

	ck_assert_int_eq(proto_check_hdr(&h, 0), 0);
	h.len = FAM_REGION_ADOPT_LEN;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h = hdr(FAM_MSG_REGION_ADOPT, 0, FAM_REGION_ADOPT_LEN);
	ck_assert_int_eq(proto_check_hdr(&h, 0), 0);
	h.len = FAM_REGION_LEASE_LEN;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h = hdr(FAM_MSG_REGION_ADOPT, FAM_F_RESPONSE, FAM_REGION_INFO_LEN);
	ck_assert_int_eq(proto_check_hdr(&h, 0), 0);
	h = hdr(FAM_MSG_REGION_LEASE, FAM_F_RESPONSE, FAM_REGION_INFO_LEN - 16);
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	h = hdr(FAM_MSG_REGION_ADVISE, 0, FAM_REGION_ADVISE_LEN);
	ck_assert_int_eq(proto_check_hdr(&h, 0), 0);
	h = hdr(FAM_MSG_REGION_ADVISE, FAM_F_RESPONSE, 8);
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
}
END_TEST

START_TEST(test_discard_round_trip_and_bad_ranges)
{
	struct fam_region_discard in = { .region = 7, .offset = 1ull << 33,
		.len = 5 << 16 }, out;
	uint8_t buf[FAM_REGION_DISCARD_LEN];
	struct fam_hdr h = hdr(FAM_MSG_REGION_DISCARD, 0,
	    FAM_REGION_DISCARD_LEN);

	ck_assert_int_eq(proto_check_hdr(&h, 0), 0);
	h.len = FAM_REGION_DISCARD_LEN - 1;
	ck_assert_int_eq(proto_check_hdr(&h, 0), -EPROTO);
	ck_assert_uint_eq(proto_put_region_discard(buf, &in),
	    FAM_REGION_DISCARD_LEN);
	ck_assert_int_eq(proto_get_region_discard(buf, sizeof buf, &out), 0);
	ck_assert_uint_eq(out.region, 7);
	ck_assert_uint_eq(out.offset, 1ull << 33);
	ck_assert_uint_eq(out.len, 5 << 16);
	ck_assert_int_eq(proto_get_region_discard(buf, sizeof buf - 1, &out),
	    -EPROTO);
	buf[5] = 1; /* reserved */
	ck_assert_int_eq(proto_get_region_discard(buf, sizeof buf, &out),
	    -EPROTO);
	in.offset = UINT64_MAX - 10; /* wraps */
	proto_put_region_discard(buf, &in);
	ck_assert_int_eq(proto_get_region_discard(buf, sizeof buf, &out),
	    -EINVAL);
	in.offset = 0;
	in.len = 0;
	proto_put_region_discard(buf, &in);
	ck_assert_int_eq(proto_get_region_discard(buf, sizeof buf, &out),
	    -EINVAL);
}
END_TEST

START_TEST(test_type_names)
{
	ck_assert_str_eq(proto_type_name(FAM_MSG_HELLO), "hello");
	ck_assert_str_eq(proto_type_name(FAM_MSG_WRITE), "write");
	ck_assert_str_eq(proto_type_name(FAM_MSG_REGION_LEASE), "region_lease");
	ck_assert_str_eq(proto_type_name(FAM_MSG_REGION_ADOPT), "region_adopt");
	ck_assert_str_eq(proto_type_name(FAM_MSG_REGION_ADVISE),
	    "region_advise");
	ck_assert_str_eq(proto_type_name(0), "unknown");
	ck_assert_str_eq(proto_type_name(200), "unknown");
}
END_TEST

/* Builds the suite: headers, each payload, secrets. */
static Suite *
proto_suite(void)
{
	Suite *s = suite_create("proto");
	TCase *t = tcase_create("headers");

	tcase_add_test(t, test_header_round_trip);
	tcase_add_test(t, test_error_status_round_trip);
	tcase_add_test(t, test_bad_magic_rejected);
	tcase_add_test(t, test_wrong_version_rejected);
	tcase_add_test(t, test_unknown_type_rejected);
	tcase_add_test(t, test_unknown_flags_rejected);
	tcase_add_test(t, test_huge_length_rejected);
	tcase_add_test(t, test_length_over_receiver_limit_rejected);
	tcase_add_test(t, test_truncated_hello_length_rejected);
	tcase_add_test(t, test_length_outside_type_bounds_rejected);
	tcase_add_test(t, test_largest_messages_accepted);
	tcase_add_test(t, test_request_with_status_rejected);
	tcase_add_test(t, test_negative_or_huge_status_rejected);
	tcase_add_test(t, test_error_response_with_payload_rejected);
	tcase_add_test(t, test_background_flag_only_on_read_write_requests);
	suite_add_tcase(s, t);

	t = tcase_create("payloads");
	tcase_add_test(t, test_hello_round_trip);
	tcase_add_test(t, test_hello_full_length_fields_round_trip);
	tcase_add_test(t, test_truncated_hello_rejected);
	tcase_add_test(t, test_hello_reserved_bytes_rejected);
	tcase_add_test(t, test_hello_unknown_role_rejected);
	tcase_add_test(t, test_hello_bytes_smuggled_after_node_nul_rejected);
	tcase_add_test(t, test_hello_carries_a_nonce_and_no_secret);
	tcase_add_test(t, test_hello_control_characters_in_node_rejected);
	tcase_add_test(t, test_hello_empty_node_rejected);
	tcase_add_test(t, test_hello_node_name_not_utf8_rejected);
	tcase_add_test(t, test_hello_resp_round_trip);
	tcase_add_test(t, test_hello_resp_piece_shift_in_range_only);
	tcase_add_test(t, test_region_create_round_trip);
	tcase_add_test(t, test_region_create_longest_name_and_path_round_trip);
	tcase_add_test(t, test_region_create_name_length_over_max_rejected);
	tcase_add_test(t, test_region_create_path_length_over_max_rejected);
	tcase_add_test(t, test_region_create_lengths_past_payload_rejected);
	tcase_add_test(t, test_region_create_place_round_trip);
	tcase_add_test(t, test_region_create_unknown_flags_refused);
	tcase_add_test(t, test_region_create_inconsistent_fields_refused);
	tcase_add_test(t, test_region_create_nul_or_control_in_name_refused);
	tcase_add_test(t, test_region_create_name_or_path_not_utf8_refused);
	tcase_add_test(t, test_region_info_round_trip);
	tcase_add_test(t, test_region_info_malformed_rejected);
	tcase_add_test(t, test_region_info_key_apart_from_lease_rkey);
	tcase_add_test(t, test_region_info_from_dpu_round_trip);
	tcase_add_test(t, test_region_info_half_memory_location_rejected);
	tcase_add_test(t, test_region_adopt_round_trip);
	tcase_add_test(t, test_region_adopt_malformed_or_bad_refused);
	tcase_add_test(t, test_region_advise_round_trip_and_unknown_advice_refused);
	tcase_add_test(t, test_region_free_round_trip);
	tcase_add_test(t, test_region_free_reserved_set_rejected);
	tcase_add_test(t, test_read_round_trip);
	tcase_add_test(t, test_read_reserved_set_rejected);
	tcase_add_test(t, test_read_zero_or_oversized_length_refused);
	tcase_add_test(t, test_read_offset_wrapping_around_refused);
	tcase_add_test(t, test_write_hdr_round_trip);
	tcase_add_test(t, test_write_length_disagreeing_with_payload_rejected);
	tcase_add_test(t, test_write_zero_length_refused);
	tcase_add_test(t, test_write_offset_wrapping_around_refused);
	suite_add_tcase(s, t);

	t = tcase_create("misc");
	tcase_add_test(t, test_secret_compare);
	tcase_add_test(t, test_type_names);
	tcase_add_test(t, test_message_types_have_distinct_wire_numbers_and_names);
	tcase_add_test(t, test_crc32c_matches_the_castagnoli_check_value);
	tcase_add_test(t, test_crc32c_of_long_runs_matches_the_definition);
	tcase_add_test(t, test_crc_only_on_chunk_data);
	tcase_add_test(t, test_auth_proof_holds_only_with_the_same_secret);
	tcase_add_test(t, test_lease_adopt_advise_lengths_checked);
	tcase_add_test(t, test_discard_round_trip_and_bad_ranges);
	tcase_add_test(t, test_utf8_validation);
	suite_add_tcase(s, t);
	return s;
}

int
main(void)
{
	SRunner *sr = srunner_create(proto_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
