#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# [host] replace_after: a memory node down that long has its copies
# (replicate:2 over three memory nodes) or fragments (ec:2+1 over four)
# moved to the node that holds none of the same chunks, rebuilt there from
# the others. A program writes and verifies a pattern three times the
# host's buffer in passes (famtest passes) while one memory node is killed
# (SIGKILL) and never started again: the program goes on, the copies move,
# the rebuild completes and status says healthy with the node still dead.
# Then a second node is killed, with the program stopped meanwhile so that
# nothing it writes can mend what the move missed: it goes on, every byte
# right, its data coming from the moved copies; nothing is left to take
# the second node's copies, which the log says once. And a node that only
# stalled (SIGSTOP) past replace_after, its copies moved, holds nothing of
# them when it is back (tcp).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-redundancy.sh"
require_cmd jq

after=3s

# replace_after is a duration; 0 (never) is one.
cat >"$T/bad.conf" <<'CONF'
[famd]
role = host
[host]
memory_nodes = 127.0.0.1:1, 127.0.0.1:2, 127.0.0.1:3
redundancy = replicate:2
replace_after = soon
CONF
"$FAMD" -t -c "$T/bad.conf" 2>"$T/err.txt"
rc=$?
[ "$rc" -eq 78 ] && grep -q "$T/bad.conf:6: " "$T/err.txt" ||
	fail "replace_after = soon: exit $rc: $(cat "$T/err.txt")"
sed -i '/^replace_after/d' "$T/bad.conf"
"$FAMD" -t -c "$T/bad.conf" -o host.replace_after=0 >/dev/null ||
	fail "replace_after = 0 refused"
pass "replace_after = soon is a config error (file:line, 78); 0 is not"

# peer_down HOST I: the host sees its memory node I down.
peer_down() {
	ctl "$1" status -j | jq -e ".peers[$2].state != \"up\"" >/dev/null
}

# regions NAME: the regions memory famd NAME holds.
regions() {
	ctl "$1" status -j | jq .counters.regions
}

