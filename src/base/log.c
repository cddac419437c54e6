/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.c - famd's log: stderr for a terminal, "<N>" prefixes for journald,
 * syslog for a daemonised process. Each message is one write(2) so lines
 * from several threads never interleave.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <syslog.h>
#include <unistd.h>

#include "base/base.h"

static enum log_dest log_dest = LOG_DEST_STDERR;
static _Atomic int log_level = LOG_INFO;
/* the rate limits' counts: a call site may log from several threads */
static pthread_mutex_t log_rate_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const log_names[] = {
	[LOG_EMERG] = "emerg",
	[LOG_ALERT] = "alert",
	[LOG_CRIT] = "crit",
	[LOG_ERR] = "err",
	[LOG_WARNING] = "warning",
	[LOG_NOTICE] = "notice",
	[LOG_INFO] = "info",
	[LOG_DEBUG] = "debug",
};

/* Chooses where messages go and the most verbose level written. */
void
log_open(enum log_dest dest, int level)
{
	log_dest = dest;
	log_level = level;
	if (dest == LOG_DEST_SYSLOG)
		openlog("famd", LOG_PID | LOG_NDELAY, LOG_DAEMON);
}

/* Changes the most verbose level written. */
void
log_set_level(int level)
{
	log_level = level;
}

/* Returns the most verbose level written. */
int
log_get_level(void)
{
	return log_level;
}

/* Returns the name of a syslog level. */
const char *
log_level_name(int level)
{
	if (level < 0 || level > LOG_DEBUG)
		return "unknown";
	return log_names[level];
}

/* Returns the level named by name (err, warning, ...) or -1. */
int
log_level_parse(const char *name)
{
	for (int i = LOG_ERR; i <= LOG_DEBUG; i++)
		if (strcmp(name, log_names[i]) == 0)
			return i;
	if (strcmp(name, "error") == 0)
		return LOG_ERR;
	if (strcmp(name, "warn") == 0)
		return LOG_WARNING;
	return -1;
}

/* Writes one message at priority pri. */
void
log_vmsg(int pri, const char *fmt, va_list ap)
{
	char msg[2048], line[2200];
	int n;

	if (pri > log_level)
		return;
	vsnprintf(msg, sizeof msg, fmt, ap);

	switch (log_dest) {
	case LOG_DEST_SYSLOG:
		syslog(pri, "%s", msg);
		return;
	case LOG_DEST_SYSTEMD:
		n = snprintf(line, sizeof line, "<%d>%s\n", pri, msg);
		break;
	case LOG_DEST_STDERR:
	default: {
		struct timeval tv;
		struct tm tm;
		char ts[32];

		gettimeofday(&tv, NULL);
		localtime_r(&tv.tv_sec, &tm);
		strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
		n = snprintf(line, sizeof line, "%s.%03ld famd[%ld]: %s: %s\n",
		    ts, (long)(tv.tv_usec / 1000), (long)getpid(),
		    log_level_name(pri), msg);
		break;
	}
	}
	if (n < 0)
		return;
	if ((size_t)n >= sizeof line) {
		n = sizeof line - 1;
		line[n - 1] = '\n';
	}
	while (write(STDERR_FILENO, line, (size_t)n) < 0 && errno == EINTR)
		;
}

/* Writes one message at priority pri. */
void
log_msg(int pri, const char *fmt, ...)
{
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	log_vmsg(pri, fmt, ap);
	va_end(ap);
	errno = saved;
}

/*
 * Writes one message of a per-event kind at priority pri, unless that kind
 * already wrote LOG_RATE_BURST lines in the current second; the first line
 * of a new second says how many were left out. Logs nothing (and counts
 * nothing) when pri is not written at the current level.
 */
void
log_rate_msg(struct log_rate *rl, int pri, const char *fmt, ...)
{
	uint64_t now = mono_ns(), dropped = 0;
	va_list ap;
	int saved = errno;

	if (pri > log_level)
		return;
	pthread_mutex_lock(&log_rate_lock);
	if (now - rl->start_ns >= 1000000000u || rl->start_ns == 0) {
		dropped = rl->dropped;
		rl->start_ns = now;
		rl->n = 0;
		rl->dropped = 0;
	}
	if (rl->n >= LOG_RATE_BURST) {
		rl->dropped++;
		pthread_mutex_unlock(&log_rate_lock);
		return;
	}
	rl->n++;
	pthread_mutex_unlock(&log_rate_lock);
	if (dropped > 0)
		log_msg(pri, "(%llu more messages like the next left out in "
		    "the last second)", (unsigned long long)dropped);
	va_start(ap, fmt);
	log_vmsg(pri, fmt, ap);
	va_end(ap);
	errno = saved;
}

/* Logs a start-up failure with errno's text and exits. */
void
fatal(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int saved = errno;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	log_msg(LOG_CRIT, "%s: %s", msg, strerror(saved));
	exit(FAMD_EX_OSERR);
}

/* Logs a start-up failure and exits. */
void
fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(LOG_CRIT, fmt, ap);
	va_end(ap);
	exit(FAMD_EX_SOFTWARE);
}
