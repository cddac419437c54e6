/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cfg.c - reads famd.conf (INI, through inih) against the key table, and
 * writes the example files and the man page's key list from that table.
 *
 * inih reports neither the line of a key nor long or indented lines, so the
 * file is fed to it through cfg_read_line(), which numbers the lines and
 * turns every line it rejects into a blank one after recording the error.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "core/famd.h"

#define CFG_BAD_SECTION "!invalid"
#define CFG_MAX_LINE    (INI_MAX_LINE - 2)

struct cfg_parse {
	struct cfg *cfg;
	struct cfg_errors *errs;
	const char *path;
	FILE *f;
	unsigned line;
	char *buf;
	size_t bufsz;
};

/* Appends one message to errs. */
void
cfg_error(struct cfg_errors *errs, const char *fmt, ...)
{
	va_list ap;
	char *msg;
	char **n;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		abort();
	va_end(ap);
	n = realloc(errs->msg, (errs->count + 1) * sizeof *n);
	if (n == NULL)
		abort();
	errs->msg = n;
	errs->msg[errs->count++] = msg;
}

/* Frees the messages in errs. */
void
cfg_errors_free(struct cfg_errors *errs)
{
	for (size_t i = 0; i < errs->count; i++)
		free(errs->msg[i]);
	free(errs->msg);
	errs->msg = NULL;
	errs->count = 0;
}

/* Returns the index of [section] name, or -1. */
int
cfg_find(const char *section, const char *name)
{
	for (int k = 0; k < CFG_NKEYS; k++)
		if (strcmp(cfg_keys[k].section, section) == 0 &&
		    strcmp(cfg_keys[k].name, name) == 0)
			return k;
	return -1;
}

/* The edit distance between a and b, up to 9 (at most 63 bytes each). */
static unsigned
cfg_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned d[64][64];

	if (la > 63 || lb > 63)
		return 9;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			unsigned sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			unsigned del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;

			d[i][j] = sub < del ? (sub < ins ? sub : ins) :
			    (del < ins ? del : ins);
		}
	return d[la][lb] < 9 ? d[la][lb] : 9;
}

/*
 * Writes into buf (len bytes) a suggestion for an unknown key: "; did you
 * mean [s] k?" naming the closest known key (in any section, at most two
 * edits away, or the same name in another section), or "".
 */
static const char *
cfg_suggest(const char *section, const char *name, char *buf, size_t len)
{
	unsigned best = 3;
	int bk = -1;

	for (int k = 0; k < CFG_NKEYS; k++) {
		unsigned d = cfg_distance(name, cfg_keys[k].name) +
		    (strcmp(cfg_keys[k].section, section) != 0);

		if (d < best) {
			best = d;
			bk = k;
		}
	}
	if (bk < 0)
		buf[0] = '\0';
	else
		snprintf(buf, len, "; did you mean [%s] %s?",
		    cfg_keys[bk].section, cfg_keys[bk].name);
	return buf;
}

/* Returns true when some key lives in section. */
static bool
cfg_section_known(const char *section, size_t len)
{
	for (int k = 0; k < CFG_NKEYS; k++)
		if (strlen(cfg_keys[k].section) == len &&
		    strncmp(cfg_keys[k].section, section, len) == 0)
			return true;
	return false;
}

/* Parses an unsigned number with a unit suffix; mult gives each unit. */
static int
cfg_parse_scaled(const char *text, const char *const *units,
    const int64_t *mult, int64_t defmult, int64_t *out)
{
	unsigned long long v;
	char *end;
	int64_t m = defmult;

	if (!isdigit((unsigned char)*text))
		return -EINVAL;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno != 0)
		return -ERANGE;
	while (*end == ' ')
		end++;
	if (*end != '\0') {
		size_t i;

		for (i = 0; units[i] != NULL; i++)
			if (strcasecmp(end, units[i]) == 0)
				break;
		if (units[i] == NULL)
			return -EINVAL;
		m = mult[i];
	}
	if (v > (unsigned long long)(INT64_MAX / m))
		return -ERANGE;
	*out = (int64_t)v * m;
	return 0;
}

/*
 * Checks "host:port" or "[v6]:port" (port 0 too with any_port); returns a
 * cause or NULL.
 */
