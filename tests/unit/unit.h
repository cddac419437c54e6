/* SPDX-License-Identifier: Apache-2.0 */
/*
 * unit.h - what the Check suites share: a real libevent loop run until a
 * condition holds, famd roles started in-process on loopback, and a
 * program's side of a session with an in-process host role.
 */
#ifndef FAM_UNIT_H
#define FAM_UNIT_H

#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <event2/event.h>

#include "core/famd.h"
#include "wire/session.h"

/* Runs base until pred() holds or ms pass; returns pred(). */
bool unit_run_until(struct event_base *base, bool (*pred)(void), int ms);
/* The same, for a predicate with an argument. */
bool unit_run_until_arg(struct event_base *base, bool (*pred)(void *),
    void *arg, int ms);
/* Runs base for ms, whatever happens. */
void unit_run_for(struct event_base *base, int ms);

/* A private directory with a secret file ("secret"); removed at exit. */
const char *unit_dir(void);

/* A famd role started in this process, on the suite's loop. */
struct unit_role {
	struct famd d;
	struct cfg cfg;
	bool up;
};

int unit_role_start(struct unit_role *ur, struct event_base *base,
    enum famd_role role, const char *text);
void unit_role_stop(struct unit_role *ur);
char *unit_role_listen(struct unit_role *ur, const char *section);

/* A program's session with an in-process host role, driven from the loop. */
struct unit_prog {
	struct event_base *base;
	int fd;
	int uffd;
	uint64_t seq;
	uint64_t chunk;
};

int unit_prog_open(struct unit_prog *p, struct event_base *base,
    const char *path);
int unit_prog_call(struct unit_prog *p, struct fam_smsg *m, int fd_out,
    int *fd_in);
int unit_prog_alloc(struct unit_prog *p, uint64_t size, uint8_t **addrp,
    uint64_t *handlep);
void unit_prog_close(struct unit_prog *p);

/*
 * A thread that touches memory while the loop serves its faults; a SIGBUS
 * it takes ends its work (sigbus set) instead of the process.
 */
struct unit_touch {
	pthread_t t;
	void (*fn)(void *arg);
	void *arg;
	atomic_bool done;
	bool sigbus;
};

int unit_touch_start(struct unit_touch *t, void (*fn)(void *), void *arg);
bool unit_touch_wait(struct event_base *base, struct unit_touch *t, int ms);

/*
 * Writes (write) or checks the first word of every page of [p, p + len)
 * with a pattern of seed, from a second thread while base serves the
 * faults. Returns the words found wrong, or UINT64_MAX when the thread
 * took SIGBUS or did not end within 60 s.
 */
uint64_t unit_pages(struct event_base *base, volatile uint8_t *p,
    uint64_t len, uint64_t seed, bool write);

/*
 * A memory role and a host role that uses it, both in this process on
 * loopback tcp: op_timeout 1s; buffer_size 1M of 64K chunks, prefetch off
 * unless host_keys (more lines of [host]) set them.
 */
struct unit_famds {
	struct event_base *base;
	struct unit_role mem, dpu, host;
	char *mem_addr, *dpu_addr;
	char session[128];
};

int unit_famds_start(struct unit_famds *u, const char *host_keys);
/* The same with a dpu role between them (the host's [host] dpu). */
int unit_famds_start_dpu(struct unit_famds *u, const char *host_keys);
void unit_famds_stop(struct unit_famds *u);
struct host *unit_famds_host(struct unit_famds *u);

#endif /* FAM_UNIT_H */
