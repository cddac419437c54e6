/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics-http.c - metrics_listen: GET /metrics answered with the status as
 * OpenMetrics text, from the control loop (libevent's evhttp). Anything
 * else gets 404 (another path) or 405 (another method).
 *
 * Owns: the HTTP server, from metrics_http_open() to metrics_http_close().
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "core/famd.h"

#define METRICS_TYPE "application/openmetrics-text; version=1.0.0; " \
	"charset=utf-8"

static struct evhttp *metrics_http;
static char metrics_addr[300]; /* host:port bound, for status */

/* Answers one request. */
static void
metrics_request(struct evhttp_request *req, void *arg)
{
	const char *uri = evhttp_request_get_uri(req);
	struct evbuffer *out;
	json_t *st;
	char *text;

	(void)arg;
	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		evhttp_send_error(req, 405, "only GET");
		return;
	}
	if (strcmp(uri, "/metrics") != 0 && strncmp(uri, "/metrics?", 9) != 0) {
		evhttp_send_error(req, HTTP_NOTFOUND, "try /metrics");
		return;
	}
	st = famd_status_json();
	text = metrics_text(famd->ops->name, st);
	json_decref(st);
	out = evbuffer_new();
	if (text == NULL || out == NULL ||
	    evbuffer_add(out, text, strlen(text)) < 0) {
		free(text);
		if (out != NULL)
			evbuffer_free(out);
		evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
		return;
	}
	free(text);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", METRICS_TYPE);
	evhttp_send_reply(req, HTTP_OK, "OK", out);
	evbuffer_free(out);
}

/* Notes the address bs is bound to (the port taken when 0 was asked). */
static void
metrics_note_address(struct evhttp_bound_socket *bs, const char *host)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	unsigned port = 0;

	if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss,
	    &len) == 0)
		port = ntohs(ss.ss_family == AF_INET6 ?
		    ((struct sockaddr_in6 *)&ss)->sin6_port :
		    ((struct sockaddr_in *)&ss)->sin_port);
	snprintf(metrics_addr, sizeof metrics_addr, "%s:%u", host, port);
}

/*
 * Starts serving /metrics on metrics_listen (host:port) if it is set.
 * Returns 0, or -errno with *cause.
 */
int
metrics_http_open(struct famd *d, char **cause)
{
	const char *addr = cfg_str(d->cfg, CFG_METRICS_LISTEN);
	const char *colon = strrchr(addr, ':');
	char host[256];
	struct evhttp_bound_socket *bs;

	if (*addr == '\0')
		return 0;
	if (colon == NULL || (size_t)(colon - addr) >= sizeof host) {
		*cause = xasprintf("metrics_listen '%s': not host:port", addr);
		return -EINVAL;
	}
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	metrics_http = evhttp_new(d->base);
	if (metrics_http == NULL) {
		*cause = xasprintf("metrics_listen: cannot make the server");
		return -ENOMEM;
	}
	evhttp_set_allowed_methods(metrics_http, EVHTTP_REQ_GET |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_POST);
	evhttp_set_timeout(metrics_http, 10);
	evhttp_set_max_headers_size(metrics_http, 8192);
	evhttp_set_max_body_size(metrics_http, 0);
	evhttp_set_gencb(metrics_http, metrics_request, NULL);
	bs = evhttp_bind_socket_with_handle(metrics_http, host,
	    (uint16_t)atoi(colon + 1));
	if (bs == NULL) {
		int e = errno;

		*cause = xasprintf("metrics_listen %s: cannot listen: %s",
		    addr, strerror(e != 0 ? e : EADDRINUSE));
		evhttp_free(metrics_http);
		metrics_http = NULL;
		return -(e != 0 ? e : EADDRINUSE);
	}
	metrics_note_address(bs, host);
	log_info("metrics: serving /metrics on %s", metrics_addr);
	return 0;
}

/* Where /metrics is served ("" when nowhere), for status. */
const char *
metrics_http_address(void)
{
	return metrics_addr;
}

/* Stops serving /metrics. */
void
metrics_http_close(void)
{
	if (metrics_http != NULL)
		evhttp_free(metrics_http);
	metrics_http = NULL;
	metrics_addr[0] = '\0';
}