static const char *
cfg_check_addr(const char *a, size_t len, bool any_port)
{
	const char *colon;
	char port[8];
	char *end;
	long p;

	if (len == 0)
		return "empty address";
	if (a[0] == '[') {
		const char *rb = memchr(a, ']', len);

		if (rb == NULL || rb + 1 >= a + len || rb[1] != ':')
			return "expected [address]:port";
		colon = rb + 1;
	} else {
		colon = NULL;
		for (const char *p2 = a; p2 < a + len; p2++)
			if (*p2 == ':')
				colon = p2;
		if (colon == NULL)
			return "expected host:port";
		if (colon == a)
			return "missing host before ':'";
	}
	len -= (size_t)(colon + 1 - a);
	if (len == 0 || len >= sizeof port)
		return "port must be 1 to 65535";
	memcpy(port, colon + 1, len);
	port[len] = '\0';
	errno = 0;
	p = strtol(port, &end, 10);
	if (errno != 0 || *end != '\0' || p < (any_port ? 0 : 1) || p > 65535)
		return any_port ? "port must be 0 to 65535" :
		    "port must be 1 to 65535";
	return NULL;
}

/* Formats a numeric value of key in the units the table shows it in. */
static char *
cfg_format_number(const struct cfg_key_def *d, int64_t v)
{
	static const char sfx[] = { 'T', 'G', 'M', 'K' };

	if (d->type == CFG_T_SIZE) {
		for (int i = 0; i < 4; i++) {
			int64_t m = (int64_t)1 << (10 * (4 - i));

			if (v != 0 && v % m == 0)
				return xasprintf("%" PRId64 "%c", v / m,
				    sfx[i]);
		}
	} else if (d->type == CFG_T_DURATION) {
		if (v % 3600000 == 0 && v != 0)
			return xasprintf("%" PRId64 "h", v / 3600000);
		if (v % 60000 == 0 && v != 0)
			return xasprintf("%" PRId64 "m", v / 60000);
		if (v % 1000 == 0)
			return xasprintf("%" PRId64 "s", v / 1000);
		return xasprintf("%" PRId64 "ms", v);
	}
	return xasprintf("%" PRId64, v);
}

/* Parses a boolean (yes|no|true|false|on|off|1|0) into *v. */
static int
cfg_parse_bool(const char *text, int64_t *v, char **cause)
{
	if (!strcasecmp(text, "yes") || !strcasecmp(text, "true") ||
	    !strcasecmp(text, "on") || !strcmp(text, "1"))
		*v = 1;
	else if (!strcasecmp(text, "no") || !strcasecmp(text, "false") ||
	    !strcasecmp(text, "off") || !strcmp(text, "0"))
		*v = 0;
	else {
		*cause = xasprintf("'%s' is not a boolean (use yes or no)", text);
		return -EINVAL;
	}
	return 0;
}

/* Parses a decimal integer into *v. */
static int
cfg_parse_int(const char *text, int64_t *v, char **cause)
{
	char *end;

	errno = 0;
	*v = strtoll(text, &end, 10);
	if (*text == '\0' || *end != '\0' || errno != 0) {
		*cause = xasprintf("'%s' is not an integer", text);
		return -EINVAL;
	}
	return 0;
}

/* Parses a size (K, M, G or T suffix, powers of two) into *v bytes. */
static int
cfg_parse_size(const char *text, int64_t *v, char **cause)
{
	static const char *const units[] = { "k", "kib", "kb", "m",
		"mib", "mb", "g", "gib", "gb", "t", "tib", "tb", "b", NULL };
	static const int64_t mult[] = { 1 << 10, 1 << 10, 1 << 10,
		1 << 20, 1 << 20, 1 << 20, 1 << 30, 1 << 30, 1 << 30,
		(int64_t)1 << 40, (int64_t)1 << 40, (int64_t)1 << 40, 1 };

	if (cfg_parse_scaled(text, units, mult, 1, v) < 0) {
		*cause = xasprintf("'%s' is not a size (a number with an "
		    "optional K, M, G or T suffix)", text);
		return -EINVAL;
	}
	return 0;
}

/* Parses a duration (seconds, or a ms, s, m or h suffix) into *v ms. */
static int
cfg_parse_duration(const char *text, int64_t *v, char **cause)
{
	static const char *const units[] = { "ms", "s", "m", "min", "h",
		NULL };
	static const int64_t mult[] = { 1, 1000, 60000, 60000, 3600000 };

	if (cfg_parse_scaled(text, units, mult, 1000, v) < 0) {
		*cause = xasprintf("'%s' is not a duration (a number of "
		    "seconds, or with a ms, s, m or h suffix)", text);
		return -EINVAL;
	}
	return 0;
}

/* Parses one of d's choices into *v, its index. */
static int
cfg_parse_enum(const struct cfg_key_def *d, const char *text, int64_t *v,
    char **cause)
{
	size_t n;
	char list[256] = "";

	for (n = 0; d->choices[n] != NULL; n++) {
		if (strcmp(text, d->choices[n]) == 0)
			break;
		if (n > 0)
			strncat(list, ", ", sizeof list - strlen(list) - 1);
		strncat(list, d->choices[n], sizeof list - strlen(list) - 1);
	}
	if (d->choices[n] == NULL) {
		*cause = xasprintf("'%s' is not one of: %s", text, list);
		return -EINVAL;
	}
	*v = (int64_t)n;
	return 0;
}

