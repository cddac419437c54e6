/* SPDX-License-Identifier: Apache-2.0 */
/*
 * transport-tcp.h - what the tcp transport's two files share: the
 * listener (transport-tcp-listen.c: its socket and accepting) and the
 * connections (transport-tcp.c). Private to src/transport.
 */
#ifndef FAMD_TRANSPORT_TCP_H
#define FAMD_TRANSPORT_TCP_H

#include <sys/socket.h>

#include <event2/listener.h>

#include "transport/transport-int.h"

struct tcp_listener {
	struct tp_listener tl;
	struct evconnlistener *lev;
	struct event *backoff;
};

/* transport-tcp-listen.c */
int tcp_socket(const struct sockaddr_storage *ss, const char *what,
    const char *addr, char **cause);
int tcp_bind(struct tp_listener *tl, const char *addr,
    struct sockaddr_storage *ss, socklen_t sslen, char **cause);
void tcp_listener_free(struct fam_listener *fl);

/* transport-tcp.c */
void tcp_accepted(struct tcp_listener *l, int fd, const struct sockaddr *sa,
    socklen_t salen);

#endif
