/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base.h - what every layer of famd may use: logging, exit codes and small
 * utilities. Depends on nothing of famd's.
 */
#ifndef FAMD_BASE_H
#define FAMD_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <syslog.h>
#include <sys/types.h>
#include <time.h>

/* Exit codes (sysexits.h values, spelled out so famctl and famd agree). */
#define FAMD_EX_OK          0
#define FAMD_EX_FAIL        1
#define FAMD_EX_USAGE       64
#define FAMD_EX_UNAVAILABLE 69
#define FAMD_EX_SOFTWARE    70
#define FAMD_EX_OSERR       71
#define FAMD_EX_NOPERM      77
#define FAMD_EX_CONFIG      78

#define FAMD_DEFAULT_CONFIG  SYSCONFDIR "/famd.conf"
#define FAMD_DEFAULT_ADMIN   "/run/famd/famd.sock"
#define FAMD_DEFAULT_SESSION "/run/famd/session.sock"

#define nitems(a) (sizeof(a) / sizeof((a)[0]))

#define printflike(a, b) __attribute__((format(printf, a, b)))

/* ---- log.c -------------------------------------------------------------- */

enum log_dest {
	LOG_DEST_STDERR,  /* timestamped lines for a terminal or a test log */
	LOG_DEST_SYSTEMD, /* "<N>" priority prefixes, read by journald */
	LOG_DEST_SYSLOG,  /* a daemonised famd without a terminal */
};

void log_open(enum log_dest dest, int level);
void log_set_level(int level);
int log_get_level(void);
const char *log_level_name(int level);
int log_level_parse(const char *name);
void log_msg(int pri, const char *fmt, ...) printflike(2, 3);
void log_vmsg(int pri, const char *fmt, va_list ap) printflike(2, 0);
__attribute__((noreturn)) void fatal(const char *fmt, ...) printflike(1, 2);
__attribute__((noreturn)) void fatalx(const char *fmt, ...) printflike(1, 2);

/*
 * Rate-limited logging for lines written once per event (a fault, a
 * connection, a message): at most LOG_RATE_BURST lines a second per call
 * site, and a count of those left out.
 */
#define LOG_RATE_BURST 10
struct log_rate {
	uint64_t start_ns; /* CLOCK_MONOTONIC: the current second began */
	unsigned n;        /* lines written in it */
	uint64_t dropped;  /* lines left out in it */
};
void log_rate_msg(struct log_rate *rl, int pri, const char *fmt, ...)
    printflike(3, 4);
/* log_rl(LOG_INFO, ...): log_rate_msg with a limit of its own per call site. */
#define log_rl(pri, ...) do {						\
	static struct log_rate log_rl_;					\
	log_rate_msg(&log_rl_, (pri), __VA_ARGS__);			\
} while (0)

#define log_err(...)    log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...)   log_msg(LOG_WARNING, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_NOTICE, __VA_ARGS__)
#define log_info(...)   log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...)  log_msg(LOG_DEBUG, __VA_ARGS__)

/* ---- util.c ------------------------------------------------------------- */

char *xasprintf(const char *fmt, ...) printflike(1, 2);
uint64_t mono_ns(void);
int fd_set_nonblock(int fd);
int fd_set_cloexec(int fd);
char *fmt_bytes(char *buf, size_t len, uint64_t bytes);
int mkdir_parent(const char *path);
const char *list_item(const char *p, size_t *len, const char **next);

struct event;
/* Back-off of a retried connection: the first delay, doubling to the most. */
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS   5000
void backoff_schedule(struct event *timer, unsigned *backoff_ms);

#endif /* FAMD_BASE_H */
