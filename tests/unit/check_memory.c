/* SPDX-License-Identifier: Apache-2.0 */
/*
 * check_memory.c - the memory role's regions, handles and quotas.
 *
 * Two ways in, both real: the region layer (memory-region.c) called
 * directly with sessions of the session layer, on real anonymous memory
 * and a real preload directory; and a memory famd started in this process
 * (as famd.c starts one) that a tcp peer on a loopback connection creates
 * regions on, reads, writes and frees, its counters read from its status.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "memory/memory.h"

#define KIB        1024u
#define FILE_LEN   10000u     /* bytes of preload/data.bin */
#define T_OP       10000      /* deadline of a peer's operation, ms */

static struct famd d;
static struct cfg cfg;
static char dir[] = "/tmp/check_memory.XXXXXX";
static uint8_t file_data[FILE_LEN];

/* ---- fixtures ----------------------------------------------------------- */

/* Writes len bytes to a new file at path. */
static void
write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

/*
 * Makes the test directory: preload/data.bin, preload/sub/nested.bin,
 * outside.bin beside preload/, and preload/link, a symlink to it.
 */
static void
make_dir(void)
{
	char path[256];

	snprintf(dir, sizeof dir, "/tmp/check_memory.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/preload", dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof path, "%s/preload/sub", dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	for (size_t i = 0; i < FILE_LEN; i++)
		file_data[i] = (uint8_t)(i * 7 + 1);
	snprintf(path, sizeof path, "%s/preload/data.bin", dir);
	write_file(path, file_data, FILE_LEN);
	snprintf(path, sizeof path, "%s/preload/sub/nested.bin", dir);
	write_file(path, "nested", 6);
	snprintf(path, sizeof path, "%s/outside.bin", dir);
	write_file(path, "secret", 6);
	snprintf(path, sizeof path, "%s/preload/link", dir);
	ck_assert_int_eq(symlink("../outside.bin", path), 0);
}

/* Removes one entry of the test directory. */
static int
rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

/*
 * Loads a memory famd's configuration: 1 MiB of capacity, each peer node
 * at most 512 KiB and 4 regions, the preload directory of make_dir().
 */
static void
load_cfg(void)
{
	struct cfg_errors errs = { 0 };
	char *text;
	FILE *f;

	ck_assert_int_ge(asprintf(&text, "[famd]\nrole = memory\n"
	    "node_name = check\nadmin_socket = %s/admin.sock\n"
	    "log_level = err\nop_timeout = 10s\n[memory]\n"
	    "listen = 127.0.0.1:0\ncapacity = 1M\npreload_dir = %s/preload\n"
	    "session_grace = 0\npeer_max_bytes = 512K\n"
	    "peer_max_regions = 4\n", dir, dir), 0);
	f = fmemopen(text, strlen(text), "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(cfg_load_file(&cfg, f, "check_memory.conf", NULL, 0,
	    &errs), 0);
	fclose(f);
	free(text);
}

/* A configuration, a loop and a preload directory for every test. */
static void
setup_famd(void)
{
	log_open(LOG_DEST_STDERR, LOG_ERR);
	make_dir();
	load_cfg();
	memset(&d, 0, sizeof d);
	d.cfg = &cfg;
	d.cfg_path = cfg.path;
	d.role = ROLE_MEMORY;
	d.ops = &role_memory_ops;
	d.base = event_base_new();
	ck_assert_ptr_nonnull(d.base);
	famd = &d;
}

