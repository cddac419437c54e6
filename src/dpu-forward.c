/*
 * dpu-forward.c - the dpu's data path: a host's READ or WRITE is checked
 * against its session's regions, given a staging buffer, forwarded to the
 * memory node holding the region, and answered when the memory node has
 * answered: a read's data goes to the host from the buffer it arrived in
 * (zero-copy staging: the reply references the buffer, released when the
 * reply is sent); a write is acknowledged only once the memory node has
 * it. Control requests to memory nodes (REGION_CREATE, ...) take the same
 * way.
 *
 * Request life (struct dpu_req):
 *   front: composed (region looked up, staging buffer taken)
 *   back:  issued on the memory node's connection; its completion fills
 *          status (and the data, in the staging buffer)
 *   front: answered; READ data stays referenced until the reply is sent,
 *          then the buffer and the request are released
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dpu.h"

/* Staging buffers kept for reuse, by power-of-two size class. */
#define DPU_BUF_MIN_SHIFT 12   /* 4 KiB */
#define DPU_BUF_CLASSES   10   /* up to 2 MiB */
#define DPU_BUF_KEEP      64   /* per class */

static struct {
	void *free[DPU_BUF_CLASSES][DPU_BUF_KEEP];
	unsigned nfree[DPU_BUF_CLASSES];
} bufs;

static void dpu_complete(struct dpu *dpu, struct dpu_req *q);

/* Returns the size class of a buffer of len bytes, or -1 if none fits. */
static int
buf_class(uint32_t len)
{
	int c = 0;

	while (c < DPU_BUF_CLASSES && ((size_t)1 << (c + DPU_BUF_MIN_SHIFT)) <
	    len)
		c++;
	return c < DPU_BUF_CLASSES ? c : -1;
}

/* Takes a staging buffer of at least len bytes. Front. */
static uint8_t *
dpu_buf_get(struct dpu *dpu, uint32_t len)
{
	int c = buf_class(len);
	size_t size = c >= 0 ? (size_t)1 << (c + DPU_BUF_MIN_SHIFT) : len;
	void *p;

	if (c >= 0 && bufs.nfree[c] > 0)
		p = bufs.free[c][--bufs.nfree[c]];
	else
		p = malloc(size);
	if (p == NULL) {
		DPU_INC(dpu, staging_failures, 1);
		return NULL;
	}
	dpu->staging_bytes += size;
	if (dpu->staging_bytes > dpu->staging_peak)
		dpu->staging_peak = dpu->staging_bytes;
	return p;
}

/* Gives a staging buffer back. Front. */
static void
dpu_buf_put(struct dpu *dpu, uint8_t *p, uint32_t len)
{
	int c = buf_class(len);
	size_t size = c >= 0 ? (size_t)1 << (c + DPU_BUF_MIN_SHIFT) : len;

	if (p == NULL)
		return;
	dpu->staging_bytes -= size;
	if (c >= 0 && bufs.nfree[c] < DPU_BUF_KEEP)
		bufs.free[c][bufs.nfree[c]++] = p;
	else
		free(p);
}

/* Frees every staging buffer kept for reuse. */
void
dpu_buf_fini(void)
{
	for (int c = 0; c < DPU_BUF_CLASSES; c++)
		while (bufs.nfree[c] > 0)
			free(bufs.free[c][--bufs.nfree[c]]);
}

/* Frees a request and what it holds (staging, region, host). Front. */
void
dpu_req_free(struct dpu_req *q)
{
	struct dpu *dpu = q->dpu;

	if (q->buf != NULL)
		dpu_buf_put(dpu, q->buf, q->len);
	if (q->m != NULL)
		dpu_mregion_put(q->m);
	if (q->hc != NULL) {
		q->hc->inflight--;
		dpu_hconn_put(q->hc);
	}
	free(q);
}

/* Makes a control request for memory node n (payload copied). */
struct dpu_req *
dpu_call_new(struct dpu *dpu, struct dpu_node *node, uint8_t type,
    const void *payload, uint32_t plen, dpu_req_fn done, void *arg)
{
	struct dpu_req *q;

	if (plen > sizeof q->payload)
		return NULL;
	q = calloc(1, sizeof *q);
	if (q == NULL)
		return NULL;
	q->kind = DR_CALL;
	q->dpu = dpu;
	q->node = node;
	q->type = type;
	memcpy(q->payload, payload, plen);
	q->plen = plen;
	q->done = done;
	q->arg = arg;
	q->start_ns = mono_ns();
	return q;
}

