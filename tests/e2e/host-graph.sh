#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The graph workload's five kernels (BFS, PageRank, connected components,
# betweenness centrality, radii) agree with brute force on small graphs,
# and a spoiled result fails its check. Then, on a real memory famd and a
# host famd with a 4 MiB buffer (a fraction of the footprint), every kernel
# runs under libfamshim.so on a graph generated in fabric-attached memory,
# read from an edge file and read from a CSR pair, and graph-fam maps the
# CSR pair preloaded on the memory node with fam_alloc_file: every result
# passes its check and equals the all-local run's, the graph read back is
# the one written (same checksum), and the arrays paged through famd.
. "$(dirname "$0")/lib.sh"
require_cmd jq

GRAPH=$top_builddir/contrib/graph/graph
GRAPHFAM=$top_builddir/contrib/graph/graph-fam
export OMP_NUM_THREADS=2
# Vertex arrays of a scale-16 graph are 256-512 KiB: fabric-attached too.
export FAM_THRESHOLD=65536

"$GRAPH" selftest >"$T/self.txt" || fail "selftest: $(cat "$T/self.txt")"
[ "$(grep -c ' ok$' "$T/self.txt")" -ge 10 ] && ! grep -q WRONG "$T/self.txt" ||
	fail "selftest: $(cat "$T/self.txt")"
pass "selftest: every kernel agrees with brute force on $(grep -c ' ok$' "$T/self.txt") small graphs"

"$GRAPH" -X -s 10 all >"$T/spoiled.txt"
rc=$?
[ "$rc" = 1 ] && [ "$(grep -c ' WRONG$' "$T/spoiled.txt")" = 5 ] ||
	fail "graph -X: exit $rc, a spoiled result passed its check: $(cat "$T/spoiled.txt")"
pass "graph -X: each of the five spoiled results fails its check (exit 1)"

start_memory mem
start_host host 4M "$MEM_ADDR"

# The reference: all local, and the files the other runs read.
"$GRAPH" -s 16 -w "$T/preload/g.el" -W "$T/preload/g" all >"$T/local.txt" ||
	fail "local run: $(cat "$T/local.txt")"
sum=$(awk '/^build/ { sub("checksum=", "", $6); print $6 }' "$T/local.txt")

# results FILE: the deterministic part of each kernel's line.
results() {
	awk '$1 == "bfs" || $1 == "cc" || $1 == "radii" { $2 = ""; $NF = ""; sub(/check=[^ ]*/, ""); print }
	     $1 == "pagerank" { print $1, $3, $4 }
	     $1 == "bc" { print $1, $3 }' "$1"
}
results "$T/local.txt" >"$T/want.txt"

# check_run NAME FILE: five ok lines, the graph's checksum, local results.
check_run() {
	local name=$1 out=$2
	[ "$(grep -c ' ok$' "$out")" = 5 ] || fail "$name: $(cat "$out")"
	grep -q "^[a-z]* .* checksum=$sum\$" "$out" ||
		fail "$name: checksum differs from $sum: $(head -n 1 "$out")"
	results "$out" | cmp -s - "$T/want.txt" ||
		fail "$name: results differ from the local run: $(results "$out")"
}

before=$(counter host fetches)
shim "$GRAPH" -s 16 all >"$T/gen.txt" || fail "generated under the shim: $(cat "$T/gen.txt")"
check_run "generated under the shim" "$T/gen.txt"
[ "$(counter host fetches)" -gt "$before" ] || fail "the generated graph did not page through famd"
pass "generated under the shim through 4 MiB: five kernels checked, results as local"

for src in "-f $T/preload/g.el" "-c $T/preload/g"; do
	before=$(counter host fetches)
	# shellcheck disable=SC2086
	shim "$GRAPH" $src all >"$T/run.txt" || fail "graph $src under the shim: $(cat "$T/run.txt")"
	check_run "graph $src" "$T/run.txt"
	[ "$(counter host fetches)" -gt "$before" ] || fail "graph $src did not page through famd"
	pass "graph ${src%% *} (${src##*/}) under the shim: same graph, five kernels checked, results as local"
done

before=$(counter host fetches)
"$GRAPHFAM" -F g all >"$T/fam.txt" || fail "graph-fam -F g: $(cat "$T/fam.txt")"
check_run "graph-fam -F g" "$T/fam.txt"
[ "$(counter host fetches)" -gt "$before" ] || fail "graph-fam's graph did not come from the memory node"
ctl mem status -j | jq -e '.counters.regions_created >= 2' >/dev/null ||
	fail "memory node counters: $(ctl mem status -j | jq -c .counters)"
pass "graph-fam maps g.off and g.adj preloaded on the memory node: five kernels checked, results as local"

"$GRAPHFAM" -F nothing bfs >"$T/none.txt" 2>&1 && fail "graph-fam -F nothing succeeded"
grep -q 'fam_alloc_file(nothing.off)' "$T/none.txt" || fail "graph-fam -F nothing: $(cat "$T/none.txt")"
head -c 100 /dev/urandom >"$T/preload/bad.off"
"$GRAPHFAM" -F bad bfs >"$T/bad.txt" 2>&1 && fail "graph-fam -F bad succeeded"
grep -q 'not a graph offsets file' "$T/bad.txt" || fail "graph-fam -F bad: $(cat "$T/bad.txt")"
pass "graph-fam refuses a missing graph and a file that is not one"
