/*
 * cfg-table.c - every configuration key famd knows, in one table. The parser,
 * `config.show`, the shipped example files and the key list of famd.conf(5)
 * are all produced from it, so they cannot drift apart.
 */
#include "config.h"

#include "famd.h"

const char *const cfg_role_names[] = { "host", "dpu", "memory", NULL };
static const char *const log_levels[] = { "err", "warning", "notice", "info",
	"debug", NULL };
static const char *const transports[] = { "tcp", "verbs", NULL };
static const char *const evictions[] = { "clock", "fifo", NULL };

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
		    "this long is closed.",
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
	[CFG_OP_TIMEOUT] = {
		.section = "famd", .name = "op_timeout", .type = CFG_T_DURATION,
		.min = 100, .max = 600000, .def = "10s", .roles = ALL,
		.help = "Deadline of every request to a peer. A peer that does not "
		    "answer in time is disconnected and its requests fail.",
	},
	[CFG_MEMORY_LISTEN] = {
		.section = "memory", .name = "listen", .type = CFG_T_ADDR,
		.def = "0.0.0.0:7700", .example = "127.0.0.1:7700", .roles = MEM,
		.any_port = true,
		.help = "Address and port where hosts and dpus connect. Port 0 "
		    "takes any free port; famctl status shows the one taken.",
	},
	[CFG_MEMORY_CAPACITY] = {
		.section = "memory", .name = "capacity", .type = CFG_T_SIZE,
		.min = 1 << 20, .max = (int64_t)1 << 50, .def = "1G",
		.roles = MEM,
		.help = "Most bytes of regions this node lends at once; a request "
		    "beyond it is refused with ENOSPC.",
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
	[CFG_MEMORY_PEER_MAX_BYTES] = {
		.section = "memory", .name = "peer_max_bytes", .type = CFG_T_SIZE,
		.min = 0, .max = (int64_t)1 << 50, .def = "0",
		.reloadable = true, .roles = MEM,
		.help = "Most bytes of regions one peer node (by node name) may "
		    "have created here at once, persistent ones included; a "
		    "request beyond it is refused with EDQUOT. 0: no limit but "
		    "capacity.",
	},
	[CFG_MEMORY_PEER_MAX_REGIONS] = {
		.section = "memory", .name = "peer_max_regions", .type = CFG_T_INT,
		.min = 0, .max = 1 << 20, .def = "0", .reloadable = true,
		.roles = MEM,
		.help = "Most regions one peer node may have created here at "
		    "once; beyond it EDQUOT. 0: no limit.",
	},
	[CFG_HOST_SESSION_SOCKET] = {
		.section = "host", .name = "session_socket", .type = CFG_T_PATH,
		.def = FAMD_DEFAULT_SESSION, .roles = HOST,
		.help = "Unix socket where programs (libfam and libfamshim) ask "
		    "for fabric-attached memory.",
	},
	[CFG_HOST_SESSION_GROUP] = {
		.section = "host", .name = "session_group", .type = CFG_T_STRING,
		.min = 0, .max = 63, .def = "", .roles = HOST,
		.help = "Group whose members may use fabric-attached memory (the "
		    "session socket gets mode 0660). Empty means every local user "
		    "(mode 0666).",
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
		.min = 0, .max = 256, .def = "16", .reloadable = true,
		.roles = HOST,
		.help = "Most chunks read ahead of a sequential run of faults; "
		    "the window grows from 2 while the run continues. 0 turns "
		    "prefetching off.",
	},
	[CFG_HOST_MAX_FETCHES] = {
		.section = "host", .name = "max_fetches", .type = CFG_T_INT,
		.min = 1, .max = 4096, .def = "128", .reloadable = true,
		.roles = HOST,
		.help = "Most chunk reads in flight to the memory nodes at once.",
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
