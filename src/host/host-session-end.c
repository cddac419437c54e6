/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-session-end.c - how a session ends: released (its regions freed
 * everywhere, its descriptors closed), or orphaned first. A program that
 * closes every descriptor it did not open (closefrom(3) in a child between
 * fork and exec, a daemon detaching) still has its arenas mapped, and the
 * memory there is served through its userfaultfd, which famd holds. Its
 * session is orphaned: no more requests, faults served as before, ended
 * when the process exits or no longer maps any of its arenas (it ran
 * another program).
 * Owns nothing: the sessions are host-session.c's.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "host/host.h"
#include "host/host-session.h"

#define ORPHAN_CHECK_NS 1000000000ull /* how often an orphan is looked at */

/* Ends a session: frees its regions everywhere and closes its descriptors. */
void
host_client_release(struct host_client *cl)
{
	struct host *h = cl->h;
	struct host_client **pp;

	if (cl->dead)
		return;
	cl->dead = true;
	host_fork_client_gone(cl);
	log_rl(LOG_INFO, "session pid %ld ended: %llu regions, %llu bytes "
	    "released",
	    (long)cl->pid, (unsigned long long)cl->nregions,
	    (unsigned long long)cl->bytes);
	if (cl->pending_region != NULL)
		host_region_free(cl->pending_region);
	while (cl->regions != NULL)
		host_region_free(cl->regions);
	if (cl->sock_ev != NULL)
		event_free(cl->sock_ev);
	if (cl->uffd_ev != NULL)
		event_free(cl->uffd_ev);
	close(cl->fd);
	if (cl->uffd >= 0)
		close(cl->uffd);
	if (cl->pending_fd >= 0)
		close(cl->pending_fd);
	if (cl->pidfd >= 0)
		close(cl->pidfd);
	cl->uffd = cl->pending_fd = cl->fd = cl->pidfd = -1;
	for (pp = &h->clients; *pp != NULL; pp = &(*pp)->next)
		if (*pp == cl) {
			*pp = cl->next;
			break;
		}
	host_client_put(cl);
}

/* Tells whether process pid maps any part of cl's arenas (/proc/PID/maps). */
static bool
orphan_maps_arena(const struct host_client *cl)
{
	char path[64], line[512];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof path, "/proc/%ld/maps", (long)cl->pid);
	f = fopen(path, "re");
	if (f == NULL) /* not ours to read: kept until it exits; else gone */
		return errno == EACCES || errno == EPERM;
	while (!found && fgets(line, sizeof line, f) != NULL) {
		char *end;
		uint64_t lo = strtoull(line, &end, 16);
		uint64_t hi = *end == '-' ? strtoull(end + 1, NULL, 16) : lo;

		/* Any part of an arena: the program may have split it. */
		for (const struct arena *ar = cl->arenas; ar != NULL;
		    ar = ar->next)
			if (ar->uaddr != 0 && lo < ar->uaddr + ar->size &&
			    hi > ar->uaddr) {
				found = true;
				break;
			}
	}
	fclose(f);
	return found;
}

/*
 * The program at the other end of cl closed its socket: tells whether the
 * session is kept as an orphan (the process lives and has regions).
 */
bool
session_orphan(struct host_client *cl)
{
	/* A process that exits lets go of its memory before its files. */
	if (cl->nregions == 0 || cl->uffd < 0 || cl->pidfd < 0 ||
	    !host_client_alive(cl) || !orphan_maps_arena(cl))
		return false;
	cl->orphan = true;
	cl->orphan_check_ns = mono_ns() + ORPHAN_CHECK_NS;
	event_del(cl->sock_ev);
	cl->h->stats.sessions_orphaned++;
	log_rl(LOG_INFO, "session pid %ld: the program closed its session "
	    "socket but runs on: its %llu regions are served until it exits "
	    "or runs another program", (long)cl->pid,
	    (unsigned long long)cl->nregions);
	return true;
}

/* Ends the orphaned sessions whose process exited or ran another program. */
void
host_session_orphans(struct host *h)
{
	uint64_t now = mono_ns();
	struct host_client *cl, *next;

	for (cl = h->clients; cl != NULL; cl = next) {
		next = cl->next;
		if (!cl->orphan || cl->dead || now < cl->orphan_check_ns)
			continue;
		cl->orphan_check_ns = now + ORPHAN_CHECK_NS;
		if (host_client_alive(cl) && orphan_maps_arena(cl))
			continue;
		host_client_release(cl);
	}
}
