#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Sessions: a host that disconnects loses its regions after session_grace,
# unless they are persistent; one that reconnects with its token within the
# grace gets them back; a resumed session moves to the newest connection.
. "$(dirname "$0")/lib.sh"
require_cmd jq

conf=$T/famd.conf
setconf() {
	printf '[famd]\nrole = memory\n[memory]\ncapacity = 64M\npreload_dir = %s\nsession_grace = %s\n' \
		"$T" "$1" >"$conf"
}
setconf 0
start_famd m "$conf"
addr=$(mem_addr m)
fc() { "$FAMCLIENT" "$addr" "$@"; }
token() { sed -n 's/^hello session=\([0-9a-f]*\) .*/\1/p' "$1"; }
instance() { sed -n 's/^hello .*instance=\([0-9a-f]*\) .*/\1/p' "$1"; }
region() { sed -n 's/^region id=\([0-9]*\) .*/\1/p' "$1" | sed -n "${2:-1}p"; }

# Grace 0: a session's regions go when it disconnects; persistent ones stay.
fc -n h1 create 1M write 0 1M 9 create 2M name=keep persistent write 0 2M 4 \
	create 1M name=spare persistent expect EINVAL create 1M persistent >"$T/a.txt" 2>&1 ||
	fail "first session: $(cat "$T/a.txt")"
wait_counter m sessions_ended 1
wait_counter m regions 2
ctl m call regions | jq -e '.[0].name == "keep" and .[0].state == "kept" and .[0].users == 0
	and .[0].flags == "persistent" and .[0].node == "h1"' >/dev/null ||
	fail "persistent region: $(ctl m call regions)"
grep -q "session 1 of node h1 ended (disconnected): 1 region freed, 2 kept" "$T/m.log" ||
	fail "session end not logged"
pass "with session_grace 0 a session's regions are freed when it disconnects; persistent ones (named) are kept"

spare=$(region "$T/a.txt" 3)
ctl m call region.free "{\"id\": $spare}" >/dev/null || fail "region.free"
ctl m call region.free "{\"id\": $spare}" 2>/dev/null && fail "freed twice"
wait_counter m regions 1
pass "the operator frees a kept region with region.free"

# The kept region is taken over by name, with its data.
fc -n h2 create 2M name=keep read 0 2M 4 free >"$T/b.txt" 2>&1 || fail "reopen: $(cat "$T/b.txt")"
[ "$(region "$T/b.txt")" = "$(region "$T/a.txt" 2)" ] || fail "reopened another region"
wait_counter m regions 0
pass "a kept persistent region is reopened by name with its data, then freed"

# Within the grace a reconnecting host resumes its session.
setconf 30s
ctl m reload >/dev/null || fail "reload"
fc -n h3 create 1M write 0 1M 6 >"$T/c.txt" 2>&1 || fail "third session: $(cat "$T/c.txt")"
wait_counter m sessions_detached 1
counter_is m regions 1 || fail "region freed within the grace"
ctl m status -j | jq -e '.peers[0].state == "detached" and .peers[0].node == "h3"' >/dev/null ||
	fail "detached session not in peers: $(ctl m status -j | jq -c .peers)"
fc -n h3 -r "$(token "$T/c.txt")" use "$(region "$T/c.txt")" 1M read 0 1M 6 >"$T/d.txt" 2>&1 ||
	fail "resume: $(cat "$T/d.txt")"
[ "$(token "$T/d.txt")" = "$(token "$T/c.txt")" ] || fail "resume got a new session"
[ "$(instance "$T/d.txt")" = "$(instance "$T/c.txt")" ] || fail "instance changed"
[ "$(counter m sessions_resumed)" -eq 1 ] || fail "resume not counted"
pass "a host reconnecting within session_grace resumes its session and reads its data"

# Another node cannot use the token; an unknown token starts a new session.
fc -n intruder -r "$(token "$T/c.txt")" use "$(region "$T/c.txt")" 1M expect ENOENT read 0 4096 6 \
	>"$T/e.txt" 2>&1 || fail "intruder: $(cat "$T/e.txt")"
[ "$(token "$T/e.txt")" != "$(token "$T/c.txt")" ] || fail "another node took the session"
pass "a session token presented by another node does not give its regions"

# A session resumed while its old connection lives moves to the new one.
hold_client "$T/f.txt" "$addr" -n h3 -r "$(token "$T/c.txt")" hold 30
old=$HOLD_PID
fc -n h3 -r "$(token "$T/c.txt")" use "$(region "$T/c.txt")" 1M read 0 1M 6 >"$T/g.txt" 2>&1 ||
	fail "takeover: $(cat "$T/g.txt")"
wait "$old" && fail "the old connection was not closed"
grep -q "connection closed" "$T/f.txt" || fail "old client: $(cat "$T/f.txt")"
grep -q "session [0-9]* of node h3 moves from" "$T/m.log" || fail "move not logged"
pass "a session resumed from a new connection leaves the old one closed"

# After the grace the session ends and its regions are gone.
setconf 300ms
ctl m reload >/dev/null || fail "reload"
fc -n h4 create 1M >"$T/h.txt" 2>&1 || fail "fourth session: $(cat "$T/h.txt")"
wait_until 10 grep -q "of node h4 ended (no reconnection within session_grace)" "$T/m.log" ||
	fail "grace did not expire"
ctl m call regions | jq -e "map(select(.id == $(region "$T/h.txt"))) | length == 0" >/dev/null ||
	fail "region of an expired session kept: $(ctl m call regions)"
fc -n h4 -r "$(token "$T/h.txt")" use "$(region "$T/h.txt")" 1M expect ENOENT read 0 4096 0 \
	>"$T/i.txt" 2>&1 || fail "late resume: $(cat "$T/i.txt")"
[ "$(token "$T/i.txt")" != "$(token "$T/h.txt")" ] || fail "an expired session was resumed"
pass "after session_grace the session ends, its regions are freed, and its token is unknown"

# A restart is a new instance: the host can tell its regions are gone.
stop_famd "$FAMD_PID"
start_famd m "$conf"
addr=$(mem_addr m)
fc -n h4 -r "$(token "$T/h.txt")" stats >"$T/j.txt" 2>&1 || fail "after restart: $(cat "$T/j.txt")"
[ "$(instance "$T/j.txt")" != "$(instance "$T/h.txt")" ] || fail "same instance after a restart"
pass "a restarted memory famd has a new instance"