/* ---- back: issue and complete ------------------------------------------- */

/* Completion of a forwarded READ or WRITE. Back. */
static void
back_rw_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct dpu_req *q = ctx;
	struct dpu *dpu = q->dpu;

	q->status = status;
	if (status == 0) {
		if (q->flags & FAM_F_BACKGROUND)
			DPU_INC(dpu, mem_background_bytes, q->len);
		else
			DPU_INC(dpu, mem_ondemand_bytes, q->len);
		if (q->kind == DR_READ)
			DPU_INC(dpu, mem_read_bytes, q->len);
		else
			DPU_INC(dpu, mem_write_bytes, q->len);
	} else
		DPU_INC(dpu, mem_errors, 1);
	dpu_complete(dpu, q);
}

/* Completion of a control request: keeps the answer. Back. */
static void
back_call_done(void *ctx, int status, const uint8_t *payload, uint32_t len)
{
	struct dpu_req *q = ctx;

	q->status = status;
	if (status == 0 && payload != NULL) {
		q->rlen = len < sizeof q->resp ? len : (uint32_t)sizeof q->resp;
		memcpy(q->resp, payload, q->rlen);
		if (len > sizeof q->resp)
			q->status = -EPROTO;
	}
	dpu_complete(q->dpu, q);
}

/*
 * Issues a request on its memory node's connection; a request that cannot
 * go (node down, restarted) completes at once with an error. Back.
 */
static void
back_issue(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_node *n = q->kind == DR_CALL ? q->node : q->m->node;
	uint64_t instance = q->kind == DR_CALL ? q->instance : q->m->instance;
	int rc;

	if (q->kind == DR_CALL && q->type == FAM_MSG_REGION_FREE) {
		uint32_t region = (uint32_t)q->payload[0] << 24 |
		    (uint32_t)q->payload[1] << 16 |
		    (uint32_t)q->payload[2] << 8 | q->payload[3];

		dpu_node_free_region(n, instance, region);
		dpu_complete(dpu, q);
		return;
	}
	if (atomic_load_explicit(&n->state, memory_order_acquire) != DN_UP ||
	    n->conn == NULL) {
		q->status = -EHOSTDOWN;
		dpu_complete(dpu, q);
		return;
	}
	if (atomic_load_explicit(&n->instance, memory_order_acquire) !=
	    instance) {
		q->status = -EIO; /* that memory famd restarted: data gone */
		dpu_complete(dpu, q);
		return;
	}
	switch (q->kind) {
	case DR_READ:
		DPU_INC(dpu, mem_reads, 1);
		rc = fam_conn_readf(n->conn, &q->m->remote, q->off, q->len,
		    q->buf, NULL, q->flags, back_rw_done, q);
		break;
	case DR_WRITE:
		DPU_INC(dpu, mem_writes, 1);
		rc = fam_conn_writef(n->conn, &q->m->remote, q->off, q->len,
		    q->buf, NULL, q->flags, back_rw_done, q);
		break;
	default:
		rc = fam_conn_call(n->conn, q->type, q->payload, q->plen,
		    back_call_done, q);
		break;
	}
	if (rc < 0) {
		q->status = rc;
		dpu_complete(dpu, q);
		return;
	}
	n->dirty = true;
}

/* Hands a request to the back side. Front. */
void
dpu_submit(struct dpu *dpu, struct dpu_req *q)
{
	back_issue(dpu, q);
}

/* ---- front: compose and answer ------------------------------------------ */

/* The reply of a READ is sent: its staging buffer can go. Front. */
static void
front_read_sent(void *arg)
{
	dpu_req_free(arg);
}

/* Maps an error of the memory link to what the host is told. */
static int
front_errno(int err)
{
	switch (err) {
	case -ECONNRESET:
	case -ETIMEDOUT:
	case -ENOTCONN:
	case -ECONNREFUSED:
		return EHOSTDOWN;
	default:
		return err < 0 ? -err : err;
	}
}

