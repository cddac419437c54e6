/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-session.h - what the session files share (host-session.c, the
 * sessions; host-session-copy.c, the requests that copy or drop a
 * program's memory). Not for the layers below.
 */
#ifndef FAM_HOST_SESSION_H
#define FAM_HOST_SESSION_H

#include "host/host.h"

/* host-session.c */
int session_reply(struct host_client *cl, int status, uint32_t flags,
    uint64_t a, uint64_t b, uint64_t c, uint64_t d, int fd);
int session_fail(struct host_client *cl, int err);
void session_resume(struct host_client *cl);
void session_uffd_cb(evutil_socket_t fd, short what, void *arg);
struct arena *arena_new(struct host_client *cl, uint64_t size);
void arena_free(struct host *h, struct arena *ar);
int uid_quota(struct host *h, uid_t uid, uint64_t size, pid_t pid,
    const struct region *except);

/* host-session-copy.c */
int session_discard(struct host_client *cl);
void session_fork_done(struct host_client *cl, uint64_t token, int err);
int session_fork(struct host_client *cl);
int session_adopt(struct host_client *cl);

/* host-restart.c, host-reclaim.c */
struct host_restart {
	char *path;           /* the state file: session_socket + ".state" */
	bool off;             /* install = continue: no restart state */
	bool dirty;           /* the sessions changed since the last save */
	int jfd;              /* the state file, open to append to; -1 */
	uint64_t jlines;      /* journal lines since the last snapshot */
	uint64_t sessions;    /* sessions in the state file */
	uint64_t node_session[HOST_MAX_NODES]; /* as last saved */
	uint64_t node_instance[HOST_MAX_NODES];
	uint64_t copies_placed; /* copies moved and made again, as saved */
	bool loading;         /* the state file is being read */
	char *pend;           /* copies' stale rows not written yet: records
	                      * of the next "stale" line (host-restart-copies.c) */
	size_t pend_len, pend_cap;
	uint64_t pend_n;
	uint64_t stale_records, behind_lines; /* written */
	uint64_t saves, save_errors;
	uint64_t restored, reclaimed, released; /* sessions */
	uint64_t chunks_resident, chunks_punched; /* found by reclaims */
	uint64_t chunks_partial; /* ... of the resident, partial (grains) */
};

void host_restart_replied(struct host_client *cl, int status, uint64_t d);
int host_restart_save(struct host *h);
void host_restart_append(struct host_client *cl, json_t *e);
char *host_restart_stale_hex(const struct stripe *s);
int host_restart_stale_parse(struct host *h, struct stripe *s,
    const char *hex);
void host_restart_stale_apply(struct host *h, json_t *log);
int session_reclaim(struct host_client *cl);
int session_rearena(struct host_client *cl);

/* host-session-end.c */
bool session_orphan(struct host_client *cl);

#endif /* FAM_HOST_SESSION_H */
