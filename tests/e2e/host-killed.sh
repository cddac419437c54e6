#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# When the host famd dies under a running program and no host famd comes
# back within FAM_RESTART_WAIT (host-restart.sh has one that does), the
# program's threads that touch fabric-attached memory get SIGBUS - never
# wrong data, never a hang - and the program goes on; a new host famd
# serves new programs.
. "$(dirname "$0")/lib.sh"
require_cmd jq

start_memory mem
start_host host "$(scaled 64M)" "$MEM_ADDR"
FAM_RESTART_WAIT=2 shim "$top_builddir/tests/tools/famlost" -s "$(scaled 256M)" -t 4 -w 30 \
	>"$T/lost.out" 2>"$T/lost.err" &
lost=$!
wait_until 30 grep -q '^ready' "$T/lost.out" ||
	fail "famlost never got ready: $(cat "$T/lost.out" "$T/lost.err")"
kill -KILL "$HOST_PID"
wait "$HOST_PID" 2>/dev/null
wait "$lost"
rc=$?
cat "$T/lost.out"
[ "$rc" = 0 ] || fail "famlost exit $rc: $(cat "$T/lost.out" "$T/lost.err")"
grep -q "the host famd closed the session: 1 region ($(mib 256M) MiB) of fabric-attached memory lost" \
	"$T/lost.err" || fail "no loss message: $(cat "$T/lost.err")"
grep -q "no host famd took this program's fabric-attached memory back within 2 s" \
	"$T/lost.err" || fail "no word of the wait for famd: $(cat "$T/lost.err")"
pass "host famd killed: SIGBUS in every reading thread, no wrong word, the program goes on"

# The memory node frees the dead host's regions once its grace is over,
# and a new host famd serves new programs.
start_host host2 "$(scaled 64M)" "$MEM_ADDR"
shim "$top_builddir/tests/tools/famtest" -f -s "$(scaled 128M)" seq random >"$T/after.out" 2>&1 ||
	fail "famtest after the restart: $(cat "$T/after.out")"
pass "a restarted host famd serves new programs"
