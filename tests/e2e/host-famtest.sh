#!/bin/bash
# A program under the shim allocates four times the host buffer and every
# byte it reads back is what it wrote: sequential, random, strided, 8
# threads on shared and on separate chunks, calloc, realloc, alignment,
# 10,000 blocks, fork+exec. famd pages it all through a 16 MiB buffer.
. "$(dirname "$0")/lib.sh"
require_cmd jq

start_memory mem
start_host host 16M "$MEM_ADDR"

shim "$top_builddir/tests/tools/famtest" -f -s 64M >"$T/famtest.out" 2>&1 ||
	fail "famtest: $(tail -5 "$T/famtest.out")"
cat "$T/famtest.out"

st=$(ctl host status -j)
for c in faults_missing faults_write fetches writebacks evictions_dirty zero_fills; do
	v=$(echo "$st" | jq -r ".counters.$c")
	[ "$v" -gt 0 ] || fail "counter $c is $v after paging 4x the buffer"
done
[ "$(echo "$st" | jq -r .counters.sigbus)" = 0 ] || fail "a fault got SIGBUS"
[ "$(echo "$st" | jq -r .counters.fetch_errors)" = 0 ] || fail "fetch errors"
echo "$st" | jq -e '.buffer.used_bytes <= .buffer.size_bytes' >/dev/null || fail "buffer overfull"
pass "4x the buffer through the shim, every byte verified; faults, fetches and write-backs counted"

# Everything the program had is released on both nodes when it exits.
wait_until 10 sh -c "[ \"\$(\"$FAMCTL\" -s $(sock host) status -j | jq .programs.regions)\" = 0 ]" ||
	fail "host still holds regions"
wait_until 10 sh -c "[ \"\$(\"$FAMCTL\" -s $(sock mem) status -j | jq .counters.regions)\" = 0 ]" ||
	fail "memory node still holds regions: $(ctl mem status -j | jq -c .counters)"
[ "$(ctl host status -j | jq .buffer.used_bytes)" = 0 ] || fail "buffer not empty"
pass "regions released on the host and the memory node"
