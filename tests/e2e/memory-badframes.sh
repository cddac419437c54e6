#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Every malformed frame, refused hello and out-of-bounds request gets an
# error or a dropped connection; famd counts it, logs it with the peer's
# address, and keeps serving other clients.
. "$(dirname "$0")/lib.sh"
require_cmd jq

secret=$T/secret
printf 'test-secret-1\n' >"$secret"
chmod 600 "$secret"
conf=$T/famd.conf
printf '[famd]\nrole = memory\nsecret_file = %s\nop_timeout = 2s\n[memory]\ncapacity = 16M\npreload_dir = %s\n' \
	"$secret" "$T" >"$conf"
start_famd m "$conf"
addr=$(mem_addr m)
fc() { "$FAMCLIENT" -S "$secret" -t 5000 "$addr" "$@"; }

# Malformed frames: the connection is dropped (after an error where the
# frame could be answered) and counted as a bad frame.
bad=0
for attack in bad-magic truncated huge-length unknown-type bad-flags \
	before-hello reserved-set bad-create second-hello response-frame; do
	fc attack "$attack" >"$T/a.txt" 2>&1 || fail "$attack: $(cat "$T/a.txt")"
	bad=$((bad + 1))
	wait_counter m bad_frames "$bad"
	fc -q rw 256K 64K 4 >"$T/rw.txt" 2>&1 || fail "no service after $attack: $(cat "$T/rw.txt")"
done
pass "10 malformed frames dropped and counted; a second client is served after each"

# Refused hellos: answered with the reason, counted as refusals.
for attack in bad-version bad-secret; do
	fc attack "$attack" >"$T/a.txt" 2>&1 || fail "$attack: $(cat "$T/a.txt")"
done
wait_counter m hello_refusals 2
"$FAMCLIENT" "$addr" stats >"$T/nosecret.txt" 2>&1 && fail "hello without the secret accepted"
grep -q "EACCES" "$T/nosecret.txt" || fail "refusal not explained: $(cat "$T/nosecret.txt")"
wait_counter m hello_refusals 3
pass "wrong version, wrong secret and no secret are refused and counted"

# Names that are not UTF-8 (they vanished from famctl regions and status):
# a hello with such a node name is malformed, a region name is refused.
"$FAMCLIENT" -S "$secret" -n $'host-\xff' -t 5000 "$addr" stats >"$T/n.txt" 2>&1 &&
	fail "a node name that is not UTF-8 was accepted"
bad=$((bad + 1))
wait_counter m bad_frames "$bad"
fc expect EINVAL create 64K name=$'kept\xc3' persistent >"$T/n.txt" 2>&1 ||
	fail "a region name that is not UTF-8: $(cat "$T/n.txt")"
[ "$(ctl m call regions | jq length)" = 0 ] || fail "a region was kept"
pass "node and region names that are not UTF-8 are refused"

# Requests out of bounds: an error status, the connection stays usable.
for attack in unknown-region past-end shared-write dup-writer foreign-region; do
	fc attack "$attack" >"$T/a.txt" 2>&1 || fail "$attack: $(cat "$T/a.txt")"
done
counter_is m bad_frames "$bad" || fail "an error status was counted as a bad frame"
# Refused by the transport's own checks (an offset wrapping around) or by
# the role (the rest): the role counts the latter.
[ "$(counter m rw_errors)" -ge 8 ] || fail "rw_errors $(counter m rw_errors)"
pass "unknown region, offset past the end, write to a shared region, second writer, another session's region: errors, connection kept"

# A connection that never says hello is dropped at op_timeout.
exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}" || fail "cannot connect"
wait_counter m timeouts 1
wait_until 10 counter_is m connections_open 0 || fail "silent connection kept"
exec 3<&-
pass "a silent connection is dropped after op_timeout"

grep -q "protocol violation: bad magic 0x47455420" "$T/m.log" || fail "bad magic not logged"
grep -Eq "tcp: 127\.0\.0\.1:[0-9]+ \(node famclient\): protocol violation: .* request before hello|tcp: 127\.0\.0\.1:[0-9]+: protocol violation: read request before hello" \
	"$T/m.log" || fail "violation not logged with the peer"
grep -q "refused hello from 127.0.0.1:[0-9]* (node famclient): wrong secret" "$T/m.log" ||
	fail "refusal not logged"
fc -q rw 1M >/dev/null || fail "famd stopped serving"
ctl m status -j | jq -e '.counters.sessions_connected == 0' >/dev/null || fail "status"
pass "violations and refusals are logged with the peer's address; famd still serves"
