#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# SIGHUP applies reloadable keys; an invalid file keeps the running
# configuration and logs why; keys that need a restart are kept with a warning.
. "$(dirname "$0")/lib.sh"
require_cmd jq

conf=$T/famd.conf
printf '[famd]\nrole = memory\nlog_level = info\nadmin_max_clients = 8\n' >"$conf"
start_famd m "$conf"
pid=$FAMD_PID

status() { ctl m status -j; }
reloads_are() { [ "$(status | json .reloads)" = "$1" ]; }
failures_are() { [ "$(status | json .reload_failures)" = "$1" ]; }

printf '[famd]\nrole = memory\nlog_level = debug\nadmin_max_clients = 9\n' >"$conf"
kill -HUP "$pid"
wait_until 10 reloads_are 1 || fail "SIGHUP did not reload"
[ "$(status | json .log_level)" = debug ] || fail "log_level not applied"
[ "$(ctl m config -j | json .keys.famd.admin_max_clients.value)" = 9 ] ||
	fail "admin_max_clients not applied"
pass "SIGHUP applies reloadable keys"

printf '[famd]\nrole = memory\nlog_level = loud\n' >"$conf"
kill -HUP "$pid"
wait_until 10 failures_are 1 || fail "bad file: no reload failure counted"
grep -q "$conf:3: \[famd\] log_level: 'loud'" "$T/m.log" || fail "log does not say why"
grep -q "keeping the running one" "$T/m.log" || fail "log does not say the old config stays"
[ "$(status | json .log_level)" = debug ] || fail "bad file changed the level"
[ "$(status | json .reloads)" = 1 ] || fail "bad file counted as a reload"
pass "an invalid file keeps the running configuration"

ctl m reload 2>"$T/err.txt"
[ $? -eq 1 ] || fail "famctl reload with a bad file did not exit 1"
grep -q "not reloaded" "$T/err.txt" || fail "famctl reload: $(cat "$T/err.txt")"
pass "famctl reload reports the failure"

# An error that quotes bytes that are not UTF-8 (an unknown key): famd
# answers it (it used to abort building the answer) and serves on.
printf '[famd]\nrole = memory\nlog_\377level = info\n' >"$conf"
ctl m reload 2>"$T/err.txt"
[ $? -eq 1 ] || fail "reload of a key that is not UTF-8 did not exit 1"
grep -q "unknown key 'log_?level'" "$T/err.txt" || fail "famctl reload: $(cat "$T/err.txt")"
kill -0 "$pid" 2>/dev/null || fail "famd died answering the reload"
status >/dev/null || fail "famd does not answer after the reload"
pass "a reload error quoting bytes that are not UTF-8 is answered"

printf '[famd]\nrole = dpu\nlog_level = warning\n' >"$conf"
ctl m reload >/dev/null || fail "famctl reload of a good file failed"
[ "$(status | json .role)" = memory ] || fail "role changed without a restart"
[ "$(status | json .log_level)" = warning ] || fail "log_level not applied"
grep -q "\[famd\] role changed; it takes effect only when famd restarts" "$T/m.log" ||
	fail "no warning for a key that needs a restart"
pass "keys that need a restart keep their value, with a warning"

# A famd that detaches (no -f), started with a relative -c, still finds its
# file on reload (it changed to / when it detached).
mkdir -p "$T/etc"
printf '[famd]\nrole = memory\nlog_level = info\n' >"$T/etc/rel.conf"
(cd "$T/etc" && "$FAMD" -c rel.conf -o famd.admin_socket="$(sock rel)" \
	-o memory.listen=127.0.0.1:0) || fail "a detaching famd did not start"
wait_until 10 ctl rel status || fail "the detached famd does not answer"
FAMD_PIDS+=("$(ctl rel status -j | json .pid)")
[ "$(ctl rel status -j | json .config_file)" = "$T/etc/rel.conf" ] ||
	fail "config_file is $(ctl rel status -j | json .config_file)"
printf '[famd]\nrole = memory\nlog_level = debug\n' >"$T/etc/rel.conf"
ctl rel reload >/dev/null || fail "reload of a relative -c after detaching"
[ "$(ctl rel status -j | json .log_level)" = debug ] || fail "the reload did not apply"
pass "a detached famd started with a relative -c reloads its file"
