#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# soak.sh - a bounded soak: PROCS programs under libfamshim.so (famsoak)
# allocate, write, verify and free blocks at random through a small host
# buffer for SOAK_SECONDS, through a dpu famd (path = dpu, fallback =
# direct), while the memory famd is killed (SIGKILL) and started again, the
# dpu is killed and started again, and the memory famd is stopped (SIGTERM)
# and started again. At the end: no
# wrong word anywhere (a block on a lost memory node gives SIGBUS, counted
# as lost), every counter back to zero on the host and the memory node, and
# no descriptor or memory growth in the host famd (measured before and
# after, idle, and printed). `make check-soak` runs it; scripts/check too.
#
# SOAK_SECONDS (default 90), SOAK_PROCS (default 4).
. "$(dirname "$0")/../e2e/lib.sh"
require_cmd jq
FAMSOAK=$top_builddir/tests/tools/famsoak
secs=${SOAK_SECONDS:-90}
procs=${SOAK_PROCS:-4}

# famd_fds PID, famd_rss PID (KiB)
famd_fds() { ls "/proc/$1/fd" | wc -l; }
famd_rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
# all_joined: every peer of the host is up with its background connection,
# the fault-service thread joined the memory node's session, and the dpu's
# memory node is up (the descriptor counts are then stable).
all_joined() {
	ctl host status -j | jq -e '([.peers[] | select(.state != "up" or (.background | not))] | length == 0) and
		(.fault_threads | all(.connections_joined == 2))' >/dev/null &&
		dpu_nodes_up "$DPU_NAME"
}
idle() {
	ctl host status -j | jq -e '.programs.sessions == 0 and .programs.regions == 0 and
		.buffer.used_bytes == 0 and .buffer.fetches_in_flight == 0 and
		.buffer.writebacks_in_flight == 0' >/dev/null
}

start_memory mem -o memory.session_grace=5s
start_dpu dpu "$MEM_ADDR"
DPU_NAME=dpu
# A fault-service thread: the direct reads of the fallback are its.
start_host host 16M "$MEM_ADDR" -o famd.op_timeout=3s -o host.dpu="$DPU_ADDR" \
	-o host.path=dpu -o host.fallback=direct -o host.fault_threads=2
mem_conf=$T/mem.conf

# Warm up with the same load: the first growth of the heap and of the
# staging buffers in use (up to max_fetches chunks) is not a leak.
wpids=()
for i in $(seq 1 "$procs"); do
	shim "$FAMSOAK" -d 8 -t 2 -k 3 -m 8 -S $((100 + i)) >"$T/warm$i.out" 2>&1 &
	wpids+=($!)
done
for p in "${wpids[@]}"; do
	wait "$p" || fail "warm-up: $(cat "$T"/warm*.out)"
done
wait_until 20 idle || fail "host not idle after the warm-up: $(ctl host status -j | jq -c '[.programs, .buffer]')"
fds0=$(famd_fds "$HOST_PID")
rss0=$(famd_rss "$HOST_PID")

start=$SECONDS
pids=()
for i in $(seq 1 "$procs"); do
	shim "$FAMSOAK" -d "$secs" -t 2 -k 3 -m 8 -S "$i" >"$T/soak$i.out" 2>"$T/soak$i.err" &
	pids+=($!)
done

# A quarter in: the memory famd is killed and started again (a new instance).
sleep $((secs / 4))
kill -KILL "$MEM_PID"
wait "$MEM_PID" 2>/dev/null
sleep 2
start_famd mem2 "$mem_conf" -o memory.listen="$MEM_ADDR" -o memory.session_grace=5s
MEM_PID=$FAMD_PID
wait_until 20 host_nodes_up host || fail "the host did not reconnect to mem2"
echo "soak: memory famd killed at $((SECONDS - start)) s and started again"
# Half-way: the dpu is killed (the host goes direct) and started again.
sleep $((secs / 4 - 2))
kill -KILL "$DPU_PID"
wait "$DPU_PID" 2>/dev/null
sleep 2
start_famd dpu2 "$T/dpu.conf" -o dpu.listen="$DPU_ADDR"
DPU_PID=$FAMD_PID
DPU_NAME=dpu2
wait_until 20 all_joined || fail "the host did not reconnect to dpu2: $(ctl host status -j | jq -c .peers)"
dfds0=$(famd_fds "$DPU_PID")
echo "soak: dpu famd killed at $((SECONDS - start)) s and started again"
# Three quarters in: the memory famd is stopped cleanly and started again.
sleep $((secs / 4 - 2))
stop_famd "$MEM_PID" || fail "mem2 did not stop cleanly"
start_famd mem3 "$mem_conf" -o memory.listen="$MEM_ADDR" -o memory.session_grace=5s
MEM_PID=$FAMD_PID
wait_until 20 all_joined || fail "the host or dpu did not reconnect to mem3: $(ctl host status -j | jq -c .peers)"
echo "soak: memory famd stopped at $((SECONDS - start)) s and started again"
mfds0=$(famd_fds "$MEM_PID")

