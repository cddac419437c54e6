#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The evaluation's one command, short: contrib/eval/run-eval --quick runs
# every configuration (local DRAM, node-local swap, memory node direct, the
# dpu baseline and each of its optimisations, and each kernel beside a
# co-running BFS) on the emulated testbed with a small graph. Every kernel completes with its result checked, the CSV
# has a row for each configuration and kernel, the report and its plots
# are made, and nothing of the testbed (namespaces, links, cgroup, swap
# file, famd processes) is left behind: after a run, and after a run
# interrupted with SIGTERM while its famds are up. Not how fast: that is
# what run-eval itself is for. Needs root; exits 77 where it cannot run.
. "$(dirname "$0")/../e2e/lib.sh"
require_cmd jq socat tc ip
[ "$(id -u)" = 0 ] || skip "needs root (network namespaces, tc, cgroups, swap)"
if ! ip netns add "famev-probe-$$" 2>/dev/null; then
	skip "cannot create network namespaces here"
fi
ip netns del "famev-probe-$$"

EVAL=$top_srcdir/contrib/eval/run-eval
. "$top_srcdir/contrib/eval/testbed.sh"
if tb_leftovers >"$T/before.txt"; then
	fail "testbed objects of an earlier run exist (contrib/eval/run-eval --cleanup removes them): $(cat "$T/before.txt")"
fi

# famds_of_eval: famd processes started by run-eval (their configuration
# lives in its /tmp/famd-eval.* directory).
famds_of_eval() {
	pgrep -f -a 'famd -f -c /tmp/famd-eval\.' 2>/dev/null
}

# An interrupted run leaves nothing behind.
"$EVAL" --quick --build "$top_builddir" --out "$T/int" --configs "local direct" >"$T/int.log" 2>&1 &
pid=$!
wait_until 60 grep -q '^  direct ' "$T/int.log" || fail "run-eval never reached a direct run: $(cat "$T/int.log")"
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" != 0 ] || fail "run-eval interrupted exited 0"
tb_leftovers >"$T/left.txt" && fail "left behind after SIGTERM: $(cat "$T/left.txt")"
famds_of_eval >"$T/famds.txt" && fail "famds left running after SIGTERM: $(cat "$T/famds.txt")"
pass "run-eval interrupted with SIGTERM (exit $rc): no namespace, link, cgroup, swap file or famd left"

# The whole quick evaluation.
all="local swap direct dpu aggr async static dynamic adaptive opt corun-direct corun-static"
"$EVAL" --quick --build "$top_builddir" --out "$T/out" --configs "$all" >"$T/run.log" 2>&1 ||
	fail "run-eval --quick failed: $(tail -n 30 "$T/run.log")"
csv=$T/out/results.csv
[ -f "$csv" ] && [ -f "$T/out/report.md" ] || fail "no results.csv or report.md"
printf '[famd]\nrole = dpu\n[dpu]\nlisten = 127.0.0.1:0\nmemory_nodes = 127.0.0.1:7700\naggregate = on\nasync = on\ndynamic_cache = on\n' \
	>"$T/dpu.conf"
has_dpu=no
"$FAMD" -t -c "$T/dpu.conf" >/dev/null 2>&1 && has_dpu=yes
for conf in $all; do
	for app in bfs pagerank cc bc radii; do
		st=$(awk -F, -v c="$conf" -v a="$app" '$1 == c && $2 == a { print $4 }' "$csv")
		case $st in
		ok) ;;
		unavailable)
			case $conf in
			swap)
				grep -q 'node-local swap unavailable' "$csv" ||
					fail "swap unavailable without a reason"
				;;
			dpu | aggr | async | static | dynamic | adaptive | opt | corun-static)
				[ "$has_dpu" = no ] || fail "$conf $app: unavailable, yet famd has the dpu role"
				;;
			*) fail "$conf $app: unavailable" ;;
			esac
			;;
		"") fail "no row for $conf $app" ;;
		*) fail "$conf $app: $st: $(grep "^$conf,$app," "$csv")" ;;
		esac
	done
done
ok=$(awk -F, '$4 == "ok"' "$csv" | wc -l)
unavail=$(awk -F, '$4 == "unavailable" { print $1 }' "$csv" | sort -u | tr '\n' ' ')
pass "run-eval --quick: $ok runs completed with checked results; unavailable here: ${unavail:-none}"

grep -q '^## Run time' "$T/out/report.md" &&
	[ "$(sed -n '/^## Run time/,/^## /p' "$T/out/report.md" | grep -c '^| \(bfs\|pagerank\|cc\|bc\|radii\) |')" = 5 ] ||
	fail "report.md has no run-time table of the five kernels"
grep -q '^## The findings of the paper' "$T/out/report.md" || fail "report.md has no findings"
if command -v gnuplot >/dev/null; then
	for p in speedup traffic; do
		[ -s "$T/out/$p.png" ] || fail "no $p.png: $(cat "$T/out/$p.png.err" 2>/dev/null)"
	done
	if [ "$has_dpu" = yes ]; then
		for p in breakdown hitrate; do
			[ -s "$T/out/$p.png" ] || fail "no $p.png"
		done
	fi
	pass "report.md and its plots: $(cd "$T/out" && ls ./*.png | tr '\n' ' ')"
else
	pass "report.md made (gnuplot is not installed: no plots)"
fi

tb_leftovers >"$T/left.txt" && fail "left behind after the run: $(cat "$T/left.txt")"
famds_of_eval >"$T/famds.txt" && fail "famds left running: $(cat "$T/famds.txt")"
pass "nothing of the testbed left after the run"
