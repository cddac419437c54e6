/* SPDX-License-Identifier: Apache-2.0 */
/*
 * unit.c - what the Check suites share (unit.h): running a real loop until
 * a condition holds, famd roles started in-process, a program's session
 * with an in-process host role, threads that take page faults.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "host/host.h"
#include "unit.h"

static char unit_tmp[64];

/* Runs base until pred() holds or ms pass; returns pred(). */
bool
unit_run_until(struct event_base *base, bool (*pred)(void), int ms)
{
	uint64_t end = mono_ns() + (uint64_t)ms * 1000000u;

	while (!pred() && mono_ns() < end) {
		struct timeval tv = { 0, 2000 };

		event_base_loopexit(base, &tv);
		event_base_loop(base, EVLOOP_ONCE);
	}
	return pred();
}

/* Runs base until pred(arg) holds or ms pass; returns pred(arg). */
bool
unit_run_until_arg(struct event_base *base, bool (*pred)(void *), void *arg,
    int ms)
{
	uint64_t end = mono_ns() + (uint64_t)ms * 1000000u;

	while (!pred(arg) && mono_ns() < end) {
		struct timeval tv = { 0, 2000 };

		event_base_loopexit(base, &tv);
		event_base_loop(base, EVLOOP_ONCE);
	}
	return pred(arg);
}

/* Never holds: unit_run_for()'s predicate. */
static bool
unit_never(void)
{
	return false;
}

/* Runs base for ms, whatever happens. */
void
unit_run_for(struct event_base *base, int ms)
{
	unit_run_until(base, unit_never, ms);
}

/* Removes the private directory (its few files) at exit. */
static void
unit_dir_remove(void)
{
	char cmd[128];

	if (unit_tmp[0] == '\0')
		return;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", unit_tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "unit: cannot remove %s\n", unit_tmp);
}

/* Returns a private directory with a secret file; made once. */
const char *
unit_dir(void)
{
	char path[sizeof unit_tmp + 16];
	FILE *f;

	if (unit_tmp[0] != '\0')
		return unit_tmp;
	snprintf(unit_tmp, sizeof unit_tmp, "/tmp/famd-unit.XXXXXX");
	if (mkdtemp(unit_tmp) == NULL) {
		perror("mkdtemp");
		exit(1);
	}
	atexit(unit_dir_remove);
	snprintf(path, sizeof path, "%s/secret", unit_tmp);
	f = fopen(path, "w");
	if (f == NULL || fputs("sesame\n", f) < 0 || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
	chmod(path, 0600);
	return unit_tmp;
}

/* Starts a role of this process from a configuration text; 0 or -1. */
int
unit_role_start(struct unit_role *ur, struct event_base *base,
    enum famd_role role, const char *text)
{
	struct cfg_errors errs = { 0 };
	FILE *f = fmemopen((void *)text, strlen(text), "r");

	memset(ur, 0, sizeof *ur);
	if (f == NULL || cfg_load_file(&ur->cfg, f, "unit.conf", NULL, 0,
	    &errs) < 0) {
		for (size_t i = 0; i < errs.count; i++)
			fprintf(stderr, "unit: %s\n", errs.msg[i]);
		cfg_errors_free(&errs);
		if (f != NULL)
			fclose(f);
		return -1;
	}
	fclose(f);
	ur->d.base = base;
	ur->d.cfg = &ur->cfg;
	ur->d.cfg_path = ur->cfg.path;
	ur->d.role = role;
	ur->d.ops = role == ROLE_HOST ? &role_host_ops : role == ROLE_DPU ?
	    &role_dpu_ops : &role_memory_ops;
	time(&ur->d.started);
	clock_gettime(CLOCK_MONOTONIC, &ur->d.started_mono);
	if (famd == NULL)
		famd = &ur->d;
	admin_unregister_all(); /* each role registers its commands */
	if (ur->d.ops->start(&ur->d) < 0)
		return -1;
	ur->up = true;
	return 0;
}

/* Stops a role started by unit_role_start() (once). */
void
unit_role_stop(struct unit_role *ur)
{
	if (!ur->up)
		return;
	ur->d.ops->stop(&ur->d);
	ur->up = false;
	if (famd == &ur->d)
		famd = NULL;
}

/* Returns the address the role listens on (status: section.listen). */
char *
unit_role_listen(struct unit_role *ur, const char *section)
{
	json_t *st = json_pack("{s:[]}", "peers");
	const char *addr;
	char *copy;

	ur->d.ops->status(&ur->d, st);
	addr = json_string_value(json_object_get(json_object_get(st,
	    section), "listen"));
	copy = addr != NULL ? strdup(addr) : NULL;
	json_decref(st);
	return copy;
}

/* Tells whether fd has something to read. */
static bool
unit_readable(void *arg)
{
	struct pollfd pfd = { .fd = *(int *)arg, .events = POLLIN };

	return poll(&pfd, 1, 0) == 1;
}

/*
 * Sends request m (with descriptor fd_out when >= 0) and runs the loop
 * until the reply is back in m (its descriptor in *fd_in); returns 0 or
 * -errno (the reply's status too).
 */
int
unit_prog_call(struct unit_prog *p, struct fam_smsg *m, int fd_out,
    int *fd_in)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct iovec iov = { m, sizeof *m };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	uint16_t type = m->type;
	ssize_t n;

	m->magic = FAM_SESSION_MAGIC;
	m->version = FAM_SESSION_VERSION;
	m->seq = ++p->seq;
	m->len = 0;
	if (fd_out >= 0) {
		memset(&u, 0, sizeof u);
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof u.buf;
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd_out, sizeof(int));
	}
	if (sendmsg(p->fd, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof *m)
		return -EIO;
	if (!unit_run_until_arg(p->base, unit_readable, &p->fd, 10000))
		return -ETIMEDOUT;
	memset(&u, 0, sizeof u);
	mh = (struct msghdr){ .msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = u.buf, .msg_controllen = sizeof u.buf };
	n = recvmsg(p->fd, &mh, MSG_WAITALL | MSG_CMSG_CLOEXEC);
	if (n != (ssize_t)sizeof *m || m->type != type || m->seq != p->seq)
		return -EPROTO;
	cm = CMSG_FIRSTHDR(&mh);
	if (fd_in != NULL)
		*fd_in = -1;
	if (cm != NULL && cm->cmsg_type == SCM_RIGHTS) {
		int fd;

		memcpy(&fd, CMSG_DATA(cm), sizeof fd);
		if (fd_in != NULL)
			*fd_in = fd;
		else
			close(fd);
	}
	return m->status != 0 ? -m->status : 0;
}

