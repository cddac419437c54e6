/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu-memlink.h - the memory nodes and the region records on them
 * (dpu-memlink.c): the lowest of the dpu's files, it calls none of the
 * others (a record's end goes up through dpu->up.mregion_gone).
 */
#ifndef FAM_DPU_MEMLINK_H
#define FAM_DPU_MEMLINK_H

#include "dpu/dpu.h"

int dpu_node_state(const struct dpu_node *n);
uint64_t dpu_node_instance(const struct dpu_node *n);
void dpu_node_stats_sync(struct dpu_node *n);
void dpu_node_flush(struct dpu_node *n);
void dpu_node_free_region(struct dpu_node *n, uint64_t instance,
    uint32_t region);
struct dpu_node *dpu_node_place(struct dpu *dpu, uint64_t place);
struct dpu_node *dpu_node_by_instance(struct dpu *dpu, uint64_t instance);
int dpu_nodes_parse(struct dpu *dpu, const char *list);
int dpu_nodes_init(struct dpu *dpu);
void dpu_nodes_connect(struct dpu *dpu);
void dpu_nodes_close(struct dpu *dpu);
bool dpu_nodes_closed(struct dpu *dpu);
int dpu_nodes_reconnect(struct dpu *dpu);
void dpu_nodes_fini(struct dpu *dpu);

struct dpu_mregion *dpu_mregion_get(struct dpu *dpu, struct dpu_node *n,
    uint64_t instance, uint64_t gen, const struct fam_region_info *info,
    const char *name);
void dpu_mregion_unlist(struct dpu *dpu, struct dpu_mregion *m);
void dpu_mregion_put(struct dpu_mregion *m);

#endif /* FAM_DPU_MEMLINK_H */
