/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famd.c - the daemon's start, control loop and stop; control.c holds
 * what runs once it serves (reload, uptime, shutdown).
 *
 * Start-up order: configuration -> log -> daemonise -> event loop ->
 * signals -> admin socket (and its lock) -> role -> READY. Stop runs the
 * same in reverse.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "core/famd.h"

static struct famd famd_state;
static struct cfg famd_cfg;
static int famd_ready_fd = -1; /* tells a waiting parent we started */

static const struct role_ops *const famd_roles[ROLE_COUNT] = {
	[ROLE_HOST] = &role_host_ops,
	[ROLE_DPU] = &role_dpu_ops,
	[ROLE_MEMORY] = &role_memory_ops,
};

/* Prints the usage message. */
static void
famd_usage(FILE *f)
{
	fprintf(f, "usage: famd [-ftV] [-c file] [-o section.key=value]...\n"
	    "  -c file  configuration file (default %s)\n"
	    "  -f       stay in the foreground and log to stderr\n"
	    "  -t       check the configuration and exit\n"
	    "  -o s.k=v override one key of the configuration\n"
	    "  -V, --version  print the version and exit\n"
	    "  -h, --help     print this and exit\n", FAMD_DEFAULT_CONFIG);
}

/* Handles SIGTERM, SIGINT and SIGHUP on the control loop. */
static void
famd_signal_cb(evutil_socket_t sig, short what, void *arg)
{
	char *cause = NULL;

	switch (sig) {
	case SIGHUP:
		if (famd_reload(&cause) < 0)
			free(cause);
		break;
	case SIGTERM:
		famd_shutdown("SIGTERM");
		break;
	case SIGINT:
		famd_shutdown("SIGINT");
		break;
	}
}

/*
 * Forks into the background. The parent waits until the child reports that
 * it serves (or dies) and exits with the child's start-up status.
 */
static void
famd_daemonize(void)
{
	int pfd[2], fd;
	pid_t pid;
	char c;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		fatal("pipe");
	pid = fork();
	if (pid < 0)
		fatal("fork");
	if (pid > 0) {
		close(pfd[1]);
		if (read(pfd[0], &c, 1) == 1)
			_exit(FAMD_EX_OK);
		fprintf(stderr, "famd: failed to start; see the system log\n");
		_exit(FAMD_EX_FAIL);
	}
	close(pfd[0]);
	famd_ready_fd = pfd[1];
	if (setsid() < 0)
		fatal("setsid");
	fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, STDIN_FILENO);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		if (fd > STDERR_FILENO)
			close(fd);
	}
	if (chdir("/") < 0)
		fatal("chdir /");
}

/* Chooses where the log goes: journald prefixes, stderr or syslog. */
static enum log_dest
famd_log_dest(bool foreground)
{
	if (getenv("NOTIFY_SOCKET") != NULL || getenv("JOURNAL_STREAM") != NULL)
		return LOG_DEST_SYSTEMD;
	return foreground ? LOG_DEST_STDERR : LOG_DEST_SYSLOG;
}

/* What the command line asks for. */
struct famd_opts {
	const char *cfg_path;
	char **overrides;
	size_t noverrides;
	bool foreground;
	bool check;
};

/*
 * Parses the command line into o. Returns -1 to go on, or the exit code
 * when famd is done (-h, -V, a usage error).
 */
static int
famd_parse_opts(int argc, char **argv, struct famd_opts *o)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int ch;

	o->cfg_path = FAMD_DEFAULT_CONFIG;
	while ((ch = getopt_long(argc, argv, "c:fho:tV", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			o->cfg_path = optarg;
			break;
		case 'f':
			o->foreground = true;
			break;
		case 'o':
			o->overrides = realloc(o->overrides,
			    (o->noverrides + 1) * sizeof *o->overrides);
			if (o->overrides == NULL)
				abort();
			o->overrides[o->noverrides++] = optarg;
			break;
		case 't':
			o->check = true;
			break;
		case 'V':
			printf("famd %s\n", PACKAGE_VERSION);
			return FAMD_EX_OK;
		case 'h':
			famd_usage(stdout);
			return FAMD_EX_OK;
		default:
			famd_usage(stderr);
			return FAMD_EX_USAGE;
		}
	}
	if (optind != argc) {
		famd_usage(stderr);
		return FAMD_EX_USAGE;
	}
	return -1;
}

/*
 * path made absolute against the working directory: famd changes to / when
 * it detaches, and a reload reads the file again from there.
 */
static const char *
famd_abs_path(const char *path)
{
	static char buf[PATH_MAX];
	char cwd[PATH_MAX];

	if (path[0] == '/' || getcwd(cwd, sizeof cwd) == NULL ||
	    snprintf(buf, sizeof buf, "%s/%s", cwd, path) >= (int)sizeof buf)
		return path;
	return buf;
}

