/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz-seeds.c - writes the seed corpora of the fuzz targets and the
 * configuration keys' dictionary, with famd's own encoders and key table,
 * so the seeds speak the protocol of this tree.
 *
 * usage: fuzz-seeds SRCDIR/fuzz   (make fuzz-seeds runs it)
 * Writes corpus/proto, corpus/memory, corpus/dpu, corpus/client,
 * corpus/session, corpus/admin and corpus/config
 * (files named after what they hold; others there are left alone, such as
 * the inputs of bugs the fuzzers found) and dict/config.dict.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "wire/session.h"
#include "core/famd.h"
#include "famd-client/famd-client.h"

static const char *seed_top;

/* A seed being built in memory. */
struct seed {
	uint8_t buf[16384];
	size_t len;
};

/* Stops with a message. */
static void __attribute__((noreturn, format(printf, 1, 2)))
seed_fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz-seeds: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	exit(1);
}

/* Writes len bytes as the file corpus/DIR/NAME. */
static void
seed_write(const char *dir, const char *name, const void *p, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof path, "%s/corpus/%s", seed_top, dir);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		seed_fail("%s: %s", path, strerror(errno));
	snprintf(path, sizeof path, "%s/corpus/%s/%s", seed_top, dir, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(p, 1, len, f) != len || fclose(f) != 0)
		seed_fail("%s: %s", path, strerror(errno));
}

/* Writes a seed and empties it for the next one. */
static void
seed_flush(struct seed *s, const char *dir, const char *name)
{
	seed_write(dir, name, s->buf, s->len);
	s->len = 0;
}

/* Appends len bytes. */
static void
seed_add(struct seed *s, const void *p, size_t len)
{
	if (s->len + len > sizeof s->buf)
		seed_fail("seed too large");
	memcpy(s->buf + s->len, p, len);
	s->len += len;
}

/* Appends a frame: header and payload. */
static void
seed_frame(struct seed *s, uint8_t type, uint16_t flags, int32_t status,
    uint64_t id, const void *payload, uint32_t len)
{
	struct fam_hdr h = { .magic = FAM_PROTO_MAGIC,
		.version = FAM_PROTO_VERSION, .type = type, .flags = flags,
		.len = len, .status = status, .id = id };
	uint8_t hdr[FAM_PROTO_HDR_LEN];

	/* Chunk data carries its CRC32C, as famd sends it. */
	if (payload != NULL && len > 0 && status == 0 &&
	    type == FAM_MSG_READ && (flags & FAM_F_RESPONSE))
		h.crc = proto_crc32c(0, payload, len);
	proto_put_hdr(hdr, &h);
	seed_add(s, hdr, sizeof hdr);
	seed_add(s, payload, len);
}

