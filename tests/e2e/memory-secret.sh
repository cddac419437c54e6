#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The shared secret: peers that present it are served, others refused and
# counted; a secret file others can read stops famd from starting.
. "$(dirname "$0")/lib.sh"
require_cmd jq

secret=$T/secret
printf 'correct horse battery staple\n' >"$secret"
chmod 600 "$secret"
conf=$T/famd.conf
printf '[famd]\nrole = memory\nsecret_file = %s\n[memory]\npreload_dir = %s\n' "$secret" "$T" >"$conf"
start_famd m "$conf"
addr=$(mem_addr m)
grep -q "secret required" "$T/m.log" || fail "start line does not say a secret is required"

"$FAMCLIENT" -S "$secret" "$addr" rw 1M >"$T/ok.txt" 2>&1 || fail "right secret: $(cat "$T/ok.txt")"
"$FAMCLIENT" -s "correct horse battery stapl" "$addr" stats >"$T/bad.txt" 2>&1 &&
	fail "a wrong secret was accepted"
grep -q "refused or failed: EACCES" "$T/bad.txt" || fail "wrong secret: $(cat "$T/bad.txt")"
"$FAMCLIENT" "$addr" stats >/dev/null 2>&1 && fail "no secret was accepted"
"$FAMCLIENT" -S "$secret" "$addr" attack bad-secret >"$T/a.txt" 2>&1 || fail "attack: $(cat "$T/a.txt")"
wait_counter m hello_refusals 3
counter_is m sessions_started 1 || fail "a refused hello started a session"
[ "$(grep -c "refused hello from 127.0.0.1:[0-9]* (node famclient): wrong secret" "$T/m.log")" -eq 3 ] ||
	fail "refusals not logged"
pass "the right secret is served; wrong and missing secrets are refused, logged and counted"

stop_famd "$FAMD_PID" || fail "stop"
chmod 644 "$secret"
"$FAMD" -f -c "$conf" -o famd.admin_socket="$(sock m2)" -o memory.listen=127.0.0.1:0 \
	2>"$T/m2.log" &
pid=$!
wait "$pid"
[ $? -ne 0 ] || fail "famd started with a world-readable secret file"
grep -q "secret_file $secret: readable or writable by others (mode 0644)" "$T/m2.log" ||
	fail "unclear message: $(cat "$T/m2.log")"
pass "a secret file readable by others stops famd with a clear message"
