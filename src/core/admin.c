/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admin.c - the admin socket: JSON-RPC 2.0 over a Unix stream socket, one
 * object per line, for famctl and scripts.
 *
 * Every request goes down one ladder, and the first rung it fails answers
 * it: size -> JSON -> request object -> method -> permission -> params ->
 * handler. A bad request gets an error object and the connection stays
 * usable; an oversized one gets an error and the connection is closed.
 * A connection has admin_idle_timeout for each whole request (a deadline
 * that bytes trickling in do not push back), and at most
 * ADMIN_MAX_QUEUED bytes of answers waiting unread: then it is closed.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "core/famd.h"

#define ADMIN_MAX_CMDS 128
#define ADMIN_MAX_QUEUED (4u << 20) /* answers unread: the client goes */

struct admin_client {
	struct bufferevent *bev;
	struct event *deadline; /* the next whole request is due by then */
	struct admin_peer peer;
	bool closing; /* close once the output has drained */
	struct admin_client *next;
};

struct admin_stats {
	uint64_t connections;
	uint64_t refused;
	uint64_t requests;
	uint64_t errors;
	uint64_t oversized;
	uint64_t timeouts;
	uint64_t denied;
	uint64_t overflows; /* closed with ADMIN_MAX_QUEUED bytes unread */
};

static const struct admin_cmd *admin_cmds[ADMIN_MAX_CMDS];
static size_t admin_ncmds;

static struct {
	struct event_base *base;
	struct evconnlistener *listener;
	struct event *backoff;
	char *path;
	int lock_fd;
	unsigned max_clients;
	struct timeval idle;
	struct admin_client *clients;
	unsigned nclients;
	struct admin_stats stats;
} admin = { .lock_fd = -1 };

/* Adds commands to the table; a name registered twice is a bug. */
void
admin_register(const struct admin_cmd *cmds, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < admin_ncmds; j++)
			if (strcmp(admin_cmds[j]->name, cmds[i].name) == 0)
				fatalx("admin command %s registered twice",
				    cmds[i].name);
		if (admin_ncmds == ADMIN_MAX_CMDS)
			fatalx("too many admin commands");
		admin_cmds[admin_ncmds++] = &cmds[i];
	}
}

/* Empties the command table. */
void
admin_unregister_all(void)
{
	admin_ncmds = 0;
}

/* Returns the i-th registered command, or NULL past the end. */
const struct admin_cmd *
admin_cmd_at(size_t i)
{
	return i < admin_ncmds ? admin_cmds[i] : NULL;
}

/* Returns the command called name, or NULL. */
static const struct admin_cmd *
admin_find(const char *name)
{
	for (size_t i = 0; i < admin_ncmds; i++)
		if (strcmp(admin_cmds[i]->name, name) == 0)
			return admin_cmds[i];
	return NULL;
}

/* Records an error for the handler's caller and returns NULL. */
json_t *
admin_fail(struct admin_req *req, int code, const char *fmt, ...)
{
	va_list ap;

	free(req->err_msg);
	va_start(ap, fmt);
	if (vasprintf(&req->err_msg, fmt, ap) < 0)
		abort();
	va_end(ap);
	req->err_code = code;
	return NULL;
}

/* Returns true if the peer may change things, else records the refusal. */
bool
admin_require_change(struct admin_req *req)
{
	if (req->may_change)
		return true;
	admin_fail(req, ADMIN_ERR_PERMISSION,
	    "permission denied: only root may change famd");
	return false;
}

/*
 * Returns a JSON-RPC error response line (without the newline). A message
 * that is not UTF-8 (a parse error quotes the request's bytes) has every
 * byte outside printable ASCII turned into '?': JSON cannot carry it.
 */
char *
admin_error_line(json_t *id, int code, const char *msg)
{
	char *clean = NULL, *s;
	json_t *r;

	if (!proto_utf8_valid(msg, strlen(msg))) {
		clean = strdup(msg);
		if (clean == NULL)
			abort();
		for (char *p = clean; *p != '\0'; p++)
			if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
				*p = '?';
		msg = clean;
	}
	r = json_pack("{s:s,s:{s:i,s:s},s:O}", "jsonrpc", "2.0", "error",
	    "code", code, "message", msg, "id", id != NULL ? id : json_null());
	s = json_dumps(r, JSON_COMPACT);
	json_decref(r);
	free(clean);
	if (s == NULL)
		abort();
	return s;
}

