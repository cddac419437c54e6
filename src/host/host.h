/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host.h - the host role: serves the page faults of programs whose large
 * allocations live on memory nodes, through one bounded buffer.
 *
 * Everything here runs on famd's control loop (one thread): sessions,
 * userfaultfds, memory-node connections and the buffer are driven by
 * events, and every chunk read or write is asynchronous, so many faults and
 * fetches are in flight at once without locks.
 *
 * A program's memory: the program maps arenas (memfds, MAP_SHARED) that
 * famd also maps; regions are carved out of arenas at chunk granularity.
 * A chunk of a region is in one state:
 *
 *   ABSENT    not in the program's page tables nor in the buffer; its data
 *             is on the memory node (CH_REMOTE) or it was never written
 *   FETCHING  a frame is reserved and a read (or zero-fill) is in flight;
 *             threads faulting on it wait for the install
 *   RESIDENT  installed in the program (UFFDIO_COPY); write-protected until
 *             its first write, which marks it CH_DIRTY
 *   EVICTING  a dirty chunk being written back; a write to it meanwhile
 *             marks it dirty again and cancels the eviction
 * With fetch = adaptive, a RESIDENT or EVICTING chunk may be partial
 * (CH_PARTIAL): only the grains in `present` are installed; a fault on
 * another reads it (CH_GROWING) without leaving the state (host-grain.c).
 */
#ifndef FAM_HOST_H
#define FAM_HOST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <event2/event.h>

#include "wire/session.h"
#include "core/famd.h"
#include "transport/transport.h"

struct host;
struct host_client;

#define HOST_MAX_NODES 16
#define HOST_PUNCH_MAX 64 /* punches a background pass gathers, at most */

enum chunk_state {
	CH_ABSENT = 0,
	CH_FETCHING,
	CH_RESIDENT,
	CH_EVICTING,
};

#define CH_DIRTY    0x01 /* written since last written back */
#define CH_REF      0x02 /* faulted or written since the clock hand passed */
#define CH_REMOTE   0x04 /* the memory node holds data for it */
#define CH_UNPROT   0x08 /* write protection lifted (the program writes) */
#define CH_PREFETCH 0x10 /* brought in by prefetch, not yet faulted on */
#define CH_PARTIAL  0x20 /* only the grains in `present` are in place */
#define CH_GROWING  0x40 /* a read of more of its grains is out (fetch) */
#define CH_COUNTED  0x80 /* partial, counted in its region's density */

struct fetch;
struct writeback;

struct chunk {
	uint8_t state;
	uint8_t flags;
	uint16_t late;       /* its write-backs acknowledged by write_quorum
	                      * whose writes to other copies are still out */
	union {
		uint32_t frame;  /* buffer frame while RESIDENT or EVICTING */
		uint16_t ghost;  /* ABSENT: host.evicted_pages when it left,
		                  * in ghost units (0: never) */
	};
	struct fetch *fetch; /* while FETCHING, or GROWING */
	uint64_t present;    /* CH_PARTIAL: a bit per grain in place */
};

/* A memory node this host uses, or its dpu (is_dpu). */
struct mnode {
	struct host *h;
	unsigned index;
	bool is_dpu;
	char *addr;
	struct fam_conn *conn;    /* faults and control */
	struct fam_mr *mr;        /* the staging buffers, registered on conn */
	struct fam_conn *bg;      /* read-ahead and write-back, once joined */
	unsigned piece_shift;     /* a dpu's: its READs best within aligned
	                           * pieces of 2^piece_shift bytes; or 0 */
	struct fam_mr *bg_mr;     /* the staging buffers, registered on bg */
	enum { MN_DOWN, MN_CONNECTING, MN_UP } state;
	bool bg_up;
	struct event *bg_retry;
	char name[FAM_NAME_MAX + 1];
	uint64_t session;  /* token for resuming after a reconnect */
	uint64_t instance; /* changes when the memory famd restarts */
	struct event *retry;
	unsigned backoff_ms;
	uint64_t connects, disconnects;
	char *last_error;
	uint32_t *frees;   /* regions to free once the session is back */
	unsigned nfrees, frees_cap;
};

/*
 * Which way a stripe's chunk reads and write-backs go. A stripe has one
 * path at a time; it moves to the other only when nothing of it is in
 * flight on the old one (`inflight`), and then:
 *   to DIRECT  the host fences the region on the memory node (REGION_ADOPT
 *              exclusive: whatever the dpu still forwards is refused from
 *              then on) and frees it on the dpu, whose copy may go stale;
 *              a shared, read-only region needs no fence
 *   to DPU     the host hands the region to the dpu (REGION_ADOPT there,
 *              with the memory node's key): a fresh dpu region, nothing
 *              cached from before
 * While that request is out the stripe is SWITCHING and its requests wait.
 */
enum stripe_path {
	SP_DIRECT,
	SP_DPU,
};

/* A stripe of a region: its part on one memory node. */
struct stripe {
	struct region *r;
	struct mnode *node;       /* NULL: a memory node this host does not
	                           * know (reached through the dpu only) */
	struct fam_remote remote; /* on the memory node: id, lease (rkey,
	                           * addr; verbs), size */
	uint64_t key;             /* the region's key there (REGION_ADOPT) */
	uint64_t instance; /* of the node when the stripe was created */
	uint8_t path;             /* enum stripe_path */
	bool switching;           /* a fence or hand-over is out */
	bool owned;               /* our session there holds a handle */
	bool adopting;            /* a plain adoption is out */
	struct fam_remote dremote; /* on the dpu: region 0 when none */
	uint64_t dinstance;       /* of the dpu when dremote was given */
	unsigned inflight;        /* reads and writes out on `path` */
	bool leasing;             /* a new lease is asked for (after a
	                           * resume) */
	/* replication (host-replica.c): a copy of a column of the region */
	bool gone;                /* its region is gone from its node (the
	                           * node restarted): to be made again */
	bool creating;            /* ... and its REGION_CREATE is out */
	uint64_t *stale;          /* a bit per row: this copy is behind */
	uint64_t nstale;          /* rows with their bit set */
	bool behind_saved;        /* the restart state says it is behind on
	                           * every row (host-restart.c) */
};