/* The frames of the wire protocol, valid and not. */
static void
seed_proto(void)
{
	struct seed s = { .len = 0 };
	uint8_t p[FAM_REGION_CREATE_MIN + FAM_NAME_MAX + FAM_PATH_MAX];
	struct fam_hello hello = { .role = FAM_WIRE_ROLE_HOST,
		.node = "host-a" };
	struct fam_challenge ch = { .role = FAM_WIRE_ROLE_MEMORY,
		.node = "memory-a" };
	struct fam_hello_resp hresp = { .role = FAM_WIRE_ROLE_MEMORY,
		.session = 0x1122334455667788ull, .instance = 42,
		.node = "memory-a" };
	struct fam_region_create rc = { .size = 1 << 20 };
	struct fam_region_info info = { .region = 7, .size = 1 << 20,
		.flags = 0, .length = 1 << 20 };
	struct fam_rw rw = { .region = 7, .len = 64, .offset = 4096 };
	uint8_t data[64];
	size_t n;
	const char stats[] = "{\"regions\":1}";

	memset(data, 0x5a, sizeof data);
	n = proto_put_hello(p, &hello);
	seed_frame(&s, FAM_MSG_HELLO, 0, 0, 1, p, (uint32_t)n);
	seed_flush(&s, "proto", "hello-request");
	hello.role = FAM_WIRE_ROLE_DPU;
	hello.features = FAM_FEAT_JOIN;
	hello.resume = 0x1122334455667788ull;
	n = proto_put_hello(p, &hello);
	seed_frame(&s, FAM_MSG_HELLO, 0, 0, 1, p, (uint32_t)n);
	seed_flush(&s, "proto", "hello-request-join");
	n = proto_put_challenge(p, &ch);
	seed_frame(&s, FAM_MSG_HELLO, FAM_F_RESPONSE, 0, 1, p, (uint32_t)n);
	seed_flush(&s, "proto", "hello-response");
	seed_frame(&s, FAM_MSG_HELLO, FAM_F_RESPONSE, EACCES, 1, NULL, 0);
	seed_flush(&s, "proto", "hello-refused");
	memset(p, 0x3c, FAM_PROOF_LEN);
	seed_frame(&s, FAM_MSG_AUTH, 0, 0, 1, p, FAM_AUTH_LEN);
	seed_flush(&s, "proto", "auth-request");
	n = proto_put_hello_resp(p + FAM_PROOF_LEN, &hresp);
	seed_frame(&s, FAM_MSG_AUTH, FAM_F_RESPONSE, 0, 1, p,
	    (uint32_t)(FAM_PROOF_LEN + n));
	seed_flush(&s, "proto", "auth-response");
	seed_frame(&s, FAM_MSG_AUTH, FAM_F_RESPONSE, EACCES, 1, NULL, 0);
	seed_flush(&s, "proto", "auth-refused");

	n = proto_put_region_create(p, sizeof p, &rc);
	seed_frame(&s, FAM_MSG_REGION_CREATE, 0, 0, 2, p, (uint32_t)n);
	seed_flush(&s, "proto", "region-create");
	rc.size = 0;
	rc.flags = FAM_RF_FILE | FAM_RF_SHARED | FAM_RF_PERSISTENT;
	snprintf(rc.name, sizeof rc.name, "graph");
	snprintf(rc.path, sizeof rc.path, "graphs/web.bin");
	n = proto_put_region_create(p, sizeof p, &rc);
	seed_frame(&s, FAM_MSG_REGION_CREATE, 0, 0, 2, p, (uint32_t)n);
	seed_flush(&s, "proto", "region-create-file");
	n = proto_put_region_info(p, &info);
	seed_frame(&s, FAM_MSG_REGION_CREATE, FAM_F_RESPONSE, 0, 2, p,
	    (uint32_t)n);
	seed_flush(&s, "proto", "region-create-response");
	seed_frame(&s, FAM_MSG_REGION_CREATE, FAM_F_RESPONSE, ENOSPC, 2, NULL,
	    0);
	seed_flush(&s, "proto", "region-create-enospc");

	n = proto_put_region_free(p, 7);
	seed_frame(&s, FAM_MSG_REGION_FREE, 0, 0, 3, p, (uint32_t)n);
	seed_flush(&s, "proto", "region-free");
	seed_frame(&s, FAM_MSG_REGION_FREE, FAM_F_RESPONSE, 0, 3, NULL, 0);
	seed_flush(&s, "proto", "region-free-response");
	seed_frame(&s, FAM_MSG_REGION_LEASE, 0, 0, 4, p, (uint32_t)n);
	seed_flush(&s, "proto", "region-lease");
	info.rkey = 0x1234;
	info.addr = 0x7f0000000000ull;
	n = proto_put_region_info(p, &info);
	seed_frame(&s, FAM_MSG_REGION_LEASE, FAM_F_RESPONSE, 0, 4, p,
	    (uint32_t)n);
	seed_flush(&s, "proto", "region-lease-response");

	n = proto_put_read(p, &rw);
	seed_frame(&s, FAM_MSG_READ, 0, 0, 5, p, (uint32_t)n);
	seed_flush(&s, "proto", "read");
	seed_frame(&s, FAM_MSG_READ, FAM_F_RESPONSE, 0, 5, data, sizeof data);
	seed_flush(&s, "proto", "read-response");
	seed_frame(&s, FAM_MSG_READ, FAM_F_RESPONSE, ERANGE, 5, NULL, 0);
	seed_flush(&s, "proto", "read-erange");
	n = proto_put_write_hdr(p, &rw);
	memcpy(p + n, data, sizeof data);
	seed_frame(&s, FAM_MSG_WRITE, 0, 0, 6, p, (uint32_t)(n + sizeof data));
	seed_flush(&s, "proto", "write");
	seed_frame(&s, FAM_MSG_WRITE, FAM_F_RESPONSE, 0, 6, NULL, 0);
	seed_flush(&s, "proto", "write-response");
	seed_frame(&s, FAM_MSG_STATS, 0, 0, 7, NULL, 0);
	seed_flush(&s, "proto", "stats");
	seed_frame(&s, FAM_MSG_STATS, FAM_F_RESPONSE, 0, 7, stats,
	    sizeof stats - 1);
	seed_flush(&s, "proto", "stats-response");
	{
		struct fam_region_adopt ad = { .instance = 42, .region = 7,
			.key = 0x5eed, .flags = FAM_ADOPT_EXCLUSIVE };

		n = proto_put_region_adopt(p, &ad);
		seed_frame(&s, FAM_MSG_REGION_ADOPT, 0, 0, 8, p, (uint32_t)n);
		seed_flush(&s, "proto", "region-adopt");
		info.key = 0x5eed;
		info.mem_instance = 42;
		info.mem_region = 3;
		info.mem_key = 0xbeef;
		n = proto_put_region_info(p, &info);
		seed_frame(&s, FAM_MSG_REGION_ADOPT, FAM_F_RESPONSE, 0, 8, p,
		    (uint32_t)n);
		seed_flush(&s, "proto", "region-adopt-response");
		n = proto_put_region_advise(p, 7, FAM_ADVICE_STATIC);
		seed_frame(&s, FAM_MSG_REGION_ADVISE, 0, 0, 9, p, (uint32_t)n);
		seed_flush(&s, "proto", "region-advise");
		n = proto_put_read(p, &rw);
		seed_frame(&s, FAM_MSG_READ, FAM_F_BACKGROUND, 0, 10, p,
		    (uint32_t)n);
		seed_flush(&s, "proto", "read-background");
	}

	/* A whole conversation, as a host sends it. */
	n = proto_put_hello(p, &hello);
	seed_frame(&s, FAM_MSG_HELLO, 0, 0, 1, p, (uint32_t)n);
	memset(p, 0, FAM_PROOF_LEN);
	seed_frame(&s, FAM_MSG_AUTH, 0, 0, 1, p, FAM_AUTH_LEN);
	rc = (struct fam_region_create){ .size = 1 << 20 };
	n = proto_put_region_create(p, sizeof p, &rc);
	seed_frame(&s, FAM_MSG_REGION_CREATE, 0, 0, 2, p, (uint32_t)n);
	n = proto_put_write_hdr(p, &rw);
	memcpy(p + n, data, sizeof data);
	seed_frame(&s, FAM_MSG_WRITE, 0, 0, 3, p, (uint32_t)(n + sizeof data));
	n = proto_put_read(p, &rw);
	seed_frame(&s, FAM_MSG_READ, 0, 0, 4, p, (uint32_t)n);
	seed_frame(&s, FAM_MSG_STATS, 0, 0, 5, NULL, 0);
	n = proto_put_region_free(p, 7);
	seed_frame(&s, FAM_MSG_REGION_FREE, 0, 0, 6, p, (uint32_t)n);
	seed_flush(&s, "proto", "conversation");

	/* Headers famd must refuse. */
	seed_frame(&s, FAM_MSG_HELLO, 0, 0, 1, p, 0);
	s.buf[0] ^= 0xff;
	seed_flush(&s, "proto", "bad-magic");
	seed_frame(&s, FAM_MSG_HELLO, 0, 0, 1, NULL, 0);
	s.buf[4] = FAM_PROTO_VERSION + 1;
	seed_flush(&s, "proto", "version-2");
	seed_frame(&s, FAM_MSG_WRITE, 0, 0, 1, NULL, 0);
	s.buf[8] = 0x7f; /* len near 2 GiB */
	seed_flush(&s, "proto", "oversized");
}

