/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-restart-copies.c - which copies of a replicated or erasure-coded
 * region are behind, in the restart state (host-restart.c), so that a famd
 * started after this one never reads a row from a copy that missed it.
 *
 * Owns: the stale-row records not written yet (host_restart.pend), the
 * "stale" lines of the journal, a copy's stale rows in a snapshot (hex
 * words), and the "behind" lines of copies behind as a whole.
 * What the state file says of a copy, read in order:
 *   snapshot   its stale rows ("stale"), or behind as a whole ("behind":
 *              gone, being made again, on a node that restarted)
 *   "stale"    rows that went stale or caught up since, in order; written
 *              before any chunk leaves the buffer (a punch), so that a row
 *              whose record is not in the file yet has its chunk resident
 *              for the new famd (which writes it back to every copy)
 *   "behind"   its region is gone (written at once)
 * A snapshot supersedes both kinds of line (the records not yet written
 * are dropped, the behind marks cleared).
 * Locks: none; the control loop.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <jansson.h>

#include "host/host.h"
#include "host/host-session.h"

#define STALE_RECORD_MAX 80u        /* bytes of one record, at most */
#define STALE_PEND_MAX (256u << 10) /* records' bytes before a write */

/* Returns the restart state s's changes go to, or NULL when none do. */
static struct host_restart *
copies_rs(const struct stripe *s)
{
	const struct region *r = s->r;
	struct host_restart *rs;

	if (r == NULL || r->cl == NULL)
		return NULL;
	rs = r->cl->h->restart;
	if (rs == NULL || rs->off || rs->loading)
		return NULL;
	return rs;
}

/*
 * Tells whether changes of r go to the journal now: a region the program
 * holds (one not listed yet is saved whole with its ALLOC).
 */
static bool
region_journaled(const struct region *r)
{
	return !r->cl->h->handover && r->cl->token != 0 && r->listed &&
	    !r->dying;
}

/*
 * Copy s's region is gone from its node: the state file says at once that
 * the copy is behind on every row (a famd started after this one makes it
 * again). Cleared by the next snapshot, which says so itself.
 */
void
host_restart_behind(struct stripe *s)
{
	struct host_restart *rs = copies_rs(s);
	struct region *r = s->r;
	char handle[24];

	if (rs == NULL)
		return;
	s->behind_saved = true;
	if (!region_journaled(r))
		return;
	snprintf(handle, sizeof handle, "%016" PRIx64, r->handle);
	rs->behind_lines++;
	host_restart_append(r->cl, json_pack("{s:{s:s,s:i}}", "behind", "region",
	    handle, "stripe", (int)(s - r->stripes)));
}

/*
 * Row row of copy s went stale (set) or caught up: a record for the next
 * "stale" line, written before any chunk leaves the buffer.
 */
void
host_restart_stale(struct stripe *s, uint64_t row, bool set)
{
	struct host_restart *rs = copies_rs(s);
	struct region *r = s->r;
	int n;

	if (rs == NULL || !region_journaled(r))
		return;
	if (rs->pend_cap - rs->pend_len < STALE_RECORD_MAX) {
		size_t cap = rs->pend_cap != 0 ? rs->pend_cap * 2 : 4096;
		char *p = realloc(rs->pend, cap);

		if (p == NULL) {
			/* no room for it: a snapshot has every row */
			host_restart_save(r->cl->h);
			return;
		}
		rs->pend = p;
		rs->pend_cap = cap;
	}
	n = snprintf(rs->pend + rs->pend_len, rs->pend_cap - rs->pend_len,
	    "%s[\"%016" PRIx64 "\",\"%016" PRIx64 "\",%u,%" PRIu64 ",%d]",
	    rs->pend_n > 0 ? "," : "", r->cl->token, r->handle,
	    (unsigned)(s - r->stripes), row, set);
	rs->pend_len += (size_t)n;
	rs->pend_n++;
	if (rs->pend_len >= STALE_PEND_MAX)
		host_restart_flush(r->cl->h);
}

