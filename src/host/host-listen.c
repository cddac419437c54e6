/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-listen.c - the session socket: opening and removing it, accepting
 * programs' connections within max_sessions and uid_max_sessions, taking
 * each one's pidfd, and pausing (not spinning) when out of descriptors.
 *
 * Owns: h->listen_fd, h->listen_ev, h->listen_retry (the pause),
 * h->session_path and its lock. The sessions themselves are
 * host-session.c's (host_client_new).
 * Listener states: listening; paused after EMFILE, ENFILE, ENOBUFS or
 * ENOMEM for listen_backoff_ms (50 ms, doubling to 1 s while accept
 * fails), then listening again.
 * Locks: none; everything runs on the control loop.
 */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "host/host.h"

/* What the log says when the default group cannot be given. */
#define SESSION_HOWTO "To let others in, create the group (addgroup " \
	"--system famd) and add them to it, or set [host] session_group to " \
	"another group, or session_mode = 0666 for every user"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

/*
 * Returns a pidfd of the process that connected on fd, or -1:
 * SO_PEERPIDFD (Linux 6.5) names that process itself; before it,
 * pidfd_open of its pid at accept (a pid reused between connect and
 * accept would be named instead).
 */
static int
session_pidfd(int fd, pid_t pid)
{
	socklen_t len = sizeof(int);
	int pidfd = -1;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 &&
	    pidfd >= 0) {
		fd_set_cloexec(pidfd);
		return pidfd;
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd >= 0)
		fd_set_cloexec(pidfd);
	return pidfd < 0 ? -1 : pidfd;
}

/* The back-off after EMFILE is over: listens for programs again. */
static void
session_listen_again_cb(evutil_socket_t fd, short what, void *arg)
{
	struct host *h = arg;

	if (h->listen_ev != NULL && event_add(h->listen_ev, NULL) < 0)
		log_err("session socket: cannot watch it again");
}

/*
 * accept failed for want of descriptors or memory: stops listening for a
 * while (50 ms, doubling to 1 s while it fails), or the level-triggered
 * listener would spin on the connection still waiting.
 */
static void
session_accept_pause(struct host *h, int err)
{
	struct timeval tv;

	h->listen_backoff_ms = h->listen_backoff_ms == 0 ? 50 :
	    h->listen_backoff_ms * 2;
	if (h->listen_backoff_ms > 1000)
		h->listen_backoff_ms = 1000;
	tv.tv_sec = h->listen_backoff_ms / 1000;
	tv.tv_usec = (h->listen_backoff_ms % 1000) * 1000;
	event_del(h->listen_ev);
	evtimer_add(h->listen_retry, &tv);
	log_rl(LOG_WARNING, "session socket: accept: %s; accepting again in "
	    "%u ms", strerror(err), h->listen_backoff_ms);
}

/*
 * Checks a new connection of uid against max_sessions and
 * uid_max_sessions; returns 0 or EUSERS.
 */
static int
session_admit(struct host *h, uid_t uid, pid_t pid)
{
	uint64_t max = (uint64_t)cfg_int(h->d->cfg, CFG_HOST_MAX_SESSIONS);
	uint64_t umax = (uint64_t)cfg_int(h->d->cfg, CFG_HOST_UID_MAX_SESSIONS);
	uint64_t all = 0, mine = 0;

	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next) {
		all++;
		mine += cl->uid == uid;
	}
	if (all < max && mine < umax)
		return 0;
	h->stats.sessions_refused++;
	log_rl(LOG_INFO, "session socket: pid %ld uid %ld refused: %llu "
	    "sessions of the user (uid_max_sessions %llu), %llu in all "
	    "(max_sessions %llu)", (long)pid, (long)uid,
	    (unsigned long long)mine, (unsigned long long)umax,
	    (unsigned long long)all, (unsigned long long)max);
	return EUSERS;
}

/* Accepts a program's connection. */
static void
session_accept_cb(evutil_socket_t lfd, short what, void *arg)
{
	struct host *h = arg;
	struct ucred cred;
	socklen_t clen = sizeof cred;
	int fd;

	fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
		    errno == ENOMEM)
			session_accept_pause(h, errno);
		return;
	}
	h->listen_backoff_ms = 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0 ||
	    session_admit(h, cred.uid, cred.pid) != 0) {
		close(fd);
		return;
	}
	if (host_client_new(h, fd, &cred, session_pidfd(fd, cred.pid)) < 0)
		close(fd);
}