/*
 * Appends a host's handshake: a HELLO request, and an AUTH whose proof is
 * all zero for the harness's own secret ("sesame": fuzz-net.c puts the
 * right proof in its place) or a wrong one for any other.
 */
static void
seed_hello(struct seed *s, const char *secret)
{
	struct fam_hello hello = { .role = FAM_WIRE_ROLE_HOST,
		.node = "host-a" };
	uint8_t p[FAM_HELLO_LEN];

	memset(hello.nonce, 0x4e, sizeof hello.nonce);
	proto_put_hello(p, &hello);
	seed_frame(s, FAM_MSG_HELLO, 0, 0, 1, p, sizeof p);
	memset(p, strcmp(secret, "sesame") == 0 ? 0 : 0x77, FAM_PROOF_LEN);
	seed_frame(s, FAM_MSG_AUTH, 0, 0, 1, p, FAM_AUTH_LEN);
}

/*
 * Appends a memory node's answers to a handshake: the challenge, and the
 * AUTH response with an all-zero proof (fuzz-client.c puts the right one
 * in its place) and hresp.
 */
static void
seed_server_hello(struct seed *s, const struct fam_hello_resp *hresp)
{
	struct fam_challenge ch = { .role = FAM_WIRE_ROLE_MEMORY,
		.node = "memory-a" };
	uint8_t p[FAM_AUTH_RESP_LEN];
	size_t n;

	memset(ch.nonce, 0x6b, sizeof ch.nonce);
	n = proto_put_challenge(p, &ch);
	seed_frame(s, FAM_MSG_HELLO, FAM_F_RESPONSE, 0, 1, p, (uint32_t)n);
	memset(p, 0, FAM_PROOF_LEN);
	n = proto_put_hello_resp(p + FAM_PROOF_LEN, hresp);
	seed_frame(s, FAM_MSG_AUTH, FAM_F_RESPONSE, 0, 1, p,
	    (uint32_t)(FAM_PROOF_LEN + n));
}

/* Appends a REGION_CREATE request. */
static void
seed_create(struct seed *s, uint64_t id, uint64_t size, uint32_t flags,
    const char *name, const char *path)
{
	struct fam_region_create rc = { .size = size, .flags = flags };
	uint8_t p[FAM_REGION_CREATE_MIN + FAM_NAME_MAX + FAM_PATH_MAX];
	size_t n;

	snprintf(rc.name, sizeof rc.name, "%s", name);
	snprintf(rc.path, sizeof rc.path, "%s", path);
	n = proto_put_region_create(p, sizeof p, &rc);
	seed_frame(s, FAM_MSG_REGION_CREATE, 0, 0, id, p, (uint32_t)n);
}

/* Appends a REGION_FREE or REGION_LEASE request. */
static void
seed_region_op(struct seed *s, uint8_t type, uint64_t id, uint32_t region)
{
	uint8_t p[FAM_REGION_FREE_LEN];

	proto_put_region_free(p, region);
	seed_frame(s, type, 0, 0, id, p, sizeof p);
}

/* Appends a REGION_ADOPT request. */
static void
seed_adopt(struct seed *s, uint64_t id, uint64_t instance, uint32_t region,
    uint32_t key, uint32_t flags)
{
	struct fam_region_adopt ad = { .instance = instance, .region = region,
		.key = key, .flags = flags };
	uint8_t p[FAM_REGION_ADOPT_LEN];

	proto_put_region_adopt(p, &ad);
	seed_frame(s, FAM_MSG_REGION_ADOPT, 0, 0, id, p, sizeof p);
}

/* Appends a REGION_ADVISE request. */
static void
seed_advise(struct seed *s, uint64_t id, uint32_t region, uint32_t advice)
{
	uint8_t p[FAM_REGION_ADVISE_LEN];

	proto_put_region_advise(p, region, advice);
	seed_frame(s, FAM_MSG_REGION_ADVISE, 0, 0, id, p, sizeof p);
}

/* Appends a REGION_DISCARD request. */
static void
seed_discard(struct seed *s, uint64_t id, uint32_t region, uint64_t off,
    uint64_t len)
{
	struct fam_region_discard d = { .region = region, .offset = off,
		.len = len };
	uint8_t p[FAM_REGION_DISCARD_LEN];

	proto_put_region_discard(p, &d);
	seed_frame(s, FAM_MSG_REGION_DISCARD, 0, 0, id, p, sizeof p);
}

