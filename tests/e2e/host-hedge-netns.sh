#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Reads go to the fastest copy: a host with replicate:2 reaches two memory
# nodes over two veth links from its own network namespace, one of them
# slow (tc netem delay 5 ms each way; where the kernel has no netem, a tbf
# shaped to 100 Mbit/s). A program reads and verifies data three times the
# host's buffer, over and over: each chunk has a copy on each node, and
# the slow node is sent far fewer reads than the fast one (with one copy
# always read first, each would get half). Every byte right, no SIGBUS.
# Needs root and ip netns; skips otherwise.
. "$(dirname "$0")/lib.sh"
require_cmd jq
require_cmd ip
require_cmd tc

[ "$(id -u)" = 0 ] || skip "network namespaces need root"
[ "$TEST_TRANSPORT" = tcp ] || skip "the namespaces' veth links are tcp's"
netns_make famh h a b
veth ha h 10.232.1.1 a 10.232.1.2
veth hb h 10.232.2.1 b 10.232.2.2
# The link to b is slow, both ways.
shaping="netem delay 5ms"
for side in "h hba" "b hbb"; do
	set -- $side
	if ! tc -n "$NS$1" qdisc add dev "$NS$2" root netem delay 5ms 2>/dev/null; then
		shaping="tbf 100mbit (no netem here)"
		tc -n "$NS$1" qdisc add dev "$NS$2" root tbf rate 100mbit burst 16kb latency 200ms ||
			fail "tc on $NS$2"
	fi
done

FAMTEST=$top_builddir/tests/tools/famtest
printf 'hedge-netns-secret\n' >"$T/secret"
chmod 600 "$T/secret"
S=(-o famd.secret_file="$T/secret")
FAMD_NETNS=${NS}a start_memory ma -o memory.listen=0.0.0.0:0 "${S[@]}"
pa=${MEM_ADDR##*:}
FAMD_NETNS=${NS}b start_memory mb -o memory.listen=0.0.0.0:0 "${S[@]}"
pb=${MEM_ADDR##*:}
buffer=$(scaled 8M)
size=$(scaled 24M) # three times the buffer
FAMD_NETNS=${NS}h start_host host "$buffer" "10.232.1.2:$pa, 10.232.2.2:$pb" \
	-o host.redundancy=replicate:2 -o famd.op_timeout=10s "${S[@]}"

# node_reads I: reads the host sent to memory node I.
node_reads() {
	ctl host status -j | jq -er ".peers[$1].reads"
}

LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$size" reads >"$T/r.out" 2>&1 &
ft=$!
wait_until 60 grep -q '^read 1$' "$T/r.out" && kill -0 "$ft" ||
	fail "no read pass: $(tail -3 "$T/r.out")"
# From the first pass on, the program only reads.
fast0=$(node_reads 0)
slow0=$(node_reads 1)
wait_until 60 grep -q '^read 4$' "$T/r.out" && kill -0 "$ft" ||
	fail "famtest: $(tail -3 "$T/r.out")"
kill -USR1 "$ft"
wait "$ft" || fail "famtest: $(tail -5 "$T/r.out")"
grep -q '^ok - reads: ' "$T/r.out" || fail "famtest: $(tail -3 "$T/r.out")"
fast=$(($(node_reads 0) - fast0))
slow=$(($(node_reads 1) - slow0))
est=$(ctl host status -j | jq -c '[.peers[] | {read_us, reads}]')
[ "$fast" -gt 0 ] && [ $((slow * 2)) -lt "$fast" ] ||
	fail "the slow node got $slow reads, the fast one $fast: $est"
counter_is host sigbus 0 || fail "SIGBUS: $(ctl host status -j | jq -c .counters)"
pass "one node behind $shaping: it got $slow reads, the fast one $fast ($est), every byte right"