/* Checks free text: at most d->max characters, no control character. */
static int
cfg_check_string(const struct cfg_key_def *d, const char *text, char **cause)
{
	if ((int64_t)strlen(text) > d->max) {
		*cause = xasprintf("longer than %" PRId64 " characters", d->max);
		return -EINVAL;
	}
	for (const char *p = text; *p != '\0'; p++)
		if (iscntrl((unsigned char)*p)) {
			*cause = xasprintf("control character in value");
			return -EINVAL;
		}
	return 0;
}

/* Checks an absolute path (or an empty one where d allows it). */
static int
cfg_check_path(const struct cfg_key_def *d, const char *text, char **cause)
{
	if (text[0] == '\0' && d->empty_ok)
		return 0;
	if (text[0] != '/') {
		*cause = xasprintf("'%s' is not an absolute path", text);
		return -EINVAL;
	}
	if (strlen(text) >= PATH_MAX) {
		*cause = xasprintf("path too long");
		return -EINVAL;
	}
	return 0;
}

/* Checks one host:port (or an empty one where d allows it). */
static int
cfg_check_one_addr(const struct cfg_key_def *d, const char *text, char **cause)
{
	const char *why;

	if (text[0] == '\0' && d->empty_ok)
		return 0;
	why = cfg_check_addr(text, strlen(text), d->any_port);
	if (why != NULL) {
		*cause = xasprintf("'%s': %s", text, why);
		return -EINVAL;
	}
	return 0;
}

/* Parses a comma-separated host:port list into *v, its length. */
static int
cfg_parse_addrlist(const struct cfg_key_def *d, const char *text, int64_t *v,
    char **cause)
{
	const char *p = text;
	int64_t n = 0;

	if (text[0] == '\0' && d->empty_ok)
		return 0;
	while (p != NULL) {
		size_t len;
		const char *item = list_item(p, &len, &p);
		const char *why = cfg_check_addr(item, len, false);

		if (why != NULL) {
			*cause = xasprintf("'%.*s': %s", (int)len, item, why);
			return -EINVAL;
		}
		n++;
	}
	if (n > d->max) {
		*cause = xasprintf("more than %" PRId64 " addresses", d->max);
		return -EINVAL;
	}
	*v = n;
	return 0;
}

/* Checks a numeric value against d's bounds and its power-of-two rule. */
static int
cfg_check_range(const struct cfg_key_def *d, const char *text, int64_t v,
    char **cause)
{
	if (v < d->min || v > d->max) {
		char *lo = cfg_format_number(d, d->min);
		char *hi = cfg_format_number(d, d->max);

		*cause = xasprintf("'%s' is out of range (%s to %s)", text, lo,
		    hi);
		free(lo);
		free(hi);
		return -EINVAL;
	}
	if (d->pow2 && (v & (v - 1)) != 0) {
		*cause = xasprintf("'%s' is not a power of two", text);
		return -EINVAL;
	}
	return 0;
}

/*
 * Parses text as the value of key into out. On error returns -EINVAL and
 * sets *cause to a message for the operator.
 */
int
cfg_parse_value(enum cfg_key key, const char *text, struct cfg_value *out,
    char **cause)
{
	const struct cfg_key_def *d = &cfg_keys[key];
	bool ranged = false;
	int64_t v = 0;
	int rc = 0;

	*cause = NULL;
	/* Values reach JSON (config.show, status) and the hello's node name. */
	if (!proto_utf8_valid(text, strlen(text))) {
		*cause = xasprintf("not valid UTF-8");
		return -EINVAL;
	}
	switch (d->type) {
	case CFG_T_BOOL:
		rc = cfg_parse_bool(text, &v, cause);
		break;
	case CFG_T_INT:
	case CFG_T_DURATION:
		if ((d->auto_ok && strcmp(text, "auto") == 0) ||
		    (d->off_ok && strcmp(text, "off") == 0)) {
			v = -1; /* "auto", "off": no bounds to check */
			break;
		}
		rc = d->type == CFG_T_INT ? cfg_parse_int(text, &v, cause) :
		    cfg_parse_duration(text, &v, cause);
		ranged = true;
		break;
	case CFG_T_SIZE:
		rc = cfg_parse_size(text, &v, cause);
		ranged = true;
		break;
	case CFG_T_ENUM:
		rc = cfg_parse_enum(d, text, &v, cause);
		break;
	case CFG_T_STRING:
		rc = cfg_check_string(d, text, cause);
		break;
	case CFG_T_PATH:
		rc = cfg_check_path(d, text, cause);
		break;
	case CFG_T_ADDR:
		rc = cfg_check_one_addr(d, text, cause);
		break;
	case CFG_T_ADDRLIST:
		rc = cfg_parse_addrlist(d, text, &v, cause);
		break;
	}
	if (rc == 0 && ranged)
		rc = cfg_check_range(d, text, v, cause);
	if (rc < 0)
		return rc;
	free(out->s);
	out->s = strdup(text);
	if (out->s == NULL)
		abort();
	out->i = v;
	out->set = true;
	return 0;
}

