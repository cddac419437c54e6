#!/bin/bash
# The dpu's dynamic cache: prefetch workers load the entries ahead of a
# sequential run (seen on the recent list) off the critical path, so a
# sequential scan through a host hits the dpu and moves its memory-node
# traffic from on-demand to background; random reads load nothing; a full
# cache evicts, what was read before what was loaded and not read yet;
# famtest writing and reading through it gets back every byte.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAULTBENCH=$top_builddir/contrib/bench/faultbench
FAMTEST=$top_builddir/tests/tools/famtest
start_memory mem
start_dpu dpu "$MEM_ADDR" -o dpu.dynamic_cache=on -o dpu.cache_size=64M
start_host host 16M "$MEM_ADDR" -o host.dpu="$DPU_ADDR" -o host.path=dpu -o famd.op_timeout=10s
dyn() { ctl dpu status -j | jq -er ".cache.dynamic.$1"; }

ctl dpu status -j | jq -e '.cache.dynamic | .enabled and .entries == 64 and .entry_size == 1048576
	and .prefetch_depth == 8 and .prefetch_workers == 1' >/dev/null ||
	fail "dynamic cache settings: $(ctl dpu status -j | jq -c .cache.dynamic)"
ctl dpu stats-reset >/dev/null
shim "$FAULTBENCH" -m malloc -s 128M -p seq -P 32M >"$T/seq.txt" 2>&1 ||
	fail "sequential scan through the dynamic cache: $(cat "$T/seq.txt")"
ctl dpu status -j >"$T/st.json"
rate=$(jq .cache.dynamic.hit_rate "$T/st.json")
# The prefetch worker is a thread: on a loaded machine it may wake late
# and let a run pass; hence the margin.
jq -e '.cache.dynamic | .hit_rate > 0.6 and .loads > 0 and .evictions > 0
	and .entries_used <= .entries and .prefetches_used > 0
	and .prefetches_wasted * 4 < .prefetches_used' "$T/st.json" >/dev/null ||
	fail "sequential: $(jq -c .cache.dynamic "$T/st.json")"
jq -e '.links.memory.ondemand_bytes < 50331648' "$T/st.json" >/dev/null ||
	fail "sequential: on-demand memory-link bytes $(jq .links.memory "$T/st.json")"
pass "a sequential scan of 128 MiB (pattern checked) hits the dpu's 64 MiB cache: hit rate $rate, on-demand memory-link bytes $(jq .links.memory.ondemand_bytes "$T/st.json"), prefetches used $(jq .cache.dynamic.prefetches_used "$T/st.json"), wasted $(jq .cache.dynamic.prefetches_wasted "$T/st.json")"

ctl dpu stats-reset >/dev/null
shim "$FAULTBENCH" -m malloc -s 128M -p rand -P 32M >"$T/rand.txt" 2>&1 ||
	fail "random reads: $(cat "$T/rand.txt")"
ctl dpu status -j >"$T/st.json"
jq -e '.cache.dynamic | .hit_rate < 0.3 and .loads < 100' "$T/st.json" >/dev/null ||
	fail "random: $(jq -c .cache.dynamic "$T/st.json")"
pass "random reads (pattern checked) start few loads: hit rate $(jq .cache.dynamic.hit_rate "$T/st.json"), $(jq .cache.dynamic.loads "$T/st.json") loads for 2048 reads"

ctl dpu stats-reset >/dev/null
shim "$FAMTEST" -f -s 96M -t 8 seq random strided shared split realloc >"$T/ft.txt" 2>&1 ||
	fail "famtest through the dynamic cache: $(tail -3 "$T/ft.txt")"
[ "$(dyn hits)" -gt 0 ] && [ "$(dyn write_updates)" -gt 0 ] ||
	fail "famtest: $(ctl dpu status -j | jq -c .cache.dynamic)"
pass "famtest through the dynamic cache: every byte verified; $(dyn hits) hits, $(dyn write_updates) cached entries updated by writes"

regions_gone() { counter_is dpu regions 0 && [ "$(dyn entries_used)" = 0 ]; }
wait_until 10 regions_gone || fail "entries left after every region went: $(dyn entries_used)"
pass "entries go with their regions"

# PageRank's runs (edge lists, vertex arrays; two threads) through a cache
# of 16 entries, two fifths of the footprint (the undirected scale-18
# graph): full all the time, it evicts what the runs have read, not what
# it loaded for them and they have not read yet.
GRAPH=$top_builddir/contrib/graph/graph
start_dpu dpu2 "$MEM_ADDR" -o dpu.dynamic_cache=on -o dpu.cache_size=16M
start_host host2 16M "$MEM_ADDR" -o host.dpu="$DPU_ADDR" -o host.path=dpu -o famd.op_timeout=10s
shim env OMP_NUM_THREADS=2 "$GRAPH" -A -s 18 -i 5 pagerank >"$T/g.txt" 2>&1 || fail "graph: $(cat "$T/g.txt")"
grep -q "pagerank .* ok" "$T/g.txt" || fail "pagerank wrong: $(cat "$T/g.txt")"
ctl dpu2 status -j >"$T/st.json"
# (A prefetch worker that gets little CPU on a loaded machine loads less,
# and the hit rate drops; what it loads must still be read.)
jq -e '.cache.dynamic | .evictions > 100 and .hit_rate > 0.6
	and .prefetches_wasted * 10 < .prefetches_used' "$T/st.json" >/dev/null ||
	fail "PageRank through a small cache: $(jq -c '.cache.dynamic | del(.adaptive)' "$T/st.json")"
pass "PageRank through a 16-entry cache: hit rate $(jq .cache.dynamic.hit_rate "$T/st.json"), $(jq .cache.dynamic.evictions "$T/st.json") evictions, prefetches used $(jq .cache.dynamic.prefetches_used "$T/st.json"), wasted $(jq .cache.dynamic.prefetches_wasted "$T/st.json")"
