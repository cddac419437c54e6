#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# redundancy = ec:2+1 keeps each chunk as two data fragments and one parity
# fragment on three memory nodes. A program writes and verifies a pattern
# three times the host's buffer in passes (famtest passes) while one memory
# node is killed (SIGKILL): no SIGBUS, every byte right (the chunks whose
# data fragment was there decoded from the other two), the host says
# degraded. The node is then started again, empty: the host makes its
# regions again and rebuilds each lost fragment from the other two at
# rebuild_rate until status says healthy. Then a SECOND node is killed,
# with the program stopped meanwhile so that nothing it writes can mend
# what the rebuild missed: it goes on, every byte right, reading what only
# the rebuild put there. The capacity and the write-back bytes are 1.5
# times the data (not 2, as replicate:2). Then a program asks for ec:2+1
# itself (FAM_REDUNDANCY) on a host without redundancy.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-redundancy.sh"
require_cmd jq

# ec:2+1 needs three memory nodes: file:line, exit 78; a bad code too.
cat >"$T/bad.conf" <<'CONF'
[famd]
role = host
[host]
memory_nodes = 127.0.0.1:1, 127.0.0.1:2
redundancy = ec:2+1
CONF
"$FAMD" -t -c "$T/bad.conf" 2>"$T/err.txt"
rc=$?
[ "$rc" -eq 78 ] || fail "ec:2+1 over two nodes: exit $rc, expected 78"
grep -q "$T/bad.conf:5: \[host\] redundancy = ec:2+1 needs at least 3 memory_nodes; 2 given" "$T/err.txt" ||
	fail "no file:line: $(cat "$T/err.txt")"
for bad in ec:0+1 ec:2+0 ec:17+1 ec:2 ec:2+1x; do
	"$FAMD" -t -c "$T/bad.conf" -o host.redundancy=$bad 2>"$T/err.txt"
	[ $? -eq 78 ] && grep -q "redundancy = $bad: want none or replicate:N (N from 2 to 16) or ec:K+M" "$T/err.txt" ||
		fail "redundancy = $bad: $(cat "$T/err.txt")"
done
"$FAMD" -t -c "$T/bad.conf" -o host.redundancy=ec:1+1 >/dev/null ||
	fail "ec:1+1 over two nodes refused"
pass "ec:2+1 over two memory nodes, or a code famd does not know, is a config error (file:line, 78)"

addrs=() names=()
for i in 0 1 2; do
	start_memory "m$i"
	addrs+=("$MEM_ADDR")
	names+=("m$i")
done
list=$(IFS=,; echo "${addrs[*]}")
rate=$(scaled 4M) # the rebuild of a third of 1.5 times the block: 3 s
start_host host "$buffer" "$list" -o host.redundancy=ec:2+1 \
	-o host.rebuild_rate="$rate"
red host '.mode == "ec:2+1" and .state == "healthy"' ||
	fail "status: $(ctl host status -j | jq -c .redundancy)"

fresh "$T/p.out"
LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" passes >"$T/p.out" 2>&1 &
ft=$!
wait_until 60 passes_past 1 && kill -0 "$ft" ||
	fail "no pass: $(tail -3 "$T/p.out")"
for i in 0 1 2; do
	[ "$(counter "${names[$i]}" regions)" -ge 1 ] ||
		fail "${names[$i]} holds no region"
done
red host '.regions >= 1 and (.each[0].mode == "ec:2+1")' ||
	fail "no erasure-coded region: $(ctl host status -j | jq -c .redundancy)"
# Capacity: each chunk takes 1.5 chunks over the three nodes (replicate:2
# would take 2), a little more for the program's small regions.
cap=0
for i in 0 1 2; do
	cap=$((cap + $(counter "${names[$i]}" bytes_reserved)))
done
want=$(($(numfmt --from=iec "$size") * 3 / 2))
[ "$cap" -ge "$want" ] && [ "$cap" -lt $((want * 11 / 10)) ] ||
	fail "the memory nodes reserve $cap bytes for $size: expected about $want"
