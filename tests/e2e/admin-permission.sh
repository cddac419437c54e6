#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Reading is for the admin socket's group; changing is for root (SO_PEERCRED).
. "$(dirname "$0")/lib.sh"
require_cmd setpriv jq
[ "$(id -u)" -eq 0 ] || skip "needs root to run famctl as another user"
getent passwd nobody >/dev/null && getent group nogroup >/dev/null ||
	skip "no user nobody or group nogroup"

as_nobody() {
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$FAMCTL" -s "$(sock m)" "$@"
}

conf=$T/famd.conf
printf '[famd]\nrole = memory\nadmin_group = nogroup\n' >"$conf"
start_famd m "$conf"
[ "$(stat -c '%a %G' "$(sock m)")" = "660 nogroup" ] ||
	fail "socket mode/group: $(stat -c '%a %G' "$(sock m)")"

as_nobody status -j | json '.role == "memory"' >/dev/null || fail "group member cannot read"
as_nobody log-level >/dev/null || fail "group member cannot read the log level"
pass "a member of admin_group reads status"

as_nobody stats-reset 2>"$T/err.txt"
[ $? -eq 77 ] || fail "non-root stats-reset: not exit 77"
grep -q "permission denied" "$T/err.txt" || fail "message: $(cat "$T/err.txt")"
as_nobody log-level debug 2>/dev/null
[ $? -eq 77 ] || fail "non-root log-level set: not exit 77"
as_nobody reload 2>/dev/null
[ $? -eq 77 ] || fail "non-root reload: not exit 77"
[ "$(ctl m status -j | json .admin.denied)" = 3 ] || fail "denials not counted"
ctl m stats-reset >/dev/null || fail "root cannot reset"
pass "only root changes famd; refusals exit 77 and are counted"

printf '[famd]\nrole = memory\nadmin_group = root\n' >"$conf"
ctl m reload >/dev/null || fail "reload"
[ "$(stat -c '%G' "$(sock m)")" = root ] || fail "admin_group not reloaded"
as_nobody status 2>"$T/err.txt"
[ $? -eq 77 ] || fail "outsider: not exit 77"
grep -q "permission denied on $(sock m)" "$T/err.txt" || fail "message: $(cat "$T/err.txt")"
pass "someone outside admin_group cannot connect (exit 77)"
