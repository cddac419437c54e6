#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The dpu's static cache: a region named in static_regions, or advised
# static by its program (fam_advise, through the host), is loaded whole
# into the dpu once, then every read of it is served there (100% hits, no
# memory-link traffic); writes go through to the memory node and update the
# copy, so reads see them. PageRank through a host with its vertex array
# advised static moves fewer bytes on the memory link, and stays right.
. "$(dirname "$0")/lib.sh"
require_cmd jq

start_memory mem
# Sizes scale (lib.sh's scaled); famclient's requests are 1 MiB at most, so
# a static region of A MiB is read in A + 1 + ceil(7A/8) of them below.
a=$(mib 8M)
b=$(mib 4M)
ab=$(((a + b) << 20))
start_dpu dpu "$MEM_ADDR" -o dpu.static_regions=pr-static,too-big \
	-o dpu.static_size="$(scaled 64M)" -o dpu.dynamic_cache=off
# (the checks read one status, snap's: a process costs in the emulated
# Soft-RoCE guest)
snap() { ctl dpu status -j >"$T/st.json"; }
sj() { jq -er "$1" "$T/st.json"; }
st() { sj ".cache.static.$1"; }
loaded_is() { snap && [ "$(st loaded_bytes)" -ge "$1" ]; }
freed() { snap && [ "$(sj .counters.regions)" = 0 ]; }

e=$((a << 17)) # an eighth of the region
hold_client "$T/a.txt" -n h1 "$DPU_ADDR" create "${a}M" name=pr-static write 0 "${a}M" 3 hold 30 \
	read 0 "${a}M" 3 write 0 "$e" 4 read 0 "$e" 4 read "$e" $(((a << 20) - e)) 3 free
wait_until 10 loaded_is $((a << 20)) || fail "not loaded: $(jq -c .cache "$T/st.json")"
[ "$(st regions)" = 1 ] || fail "static regions: $(st regions)"
reads=$(sj .counters.memory_reads)
kill -USR1 "$HOLD_PID"
wait "$HOLD_PID" || fail "reads from the static copy: $(cat "$T/a.txt")"
snap
[ "$(sj .counters.memory_reads)" = "$reads" ] ||
	fail "reads of a loaded static region went to the memory node ($reads -> $(sj .counters.memory_reads))"
[ "$(st hits)" -ge $((a + 1 + (7 * a + 7) / 8)) ] && [ "$(st misses)" = 0 ] || fail "hits $(st hits), misses $(st misses)"
wait_until 5 freed || fail "region not freed"
[ "$(st regions)" = 0 ] && [ "$(st cached_bytes)" = 0 ] || fail "copy kept after the free"
pass "a region named in static_regions is loaded whole; its reads are all hits; a write goes through and is read back from the copy; the copy goes with the region"

hold_client "$T/b.txt" -n h2 "$DPU_ADDR" create "${b}M" write 0 "${b}M" 5 advise static hold 30 read 0 "${b}M" 5 free
wait_until 10 loaded_is "$ab" || fail "advised region not loaded"
reads=$(sj .counters.memory_reads)
kill -USR1 "$HOLD_PID"
wait "$HOLD_PID" || fail "advised region: $(cat "$T/b.txt")"
snap
[ "$(sj .counters.memory_reads)" = "$reads" ] || fail "reads of an advised region went to the memory node"
# Over verbs the dpu forwards reads and writes one-sided, but loads a
# region that is not shared as requests (a host may take such a region
# over, which would end a lease under a one-sided load): the memory node
# served the loads of both regions and nothing else.
how=
if [ "$TEST_TRANSPORT" = verbs ]; then
	ml=$(jq -c .forwarding.memory_link "$T/st.json")
	mem=$(ctl mem status -j | jq -c '.counters | {reads, writes}')
	echo "$ml $mem" | jq -se '.[0] as $ml | .[1] | .reads == $ml.loads_twosided and .reads >= 2
		and .writes == 0 and $ml.twosided == 0 and $ml.onesided >= 3' >/dev/null ||
		fail "over verbs, memory link $ml, memory node $mem"
	how="; over verbs the memory node served the $(echo "$mem" | jq .reads) loads, writes went one-sided"
fi
pass "REGION_ADVISE static: loaded, then served from the copy$how"

# A region larger than static_size: a partial copy, of the pieces its
# first reads (as many as its 1 MiB pieces) touched most: here piece 1.
big=$(mib 96M)
reads=()
for _ in $(seq "$big"); do reads+=(read 1M 64K 1); done
hold_client "$T/c.txt" -n h3 "$DPU_ADDR" create "${big}M" name=too-big write 0 2M 1 "${reads[@]}" hold 30 \
	read 1M 1M 1 read 1M 1M 1 read 0 1M 1 free
