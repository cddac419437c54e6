#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# [famd] cpu_latency: while a program faults, the host famd and the memory
# famd hold a PM QoS request (/dev/cpu_dma_latency) for a CPU wake-up
# latency of 0 us, which the kernel then reports as the machine's; they let
# go after a second without faults. Off, famd asks nothing. A famd that
# cannot open the device says why once and serves as before.
. "$(dirname "$0")/lib.sh"
require_cmd jq

DEV=/dev/cpu_dma_latency
FAMTEST=$top_builddir/tests/tools/famtest

# qos NAME: the famd's cpu_latency status object.
qos() {
	ctl "$1" status -j | jq -c .cpu_latency
}

start_memory mem
start_host host "$(scaled 8M)" "$MEM_ADDR"
qos host | jq -e '.us == 0 and .held == false and .taken == 0' >/dev/null ||
	fail "held before any fault: $(qos host)"

if [ ! -c "$DEV" ]; then
	shim "$FAMTEST" -f -s "$(scaled 16M)" seq >"$T/famtest.out" 2>&1 ||
		fail "famtest without $DEV: $(tail -5 "$T/famtest.out")"
	qos host | jq -e '.held == false and .failures >= 1 and .error != null' >/dev/null ||
		fail "no failure counted without $DEV: $(qos host)"
	pass "no $DEV on this machine: famd says so and serves; the request itself cannot be tested here"
	exit 0
fi

# A program faulting for a while: the request is held, and the kernel's
# value is 0 while it is.
(for _ in 1 2 3 4 5 6; do shim "$FAMTEST" -f -s "$(scaled 16M)" seq || exit 1; done) \
	>"$T/famtest.out" 2>&1 &
prog=$!
wait_until 30 sh -c "\"$FAMCTL\" -s \"$(sock host)\" status -j | jq -e '.cpu_latency.held' >/dev/null" ||
	fail "host famd never held the request: $(qos host)"
seen=
for _ in $(seq 50); do
	v=$(od -An -td4 -N4 "$DEV" | tr -d ' ')
	if qos host | jq -e .held >/dev/null; then
		seen=$v
		break
	fi
	sleep 0.05
done
[ "$seen" = 0 ] || fail "the kernel's CPU latency was '$seen' while famd held 0"
wait "$prog" || fail "famtest: $(tail -5 "$T/famtest.out")"
qos mem | jq -e '.taken >= 1 and .held_seconds > 0' >/dev/null ||
	fail "the memory famd never held the request: $(qos mem)"
pass "held while a program faults (host $(qos host | jq .taken) times, memory $(qos mem | jq .taken)), the kernel's value 0 meanwhile"

# Idle: both let go.
wait_until 10 sh -c "\"$FAMCTL\" -s \"$(sock host)\" status -j | jq -e '.cpu_latency.held == false' >/dev/null" ||
	fail "host famd still holds the request when idle: $(qos host)"
wait_until 10 sh -c "\"$FAMCTL\" -s \"$(sock mem)\" status -j | jq -e '.cpu_latency.held == false' >/dev/null" ||
	fail "memory famd still holds the request when idle: $(qos mem)"
h=$(qos host | jq .held_seconds)
sleep 1.5
[ "$(qos host | jq .held_seconds)" = "$h" ] ||
	fail "held seconds go on counting after the request was dropped"
pass "let go a second after the last fault ($(qos host | jq .held_seconds) s held in all)"

# Off: nothing asked.
start_host hostoff "$(scaled 8M)" "$MEM_ADDR" -o famd.cpu_latency=off

shim "$FAMTEST" -f -s "$(scaled 16M)" seq >"$T/famtest-off.out" 2>&1 ||
	fail "famtest with cpu_latency = off: $(tail -5 "$T/famtest-off.out")"
qos hostoff | jq -e '.us == -1 and .held == false and .taken == 0 and .failures == 0' >/dev/null ||
	fail "cpu_latency = off, yet: $(qos hostoff)"
pass "cpu_latency = off: nothing asked"

# The device cannot be opened (a read-only file mounted over it, in a mount
# namespace of famd's own): one log line, a counted failure, faults served.
: >"$T/nodev"
FAMD_WRAP=(unshare -m --propagation private sh -c 'mount --bind "$0" /dev/cpu_dma_latency &&
	mount -o remount,bind,ro /dev/cpu_dma_latency && exec "$@"' "$T/nodev")
start_host hostbad "$(scaled 8M)" "$MEM_ADDR"
FAMD_WRAP=()
shim "$FAMTEST" -f -s "$(scaled 16M)" seq \
	>"$T/famtest-bad.out" 2>&1 ||
	fail "famtest when the device cannot be opened: $(tail -5 "$T/famtest-bad.out")"
qos hostbad | jq -e '.held == false and .taken == 0 and .failures == 1 and
	(.error | test("Read-only"))' >/dev/null ||
	fail "no failure counted: $(qos hostbad)"
[ "$(grep -c 'cannot ask for a CPU wake-up latency' "$T/hostbad.log")" = 1 ] ||
	fail "not one log line: $(grep 'CPU wake-up' "$T/hostbad.log")"
pass "device unusable: one log line ($(grep -o 'cannot ask.*Read-only file system' "$T/hostbad.log")), faults served"
