#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Garbage, bad requests and oversized input on the admin socket get errors;
# the daemon keeps answering everyone. Idle and surplus connections are closed.
. "$(dirname "$0")/lib.sh"
require_cmd socat jq

conf=$T/famd.conf
printf '[famd]\nrole = memory\nadmin_idle_timeout = 500ms\nadmin_max_clients = 2\n' >"$conf"
start_famd m "$conf"

# Garbage then a good request on the same connection: both answered.
rpc m 'hello garbage' '{"jsonrpc":"2.0","method":"version","id":7}' >"$T/out.txt"
[ "$(wc -l <"$T/out.txt")" -eq 2 ] || fail "expected 2 replies: $(cat "$T/out.txt")"
sed -n 1p "$T/out.txt" | json '.error.code == -32700' >/dev/null || fail "no parse error"
sed -n 2p "$T/out.txt" | json '.id == 7 and (.result.famd | length > 0)' >/dev/null ||
	fail "connection unusable after garbage"
pass "garbage gets a parse error and the connection stays usable"

rpc m '{"jsonrpc":"2.0","method":"nosuch","id":1}' '[]' \
	'{"jsonrpc":"2.0","method":"status","params":{"x":1},"id":2}' >"$T/out.txt"
codes=$(jq -c '.error.code' <"$T/out.txt" | tr '\n' ' ')
[ "$codes" = "-32601 -32600 -32602 " ] || fail "error codes: $codes"
pass "unknown method, batch and bad params get their error codes"

# Oversized: 70 KiB without a newline gets an error and the connection closes.
head -c 71680 /dev/zero | tr '\0' 'x' |
	timeout 10 socat -t 5 - UNIX-CONNECT:"$(sock m)" >"$T/big.txt"
json '.error.code == -32001' <"$T/big.txt" >/dev/null || fail "oversized: $(head -c 200 "$T/big.txt")"
pass "an oversized request gets an error and the connection is closed"

# Idle: a connection that sends nothing is closed by famd, not by us.
start=$SECONDS
timeout 10 socat -u UNIX-CONNECT:"$(sock m)" STDOUT
[ $((SECONDS - start)) -lt 8 ] || fail "idle connection was not closed"
pass "an idle connection is closed"

# Surplus: with two connections held, a third is refused with an error.
hold() {
	(printf '{"jsonrpc":"2.0","method":"version","id":1}\n'; sleep 60) |
		socat - UNIX-CONNECT:"$(sock m)" >"$T/held$1.txt" &
	wait_until 5 grep -q result "$T/held$1.txt" || fail "held connection $1"
}
printf '[famd]\nrole = memory\nadmin_idle_timeout = 60s\nadmin_max_clients = 2\n' >"$conf"
ctl m reload >/dev/null || fail reload
hold 1
hold 2
ctl m status 2>"$T/err.txt"
[ $? -eq 1 ] || fail "third connection was not refused"
grep -q "too many admin connections" "$T/err.txt" || fail "refusal: $(cat "$T/err.txt")"
pkill -P $$ socat
wait_until 5 ctl m status || fail "famd does not answer after the surplus"
[ "$(ctl m status -j | json .admin.refused)" -ge 1 ] || fail "refusal not counted"
pass "a connection over admin_max_clients is refused and counted"

# After all of it famd still answers, and counted what happened.
st=$(ctl m status -j) || fail "famd stopped answering"
echo "$st" | json '.admin.errors >= 5 and .admin.oversized >= 1 and .admin.idle_timeouts >= 1' \
	>/dev/null || fail "counters: $(echo "$st" | jq -c .admin)"
pass "famd still serves and counted the errors"
