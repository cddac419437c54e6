#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A host sends its chunk reads and write-backs through a dpu or straight to
# the memory node, switched at run time while programs page (famtest checks
# every byte: no write lost or overtaken); a dpu killed mid-run is bypassed
# (fallback = direct) with no data lost, and used again once it is back; with
# fallback = none the host waits for it.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAMTEST=$top_builddir/tests/tools/famtest
start_memory mem
start_dpu dpu "$MEM_ADDR"
start_host host "$(scaled 64M)" "$MEM_ADDR" -o host.dpu="$DPU_ADDR" -o host.path=dpu -o famd.op_timeout=10s
hc() { ctl host status -j | jq -er ".counters.$1"; }
# (over verbs, none: the queue pairs of each connection keep faults apart)
nconn=2 nbg=2
[ "$TEST_TRANSPORT" = verbs ] && nconn=1 nbg=0
bg_joined() {
	ctl host status -j | jq -e "[.peers[] | select(.background)] | length == $nbg" >/dev/null &&
		[ "$(counter dpu connections_open)" = $nconn ] && [ "$(counter dpu sessions_started)" = 1 ]
}
wait_until 10 bg_joined || fail "background connections: host $(ctl host status -j | jq -c .peers), dpu $(ctl dpu status -j | jq -c .counters)"
pass "the host's $nbg background connections join its sessions on the memory node and on the dpu"

shim "$FAMTEST" -f -s "$(scaled 128M)" -n "${FAMTEST_COUNT:-2000}" seq random strided shared split calloc realloc align many fork \
	>"$T/f1.out" 2>&1 || fail "famtest through the dpu: $(tail -3 "$T/f1.out")"
[ "$(hc ops_direct)" = 0 ] && [ "$(hc ops_dpu)" -gt 1000 ] ||
	fail "path dpu: $(ctl host status -j | jq -c .counters)"
[ "$(hc adoptions)" -gt 0 ] || fail "regions made through the dpu were not adopted on the memory node"
[ "$(link dpu memory background)" -gt 0 ] || fail "read-ahead and write-backs not marked background"
pass "path = dpu: famtest's every pattern (${FAMTEST_COUNT:-2000} blocks at once too) through the dpu; its regions adopted on the memory node; background traffic marked"

ctl host call path.set '{"path":"sideways"}' >/dev/null 2>&1 && fail "path.set accepted a bad path"
ctl host call path.set '{"path":"direct"}' | jq -e '.path == "direct"' >/dev/null || fail "path.set direct"
ctl host status -j | jq -e '.path.path == "direct"' >/dev/null || fail "status does not show the path"
pass "path.set refuses a bad path, and status shows the new one"

# Switch back and forth every 100 ms while famtest pages 4x the buffer.
shim "$FAMTEST" -f -s "$(scaled 256M)" seq random strided shared split realloc >"$T/f2.out" 2>&1 &
ft=$!
n=0
while kill -0 "$ft" 2>/dev/null; do
	p=dpu
	[ $((n % 2)) = 1 ] && p=direct
	ctl host call path.set "{\"path\":\"$p\"}" >/dev/null || fail "path.set $p"
	n=$((n + 1))
	sleep 0.1
done
wait "$ft" || fail "famtest while switching paths: $(tail -3 "$T/f2.out")"
ctl host status -j >"$T/st.json"
jq -e '.counters | .sigbus == 0 and .fetch_errors == 0 and .writeback_errors == 0
	and .fences > 2 and .handovers > 2 and .ops_direct > 0 and .ops_dpu > 0' "$T/st.json" >/dev/null ||
	fail "after $n switches: $(jq -c .counters "$T/st.json")"
[ "$(counter mem handles_revoked)" -gt 2 ] || fail "no fence on the memory node"
pass "$n path switches under load: famtest verified every byte; $(jq .counters.fences "$T/st.json") fences, $(jq .counters.handovers "$T/st.json") hand-overs"

# Kill the dpu in the middle of a run: the host goes direct, loses nothing.
ctl host call path.set '{"path":"dpu"}' >/dev/null
shim "$FAMTEST" -f -s "$(scaled 256M)" seq random strided shared >"$T/f3.out" 2>&1 &
ft=$!
base=$(jq .counters.ops_dpu "$T/st.json")
more_dpu_ops() { [ "$(hc ops_dpu)" -gt "$((base + 500))" ]; }
wait_until 10 more_dpu_ops || fail "no traffic through the dpu"
sleep 0.5
kill -KILL "$DPU_PID"
wait "$DPU_PID" 2>/dev/null
wait "$ft" || fail "famtest with the dpu killed: $(tail -3 "$T/f3.out")"
[ "$(hc sigbus)" = 0 ] || fail "SIGBUS after the dpu died"
grep -q "dpu $DPU_ADDR lost" "$T/host.log" || fail "the loss of the dpu is not logged"
pass "dpu killed mid-run (fallback = direct): famtest verified every byte"