/* Appends a READ request. */
static void
seed_read(struct seed *s, uint64_t id, uint32_t region, uint64_t off,
    uint32_t len)
{
	struct fam_rw rw = { .region = region, .len = len, .offset = off };
	uint8_t p[FAM_READ_LEN];

	proto_put_read(p, &rw);
	seed_frame(s, FAM_MSG_READ, 0, 0, id, p, sizeof p);
}

/* Appends a WRITE request with len bytes of data. */
static void
seed_write_req(struct seed *s, uint64_t id, uint32_t region, uint64_t off,
    uint32_t len)
{
	struct fam_rw rw = { .region = region, .len = len, .offset = off };
	uint8_t p[FAM_WRITE_HDR_LEN + 512];

	if (len > 512)
		seed_fail("write seed too long");
	proto_put_write_hdr(p, &rw);
	memset(p + FAM_WRITE_HDR_LEN, 0xa5, len);
	seed_frame(s, FAM_MSG_WRITE, 0, 0, id, p, FAM_WRITE_HDR_LEN + len);
}

/*
 * Streams a host sends a memory famd (fuzz-memory's famd: secret "sesame";
 * under its preload_dir graphs/web.bin of 10000 bytes, graphs/empty.bin
 * and graphs/up, a link to the directory above; region ids start at 1).
 */
static void
seed_memory(void)
{
	struct seed s = { .len = 0 };

	seed_hello(&s, "sesame");
	seed_create(&s, 2, 1 << 20, 0, "", "");
	seed_write_req(&s, 3, 1, 4096, 256);
	seed_read(&s, 4, 1, 4096, 256);
	seed_region_op(&s, FAM_MSG_REGION_LEASE, 5, 1);
	seed_frame(&s, FAM_MSG_STATS, 0, 0, 6, NULL, 0);
	seed_region_op(&s, FAM_MSG_REGION_FREE, 7, 1);
	seed_flush(&s, "memory", "create-write-read-free");
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 0, FAM_RF_FILE | FAM_RF_SHARED, "web",
	    "graphs/web.bin");
	seed_create(&s, 3, 0, FAM_RF_FILE | FAM_RF_SHARED, "web",
	    "graphs/web.bin");
	seed_read(&s, 4, 1, 8192, 4096);
	seed_write_req(&s, 5, 1, 0, 16);
	seed_region_op(&s, FAM_MSG_REGION_FREE, 6, 1);
	seed_flush(&s, "memory", "file-shared");
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 0, FAM_RF_FILE, "", "../secret");
	seed_create(&s, 3, 0, FAM_RF_FILE, "", "/etc/passwd");
	seed_create(&s, 4, 0, FAM_RF_FILE, "", "graphs/none");
	seed_flush(&s, "memory", "file-escapes");
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 4096, FAM_RF_PERSISTENT, "kept", "");
	seed_create(&s, 3, 64 << 20, 0, "", "");
	seed_read(&s, 4, 1, 4095, 2);
	seed_read(&s, 5, 1, 4096, 1);
	seed_read(&s, 6, 2, 0, 1);
	seed_write_req(&s, 7, 1, 4000, 200);
	seed_flush(&s, "memory", "persistent-ranges");
	seed_hello(&s, "wrong");
	seed_create(&s, 2, 1 << 20, 0, "", "");
	seed_flush(&s, "memory", "wrong-secret");
	seed_create(&s, 1, 1 << 20, 0, "", "");
	seed_flush(&s, "memory", "no-hello");
	seed_hello(&s, "sesame");
	seed_hello(&s, "sesame");
	seed_flush(&s, "memory", "second-hello");
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 1 << 20, 0, "", "");
	seed_write_req(&s, 3, 1, 0, 64);
	s.len -= 20; /* the connection ends inside the WRITE's data */
	seed_flush(&s, "memory", "write-cut-short");

	/* Sessions one after another, and at the same time (fuzz-memory.c). */
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 8192, FAM_RF_PERSISTENT, "kept", "");
	seed_write_req(&s, 3, 1, 0, 64);
	seed_add(&s, "NEXTPEER", 8);
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 8192, FAM_RF_PERSISTENT, "kept", "");
	seed_read(&s, 3, 1, 0, 64);
	seed_region_op(&s, FAM_MSG_REGION_FREE, 4, 1);
	seed_flush(&s, "memory", "persistent-reopened");
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 0, FAM_RF_FILE | FAM_RF_SHARED, "web",
	    "graphs/web.bin");
	seed_add(&s, "WITHPEER", 8);
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 0, FAM_RF_FILE | FAM_RF_SHARED, "web",
	    "graphs/web.bin");
	seed_read(&s, 3, 1, 0, 4096);
	seed_region_op(&s, FAM_MSG_REGION_FREE, 4, 1);
	seed_read(&s, 5, 1, 0, 4096);
	seed_flush(&s, "memory", "shared-two-sessions");
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 4096, 0, "mine", "");
	seed_add(&s, "WITHPEER", 8);
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 4096, 0, "mine", "");
	seed_create(&s, 3, 4096, FAM_RF_SHARED, "mine", "");
	seed_read(&s, 4, 1, 0, 16);
	seed_flush(&s, "memory", "writer-region-taken");
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 0, FAM_RF_FILE, "", "graphs/empty.bin");
	seed_create(&s, 3, 0, FAM_RF_FILE, "", "graphs/up/secret");
	seed_create(&s, 4, 0, FAM_RF_FILE, "", "graphs");
	seed_create(&s, 5, 100, FAM_RF_FILE, "", "graphs/web.bin");
	seed_read(&s, 6, 1, 0, 4096);
	seed_flush(&s, "memory", "file-edges");

	/* Discards: inside, past the end, unaligned, a file, no region. */
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 65536, 0, "", "");
	seed_write_req(&s, 3, 1, 4096, 512);
	seed_discard(&s, 4, 1, 4096, 8192);
	seed_discard(&s, 5, 1, 0, 1 << 20);
	seed_discard(&s, 6, 1, 100, 5000);
	seed_discard(&s, 7, 9, 0, 4096);
	seed_read(&s, 8, 1, 4096, 512);
	seed_flush(&s, "memory", "discard");

	/* Adopting another session's region needs its key (random). */
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 8192, FAM_RF_PERSISTENT, "kept", "");
	seed_advise(&s, 3, 1, FAM_ADVICE_STATIC);
	seed_advise(&s, 4, 1, FAM_ADVICE_MAX + 1);
	seed_advise(&s, 5, 9, FAM_ADVICE_NORMAL);
	seed_adopt(&s, 6, 0, 1, 0x12345678, 0);
	seed_add(&s, "WITHPEER", 8);
	seed_hello(&s, "sesame");
	seed_adopt(&s, 2, 0, 1, 0x12345678, FAM_ADOPT_EXCLUSIVE);
	seed_adopt(&s, 3, 7, 1, 0, 0);
	seed_adopt(&s, 4, 0, 5, 1, 0);
	seed_flush(&s, "memory", "adopt-advise");
}

