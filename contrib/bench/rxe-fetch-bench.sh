#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# rxe-fetch-bench.sh - famd's 64 KiB chunk fetch over verbs beside perftest's
# ib_read_lat / ib_read_bw at the same message size, on the same rxe device,
# in one Soft-RoCE guest run; prints them side by side with the ratio.
#
#   contrib/bench/rxe-fetch-bench.sh [BUILDDIR]    (default: _build-dev)
#
# Measured in the guest (loopback on rxe0):
#   perftest   ib_read_lat -s 65536 (t_avg, t_typical), busy-polling its
#              CQ and, with -e, sleeping on the completion channel as famd
#              does; ib_read_bw -s 65536 (BW average; perftest's MB/sec are
#              2^20 bytes/s)
#   transport  fetchbench: what a host famd does per chunk - one
#              fam_conn_read() of 64 KiB into registered staging (one RDMA
#              READ against the memory famd's lease): one in flight
#              (latency), and DEPTH in flight (bandwidth; DEPTH as
#              ib_read_bw's default tx depth, 128, unless BENCH_DEPTH)
#   host       faultbench -P under libfamshim.so through a host famd: the
#              first touch of chunks that live on the memory node, each a
#              fault served by a fetch and UFFDIO_COPY; prefetch off
#              (latency, p50 per chunk) and on (16: bandwidth)
# Under TCG these are the emulator's speed, not rxe's, let alone a NIC's:
# only the ratios mean something. perftest and famd alternate BENCH_REPS
# times (default 3) and each figure is the median, so that other load on
# the machine hits both; still, on a shared machine the ratios move between
# runs (BENCH_RUNS=N repeats the whole set and prints every run).
set -u
BENCH_N=${BENCH_N:-500}
BENCH_NBW=${BENCH_NBW:-2000}
BENCH_DEPTH=${BENCH_DEPTH:-128}
BENCH_RUNS=${BENCH_RUNS:-1}

if [ "${RXE_VM:-}" != 1 ]; then
	src=$(cd "$(dirname "$0")/../.." && pwd)
	B=$(cd "${1:-$src/_build-dev}" && pwd) || exit 1
	vm=${RXE_VM_RUN:-$src/tests/rxe/vm/famd-rxe-vm}
	[ -x "$vm" ] || { echo "no guest harness at $vm (RXE_VM_RUN)"; exit 77; }
	[ -x "$B/contrib/bench/fetchbench" ] || { echo "build first: make -C $B"; exit 1; }
	command -v ib_read_lat >/dev/null || { echo "perftest is not installed"; exit 77; }
	export BENCH_B=$B BENCH_N BENCH_NBW BENCH_DEPTH BENCH_RUNS
	exec "$vm" --timeout 1800 -- bash "$src/contrib/bench/rxe-fetch-bench.sh"
fi

B=$BENCH_B
T=$(mktemp -d /tmp/bench.XXXXXX)
DEV=$RXE_VM_DEV
IP=$RXE_VM_IP
GID=$RXE_VM_GID_INDEX
FAMD=$B/src/famd
FAMCTL=$B/src/famctl
SHIM=$B/src/.libs/libfamshim.so
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait; rm -rf "$T"' EXIT

# perftest PROG ARGS...: runs the server and the client (a port of their
# own, deadlines so that a lost handshake cannot hang the run), prints the
# client's output.
port=18600
perftest() {
	local prog=$1 srv
	shift
	port=$((port + 1))
	timeout 600 "$prog" -d "$DEV" -x "$GID" -p "$port" "$@" >"$T/srv.out" 2>&1 &
	srv=$!
	sleep 1
	timeout 600 "$prog" -d "$DEV" -x "$GID" -p "$port" "$@" "$IP" >"$T/cli.out" 2>&1 ||
		echo "$prog $*: exit $? $(tail -n 3 "$T/cli.out")" >&2
	kill "$srv" 2>/dev/null
	wait "$srv" 2>/dev/null
	cat "$T/cli.out"
}

# start_famd NAME CONF: famd in the foreground, waits for its socket.
start_famd() {
	"$FAMD" -f -c "$2" 2>"$T/$1.log" &
	pids+=($!)
	for _ in $(seq 200); do
		"$FAMCTL" -s "$T/$1.sock" status >/dev/null 2>&1 && return 0
		sleep 0.05
	done
	echo "famd $1 did not start: $(cat "$T/$1.log")"
	exit 1
}

mkdir -p "$T/preload"
cat >"$T/m.conf" <<CONF
[famd]
role = memory
transport = verbs
admin_socket = $T/m.sock
[memory]
listen = $IP:0
capacity = 1G
preload_dir = $T/preload
CONF
start_famd m "$T/m.conf"
MEM=$("$FAMCTL" -s "$T/m.sock" status -j | jq -r .memory.listen)

