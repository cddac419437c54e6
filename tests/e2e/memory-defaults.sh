#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Safe defaults of a memory node: it refuses to listen where other nodes
# reach it without a secret (exit 78, file:line of the key), listens on
# loopback unless told otherwise, and holds one peer to
# memory.peer_max_regions (16384) regions, well below the mappings every
# peer's regions share.
. "$(dirname "$0")/lib.sh"
require_cmd jq

conf=$T/open.conf
printf '[famd]\nrole = memory\nadmin_socket = %s\n[memory]\nlisten = 0.0.0.0:0\npreload_dir = %s\n' \
	"$(sock open)" "$T" >"$conf"
"$FAMD" -f -c "$conf" 2>"$T/open.err" &
pid=$!
wait_until 10 sh -c "! kill -0 $pid 2>/dev/null" || { kill "$pid"; fail "famd started on 0.0.0.0 without a secret"; }
wait "$pid"
st=$?
[ "$st" = 78 ] || fail "exit status $st, expected 78: $(cat "$T/open.err")"
grep -q "^famd: $conf:5: \[memory\] listen = 0.0.0.0:0 is reachable from other nodes, and \[famd\] secret_file is not set" \
	"$T/open.err" || fail "unclear refusal: $(cat "$T/open.err")"
pass "a memory node on 0.0.0.0 without a secret refuses to start (78, $conf:5)"

printf 'sesame-open-up\n' >"$T/secret"
chmod 600 "$T/secret"
start_famd m "$conf" -o famd.secret_file="$T/secret" -o memory.listen=0.0.0.0:0 \
	-o memory.capacity=1G
port=$(mem_addr m)
port=${port##*:}
pass "with a secret it starts on 0.0.0.0"

printf '[famd]\nrole = memory\n' >"$T/plain.conf"
"$FAMD" -c "$T/plain.conf" -t >"$T/t.out" 2>&1 || fail "default configuration: $(cat "$T/t.out")"
ctl m config -j | jq -e '.keys.memory.peer_max_regions.text == "16384"' >/dev/null ||
	fail "peer_max_regions: $(ctl m config -j | jq -c .keys.memory.peer_max_regions)"
pass "the default listen is loopback (no secret needed there)"

# One peer creating regions without end stops at 16384 (EDQUOT).
args=()
for i in $(seq 16384); do args+=(create 4K); done
"$FAMCLIENT" -S "$T/secret" "127.0.0.1:$port" "${args[@]}" expect EDQUOT create 4K \
	>"$T/many.out" 2>&1 || fail "many regions: $(tail -n 3 "$T/many.out")"
[ "$(counter m regions)" -le 16384 ] || fail "regions $(counter m regions)"
pass "one peer is held to 16384 regions by default"
