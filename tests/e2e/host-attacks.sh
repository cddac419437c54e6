#!/bin/bash
# Attacks a local program makes on the host famd's own resources, each
# refused or contained: no other user affected, bounded CPU and log, no
# wrong byte (issue 16). famsess (tests/tools) plays the program.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAMSESS=$top_builddir/tests/tools/famsess
start_memory mem
start_host host 8M "$MEM_ADDR"
fs() { "$FAMSESS" "$FAM_SOCKET" "$@"; }
# disconnects NAME: how often host NAME lost a memory node.
disconnects() {
	ctl "$1" status -j | jq -er '[.peers[].disconnects] | add'
}

# ---- a program shrinks its arena under famd's write-back
fs -s 32 arena-shrink >"$T/shrink.out" 2>&1
rc=$?
cat "$T/shrink.out"
kill -0 "$HOST_PID" 2>/dev/null || fail "the host famd died of the shrunk arena"
[ "$(disconnects host)" = 0 ] ||
	fail "the shared memory-node connection was reset $(disconnects host) times by one program's arena"
[ "$(counter host writeback_errors)" = 0 ] ||
	fail "write-back errors: $(counter host writeback_errors)"
[ "$rc" = 0 ] || fail "arena-shrink"
pass "an arena cannot be shrunk or sealed by its program; write-backs and the memory-node connection unharmed"
