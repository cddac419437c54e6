#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# With [host] fault_threads = 3, two fault-service threads receive the
# chunk reads, each on two connections of its own to the memory node (one
# for faults, one for read-ahead), joined to the host's session there. Every byte a program reads back is the byte
# it wrote (famtest, 8 threads, four times the buffer); both threads read,
# none fails. A memory famd that stops answering under them: SIGBUS in
# every thread, never a wrong word; once it answers again, the threads join
# the resumed session and the old data reads back whole. A memory famd
# killed and started again: the threads join the new instance and serve a
# new program. A host famd stopped with reads out on its threads stops.
. "$(dirname "$0")/lib.sh"
require_cmd jq
[ "$TEST_TRANSPORT" = verbs ] &&
	skip "over verbs every read stays on the control loop (no fault-service thread)"

start_memory mem -o memory.session_grace=120s
start_host host "$(scaled 16M)" "$MEM_ADDR" -o host.fault_threads=3 -o famd.op_timeout=2s

# joined N: both threads joined, each with its two connections (N joins
# so far), in the host's one session.
joined() {
	ctl host status -j | jq -e --argjson n "$1" '.fault_threads | length == 2 and
		all(.connections_joined == 2 and .connects == $n)' >/dev/null &&
		[ "$(ctl mem status -j | jq '.counters.connections_open')" = 6 ]
}
wait_until 10 joined 2 ||
	fail "the fault threads did not join: $(ctl host status -j | jq -c .fault_threads), memory $(ctl mem status -j | jq -c .counters)"
[ "$(counter mem sessions_started)" = 1 ] || fail "sessions started: $(counter mem sessions_started)"
pass "two fault-service threads, each with two connections of its own (faults, read-ahead) in the host's one session"

# thread_reads: the reads both threads received so far.
thread_reads() {
	ctl host status -j | jq '[.fault_threads[].reads] | add'
}
shim "$top_builddir/tests/tools/famtest" -f -s "$(scaled 64M)" >"$T/famtest.out" 2>&1 ||
	fail "famtest: $(tail -5 "$T/famtest.out")"
st=$(ctl host status -j)
echo "fault threads: $(echo "$st" | jq -c .fault_threads); reads $(echo "$st" | jq .counters.reads)"
echo "$st" | jq -e '.fault_threads | all(.reads > 0 and .errors == 0 and .in_flight == 0)' >/dev/null ||
	fail "a thread read nothing, or failed: $(echo "$st" | jq -c .fault_threads)"
echo "$st" | jq -e '.counters.sigbus == 0 and .counters.fetch_errors == 0' >/dev/null ||
	fail "SIGBUS or fetch errors: $(echo "$st" | jq -c .counters)"
# Reads of one copy, direct, go to the threads: most reads.
echo "$st" | jq -e '([.fault_threads[].reads] | add) * 2 > .counters.reads' >/dev/null ||
	fail "most reads stayed on the control loop: $(echo "$st" | jq -c '[.fault_threads, .counters.reads]')"
pass "famtest -f over four times the buffer: every word right, the reads received by both threads"

# The memory famd stops answering: the reads out on the threads time out.
start_famlost -p -s "$(scaled 64M)" -t 4 -w 60
reads=$(thread_reads)
wait_until 10 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock host)\" status -j | jq '[.fault_threads[].reads] | add') -gt $((reads + 100)) ]" ||
	fail "the readers' chunks are not read by the threads"
resumed=$(counter mem sessions_resumed)
kill -STOP "$MEM_PID"
if ! wait_until 30 grep -q '^waiting' "$T/lost.out"; then
	kill -CONT "$MEM_PID"
	fail "famlost: $(cat "$T/lost.out" "$T/lost.err")"
fi
kill -CONT "$MEM_PID"
grep -q "^ok - 4 threads reading the block and one writing got SIGBUS when the memory node was out of reach" "$T/lost.out" ||
	fail "not every thread got SIGBUS: $(cat "$T/lost.out")"
pass "memory famd stalled under the threads' reads: SIGBUS in every thread, no wrong word"

wait_until 30 host_nodes_up host || fail "the host did not reconnect: $(ctl host status -j | jq -c .peers)"
wait_until 30 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock mem)\" status -j | jq .counters.sessions_resumed) -gt $resumed ]" ||
	fail "the session was not resumed: $(ctl mem status -j | jq -c .counters)"
