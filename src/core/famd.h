/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famd.h - what every role is built on: the configuration, the admin
 * socket's JSON-RPC layer, sd_notify, the role interface (role_ops).
 *
 * Lock order (whole daemon): the control loop owns configuration, the admin
 * socket and the role's control state; data-path threads take only their own
 * locks and publish counters with relaxed atomics, so no lock is ever held
 * across a call into another module.
 */
#ifndef FAMD_H
#define FAMD_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <syslog.h>
#include <sys/types.h>
#include <time.h>

#include <jansson.h>

#include "base/base.h"
#include "wire/proto.h"
#include "core/cpu-latency.h"

struct bufferevent;
struct event_base;

/* ---- cfg.c, cfg-table.c ------------------------------------------------- */

enum famd_role {
	ROLE_HOST,
	ROLE_DPU,
	ROLE_MEMORY,
	ROLE_COUNT,
};

#define CFG_ROLE_BIT(r) (1u << (r))
#define CFG_ROLES_ALL   ((1u << ROLE_COUNT) - 1)

enum cfg_type {
	CFG_T_BOOL,     /* yes|no|true|false|on|off|1|0 */
	CFG_T_INT,      /* decimal integer within [min, max] */
	CFG_T_SIZE,     /* bytes, with an optional K/M/G/T suffix (powers of 2) */
	CFG_T_DURATION, /* milliseconds; suffix ms, s, m or h (default s) */
	CFG_T_STRING,   /* free text */
	CFG_T_PATH,     /* an absolute path */
	CFG_T_ENUM,     /* one of choices[]; stored as its index */
	CFG_T_ADDR,     /* host:port */
	CFG_T_ADDRLIST, /* comma-separated host:port list */
};

struct cfg_key_def {
	const char *section;
	const char *name;
	enum cfg_type type;
	int64_t min; /* numeric types: smallest value, in base units */
	int64_t max; /* numeric types: largest; ADDRLIST: most entries */
	const char *const *choices; /* CFG_T_ENUM: NULL-terminated */
	const char *def;     /* default as text, NULL when required */
	bool reloadable;     /* SIGHUP applies it without a restart */
	unsigned roles;      /* roles that read it (CFG_ROLE_BIT mask) */
	const char *example; /* value set in the shipped example, or NULL */
	bool auto_ok;        /* CFG_T_INT, CFG_T_DURATION: "auto" is accepted,
	                      * stored as -1 */
	bool off_ok;         /* CFG_T_INT: "off" is accepted, stored as -1 */
	bool pow2;           /* CFG_T_SIZE: must be a power of two */
	bool empty_ok;       /* PATH, ADDR, ADDRLIST: empty means "none" */
	bool any_port;       /* CFG_T_ADDR: port 0 means any free port */
	const char *help;    /* one or more sentences, no trailing newline */
};

/* Every key famd knows; the order is the order of the examples and man page. */
enum cfg_key {
	CFG_ROLE,
	CFG_NODE_NAME,
	CFG_ADMIN_SOCKET,
	CFG_ADMIN_GROUP,
	CFG_ADMIN_MAX_CLIENTS,
	CFG_ADMIN_IDLE_TIMEOUT,
	CFG_METRICS_LISTEN,
	CFG_LOG_LEVEL,
	CFG_TRANSPORT,
	CFG_SECRET_FILE,
	CFG_TLS,
	CFG_TLS_CERT,
	CFG_TLS_KEY,
	CFG_TLS_CA,
	CFG_OP_TIMEOUT,
	CFG_CPU_LATENCY,
	CFG_MEMORY_LISTEN,
	CFG_MEMORY_CAPACITY,
	CFG_MEMORY_PRELOAD_DIR,
	CFG_MEMORY_SESSION_GRACE,
	CFG_MEMORY_PEER_MAX_BYTES,
	CFG_MEMORY_PEER_MAX_REGIONS,
	CFG_MEMORY_MAX_UNAUTHENTICATED,
	CFG_MEMORY_HELLO_TIMEOUT,
	CFG_MEMORY_PEER_SECRETS,
	CFG_DPU_LISTEN,
	CFG_DPU_MEMORY_NODES,
	CFG_DPU_SESSION_GRACE,
	CFG_DPU_AGGREGATE,
	CFG_DPU_BATCH_LIMIT,
	CFG_DPU_ASYNC,
	CFG_DPU_STATIC_REGIONS,
	CFG_DPU_STATIC_SIZE,
	CFG_DPU_DYNAMIC_CACHE,
	CFG_DPU_CACHE_SIZE,
	CFG_DPU_CACHE_ENTRY_SIZE,
	CFG_DPU_PREFETCH_DEPTH,
	CFG_DPU_PREFETCH_WORKERS,
	CFG_DPU_BW_RATIO,
	CFG_DPU_HIT_WINDOW,
	CFG_DPU_PROBE_INTERVAL,
	CFG_HOST_SESSION_SOCKET,
	CFG_HOST_SESSION_GROUP,
	CFG_HOST_SESSION_MODE,
	CFG_HOST_MEMORY_NODES,
	CFG_HOST_BUFFER_SIZE,
	CFG_HOST_CHUNK_SIZE,
	CFG_HOST_ARENA_SIZE,
	CFG_HOST_HIGH_WATERMARK,
	CFG_HOST_LOW_WATERMARK,
	CFG_HOST_PREFETCH,
	CFG_HOST_LOOP_KEEP,
	CFG_HOST_MAX_FETCHES,
	CFG_HOST_FAULT_THREADS,
	CFG_HOST_EVICTION,
	CFG_HOST_NUMA_NODE,
	CFG_HOST_DPU,
	CFG_HOST_PATH,
	CFG_HOST_FALLBACK,
	CFG_HOST_REDUNDANCY,
	CFG_HOST_REBUILD_RATE,
	CFG_HOST_WRITE_QUORUM,
	CFG_HOST_HEDGE_AFTER,
	CFG_HOST_REPLACE_AFTER,
	CFG_HOST_UID_MAX_BYTES,
	CFG_HOST_UID_MAX_REGIONS,
	CFG_HOST_UID_MAX_ARENAS,
	CFG_HOST_UID_MAX_SESSIONS,
	CFG_HOST_MAX_SESSIONS,
	CFG_HOST_UFFD_DEVICE_GROUP,
	CFG_HOST_UFFD_POISON,
	CFG_HOST_INSTALL,
	CFG_HOST_FETCH,
	CFG_VERBS_QPS_PER_PEER,
	CFG_VERBS_INJECT_ERROR_PPM,
	CFG_NKEYS,
};

