#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Each role starts, answers famctl status (human and JSON) and stops cleanly.
. "$(dirname "$0")/lib.sh"
require_cmd jq

# Sockets and ports of each role's own, so tests can run side by side.
declare -A opts=(
	[memory]=""
	[dpu]="-o dpu.listen=127.0.0.1:0"
	[host]="-o host.session_socket=$T/session.sock"
)
for role in memory dpu host; do
	# shellcheck disable=SC2086
	start_famd "$role" "$CONFDIR/famd-$role.conf" ${opts[$role]}
	pid=$FAMD_PID
	ctl "$role" status >"$T/$role.txt" || fail "famctl status ($role)"
	grep -Eq "^role +$role\$" "$T/$role.txt" ||
		fail "human status lacks the role: $(cat "$T/$role.txt")"
	grep -Eq "^uptime +[0-9]" "$T/$role.txt" || fail "human status lacks uptime"
	ctl "$role" status --json >"$T/$role.json" || fail "famctl status --json"
	[ "$(json .role <"$T/$role.json")" = "$role" ] || fail "JSON role is not $role"
	json '.uptime >= 0' <"$T/$role.json" >/dev/null || fail "JSON has no uptime"
	json '.pid' <"$T/$role.json" | grep -qx "$pid" || fail "JSON pid is not famd's"
	json '.counters | type == "object"' <"$T/$role.json" >/dev/null ||
		fail "no counters object"
	ctl "$role" -j version | json .famd >/dev/null || fail "version"
	ctl "$role" commands --json | json '.[] | select(.name == "status")' >/dev/null ||
		fail "list-commands lacks status"
	ctl "$role" config -j | json ".keys.famd.role.text == \"$role\"" >/dev/null ||
		fail "config.show does not show the role"
	stop_famd "$pid" || fail "$role did not stop with status 0"
	pass "$role: status, JSON status, version, commands, config, stop"
done

# famctl against nothing: exit 69 and the socket's name.
"$FAMCTL" -s "$T/nobody.sock" status 2>"$T/err.txt"
rc=$?
[ "$rc" -eq 69 ] || fail "famctl without famd: exit $rc, expected 69"
grep -q "$T/nobody.sock" "$T/err.txt" || fail "message does not name the socket"
pass "famctl exits 69 naming the socket when no famd answers"

# An error answered by famd: exit 1.
start_famd m "$CONFDIR/famd-memory.conf"
ctl m call no.such.method 2>"$T/err.txt"
[ $? -eq 1 ] || fail "unknown method: famctl did not exit 1"
grep -q "unknown method" "$T/err.txt" || fail "no error message: $(cat "$T/err.txt")"
ctl m call status '{"bogus": 1}' 2>/dev/null
[ $? -eq 1 ] || fail "bad params: famctl did not exit 1"
ctl m call status '{not json' 2>/dev/null
[ $? -eq 64 ] || fail "PARAMS that are not JSON: famctl did not exit 64"
ctl m call log.level '{"level":"debug"}' | json '.level == "debug"' >/dev/null ||
	fail "famctl call log.level did not set the level"
ctl m status -j | json '.log_level == "debug"' >/dev/null || fail "level not shown"
pass "famctl call reaches commands; errors exit 1"

# For people: commands as a table, config as key = value, errors named once.
ctl m commands >"$T/cmds.txt" || fail "famctl commands"
head -1 "$T/cmds.txt" | grep -q '^NAME  *CHANGES  *PARAMS  *HELP$' || fail "commands: $(head -1 "$T/cmds.txt")"
grep -q '^log.level  *no  *level?  *show the log level' "$T/cmds.txt" || fail "commands: no log.level row: $(cat "$T/cmds.txt")"
[ "$(wc -l <"$T/cmds.txt")" -eq $(( $(ctl m commands -j | jq length) + 1 )) ] || fail "commands: one row per command"
ctl m config >"$T/conf.txt" || fail "famctl config"
grep -q '^\[memory\]$' "$T/conf.txt" && grep -q '^role = memory$' "$T/conf.txt" &&
	grep -q '^admin_max_clients = 16  # default$' "$T/conf.txt" || fail "config: $(head -5 "$T/conf.txt")"
ctl m log-level loud 2>"$T/err.txt"
[ "$(grep -o 'log.level' "$T/err.txt" | wc -l)" = 1 ] || fail "the method named twice: $(cat "$T/err.txt")"
pass "famctl commands is a table, config reads as key = value, errors name the method once"
