#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# [host] write_quorum: with replicate:2 over two memory nodes, a program
# writes and verifies a pattern three times the host's buffer in passes
# (famred) while one memory famd is stopped (SIGSTOP, from before its
# first write; op_timeout is long, so the host keeps waiting for it).
#   write_quorum = 1: the other node acknowledges the write-backs, the
#   program keeps going (passes finished while the node is stopped, every
#   byte verified); the stopped node's copies are stale meanwhile. Back
#   (SIGCONT), its late writes land or it is rebuilt, status healthy; then
#   the OTHER node is killed and the program reads every byte right from
#   the copies the stopped node got late.
#   write_quorum = all: the same stall holds every write-back (none
#   acknowledged while the node is stopped, none early); back, it goes on.
# And write_quorum values that cannot work are config errors (file:line).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-redundancy.sh"
require_cmd jq
# over verbs the kernel serves one-sided writes of a stopped memory famd
[ "$TEST_TRANSPORT" = verbs ] && skip "a stopped memory famd stalls nothing over verbs"

# write_quorum below K of ec:K+M, above the copies, or not a number.
cat >"$T/bad.conf" <<'CONF'
[famd]
role = host
[host]
memory_nodes = 127.0.0.1:1, 127.0.0.1:2, 127.0.0.1:3
redundancy = ec:2+1
write_quorum = 1
CONF
"$FAMD" -t -c "$T/bad.conf" 2>"$T/err.txt"
rc=$?
[ "$rc" -eq 78 ] || fail "write_quorum = 1 of ec:2+1: exit $rc, expected 78"
grep -q "$T/bad.conf:6: \[host\] write_quorum = 1: below K of \[host\] redundancy = ec:2+1" "$T/err.txt" ||
	fail "no file:line: $(cat "$T/err.txt")"
"$FAMD" -t -c "$T/bad.conf" -o host.redundancy=replicate:2 -o host.write_quorum=3 2>"$T/err.txt"
[ $? -eq 78 ] && grep -q "write_quorum = 3: more than the 2 copies" "$T/err.txt" ||
	fail "write_quorum = 3 of replicate:2: $(cat "$T/err.txt")"
"$FAMD" -t -c "$T/bad.conf" -o host.write_quorum=most 2>"$T/err.txt"
[ $? -eq 78 ] && grep -q "write_quorum = most: want all or N" "$T/err.txt" ||
	fail "write_quorum = most: $(cat "$T/err.txt")"
"$FAMD" -t -c "$T/bad.conf" -o host.write_quorum=2 >/dev/null ||
	fail "write_quorum = 2 of ec:2+1 refused"
pass "write_quorum below K, above the copies or not a number is a config error (file:line, 78)"

# stalled_fail HOST MESSAGE: the status of HOST taken, the stopped memory
# famd continued (a stopped famd would not stop at the end), then fail.
stalled_fail() {
	local st
	st=$(ctl "$1" status -j | jq -c '[.redundancy, .buffer, .counters]')
	kill -CONT "${MEMPIDS[0]}"
	fail "$2: $st"
}

# wb NAME: write-backs the host NAME acknowledged so far.
wb() {
	counter "$1" writebacks
}

# start_case Q: two memory nodes, a host with write_quorum Q, famred's
# block (the host's replicate:2) allocated, nothing written yet.
start_case() {
	MEMPIDS=()
	start_memory "a$1"
	local a=$MEM_ADDR
	start_memory "b$1"
	start_host "h$1" "$buffer" "$a, $MEM_ADDR" -o host.redundancy=replicate:2 \
		-o host.write_quorum="$1" -o famd.op_timeout=60s
	red "h$1" ".mode == \"replicate:2\" and .write_quorum == \"$1\" and .state == \"healthy\"" ||
		fail "status: $(ctl "h$1" status -j | jq -c .redundancy)"
	fresh "$T/p.out"
	"$FAMRED" -w -s "$size" default >"$T/p.out" 2>&1 &
	ft=$!
	wait_until 30 grep -q '^ready' "$T/p.out" || fail "famred: $(cat "$T/p.out")"
}

