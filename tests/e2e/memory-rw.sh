#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A client writes a pattern to a region of a memory famd and reads it back;
# the counters, the peers list and the regions command show what happened;
# stats.reset zeroes the counters.
. "$(dirname "$0")/lib.sh"
require_cmd jq

conf=$T/famd.conf
printf '[famd]\nrole = memory\nnode_name = mem0\n[memory]\ncapacity = 64M\npreload_dir = %s\nsession_grace = 0\n' \
	"$T" >"$conf"
start_famd m "$conf"
addr=$(mem_addr m) || fail "no listen address in status"
[ "${addr%:*}" = 127.0.0.1 ] && [ "${addr##*:}" -gt 0 ] || fail "listen address $addr"

"$FAMCLIENT" -n h1 "$addr" rw 4M 64K 8 >"$T/rw.txt" || fail "round trip: $(cat "$T/rw.txt")"
grep -q "^hello session=[0-9a-f]\{16\} instance=[0-9a-f]\{16\} node=mem0$" "$T/rw.txt" ||
	fail "hello line: $(head -1 "$T/rw.txt")"
grep -q "verified" "$T/rw.txt" || fail "not verified: $(cat "$T/rw.txt")"
wait_counter m sessions_connected 0
ctl m status -j >"$T/st.json"
jq -e '.counters | .writes == 64 and .reads == 64 and .bytes_written == 4194304
	and .bytes_read == 4194304 and .rw_errors == 0 and .regions == 0
	and .bytes_reserved == 0 and .regions_created == 1 and .regions_freed == 1' \
	"$T/st.json" >/dev/null || fail "counters: $(jq -c .counters "$T/st.json")"
jq -e '.memory.capacity == 67108864 and .memory.transport == "tcp"' "$T/st.json" \
	>/dev/null || fail "memory section: $(jq -c .memory "$T/st.json")"
pass "4 MiB written in 64 KiB chunks and read back; counters match"

# Many chunks in flight at the largest size a message allows.
"$FAMCLIENT" -q "$addr" rw 16M 2M 8 >"$T/rw2.txt" || fail "2 MiB chunks: $(cat "$T/rw2.txt")"
pass "2 MiB chunks, 8 in flight"

# A session that holds a region shows in peers and regions.
hold_client "$T/hold.txt" -n h2 "$addr" create 1M name=buf write 0 1M 3 hold 30 read 0 1M 3
holder=$HOLD_PID
ctl m call regions >"$T/regions.json" || fail "regions command"
jq -e 'length == 1 and .[0].name == "buf" and .[0].size == 1048576 and .[0].node == "h2"
	and .[0].flags == "-" and .[0].users == 1 and .[0].bytes_written == 1048576' \
	"$T/regions.json" >/dev/null || fail "regions: $(jq -c . "$T/regions.json")"
ctl m regions | grep -Eq "^3 +1.0 MiB \(1048576\) +1048576 +- +buf +- +h2 " ||
	fail "famctl regions: $(ctl m regions)"
ctl m status -j >"$T/st.json"
jq -e '.peers | length == 1 and .[0].node == "h2" and .[0].state == "connected"
	and .[0].regions == 1 and .[0].bytes == 1048576 and (.[0].address | startswith("127.0.0.1:"))' \
	"$T/st.json" >/dev/null || fail "peers: $(jq -c .peers "$T/st.json")"
ctl m status | grep -q "h2 *127.0.0.1:[0-9]* *connected" || fail "human peers table: $(ctl m status)"
kill -USR1 "$holder"
wait "$holder" || fail "holder failed after the hold: $(cat "$T/hold.txt")"
pass "a held region shows in regions and its session in peers"

# STATS over the wire answers the same counters.
"$FAMCLIENT" "$addr" stats >"$T/stats.txt" || fail "stats request"
sed -n 2p "$T/stats.txt" | jq -e '.reads >= 64 and .stats_requests == 0' >/dev/null ||
	fail "wire stats: $(cat "$T/stats.txt")"
pass "STATS request answers the counters as JSON"

ctl m stats-reset >/dev/null || fail "stats reset"
wait_counter m sessions_connected 0
ctl m status -j | jq -e '.counters | .reads == 0 and .writes == 0 and .bytes_read == 0
	and .regions_created == 0' >/dev/null || fail "stats.reset left counters"
pass "stats.reset zeroes the counters"

stop_famd "$FAMD_PID" || fail "famd did not stop cleanly"
grep -q "memory: stopped" "$T/m.log" || fail "no stop line"
pass "memory famd stops cleanly"
