/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memory.h - the memory role's private header: its objects and its state.
 *
 * Files, top to bottom (each calls only the files below it):
 *   memory-role.c     lifecycle: start, reload, status, stop; admin commands
 *   memory-serve.c    connections and the request service (one handler per
 *                     request kind), reads and writes through resolve
 *   memory-session.c  peers' sessions, hello, leases for one-sided access
 *   memory-region.c   regions, handles, capacity, per-peer quotas, preloads;
 *                     the state `mem` below
 *
 * Objects:
 *   region   anonymous memory (zero-filled lazily), size rounded up to the
 *            page, id never reused while famd runs; freed with its last
 *            handle, except a FAM_RF_PERSISTENT one whose session ended,
 *            which stays until a session opens it by name again.
 *   handle   a session's use of a region (created, opened or adopted);
 *            READ and WRITE need one, anything else is ENOENT. A session
 *            that presents a region's random key (REGION_ADOPT) gets one:
 *            a dpu creates regions that its host adopts.
 *   session  a peer's hello accepted; a random token lets the peer resume
 *            it within session_grace; its handles live as long as it does.
 *   lease    a handle's region exposed on the session's primary connection
 *            (verbs: registered, address and rkey, so one-sided reads and
 *            writes never reach famd; tcp: a token); it ends with the
 *            handle or the connection, and then the old rkey reaches
 *            nothing (a resumed session asks again with REGION_LEASE).
 *
 * States of a region: live (in the table), freed while held (unlinked,
 * unmapped when the last transfer lets go).
 *
 * Everything runs on the control loop; nothing is locked.
 */
#ifndef FAM_MEMORY_H
#define FAM_MEMORY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "core/famd.h"
#include "transport/transport.h"

struct event;

#define MEM_MAX_REGIONS   (1u << 20)
#define MEM_MAX_CONNS     4096u
#define MEM_MAX_OUTSTANDING 64u
#define MEM_HASH_MIN      256u
#define MEM_PRELOAD_CHUNK (1u << 20)
#define MEM_OWNER_MAX     (FAM_NAME_MAX + 5) /* "key:" NODE, or an address */
#define MEM_GRANULE       ((uint64_t)1 << 16) /* a sparse region's charge unit */
#define MEM_SPARSE_MAX    ((uint64_t)1 << 46) /* largest sparse region */

struct mem_session;
struct mem_region;

/* A session's use of a region: created, or opened by name. */
struct mem_handle {
	LIST_ENTRY(mem_handle) by_session;
	LIST_ENTRY(mem_handle) by_region;
	struct mem_session *s;
	struct mem_region *r;
	unsigned refs;            /* opens by this session (shared regions) */
	struct fam_mr *lease;     /* on the session's connection, or NULL */
	uint64_t lease_addr;      /* verbs: remote address of byte 0 (0) */
	uint32_t lease_rkey;      /* verbs: its rkey; tcp: 0 */
};

struct mem_region {
	uint32_t id;
	uint64_t key;             /* random, never 0: REGION_ADOPT's proof */
	uint32_t flags;           /* FAM_RF_* */
	uint64_t size;            /* bytes mapped, a multiple of the page */
	uint64_t length;          /* bytes of content (preloaded or asked) */
	void *mem;
	char name[FAM_NAME_MAX + 1];
	char *path;               /* FAM_RF_FILE: the file, under preload_dir */
	char node[FAM_NAME_MAX + 1]; /* node of the session that created it */
	char owner[MEM_OWNER_MAX]; /* its session's owner: quotas count here */
	uint64_t session;         /* serial of that session */
	unsigned holds;           /* transfers in progress */
	bool freed;               /* unlinked; unmapped when holds reach 0 */
	unsigned nhandles;
	LIST_HEAD(, mem_handle) handles;
	uint64_t reads, writes, bytes_read, bytes_written;
	/*
	 * FAM_RF_SPARSE: capacity is taken a granule at a time, at the first
	 * write to it (charged bits), and given back by REGION_DISCARD.
	 */
	uint64_t *charged;
	uint64_t held;            /* bytes counted in mem.reserved */
	struct mem_region *hnext; /* chain in the id table */
	TAILQ_ENTRY(mem_region) link;
};

struct mem_conn;

struct mem_session {
	uint64_t token;           /* random; the peer presents it to resume */
	uint64_t serial;          /* shown in status and logs instead */
	uint8_t role;             /* enum fam_role_wire of the peer */
	char node[FAM_NAME_MAX + 1];
	/*
	 * Whom quotas count against: with a secret, the peer's address (its
	 * host part), which the peer cannot choose as it chooses its name;
	 * without one, nothing is authenticated and the node name serves.
	 */
	char owner[MEM_OWNER_MAX];
	char peer[64];            /* address of the last connection */
	struct mem_conn *mcs[FAM_SESSION_CONNS]; /* its live connections */
	unsigned nmc;             /* 0 while detached */
	struct mem_conn *primary; /* the one that holds the leases (verbs) */
	struct event *grace;
	unsigned nregions;
	uint64_t bytes;
	uint64_t reads, writes, bytes_read, bytes_written;
	LIST_HEAD(, mem_handle) handles;
	TAILQ_ENTRY(mem_session) link;
};

struct mem_conn {
	struct fam_conn *c;
	struct mem_session *s;    /* once the hello is accepted */
	char peer[64];
	bool refused;             /* our hello handler said no */
	bool preauth;             /* counted in mem.npreauth: no proof yet */
	unsigned eacces;          /* wrong region keys (REGION_ADOPT) */
	TAILQ_ENTRY(mem_conn) link;
	TAILQ_ENTRY(mem_conn) plink; /* in mem.preauth while preauth */
};

