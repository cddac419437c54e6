#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Mutual authentication: the secret never crosses the wire, a rogue memory
# node that cannot prove it is refused before the client sends it anything
# but its hello and its proof; region keys are 64 bits, and a peer that
# guesses them is cut off after FAM_EACCES_MAX (8) wrong ones.
. "$(dirname "$0")/lib.sh"
require_cmd jq python3
PEER=$top_srcdir/tests/e2e/fake-peer.py

secret=$T/secret
printf 'correct horse battery staple\n' >"$secret"
chmod 600 "$secret"

# ---- a rogue memory node: what a client gives away
python3 "$PEER" rogue "$T/rogue.port" "$T/rogue.capture" &
rogue=$!
wait_until 10 test -s "$T/rogue.port" || fail "the rogue node did not start"
"$FAMCLIENT" -S "$secret" -t 3000 "127.0.0.1:$(cat "$T/rogue.port")" stats \
	>"$T/rogue.out" 2>&1 && fail "the client took a rogue node that cannot prove the secret"
wait "$rogue"
[ -s "$T/rogue.capture" ] || fail "the rogue node captured nothing"
grep -aq "correct horse" "$T/rogue.capture" &&
	fail "the secret crossed the wire in clear: $(strings "$T/rogue.capture" | head -n 3)"
grep -q "EACCES" "$T/rogue.out" || fail "the refusal does not say why: $(cat "$T/rogue.out")"
# Two frames reached it (HELLO and AUTH: 32 + 112 + 32 + 32 bytes), no request.
size=$(stat -c %s "$T/rogue.capture")
[ "$size" = 208 ] || fail "the rogue node got $size bytes, expected the hello and the proof (208)"
pass "a rogue memory node never sees the secret, and gets no request: the client refuses its proof"

# ---- a real memory node: served with the secret, keys of 64 bits
conf=$T/famd.conf
printf '[famd]\nrole = memory\nsecret_file = %s\n[memory]\npreload_dir = %s\n' "$secret" "$T" >"$conf"
start_famd m "$conf"
addr=$(mem_addr m)
"$FAMCLIENT" -S "$secret" "$addr" create 4K create 4K create 4K >"$T/keys.out" 2>&1 ||
	fail "create: $(cat "$T/keys.out")"
big=0
for k in $(sed -n 's/^where key=\([0-9a-f]*\) .*/\1/p' "$T/keys.out"); do
	[ ${#k} = 16 ] || fail "key $k is not printed as 64 bits"
	[ "$((16#${k:0:8}))" != 0 ] && big=$((big + 1))
done
[ "$big" -ge 2 ] || fail "region keys do not use their high 32 bits: $(grep key= "$T/keys.out")"
pass "region keys are 64 random bits"

# ---- guessing keys: 8 wrong ADOPTs, then the connection is closed
"$FAMCLIENT" -S "$secret" "$addr" attack adopt-guess >"$T/guess.out" 2>&1 ||
	fail "adopt-guess: $(cat "$T/guess.out")"
counter_is m eacces_closes 1 || fail "eacces_closes $(counter m eacces_closes)"
grep -q "8 wrong region keys; closing the connection" "$T/m.log" || fail "the close is not logged"
"$FAMCLIENT" -S "$secret" "$addr" stats >/dev/null 2>&1 || fail "others are no longer served"
pass "a peer guessing region keys is cut off after 8 wrong ones; others are served"

# ---- quotas count against the authenticated peer, not the name it gives
stop_famd "$FAMD_PID" || fail "stop"
start_famd q "$conf" -o memory.peer_max_regions=2
addr=$(mem_addr q)
"$FAMCLIENT" -S "$secret" -n alpha "$addr" create 1M create 1M >"$T/q1.out" 2>&1 ||
	fail "alpha: $(cat "$T/q1.out")"
"$FAMCLIENT" -S "$secret" -n beta "$addr" expect EDQUOT create 1M >"$T/q2.out" 2>&1 ||
	fail "a new node name escaped the quota: $(cat "$T/q2.out")"
grep -q "memory: peer 127.0.0.1 (node beta) is over its quota: 2 regions" "$T/q.log" ||
	fail "the refusal does not name the peer"
pass "a peer that takes another node name still counts against its own quota"
