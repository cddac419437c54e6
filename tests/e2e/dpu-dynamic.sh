#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The dpu's dynamic cache: prefetch workers load the entries ahead of a
# sequential run (seen on the recent list) off the critical path, so a
# sequential scan through a host hits the dpu and moves its memory-node
# traffic from on-demand to background; random reads load nothing; a full
# cache evicts, what was read before what was loaded and not read yet;
# famtest writing and reading through it gets back every byte; a block
# advised MADV_RANDOM is neither read ahead nor cached; a host learns the
# entry size at hello and cuts its reads there.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAULTBENCH=$top_builddir/contrib/bench/faultbench
FAMTEST=$top_builddir/tests/tools/famtest
# Scaled (lib.sh's scaled), the host's chunks and the cache's entries
# shrink with the data: as many of them as unscaled, since what is proved
# depends on their number (the cache's 64 entries and prefetch depth, a
# random scan's reads against the recent list of 128 that could make them
# look like runs). The host then reads no chunks ahead (prefetch = 0), so
# that each of its reads is one chunk, as unscaled. The second host
# (PageRank: no such count of reads to keep) pages chunks of half an entry,
# so that it reads an eighth as often (each read costs in the emulated
# Soft-RoCE guest), still two a run for each entry. famtest's blocks and
# the shim's threshold shrink alike. FAMTEST_SIZE and FAMTEST_THREADS
# shrink famtest further.
chunk=$((65536 / TEST_SCALE > 4096 ? 65536 / TEST_SCALE : 4096))
entry=$((1048576 / TEST_SCALE))
hopts=() h2opts=() dopts=() fenv=()
if [ "$TEST_SCALE" != 1 ]; then
	hopts=(-o host.chunk_size="$chunk" -o host.prefetch=0)
	h2opts=(-o host.chunk_size=$((entry / 2 < 65536 ? entry / 2 : 65536)) -o host.prefetch=0)
	dopts=(-o dpu.cache_entry_size="$entry")
	fenv=(FAM_THRESHOLD=$((1024 / TEST_SCALE))K)
fi
start_memory mem
start_dpu dpu "$MEM_ADDR" -o dpu.dynamic_cache=on -o dpu.cache_size="$(scaled 64M)" ${dopts[@]+"${dopts[@]}"}
start_host host "$(scaled 16M)" "$MEM_ADDR" -o host.dpu="$DPU_ADDR" -o host.path=dpu -o famd.op_timeout=10s \
	${hopts[@]+"${hopts[@]}"}
dyn() { ctl dpu status -j | jq -er ".cache.dynamic.$1"; }

ctl dpu status -j | jq -e --argjson e "$entry" '.cache.dynamic | .enabled and .entries == 64 and .entry_size == $e
	and .prefetch_depth == 8 and .prefetch_workers == 1' >/dev/null ||
	fail "dynamic cache settings: $(ctl dpu status -j | jq -c .cache.dynamic)"
ctl dpu stats-reset >/dev/null
shim "$FAULTBENCH" -m malloc -s "$(scaled 128M)" -c "$chunk" -p seq -P "$(scaled 32M)" >"$T/seq.txt" 2>&1 ||
	fail "sequential scan through the dynamic cache: $(cat "$T/seq.txt")"
ctl dpu status -j >"$T/st.json"
rate=$(jq .cache.dynamic.hit_rate "$T/st.json")
# The prefetch worker is a thread: on a loaded machine it may wake late
# and let a run pass; hence the margin.
jq -e '.cache.dynamic | .hit_rate > 0.6 and .loads > 0 and .evictions > 0
	and .entries_used <= .entries and .prefetches_used > 0
	and .prefetches_wasted * 4 < .prefetches_used' "$T/st.json" >/dev/null ||
	fail "sequential: $(jq -c .cache.dynamic "$T/st.json")"
jq -e --argjson b $((50331648 / TEST_SCALE)) '.links.memory.ondemand_bytes < $b' "$T/st.json" >/dev/null ||
	fail "sequential: on-demand memory-link bytes $(jq .links.memory "$T/st.json")"
# Over tcp the loads have a connection of their own (forwarded reads do not
# wait behind them on one stream).
if [ "$TEST_TRANSPORT" = tcp ]; then
	jq -e '.forwarding.memory_link.loads_own_connection == .forwarding.memory_link.loads_twosided
		and .forwarding.memory_link.loads_twosided > 0' "$T/st.json" >/dev/null ||
		fail "loads not on their own connection: $(jq -c .forwarding.memory_link "$T/st.json")"
	# (the memory node's sessions: the dpu's, both connections, and the
	# host's)
	ctl mem status -j | jq -e '.peers | length == 2' >/dev/null ||
		fail "the dpu's two connections are not one session: $(ctl mem status -j | jq -c .peers)"
