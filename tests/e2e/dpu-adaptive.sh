#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Adaptive dynamic caching: over windows of hit_window reads the dpu
# measures its dynamic cache's hit rate h, keeps it on while h > bw_ratio
# (B_net/B_intra; 30% here), turns it off (logged, counted, shown by famctl status)
# when a random scan drags h under, and tries it again after
# probe_interval, keeping it once a sequential scan brings h back up.
# cache.set changes the mode at run time.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAULTBENCH=$top_builddir/contrib/bench/faultbench
# Scaled (lib.sh's scaled), the cache's entries shrink with the data (as
# many as unscaled), and a host's chunks to a quarter of an entry: the
# host reads no chunks ahead (its runs keep within 1 MiB, not within the
# smaller entries), so each read is a chunk, four to an entry, as runs of
# chunks read an entry in several reads unscaled; the prefetch worker
# keeps ahead of them (loads are slow in the emulated Soft-RoCE guest).
# Smaller chunks would multiply the faults faultbench makes.
hopts=() dopts=() chunk=65536
if [ "$TEST_SCALE" != 1 ]; then
	entry=$((1048576 / TEST_SCALE > 16384 ? 1048576 / TEST_SCALE : 16384))
	chunk=$((entry / 4))
	hopts=(-o host.chunk_size="$chunk" -o host.prefetch=0)
	dopts=(-o dpu.cache_entry_size="$entry")
fi
start_memory mem
start_dpu dpu "$MEM_ADDR" -o dpu.dynamic_cache=adaptive -o dpu.cache_size="$(scaled 32M)" \
	-o dpu.hit_window=64 -o dpu.bw_ratio=30 -o dpu.probe_interval=1s ${dopts[@]+"${dopts[@]}"}
start_host host "$(scaled 16M)" "$MEM_ADDR" -o host.dpu="$DPU_ADDR" -o host.path=dpu -o famd.op_timeout=10s \
	${hopts[@]+"${hopts[@]}"}
# (ad, dyn: from the last status taken by snap, which each scan takes: a
# process costs in the emulated Soft-RoCE guest)
snap() { ctl dpu status -j >"$T/st.json"; }
ad() { jq -er ".cache.dynamic.adaptive.$1" "$T/st.json"; }
dyn() { jq -er ".cache.dynamic.$1" "$T/st.json"; }
scan() {
	shim "$FAULTBENCH" -m malloc -s "$(scaled 128M)" -c "$chunk" -p "$1" -P "$(scaled 32M)" >"$T/$1.txt" 2>&1 ||
		fail "$1 scan: $(cat "$T/$1.txt")"
	snap
}

snap
[ "$(dyn mode)" = adaptive ] && [ "$(dyn enabled)" = true ] || fail "not on at start"
scan seq
[ "$(ad switches_off)" = 0 ] || fail "a sequential scan turned it off: $(jq -c .cache.dynamic "$T/st.json")"
[ "$(ad windows)" -ge 3 ] || fail "windows $(ad windows)"
pass "sequential scan: hit rate $(ad last_window_hit_rate) per window of 64 reads stays above bw_ratio 0.3; the cache stays on"

on=$(ad switches_on)
scan rand
[ "$(ad switches_off)" -ge 1 ] || fail "a random scan left it on: $(jq -c .cache.dynamic "$T/st.json")"
grep -q "dynamic cache off: hit rate .* below bw_ratio 30%" "$T/dpu.log" || fail "the switch is not logged"
pass "random scan: hit rate $(ad last_window_hit_rate) under 0.3 turned it off ($(ad switches_off) times), logged"

# A probe's hit rate depends on the prefetch thread keeping ahead of the
# scan; on a loaded machine one probe may fall short and be turned off
# again (logged), so up to three probes are given. (A scan that outlasts
# probe_interval, as in the emulated guest, may have its probe already:
# tried again counts from before the random scan; and one that was turned
# off may be on again, probing, before the next scan, which then keeps it
# on with no switch of its own.)
for try in 1 2 3; do
	off=$(ad switches_off)
	sleep 1.2
	scan seq
	[ "$(ad switches_on)" -gt "$on" ] ||
		fail "not tried again: $(jq -c .cache.dynamic "$T/st.json")"
	[ "$(ad switches_off)" = "$off" ] && [ "$(dyn enabled)" = true ] && break
	echo "probe $try: turned off again (hit rate $(ad last_window_hit_rate))"
	[ "$try" = 3 ] && fail "three sequential probes were turned off: $(jq -c .cache.dynamic "$T/st.json")"
done
grep -q "dynamic cache on: probing its hit rate again" "$T/dpu.log" || fail "the probe is not logged"
grep -q "dynamic cache stays on: hit rate" "$T/dpu.log" || fail "the probe's outcome is not logged"
pass "after probe_interval it is tried again, and a sequential scan keeps it on (logged; probe $try)"

ctl dpu call cache.set '{"dynamic":"sometimes"}' >/dev/null 2>&1 && fail "cache.set took a bad mode"
ctl dpu call cache.set '{"dynamic":"off"}' | jq -e '.dynamic.mode == "off" and (.dynamic.enabled | not)' \
	>/dev/null || fail "cache.set off"
ctl dpu stats-reset >/dev/null
scan seq
[ "$(dyn hits)" = 0 ] && [ "$(dyn loads)" = 0 ] ||
	fail "off, yet hits or loads: $(jq -c .cache.dynamic "$T/st.json")"
ctl dpu call cache.set '{"dynamic":"on"}' >/dev/null || fail "cache.set on"
pass "cache.set: off (nothing cached, nothing loaded), on; a bad mode is refused"
