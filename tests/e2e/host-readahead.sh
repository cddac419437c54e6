#!/bin/bash
# Read-ahead goes out in runs: chunks that follow each other on a memory
# node are read with one request and installed with one UFFDIO_COPY. A
# sequential pass that meets chunks already resident in the middle of those
# runs reads every word right, on one memory node and striped over two
# (host-memory-stalled.sh fails such reads while they are in flight).
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAMTEST=$top_builddir/tests/tools/famtest
start_memory mem
start_host host 8M "$MEM_ADDR"
shim "$FAMTEST" -f -s 32M runs seq >"$T/famtest.out" 2>&1 ||
	fail "famtest: $(tail -5 "$T/famtest.out")"
cat "$T/famtest.out"
st=$(ctl host status -j)
echo "$st" | jq -e '.counters | .reads_coalesced > 0 and
	.reads < .fetches + .prefetches and .sigbus == 0 and
	.fetch_errors == 0' >/dev/null ||
	fail "no coalesced reads, or errors: $(echo "$st" | jq -c .counters)"
pass "famtest runs over 4x the buffer: every word right; $(echo "$st" | jq '.counters.fetches + .counters.prefetches') chunks in $(echo "$st" | jq .counters.reads) reads ($(echo "$st" | jq .counters.reads_coalesced) of several chunks)"

a=$MEM_ADDR
start_memory memb
start_host hostb 8M "$a, $MEM_ADDR"
shim "$FAMTEST" -f -s 32M runs seq >"$T/famtest-b.out" 2>&1 ||
	fail "famtest on two memory nodes: $(tail -5 "$T/famtest-b.out")"
cat "$T/famtest-b.out"
st=$(ctl hostb status -j)
echo "$st" | jq -e '.counters | .reads_coalesced > 0 and .sigbus == 0 and
	.fetch_errors == 0' >/dev/null ||
	fail "striped: no coalesced reads, or errors: $(echo "$st" | jq -c .counters)"
pass "striped over two memory nodes: every word right; $(echo "$st" | jq .counters.reads_coalesced) reads of several chunks, each from one node"