/* A request is complete: answer the host, release what it held. Front. */
static void
front_done(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_hconn *hc = q->hc;

	if (q->kind == DR_CALL) {
		if (q->done != NULL)
			q->done(q);
		dpu_req_free(q);
		return;
	}
	if (hc->closed) {
		dpu_req_free(q);
		return;
	}
	if (q->status < 0) {
		DPU_INC(dpu, rw_errors, 1);
		(void)fam_conn_reply(hc->c, &q->h, front_errno(q->status), NULL,
		    0, false, NULL, NULL);
		dpu_req_free(q);
		return;
	}
	if (q->flags & FAM_F_BACKGROUND)
		DPU_INC(dpu, host_background_bytes, q->len);
	else
		DPU_INC(dpu, host_ondemand_bytes, q->len);
	if (q->kind == DR_WRITE) {
		DPU_INC(dpu, host_write_bytes, q->len);
		(void)fam_conn_reply(hc->c, &q->h, 0, NULL, 0, false, NULL,
		    NULL);
		dpu_req_free(q);
		return;
	}
	DPU_INC(dpu, host_read_bytes, q->len);
	if (fam_conn_reply(hc->c, &q->h, 0, q->buf, q->len, false,
	    front_read_sent, q) < 0)
		dpu_req_free(q);
}

/* A request completed on the back side; the front answers. */
static void
dpu_complete(struct dpu *dpu, struct dpu_req *q)
{
	front_done(dpu, q);
}

/* Refuses a READ or WRITE with status err (a positive errno). */
static void
front_refuse(struct dpu_hconn *hc, const struct fam_hdr *h, int err)
{
	DPU_INC(hc->dpu, rw_errors, 1);
	(void)fam_conn_reply(hc->c, h, err, NULL, 0, false, NULL, NULL);
}

/*
 * A host's READ or WRITE: checked against its session's regions, then
 * forwarded with its data (a WRITE's is copied into staging: the payload
 * lives only during this call). Front.
 */
void
dpu_forward_request(struct dpu_hconn *hc, const struct fam_hdr *h,
    const uint8_t *payload)
{
	struct dpu *dpu = hc->dpu;
	struct dpu_region *r;
	struct dpu_req *q;
	struct fam_rw m;
	int err;

	if (h->type == FAM_MSG_READ) {
		DPU_INC(dpu, reads, 1);
		err = proto_get_read(payload, h->len, &m);
	} else {
		DPU_INC(dpu, writes, 1);
		err = proto_get_write_hdr(payload, h->len, &m);
	}
	if (err == -EPROTO) {
		/* The transport checked the lengths: this is a bad field. */
		front_refuse(hc, h, EPROTO);
		return;
	}
	if (err < 0) {
		front_refuse(hc, h, -err);
		return;
	}
	r = dpu_region_find(dpu, hc->s, m.region);
	if (r == NULL) {
		front_refuse(hc, h, ENOENT);
		return;
	}
	if (m.offset > r->m->remote.size || m.len > r->m->remote.size -
	    m.offset) {
		front_refuse(hc, h, ERANGE);
		return;
	}
	if (h->type == FAM_MSG_WRITE && (r->m->flags & FAM_RF_SHARED)) {
		front_refuse(hc, h, EROFS);
		return;
	}
	q = calloc(1, sizeof *q);
	if (q == NULL) {
		front_refuse(hc, h, ENOMEM);
		return;
	}
	q->kind = h->type == FAM_MSG_READ ? DR_READ : DR_WRITE;
	q->dpu = dpu;
	q->h = *h;
	q->off = m.offset;
	q->len = m.len;
	q->flags = h->flags & FAM_F_BACKGROUND;
	q->start_ns = mono_ns();
	q->buf = dpu_buf_get(dpu, m.len);
	if (q->buf == NULL) {
		free(q);
		front_refuse(hc, h, ENOMEM);
		return;
	}
	if (q->kind == DR_WRITE)
		memcpy(q->buf, payload + FAM_WRITE_HDR_LEN, m.len);
	q->m = r->m;
	atomic_fetch_add_explicit(&q->m->refs, 1, memory_order_relaxed);
	q->hc = hc;
	hc->refs++;
	hc->inflight++;
	dpu_submit(dpu, q);
}