/*
 * Streams hosts send a dpu (fuzz-dpu's: the memory famd behind it is
 * fuzz-memory's, without quotas; it caches regions named "web" whole;
 * region ids start at 1).
 */
static void
seed_dpu(void)
{
	struct seed s = { .len = 0 };

	seed_hello(&s, "sesame");
	seed_create(&s, 2, 1 << 20, 0, "", "");
	seed_write_req(&s, 3, 1, 4096, 256);
	seed_read(&s, 4, 1, 4096, 256);
	seed_frame(&s, FAM_MSG_STATS, 0, 0, 5, NULL, 0);
	seed_advise(&s, 6, 1, FAM_ADVICE_NORMAL);
	seed_region_op(&s, FAM_MSG_REGION_FREE, 7, 1);
	seed_flush(&s, "dpu", "create-write-read-free");
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 0, FAM_RF_FILE | FAM_RF_SHARED, "web",
	    "graphs/web.bin");
	seed_advise(&s, 3, 1, FAM_ADVICE_STATIC);
	seed_read(&s, 4, 1, 0, 4096);
	seed_read(&s, 5, 1, 4096, 4096);
	seed_advise(&s, 6, 1, FAM_ADVICE_NORMAL);
	seed_read(&s, 7, 1, 0, 4096);
	seed_region_op(&s, FAM_MSG_REGION_FREE, 8, 1);
	seed_flush(&s, "dpu", "static-cache");
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 1 << 20, 0, "", "");
	for (unsigned i = 0; i < 8; i++)
		seed_read(&s, 3 + i, 1, (uint64_t)i * 65536, 4096);
	seed_flush(&s, "dpu", "sequential-reads");
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 0, FAM_RF_FILE | FAM_RF_SHARED, "web",
	    "graphs/web.bin");
	seed_read(&s, 3, 1, 0, 512);
	seed_add(&s, "WITHPEER", 8);
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 0, FAM_RF_FILE | FAM_RF_SHARED, "web",
	    "graphs/web.bin");
	seed_read(&s, 3, 1, 512, 512);
	seed_region_op(&s, FAM_MSG_REGION_FREE, 4, 1);
	seed_flush(&s, "dpu", "two-hosts-shared");
	seed_hello(&s, "sesame");
	seed_create(&s, 2, 8192, FAM_RF_PERSISTENT, "kept", "");
	seed_adopt(&s, 3, 42, 1, 0x12345678, 0);
	seed_adopt(&s, 4, 0, 9, 1, FAM_ADOPT_EXCLUSIVE);
	seed_region_op(&s, FAM_MSG_REGION_LEASE, 5, 1);
	seed_add(&s, "NEXTPEER", 8);
	seed_hello(&s, "wrong");
	seed_flush(&s, "dpu", "adopt-lease-and-a-wrong-secret");
}

/*
 * What a memory node answers fuzz-client's host: the hello (id 1), then
 * REGION_CREATE (2), READ of 4096 (3), READ of 64 (4), WRITE (5), STATS
 * (6), REGION_FREE (7), REGION_ADVISE (8) and REGION_ADOPT (9).
 */