/* Frees what setup_famd() made. */
static void
teardown_famd(void)
{
	event_base_free(d.base);
	cfg_free(&cfg);
	nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* The region layer alone, as the role's start prepares it. */
static void
setup_regions(void)
{
	setup_famd();
	memset(&mem, 0, sizeof mem);
	ck_assert_int_eq(mem_regions_init(&d), 0);
	mem_sessions_init(0);
}

/* Ends every session and frees every region, as the role's stop does. */
static void
teardown_regions(void)
{
	mem.stopping = true;
	mem_sessions_end_all("test over");
	mem_regions_fini();
	ck_assert_uint_eq(mem.reserved, 0);
	teardown_famd();
}

/* ---- the region layer --------------------------------------------------- */

/* Starts a session of peer node `node`. */
static struct mem_session *
session(const char *node)
{
	struct fam_hello hello = { .role = FAM_WIRE_ROLE_HOST };
	struct mem_session *s;

	snprintf(hello.node, sizeof hello.node, "%s", node);
	s = mem_session_new(&hello, "127.0.0.1:1");
	ck_assert_ptr_nonnull(s);
	return s;
}

/* Creates a region of size bytes for s; returns 0 or -errno, *id its id. */
static int
create(struct mem_session *s, uint64_t size, uint32_t flags, const char *name,
    const char *path, uint32_t *id)
{
	struct fam_region_create req = { .size = size, .flags = flags };
	struct mem_region *r = NULL;
	int err;

	snprintf(req.name, sizeof req.name, "%s", name != NULL ? name : "");
	snprintf(req.path, sizeof req.path, "%s", path != NULL ? path : "");
	err = mem_region_create(s, &req, &r);
	if (err == 0 && id != NULL)
		*id = r->id;
	return err;
}

/* Returns the memory s reaches at off of region id, len bytes, or NULL. */
static uint8_t *
reach(struct mem_session *s, uint32_t id, uint64_t off, uint32_t len,
    bool write, int *err)
{
	struct mem_region *r;

	*err = mem_region_access(s, id, off, len, write, &r);
	return *err == 0 ? (uint8_t *)r->mem + off : NULL;
}

START_TEST(test_new_region_is_zero_filled_and_reads_back_what_was_written)
{
	struct mem_session *s = session("host-a");
	uint8_t pattern[300], *p;
	uint32_t id;
	int err;

	ck_assert_int_eq(create(s, 64 * KIB, 0, NULL, NULL, &id), 0);
	p = reach(s, id, 0, 64 * KIB, false, &err);
	ck_assert_int_eq(err, 0);
	for (unsigned i = 0; i < 64 * KIB; i++)
		ck_assert_uint_eq(p[i], 0);
	for (unsigned i = 0; i < sizeof pattern; i++)
		pattern[i] = (uint8_t)(i ^ 0x5a);
	p = reach(s, id, 4000, sizeof pattern, true, &err);
	ck_assert_int_eq(err, 0);
	memcpy(p, pattern, sizeof pattern);
	p = reach(s, id, 3999, sizeof pattern + 2, false, &err);
	ck_assert_int_eq(err, 0);
	ck_assert_uint_eq(p[0], 0);
	ck_assert_mem_eq(p + 1, pattern, sizeof pattern);
	ck_assert_uint_eq(p[sizeof pattern + 1], 0);
}
END_TEST

START_TEST(test_region_size_is_rounded_up_to_the_page_and_counted_reserved)
{
	struct mem_session *s = session("host-a");
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint32_t id;

	ck_assert_int_eq(create(s, 1000, 0, NULL, NULL, &id), 0);
	ck_assert_uint_eq(mem_region_find(id)->size, page);
	ck_assert_uint_eq(mem_region_find(id)->length, 1000);
	ck_assert_uint_eq(mem.reserved, page);
}
END_TEST

START_TEST(test_capacity_refuses_an_allocation_past_it)
{
	struct mem_session *a = session("host-a"), *b = session("host-b"),
	    *c = session("host-c");
	uint32_t ida;

	ck_assert_int_eq(create(c, 2048 * KIB, 0, NULL, NULL, NULL), -ENOSPC);
	ck_assert_int_eq(create(a, 512 * KIB, 0, NULL, NULL, &ida), 0);
	ck_assert_int_eq(create(b, 512 * KIB, 0, NULL, NULL, NULL), 0);
	ck_assert_uint_eq(mem.reserved, 1024 * KIB);
	/* Each node is within its quota: only the capacity says no. */
	ck_assert_int_eq(create(c, 4 * KIB, 0, NULL, NULL, NULL), -ENOSPC);
	ck_assert_uint_eq(mem.n.quota_refusals, 0);
	ck_assert_uint_eq(mem.nregions, 2);
	/* Freeing gives the capacity back. */
	ck_assert_int_eq(mem_region_free(a, ida), 0);
	ck_assert_uint_eq(mem.reserved, 512 * KIB);
	ck_assert_int_eq(create(c, 512 * KIB, 0, NULL, NULL, NULL), 0);
}
END_TEST

START_TEST(test_peer_max_regions_refuses_a_fifth_region_until_one_is_freed)
{
	struct mem_session *a = session("host-a"), *a2 = session("host-a"),
	    *b = session("host-b");
	uint32_t ids[4];

	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(create(i < 2 ? a : a2, 4 * KIB, 0, NULL, NULL,
		    &ids[i]), 0);
	/* Every session of the node counts toward the node's quota. */
	ck_assert_int_eq(create(a, 4 * KIB, 0, NULL, NULL, NULL), -EDQUOT);
	ck_assert_int_eq(create(a2, 4 * KIB, 0, NULL, NULL, NULL), -EDQUOT);
	ck_assert_uint_eq(mem.n.quota_refusals, 2);
	/* Another node has a quota of its own. */
	ck_assert_int_eq(create(b, 4 * KIB, 0, NULL, NULL, NULL), 0);
	ck_assert_int_eq(mem_region_free(a2, ids[3]), 0);
	ck_assert_int_eq(create(a, 4 * KIB, 0, NULL, NULL, NULL), 0);
	ck_assert_uint_eq(mem.n.quota_refusals, 2);
}
END_TEST

START_TEST(test_peer_max_bytes_refuses_past_the_limit_and_free_gives_it_back)
{
	struct mem_session *a = session("host-a");
	uint32_t id1, id2;

	ck_assert_int_eq(create(a, 600 * KIB, 0, NULL, NULL, NULL), -EDQUOT);
	ck_assert_int_eq(create(a, 256 * KIB, 0, NULL, NULL, &id1), 0);
	ck_assert_int_eq(create(a, 256 * KIB, 0, NULL, NULL, &id2), 0);
	ck_assert_int_eq(create(a, 4 * KIB, 0, NULL, NULL, NULL), -EDQUOT);
	ck_assert_uint_eq(mem.n.quota_refusals, 2);
	ck_assert_uint_eq(mem.reserved, 512 * KIB);
	ck_assert_int_eq(mem_region_free(a, id1), 0);
	ck_assert_int_eq(create(a, 256 * KIB, 0, NULL, NULL, NULL), 0);
	ck_assert_int_eq(create(a, 4 * KIB, 0, NULL, NULL, NULL), -EDQUOT);
}
END_TEST

START_TEST(test_unknown_region_or_another_sessions_region_is_refused)
{
	struct mem_session *a = session("host-a"), *b = session("host-b");
	uint32_t id;
	int err;

	ck_assert_int_eq(create(a, 8 * KIB, 0, NULL, NULL, &id), 0);
	ck_assert_ptr_null(reach(a, id + 1000, 0, 1, false, &err));
	ck_assert_int_eq(err, -ENOENT);
	ck_assert_ptr_null(reach(a, 0, 0, 1, false, &err));
	ck_assert_int_eq(err, -ENOENT);
	/* b has no handle on a's region: it reaches nothing, frees nothing. */
	ck_assert_ptr_null(reach(b, id, 0, 1, false, &err));
	ck_assert_int_eq(err, -ENOENT);
	ck_assert_ptr_null(reach(b, id, 0, 1, true, &err));
	ck_assert_int_eq(err, -ENOENT);
	ck_assert_int_eq(mem_region_free(b, id), -ENOENT);
	ck_assert_int_eq(mem_region_free(a, id + 1000), -ENOENT);
	ck_assert_ptr_nonnull(reach(a, id, 0, 1, false, &err));
}
END_TEST

START_TEST(test_offset_or_length_past_the_end_is_refused)
{
	struct mem_session *a = session("host-a");
	uint32_t id;
	int err;

	ck_assert_int_eq(create(a, 8 * KIB, 0, NULL, NULL, &id), 0);
	ck_assert_ptr_nonnull(reach(a, id, 4 * KIB, 4 * KIB, true, &err));
	ck_assert_ptr_nonnull(reach(a, id, 0, 8 * KIB, false, &err));
	ck_assert_ptr_null(reach(a, id, 8 * KIB, 1, false, &err));
	ck_assert_int_eq(err, -ERANGE);
	ck_assert_ptr_null(reach(a, id, 0, 8 * KIB + 1, true, &err));
	ck_assert_int_eq(err, -ERANGE);
	ck_assert_ptr_null(reach(a, id, 8 * KIB - 1, 2, false, &err));
	ck_assert_int_eq(err, -ERANGE);
	/* An offset that would wrap around. */
	ck_assert_ptr_null(reach(a, id, UINT64_MAX, 4096, false, &err));
	ck_assert_int_eq(err, -ERANGE);
	ck_assert_ptr_null(reach(a, id, UINT64_MAX - 100, 4096, true, &err));
	ck_assert_int_eq(err, -ERANGE);
}
END_TEST

START_TEST(test_freed_region_releases_its_handle_and_the_old_id_reaches_nothing)
{
	struct mem_session *a = session("host-a");
	uint32_t id, id2;
	int err;

	ck_assert_int_eq(create(a, 8 * KIB, 0, NULL, NULL, &id), 0);
	ck_assert_uint_eq(a->nregions, 1);
	ck_assert_int_eq(mem_region_free(a, id), 0);
	ck_assert_uint_eq(a->nregions, 0);
	ck_assert_uint_eq(a->bytes, 0);
	ck_assert_ptr_null(mem_region_find(id));
	ck_assert_ptr_null(reach(a, id, 0, 1, false, &err));
	ck_assert_int_eq(err, -ENOENT);
	ck_assert_int_eq(mem_region_free(a, id), -ENOENT);
	ck_assert_uint_eq(mem.reserved, 0);
	ck_assert_uint_eq(mem.n.regions_freed, 1);
	/* Ids are never reused: the old one still reaches nothing. */
	ck_assert_int_eq(create(a, 8 * KIB, 0, NULL, NULL, &id2), 0);
	ck_assert_uint_ne(id2, id);
	ck_assert_ptr_null(reach(a, id, 0, 1, false, &err));
	ck_assert_int_eq(err, -ENOENT);
}
END_TEST

START_TEST(test_region_freed_during_a_transfer_stays_mapped_until_let_go)
{
	struct mem_session *a = session("host-a");
	struct mem_region *r;
	uint32_t id;

	ck_assert_int_eq(create(a, 8 * KIB, 0, NULL, NULL, &id), 0);
	ck_assert_int_eq(mem_region_access(a, id, 0, 8 * KIB, true, &r), 0);
	mem_region_hold(r);
	mem_region_hold(r);
	ck_assert_int_eq(mem_region_free(a, id), 0);
	ck_assert_ptr_null(mem_region_find(id));
	/* Two transfers still write into mapped memory, still reserved. */
	memset(r->mem, 0xab, 8 * KIB);
	mem_region_let_go(r);
	memset(r->mem, 0xcd, 8 * KIB);
	ck_assert_uint_eq(mem.reserved, 8 * KIB);
	mem_region_let_go(r);
	ck_assert_uint_eq(mem.reserved, 0);
}
END_TEST

START_TEST(test_shared_region_refuses_writes_and_second_user_shares_it)
{
	struct mem_session *a = session("host-a"), *b = session("host-b");
	uint32_t id, id2;
	int err;

	ck_assert_int_eq(create(a, 8 * KIB, FAM_RF_SHARED, "table", NULL, &id),
	    0);
	ck_assert_ptr_null(reach(a, id, 0, 1, true, &err));
	ck_assert_int_eq(err, -EROFS);
	ck_assert_int_eq(create(b, 8 * KIB, FAM_RF_SHARED, "table", NULL, &id2),
	    0);
	ck_assert_uint_eq(id2, id);
	ck_assert_uint_eq(mem_region_find(id)->nhandles, 2);
	ck_assert_ptr_nonnull(reach(b, id, 0, 1, false, &err));
	/* The first user's free leaves the second its region. */
	ck_assert_int_eq(mem_region_free(a, id), 0);
	ck_assert_ptr_nonnull(reach(b, id, 0, 1, false, &err));
	ck_assert_ptr_null(reach(a, id, 0, 1, false, &err));
}
END_TEST

START_TEST(test_file_preload_under_the_allowed_directory_reads_back_the_file)
{
	struct mem_session *a = session("host-a");
	struct mem_region *r;
	uint8_t *p;
	uint32_t id;
	int err;

	ck_assert_int_eq(create(a, 0, FAM_RF_FILE, NULL, "data.bin", &id), 0);
	r = mem_region_find(id);
	ck_assert_uint_eq(r->length, FILE_LEN);
	ck_assert_uint_ge(r->size, FILE_LEN);
	ck_assert_str_eq(r->path, "data.bin");
	p = reach(a, id, 0, (uint32_t)r->size, false, &err);
	ck_assert_ptr_nonnull(p);
	ck_assert_mem_eq(p, file_data, FILE_LEN);
	for (uint64_t i = FILE_LEN; i < r->size; i++)
		ck_assert_uint_eq(p[i], 0);
	/* A size asked below the file's takes only that much of it. */
	ck_assert_int_eq(create(a, 100, FAM_RF_FILE, NULL, "./data.bin", &id),
	    0);
	ck_assert_uint_eq(mem_region_find(id)->length, 100);
	p = reach(a, id, 0, 101, false, &err);
	ck_assert_mem_eq(p, file_data, 100);
	ck_assert_uint_eq(p[100], 0);
	ck_assert_int_eq(create(a, 0, FAM_RF_FILE, NULL, "sub/nested.bin",
	    &id), 0);
	ck_assert_mem_eq(reach(a, id, 0, 6, false, &err), "nested", 6);
}
END_TEST

START_TEST(test_preload_path_outside_the_allowed_directory_is_refused)
{
	char abs[300];
	struct mem_session *a = session("host-a");

	snprintf(abs, sizeof abs, "%s/outside.bin", dir);
	ck_assert_int_eq(create(a, 0, FAM_RF_FILE, NULL, "../outside.bin",
	    NULL), -EACCES);
	ck_assert_int_eq(create(a, 0, FAM_RF_FILE, NULL, "sub/../../outside.bin",
	    NULL), -EACCES);
	ck_assert_int_eq(create(a, 0, FAM_RF_FILE, NULL, abs, NULL), -EACCES);
	/* A symlink that leads out of it. */
	ck_assert_int_eq(create(a, 0, FAM_RF_FILE, NULL, "link", NULL),
	    -EACCES);
	/* Not a regular file; not there at all. */
	ck_assert_int_eq(create(a, 0, FAM_RF_FILE, NULL, "sub", NULL),
	    -EACCES);
	ck_assert_int_eq(create(a, 0, FAM_RF_FILE, NULL, "missing.bin", NULL),
	    -ENOENT);
	ck_assert_uint_eq(mem.nregions, 0);
	ck_assert_uint_eq(mem.reserved, 0);
}
END_TEST

/* ---- a memory famd over a loopback connection --------------------------- */

/* The peer: a host's connection to the memory famd, and its last answer. */
static struct {
	struct fam_conn *c;
	bool connected, closed;
	bool done;
	int status;
	uint8_t payload[256];
	uint32_t len;
} peer;

/* The memory famd accepted the peer's hello. */
static void
peer_connected(struct fam_conn *c, const struct fam_hello_resp *resp,
    void *arg)
{
	ck_assert_uint_eq(resp->role, FAM_WIRE_ROLE_MEMORY);
	peer.connected = true;
}

/* The peer's connection is gone. */
static void
peer_closed(struct fam_conn *c, int err, void *arg)
{
	peer.closed = true;
	peer.c = NULL;
}

static const struct fam_conn_handlers peer_handlers = {
	.connected = peer_connected,
	.closed = peer_closed,
};

/* An operation of the peer completed: keeps its status and payload. */
static void
peer_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	peer.done = true;
	peer.status = status;
	peer.len = len < sizeof peer.payload ? len : sizeof peer.payload;
	if (payload != NULL)
		memcpy(peer.payload, payload, peer.len);
}

