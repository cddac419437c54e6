#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A client that floods (thousands of reads sent, their answers left unread)
# slows only itself: the memory famd stops reading it once 8 MiB of answers
# wait, the dpu once it holds 64 MiB of staging for it. Others are served
# meanwhile, famd's memory stays bounded, and the flooder, once it reads,
# gets every answer whole. One that never reads is dropped at op_timeout.
. "$(dirname "$0")/lib.sh"
require_cmd jq

# vm PID FIELD: a field of /proc/PID/status in KiB (VmRSS, VmHWM).
vm() {
	awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"
}

# counter_ge NAME KEY N: true when the counter is at least N.
counter_ge() {
	[ "$(counter "$1" "$2")" -ge "$3" ]
}

# start_flood ADDR OUT: famclient's flood attack on ADDR, output in OUT;
# returns once its requests are out. release_flood lets it read.
start_flood() {
	local addr=$1
	FLOOD_OUT=$2
	rm -f "$T/go"
	mkfifo "$T/go"
	FLOOD_N=2048 FLOOD_LEN=256K "$FAMCLIENT" -n flooder "$addr" attack flood \
		<"$T/go" >"$FLOOD_OUT" 2>&1 &
	FLOOD_PID=$!
	exec 7>"$T/go"
	wait_until 30 grep -q '^flood: .*answers unread$' "$FLOOD_OUT" ||
		fail "the flood did not start: $(cat "$FLOOD_OUT")"
}

release_flood() {
	echo go >&7
	exec 7>&-
	wait "$FLOOD_PID" || fail "flooder: $(cat "$FLOOD_OUT")"
}

# A second client, served while the flooder waits: every byte checked.
other() {
	"$FAMCLIENT" -n other -t 10000 "$1" rw 8M 64K 8 >"$T/other.txt" 2>&1 ||
		fail "another client was not served during the flood: $(cat "$T/other.txt")"
	grep -q verified "$T/other.txt" || fail "not verified: $(cat "$T/other.txt")"
}

# ---- the memory node ----------------------------------------------------
start_memory mem -o famd.op_timeout=30s -o memory.session_grace=0
start_flood "$MEM_ADDR" "$T/flood-mem.txt"
other "$MEM_ADDR"
ctl mem status >/dev/null || fail "famctl status during the flood"
release_flood
grep -q '^flood: 2048 of 2048 answered$' "$FLOOD_OUT" || fail "flooder: $(cat "$FLOOD_OUT")"
wait_until 10 counter_is mem connections_open 0 || fail "connections left"
[ "$(counter mem input_pauses)" -ge 1 ] || fail "the memory famd never stopped reading the flooder"
wait_until 10 counter_is mem regions 0 || fail "regions left"
pass "memory famd: 2048 reads of 256 KiB unread, reading paused $(counter mem input_pauses) times; another client served; every answer whole afterwards"

# ---- the dpu -------------------------------------------------------------
start_dpu dpu "$MEM_ADDR" -o famd.op_timeout=30s -o dpu.session_grace=0 \
	-o dpu.dynamic_cache=off
hwm0=$(vm "$DPU_PID" VmHWM)
start_flood "$DPU_ADDR" "$T/flood-dpu.txt"
wait_until 10 counter_ge dpu host_throttles 1 ||
	fail "the dpu did not stop reading the flooder: $(ctl dpu status -j | jq -c .counters)"
staged=$(ctl dpu status -j | jq -er .counters.staging_bytes)
other "$DPU_ADDR"
hwm=$(vm "$DPU_PID" VmHWM)
echo "dpu: staging ${staged} bytes during the flood; peak RSS ${hwm0} -> ${hwm} KiB"
[ "$staged" -le $(((64 << 20) + (256 << 10))) ] || fail "staging $staged bytes"
[ $((hwm - hwm0)) -le $((160 << 10)) ] || fail "the dpu grew by $((hwm - hwm0)) KiB during the flood"
release_flood
grep -q '^flood: 2048 of 2048 answered$' "$FLOOD_OUT" || fail "flooder: $(cat "$FLOOD_OUT")"
ctl dpu status -j >"$T/dpu.json"
jq -e '.counters.flow_refusals == 0 and .counters.rw_errors == 0' "$T/dpu.json" >/dev/null ||
	fail "dpu counters: $(jq -c .counters "$T/dpu.json")"
wait_until 10 counter_is mem regions 0 || fail "regions left"
pass "dpu: reading the flooder paused $(counter dpu host_throttles) times, staging at most 64 MiB for it (${staged} bytes seen), peak RSS +$(((hwm - hwm0) >> 10)) MiB; another host served; every answer whole afterwards"
stop_famd "$DPU_PID" || fail "dpu exit status"

# ---- a flooder that never reads -----------------------------------------
start_memory mem2 -o famd.op_timeout=2s -o memory.session_grace=0
start_flood "$MEM_ADDR" "$T/flood-never.txt"
wait_until 20 counter_ge mem2 timeouts 1 ||
	fail "the flooder was not dropped: $(ctl mem2 status -j | jq -c .counters)"
grep -q "the peer does not read within 2000 ms; closing" "$T/mem2.log" ||
	fail "not logged: $(tail -5 "$T/mem2.log")"
other "$MEM_ADDR"
release_flood
grep -q 'the daemon closed the connection' "$FLOOD_OUT" || fail "flooder: $(cat "$FLOOD_OUT")"
wait_until 10 counter_is mem2 connections_open 0 || fail "connections left"
wait_until 10 counter_is mem2 regions 0 || fail "regions left"
pass "a flooder that never reads is dropped at op_timeout, logged and counted; others served"
