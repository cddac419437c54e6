#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A second famd on a busy admin socket refuses to start with a clear
# message and does not steal the live one's socket.
. "$(dirname "$0")/lib.sh"
require_cmd jq

start_famd first "$CONFDIR/famd-memory.conf"
first=$FAMD_PID
inode=$(stat -c %i "$(sock first)")

"$FAMD" -f -c "$CONFDIR/famd-dpu.conf" -o famd.admin_socket="$(sock first)" \
	2>"$T/second.log"
rc=$?
[ "$rc" -ne 0 ] || fail "second famd started"
grep -q "another famd with pid $first is running on $(sock first)" "$T/second.log" ||
	fail "unclear message: $(cat "$T/second.log")"
[ "$(stat -c %i "$(sock first)")" = "$inode" ] || fail "socket was replaced"
[ "$(ctl first status -j | json .role)" = memory ] || fail "first famd no longer answers"
pass "second famd refused; the first keeps its socket"

# A stale socket file (famd killed) does not stop a new famd.
kill -KILL "$first"
wait "$first" 2>/dev/null
[ -S "$(sock first)" ] || fail "expected a stale socket after SIGKILL"
start_famd first "$CONFDIR/famd-dpu.conf"
[ "$(ctl first status -j | json .role)" = dpu ] || fail "restart over a stale socket"
pass "a stale socket of a killed famd is replaced"