static void
seed_client(void)
{
	struct seed s = { .len = 0 };
	struct fam_hello_resp hresp = { .role = FAM_WIRE_ROLE_MEMORY,
		.session = 0x1122334455667788ull, .instance = 42,
		.node = "memory-a" };
	struct fam_region_info info = { .region = 1, .size = 1 << 20,
		.length = 1 << 20 };
	uint8_t p[4096];
	const char stats[] = "{\"regions\":1}";
	size_t n;

	memset(p, 0x3c, sizeof p);
	seed_server_hello(&s, &hresp);
	n = proto_put_region_info(p, &info);
	seed_frame(&s, FAM_MSG_REGION_CREATE, FAM_F_RESPONSE, 0, 2, p,
	    (uint32_t)n);
	memset(p, 0x3c, sizeof p);
	seed_frame(&s, FAM_MSG_READ, FAM_F_RESPONSE, 0, 3, p, 4096);
	seed_frame(&s, FAM_MSG_READ, FAM_F_RESPONSE, 0, 4, p, 64);
	seed_frame(&s, FAM_MSG_WRITE, FAM_F_RESPONSE, 0, 5, NULL, 0);
	seed_frame(&s, FAM_MSG_STATS, FAM_F_RESPONSE, 0, 6, stats,
	    sizeof stats - 1);
	seed_frame(&s, FAM_MSG_REGION_FREE, FAM_F_RESPONSE, 0, 7, NULL, 0);
	seed_frame(&s, FAM_MSG_REGION_ADVISE, FAM_F_RESPONSE, 0, 8, NULL, 0);
	info.key = 0x5eed;
	n = proto_put_region_info(p, &info);
	seed_frame(&s, FAM_MSG_REGION_ADOPT, FAM_F_RESPONSE, 0, 9, p,
	    (uint32_t)n);
	seed_flush(&s, "client", "answers-in-order");

	seed_server_hello(&s, &hresp);
	seed_frame(&s, FAM_MSG_REGION_FREE, FAM_F_RESPONSE, ENOENT, 7, NULL, 0);
	seed_frame(&s, FAM_MSG_READ, FAM_F_RESPONSE, ERANGE, 4, NULL, 0);
	seed_frame(&s, FAM_MSG_STATS, 0, 0, 9, NULL, 0); /* a request to us */
	seed_frame(&s, FAM_MSG_WRITE, FAM_F_RESPONSE, EROFS, 5, NULL, 0);
	memset(p, 0x3c, sizeof p);
	seed_frame(&s, FAM_MSG_READ, FAM_F_RESPONSE, 0, 3, p, 4096);
	seed_frame(&s, FAM_MSG_REGION_CREATE, FAM_F_RESPONSE, ENOSPC, 2, NULL,
	    0);
	seed_flush(&s, "client", "answers-out-of-order");

	seed_frame(&s, FAM_MSG_HELLO, FAM_F_RESPONSE, EACCES, 1, NULL, 0);
	seed_flush(&s, "client", "hello-refused");
	seed_server_hello(&s, &hresp);
	seed_frame(&s, FAM_MSG_READ, FAM_F_RESPONSE, 0, 4, p, 65);
	seed_flush(&s, "client", "read-wrong-length");
	seed_server_hello(&s, &hresp);
	seed_frame(&s, FAM_MSG_STATS, FAM_F_RESPONSE, 0, 77, NULL, 0);
	seed_flush(&s, "client", "unknown-id");
	seed_server_hello(&s, &hresp);
	seed_frame(&s, FAM_MSG_READ, FAM_F_RESPONSE, 0, 3, p, 4096);
	s.len -= 1000; /* the memory node stops inside the data */
	seed_flush(&s, "client", "read-cut-short");
}

/* Appends a session message with its data. */
static void
seed_smsg(struct seed *s, uint16_t type, uint64_t seq, uint32_t flags,
    uint64_t a, uint64_t b, uint64_t c, uint64_t d, const char *data)
{
	struct fam_smsg m = { .magic = FAM_SESSION_MAGIC,
		.version = FAM_SESSION_VERSION, .type = type, .flags = flags,
		.seq = seq, .a = a, .b = b, .c = c, .d = d };

	m.len = data != NULL ? (uint32_t)strlen(data) : 0;
	seed_add(s, &m, sizeof m);
	if (data != NULL)
		seed_add(s, data, m.len);
}

