#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# redundancy = replicate:2 keeps each chunk on two memory nodes. A program
# writes and verifies a pattern three times the host's buffer in passes
# (famtest passes) while one memory node is killed (SIGKILL): no SIGBUS,
# every byte right, the host says degraded. The node is then started
# again, empty: the host makes its regions again and copies the chunks
# from the other node at rebuild_rate until status says healthy. Then the
# OTHER node is killed, with the program stopped meanwhile so that nothing
# it writes can mend what the rebuild missed: it goes on, every byte right,
# reading what only the rebuild put there. Over two memory nodes and over
# three (each chunk on its stripe's node and the next); and asked for by
# the program itself (FAM_REDUNDANCY) on a host without redundancy.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-redundancy.sh"
require_cmd jq

# run_case NODES RATE: the whole story over NODES memory nodes, rebuilt
# at RATE bytes/s.
run_case() {
	local n=$1 rate=$2 addrs=() names=() list host=host$1 i t0 took
	start_memories "m$n" "$n"
	addrs=("${ADDRS[@]}") names=("${NAMES[@]}") list=$NODES
	start_host "$host" "$buffer" "$list" -o host.redundancy=replicate:2 \
		-o host.rebuild_rate="$rate"
	red "$host" '.mode == "replicate:2" and .state == "healthy"' ||
		fail "status: $(ctl "$host" status -j | jq -c .redundancy)"

	fresh "$T/p.out"
	LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" passes >"$T/p.out" 2>&1 &
	ft=$!
	wait_until 60 passes_past 1 && kill -0 "$ft" ||
		fail "no pass: $(tail -3 "$T/p.out")"
	# Each region is on every node that holds a copy of it.
	for ((i = 0; i < n; i++)); do
		[ "$(counter "${names[$i]}" regions)" -ge 1 ] ||
			fail "${names[$i]} holds no region"
	done
	# Write-backs go to both copies: twice the bytes.
	red "$host" '.regions >= 1' ||
		fail "no replicated region: $(ctl "$host" status -j | jq -c .redundancy)"
	# Over verbs each node's write-backs are one-sided RDMA WRITEs,
	# posted in chains: more work requests than doorbells.
	[ "$TEST_TRANSPORT" != verbs ] || verbs_chains "$host"

	# The first memory node dies mid-run.
	kill -KILL "${MEMPIDS[0]}"
	local p=$(npasses)
	wait_until 60 passes_past $((p + 2)) && kill -0 "$ft" ||
		fail "famtest after the kill: $(tail -3 "$T/p.out")"
	red "$host" '.state == "degraded"' ||
		fail "not degraded with a node dead: $(ctl "$host" status -j | jq -c .redundancy)"
	counter_is "$host" sigbus 0 || fail "SIGBUS: $(ctl "$host" status -j | jq -c .counters)"
	pass "$n nodes: ${names[0]} killed: famtest goes on ($(npasses) passes), no SIGBUS, status degraded"

	# Stop the program: what it writes from now on cannot mend the copy.
	kill -STOP "$ft"
	t0=$(date +%s%N)
	start_famd "${names[0]}r" "$T/${names[0]}.conf" -o memory.listen="${addrs[0]}"
	[ "$(mem_addr "${names[0]}r")" = "${addrs[0]}" ] ||
		fail "the new memory famd is at $(mem_addr "${names[0]}r")"
	wait_until 15 host_nodes_up "$host" ||
		fail "the host did not reconnect: $(ctl "$host" status -j | jq -c .peers)"
	# Sampled until healthy: it passes through rebuilding, with progress.
	local seen=
	for ((i = 0; i < 600; i++)); do
		r=$(ctl "$host" status -j | jq -c .redundancy)
		echo "$r" | jq -e '.state == "rebuilding" and .chunks_to_rebuild > 0' >/dev/null &&
			seen=$r
		echo "$r" | jq -e '.state == "healthy" and .chunks_to_rebuild == 0' >/dev/null && break
		sleep 0.1
	done
	echo "$r" | jq -e '.state == "healthy"' >/dev/null || fail "no rebuild: $r"
	[ -n "$seen" ] || [ "$n" != 2 ] ||
		fail "never seen rebuilding, with chunks to rebuild, at $rate/s"
	[ -z "$seen" ] || echo "# while rebuilding: $seen"
	took=$((($(date +%s%N) - t0) / 1000000))
	red "$host" '.chunks_rebuilt > 0 and .copies_made_again > 0' ||
		fail "nothing rebuilt: $(ctl "$host" status -j | jq -c .redundancy)"
	# At rebuild_rate at most (less the 200 ms of tokens it may save up).
	local bytes bps
	bytes=$(ctl "$host" status -j | jq .redundancy.bytes_rebuilt)
	bps=$(ctl "$host" status -j | jq .redundancy.rebuild_rate)
	[ "$took" -ge $((bytes * 1000 / bps - 200)) ] ||
		fail "$bytes bytes rebuilt in $took ms, faster than $rate/s"
	grep -q "memory node ${addrs[0]} restarted: [0-9]* copies of replicated regions are gone there" \
		"$T/$host.log" || fail "the lost copies are not logged"
	# (over verbs the memory node's processor counts no byte written)
	[ "$(counter "${names[0]}r" regions)" -ge 1 ] &&
		{ [ "$TEST_TRANSPORT" = verbs ] ||
			[ "$(counter "${names[0]}r" bytes_written)" -gt 0 ]; } ||
		fail "the restarted node holds nothing: $(ctl "${names[0]}r" status -j | jq -c .counters)"
	pass "$n nodes: ${names[0]} started again empty: its copies made again and rebuilt ($(ctl "$host" status -j | jq -c '.redundancy | [.chunks_rebuilt, .bytes_rebuilt]')), status healthy in $took ms at most $rate/s"

	# The other node (the second) dies: its chunks' other copies are
	# those the rebuild wrote.
	kill -KILL "${MEMPIDS[1]}"
	wait_until 15 sh -c "\"$FAMCTL\" -s \"$(sock "$host")\" status -j | jq -e '.peers[1].state != \"up\"' >/dev/null" ||
		fail "the host did not see ${names[1]} die"
	kill -CONT "$ft"
	p=$(npasses)
	wait_until 60 passes_past $((p + 1)) && kill -0 "$ft" ||
		fail "famtest after the second kill: $(tail -3 "$T/p.out")"
	kill -USR1 "$ft"
	wait "$ft" || fail "famtest: $(tail -5 "$T/p.out")"
	grep -q '^ok - passes: ' "$T/p.out" || fail "famtest: $(tail -3 "$T/p.out")"
	counter_is "$host" sigbus 0 || fail "SIGBUS: $(ctl "$host" status -j | jq -c .counters)"
	red "$host" '.failovers > 0' ||
		fail "no read went to a second copy: $(ctl "$host" status -j | jq -c .redundancy)"
	pass "$n nodes: then ${names[1]} killed: famtest reads every byte right from the rebuilt copies ($(tail -1 "$T/p.out"))"
	# The copies made again are freed with the region.
	wait_until 10 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock "${names[0]}r")\" status -j | jq .counters.regions) = 0 ]" ||
		fail "regions left on ${names[0]}r: $(ctl "${names[0]}r" status -j | jq -c .counters.regions)"
	stop_famd "$HOST_PID" || fail "host exit"
}