partial_loaded() { snap && [ "$(st partial)" = 1 ] && [ "$(st loaded_bytes)" -ge $(((a + b + 1) << 20)) ]; }
wait_until 10 partial_loaded || fail "no partial copy: $(jq -c .cache.static "$T/st.json")"
[ "$(st cached_bytes)" -le $(($(mib 64M) << 20)) ] && [ "$(st rejected)" = 0 ] ||
	fail "partial copy: $(jq -c .cache.static "$T/st.json")"
hits=$(st hits) misses=$(st misses)
kill -USR1 "$HOLD_PID"
wait "$HOLD_PID" || fail "a region too big for the static cache: $(cat "$T/c.txt")"
snap
[ "$(st hits)" = $((hits + 2)) ] && [ "$(st misses)" = $((misses + 1)) ] ||
	fail "partial copy: piece 1 not served from it, or piece 0 was: $(jq -c .cache.static "$T/st.json")"
pass "a region that would pass static_size gets a partial copy of the piece its first $big reads touched (counted): its reads hit, the others go to the memory node"

daddr=$DPU_ADDR
start_dpu dpu0 "$MEM_ADDR" -o dpu.static_regions=too-big -o dpu.static_size=512K -o dpu.dynamic_cache=off
d0addr=$DPU_ADDR
DPU_ADDR=$daddr
"$FAMCLIENT" -q -n h4 "$d0addr" create "$(scaled 4M)" name=too-big write 0 1M 1 read 0 1M 1 free \
	>"$T/d.txt" 2>&1 || fail "a region too big for any piece of the static cache: $(cat "$T/d.txt")"
ctl dpu0 status -j | jq -e '.cache.static | .rejected == 1 and .regions == 0 and .cached_bytes == 0' >/dev/null ||
	fail "not refused: $(ctl dpu0 status -j | jq -c .cache.static)"
pass "with static_size under a piece, the region is not cached (counted), and works as usual"

# PageRank through a host with an 8 MiB buffer, vertex array advised static
# (graph -A, through libfamshim's fam_advise) or not; GRAPH_ITERS
# iterations (5). Scaled, the graph loses a level per halving and the
# shim's threshold goes down alike, so the 2 MiB vertex array (8 bytes a
# vertex) stays fabric-attached memory; and the graph is built in local
# memory and loaded (written front to back): the build pages through
# windows of 1 MiB, one per thread, which a buffer of a few MiB holds, not
# a scaled one.
GRAPH=$top_builddir/contrib/graph/graph
gscale=$((18 - $(log2 "$TEST_SCALE")))
genv=(OMP_NUM_THREADS=2)
gsrc=(-s "$gscale")
if [ "$TEST_SCALE" != 1 ]; then
	genv+=(FAM_THRESHOLD=$((1024 / TEST_SCALE))K)
	"$GRAPH" -s "$gscale" -W "$T/g" >"$T/w.txt" 2>&1 || fail "graph -W: $(cat "$T/w.txt")"
	gsrc=(-c "$T/g")
fi
start_host host "$(scaled 8M)" "$MEM_ADDR" -o host.dpu="$DPU_ADDR" -o host.path=dpu -o famd.op_timeout=10s
run_graph() {
	ctl dpu stats-reset >/dev/null
	shim env "${genv[@]}" "$GRAPH" "$@" "${gsrc[@]}" -i "${GRAPH_ITERS:-5}" pagerank >"$T/g.txt" 2>&1 ||
		fail "graph $*: $(cat "$T/g.txt")"
	grep -q "pagerank .* ok" "$T/g.txt" || fail "pagerank wrong: $(cat "$T/g.txt")"
	link dpu memory ondemand
}
plain=$(run_graph)
advised=$(run_graph -A)
snap
jq -e '.cache.static | .hits > 0 and .misses < .hits' "$T/st.json" >/dev/null ||
	fail "advised PageRank: $(jq -c .cache.static "$T/st.json")"
if [ "$TEST_TRANSPORT" = verbs ]; then
	jq -e '.forwarding.memory_link | .onesided > 0 and .twosided == 0 and .loads_twosided > 0' \
		"$T/st.json" >/dev/null || fail "advised PageRank over verbs: $(jq -c .forwarding.memory_link "$T/st.json")"
fi
[ "$advised" -lt "$plain" ] || fail "on-demand memory-link bytes $plain plain, $advised advised"
pass "PageRank (scale $gscale) with its vertex array advised static: right, $(jq .cache.static.hits "$T/st.json") static hits, on-demand memory-link bytes $((plain >> 20)) -> $((advised >> 20)) MiB"