/* Returns the value of key as text, in the units of the table. */
char *
cfg_format_value(enum cfg_key key, const struct cfg_value *v)
{
	const struct cfg_key_def *d = &cfg_keys[key];

	switch (d->type) {
	case CFG_T_BOOL:
		return strdup(v->i ? "yes" : "no");
	case CFG_T_INT:
	case CFG_T_SIZE:
	case CFG_T_DURATION:
		if (d->auto_ok && v->i == -1)
			return strdup("auto");
		if (d->off_ok && v->i == -1)
			return strdup("off");
		return cfg_format_number(d, v->i);
	case CFG_T_ENUM:
		return strdup(d->choices[v->i]);
	default:
		return strdup(v->s != NULL ? v->s : "");
	}
}

/* Returns true when a and b hold the same value of key. */
bool
cfg_equal(enum cfg_key key, const struct cfg_value *a,
    const struct cfg_value *b)
{
	switch (cfg_keys[key].type) {
	case CFG_T_STRING:
	case CFG_T_PATH:
	case CFG_T_ADDR:
	case CFG_T_ADDRLIST:
		return strcmp(a->s != NULL ? a->s : "",
		    b->s != NULL ? b->s : "") == 0;
	default:
		return a->i == b->i;
	}
}

/*
 * Reads the next line for inih, numbering it and rejecting what inih would
 * silently misread: overlong lines, continuation lines, lines that are not
 * a section header, a comment or key = value, and unknown sections.
 */
static char *
cfg_read_line(char *str, int num, void *stream)
{
	struct cfg_parse *p = stream;
	ssize_t n;
	char *s;

	n = getline(&p->buf, &p->bufsz, p->f);
	if (n < 0)
		return NULL;
	p->line++;
	while (n > 0 && (p->buf[n - 1] == '\n' || p->buf[n - 1] == '\r'))
		p->buf[--n] = '\0';
	if (memchr(p->buf, '\0', (size_t)n) != NULL) {
		cfg_error(p->errs, "%s:%u: NUL byte in line", p->path, p->line);
		goto blank;
	}
	if (n > CFG_MAX_LINE || n >= num - 1) {
		cfg_error(p->errs, "%s:%u: line longer than %d characters",
		    p->path, p->line, CFG_MAX_LINE);
		goto blank;
	}
	s = p->buf;
	if (p->line == 1 && (unsigned char)s[0] == 0xef &&
	    (unsigned char)s[1] == 0xbb && (unsigned char)s[2] == 0xbf)
		s += 3;
	if (*s == ' ' || *s == '\t') {
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s != '\0' && *s != '#' && *s != ';') {
			cfg_error(p->errs, "%s:%u: indented line (continuation "
			    "lines are not supported)", p->path, p->line);
			goto blank;
		}
	}
	if (*s == '[') {
		char *rb = strchr(s, ']');
		char *rest = rb != NULL ? rb + 1 : NULL;

		while (rest != NULL && (*rest == ' ' || *rest == '\t'))
			rest++;
		if (rb == NULL || (*rest != '\0' && *rest != ';' &&
		    *rest != '#')) {
			cfg_error(p->errs, "%s:%u: malformed section header",
			    p->path, p->line);
			snprintf(str, (size_t)num, "[%s]\n", CFG_BAD_SECTION);
			return str;
		}
		if (!cfg_section_known(s + 1, (size_t)(rb - s - 1))) {
			cfg_error(p->errs, "%s:%u: unknown section [%.*s]",
			    p->path, p->line, (int)(rb - s - 1), s + 1);
			snprintf(str, (size_t)num, "[%s]\n", CFG_BAD_SECTION);
			return str;
		}
	} else if (*s != '\0' && *s != '#' && *s != ';') {
		char *eq = strchr(s, '=');

		if (eq == NULL || eq == s) {
			cfg_error(p->errs, "%s:%u: expected key = value",
			    p->path, p->line);
			goto blank;
		}
		if (memchr(s, ':', (size_t)(eq - s)) != NULL) {
			cfg_error(p->errs, "%s:%u: ':' in key name (use "
			    "key = value)", p->path, p->line);
			goto blank;
		}
	}
	snprintf(str, (size_t)num, "%s\n", p->buf);
	return str;
