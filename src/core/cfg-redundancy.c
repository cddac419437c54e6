/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cfg-redundancy.c - the values of [host] redundancy (none, replicate:N,
 * ec:K+M) and write_quorum: parsed for the host role, and checked against
 * each other and the memory nodes when a configuration loads.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/famd.h"

/*
 * Parses a redundancy mode: "none" (copies 1) or "replicate:N" with N
 * from 2 to 16. Returns 0 or -EINVAL.
 */
int
cfg_redundancy_parse(const char *text, unsigned *copies)
{
	char *end;
	unsigned long n;

	if (strcmp(text, "none") == 0) {
		*copies = 1;
		return 0;
	}
	if (strncmp(text, "replicate:", 10) != 0 || text[10] < '0' ||
	    text[10] > '9')
		return -EINVAL;
	errno = 0;
	n = strtoul(text + 10, &end, 10);
	if (errno != 0 || *end != '\0' || n < 2 || n > 16)
		return -EINVAL;
	*copies = (unsigned)n;
	return 0;
}

/* Parses "ec:K+M" (K data, M parity fragments, 1 to 16 each); 0/-EINVAL. */
int
cfg_redundancy_parse_ec(const char *text, unsigned *k, unsigned *m)
{
	const char *plus = strchr(text, '+');
	unsigned a, b;
	int n = -1;

	if (strncmp(text, "ec:", 3) != 0 || plus == NULL || text[3] < '0' ||
	    text[3] > '9' || plus[1] < '0' || plus[1] > '9' ||
	    sscanf(text + 3, "%2u+%2u%n", &a, &b, &n) != 2 || n < 0 ||
	    text[3 + n] != '\0' || a < 1 || a > 16 || b < 1 || b > 16)
		return -EINVAL;
	*k = a;
	*m = b;
	return 0;
}

/*
 * Parses [host] write_quorum: "all" (*n 0) or N from 1 to 16. Returns 0
 * or -EINVAL.
 */
int
cfg_write_quorum_parse(const char *text, unsigned *n)
{
	char *end;
	unsigned long v;

	if (strcmp(text, "all") == 0) {
		*n = 0;
		return 0;
	}
	if (text[0] < '0' || text[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(text, &end, 10);
	if (errno != 0 || *end != '\0' || v < 1 || v > 16)
		return -EINVAL;
	*n = (unsigned)v;
	return 0;
}

/*
 * Checks [host] write_quorum against the redundancy (copies of a chunk, K
 * of ec:K+M or 0): N at most the copies, and at least K.
 */
static void
cfg_check_quorum(struct cfg *cfg, const char *path, unsigned copies,
    unsigned k, struct cfg_errors *errs)
{
	const struct cfg_value *v = &cfg->v[CFG_HOST_WRITE_QUORUM];
	const char *text = cfg_str(cfg, CFG_HOST_WRITE_QUORUM);
	unsigned n;

	if (cfg_write_quorum_parse(text, &n) < 0) {
		cfg_error(errs, "%s:%u: [host] write_quorum = %s: want all or "
		    "N (from 1 to 16)", path, v->line, text);
		return;
	}
	if (n == 0 || copies <= 1)
		return; /* none: it applies to the programs' own redundancy */
	if (n > copies)
		cfg_error(errs, "%s:%u: [host] write_quorum = %u: more than the "
		    "%u copies of [host] redundancy = %s", path, v->line, n,
		    copies, cfg_str(cfg, CFG_HOST_REDUNDANCY));
	else if (n < k)
		cfg_error(errs, "%s:%u: [host] write_quorum = %u: below K of "
		    "[host] redundancy = %s (fewer than K fragments are a chunk "
		    "lost)", path, v->line, n, cfg_str(cfg,
		    CFG_HOST_REDUNDANCY));
}

/*
 * Checks [host] redundancy (its syntax, enough memory nodes for it) and
 * write_quorum against it, into errs.
 */
void
cfg_redundancy_check(struct cfg *cfg, const char *path,
    struct cfg_errors *errs)
{
	const struct cfg_value *v = &cfg->v[CFG_HOST_REDUNDANCY];
	const char *text = cfg_str(cfg, CFG_HOST_REDUNDANCY);
	const char *nodes = cfg_str(cfg, CFG_HOST_MEMORY_NODES);
	unsigned copies, nnodes = 0, k, m;

	if (cfg->v[CFG_ROLE].i != ROLE_HOST)
		return;
	if (cfg_redundancy_parse_ec(text, &k, &m) == 0) {
		copies = k + m;
	} else if (cfg_redundancy_parse(text, &copies) == 0) {
		k = 0;
	} else {
		cfg_error(errs, "%s:%u: [host] redundancy = %s: want none or "
		    "replicate:N (N from 2 to 16) or ec:K+M (K and M from 1 "
		    "to 16)", path, v->line, text);
		return;
	}
	if (nodes != NULL && *nodes != '\0') {
		nnodes = 1;
		for (const char *p = nodes; *p != '\0'; p++)
			nnodes += *p == ',';
	}
	if (copies > 1 && copies > nnodes)
		cfg_error(errs, "%s:%u: [host] redundancy = %s needs at least "
		    "%u memory_nodes; %u given", path, v->line, text, copies,
		    nnodes);
	cfg_check_quorum(cfg, path, copies, k, errs);
}