# Write-back: a chunk's three fragments are 1.5 chunks on the wire.
chunk=$(ctl host status -j | jq '.buffer.chunk_bytes')
# (one status: the two counters together; a write-back in flight may have
# sent some of its fragments, at most max_writebacks of them)
read -r wbs wbb < <(ctl host status -j |
	jq -r '.counters | "\(.writebacks) \(.background_write_bytes)"')
[ "$wbs" -gt 100 ] && [ "$wbb" -ge $((wbs * chunk * 3 / 2)) ] &&
	[ "$wbb" -le $(((wbs + 64) * chunk * 3 / 2)) ] ||
	fail "$wbs write-backs of $chunk-byte chunks sent $wbb bytes (expected 1.5 times)"
# Over verbs the fragments' write-backs are chains of one-sided WRITEs.
[ "$TEST_TRANSPORT" != verbs ] || verbs_chains host
pass "ec:2+1: each region on the three nodes, $cap bytes reserved for $size (1.5x), $wbb bytes for $wbs write-backs (1.5x)"

# The first memory node dies mid-run.
kill -KILL "${MEMPIDS[0]}"
p=$(npasses)
wait_until 60 passes_past $((p + 2)) && kill -0 "$ft" ||
	fail "famtest after the kill: $(tail -3 "$T/p.out")"
red host '.state == "degraded" and .each[0].state == "degraded"' ||
	fail "not degraded with a node dead: $(ctl host status -j | jq -c .redundancy)"
red host '.ec.decodes > 0' ||
	fail "no chunk decoded: $(ctl host status -j | jq -c .redundancy)"
# (over verbs the fragments a decode reads are one-sided RDMA READs)
[ "$TEST_TRANSPORT" != verbs ] ||
	ctl host status -j | jq -e '[.peers[] | select(.role == "memory" and .state == "up") | .link]
		| length == 2 and all(.reads > 0 and .onesided >= .reads)' >/dev/null ||
	fail "fragment reads not one-sided: $(ctl host status -j | jq -c '[.peers[].link]')"
counter_is host sigbus 0 || fail "SIGBUS: $(ctl host status -j | jq -c .counters)"
pass "${names[0]} killed: famtest goes on ($(npasses) passes), no SIGBUS, chunks decoded ($(ctl host status -j | jq -c .redundancy.ec)), status degraded"

# Stop the program: what it writes from now on cannot mend the fragments.
kill -STOP "$ft"
t0=$(date +%s%N)
start_famd "${names[0]}r" "$T/${names[0]}.conf" -o memory.listen="${addrs[0]}"
[ "$(mem_addr "${names[0]}r")" = "${addrs[0]}" ] ||
	fail "the new memory famd is at $(mem_addr "${names[0]}r")"
wait_until 15 host_nodes_up host ||
	fail "the host did not reconnect: $(ctl host status -j | jq -c .peers)"
seen=
for ((i = 0; i < 600; i++)); do
	r=$(ctl host status -j | jq -c .redundancy)
	echo "$r" | jq -e '.state == "rebuilding" and .chunks_to_rebuild > 0 and .each[0].state == "rebuilding"' >/dev/null &&
		seen=$r
	echo "$r" | jq -e '.state == "healthy" and .chunks_to_rebuild == 0' >/dev/null && break
	sleep 0.1
done
echo "$r" | jq -e '.state == "healthy"' >/dev/null || fail "no rebuild: $r"
[ -n "$seen" ] || fail "never seen rebuilding, with chunks to rebuild, at $rate/s"
echo "# while rebuilding: $(echo "$seen" | jq -c 'del(.each)')"
took=$((($(date +%s%N) - t0) / 1000000))
red host '.chunks_rebuilt > 0 and .copies_made_again > 0' ||
	fail "nothing rebuilt: $(ctl host status -j | jq -c .redundancy)"
bytes=$(ctl host status -j | jq .redundancy.bytes_rebuilt)
bps=$(ctl host status -j | jq .redundancy.rebuild_rate)
[ "$took" -ge $((bytes * 1000 / bps - 200)) ] ||
	fail "$bytes bytes rebuilt in $took ms, faster than $rate/s"