struct host_ec;

#define HOST_RA_STREAMS 4 /* sequential runs followed in a region */
#define HOST_RA_SMALL 16  /* read-ahead window no buffer is too small for */
#define FETCH_RUN_BYTES (1u << 20) /* most bytes read at once */

struct region {
	struct host_client *cl;
	struct arena *ar;
	uint64_t handle;
	uint64_t off;     /* byte offset in the arena */
	uint64_t size;    /* bytes, a multiple of the chunk size */
	uint64_t length;  /* a file region: the file's length */
	uint64_t nchunks;
	uint32_t flags;   /* FAM_S_ALLOC_* */
	bool listed;      /* in the client's list (reply sent) */
	bool dying;       /* freed; waits for its in-flight operations */
	bool lost;        /* its data on a memory node is gone */
	unsigned busy;    /* fetches and write-backs in flight */
	unsigned filling; /* reads in flight into its arena's memory */
	bool keep_space;  /* freed while filling: its arena space is given
	                   * back when the last read is over */
	unsigned nstripes;        /* width * ncopies */
	unsigned width;           /* stripes of one copy (columns) */
	unsigned ncopies;         /* 1, or N of replicate:N */
	struct stripe *stripes;   /* copy k of column i: [k * width + i] */
	struct host_ec *ec;       /* ec:K+M (host-ec.c): copy k is fragment
	                           * k, ncopies K + M; NULL otherwise */
	struct chunk *chunks;
	uint64_t resident, dirty;
	uint32_t advice;      /* FAM_ADVICE_* the program gave */
	uint64_t dpu_retry_ns; /* a hand-over to the dpu failed: not before */
	/*
	 * Sequential runs read ahead of (host-readahead.c, host_prefetch()):
	 * several at once, as threads sharing a sweep or sweeping several
	 * parts of the region make. ra_window: the window of the run the last fault
	 * fell in (0: a fault at random).
	 */
	struct ra_stream {
		uint64_t last;    /* chunk of its last fault (UINT64_MAX: free) */
		uint64_t next;    /* first chunk not yet read ahead */
		unsigned window;  /* chunks read ahead of a fault */
		unsigned used;    /* faults ago it was last used (replacement) */
	} ra[HOST_RA_STREAMS];
	unsigned ra_window;
	bool ra_writes;       /* the sequential run writes what it reads ahead:
	                       * read-ahead goes in writable (host_fetch_writable());
	                       * set by a write-protect fault on a chunk read
	                       * ahead, cleared by a reading fault or when one
	                       * leaves unwritten */
	unsigned ra_probe;    /* read-ahead fetches, for RA_PROBE */
	uint64_t loop_lap;    /* the hand's lap (+ 1) when a sequential run
	                       * last read a chunk of it again (0: never) */
	/* fetch = adaptive (host-grain.c): grains of chunks used */
	uint64_t grain_chunks;  /* partial chunks evicted (decaying) */
	uint64_t grain_used;    /* ... and their grains in place then */
	uint64_t grain_fetches; /* partial fetches; every 16th whole: probe */
	uint64_t whole_fetches; /* demand fetches of whole chunks */
	uint32_t left, left_dirty; /* partial chunks that left the buffer
	                            * (decaying), and of them the dirty */
	unsigned grain_n;       /* grains a demand fetch reads (0: chunk) */
	uint64_t grain_last[4]; /* 1 + offsets of recent faults, one per
	                         * stream (0: none) */
	unsigned grain_lasti;   /* ... the one to replace next */
	struct region *next;  /* in the client's list */
	/* fork (host-fork.c): a copy shares the chunks of its source */
	struct region *src;       /* a copy: its source, or NULL */
	uint64_t *shared;         /* a copy: a bit per chunk still the source's */
	uint64_t *pending;        /* a copy: a bit per chunk whose data is on
	                           * its way (a read of the source's, or its
	                           * own write): faults on it wait */
	uint64_t nshared;
	struct region *copies;    /* a source: its copies sharing chunks */
	struct region *copy_next; /* a copy: in its source's list */
};

/* A contiguous free range of an arena, in chunks. */
struct extent {
	uint64_t off, len;
	struct extent *next;
};

struct arena {
	struct host_client *cl;
	uint32_t id;
	int memfd;
	uint64_t size;
	uint8_t *local;   /* famd's own mapping */
	uint64_t uaddr;   /* the program's mapping; 0 until MAP */
	bool poisoned;    /* UFFDIO_POISON was used in it (host_sigbus) */
	struct extent *free;
	struct region **regions; /* sorted by offset */
	size_t nregions, cap;
	struct arena *next;
};

