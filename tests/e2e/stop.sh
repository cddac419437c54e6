#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# SIGTERM and SIGINT stop famd gracefully: exit 0 and the admin socket
# removed. Under systemd famd reports READY, RELOADING and STOPPING and
# prefixes its log lines with priorities.
. "$(dirname "$0")/lib.sh"
require_cmd socat

for sig in TERM INT; do
	start_famd m "$CONFDIR/famd-memory.conf"
	[ -S "$(sock m)" ] || fail "no socket while running"
	kill -"$sig" "$FAMD_PID"
	wait "$FAMD_PID"
	rc=$?
	[ "$rc" -eq 0 ] || fail "SIG$sig: exit $rc"
	[ ! -e "$(sock m)" ] || fail "SIG$sig: socket left behind"
	grep -q "stopping: SIG$sig" "$T/m.log" || fail "SIG$sig: not logged"
	pass "SIG$sig stops famd with status 0 and removes the socket"
done

# sd_notify: a datagram socket stands in for systemd's.
socat -u UNIX-RECV:"$T/notify.sock" OPEN:"$T/notify.txt",creat,append &
wait_until 5 test -S "$T/notify.sock" || fail "notify listener did not start"
NOTIFY_SOCKET=$T/notify.sock start_famd n "$CONFDIR/famd-memory.conf"
wait_until 5 grep -q READY=1 "$T/notify.txt" || fail "no READY=1"
kill -HUP "$FAMD_PID"
wait_until 5 grep -q RELOADING=1 "$T/notify.txt" || fail "no RELOADING=1"
grep -q MONOTONIC_USEC= "$T/notify.txt" || fail "RELOADING without MONOTONIC_USEC"
kill -TERM "$FAMD_PID"
wait "$FAMD_PID"
wait_until 5 grep -q STOPPING=1 "$T/notify.txt" || fail "no STOPPING=1"
grep -q '^<5>famd .* started as memory' "$T/n.log" ||
	fail "no <N> priority prefix under systemd: $(head -2 "$T/n.log")"
pass "sd_notify READY, RELOADING, STOPPING; <N> log prefixes"