# run_case MODE NODES: the whole story with redundancy MODE over NODES
# memory nodes.
run_case() {
	local mode=$1 n=$2 host=host$2 addrs=() names=() list i p r seen= before
	start_memories "m$n" "$n"
	addrs=("${ADDRS[@]}") names=("${NAMES[@]}") list=$NODES
	start_host "$host" "$buffer" "$list" -o host.redundancy="$mode" \
		-o host.replace_after=$after -o host.rebuild_rate="$(scaled 8M)"
	red "$host" ".mode == \"$mode\" and .state == \"healthy\" and .replace_after_ms == 3000 and .copies_moved == 0" ||
		fail "status: $(ctl "$host" status -j | jq -c .redundancy)"

	: >"$T/p.out" # emptied first: the last case's passes must not count
	fresh "$T/p.out"
	LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" passes >"$T/p.out" 2>&1 &
	ft=$!
	wait_until 60 passes_past 1 && kill -0 "$ft" ||
		fail "no pass: $(tail -3 "$T/p.out")"
	for ((i = 0; i < n; i++)); do
		[ "$(regions "${names[$i]}")" -ge 1 ] || fail "${names[$i]} holds no region"
	done
	before=$(regions "${names[$((n - 1))]}")

	# The first memory node dies mid-run, never to return: degraded at
	# first, nothing moved before replace_after; the program goes on.
	kill -KILL "${MEMPIDS[0]}"
	wait_until 15 peer_down "$host" 0 || fail "the host did not see ${names[0]} die"
	red "$host" '.state == "degraded" and .copies_moved == 0' ||
		fail "not degraded, or moved at once: $(ctl "$host" status -j | jq -c 'del(.redundancy.each) | .redundancy')"
	p=$(npasses)
	wait_until 60 passes_past $((p + 1)) && kill -0 "$ft" ||
		fail "famtest after the kill: $(tail -3 "$T/p.out")"
	# Stop the program: what it writes from now on cannot fill a moved copy.
	kill -STOP "$ft"
	# The copies move, are rebuilt where they went: healthy, the node dead.
	for ((i = 0; i < 600; i++)); do
		r=$(ctl "$host" status -j | jq -c 'del(.redundancy.each) | .redundancy')
		echo "$r" | jq -e '.state == "rebuilding" and .chunks_to_rebuild > 0' >/dev/null &&
			seen=$r
		echo "$r" | jq -e '.state == "healthy" and .copies_moved > 0' >/dev/null && break
		sleep 0.1
	done
	echo "$r" | jq -e '.state == "healthy" and .chunks_to_rebuild == 0 and .copies_moved > 0 and .chunks_rebuilt > 0' >/dev/null ||
		fail "not moved and rebuilt: $r"
	[ -z "$seen" ] || echo "# while rebuilding: $seen"
	peer_down "$host" 0 || fail "${names[0]} is up again?"
	grep -q "memory node ${addrs[0]} down for [0-9.]* s (replace_after): [0-9]* cop[a-z]* of its regions moved (.*to ${addrs[$((n - 1))]}" \
		"$T/$host.log" || fail "the moves are not logged: $(grep replace_after "$T/$host.log")"
	[ "$(regions "${names[$((n - 1))]}")" -gt "$before" ] ||
		fail "${names[$((n - 1))]} holds $(regions "${names[$((n - 1))]}") regions, $before before"
	pass "$mode over $n nodes: ${names[0]} killed: famtest goes on; after replace_after $(echo "$r" | jq .copies_moved) copies moved and rebuilt ($(echo "$r" | jq -c '[.chunks_rebuilt, .bytes_rebuilt]')), healthy with ${names[0]} dead"

	# A second node dies: some chunks are now only (ec: K fragments only)
	# where the moves put them.
	kill -KILL "${MEMPIDS[1]}"
	wait_until 15 peer_down "$host" 1 || fail "the host did not see ${names[1]} die"
	kill -CONT "$ft"
	p=$(npasses)
	wait_until 60 passes_past $((p + 1)) && kill -0 "$ft" ||
		fail "famtest after the second kill: $(tail -3 "$T/p.out")"
	# Nowhere to move its copies: said once, and they stay.
	wait_until 15 red "$host" '.copies_stuck > 0 and .state == "degraded"' ||
		fail "the second node's copies: $(ctl "$host" status -j | jq -c 'del(.redundancy.each) | .redundancy')"
	kill -USR1 "$ft"
	wait "$ft" || fail "famtest: $(tail -5 "$T/p.out")"
	grep -q '^ok - passes: ' "$T/p.out" || fail "famtest: $(tail -3 "$T/p.out")"
	counter_is "$host" sigbus 0 || fail "SIGBUS: $(ctl "$host" status -j | jq -c .counters)"
	[ "$(grep -c "memory node ${addrs[1]} down for [0-9.]* s (replace_after): [0-9]* copies of its regions have no other memory node to go to" "$T/$host.log")" = 1 ] ||
		fail "no other node: not logged once: $(grep "${addrs[1]}" "$T/$host.log")"
	pass "$mode over $n nodes: then ${names[1]} killed: famtest reads every byte right from the moved copies ($(tail -1 "$T/p.out")); no node left for ${names[1]}'s copies, logged once"
	# The moved copies are freed with the region.
	wait_until 10 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock "${names[$((n - 1))]}")\" status -j | jq .counters.regions) = 0 ]" ||
		fail "regions left on ${names[$((n - 1))]}: $(regions "${names[$((n - 1))]}")"
	stop_famd "$HOST_PID" || fail "host exit"
}

run_case replicate:2 3
run_case ec:2+1 4