/* Returns the name of a JSON type as a person would say it. */
static const char *
admin_ptype_name(enum admin_ptype t)
{
	switch (t) {
	case ADMIN_P_STRING: return "a string";
	case ADMIN_P_INT: return "an integer";
	case ADMIN_P_BOOL: return "a boolean";
	case ADMIN_P_OBJECT: return "an object";
	case ADMIN_P_ANY: return "a value";
	}
	return "a value";
}

/* Checks params against the command's list; returns false with an error. */
static bool
admin_check_params(const struct admin_cmd *cmd, struct admin_req *req)
{
	const char *key;
	json_t *val;

	json_object_foreach(req->params, key, val) {
		const struct admin_param *p = cmd->params;
		bool ok;

		while (p != NULL && p->name != NULL && strcmp(p->name, key) != 0)
			p++;
		if (p == NULL || p->name == NULL) {
			admin_fail(req, ADMIN_ERR_PARAMS,
			    "%s: unknown parameter '%s'", cmd->name, key);
			return false;
		}
		switch (p->type) {
		case ADMIN_P_STRING: ok = json_is_string(val); break;
		case ADMIN_P_INT: ok = json_is_integer(val); break;
		case ADMIN_P_BOOL: ok = json_is_boolean(val); break;
		case ADMIN_P_OBJECT: ok = json_is_object(val); break;
		default: ok = true; break;
		}
		if (!ok) {
			admin_fail(req, ADMIN_ERR_PARAMS,
			    "%s: parameter '%s' must be %s", cmd->name, key,
			    admin_ptype_name(p->type));
			return false;
		}
	}
	for (const struct admin_param *p = cmd->params; p != NULL &&
	    p->name != NULL; p++) {
		if (p->required && json_object_get(req->params, p->name) ==
		    NULL) {
			admin_fail(req, ADMIN_ERR_PARAMS,
			    "%s: missing parameter '%s'", cmd->name, p->name);
			return false;
		}
	}
	return true;
}

/*
 * Runs one request line and returns the response line to send (without the
 * newline), or NULL when the request was a notification.
 */
char *
admin_process(const char *line, size_t len, const struct admin_peer *peer,
    bool may_change)
{
	struct admin_req req = { .peer = peer, .may_change = may_change };
	const struct admin_cmd *cmd;
	json_error_t jerr;
	json_t *msg, *id = NULL, *method, *params, *result = NULL, *ver;
	char *out = NULL;

	admin.stats.requests++;
	if (len > ADMIN_MAX_REQUEST) {
		admin.stats.errors++;
		return admin_error_line(NULL, ADMIN_ERR_TOO_LARGE,
		    "request too large");
	}
	msg = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY,
	    &jerr);
	if (msg == NULL) {
		char buf[256];

		admin.stats.errors++;
		snprintf(buf, sizeof buf, "parse error: %s (column %d)",
		    jerr.text, jerr.column);
		return admin_error_line(NULL, ADMIN_ERR_PARSE, buf);
	}
	if (!json_is_object(msg)) {
		admin_fail(&req, ADMIN_ERR_INVALID, json_is_array(msg) ?
		    "batch requests are not supported" :
		    "request must be an object");
		goto reply;
	}
	id = json_object_get(msg, "id");
	if (id != NULL && !json_is_string(id) && !json_is_integer(id) &&
	    !json_is_null(id)) {
		id = NULL;
		admin_fail(&req, ADMIN_ERR_INVALID,
		    "id must be a string, an integer or null");
		goto reply;
	}
	ver = json_object_get(msg, "jsonrpc");
	if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0")) {
		admin_fail(&req, ADMIN_ERR_INVALID, "jsonrpc must be \"2.0\"");
		goto reply;
	}
	{
		const char *k;
		json_t *v;

		json_object_foreach(msg, k, v) {
			if (strcmp(k, "jsonrpc") && strcmp(k, "method") &&
			    strcmp(k, "params") && strcmp(k, "id")) {
				admin_fail(&req, ADMIN_ERR_INVALID,
				    "unknown member '%s' in request", k);
				goto reply;
			}
		}
	}
	method = json_object_get(msg, "method");
	if (!json_is_string(method)) {
		admin_fail(&req, ADMIN_ERR_INVALID, "method must be a string");
		goto reply;
	}
	cmd = admin_find(json_string_value(method));
	if (cmd == NULL) {
		admin_fail(&req, ADMIN_ERR_NO_METHOD, "unknown method '%s'",
		    json_string_value(method));
		goto reply;
	}
	params = json_object_get(msg, "params");
	if (params == NULL || json_is_null(params))
		req.params = json_object();
	else if (json_is_object(params))
		req.params = json_incref(params);
	else {
		admin_fail(&req, ADMIN_ERR_PARAMS,
		    "params must be an object (by-name parameters)");
		goto reply;
	}
	if ((cmd->flags & ADMIN_F_CHANGE) && !admin_require_change(&req))
		goto reply;
	if (!admin_check_params(cmd, &req))
		goto reply;
	result = cmd->handler(&req);
	if (result == NULL && req.err_code == 0)
		admin_fail(&req, ADMIN_ERR_INTERNAL, "%s failed", cmd->name);