blank:
	snprintf(str, (size_t)num, "\n");
	return str;
}

/* Takes one key = value from inih. */
static int
cfg_handle(void *user, const char *section, const char *name,
    const char *value)
{
	struct cfg_parse *p = user;
	struct cfg_value *v;
	char *cause;
	int k;

	if (strcmp(section, CFG_BAD_SECTION) == 0)
		return 1;
	if (*section == '\0') {
		cfg_error(p->errs, "%s:%u: key '%s' outside any section",
		    p->path, p->line, name);
		return 1;
	}
	k = cfg_find(section, name);
	if (k < 0) {
		char hint[160];

		cfg_error(p->errs, "%s:%u: unknown key '%s' in [%s]%s", p->path,
		    p->line, name, section, cfg_suggest(section, name, hint,
		    sizeof hint));
		return 1;
	}
	v = &p->cfg->v[k];
	if (v->line != 0) {
		cfg_error(p->errs, "%s:%u: [%s] %s set twice (first on line "
		    "%u)", p->path, p->line, section, name, v->line);
		return 1;
	}
	if (cfg_parse_value(k, value, v, &cause) < 0) {
		cfg_error(p->errs, "%s:%u: [%s] %s: %s", p->path, p->line,
		    section, name, cause);
		free(cause);
		v->line = p->line;
		return 1;
	}
	v->line = p->line;
	return 1;
}

/* Applies one "section.key=value" from the command line. */
static void
cfg_override(struct cfg *cfg, const char *o, struct cfg_errors *errs)
{
	const char *dot = strchr(o, '.');
	const char *eq = strchr(o, '=');
	char section[64], name[64], *cause;
	int k;

	if (dot == NULL || eq == NULL || dot > eq ||
	    (size_t)(dot - o) >= sizeof section ||
	    (size_t)(eq - dot - 1) >= sizeof name) {
		cfg_error(errs, "-o %s: expected section.key=value", o);
		return;
	}
	snprintf(section, sizeof section, "%.*s", (int)(dot - o), o);
	snprintf(name, sizeof name, "%.*s", (int)(eq - dot - 1), dot + 1);
	k = cfg_find(section, name);
	if (k < 0) {
		char hint[160];

		cfg_error(errs, "-o %s: unknown key '%s' in [%s]%s", o, name,
		    section, cfg_suggest(section, name, hint, sizeof hint));
		return;
	}
	if (cfg_parse_value(k, eq + 1, &cfg->v[k], &cause) < 0) {
		cfg_error(errs, "-o %s: [%s] %s: %s", o, section, name, cause);
		free(cause);
		return;
	}
	cfg->v[k].line = 0;
}

/*
 * Returns true when the host part of "host:port" or "[v6]:port" is a
 * loopback address (127.0.0.0/8, ::1, localhost): only this node reaches it.
 */