# host_run PREFETCH: a host famd (8M buffer) and faultbench -P through it.
host_run() {
	cat >"$T/h.conf" <<CONF
[famd]
role = host
transport = verbs
admin_socket = $T/h.sock
op_timeout = 30s
[host]
memory_nodes = $MEM
buffer_size = 8M
prefetch = $1
session_socket = $T/h.session
CONF
	start_famd h "$T/h.conf"
	for _ in $(seq 200); do
		"$FAMCTL" -s "$T/h.sock" status -j 2>/dev/null |
			jq -e '.peers[0].state == "up"' >/dev/null && break
		sleep 0.05
	done
	FAM_SOCKET=$T/h.session LD_PRELOAD=$SHIM timeout 600 \
		"$B/contrib/bench/faultbench" -m malloc -s 32M -c 64K -p seq -P 16M
	"$FAMCTL" -s "$T/h.sock" status -j | jq -c '{fetches: .counters.fetches,
		prefetches: .counters.prefetches, zero_fills: .counters.zero_fills}' >&2
	kill "${pids[-1]}"
	wait "${pids[-1]}" 2>/dev/null
	unset 'pids[-1]'
}

# median: the median of the numbers on stdin.
median() {
	sort -g | awk '{v[NR] = $1} END {if (NR == 0) print "nan";
		else if (NR % 2) print v[(NR + 1) / 2];
		else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# ratio A B: A / B with two decimals.
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'
}

# row LABEL FAMD PERFTEST
row() {
	printf '%-46s %10s %10s %7s\n' "$1" "$2" "$3" "$(ratio "$2" "$3")"
}

echo "guest $(uname -r), $DEV ($IP), 64 KiB messages"
for run in $(seq "$BENCH_RUNS"); do
	: >"$T/samples"
	# perftest and famd alternate, so that a change of load on the
	# machine hits both; each figure is the median of BENCH_REPS.
	for rep in $(seq "${BENCH_REPS:-3}"); do
		perftest ib_read_lat -s 65536 -n "$BENCH_N" |
			awk '$1 == 65536 {print "pl_typ", $5; print "pl_avg", $6}' >>"$T/samples"
		perftest ib_read_lat -e -s 65536 -n "$BENCH_N" |
			awk '$1 == 65536 {print "pe_typ", $5; print "pe_avg", $6}' >>"$T/samples"
		timeout 600 "$B/contrib/bench/fetchbench" -T verbs -c 64K -S 16M \
			-n "$BENCH_N" -N "$BENCH_NBW" -d "$BENCH_DEPTH" "$MEM" >"$T/fb.out" ||
			{ echo "fetchbench failed: $(cat "$T/fb.out")"; exit 1; }
		sed -n 's/^fetchbench lat .* avg=\([0-9.]*\) p50=\([0-9.]*\) .*/fb_avg \1\nfb_p50 \2/p' \
			"$T/fb.out" >>"$T/samples"
		sed -n 's/^fetchbench bw .*MiB\/s=\([0-9.]*\)$/fb_bw \1/p' "$T/fb.out" >>"$T/samples"
		perftest ib_read_bw -s 65536 -n "$BENCH_NBW" |
			awk '$1 == 65536 {print "pb", $4}' >>"$T/samples"
	done
	med() {
		awk -v k="$1" '$1 == k {print $2}' "$T/samples" | median
	}
	# faultbench: mode pattern bytes seconds GB/s chunks/s p50_us p99_us sum
	h0=$(host_run 0 2>"$T/h0.counters")
	h16=$(host_run 16 2>"$T/h16.counters")
	h_p50=$(awk '{print $7}' <<<"$h0")
	h_bw=$(awk '{printf "%.2f", $5 * 1e9 / 1048576}' <<<"$h16")
	echo
	echo "run $run (medians of ${BENCH_REPS:-3} alternations)"
	printf '%-46s %10s %10s %7s\n' "64 KiB RDMA READ" "famd" "perftest" "ratio"
	row "latency avg (us): fetch / ib_read_lat" "$(med fb_avg)" "$(med pl_avg)"
	row "latency p50 (us): fetch / ib_read_lat" "$(med fb_p50)" "$(med pl_typ)"
	row "latency avg (us): fetch / ib_read_lat -e" "$(med fb_avg)" "$(med pe_avg)"
	row "latency p50 (us): fetch / ib_read_lat -e" "$(med fb_p50)" "$(med pe_typ)"
	row "latency p50 (us): host fault+fetch / -e" "$h_p50" "$(med pe_typ)"
	row "bandwidth (MiB/s): fetch depth $BENCH_DEPTH / ib_read_bw" "$(med fb_bw)" "$(med pb)"
	row "bandwidth (MiB/s): host faults, prefetch 16" "$h_bw" "$(med pb)"
	echo "samples: $(sort "$T/samples" | awk '{a[$1] = a[$1] " " $2} END {for (k in a) printf "%s:%s; ", k, a[k]}')"
	echo "host counters (prefetch 0): $(cat "$T/h0.counters")"
	echo "host counters (prefetch 16): $(cat "$T/h16.counters")"
done