/* Runs the loop until *flag (the test's timeout stops a hang). */
static void
run_until(const bool *flag)
{
	while (!*flag)
		ck_assert_int_ge(event_base_loop(d.base, EVLOOP_ONCE), 0);
}

/* Starts the memory famd and connects the peer to it as node host-a. */
static void
setup_famd_peer(void)
{
	struct fam_conn_opts opts = { .kind = FAM_TP_TCP,
		.op_timeout_ms = T_OP };
	json_t *st = json_pack("{s:[]}", "peers");
	char *cause = NULL;

	setup_famd();
	admin_unregister_all(); /* a famd started before in this process */
	ck_assert_int_eq(d.ops->start(&d), 0);
	d.ops->status(&d, st);
	opts.hello.role = FAM_WIRE_ROLE_HOST;
	snprintf(opts.hello.node, sizeof opts.hello.node, "host-a");
	memset(&peer, 0, sizeof peer);
	ck_assert_int_eq(fam_connect(d.base, json_string_value(
	    json_object_get(json_object_get(st, "memory"), "listen")), &opts,
	    &peer_handlers, NULL, &peer.c, &cause), 0);
	json_decref(st);
	run_until(&peer.connected);
}

/* Closes the peer and stops the memory famd. */
static void
teardown_famd_peer(void)
{
	if (peer.c != NULL)
		fam_conn_close(peer.c);
	run_until(&peer.closed);
	d.ops->stop(&d);
	teardown_famd();
}

