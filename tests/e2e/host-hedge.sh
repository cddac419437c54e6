#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Hedged reads: with redundancy = replicate:2 over two memory nodes and an
# op_timeout of 20 s, one memory famd stops (SIGSTOP: a node that hangs)
# while a program reads and verifies data three times the host's buffer
# (famtest reads: written once, then only read). The reads it was sent are
# sent to the other copy after hedge_after (auto: a few ms): the program
# goes on reading every byte right, with no SIGBUS, long before op_timeout
# - not stalled until then. The node continued (SIGCONT): its late
# answers are dropped, nothing is lost, the session stays healthy and
# reads go to both nodes again. hedge_after = 0: no read is hedged. With
# ec:2+1 over three nodes the fragment m0 does not send is replaced by the
# third one, the chunk decoded from the two that came.
# (tcp only: over verbs the kernel serves one-sided reads of a stopped
# memory famd, which stalls nothing.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-redundancy.sh"
require_cmd jq
[ "$TEST_TRANSPORT" = verbs ] && skip "over verbs a stopped memory famd stalls no read"

# reads_done: read passes famtest finished so far.
reads_done() {
	grep -c '^read ' "$T/r.out"
}

# reads_past N: famtest finished N read passes (or died).
reads_past() {
	[ "$(reads_done)" -ge "$1" ] || ! kill -0 "$ft"
}

# hedge FILTER: true when the host's hedged reads pass FILTER.
hedge() {
	ctl host status -j | jq -e ".redundancy.hedge | $1" >/dev/null
}

# node_reads I: reads the host sent to memory node I.
node_reads() {
	ctl host status -j | jq -er ".peers[$1].reads"
}

start_memory m0
a0=$MEM_ADDR
start_memory m1
start_host host "$buffer" "$a0, $MEM_ADDR" -o host.redundancy=replicate:2 \
	-o famd.op_timeout=20s
ctl host status -j | jq -e '.peers[0] | has("read_us") and has("read_expected_us")' >/dev/null ||
	fail "no read estimate in the peers: $(ctl host status -j | jq -c .peers)"
hedge '.hedge_after_ms == -1 and .sent == 0' ||
	fail "hedge_after is not auto: $(ctl host status -j | jq -c .redundancy.hedge)"

fresh "$T/r.out"
LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" reads >"$T/r.out" 2>&1 &
ft=$!
wait_until 60 reads_past 1 && kill -0 "$ft" || fail "no read pass: $(tail -3 "$T/r.out")"
# Nothing dirty is left to write back: from now on the program only reads.
wait_until 20 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock host)\" status -j | jq '.buffer.dirty_bytes + .buffer.writebacks_in_flight') = 0 ]" ||
	fail "dirty chunks left: $(ctl host status -j | jq -c .buffer)"
# Both nodes serve reads: each is the faster for some.
r0=$(node_reads 0)
r1=$(node_reads 1)
wait_until 20 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock host)\" status -j | jq '.peers[0].reads') -gt $r0 ] && [ \$(\"$FAMCTL\" -s \"$(sock host)\" status -j | jq '.peers[1].reads') -gt $r1 ]" ||
	fail "reads do not reach both nodes: $(ctl host status -j | jq -c '[.peers[] | {read_us, reads}]')"

# m0 hangs mid-read.
kill -STOP "${MEMPIDS[0]}"
t0=$(date +%s%N)
p=$(reads_done)
# (a stopped famd would not stop at the end: continued before failing)
if ! wait_until 15 reads_past $((p + 3)) || ! kill -0 "$ft"; then
	kill -CONT "${MEMPIDS[0]}"
	fail "famtest with m0 stopped: $(tail -3 "$T/r.out"); $(ctl host status -j | jq -c '[.redundancy.hedge, [.peers[] | {read_us, reads_in_flight, reads}]]')"
fi
took=$((($(date +%s%N) - t0) / 1000000))
if ! hedge '.sent > 0 and .won > 0' || ! counter_is host sigbus 0; then
	kill -CONT "${MEMPIDS[0]}"
	fail "no hedged read won, or SIGBUS: $(ctl host status -j | jq -c '[.redundancy.hedge, .counters.sigbus]')"
fi
red host '.state == "healthy"' || {
	kill -CONT "${MEMPIDS[0]}"
	fail "not healthy with m0 stopped within op_timeout: $(ctl host status -j | jq -c .redundancy)"
}
pass "m0 stopped: 3 read passes over $(mib "$size") MiB in $took ms (op_timeout 20 s), every byte right, no SIGBUS; hedges $(ctl host status -j | jq -c '.redundancy.hedge | {sent, won, wasted}')"

# m0 goes on: its late answers are dropped, and it serves reads again.
kill -CONT "${MEMPIDS[0]}"
r0=$(node_reads 0)
p=$(reads_done)
wait_until 60 reads_past $((p + 2)) && kill -0 "$ft" || fail "famtest after SIGCONT: $(tail -3 "$T/r.out")"
wait_until 30 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock host)\" status -j | jq '.peers[0].reads') -gt $r0 ]" ||
	fail "m0 gets no read after SIGCONT: $(ctl host status -j | jq -c '[.peers[] | {read_us, reads}]')"