failed=0
for i in $(seq 1 "$procs"); do
	if ! wait "${pids[$((i - 1))]}"; then
		echo "soak$i: $(cat "$T/soak$i.out" "$T/soak$i.err")"
		failed=1
	fi
done
[ "$failed" = 0 ] || fail "a soak program failed (above)"
elapsed=$((SECONDS - start))

sum() { cat "$T"/soak*.out | awk -v k="$1" '/^soak:/ { for (i = 2; i < NF; i += 2) if ($i == k) s += $(i + 1) } END { printf "%.0f\n", s }'; }
ops=$(sum ops); allocs=$(sum allocs); fam=$(sum fam); lost=$(sum lost)
written=$(sum bytes_written); verified=$(sum bytes_verified)
[ "$ops" -gt 0 ] && [ "$fam" -gt 0 ] || fail "nothing happened: $(cat "$T"/soak*.out)"
[ "$lost" -gt 0 ] || echo "soak: note: no block was lost to the memory node's restarts"

# Balanced: nothing left anywhere.
wait_until 30 idle || fail "host not idle: $(ctl host status -j | jq -c '[.programs, .buffer]')"
wait_until 30 counter_is mem3 regions 0 ||
	fail "regions left on the memory node: $(ctl mem3 status -j | jq -c .counters)"
[ "$(ctl mem3 status -j | jq .counters.bytes_reserved)" = 0 ] || fail "bytes reserved on the memory node"
wait_until 30 counter_is dpu2 regions 0 ||
	fail "regions left on the dpu: $(ctl dpu2 status -j | jq -c .counters)"
fds1=$(famd_fds "$HOST_PID")
rss1=$(famd_rss "$HOST_PID")
mfds1=$(famd_fds "$MEM_PID")
dfds1=$(famd_fds "$DPU_PID")
sigbus=$(counter host sigbus)
echo "soak: $procs programs x 2 threads for ${elapsed} s through a dpu; memory famd killed and restarted, dpu killed and restarted, memory famd stopped and restarted"
echo "soak: host reads and writes direct $(counter host ops_direct), through the dpu $(counter host ops_dpu); path switches $(counter host path_switches)"
echo "soak: the fault-service thread: $(ctl host status -j | jq -c '.fault_threads[0]')"
echo "soak: ops $ops, allocations $allocs ($fam fabric-attached), bytes written $written, bytes verified $verified, blocks lost $lost (host sigbus $sigbus)"
echo "soak: host famd descriptors $fds0 -> $fds1, RSS ${rss0} KiB -> ${rss1} KiB; memory famd descriptors $mfds0 -> $mfds1; dpu famd descriptors $dfds0 -> $dfds1"
[ "$fds1" -le "$fds0" ] || fail "the host famd holds $((fds1 - fds0)) more descriptors: $(ls -l /proc/$HOST_PID/fd)"
[ "$mfds1" -le "$mfds0" ] || fail "the memory famd holds $((mfds1 - mfds0)) more descriptors"
[ "$dfds1" -le "$dfds0" ] || fail "the dpu famd holds $((dfds1 - dfds0)) more descriptors"
[ "$rss1" -le $((rss0 + 2048)) ] || fail "the host famd grew by $((rss1 - rss0)) KiB"
pass "soak: no wrong word in $verified bytes verified, counters balanced, no descriptor or memory growth"
