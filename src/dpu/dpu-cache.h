/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu-cache.h - the static and dynamic caches (dpu-cache.c,
 * dpu-cache-static.c, dpu-cache-dynamic.c, dpu-cache-prefetch.c). They
 * call only dpu-memlink.c below them; what goes up (the prefetch
 * workers' loads) goes through dpu->up.
 */
#ifndef FAM_DPU_CACHE_H
#define FAM_DPU_CACHE_H

#include "dpu/dpu-memlink.h"

/* A read the cache serves: its bytes, and the reference held on them. */
struct dpu_hit {
	const uint8_t *data;
	bool dynamic;                 /* from the dynamic cache, else static */
	bool wait;                    /* a miss whose bytes are loading: park
	                               * the READ (dpu_cache_park) */
	void (*release)(void *arg);   /* once the reply is sent, or failed */
	void *arg;
};

/* dpu-cache.c: the entry points */
int dpu_cache_start(struct dpu *dpu, char **cause);
void dpu_cache_configure(struct dpu *dpu);
void dpu_cache_quiesce(struct dpu *dpu);
void dpu_cache_stop(struct dpu *dpu);
json_t *dpu_cache_json(struct dpu *dpu);
bool dpu_cache_lookup(struct dpu *dpu, struct dpu_mregion *m, uint64_t off,
    uint32_t len, struct dpu_hit *hit, struct dpu_reqq *loads);
void dpu_cache_write_done(struct dpu *dpu, struct dpu_req *q);
struct dpu_req *dpu_cache_load_done(struct dpu *dpu, struct dpu_req *q);
void dpu_cache_mregion_gone(struct dpu_mregion *m);
void dpu_cache_read_done(struct dpu *dpu, struct dpu_req *q);

/* What dpu_cache_park did with a READ. */
enum dpu_park {
	DP_FORWARD, /* not cached: forward it */
	DP_PARKED,  /* waits for a load; dpu_dcache_woken gives it back */
	DP_READY,   /* its bytes are in q->buf now: answer it */
};
int dpu_cache_park(struct dpu *dpu, struct dpu_req *q);

/* dpu-cache-static.c */
void dpu_cache_region_new(struct dpu *dpu, struct dpu_mregion *m,
    struct dpu_reqq *loads);
int dpu_cache_advise(struct dpu *dpu, struct dpu_mregion *m,
    uint32_t advice, struct dpu_reqq *loads);
bool dpu_static_lookup(struct dpu *dpu, struct dpu_mregion *m,
    struct dpu_static *st, uint64_t off, uint32_t len, struct dpu_hit *hit,
    struct dpu_reqq *loads);
struct dpu_req *dpu_static_load_done(struct dpu *dpu, struct dpu_req *q);
void dpu_static_write(struct dpu_static *st, const struct dpu_req *q);
void dpu_static_free(struct dpu *dpu, struct dpu_static *st);

/* dpu-cache-dynamic.c */
int dpu_dcache_start(struct dpu *dpu, char **cause);
void dpu_dcache_stop(struct dpu *dpu);
void dpu_cache_set_dynamic(struct dpu *dpu, int mode, const char *why);
bool dpu_dcache_lookup(struct dpu *dpu, struct dpu_mregion *m, uint64_t off,
    uint32_t len, struct dpu_hit *hit);
void dpu_dcache_load_done(struct dpu *dpu, struct dpu_req *q);
int dpu_dcache_park(struct dpu *dpu, struct dpu_req *q);
void dpu_dcache_woken(struct dpu *dpu, struct dpu_reqq *ready,
    struct dpu_reqq *again);
void dpu_dcache_insert(struct dpu *dpu, struct dpu_req *q);
struct dpu_req *dpu_dcache_load_new(struct dpu *dpu, struct dpu_mregion *m,
    uint64_t index, uint32_t from);

/* dpu-cache-prefetch.c */
int dpu_dcache_workers_start(struct dpu *dpu, char **cause);
void dpu_dcache_quiesce(struct dpu *dpu);
void dpu_recent_push(struct dpu *dpu, struct dpu_mregion *m, uint64_t off,
    uint32_t len);
void dpu_dcache_write(struct dpu *dpu, struct dpu_req *q);
void dpu_dcache_purge(struct dpu *dpu, struct dpu_mregion *m);

#endif /* FAM_DPU_CACHE_H */
