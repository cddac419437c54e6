#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A restart of the host famd keeps replicated and erasure-coded regions,
# and which of their copies are behind. famtest rewrites and verifies a
# block three times the host's buffer in passes, with replicate:2 over two
# memory nodes (acknowledged by all copies, then by one: write_quorum),
# then with ec:2+1 over three. One node stalls (SIGSTOP)
# past op_timeout, so that its copy falls behind; the host famd is then
# killed (SIGKILL), the node goes on (SIGCONT, its stale data still there)
# and the host famd is started again: the program stalls meanwhile and is
# taken back, no SIGBUS; the copy that was behind is rebuilt from the
# others (the new famd learned from the state file that it is behind: read
# as current it would give famtest wrong words). With famtest stopped,
# so that nothing it writes can mend a copy, the node that never stalled
# is killed: famtest goes on, every byte right, reading what the rebuild
# after the restart put there.
# (Over verbs the kernel serves one-sided reads and writes of a stopped
# memory famd, which stalls nothing: there famd is killed as it goes.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-redundancy.sh"
require_cmd jq

# stall_last: the last node stalls past op_timeout (SIGSTOP): its copy
# falls behind, and the state file says so.
stall_last() {
	local n=${#MEMPIDS[@]} p
	kill -STOP "${MEMPIDS[n - 1]}"
	p=$(npasses)
	wait_until 60 passes_past $((p + 2)) && kill -0 "$ft" ||
		{ kill -CONT "${MEMPIDS[n - 1]}"; fail "$what: famtest with a node stalled: $(tail -3 "$T/p.out")"; }
	red "$host" '.state != "healthy" and .chunks_to_rebuild > 0' ||
		{ kill -CONT "${MEMPIDS[n - 1]}"; fail "$what: not degraded: $(ctl "$host" status -j | jq -c .redundancy)"; }
	# The state file says so (its stale rows in a line of the journal,
	# or in the snapshot's stripe).
	grep -q -E '"stale":|"behind":(\{|true)' "$state" ||
		{ kill -CONT "${MEMPIDS[n - 1]}"; fail "$what: the restart state does not say a copy is behind"; }
}

# run_case HOST MODE NODES STALL [OPTION...]: the whole story with [host]
# redundancy MODE, on a host famd called HOST; with STALL = calm, no node
# stalls: the host famd is killed as it goes.
run_case() {
	local host=$1 mode=$2 n=$3 stall=$4 list p state
	shift 4
	what="$mode${*:+ ($*)}"
	[ "$stall" = stall ] || what+=", no node stalled"
	local how="with a copy behind"
	[ "$stall" = stall ] || how="as it went"
	start_memories "$host-m" "$n"
	list=$NODES
	opts=(-o host.redundancy="$mode" -o famd.op_timeout=2s -o host.rebuild_rate=256M "$@")
	start_host "$host" "$buffer" "$list" "${opts[@]}"
	state=$T/$host.session.state

	fresh "$T/p.out" "$T/p.err"
	LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" passes >"$T/p.out" 2>"$T/p.err" &
	ft=$!
	wait_until 60 passes_past 1 && kill -0 "$ft" ||
		fail "$what: no pass: $(tail -n 3 "$T/p.out" "$T/p.err")"

	[ "$stall" = stall ] && stall_last

	echo "# $what: stale rows recorded: $(grep -o '\[\"[0-9a-f]*\",\"[0-9a-f]*\",[0-9]*,[0-9]*,1\]' "$state" | wc -l)"
	# The host famd dies; the stalled node goes on, its stale copy there.
	kill -KILL "$HOST_PID"
	wait "$HOST_PID" 2>/dev/null
	[ "$stall" = calm ] || kill -CONT "${MEMPIDS[n - 1]}"
	sleep 0.5
	kill -0 "$ft" || fail "$what: famtest died with famd down: $(tail -n 5 "$T/p.out" "$T/p.err")"
	start_host "$host" "$buffer" "$list" "${opts[@]}"
	grep -q "restart state $state: 1 sessions" "$T/$host.log" ||
		fail "$what: the new famd did not read the restart state: $(tail -5 "$T/$host.log")"
	wait_until 30 sh -c "grep -a -q 'the host famd came back after' '$T/p.err'" ||
		fail "$what: famtest was not taken back: $(tail -5 "$T/p.err"; tail -5 "$T/$host.log")"
	kill -0 "$ft" || { wait "$ft"; fail "$what: famtest after the restart (exit $?): $(cat "$T/p.out" "$T/p.err" | tail -n 5)"; }
	red "$host" ".mode == \"$mode\" and .regions == 1" ||
		fail "$what: the region was not restored as $mode: $(ctl "$host" status -j | jq -c .redundancy); $(tail -n 3 "$T/p.out" "$T/p.err")"
	wait_until 60 host_nodes_up "$host" ||
		fail "$what: nodes: $(ctl "$host" status -j | jq -c .peers)"
	# famtest stopped: its write-backs cannot mend the copy behind.
	kill -STOP "$ft"
	local rebuilt='.chunks_rebuilt > 0'
	[ "$stall" = stall ] || rebuilt=true # (rows written late, if any)
	wait_until 60 red "$host" ".state == \"healthy\" and .chunks_to_rebuild == 0 and $rebuilt" ||
		fail "$what: not rebuilt after the restart: $(ctl "$host" status -j | jq -c .redundancy); famtest: $(tail -n 3 "$T/p.out" "$T/p.err")"
	pass "$what: host famd killed $how and started again: famtest taken back; the copy rebuilt ($(ctl "$host" status -j | jq -c '.redundancy | [.chunks_rebuilt, .bytes_rebuilt]'))"

	# The node that never stalled dies: its chunks' other copies are
	# those the rebuild after the restart wrote.
	kill -KILL "${MEMPIDS[0]}"
	wait_until 15 sh -c "\"$FAMCTL\" -s \"$(sock "$host")\" status -j | jq -e '.peers[0].state != \"up\"' >/dev/null" ||
		fail "$what: the host did not see the first node die"
	kill -CONT "$ft"
	p=$(npasses)
	wait_until 60 passes_past $((p + 2)) && kill -0 "$ft" ||
		fail "$what: famtest after the kill: $(tail -n 3 "$T/p.out" "$T/p.err")"
	kill -USR1 "$ft"
	wait "$ft" || fail "$what: famtest: $(tail -n 5 "$T/p.out" "$T/p.err")"
	grep -q '^ok - passes: ' "$T/p.out" || fail "$what: famtest: $(tail -3 "$T/p.out")"
	counter_is "$host" sigbus 0 || fail "$what: SIGBUS: $(ctl "$host" status -j | jq -c .counters)"
	pass "$what: then the first node killed: every byte right from the copies rebuilt after the restart ($(tail -1 "$T/p.out"))"
	stop_famd "$HOST_PID" || fail "$what: host exit"
}

if [ "$TEST_TRANSPORT" = verbs ]; then
	run_case hc replicate:2 2 calm -o host.write_quorum=1
	run_case he ec:2+1 3 calm
	exit 0
fi
run_case hr replicate:2 2 stall
# write_quorum = 1: the stalled node's copies are written late, each
# marked behind before its chunk leaves the buffer.
run_case hq replicate:2 2 stall -o host.write_quorum=1
# ... and with both nodes up, each write-back acknowledged by whichever
# answers first, the other's write late: killed as it goes, the new famd
# knows which copy of each row is current.
run_case hc replicate:2 2 calm -o host.write_quorum=1
run_case he ec:2+1 3 stall
