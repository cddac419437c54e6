#!/bin/bash
# Adaptive dynamic caching: over windows of hit_window reads the dpu
# measures its dynamic cache's hit rate h, keeps it on while h > bw_ratio
# (B_net/B_intra; 30% here), turns it off (logged, counted, shown by famctl status)
# when a random scan drags h under, and tries it again after
# probe_interval, keeping it once a sequential scan brings h back up.
# cache.set changes the mode at run time.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAULTBENCH=$top_builddir/contrib/bench/faultbench
start_memory mem
start_dpu dpu "$MEM_ADDR" -o dpu.dynamic_cache=adaptive -o dpu.cache_size=32M \
	-o dpu.hit_window=64 -o dpu.bw_ratio=30 -o dpu.probe_interval=1s
start_host host 16M "$MEM_ADDR" -o host.dpu="$DPU_ADDR" -o host.path=dpu -o famd.op_timeout=10s
ad() { ctl dpu status -j | jq -er ".cache.dynamic.adaptive.$1"; }
dyn() { ctl dpu status -j | jq -er ".cache.dynamic.$1"; }
scan() {
	shim "$FAULTBENCH" -m malloc -s 128M -p "$1" -P 32M >"$T/$1.txt" 2>&1 ||
		fail "$1 scan: $(cat "$T/$1.txt")"
}

[ "$(dyn mode)" = adaptive ] && [ "$(dyn enabled)" = true ] || fail "not on at start"
scan seq
[ "$(ad switches_off)" = 0 ] || fail "a sequential scan turned it off: $(ctl dpu status -j | jq -c .cache.dynamic)"
[ "$(ad windows)" -ge 3 ] || fail "windows $(ad windows)"
pass "sequential scan: hit rate $(ad last_window_hit_rate) per window of 64 reads stays above bw_ratio 0.3; the cache stays on"

scan rand
[ "$(ad switches_off)" -ge 1 ] || fail "a random scan left it on: $(ctl dpu status -j | jq -c .cache.dynamic)"
grep -q "dynamic cache off: hit rate .* below bw_ratio 30%" "$T/dpu.log" || fail "the switch is not logged"
pass "random scan: hit rate $(ad last_window_hit_rate) under 0.3 turned it off ($(ad switches_off) times), logged"

# A probe's hit rate depends on the prefetch thread keeping ahead of the
# scan; on a loaded machine one probe may fall short and be turned off
# again (logged), so up to three probes are given.
for try in 1 2 3; do
	off=$(ad switches_off)
	on=$(ad switches_on)
	sleep 1.2
	scan seq
	[ "$(ad switches_on)" -gt "$on" ] ||
		fail "not tried again: $(ctl dpu status -j | jq -c .cache.dynamic)"
	[ "$(ad switches_off)" = "$off" ] && [ "$(dyn enabled)" = true ] && break
	echo "probe $try: turned off again (hit rate $(ad last_window_hit_rate))"
	[ "$try" = 3 ] && fail "three sequential probes were turned off: $(ctl dpu status -j | jq -c .cache.dynamic)"
done
grep -q "dynamic cache on: probing its hit rate again" "$T/dpu.log" || fail "the probe is not logged"
grep -q "dynamic cache stays on: hit rate" "$T/dpu.log" || fail "the probe's outcome is not logged"
pass "after probe_interval it is tried again, and a sequential scan keeps it on (logged; probe $try)"

ctl dpu call cache.set '{"dynamic":"sometimes"}' >/dev/null 2>&1 && fail "cache.set took a bad mode"
ctl dpu call cache.set '{"dynamic":"off"}' | jq -e '.dynamic.mode == "off" and (.dynamic.enabled | not)' \
	>/dev/null || fail "cache.set off"
ctl dpu stats-reset >/dev/null
scan seq
[ "$(dyn hits)" = 0 ] && [ "$(dyn loads)" = 0 ] || fail "off, yet hits or loads"
ctl dpu call cache.set '{"dynamic":"on"}' >/dev/null || fail "cache.set on"
pass "cache.set: off (nothing cached, nothing loaded), on; a bad mode is refused"
