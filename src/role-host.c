/*
 * role-host.c - the host role.
 */
#include "config.h"

#include "famd.h"

/* Starts the host role. */
static int
role_host_start(struct famd *d)
{
	return 0;
}

/* Applies reloadable keys of the host role. */
static void
role_host_reload(struct famd *d, const struct cfg *old)
{
}

/* Adds the host role's state and counters to a status object. */
static void
role_host_status(struct famd *d, json_t *st)
{
	json_object_set_new(st, "counters", json_object());
}

/* Zeroes the host role's counters. */
static void
role_host_stats_reset(struct famd *d)
{
}

/* Stops the host role. */
static void
role_host_stop(struct famd *d)
{
}

const struct role_ops role_host_ops = {
	.name = "host",
	.start = role_host_start,
	.reload = role_host_reload,
	.status = role_host_status,
	.stats_reset = role_host_stats_reset,
	.stop = role_host_stop,
};
