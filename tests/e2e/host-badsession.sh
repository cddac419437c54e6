#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Every malformed or out-of-place message on the session socket gets an
# error or a dropped session: a message cut short, a wrong magic or
# version, an unknown type, a huge length, a path with a NUL, requests
# before the userfaultfd, too many descriptors are dropped, counted in
# bad_messages and logged; a second UFFD, a descriptor where none belongs,
# FREE of an unknown handle, STAT of an address in no region, MAP of an
# unknown arena or at a bad address are answered with an error and the
# session goes on. Descriptors famd was given are never kept. Afterwards
# the host famd still serves a normal program.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAMSESS=$top_builddir/tests/tools/famsess
start_memory mem
start_host host 8M "$MEM_ADDR"
fs() { "$FAMSESS" "$FAM_SOCKET" "$@"; }

fs -l >"$T/attacks" || fail "famsess -l"
bad=0
for attack in $(awk '$2 == "drop" { print $1 }' "$T/attacks"); do
	fs "$attack" >"$T/a.txt" 2>&1 || fail "$(cat "$T/a.txt")"
	cat "$T/a.txt"
	# requests-before-uffd sends three messages on three sessions.
	[ "$attack" = requests-before-uffd ] && bad=$((bad + 3)) || bad=$((bad + 1))
	wait_counter host bad_messages "$bad"
	wait_until 5 sh -c "[ \"\$(\"$FAMCTL\" -s \"$(sock host)\" status -j | jq .programs.sessions)\" = 0 ]" ||
		fail "$attack: a dropped session is still listed"
done
pass "$bad malformed messages dropped, each counted in bad_messages"

for attack in $(awk '$2 == "answer" { print $1 }' "$T/attacks"); do
	fs "$attack" >"$T/a.txt" 2>&1 || fail "$(cat "$T/a.txt")"
	cat "$T/a.txt"
done
counter_is host bad_messages "$bad" || fail "an answered request was counted as malformed: $(counter host bad_messages)"
pass "requests out of place or naming nothing are answered with an error; the session goes on"

grep -q "session pid [0-9]*: malformed message (type [0-9]*); ending the session" "$T/host.log" &&
	grep -q "session pid [0-9]*: closed in the middle of a message (32 bytes of it came)" "$T/host.log" &&
	grep -q "session pid [0-9]*: too many descriptors on one message" "$T/host.log" ||
	fail "malformed messages not logged"
wait_until 5 sh -c "[ \"\$(\"$FAMCTL\" -s \"$(sock host)\" status -j | jq '.programs.sessions + .programs.regions')\" = 0 ]" ||
	fail "sessions left: $(ctl host status -j | jq -c .programs)"
wait_until 5 counter_is mem regions 0 || fail "regions left on the memory node"
shim "$top_builddir/tests/tools/famtest" -f -s 32M seq random shared >"$T/famtest.out" 2>&1 ||
	fail "famtest after the attacks: $(cat "$T/famtest.out")"
pass "the host famd still serves a normal program (famtest -f over 4x the buffer)"
