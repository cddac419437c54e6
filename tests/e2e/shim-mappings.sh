#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The mapping calls keep the kernel's meaning on fabric-attached memory:
# fammap passes on the kernel's own memory, then under libfamshim with
# 64 MiB blocks through a 16 MiB buffer: every advice, mprotect, mlock,
# msync, munmap of parts, MAP_FIXED over a block, mremap, a PROT_NONE
# reservation committed the ways runtimes do, fork advice, and every
# descriptor closed under the blocks. Discarded chunks are
# counted and released on the memory node, and every region is gone when
# the program exits.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAMMAP=$top_builddir/tests/tools/fammap
"$FAMMAP" -s "$(scaled 64M)" >"$T/local.out" 2>&1 || fail "fammap on local memory: $(tail -3 "$T/local.out")"
pass "fammap on the kernel's own memory: $(grep -c '^ok' "$T/local.out") tests"

start_memory mem
start_host host "$(scaled 16M)" "$MEM_ADDR"
shim "$FAMMAP" -f -s "$(scaled 64M)" >"$T/fam.out" 2>&1 || fail "fammap under the shim: $(tail -5 "$T/fam.out")"
cat "$T/fam.out"
st=$(ctl host status -j)
echo "$st" | jq -e '.counters.discards > 0 and .counters.sigbus == 0 and .counters.evictions_dirty > 0' >/dev/null ||
	fail "counters after fammap: $(echo "$st" | jq -c .counters)"
pass "under the shim, blocks 4x the buffer: $(grep -c '^ok' "$T/fam.out") tests, $(echo "$st" | jq .counters.discards) chunks discarded"
# closefds: children and the program itself closed every descriptor from
# 3 up and went on using their blocks; a session whose socket famd saw
# close under a running program was served on (orphaned), not ended.
pass "closefds: $(echo "$st" | jq .counters.sessions_orphaned) sessions served on after their program closed the socket"
ms=$(ctl mem status -j)
if [ "$TEST_TRANSPORT" = verbs ]; then
	echo "$ms" | jq -e '.counters.discards > 0' >/dev/null ||
		fail "no REGION_DISCARD reached the memory node: $(echo "$ms" | jq -c .counters)"
	pass "the memory node was told of $(echo "$ms" | jq .counters.discards) discards (its leased memory stays pinned)"
else
	echo "$ms" | jq -e '.counters.discards > 0 and .counters.discard_bytes > 0' >/dev/null ||
		fail "the memory node released nothing: $(echo "$ms" | jq -c .counters)"
	pass "the memory node released $(( $(echo "$ms" | jq .counters.discard_bytes) >> 20 )) MiB of discarded chunks"
fi

regions_gone() {
	[ "$(ctl host status -j | jq .programs.regions)" = 0 ] &&
		[ "$(ctl mem status -j | jq .counters.regions)" = 0 ]
}
wait_until 10 regions_gone || fail "regions left after fammap exited: $(ctl host status -j | jq -c .programs)"
pass "every region released after the program exited"

# FAM_MMAP=0: mappings stay the kernel's; malloc'd blocks are still FAM.
FAM_MMAP=0 shim "$FAMMAP" -s "$(scaled 64M)" mmap munmap reserve >"$T/off.out" 2>&1 ||
	fail "fammap with FAM_MMAP=0: $(tail -3 "$T/off.out")"
shim_ok=$(FAM_MMAP=0 shim "$FAMMAP" -f -s "$(scaled 64M)" mmap 2>&1 || true)
echo "$shim_ok" | grep -q "is not fabric-attached memory" || fail "FAM_MMAP=0 still gave a FAM mapping: $shim_ok"
pass "FAM_MMAP=0: large mappings are the kernel's"