/* Returns counter `name` of the memory famd's status. */
static json_int_t
counter(const char *name)
{
	json_t *st = json_pack("{s:[]}", "peers");
	json_int_t v;

	d.ops->status(&d, st);
	v = json_integer_value(json_object_get(json_object_get(st, "counters"),
	    name));
	json_decref(st);
	return v;
}

/* Asks for a region of size bytes; 0 with *info, or -errno. */
static int
wire_create(uint64_t size, struct fam_region_info *info)
{
	struct fam_region_create req = { .size = size };
	uint8_t out[2 * FAM_PATH_MAX];
	size_t n = proto_put_region_create(out, sizeof out, &req);

	peer.done = false;
	ck_assert_int_eq(fam_conn_call(peer.c, FAM_MSG_REGION_CREATE, out,
	    (uint32_t)n, peer_done, NULL), 0);
	run_until(&peer.done);
	if (peer.status == 0)
		ck_assert_int_eq(proto_get_region_info(peer.payload, peer.len,
		    info), 0);
	return peer.status;
}

/* Frees region id; 0 or -errno. */
static int
wire_free(uint32_t id)
{
	uint8_t out[16];
	size_t n = proto_put_region_free(out, id);

	peer.done = false;
	ck_assert_int_eq(fam_conn_call(peer.c, FAM_MSG_REGION_FREE, out,
	    (uint32_t)n, peer_done, NULL), 0);
	run_until(&peer.done);
	return peer.status;
}

