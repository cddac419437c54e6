/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu-staging.h - staging buffers and the registered arena
 * (dpu-staging.c); calls none of the dpu's other files.
 */
#ifndef FAM_DPU_STAGING_H
#define FAM_DPU_STAGING_H

#include "dpu/dpu.h"

int dpu_arena_init(struct dpu *dpu);
void dpu_arena_fini(struct dpu *dpu);
bool dpu_arena_has(const struct dpu *dpu, const uint8_t *p);
uint8_t *dpu_buf_get(struct dpu *dpu, uint32_t len);
void dpu_buf_put(struct dpu *dpu, uint8_t *p, uint32_t len);
void dpu_buf_fini(void);

#endif /* FAM_DPU_STAGING_H */
