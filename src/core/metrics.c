/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics.c - famd's status as OpenMetrics text (the Prometheus exposition
 * format, version 1.0.0), for `famctl metrics` and metrics_listen.
 *
 * Every number of the status becomes a sample named after its path
 * (famd_<role>_<object>_<key>, `counters` left out of it): a counter (`_total`) when it lies in a
 * `counters` object and is not a level, or is one of the cumulative
 * numbers kept elsewhere (cache hits, link bytes, connects); a gauge
 * otherwise. Arrays of objects (peers, links, regions) give one sample per
 * element, labelled with the element's short string fields. An object
 * with "le", "counts" and "sum" is a histogram. Counters are cumulative
 * since famd started, except after stats.reset (a debugging aid: famd(8)).
 *
 * Owns: nothing between calls; metrics_text() builds and returns a string.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/famd.h"

enum mtype { M_GAUGE, M_COUNTER, M_HISTOGRAM };

/* A growing string. */
struct mbuf {
	char *p;
	size_t len, cap;
};

/* A metric family: its samples are kept together, as the format wants. */
struct mfam {
	char *name;
	enum mtype type;
	char *help;
	struct mbuf samples;
};

struct mset {
	struct mfam *fams;
	size_t n, cap;
	int err;
};

/* Levels found in `counters` objects: gauges, not counters. */
static const char *const levels[] = {
	"regions", "memory_regions", "bytes_reserved", "connections_open",
	"sessions_connected", "sessions_detached", "requests_in_flight",
	"memory_in_flight", "staging_bytes", "staging_registered", NULL,
};

/* Cumulative numbers kept outside `counters` objects. */
static const char *const cumulative[] = {
	"hits", "misses", "hit_bytes", "misses_while_loading", "loads",
	"load_bytes", "load_errors", "evictions", "no_room", "write_updates",
	"prefetches_used", "prefetches_wasted", "rejected", "loaded_bytes",
	"windows", "switches_off", "switches_on", "batches",
	"batched_requests", "flushes", "doorbells", "work_requests",
	"signalled", "unsignalled", "onesided", "twosided", "loads_onesided",
	"loads_twosided", "lease_renewals", "lease_errors", "staging_bounced",
	"replies_zero_copy", "reply_bytes_zero_copy", "reply_bytes_copied",
	"recent_pushed", "recent_overwritten", "ondemand_bytes",
	"background_bytes", "read_bytes", "write_bytes", "connects",
	"disconnects", "reloads", "reload_failures", "requests", "errors",
	"reads", "seconds", "gb_moved", NULL,
};

/* Tells whether s is one of the strings of list. */
static bool
in_list(const char *const *list, const char *s)
{
	for (; *list != NULL; list++)
		if (strcmp(*list, s) == 0)
			return true;
	return false;
}

/* Appends formatted text to b; records ENOMEM in *err. */
static void __attribute__((format(printf, 3, 4)))
mbuf_add(struct mbuf *b, int *err, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p != NULL ? b->p + b->len : NULL,
		    b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			*err = -EINVAL;
			return;
		}
		if (b->len + (size_t)n < b->cap) {
			b->len += (size_t)n;
			return;
		}
		size_t cap = b->cap * 2 + (size_t)n + 256;
		char *p = realloc(b->p, cap);

		if (p == NULL) {
			*err = -ENOMEM;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

/* The family called name, made with type and help when new. */
static struct mfam *
mset_family(struct mset *m, const char *name, enum mtype type,
    const char *help)
{
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->fams[i].name, name) == 0)
			return &m->fams[i];
	if (m->n == m->cap) {
		size_t cap = m->cap * 2 + 32;
		struct mfam *f = realloc(m->fams, cap * sizeof *f);

		if (f == NULL) {
			m->err = -ENOMEM;
			return NULL;
		}
		m->fams = f;
		m->cap = cap;
	}
	m->fams[m->n] = (struct mfam){ .name = strdup(name), .type = type,
	    .help = strdup(help) };
	if (m->fams[m->n].name == NULL || m->fams[m->n].help == NULL) {
		free(m->fams[m->n].name);
		free(m->fams[m->n].help);
		m->err = -ENOMEM;
		return NULL;
	}
	return &m->fams[m->n++];
}

/* Writes name with every character a metric name cannot hold as '_'. */
static void
sanitize(char *name)
{
	for (char *p = name; *p != '\0'; p++)
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != ':')
			*p = '_';
}

