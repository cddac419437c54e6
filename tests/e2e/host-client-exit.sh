#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A program killed with SIGKILL while its dirty chunks are being written
# back (and others read): the host famd releases its regions and bytes, on
# the host and on the memory node, once the write-backs in flight complete,
# and its buffer is empty again. While the program runs, `famctl call
# regions` lists it with its regions, bytes, resident and dirty bytes.
. "$(dirname "$0")/lib.sh"
require_cmd jq

start_memory mem
# op_timeout 10 s: the memory famd is stopped for a moment below, and its
# connection must outlive that even on a loaded machine.
start_host host 8M "$MEM_ADDR" -o famd.op_timeout=10s
# famlost -m's writer fills 128 MiB (and again) through the 8 MiB buffer,
# four threads read 4 MiB: write-backs and reads all along, until killed.
shim "$top_builddir/tests/tools/famlost" -m -s 8M -t 4 -w 60 >"$T/lost.out" 2>&1 &
job=$!
wait_until 20 grep -q '^ready' "$T/lost.out" || fail "famlost: $(cat "$T/lost.out")"
pid=$(awk '/^ready/ { print $2 }' "$T/lost.out")
wait_until 20 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock host)\" status -j | jq .counters.writebacks) -gt 20 ]" ||
	fail "famlost does not write back: $(cat "$T/lost.out")"
# The memory famd stops answering: the write-backs in flight stay in
# flight and the program waits for room. (Over verbs a stopped memory famd
# still takes the host's one-sided writes - its kernel's RDMA device does -
# so the program is killed with the write-backs that are in flight then.)
stall() {
	[ "$TEST_TRANSPORT" = verbs ] || kill -"$1" "$MEM_PID"
}
inflight() {
	local n

	if [ "$TEST_TRANSPORT" = verbs ]; then
		# (one-sided write-backs are done before a poll sees them:
		# they are going on while their count rises)
		n=$(counter host writebacks)
		ctl host status -j | jq -e ".buffer.dirty_bytes > 0 and .counters.writebacks > $n" >/dev/null
		return
	fi
	ctl host status -j | jq -e '.buffer.writebacks_in_flight > 0 and .buffer.dirty_bytes > 0' >/dev/null
}
# The stop can catch the program between write-backs - waiting for a read
# that the stopped memory famd holds, with room left in the buffer - and
# then nothing starts one: let it run a moment and stop it again.
caught=0
for try in 1 2 3 4 5 6 7 8 9 10; do
	stall STOP
	if wait_until 2 inflight; then
		caught=1
		break
	fi
	stall CONT
	sleep 0.3
done
[ "$caught" = 1 ] ||
	{ stall CONT; fail "no write-back in flight in $try stops: $(ctl host status -j | jq -c .buffer)"; }

ctl host call regions >"$T/regions.json"
jq -e --argjson pid "$pid" --argjson uid "$(id -u)" 'length == 1 and .[0].pid == $pid and .[0].uid == $uid and
	.[0].regions == 2 and .[0].bytes == 8388608 + 134217728 and
	.[0].resident_bytes > 0 and .[0].resident_bytes <= 8388608 and
	.[0].dirty_bytes > 0 and .[0].dirty_bytes <= .[0].resident_bytes' "$T/regions.json" >/dev/null ||
	{ stall CONT; fail "regions: $(cat "$T/regions.json")"; }
pass "famctl call regions lists the running program: pid, regions, bytes, resident and dirty bytes"

kill -KILL "$pid"
stall CONT
wait "$job" 2>/dev/null
released() {
	ctl host status -j | jq -e '.programs == {"sessions": 0, "regions": 0, "bytes": 0} and
		.buffer.used_bytes == 0 and .buffer.dirty_bytes == 0 and
		.buffer.writebacks_in_flight == 0 and .buffer.fetches_in_flight == 0' >/dev/null &&
		ctl mem status -j | jq -e '.counters.regions == 0 and .counters.bytes_reserved == 0' >/dev/null
}
wait_until 10 released ||
	fail "not released: host $(ctl host status -j | jq -c '[.programs, .buffer]'), memory $(ctl mem status -j | jq -c .counters)"
[ "$(ctl host call regions | jq length)" = 0 ] || fail "regions still lists: $(ctl host call regions)"
grep -q "session pid $pid ended: [1-9][0-9]* regions, [0-9]* bytes released" "$T/host.log" ||
	fail "the end of the session is not logged"
ctl host status -j | jq -e '.peers[0].state == "up" and .counters.writeback_errors == 0' >/dev/null ||
	fail "the memory node: $(ctl host status -j | jq -c '[.peers, .counters.writeback_errors]')"
pass "killed during write-backs: regions and bytes released on the host and the memory node, the buffer empty"

shim "$top_builddir/tests/tools/famtest" -f -s "$(scaled 32M)" seq random >"$T/after.out" 2>&1 ||
	fail "famtest afterwards: $(cat "$T/after.out")"
pass "the host famd serves the next program"