/* A program using fabric-attached memory (one session). */
struct host_client {
	struct host *h;
	int fd;
	pid_t pid;
	int pidfd;          /* the process that connected, from accept; -1 */
	uid_t uid;
	gid_t gid;
	int uffd;
	struct event *sock_ev;
	struct event *uffd_ev;
	struct arena *arenas;
	uint32_t next_arena;
	struct region *regions;
	uint64_t nregions, bytes;
	/* the request being served (the program waits for its reply) */
	struct fam_smsg req;
	char data[FAM_SESSION_MAX_DATA + 1];
	size_t inlen;
	uint8_t inbuf[sizeof(struct fam_smsg) + FAM_SESSION_MAX_DATA];
	int pending_fd;
	bool busy;          /* a request is being served asynchronously */
	bool waits_dpu;     /* an ALLOC waits for the dpu (fallback none) */
	bool waits_discard; /* a DISCARD waits for reads and write-backs */
	bool pending_redo;  /* the dpu went away under the pending ALLOC */
	uint64_t wait_since; /* ... since */
	struct region *pending_region;
	unsigned pending_calls;
	int pending_err;
	bool dead;
	bool give_up;       /* faults it cannot stop: end the session */
	pid_t sigbus_tid;   /* the last thread sent SIGBUS, and where */
	uint64_t sigbus_page;
	unsigned sigbus_repeats; /* ... times in a row (no UFFDIO_POISON) */
	bool forking;       /* FORK copies our regions: writes wait */
	bool orphan;        /* the program closed its socket, runs on */
	uint64_t orphan_check_ns; /* ... next looked at */
	unsigned refs;      /* in-flight operations that point at us */
	/* restart (host-restart.c, host-reclaim.c) */
	uint64_t token;     /* names the session in RECLAIM (HELLO's d) */
	bool restored;      /* from the restart state: waits for its program */
	uint64_t restored_ns; /* ... since */
	uint32_t reclaim_left; /* REARENAs still to come after RECLAIM */
	struct host_client *next;
};

struct host_fork;
struct fork_own;

/*
 * A chunk read in flight, or waiting for room, or parked. Chunks that lie
 * one after the other on one memory node are read together: the first
 * fetch of such a read holds the staging slots of all (nrun) and the
 * stripe the read was routed on (s: one route, one host_route_done, on
 * the memory node or through the dpu), and the others follow it on `run`,
 * each with its own frame and waiters.
 */
struct fetch {
	struct region *r;
	struct region *src; /* r is a copy: the chunk is read from here */
	struct stripe *s;  /* the first fetch of a read while it is out: the
	                    * stripe it was routed on */
	uint64_t chunk;
	int64_t frame;     /* -1 until a frame is reserved */
	bool prefetch;     /* read ahead, not (yet) faulted on */
	bool zero;         /* never written: zero-filled locally */
	bool counted_wait;
	bool installed;    /* put in place by its read's one UFFDIO_COPY */
	bool direct;       /* read into the arena itself (install = continue) */
	bool via_dpu;      /* its read went out through the dpu */
	bool retried;      /* given a new deadline after the dpu failed */
	bool denied_once;  /* parked once after a remote access error */
	bool grow;         /* more grains of a partial, resident chunk */
	bool writable;     /* its grains went in writable: its chunk is dirty */
	bool wfault;       /* a thread waits for it to write: it may go in
	                    * writable (host_fetch_writable()) */
	unsigned g_first;  /* partial: first grain read (0: whole chunk) */
	unsigned g_n;      /* partial: grains read; 0: the whole chunk */
	uint32_t g_pages;  /* grow: pages added to its chunk's frame */
	uint8_t *staging;  /* its data, in its read's staging slots, or in the
	                    * arena (direct) */
	unsigned nrun;     /* the first fetch of a read: chunks read (>= 1) */
	struct fetch *run; /* the next chunk of the same read */
	uint64_t start_ns; /* queued */
	uint64_t fault_ns; /* first fault on it (0: none) */
	uint64_t sent_ns;  /* its read went out (0: zero-filled) */
	uint64_t reply_ns; /* its read's reply came */
	uint64_t done_ns;  /* installed, its threads woken */
	unsigned nwaiters;
	pid_t waiters[8];  /* threads to SIGBUS if it fails */
	uint64_t waddr[8]; /* ... and where each faulted (partial: a page
	                    * it does not read is asked for again) */
	struct fetch *next;
};

struct frame {
	struct region *r; /* NULL when free */
	uint64_t chunk;
	uint64_t gen;     /* host.evict_gen when it was taken */
	uint32_t pages;   /* of the buffer it holds (partial: fewer) */
	uint8_t tenure;   /* clock: passes a dirty chunk found written again
	                   * stays writable, at most HOST_TENURE_MAX */
	uint8_t tenure_left; /* of them, still to come */
	/* (one bit each: a frame stays 32 bytes, two to a cache line) */
	bool kept : 1;    /* clock: a loop's chunk kept (host_loop_keep()) */
	bool hot : 1;     /* clock: a chunk used at random that came back
	                   * soon after it left (host_frame_heat()) */
	uint8_t heat;     /* clock: second chances left to a chunk that came
	                   * back soon after it left (HOST_HEAT, HOST_HOT_LAPS) */
};

/*
 * The clock re-protects a dirty chunk as the hand passes, to see whether
 * it is written again (a write-protect fault). A chunk found written again
 * each time is left writable for 1, then 3 passes (as if written in them),
 * so that a hot chunk costs a write-protect fault every few passes, not
 * every pass (host_tenure_bump, evict_one).
 */
#define HOST_TENURE_MAX 3
/*
 * The clock sees a chunk used when it is faulted on, not when a page of it
 * already mapped is read: a chunk read at random all the time gets one
 * second chance, and leaves. One read in again for a fault soon after it
 * left (a refault, host_chunk_admitted()) gets HOST_HEAT more.
 */
