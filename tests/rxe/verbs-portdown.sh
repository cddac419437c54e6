#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A port goes down under live connections (loopback: rxe0's netdev): the
# device's async event (IBV_EVENT_PORT_ERR) closes the connections on that
# port on both ends - counted, logged - and the memory famd goes on
# answering and stops cleanly. A dpu with async = on has a host's
# connection on its control loop and the memory node's on its back loop,
# each loop watching the device: whichever reads the event closes its own
# connection and has the other loop close the other; both close, the dpu
# goes on answering and stops cleanly. Runs last in its guest: after such a bounce
# the 6.1 guest's rdma_cm stops completing new connections (rping too),
# which these tests cannot undo.
. "$(dirname "$0")/lib-rxe.sh"
require_cmd jq
[ "${RXE_TEST_MODE:-loopback}" = loopback ] || skip "loopback mode only"

start_memory_verbs m
start_dpu d "$MEM_ADDR" -o famd.transport=verbs -o dpu.listen="$SRV_IP:0" -o dpu.async=on \
	-o dpu.dynamic_cache=off
netdev=$(ls "/sys/class/infiniband/$SRV_DEV/device/net" 2>/dev/null | head -n 1)
[ -n "$netdev" ] || netdev=eth0
hold_client "$T/b.txt" -T verbs "$DPU_ADDR" create 64K write 0 4096 3 hold 120
via_dpu=$HOLD_PID
hold_client "$T/a.txt" -T verbs "$MEM_ADDR" create 64K write 0 4096 3 hold 120
detached=$(counter m sessions_detached)
ip link set dev "$netdev" down
wait_until 20 grep -q 'port 1 is down; closing its connections' "$T/m.log" ||
	fail "no port-down event: $(tail -n 5 "$T/m.log")"
wait "$HOLD_PID"
rc=$?
[ "$rc" != 0 ] || fail "the held connection survived its port going down"
grep -q 'ENETDOWN' "$T/a.txt" || fail "the client did not see the port go: $(cat "$T/a.txt")"
wait_counter m sessions_detached $((detached + 2))
# The dpu: one event, both of its loops' connections closed by it.
wait_until 20 grep -q 'port 1 is down; closing its connections' "$T/d.log" ||
	fail "the dpu saw no port-down event: $(tail -n 5 "$T/d.log")"
wait_until 20 grep -q 'memory node .* lost: Network is down' "$T/d.log" ||
	fail "the dpu's memory link (back loop) stayed: $(tail -n 5 "$T/d.log")"
wait_until 20 grep -q 'connection from .* closed: Network is down' "$T/d.log" ||
	fail "the dpu's host connection (control loop) stayed: $(tail -n 5 "$T/d.log")"
wait "$via_dpu" && fail "the connection through the dpu survived its port going down"
ip link set dev "$netdev" up
wait_until 30 grep -q ACTIVE "/sys/class/infiniband/$SRV_DEV/ports/1/state" ||
	fail "$SRV_DEV did not come back"
ctl m status >/dev/null || fail "the memory famd stopped answering"
ctl d status -j | jq -e .forwarding.async >/dev/null || fail "the dpu stopped answering"
stop_famd "$DPU_PID" || fail "the dpu did not stop cleanly"
stop_famd "$MEM_PID" || fail "the memory famd did not stop cleanly"
pass "port down: both ends closed their connections on the async event (the dpu's on both its loops); famd went on and stopped cleanly"
