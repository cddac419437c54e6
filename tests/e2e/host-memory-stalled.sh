#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A memory famd that stops answering (SIGSTOP: a hung node, or a network
# that drops everything) for longer than op_timeout: every thread that
# touches a chunk not in the host's buffer gets SIGBUS within op_timeout,
# never a wrong word, never a hang, and the host famd keeps answering. When
# the node answers again (SIGCONT) within its session_grace, the host
# resumes its session: the old data reads back whole, and a region the
# program freed meanwhile is freed on the memory node too - nothing leaks.
# (tests/rxe/netem.sh does the same with a real network partition.)
. "$(dirname "$0")/lib.sh"
require_cmd jq

start_memory mem -o memory.session_grace=120s
start_host host 8M "$MEM_ADDR" -o famd.op_timeout=2s

# 32 MiB: a written half of 16 MiB, twice the buffer, read by 4 threads;
# the writer's block is freed while the node does not answer.
start_famlost -p -s 32M -t 4 -w 60
fetches=$(counter host fetches)
wait_until 10 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock host)\" status -j | jq .counters.fetches) -gt $((fetches + 100)) ]" ||
	fail "the readers do not fetch from the memory node"
# Read-ahead reads runs of chunks at once: such reads are in flight too.
wait_until 10 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock host)\" status -j | jq .counters.reads_coalesced) -gt 0 ]" ||
	fail "no read of several chunks: $(ctl host status -j | jq -c .counters)"
resumed=$(counter mem sessions_resumed)
kill -STOP "$MEM_PID"
start=$SECONDS
if ! wait_until 30 grep -q '^waiting' "$T/lost.out"; then
	kill -CONT "$MEM_PID"
	fail "famlost: $(cat "$T/lost.out" "$T/lost.err")"
fi
took=$((SECONDS - start))
timeout 10 "$FAMCTL" -s "$(sock host)" status >/dev/null || {
	kill -CONT "$MEM_PID"
	fail "the host famd does not answer while the memory node is stalled"
}
kill -CONT "$MEM_PID"
cat "$T/lost.out"
[ "$took" -le 15 ] || fail "SIGBUS took $took s, op_timeout is 2 s"
grep -q "^ok - 4 threads reading the block and one writing got SIGBUS when the memory node was out of reach" "$T/lost.out" ||
	fail "not every thread got SIGBUS"
grep -Eq "pid $LOST_PID thread [0-9]+: SIGBUS: cannot bring in chunk [0-9]+ of region [0-9]+" "$T/host.log" ||
	fail "the SIGBUS is not explained in the log"
pass "memory famd stalled: SIGBUS in every thread within $took s (op_timeout 2 s), no wrong word; famd answers"

wait_until 30 host_nodes_up host || fail "the host did not reconnect: $(ctl host status -j | jq -c .peers)"
wait_until 30 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock mem)\" status -j | jq .counters.sessions_resumed) -gt $resumed ]" ||
	fail "the session was not resumed: $(ctl mem status -j | jq -c .counters)"
grep -q "memory node $MEM_ADDR ([^)]*) reconnected; session resumed" "$T/host.log" ||
	fail "the resumed session is not reported"
kill -USR1 "$LOST_PID"
wait "$LOST_JOB"
rc=$?
cat "$T/lost.out"
[ "$rc" = 0 ] || fail "famlost exit $rc: $(cat "$T/lost.out" "$T/lost.err")"
pass "the node answers again: the session resumed, the old block read back whole, new blocks are fabric-attached"

[ "$(counter host frees_deferred)" -ge 1 ] ||
	fail "no free was kept for later: $(ctl host status -j | jq -c .counters)"
grep -q "memory node $MEM_ADDR: freeing [0-9]* regions* freed while it was out of reach" "$T/host.log" ||
	fail "the deferred frees are not logged"
regions_gone() {
	[ "$(ctl host status -j | jq '.programs.regions + .buffer.used_bytes')" = 0 ] &&
		[ "$(ctl mem status -j | jq .counters.regions)" = 0 ]
}
wait_until 10 regions_gone || fail "regions left: host $(ctl host status -j | jq -c '[.programs, .buffer]'), memory $(ctl mem status -j | jq -c .counters.regions)"
pass "the region freed while the node was stalled was freed there once it answered; no region left on either node"