#define HOST_HEAT 2
/*
 * ... and, with loops kept (`loop_keep`), one used at random (no
 * sequential run's: a vertex array) HOST_HOT_LAPS, while such chunks hold
 * at most 1/HOST_HOT_SHARE of the buffer as they come in (host.hot_pages;
 * a partial chunk may grow after), which kept loops leave them: a few
 * laps are soon over when a sweep larger than the buffer turns the hand,
 * and each refault is a thread waiting a round trip. Without kept loops
 * the hand turns slower, and a sort, whose merges reuse a chunk a while
 * and move on, moved a third more with hot chunks.
 */
#define HOST_HOT_LAPS 64
#define HOST_HOT_SHARE 3

/* A write-protect fault on fr's chunk, dirty already: it stays hot longer. */
static inline void
host_tenure_bump(struct frame *fr)
{
	unsigned t = fr->tenure * 2u + 1;

	fr->tenure = (uint8_t)(t < HOST_TENURE_MAX ? t : HOST_TENURE_MAX);
	fr->tenure_left = fr->tenure;
}

struct host_stats {
	uint64_t faults_missing, faults_wp, faults_stale, faults_invalid;
	uint64_t zero_fills, fetches, fetch_bytes, fetch_errors;
	uint64_t prefetches, prefetch_bytes, prefetch_zero;
	uint64_t reads, reads_coalesced; /* chunk reads sent; of several chunks */
	uint64_t evictions_clean, evictions_dirty, writebacks;
	uint64_t refaults; /* chunks read again soon after they left */
	uint64_t writeback_bytes, writeback_errors, evictions_cancelled;
	uint64_t fault_waits_for_room, sigbus;
	uint64_t sigbus_poisoned, sessions_given_up;
	uint64_t sessions_orphaned; /* closed their socket, ran on */
	uint64_t sessions, sessions_refused, bad_messages;
	uint64_t allocs, alloc_errors, allocs_redone, frees, frees_deferred;
	uint64_t quota_refusals;
	uint64_t discards;   /* chunks the programs discarded (DISCARD) */
	uint64_t forks, fork_errors, fork_bytes, fork_adopted, fork_reads;
	uint64_t ops_direct, ops_dpu;        /* reads and writes by path */
	uint64_t path_switches, fences, handovers, adoptions;
	uint64_t switch_errors;
	uint64_t replica_failovers; /* reads served by a copy not the first */
	uint64_t replica_stale;     /* copies of chunks found or left behind */
	uint64_t ec_reads;          /* chunks read from their fragments */
	uint64_t ec_frag_reads;     /* fragment reads asked for */
	uint64_t ec_frag_errors;    /* ... failed or with a wrong CRC */
	uint64_t ec_decodes;        /* chunks decoded (a data fragment
	                             * missing) */
	uint64_t writebacks_early;  /* acknowledged by write_quorum copies,
	                             * before every copy had them */
	uint64_t late_failed;       /* ... whose write to another copy then
	                             * failed (that copy left stale) */
	uint64_t ec_hedges;         /* fragments asked for past hedge_after */
	uint64_t ec_hedges_won;     /* chunks decoded with reads still out */
	uint64_t lat_hist[32]; /* fault service time, log2 microseconds */
	uint64_t lat_count;
	uint64_t lat_sum_ns;   /* of the fault service times */
	/*
	 * Where a fault served by a read spends its time (bd_reads of them):
	 * queued until its read goes out (room, a read slot), on the wire,
	 * installed (UFFDIO_COPY and the wake-up).
	 */
	uint64_t bd_reads, bd_queue_ns, bd_wire_ns, bd_install_ns;
	/* fetch = adaptive: reads of part of a chunk, and their bytes */
	uint64_t grain_fetches, grain_bytes, grain_grows;
};

/*
 * The background copy that brings stale copies of chunks up to date
 * (host-replica.c): one chunk at a time, read from a copy that has it and
 * written to the one that is behind, at rebuild_rate at most.
 */
struct host_rebuild {
	uint8_t *buf;           /* one chunk */
	struct region *r;       /* while busy: the chunk being copied */
	uint64_t chunk;
	struct stripe *src, *dst;
	bool busy;
	bool spoiled;           /* a write-back of that chunk began meanwhile */
	bool wrote;             /* its write to dst went out */
	uint64_t rate;          /* rebuild_rate, bytes/s */
	uint64_t tokens;        /* bytes it may copy now */
	uint64_t last_ns;       /* tokens were last added */
	uint64_t done, bytes;   /* chunks and bytes copied so far */
	uint64_t recreated;     /* copies' regions made again on a node */
	/* ec:K+M: the fragment rebuilt and its CRC; room to encode */
	unsigned frag;
	uint32_t crc;
	uint8_t *ecbuf;
	size_t ecbuf_size;
};

/*
 * [host] replace_after (host-replace.c): the copies and fragments of a
 * memory node down that long move to other memory nodes.
 */
struct host_replace {
	uint64_t down_ns[HOST_MAX_NODES]; /* each node first seen down (0:
	                                   * up) */
	bool told[HOST_MAX_NODES];        /* ... logged that some of its
	                                   * copies have nowhere to go */
	uint64_t moved;                   /* copies moved so far */
	uint64_t stuck;                   /* copies that no node can take
	                                   * (the last pass) */
};

