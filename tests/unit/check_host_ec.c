/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_host_ec.c - ec:K+M (host-ec.c): the codec gives back a chunk from
 * any K of its K + M fragments, and a fragment whose CRC does not match is
 * never used (too few good ones: an error, never wrong bytes); then a
 * memory role and a host role with ec:2+1 in this process on loopback (the
 * host's three memory nodes three sessions with that one role), a second
 * thread paging: a fragment corrupted on the memory node is caught by its
 * CRC, the chunk decoded from the other two and the fragment rebuilt; a
 * node out of reach leaves every byte readable; reads go to the nodes that
 * answer fastest.
 * tests/e2e/host-ec.sh covers the same with memory famd processes killed
 * and started again empty, and famtest.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "host/host.h"
#include "host/host-ec.h"
#include "unit.h"

#define CHUNK  (64u << 10)
#define NCHUNK 48u /* 3 MiB through a 1 MiB buffer */

static struct event_base *base;
static struct unit_role memr, hostr;
static struct unit_prog prog;
static struct host *h;
static uint8_t *mem;

/* Fills a chunk with bytes of seed (xorshift). */
static void
chunk_fill(uint8_t *p, uint32_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (uint32_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

/*
 * Encodes a chunk of seed with ec:k+m into frags (k + m fragments), their
 * CRCs into crc; returns the chunk (to free).
 */
static uint8_t *
encode(const struct host_ec_codec *ec, uint64_t seed, uint8_t *frags,
    uint32_t crc[])
{
	uint8_t *chunk = malloc(ec->chunk);
	uint8_t *buf = malloc((size_t)(ec->k + ec->m) * ec->frag);
	const uint8_t *frag[HOST_EC_MAX];

	ck_assert_ptr_nonnull(chunk);
	ck_assert_ptr_nonnull(buf);
	chunk_fill(chunk, ec->chunk, seed);
	host_ec_encode(ec, chunk, buf, buf + (size_t)ec->k * ec->frag, frag,
	    crc);
	for (unsigned i = 0; i < ec->k + ec->m; i++)
		memcpy(frags + (size_t)i * ec->frag, frag[i], ec->frag);
	free(buf);
	return chunk;
}

/* Decodes from the fragments in mask into a fresh chunk; 0 or -errno. */
static int
decode_mask(const struct host_ec_codec *ec, uint8_t *frags,
    const uint32_t crc[], uint32_t mask, uint8_t *out, uint32_t *bad)
{
	uint8_t *frag[HOST_EC_MAX] = { NULL };
	uint8_t *scratch = malloc((size_t)ec->k * ec->frag);
	int rc;

	ck_assert_ptr_nonnull(scratch);
	for (unsigned i = 0; i < ec->k + ec->m; i++)
		if (mask >> i & 1)
			frag[i] = frags + (size_t)i * ec->frag;
	rc = host_ec_decode(ec, frag, crc, out, scratch, bad);
	free(scratch);
	return rc;
}

START_TEST(test_any_k_of_k_plus_m_fragments_give_back_the_chunk)
{
	static const unsigned code[][2] = {
		{ 2, 1 }, { 3, 2 }, { 4, 2 }, { 1, 2 }, { 5, 3 }, { 16, 4 },
	};

	for (size_t t = 0; t < sizeof code / sizeof code[0]; t++) {
		struct host_ec_codec ec;
		unsigned k = code[t][0], m = code[t][1], tried = 0;
		uint32_t crc[HOST_EC_MAX], bad;
		uint8_t *frags, *chunk, *out;

		ck_assert_int_eq(host_ec_codec_init(&ec, k, m, CHUNK), 0);
		ck_assert_uint_eq(ec.frag % HOST_EC_ALIGN, 0);
		ck_assert_uint_ge((uint64_t)ec.frag * k, CHUNK);
		frags = malloc((size_t)(k + m) * ec.frag);
		out = malloc(CHUNK);
		ck_assert_ptr_nonnull(frags);
		ck_assert_ptr_nonnull(out);
		chunk = encode(&ec, t + 1, frags, crc);
		/* every set of exactly k fragments, and some larger ones */
		for (uint32_t mask = 0; mask < 1u << (k + m); mask++) {
			unsigned n = (unsigned)__builtin_popcount(mask);

			if (n < k || (n > k && mask % 7 != 0))
				continue;
			memset(out, 0xa5, CHUNK);
			ck_assert_int_eq(decode_mask(&ec, frags, crc, mask, out,
			    &bad), 0);
			ck_assert_uint_eq(bad, 0);
			ck_assert_msg(memcmp(out, chunk, CHUNK) == 0,
			    "ec:%u+%u from fragments %#x: wrong bytes", k, m,
			    mask);
			tried++;
		}
		ck_assert_uint_gt(tried, 0);
		/* fewer than k: an error, the chunk not touched */
		memset(out, 0xa5, CHUNK);
		ck_assert_int_eq(decode_mask(&ec, frags, crc,
		    (1u << (k - 1)) - 1, out, &bad), -EIO);
		for (uint32_t i = 0; i < CHUNK; i++)
			ck_assert_uint_eq(out[i], 0xa5);
		free(chunk);
		free(out);
		free(frags);
		host_ec_codec_fini(&ec);
	}
}
END_TEST

START_TEST(test_corrupted_fragment_is_caught_by_its_crc)
{
	struct host_ec_codec ec;
	uint32_t crc[HOST_EC_MAX], bad;
	uint8_t *frags, *chunk, *out;

	ck_assert_int_eq(host_ec_codec_init(&ec, 2, 1, CHUNK), 0);
	frags = malloc(3 * (size_t)ec.frag);
	out = malloc(CHUNK);
	ck_assert_ptr_nonnull(frags);
	ck_assert_ptr_nonnull(out);
	chunk = encode(&ec, 42, frags, crc);
	for (unsigned i = 0; i < 3; i++) {
		/* one bit of fragment i flipped: decoded from the other two */
		frags[(size_t)i * ec.frag + 1234] ^= 0x10;
		memset(out, 0, CHUNK);
		ck_assert_int_eq(decode_mask(&ec, frags, crc, 7, out, &bad), 0);
		ck_assert_uint_eq(bad, 1u << i);
		ck_assert(memcmp(out, chunk, CHUNK) == 0);
		/* with only it and one other: an error, never wrong bytes */
		memset(out, 0x5a, CHUNK);
		ck_assert_int_eq(decode_mask(&ec, frags, crc,
		    (1u << i) | (1u << ((i + 1) % 3)), out, &bad), -EIO);
		ck_assert_uint_eq(bad, 1u << i);
		for (uint32_t j = 0; j < CHUNK; j++)
			ck_assert_uint_eq(out[j], 0x5a);
		frags[(size_t)i * ec.frag + 1234] ^= 0x10;
	}
	free(chunk);
	free(out);
	free(frags);
	host_ec_codec_fini(&ec);
}
END_TEST

START_TEST(test_short_last_data_fragment_is_padded)
{
	struct host_ec_codec ec;
	uint32_t crc[HOST_EC_MAX], bad;
	uint8_t *frags, *chunk, *out;

	/* 64K / 3: fragments of 24K, the last data one holds 16K */
	ck_assert_int_eq(host_ec_codec_init(&ec, 3, 2, CHUNK), 0);
	ck_assert_uint_eq(ec.frag, 24u << 10);
	ck_assert_uint_eq(host_ec_data_len(&ec, 2), 16u << 10);
	frags = malloc(5 * (size_t)ec.frag);
	out = malloc(CHUNK);
	ck_assert_ptr_nonnull(frags);
	ck_assert_ptr_nonnull(out);
	chunk = encode(&ec, 7, frags, crc);
	for (uint32_t j = 16u << 10; j < ec.frag; j++)
		ck_assert_uint_eq(frags[2 * (size_t)ec.frag + j], 0);
	ck_assert_int_eq(decode_mask(&ec, frags, crc, 0x18 | 0x1, out, &bad),
	    0);
	ck_assert(memcmp(out, chunk, CHUNK) == 0);
	free(chunk);
	free(out);
	free(frags);
	host_ec_codec_fini(&ec);
}
END_TEST

START_TEST(test_codes_outside_the_limits_are_refused)
{
	struct host_ec_codec ec;
	unsigned k, m;

	ck_assert_int_eq(host_ec_codec_init(&ec, 0, 1, CHUNK), -EINVAL);
	ck_assert_int_eq(host_ec_codec_init(&ec, 2, 0, CHUNK), -EINVAL);
	ck_assert_int_eq(host_ec_codec_init(&ec, 17, 1, CHUNK), -EINVAL);
	ck_assert_int_eq(host_ec_codec_init(&ec, 1, 17, CHUNK), -EINVAL);
	ck_assert_int_eq(cfg_redundancy_parse_ec("ec:2+1", &k, &m), 0);
	ck_assert_uint_eq(k, 2);
	ck_assert_uint_eq(m, 1);
	ck_assert_int_eq(cfg_redundancy_parse_ec("ec:16+16", &k, &m), 0);
	ck_assert_uint_eq(k + m, 32);
	ck_assert_int_eq(cfg_redundancy_parse_ec("ec:0+1", &k, &m), -EINVAL);
	ck_assert_int_eq(cfg_redundancy_parse_ec("ec:2+0", &k, &m), -EINVAL);
	ck_assert_int_eq(cfg_redundancy_parse_ec("ec:17+1", &k, &m), -EINVAL);
	ck_assert_int_eq(cfg_redundancy_parse_ec("ec:2+1x", &k, &m), -EINVAL);
	ck_assert_int_eq(cfg_redundancy_parse_ec("ec:2", &k, &m), -EINVAL);
	ck_assert_int_eq(cfg_redundancy_parse_ec("ec:+2+1", &k, &m), -EINVAL);
	ck_assert_int_eq(cfg_redundancy_parse_ec("ec:2+-1", &k, &m), -EINVAL);
	ck_assert_int_eq(cfg_redundancy_parse_ec("ec: 2+1", &k, &m), -EINVAL);
	ck_assert_int_eq(cfg_redundancy_parse_ec("replicate:2", &k, &m),
	    -EINVAL);
}
END_TEST

/* Writes (or checks) the whole region with seed from a second thread. */
static uint64_t
pages(uint64_t seed, bool write)
{
	return unit_pages(base, mem, NCHUNK * CHUNK, seed, write);
}

/* Tells whether the host is connected to its three memory nodes. */
static bool
all_up(void)
{
	for (unsigned i = 0; i < 3; i++)
		if (h->nodes[i].state != MN_UP)
			return false;
	return h->nnodes == 3;
}

/* A memory role, a host with ec:2+1 on three sessions with it, a region. */
static void
start(const char *keys)
{
	const char *dir = unit_dir();
	char *a, *text;
	char session[128];
	uint64_t handle;

	signal(SIGPIPE, SIG_IGN);
	log_open(LOG_DEST_STDERR, LOG_ERR);
	base = event_base_new();
	ck_assert_ptr_nonnull(base);
	text = xasprintf("[famd]\nrole = memory\nnode_name = unit-memory\n"
	    "secret_file = %s/secret\nop_timeout = 1s\n"
	    "[memory]\nlisten = 127.0.0.1:0\ncapacity = 256M\n"
	    "preload_dir = %s\nsession_grace = 0\n", dir, dir);
	ck_assert_int_eq(unit_role_start(&memr, base, ROLE_MEMORY, text), 0);
	free(text);
	a = unit_role_listen(&memr, "memory");
	ck_assert_ptr_nonnull(a);
	snprintf(session, sizeof session, "%s/session.sock", dir);
	text = xasprintf("[famd]\nrole = host\nnode_name = unit-host\n"
	    "secret_file = %s/secret\nop_timeout = 1s\n"
	    "[host]\nmemory_nodes = %s, %s, %s\nsession_socket = %s\n"
	    "arena_size = 1G\nbuffer_size = 1M\nchunk_size = 64K\n"
	    "prefetch = 0\nredundancy = ec:2+1\n%s", dir, a, a, a, session,
	    keys);
	free(a);
	ck_assert_int_eq(unit_role_start(&hostr, base, ROLE_HOST, text), 0);
	free(text);
	h = hostr.d.role_state;
	ck_assert(unit_run_until(base, all_up, 5000));
	ck_assert_uint_eq(h->ec_k, 2);
	ck_assert_int_eq(unit_prog_open(&prog, base, session), 0);
	ck_assert_int_eq(unit_prog_alloc(&prog, NCHUNK * CHUNK, &mem, &handle),
	    0);
}

/* Ends the session and stops the roles. */
static void
teardown(void)
{
	unit_prog_close(&prog);
	unit_role_stop(&hostr);
	unit_role_stop(&memr);
	if (base != NULL)
		event_base_free(base);
	base = NULL;
}

/* Returns the program's one region. */
static struct region *
region(void)
{
	ck_assert_ptr_nonnull(h->clients);
	ck_assert_ptr_nonnull(h->clients->regions);
	return h->clients->regions;
}

/* Tells whether the region's redundancy is healthy. */
static bool
healthy(void)
{
	uint64_t behind;

	return host_replica_state(h, region(), &behind) == HOST_RED_HEALTHY &&
	    behind == 0;
}

static unsigned writes_out;

/* Completion of a write of garbage into a fragment. */
static void
garbage_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	host_route_done(h, ctx);
	ck_assert_int_eq(status, 0);
	writes_out--;
}

/* Tells whether the garbage writes are over. */
static bool
garbage_written(void)
{
	return writes_out == 0;
}

/* Writes garbage over fragment i of chunk c on its memory node. */
static void
corrupt(struct region *r, uint64_t c, unsigned i, uint8_t *junk)
{
	struct stripe *s = &r->stripes[i * r->width + c % r->width];
	struct fam_conn *conn;
	struct fam_mr *mr;
	const struct fam_remote *remote;

	ck_assert_int_eq(host_route(h, s, false, &conn, &mr, &remote), 0);
	ck_assert_int_eq(fam_conn_writef(conn, remote, (c / r->width) *
	    host_ec_frag(r), host_ec_frag(r), junk, NULL, 0, garbage_done, s),
	    0);
	writes_out++;
}

START_TEST(test_region_is_k_plus_m_fragments_on_distinct_nodes)
{
	struct region *r;
	uint64_t bytes0;

	start("");
	r = region();
	ck_assert_uint_eq(r->ncopies, 3);
	ck_assert_uint_eq(host_ec_k(r), 2);
	ck_assert_uint_eq(host_ec_frag(r), CHUNK / 2);
	for (unsigned col = 0; col < r->width; col++)
		for (unsigned i = 0; i < 3; i++)
			ck_assert_ptr_eq(r->stripes[i * r->width + col].node,
			    &h->nodes[(col + i) % 3]);
	bytes0 = h->stats.writeback_bytes;
	ck_assert_uint_eq(pages(3, true), 0);
	ck_assert_uint_eq(pages(3, false), 0);
	ck_assert_uint_gt(h->stats.writebacks, 0);
	/* three fragments of half a chunk each: 1.5 chunks per write-back */
	ck_assert_uint_eq(h->stats.writeback_bytes - bytes0,
	    h->stats.writebacks * CHUNK * 3 / 2);
	ck_assert_uint_gt(h->stats.ec_reads, 0);
	ck_assert(healthy());
}
END_TEST

START_TEST(test_corrupted_fragment_on_a_node_is_never_served)
{
	struct region *r;
	uint8_t *junk = malloc(CHUNK);
	unsigned n = 0;
	uint64_t rebuilt;

	ck_assert_ptr_nonnull(junk);
	memset(junk, 0xee, CHUNK);
	start("");
	ck_assert_uint_eq(pages(5, true), 0);
	ck_assert_uint_eq(pages(6, true), 0); /* seed 5 written back */
	r = region();
	/* data fragments of chunks on the memory node only: garbage */
	for (uint64_t c = 0; c < r->nchunks && n < 8; c++)
		if (r->chunks[c].state == CH_ABSENT &&
		    (r->chunks[c].flags & CH_REMOTE))
			corrupt(r, c, n++ % 2, junk);
	ck_assert_uint_eq(n, 8);
	ck_assert(unit_run_until(base, garbage_written, 5000));
	rebuilt = h->rb.done;
	/* nothing known of the nodes: the data fragments are read */
	memset(h->ec_lat, 0, sizeof h->ec_lat);
	ck_assert_uint_eq(pages(6, false), 0); /* every word right */
	ck_assert_uint_ge(h->stats.ec_frag_errors, 8);
	ck_assert_uint_ge(h->stats.ec_decodes, 8);
	ck_assert_uint_eq(h->stats.sigbus, 0);
	/* the bad fragments were marked stale, and are rebuilt */
	ck_assert(unit_run_until(base, healthy, 20000));
	ck_assert_uint_ge(h->rb.done - rebuilt, 8);
	ck_assert_uint_eq(pages(6, false), 0);
	free(junk);
}
END_TEST

/* Tells whether the host saw node 0 go. */
static bool
node0_down(void)
{
	return h->nodes[0].state != MN_UP;
}

START_TEST(test_reads_decode_when_a_node_is_out_of_reach)
{
	uint64_t behind, decodes;

	start("");
	ck_assert_uint_eq(pages(8, true), 0);
	ck_assert_uint_eq(pages(8, false), 0);
	decodes = h->stats.ec_decodes;
	free(h->nodes[0].addr);
	h->nodes[0].addr = strdup("127.0.0.1:1");
	ck_assert_ptr_nonnull(h->nodes[0].addr);
	fam_conn_close(h->nodes[0].conn);
	ck_assert(unit_run_until(base, node0_down, 5000));
	ck_assert_uint_eq(pages(8, false), 0);
	ck_assert_uint_gt(h->stats.ec_decodes, decodes);
	ck_assert_uint_eq(pages(9, true), 0);
	ck_assert_uint_eq(pages(9, false), 0);
	ck_assert_uint_eq(h->stats.sigbus, 0);
	ck_assert_int_eq(host_replica_state(h, region(), &behind),
	    HOST_RED_DEGRADED);
	ck_assert_uint_gt(behind, 0);
}
END_TEST

START_TEST(test_reads_go_to_the_fastest_nodes)
{
	uint64_t decodes, errors, at;

	start("");
	ck_assert_uint_eq(pages(10, true), 0);
	ck_assert_uint_eq(pages(11, true), 0);
	ck_assert_uint_eq(pages(11, false), 0);
	for (unsigned i = 0; i < 3; i++)
		ck_assert_uint_gt(h->ec_lat[i].us, 0);
	/* node 0 answers slowly now: its fragments are left for others */
	h->ec_lat[0].us = 1000000000u;
	h->ec_lat[0].at_ns = at = mono_ns();
	decodes = h->stats.ec_decodes;
	errors = h->stats.ec_frag_errors;
	ck_assert_uint_eq(pages(11, false), 0);
	ck_assert_uint_eq(h->ec_lat[0].at_ns, at); /* not read from */
	/* two columns of three have a data fragment there: decoded */
	ck_assert_uint_ge(h->stats.ec_decodes - decodes, 10);
	ck_assert_uint_eq(h->stats.ec_frag_errors, errors);
	ck_assert_uint_eq(h->stats.sigbus, 0);
}
END_TEST

/* The suite's tests. */
static Suite *
host_ec_suite(void)
{
	Suite *s = suite_create("host_ec");
	TCase *t = tcase_create("codec");
	TCase *l = tcase_create("loop");

	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_any_k_of_k_plus_m_fragments_give_back_the_chunk);
	tcase_add_test(t, test_corrupted_fragment_is_caught_by_its_crc);
	tcase_add_test(t, test_short_last_data_fragment_is_padded);
	tcase_add_test(t, test_codes_outside_the_limits_are_refused);
	suite_add_tcase(s, t);
	tcase_add_checked_fixture(l, NULL, teardown);
	tcase_set_timeout(l, 120);
	tcase_add_test(l, test_region_is_k_plus_m_fragments_on_distinct_nodes);
	tcase_add_test(l, test_corrupted_fragment_on_a_node_is_never_served);
	tcase_add_test(l, test_reads_decode_when_a_node_is_out_of_reach);
	tcase_add_test(l, test_reads_go_to_the_fastest_nodes);
	suite_add_tcase(s, l);
	return s;
}

/* Runs the suite; exits 0 when every test passed. */
int
main(void)
{
	SRunner *sr = srunner_create(host_ec_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