/* Opens a session at path: HELLO, then our own userfaultfd. */
int
unit_prog_open(struct unit_prog *p, struct event_base *base,
    const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct fam_smsg m = { .type = FAM_S_HELLO, .a = FAM_SESSION_VERSION };
	int rc;

	memset(p, 0, sizeof *p);
	p->base = base;
	p->uffd = -1;
	snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
	p->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->fd < 0 || connect(p->fd, (struct sockaddr *)&sun,
	    sizeof sun) < 0)
		return -errno;
	rc = unit_prog_call(p, &m, -1, NULL);
	if (rc < 0)
		return rc;
	p->chunk = m.a;
	p->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (p->uffd < 0)
		return -errno;
	m = (struct fam_smsg){ .type = FAM_S_UFFD };
	return unit_prog_call(p, &m, p->uffd, NULL);
}

/*
 * Allocates a region of size bytes; maps its arena when it is new (a
 * program maps each arena once; here every region asks for a fresh one
 * only the first time). Sets *addrp and *handlep.
 */
int
unit_prog_alloc(struct unit_prog *p, uint64_t size, uint8_t **addrp,
    uint64_t *handlep)
{
	static uint8_t *bases[64];
	struct fam_smsg m = { .type = FAM_S_ALLOC, .a = size };
	int memfd = -1, rc = unit_prog_call(p, &m, -1, &memfd);
	uint64_t id = m.a, off = m.b, handle = m.d;
	struct stat st;
	void *base;

	if (rc < 0)
		return rc;
	if (id == 0 || id >= 64)
		return -EPROTO;
	if (memfd >= 0) {
		if (fstat(memfd, &st) < 0)
			return -errno;
		base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_NORESERVE, memfd, 0);
		close(memfd);
		if (base == MAP_FAILED)
			return -errno;
		bases[id] = base;
		m = (struct fam_smsg){ .type = FAM_S_MAP, .a = id,
			.b = (uint64_t)(uintptr_t)base };
		rc = unit_prog_call(p, &m, -1, NULL);
		if (rc < 0)
			return rc;
	}
	if (bases[id] == NULL)
		return -EPROTO;
	*addrp = bases[id] + off;
	*handlep = handle;
	return 0;
}