struct host {
	struct famd *d;
	struct event_base *base;
	/* configuration */
	uint64_t chunk;
	unsigned chunk_shift;
	uint64_t arena_size;
	unsigned high_pct, low_pct;
	unsigned prefetch_max;
	unsigned max_fetches;
	bool adaptive;           /* [host] fetch = adaptive (host-grain.c) */
	unsigned grain_shift;    /* log2 of a grain: a chunk's 64th, 4 KiB
	                          * at the least */
	uint64_t chunk_pages;    /* pages of a whole chunk */
	int eviction;
	int numa_node;
	char secret[FAM_SECRET_MAX + 1];
	struct fam_tls *tls;          /* [famd] tls: of every connection */
	/* userfaultfd features we ask for on each program's uffd */
	uint64_t uffd_features;
	bool wp_ok;
	bool poison_ok;          /* UFFDIO_POISON (Linux 6.6) */
	bool cont_ok;            /* install = continue: chunks are read into
	                          * the arenas and mapped with UFFDIO_CONTINUE */
	/* memory nodes */
	struct mnode nodes[HOST_MAX_NODES];
	unsigned nnodes;
	/* the dpu, when [host] dpu is set */
	struct mnode dpu;
	bool has_dpu;
	int path;                /* enum cfg_path: where requests should go */
	int fallback;            /* enum cfg_fallback */
	unsigned copies;         /* [host] redundancy: 1, or N (replicate:N) */
	unsigned ec_k, ec_m;     /* ... ec:K+M (copies 1 then), or 0 */
	struct host_ec_lat {     /* ec:K+M: fragment reads from each node */
		uint64_t us;     /* how long they take (moving average) */
		uint64_t at_ns;  /* the last one's end */
	} ec_lat[HOST_MAX_NODES];
	struct host_rebuild rb;
	struct host_hedge *hedge; /* reads' estimates, hedged reads */
	struct host_fthreads *ft; /* fault-service threads, or NULL */
	struct host_replace rp;  /* replace_after (host-replace.c) */
	/* programs */
	int listen_fd;
	int session_lock;
	struct event *listen_ev;
	struct event *listen_retry; /* accepting again after EMFILE */
	unsigned listen_backoff_ms;
	char *session_path;
	struct host_client *clients;
	uint64_t next_handle;
	struct host_fork *forks; /* copies for forked children (host-fork.c) */
	struct fork_own *owns;   /* copies' chunks being made their own */
	/* the buffer: frames are slots (used of nframes); room is counted in
	 * pages (pages_used of npages), a partial chunk's frame holding only
	 * its grains' */
	struct frame *frames;
	uint32_t *free_frames;
	uint64_t nframes, nfree, used, dirty, hand;
	uint64_t npages, pages_used;
	bool evicting;
	unsigned writebacks_inflight;
	unsigned write_quorum;    /* [host] write_quorum: N, or 0 for all */
	struct writeback *late;   /* write-backs acknowledged by their quorum
	                           * with writes still out (host-buffer.c) */
	uint64_t nlate;           /* ... how many */
	uint64_t wb_held;         /* write-backs holding a copy of their chunk
	                           * (write_quorum), late ones included */
	int writeback_err;        /* of the last write-back, 0 if it worked */
	uint64_t evict_gen; /* background eviction passes so far */
	uint64_t evicted_pages; /* pages that left the buffer, the ghost clock */
	uint64_t hand_laps;     /* times the clock hand went round */
	uint64_t kept_pages;    /* in frames kept for loops (host_loop_keep) */
	uint64_t hot_pages;     /* in hot frames (host_frame_heat) */
	uint64_t keep_target;   /* ... at most (balanced against refaults) */
	unsigned ghost_shift;   /* ... counted in units of 2^ghost_shift pages */
	bool punch_batch;   /* a background pass gathers its punches */
	struct host_punch {
		struct region *r;
		uint64_t chunk;
	} punch[HOST_PUNCH_MAX]; /* chunks to punch, punch_n of them */
	unsigned punch_n;
	/* chunk reads */
	uint8_t *staging;        /* nstaging chunk-sized slots */
	uint64_t *staging_busy;  /* a bit per slot: taken */
	unsigned nstaging, nstaging_free;
	unsigned inflight;       /* chunks being read */
	struct fetch *demandq, *demandq_tail;
	struct fetch *prefetchq, *prefetchq_tail;
	struct fetch *parked, *parked_tail;
	uint8_t *zero;
	struct event *tick;
	bool stopping;
	struct host_restart *restart; /* the restart state (host-restart.c) */
	bool handover;      /* stopping for a restart: the sessions' memory
	                     * is kept, on the memory nodes and in the arenas */
	/* calls up, registered from above (lower layers call only these) */
	struct event *wake;      /* the deferred wake-up (host_wake) */
	struct event *evict_ev;  /* background eviction's next slice */
	unsigned wake_what;      /* HOST_WAKE_* asked for since it last ran */
	void (*node_up)(struct host *h, struct mnode *n, bool resumed);
	void (*region_gone)(struct region *r); /* dying and idle: free it */
	/* a FORK's copy is made (err 0) or failed: answer the parent */
	void (*fork_done)(struct host_client *cl, uint64_t token, int err);
	struct host_stats stats;
};

/*
 * What the deferred wake-up does: the fault service's callback on h->wake,
 * which lower layers activate (in the loop's current iteration) instead of
 * calling up.
 */
#define HOST_WAKE_KICK   0x01 /* start what the fetch queues allow */
#define HOST_WAKE_UNPARK 0x02 /* parked fetches back to the queues, kick */

/* Asks the fault service to run `what` (HOST_WAKE_*) in this iteration. */
static inline void
host_wake(struct host *h, unsigned what)
{
	h->wake_what |= what;
	if (h->wake != NULL)
		event_active(h->wake, EV_READ, 0);
}