reply:
	if (req.err_code == ADMIN_ERR_PERMISSION)
		admin.stats.denied++;
	if (id == NULL && json_is_object(msg) && req.err_code != ADMIN_ERR_INVALID) {
		/* A notification: run, but answer nothing. */
		json_decref(result);
		goto out;
	}
	if (req.err_code != 0) {
		admin.stats.errors++;
		out = admin_error_line(id, req.err_code, req.err_msg);
	} else {
		json_t *r = json_pack("{s:s,s:o,s:O}", "jsonrpc", "2.0",
		    "result", result, "id", id);

		out = json_dumps(r, JSON_COMPACT);
		json_decref(r);
		if (out == NULL)
			abort();
	}
out:
	json_decref(req.params);
	free(req.err_msg);
	json_decref(msg);
	return out;
}

/* Frees a client and forgets it. */
static void
admin_client_free(struct admin_client *c)
{
	struct admin_client **pp;

	for (pp = &admin.clients; *pp != NULL; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	bufferevent_free(c->bev);
	if (c->deadline != NULL)
		event_free(c->deadline);
	admin.nclients--;
	free(c);
}

/* Gives a client admin_idle_timeout, from now, for its next request. */
static void
admin_client_rearm(struct admin_client *c)
{
	evtimer_add(c->deadline, &admin.idle);
}

/* Sends one line to a client. */
static void
admin_send(struct admin_client *c, const char *line)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);

	evbuffer_add(out, line, strlen(line));
	evbuffer_add(out, "\n", 1);
}

/* Answers every complete line a client has sent. */
static void
admin_read_cb(struct bufferevent *bev, void *arg)
{
	struct admin_client *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	bool may_change = c->peer.uid == 0 || c->peer.uid == geteuid();

	if (c->closing) {
		evbuffer_drain(in, evbuffer_get_length(in));
		return;
	}
	for (;;) {
		size_t len;
		char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_LF);
		char *resp;

		if (line == NULL)
			break;
		if (len > 0 && line[len - 1] == '\r')
			line[--len] = '\0';
		if (len == 0) {
			free(line);
			continue;
		}
		resp = admin_process(line, len, &c->peer, may_change);
		free(line);
		admin_client_rearm(c);
		if (resp != NULL) {
			admin_send(c, resp);
			free(resp);
		}
		if (evbuffer_get_length(bufferevent_get_output(bev)) >
		    ADMIN_MAX_QUEUED) {
			/* Requests piped in, answers never read: it goes. */
			admin.stats.overflows++;
			log_info("admin: over %u bytes of answers unread by pid "
			    "%ld; closing", ADMIN_MAX_QUEUED, (long)c->peer.pid);
			admin_client_free(c);
			return;
		}
		if (len > ADMIN_MAX_REQUEST) {
			admin.stats.oversized++;
			c->closing = true;
			break;
		}
	}
	if (!c->closing && evbuffer_get_length(in) > ADMIN_MAX_REQUEST) {
		char *resp = admin_error_line(NULL, ADMIN_ERR_TOO_LARGE,
		    "request too large");

		admin.stats.requests++;
		admin.stats.errors++;
		admin.stats.oversized++;
		log_info("admin: request over %d bytes from pid %ld; closing",
		    ADMIN_MAX_REQUEST, (long)c->peer.pid);
		admin_send(c, resp);
		free(resp);
		evbuffer_drain(in, evbuffer_get_length(in));
		c->closing = true;
	}
	if (c->closing)
		bufferevent_disable(bev, EV_READ);
}

/* Closes a client whose goodbye has been sent. */
static void
admin_write_cb(struct bufferevent *bev, void *arg)
{
	struct admin_client *c = arg;

	if (c->closing)
		admin_client_free(c);
}

/* A client sent no whole request within admin_idle_timeout: it goes. */
static void
admin_deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct admin_client *c = arg;

	admin.stats.timeouts++;
	log_debug("admin: closing idle connection from pid %ld",
	    (long)c->peer.pid);
	admin_client_free(c);
}

/* Ends a connection on EOF or error. */
static void
admin_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct admin_client *c = arg;

	if ((what & BEV_EVENT_EOF) &&
	    evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
		/* The peer is done sending; finish answering it first. */
		c->closing = true;
		bufferevent_disable(bev, EV_READ);
		return;
	}
	admin_client_free(c);
}

