#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Who may use a host famd's session socket (issue 16): by default only
# famd's own user and the members of group famd (mode 0660, or 0600 with
# one log line when the machine has no such group); a user outside the
# group is refused by the kernel (EACCES), one in it runs a program;
# session_group names another group; a group that does not exist is a
# configuration error (exit 78, file:line).
. "$(dirname "$0")/lib.sh"
require_cmd setpriv python3
[ "$(id -u)" = 0 ] || skip "needs root (setpriv to another user)"
getent passwd nobody >/dev/null && getent group nogroup >/dev/null &&
	getent group daemon >/dev/null || skip "no user nobody or group nogroup or daemon"
FAMTEST=$top_builddir/tests/tools/famtest

# as USER GROUP CMD...: runs CMD as USER with GROUP as its only group.
as() {
	local user=$1 group=$2
	shift 2
	setpriv --reuid "$user" --regid "$group" --clear-groups "$@"
}
# $T/try-connect SOCKET: prints "connected" or the error connect(2) gave.
cat >"$T/try-connect" <<'PY'
#!/usr/bin/python3
import errno, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    print("connected")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
PY
chmod 755 "$T/try-connect"

start_memory mem

# ---- the default configuration
start_host host 8M "$MEM_ADDR"
mode=$(stat -c %a "$FAM_SOCKET")
if getent group famd >/dev/null; then
	[ "$mode" = 660 ] && [ "$(stat -c %G "$FAM_SOCKET")" = famd ] ||
		fail "default: mode $mode group $(stat -c %G "$FAM_SOCKET"), expected 660 famd"
	what="mode 0660, group famd"
else
	[ "$mode" = 600 ] || fail "default without a group famd: mode $mode, expected 600"
	grep -q "session socket $FAM_SOCKET: mode 0600, no group famd on this machine: only uid 0 may use fabric-attached memory. To let others in, create the group (addgroup --system famd)" \
		"$T/host.log" || fail "the fallback to 0600 is not logged: $(cat "$T/host.log")"
	[ "$(grep -c "no group famd" "$T/host.log")" = 1 ] || fail "the fallback is logged more than once"
	what="mode 0600 and one log line saying how to open it (no group famd here)"
fi
out=$(as nobody nogroup "$T/try-connect" "$FAM_SOCKET" 2>&1)
[ "$out" = EACCES ] || fail "an unprivileged user outside the group: $out, expected EACCES"
shim "$FAMTEST" -f -s 16M seq >"$T/root.out" 2>&1 || fail "famtest as famd's own user: $(cat "$T/root.out")"
pass "default session socket: $what; another user gets EACCES, famd's own user runs famtest"

# ---- session_group: members in, others out
start_host host2 8M "$MEM_ADDR" -o host.session_group=nogroup
[ "$(stat -c '%a %G' "$FAM_SOCKET")" = "660 nogroup" ] ||
	fail "session_group=nogroup: $(stat -c '%a %G' "$FAM_SOCKET")"
out=$(as nobody daemon "$T/try-connect" "$FAM_SOCKET" 2>&1)
[ "$out" = EACCES ] || fail "a user outside session_group: $out, expected EACCES"
out=$(as nobody nogroup "$T/try-connect" "$FAM_SOCKET" 2>&1)
[ "$out" = connected ] || fail "a member of session_group: $out"
as nobody nogroup env LD_PRELOAD="$SHIM" FAM_SOCKET="$FAM_SOCKET" "$FAMTEST" -f -s 16M seq random >"$T/member.out" 2>&1 ||
	fail "famtest as a member of session_group: $(cat "$T/member.out")"
pass "session_group = nogroup: mode 0660; a member runs famtest (16M through an 8M buffer), a non-member gets EACCES"

# ---- session_mode = 0666: every local user (the old default, now explicit)
start_host host3 8M "$MEM_ADDR" -o host.session_mode=0666
[ "$(stat -c %a "$FAM_SOCKET")" = 666 ] || fail "session_mode=0666: $(stat -c %a "$FAM_SOCKET")"
out=$(as nobody daemon "$T/try-connect" "$FAM_SOCKET" 2>&1)
[ "$out" = connected ] || fail "session_mode=0666: $out"
pass "session_mode = 0666 lets every local user in"

# ---- a configured group that does not exist
cat >"$T/badgroup.conf" <<CONF
[famd]
role = host
[host]
memory_nodes = $MEM_ADDR
session_group = famd-no-such-group
CONF
"$FAMD" -t -c "$T/badgroup.conf" 2>"$T/badgroup.err"
rc=$?
[ "$rc" = 78 ] || fail "session_group of no group: exit $rc, expected 78"
grep -q "^famd: $T/badgroup.conf:5: \[host\] session_group = famd-no-such-group: no such group on this machine" \
	"$T/badgroup.err" || fail "unclear refusal: $(cat "$T/badgroup.err")"
"$FAMD" -t -c "$T/badgroup.conf" -o host.session_group=famd-no-such-group-2 2>"$T/badgroup2.err"
rc=$?
[ "$rc" = 78 ] || fail "session_group of no group on the command line: exit $rc, expected 78"
grep -q "session_group = famd-no-such-group-2 (from the command line): no such group" "$T/badgroup2.err" ||
	fail "unclear refusal: $(cat "$T/badgroup2.err")"
pass "a session_group that does not exist: exit 78 with file:line"
