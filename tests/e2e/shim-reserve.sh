#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A MAP_NORESERVE reservation far larger than the memory node (a runtime
# reserving its heap) is fabric-attached memory, and the memory node takes
# capacity only for what is written: 256 MiB reserved against a 40 MiB
# node, windows of 16 MiB committed, written through an 8 MiB buffer and
# uncommitted in turn. Written past the capacity, the data stays in the
# host's buffer (never lost, never wrong) and the program is told.
. "$(dirname "$0")/lib.sh"
require_cmd jq
[ "$TEST_TRANSPORT" = verbs ] &&
	skip "over verbs a reservation is registered (pinned) whole, so the memory node takes it whole at creation (famd.conf(5), capacity)"

FAMMAP=$top_builddir/tests/tools/fammap
MEM_CAPACITY=40M start_memory mem
start_host host 8M "$MEM_ADDR"
shim "$FAMMAP" -f -s 16M bigreserve >"$T/fam.out" 2>&1 ||
	fail "a reservation 6 times the memory node: $(tail -3 "$T/fam.out")"
ms=$(ctl mem status -j)
echo "$ms" | jq -e '.counters.sparse_refusals == 0 and .counters.discard_bytes > 0' >/dev/null ||
	fail "memory node counters: $(echo "$ms" | jq -c .counters)"
[ "$(counter host evictions_dirty)" -gt 0 ] || fail "nothing was written back through the 8 MiB buffer"
pass "256 MiB reserved against a 40 MiB memory node: four 16 MiB windows written back, verified and given back"

regions_gone() {
	[ "$(ctl mem status -j | jq '.counters.regions')" = 0 ] &&
		[ "$(ctl mem status -j | jq '.counters.bytes_reserved')" = 0 ]
}
wait_until 10 regions_gone || fail "capacity left taken after the program: $(ctl mem status -j | jq -c .counters)"
pass "the memory node's capacity is all back after the program exits"

# Written past the capacity: the memory node refuses the write-backs, the
# dirty chunks stay in the buffer (never dropped), and once the buffer is
# full of them a fault gets SIGBUS with the reason in the log.
rc=0
shim "$FAMMAP" -f -s 32M bigreserve >"$T/over.out" 2>&1 || rc=$?
[ "$rc" = 135 ] || fail "writing 64 MiB into a 40 MiB node: exit $rc, not SIGBUS: $(tail -3 "$T/over.out")"
grep -q "FAIL" "$T/over.out" && fail "a wrong byte was read: $(grep FAIL "$T/over.out")"
grep -q "writing them back fails: No space left on device" "$T/host.log" ||
	fail "the SIGBUS's reason is not in the log: $(grep SIGBUS "$T/host.log" | tail -2)"
[ "$(ctl mem status -j | jq .counters.sparse_refusals)" -gt 0 ] || fail "no write was refused for capacity"
pass "written past the capacity: SIGBUS, with the reason logged, and no wrong byte"

wait_until 10 regions_gone || fail "capacity left taken after the SIGBUS: $(ctl mem status -j | jq -c .counters)"
shim "$FAMMAP" -f -s 16M bigreserve >"$T/again.out" 2>&1 ||
	fail "the next program after a full node: $(tail -3 "$T/again.out")"
pass "the next program is served as before"