/* Appends a label value, escaped as the format wants. */
static void
add_label_value(struct mbuf *b, int *err, const char *v)
{
	for (; *v != '\0'; v++) {
		if (*v == '\\' || *v == '"')
			mbuf_add(b, err, "\\%c", *v);
		else if (*v == '\n')
			mbuf_add(b, err, "\\n");
		else
			mbuf_add(b, err, "%c", *v);
	}
}

/* Appends "{k="v",...}" for the labels (an object of strings), if any. */
static void
add_labels(struct mbuf *b, int *err, json_t *labels, const char *extra_k,
    const char *extra_v)
{
	const char *k;
	json_t *v;
	bool first = true;

	if (json_object_size(labels) == 0 && extra_k == NULL)
		return;
	mbuf_add(b, err, "{");
	json_object_foreach(labels, k, v) {
		mbuf_add(b, err, "%s%s=\"", first ? "" : ",", k);
		add_label_value(b, err, json_string_value(v));
		mbuf_add(b, err, "\"");
		first = false;
	}
	if (extra_k != NULL)
		mbuf_add(b, err, "%s%s=\"%s\"", first ? "" : ",", extra_k,
		    extra_v);
	mbuf_add(b, err, "}");
}

/* Adds one sample of a gauge or counter. */
static void
add_sample(struct mset *m, const char *name, enum mtype type, json_t *labels,
    double v, const char *path)
{
	char help[320];
	struct mfam *f;

	snprintf(help, sizeof help, "famd status: %s", path);
	f = mset_family(m, name, type, help);
	if (f == NULL)
		return;
	mbuf_add(&f->samples, &m->err, "%s%s", name,
	    type == M_COUNTER ? "_total" : "");
	add_labels(&f->samples, &m->err, labels, NULL, NULL);
	mbuf_add(&f->samples, &m->err, " %.17g\n", v);
}

/* Adds a histogram from {"le": [...], "counts": [...], "sum": n}. */
static void
add_histogram(struct mset *m, const char *name, json_t *labels, json_t *h,
    const char *path)
{
	json_t *le = json_object_get(h, "le"), *counts =
	    json_object_get(h, "counts");
	char help[320], bound[64];
	double cum = 0;
	struct mfam *f;

	if (!json_is_array(le) || !json_is_array(counts) ||
	    json_array_size(le) != json_array_size(counts))
		return;
	snprintf(help, sizeof help, "famd status: %s", path);
	f = mset_family(m, name, M_HISTOGRAM, help);
	if (f == NULL)
		return;
	for (size_t i = 0; i < json_array_size(le); i++) {
		cum += json_number_value(json_array_get(counts, i));
		snprintf(bound, sizeof bound, "%.17g",
		    json_number_value(json_array_get(le, i)));
		mbuf_add(&f->samples, &m->err, "%s_bucket", name);
		add_labels(&f->samples, &m->err, labels, "le", bound);
		mbuf_add(&f->samples, &m->err, " %.17g\n", cum);
	}
	mbuf_add(&f->samples, &m->err, "%s_bucket", name);
	add_labels(&f->samples, &m->err, labels, "le", "+Inf");
	mbuf_add(&f->samples, &m->err, " %.17g\n", cum);
	mbuf_add(&f->samples, &m->err, "%s_count", name);
	add_labels(&f->samples, &m->err, labels, NULL, NULL);
	mbuf_add(&f->samples, &m->err, " %.17g\n", cum);
	mbuf_add(&f->samples, &m->err, "%s_sum", name);
	add_labels(&f->samples, &m->err, labels, NULL, NULL);
	mbuf_add(&f->samples, &m->err, " %.17g\n",
	    json_number_value(json_object_get(h, "sum")));
}

static void walk(struct mset *m, json_t *obj, const char *prefix,
    const char *path, json_t *labels, bool in_counters);

/* One element of an array of objects: its short strings label it. */
static void
walk_element(struct mset *m, json_t *e, const char *prefix, const char *path)
{
	json_t *labels = json_object(), *v;
	const char *k;

	json_object_foreach(e, k, v) {
		if (json_is_string(v) && strlen(json_string_value(v)) <= 64 &&
		    strcmp(k, "last_error") != 0)
			json_object_set(labels, k, v);
	}
	walk(m, e, prefix, path, labels, false);
	json_decref(labels);
}

