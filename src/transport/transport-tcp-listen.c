/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport-tcp-listen.c - the tcp transport's listener: its socket, its
 * evconnlistener, backing off when accept fails; each connection accepted
 * is transport-tcp.c's (tcp_accepted()). Also the non-blocking socket both
 * sides open (tcp_socket()).
 *
 * Owns: struct tcp_listener's socket and backoff timer. No locks: one loop.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "base/base.h"
#include "transport/transport-tcp.h"

/* Opens a non-blocking TCP socket for ss: the fd, or -errno with *cause. */
int
tcp_socket(const struct sockaddr_storage *ss, const char *what,
    const char *addr, char **cause)
{
	int fd, err;

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    0);
	if (fd < 0) {
		err = -errno;
		*cause = xasprintf("%s %s: socket: %s", what, addr,
		    strerror(errno));
		return err;
	}
	return fd;
}

/* Re-enables accepting after a descriptor shortage. */
static void
tcp_backoff_cb(evutil_socket_t fd, short what, void *arg)
{
	struct tcp_listener *l = arg;

	evconnlistener_enable(l->lev);
}

/* Backs off for a second when accept fails (EMFILE) instead of spinning. */
static void
tcp_accept_error_cb(struct evconnlistener *lev, void *arg)
{
	struct tcp_listener *l = arg;
	struct timeval tv = { 1, 0 };

	log_warn("tcp: accept on %s: %s; pausing for 1s", l->tl.addr,
	    strerror(errno));
	evconnlistener_disable(lev);
	evtimer_add(l->backoff, &tv);
}

/* Takes a new connection and hands it to the role. */
static void
tcp_accept_cb(struct evconnlistener *lev, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	tcp_accepted(arg, fd, sa, (socklen_t)salen);
}

/* Listens on ss for l: a bound socket under an evconnlistener. */
int
tcp_bind(struct tp_listener *tl, const char *addr,
    struct sockaddr_storage *ss, socklen_t sslen, char **cause)
{
	struct tcp_listener *l = (struct tcp_listener *)tl;
	int fd, one = 1, err;

	fd = tcp_socket(ss, "listen", addr, cause);
	if (fd < 0)
		return fd;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)ss, sslen) < 0) {
		err = -errno;
		*cause = xasprintf("listen %s: bind: %s", addr,
		    strerror(errno));
		close(fd);
		return err;
	}
	sslen = sizeof *ss;
	if (getsockname(fd, (struct sockaddr *)ss, &sslen) < 0) {
		err = -errno;
		*cause = xasprintf("listen %s: %s", addr, strerror(errno));
		close(fd);
		return err;
	}
	tp_format_addr((struct sockaddr *)ss, sslen, tl->addr,
	    sizeof tl->addr);
	errno = 0;
	l->lev = evconnlistener_new(tl->evb, tcp_accept_cb, l,
	    LEV_OPT_CLOSE_ON_FREE, 128, fd);
	l->backoff = evtimer_new(tl->evb, tcp_backoff_cb, l);
	if (l->lev == NULL || l->backoff == NULL) {
		err = errno != 0 ? -errno : -ENOMEM;
		*cause = xasprintf("listen %s: %s", addr, strerror(-err));
		if (l->lev != NULL)
			evconnlistener_free(l->lev);
		else
			close(fd);
		if (l->backoff != NULL)
			event_free(l->backoff);
		return err;
	}
	evconnlistener_set_error_cb(l->lev, tcp_accept_error_cb);
	return 0;
}

/* Stops listening. */
void
tcp_listener_free(struct fam_listener *fl)
{
	struct tcp_listener *l = (struct tcp_listener *)fl;

	evconnlistener_free(l->lev);
	event_free(l->backoff);
	explicit_bzero(l->tl.opts.secret, sizeof l->tl.opts.secret);
	free(l);
}