# write_quorum = 1: a1 stopped before famred's first write, famred goes on:
# its write-backs are acknowledged by b1, its reads go there too (a1's
# copies are stale from the first write on).
start_case 1
kill -STOP "${MEMPIDS[0]}"
kill -USR1 "$ft"
wait_until 90 passes_past 2 && kill -0 "$ft" ||
	stalled_fail h1 "famred with a1 stopped: $(tail -1 "$T/p.out")"
w=$(wb h1)
r=$(ctl h1 status -j | jq -c .redundancy)
echo "$r" | jq -e '.writebacks_early > 0 and .writebacks_late > 0 and .state != "healthy"' >/dev/null ||
	stalled_fail h1 "no write-back acknowledged early, or none late"
counter_is h1 sigbus 0 || stalled_fail h1 "SIGBUS"
pass "write_quorum = 1: a1 stopped, famred goes on ($w write-backs acknowledged by b1, $(npasses) passes, every byte verified), a1's copies stale: $(echo "$r" | jq -c '{writebacks_early, writebacks_late, state, chunks_to_rebuild}')"

# a1 back: its late writes land, what they no longer cover is rebuilt.
# famred stopped: its write-backs cannot mend a1 meanwhile.
kill -STOP "$ft"
kill -CONT "${MEMPIDS[0]}"
wait_until 60 red h1 '.state == "healthy" and .chunks_to_rebuild == 0 and .writebacks_late == 0' ||
	fail "a1 not up to date again: $(ctl h1 status -j | jq -c .redundancy)"
pass "a1 back: late writes landed, the rest rebuilt, healthy: $(ctl h1 status -j | jq -c '.redundancy | {chunks_rebuilt, late_writes_failed}')"

# The other node dies: every chunk is read from a1.
kill -KILL "${MEMPIDS[1]}"
wait_until 15 sh -c "\"$FAMCTL\" -s \"$(sock h1)\" status -j | jq -e '.peers[1].state != \"up\"' >/dev/null" ||
	fail "the host did not see b1 die"
kill -CONT "$ft"
p=$(npasses)
wait_until 60 passes_past $((p + 1)) && kill -0 "$ft" ||
	fail "famred after b1 killed: $(tail -3 "$T/p.out")"
kill -USR1 "$ft"
wait "$ft" || fail "famred: $(tail -5 "$T/p.out")"
grep -q '^ok - passes: ' "$T/p.out" || fail "famred: $(tail -3 "$T/p.out")"
counter_is h1 sigbus 0 || fail "SIGBUS: $(ctl h1 status -j | jq -c .counters)"
pass "then b1 killed: famred reads every byte right from a1 ($(tail -1 "$T/p.out"))"
stop_famd "$HOST_PID" || fail "host exit"

# write_quorum = all: the same stall holds every write-back: none is
# acknowledged (each needs a2), famred cannot finish a pass.
start_case all
kill -STOP "${MEMPIDS[0]}"
kill -USR1 "$ft"
wait_until 30 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock hall)\" status -j | jq .buffer.writebacks_in_flight) -gt 0 ]" ||
	stalled_fail hall "no write-back waits"
sleep 1
r=$(ctl hall status -j | jq -c '{early: .redundancy.writebacks_early, writebacks: .counters.writebacks, held: .buffer.writebacks_in_flight}')
p=$(npasses)
kill -CONT "${MEMPIDS[0]}"
echo "$r" | jq -e '.writebacks == 0 and .early == 0 and .held > 0' >/dev/null ||
	fail "write-backs acknowledged with a2 stopped and write_quorum = all: $r"
[ "$p" = 0 ] || fail "famred finished a pass with every write-back held"
pass "write_quorum = all: a2 stopped, write-backs held, none acknowledged: $r"
wait_until 60 passes_past 2 && kill -0 "$ft" ||
	fail "famred after a2 came back: $(tail -3 "$T/p.out")"
kill -USR1 "$ft"
wait "$ft" || fail "famred: $(tail -5 "$T/p.out")"
counter_is hall sigbus 0 || fail "SIGBUS: $(ctl hall status -j | jq -c .counters)"
pass "a2 back: famred goes on, every byte right ($(tail -1 "$T/p.out"))"