/* Session streams, as a program sends them, and famd's replies. */
static void
seed_session(void)
{
	struct seed s = { .len = 0 };
	const uint64_t mib = 1 << 20, arena = 0x7f0000000000ull;
	char big[FAM_SESSION_MAX_DATA + 2];

	seed_smsg(&s, FAM_S_HELLO, 1, 0, FAM_API_VERSION, 0, 0, 0, NULL);
	seed_flush(&s, "session", "hello");
	seed_smsg(&s, FAM_S_HELLO, 1, 0, FAM_API_VERSION, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_UFFD, 2, 0, 0, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_ALLOC, 3, 0, 8 * mib, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_MAP, 4, 0, 1, arena, 0, 0, NULL);
	seed_smsg(&s, FAM_S_STAT, 5, 0, arena + 4096, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_FREE, 6, 0, 1, 0, 0, 0, NULL);
	seed_flush(&s, "session", "alloc-map-stat-free");
	seed_smsg(&s, FAM_S_HELLO, 1, 0, FAM_API_VERSION, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_UFFD, 2, 0, 0, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_ALLOC, 3, 0, 0,
	    FAM_S_ALLOC_FILE | FAM_S_ALLOC_SHARED, 0, 0, "graphs/web.bin");
	seed_smsg(&s, FAM_S_ALLOC, 4, 0, 3 * mib, 0, 2 * mib, 0, NULL);
	seed_flush(&s, "session", "alloc-file-aligned");
	seed_smsg(&s, FAM_S_ALLOC, 1, 0, mib, 0, 0, 0, NULL);
	seed_flush(&s, "session", "alloc-before-uffd");
	seed_smsg(&s, FAM_S_HELLO, 1, 0, FAM_API_VERSION, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_UFFD, 2, 0, 0, 0, 0, 0, NULL);
	seed_add(&s, &(struct fam_smsg){ .magic = FAM_SESSION_MAGIC,
	    .version = FAM_SESSION_VERSION, .type = FAM_S_ALLOC, .seq = 3,
	    .len = 5, .b = FAM_S_ALLOC_FILE }, sizeof(struct fam_smsg));
	seed_add(&s, "a\0b/c", 5);
	seed_flush(&s, "session", "alloc-path-with-nul");
	memset(big, 'p', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	seed_smsg(&s, FAM_S_HELLO, 1, 0, FAM_API_VERSION, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_UFFD, 2, 0, 0, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_ALLOC, 3, 0, 0, FAM_S_ALLOC_FILE, 0, 0, big);
	seed_flush(&s, "session", "alloc-path-too-long");
	/* Regions placed and freed out of order, aligned and not. */
	seed_smsg(&s, FAM_S_HELLO, 1, 0, FAM_API_VERSION, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_UFFD, 2, 0, 0, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_ALLOC, 3, 0, mib, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_ALLOC, 4, 0, 3 * mib, 0, 2 * mib, 0, NULL);
	seed_smsg(&s, FAM_S_ALLOC, 5, 0, 65536, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_ALLOC, 6, 0, 2 * mib, 0, 4 * mib, 0, NULL);
	seed_smsg(&s, FAM_S_FREE, 7, 0, 2, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_FREE, 8, 0, 1, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_FREE, 9, 0, 4, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_ALLOC, 10, 0, 5 * mib, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_FREE, 11, 0, 3, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_ALLOC, 12, 0, 64 * mib, 0, 0, 0, NULL);
	seed_flush(&s, "session", "alloc-free-out-of-order");
	seed_smsg(&s, FAM_S_HELLO, 1, 0, FAM_API_VERSION, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_UFFD, 2, 0, 0, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_ALLOC, 3, 0, 8 * mib, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_ADVISE, 4, 0, arena, FAM_ADVICE_STATIC, 0, 0,
	    NULL);
	seed_smsg(&s, FAM_S_ADVISE, 5, 0, arena, 7, 0, 0, NULL);
	seed_flush(&s, "session", "advise");
	/* Discards: whole chunks, past the end, unaligned, of no region. */
	seed_smsg(&s, FAM_S_HELLO, 1, 0, FAM_API_VERSION, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_UFFD, 2, 0, 0, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_ALLOC, 3, 0, 8 * mib, 0, 0, 0, NULL);
	seed_smsg(&s, FAM_S_DISCARD, 4, 0, arena + 65536, 2 * mib, 0, 0,
	    NULL);
	seed_smsg(&s, FAM_S_DISCARD, 5, 0, arena, 64 * mib, 0, 0, NULL);
	seed_smsg(&s, FAM_S_DISCARD, 6, 0, arena + 4096, 65536, 0, 0, NULL);
	seed_smsg(&s, FAM_S_DISCARD, 7, 0, 4096, 65536, 0, 0, NULL);
	seed_smsg(&s, FAM_S_DISCARD, 8, 0, arena, 0, 0, 0, NULL);
	seed_flush(&s, "session", "discard");
	/* famd's replies, for libfam's checks. */
	seed_smsg(&s, FAM_S_HELLO, 1, FAM_S_FEAT_DEVFD, 64 * 1024,
	    64ull << 30, FAM_S_FEAT_DEVFD, 0, NULL);
	seed_smsg(&s, FAM_S_ALLOC, 3, FAM_S_NEW_ARENA, 1, 0, 8 * mib, 1, NULL);
	seed_flush(&s, "session", "replies");
}

/* Admin requests, one or more lines each, as famctl and scripts send them. */
static void
seed_admin(void)
{
	static const struct {
		const char *name, *text;
	} seeds[] = {
		{ "list-commands", "{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"list-commands\",\"id\":1}\n" },
		{ "version", "{\"jsonrpc\":\"2.0\",\"method\":\"version\","
		    "\"id\":\"v\"}\n" },
		{ "status", "{\"jsonrpc\":\"2.0\",\"method\":\"status\","
		    "\"params\":{},\"id\":2}\n" },
		{ "config-show", "{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"config.show\",\"id\":3}\n" },
		{ "config-reload", "{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"config.reload\",\"id\":4}\n" },
		{ "log-level", "{\"jsonrpc\":\"2.0\",\"method\":\"log.level\","
		    "\"id\":5}\n{\"jsonrpc\":\"2.0\",\"method\":\"log.level\","
		    "\"params\":{\"level\":\"err\"},\"id\":6}\n" },
		{ "log-level-bad", "{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"log.level\",\"params\":{\"level\":\"loud\"},\"id\":7}\n" },
		{ "stats-reset", "{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"stats.reset\",\"id\":null}\n" },
		{ "regions", "{\"jsonrpc\":\"2.0\",\"method\":\"regions\","
		    "\"id\":8}\n" },
		{ "region-free", "{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"region.free\",\"params\":{\"id\":1},\"id\":9}\n" },
		{ "region-free-bad-id", "{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"region.free\",\"params\":{\"id\":\"x\"},\"id\":10}\n" },
		{ "notification", "{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"version\"}\n" },
		{ "parse-error", "{\"jsonrpc\":\"2.0\",\"method\":\n" },
		{ "batch", "[{\"jsonrpc\":\"2.0\",\"method\":\"version\","
		    "\"id\":1}]\n" },
		{ "not-an-object", "42\n\"version\"\nnull\n" },
		{ "bad-id", "{\"jsonrpc\":\"2.0\",\"method\":\"version\","
		    "\"id\":[1]}\n" },
		{ "bad-version", "{\"jsonrpc\":\"1.0\",\"method\":\"version\","
		    "\"id\":1}\n" },
		{ "unknown-member", "{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"version\",\"id\":1,\"x\":true}\n" },
		{ "unknown-method", "{\"jsonrpc\":\"2.0\",\"method\":\"nope\","
		    "\"id\":1}\n" },
		{ "params-array", "{\"jsonrpc\":\"2.0\",\"method\":\"version\","
		    "\"params\":[1],\"id\":1}\n" },
		{ "unknown-param", "{\"jsonrpc\":\"2.0\",\"method\":\"status\","
		    "\"params\":{\"verbose\":true},\"id\":1}\n" },
		{ "duplicate-key", "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,"
		    "\"method\":\"version\"}\n" },
		{ "crlf-and-blank", "\r\n\n{\"jsonrpc\":\"2.0\",\"method\":"
		    "\"version\",\"id\":1}\r\n" },
		{ "unterminated", "{\"jsonrpc\":\"2.0\",\"method\":\"version\","
		    "\"id\":1}" },
		{ "unicode", "{\"jsonrpc\":\"2.0\",\"method\":\"\\u00e9\\u0000"
		    "x\",\"id\":\"\\ud83d\\ude00\"}\n" },
	};

	for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
		seed_write("admin", seeds[i].name, seeds[i].text,
		    strlen(seeds[i].text));
}

/* Writes a configuration from a string. */
static void
seed_conf(const char *name, const char *text)
{
	seed_write("config", name, text, strlen(text));
}

/* The example of each role, from the key table, and hand-made edge cases. */
static void
seed_config(void)
{
	for (int role = 0; role < ROLE_COUNT; role++) {
		char name[64], *text = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&text, &len);

		if (f == NULL)
			seed_fail("open_memstream: %s", strerror(errno));
		cfg_write_example(f, role);
		fclose(f);
		snprintf(name, sizeof name, "example-%s", cfg_role_names[role]);
		seed_write("config", name, text, len);
		free(text);
	}
	seed_conf("memory-set", "[famd]\nrole = memory\nnode_name = m1\n"
	    "log_level = debug\nop_timeout = 1500ms\nsecret_file =\n"
	    "[memory]\nlisten = [::1]:7700\ncapacity = 64 GiB\n"
	    "session_grace = 2m\n");
	seed_conf("host-set", "\xef\xbb\xbf# a BOM first\n[famd]\n"
	    "role = host\n[host]\nmemory_nodes = 10.0.0.1:7700, "
	    "[fe80::1]:7701,m2:1\nbuffer_size = 512M\nchunk_size = 2M\n"
	    "arena_size = 1T\nhigh_watermark = 90\nlow_watermark = 80\n"
	    "numa_node = auto\neviction = fifo\n[verbs]\nqps_per_peer = 2\n");
	seed_conf("errors", "[famd]\nrole = host\nrole = memory\n"
	    "  indented = 1\nnot a key\nkey: value\n[nowhere]\nx = 1\n"
	    "[host\n[host] trailing\n[host]\nbuffer_size = 1Q\n"
	    "chunk_size = 3000\nlow_watermark = 99\nhigh_watermark = 2\n"
	    "memory_nodes = :1,a:0,b:65536,[x]\nunknown = 1\n");
	seed_conf("outside-section", "role = host\n; comment\n# comment\n");
	seed_conf("overrides", "[famd]\nrole = dpu\n"
	    "-o famd.log_level=debug\n-o famd.node_name=dpu-1\n"
	    "-o host.buffer_size=2G\n-o bad\n-o famd.nope=1\n");
	seed_conf("empty", "");
}

