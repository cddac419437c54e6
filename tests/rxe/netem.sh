#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Loss and delay between the host and the memory node, made by tc netem on
# the veth pair joining two network namespaces (the memory famd in its own,
# the host famd in the guest's; they talk tcp across the pair): with delay
# and random loss every byte a program reads is right (TCP retransmits
# under famd's deadlines); a partition longer than op_timeout gives every
# faulting thread SIGBUS within its deadline - never a hang, never a wrong
# word - while famd keeps answering; when the network heals the host
# resumes its session and the old data reads back whole.
#
# This machine's kernel may lack netem, so the test runs in the Soft-RoCE
# guest: its harness keeps sch_netem.ko of the guest's kernel (guest.sh
# sets FAMD_NETEM_KO) and this test loads it. It runs once, in the veth mode.
. "$(dirname "$0")/lib-rxe.sh"
require_cmd jq tc insmod ip

[ "${RXE_TEST_MODE:-loopback}" = veth ] ||
	skip "runs once, in the veth mode"
[ -n "${FAMD_NETEM_KO:-}" ] && [ -r "$FAMD_NETEM_KO" ] ||
	skip "no sch_netem.ko for $(uname -r) (FAMD_NETEM_KO; tests/rxe/vm/famd-rxe-vm keeps it in RXE_VM_MODULES)"
grep -qw sch_netem /proc/modules || insmod "$FAMD_NETEM_KO" ||
	fail "insmod $FAMD_NETEM_KO failed"

# The memory node's namespace, joined to the guest's by a veth pair of its
# own: famn0 (here, 10.231.0.1) and famn1 (there, 10.231.0.2).
NS=famd-netem-$$
NS_IP=10.231.0.2
ip netns add "$NS" || fail "ip netns add"
ip link add famn0 type veth peer name famn1 netns "$NS" || fail "ip link add veth"
ip addr add 10.231.0.1/24 dev famn0 && ip link set famn0 up &&
	ip -n "$NS" addr add "$NS_IP/24" dev famn1 && ip -n "$NS" link set famn1 up &&
	ip -n "$NS" link set lo up || fail "addressing the veth pair"
ip netns exec "$NS" ip -br addr show famn1 | grep -q "$NS_IP" || fail "the namespace has no address"

# netem on both ends: the host's traffic leaves by famn0, the answers by
# famn1 in the namespace.
netem() {
	tc qdisc replace dev famn0 root netem "$@" &&
		ip netns exec "$NS" tc qdisc replace dev famn1 root netem "$@"
}
netem_off() {
	tc qdisc del dev famn0 root 2>/dev/null
	ip netns exec "$NS" tc qdisc del dev famn1 root 2>/dev/null
	return 0
}
# netem_stat NS DEV KEY: "sent" packets or "dropped" packets of DEV's netem
# (NS: a namespace, or - for this one).
netem_stat() {
	local wrap=()
	[ "$1" != - ] && wrap=(ip netns exec "$1")
	"${wrap[@]}" tc -s qdisc show dev "$2" | awk -v k="$3" '
		/Sent/ { for (i = 1; i < NF; i++) {
			if ($i == "pkt") sent = $(i - 1)
			if ($i == "(dropped") { d = $(i + 1); sub(",", "", d) } } }
		END { print (k == "sent" ? sent : d) + 0 }'
}
trap 'rc=$?; netem_off; ip link del famn0 2>/dev/null; ip netns del "$NS" 2>/dev/null; (exit $rc); cleanup' EXIT

FAMD_NETNS=$NS start_memory m -o memory.listen="$NS_IP:0" -o memory.session_grace=120s
start_host h 2M "$MEM_ADDR" -o famd.op_timeout=3s

# 1. Delay with jitter and random loss both ways: TCP carries it.
netem delay 5ms 2ms loss 2% || fail "tc netem failed"
shim "$FAMTEST" -f -s 8M -t 2 -n 8 seq random shared >"$T/lossy.out" 2>&1 ||
	fail "famtest under delay and loss: $(cat "$T/lossy.out")"