void host_restart_behind(struct stripe *s);
void host_restart_stale(struct stripe *s, uint64_t row, bool set);
void host_restart_flush(struct host *h);

/* Returns true when copy s of a region is behind for row (replication). */
static inline bool
host_stale_test(const struct stripe *s, uint64_t row)
{
	return s->stale != NULL && (s->stale[row / 64] >> (row % 64) & 1);
}

/* Marks copy s behind for row (its data there is not the latest). */
static inline void
host_stale_set(struct stripe *s, uint64_t row)
{
	if (s->stale == NULL || host_stale_test(s, row))
		return;
	s->stale[row / 64] |= 1ull << (row % 64);
	s->nstale++;
	/* in the restart state before the chunk leaves the buffer */
	if (!s->behind_saved)
		host_restart_stale(s, row, true);
}

/* Copy s's region is gone from its node: made again, behind on every row. */
static inline void
host_stripe_gone(struct stripe *s)
{
	s->gone = true;
	if (!s->behind_saved)
		host_restart_behind(s);
}

/* Marks copy s up to date for row. */
static inline void
host_stale_clear(struct stripe *s, uint64_t row)
{
	if (!host_stale_test(s, row))
		return;
	s->stale[row / 64] &= ~(1ull << (row % 64));
	s->nstale--;
	if (!s->behind_saved)
		host_restart_stale(s, row, false);
}

#define HOST_GRAIN_DECAY 64 /* partial chunks counted in a density, at most */

/* Returns the grains of chunk ch in place (all of a whole chunk). */
static inline unsigned
host_grain_count(const struct host *h, const struct chunk *ch)
{
	if (!(ch->flags & CH_PARTIAL))
		return (unsigned)(h->chunk >> h->grain_shift);
	return (unsigned)__builtin_popcountll(ch->present);
}

/* Tells whether byte off of chunk ch is in place (a partial chunk's). */
static inline bool
host_grain_has(const struct host *h, const struct chunk *ch, uint64_t off)
{
	if (!(ch->flags & CH_PARTIAL))
		return true;
	return (ch->present >> (off >> h->grain_shift)) & 1;
}

/*
 * Counts partial chunk ch of r in r's density: its grains in place as it
 * leaves the buffer, or all of them once half are in place (a chunk used
 * that densely is read whole from then on; it is not counted again).
 */
static inline void
host_grain_evicted(const struct host *h, struct region *r, struct chunk *ch)
{
	unsigned per = (unsigned)(h->chunk >> h->grain_shift);
	unsigned n = host_grain_count(h, ch);

	if ((ch->flags & (CH_PARTIAL | CH_COUNTED)) != CH_PARTIAL)
		return;
	ch->flags |= CH_COUNTED;
	r->grain_chunks++;
	r->grain_used += n * 2 >= per ? per : n;
	if (r->grain_chunks >= HOST_GRAIN_DECAY) {
		r->grain_chunks /= 2;
		r->grain_used /= 2;
	}
}

/*
 * Counts partial chunk ch of r leaving the buffer, clean or dirty (its
 * write-back starting): where most leave dirty, grains go in writable.
 */
static inline void
host_grain_left(struct region *r, const struct chunk *ch, bool dirty)
{
	if (!(ch->flags & CH_PARTIAL))
		return;
	r->left++;
	r->left_dirty += dirty;
	if (r->left >= HOST_GRAIN_DECAY) {
		r->left /= 2;
		r->left_dirty /= 2;
	}
}

/* The layers, top down: each file calls only those below it. */

/* host-role.c */
void host_admin_register(void);

/* host-listen.c */
int host_session_open(struct host *h, char **cause);
void host_session_close(struct host *h);

/* host-session.c */
struct ucred;
int host_client_new(struct host *h, int fd, const struct ucred *cred,
    int pidfd);
void host_session_init(struct host *h);
void host_client_release(struct host_client *cl);
/* host-session-end.c: ends the orphans that exited or exec'd. */
void host_session_orphans(struct host *h);
void host_session_retry(struct host *h);
void host_client_put(struct host_client *cl);
void host_region_free(struct region *r);
json_t *host_clients_json(struct host *h);

/* host-restart.c: beside the sessions (programs outlive a restart) */
int host_restart_init(struct host *h);
void host_restart_tick(struct host *h);
void host_restart_stop(struct host *h);
void host_restart_fini(struct host *h);
json_t *host_restart_json(struct host *h);

/* host-fault.c (and host-probe.c: the userfaultfd features) */
int host_fault_init(struct host *h);
/* host-role.c: a fault's service time, for status */
void host_fault_latency(struct host *h, uint64_t ns);
void host_fault_fini(struct host *h);
void host_ra_reset(struct region *r);
unsigned host_ra_max(const struct host *h);
void host_prefetch(struct host *h, struct region *r, uint64_t c);
void host_loop_keep(struct host *h, struct region *r, uint32_t frame,
    bool again);
void host_loop_refault(struct host *h);
void host_fetch_start(struct host *h, struct region *r, uint64_t c,
    bool prefetch, pid_t tid, uint64_t addr);
void host_uffd_cb(int fd, short what, void *arg);
/* Tells whether cl's process lives (its pidfd; assumed without one). */
bool host_client_alive(struct host_client *cl);
void host_fetch_kick(struct host *h);
void host_fetch_unpark(struct host *h);
void host_sigbus(struct host *h, struct host_client *cl, pid_t tid,
    uint64_t addr, uint64_t len, const char *why);
