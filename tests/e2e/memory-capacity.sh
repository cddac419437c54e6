#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Regions are page-rounded and count against capacity; a request beyond it
# is refused with ENOSPC, and freeing makes room again.
. "$(dirname "$0")/lib.sh"
require_cmd jq

conf=$T/famd.conf
printf '[famd]\nrole = memory\n[memory]\ncapacity = 4M\npreload_dir = %s\nsession_grace = 0\n' "$T" >"$conf"
start_famd m "$conf"
addr=$(mem_addr m)
fc() { "$FAMCLIENT" "$addr" "$@"; }

hold_client "$T/a.txt" "$addr" create 3M expect ENOSPC create 2M expect ENOSPC create 1T \
	expect ENOSPC create 0xffffffffffffffff create 1 hold 30
holder=$HOLD_PID
grep -q "region id=1 size=3145728" "$T/a.txt" || fail "3M region: $(cat "$T/a.txt")"
grep -q "region id=2 size=4096 flags=0 length=1$" "$T/a.txt" ||
	fail "1 byte is not one page: $(cat "$T/a.txt")"
[ "$(grep -c "ENOSPC as expected" "$T/a.txt")" -eq 3 ] || fail "ENOSPC: $(cat "$T/a.txt")"
[ "$(counter m bytes_reserved)" -eq $((3145728 + 4096)) ] || fail "bytes_reserved $(counter m bytes_reserved)"
[ "$(counter m create_errors)" -eq 3 ] || fail "create_errors $(counter m create_errors)"
pass "3 MiB fits in 4 MiB, 2 MiB more does not (ENOSPC), sizes are page-rounded"

# A second client meets the same limit; after the first frees, it fits.
fc expect ENOSPC create 1M >/dev/null || fail "second client got room that is not there"
kill -TERM "$holder"
wait "$holder"
wait_counter m regions 0
wait_counter m bytes_reserved 0
fc create 2M create 2M expect ENOSPC create 4K free 3 free 4 >"$T/b.txt" 2>&1 ||
	fail "after the free: $(cat "$T/b.txt")"
pass "regions of a closed session are released and their room reused"