/* Writes the dictionary of every section, key and choice famd knows. */
static void
seed_config_dict(void)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof path, "%s/dict/config.dict", seed_top);
	f = fopen(path, "w");
	if (f == NULL)
		seed_fail("%s: %s", path, strerror(errno));
	fprintf(f, "# famd.conf tokens: written by fuzz-seeds from the key "
	    "table.\n\"[\"\n\"]\"\n\" = \"\n\"-o \"\n\"auto\"\n\"yes\"\n"
	    "\"no\"\n\"K\"\n\"M\"\n\"G\"\n\"T\"\n\"ms\"\n\"s\"\n\"m\"\n"
	    "\"h\"\n\"127.0.0.1:7700\"\n\"[::1]:0\"\n");
	for (int k = 0; k < CFG_NKEYS; k++) {
		const struct cfg_key_def *d = &cfg_keys[k];

		if (k == 0 || strcmp(d->section, cfg_keys[k - 1].section) != 0)
			fprintf(f, "\"[%s]\"\n", d->section);
		fprintf(f, "\"%s\"\n\"%s.%s=\"\n", d->name, d->section,
		    d->name);
		for (int i = 0; d->choices != NULL && d->choices[i] != NULL;
		    i++)
			fprintf(f, "\"%s\"\n", d->choices[i]);
	}
	if (fclose(f) != 0)
		seed_fail("%s: %s", path, strerror(errno));
}

/* Writes every seed corpus and the configuration dictionary. */
int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: fuzz-seeds SRCDIR/fuzz\n");
		return 2;
	}
	seed_top = argv[1];
	seed_proto();
	seed_memory();
	seed_dpu();
	seed_client();
	seed_session();
	seed_admin();
	seed_config();
	seed_config_dict();
	return 0;
}