int host_uffd_probe(struct host *h, char **cause);
int host_uffd_setup(struct host *h, int uffd, char **cause);

/* host-fork.c: below the faults (doc/fork.md) */

/* A copied arena the child takes, where the parent had it. */
struct host_fork_arena {
	uint32_t id;          /* the parent's arena */
	uint64_t size, uaddr; /* its length and the parent's address of it */
	struct arena *child;  /* the child's arena, once claimed */
	bool handed;          /* its memfd went to the child */
};

int host_fork_start(struct host_client *cl);
struct host_fork *host_fork_find(struct host *h, uint64_t token);
int host_fork_claim(struct host_fork *f, struct host_client *cl,
    struct host_fork_arena **arenas, size_t *narenas, struct region ***regions,
    uint32_t **region_arena, size_t *nregions, bool *first);
void host_fork_handed(struct host_fork *f);
void host_fork_client_gone(struct host_client *cl);
void host_fork_held(struct host *h, uid_t uid, uint64_t *bytes,
    uint64_t *regions);
void host_fork_tick(struct host *h);
void host_fork_fini(struct host *h);
void host_fork_region_gone(struct region *r);
bool host_fork_shared(const struct region *r, uint64_t c);
bool host_fork_pending(const struct region *r, uint64_t c);
void host_fork_fetching(struct region *r, uint64_t c);
void host_fork_fetched(struct region *r, uint64_t c, struct region *src,
    bool landed);
int host_fork_unshare(struct region *r, uint64_t c);
bool host_fork_source_shares(const struct region *r, uint64_t first,
    uint64_t n);
int host_fork_copy_discard(struct region *r, uint64_t first, uint64_t n);

/* host-buffer.c */
int host_buffer_init(struct host *h, uint64_t buffer_size, char **cause);
int host_buffer_adapt(struct host *h, char **cause);
void host_buffer_fini(struct host *h);
int64_t host_frame_get(struct host *h);
int64_t host_frame_take(struct host *h, uint32_t pages);
void host_frame_put(struct host *h, uint32_t frame);
int host_frame_grow(struct host *h, uint32_t frame, int64_t pages);
void host_frame_heat(struct host *h, uint32_t frame, bool random);
unsigned host_grain_settle(struct host_client *cl);
#define HOST_EVICT_SLICE 8u /* chunks a background pass evicts at a time */
void host_evict_background(struct host *h);
void host_evict_soon(struct host *h); /* host-fault.c */
bool host_evict_for_room(struct host *h);
/* host_chunk_admitted(): what a chunk read in was */
enum host_admit { HOST_ADMIT_NEW, HOST_ADMIT_AGAIN, HOST_ADMIT_REFAULT };
enum host_admit host_chunk_admitted(struct host *h, struct chunk *ch,
    bool demand);
void host_region_drop_chunks(struct host *h, struct region *r);
void host_chunks_punch(struct host *h, struct region *r, uint64_t c,
    uint64_t n);
int host_chunks_discard(struct host *h, struct region *r, uint64_t first,
    uint64_t n);
uint64_t host_stripe_offset(const struct host *h, const struct region *r,
    uint64_t c, unsigned *stripe);
uint32_t host_stripe_len(const struct host *h, const struct stripe *s,
    uint64_t off);
uint8_t *host_staging_get(struct host *h, unsigned *n);
void host_staging_put(struct host *h, uint8_t *p, unsigned n);

/* host-path.c */
int host_route(struct host *h, struct stripe *s, bool background,
    struct fam_conn **conn, struct fam_mr **mr,
    const struct fam_remote **remote);
void host_route_done(struct host *h, struct stripe *s);
void host_stripe_adopt(struct host *h, struct stripe *s);
void host_stripe_free(struct host *h, struct stripe *s);
void host_path_node_up(struct host *h, struct mnode *n, bool resumed);
void host_path_tick(struct host *h);
void host_path_set(struct host *h, int path, const char *why);
void host_region_advise(struct host *h, struct region *r);
void host_region_discard(struct host *h, struct region *r, uint64_t first,
    uint64_t n);
json_t *host_path_json(struct host *h);

/* host-replica.c: beside the path, below the buffer */
enum host_redundancy_state {
	HOST_RED_HEALTHY,    /* every copy of every chunk up to date */
	HOST_RED_REBUILDING, /* copies behind, on nodes that are up */
	HOST_RED_DEGRADED,   /* copies behind or gone, on nodes that are not */
};

unsigned host_replica_node(unsigned col, unsigned k, unsigned nnodes);
int host_replica_place(const struct host *h, unsigned width, unsigned copies,
    unsigned k_ec, bool up_only, unsigned place[]);
void host_replica_defer(struct host *h, struct stripe *s, uint64_t rows);
uint64_t host_replica_rows(const struct host *h, const struct region *r,
    unsigned col);
int host_replica_alloc(struct host *h, struct region *r);
void host_replica_free(struct region *r);
bool host_replica_valid(const struct stripe *s, uint64_t row);
int host_chunk_route(struct host *h, struct region *r, uint64_t c,
    bool background, struct stripe **sp, struct fam_conn **conn,
    struct fam_mr **mr, const struct fam_remote **remote);
bool host_replica_failover(struct host *h, struct stripe *s, uint64_t c,
    int status);
int host_replica_state(const struct host *h, const struct region *r,
    uint64_t *behind);
void host_replica_tick(struct host *h);
int host_replica_init(struct host *h);
void host_replica_fini(struct host *h);
json_t *host_replica_json(struct host *h);
void host_replica_rebuild_end(struct host *h, int status);
uint32_t host_replica_unit(const struct host *h, const struct region *r);
unsigned host_replica_copies(const struct host *h, uint64_t d, bool file,
    unsigned *k, unsigned *m);

