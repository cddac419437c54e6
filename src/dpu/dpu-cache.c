/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dpu-cache.c - what the dpu answers from its own memory: the caches'
 * entry points, their setup and their status. The static cache is in
 * dpu-cache-static.c, the dynamic one in dpu-cache-dynamic.c.
 *
 * A read is looked up (dpu_cache_lookup): a hit hands back the cached
 * bytes and a reference, released once the reply referencing them is
 * sent (zero-copy); a miss is forwarded. A write the memory node has
 * acknowledged is copied in (write-through); loads are requests of the
 * back (DR_LOAD) that the caller hands on: the caches call nothing above
 * them (the prefetch workers' loads go through dpu->up.loads).
 *
 * Owns: the static_regions names (front).
 * Locks: see dpu-cache-dynamic.c (dc.lock, dc.rlock: leaves).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dpu/dpu-cache.h"

/* Splits static_regions into names. */
static void
static_names_set(struct dpu *dpu, const char *list)
{
	for (unsigned i = 0; i < dpu->nstatic_names; i++)
		free(dpu->static_names[i]);
	free(dpu->static_names);
	dpu->static_names = NULL;
	dpu->nstatic_names = 0;
	for (const char *p = list; p != NULL && *p != '\0';) {
		size_t len;
		const char *item = list_item(p, &len, &p);
		char **names;

		if (len == 0)
			continue;
		names = realloc(dpu->static_names,
		    (dpu->nstatic_names + 1) * sizeof *names);
		if (names == NULL)
			return;
		dpu->static_names = names;
		names[dpu->nstatic_names] = strndup(item, len);
		if (names[dpu->nstatic_names] != NULL)
			dpu->nstatic_names++;
	}
}

/* Reads the reloadable cache keys. Front. */
void
dpu_cache_configure(struct dpu *dpu)
{
	const struct cfg *cfg = dpu->d->cfg;

	static_names_set(dpu, cfg_str(cfg, CFG_DPU_STATIC_REGIONS));
	dpu->static_size = (uint64_t)cfg_int(cfg, CFG_DPU_STATIC_SIZE);
	atomic_store(&dpu->dc.depth, (unsigned)cfg_int(cfg,
	    CFG_DPU_PREFETCH_DEPTH));
	if (dpu->dc.nentries < 2 * (atomic_load(&dpu->dc.depth) + 2))
		log_warn("dpu: the dynamic cache holds %u entries, fewer than "
		    "two runs need (prefetch_depth + 2 each): each run loads "
		    "at most %u ahead", dpu->dc.nentries,
		    dpu->dc.nentries / 2 - 1);
	dpu->dc.bw_ratio = (unsigned)cfg_int(cfg, CFG_DPU_BW_RATIO);
	dpu->dc.window = (unsigned)cfg_int(cfg, CFG_DPU_HIT_WINDOW);
	dpu->dc.probe_ns = (uint64_t)cfg_int(cfg, CFG_DPU_PROBE_INTERVAL) *
	    1000000u;
	if ((int)cfg_int(cfg, CFG_DPU_DYNAMIC_CACHE) != dpu->dc.cfg_mode ||
	    dpu->dc.mode < 0) {
		dpu->dc.cfg_mode = (int)cfg_int(cfg, CFG_DPU_DYNAMIC_CACHE);
		dpu_cache_set_dynamic(dpu, dpu->dc.cfg_mode, "configuration");
	}
}

/*
 * Sets the caches up: the dynamic cache's buffer, table and workers. The
 * workers' loads go to dpu->up.loads, set before. Front, at start.
 */
int
dpu_cache_start(struct dpu *dpu, char **cause)
{
	int err;

	if ((err = dpu_dcache_start(dpu, cause)) < 0)
		return err;
	dpu_cache_configure(dpu);
	return dpu_dcache_workers_start(dpu, cause);
}

/* Stops the prefetch workers and empties the recent list. Front. */
void
dpu_cache_quiesce(struct dpu *dpu)
{
	dpu_dcache_quiesce(dpu);
}

/* Frees what the caches hold (every region and load is gone by now). */
void
dpu_cache_stop(struct dpu *dpu)
{
	static_names_set(dpu, "");
	dpu_dcache_stop(dpu);
}

/*
 * Looks a host's READ of m up: m's static copy if it has one, else the
 * dynamic cache (not for a region advised static that did not fit). A
 * hit fills hit: the bytes to reply with, and the reference to release
 * once the reply is sent (or failed). Loads to
 * start (a static copy's, after an error) go onto loads. Returns true on
 * a hit, false when the read is to be forwarded. Front.
 */
bool
dpu_cache_lookup(struct dpu *dpu, struct dpu_mregion *m, uint64_t off,
    uint32_t len, struct dpu_hit *hit, struct dpu_reqq *loads)
{
	struct dpu_static *st = atomic_load_explicit(&m->st,
	    memory_order_acquire);

	if (st != NULL)
		return dpu_static_lookup(dpu, m, st, off, len, hit, loads);
	if (atomic_load_explicit(&m->advised_static, memory_order_relaxed))
		return false; /* the static cache's, even when it did not fit */
	if (atomic_load_explicit(&m->advised_random, memory_order_relaxed)) {
		DPU_INC(dpu, dyn_bypassed, 1);
		return false; /* not worth an entry, nor a prefetch */
	}
	return dpu_dcache_lookup(dpu, m, off, len, hit);
}

/* A write the memory node has: the cached copy gets it too. Back. */
void
dpu_cache_write_done(struct dpu *dpu, struct dpu_req *q)
{
	struct dpu_static *st = atomic_load_explicit(&q->m->st,
	    memory_order_acquire);

	if (st != NULL && q->off + q->len <= st->size) {
		atomic_fetch_add(&q->m->writes, 1);
		dpu_static_write(st, q);
	} else
		dpu_dcache_write(dpu, q);
}

/*
 * A cache load is over (q is freed). Returns the next load to issue at
 * once (a static copy's), or NULL. Back.
 */
struct dpu_req *
dpu_cache_load_done(struct dpu *dpu, struct dpu_req *q)
{
	if (q->entry != NULL) {
		dpu_dcache_load_done(dpu, q);
		return NULL;
	}
	return dpu_static_load_done(dpu, q);
}

/*
 * A forwarded READ's answer, or a parked READ woken: the dynamic cache
 * keeps the bytes. Back.
 */
void
dpu_cache_read_done(struct dpu *dpu, struct dpu_req *q)
{
	if (atomic_load_explicit(&q->m->st, memory_order_acquire) == NULL &&
	    !atomic_load_explicit(&q->m->advised_static,
	    memory_order_relaxed) &&
	    !atomic_load_explicit(&q->m->advised_random,
	    memory_order_relaxed))
		dpu_dcache_insert(dpu, q);
}

/*
 * Parks a READ the lookup said to wait for a dynamic load. Returns what it
 * did (enum dpu_park). Front.
 */
int
dpu_cache_park(struct dpu *dpu, struct dpu_req *q)
{
	return dpu_dcache_park(dpu, q);
}

/*
 * A region record goes: what the caches hold of it with it. Any side;
 * dpu-memlink.c calls it through dpu->up.mregion_gone.
 */
void
dpu_cache_mregion_gone(struct dpu_mregion *m)
{
	struct dpu_static *st = atomic_load(&m->st);
	struct dpu *dpu = m->node->dpu;

	dpu_dcache_purge(dpu, m);
	if (st != NULL)
		dpu_static_free(dpu, st);
}

/* Describes the caches for status. */
json_t *
dpu_cache_json(struct dpu *dpu)
{
	struct dpu_dcache *dc = &dpu->dc;
	uint64_t hits = DPU_GET(dpu, static_hits);
	uint64_t misses = DPU_GET(dpu, static_misses);
	uint64_t dhits = DPU_GET(dpu, dyn_hits), dmiss = DPU_GET(dpu, dyn_misses);
	unsigned used;
	json_t *j;

	pthread_mutex_lock(&dc->lock);
	used = dc->nused;
	pthread_mutex_unlock(&dc->lock);
	j = json_pack("{s:{s:I,s:I,s:I,s:I,s:I,s:I,s:f,s:I,s:I,s:I,s:I}}",
	    "static",
	    "regions", (json_int_t)atomic_load(&dpu->static_regions),
	    "size", (json_int_t)dpu->static_size,
	    "cached_bytes", (json_int_t)atomic_load(&dpu->static_bytes),
	    "loaded_bytes", (json_int_t)DPU_GET(dpu, static_loaded_bytes),
	    "hits", (json_int_t)hits,
	    "misses", (json_int_t)misses,
	    "hit_rate", hits + misses > 0 ? (double)hits /
	    (double)(hits + misses) : 0.0,
	    "hit_bytes", (json_int_t)DPU_GET(dpu, static_hit_bytes),
	    "rejected", (json_int_t)DPU_GET(dpu, static_rejected),
	    "partial", (json_int_t)DPU_GET(dpu, static_partial),
	    "load_errors", (json_int_t)DPU_GET(dpu, static_load_errors));
	json_object_set_new(j, "dynamic", json_pack("{s:s,s:b,s:I,s:I,s:i,s:i,"
	    "s:i,s:i,s:I,s:I,s:f,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
	    "s:I,s:I,s:I,s:I,s:I,s:I,s:i,s:I,s:I,s:I}",
	    "mode", dc->mode == CFG_DYNAMIC_ADAPTIVE ? "adaptive" :
	    dc->mode == CFG_DYNAMIC_ON ? "on" : "off",
	    "enabled", atomic_load(&dc->enabled),
	    "size", (json_int_t)dc->size,
	    "entry_size", (json_int_t)dc->entry_size,
	    "entries", (int)dc->nentries,
	    "entries_used", (int)used,
	    "prefetch_depth", (int)atomic_load(&dc->depth),
	    "prefetch_workers", (int)dc->nworkers,
	    "hits", (json_int_t)dhits,
	    "misses", (json_int_t)dmiss,
	    "hit_rate", dhits + dmiss > 0 ? (double)dhits /
	    (double)(dhits + dmiss) : 0.0,
	    "hit_bytes", (json_int_t)DPU_GET(dpu, dyn_hit_bytes),
	    "lookup_bytes", (json_int_t)DPU_GET(dpu, dyn_lookup_bytes),
	    "load_served_bytes", (json_int_t)DPU_GET(dpu,
	    dyn_load_served_bytes),
	    "misses_while_loading", (json_int_t)DPU_GET(dpu, dyn_loading),
	    "waits", (json_int_t)DPU_GET(dpu, dyn_waits),
	    "partial_misses", (json_int_t)DPU_GET(dpu, dyn_partial),
	    "insert_bytes", (json_int_t)DPU_GET(dpu, dyn_insert_bytes),
	    "loads", (json_int_t)DPU_GET(dpu, dyn_loads),
	    "load_bytes", (json_int_t)DPU_GET(dpu, dyn_load_bytes),
	    "load_errors", (json_int_t)DPU_GET(dpu, dyn_load_errors),
	    "evictions", (json_int_t)DPU_GET(dpu, dyn_evictions),
	    "no_room", (json_int_t)DPU_GET(dpu, dyn_full),
	    "write_updates", (json_int_t)DPU_GET(dpu, dyn_write_updates),
	    "prefetches_used", (json_int_t)DPU_GET(dpu, dyn_prefetch_used),
	    "prefetches_wasted", (json_int_t)DPU_GET(dpu, dyn_prefetch_wasted),
	    "recent_pushed", (json_int_t)DPU_GET(dpu, recent_pushed),
	    "recent_overwritten", (json_int_t)DPU_GET(dpu, recent_dropped),
	    "streams", (int)dc->streams,
	    "evicted_unserved_had_bytes", (json_int_t)DPU_GET(dpu,
	    dyn_unserved_had_bytes),
	    "evicted_unserved_unread_bytes", (json_int_t)DPU_GET(dpu,
	    dyn_unserved_unread_bytes)));
	json_object_set_new(json_object_get(j, "dynamic"), "bypassed",
	    json_integer((json_int_t)DPU_GET(dpu, dyn_bypassed)));
	json_object_set_new(json_object_get(j, "dynamic"), "spanning_reads",
	    json_integer((json_int_t)DPU_GET(dpu, dyn_spanning)));
	json_object_set_new(json_object_get(j, "dynamic"), "adaptive",
	    json_pack("{s:f,s:i,s:i,s:i,s:f,s:I,s:I,s:I,s:I}",
	    "threshold", (double)dc->bw_ratio / 100.0,
	    "window", (int)dc->window,
	    "window_reads", (int)dc->win_reads,
	    "window_hits", (int)dc->win_hits,
	    "last_window_hit_rate", dc->last_rate,
	    "windows", (json_int_t)dc->windows,
	    "switches_off", (json_int_t)dc->switches_off,
	    "switches_on", (json_int_t)dc->switches_on,
	    "probe_in_ms", (json_int_t)(dc->probe_at > mono_ns() ?
	    (dc->probe_at - mono_ns()) / 1000000u : 0)));
	return j;
}