wait_until 15 joined 4 ||
	fail "the threads did not join the resumed session: $(ctl host status -j | jq -c .fault_threads)"
reads=$(thread_reads)
kill -USR1 "$LOST_PID"
wait "$LOST_JOB"
rc=$?
cat "$T/lost.out"
[ "$rc" = 0 ] || fail "famlost exit $rc: $(cat "$T/lost.out" "$T/lost.err")"
[ "$(thread_reads)" -gt "$reads" ] || fail "no read on the threads after the resume"
pass "the session resumed: the threads joined it again, the old block read back whole through them"

# The memory famd killed and started again: a new instance.
kill -KILL "$MEM_PID"
wait "$MEM_PID" 2>/dev/null
start_famd mem2 "$T/mem.conf" -o memory.listen="$MEM_ADDR"
wait_until 15 host_nodes_up host || fail "the host did not reconnect: $(ctl host status -j | jq -c .peers)"
mem2_joined() {
	ctl host status -j | jq -e '.fault_threads | all(.connections_joined == 2 and .connects == 6)' >/dev/null &&
		[ "$(ctl mem2 status -j | jq '.counters.connections_open')" = 6 ]
}
wait_until 15 mem2_joined ||
	fail "the threads did not join the new instance: $(ctl host status -j | jq -c .fault_threads)"
reads=$(thread_reads)
shim "$top_builddir/tests/tools/famtest" -f -s "$(scaled 64M)" seq random shared >"$T/after.out" 2>&1 ||
	fail "famtest after the restart: $(tail -5 "$T/after.out")"
[ "$(thread_reads)" -gt "$reads" ] || fail "no read on the threads after the restart"
pass "memory famd started again: the threads joined the new instance, famtest passes through them"

# The most threads (fault_threads = 8): a session of 16 connections, the
# background one among them, and a program served through all seven.
host_pid=$HOST_PID
start_host host8 "$(scaled 16M)" "$MEM_ADDR" -o host.fault_threads=8
all_joined() {
	ctl host8 status -j | jq -e '(.fault_threads | length == 7 and all(.connections_joined == 2)) and
		.peers[0].background' >/dev/null
}
wait_until 15 all_joined ||
	fail "not every thread of 7 joined: $(ctl host8 status -j | jq -c '[.fault_threads, .peers[0].background]')"
[ "$(ctl mem2 status -j | jq '.counters.connections_open')" = $((6 + 16)) ] ||
	fail "memory famd connections: $(ctl mem2 status -j | jq '.counters.connections_open'), want 6 + 16"
shim "$top_builddir/tests/tools/famtest" -f -s "$(scaled 64M)" seq random shared >"$T/host8.out" 2>&1 ||
	fail "famtest through 7 threads: $(tail -5 "$T/host8.out")"
ctl host8 status -j | jq -e '([.fault_threads[] | select(.reads > 0)] | length) >= 4 and
	all(.fault_threads[]; .errors == 0)' >/dev/null ||
	fail "the reads did not spread over the threads: $(ctl host8 status -j | jq -c '[.fault_threads[] | {reads, errors}]')"
pass "fault_threads = 8: seven threads joined with two connections each (16 in the session), famtest passes through them"
HOST_PID=$host_pid
FAM_SOCKET=$T/host.session

# A host famd stopped with reads out on its threads.
shim "$top_builddir/tests/tools/famtest" -f -s "$(scaled 256M)" random >"$T/stop.out" 2>&1 &
famtest_job=$!
reads=$(thread_reads)
wait_until 20 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock host)\" status -j | jq '[.fault_threads[].reads] | add') -gt $((reads + 200)) ]" ||
	fail "famtest does not read through the threads"
kill -TERM "$HOST_PID"
wait_until 10 sh -c "! kill -0 $HOST_PID 2>/dev/null" || fail "the host famd did not stop in 10 s"
wait "$HOST_PID"
rc=$?
{ kill -KILL "$famtest_job" && wait "$famtest_job"; } 2>/dev/null
[ "$rc" = 0 ] || fail "host famd exit status $rc"
grep -q "notice: stopped" "$T/host.log" || fail "no stop in the log: $(tail -5 "$T/host.log")"
pass "a host famd stopped with reads out on its threads stops cleanly"
