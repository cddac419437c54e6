#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The dpu role over verbs: a host sends its chunk reads and write-backs to
# the dpu as SENDs whose immediate data names the request, the dpu takes
# them from its shared receive queue and forwards them to the memory node
# one-sided (RDMA READ into its registered staging, RDMA WRITE from it,
# against the leases the memory node gave it), each aggregated batch one
# chain of work requests behind one doorbell with selective signalling,
# and famtest's data comes back right. The memory famd restarted as the
# same instance (stop, start) is beyond this test; a dropped connection
# is: the dpu renews its leases and goes on one-sided. Switched to direct, the
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
ml() { jq -er ".forwarding.memory_link.$1" "$T/d.json"; }
# One-sided: the memory node's processor served none of the chunks the dpu
# forwarded, every transfer went against a lease, from registered staging.
# (The dynamic cache's prefetch loads of regions that are not shared stay
# requests: those are all it served.)
[ "$(counter m writes)" = 0 ] && [ "$(counter m reads)" -le "$(ml loads_twosided)" ] ||
	fail "the memory node served $(counter m reads) reads, $(counter m writes) writes of the dpu: $(jq -c .forwarding.memory_link "$T/d.json")"
[ "$(ml twosided)" = 0 ] && [ "$(ml onesided)" -gt 100 ] && [ "$(ml staging_registered)" -gt 100 ] ||
	fail "dpu memory link not one-sided: $(jq -c .forwarding.memory_link "$T/d.json")"
# Zero-copy to the host: a forwarded READ's reply went out as SENDs whose
# payload is read from the staging slot the RDMA READ filled (the arena
# registered on the host's connection too), not copied into send buffers;
# only what missed the arena (every slot taken) was copied. Both modes:
# the arena is registered on each host connection, in its own device and
# protection domain, so veth (rxe1/rxe2) is covered as loopback is.
hl() { jq -er ".forwarding.host_link.$1" "$T/d.json"; }
[ "$(hl replies_zero_copy)" -gt 100 ] &&
	[ "$(hl reply_bytes_zero_copy)" -ge $((9 * $(hl reply_bytes_copied))) ] ||
	fail "READ replies copied: $(jq -c .forwarding.host_link "$T/d.json")"
# Chained: batches of more than one WR went out per doorbell, and most
# WRs asked for no completion.
jq -e '.forwarding | .batch_max > 1 and .memory_link.work_requests > .memory_link.doorbells
	and .memory_link.unsignalled > 0
	and .memory_link.signalled <= .memory_link.doorbells + (.memory_link.work_requests / 16 | floor)' \
	"$T/d.json" >/dev/null || fail "no chains: $(jq -c .forwarding "$T/d.json")"
pass "famtest (8M through a 2M buffer) host -> dpu -> memory node over verbs: every byte right; $(jq .counters.reads "$T/d.json") reads, $(jq .counters.writes "$T/d.json") writes forwarded one-sided: $(ml work_requests) WRs in $(ml doorbells) doorbells ($(ml work_requests_per_doorbell) per doorbell, batch max $(jq .forwarding.batch_max "$T/d.json")), $(ml signalled) signalled, $(ml unsignalled) not; to the host $(hl replies_zero_copy) READ replies ($(hl reply_bytes_zero_copy) bytes) sent from staging without a copy, $(hl reply_bytes_copied) bytes copied"

# The dpu's connection to the memory node dropped under a program that
# keeps its memory: the dpu reconnects, resumes its session there, and
# renews its leases before it goes one-sided again (the old rkeys died
# with the old connection: using one would be a remote access error).
fresh "$T/r.out"
LD_PRELOAD=$SHIM "$FAMTEST" -f -s 4M passes >"$T/r.out" 2>&1 &
ft=$!
npasses() { grep -c '^pass ' "$T/r.out"; }
passes_past() { [ "$(npasses)" -ge "$1" ] || ! kill -0 "$ft"; }
wait_until 120 passes_past 1 && kill -0 "$ft" || fail "no pass: $(cat "$T/r.out")"
ren0=$(ctl d status -j | jq -er .forwarding.memory_link.lease_renewals)
ctl d call memory.reconnect >/dev/null || fail "memory.reconnect"
reconnected() { [ "$(ctl d status -j | jq '[.peers[] | select(.role == "memory") | .connects] | max')" -ge 2 ]; }
wait_until 30 reconnected || fail "the dpu did not reconnect: $(ctl d status -j | jq -c .peers)"
n=$(npasses)
wait_until 180 passes_past $((n + 2)) && kill -0 "$ft" ||
	fail "the program did not go on after the reconnect: $(tail -3 "$T/r.out")"
kill -USR1 "$ft"
wait "$ft" || fail "passes across the reconnect: $(tail -3 "$T/r.out")"
ctl d status -j >"$T/d2.json"
ren=$(( $(jq -er .forwarding.memory_link.lease_renewals "$T/d2.json") - ren0 ))
[ "$ren" -gt 0 ] || fail "no lease renewed: $(jq -c .forwarding.memory_link "$T/d2.json")"
grep -q 'reconnected; session resumed' "$T/d.log" || fail "the dpu's session was not resumed"
! grep -qi 'remote access error' "$T/d.log" || fail "an old rkey was used: $(grep -i 'remote access' "$T/d.log" | head -2)"
[ "$(hc sigbus)" = 0 ] || fail "SIGBUS across the reconnect"
pass "memory link reconnected under a program: session resumed, $ren lease(s) renewed, no old rkey used, $(npasses) passes every word right ($(jq .forwarding.memory_link.onesided "$T/d2.json") one-sided, $(jq .forwarding.memory_link.twosided "$T/d2.json") as requests while renewing)"

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
fresh "$T/p.out"
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
