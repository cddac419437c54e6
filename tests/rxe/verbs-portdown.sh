#!/bin/bash
# A port goes down under live connections (loopback: rxe0's netdev): the
# device's async event (IBV_EVENT_PORT_ERR) closes the connections on that
# port on both ends - counted, logged - and the memory famd goes on
# answering and stops cleanly. Runs last in its guest: after such a bounce
# the 6.1 guest's rdma_cm stops completing new connections (rping too),
# which these tests cannot undo.
. "$(dirname "$0")/lib-rxe.sh"
require_cmd jq
[ "${RXE_TEST_MODE:-loopback}" = loopback ] || skip "loopback mode only"

start_memory_verbs m
netdev=$(ls "/sys/class/infiniband/$SRV_DEV/device/net" 2>/dev/null | head -n 1)
[ -n "$netdev" ] || netdev=eth0
hold_client "$T/a.txt" -T verbs "$MEM_ADDR" create 64K write 0 4096 3 hold 120
detached=$(counter m sessions_detached)
ip link set dev "$netdev" down
wait_until 20 grep -q 'port 1 is down; closing its connections' "$T/m.log" ||
	fail "no port-down event: $(tail -n 5 "$T/m.log")"
wait "$HOLD_PID"
rc=$?
[ "$rc" != 0 ] || fail "the held connection survived its port going down"
grep -q 'ENETDOWN' "$T/a.txt" || fail "the client did not see the port go: $(cat "$T/a.txt")"
wait_counter m sessions_detached $((detached + 1))
ip link set dev "$netdev" up
wait_until 30 grep -q ACTIVE "/sys/class/infiniband/$SRV_DEV/ports/1/state" ||
	fail "$SRV_DEV did not come back"
ctl m status >/dev/null || fail "the memory famd stopped answering"
stop_famd "$MEM_PID" || fail "the memory famd did not stop cleanly"
pass "port down: both ends closed their connections on the async event; famd went on and stopped cleanly"