/*
 * Gives the session socket its group and sets *mode from session_mode.
 * The default group missing from this machine (or not famd's to give)
 * leaves the socket famd's own group, mode 0600 unless session_mode was
 * set, and says so once; a group that was configured must be given.
 */
static int
session_owner(struct host *h, const char *group, mode_t *mode, char **cause)
{
	static const mode_t modes[] = {
		[CFG_SESSION_MODE_0600] = 0600,
		[CFG_SESSION_MODE_0660] = 0660,
		[CFG_SESSION_MODE_0666] = 0666,
	};
	const struct cfg *cfg = h->d->cfg;
	const char *path = cfg_str(cfg, CFG_HOST_SESSION_SOCKET);
	struct group *gr;
	int err;

	*mode = modes[cfg_int(cfg, CFG_HOST_SESSION_MODE)];
	if (*group == '\0')
		return 0;
	gr = getgrnam(group);
	err = gr == NULL ? ENOENT : chown(path, (uid_t)-1, gr->gr_gid) < 0 ?
	    errno : 0;
	if (err == 0)
		return 0;
	if (cfg->v[CFG_HOST_SESSION_GROUP].set) {
		*cause = xasprintf("session_group %s: %s", group,
		    err == ENOENT ? "no such group" : strerror(err));
		return -1;
	}
	if (!cfg->v[CFG_HOST_SESSION_MODE].set)
		*mode = 0600;
	if (err == ENOENT)
		log_notice("session socket %s: mode %04o, no group %s on this "
		    "machine: only uid %ld may use fabric-attached memory. %s",
		    path, (unsigned)*mode, group, (long)geteuid(), SESSION_HOWTO);
	else
		log_notice("session socket %s: mode %04o, cannot give it group "
		    "%s (%s): only uid %ld may use fabric-attached memory. %s",
		    path, (unsigned)*mode, group, strerror(err),
		    (long)geteuid(), SESSION_HOWTO);
	return 0;
}

/* Opens the session socket for programs. */
int
host_session_open(struct host *h, char **cause)
{
	const char *path = cfg_str(h->d->cfg, CFG_HOST_SESSION_SOCKET);
	const char *group = cfg_str(h->d->cfg, CFG_HOST_SESSION_GROUP);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	mode_t mode;
	int fd;

	host_session_init(h);
	if (strlen(path) >= sizeof sun.sun_path) {
		*cause = xasprintf("session_socket %s: path too long", path);
		return -1;
	}
	strcpy(sun.sun_path, path);
	if (mkdir_parent(path) < 0) {
		*cause = xasprintf("cannot create the directory of %s: %s", path,
		    strerror(errno));
		return -1;
	}
	h->session_lock = admin_lock(path, cause);
	if (h->session_lock < 0)
		return -1;
	if (unlink(path) < 0 && errno != ENOENT) {
		*cause = xasprintf("cannot remove %s: %s", path,
		    strerror(errno));
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof sun) < 0 ||
	    listen(fd, 128) < 0) {
		*cause = xasprintf("session socket %s: %s", path,
		    strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (session_owner(h, group, &mode, cause) < 0) {
		close(fd);
		unlink(path);
		return -1;
	}
	if (chmod(path, mode) < 0) {
		*cause = xasprintf("chmod %s: %s", path, strerror(errno));
		close(fd);
		unlink(path);
		return -1;
	}
	h->listen_fd = fd;
	h->session_path = strdup(path);
	h->listen_ev = event_new(h->base, fd, EV_READ | EV_PERSIST,
	    session_accept_cb, h);
	h->listen_retry = evtimer_new(h->base, session_listen_again_cb, h);
	if (h->listen_ev == NULL || h->listen_retry == NULL ||
	    event_add(h->listen_ev, NULL) < 0) {
		*cause = xasprintf("session socket: cannot watch it");
		return -1;
	}
	return 0;
}

/* Ends every session and removes the session socket. */
void
host_session_close(struct host *h)
{
	while (h->clients != NULL)
		host_client_release(h->clients);
	if (h->listen_ev != NULL)
		event_free(h->listen_ev);
	if (h->listen_retry != NULL)
		event_free(h->listen_retry);
	h->listen_retry = NULL;
	if (h->listen_fd >= 0)
		close(h->listen_fd);
	if (h->session_path != NULL)
		unlink(h->session_path);
	if (h->session_lock >= 0)
		close(h->session_lock);
	h->session_lock = -1;
	free(h->session_path);
	h->listen_ev = NULL;
	h->listen_fd = -1;
	h->session_path = NULL;
}