fi
pass "a sequential scan of $(mib 128M) MiB (pattern checked) hits the dpu's $(mib 64M) MiB cache: hit rate $rate, on-demand memory-link bytes $(jq .links.memory.ondemand_bytes "$T/st.json"), prefetches used $(jq .cache.dynamic.prefetches_used "$T/st.json"), wasted $(jq .cache.dynamic.prefetches_wasted "$T/st.json")"

ctl dpu stats-reset >/dev/null
shim "$FAULTBENCH" -m malloc -s "$(scaled 128M)" -c "$chunk" -p rand -P "$(scaled 32M)" >"$T/rand.txt" 2>&1 ||
	fail "random reads: $(cat "$T/rand.txt")"
ctl dpu status -j >"$T/st.json"
jq -e '.cache.dynamic | .hit_rate < 0.3 and .loads < 100' "$T/st.json" >/dev/null ||
	fail "random: $(jq -c .cache.dynamic "$T/st.json")"
pass "random reads (pattern checked) start few loads: hit rate $(jq .cache.dynamic.hit_rate "$T/st.json"), $(jq .cache.dynamic.loads "$T/st.json") loads for $(($(mib 128M) * 1048576 / chunk)) reads"

# A block advised MADV_RANDOM: the host reads nothing ahead of it, and the
# dpu neither caches nor prefetches it (its reads are forwarded, counted).
ctl dpu stats-reset >/dev/null
ctl host stats-reset >/dev/null
shim "$FAULTBENCH" -m malloc -s "$(scaled 128M)" -c "$chunk" -p seq -P "$(scaled 32M)" -R >"$T/adv.txt" 2>&1 ||
	fail "a sequential scan of a block advised random: $(cat "$T/adv.txt")"
ctl dpu status -j >"$T/st.json"
jq -e '.cache.dynamic | .hits == 0 and .loads == 0 and .insert_bytes == 0 and .bypassed > 0' "$T/st.json" >/dev/null ||
	fail "advised random, the dpu: $(jq -c .cache.dynamic "$T/st.json")"
ctl host status -j | jq -e '.counters.prefetches == 0 and .counters.fetches > 0' >/dev/null ||
	fail "advised random, the host read ahead: $(ctl host status -j | jq -c .counters)"
pass "a block advised MADV_RANDOM (pattern checked): no read-ahead on the host, $(jq .cache.dynamic.bypassed "$T/st.json") reads past the dpu's dynamic cache, none loaded"

# A second dpu and host: a cache of 16 entries.
GRAPH=$top_builddir/contrib/graph/graph
gscale=$((18 - $(log2 "$TEST_SCALE")))
gsrc=(-s "$gscale")
if [ "$TEST_SCALE" != 1 ]; then
	# (built in local memory and loaded: see below)
	"$GRAPH" -s "$gscale" -W "$T/g" >"$T/w.txt" 2>&1 || fail "graph -W: $(cat "$T/w.txt")"
	gsrc=(-c "$T/g")
fi
start_dpu dpu2 "$MEM_ADDR" -o dpu.dynamic_cache=on -o dpu.cache_size="$(scaled 16M)" ${dopts[@]+"${dopts[@]}"}
start_host host2 "$(scaled 16M)" "$MEM_ADDR" -o host.dpu="$DPU_ADDR" -o host.path=dpu -o famd.op_timeout=10s \
	${h2opts[@]+"${h2opts[@]}"}
dyn() { ctl dpu2 status -j | jq -er ".cache.dynamic.$1"; }

# famtest through the first dpu and host: its cache of 64 entries holds
# four times the host's buffer, so that a write-back finds the entry its
# chunk was read from still cached (in the second's 16, as large as the
# buffer, the entries a host has read are the first to go: whether a
# write-back finds one is luck).
size=${FAMTEST_SIZE:-$(scaled 96M)}
fdpu=dpu fsock=$T/host.session
fdyn() { ctl "$fdpu" status -j | jq -er ".cache.dynamic.$1"; }
ctl "$fdpu" stats-reset >/dev/null
# (famtest runs again, every byte verified each time, until writes have
# updated an entry: three runs at most.)
for run in 1 2 3; do
	FAM_SOCKET=$fsock shim env ${fenv[@]+"${fenv[@]}"} "$FAMTEST" -f -s "$size" seq random strided shared split realloc >"$T/ft.txt" 2>&1 ||
		fail "famtest through the dynamic cache (run $run): $(tail -3 "$T/ft.txt")"
	[ "$(fdyn hits)" -gt 0 ] && [ "$(fdyn write_updates)" -gt 0 ] && break