/* Re-enables accepting after a descriptor shortage. */
static void
admin_backoff_cb(evutil_socket_t fd, short what, void *arg)
{
	evconnlistener_enable(admin.listener);
}

/* Backs off for a second when accept fails (EMFILE) instead of spinning. */
static void
admin_accept_error_cb(struct evconnlistener *l, void *arg)
{
	struct timeval tv = { 1, 0 };

	log_warn("admin: accept: %s; pausing for 1s", strerror(errno));
	evconnlistener_disable(l);
	evtimer_add(admin.backoff, &tv);
}

/*
 * Serves requests from peer on bev, a connected bufferevent (a socket the
 * listener accepted); the client frees bev when it goes. Returns 0, or
 * -ENOMEM and bev stays the caller's.
 */
int
admin_client_add(struct bufferevent *bev, const struct admin_peer *peer)
{
	struct admin_client *c = calloc(1, sizeof *c);

	if (c == NULL)
		return -ENOMEM;
	c->deadline = evtimer_new(bufferevent_get_base(bev), admin_deadline_cb,
	    c);
	if (c->deadline == NULL) {
		free(c);
		return -ENOMEM;
	}
	c->bev = bev;
	c->peer = *peer;
	bufferevent_setcb(bev, admin_read_cb, admin_write_cb, admin_event_cb,
	    c);
	admin_client_rearm(c);
	bufferevent_setwatermark(bev, EV_READ, 0, ADMIN_MAX_REQUEST + 2);
	bufferevent_enable(bev, EV_READ | EV_WRITE);
	c->next = admin.clients;
	admin.clients = c;
	admin.nclients++;
	admin.stats.connections++;
	return 0;
}

/* Takes a new admin connection. */
static void
admin_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int salen, void *arg)
{
	struct ucred cred;
	socklen_t clen = sizeof cred;
	struct admin_peer peer;
	struct bufferevent *bev;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
		log_warn("admin: SO_PEERCRED: %s", strerror(errno));
		close(fd);
		return;
	}
	if (admin.nclients >= admin.max_clients) {
		char *resp = admin_error_line(NULL, ADMIN_ERR_TOO_MANY,
		    "too many admin connections");
		ssize_t n;

		admin.stats.refused++;
		log_info("admin: refusing pid %ld: %u connections open",
		    (long)cred.pid, admin.nclients);
		n = send(fd, resp, strlen(resp), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0)
			(void)send(fd, "\n", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		free(resp);
		close(fd);
		return;
	}
	peer.pid = cred.pid;
	peer.uid = cred.uid;
	peer.gid = cred.gid;
	bev = bufferevent_socket_new(admin.base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (bev == NULL) {
		close(fd);
		return;
	}
	if (admin_client_add(bev, &peer) < 0)
		bufferevent_free(bev);
}

/*
 * Takes the lock file beside the socket so that a second famd cannot steal
 * a live one's socket. Returns the lock's descriptor or -1 with *cause.
 */
int
admin_lock(const char *socket_path, char **cause)
{
	char *lock = xasprintf("%s.lock", socket_path);
	char pid[32];
	struct stat st;
	int fd;

	/* Not through a symbolic link, nor onto anything but a file. */
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK,
	    0644);
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
		errno = EINVAL;
	}
	if (fd < 0) {
		*cause = xasprintf("cannot open lock file %s: %s", lock,
		    errno == ELOOP ? "it is a symbolic link" : strerror(errno));
		free(lock);
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		ssize_t n = pread(fd, pid, sizeof pid - 1, 0);

		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		if (errno == EWOULDBLOCK || errno == EAGAIN)
			*cause = xasprintf("another famd%s%s is running on %s "
			    "(lock %s held)", *pid ? " with pid " : "", pid,
			    socket_path, lock);
		else
			*cause = xasprintf("cannot lock %s: %s", lock,
			    strerror(errno));
		close(fd);
		free(lock);
		return -1;
	}
	snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 ||
	    pwrite(fd, pid, strlen(pid), 0) != (ssize_t)strlen(pid))
		log_warn("cannot write pid to %s: %s", lock, strerror(errno));
	free(lock);
	return fd;
}

