/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cfg-table.c - every configuration key famd knows, in one table. The parser,
 * `config.show`, the shipped example files and the key list of famd.conf(5)
 * are all produced from it, so they cannot drift apart.
 */
#include "config.h"

#include "core/famd.h"

const char *const cfg_role_names[] = { "host", "dpu", "memory", NULL };
static const char *const log_levels[] = { "err", "warning", "notice", "info",
	"debug", NULL };
static const char *const transports[] = { "tcp", "verbs", NULL };
static const char *const evictions[] = { "clock", "fifo", NULL };
static const char *const installs[] = { "copy", "continue", NULL };
static const char *const fetches[] = { "chunk", "adaptive", NULL };
static const char *const paths[] = { "direct", "dpu", NULL };
static const char *const fallbacks[] = { "none", "direct", NULL };
static const char *const dynamics[] = { "off", "on", "adaptive", NULL };
static const char *const session_modes[] = { "0600", "0660", "0666", NULL };

#define ALL  CFG_ROLES_ALL
#define HOST CFG_ROLE_BIT(ROLE_HOST)
#define DPU  CFG_ROLE_BIT(ROLE_DPU)
#define MEM  CFG_ROLE_BIT(ROLE_MEMORY)

const struct cfg_key_def cfg_keys[CFG_NKEYS] = {
	[CFG_ROLE] = {
		.section = "famd", .name = "role", .type = CFG_T_ENUM,
		.choices = cfg_role_names, .def = NULL, .roles = ALL,
		.help = "What this node does: host (a compute node whose "
		    "programs use fabric-attached memory), dpu (the agent on "
		    "a SmartNIC between hosts and memory nodes) or memory (a "
		    "node lending its DRAM). Required.",
	},
	[CFG_NODE_NAME] = {
		.section = "famd", .name = "node_name", .type = CFG_T_STRING,
		.min = 0, .max = 63, .def = "", .roles = ALL,
		.help = "Name this node gives its peers in the hello and shows "
		    "in status. Empty means the host name.",
	},
	[CFG_ADMIN_SOCKET] = {
		.section = "famd", .name = "admin_socket", .type = CFG_T_PATH,
		.def = FAMD_DEFAULT_ADMIN, .roles = ALL,
		.help = "Unix socket where famd answers famctl (JSON-RPC 2.0, "
		    "one object per line). A lock file with the suffix .lock "
		    "beside it keeps a second famd off a live socket.",
	},
	[CFG_ADMIN_GROUP] = {
		.section = "famd", .name = "admin_group", .type = CFG_T_STRING,
		.min = 0, .max = 63, .def = "", .reloadable = true,
		.roles = ALL,
		.help = "Group given the admin socket (mode 0660): its members "
		    "may read status; only root may change anything. Empty "
		    "means famd's own group.",
	},
	[CFG_ADMIN_MAX_CLIENTS] = {
		.section = "famd", .name = "admin_max_clients",
		.type = CFG_T_INT, .min = 1, .max = 1024, .def = "16",
		.reloadable = true, .roles = ALL,
		.help = "Most admin connections open at once; one more is "
		    "answered with an error and closed.",
	},
	[CFG_ADMIN_IDLE_TIMEOUT] = {
		.section = "famd", .name = "admin_idle_timeout",
		.type = CFG_T_DURATION, .min = 100, .max = 86400000,
		.def = "60s", .reloadable = true, .roles = ALL,
		.help = "An admin connection that sends no complete request for "
		    "this long is closed: each request must arrive whole "
		    "within it, however its bytes trickle in.",
	},
	[CFG_METRICS_LISTEN] = {
		.section = "famd", .name = "metrics_listen", .type = CFG_T_ADDR,
		.def = "", .roles = ALL,
		.empty_ok = true, .any_port = true,
		.help = "Address and port where famd serves its status as "
		    "OpenMetrics text (GET /metrics, for Prometheus), from its "
		    "own event loop. Empty means none; famctl metrics prints "
		    "the same text. Give a loopback address unless the "
		    "network between famd and the scraper is trusted: the "
		    "page needs no credentials.",
	},
	[CFG_LOG_LEVEL] = {
		.section = "famd", .name = "log_level", .type = CFG_T_ENUM,
		.choices = log_levels, .def = "info", .reloadable = true,
		.roles = ALL,
		.help = "Most verbose messages logged: err, warning, notice, "
		    "info or debug. famctl call log.level changes it at run "
		    "time.",
	},
	[CFG_TRANSPORT] = {
		.section = "famd", .name = "transport", .type = CFG_T_ENUM,
		.choices = transports, .def = "tcp", .roles = ALL,
		.help = "How this node reaches its peers: tcp (any network, and "
		    "loopback for tests) or verbs (RDMA through rdma-core: "
		    "one-sided reads and writes to memory nodes).",
	},
	[CFG_SECRET_FILE] = {
		.section = "famd", .name = "secret_file", .type = CFG_T_PATH,
		.empty_ok = true, .def = "", .roles = ALL,
		.help = "File whose first line is the shared secret every peer "
		    "presents in its hello (at most 64 characters; keep the file "
		    "mode 0600). A peer with a wrong or missing secret is "
		    "refused. Empty means no secret is sent or required.",
	},
	[CFG_TLS] = {
		.section = "famd", .name = "tls", .type = CFG_T_BOOL,
		.def = "no", .roles = ALL,
		.help = "TLS 1.3 on every tcp connection of this node, in both "
		    "directions, before the hello: for links that leave a "
		    "trusted rack. Both ends present a certificate "
		    "(tls_cert, tls_key) and refuse one not signed by tls_ca; "
		    "a peer without TLS is refused. The secret is still "
		    "proved inside. Every node of the fabric must agree. Not "
		    "with transport = verbs (RDMA bypasses it: isolate that "
		    "fabric instead).",
	},
	[CFG_TLS_CERT] = {
		.section = "famd", .name = "tls_cert", .type = CFG_T_PATH,
		.empty_ok = true, .def = "", .roles = ALL,
		.help = "PEM file of this node's certificate (then any "
		    "intermediate certificates), presented to every peer when "
		    "tls is on.",
	},
	[CFG_TLS_KEY] = {
		.section = "famd", .name = "tls_key", .type = CFG_T_PATH,
		.empty_ok = true, .def = "", .roles = ALL,
		.help = "PEM file of the private key of tls_cert (keep the file "
		    "mode 0600).",
	},
	[CFG_TLS_CA] = {
		.section = "famd", .name = "tls_ca", .type = CFG_T_PATH,
		.empty_ok = true, .def = "", .roles = ALL,
		.help = "PEM file of the certificate authority (or several) "
		    "whose certificates peers must present when tls is on. Any "
		    "certificate it signed is accepted, whatever its name: use "
		    "a CA of famd's own.",
	},
	[CFG_OP_TIMEOUT] = {
		.section = "famd", .name = "op_timeout", .type = CFG_T_DURATION,
		.min = 100, .max = 600000, .def = "10s", .roles = ALL,
		.help = "Deadline of every request to a peer. A peer that does not "
		    "answer in time is disconnected and its requests fail.",
	},
	[CFG_CPU_LATENCY] = {
		.section = "famd", .name = "cpu_latency", .type = CFG_T_INT,
		.min = 0, .max = 100000, .off_ok = true, .def = "0",
		.reloadable = true, .roles = ALL,
		.help = "While famd serves faults or requests, it asks the "
		    "kernel (PM QoS, /dev/cpu_dma_latency) that this machine's "
		    "idle CPUs wake within this many microseconds, and lets go "
		    "after a second without any: each fault is a chain of "
		    "wake-ups, and a CPU in a deep idle state, or a virtual CPU "
		    "its hypervisor halted, takes tens of microseconds to wake "
		    "for each. 0 keeps idle CPUs polling (the shortest faults; "
		    "they draw power, and a virtual machine's CPUs keep their "
		    "host's busy, while famd works); a few microseconds allows "
		    "shallow idle states on bare metal; off asks nothing. Needs "
		    "root (or write access to the device); without it famd "
		    "says so once and serves as before.",
	},
	[CFG_MEMORY_LISTEN] = {
		.section = "memory", .name = "listen", .type = CFG_T_ADDR,
		.def = "127.0.0.1:7700", .example = "127.0.0.1:7700",
		.roles = MEM, .any_port = true,
		.help = "Address and port where hosts and dpus connect. Port 0 "
		    "takes any free port; famctl status shows the one taken. "
		    "An address other nodes reach (not loopback) needs "
		    "secret_file: without one famd refuses to start.",
	},
	[CFG_MEMORY_CAPACITY] = {
		.section = "memory", .name = "capacity", .type = CFG_T_SIZE,
		.min = 1 << 20, .max = (int64_t)1 << 50, .def = "1G",
		.roles = MEM,
		.help = "Most bytes of regions this node lends at once; a request "
		    "beyond it is refused with ENOSPC. A reservation "
		    "(MAP_NORESERVE) over tcp counts only what has been "
		    "written to it, 64 KiB at a time, and a write beyond the "
		    "capacity is refused: the host keeps that data.",
	},
	[CFG_MEMORY_PRELOAD_DIR] = {
		.section = "memory", .name = "preload_dir", .type = CFG_T_PATH,
		.def = "/var/lib/famd/preload", .roles = MEM,
		.help = "Directory of the files programs may preload into regions "
		    "(fam_alloc_file). A path that leads outside it is refused.",
	},
	[CFG_MEMORY_SESSION_GRACE] = {
		.section = "memory", .name = "session_grace",
		.type = CFG_T_DURATION, .min = 0, .max = 3600000, .def = "30s",
		.reloadable = true, .roles = MEM,
		.help = "How long the regions of a host whose connection dropped "
		    "are kept for it to reconnect and resume. After that they are "
		    "freed, unless created persistent.",
	},
	[CFG_MEMORY_PEER_SECRETS] = {
		.section = "memory", .name = "peer_secrets", .type = CFG_T_PATH,
		.empty_ok = true, .def = "", .roles = MEM,
		.help = "File of lines \"NODE SECRET_FILE\" (# starts a "
		    "comment): the peer whose hello names node NODE must prove "
		    "the secret in SECRET_FILE (its own [famd] secret_file, of "
		    "the same form), not the shared one, and its quotas "
		    "(peer_max_bytes, peer_max_regions) count against NODE "
		    "wherever it connects from. Another peer cannot take that "
		    "name. A peer whose name is not listed proves the shared "
		    "secret_file, and is refused when there is none. Empty: "
		    "every peer proves the shared secret.",
	},
	[CFG_DPU_LISTEN] = {
		.section = "dpu", .name = "listen", .type = CFG_T_ADDR,
		.def = "0.0.0.0:7701", .example = "127.0.0.1:7701", .roles = DPU,
		.any_port = true,
		.help = "Address and port where hosts connect to this dpu, as "
		    "they would to a memory node. Port 0 takes any free port; "
		    "famctl status shows the one taken.",
	},
	[CFG_DPU_MEMORY_NODES] = {
		.section = "dpu", .name = "memory_nodes", .type = CFG_T_ADDRLIST,
		.max = 16, .def = "", .empty_ok = true,
		.example = "127.0.0.1:7700", .roles = DPU,
		.help = "Memory nodes this dpu forwards to, as a comma-separated "
		    "list of host:port. A region a host creates goes to the "
		    "memory node the host names, or else to the next one in "
		    "turn. A dpu does not start without one.",
	},
	[CFG_DPU_SESSION_GRACE] = {
		.section = "dpu", .name = "session_grace",
		.type = CFG_T_DURATION, .min = 0, .max = 3600000, .def = "30s",
		.reloadable = true, .roles = DPU,
		.help = "How long the regions of a host whose connection dropped "
		    "are kept for it to reconnect and resume. After that they are "
		    "freed on the memory nodes (a host that adopted them keeps "
		    "them there).",
	},
	[CFG_DPU_AGGREGATE] = {
		.section = "dpu", .name = "aggregate", .type = CFG_T_BOOL,
		.def = "on", .reloadable = true, .roles = DPU,
		.help = "Task aggregation: requests that arrive together (from "
		    "every host) are collected into a batch and put on the "
		    "memory-node link with one flush (one writev on tcp, one "
		    "chain of work requests on verbs). Off: each request is "
		    "sent on its own as it arrives.",
	},
	[CFG_DPU_BATCH_LIMIT] = {
		.section = "dpu", .name = "batch_limit", .type = CFG_T_INT,
		.min = 1, .max = 1024, .def = "64", .reloadable = true,
		.roles = DPU,
		.help = "Most requests in one aggregated batch; a full batch is "
		    "sent at once.",
	},
	[CFG_DPU_ASYNC] = {
		.section = "dpu", .name = "async", .type = CFG_T_BOOL,
		.def = "on", .roles = DPU,
		.help = "Asynchronous forwarding: the memory-node side (issuing "
		    "requests, taking their completions, filling the cache) runs "
		    "on a thread of its own, fed through a queue, while the "
		    "control loop receives hosts' requests and answers them. "
		    "Off: one loop does both. Either transport.",
	},
	[CFG_DPU_STATIC_REGIONS] = {
		.section = "dpu", .name = "static_regions", .type = CFG_T_STRING,
		.min = 0, .max = 1023, .def = "", .reloadable = true,
		.roles = DPU,
		.help = "Regions to cache whole in the dpu's memory (the static "
		    "cache), as a comma-separated list of region names (a shared "
		    "file's path, or a file's path): loaded once when a host "
		    "creates them through this dpu, then every read of them is "
		    "served here; writes go through to the memory node and keep "
		    "the copy current. Programs can ask for it too "
		    "(fam_advise(FAM_ADVISE_STATIC)).",
	},
	[CFG_DPU_STATIC_SIZE] = {
		.section = "dpu", .name = "static_size", .type = CFG_T_SIZE,
		.min = 0, .max = (int64_t)1 << 40, .def = "256M",
		.reloadable = true, .roles = DPU,
		.help = "Most bytes of static copies held at once; a region that "
		    "would go past it gets a partial copy of the 1 MiB pieces "
		    "read most in its first pass that fit, or none when not "
		    "one piece fits (counted).",
	},
	[CFG_DPU_DYNAMIC_CACHE] = {
		.section = "dpu", .name = "dynamic_cache", .type = CFG_T_ENUM,
		.choices = dynamics, .def = "adaptive", .reloadable = true,
		.roles = DPU,
		.help = "The dynamic cache: entries of cache_entry_size that "
		    "prefetch workers load off the critical path, ahead of "
		    "sequential runs hosts read (a recent list of the last 128 "
		    "reads feeds them), and that later reads hit. off; on; or "
		    "adaptive: on while its hit rate over hit_window reads stays "
		    "above bw_ratio (below it, caching costs more than it "
		    "saves), off for probe_interval when it falls under, then "
		    "tried again. famctl call cache.set changes it at run time.",
	},
	[CFG_DPU_CACHE_SIZE] = {
		.section = "dpu", .name = "cache_size", .type = CFG_T_SIZE,
		.min = 1 << 20, .max = (int64_t)1 << 40, .def = "256M",
		.roles = DPU,
		.help = "Memory of the dynamic cache: one buffer of this many "
		    "bytes, in entries of cache_entry_size; a full cache evicts "
		    "an entry at random (never one being served or loaded), "
		    "preferring entries already read to prefetched ones not "
		    "read yet.",
	},
	[CFG_DPU_CACHE_ENTRY_SIZE] = {
		.section = "dpu", .name = "cache_entry_size", .type = CFG_T_SIZE,
		.min = 4096, .max = 16 << 20, .pow2 = true, .def = "1M",
		.roles = DPU,
		.help = "Bytes one dynamic cache entry holds: a power of two, at "
		    "least the hosts' chunk_size; kept in 64 granules, each "
		    "loaded, kept or served on its own. Larger entries mean "
		    "fewer entries, and fewer runs served at once. Hosts learn "
		    "it when they connect, and keep each read within an "
		    "entry.",
	},
	[CFG_DPU_PREFETCH_DEPTH] = {
		.section = "dpu", .name = "prefetch_depth", .type = CFG_T_INT,
		.min = 0, .max = 64, .def = "8", .reloadable = true,
		.roles = DPU,
		.help = "Entries loaded past the one a host read ends in: a read "
		    "that continues a sequential run makes the prefetch workers "
		    "load from its end twice the run's length so far, up to "
		    "prefetch_depth entries further (what is not cached, loading "
		    "or being forwarded yet), but never more than its share of "
		    "the cache: the entries over the runs going on, less two "
		    "(the one read and the one just left), and at most half "
		    "the entries.",
	},
	[CFG_DPU_PREFETCH_WORKERS] = {
		.section = "dpu", .name = "prefetch_workers", .type = CFG_T_INT,
		.min = 1, .max = 16, .def = "1", .roles = DPU,
		.help = "Threads that take reads off the recent list and decide "
		    "what to load.",
	},
	[CFG_DPU_BW_RATIO] = {
		.section = "dpu", .name = "bw_ratio", .type = CFG_T_INT,
		.min = 1, .max = 100, .def = "50", .reloadable = true,
		.roles = DPU,
		.help = "B_net / B_intra in percent: the bandwidth of the network "
		    "to the memory nodes over that of the host-dpu link (50 for "
		    "a network half as fast). Dynamic caching pays when its hit "
		    "rate h exceeds this ratio (h > B_net / B_intra); adaptive "
		    "turns it off below.",
	},
	[CFG_DPU_HIT_WINDOW] = {
		.section = "dpu", .name = "hit_window", .type = CFG_T_INT,
		.min = 16, .max = 1 << 20, .def = "1024", .reloadable = true,
		.roles = DPU,
		.help = "Reads over which the adaptive dynamic cache measures its "
		    "hit rate before deciding.",
	},
	[CFG_DPU_PROBE_INTERVAL] = {
		.section = "dpu", .name = "probe_interval",
		.type = CFG_T_DURATION, .min = 100, .max = 3600000, .def = "10s",
		.reloadable = true, .roles = DPU,
		.help = "How long the adaptive dynamic cache stays off before it "
		    "is tried again for a window.",
	},
	[CFG_MEMORY_PEER_MAX_BYTES] = {
		.section = "memory", .name = "peer_max_bytes", .type = CFG_T_SIZE,
		.min = 0, .max = (int64_t)1 << 50, .def = "0",
		.reloadable = true, .roles = MEM,
		.help = "Most bytes of regions one peer may have created here "
		    "at once, persistent ones included; a request beyond it is "
		    "refused with EDQUOT. A peer is its address when peers "
		    "prove a secret (the node name it gives when there is "
		    "none). Regions a dpu creates for its hosts count as the "
		    "dpu's; the users of one host are held apart by that "
		    "host's uid_max_bytes. 0: no limit but capacity.",
	},
	[CFG_MEMORY_PEER_MAX_REGIONS] = {
		.section = "memory", .name = "peer_max_regions", .type = CFG_T_INT,
		.min = 0, .max = 1 << 20, .def = "16384", .reloadable = true,
		.roles = MEM,
		.help = "Most regions one peer may have created here at once; "
		    "beyond it EDQUOT. The default keeps one peer well below "
		    "the mappings a process may have (vm.max_map_count, 65530 "
		    "by default), which every other peer's regions need too. "
		    "0: no limit.",
	},
	[CFG_MEMORY_MAX_UNAUTHENTICATED] = {
		.section = "memory", .name = "max_unauthenticated",
		.type = CFG_T_INT, .min = 1, .max = 4096, .def = "128",
		.reloadable = true, .roles = MEM,
		.help = "Most connections at once that have not yet proved the "
		    "secret (of 4096 in all). One more closes the oldest of "
		    "them, so that silent or slow strangers cannot keep real "
		    "peers out.",
	},
	[CFG_MEMORY_HELLO_TIMEOUT] = {
		.section = "memory", .name = "hello_timeout",
		.type = CFG_T_DURATION, .min = 100, .max = 600000, .def = "5s",
		.roles = MEM,
		.help = "Deadline of the whole handshake of a new connection "
		    "(hello and proof of the secret), from its accept; at most "
		    "op_timeout. A connection that has not proved the secret "
		    "by then is closed.",
	},
	[CFG_HOST_SESSION_SOCKET] = {
		.section = "host", .name = "session_socket", .type = CFG_T_PATH,
		.def = FAMD_DEFAULT_SESSION, .roles = HOST,
		.help = "Unix socket where programs (libfam and libfamshim) ask "
		    "for fabric-attached memory.",
	},
	[CFG_HOST_SESSION_GROUP] = {
		.section = "host", .name = "session_group", .type = CFG_T_STRING,
		.min = 0, .max = 63, .def = "famd", .roles = HOST,
		.help = "Group given the session socket: with session_mode 0660, "
		    "its members (and famd's own user) may use fabric-attached "
		    "memory. Empty means famd's own group. A group named here "
		    "that does not exist is a configuration error; when the key "
		    "is not set and this machine has no group famd (the Debian "
		    "package creates it), the socket keeps famd's own group and, "
		    "unless session_mode is set, gets mode 0600 (famd's own user "
		    "only), and famd logs how to open it.",
	},
	[CFG_HOST_SESSION_MODE] = {
		.section = "host", .name = "session_mode", .type = CFG_T_ENUM,
		.choices = session_modes, .def = "0660", .roles = HOST,
		.help = "Mode of the session socket: 0600 (only famd's own user), "
		    "0660 (also the members of session_group) or 0666 (every "
		    "local user; each is still held to the uid_max_* quotas).",
	},
	[CFG_HOST_MEMORY_NODES] = {
		.section = "host", .name = "memory_nodes", .type = CFG_T_ADDRLIST,
		.max = 16, .def = NULL, .example = "127.0.0.1:7700",
		.roles = HOST,
		.help = "Memory nodes this host uses, as a comma-separated list of "
		    "host:port. With more than one, each region is striped across "
		    "all of them chunk by chunk. Required.",
	},
	[CFG_HOST_BUFFER_SIZE] = {
		.section = "host", .name = "buffer_size", .type = CFG_T_SIZE,
		.min = 1 << 20, .max = (int64_t)1 << 40, .def = "1G",
		.roles = HOST,
		.help = "Local memory holding the chunks programs use, shared by "
		    "all regions of all programs on this node.",
	},
	[CFG_HOST_CHUNK_SIZE] = {
		.section = "host", .name = "chunk_size", .type = CFG_T_SIZE,
		.min = 4096, .max = 2 << 20, .pow2 = true, .def = "64K",
		.roles = HOST,
		.help = "Unit of data movement between this host and the memory "
		    "nodes: a power of two from 4K to 2M.",
	},
	[CFG_HOST_ARENA_SIZE] = {
		.section = "host", .name = "arena_size", .type = CFG_T_SIZE,
		.min = 1 << 30, .max = (int64_t)1 << 46, .pow2 = true,
		.def = "64G", .roles = HOST,
		.help = "Address space reserved at once in a program for its "
		    "regions (one memfd and one registered range each). A region "
		    "larger than this gets an arena of its own.",
	},
	[CFG_HOST_HIGH_WATERMARK] = {
		.section = "host", .name = "high_watermark", .type = CFG_T_INT,
		.min = 2, .max = 100, .def = "95", .reloadable = true,
		.roles = HOST,
		.help = "Percent of the buffer in use above which chunks are "
		    "evicted in the background, ahead of the faults that need "
		    "room.",
	},
	[CFG_HOST_LOW_WATERMARK] = {
		.section = "host", .name = "low_watermark", .type = CFG_T_INT,
		.min = 1, .max = 99, .def = "85", .reloadable = true,
		.roles = HOST,
		.help = "Percent of the buffer in use at which background "
		    "eviction stops. Must be below high_watermark.",
	},
	[CFG_HOST_PREFETCH] = {
		.section = "host", .name = "prefetch", .type = CFG_T_INT,
		.min = 0, .max = 256, .def = "32", .reloadable = true,
		.roles = HOST,
		.help = "Most chunks read ahead of a sequential run of faults; "
		    "the window grows from 2 while the run continues. Past 16, "
		    "four runs' whole windows take at most a quarter of the "
		    "buffer. 0 turns prefetching off.",
	},
	[CFG_HOST_LOOP_KEEP] = {
		.section = "host", .name = "loop_keep", .type = CFG_T_INT,
		.min = 0, .max = 50, .def = "0", .reloadable = true,
		.roles = HOST,
		.help = "Percent of the buffer the clock may keep for loops: "
		    "regions that sequential runs read again and again, each "
		    "sweep longer than the buffer (iterative solvers, graph "
		    "analytics). Their chunks are kept while they loop, so each "
		    "sweep reads only the rest, balanced against chunks used at "
		    "random: one read again soon after it left is hot, passed "
		    "over by the clock for many laps, up to a third of the "
		    "buffer. The room of the read-ahead windows, the "
		    "write-backs and the hot chunks is left free. 0 turns it "
		    "off: programs that sweep some arrays and read others at "
		    "random (diff, a compiler, a sort) moved a third more with "
		    "it. famctl status shows buffer.loop_kept_bytes and "
		    "buffer.hot_bytes.",
	},
	[CFG_HOST_MAX_FETCHES] = {
		.section = "host", .name = "max_fetches", .type = CFG_T_INT,
		.min = 1, .max = 4096, .def = "128", .reloadable = true,
		.roles = HOST,
		.help = "Most chunk reads in flight to the memory nodes at once.",
	},
	[CFG_HOST_FAULT_THREADS] = {
		.section = "host", .name = "fault_threads", .type = CFG_T_INT,
		.min = 1, .max = 8, .auto_ok = true, .def = "auto",
		.roles = HOST,
		.help = "Cores that serve page faults: the control loop and "
		    "fault_threads - 1 threads, each with two connections of "
		    "its own to each memory node (tcp; faults and read-ahead), "
		    "which receive the chunks read directly from the memory "
		    "nodes; everything else stays on the control loop. auto: "
		    "the online CPUs less one, at most 8. 1: no thread. Over "
		    "verbs, through the dpu, or for regions of several copies, "
		    "reads stay on the control loop.",
	},
	[CFG_HOST_EVICTION] = {
		.section = "host", .name = "eviction", .type = CFG_T_ENUM,
		.choices = evictions, .def = "clock", .reloadable = true,
		.roles = HOST,
		.help = "Which chunk leaves the buffer first: clock (second "
		    "chance for chunks faulted or written since the hand last "
		    "passed) or fifo (oldest first).",
	},
	[CFG_HOST_NUMA_NODE] = {
		.section = "host", .name = "numa_node", .type = CFG_T_INT,
		.min = -1, .max = 1023, .auto_ok = true, .def = "auto",
		.roles = HOST,
		.help = "NUMA node for the buffer and staging memory: auto (the "
		    "node of the NIC that reaches the memory nodes) or a node "
		    "number.",
	},
	[CFG_HOST_DPU] = {
		.section = "host", .name = "dpu", .type = CFG_T_ADDR,
		.def = "", .empty_ok = true, .roles = HOST,
		.help = "The dpu famd (host:port) this host can send its "
		    "requests through instead of going to the memory nodes "
		    "itself. Empty: none.",
	},
	[CFG_HOST_PATH] = {
		.section = "host", .name = "path", .type = CFG_T_ENUM,
		.choices = paths, .def = "direct", .reloadable = true,
		.roles = HOST,
		.help = "Where chunk reads and write-backs go: direct (to the "
		    "memory nodes) or dpu (through the dpu, which needs [host] "
		    "dpu). famctl call path.set changes it at run time; each "
		    "region moves over once its requests on the old path are "
		    "done, so no write is lost or overtaken.",
	},
	[CFG_HOST_FALLBACK] = {
		.section = "host", .name = "fallback", .type = CFG_T_ENUM,
		.choices = fallbacks, .def = "direct", .reloadable = true,
		.roles = HOST,
		.help = "With path = dpu, what to do while the dpu is "
		    "unreachable: direct (go to the memory nodes, and back "
		    "to the dpu once it returns) or none (requests wait for "
		    "the dpu, up to op_timeout).",
	},
	[CFG_HOST_REDUNDANCY] = {
		.section = "host", .name = "redundancy", .type = CFG_T_STRING,
		.min = 0, .max = 31, .def = "none", .roles = HOST,
		.help = "How many memory nodes hold each chunk of a region: none "
		    "(one, as striped; a memory node lost is its chunks lost: "
		    "SIGBUS where they are touched, never wrong data), "
		    "replicate:N (N from 2 to the number of memory_nodes: each "
		    "chunk on N distinct memory nodes, its stripe's node and the "
		    "next N - 1) or ec:K+M (K and M from 1 to 16, K + M at most "
		    "the number of memory_nodes: each chunk split into K data "
		    "fragments and M Reed-Solomon parity fragments, ISA-L, each "
		    "a K-th of the chunk, on K + M distinct memory nodes). "
		    "replicate:N survives N - 1 memory nodes lost at once, ec:K+M "
		    "survives M (faults are served from a remaining copy, or "
		    "decoded from any K fragments, each checked against its "
		    "CRC; a node that comes back, or restarts empty, is rebuilt "
		    "from the others at rebuild_rate). replicate:N costs N times "
		    "the write-back bytes on the wire and N times the "
		    "memory-node capacity, ec:K+M (K + M) / K times both (1.5 "
		    "for ec:2+1) and K reads of a K-th of a chunk per fault. A "
		    "program may ask for another mode with the environment "
		    "variable FAM_REDUNDANCY (the same syntax), or block by "
		    "block with fam_alloc_redundant. Files mapped "
		    "with fam_map and the copies a fork makes are not "
		    "replicated.",
	},
	[CFG_HOST_REBUILD_RATE] = {
		.section = "host", .name = "rebuild_rate", .type = CFG_T_SIZE,
		.min = 4096, .max = (int64_t)1 << 40, .def = "64M",
		.reloadable = true, .roles = HOST,
		.help = "Bytes per second at most that the host copies in the "
		    "background to bring a replica (or an erasure-coded "
		    "fragment) up to date again (a memory node that came back "
		    "or restarted empty). famctl status "
		    "shows the redundancy state and the rebuild's progress.",
	},
	[CFG_HOST_WRITE_QUORUM] = {
		.section = "host", .name = "write_quorum", .type = CFG_T_STRING,
		.min = 0, .max = 15, .def = "all", .roles = HOST,
		.help = "How many copies of a chunk (replicate:N), or fragments "
		    "(ec:K+M), must have its write-back before the chunk is "
		    "clean and its frame reused: all (every copy the write-back "
		    "went to) or N, from 1 (ec:K+M: from K) to the copies. With "
		    "N below all, the writes to the other copies go on in the "
		    "background and each such copy is stale (never read) until "
		    "its write is acknowledged; a write that fails leaves it "
		    "stale and the rebuild copies it later. A slow or stalled "
		    "memory node then holds no write-back up, but a chunk is "
		    "only on N nodes until the others have it: with "
		    "write_quorum = 1 and replicate:2, the node that "
		    "acknowledged lost right after loses the chunk (its faults "
		    "get SIGBUS). It costs a copy of each chunk written back, "
		    "held in famd's memory until every copy has it (at most "
		    "buffer_size bytes of such copies, 64 MiB at the least; "
		    "past that a write-back waits for every copy). A program's "
		    "own redundancy (FAM_REDUNDANCY, fam_alloc_redundant) takes "
		    "N at most its copies and, ec:K+M, K at the least.",
	},
	[CFG_HOST_HEDGE_AFTER] = {
		.section = "host", .name = "hedge_after", .type = CFG_T_DURATION,
		.min = 0, .max = 3600000, .auto_ok = true, .def = "auto",
		.reloadable = true, .roles = HOST,
		.help = "With redundancy = replicate:N, a chunk read not answered "
		    "after this long is sent to another up-to-date copy too "
		    "(a hedged read): the first whole answer whose CRC checks "
		    "is installed, the other dropped when it comes, so that a "
		    "memory node that stalls delays a fault by this much, not "
		    "op_timeout; with ec:K+M one more fragment is read, and "
		    "the first K good ones decode the chunk. auto: four times "
		    "the time the node is expected to take (its moving average "
		    "per chunk read, times the reads it has in flight), at "
		    "least 2ms and at most half op_timeout. 0: never hedged. "
		    "Each read goes to the copy expected to answer first; "
		    "famctl status shows each memory node's estimate and the "
		    "hedged reads.",
	},
	[CFG_HOST_REPLACE_AFTER] = {
		.section = "host", .name = "replace_after",
		.type = CFG_T_DURATION, .min = 0, .max = 86400000, .def = "60s",
		.reloadable = true, .roles = HOST,
		.help = "How long a memory node may stay unreachable before the "
		    "host moves the copies (replicate:N) and fragments (ec:K+M) "
		    "it held to other memory nodes: each to one that is up and "
		    "holds no copy or fragment of the same chunks, where its "
		    "region is made and filled from the others at rebuild_rate. "
		    "The node, when it comes back, holds nothing of them any "
		    "more (their regions there are freed). Where no memory node "
		    "qualifies (replicate:N over N memory nodes, ec:K+M over "
		    "K + M) nothing moves and the region stays degraded until "
		    "the node returns. 0: never move. The default is longer "
		    "than the memory nodes' session_grace (30s by default): a "
		    "node back sooner keeps its copies and catches up only on "
		    "what it missed, one back later has lost them anyway.",
	},
	[CFG_HOST_UID_MAX_BYTES] = {
		.section = "host", .name = "uid_max_bytes", .type = CFG_T_SIZE,
		.min = 0, .max = (int64_t)1 << 50, .def = "0",
		.reloadable = true, .roles = HOST,
		.help = "Most bytes of fabric-attached memory the programs of one "
		    "user (uid, root included) may hold at once on this host; an "
		    "allocation beyond it is refused with EDQUOT (the shim then "
		    "uses libc memory). 0: no limit.",
	},
	[CFG_HOST_UID_MAX_REGIONS] = {
		.section = "host", .name = "uid_max_regions", .type = CFG_T_INT,
		.min = 0, .max = 1 << 24, .def = "0", .reloadable = true,
		.roles = HOST,
		.help = "Most regions (allocations) the programs of one user may "
		    "hold at once on this host; beyond it EDQUOT. 0: no limit.",
	},
	[CFG_HOST_UID_MAX_ARENAS] = {
		.section = "host", .name = "uid_max_arenas", .type = CFG_T_INT,
		.min = 1, .max = 1 << 16, .def = "512", .reloadable = true,
		.roles = HOST,
		.help = "Most arenas (memfds of arena_size bytes, or of one large "
		    "region, each as much address space in famd) the programs of "
		    "one user may hold at once on this host; an allocation that "
		    "needs one more is refused with EDQUOT. A session holds at "
		    "most one arena it has not mapped yet (EBUSY). A forked "
		    "child holds a copy of each of its parent's arenas, so a "
		    "pool of N workers needs N times the parent's; at the "
		    "default arena_size, 512 arenas are 32 TiB of famd's 128 TiB "
		    "of address space.",
	},
	[CFG_HOST_UID_MAX_SESSIONS] = {
		.section = "host", .name = "uid_max_sessions", .type = CFG_T_INT,
		.min = 1, .max = 1 << 16, .def = "512", .reloadable = true,
		.roles = HOST,
		.help = "Most sessions (programs connected to session_socket) of "
		    "one user at once; a connection beyond it is closed at once "
		    "and counted (sessions_refused). Every process using "
		    "fabric-attached memory has one, a forked child too: a "
		    "child refused one cannot read what it inherited (SIGBUS).",
	},
	[CFG_HOST_MAX_SESSIONS] = {
		.section = "host", .name = "max_sessions", .type = CFG_T_INT,
		.min = 1, .max = 1 << 16, .def = "4096", .reloadable = true,
		.roles = HOST,
		.help = "Most sessions of all users at once; a connection beyond "
		    "it is closed at once and counted (sessions_refused). Each "
		    "holds four or more of famd's descriptors: famd raises its "
		    "own limit (RLIMIT_NOFILE) to the hard one at start.",
	},
	[CFG_HOST_UFFD_DEVICE_GROUP] = {
		.section = "host", .name = "uffd_device_group",
		.type = CFG_T_STRING, .min = 0, .max = 63, .def = "",
		.reloadable = true, .roles = HOST,
		.help = "Group whose members are handed an open /dev/userfaultfd "
		    "at the start of a session, so that their programs' "
		    "userfaultfds also catch the kernel's own accesses to "
		    "fabric-attached memory (read(2) into a page not yet "
		    "resident). A program outside it creates a user-mode-only "
		    "userfaultfd, and such a system call fails with EFAULT "
		    "instead (famd(8), SECURITY CONSIDERATIONS). Whoever holds "
		    "the device can create userfaultfds that catch kernel "
		    "faults anywhere in its own memory. Empty: nobody.",
	},
	[CFG_HOST_UFFD_POISON] = {
		.section = "host", .name = "uffd_poison", .type = CFG_T_BOOL,
		.def = "on", .roles = HOST,
		.help = "A fault famd cannot serve poisons the page "
		    "(UFFDIO_POISON, Linux 6.6 and later): the kernel raises "
		    "SIGBUS there itself, at every touch. Off, or on an older "
		    "kernel: famd sends the thread SIGBUS, and ends the session "
		    "of a thread that faults 16 times in a row on such a page (a "
		    "SIGBUS handler that returns).",
	},
	[CFG_HOST_INSTALL] = {
		.section = "host", .name = "install", .type = CFG_T_ENUM,
		.choices = installs, .def = "copy", .roles = HOST,
		.help = "How a chunk read from a memory node reaches the "
		    "program: copy (received into a staging buffer and copied "
		    "in with UFFDIO_COPY) or continue (received straight into "
		    "the arena's memfd through famd's own mapping and mapped "
		    "with UFFDIO_CONTINUE: each byte copied once, but famd "
		    "maps and unmaps every page too, which costs more CPU than "
		    "the copy on a paravirtualised MMU; needs Linux 6.4 and "
		    "transport = tcp, else famd copies).",
	},
	[CFG_HOST_FETCH] = {
		.section = "host", .name = "fetch", .type = CFG_T_ENUM,
		.choices = fetches, .def = "chunk", .roles = HOST,
		.help = "How much a fault reads: chunk (the whole chunk, and "
		    "read-ahead on sequential runs) or adaptive (each region's "
		    "chunks are measured as they are evicted: where programs "
		    "touch few of their pages, a fault reads only the grains "
		    "around it, a 64th of a chunk or 4K at the least, and the "
		    "buffer counts only those, so a region used at random or "
		    "with a stride holds many more of its pages; dense and "
		    "sequential regions keep whole chunks and read-ahead; "
		    "famctl regions shows each region's density and fetch "
		    "size). Replicated regions, regions shared with a fork's "
		    "copies and install = continue keep whole chunks. A famd "
		    "started with chunk over the restart state of one that ran "
		    "adaptive keeps adaptive until it stops (its programs' "
		    "partial chunks may hold writes); chunk applies from a "
		    "start with no session to take back.",
	},
	[CFG_VERBS_QPS_PER_PEER] = {
		.section = "verbs", .name = "qps_per_peer", .type = CFG_T_INT,
		.min = 1, .max = 16, .def = "1", .roles = HOST | DPU,
		.help = "RC queue pairs this node opens to each peer with "
		    "transport = verbs; requests and one-sided reads and writes "
		    "are spread over them. The passive side follows the active "
		    "side's choice.",
	},
	[CFG_VERBS_INJECT_ERROR_PPM] = {
		.section = "verbs", .name = "inject_error_ppm",
		.type = CFG_T_INT, .min = 0, .max = 1000000, .def = "0",
		.roles = ALL,
		.help = "A test aid: this many work completions in a million are "
		    "turned into errors before famd sees them, to exercise the "
		    "paths that close a connection on a bad completion. Keep it "
		    "0 in production.",
	},
};