/*
 * Raises the soft limit on descriptors to the hard one: every session of
 * a host (max_sessions) and every peer of a memory node holds some.
 */
static void
famd_raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/*
 * Runs the daemon from a loaded configuration: the control loop, its
 * signals, the admin socket and the role, until a stop. Returns the exit code.
 */
static int
famd_serve(const struct famd_opts *o)
{
	static const int signums[3] = { SIGTERM, SIGINT, SIGHUP };
	struct event *sigs[3];
	char *cause = NULL;

	famd = &famd_state;
	famd->cfg = &famd_cfg;
	famd->cfg_path = famd_abs_path(o->cfg_path);
	famd->overrides = o->overrides;
	famd->noverrides = o->noverrides;
	famd->role = (enum famd_role)cfg_int(&famd_cfg, CFG_ROLE);
	famd->ops = famd_roles[famd->role];

	log_open(famd_log_dest(o->foreground),
	    (int)cfg_int(&famd_cfg, CFG_LOG_LEVEL) + LOG_ERR);
	if (!o->foreground)
		famd_daemonize();
	signal(SIGPIPE, SIG_IGN);
	famd_raise_nofile();

	if (evthread_use_pthreads() < 0)
		fatalx("libevent: no pthreads support");
	famd->base = event_base_new();
	if (famd->base == NULL)
		fatalx("libevent: cannot create the event loop");
	for (int i = 0; i < 3; i++) {
		sigs[i] = evsignal_new(famd->base, signums[i], famd_signal_cb,
		    NULL);
		if (sigs[i] == NULL || evsignal_add(sigs[i], NULL) < 0)
			fatalx("libevent: cannot watch signal %d", signums[i]);
	}
	time(&famd->started);
	clock_gettime(CLOCK_MONOTONIC, &famd->started_mono);
	if (cpu_latency_init(&famd->qos, famd->base,
	    cfg_int(&famd_cfg, CFG_CPU_LATENCY)) < 0)
		fatalx("libevent: cannot create a timer");

	admin_cmds_register();
	if (admin_open(famd, &cause) < 0) {
		log_err("%s", cause);
		free(cause);
		return FAMD_EX_FAIL;
	}
	if (famd->ops->start(famd) < 0) {
		log_err("the %s role failed to start", famd->ops->name);
		admin_close();
		return FAMD_EX_FAIL;
	}
	if (metrics_http_open(famd, &cause) < 0) {
		log_err("%s", cause);
		free(cause);
		famd->ops->stop(famd);
		admin_close();
		return FAMD_EX_FAIL;
	}

	log_notice("famd %s started as %s (config %s, admin %s)",
	    PACKAGE_VERSION, famd->ops->name, o->cfg_path,
	    cfg_str(famd->cfg, CFG_ADMIN_SOCKET));
	notify_ready();
	notify_status("serving as %s", famd->ops->name);
	if (famd_ready_fd >= 0) {
		if (write(famd_ready_fd, "", 1) < 0)
			log_warn("cannot tell the parent we started: %s",
			    strerror(errno));
		close(famd_ready_fd);
	}

	event_base_dispatch(famd->base);

	metrics_http_close();
	famd->ops->stop(famd);
	cpu_latency_fini(&famd->qos);
	admin_close();
	for (int i = 0; i < 3; i++)
		event_free(sigs[i]);
	event_base_free(famd->base);
	return FAMD_EX_OK;
}

/* famd: loads the configuration, then checks it (-t) or serves. */
int
main(int argc, char **argv)
{
	struct famd_opts o = { 0 };
	struct cfg_errors errs = { 0 };
	int rc;

	if ((rc = famd_parse_opts(argc, argv, &o)) >= 0) {
		free(o.overrides);
		return rc;
	}
	if (cfg_load(&famd_cfg, o.cfg_path, o.overrides, o.noverrides,
	    &errs) < 0) {
		for (size_t i = 0; i < errs.count; i++)
			fprintf(stderr, "famd: %s\n", errs.msg[i]);
		fprintf(stderr, "famd: %zu error%s in the configuration\n",
		    errs.count, errs.count == 1 ? "" : "s");
		cfg_errors_free(&errs);
		cfg_free(&famd_cfg);
		free(o.overrides);
		return FAMD_EX_CONFIG;
	}
	if (o.check) {
		printf("%s: configuration OK (role %s)\n", o.cfg_path,
		    cfg_role_names[cfg_int(&famd_cfg, CFG_ROLE)]);
		cfg_free(&famd_cfg);
		free(o.overrides);
		return FAMD_EX_OK;
	}
	rc = famd_serve(&o);
	if (rc != FAMD_EX_OK)
		return rc;
	cfg_free(&famd_cfg);
	free(o.overrides);
	admin_unregister_all();
	libevent_global_shutdown();
	log_notice("stopped");
	return FAMD_EX_OK;
}
