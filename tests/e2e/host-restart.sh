#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A restart of the host famd loses no program. famtest rewrites and
# verifies a block three times the host's buffer, in passes; the host famd
# is killed (SIGKILL) in the middle of a pass and started again by hand,
# then stopped cleanly (SIGTERM) and started again: the program only
# stalls meanwhile (no pass ends while famd is down), the new famd shows
# its session, and every byte of every pass is right. A program started
# while famd is down gets libc memory, as before. A restart state that
# does not check is refused with a log line, and a program whose session
# it held gets SIGBUS, never wrong data.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAMTEST=$top_builddir/tests/tools/famtest
BUF=$(scaled 32M)
start_memory mem
start_host host "$BUF" "$MEM_ADDR"
STATE=$T/host.session.state

# (not through shim(): $! must be famtest's pid, for SIGUSR1)
LD_PRELOAD=$SHIM "$FAMTEST" -f -s "$(scaled 96M)" passes >"$T/p.out" 2>"$T/p.err" &
ft=$!
npasses() { grep -c '^pass ' "$T/p.out"; }
passes_past() { [ "$(npasses)" -ge "$1" ] || ! kill -0 "$ft"; }
wait_until 60 passes_past 1 && kill -0 "$ft" || fail "no pass: $(tail -n 5 "$T/p.out" "$T/p.err")"
[ -f "$STATE" ] || fail "no restart state at $STATE"
[ "$(stat -c %a "$STATE")" = 600 ] || fail "the restart state is mode $(stat -c %a "$STATE"), not 600"
# A snapshot, then a journal line per change (jq -s reads them all).
jq -s -e '[.[0].sessions[].regions[], (.[1:][] | .region // empty)] | length >= 1' \
	"$STATE" >/dev/null || fail "the restart state does not name the program's region: $(cat "$STATE")"
pass "the restart state names the program's session (mode 600)"

# down DESCRIPTION: the program stalls while famd is down: no pass ends
# (each needs chunks the buffer cannot hold) and the program lives.
down() {
	local n
	n=$(npasses)
	sleep 1
	kill -0 "$ft" || fail "famtest died while famd was down ($1): $(tail -n 5 "$T/p.out" "$T/p.err")"
	[ "$(npasses)" = "$n" ] || fail "a pass ended while famd was down ($1)"
}
# back N: the new famd took the session back (the Nth time) and passes go on.
came_back() { [ "$(grep -a -c "the host famd came back after" "$T/p.err")" -ge "$1" ]; }
back() {
	local n
	wait_until 30 came_back "$1" ||
		fail "famtest was not taken back: $(tail -5 "$T/p.err"; tail -5 "$T/host.log")"
	ctl host status -j | jq -e '.programs.sessions == 1 and .programs.regions >= 1 and
		.restart.sessions_reclaimed == 1 and .restart.sessions_waiting == 0' >/dev/null ||
		fail "famctl status of the new famd: $(ctl host status -j | jq -c '{programs, restart}')"
	ctl host regions -j | jq -e ".[0].pid == $ft" >/dev/null ||
		fail "famctl regions: $(ctl host regions -j)"
	n=$(npasses)
	wait_until 120 passes_past $((n + 2)) && kill -0 "$ft" ||
		fail "famtest did not go on after the restart: $(tail -n 5 "$T/p.out" "$T/p.err")"
	counter_is host sigbus 0 || fail "SIGBUS: $(ctl host status -j | jq -c .counters)"
}

# SIGKILL in the middle of a pass, started again by hand.
sleep 0.3
kill -KILL "$HOST_PID"
wait "$HOST_PID" 2>/dev/null
down "killed"
start_host host "$BUF" "$MEM_ADDR"
grep -q "restart state $STATE: 1 sessions" "$T/host.log" ||
	fail "the new famd did not read the restart state: $(tail -5 "$T/host.log")"
back 1
pass "host famd killed (SIGKILL) mid-pass and started again: famtest stalled, was taken back, and goes on ($(npasses) passes)"

# A clean restart: SIGTERM hands the session over.
stop_famd "$HOST_PID" || fail "the host famd did not stop cleanly"
grep -q "1 sessions kept for the next host famd" "$T/host.log" ||
	fail "no hand-over at SIGTERM: $(tail -5 "$T/host.log")"
down "stopped"
# A program started while famd is down: libc memory, as today.
shim "$FAMTEST" -l -s "$(scaled 8M)" seq >"$T/libc.out" 2>&1 ||
	fail "famtest while famd is down: $(cat "$T/libc.out")"
