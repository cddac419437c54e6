#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Read-ahead goes out in runs: chunks that follow each other on a memory
# node are read with one request and installed with one UFFDIO_COPY. A
# sequential pass that meets chunks already resident in the middle of those
# runs reads every word right, on one memory node, striped over two, and
# through a dpu, which is then killed under a program reading in runs
# (fallback = direct; host-memory-stalled.sh fails such reads while they
# are in flight). A run that writes what it reads ahead gets it writable.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAMTEST=$top_builddir/tests/tools/famtest
start_memory mem
start_host host "$(scaled 8M)" "$MEM_ADDR"
shim "$FAMTEST" -f -s "$(scaled 32M)" runs seq >"$T/famtest.out" 2>&1 ||
	fail "famtest: $(tail -5 "$T/famtest.out")"
cat "$T/famtest.out"
st=$(ctl host status -j)
echo "$st" | jq -e '.counters | .reads_coalesced > 0 and
	.reads < .fetches + .prefetches and .sigbus == 0 and
	.fetch_errors == 0' >/dev/null ||
	fail "no coalesced reads, or errors: $(echo "$st" | jq -c .counters)"
pass "famtest runs over 4x the buffer: every word right; $(echo "$st" | jq '.counters.fetches + .counters.prefetches') chunks in $(echo "$st" | jq .counters.reads) reads ($(echo "$st" | jq .counters.reads_coalesced) of several chunks)"

# Several sweeps of one block at once (four threads, each writing then
# reading its quarter front to back): each is a run of its own, read ahead,
# instead of every fault of one thread restarting the others' window. (Not
# scaled: four windows of read-ahead need a buffer of some size.)
start_host hosts 8M "$MEM_ADDR" -o host.prefetch=4
shim "$FAMTEST" -f -s 32M -t 4 split >"$T/famtest-s.out" 2>&1 ||
	fail "famtest split: $(tail -5 "$T/famtest-s.out")"
st=$(ctl hosts status -j)
echo "$st" | jq -e '.counters | .prefetches > .fetches and .sigbus == 0 and
	.fetch_errors == 0' >/dev/null ||
	fail "four sweeps of one block: fewer chunks read ahead than on demand: $(echo "$st" | jq -c '.counters | {fetches, prefetches, reads}')"
pass "four threads each sweeping a quarter of one block: every word right; $(echo "$st" | jq .counters.prefetches) chunks read ahead, $(echo "$st" | jq .counters.fetches) on demand"

a=$MEM_ADDR
start_memory memb
start_host hostb "$(scaled 8M)" "$a, $MEM_ADDR"
shim "$FAMTEST" -f -s "$(scaled 32M)" runs seq >"$T/famtest-b.out" 2>&1 ||
	fail "famtest on two memory nodes: $(tail -5 "$T/famtest-b.out")"
cat "$T/famtest-b.out"
st=$(ctl hostb status -j)
echo "$st" | jq -e '.counters | .reads_coalesced > 0 and .sigbus == 0 and
	.fetch_errors == 0' >/dev/null ||
	fail "striped: no coalesced reads, or errors: $(echo "$st" | jq -c .counters)"
pass "striped over two memory nodes: every word right; $(echo "$st" | jq .counters.reads_coalesced) reads of several chunks, each from one node"

# Through a dpu (path = dpu), the runs go to the dpu, one READ of several
# chunks each, none straight to the memory node. A dpu killed while runs are
# out: their chunks are read again directly (fallback = direct).
start_dpu dpu "$a"
start_host hostd "$(scaled 8M)" "$a" -o host.dpu="$DPU_ADDR" -o host.path=dpu
shim "$FAMTEST" -f -s "$(scaled 32M)" runs seq >"$T/famtest-d.out" 2>&1 ||
	fail "famtest through the dpu: $(tail -5 "$T/famtest-d.out")"
st=$(ctl hostd status -j)
echo "$st" | jq -e '.counters | .reads_coalesced > 0 and .ops_direct == 0 and
	.ops_dpu > 0 and .sigbus == 0 and .fetch_errors == 0' >/dev/null ||
	fail "through the dpu: no coalesced reads, or direct ones, or errors: $(echo "$st" | jq -c .counters)"
dreads=$(counter dpu reads)
dbytes=$(link dpu host read)
[ "$dbytes" -gt $((dreads * 64 * 1024)) ] ||
	fail "the dpu got no read of several chunks: $dreads reads of $dbytes bytes"