# replicate:N needs N memory nodes: file:line, exit 78; a typo too.
cat >"$T/bad.conf" <<'CONF'
[famd]
role = host
[host]
memory_nodes = 127.0.0.1:1, 127.0.0.1:2
redundancy = replicate:3
CONF
"$FAMD" -t -c "$T/bad.conf" 2>"$T/err.txt"
rc=$?
[ "$rc" -eq 78 ] || fail "replicate:3 over two nodes: exit $rc, expected 78"
grep -q "$T/bad.conf:5: \[host\] redundancy = replicate:3 needs at least 3 memory_nodes; 2 given" "$T/err.txt" ||
	fail "no file:line: $(cat "$T/err.txt")"
"$FAMD" -t -c "$T/bad.conf" -o host.redundancy=mirror 2>"$T/err.txt"
[ $? -eq 78 ] && grep -q "redundancy = mirror: want none or replicate:N" "$T/err.txt" ||
	fail "redundancy = mirror: $(cat "$T/err.txt")"
"$FAMD" -t -c "$T/bad.conf" -o host.redundancy=replicate:2 >/dev/null ||
	fail "replicate:2 over two nodes refused"
pass "replicate:3 over two memory nodes, or a mode famd does not know, is a config error (file:line, 78)"

run_case 2 "$(scaled 16M)"
MEMPIDS=()
run_case 3 256M