sent=$(netem_stat - famn0 sent)
dropped=$(( $(netem_stat - famn0 dropped) + $(netem_stat "$NS" famn1 dropped) ))
[ "$sent" -gt 100 ] && [ "$dropped" -gt 0 ] ||
	fail "netem saw $sent packets and dropped $dropped: the traffic did not cross it"
[ "$(counter h fetches)" -gt 0 ] && [ "$(counter h writebacks)" -gt 0 ] ||
	fail "no fetches or write-backs: $(ctl h status -j | jq -c .counters)"
pass "famtest (8M through a 2M buffer) under 5±2 ms delay and 2% loss between namespaces: every byte right ($sent packets, $dropped dropped)"
netem_off

# 2. A partition longer than op_timeout under reading threads and a writer.
shim "$FAMLOST" -p -s 8M -t 2 -w 120 >"$T/lost.out" 2>"$T/lost.err" &
job=$!
wait_until 60 grep -q '^ready' "$T/lost.out" ||
	fail "famlost never got ready: $(cat "$T/lost.out" "$T/lost.err")"
lost=$(awk '/^ready/ { print $2 }' "$T/lost.out")
resumed=$(counter m sessions_resumed)
netem loss 100% || fail "tc netem failed"
start=$SECONDS
wait_until 60 grep -q '^waiting' "$T/lost.out" ||
	fail "famlost: $(cat "$T/lost.out" "$T/lost.err")"
took=$((SECONDS - start))
cat "$T/lost.out"
grep -q "got SIGBUS when the memory node was out of reach" "$T/lost.out" ||
	fail "not every thread got SIGBUS"
# Readers fail at op_timeout, the writer once the buffer holds only dirty
# chunks and 1.5 op_timeout more; the emulated guest is slow, so allow 40 s.
[ "$took" -le 40 ] || fail "SIGBUS took $took s with op_timeout 3 s"
timeout 10 "$FAMCTL" -s "$(sock h)" status >/dev/null ||
	fail "the host famd does not answer during the partition"
grep -Eq "pid $lost thread [0-9]+: SIGBUS: cannot bring in chunk [0-9]+ of region [0-9]+" "$T/h.log" ||
	fail "the SIGBUS is not explained in the log"
pass "partition: every thread got SIGBUS within $took s (op_timeout 3 s), no wrong word; famd answers"

# The network heals: the host reconnects and resumes its session.
netem_off
wait_until 60 host_nodes_up h || fail "the host did not reconnect: $(ctl h status -j | jq -c .peers)"
wait_until 30 sh -c "[ \$(\"$FAMCTL\" -s \"$(sock m)\" status -j | jq .counters.sessions_resumed) -gt $resumed ]" ||
	fail "the host's session was not resumed: $(ctl m status -j | jq -c .counters)"
kill -USR1 "$lost"
wait "$job"
rc=$?
cat "$T/lost.out"
[ "$rc" = 0 ] || fail "famlost exit $rc: $(cat "$T/lost.out" "$T/lost.err")"
pass "the network healed: the session resumed, the old block read back whole, new blocks are fabric-attached"
# famlost freed its writer's block during the partition: the host kept that
# free and sent it when the session was back.
[ "$(counter h frees_deferred)" -ge 1 ] ||
	fail "no free was kept for later: $(ctl h status -j | jq -c .counters)"
grep -q "freeing [0-9]* regions* freed while it was out of reach" "$T/h.log" ||
	fail "the deferred frees are not logged"

shim "$FAMTEST" -f -s 8M -t 2 seq random >"$T/after.out" 2>&1 ||
	fail "famtest after the partition: $(cat "$T/after.out")"
regions_gone() {
	[ "$(ctl h status -j | jq '.programs.regions + .buffer.used_bytes')" = 0 ] &&
		[ "$(ctl m status -j | jq .counters.regions)" = 0 ]
}
wait_until 30 regions_gone || fail "regions left: host $(ctl h status -j | jq -c '[.programs, .buffer]'), memory $(ctl m status -j | jq -c .counters.regions)"
pass "a new program works after the partition; every region released on both nodes"