[ "$(counter "${names[0]}r" regions)" -ge 1 ] &&
	{ [ "$TEST_TRANSPORT" = verbs ] ||
		[ "$(counter "${names[0]}r" bytes_written)" -gt 0 ]; } ||
	fail "the restarted node holds nothing: $(ctl "${names[0]}r" status -j | jq -c .counters)"
pass "${names[0]} started again empty: its fragments rebuilt ($(ctl host status -j | jq -c '.redundancy | [.chunks_rebuilt, .bytes_rebuilt]')), status healthy in $took ms at most $rate/s"

# A second node dies: each chunk is now read from its fragment on the
# rebuilt node and the one on the third.
kill -KILL "${MEMPIDS[1]}"
wait_until 15 sh -c "\"$FAMCTL\" -s \"$(sock host)\" status -j | jq -e '.peers[1].state != \"up\"' >/dev/null" ||
	fail "the host did not see ${names[1]} die"
kill -CONT "$ft"
p=$(npasses)
wait_until 60 passes_past $((p + 1)) && kill -0 "$ft" ||
	fail "famtest after the second kill: $(tail -3 "$T/p.out")"
kill -USR1 "$ft"
wait "$ft" || fail "famtest: $(tail -5 "$T/p.out")"
grep -q '^ok - passes: ' "$T/p.out" || fail "famtest: $(tail -3 "$T/p.out")"
counter_is host sigbus 0 || fail "SIGBUS: $(ctl host status -j | jq -c .counters)"
pass "then ${names[1]} killed: famtest reads every byte right from the rebuilt fragments ($(tail -1 "$T/p.out"))"
wait_until 10 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock "${names[0]}r")\" status -j | jq .counters.regions) = 0 ]" ||
	fail "regions left on ${names[0]}r: $(ctl "${names[0]}r" status -j | jq -c .counters.regions)"
stop_famd "$HOST_PID" || fail "host exit"

# A program asks for ec:2+1 itself (FAM_REDUNDANCY) on a host without
# redundancy: a node killed, every byte right; fork and copy on write of
# its regions right.
MEMPIDS=()
addrs=()
for i in 0 1 2; do
	start_memory "p$i"
	addrs+=("$MEM_ADDR")
done
list=$(IFS=,; echo "${addrs[*]}")
start_host hostp "$buffer" "$list"
fresh "$T/p.out"
FAM_REDUNDANCY=ec:2+1 LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" passes >"$T/p.out" 2>&1 &
ft=$!
wait_until 60 passes_past 1 && kill -0 "$ft" || fail "no pass: $(tail -3 "$T/p.out")"
red hostp '.mode == "none" and .regions == 1 and .each[0].mode == "ec:2+1"' ||
	fail "not erasure-coded: $(ctl hostp status -j | jq -c .redundancy)"
FAM_REDUNDANCY=ec:3+1 FAM_STRICT=1 LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" seq \
	>"$T/strict.out" 2>&1 && fail "ec:3+1 over three nodes served: $(cat "$T/strict.out")"
grep -q "Invalid argument" "$T/strict.out" || fail "ec:3+1: $(cat "$T/strict.out")"
FAM_REDUNDANCY=ec:2+1 LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" seq random fork cow cowfree \
	>"$T/fork.out" 2>&1 || fail "famtest fork: $(tail -5 "$T/fork.out")"
kill -KILL "${MEMPIDS[2]}"
p=$(npasses)
wait_until 60 passes_past $((p + 2)) && kill -0 "$ft" ||
	fail "famtest after the kill: $(tail -3 "$T/p.out")"
kill -USR1 "$ft"
wait "$ft" || fail "famtest: $(tail -5 "$T/p.out")"
counter_is hostp sigbus 0 || fail "SIGBUS: $(ctl hostp status -j | jq -c .counters)"
pass "FAM_REDUNDANCY=ec:2+1 on a host without redundancy: fork and copy on write right, a node killed, every byte right; ec:3+1 over three nodes refused"