# A program asks for replicate:2 itself (FAM_REDUNDANCY) on a host whose
# redundancy is none: its region survives a memory node killed.
MEMPIDS=()
start_memory pa
a=$MEM_ADDR
start_memory pb
start_host hostp "$buffer" "$a, $MEM_ADDR"
red hostp '.mode == "none" and .regions == 0' ||
	fail "status: $(ctl hostp status -j | jq -c .redundancy)"
fresh "$T/p.out"
FAM_REDUNDANCY=replicate:2 LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" passes >"$T/p.out" 2>&1 &
ft=$!
wait_until 60 passes_past 1 && kill -0 "$ft" || fail "no pass: $(tail -3 "$T/p.out")"
wait_until 10 red hostp '.regions == 1' || fail "not replicated: $(ctl hostp status -j | jq -c .redundancy)"
FAM_REDUNDANCY=replicate:3 FAM_STRICT=1 LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" seq \
	>"$T/strict.out" 2>&1 && fail "replicate:3 over two nodes served: $(cat "$T/strict.out")"
grep -q "Invalid argument" "$T/strict.out" || fail "replicate:3: $(cat "$T/strict.out")"
# pa stalls (SIGSTOP) past op_timeout: the host drops it and goes on with
# pb; pa back, its session resumed, the chunks it missed are rebuilt.
# (tcp only: over verbs the kernel serves one-sided reads and writes of a
# stopped memory famd, which stalls nothing.)
stall_pa() {
	kill -STOP "${MEMPIDS[0]}"
	p=$(npasses)
	# (a stopped famd would not stop at the end: continued before failing)
	wait_until 60 passes_past $((p + 2)) && kill -0 "$ft" ||
		{ kill -CONT "${MEMPIDS[0]}"; fail "famtest with pa stalled: $(tail -3 "$T/p.out")"; }
	red hostp '.state == "degraded"' ||
		{ kill -CONT "${MEMPIDS[0]}"; fail "not degraded with pa stalled: $(ctl hostp status -j | jq -c .redundancy)"; }
	# famtest stopped: its write-backs cannot mend pa before the rebuild
	kill -STOP "$ft"
	kill -CONT "${MEMPIDS[0]}"
	wait_until 30 host_nodes_up hostp || fail "pa not back: $(ctl hostp status -j | jq -c .peers)"
	wait_until 60 red hostp '.state == "healthy" and .chunks_to_rebuild == 0 and .chunks_rebuilt > 0' ||
		fail "pa not rebuilt: $(ctl hostp status -j | jq -c .redundancy)"
	kill -CONT "$ft"
	grep -q "memory node ${a} ([^)]*) reconnected; session resumed" "$T/hostp.log" ||
		fail "pa's session not resumed: $(grep "$a" "$T/hostp.log" | tail -3)"
	counter_is hostp sigbus 0 || fail "SIGBUS: $(ctl hostp status -j | jq -c .counters)"
	pass "a memory node stalled past op_timeout: famtest goes on, no SIGBUS; back, what it missed is rebuilt"
}
[ "$TEST_TRANSPORT" = verbs ] || stall_pa

# fork, copy on write, of replicated regions: the copies are not
# replicated, every byte right.
FAM_REDUNDANCY=replicate:2 LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" seq random fork cow cowfree \
	>"$T/fork.out" 2>&1 || fail "famtest fork: $(tail -5 "$T/fork.out")"
kill -KILL "${MEMPIDS[0]}"
p=$(npasses)
wait_until 60 passes_past $((p + 2)) && kill -0 "$ft" ||
	fail "famtest after the kill: $(tail -3 "$T/p.out")"
kill -USR1 "$ft"
wait "$ft" || fail "famtest: $(tail -5 "$T/p.out")"
counter_is hostp sigbus 0 || fail "SIGBUS: $(ctl hostp status -j | jq -c .counters)"
wait_until 10 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock pb)\" status -j | jq .counters.regions) = 0 ]" ||
	fail "regions left on pb: $(ctl pb status -j | jq -c .counters.regions)"
pass "FAM_REDUNDANCY=replicate:2 on a host without redundancy: fork and copy on write right, a node killed, every byte right; replicate:3 refused"
