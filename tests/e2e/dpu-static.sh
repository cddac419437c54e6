#!/bin/bash
# The dpu's static cache: a region named in static_regions, or advised
# static by its program (fam_advise, through the host), is loaded whole
# into the dpu once, then every read of it is served there (100% hits, no
# memory-link traffic); writes go through to the memory node and update the
# copy, so reads see them. PageRank through a host with its vertex array
# advised static moves fewer bytes on the memory link, and stays right.
. "$(dirname "$0")/lib.sh"
require_cmd jq

start_memory mem
start_dpu dpu "$MEM_ADDR" -o dpu.static_regions=pr-static,too-big -o dpu.static_size=64M \
	-o dpu.dynamic_cache=off
st() { ctl dpu status -j | jq -er ".cache.static.$1"; }
loaded_is() { [ "$(st loaded_bytes)" -ge "$1" ]; }

hold_client "$T/a.txt" -n h1 "$DPU_ADDR" create 8M name=pr-static write 0 8M 3 hold 30 \
	read 0 8M 3 write 0 1M 4 read 0 1M 4 read 1M 7M 3 free
wait_until 10 loaded_is 8388608 || fail "not loaded: $(ctl dpu status -j | jq -c .cache)"
[ "$(st regions)" = 1 ] || fail "static regions: $(st regions)"
reads=$(counter dpu memory_reads)
kill -USR1 "$HOLD_PID"
wait "$HOLD_PID" || fail "reads from the static copy: $(cat "$T/a.txt")"
[ "$(counter dpu memory_reads)" = "$reads" ] ||
	fail "reads of a loaded static region went to the memory node ($reads -> $(counter dpu memory_reads))"
[ "$(st hits)" -ge 16 ] && [ "$(st misses)" = 0 ] || fail "hits $(st hits), misses $(st misses)"
wait_until 5 counter_is dpu regions 0 || fail "region not freed"
[ "$(st regions)" = 0 ] && [ "$(st cached_bytes)" = 0 ] || fail "copy kept after the free"
pass "a region named in static_regions is loaded whole; its reads are all hits; a write goes through and is read back from the copy; the copy goes with the region"

hold_client "$T/b.txt" -n h2 "$DPU_ADDR" create 4M write 0 4M 5 advise static hold 30 read 0 4M 5 free
wait_until 10 loaded_is $((8388608 + 4194304)) || fail "advised region not loaded"
reads=$(counter dpu memory_reads)
kill -USR1 "$HOLD_PID"
wait "$HOLD_PID" || fail "advised region: $(cat "$T/b.txt")"
[ "$(counter dpu memory_reads)" = "$reads" ] || fail "reads of an advised region went to the memory node"
pass "REGION_ADVISE static: loaded, then served from the copy"

"$FAMCLIENT" -q -n h3 "$DPU_ADDR" create 96M name=too-big write 0 1M 1 read 0 1M 1 free \
	>"$T/c.txt" 2>&1 || fail "a region too big for the static cache: $(cat "$T/c.txt")"
[ "$(st rejected)" = 1 ] || fail "not refused: $(ctl dpu status -j | jq -c .cache.static)"
pass "a region that would pass static_size is not cached (counted), and works as usual"

# PageRank through a host with an 8 MiB buffer, vertex array advised static
# (graph -A, through libfamshim's fam_advise) or not.
GRAPH=$top_builddir/contrib/graph/graph
start_host host 8M "$MEM_ADDR" -o host.dpu="$DPU_ADDR" -o host.path=dpu -o famd.op_timeout=10s
run_graph() {
	ctl dpu stats-reset >/dev/null
	shim env OMP_NUM_THREADS=2 "$GRAPH" "$@" -s 18 -i 5 pagerank >"$T/g.txt" 2>&1 ||
		fail "graph $*: $(cat "$T/g.txt")"
	grep -q "pagerank .* ok" "$T/g.txt" || fail "pagerank wrong: $(cat "$T/g.txt")"
	link dpu memory ondemand
}
plain=$(run_graph)
advised=$(run_graph -A)
[ "$(st hits)" -gt 0 ] && [ "$(st misses)" -lt "$(st hits)" ] ||
	fail "advised PageRank: $(ctl dpu status -j | jq -c .cache.static)"
[ "$advised" -lt "$plain" ] || fail "on-demand memory-link bytes $plain plain, $advised advised"
pass "PageRank with its vertex array advised static: right, $(st hits) static hits, on-demand memory-link bytes $((plain >> 20)) -> $((advised >> 20)) MiB"
