#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# fetch = adaptive: a program that reads and writes 8-byte words at random,
# one per 16 KiB on average, over three times the buffer (famtest sparse:
# every word verified, rewritten, verified again, and by a forked child)
# moves far fewer bytes than with whole chunks, with every byte right: a
# fault reads its grain (4 KiB of a 64 KiB chunk), the buffer counts only
# what is in place, a partial chunk's write-back writes only its grains.
# famctl regions shows the region's fetch size and density while it runs.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAMTEST=$top_builddir/tests/tools/famtest
start_memory mem
start_host hc "$(scaled 16M)" "$MEM_ADDR"
start_host ha "$(scaled 16M)" "$MEM_ADDR" -o host.fetch=adaptive

# moved NAME: the bytes the host famd moved to and from the memory node.
moved() {
	ctl "$1" status -j | jq -er '.counters | .ondemand_bytes + .background_read_bytes + .background_write_bytes'
}

FAM_SOCKET=$T/hc.session shim "$FAMTEST" -f -s "$(scaled 48M)" sparse \
	>"$T/chunk.out" 2>&1 || fail "famtest sparse, fetch = chunk: $(tail -5 "$T/chunk.out")"
cat "$T/chunk.out"

# the adaptive host's region listing, sampled while famtest runs
(
	while :; do
		ctl ha regions -j 2>/dev/null | jq -c '.[].fetch[]' >>"$T/listing"
		sleep 0.05
	done
) &
spid=$!
FAM_SOCKET=$T/ha.session shim "$FAMTEST" -f -s "$(scaled 48M)" sparse \
	>"$T/adaptive.out" 2>&1 || fail "famtest sparse, fetch = adaptive: $(tail -5 "$T/adaptive.out")"
kill "$spid"
wait "$spid" 2>/dev/null
cat "$T/adaptive.out"

st=$(ctl ha status -j)
echo "$st" | jq -e '.fetch.mode == "adaptive" and .fetch.partial_fetches > 0 and
	.fetch.grain_bytes == 4096 and .counters.sigbus == 0 and
	.counters.fetch_errors == 0 and .counters.writeback_errors == 0 and
	.counters.evictions_dirty > 0 and .buffer.used_bytes <= .buffer.size_bytes' >/dev/null ||
	fail "adaptive host: $(echo "$st" | jq -c '{fetch, buffer, counters}')"
[ "$(ctl hc status -j | jq -r .fetch.mode)" = chunk ] || fail "the other host is not fetch = chunk"
# (partial chunks leave the buffer before the fork at famtest's end: a
# sample after it shows none, so the count of partial reads is what says
# the region was read by grains)
jq -se 'any(.fetch_bytes == 4096 and .partial_fetches > 0 and .density_pct >= 0 and .density_pct < 50)' \
	"$T/listing" >/dev/null ||
	fail "famctl regions never showed a sparse region read by grains: $(tail -3 "$T/listing")"
mc=$(moved hc)
ma=$(moved ha)
[ "$mc" -gt 0 ] && [ "$ma" -gt 0 ] || fail "nothing moved: chunk $mc, adaptive $ma"
[ $((ma * 4)) -lt "$mc" ] ||
	fail "fetch = adaptive moved $((ma >> 20)) MiB, not a quarter of the $((mc >> 20)) MiB whole chunks moved"
pass "random words over 3x the buffer, every one right: $((mc >> 20)) MiB moved with whole chunks, $((ma >> 20)) MiB by grains ($(echo "$st" | jq .fetch.partial_fetches) partial reads, density $(jq -s 'map(.density_pct) | max' "$T/listing") % at most)"

# the same host serves the programs of the default suite's famtest right
FAM_SOCKET=$T/ha.session shim "$FAMTEST" -f -s "$(scaled 48M)" seq random \
	strided runs shared cow >"$T/rest.out" 2>&1 ||
	fail "famtest under fetch = adaptive: $(tail -5 "$T/rest.out")"
[ "$(counter ha sigbus)" = 0 ] || fail "SIGBUS under fetch = adaptive"
pass "famtest seq random strided runs shared cow under fetch = adaptive: every check"
