#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# When the memory famd dies under a running program, the host famd lives
# on: every thread that touches a chunk not in the host's buffer gets
# SIGBUS within op_timeout - never a wrong word, never a hang - and famd
# logs why; new allocations fall back to libc memory with one warning.
# A memory famd started again on the same address is a new instance: the
# host reconnects and says so, the old regions' data is gone (SIGBUS at
# once), and programs get fabric-attached memory again.
. "$(dirname "$0")/lib.sh"
require_cmd jq

start_memory mem
# op_timeout 2 s (not lib.sh's 3 s) keeps the waits for SIGBUS short.
start_host host "$(scaled 8M)" "$MEM_ADDR" -o famd.op_timeout=2s
old_instance=$(ctl mem status -j | json .memory.instance)

# 32 MiB: a written half of 16 MiB, twice the buffer, read by 4 threads
# (and a writer's sparse block 16 times as large).
start_famlost -m -s "$(scaled 32M)" -t 4 -w 30
# The readers page through the memory node.
fetches=$(counter host fetches)
wait_until 10 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock host)\" status -j | jq .counters.fetches) -gt $((fetches + 100)) ]" ||
	fail "the readers do not fetch from the memory node"
kill -KILL "$MEM_PID"
wait "$MEM_PID" 2>/dev/null
start=$SECONDS
wait_until 15 grep -q '^waiting' "$T/lost.out" ||
	fail "famlost: $(cat "$T/lost.out" "$T/lost.err")"
cat "$T/lost.out"
# Readers get SIGBUS at op_timeout; the writer once the buffer holds only
# dirty chunks and 1.5 op_timeout more: seconds, far from famlost's -w 30.
[ $((SECONDS - start)) -le 12 ] || fail "SIGBUS took $((SECONDS - start)) s, op_timeout is 2 s"
grep -q "^ok - 4 threads reading the block and one writing got SIGBUS when the memory node died" "$T/lost.out" ||
	fail "not every thread got SIGBUS"
pass "memory famd killed: SIGBUS in every reading thread within op_timeout, no wrong word"

[ "$(wc -l <"$T/lost.err")" = 1 ] &&
	grep -q "^libfamshim: no fabric-attached memory for $(($(mib 32M) << 20)) bytes: Host is down (EHOSTDOWN); such allocations use libc memory$" "$T/lost.err" ||
	fail "expected one fallback warning: $(cat "$T/lost.err")"
grep -Eq "memory node $MEM_ADDR lost: .*; reconnecting" "$T/host.log" ||
	fail "the loss of the memory node is not logged"
grep -Eq "pid $LOST_PID thread [0-9]+: SIGBUS: cannot bring in chunk [0-9]+ of region [0-9]+: Connection timed out" "$T/host.log" ||
	fail "the SIGBUS is not explained in the log"
[ "$(counter host sigbus)" -ge 4 ] || fail "sigbus counter $(counter host sigbus)"
pass "the host famd logs the lost node and each SIGBUS; a new block in the program is libc memory, with one warning"

# Another program: libc memory and one warning, every byte checked.
shim "$top_builddir/tests/tools/famtest" -l -s "$(scaled 16M)" seq random calloc realloc \
	>"$T/down.out" 2>"$T/down.err" || fail "famtest -l: $(cat "$T/down.out" "$T/down.err")"
[ "$(wc -l <"$T/down.err")" = 1 ] && grep -q "Host is down (EHOSTDOWN); such allocations use libc memory$" "$T/down.err" ||
	fail "famtest -l: expected one warning: $(cat "$T/down.err")"
ctl host status -j | jq -e '.peers[0].state != "up" and .programs.sessions >= 1' >/dev/null ||
	fail "status: $(ctl host status -j | jq -c '[.peers, .programs]')"
pass "another program gets libc memory with one warning while the memory node is down"

# A memory famd on the same address: a new instance.
start_famd mem2 "$T/mem.conf" -o memory.listen="$MEM_ADDR"
[ "$(mem_addr mem2)" = "$MEM_ADDR" ] || fail "the new memory famd is at $(mem_addr mem2)"
new_instance=$(ctl mem2 status -j | json .memory.instance)
[ "$new_instance" != "$old_instance" ] || fail "same instance after a restart"
wait_until 15 host_nodes_up host || fail "the host did not reconnect: $(ctl host status -j | jq -c .peers)"
grep -q "memory node $MEM_ADDR ([^)]*) reconnected as a new instance" "$T/host.log" ||
	fail "the new instance is not reported"
grep -q "memory node $MEM_ADDR restarted: the data of 1 regions is gone" "$T/host.log" ||
	fail "the lost region is not reported"
pass "the host reconnects to the memory famd started again and reports the new instance"

kill -USR1 "$LOST_PID"
wait "$LOST_JOB"
rc=$?
cat "$T/lost.out"
[ "$rc" = 0 ] || fail "famlost exit $rc: $(cat "$T/lost.out" "$T/lost.err")"
pass "the old block's data is gone (SIGBUS, right words before it); new blocks are fabric-attached again"

shim "$top_builddir/tests/tools/famtest" -f -s "$(scaled 32M)" seq random shared >"$T/after.out" 2>&1 ||
	fail "famtest -f after the restart: $(cat "$T/after.out")"
pass "a new program gets fabric-attached memory again (famtest -f over 4x the buffer)"

regions_gone() {
	[ "$(ctl host status -j | jq '.programs.regions + .buffer.used_bytes')" = 0 ] &&
		[ "$(ctl mem2 status -j | jq .counters.regions)" = 0 ]
}
wait_until 10 regions_gone || fail "regions left: host $(ctl host status -j | jq -c '[.programs, .buffer]'), memory $(ctl mem2 status -j | jq -c .counters.regions)"
pass "every region released on the host and the new memory node"