/* Adds the numbers of obj, named prefix + key, labelled with labels. */
static void
walk(struct mset *m, json_t *obj, const char *prefix, const char *path,
    json_t *labels, bool in_counters)
{
	const char *k;
	json_t *v;

	json_object_foreach(obj, k, v) {
		char name[256], sub[256];
		bool counter;

		snprintf(name, sizeof name, "%s%s", prefix, k);
		sanitize(name);
		snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", k);
		if (json_is_number(v) || json_is_boolean(v)) {
			counter = (in_counters && !in_list(levels, k)) ||
			    in_list(cumulative, k);
			add_sample(m, name, counter ? M_COUNTER : M_GAUGE,
			    labels, json_is_boolean(v) ? json_is_true(v) :
			    json_number_value(v), sub);
		} else if (json_is_object(v) && json_object_get(v, "le") &&
		    json_object_get(v, "counts")) {
			add_histogram(m, name, labels, v, sub);
		} else if (json_is_object(v) && strcmp(k, "counters") == 0) {
			walk(m, v, prefix, sub, labels, true);
		} else if (json_is_object(v)) {
			strncat(name, "_", sizeof name - strlen(name) - 1);
			walk(m, v, name, sub, labels, false);
		} else if (json_is_array(v)) {
			size_t i;
			json_t *e;

			strncat(name, "_", sizeof name - strlen(name) - 1);
			json_array_foreach(v, i, e)
				if (json_is_object(e))
					walk_element(m, e, name, sub);
		}
	}
}

/* Frees the families. */
static void
mset_free(struct mset *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->fams[i].name);
		free(m->fams[i].help);
		free(m->fams[i].samples.p);
	}
	free(m->fams);
}

/*
 * The status st of a famd of role as OpenMetrics text, ending with
 * "# EOF"; NULL when out of memory. The caller frees it.
 */
char *
metrics_text(const char *role, json_t *st)
{
	static const char *const skip[] = { "role", "version", "node_name",
		"pid", "started", "config_file", "log_level", "uptime",
		"reloads", "reload_failures", NULL };
	struct mset m = { 0 };
	struct mbuf out = { 0 };
	json_t *rest = json_deep_copy(st), *labels = json_object();
	char prefix[64];
	const char *types[] = { "gauge", "counter", "histogram" };

	if (rest == NULL || labels == NULL) {
		json_decref(rest);
		json_decref(labels);
		return NULL;
	}
	mbuf_add(&out, &m.err, "# TYPE famd info\n# HELP famd this famd: "
	    "its role, version and node name\nfamd_info{role=\"");
	add_label_value(&out, &m.err, role);
	mbuf_add(&out, &m.err, "\",version=\"");
	add_label_value(&out, &m.err, json_string_value(json_object_get(st,
	    "version")) ?: "");
	mbuf_add(&out, &m.err, "\",node_name=\"");
	add_label_value(&out, &m.err, json_string_value(json_object_get(st,
	    "node_name")) ?: "");
	mbuf_add(&out, &m.err, "\"} 1\n");
	mbuf_add(&out, &m.err, "# TYPE famd_uptime_seconds gauge\n"
	    "# UNIT famd_uptime_seconds seconds\n"
	    "# HELP famd_uptime_seconds seconds since famd started\n"
	    "famd_uptime_seconds %.3f\n",
	    json_number_value(json_object_get(st, "uptime")));
	mbuf_add(&out, &m.err, "# TYPE famd_reloads counter\n"
	    "# HELP famd_reloads configuration reloads\n"
	    "famd_reloads_total %lld\n", (long long)json_integer_value(
	    json_object_get(st, "reloads")));
	mbuf_add(&out, &m.err, "# TYPE famd_reload_failures counter\n"
	    "# HELP famd_reload_failures configuration reloads refused\n"
	    "famd_reload_failures_total %lld\n", (long long)
	    json_integer_value(json_object_get(st, "reload_failures")));
	for (const char *const *s = skip; *s != NULL; s++)
		json_object_del(rest, *s);
	snprintf(prefix, sizeof prefix, "famd_%s_", role);
	walk(&m, rest, prefix, "", labels, false);
	for (size_t i = 0; i < m.n; i++) {
		struct mfam *f = &m.fams[i];

		mbuf_add(&out, &m.err, "# TYPE %s %s\n# HELP %s %s\n%.*s",
		    f->name, types[f->type], f->name, f->help,
		    (int)f->samples.len, f->samples.p ? f->samples.p : "");
	}
	mbuf_add(&out, &m.err, "# EOF\n");
	mset_free(&m);
	json_decref(rest);
	json_decref(labels);
	if (m.err != 0) {
		free(out.p);
		return NULL;
	}
	return out.p;
}