kill -USR1 "$ft"
wait "$ft" || fail "famtest: $(tail -5 "$T/r.out")"
grep -q '^ok - reads: ' "$T/r.out" || fail "famtest: $(tail -3 "$T/r.out")"
host_nodes_up host || fail "a node is not up: $(ctl host status -j | jq -c .peers)"
red host '.state == "healthy" and .chunks_to_rebuild == 0' ||
	fail "not healthy: $(ctl host status -j | jq -c .redundancy)"
counter_is host sigbus 0 || fail "SIGBUS: $(ctl host status -j | jq -c .counters)"
[ "$(counter host fetch_errors)" = 0 ] || fail "fetch errors: $(ctl host status -j | jq -c .counters)"
wait_until 10 hedge '.sent == .won + .wasted' ||
	fail "hedges neither won nor wasted: $(ctl host status -j | jq -c .redundancy.hedge)"
pass "m0 continued: its late answers dropped, reads reach it again, every byte right ($(grep "^ok - reads" "$T/r.out" | cut -c6-)), status healthy"
stop_famd "$HOST_PID" || fail "host exit"

# hedge_after = 0: reads still go to the faster copy, none is hedged.
start_host host0 "$buffer" "$a0, $MEM_ADDR" -o host.redundancy=replicate:2 \
	-o host.hedge_after=0
shim "$FAMTEST" -f -s "$size" seq random >"$T/s.out" 2>&1 ||
	fail "famtest: $(tail -3 "$T/s.out")"
ctl host0 status -j | jq -e '.redundancy.hedge | .hedge_after_ms == 0 and .sent == 0 and (.reads_by_copy | add) > 0' >/dev/null ||
	fail "hedge_after = 0: $(ctl host0 status -j | jq -c .redundancy.hedge)"
pass "hedge_after = 0: no read hedged, every byte right"
stop_famd "$HOST_PID" || fail "host0 exit"

# ec:2+1 over three nodes: a fragment read m0 does not answer is replaced
# by the third fragment after hedge_after, the chunk decoded from the two
# that came; the late one dropped.
start_memory m2
start_host hostec "$buffer" "$a0, $MEM_ADDR, $(mem_addr m1)" -o host.redundancy=ec:2+1 \
	-o famd.op_timeout=20s
fresh "$T/r.out"
LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" reads >"$T/r.out" 2>&1 &
ft=$!
wait_until 60 reads_past 1 && kill -0 "$ft" || fail "ec: no read pass: $(tail -3 "$T/r.out")"
wait_until 20 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock hostec)\" status -j | jq '.buffer.dirty_bytes + .buffer.writebacks_in_flight') = 0 ]" ||
	fail "ec: dirty chunks left: $(ctl hostec status -j | jq -c .buffer)"
kill -STOP "${MEMPIDS[0]}"
t0=$(date +%s%N)
p=$(reads_done)
if ! wait_until 15 reads_past $((p + 3)) || ! kill -0 "$ft"; then
	kill -CONT "${MEMPIDS[0]}"
	fail "ec: famtest with m0 stopped: $(tail -3 "$T/r.out"); $(ctl hostec status -j | jq -c .redundancy.ec)"
fi
took=$((($(date +%s%N) - t0) / 1000000))
if ! ctl hostec status -j | jq -e '.redundancy.ec | .hedges > 0 and .hedges_won > 0' >/dev/null ||
	! counter_is hostec sigbus 0; then
	kill -CONT "${MEMPIDS[0]}"
	fail "ec: no hedge won, or SIGBUS: $(ctl hostec status -j | jq -c '[.redundancy.ec, .counters.sigbus]')"
fi
kill -CONT "${MEMPIDS[0]}"
p=$(reads_done)
wait_until 60 reads_past $((p + 2)) && kill -0 "$ft" || fail "ec: famtest after SIGCONT: $(tail -3 "$T/r.out")"
kill -USR1 "$ft"
wait "$ft" || fail "ec: famtest: $(tail -5 "$T/r.out")"
grep -q '^ok - reads: ' "$T/r.out" || fail "ec: famtest: $(tail -3 "$T/r.out")"
counter_is hostec sigbus 0 || fail "ec: SIGBUS: $(ctl hostec status -j | jq -c .counters)"
red hostec '.state == "healthy" and .chunks_to_rebuild == 0' ||
	fail "ec: not healthy: $(ctl hostec status -j | jq -c .redundancy)"
pass "ec:2+1, m0 stopped: 3 read passes in $took ms (op_timeout 20 s), every byte right, no SIGBUS; $(ctl hostec status -j | jq -c '.redundancy.ec | {hedges, hedges_won, decodes}')"