# A node that only stalls (SIGSTOP) past op_timeout and replace_after: its
# copies move; back, its session resumed, it is given back nothing and
# holds nothing. (tcp only: over verbs the kernel serves one-sided reads
# and writes of a stopped memory famd, which stalls nothing.)
stall_case() {
	local addrs=() i
	MEMPIDS=()
	for i in 0 1 2; do
		start_memory "s$i"
		addrs+=("$MEM_ADDR")
	done
	start_host hosts "$buffer" "$(IFS=,; echo "${addrs[*]}")" \
		-o host.redundancy=replicate:2 -o host.replace_after=$after
	: >"$T/p.out" # emptied first: the last case's passes must not count
	fresh "$T/p.out"
	LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" passes >"$T/p.out" 2>&1 &
	ft=$!
	wait_until 60 passes_past 1 && kill -0 "$ft" || fail "no pass: $(tail -3 "$T/p.out")"
	[ "$(regions s0)" -ge 1 ] || fail "s0 holds no region"
	kill -STOP "${MEMPIDS[0]}"
	wait_until 60 red hosts '.copies_moved > 0 and .state == "healthy"' ||
		{ kill -CONT "${MEMPIDS[0]}"; fail "not moved: $(ctl hosts status -j | jq -c 'del(.redundancy.each) | .redundancy')"; }
	kill -CONT "${MEMPIDS[0]}"
	wait_until 30 host_nodes_up hosts || fail "s0 not back: $(ctl hosts status -j | jq -c .peers)"
	grep -q "memory node ${addrs[0]} ([^)]*) reconnected; session resumed" "$T/hosts.log" ||
		fail "s0's session not resumed: $(grep "${addrs[0]}" "$T/hosts.log" | tail -3)"
	wait_until 10 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock s0)\" status -j | jq .counters.regions) = 0 ]" ||
		fail "s0 still holds $(regions s0) regions"
	p=$(npasses)
	wait_until 60 passes_past $((p + 1)) && kill -0 "$ft" ||
		fail "famtest with s0 back: $(tail -3 "$T/p.out")"
	[ "$(regions s0)" = 0 ] && red hosts '.state == "healthy"' ||
		fail "s0 used again: $(regions s0) regions; $(ctl hosts status -j | jq -c 'del(.redundancy.each) | .redundancy')"
	kill -USR1 "$ft"
	wait "$ft" || fail "famtest: $(tail -5 "$T/p.out")"
	counter_is hosts sigbus 0 || fail "SIGBUS: $(ctl hosts status -j | jq -c .counters)"
	pass "a node stalled past replace_after: its copies moved; back, its old regions freed, nothing of them used there"
	stop_famd "$HOST_PID" || fail "host exit"
}
[ "$TEST_TRANSPORT" = verbs ] || stall_case

# The restart state names where each copy is: a copy moved is named where
# it went, so that a host famd killed and started again frees it there
# when the program's session is released (its process gone).
restart_case() {
	local addrs=() i state=$T/hostr.session.state
	MEMPIDS=()
	for i in 0 1 2; do
		start_memory "r$i"
		addrs+=("$MEM_ADDR")
	done
	start_host hostr "$buffer" "$(IFS=,; echo "${addrs[*]}")" \
		-o host.redundancy=replicate:2 -o host.replace_after=$after
	: >"$T/p.out" # emptied first: the last case's passes must not count
	fresh "$T/p.out"
	LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" passes >"$T/p.out" 2>&1 &
	ft=$!
	wait_until 60 passes_past 1 && kill -0 "$ft" || fail "no pass: $(tail -3 "$T/p.out")"
	kill -KILL "${MEMPIDS[0]}"
	wait_until 60 red hostr '.copies_moved > 0 and .state == "healthy"' ||
		fail "not moved: $(ctl hostr status -j | jq -c 'del(.redundancy.each) | .redundancy')"
	# (saved within a tick of the last copy made where it went)
	sleep 0.5
	jq -s -e '[.[0].sessions[].regions[], (.[1:][] | .region // empty)]
		| any(.stripes | any(.node == 0)) | not' "$state" >/dev/null ||
		fail "the restart state names copies on the dead node: $(cat "$state")"
	kill -KILL "$HOST_PID"
	wait "$HOST_PID" 2>/dev/null
	kill -KILL "$ft"
	wait "$ft" 2>/dev/null
	start_famd hostr "$T/hostr.conf" -o host.redundancy=replicate:2 \
		-o host.replace_after=$after
	HOST_PID=$FAMD_PID
	grep -q "restart state $state: 1 sessions" "$T/hostr.log" ||
		fail "the new famd did not read the restart state: $(tail -5 "$T/hostr.log")"
	for i in 1 2; do
		wait_until 15 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock r$i)\" status -j | jq .counters.regions) = 0 ]" ||
			fail "regions left on r$i after the restarted host released the session: $(regions r$i)"
	done
	pass "the restart state names the copies where they moved: a restarted host famd frees them there"
	stop_famd "$HOST_PID" || fail "host exit"
}
restart_case
