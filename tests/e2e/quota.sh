#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Quotas: on the host, the programs of one user (uid from SO_PEERCRED) may
# hold at most host.uid_max_regions regions and host.uid_max_bytes bytes of
# fabric-attached memory; beyond that an allocation is refused with EDQUOT
# (the shim says so once and uses libc memory), other users are not
# affected, and a reload changes the limits. On the memory node, each peer
# node may hold at most memory.peer_max_regions regions and
# memory.peer_max_bytes bytes (persistent ones too): EDQUOT beyond, other
# peers unaffected. Every refusal is logged and counted.
. "$(dirname "$0")/lib.sh"
require_cmd jq setpriv
FAMHOLD=$top_builddir/tests/tools/famhold

# ---- memory node: per peer
# session_grace 0: a client's regions go when it ends (unless persistent).
start_memory mem -o memory.peer_max_regions=3 -o memory.peer_max_bytes=16M \
	-o memory.session_grace=0
"$FAMCLIENT" -n alpha "$MEM_ADDR" create 4M create 4M create 4M \
	expect EDQUOT create 1M >"$T/a1.out" 2>&1 ||
	fail "alpha, regions: $(cat "$T/a1.out")"
wait_counter mem regions 0
"$FAMCLIENT" -n alpha "$MEM_ADDR" create 12M expect EDQUOT create 8M create 4M \
	>"$T/a2.out" 2>&1 || fail "alpha, bytes: $(cat "$T/a2.out")"
wait_counter mem regions 0
# A persistent region outlives its session and still counts.
"$FAMCLIENT" -n alpha "$MEM_ADDR" create 10M name=keep persistent >"$T/a3.out" 2>&1 ||
	fail "alpha, persistent: $(cat "$T/a3.out")"
wait_counter mem regions 1
"$FAMCLIENT" -n alpha "$MEM_ADDR" expect EDQUOT create 8M create 6M >"$T/a4.out" 2>&1 ||
	fail "alpha, with a persistent region held: $(cat "$T/a4.out")"
"$FAMCLIENT" -n beta "$MEM_ADDR" create 16M >"$T/b.out" 2>&1 ||
	fail "beta is limited by alpha's regions: $(cat "$T/b.out")"
[ "$(counter mem quota_refusals)" = 3 ] || fail "quota_refusals $(counter mem quota_refusals), expected 3"
grep -q "memory: node alpha is over its quota: 3 regions" "$T/mem.log" ||
	fail "the refusal is not logged"
pass "memory node: per-peer regions and bytes (persistent ones included) refused with EDQUOT; other peers unaffected"

# ---- host: per uid
start_memory mem2
start_host host 8M "$MEM_ADDR" -o host.session_mode=0666
# reload KEY=VALUE...: sets keys in [host] of host.conf and reloads.
reload() {
	local n kv
	n=$(grep -c 'configuration reloaded' "$T/host.log")
	for kv in "$@"; do
		sed -i "/^${kv%%=*} = /d; /^\[host\]/a ${kv%%=*} = ${kv#*=}" "$T/host.conf"
	done
	kill -HUP "$HOST_PID"
	wait_until 10 sh -c "[ \$(grep -c 'configuration reloaded' '$T/host.log') -gt $n ]" ||
		fail "no reload: $(tail -n 5 "$T/host.log")"
}
# The limits come with a reload (they are reloadable).
reload uid_max_regions=3 uid_max_bytes=12M
LD_PRELOAD=$SHIM FAM_THRESHOLD=1M "$FAMHOLD" -w 60 4M 4M 2M 4M 2M >"$T/h1.out" 2>"$T/h1.err" &
h1=$!
wait_until 30 grep -q '^holding' "$T/h1.out" || fail "famhold: $(cat "$T/h1.out" "$T/h1.err")"
printf 'block 0 4194304: fam\nblock 1 4194304: fam\nblock 2 2097152: fam\nblock 3 4194304: libc\nblock 4 2097152: libc\n' |
	diff - <(grep '^block' "$T/h1.out") || fail "the first program's blocks"
grep -q "Disk quota exceeded (EDQUOT); such allocations use libc memory" "$T/h1.err" ||
	fail "the shim does not say why: $(cat "$T/h1.err")"
[ "$(wc -l <"$T/h1.err")" = 1 ] || fail "more than one warning: $(cat "$T/h1.err")"
# Another program of the same user: over the quota too.
LD_PRELOAD=$SHIM FAM_THRESHOLD=1M "$FAMHOLD" 2M >"$T/h2.out" 2>&1 || fail "famhold: $(cat "$T/h2.out")"
grep -q '^block 0 2097152: libc' "$T/h2.out" || fail "same uid, another program: $(cat "$T/h2.out")"
# Another user: a quota of its own.
chmod 755 "$T"
setpriv --reuid=65534 --regid=65534 --clear-groups env LD_PRELOAD="$SHIM" \
	FAM_THRESHOLD=1M FAM_SOCKET="$FAM_SOCKET" "$FAMHOLD" 4M 4M 4M >"$T/h3.out" 2>&1 ||
	fail "famhold as nobody: $(cat "$T/h3.out")"
[ "$(grep -c ': fam$' "$T/h3.out")" = 3 ] || fail "another user is limited by root's blocks: $(cat "$T/h3.out")"
grep -q "uid 0: over the user's quota: 3 regions and 10485760 bytes held" "$T/host.log" ||
	fail "the refusal is not logged"
pass "host: per-uid regions and bytes refused with EDQUOT (one warning, libc memory); another uid unaffected"

# A reload raises the limits: the same user gets fabric-attached memory.
reload uid_max_regions=10 uid_max_bytes=64M
LD_PRELOAD=$SHIM FAM_THRESHOLD=1M "$FAMHOLD" 4M >"$T/h4.out" 2>&1 || fail "famhold: $(cat "$T/h4.out")"
grep -q '^block 0 4194304: fam' "$T/h4.out" || fail "after the reload: $(cat "$T/h4.out")"
kill -USR1 "$h1"
wait "$h1" || fail "the first program: $(cat "$T/h1.out")"
[ "$(counter host quota_refusals)" -ge 3 ] || fail "quota_refusals $(counter host quota_refusals)"
pass "a reload raises the limits; every block kept its data"
