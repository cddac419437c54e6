#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# contrib/bench/famd-bench's swap baseline leaves nothing behind: a bench
# interrupted (SIGTERM, then SIGINT) while a graph kernel runs under swap
# exits non-zero, and its swap file is swapped off and removed, its memory
# cgroup removed with the program in it killed, and its famds stopped.
# Not how fast: that is what the bench is for. Needs root (77 otherwise).
. "$(dirname "$0")/lib.sh"
require_cmd jq mkswap swapon
[ "$(id -u)" = 0 ] || skip "needs root (swapon, cgroups)"
BENCH=$top_srcdir/contrib/bench/famd-bench
[ -x "$top_builddir/contrib/graph/graph" ] && [ -x "$top_builddir/contrib/bench/faultbench" ] ||
	skip "contrib/graph/graph or contrib/bench/faultbench not built"

for sig in TERM INT; do
	log=$T/bench-$sig.txt
	# set -m: the bench in its own process group, where SIGINT is not
	# ignored as it is for a background job without job control.
	# Runs enough that it is still running them when interrupted (a run
	# takes a fraction of a second; with 20 the one seen in the cgroup
	# could be the last, the bench then in its cleanup, which ignores
	# signals, when interrupted, and it exited 0).
	set -m
	"$BENCH" -b "$top_builddir" -g 17 -r 1000 -p graph -e clock -k pagerank -s 16M >"$log" 2>&1 &
	pid=$!
	set +m
	# Stopped with SIGTERM (so that it cleans up) if the test ends first.
	FAMD_PIDS+=("$pid")
	wait_until 120 grep -q '^swap: .*cgroup v[12] ' "$log" ||
		{ grep -q '^swap: unavailable' "$log" && kill "$pid" && skip "$(grep '^swap:' "$log")"; } ||
		fail "the bench never set up its swap baseline: $(cat "$log")"
	cg=$(sed -n 's/^swap: .* the program in cgroup v[12] \(.*\)$/\1/p' "$log")
	swapfile=$(sed -n 's/^swap: swap file \([^ ]*\) .*/\1/p; s/^swap: loop device [^ ]* over \([^ ]*\) .*/\1/p' "$log")
	[ -n "$cg" ] && [ -n "$swapfile" ] || fail "no cgroup or swap file named: $(cat "$log")"
	grep -q "$swapfile" /proc/swaps || fail "$swapfile is not swapped to"
	# A kernel under swap: the program is in the cgroup.
	wait_until 120 grep -q . "$cg/cgroup.procs" || fail "no program ever ran in $cg: $(cat "$log")"
	prog=$(head -n 1 "$cg/cgroup.procs")
	kill "-$sig" "$pid"
	wait "$pid"
	rc=$?
	[ "$rc" != 0 ] || fail "the bench interrupted with SIG$sig exited 0"
	[ ! -d "$cg" ] || fail "SIG$sig: the cgroup $cg is left"
	! grep -q "famd-bench-swap-$pid" /proc/swaps || fail "SIG$sig: still swapping to $(grep famd-bench-swap-$pid /proc/swaps)"
	[ ! -e "$swapfile" ] || fail "SIG$sig: the swap file $swapfile is left"
	! kill -0 "$prog" 2>/dev/null || fail "SIG$sig: the program $prog under swap still runs"
	rundir=$(dirname "$swapfile")
	case $rundir in /tmp/famd-bench.*) [ ! -d "$rundir" ] || fail "SIG$sig: $rundir is left" ;; esac
	! pgrep -f "famd -f -c $rundir/" >/dev/null || fail "SIG$sig: famds of the bench still run"
	pass "famd-bench interrupted with SIG$sig under swap (exit $rc): no swap file, cgroup, program or famd left"
done
