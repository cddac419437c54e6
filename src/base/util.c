/* SPDX-License-Identifier: Apache-2.0 */
/*
 * util.c - small helpers shared by famd's modules.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <event2/event.h>

#include "base/base.h"

/* Returns a newly allocated formatted string; aborts on exhaustion. */
char *
xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		abort();
	va_end(ap);
	return s;
}

/* Returns CLOCK_MONOTONIC in nanoseconds. */
uint64_t
mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Sets O_NONBLOCK on fd. */
int
fd_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return 0;
}

/* Sets FD_CLOEXEC on fd. */
int
fd_set_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);

	if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0)
		return -1;
	return 0;
}

/* Formats a byte count for people: 512 B, 64.0 KiB, 1.5 GiB. */
char *
fmt_bytes(char *buf, size_t len, uint64_t bytes)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB",
		"PiB" };
	double v = (double)bytes;
	size_t u = 0;

	while (v >= 1024 && u + 1 < nitems(unit)) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
	return buf;
}

/* Creates the directory holding path (one level, mode 0755) if missing. */
int
mkdir_parent(const char *path)
{
	char dir[4096];
	char *slash;

	snprintf(dir, sizeof dir, "%s", path);
	slash = strrchr(dir, '/');
	if (slash == NULL || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/*
 * Returns the item of a comma-separated list that starts at p, spaces
 * around it trimmed, its length in *len; *next is where the next item
 * starts, or NULL after the last.
 */
const char *
list_item(const char *p, size_t *len, const char **next)
{
	const char *e = strchr(p, ',');
	size_t n = e != NULL ? (size_t)(e - p) : strlen(p);

	while (n > 0 && *p == ' ') {
		p++;
		n--;
	}
	while (n > 0 && p[n - 1] == ' ')
		n--;
	*len = n;
	*next = e != NULL ? e + 1 : NULL;
	return p;
}

/*
 * Arms timer for the next attempt of a retried connection: *backoff_ms
 * starts at BACKOFF_FIRST_MS and doubles up to BACKOFF_MAX_MS (0 after a
 * success starts it again).
 */
void
backoff_schedule(struct event *timer, unsigned *backoff_ms)
{
	struct timeval tv;

	*backoff_ms = *backoff_ms == 0 ? BACKOFF_FIRST_MS : *backoff_ms * 2;
	if (*backoff_ms > BACKOFF_MAX_MS)
		*backoff_ms = BACKOFF_MAX_MS;
	tv.tv_sec = *backoff_ms / 1000;
	tv.tv_usec = (*backoff_ms % 1000) * 1000;
	evtimer_add(timer, &tv);
}
