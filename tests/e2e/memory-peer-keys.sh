#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Per-peer keys of a memory node ([memory] peer_secrets, issue 16): two
# hosts prove keys of their own; neither can present the other's node
# name (with its own key or with the shared secret); quotas count against
# the authenticated name, so two hosts behind one address each get their
# own; a name without a key needs the shared secret; a bad line of the
# file stops famd with file:line.
. "$(dirname "$0")/lib.sh"
require_cmd jq

# key NAME: a secret file of NAME's.
key() {
	printf '%s-%s\n' "$1" "$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')" >"$T/$1.secret"
	chmod 600 "$T/$1.secret"
}
key hosta
key hostb
key shared
printf '# node  its secret\nhosta %s\nhostb %s   # the second host\n\n' "$T/hosta.secret" "$T/hostb.secret" >"$T/peers"

start_memory mem -o memory.peer_secrets="$T/peers" -o famd.secret_file="$T/shared.secret" \
	-o memory.peer_max_regions=3
# fc NODE SECRET STEPS...: famclient as node NODE proving SECRET's file.
fc() {
	local node=$1 secret=$2
	shift 2
	"$FAMCLIENT" -n "$node" -S "$T/$secret.secret" -t 3000 "$MEM_ADDR" "$@"
}

# ---- each host with its own key; quotas by name, not by address
fc hosta hosta create 4K create 4K create 4K expect EDQUOT create 4K >"$T/a.out" 2>&1 ||
	fail "hosta with its own key: $(cat "$T/a.out")"
fc hostb hostb create 4K create 4K create 4K expect EDQUOT create 4K >"$T/b.out" 2>&1 ||
	fail "hostb with its own key, from the same address: $(cat "$T/b.out")"
grep -q "memory: peer key:hosta (node hosta) is over its quota: 3 regions" "$T/mem.log" ||
	fail "hosta's refusal is not logged against its name: $(grep quota "$T/mem.log")"
grep -q "memory: peer key:hostb (node hostb) is over its quota: 3 regions" "$T/mem.log" ||
	fail "hostb's refusal is not logged against its name: $(grep quota "$T/mem.log")"
pass "two hosts on one address, each with its own key: 3 regions each (peer_max_regions 3), counted by authenticated name"

# ---- impersonation: hostb's key, or the shared secret, under hosta's name
fc hosta hostb stats >"$T/imp1.out" 2>&1 && fail "hostb's key passed for hosta"
grep -q EACCES "$T/imp1.out" || fail "impersonation: not EACCES: $(cat "$T/imp1.out")"
grep -q "refused hello from 127.0.0.1:[0-9]* (node hosta): wrong key for its node name (peer_secrets)" "$T/mem.log" ||
	fail "the impersonation is not logged: $(grep refused "$T/mem.log")"
fc hosta shared stats >"$T/imp2.out" 2>&1 && fail "the shared secret passed for hosta"
grep -q EACCES "$T/imp2.out" || fail "impersonation with the shared secret: not EACCES: $(cat "$T/imp2.out")"
[ "$(counter mem hello_refusals)" -ge 2 ] || fail "hello_refusals $(counter mem hello_refusals)"
pass "hostb's key and the shared secret are refused (EACCES) under hosta's name"

# ---- a name without a key of its own proves the shared secret
fc other shared create 4K >"$T/other.out" 2>&1 || fail "an unlisted node with the shared secret: $(cat "$T/other.out")"
fc other hosta stats >"$T/other2.out" 2>&1 && fail "an unlisted node passed with a peer's key"
start_memory mem2 -o memory.peer_secrets="$T/peers"
fc hosta hosta create 4K >"$T/a2.out" 2>&1 || fail "hosta, no shared secret: $(cat "$T/a2.out")"
fc other shared stats >"$T/other3.out" 2>&1 && fail "an unlisted node passed where there is no shared secret"
wait_until 10 grep -q "refused hello from 127.0.0.1:[0-9]* (node other): node other has no key of its own (peer_secrets) and there is no shared secret" \
	"$T/mem2.log" || fail "the refusal is not logged: $(grep refused "$T/mem2.log")"
pass "an unlisted name proves the shared secret, and is refused without one"

# ---- a bad line: famd does not start, and says where
printf 'hosta %s\nhostb\n' "$T/hosta.secret" >"$T/badpeers"
printf '[famd]\nrole = memory\n[memory]\nlisten = 127.0.0.1:0\npeer_secrets = %s\n' "$T/badpeers" >"$T/bad.conf"
"$FAMD" -f -c "$T/bad.conf" -o famd.admin_socket="$(sock bad)" 2>"$T/bad.err" &&
	fail "famd started with a bad peer_secrets file"
grep -q "peer_secrets $T/badpeers:2: expected NODE SECRET_FILE" "$T/bad.err" ||
	fail "no file:line: $(cat "$T/bad.err")"
pass "a bad peer_secrets line stops famd with file:line"