/* Reads (or writes) len bytes at off of region id; 0 or -errno. */
static int
wire_rw(bool write, uint32_t id, uint64_t off, uint32_t len, void *buf)
{
	struct fam_remote r = { .region = id }; /* size 0: the famd checks */

	peer.done = false;
	if (write)
		ck_assert_int_eq(fam_conn_write(peer.c, &r, off, len, buf, NULL,
		    peer_done, NULL), 0);
	else
		ck_assert_int_eq(fam_conn_read(peer.c, &r, off, len, buf, NULL,
		    peer_done, NULL), 0);
	run_until(&peer.done);
	return peer.status;
}

START_TEST(test_peer_writes_then_reads_back_over_a_loopback_connection)
{
	struct fam_region_info info;
	static uint8_t buf[16 * KIB], pattern[5000];

	ck_assert_int_eq(wire_create(64 * KIB, &info), 0);
	ck_assert_uint_eq(info.size, 64 * KIB);
	memset(buf, 0xee, sizeof buf);
	ck_assert_int_eq(wire_rw(false, info.region, 0, sizeof buf, buf), 0);
	for (unsigned i = 0; i < sizeof buf; i++)
		ck_assert_uint_eq(buf[i], 0);
	for (unsigned i = 0; i < sizeof pattern; i++)
		pattern[i] = (uint8_t)(i * 13);
	ck_assert_int_eq(wire_rw(true, info.region, 60 * KIB - 5000,
	    sizeof pattern, pattern), 0);
	ck_assert_int_eq(wire_rw(false, info.region, 60 * KIB - 5000,
	    sizeof pattern, buf), 0);
	ck_assert_mem_eq(buf, pattern, sizeof pattern);
	ck_assert_int_eq(counter("writes"), 1);
	ck_assert_int_eq(counter("reads"), 2);
	ck_assert_int_eq(counter("bytes_written"), sizeof pattern);
}
END_TEST

