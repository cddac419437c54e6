#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A host with two memory nodes stripes each region across both, chunk by
# chunk: famtest over four times the buffer checks every byte, both memory
# nodes serve reads and writes, and when the program exits its regions are
# released on both.
. "$(dirname "$0")/lib.sh"
require_cmd jq

start_memory mema
a=$MEM_ADDR
start_memory memb
b=$MEM_ADDR
start_host host "$(scaled 8M)" "$a, $b"
ctl host status -j | jq -e --arg a "$a" --arg b "$b" \
	'[.peers[] | select(.role == "memory") | .address] == [$a, $b]' >/dev/null ||
	fail "peers: $(ctl host status -j | jq -c .peers)"

size=$(scaled 32M) # 4x the buffer
shim "$top_builddir/tests/tools/famtest" -f -s "$size" seq random strided shared split \
	>"$T/famtest.out" 2>&1 || fail "famtest: $(tail -5 "$T/famtest.out")"
cat "$T/famtest.out"
if [ "$TEST_TRANSPORT" = verbs ]; then
	# Over verbs the host reads and writes chunks one-sided: the memory
	# nodes' processors count none of it, so no per-node load to compare;
	# each node must have lent stripes and served no chunk itself.
	for m in mema memb; do
		ctl "$m" status -j | jq -e '.counters | .regions_created > 0 and
			.reads == 0 and .writes == 0 and .rw_errors == 0' >/dev/null ||
			fail "$m: $(ctl "$m" status -j | jq -c .counters)"
	done
	served="both lent stripes, read and written one-sided"
else
	for m in mema memb; do
		ctl "$m" status -j | jq -e '.counters | .reads > 0 and .writes > 0 and
			.bytes_read > 0 and .bytes_written > 0 and .rw_errors == 0' >/dev/null ||
			fail "$m did not serve reads and writes: $(ctl "$m" status -j | jq -c .counters)"
	done
	# Striped chunk by chunk, the nodes carry about the same load.
	wa=$(counter mema bytes_written)
	wb=$(counter memb bytes_written)
	[ $((wa * 2)) -ge "$wb" ] && [ $((wb * 2)) -ge "$wa" ] ||
		fail "unbalanced stripes: $wa and $wb bytes written"
	served="both served reads and writes ($wa and $wb bytes written)"
fi
ctl host status -j | jq -e '.counters.sigbus == 0 and .counters.fetch_errors == 0 and
	.counters.writeback_errors == 0' >/dev/null || fail "errors: $(ctl host status -j | jq -c .counters)"
[ "$(counter host fetches)" -gt 0 ] && [ "$(counter host writebacks)" -gt 0 ] ||
	fail "nothing paged: $(ctl host status -j | jq -c .counters)"
pass "famtest -f over $size through a $(scaled 8M) buffer on two memory nodes: every byte right; $served"

regions_gone() {
	[ "$(ctl host status -j | jq '.programs.regions + .buffer.used_bytes')" = 0 ] &&
		[ "$(ctl mema status -j | jq '.counters.regions + .counters.bytes_reserved')" = 0 ] &&
		[ "$(ctl memb status -j | jq '.counters.regions + .counters.bytes_reserved')" = 0 ]
}
wait_until 10 regions_gone ||
	fail "regions left: host $(ctl host status -j | jq -c .programs), memory $(ctl mema status -j | jq -c .counters.regions) $(ctl memb status -j | jq -c .counters.regions)"
[ "$(counter mema regions_created)" -gt 0 ] && [ "$(counter memb regions_created)" -gt 0 ] ||
	fail "a memory node never held a stripe"
[ "$(counter mema regions_freed)" = "$(counter mema regions_created)" ] &&
	[ "$(counter memb regions_freed)" = "$(counter memb regions_created)" ] ||
	fail "stripes not freed one by one: $(ctl mema status -j | jq -c .counters) $(ctl memb status -j | jq -c .counters)"
pass "every stripe released on both memory nodes"