extern const struct cfg_key_def cfg_keys[CFG_NKEYS];
extern const char *const cfg_role_names[];

struct cfg_value {
	bool set;      /* given in the file or on the command line */
	unsigned line; /* line of the file that set it, 0 if not from a file */
	int64_t i;     /* BOOL, INT, SIZE, DURATION, ENUM */
	char *s;       /* STRING, PATH, ADDR, ADDRLIST (always the text) */
};

struct cfg {
	char *path;
	struct cfg_value v[CFG_NKEYS];
};

/* Collected configuration errors, each "file:line: message". */
struct cfg_errors {
	char **msg;
	size_t count;
};

enum cfg_transport {
	CFG_TRANSPORT_TCP,
	CFG_TRANSPORT_VERBS,
};

enum cfg_eviction {
	CFG_EVICTION_CLOCK,
	CFG_EVICTION_FIFO,
};

enum cfg_install {
	CFG_INSTALL_COPY,
	CFG_INSTALL_CONTINUE,
};

enum cfg_fetch {
	CFG_FETCH_CHUNK,
	CFG_FETCH_ADAPTIVE,
};

enum cfg_path {
	CFG_PATH_DIRECT,
	CFG_PATH_DPU,
};

enum cfg_fallback {
	CFG_FALLBACK_NONE,
	CFG_FALLBACK_DIRECT,
};

enum cfg_session_mode {
	CFG_SESSION_MODE_0600,
	CFG_SESSION_MODE_0660,
	CFG_SESSION_MODE_0666,
};

enum cfg_dynamic {
	CFG_DYNAMIC_OFF,
	CFG_DYNAMIC_ON,
	CFG_DYNAMIC_ADAPTIVE,
};

int cfg_load(struct cfg *cfg, const char *path, char *const *overrides,
    size_t noverrides, struct cfg_errors *errs);
int cfg_load_file(struct cfg *cfg, FILE *f, const char *path,
    char *const *overrides, size_t noverrides, struct cfg_errors *errs);
void cfg_free(struct cfg *cfg);
void cfg_errors_free(struct cfg_errors *errs);
void cfg_error(struct cfg_errors *errs, const char *fmt, ...)
    printflike(2, 3);
int64_t cfg_int(const struct cfg *cfg, enum cfg_key key);
const char *cfg_str(const struct cfg *cfg, enum cfg_key key);
int cfg_find(const char *section, const char *name);
int cfg_parse_value(enum cfg_key key, const char *text, struct cfg_value *out,
    char **cause);
char *cfg_format_value(enum cfg_key key, const struct cfg_value *v);
json_t *cfg_to_json(const struct cfg *cfg);
bool cfg_equal(enum cfg_key key, const struct cfg_value *a,
    const struct cfg_value *b);
void cfg_write_example(FILE *f, enum famd_role role);
void cfg_write_man_keys(FILE *f);
int cfg_redundancy_parse(const char *text, unsigned *copies);
int cfg_redundancy_parse_ec(const char *text, unsigned *k, unsigned *m);
int cfg_write_quorum_parse(const char *text, unsigned *n);
void cfg_redundancy_check(struct cfg *cfg, const char *path,
    struct cfg_errors *errs);

