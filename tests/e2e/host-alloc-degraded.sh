#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A program that starts while a memory node is dead still gets replicated
# (or erasure-coded) memory: its region's copies go to the nodes that are
# up, and a copy no node up can take is made when its node is back. With
# replicate:2 over two nodes and ec:2+1 over three, one node killed before
# famtest starts: famtest's block is fabric-attached (famtest -f), the
# host says degraded; the node started again, empty: the missing copies
# are made and rebuilt, healthy; then, famtest stopped (its write-backs
# cannot mend anything), another node is killed: famtest reads every byte
# right from what the rebuild wrote. With fewer nodes up than a chunk
# needs (ec:2+1, two of three dead) the allocation is refused.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-redundancy.sh"
require_cmd jq

# node_down HOST I: the host HOST sees its memory node I down.
node_down() {
	ctl "$1" status -j | jq -e ".peers[$2].state != \"up\"" >/dev/null
}

# run_case HOST MODE NODES: the whole story with [host] redundancy MODE.
run_case() {
	local host=$1 mode=$2 n=$3 addrs names list p last
	start_memories "$host-m" "$n"
	addrs=("${ADDRS[@]}") names=("${NAMES[@]}") list=$NODES
	start_host "$host" "$buffer" "$list" -o host.redundancy="$mode" \
		-o host.rebuild_rate=256M -o host.replace_after=0

	# The last node dies before the program starts.
	last=$((n - 1))
	kill -KILL "${MEMPIDS[last]}"
	wait_until 15 node_down "$host" "$last" || fail "$mode: the host did not see ${names[last]} die"
	fresh "$T/p.out"
	LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" passes >"$T/p.out" 2>&1 &
	ft=$!
	wait_until 60 passes_past 2 && kill -0 "$ft" ||
		fail "$mode: famtest with ${names[last]} dead: $(tail -3 "$T/p.out")"
	red "$host" '.regions == 1 and .state == "degraded"' ||
		fail "$mode: not degraded: $(ctl "$host" status -j | jq -c .redundancy)"
	counter_is "$host" sigbus 0 || fail "$mode: SIGBUS: $(ctl "$host" status -j | jq -c .counters)"
	pass "$mode: ${names[last]} dead before the program: its block is fabric-attached on the nodes up ($(npasses) passes), status degraded"

	# The node is back, empty: the missing copies are made and rebuilt.
	start_famd "${names[last]}r" "$T/${names[last]}.conf" -o memory.listen="${addrs[last]}"
	wait_until 30 host_nodes_up "$host" || fail "$mode: ${names[last]} not back"
	kill -STOP "$ft"
	wait_until 60 red "$host" '.state == "healthy" and .chunks_to_rebuild == 0 and .copies_made_again > 0' ||
		fail "$mode: not rebuilt: $(ctl "$host" status -j | jq -c .redundancy)"
	[ "$(counter "${names[last]}r" regions)" -ge 1 ] ||
		fail "$mode: ${names[last]} holds no region: $(ctl "${names[last]}r" status -j | jq -c .counters)"
	pass "$mode: ${names[last]} back: the missing copies made there and rebuilt ($(ctl "$host" status -j | jq -c '.redundancy | [.copies_made_again, .chunks_rebuilt]')), healthy"

	# The first node dies: what it held is read from the other copies.
	kill -KILL "${MEMPIDS[0]}"
	wait_until 15 node_down "$host" 0 || fail "$mode: the host did not see ${names[0]} die"
	kill -CONT "$ft"
	p=$(npasses)
	wait_until 60 passes_past $((p + 2)) && kill -0 "$ft" ||
		fail "$mode: famtest after ${names[0]} died: $(tail -3 "$T/p.out")"
	kill -USR1 "$ft"
	wait "$ft" || fail "$mode: famtest: $(tail -5 "$T/p.out")"
	grep -q '^ok - passes: ' "$T/p.out" || fail "$mode: famtest: $(tail -3 "$T/p.out")"
	counter_is "$host" sigbus 0 || fail "$mode: SIGBUS: $(ctl "$host" status -j | jq -c .counters)"
	pass "$mode: then ${names[0]} killed: every byte right from the copies made late ($(tail -1 "$T/p.out"))"
}

run_case ha replicate:2 2
run_case he ec:2+1 3

# ec:2+1 with two of its three nodes dead: no chunk would have K = 2
# fragments: refused (FAM_STRICT: the program says why), and served again
# once enough are back.
kill -KILL "${MEMPIDS[1]}"
wait_until 15 node_down he 1 || fail "the host did not see he-m1 die"
FAM_STRICT=1 LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" seq >"$T/strict.out" 2>&1 &&
	fail "ec:2+1 with one node of three up: served: $(cat "$T/strict.out")"
grep -q "Host is down" "$T/strict.out" || fail "ec:2+1, one node up: $(cat "$T/strict.out")"
pass "ec:2+1 with two of three nodes dead: the allocation is refused (EHOSTDOWN)"