START_TEST(test_peer_past_capacity_is_refused_enospc_and_counted)
{
	struct fam_region_info info;

	ck_assert_int_eq(wire_create(4096 * KIB, &info), -ENOSPC);
	ck_assert_int_eq(counter("create_errors"), 1);
	ck_assert_int_eq(counter("regions"), 0);
	ck_assert_int_eq(counter("bytes_reserved"), 0);
	ck_assert_int_eq(wire_create(512 * KIB, &info), 0);
	ck_assert_int_eq(counter("regions"), 1);
}
END_TEST

START_TEST(test_peer_past_its_quota_is_refused_edquot_and_counted)
{
	struct fam_region_info info;
	uint32_t first = 0;

	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(wire_create(4 * KIB, &info), 0);
		if (i == 0)
			first = info.region;
	}
	ck_assert_int_eq(wire_create(4 * KIB, &info), -EDQUOT);
	ck_assert_int_eq(counter("quota_refusals"), 1);
	ck_assert_int_eq(counter("create_errors"), 1);
	ck_assert_int_eq(wire_free(first), 0);
	ck_assert_int_eq(wire_create(4 * KIB, &info), 0);
}
END_TEST

START_TEST(test_peer_freed_region_and_past_the_end_reach_nothing)
{
	struct fam_region_info info;
	uint8_t buf[256];

	ck_assert_int_eq(wire_create(8 * KIB, &info), 0);
	ck_assert_int_eq(wire_rw(false, info.region, 8 * KIB - 100,
	    sizeof buf, buf), -ERANGE);
	ck_assert_int_eq(wire_rw(true, info.region + 7, 0, sizeof buf, buf),
	    -ENOENT);
	ck_assert_int_eq(counter("rw_errors"), 2);
	ck_assert_int_eq(wire_free(info.region), 0);
	ck_assert_int_eq(wire_rw(false, info.region, 0, sizeof buf, buf),
	    -ENOENT);
	ck_assert_int_eq(wire_rw(true, info.region, 0, sizeof buf, buf),
	    -ENOENT);
	ck_assert_int_eq(wire_free(info.region), -ENOENT);
	ck_assert_int_eq(counter("rw_errors"), 4);
	ck_assert_int_eq(counter("free_errors"), 1);
	ck_assert_int_eq(counter("regions_freed"), 1);
}
END_TEST