/* Cumulative counters, zeroed by stats.reset. */
struct mem_counters {
	uint64_t reads, writes;
	uint64_t bytes_read, bytes_written;   /* to peers, from peers */
	uint64_t rw_errors;
	uint64_t regions_created, regions_opened, regions_freed;
	uint64_t regions_adopted, handles_revoked, adopt_errors;
	uint64_t create_errors, free_errors, lease_errors;
	uint64_t stats_requests;
	uint64_t connections, hello_refusals, bad_frames, timeouts;
	uint64_t input_pauses;
	uint64_t completion_errors;
	uint64_t sessions_started, sessions_resumed, sessions_ended;
	uint64_t quota_refusals;
	uint64_t discards, discard_bytes;     /* REGION_DISCARDs; released */
	uint64_t eacces_closes;   /* connections cut after FAM_EACCES_MAX */
	uint64_t preauth_evictions; /* unproven connections closed for room */
	uint64_t crc_errors;      /* chunks whose data failed their CRC */
	uint64_t sparse_refusals; /* writes to sparse regions: no capacity */
};

/* The memory role's state; the file that sets each group is named. */
struct mem_state {
	struct famd *d;           /* its cfg and loop; mem_regions_init() */
	/* memory-role.c */
	struct fam_listener *l;
	struct fam_conn_opts opts;
	char listen[64];
	char node[FAM_NAME_MAX + 1];
	uint64_t instance;
	bool has_secret;          /* peers prove a secret: owners by address */
	struct fam_peer_key *peer_keys; /* peer_secrets: owners by name */
	size_t npeer_keys;
	bool stopping;            /* stop is under way: fewer log lines */
	/* memory-region.c */
	uint64_t capacity;
	uint64_t reserved;        /* bytes held by regions (a sparse one's
	                           * written granules), freed-but-held too */
	bool sparse_ok;           /* tcp: writes pass here (verbs: one-sided) */
	uint64_t pagesize;
	char *preload_dir;        /* ours: a reload frees the cfg's strings */
	uint32_t next_id;
	unsigned nregions;
	struct mem_region **table;
	uint32_t table_size;
	TAILQ_HEAD(, mem_region) regions;
	/* memory-session.c */
	uint64_t grace_ms;
	uint64_t next_serial;
	unsigned nsessions, nattached;
	TAILQ_HEAD(, mem_session) sessions;
	/* memory-serve.c */
	unsigned nconns;
	TAILQ_HEAD(, mem_conn) conns;
	unsigned npreauth;        /* connections that proved nothing yet */
	TAILQ_HEAD(, mem_conn) preauth; /* oldest first */
	uint64_t evict_logged;    /* last eviction log line (ns) */
	/* every file counts here */
	struct mem_counters n;
};

extern struct mem_state mem;

/* ---- memory-region.c ------------------------------------------------------ */

uint64_t mem_random64(void);
const char *mem_bytes(char *buf, size_t len, uint64_t n);
const char *mem_flags_text(char *buf, size_t len, uint32_t flags);
int mem_regions_init(struct famd *d);
void mem_regions_fini(void);
void mem_regions_stats_reset(void);
struct mem_region *mem_region_find(uint32_t id);
int mem_region_create(struct mem_session *s,
    const struct fam_region_create *req, struct mem_region **out);
int mem_region_free(struct mem_session *s, uint32_t id);
void mem_region_unlink(struct mem_region *r, const char *why);
void mem_region_info(const struct mem_region *r, const struct mem_handle *h,
    struct fam_region_info *info);
int mem_region_access(struct mem_session *s, uint32_t id, uint64_t off,
    uint32_t len, bool write, struct mem_region **out);
void mem_region_hold(struct mem_region *r);

/* REGION_DISCARD of [lo, hi) of r: a sparse region's whole granules there
 * give their capacity back. */
void mem_region_uncharge(struct mem_region *r, uint64_t lo, uint64_t hi);
void mem_region_let_go(struct mem_region *r);
struct mem_handle *mem_handle_find(struct mem_session *s,
    struct mem_region *r);
int mem_handle_new(struct mem_session *s, struct mem_region *r);
bool mem_handle_drop(struct mem_handle *h, bool ending, const char *why);

/* ---- memory-session.c ----------------------------------------------------- */

void mem_sessions_init(uint64_t grace_ms);
void mem_sessions_end_all(const char *why);
void mem_sessions_stats_reset(void);
void mem_sessions_status(json_t *peers);
struct mem_session *mem_session_new(const struct fam_hello *req,
    const char *peer);
void mem_session_detach(struct mem_session *s, struct mem_conn *mc, int err);
int mem_session_hello(struct fam_conn *c, const struct fam_hello *req,
    struct fam_hello_resp *resp, void *arg);
int mem_session_adopt(struct mem_session *s,
    const struct fam_region_adopt *req, struct fam_region_info *info);
int mem_lease_lend(struct mem_session *s, struct mem_region *r,
    struct fam_region_info *info);
int mem_lease_renew(struct mem_session *s, uint32_t id,
    struct fam_region_info *info);
void mem_lease_end_all(struct mem_session *s, bool dereg);

/* ---- memory-serve.c ------------------------------------------------------- */

void mem_serve_init(void);
void mem_serve_accept(struct fam_listener *l, struct fam_conn *c,
    const char *peer, void *arg);
void mem_serve_close_all(void);
json_t *mem_serve_counters_json(void);
void mem_serve_status(json_t *peers);
void mem_serve_proved(struct mem_conn *mc);

#endif /* FAM_MEMORY_H */