done
[ "$(fdyn hits)" -gt 0 ] && [ "$(fdyn write_updates)" -gt 0 ] ||
	fail "famtest, $run runs: $(ctl "$fdpu" status -j | jq -c .cache.dynamic)"
pass "famtest -s $size through the dynamic cache: every byte verified; $(fdyn hits) hits, $(fdyn write_updates) cached entries updated by writes"

regions_gone() { counter_is "$fdpu" regions 0 && [ "$(fdyn entries_used)" = 0 ]; }
wait_until 10 regions_gone || fail "entries left after every region went: $(fdyn entries_used)"
pass "entries go with their regions"

# PageRank's runs (edge lists, vertex arrays; two threads) through the
# cache of 16 entries, two fifths of the footprint (the undirected
# scale-18 graph): full all the time, it evicts what the runs have read,
# not what it loaded for them and they have not read yet. Scaled, the
# graph loses a level per halving, and is built in local memory and
# loaded: the build pages through windows of 1 MiB, one per thread, that
# a buffer of a few MiB holds, not a scaled one.
ctl dpu2 stats-reset >/dev/null
shim env ${fenv[@]+"${fenv[@]}"} OMP_NUM_THREADS=2 "$GRAPH" -A "${gsrc[@]}" -i 5 pagerank >"$T/g.txt" 2>&1 ||
	fail "graph: $(cat "$T/g.txt")"
grep -q "pagerank .* ok" "$T/g.txt" || fail "pagerank wrong: $(cat "$T/g.txt")"
ctl dpu2 status -j >"$T/st.json"
# (A prefetch worker that gets little CPU on a loaded machine loads less,
# and the hit rate drops; what it loads must still be read.)
jq -e '.cache.dynamic | .evictions > 100 and .hit_rate > 0.6
	and .prefetches_wasted * 10 < .prefetches_used' "$T/st.json" >/dev/null ||
	fail "PageRank through a small cache: $(jq -c '.cache.dynamic | del(.adaptive)' "$T/st.json")"
pass "PageRank (scale $gscale) through a 16-entry cache: hit rate $(jq .cache.dynamic.hit_rate "$T/st.json"), $(jq .cache.dynamic.evictions "$T/st.json") evictions, prefetches used $(jq .cache.dynamic.prefetches_used "$T/st.json"), wasted $(jq .cache.dynamic.prefetches_wasted "$T/st.json")"

# A dpu whose entries are smaller than the host's read runs (a quarter of
# 1 MiB): the host learns their size at hello and cuts its reads there,
# so that none spans two entries.
small=$((entry / 4))
start_dpu dpu3 "$MEM_ADDR" -o dpu.dynamic_cache=on -o dpu.cache_size="$(scaled 16M)" \
	-o dpu.cache_entry_size="$small"
start_host host3 "$(scaled 16M)" "$MEM_ADDR" -o host.dpu="$DPU_ADDR" -o host.path=dpu -o famd.op_timeout=10s \
	-o host.chunk_size="$chunk" -o host.prefetch=16
ctl host3 status -j | jq -e --argjson s "$small" '.path.dpu_piece_bytes == $s' >/dev/null ||
	fail "the host did not learn the dpu's entry size: $(ctl host3 status -j | jq -c .path)"
shim "$FAULTBENCH" -m malloc -s "$(scaled 32M)" -c "$chunk" -p seq \
	-P "$(scaled 32M)" >"$T/cut.txt" 2>&1 || fail "a sequential scan through small entries: $(cat "$T/cut.txt")"
ctl dpu3 status -j >"$T/st.json"
jq -e '.cache.dynamic | .spanning_reads == 0 and .hits > 0' "$T/st.json" >/dev/null ||
	fail "reads across entries: $(jq -c '.cache.dynamic | del(.adaptive)' "$T/st.json")"
ctl host3 status -j | jq -e '.counters.prefetches > 0' >/dev/null ||
	fail "the host read nothing ahead: $(ctl host3 status -j | jq -c .counters)"
pass "entries of $((small >> 10)) KiB: the host learned their size at hello; its read-ahead crossed no entry ($(jq .cache.dynamic.hits "$T/st.json") hits)"
