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
};
