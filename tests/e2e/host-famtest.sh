#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# An unmodified program's large allocations are fabric-attached memory
# whose faults the host famd serves through a 64 MiB buffer: every byte
# read back is the byte written, over four times the buffer, sequentially,
# randomly, strided, from 8 threads on shared and separate chunks, across
# calloc, realloc, alignment, 10,000 blocks and fork+exec; a chunk faulted
# on by a write goes in writable. An unprivileged
# program gets its userfaultfd through famd. When the program exits, its
# regions are released on the host and on the memory node.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAMTEST=$top_builddir/tests/tools/famtest
start_memory mem
start_host host "$(scaled 64M)" "$MEM_ADDR" -o host.session_mode=0666
# ... and each fault-service thread two more (TEST_FAULT_THREADS).
bg_joined() {
	local threads
	threads=$(ctl host status -j | jq '.fault_threads | length')
	ctl host status -j | jq -e '.peers[0].background' >/dev/null &&
		[ "$(ctl mem status -j | jq '.counters.sessions_started')" = 1 ] &&
		[ "$(ctl mem status -j | jq '.counters.connections_open')" = $((2 + 2 * threads)) ]
}
# Over verbs there is no second connection: the queue pairs of the one
# connection keep faults apart from read-ahead and write-back.
one_conn() {
	ctl host status -j | jq -e '.peers[0].state == "up" and (.peers[0].background | not)' >/dev/null &&
		[ "$(ctl mem status -j | jq '.counters.sessions_started')" = 1 ] &&
		[ "$(ctl mem status -j | jq '.counters.connections_open')" = 1 ]
}
if [ "$TEST_TRANSPORT" = verbs ]; then
	wait_until 10 one_conn || fail "over verbs: $(ctl mem status -j | jq -c .counters)"
	pass "over verbs, one connection (its queue pairs apart) in one session"
else
	wait_until 10 bg_joined || fail "the background connection did not join the host's session: $(ctl mem status -j | jq -c .counters)"
	pass "read-ahead and write-back have a connection of their own in the same session"
fi

shim "$FAMTEST" -f -s "$(scaled 256M)" >"$T/famtest.out" 2>&1 ||
	fail "famtest: $(tail -5 "$T/famtest.out")"
cat "$T/famtest.out"
st=$(ctl host status -j)
for c in faults_missing faults_write fetches writebacks evictions_dirty zero_fills; do
	v=$(echo "$st" | jq -r ".counters.$c")
	[ "$v" -gt 0 ] || fail "counter $c is $v after paging 4x the buffer"
done
echo "$st" | jq -e '.counters.sigbus == 0 and .counters.fetch_errors == 0' >/dev/null ||
	fail "SIGBUS or fetch errors: $(echo "$st" | jq -c .counters)"
echo "$st" | jq -e '.buffer.used_bytes <= .buffer.size_bytes' >/dev/null || fail "buffer overfull"
# The breakdown of a fault served by a read: each stage counted, and
# together no longer than the whole service time of such faults allows.
echo "$st" | jq -e '.fault_breakdown_us | .reads > 0 and .wire > 0 and .install > 0 and .queued >= 0' >/dev/null ||
	fail "fault breakdown: $(echo "$st" | jq -c .fault_breakdown_us)"
echo "$st" | jq -e '.cpu.seconds > 0 and .cpu.gb_moved > 0 and .cpu.seconds_per_gb > 0' >/dev/null ||
	fail "cpu: $(echo "$st" | jq -c .cpu)"
echo "fault breakdown (us): $(echo "$st" | jq -c .fault_breakdown_us); cpu: $(echo "$st" | jq -c .cpu)"
if [ "$(echo "$st" | jq '.fault_threads | length')" -gt 0 ]; then
	echo "fault threads: $(echo "$st" | jq -c .fault_threads)"
	echo "$st" | jq -e '.fault_threads | all(.reads > 0 and .errors == 0 and .connections_joined == 2)' >/dev/null ||
		fail "a fault-service thread read nothing, or failed: $(echo "$st" | jq -c .fault_threads)"
fi
pass "famtest -f -s $(scaled 256M) (4x the buffer): every check; faults, fetches, write-backs counted"

if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	chmod 755 "$T"
	shim setpriv --reuid=nobody --regid=nogroup --clear-groups \
		"$FAMTEST" -f -s "$(scaled 128M)" seq random shared fork >"$T/nobody.out" 2>&1 ||
		fail "famtest as nobody: $(cat "$T/nobody.out")"
	pass "famtest as nobody: userfaultfd through famd's /dev/userfaultfd"
fi

regions_gone() {
	[ "$(ctl host status -j | jq .programs.regions)" = 0 ] &&
		[ "$(ctl mem status -j | jq .counters.regions)" = 0 ] &&
		[ "$(ctl host status -j | jq .buffer.used_bytes)" = 0 ]
}
wait_until 10 regions_gone || fail "regions left: host $(ctl host status -j | jq -c .programs), memory $(ctl mem status -j | jq -c .counters.regions)"
pass "every region released on the host and the memory node"

# A thread that faults writing on an absent chunk gets it writable, taken
# as dirty at once: no write-protect fault follows. famtest random writes
# each chunk whole, in random order, over four times the buffer, then
# checks every word after their write-backs.
start_host hostw "$(scaled 8M)" "$MEM_ADDR"
shim "$FAMTEST" -f -s "$(($(mib 8M) * 4))M" random >"$T/famtest-w.out" 2>&1 ||
	fail "famtest random: $(tail -5 "$T/famtest-w.out")"
st=$(ctl hostw status -j)
echo "$st" | jq -e '.counters | .faults_write == 0 and .zero_fills > 0 and
	.evictions_dirty >= .zero_fills / 2 and .sigbus == 0' >/dev/null ||
	fail "writes after write faults: $(echo "$st" | jq -c .counters)"
pass "chunks faulted on by a write go in writable: $(echo "$st" | jq .counters.zero_fills) written, $(echo "$st" | jq .counters.evictions_dirty) written back, no write-protect fault, every word right"