static Suite *
memory_suite(void)
{
	Suite *s = suite_create("memory");
	TCase *t = tcase_create("regions");

	tcase_add_checked_fixture(t, setup_regions, teardown_regions);
	tcase_add_test(t,
	    test_new_region_is_zero_filled_and_reads_back_what_was_written);
	tcase_add_test(t,
	    test_region_size_is_rounded_up_to_the_page_and_counted_reserved);
	tcase_add_test(t, test_capacity_refuses_an_allocation_past_it);
	tcase_add_test(t,
	    test_peer_max_regions_refuses_a_fifth_region_until_one_is_freed);
	tcase_add_test(t,
	    test_peer_max_bytes_refuses_past_the_limit_and_free_gives_it_back);
	tcase_add_test(t,
	    test_unknown_region_or_another_sessions_region_is_refused);
	tcase_add_test(t, test_offset_or_length_past_the_end_is_refused);
	tcase_add_test(t,
	    test_freed_region_releases_its_handle_and_the_old_id_reaches_nothing);
	tcase_add_test(t,
	    test_region_freed_during_a_transfer_stays_mapped_until_let_go);
	tcase_add_test(t,
	    test_shared_region_refuses_writes_and_second_user_shares_it);
	tcase_add_test(t,
	    test_file_preload_under_the_allowed_directory_reads_back_the_file);
	tcase_add_test(t,
	    test_preload_path_outside_the_allowed_directory_is_refused);
	suite_add_tcase(s, t);

	t = tcase_create("famd");
	tcase_add_checked_fixture(t, setup_famd_peer, teardown_famd_peer);
	tcase_set_timeout(t, 30);
	tcase_add_test(t,
	    test_peer_writes_then_reads_back_over_a_loopback_connection);
	tcase_add_test(t, test_peer_past_capacity_is_refused_enospc_and_counted);
	tcase_add_test(t, test_peer_past_its_quota_is_refused_edquot_and_counted);
	tcase_add_test(t, test_peer_freed_region_and_past_the_end_reach_nothing);
	suite_add_tcase(s, t);
	return s;
}

/* Runs the suite. */
int
main(void)
{
	SRunner *sr = srunner_create(memory_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
