#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The dpu over verbs with async = on: its memory-node side (the back) runs
# on a thread and a loop of its own while the control loop serves hosts,
# both on the same RDMA device. famtest's data comes back right through a
# host famd; the batches went to the back through its queue and were
# forwarded one-sided from the registered staging arena (registered on the
# back's memory-node connection and on the front's host connections), the
# READ replies sent from it without a copy. The memory link dropped
# (memory.reconnect, on the back): a region held across it is read
# one-sided again once its lease is renewed. The memory famd killed under
# a held region: the dpu tells the host the node is down (EHOSTDOWN), goes
# on answering, and stops cleanly with its back thread.
. "$(dirname "$0")/lib-rxe.sh"
require_cmd jq

[ -c /dev/userfaultfd ] || fail "no /dev/userfaultfd in this kernel ($(uname -r))"
start_memory_verbs m
start_dpu d "$MEM_ADDR" -o famd.transport=verbs -o dpu.listen="$SRV_IP:0" -o dpu.async=on \
	-o dpu.dynamic_cache=off
start_host_verbs h 2M "$MEM_ADDR" -o host.dpu="$DPU_ADDR" -o host.path=dpu \
	-o host.max_fetches=32
hc() { ctl h status -j | jq -er ".counters.$1"; }
grep -q 'forwarding to 1 memory node (asynchronous' "$T/d.log" ||
	fail "the dpu does not forward asynchronously: $(grep 'dpu:' "$T/d.log" | head -3)"

shim "$FAMTEST" -f -s 4M -t 2 -n 16 seq random shared many >"$T/f1.out" 2>&1 ||
	fail "famtest through the dpu: $(cat "$T/f1.out")"
[ "$(hc ops_direct)" = 0 ] && [ "$(hc ops_dpu)" -gt 50 ] && [ "$(hc sigbus)" = 0 ] ||
	fail "host: $(ctl h status -j | jq -c .counters)"
ctl d status -j >"$T/d.json"
jq -e '.counters | .reads > 0 and .writes > 0 and .rw_errors == 0 and .bad_frames == 0' \
	"$T/d.json" >/dev/null || fail "dpu: $(jq -c .counters "$T/d.json")"
jq -e '.forwarding | .async and .queue_to_back_max >= 1 and .queue_to_front_max >= 1' \
	"$T/d.json" >/dev/null || fail "not asynchronous: $(jq -c .forwarding "$T/d.json")"
ml() { jq -er ".forwarding.memory_link.$1" "$T/d.json"; }
hl() { jq -er ".forwarding.host_link.$1" "$T/d.json"; }
[ "$(counter m writes)" = 0 ] && [ "$(counter m reads)" = 0 ] ||
	fail "the memory node served $(counter m reads) reads, $(counter m writes) writes of the dpu"
[ "$(ml twosided)" = 0 ] && [ "$(ml onesided)" -gt 50 ] && [ "$(ml staging_registered)" -gt 50 ] &&
	[ "$(ml doorbells)" -gt 0 ] && [ "$(ml work_requests)" -ge "$(ml doorbells)" ] ||
	fail "memory link not one-sided: $(jq -c .forwarding.memory_link "$T/d.json")"
[ "$(hl replies_zero_copy)" -gt 50 ] ||
	fail "READ replies copied: $(jq -c .forwarding.host_link "$T/d.json")"
pass "async = on over verbs: famtest (4M through a 2M buffer) every byte right; queues to the back up to $(jq .forwarding.queue_to_back_max "$T/d.json"), to the front up to $(jq .forwarding.queue_to_front_max "$T/d.json"); $(ml onesided) transfers one-sided in $(ml work_requests) WRs, $(ml doorbells) doorbells; $(hl replies_zero_copy) READ replies from staging without a copy"

# The memory link dropped by the back under a held region: its lease is
# renewed on the new connection and the region read one-sided again.
hold_client "$T/r.txt" -T verbs "$DPU_ADDR" create 1M write 0 256K 7 hold 120 read 0 256K 7 \
	read 512K 64K 0
ren0=$(ctl d status -j | jq -er .forwarding.memory_link.lease_renewals)
one0=$(ctl d status -j | jq -er .forwarding.memory_link.onesided)
ctl d call memory.reconnect >/dev/null || fail "memory.reconnect"
reconnected() { [ "$(ctl d status -j | jq '[.peers[] | select(.role == "memory") | .connects] | max')" -ge 2 ]; }
wait_until 30 reconnected || fail "the dpu did not reconnect: $(ctl d status -j | jq -c .peers)"
kill -USR1 "$HOLD_PID"
wait "$HOLD_PID" || fail "the held region across the reconnect: $(cat "$T/r.txt")"
ctl d status -j >"$T/d2.json"
[ "$(jq -er .forwarding.memory_link.lease_renewals "$T/d2.json")" -gt "$ren0" ] ||
	fail "no lease renewed: $(jq -c .forwarding.memory_link "$T/d2.json")"
grep -q 'reconnected; session resumed' "$T/d.log" || fail "the dpu's session was not resumed"
! grep -qi 'remote access error' "$T/d.log" || fail "an old rkey was used"
pass "memory.reconnect on the back thread: session resumed, lease renewed, the held region read right ($(( $(jq -er .forwarding.memory_link.onesided "$T/d2.json") - one0 )) one-sided since)"

# The memory famd killed under a region held through the dpu.
hold_client "$T/k.txt" -T verbs "$DPU_ADDR" create 1M write 0 64K 5 hold 120 \
	expect EHOSTDOWN read 0 64K 5
rwe0=$(counter d rw_errors)
kill -KILL "$MEM_PID"
wait "$MEM_PID" 2>/dev/null
node_down() { [ "$(ctl d status -j | jq -r '[.peers[] | select(.role == "memory") | .state][0]')" != up ]; }
wait_until 30 node_down || fail "the dpu did not see the memory node go: $(ctl d status -j | jq -c .peers)"
grep -q 'memory node .* lost' "$T/d.log" || fail "no loss logged: $(tail -n 5 "$T/d.log")"
kill -USR1 "$HOLD_PID"
wait "$HOLD_PID" || fail "the held region did not fail with EHOSTDOWN: $(cat "$T/k.txt")"
[ "$(counter d rw_errors)" -gt "$rwe0" ] || fail "the failed read was not counted"
ctl d status -j | jq -e '.forwarding.async' >/dev/null || fail "the dpu stopped answering"
kill -0 "$DPU_PID" || fail "the dpu died"
stop_famd "$HOST_PID" || fail "the host famd did not stop cleanly"
stop_famd "$DPU_PID" || fail "the dpu did not stop cleanly (its back thread)"
pass "memory famd killed: the host was told EHOSTDOWN, the dpu went on answering and stopped cleanly with its back thread"