# The dpu comes back (a new instance, same address): the host uses it again.
before=$(hc handovers)
start_famd dpu "$T/dpu.conf" -o dpu.listen="$DPU_ADDR"
DPU_PID=$FAMD_PID
wait_until 10 host_nodes_up host || fail "the host did not reconnect to the dpu"
shim "$FAMTEST" -f -s "$(scaled 192M)" seq >"$T/f4.out" 2>&1 || fail "famtest after the dpu returned"
[ "$(counter dpu writes)" -gt 0 ] && [ "$(counter dpu reads)" -gt 0 ] ||
	fail "the returned dpu forwards nothing: $(ctl dpu status -j | jq -c .counters)"
pass "the dpu returns: reconnected, and chunks go through it again ($(($(hc handovers) - before)) regions handed over)"

# A program that keeps its memory while the dpu dies and comes back: its
# region goes direct meanwhile, then back through the new dpu, and every
# pass over it (rewritten and verified twice) stays right.
ctl host call path.set '{"path":"dpu"}' >/dev/null
# (not through shim(): $! must be famtest's pid, for SIGUSR1)
fresh "$T/p.out"
LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$(scaled 160M)" passes >"$T/p.out" 2>&1 &
ft=$!
npasses() { grep -c '^pass ' "$T/p.out"; }
passes_past() { [ "$(npasses)" -ge "$1" ] || ! kill -0 "$ft"; }
on_path() {
	ctl host status -j | jq -e ".path | .stripes_$1 > 0 and .stripes_$2 == 0
		and .stripes_switching == 0" >/dev/null
}
wait_until 60 passes_past 1 && kill -0 "$ft" || fail "no pass: $(tail -3 "$T/p.out")"
on_path dpu direct || fail "the program's region is not on the dpu: $(ctl host status -j | jq -c .path)"
kill -KILL "$DPU_PID"
wait "$DPU_PID" 2>/dev/null
n=$(npasses)
wait_until 120 passes_past $((n + 2)) && kill -0 "$ft" ||
	fail "the program did not go on without the dpu: $(tail -3 "$T/p.out")"
on_path direct dpu || fail "not direct without the dpu: $(ctl host status -j | jq -c .path)"
before=$(hc handovers)
start_famd dpu "$T/dpu.conf" -o dpu.listen="$DPU_ADDR"
DPU_PID=$FAMD_PID
wait_until 10 host_nodes_up host || fail "the host did not reconnect to the dpu"
wait_until 60 on_path dpu direct || fail "the region did not go back to the dpu: $(ctl host status -j | jq -c .path)"
n=$(npasses)
wait_until 120 passes_past $((n + 2)) && kill -0 "$ft" ||
	fail "the program did not go on through the new dpu: $(tail -3 "$T/p.out")"
[ "$(counter dpu reads)" -gt 0 ] && [ "$(counter dpu writes)" -gt 0 ] ||
	fail "the new dpu forwards nothing: $(ctl dpu status -j | jq -c .counters)"
kill -USR1 "$ft"
wait "$ft" || fail "passes: $(tail -3 "$T/p.out")"
[ "$(hc sigbus)" = 0 ] && [ "$(hc handovers)" -gt "$before" ] ||
	fail "after the dpu returned: $(ctl host status -j | jq -c .counters)"
pass "a program's region across a dpu's death and return: direct meanwhile, handed to the new dpu after; $(npasses) passes over $(mib 160M) MiB, every word right"

# fallback = none: requests wait for the dpu (a short outage is invisible).
ctl host call path.set '{"path":"dpu"}' >/dev/null
printf 'fallback = none\n' >>"$T/host.conf"
ctl host reload >/dev/null || fail "reload with fallback = none"
direct=$(hc ops_direct)
shim "$FAMTEST" -f -s "$(scaled 128M)" seq random >"$T/f5.out" 2>&1 &
ft=$!
sleep 1
kill -KILL "$DPU_PID"
wait "$DPU_PID" 2>/dev/null
sleep 1
start_famd dpu "$T/dpu.conf" -o dpu.listen="$DPU_ADDR"
DPU_PID=$FAMD_PID
wait "$ft" || fail "famtest across a dpu restart with fallback = none: $(tail -3 "$T/f5.out")"
[ "$(hc ops_direct)" = "$direct" ] || fail "fallback = none went direct"
pass "fallback = none: requests (allocations too) wait out a dpu restart; nothing goes direct, nothing is lost"

# The dpu dies with an allocation in its hands (stopped, then killed): the
# host asks again once it is back; the program gets fabric-attached memory.
wait_until 10 host_nodes_up host || fail "the host did not reconnect to the dpu"
redone=$(hc allocs_redone)
kill -STOP "$DPU_PID"
shim "$FAMTEST" -f -s 16M seq >"$T/f6.out" 2>&1 &
ft=$!
sleep 1
kill -KILL "$DPU_PID"
wait "$DPU_PID" 2>/dev/null
start_famd dpu "$T/dpu.conf" -o dpu.listen="$DPU_ADDR"
DPU_PID=$FAMD_PID
wait "$ft" || fail "famtest whose allocation the dpu took down with it: $(tail -3 "$T/f6.out")"
[ "$(hc allocs_redone)" -gt "$redone" ] || fail "no allocation asked again: $(ctl host status -j | jq -c .counters)"
grep -q "the dpu went away during an allocation" "$T/host.log" || fail "not logged"
[ "$(hc ops_direct)" = "$direct" ] || fail "fallback = none went direct"
pass "an allocation the dpu died with is asked again once it is back (fallback = none)"