start_host host "$BUF" "$MEM_ADDR"
back 2
kill -USR1 "$ft"
wait "$ft" || fail "famtest: $(tail -n 5 "$T/p.out" "$T/p.err")"
grep -q '^ok - passes: ' "$T/p.out" || fail "famtest: $(tail -3 "$T/p.out")"
pass "host famd stopped (SIGTERM) and started again: famtest taken back; $(tail -1 "$T/p.out"); a program started meanwhile got libc memory"

# A restart state that does not check is refused, never trusted: the
# program whose session it held gets SIGBUS in every thread (famlost
# checks every word it reads before), and says why.
FAM_RESTART_WAIT=20 shim "$top_builddir/tests/tools/famlost" -s "$(scaled 64M)" -t 4 -w 30 \
	>"$T/lost.out" 2>"$T/lost.err" &
lost=$!
wait_until 30 grep -q '^ready' "$T/lost.out" ||
	fail "famlost never got ready: $(cat "$T/lost.out" "$T/lost.err")"
kill -KILL "$HOST_PID"
wait "$HOST_PID" 2>/dev/null
sed -i '1s/"chunk":/"chunk":7/' "$STATE"
start_host host "$BUF" "$MEM_ADDR"
grep -q "restart state $STATE refused" "$T/host.log" ||
	fail "no refusal in the log: $(tail -5 "$T/host.log")"
wait "$lost" || fail "famlost: $(cat "$T/lost.out" "$T/lost.err")"
grep -q "no host famd took this program's fabric-attached memory back within .*: it does not know this program's session" "$T/lost.err" ||
	fail "famlost does not say why: $(cat "$T/lost.err")"
[ -f "$STATE.refused" ] || fail "the refused state was not kept aside"
pass "a restart state that does not check is refused with a log line: its program gets SIGBUS, no wrong word"

# fetch = adaptive: partial chunks (the grains a sparse program touched,
# perhaps written: their only copy) outlive a restart. famtest sparse
# writes random words, one per 16 KiB, over three times the buffer,
# verifies and rewrites them, and holds; the host famd is killed and
# started again (with OPTS...): the partial chunks are taken back dirty,
# and every word is right, in famtest and in the child it forks then.
# Sets partial to the partial chunks taken back.
sparse_across_restart() {
	fresh "$T/sp.out" "$T/sp.err"
	LD_PRELOAD=$SHIM "$FAMTEST" -f -w -s "$(scaled 96M)" sparse >"$T/sp.out" 2>"$T/sp.err" &
	sp=$!
	wait_until 60 grep -q '^holding' "$T/sp.out" || fail "famtest sparse: $(cat "$T/sp.out" "$T/sp.err" | tail -n 3)"
	kill -KILL "$HOST_PID"
	wait "$HOST_PID" 2>/dev/null
	start_host ha "$BUF" "$MEM_ADDR" "$@"
	# (famtest goes on once taken back: a block it makes before then
	# would be libc's, and -f fails on it)
	wait_until 60 sh -c "$FAMCTL -s '$(sock ha)' status -j | jq -e '.restart.sessions_reclaimed >= 1' >/dev/null" ||
		fail "famtest sparse not taken back ($*): $(ctl ha status -j | jq -c .restart)"
	kill -USR1 "$sp"
	wait "$sp" || fail "famtest sparse after a restart ($*): $(cat "$T/sp.out" "$T/sp.err" | tail -n 5)"
	partial=$(ctl ha status -j | jq '.restart.chunks_partial')
	[ "$partial" -gt 0 ] || fail "no partial chunk taken back ($*): $(ctl ha status -j | jq -c .restart)"
}
start_host ha "$BUF" "$MEM_ADDR" -o host.fetch=adaptive
sparse_across_restart -o host.fetch=adaptive
pass "fetch = adaptive: host famd killed while a sparse writer held its data and started again: $partial partial chunks taken back dirty, every word right"

# The same, started again with fetch = chunk (the default): the partial
# chunks the famd before left are not punched (their grains hold the only
# copy of famtest's writes); this famd keeps fetch = adaptive, and says so.
sparse_across_restart
grep -q "fetch = adaptive kept" "$T/ha.log" || fail "no word of fetch = adaptive kept: $(tail -3 "$T/ha.log")"
pass "fetch = adaptive, then chunk: host famd killed while a sparse writer held its data and started with fetch = chunk: adaptive kept, $partial partial chunks taken back dirty, every word right"
