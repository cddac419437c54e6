/* SPDX-License-Identifier: Apache-2.0 */
/*
 * famctl-render.c - turns famd's JSON answers into text for people. One
 * renderer for every command: objects become aligned "key  value" lines,
 * nested objects indented sections, and arrays of objects tables.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ctl/famctl.h"
#include "core/famd.h"

#define RENDER_MAX_COLS 16

/* Returns true when a key names a byte count. */
static bool
render_is_bytes(const char *key)
{
	size_t n = strlen(key);

	return (n >= 5 && strcmp(key + n - 5, "bytes") == 0) ||
	    strcmp(key, "capacity") == 0 || strcmp(key, "size") == 0 ||
	    (n >= 5 && strcmp(key + n - 5, "_size") == 0);
}

/* Formats a duration in seconds as "2d 3h 4m 5s". */
static void
render_duration(char *buf, size_t len, double secs)
{
	uint64_t s = (uint64_t)secs;

	if (s >= 86400)
		snprintf(buf, len, "%" PRIu64 "d %" PRIu64 "h %" PRIu64 "m",
		    s / 86400, s / 3600 % 24, s / 60 % 60);
	else if (s >= 3600)
		snprintf(buf, len, "%" PRIu64 "h %" PRIu64 "m %" PRIu64 "s",
		    s / 3600, s / 60 % 60, s % 60);
	else if (s >= 60)
		snprintf(buf, len, "%" PRIu64 "m %" PRIu64 "s", s / 60, s % 60);
	else
		snprintf(buf, len, "%.1fs", secs);
}

/* Formats a scalar for a person; key gives units. Returns buf. */
char *
render_scalar(char *buf, size_t len, const char *key, json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_STRING:
		snprintf(buf, len, "%s", json_string_value(v));
		break;
	case JSON_INTEGER: {
		json_int_t i = json_integer_value(v);

		if (key != NULL && render_is_bytes(key) && i >= 1024) {
			char h[32];

			snprintf(buf, len, "%s (%" JSON_INTEGER_FORMAT ")",
			    fmt_bytes(h, sizeof h, (uint64_t)i), i);
		} else
			snprintf(buf, len, "%" JSON_INTEGER_FORMAT, i);
		break;
	}
	case JSON_REAL:
		if (key != NULL && strcmp(key, "uptime") == 0)
			render_duration(buf, len, json_real_value(v));
		else
			snprintf(buf, len, "%.3g", json_real_value(v));
		break;
	case JSON_TRUE:
		snprintf(buf, len, "yes");
		break;
	case JSON_FALSE:
		snprintf(buf, len, "no");
		break;
	case JSON_NULL:
		snprintf(buf, len, "-");
		break;
	default: {
		char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);

		snprintf(buf, len, "%s", s != NULL ? s : "?");
		free(s);
		break;
	}
	}
	return buf;
}

/* Returns true when every element of a is an object of scalars. */
static bool
render_is_table(json_t *a)
{
	size_t i;
	json_t *e;

	if (json_array_size(a) == 0)
		return false;
	json_array_foreach(a, i, e) {
		const char *k;
		json_t *v;

		if (!json_is_object(e))
			return false;
		json_object_foreach(e, k, v)
			if (json_is_object(v) || json_is_array(v))
				return false;
	}
	return true;
}

/* Prints an array of flat objects as a table, columns from the first. */
static void
render_table(FILE *f, json_t *a, int indent)
{
	const char *cols[RENDER_MAX_COLS];
	size_t width[RENDER_MAX_COLS], ncols = 0, i;
	const char *k;
	json_t *v, *row;
	char buf[128];

	json_object_foreach(json_array_get(a, 0), k, v) {
		if (ncols == RENDER_MAX_COLS)
			break;
		cols[ncols] = k;
		width[ncols] = strlen(k);
		ncols++;
	}
	json_array_foreach(a, i, row) {
		for (size_t c = 0; c < ncols; c++) {
			json_t *cell = json_object_get(row, cols[c]);
			size_t w = strlen(cell != NULL ? render_scalar(buf,
			    sizeof buf, cols[c], cell) : "-");

			if (w > width[c])
				width[c] = w;
		}
	}
	fprintf(f, "%*s", indent, "");
	for (size_t c = 0; c < ncols; c++)
		fprintf(f, "%-*s%s", c + 1 < ncols ? (int)width[c] : 0, cols[c],
		    c + 1 < ncols ? "  " : "\n");
	json_array_foreach(a, i, row) {
		fprintf(f, "%*s", indent, "");
		for (size_t c = 0; c < ncols; c++) {
			json_t *cell = json_object_get(row, cols[c]);

			fprintf(f, "%-*s%s", c + 1 < ncols ? (int)width[c] : 0,
			    cell != NULL ?
			    render_scalar(buf, sizeof buf, cols[c], cell) :
			    "-", c + 1 < ncols ? "  " : "\n");
		}
	}
}

/* Prints any JSON value for a person, indented by indent spaces. */
void
render_value(FILE *f, json_t *v, int indent)
{
	char buf[256];

	if (json_is_object(v)) {
		size_t w = 0;
		const char *k;
		json_t *e;

		json_object_foreach(v, k, e)
			if (strlen(k) > w)
				w = strlen(k);
		json_object_foreach(v, k, e) {
			if (json_is_object(e)) {
				fprintf(f, "%*s%s:\n", indent, "", k);
				if (json_object_size(e) == 0)
					fprintf(f, "%*s(none)\n", indent + 2,
					    "");
				render_value(f, e, indent + 2);
			} else if (json_is_array(e)) {
				if (json_array_size(e) == 0) {
					fprintf(f, "%*s%-*s  (none)\n", indent,
					    "", (int)w, k);
					continue;
				}
				fprintf(f, "%*s%s:\n", indent, "", k);
				render_value(f, e, indent + 2);
			} else
				fprintf(f, "%*s%-*s  %s\n", indent, "", (int)w,
				    k, render_scalar(buf, sizeof buf, k, e));
		}
	} else if (json_is_array(v)) {
		size_t i;
		json_t *e;

		if (render_is_table(v)) {
			render_table(f, v, indent);
			return;
		}
		json_array_foreach(v, i, e) {
			if (json_is_object(e) || json_is_array(e)) {
				fprintf(f, "%*s[%zu]\n", indent, "", i);
				render_value(f, e, indent + 2);
			} else
				fprintf(f, "%*s%s\n", indent, "",
				    render_scalar(buf, sizeof buf, NULL, e));
		}
	} else
		fprintf(f, "%*s%s\n", indent, "",
		    render_scalar(buf, sizeof buf, NULL, v));
}
