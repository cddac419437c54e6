#!/bin/bash
# The dpu role over verbs: a host sends its chunk reads and write-backs to
# the dpu as SENDs whose immediate data names the request, the dpu takes
# them from its shared receive queue and forwards them to the memory node
# over verbs, and famtest's data comes back right. Switched to direct, the
# host reads and writes one-sided with the lease its adoption gave it (the
# memory node's processor sees none of it); the dpu killed under a
# program, the host goes direct and nothing is lost.
. "$(dirname "$0")/lib-rxe.sh"
require_cmd jq

[ -c /dev/userfaultfd ] || fail "no /dev/userfaultfd in this kernel ($(uname -r))"
start_memory_verbs m
start_dpu d "$MEM_ADDR" -o famd.transport=verbs -o dpu.listen="$SRV_IP:0" -o dpu.async=off \
	-o dpu.dynamic_cache=on -o dpu.cache_size=8M
start_host_verbs h 2M "$MEM_ADDR" -o host.dpu="$DPU_ADDR" -o host.path=dpu \
	-o host.max_fetches=32
hc() { ctl h status -j | jq -er ".counters.$1"; }
[ "$(ctl d status -j | jq -r .dpu.transport)" = verbs ] || fail "the dpu does not speak verbs"

shim "$FAMTEST" -f -s 8M -t 4 -n 64 seq random shared split calloc realloc many \
	>"$T/f1.out" 2>&1 || fail "famtest through the dpu: $(cat "$T/f1.out")"
[ "$(hc ops_direct)" = 0 ] && [ "$(hc ops_dpu)" -gt 100 ] && [ "$(hc sigbus)" = 0 ] ||
	fail "host: $(ctl h status -j | jq -c .counters)"
ctl d status -j >"$T/d.json"
jq -e '.counters | .reads > 0 and .writes > 0 and .memory_reads > 0 and .memory_writes > 0
	and .rw_errors == 0 and .bad_frames == 0' "$T/d.json" >/dev/null ||
	fail "dpu: $(jq -c .counters "$T/d.json")"
[ "$(counter m reads)" -gt 0 ] || fail "the memory node served no request of the dpu"
pass "famtest (8M through a 2M buffer) host -> dpu -> memory node over verbs: every byte right; $(jq .counters.reads "$T/d.json") reads, $(jq .counters.writes "$T/d.json") writes forwarded"

# Direct: one-sided, with the leases the host's adoptions gave it.
ctl h call path.set '{"path":"direct"}' >/dev/null || fail "path.set direct"
mreads=$(counter m reads)
mwrites=$(counter m writes)
shim "$FAMTEST" -f -s 8M -t 2 seq random >"$T/f2.out" 2>&1 ||
	fail "famtest direct after the dpu: $(cat "$T/f2.out")"
[ "$(hc ops_direct)" -gt 0 ] || fail "nothing went direct"
[ "$(counter m reads)" = "$mreads" ] && [ "$(counter m writes)" = "$mwrites" ] ||
	fail "direct chunks went through the memory node's processor"
pass "switched to direct: chunks move one-sided (its regions adopted with leases of the host's own)"

# The dpu killed under a program that keeps its memory.
ctl h call path.set '{"path":"dpu"}' >/dev/null || fail "path.set dpu"
LD_PRELOAD=$SHIM "$FAMTEST" -f -s 6M passes >"$T/p.out" 2>&1 &
ft=$!
npasses() { grep -c '^pass ' "$T/p.out"; }
passes_past() { [ "$(npasses)" -ge "$1" ] || ! kill -0 "$ft"; }
wait_until 120 passes_past 1 && kill -0 "$ft" || fail "no pass: $(cat "$T/p.out")"
kill -KILL "$DPU_PID"
wait "$DPU_PID" 2>/dev/null
n=$(npasses)
wait_until 180 passes_past $((n + 2)) && kill -0 "$ft" ||
	fail "the program did not go on without the dpu: $(tail -3 "$T/p.out")"
kill -USR1 "$ft"
wait "$ft" || fail "passes: $(tail -3 "$T/p.out")"
[ "$(hc sigbus)" = 0 ] || fail "SIGBUS after the dpu died"
pass "dpu killed under a program: the host went direct, $(npasses) passes, every word right"
stop_famd "$HOST_PID" || fail "the host famd did not stop cleanly"
stop_famd "$MEM_PID" || fail "the memory famd did not stop cleanly"
