/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu.h - the dpu role's private types: an agent between hosts and memory
 * nodes (on a SmartNIC's cores, or any node on the way) that hosts use as
 * if it were a memory node. It keeps the region -> memory-node mapping,
 * forwards chunk reads and writes, and answers what it can from its own
 * memory. Each file's functions are in its own header (dpu-FILE.h); the
 * files and the direction of their calls are in README.md.
 *
 * Two sides, each owned by one event loop:
 *   front  the control loop: the listener, host connections, sessions, the
 *          region table; it parses requests, looks up metadata and answers
 *          hosts (the data of a read goes out of the buffer it arrived in).
 *   back   the memory-node connections: it issues requests to the memory
 *          nodes and takes their completions. With `async` off it runs on
 *          the front's loop; with it on, on a thread of its own, and the
 *          two sides hand requests over through queues (see dpu-forward.c).
 *
 * A request (struct dpu_req) belongs to the front until it is submitted,
 * to the back until it completes, then to the front again; only its owner
 * touches it. What both sides read is set before it is shared and not
 * changed after (a region's node, instance and remote), or atomic (node
 * state and instance, counters).
 *
 * Lock order (whole dpu role): a queue's lock, stat_lock, the cache's lock
 * and the recent list's lock are leaves: each is held only to link, unlink
 * or copy a few fields, never across a call into another module or while
 * another of them is held. Everything else is owned by one loop.
 */
#ifndef FAM_DPU_H
#define FAM_DPU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>

#include "core/famd.h"
#include "transport/transport.h"

struct event;
struct dpu;

#define DPU_MAX_NODES    16
#define DPU_MAX_CONNS    1024u
/*
 * What one host connection may have in the dpu at once: requests (a host
 * keeps at most 1024 outstanding on a connection) and staging bytes. Over
 * either, the dpu stops reading that connection (tcp) until half of it is
 * done, or refuses what is over the count (verbs), so a host that floods
 * slows itself and not the others.
 */
#define DPU_HOST_INFLIGHT_MAX 1024u
#define DPU_HOST_STAGED_MAX   (64u << 20)
#define DPU_HASH_SIZE    1024u  /* buckets of the region tables */

enum dpu_node_state {
	DN_DOWN,       /* not connected; a retry is scheduled */
	DN_CONNECTING, /* connect or hello in progress */
	DN_UP,         /* hello answered: requests flow */
};

/* A memory node this dpu forwards to; owned by the back loop. */
struct dpu_node {
	struct dpu *dpu;
	unsigned index;
	char *addr;
	struct fam_conn *conn;
	struct fam_conn *bg;          /* back: the caches' loads, joined to
	                               * conn's session (tcp, with a dynamic
	                               * cache), or NULL */
	bool bg_up;                   /* back: bg joined */
	_Atomic int state;            /* enum dpu_node_state */
	_Atomic uint64_t instance;    /* of the memory famd; 0 before */
	uint64_t session;             /* our token there, to resume */
	struct event *retry;
	unsigned backoff_ms;
	bool dirty;                   /* requests queued since the flush */
	uint64_t gen;                 /* back: connections made; a lease is
	                               * valid for the one it came on */
	struct fam_mr *staging_mr;    /* back: the staging arena, registered
	                               * on conn (verbs), or NULL */
	struct fam_conn_stats seen;   /* back: conn's counters, as summed */
	/* what status shows; under dpu->stat_lock */
	char name[FAM_NAME_MAX + 1];
	char last_error[128];
	uint64_t connects, disconnects;
	/* regions to free once the node is back (same instance) */
	uint32_t *pending_free;
	unsigned npending_free, cap_pending_free;
};

/*
 * A whole copy of a region in the dpu's memory: the static cache. Loaded a
 * piece at a time in the background; a read is served from it once every
 * piece it touches is loaded. A write acknowledged by the memory node is
 * copied in (write-through), whatever the piece's state; a load issued
 * after it reads the written data, but one still out may land older data
 * after the copy (over verbs a one-sided write's completion and a load's
 * answer are not ordered), so the write marks a loading piece STALE and
 * that load's data is not used: the piece is loaded again.
 */
enum dpu_piece_state {
	DS_EMPTY,
	DS_LOADING,
	DS_LOADED,
	DS_STALE,   /* written while loading: the load's data may be older */
	DS_SKIP,    /* a partial copy's piece not (yet) chosen: never loaded */
};

#define DPU_STATIC_PIECE (1u << 20) /* bytes loaded at once */
#define DPU_STATIC_LOADS 4          /* loads in flight per region */

struct dpu_static {
	uint8_t *mem;                 /* the copy (its own mapping) */
	uint64_t size;
	uint64_t npieces;
	_Atomic uint8_t *state;       /* enum dpu_piece_state, per piece */
	_Atomic uint64_t next;        /* the next piece a loader claims */
	_Atomic uint64_t loaded;      /* pieces loaded */
	_Atomic unsigned loads_out;
	_Atomic uint64_t pass_loaded; /* pieces loaded since the pass began */
	_Atomic unsigned empty_passes; /* passes in a row that loaded none */
	uint64_t retry_ns;            /* front: loads failed; restart after */
	uint64_t want;                /* pieces to load: npieces, or fewer
	                               * for a partial copy */
	uint64_t charged;             /* bytes of static_size it takes */
	_Atomic uint32_t *reads;      /* a partial copy before its choice:
	                               * reads per piece, else NULL */
	_Atomic uint64_t nreads;      /* ... and their sum */
};

/*
 * An entry of the dynamic cache: cache_entry_size bytes of a region, in a
 * slot of the cache's one buffer, kept a granule (entry_size / 64 bytes)
 * at a time: a bit per granule in each mask. States:
 *   CE_FREE     the slot holds nothing
 *   CE_VALID    in the table: granules in `valid` are served, those in
 *               `loading` have a load out (one per granule at most: a
 *               read that needs them waits on `waiters`, see dc.lock)
 * A write the memory node acknowledges is copied into the valid granules,
 * and drops an entry with loads out (they may land older data, as said
 * for static copies). refs counts the loads and the replies served from
 * the slot; an entry is evicted only at refs 0. An entry dropped while
 * referenced (its region went, the cache was turned off) is `dead`: out
 * of the table, its slot freed at refs 0.
 */
enum dpu_entry_state {
	CE_FREE,
	CE_VALID,
};

struct dpu_mregion;

struct dpu_dcache;

struct dpu_req;

struct dpu_centry {
	struct dpu_dcache *dc;
	struct dpu_mregion *m;        /* whose bytes (no reference) */
	uint64_t index;               /* offset in m / entry size */
	uint32_t len;                 /* bytes (the region's last: fewer) */
	uint8_t state;
	bool dead;
	bool used;                    /* a hit served loaded bytes */
	uint64_t valid;               /* granules held */
	uint64_t loading;             /* granules a load is bringing */
	uint64_t fwd;                 /* granules a forwarded READ is
	                               * bringing: not prefetched */
	uint64_t loaded;              /* granules that came by a load */
	uint64_t had;                 /* granules the host has had (a hit,
	                               * or a forwarded read) */
	uint64_t served;              /* loaded granules a hit served */
	uint64_t touch;               /* dc.clock when last read */
	unsigned refs;
	struct dpu_centry *hnext;     /* the hash table's chain */
	struct dpu_req *waiters;      /* READs waiting on its loads
	                               * (chained through wnext) */
};

#define DPU_RECENT 128 /* reads the recent list remembers */

/* A read the prefetch workers are to look at. */
struct dpu_recent {
	struct dpu_mregion *m;        /* a reference until a worker took it */
	uint64_t off;
	uint32_t len;
};

/*
 * The dynamic cache: a table over one buffer, and the recent list that
 * feeds the prefetch workers. `lock` guards the table and the entries'
 * state, refs and dead; `rlock` the recent list. Both are leaves.
 */
struct dpu_dcache {
	pthread_mutex_t lock;
	uint8_t *mem;
	uint64_t size;
	uint32_t entry_size;
	unsigned entry_shift;
	unsigned gran_shift;          /* a granule: entry_size / 64 bytes */
	uint64_t clock;               /* reads looked up: entries' touch */
	struct dpu_req *woken;        /* waiters whose load is over (back
	                               * takes them: dpu_dcache_woken) */
	struct dpu_centry *entries;   /* one per slot */
	unsigned nentries, nused;
	struct dpu_centry **table;
	unsigned table_mask;
	uint64_t rnd;                 /* random eviction */
	_Atomic bool enabled;
	_Atomic unsigned depth;
	/* adaptive (front) */
	int mode;                     /* enum cfg_dynamic */
	int cfg_mode;                 /* as configured: reloads compare */
	unsigned bw_ratio;            /* percent */
	unsigned window;              /* reads a window */
	uint64_t probe_ns;
	unsigned win_reads, win_hits;
	double last_rate;             /* of the last full window; -1 none */
	bool probing;                 /* the window after turning back on */
	uint64_t probe_at;            /* off: when to try again */
	uint64_t windows, switches_off, switches_on;
	pthread_mutex_t rlock;
	pthread_cond_t rcond;
	struct dpu_recent ring[DPU_RECENT];
	uint64_t head, tail;          /* pushed, taken */
	_Atomic unsigned streams;     /* runs going on, as last counted (the
	                               * prefetchers write it, status reads) */
	bool stop;
	pthread_t workers[16];
	unsigned nworkers;
};

/*
 * A region on a memory node, held by this dpu's session there. Several
 * dpu regions may stand for one (a shared region opened by many hosts, a
 * region adopted again): each holds one reference on the memory node.
 */
struct dpu_mregion {
	struct dpu_node *node;
	uint64_t instance;            /* of the node when it was obtained */
	struct fam_remote remote;     /* id, size there (rkey, addr: 0) */
	/*
	 * The lease (verbs): one-sided access to the region on node->conn,
	 * valid while node->gen is lease_gen. Set by the front before m is
	 * shared, then owned by the back, which renews it (REGION_LEASE)
	 * when the connection it came on is gone.
	 */
	uint32_t lease_rkey;          /* 0: none (tcp, or lost) */
	uint64_t lease_addr;
	uint64_t lease_gen;
	bool leased;                  /* it had one: renew it when stale */
	bool renewing;                /* a REGION_LEASE is out */
	unsigned onesided_out;        /* back: one-sided transfers in flight */
	struct dpu_req *free_after;   /* back: its REGION_FREE, parked until
	                               * they are over (the lease ends) */
	uint32_t flags;               /* FAM_RF_* */
	char name[FAM_NAME_MAX + 1];  /* its name, or its file's path */
	unsigned users;               /* dpu regions standing for it */
	_Atomic unsigned refs;        /* the table's, requests', replies' */
	_Atomic(struct dpu_static *) st; /* its static copy, or NULL */
	_Atomic bool advised_static;  /* advised static (copied or not): the
	                               * dynamic cache leaves it alone */
	_Atomic bool advised_random;  /* advised random: so does it */
	bool listed;                  /* in the table */
	_Atomic uint64_t writes;      /* writes acknowledged (counted by the
	                               * back): a READ that saw one land is
	                               * not kept in the dynamic cache */
	struct dpu_mregion *hnext;
};

struct dpu_session;

/* A region as a host knows it: a dpu id for a memory-node region. */
struct dpu_region {
	uint32_t id;
	struct dpu_session *s;
	struct dpu_mregion *m;
	struct dpu_region *hnext;
	LIST_ENTRY(dpu_region) link;  /* the session's regions */
};

struct dpu_hconn;

/* A host's session: its regions outlive a dropped connection for a grace. */
struct dpu_session {
	struct dpu *dpu;
	uint64_t token;
	uint64_t serial;
	char node[FAM_NAME_MAX + 1];
	char peer[64];
	struct dpu_hconn *hcs[FAM_SESSION_CONNS]; /* its live connections:
	                              * the host's main one and the one its
	                              * background traffic joins */
	unsigned nhc;                 /* 0 while detached */
	struct event *grace;
	unsigned nregions;
	uint64_t bytes;
	LIST_HEAD(, dpu_region) regions;
	TAILQ_ENTRY(dpu_session) link;
};

/* A host's connection. */
struct dpu_hconn {
	struct dpu *dpu;
	struct fam_conn *c;
	struct dpu_session *s;
	char peer[64];
	unsigned refs;                /* 1 while open, 1 per request served */
	bool closed;
	unsigned inflight;            /* its requests being served */
	size_t staged;                /* their staging bytes */
	bool throttled;               /* input stopped: over a bound above */
	struct fam_mr *arena_mr;      /* verbs: the staging arena registered
	                               * on c (its PD), for replies sent
	                               * from it without a copy, or NULL */
	bool arena_tried;             /* registering it was tried */
	TAILQ_ENTRY(dpu_hconn) link;
};

enum dpu_req_kind {
	DR_READ,  /* a host's READ, forwarded */
	DR_WRITE, /* a host's WRITE, forwarded */
	DR_CALL,  /* a control request to a memory node */
	DR_LOAD,  /* a cache load (static piece): the back's own */
};

struct dpu_req;
typedef void (*dpu_req_fn)(struct dpu_req *q);

/* One request on its way through the dpu. */
struct dpu_req {
	TAILQ_ENTRY(dpu_req) link;    /* in a batch or a queue */
	enum dpu_req_kind kind;
	struct dpu *dpu;
	struct dpu_hconn *hc;         /* the host to answer, or NULL */
	struct fam_hdr h;             /* its request, to answer */
	struct dpu_mregion *m;        /* READ/WRITE (a reference) */
	struct dpu_node *node;        /* CALL: where it goes */
	uint64_t instance;            /* CALL: the node's instance expected */
	uint64_t gen;                 /* CALL: node->gen it went out on */
	bool onesided;                /* READ/WRITE/LOAD: against the lease */
	uint64_t off;                 /* READ/WRITE: offset in m */
	uint32_t len;
	uint16_t flags;               /* FAM_F_BACKGROUND */
	uint8_t *buf;                 /* READ/WRITE: staging buffer */
	int status;                   /* 0 or -errno, once complete */
	uint64_t start_ns;
	/* CALL */
	uint8_t type;
	uint8_t payload[FAM_REGION_CREATE_MIN + FAM_NAME_MAX + FAM_PATH_MAX];
	uint32_t plen;
	uint8_t resp[FAM_REGION_INFO_LEN];
	uint32_t rlen;
	dpu_req_fn done;              /* CALL: the front's completion */
	void *arg;                    /* CALL: for done */
	struct dpu_centry *entry;     /* LOAD into the dynamic cache */
	struct dpu_req *wnext;        /* READ: waiting on a dynamic load */
	uint32_t sub_off, sub_len;    /* READ: only [off + sub_off, + sub_len)
	                               * goes to the memory node (the rest
	                               * is in buf from the dynamic cache);
	                               * sub_len 0: all of it */
	uint64_t wseq;                /* READ: m->writes when issued */
};

TAILQ_HEAD(dpu_reqq, dpu_req);

/*
 * A hand-over between the two loops: requests to the back, completions to
 * the front. The producer links under the lock and wakes the consumer's
 * loop through an eventfd when the queue was empty; the consumer takes
 * the whole list under the lock and works on it outside.
 */
struct dpu_queue {
	struct dpu *dpu;
	pthread_mutex_t lock;
	struct dpu_reqq q;
	unsigned depth;
	int efd;
	struct event *ev;
	void (*drain)(struct dpu *dpu, struct dpu_reqq *list);
};

#define DPU_BATCH_BUCKETS 11 /* batch sizes 1, 2-3, 4-7, ... 1024 */

/* Counters; written by either side (relaxed atomics), summed for status. */
struct dpu_counters {
	_Atomic uint64_t reads, writes;            /* host requests */
	_Atomic uint64_t rw_errors;
	_Atomic uint64_t host_ondemand_bytes;      /* host link, by kind */
	_Atomic uint64_t host_background_bytes;
	_Atomic uint64_t host_read_bytes, host_write_bytes;
	_Atomic uint64_t mem_ondemand_bytes;       /* memory link, by kind */
	_Atomic uint64_t mem_background_bytes;
	_Atomic uint64_t mem_read_bytes, mem_write_bytes;
	_Atomic uint64_t mem_reads, mem_writes, mem_errors;
	_Atomic uint64_t regions_created, regions_adopted, regions_freed;
	_Atomic uint64_t create_errors;
	_Atomic uint64_t connections, hello_refusals, bad_frames, timeouts;
	_Atomic uint64_t sessions_started, sessions_resumed, sessions_ended;
	_Atomic uint64_t staging_failures;
	_Atomic uint64_t host_throttles, flow_refusals, input_pauses;
	_Atomic uint64_t forwarded, forward_ns; /* answered from memory */
	_Atomic uint64_t batches, batch_requests, batch_max, flushes;
	_Atomic uint64_t batch_hist[DPU_BATCH_BUCKETS];
	_Atomic uint64_t queue_back_max, queue_front_max;
	_Atomic uint64_t mem_inflight_max;
	_Atomic uint64_t static_loaded_bytes;
	_Atomic uint64_t static_hits, static_hit_bytes, static_misses;
	_Atomic uint64_t static_rejected, static_load_errors, static_partial;
	_Atomic uint64_t dyn_hits, dyn_hit_bytes, dyn_misses, dyn_loading;
	_Atomic uint64_t dyn_lookup_bytes;    /* bytes of reads looked up */
	_Atomic uint64_t dyn_load_served_bytes; /* loaded, then served */
	_Atomic uint64_t dyn_waits;           /* READs parked on a load */
	_Atomic uint64_t dyn_partial;         /* READs forwarded in part */
	_Atomic uint64_t dyn_insert_bytes;    /* forwarded bytes kept */
	_Atomic uint64_t dyn_unserved_had_bytes; /* loaded, evicted unserved:
	                                          * the host had them by a
	                                          * forwarded READ */
	_Atomic uint64_t dyn_unserved_unread_bytes; /* ... never read */
	_Atomic uint64_t dyn_loads, dyn_load_bytes, dyn_load_errors;
	_Atomic uint64_t dyn_evictions, dyn_full, dyn_write_updates;
	_Atomic uint64_t dyn_bypassed; /* reads of regions advised random */
	_Atomic uint64_t dyn_spanning; /* reads across an entry's end */
	_Atomic uint64_t dyn_prefetch_used;   /* entries hit once loaded */
	_Atomic uint64_t dyn_prefetch_wasted; /* dropped before any hit */
	_Atomic uint64_t recent_pushed, recent_dropped;
	/* the memory link over verbs */
	_Atomic uint64_t mem_onesided, mem_twosided; /* forwarded READ/WRITE */
	_Atomic uint64_t load_onesided, load_twosided; /* cache loads */
	_Atomic uint64_t load_own_conn; /* ... on their own connection */
	_Atomic uint64_t lease_renewals, lease_errors;
	_Atomic uint64_t staging_registered, staging_bounced;
	/* the host link over verbs: READ replies from staging */
	_Atomic uint64_t replies_zero_copy, reply_bytes_zero_copy;
	_Atomic uint64_t reply_bytes_copied;
	_Atomic uint64_t mem_doorbells, mem_wrs, mem_wrs_signalled;
};

/*
 * The calls a lower file makes up, registered from above (dpu-role.c, at
 * start): a lower file calls these, never an upper file's functions.
 */
struct dpu_upcalls {
	/* dpu-memlink.c, at a region record's last reference: the caches
	 * drop what they hold of it. Any side. */
	void (*mregion_gone)(struct dpu_mregion *m);
	/* dpu-forward.c, as a request lets its host connection go. Front. */
	void (*hconn_put)(struct dpu_hconn *hc);
	/* dpu-cache.c's prefetch workers: loads for the back. Their thread. */
	void (*loads)(struct dpu *dpu, struct dpu_reqq *list, unsigned n);
};

struct dpu {
	struct famd *d;
	struct dpu_upcalls up;
	struct event_base *base;      /* the front's loop (control loop) */
	struct event_base *back_base; /* the back's loop */
	struct fam_listener *l;
	struct fam_conn_opts opts;    /* passive side (hosts) */
	char secret[FAM_SECRET_MAX + 1];
	char listen[64];
	char node_name[FAM_NAME_MAX + 1];
	uint64_t instance;
	uint64_t grace_ms;
	uint32_t op_timeout_ms;
	bool stopping;
	/* forwarding (dpu-forward.c) */
	bool async;                   /* the back has a thread of its own */
	_Atomic bool aggregate;
	_Atomic bool reached;         /* a memory node answered since start */
	unsigned batch_limit;
	struct dpu_reqq batch;        /* front: requests collected */
	unsigned batch_n;
	bool batch_armed;
	struct event *batch_ev;       /* sends the batch after this pass */
	struct dpu_queue to_back, to_front;
	pthread_t back_thread;
	bool back_started;
	_Atomic bool back_stopping;   /* back: close the nodes and leave (set
	                               * by the front, read by the back) */
	_Atomic int64_t mem_inflight; /* requests out on memory links */
	unsigned inflight;            /* front: host requests being served */
	/* caches (dpu-cache*.c) */
	uint64_t static_size;         /* most bytes of static copies */
	_Atomic uint64_t static_regions, static_bytes; /* now (not counters) */
	struct dpu_dcache dc;
	char **static_names;          /* static_regions, split */
	unsigned nstatic_names;
	/* memory nodes (back) */
	struct dpu_node nodes[DPU_MAX_NODES];
	unsigned nnodes;
	unsigned next_place;
	pthread_mutex_t stat_lock;    /* node names and errors for status */
	/* front: sessions, connections, regions */
	TAILQ_HEAD(, dpu_session) sessions;
	TAILQ_HEAD(, dpu_hconn) conns;
	unsigned nconns, nsessions, nattached;
	uint64_t next_serial;
	uint32_t next_region;
	unsigned nregions;
	struct dpu_region *regions[DPU_HASH_SIZE];
	struct dpu_mregion *mregions[DPU_HASH_SIZE];
	unsigned nmregions;
	/* staging buffers (front) */
	uint64_t staging_bytes, staging_peak;
	uint8_t *arena;               /* verbs: registered staging slots */
	size_t arena_size;
	uint64_t *arena_busy;         /* a bit per slot: taken */
	unsigned arena_nfree;
	struct dpu_counters n;
};

#define DPU_INC(dpu, field, v) \
	atomic_fetch_add_explicit(&(dpu)->n.field, (v), memory_order_relaxed)
#define DPU_GET(dpu, field) \
	atomic_load_explicit(&(dpu)->n.field, memory_order_relaxed)

#endif /* FAM_DPU_H */
