/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu-host.h - host connections, sessions and regions (dpu-host.c). It
 * calls down into the forwarding, the caches and the memory links; the
 * forwarding lets a request's host connection go through dpu->up.
 */
#ifndef FAM_DPU_HOST_H
#define FAM_DPU_HOST_H

#include "dpu/dpu-forward.h"

uint64_t dpu_random64(void);
void dpu_host_accept(struct fam_listener *l, struct fam_conn *c,
    const char *peer, void *arg);
void dpu_host_stop(struct dpu *dpu);
void dpu_hconn_put(struct dpu_hconn *hc);
json_t *dpu_counters_json(struct dpu *dpu);

#endif /* FAM_DPU_HOST_H */