static bool
cfg_addr_loopback(const char *a)
{
	const char *colon = strrchr(a, ':');
	char host[64];
	struct in_addr v4;
	struct in6_addr v6;
	size_t len;

	if (colon == NULL)
		return false;
	if (a[0] == '[') {
		a++;
		colon--;
	}
	len = (size_t)(colon - a);
	if (len == 0 || len >= sizeof host)
		return false;
	memcpy(host, a, len);
	host[len] = '\0';
	if (strcmp(host, "localhost") == 0)
		return true;
	if (inet_pton(AF_INET, host, &v4) == 1)
		return (ntohl(v4.s_addr) >> 24) == 127;
	return inet_pton(AF_INET6, host, &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

/*
 * A memory node others can reach must have a secret: without one, any
 * stranger on the network takes its memory. Loopback needs none (tests,
 * one machine).
 */
static void
cfg_check_secret(struct cfg *cfg, const char *path, struct cfg_errors *errs)
{
	const struct cfg_value *l = &cfg->v[CFG_MEMORY_LISTEN];
	const char *addr = cfg_str(cfg, CFG_MEMORY_LISTEN);

	if (cfg->v[CFG_ROLE].i != ROLE_MEMORY ||
	    cfg_str(cfg, CFG_SECRET_FILE)[0] != '\0' || cfg_addr_loopback(addr))
		return;
	if (l->line != 0)
		cfg_error(errs, "%s:%u: [memory] listen = %s is reachable from "
		    "other nodes, and [famd] secret_file is not set: set it "
		    "(peers must prove the secret), or listen on 127.0.0.1",
		    path, l->line, addr);
	else
		cfg_error(errs, "%s: [memory] listen = %s (%s) is reachable "
		    "from other nodes, and [famd] secret_file is not set: set "
		    "it (peers must prove the secret), or listen on 127.0.0.1",
		    path, addr, l->set ? "from the command line" :
		    "the default");
}

/* A host's session_group given in the file or on the command line must exist. */
static void
cfg_check_session_group(struct cfg *cfg, const char *path,
    struct cfg_errors *errs)
{
	const struct cfg_value *g = &cfg->v[CFG_HOST_SESSION_GROUP];

	if (cfg->v[CFG_ROLE].i != ROLE_HOST || !g->set || g->s == NULL ||
	    g->s[0] == '\0' || getgrnam(g->s) != NULL)
		return;
	if (g->line != 0)
		cfg_error(errs, "%s:%u: [host] session_group = %s: no such group "
		    "on this machine", path, g->line, g->s);
	else
		cfg_error(errs, "%s: [host] session_group = %s (from the command "
		    "line): no such group on this machine", path, g->s);
}

/* tls = on needs its three files, and tcp. */
static void
cfg_check_tls(struct cfg *cfg, const char *path, struct cfg_errors *errs)
{
	static const enum cfg_key files[] = { CFG_TLS_CERT, CFG_TLS_KEY,
	    CFG_TLS_CA };
	unsigned line = cfg->v[CFG_TLS].line;

	if (cfg->v[CFG_TLS].i == 0)
		return;
	if (cfg->v[CFG_TRANSPORT].i == CFG_TRANSPORT_VERBS)
		cfg_error(errs, "%s:%u: [famd] tls = on with transport = "
		    "verbs: TLS applies to tcp only (RDMA reads and writes "
		    "bypass it); isolate the verbs fabric instead", path,
		    line != 0 ? line : cfg->v[CFG_TRANSPORT].line);
	for (size_t i = 0; i < nitems(files); i++)
		if (cfg_str(cfg, files[i])[0] == '\0')
			cfg_error(errs, "%s:%u: [famd] tls = on needs [famd] %s",
			    path, line, cfg_keys[files[i]].name);
}

/* Checks the rules that tie several keys together. */
static void
cfg_check(struct cfg *cfg, const char *path, struct cfg_errors *errs)
{
	const struct cfg_value *lo = &cfg->v[CFG_HOST_LOW_WATERMARK];
	const struct cfg_value *hi = &cfg->v[CFG_HOST_HIGH_WATERMARK];

	if (lo->i >= hi->i)
		cfg_error(errs, "%s:%u: [host] low_watermark (%lld) must be "
		    "below high_watermark (%lld)", path,
		    lo->line != 0 ? lo->line : hi->line, (long long)lo->i,
		    (long long)hi->i);
	if (cfg->v[CFG_HOST_CHUNK_SIZE].i > cfg->v[CFG_HOST_BUFFER_SIZE].i / 4)
		cfg_error(errs, "%s:%u: [host] buffer_size must hold at least "
		    "4 chunks", path, cfg->v[CFG_HOST_BUFFER_SIZE].line);
	if (cfg->v[CFG_ROLE].i == ROLE_HOST &&
	    cfg->v[CFG_HOST_PATH].i == CFG_PATH_DPU &&
	    cfg_str(cfg, CFG_HOST_DPU)[0] == '\0')
		cfg_error(errs, "%s:%u: [host] path = dpu needs [host] dpu", path,
		    cfg->v[CFG_HOST_PATH].line);
	cfg_redundancy_check(cfg, path, errs);
	cfg_check_secret(cfg, path, errs);
	cfg_check_session_group(cfg, path, errs);
	cfg_check_tls(cfg, path, errs);
}

/*
 * Loads path, then the overrides, then the defaults of keys not given.
 * Returns 0, or -EINVAL with every problem in errs.
 */
int
cfg_load(struct cfg *cfg, const char *path, char *const *overrides,
    size_t noverrides, struct cfg_errors *errs)
{
	FILE *f = fopen(path, "re");
	int rc;

	if (f == NULL) {
		cfg_error(errs, "%s: cannot open: %s", path, strerror(errno));
		memset(cfg, 0, sizeof *cfg);
		cfg->path = strdup(path);
		if (cfg->path == NULL)
			abort();
		return -EINVAL;
	}
	rc = cfg_load_file(cfg, f, path, overrides, noverrides, errs);
	fclose(f);
	return rc;
}

/*
 * Loads the file open as f (named path in cfg and in messages), then the
 * overrides, then the defaults of keys not given. Returns 0, or -EINVAL
 * with every problem in errs.
 */
int
cfg_load_file(struct cfg *cfg, FILE *f, const char *path,
    char *const *overrides, size_t noverrides, struct cfg_errors *errs)
{
	struct cfg_parse p = { .cfg = cfg, .errs = errs, .path = path, .f = f };
	size_t before = errs->count;
	int rc;

	memset(cfg, 0, sizeof *cfg);
	cfg->path = strdup(path);
	if (cfg->path == NULL)
		abort();
	rc = ini_parse_stream(cfg_read_line, &p, cfg_handle, &p);
	if (rc > 0 && errs->count == before)
		cfg_error(errs, "%s:%d: syntax error", path, rc);
	else if (rc < 0 && errs->count == before)
		cfg_error(errs, "%s: cannot read", path);
	if (ferror(p.f))
		cfg_error(errs, "%s: read error: %s", path, strerror(errno));
	free(p.buf);

	for (size_t i = 0; i < noverrides; i++)
		cfg_override(cfg, overrides[i], errs);

	for (int k = 0; k < CFG_NKEYS; k++) {
		const struct cfg_key_def *d = &cfg_keys[k];
		char *cause;

		if (cfg->v[k].set)
			continue;
		if (cfg->v[k].line != 0)
			continue; /* given but invalid: already reported */
		if (d->def == NULL) {
			if (k == CFG_ROLE || (cfg->v[CFG_ROLE].set &&
			    (d->roles & CFG_ROLE_BIT(cfg->v[CFG_ROLE].i))))
				cfg_error(errs, "%s: [%s] %s is required", path,
				    d->section, d->name);
			continue;
		}
		if (cfg_parse_value(k, d->def, &cfg->v[k], &cause) < 0) {
			cfg_error(errs, "%s: [%s] %s: bad default: %s", path,
			    d->section, d->name, cause);
			free(cause);
		}
		cfg->v[k].set = false;
	}
	if (errs->count == before)
		cfg_check(cfg, path, errs);
	return errs->count == before ? 0 : -EINVAL;
}

/* Frees what cfg_load() allocated. */
void
cfg_free(struct cfg *cfg)
{
	for (int k = 0; k < CFG_NKEYS; k++)
		free(cfg->v[k].s);
	free(cfg->path);
	memset(cfg, 0, sizeof *cfg);
}

/* Returns the numeric value of key (enums give the choice's index). */
int64_t
cfg_int(const struct cfg *cfg, enum cfg_key key)
{
	return cfg->v[key].i;
}

/* Returns the text value of key. */
const char *
cfg_str(const struct cfg *cfg, enum cfg_key key)
{
	return cfg->v[key].s != NULL ? cfg->v[key].s : "";
}

/* Returns every key as {section: {key: {value, default, set, ...}}}. */
json_t *
cfg_to_json(const struct cfg *cfg)
{
	json_t *root = json_object();

	for (int k = 0; k < CFG_NKEYS; k++) {
		const struct cfg_key_def *d = &cfg_keys[k];
		json_t *sec = json_object_get(root, d->section);
		json_t *val;
		char *txt = cfg_format_value(k, &cfg->v[k]);

		if (sec == NULL) {
			sec = json_object();
			json_object_set_new(root, d->section, sec);
		}
		switch (d->type) {
		case CFG_T_BOOL:
			val = json_boolean(cfg->v[k].i);
			break;
		case CFG_T_INT:
		case CFG_T_SIZE:
		case CFG_T_DURATION:
			val = json_integer(cfg->v[k].i);
			break;
		default:
			val = json_string(txt);
			break;
		}
		json_object_set_new(sec, d->name, json_pack("{s:o,s:s,s:b,s:b}",
		    "value", val, "text", txt, "default",
		    !cfg->v[k].set, "reloadable", d->reloadable));
		free(txt);
	}
	return root;
}

/* Writes text as '#' comment lines wrapped before column 78. */
static void
cfg_write_wrapped(FILE *f, const char *prefix, const char *text)
{
	const char *p = text;
	size_t width = 78 - strlen(prefix);

	while (*p != '\0') {
		size_t len = strlen(p), cut = len;

		if (len > width) {
			cut = width;
			while (cut > 0 && p[cut] != ' ')
				cut--;
			if (cut == 0)
				cut = width;
		}
		fprintf(f, "%s%.*s\n", prefix, (int)cut, p);
		p += cut;
		while (*p == ' ')
			p++;
	}
}

/* Writes the example famd.conf for role: every key with its default. */
void
cfg_write_example(FILE *f, enum famd_role role)
{
	const char *section = NULL;

	fprintf(f, "# famd.conf - example for the %s role.\n",
	    cfg_role_names[role]);
	fprintf(f, "#\n# Generated from famd's key table; famd.conf(5) "
	    "describes every key.\n# Each key is shown commented out with "
	    "its default; uncomment a line to\n# change it. Check a file "
	    "with: famd -t -c FILE\n");
	for (int k = 0; k < CFG_NKEYS; k++) {
		const struct cfg_key_def *d = &cfg_keys[k];

		if (!(d->roles & CFG_ROLE_BIT(role)))
			continue;
		if (section == NULL || strcmp(section, d->section) != 0) {
			section = d->section;
			fprintf(f, "\n[%s]\n", section);
		}
		fprintf(f, "\n");
		cfg_write_wrapped(f, "# ", d->help);
		fprintf(f, "# Default: %s%s.\n",
		    d->def == NULL ? "none (required)" :
		    *d->def == '\0' ? "empty" : d->def,
		    d->reloadable ? "; reloaded on SIGHUP" : "");
		if (k == CFG_ROLE)
			fprintf(f, "role = %s\n", cfg_role_names[role]);
		else if (d->example != NULL)
			fprintf(f, "%s = %s\n", d->name, d->example);
		else
			fprintf(f, "#%s = %s\n", d->name,
			    d->def != NULL ? d->def : "");
	}
}

/* Writes text escaped for roff: a sentence per line, lines under 80. */
static void
cfg_write_roff(FILE *f, const char *text)
{
	size_t col = 0;

	for (const char *p = text; *p != '\0'; p++) {
		if (*p == ' ') {
			const char *next = strchr(p + 1, ' ');
			size_t wlen = next != NULL ? (size_t)(next - p - 1) :
			    strlen(p + 1);

			if (p > text && p[-1] == '.') {
				fputc('\n', f); /* new sentence, new line */
				col = 0;
				continue;
			}
			if (col + 1 + wlen > 72) {
				fputc('\n', f);
				col = 0;
				continue;
			}
		}
		if (*p == '\\') {
			fputs("\\e", f);
			col += 2;
			continue;
		}
		if (col == 0 && (*p == '.' || *p == '\''))
			fputs("\\&", f);
		fputc(*p, f);
		col++;
	}
	fputc('\n', f);
}

/* Returns the placeholder shown for a key's value in the man page. */
static const char *
cfg_type_arg(const struct cfg_key_def *d)
{
	switch (d->type) {
	case CFG_T_BOOL: return "yes | no";
	case CFG_T_INT: return d->auto_ok ? "auto | number" :
	    d->off_ok ? "off | number" : "number";
	case CFG_T_SIZE: return "size";
	case CFG_T_DURATION: return d->auto_ok ? "auto | duration" : "duration";
	case CFG_T_STRING: return "text";
	case CFG_T_PATH: return "path";
	case CFG_T_ENUM: return NULL;
	case CFG_T_ADDR: return "host:port";
	case CFG_T_ADDRLIST: return "host:port, ...";
	}
	return "value";
}

/* Writes the mdoc list of every key, one subsection per INI section. */
void
cfg_write_man_keys(FILE *f)
{
	const char *section = NULL;

	for (int k = 0; k < CFG_NKEYS; k++) {
		const struct cfg_key_def *d = &cfg_keys[k];
		const char *arg = cfg_type_arg(d);

		if (section == NULL || strcmp(section, d->section) != 0) {
			if (section != NULL)
				fprintf(f, ".El\n");
			section = d->section;
			fprintf(f, ".Ss The %s section\n.Bl -tag -width Ds\n",
			    section);
		}
		fprintf(f, ".It Ic %s No = ", d->name);
		if (arg != NULL)
			fprintf(f, "Ar %s\n", arg);
		else {
			for (int i = 0; d->choices[i] != NULL; i++)
				fprintf(f, "%sCm %s", i ? " | " : "",
				    d->choices[i]);
			fprintf(f, "\n");
		}
		cfg_write_roff(f, d->help);
		if (d->type == CFG_T_INT || d->type == CFG_T_SIZE ||
		    d->type == CFG_T_DURATION) {
			char *lo = cfg_format_number(d, d->min);
			char *hi = cfg_format_number(d, d->max);

			fprintf(f, "Range: %s to %s.\n", lo, hi);
			free(lo);
			free(hi);
		}
		if (d->def == NULL)
			fprintf(f, "There is no default.\n");
		else if (*d->def == '\0')
			fprintf(f, "Default: empty.\n");
		else
			fprintf(f, "Default: %s.\n", d->def);
		fprintf(f, "%s\n", d->reloadable ?
		    "Reloaded on SIGHUP." : "Takes effect at start only.");
	}
	if (section != NULL)
		fprintf(f, ".El\n");
}
