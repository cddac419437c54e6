/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control.c - what the admin commands and the signals ask of the
 * running daemon: its uptime, a reload of the configuration, a stop.
 * famd.c starts the daemon; this file holds no start-up code, so anything
 * that drives the admin commands (tests, fuzzers) links it without main().
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "core/famd.h"

struct famd *famd;

/* Returns seconds since famd started. */
double
famd_uptime(void)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - famd->started_mono.tv_sec) +
	    (double)(now.tv_nsec - famd->started_mono.tv_nsec) / 1e9;
}

/* Stops the control loop; the role and the admin socket close after it. */
void
famd_shutdown(const char *why)
{
	log_notice("stopping: %s", why);
	notify_stopping();
	event_base_loopexit(famd->base, NULL);
}

/*
 * Reloads the configuration file. An invalid file keeps the running
 * configuration; keys that cannot change at run time keep their old value
 * and a warning says a restart is needed.
 */
int
famd_reload(char **cause)
{
	struct cfg_errors errs = { 0 };
	struct cfg *next = calloc(1, sizeof *next), old;

	if (next == NULL)
		abort();
	notify_reloading();
	log_notice("reloading %s", famd->cfg_path);
	if (cfg_load(next, famd->cfg_path, famd->overrides, famd->noverrides,
	    &errs) < 0) {
		size_t len = 0;

		for (size_t i = 0; i < errs.count; i++) {
			log_err("%s", errs.msg[i]);
			len += strlen(errs.msg[i]) + 2;
		}
		*cause = calloc(1, len + 64);
		if (*cause == NULL)
			abort();
		strcpy(*cause, "configuration not reloaded: ");
		for (size_t i = 0; i < errs.count; i++) {
			if (i > 0)
				strcat(*cause, "; ");
			strcat(*cause, errs.msg[i]);
		}
		log_err("configuration not reloaded; keeping the running one");
		cfg_errors_free(&errs);
		cfg_free(next);
		free(next);
		famd->reload_failures++;
		notify_ready();
		return -1;
	}
	for (int k = 0; k < CFG_NKEYS; k++) {
		if (cfg_keys[k].reloadable ||
		    cfg_equal(k, &next->v[k], &famd->cfg->v[k]))
			continue;
		log_warn("[%s] %s changed; it takes effect only when famd "
		    "restarts", cfg_keys[k].section, cfg_keys[k].name);
		free(next->v[k].s);
		next->v[k] = famd->cfg->v[k];
		next->v[k].s = famd->cfg->v[k].s != NULL ?
		    strdup(famd->cfg->v[k].s) : NULL;
	}
	old = *famd->cfg;
	*famd->cfg = *next;
	free(next);
	log_set_level((int)cfg_int(famd->cfg, CFG_LOG_LEVEL) + LOG_ERR);
	admin_reconfigure(famd->cfg);
	cpu_latency_set(&famd->qos, cfg_int(famd->cfg, CFG_CPU_LATENCY));
	famd->ops->reload(famd, &old);
	cfg_free(&old);
	famd->reloads++;
	log_notice("configuration reloaded");
	notify_ready();
	return 0;
}
