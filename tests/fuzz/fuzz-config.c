/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz-config.c - libFuzzer target: the configuration parser (cfg.c with
 * the key table of cfg-table.c, through inih).
 *
 * The input is a famd.conf, read from memory through cfg_load_file() as
 * cfg_load() reads a file. Each of its lines that starts with "-o " also
 * goes in as a command-line override (at most FUZZ_MAX_OVERRIDES), so the
 * overrides' parser is fuzzed with the same text.
 *
 * Each line also goes through secret_peer_line(), as a line of a memory
 * node's peer_secrets file: what it accepts is one name and one absolute
 * path, neither empty nor holding a blank.
 *
 * A configuration that loads must describe itself faithfully: each value
 * (given or defaulted) printed with cfg_format_value() parses back to the
 * same value, and
 * config.show's JSON (cfg_to_json) can be built and printed, with every
 * key in it.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/famd.h"
#include "fuzz.h"

#define FUZZ_MAX_OVERRIDES 8

/* Collects the lines of text that start with "-o " as overrides. */
static size_t
fuzz_overrides(char *text, size_t size, char **out)
{
	size_t n = 0;
	char *p = text, *end = text + size;

	while (p < end && n < FUZZ_MAX_OVERRIDES) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);

		if (len > 3 && memcmp(p, "-o ", 3) == 0) {
			out[n] = strndup(p + 3, len - 3);
			if (out[n] == NULL)
				abort();
			n++;
		}
		if (nl == NULL)
			break;
		p = nl + 1;
	}
	return n;
}

/* Splits each line of text as a peer_secrets line; checks what it gives. */
static void
fuzz_peer_lines(const char *text, size_t size)
{
	const char *p = text, *end = text + size;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
		char *line = strndup(p, len);
		const char *name = NULL, *file = NULL, *why = NULL;
		int rc;

		if (line == NULL)
			abort();
		rc = secret_peer_line(line, &name, &file, &why);
		fuzz_assert(rc == 0 || rc == 1 || (rc == -EINVAL && why != NULL));
		if (rc == 1) {
			fuzz_assert(name[0] != '\0' && file[0] == '/');
			fuzz_assert(strlen(name) <= FAM_NAME_MAX);
			fuzz_assert(strpbrk(name, " \t\r\n\v\f#") == NULL);
			fuzz_assert(strpbrk(file, " \t\r\n\v\f#") == NULL);
		}
		free(line);
		if (nl == NULL)
			break;
		p = nl + 1;
	}
}

/* Checks what a loaded configuration says about itself. */
static void
fuzz_loaded(const struct cfg *cfg)
{
	json_t *j;
	char *s;

	for (int k = 0; k < CFG_NKEYS; k++) {
		struct cfg_value v = { 0 };
		char *txt = cfg_format_value(k, &cfg->v[k]);
		char *cause = NULL;

		fuzz_assert(txt != NULL);
		if (cfg->v[k].s == NULL) {
			/* Neither given nor defaulted: not for this role. */
			fuzz_assert(!cfg->v[k].set && cfg_keys[k].def == NULL);
			free(txt);
			continue;
		}
		fuzz_assert(cfg_parse_value(k, txt, &v, &cause) == 0);
		fuzz_assert(cfg_equal(k, &v, &cfg->v[k]));
		fuzz_assert(v.i == cfg_int(cfg, k));
		free(cause);
		free(v.s);
		free(txt);
		(void)cfg_str(cfg, k);
	}
	j = cfg_to_json(cfg);
	fuzz_assert(j != NULL);
	for (int k = 0; k < CFG_NKEYS; k++)
		fuzz_assert(json_is_object(json_object_get(json_object_get(j,
		    cfg_keys[k].section), cfg_keys[k].name)));
	s = json_dumps(j, JSON_COMPACT);
	fuzz_assert(s != NULL);
	free(s);
	json_decref(j);
}

/* Loads one input as famd.conf, with its "-o " lines as overrides. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cfg_errors errs = { 0 };
	struct cfg cfg;
	char *text = malloc(size + 1), *overrides[FUZZ_MAX_OVERRIDES];
	size_t n;
	FILE *f;
	int rc;

	if (text == NULL)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	n = fuzz_overrides(text, size, overrides);
	fuzz_peer_lines(text, size);
	f = fmemopen(text, size, "r");
	if (f == NULL)
		abort();
	rc = cfg_load_file(&cfg, f, "fuzz.conf", overrides, n, &errs);
	fclose(f);
	fuzz_assert((rc == 0) == (errs.count == 0));
	for (size_t i = 0; i < errs.count; i++)
		fuzz_assert(errs.msg[i] != NULL && errs.msg[i][0] != '\0');
	if (rc == 0)
		fuzz_loaded(&cfg);
	cfg_errors_free(&errs);
	cfg_free(&cfg);
	for (size_t i = 0; i < n; i++)
		free(overrides[i]);
	free(text);
	return 0;
}
