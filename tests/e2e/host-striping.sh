#!/bin/bash
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
start_host host 8M "$a, $b"
ctl host status -j | jq -e --arg a "$a" --arg b "$b" \
	'[.peers[] | select(.role == "memory") | .address] == [$a, $b]' >/dev/null ||
	fail "peers: $(ctl host status -j | jq -c .peers)"

shim "$top_builddir/tests/tools/famtest" -f -s 32M seq random strided shared split \
	>"$T/famtest.out" 2>&1 || fail "famtest: $(tail -5 "$T/famtest.out")"
cat "$T/famtest.out"
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
ctl host status -j | jq -e '.counters.sigbus == 0 and .counters.fetch_errors == 0 and
	.counters.writeback_errors == 0' >/dev/null || fail "errors: $(ctl host status -j | jq -c .counters)"
pass "famtest -f over 4x the buffer on two memory nodes: every byte right; both served reads and writes ($wa and $wb bytes written)"

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
