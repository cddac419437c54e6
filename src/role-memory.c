/*
 * role-memory.c - the memory role.
 */
#include "config.h"

#include "famd.h"

/* Starts the memory role. */
static int
role_memory_start(struct famd *d)
{
	return 0;
}

/* Applies reloadable keys of the memory role. */
static void
role_memory_reload(struct famd *d, const struct cfg *old)
{
}

/* Adds the memory role's state and counters to a status object. */
static void
role_memory_status(struct famd *d, json_t *st)
{
	json_object_set_new(st, "counters", json_object());
}

/* Zeroes the memory role's counters. */
static void
role_memory_stats_reset(struct famd *d)
{
}

/* Stops the memory role. */
static void
role_memory_stop(struct famd *d)
{
}

const struct role_ops role_memory_ops = {
	.name = "memory",
	.start = role_memory_start,
	.reload = role_memory_reload,
	.status = role_memory_status,
	.stats_reset = role_memory_stats_reset,
	.stop = role_memory_stop,
};