/* Ends the session (the host sees the socket close). */
void
unit_prog_close(struct unit_prog *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}

static _Thread_local sigjmp_buf *unit_jmp;
static _Thread_local struct unit_touch *unit_self;

/* A SIGBUS in a touching thread ends its work. */
static void
unit_sigbus(int sig)
{
	if (unit_jmp != NULL && unit_self != NULL) {
		unit_self->sigbus = true;
		siglongjmp(*unit_jmp, 1);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Runs a touching thread's work under the SIGBUS handler. */
static void *
unit_touch_main(void *arg)
{
	struct unit_touch *t = arg;
	sigjmp_buf jb;

	unit_self = t;
	unit_jmp = &jb;
	if (sigsetjmp(jb, 1) == 0)
		t->fn(t->arg);
	unit_jmp = NULL;
	atomic_store(&t->done, true);
	return NULL;
}

/* Starts a thread running fn(arg); 0 or -errno. */
int
unit_touch_start(struct unit_touch *t, void (*fn)(void *), void *arg)
{
	struct sigaction sa = { .sa_handler = unit_sigbus };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, NULL);
	t->fn = fn;
	t->arg = arg;
	t->sigbus = false;
	atomic_store(&t->done, false);
	return -pthread_create(&t->t, NULL, unit_touch_main, t);
}

/* Tells whether a touching thread is through. */
static bool
unit_touch_done(void *arg)
{
	struct unit_touch *t = arg;

	return atomic_load(&t->done);
}

/*
 * Runs the loop (which serves the thread's faults) until the thread is
 * through, ms at most; joins it. Returns whether it finished.
 */
bool
unit_touch_wait(struct event_base *base, struct unit_touch *t, int ms)
{
	if (!unit_run_until_arg(base, unit_touch_done, t, ms))
		return false;
	pthread_join(t->t, NULL);
	return true;
}

/* What unit_pages() gives its thread. */
struct unit_pages_work {
	volatile uint8_t *p;
	uint64_t len, seed;
	bool write;
	uint64_t wrong;
};

/* Writes or checks the first word of every page. */
static void
unit_pages_touch(void *arg)
{
	struct unit_pages_work *w = arg;

	for (uint64_t off = 0; off < w->len; off += 4096) {
		volatile uint64_t *q = (volatile uint64_t *)(w->p + off);
		uint64_t want = (off * 0x9e3779b97f4a7c15ull) ^ w->seed;

		if (w->write)
			*q = want;
		else if (*q != want)
			w->wrong++;
	}
}

/* Writes (or checks) a pattern in [p, p + len) from a second thread. */
uint64_t
unit_pages(struct event_base *base, volatile uint8_t *p, uint64_t len,
    uint64_t seed, bool write)
{
	struct unit_pages_work w = { .p = p, .len = len, .seed = seed,
		.write = write };
	struct unit_touch t;

	if (unit_touch_start(&t, unit_pages_touch, &w) != 0 ||
	    !unit_touch_wait(base, &t, 60000) || t.sigbus)
		return UINT64_MAX;
	return w.wrong;
}

/* Returns the in-process host role's state. */
struct host *
unit_famds_host(struct unit_famds *u)
{
	return u->host.d.role_state;
}

/* Tells whether the host's first memory node (and its dpu) are up. */
static bool
unit_node_up(void *arg)
{
	struct host *h = unit_famds_host(arg);

	return h != NULL && h->nodes[0].state == MN_UP &&
	    (!h->has_dpu || h->dpu.state == MN_UP);
}

/* Tells whether the dpu has its memory node (it refuses hosts before). */
static bool
unit_dpu_ready(void *arg)
{
	struct unit_famds *u = arg;
	json_t *st = json_pack("{s:[]}", "peers"), *peer;
	size_t i;
	bool up = false;

	u->dpu.d.ops->status(&u->dpu.d, st);
	json_array_foreach(json_object_get(st, "peers"), i, peer)
		if (strcmp(json_string_value(json_object_get(peer, "role")),
		    "memory") == 0)
			up = strcmp(json_string_value(json_object_get(peer,
			    "state")), "up") == 0;
	json_decref(st);
	return up;
}

/* Returns "key = def\n" unless keys set key themselves, else "". */
static const char *
unit_default(const char *keys, const char *key, const char *def)
{
	static char buf[4][64];
	static unsigned next;
	char *b = buf[next++ % 4];

	if (keys != NULL && strstr(keys, key) != NULL)
		return "";
	snprintf(b, sizeof buf[0], "%s = %s\n", key, def);
	return b;
}

/*
 * Starts a memory role on a loopback port, a dpu role in front of it when
 * dpu is set, and a host role that uses them, and runs the loop until the
 * host is connected; 0 or -1.
 */
static int
unit_famds_run(struct unit_famds *u, const char *host_keys, bool dpu)
{
	const char *dir = unit_dir();
	char *text;
	int rc;

	memset(u, 0, sizeof *u);
	signal(SIGPIPE, SIG_IGN);
	log_open(LOG_DEST_STDERR, LOG_ERR);
	u->base = event_base_new();
	if (u->base == NULL)
		return -1;
	text = xasprintf("[famd]\nrole = memory\nnode_name = unit-memory\n"
	    "secret_file = %s/secret\nop_timeout = 1s\n"
	    "[memory]\nlisten = 127.0.0.1:0\ncapacity = 256M\n"
	    "preload_dir = %s\nsession_grace = 0\n", dir, dir);
	rc = unit_role_start(&u->mem, u->base, ROLE_MEMORY, text);
	free(text);
	if (rc < 0 || (u->mem_addr = unit_role_listen(&u->mem, "memory")) ==
	    NULL)
		return -1;
	if (dpu) {
		text = xasprintf("[famd]\nrole = dpu\nnode_name = unit-dpu\n"
		    "secret_file = %s/secret\nop_timeout = 1s\n"
		    "[dpu]\nlisten = 127.0.0.1:0\nmemory_nodes = %s\n", dir,
		    u->mem_addr);
		rc = unit_role_start(&u->dpu, u->base, ROLE_DPU, text);
		free(text);
		if (rc < 0 || (u->dpu_addr = unit_role_listen(&u->dpu,
		    "dpu")) == NULL ||
		    !unit_run_until_arg(u->base, unit_dpu_ready, u, 5000))
			return -1;
	}
	snprintf(u->session, sizeof u->session, "%s/session.sock", dir);
	text = xasprintf("[famd]\nrole = host\nnode_name = unit-host\n"
	    "secret_file = %s/secret\nop_timeout = 1s\n"
	    "[host]\nmemory_nodes = %s\nsession_socket = %s\n"
	    "arena_size = 1G\n%s%s%s%s%s%s%s", dir, u->mem_addr, u->session,
	    dpu ? "dpu = " : "", dpu ? u->dpu_addr : "", dpu ? "\n" : "",
	    unit_default(host_keys, "buffer_size", "1M"),
	    unit_default(host_keys, "chunk_size", "64K"),
	    unit_default(host_keys, "prefetch", "0"),
	    host_keys != NULL ? host_keys : "");
	rc = unit_role_start(&u->host, u->base, ROLE_HOST, text);
	free(text);
	if (rc < 0)
		return -1;
	return unit_run_until_arg(u->base, unit_node_up, u, 5000) ? 0 : -1;
}

/* Starts a memory role and a host role that uses it; 0 or -1. */
int
unit_famds_start(struct unit_famds *u, const char *host_keys)
{
	return unit_famds_run(u, host_keys, false);
}

/* Starts a memory role, a dpu before it, and a host using both; 0 or -1. */
int
unit_famds_start_dpu(struct unit_famds *u, const char *host_keys)
{
	return unit_famds_run(u, host_keys, true);
}

/* Stops the host role, then the memory role. */
void
unit_famds_stop(struct unit_famds *u)
{
	unit_role_stop(&u->host);
	unit_role_stop(&u->dpu);
	unit_role_stop(&u->mem);
	free(u->mem_addr);
	free(u->dpu_addr);
	u->mem_addr = u->dpu_addr = NULL;
	if (u->base != NULL)
		event_base_free(u->base);
	u->base = NULL;
}