/* host-hedge.c: beside host-replica.c (the copy a read goes to) */
struct host_hedge;
int host_hedge_init(struct host *h);
void host_hedge_fini(struct host *h);
uint64_t host_hedge_expect(const struct host *h, const struct stripe *s,
    unsigned n);
bool host_hedge_on(const struct host *h, const struct region *r);
void host_hedge_routed(struct host *h, unsigned k);
int host_hedge_read(struct host *h, struct fetch *f, struct stripe *s,
    struct fam_conn *conn, const struct fam_remote *remote,
    struct fam_mr *mr, uint64_t off, uint32_t len, uint16_t flags,
    fam_done_fn done);
void host_hedge_peers_json(const struct host *h, json_t *peers);
json_t *host_hedge_json(const struct host *h);
/* host-replace.c: beside host-replica.c (whose copies it moves) */
void host_replace_tick(struct host *h);
void host_replace_json(const struct host *h, json_t *red);

/* host-ec.c: ec:K+M, beside host-replica.c (its placement and states) */
int host_ec_new(struct host *h, struct region *r, unsigned k, unsigned m);
int host_ec_alloc(struct region *r);
int host_ec_restored(struct region *r);
void host_ec_free(struct region *r);
uint32_t host_ec_frag(const struct region *r);
unsigned host_ec_k(const struct region *r);
int host_ec_check(const struct host *h, const struct region *r, uint64_t c);
int host_ec_read(struct host *h, struct region *r, uint64_t c, uint8_t *dst,
    bool background, fam_done_fn done, void *ctx);
int host_ec_wb_encode(struct region *r, const uint8_t *chunk, uint8_t **buf,
    const uint8_t *src[], uint32_t crc[]);
void host_ec_wb_done(struct region *r, uint64_t c, unsigned i, uint32_t crc);
int host_ec_rebuild_start(struct host *h, struct stripe *dst, uint64_t c);
json_t *host_ec_json(struct host *h);

/* host-node.c */
int host_node_start(struct mnode *n);
void host_node_close(struct mnode *n);
void host_node_fini(struct mnode *n);
bool host_nodes_open(const struct host *h);
bool host_node_usable(const struct host *h, const struct stripe *s);
void host_node_free(struct mnode *n, uint64_t instance, uint32_t region);
struct fam_conn *host_node_conn(const struct stripe *s, bool background,
    struct fam_mr **mr);
bool host_dpu_usable(const struct host *h);
struct mnode *host_node_by_instance(struct host *h, uint64_t instance);

/* host-fthread.c: fault-service threads, under the links (host-node.c) */
int host_fthreads_start(struct host *h, unsigned n);
void host_fthreads_stop(struct host *h);
void host_fthreads_node_up(struct host *h, struct mnode *n,
    const struct fam_conn_opts *opts);
void host_fthreads_node_down(struct host *h, struct mnode *n);
int host_fthread_read(struct host *h, const struct region *r, uint64_t chunk,
    const struct stripe *s, const struct fam_remote *remote, uint64_t off,
    uint32_t len, uint8_t *dst, uint16_t flags, fam_done_fn done, void *ctx);
json_t *host_fthreads_json(const struct host *h);

/* host-grain.c: fetch = adaptive, below the faults, above the buffer */
void host_grain_init(struct host *h);
bool host_grain_region(const struct host *h, const struct region *r);
unsigned host_grain_choose(struct host *h, struct region *r);
json_t *host_grain_json(const struct host *h, const struct region *r);
uint64_t host_grain_mask(unsigned first, unsigned n);
uint32_t host_grain_pages(const struct host *h, const struct fetch *f);
uint64_t host_grain_bytes(const struct host *h, const struct fetch *f);
void host_grain_start(struct host *h, struct fetch *f, uint64_t off);
bool host_grain_sequential(const struct host *h, struct region *r,
    uint64_t off);
struct fetch *host_grain_grow(struct host *h, struct region *r, uint64_t c,
    uint64_t off, pid_t tid, uint64_t addr);
void host_grain_installed(struct host *h, struct fetch *f);
bool host_grain_writable(const struct fetch *f);
bool host_fetch_writable(struct host *h, const struct fetch *f);
void host_fetch_wants_write(struct chunk *ch, uint64_t flags);
void host_grain_written(struct host *h, struct fetch *f);
void host_grain_ungrown(struct host *h, struct fetch *f);
bool host_grain_wait(struct fetch *f, pid_t tid, uint64_t addr);
void host_grain_span(const struct host *h, const struct fetch *f,
    unsigned i, uint64_t *at, uint64_t *len);

/* host-extent.c, host-numa.c, host-uffd.c: leaves, below every layer */
int64_t host_extent_take(struct extent **list, uint64_t len, uint64_t align);
int host_extent_give(struct extent **list, uint64_t off, uint64_t len);
void host_extent_free(struct extent **list);
int host_arena_add_region(struct arena *ar, struct region *r);
void host_arena_del_region(struct arena *ar, struct region *r);
struct region *host_region_find(struct host_client *cl, uint64_t uaddr,
    struct arena **arp);
void host_region_idle(struct region *r);
int host_numa_pick(struct host *h, const char *addr);
void host_numa_bind(struct host *h, void *mem, size_t len);
void *host_numa_alloc(struct host *h, size_t len);
void host_numa_free(void *mem, size_t len);

#endif /* FAM_HOST_H */
