#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Strangers cannot lock peers out: 5000 connections that say nothing (held
# 20 s, more than the 4096 a memory node takes at once) leave room for a
# host that proves the secret. Connections that have proved nothing are
# at most memory.max_unauthenticated (the oldest goes for a new one) and
# get memory.hello_timeout for the whole handshake; none of it floods the
# log.
. "$(dirname "$0")/lib.sh"
require_cmd jq python3
PEER=$top_srcdir/tests/e2e/fake-peer.py

secret=$T/secret
printf 'sesame-open-up\n' >"$secret"
chmod 600 "$secret"
# op_timeout 30 s: the silent connections outlive the test's attempts.
printf '[famd]\nrole = memory\nsecret_file = %s\nop_timeout = 30s\n[memory]\nlisten = 127.0.0.1:0\npreload_dir = %s\n' \
	"$secret" "$T" >"$T/m.conf"
start_famd m "$T/m.conf"
addr=$(mem_addr m)
lines=$(wc -l <"$T/m.log")

python3 "$PEER" silent "$addr" 5000 20 >"$T/silent.out" 2>&1 &
silent=$!
wait_until 60 grep -q '^open 5000' "$T/silent.out" ||
	fail "the silent connections did not open: $(cat "$T/silent.out")"
start=$(date +%s%N)
"$FAMCLIENT" -S "$secret" -t 3000 "$addr" create 1M rw 1M >"$T/host.out" 2>&1 ||
	fail "a host with the secret was locked out: $(cat "$T/host.out")"
ms=$((($(date +%s%N) - start) / 1000000))
open=$(counter m connections_unauthenticated)
[ "$open" -le 128 ] || fail "$open unauthenticated connections open (max_unauthenticated 128)"
[ "$(counter m preauth_evictions)" -ge 4000 ] ||
	fail "preauth_evictions $(counter m preauth_evictions)"
pass "5000 silent connections: a host with the secret got in ($ms ms), $open unauthenticated held"

kill "$silent" 2>/dev/null
wait "$silent" 2>/dev/null
logged=$(($(wc -l <"$T/m.log") - lines))
[ "$logged" -le 40 ] || fail "$logged log lines for 5000 silent connections"
pass "the log took $logged lines for them"

# The handshake deadline: a silent connection is closed at hello_timeout.
stop_famd "$FAMD_PID" || fail "stop"
start_famd m2 "$T/m.conf" -o memory.hello_timeout=1s -o memory.max_unauthenticated=4
addr=$(mem_addr m2)
python3 "$PEER" silent "$addr" 4 3 >"$T/s2.out" 2>&1 &
wait_until 10 grep -q '^open 4' "$T/s2.out" || fail "no silent connections"
wait_until 3 counter_is m2 timeouts 4 || fail "timeouts $(counter m2 timeouts) after hello_timeout 1s"
counter_is m2 preauth_evictions 0 || fail "evicted below max_unauthenticated"
pass "a connection that proves nothing within hello_timeout is closed"
