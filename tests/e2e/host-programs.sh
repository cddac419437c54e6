#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Real programs run unmodified with their large buffers in fabric-attached
# memory paged through a small host buffer, and their output is checked:
# sort(1) from coreutils, which nobody here wrote, and the graph workload,
# whose BFS and PageRank results check themselves.
. "$(dirname "$0")/lib.sh"
require_cmd jq sort seq shuf

start_memory mem
start_host host "$(scaled 8M)" "$MEM_ADDR"

# sort with a 64 MiB buffer (malloc'd: fabric-attached) over ~30 MiB of lines.
seq 1 $((3000000 / TEST_SCALE)) | shuf --random-source=<(yes) >"$T/in.txt"
sort -n "$T/in.txt" >"$T/want.txt"
before=$(counter host allocs)
shim sort -n -S "$(scaled 64M)" "$T/in.txt" >"$T/got.txt" || fail "sort under the shim failed"
cmp -s "$T/want.txt" "$T/got.txt" || fail "sort under the shim gave different output"
[ "$(counter host allocs)" -gt "$before" ] || fail "sort's buffer did not come from famd"
pass "sort -S $(scaled 64M) under the shim: output identical, its buffer fabric-attached"

GRAPH=$top_builddir/contrib/graph/graph
"$GRAPH" -X -s 12 bfs pagerank >/dev/null && fail "graph -X: a spoiled result passed its check"
before=$(counter host fetches)
# (GRAPH_SCALE: log2 of its vertices, 18 unless set; ~40 MiB at 18)
gscale=${GRAPH_SCALE:-18}
shim env OMP_NUM_THREADS=2 "$GRAPH" -s "$gscale" -e 16 bfs pagerank >"$T/graph.txt" ||
	fail "graph under the shim: $(cat "$T/graph.txt")"
cat "$T/graph.txt"
[ "$(grep -c ' ok$' "$T/graph.txt")" = 2 ] || fail "graph results not ok"
[ "$(counter host fetches)" -gt "$before" ] || fail "the graph did not page through famd"
pass "BFS and PageRank over ~$((40 >> (18 - gscale))) MiB through a $(scaled 8M) buffer: results checked"