pass "through the dpu: every word right; $(echo "$st" | jq .counters.reads_coalesced) reads of several chunks, $dreads reads of $((dbytes / dreads)) bytes on average at the dpu"

# (not through shim(): $! must be famtest's pid, for SIGUSR1)
LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$(scaled 32M)" passes >"$T/famtest-p.out" 2>&1 &
ft=$!
npasses() { grep -c '^pass ' "$T/famtest-p.out"; }
passes_past() { [ "$(npasses)" -ge "$1" ] || ! kill -0 "$ft"; }
wait_until 60 passes_past 2 && kill -0 "$ft" || fail "no pass: $(tail -3 "$T/famtest-p.out")"
kill -KILL "$DPU_PID"
wait "$DPU_PID" 2>/dev/null
st=$(ctl hostd status -j)
n=$(npasses)
wait_until 60 passes_past $((n + 2)) && kill -0 "$ft" ||
	fail "the program did not go on without the dpu: $(tail -3 "$T/famtest-p.out")"
kill -USR1 "$ft"
wait "$ft" || fail "passes with the dpu killed: $(tail -5 "$T/famtest-p.out")"
echo "$st" "$(ctl hostd status -j)" | jq -se '(.[0].counters) as $a | .[1].counters |
	.sigbus == 0 and .fetch_errors == 0 and .ops_direct > $a.ops_direct and
	.reads_coalesced > $a.reads_coalesced' >/dev/null ||
	fail "with the dpu killed: $(ctl hostd status -j | jq -c .counters)"
pass "dpu killed mid-pass: reads go direct, in runs; $(npasses) passes over $(mib 32M) MiB, every word right"

# A run that writes what it reads ahead: once a chunk read ahead is written
# (a write-protect fault), read-ahead goes in writable, taken as dirty (one
# chunk in 8 still protected, to find out), so its writes do not fault
# again; the pass that then only reads takes nothing as written: each
# chunk is written back about once (twice, had the reading pass's
# read-ahead been taken as written).
start_host hostw "$(scaled 8M)" "$MEM_ADDR"
shim "$FAMTEST" -f -s "$(($(mib 8M) * 4))M" seq >"$T/famtest-w.out" 2>&1 ||
	fail "famtest seq: $(tail -5 "$T/famtest-w.out")"
n=$(($(mib 8M) * 4 * 16))
st=$(ctl hostw status -j)
echo "$st" | jq -e --argjson n "$n" '.counters | .faults_write < $n / 4 and
	.writebacks <= $n + $n / 4 and .writebacks >= $n - $n / 8 and .sigbus == 0' >/dev/null ||
	fail "a writing run ($n chunks): $(echo "$st" | jq -c .counters)"
pass "a run writing $n chunks: $(echo "$st" | jq .counters.faults_write) write-protect faults, $(echo "$st" | jq .counters.writebacks) write-backs, every word right"

# A loop larger than the buffer: a block three times the buffer, read front
# to back again and again. A clock (or an LRU) evicts each chunk just
# before the loop comes back to it, so every pass would read the whole
# block. With loop_keep = 50, the loop's chunks are kept, up to half the
# buffer (less the room of the read-ahead windows: prefetch = 2 leaves half
# of even a 2 MiB buffer), and each pass reads only the rest.
start_host hostl "$(scaled 8M)" "$MEM_ADDR" -o host.prefetch=2 -o host.loop_keep=50
LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$(($(mib 8M) * 3))M" reads >"$T/famtest-l.out" 2>&1 &
ft=$!
nreads() { grep -c '^read ' "$T/famtest-l.out"; }
reads_past() { [ "$(nreads)" -ge "$1" ] || ! kill -0 "$ft"; }
wait_until 120 reads_past 8 && kill -0 "$ft" || fail "loop: not 8 passes: $(tail -3 "$T/famtest-l.out")"
kept=$(ctl hostl status -j | jq .buffer.loop_kept_bytes)
kill -USR1 "$ft"
wait "$ft" || fail "loop: $(tail -5 "$T/famtest-l.out")"
block=$(($(mib 8M) * 3 * 16))
per=$(ctl hostl status -j | jq --argjson n "$(nreads)" '.counters | (.fetches + .prefetches) / $n | floor')
[ "$per" -le $((block - block / 16)) ] && [ "$kept" -gt 0 ] ||
	fail "loop: $per of the block's $block chunks read per pass ($kept bytes kept): the buffer kept nothing of the loop"
pass "a loop over a block three times the buffer: $per of its $block chunks read per pass on average ($((kept >> 20)) MiB kept), every word right"