/* Gives the socket its group and mode from the configuration. */
static int
admin_set_owner(const char *path, const char *group, char **cause)
{
	gid_t gid = getegid();

	if (group != NULL && *group != '\0') {
		struct group *gr = getgrnam(group);

		if (gr == NULL) {
			*cause = xasprintf("admin_group %s: no such group",
			    group);
			return -1;
		}
		gid = gr->gr_gid;
	}
	if (chown(path, (uid_t)-1, gid) < 0 || chmod(path, 0660) < 0) {
		*cause = xasprintf("%s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Applies the reloadable admin keys. */
void
admin_reconfigure(const struct cfg *cfg)
{
	int64_t ms = cfg_int(cfg, CFG_ADMIN_IDLE_TIMEOUT);
	char *cause = NULL;

	admin.max_clients = (unsigned)cfg_int(cfg, CFG_ADMIN_MAX_CLIENTS);
	admin.idle.tv_sec = ms / 1000;
	admin.idle.tv_usec = (ms % 1000) * 1000;
	if (admin.path != NULL &&
	    admin_set_owner(admin.path, cfg_str(cfg, CFG_ADMIN_GROUP),
	    &cause) < 0) {
		log_warn("admin socket: %s", cause);
		free(cause);
	}
}

/*
 * Opens the admin socket named in the configuration: lock, remove a stale
 * socket, bind, set owner and mode, listen.
 */
int
admin_open(struct famd *d, char **cause)
{
	const char *path = cfg_str(d->cfg, CFG_ADMIN_SOCKET);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	mode_t old;
	int fd;

	if (strlen(path) >= sizeof sun.sun_path) {
		*cause = xasprintf("admin_socket %s: path too long", path);
		return -1;
	}
	if (mkdir_parent(path) < 0) {
		*cause = xasprintf("cannot create the directory of %s: %s", path,
		    strerror(errno));
		return -1;
	}
	if (admin.lock_fd < 0) {
		admin.lock_fd = admin_lock(path, cause);
		if (admin.lock_fd < 0)
			return -1;
	}
	strcpy(sun.sun_path, path);
	if (unlink(path) < 0 && errno != ENOENT) {
		*cause = xasprintf("cannot remove stale %s: %s", path,
		    strerror(errno));
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*cause = xasprintf("socket: %s", strerror(errno));
		return -1;
	}
	old = umask(0117);
	if (bind(fd, (struct sockaddr *)&sun, sizeof sun) < 0) {
		umask(old);
		*cause = xasprintf("bind %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	umask(old);
	admin.path = strdup(path);
	if (admin_set_owner(path, cfg_str(d->cfg, CFG_ADMIN_GROUP), cause) < 0) {
		close(fd);
		unlink(path);
		return -1;
	}
	admin.base = d->base;
	admin.listener = evconnlistener_new(d->base, admin_accept_cb, NULL,
	    LEV_OPT_CLOSE_ON_FREE, 16, fd);
	if (admin.listener == NULL) {
		*cause = xasprintf("listen %s: %s", path, strerror(errno));
		close(fd);
		unlink(path);
		return -1;
	}
	evconnlistener_set_error_cb(admin.listener, admin_accept_error_cb);
	admin.backoff = evtimer_new(d->base, admin_backoff_cb, NULL);
	admin_reconfigure(d->cfg);
	return 0;
}

/* Closes every connection and removes the socket (the lock stays). */
void
admin_close(void)
{
	while (admin.clients != NULL)
		admin_client_free(admin.clients);
	if (admin.listener != NULL)
		evconnlistener_free(admin.listener);
	if (admin.backoff != NULL)
		event_free(admin.backoff);
	if (admin.path != NULL)
		unlink(admin.path);
	free(admin.path);
	if (admin.lock_fd >= 0)
		close(admin.lock_fd);
	admin.listener = NULL;
	admin.backoff = NULL;
	admin.path = NULL;
	admin.lock_fd = -1;
}

/* Returns how many admin connections are open. */
unsigned
admin_clients(void)
{
	return admin.nclients;
}

/* Adds the admin socket's counters to a status object. */
void
admin_status(json_t *status)
{
	json_object_set_new(status, "admin", json_pack(
	    "{s:s,s:i,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
	    "socket", admin.path != NULL ? admin.path : "",
	    "clients", (int)admin.nclients,
	    "connections", (json_int_t)admin.stats.connections,
	    "refused", (json_int_t)admin.stats.refused,
	    "requests", (json_int_t)admin.stats.requests,
	    "errors", (json_int_t)admin.stats.errors,
	    "oversized", (json_int_t)admin.stats.oversized,
	    "idle_timeouts", (json_int_t)admin.stats.timeouts,
	    "denied", (json_int_t)admin.stats.denied,
	    "overflows", (json_int_t)admin.stats.overflows));
}

/* Zeroes the admin socket's counters. */
void
admin_stats_reset(void)
{
	memset(&admin.stats, 0, sizeof admin.stats);
}
