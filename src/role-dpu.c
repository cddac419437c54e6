/*
 * role-dpu.c - the dpu role.
 */
#include "config.h"

#include "famd.h"

/* Starts the dpu role. */
static int
role_dpu_start(struct famd *d)
{
	return 0;
}

/* Applies reloadable keys of the dpu role. */
static void
role_dpu_reload(struct famd *d, const struct cfg *old)
{
}

/* Adds the dpu role's state and counters to a status object. */
static void
role_dpu_status(struct famd *d, json_t *st)
{
	json_object_set_new(st, "counters", json_object());
}

/* Zeroes the dpu role's counters. */
static void
role_dpu_stats_reset(struct famd *d)
{
}

/* Stops the dpu role. */
static void
role_dpu_stop(struct famd *d)
{
}

const struct role_ops role_dpu_ops = {
	.name = "dpu",
	.start = role_dpu_start,
	.reload = role_dpu_reload,
	.status = role_dpu_status,
	.stats_reset = role_dpu_stats_reset,
	.stop = role_dpu_stop,
};