/* ---- notify.c ----------------------------------------------------------- */

int notify_send(const char *state);
void notify_ready(void);
void notify_reloading(void);
void notify_stopping(void);
void notify_status(const char *fmt, ...) printflike(1, 2);

/* ---- famd.c ------------------------------------------------------------- */

struct role_ops;

/* The daemon: one per process, owned by the control loop. */
struct famd {
	struct event_base *base;
	struct cfg *cfg;
	const char *cfg_path;
	char *const *overrides;
	size_t noverrides;
	enum famd_role role;
	const struct role_ops *ops;
	void *role_state;
	time_t started;
	struct timespec started_mono;
	uint64_t reloads;
	uint64_t reload_failures;
	struct cpu_latency qos;   /* [famd] cpu_latency */
};

extern struct famd *famd;

/* What each role implements; the control loop calls these in order. */
struct role_ops {
	const char *name;
	int (*start)(struct famd *d);
	void (*reload)(struct famd *d, const struct cfg *old);
	void (*status)(struct famd *d, json_t *status);
	void (*stats_reset)(struct famd *d);
	void (*stop)(struct famd *d);
};

extern const struct role_ops role_host_ops;
extern const struct role_ops role_dpu_ops;
extern const struct role_ops role_memory_ops;

int famd_reload(char **cause);
json_t *famd_status_json(void);

/* metrics.c */
char *metrics_text(const char *role, json_t *status);

/* metrics-http.c (src/daemon) */
int metrics_http_open(struct famd *d, char **cause);
void metrics_http_close(void);
const char *metrics_http_address(void);
double famd_uptime(void);
void famd_shutdown(const char *why);

/* ---- admin.c ------------------------------------------------------------ */

/* JSON-RPC 2.0 error codes: the standard ones and famd's own. */
#define ADMIN_ERR_PARSE          (-32700)
#define ADMIN_ERR_INVALID        (-32600)
#define ADMIN_ERR_NO_METHOD      (-32601)
#define ADMIN_ERR_PARAMS         (-32602)
#define ADMIN_ERR_INTERNAL       (-32603)
#define ADMIN_ERR_PERMISSION     (-32000)
#define ADMIN_ERR_TOO_LARGE      (-32001)
#define ADMIN_ERR_TOO_MANY       (-32002)
#define ADMIN_ERR_FAILED         (-32003)

#define ADMIN_MAX_REQUEST (64 * 1024)

/* Who sent a request, from SO_PEERCRED. */
struct admin_peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
};

struct admin_req {
	const struct admin_peer *peer;
	json_t *params;  /* always an object (empty when absent) */
	bool may_change; /* the peer may run changing commands */
	int err_code;    /* set by admin_fail() */
	char *err_msg;
};

enum admin_ptype {
	ADMIN_P_STRING,
	ADMIN_P_INT,
	ADMIN_P_BOOL,
	ADMIN_P_OBJECT,
	ADMIN_P_ANY,
};

struct admin_param {
	const char *name;
	enum admin_ptype type;
	bool required;
};

#define ADMIN_F_CHANGE 0x1 /* changes the daemon: root only */

/*
 * A command. The handler returns the result (a new reference) or NULL after
 * calling admin_fail().
 */
struct admin_cmd {
	const char *name;
	const char *help;
	const struct admin_param *params; /* terminated by a NULL name */
	unsigned flags;
	json_t *(*handler)(struct admin_req *req);
};

void admin_register(const struct admin_cmd *cmds, size_t n);
void admin_unregister_all(void);
const struct admin_cmd *admin_cmd_at(size_t i);
json_t *admin_fail(struct admin_req *req, int code, const char *fmt, ...)
    printflike(3, 4);
bool admin_require_change(struct admin_req *req);
char *admin_process(const char *line, size_t len, const struct admin_peer *peer,
    bool may_change);
char *admin_error_line(json_t *id, int code, const char *msg);
int admin_client_add(struct bufferevent *bev, const struct admin_peer *peer);
int admin_open(struct famd *d, char **cause);
int admin_lock(const char *socket_path, char **cause);
void admin_reconfigure(const struct cfg *cfg);
void admin_close(void);
unsigned admin_clients(void);
void admin_status(json_t *status);
void admin_stats_reset(void);

/* admin-cmds.c: the commands every role has. */
void admin_cmds_register(void);

/* ---- secret.c ----------------------------------------------------------- */

int secret_load(const char *path, char out[FAM_SECRET_MAX + 1], char **cause);
int secret_peer_line(char *line, const char **name, const char **file,
    const char **why);
int secret_peers_load(const char *path, struct fam_peer_key **out, size_t *n,
    char **cause);

#endif /* FAMD_H */
