/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host-session-copy.c - the session requests that copy or drop a program's
 * memory: DISCARD (madvise DONTNEED and kin, munmap of part of a block),
 * FORK (a copy of every region for the child) and ADOPT (the child claims
 * it). Owns nothing: the regions are host-session.c's, the copies
 * host-fork.c's.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "host/host.h"
#include "host/host-session.h"

/*
 * DISCARD: chunks of a region read back as zeros from now on; served again
 * at each tick while one of them is being read or written back. EAGAIN
 * when a fork's copy shares one of them: the program writes zeros there.
 */
int
session_discard(struct host_client *cl)
{
	struct host *h = cl->h;
	struct arena *ar = NULL;
	struct region *r = host_region_find(cl, cl->req.a, &ar);
	uint64_t first, n;

	cl->waits_discard = false;
	cl->busy = false;
	if (r == NULL)
		return session_fail(cl, ENOENT);
	if (((cl->req.a | cl->req.b) & (h->chunk - 1)) != 0 ||
	    cl->req.b == 0 || (r->flags & FAM_S_ALLOC_FILE))
		return session_fail(cl, EINVAL);
	first = (cl->req.a - ar->uaddr - r->off) >> h->chunk_shift;
	n = cl->req.b >> h->chunk_shift;
	if (n > r->nchunks - first)
		n = r->nchunks - first;
	/* Chunks a fork's copy shares: the program writes zeros instead. */
	if (r->copies != NULL && host_fork_source_shares(r, first, n))
		return session_fail(cl, EAGAIN);
	if (host_fork_copy_discard(r, first, n) == -EBUSY ||
	    host_chunks_discard(h, r, first, n) == -EBUSY) {
		cl->waits_discard = true;
		cl->busy = true;
		return 0;
	}
	host_region_discard(h, r, first, n);
	return session_reply(cl, 0, 0, n << h->chunk_shift, 0, 0, 0, -1);
}

/* A FORK's copy is made (token) or failed (err): answers the parent. */
void
session_fork_done(struct host_client *cl, uint64_t token, int err)
{
	if (cl->dead)
		return;
	cl->refs++; /* the session may end */
	if (session_reply(cl, err, 0, token, 0, 0, 0, -1) < 0)
		host_client_release(cl);
	else
		session_resume(cl);
	host_client_put(cl);
}

/* FORK: copies the program's regions for its child (host-fork.c). */
int
session_fork(struct host_client *cl)
{
	uint64_t bytes = 0;
	int rc;

	for (struct region *r = cl->regions; r != NULL; r = r->next)
		if (!(r->flags & FAM_S_ALLOC_FILE))
			bytes += r->size;
	if (uid_quota(cl->h, cl->uid, bytes, cl->pid, NULL) != 0)
		return session_fail(cl, EDQUOT);
	cl->busy = true;
	rc = host_fork_start(cl);
	if (rc < 0)
		return session_fail(cl, -rc);
	return 0;
}

/* Makes the child's arenas for a copy and places its regions in them. */
static int
adopt_place(struct host_client *cl, struct host_fork_arena *fa, size_t na,
    struct region **rs, const uint32_t *ra, size_t nr)
{
	for (size_t i = 0; i < na; i++) {
		fa[i].child = arena_new(cl, fa[i].size);
		if (fa[i].child == NULL)
			return -ENOMEM;
		/* the copies' places only: the child's own go elsewhere */
		host_extent_free(&fa[i].child->free);
	}
	for (size_t k = 0; k < nr; k++) {
		struct region *r = rs[k];

		for (size_t i = 0; i < na && r->ar == NULL; i++)
			if (fa[i].id == ra[k])
				r->ar = fa[i].child;
		if (r->ar == NULL || host_arena_add_region(r->ar, r) < 0) {
			r->ar = NULL;
			return -ENOMEM;
		}
		r->next = cl->regions;
		cl->regions = r;
		r->listed = true;
		cl->nregions++;
		cl->bytes += r->size;
	}
	return 0;
}

/* ADOPT: the child takes its copy of one of the parent's arenas. */
int
session_adopt(struct host_client *cl)
{
	struct host_fork *f = host_fork_find(cl->h, cl->req.a);
	struct host_fork_arena *fa, *a = NULL;
	struct region **rs;
	uint32_t *ra;
	size_t na, nr;
	bool first;
	int rc;

	if (f == NULL)
		return session_fail(cl, ENOENT);
	rc = host_fork_claim(f, cl, &fa, &na, &rs, &ra, &nr, &first);
	if (rc == 0 && first) {
		rc = adopt_place(cl, fa, na, rs, ra, nr);
		for (size_t k = 0; rc < 0 && k < nr; k++)
			if (!rs[k]->listed)
				host_region_free(rs[k]); /* the copy is ours */
	}
	if (rc < 0)
		return session_fail(cl, -rc);
	for (size_t i = 0; i < na && a == NULL; i++)
		if (fa[i].id == cl->req.b)
			a = &fa[i];
	if (a == NULL || a->handed || a->child == NULL)
		return session_fail(cl, a == NULL ? ENOENT : EALREADY);
	a->handed = true;
	rc = session_reply(cl, 0, 0, a->child->id, a->uaddr, a->size, 0,
	    a->child->memfd);
	host_fork_handed(f);
	return rc;
}
