/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admin-cmds.c - the admin commands every role answers.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/famd.h"

/* list-commands: every command with its parameters and whether it changes. */
static json_t *
cmd_list_commands(struct admin_req *req)
{
	json_t *list = json_array();
	const struct admin_cmd *c;

	for (size_t i = 0; (c = admin_cmd_at(i)) != NULL; i++) {
		json_t *params = json_array();

		for (const struct admin_param *p = c->params;
		    p != NULL && p->name != NULL; p++)
			json_array_append_new(params, json_pack("{s:s,s:b}",
			    "name", p->name, "required", p->required));
		json_array_append_new(list, json_pack("{s:s,s:s,s:b,s:o}",
		    "name", c->name, "help", c->help, "changes",
		    (c->flags & ADMIN_F_CHANGE) != 0, "params", params));
	}
	return list;
}

/* version: famd's version and protocol. */
static json_t *
cmd_version(struct admin_req *req)
{
	return json_pack("{s:s,s:s}", "famd", PACKAGE_VERSION, "package",
	    PACKAGE_STRING);
}

/* The status: role, uptime, configuration file, peers, the role's state. */
json_t *
famd_status_json(void)
{
	json_t *st;
	char host[256] = "";
	const char *name = cfg_str(famd->cfg, CFG_NODE_NAME);

	if (*name == '\0') {
		gethostname(host, sizeof host - 1);
		name = host;
	}
	struct tm tm;
	char started[32];

	localtime_r(&famd->started, &tm);
	strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%S%z", &tm);
	st = json_pack("{s:s,s:s,s:s,s:i,s:f,s:s,s:s,s:I,s:I,s:s,s:[]}",
	    "role", famd->ops->name,
	    "version", PACKAGE_VERSION,
	    "node_name", name,
	    "pid", (int)getpid(),
	    "uptime", famd_uptime(),
	    "started", started,
	    "config_file", famd->cfg_path,
	    "reloads", (json_int_t)famd->reloads,
	    "reload_failures", (json_int_t)famd->reload_failures,
	    "log_level", log_level_name(log_get_level()),
	    "peers");
	json_object_set_new(st, "metrics_listen",
	    json_string(metrics_http_address()));
	json_object_set_new(st, "cpu_latency", cpu_latency_status(&famd->qos));
	admin_status(st);
	famd->ops->status(famd, st);
	return st;
}

/* status: role, uptime, configuration file, peers and the role's counters. */
static json_t *
cmd_status(struct admin_req *req)
{
	return famd_status_json();
}

/* metrics: the status as OpenMetrics text (famctl metrics prints it). */
static json_t *
cmd_metrics(struct admin_req *req)
{
	json_t *st = famd_status_json();
	char *text = metrics_text(famd->ops->name, st);
	json_t *r;

	json_decref(st);
	if (text == NULL)
		return admin_fail(req, ADMIN_ERR_INTERNAL, "out of memory");
	r = json_pack("{s:s}", "text", text);
	free(text);
	return r;
}

/* config.show: every key, its value and whether it is the default. */
static json_t *
cmd_config_show(struct admin_req *req)
{
	return json_pack("{s:s,s:o}", "file", famd->cfg_path, "keys",
	    cfg_to_json(famd->cfg));
}

/* config.reload: the same as SIGHUP, but the caller hears the outcome. */
static json_t *
cmd_config_reload(struct admin_req *req)
{
	char *cause = NULL;

	if (famd_reload(&cause) < 0) {
		admin_fail(req, ADMIN_ERR_FAILED, "%s", cause);
		free(cause);
		return NULL;
	}
	return json_pack("{s:s}", "file", famd->cfg_path);
}

/* log.level: shows the level, or sets it when given one (root only). */
static json_t *
cmd_log_level(struct admin_req *req)
{
	json_t *lv = json_object_get(req->params, "level");

	if (lv != NULL) {
		int level = log_level_parse(json_string_value(lv));

		if (!admin_require_change(req))
			return NULL;
		if (level < 0)
			return admin_fail(req, ADMIN_ERR_PARAMS, "log.level: "
			    "'%s' is not one of err, warning, notice, info, "
			    "debug", json_string_value(lv));
		log_set_level(level);
		log_notice("log level set to %s by uid %ld",
		    log_level_name(level), (long)req->peer->uid);
	}
	return json_pack("{s:s}", "level", log_level_name(log_get_level()));
}

/*
 * stats.reset: zeroes every counter of the admin socket and the role (a
 * debugging aid: counters a monitoring system scrapes go back to zero).
 */
static json_t *
cmd_stats_reset(struct admin_req *req)
{
	admin_stats_reset();
	famd->ops->stats_reset(famd);
	log_info("counters reset by uid %ld", (long)req->peer->uid);
	return json_object();
}

static const struct admin_param level_params[] = {
	{ "level", ADMIN_P_STRING, false },
	{ NULL, 0, false },
};

static const struct admin_cmd common_cmds[] = {
	{ "list-commands", "list the commands and their parameters", NULL, 0,
	    cmd_list_commands },
	{ "version", "show famd's version", NULL, 0, cmd_version },
	{ "status", "show role, uptime, peers and counters", NULL, 0,
	    cmd_status },
	{ "metrics", "the status as OpenMetrics text", NULL, 0,
	    cmd_metrics },
	{ "config.show", "show every configuration key and its value", NULL,
	    0, cmd_config_show },
	{ "config.reload", "reload the configuration file (as SIGHUP)", NULL,
	    ADMIN_F_CHANGE, cmd_config_reload },
	{ "log.level", "show the log level, or set it with {\"level\": ...}",
	    level_params, 0, cmd_log_level },
	{ "stats.reset", "zero the counters", NULL, ADMIN_F_CHANGE,
	    cmd_stats_reset },
};

/* Registers the commands every role has. */
void
admin_cmds_register(void)
{
	admin_register(common_cmds, nitems(common_cmds));
}