/* Writes the records not written yet as one "stale" line. */
void
host_restart_flush(struct host *h)
{
	struct host_restart *rs = h->restart;
	static const char head[] = "{\"stale\":[", tail[] = "]}\n";
	struct iovec iov[3];
	ssize_t want;

	if (rs == NULL || rs->pend_n == 0)
		return;
	iov[0] = (struct iovec){ (void *)head, sizeof head - 1 };
	iov[1] = (struct iovec){ rs->pend, rs->pend_len };
	iov[2] = (struct iovec){ (void *)tail, sizeof tail - 1 };
	want = (ssize_t)(sizeof head - 1 + rs->pend_len + sizeof tail - 1);
	rs->stale_records += rs->pend_n;
	rs->pend_len = 0;
	rs->pend_n = 0;
	if (rs->jfd >= 0 && writev(rs->jfd, iov, 3) == want) {
		rs->jlines++;
		return;
	}
	host_restart_save(h); /* (a snapshot has every row) */
}

/* Returns copy s's stale rows as hex words ("" when none), malloc'd. */
char *
host_restart_stale_hex(const struct stripe *s)
{
	uint64_t words = 0, rows;
	char *hex, *p;

	if (s->stale == NULL || s->nstale == 0)
		return strdup("");
	rows = host_replica_rows(s->r->cl->h, s->r,
	    (unsigned)(s - s->r->stripes) % s->r->width);
	words = (rows + 63) / 64;
	hex = malloc(words * 16 + 1);
	if (hex == NULL)
		return NULL;
	p = hex;
	for (uint64_t w = 0; w < words; w++, p += 16)
		snprintf(p, 17, "%016" PRIx64, s->stale[w]);
	*p = '\0';
	return hex;
}

/*
 * Marks the rows hex names (host_restart_stale_hex) stale on copy s of a
 * region being read from the state file. 0, or -EINVAL when hex is not
 * such words, or names a row the copy does not have.
 */
int
host_restart_stale_parse(struct host *h, struct stripe *s, const char *hex)
{
	uint64_t rows = host_replica_rows(h, s->r,
	    (unsigned)(s - s->r->stripes) % s->r->width);
	size_t len = strlen(hex);

	if (len % 16 != 0 || len / 16 > (rows + 63) / 64 || s->stale == NULL)
		return -EINVAL;
	for (size_t w = 0; w < len / 16; w++) {
		char word[17], *end;
		uint64_t v;

		memcpy(word, hex + w * 16, 16);
		word[16] = '\0';
		v = strtoull(word, &end, 16);
		if (*end != '\0')
			return -EINVAL;
		for (; v != 0; v &= v - 1) {
			uint64_t row = w * 64 + (unsigned)__builtin_ctzll(v);

			if (row >= rows)
				return -EINVAL;
			host_stale_set(s, row);
		}
	}
	return 0;
}

/* Returns the region called handle of the restored session token, or NULL. */
static struct region *
copies_region(struct host *h, const char *token, const char *handle)
{
	uint64_t tok, hd;
	char *end;

	if (token == NULL || handle == NULL)
		return NULL;
	tok = strtoull(token, &end, 16);
	if (*end != '\0')
		return NULL;
	hd = strtoull(handle, &end, 16);
	if (*end != '\0')
		return NULL;
	for (struct host_client *cl = h->clients; cl != NULL; cl = cl->next)
		if (cl->restored && cl->token == tok)
			for (struct region *r = cl->regions; r != NULL;
			    r = r->next)
				if (r->handle == hd)
					return r;
	return NULL;
}

/*
 * Applies the records of the journal's "stale" lines (log: their arrays,
 * in order) to the regions restored from the state file. A record of a
 * region freed since is left out.
 */
void
host_restart_stale_apply(struct host *h, json_t *log)
{
	size_t i;
	json_t *e;

	json_array_foreach(log, i, e) {
		struct region *r = copies_region(h,
		    json_string_value(json_array_get(e, 0)),
		    json_string_value(json_array_get(e, 1)));
		json_int_t k = json_integer_value(json_array_get(e, 2));
		json_int_t row = json_integer_value(json_array_get(e, 3));
		struct stripe *s;

		if (r == NULL || r->ncopies <= 1 || k < 0 ||
		    (uint64_t)k >= r->nstripes || row < 0)
			continue;
		s = &r->stripes[k];
		if (s->behind_saved || (uint64_t)row >= host_replica_rows(h, r,
		    (unsigned)k % r->width))
			continue;
		if (json_integer_value(json_array_get(e, 4)) != 0)
			host_stale_set(s, (uint64_t)row);
		else
			host_stale_clear(s, (uint64_t)row);
	}
}
