#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# fam_alloc_redundant(): a program of libfamd-client's asks for redundancy
# block by block, on a host whose redundancy is none. famred allocates a
# plain block (FAM_ALLOC_NONE) and a replicated one (replicate:2), each
# three times the host's buffer, and writes and verifies both in passes:
# status shows one replicated region, the second block's, and the program
# two regions. The plain block is then left alone and a memory node is
# killed: the replicated block goes on, every byte right; the plain one
# has lost the chunks that node held (SIGBUS when read). A mode famd does
# not know, or more copies than memory nodes, is EINVAL; FAM_REDUNDANCY
# does not change a block whose redundancy the program gave.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-redundancy.sh"
require_cmd jq

start_memory pa
a=$MEM_ADDR
start_memory pb
start_host host "$buffer" "$a, $MEM_ADDR"
red host '.mode == "none" and .regions == 0' ||
	fail "status: $(ctl host status -j | jq -c .redundancy)"

# Modes famd cannot serve: EINVAL, before (replicate:17) or from the host
# (replicate:3 over two memory nodes).
for m in replicate:17 replicate:3 ec:2+1 ec:0+1; do
	"$FAMRED" -s 1M "$m" >"$T/bad.out" 2>&1 && fail "$m served: $(cat "$T/bad.out")"
	grep -q "Invalid argument" "$T/bad.out" || fail "$m: $(cat "$T/bad.out")"
done
pass "fam_alloc_redundant: replicate:17, replicate:3 and ec:2+1 over two memory nodes, ec:0+1: EINVAL"

# FAM_REDUNDANCY is for blocks that ask nothing (default), not for those
# that ask for none.
FAM_REDUNDANCY=replicate:2 "$FAMRED" -w -s "$(scaled 2M)" none default >"$T/env.out" 2>&1 &
ft=$!
wait_until 30 grep -q '^ready' "$T/env.out" || fail "famred: $(cat "$T/env.out")"
h1=$(sed -n 's/^block 1 default handle //p' "$T/env.out")
red host ".regions == 1 and .each[0].region == $h1 and .each[0].mode == \"replicate:2\"" ||
	fail "FAM_REDUNDANCY with a block asking none: $(ctl host status -j | jq -c .redundancy)"
kill -TERM "$ft"
wait "$ft"
wait_until 10 red host '.regions == 0' || fail "regions left: $(ctl host status -j | jq -c .redundancy)"
pass "FAM_REDUNDANCY=replicate:2: the block asking FAM_ALLOC_NONE stays plain, the default one is replicated"

"$FAMRED" -s "$size" none replicate:2 >"$T/p.out" 2>&1 &
ft=$!
wait_until 60 passes_past 1 && kill -0 "$ft" || fail "no pass: $(tail -3 "$T/p.out")"
h0=$(sed -n 's/^block 0 none handle //p' "$T/p.out")
h1=$(sed -n 's/^block 1 replicate:2 handle //p' "$T/p.out")
[ -n "$h0" ] && [ -n "$h1" ] || fail "famred: $(head -3 "$T/p.out")"
red host ".mode == \"none\" and .regions == 1 and (.each | length) == 1 and .each[0].region == $h1 and .each[0].mode == \"replicate:2\" and .each[0].state == \"healthy\"" ||
	fail "not one replicated region, block 1's ($h1): $(ctl host status -j | jq -c .redundancy)"
ctl host status -j | jq -e '.programs.regions == 2' >/dev/null ||
	fail "not two regions: $(ctl host status -j | jq -c .programs)"
ctl host regions -j | jq -e "[.[] | select(.pid == $ft)][0].regions == 2" >/dev/null ||
	fail "famctl regions: $(ctl host regions -j | jq -c .)"
pass "one program, two blocks: $h0 plain, $h1 replicate:2 (status: $(ctl host status -j | jq -c '.redundancy.each'))"

# The plain block left alone, pa dies: the replicated block goes on.
kill -USR2 "$ft"
wait_until 60 grep -q '^plain left alone' "$T/p.out" || fail "famred: $(tail -3 "$T/p.out")"
p=$(npasses)
wait_until 60 passes_past $((p + 1)) || fail "famred: $(tail -3 "$T/p.out")"
kill -KILL "${MEMPIDS[0]}"
p=$(npasses)
wait_until 60 passes_past $((p + 2)) && kill -0 "$ft" ||
	fail "famred after pa killed: $(tail -3 "$T/p.out")"
red host '.state == "degraded"' ||
	fail "not degraded with pa dead: $(ctl host status -j | jq -c .redundancy)"
counter_is host sigbus 0 || fail "SIGBUS: $(ctl host status -j | jq -c .counters)"
pass "pa killed: the replicated block, every byte right over $(($(npasses) - p)) passes, no SIGBUS"

# The plain block has lost pa's chunks.
kill -USR2 "$ft"
wait_until 60 grep -q '^plain 0 lost at ' "$T/p.out" ||
	fail "the plain block read whole with pa dead: $(tail -3 "$T/p.out")"
kill -USR1 "$ft"
wait "$ft" || fail "famred: $(tail -5 "$T/p.out")"
grep -q '^ok - passes: ' "$T/p.out" || fail "famred: $(tail -3 "$T/p.out")"
pass "the plain block lost pa's chunks ($(grep '^plain 0 lost' "$T/p.out")); the replicated one: $(tail -1 "$T/p.out")"
