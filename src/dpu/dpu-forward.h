/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu-forward.h - forwarding, aggregation and the asynchronous back
 * (dpu-forward.c). It calls down into the caches, the staging buffers
 * and the memory links; up only through dpu->up and a request's q->done.
 */
#ifndef FAM_DPU_FORWARD_H
#define FAM_DPU_FORWARD_H

#include "dpu/dpu-cache.h"
#include "dpu/dpu-staging.h"

int dpu_forward_start(struct dpu *dpu, char **cause);
void dpu_forward_stop(struct dpu *dpu);
void dpu_forward_configure(struct dpu *dpu);
json_t *dpu_forward_json(struct dpu *dpu);
void dpu_forward_rw(struct dpu_hconn *hc, const struct fam_hdr *h,
    struct dpu_mregion *m, uint64_t off, uint32_t len, const uint8_t *data);
void dpu_forward_refuse(struct dpu_hconn *hc, const struct fam_hdr *h,
    int err);
struct dpu_req *dpu_call_new(struct dpu *dpu, struct dpu_node *node,
    uint8_t type, const void *payload, uint32_t plen, dpu_req_fn done,
    void *arg);
void dpu_req_free(struct dpu_req *q);
void dpu_submit(struct dpu *dpu, struct dpu_req *q);
void dpu_submit_list(struct dpu *dpu, struct dpu_reqq *list);
void dpu_submit_from(struct dpu *dpu, struct dpu_reqq *list, unsigned n);

#endif /* FAM_DPU_FORWARD_H */
