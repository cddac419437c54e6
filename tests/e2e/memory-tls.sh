#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# TLS between a host (or a dpu) and a memory node ([famd] tls, issue 16): with a
# throwaway CA made by openssl(1), a program's data crosses a relay in
# the middle of the link encrypted (famtest's pattern is not on the wire;
# without TLS it is), byte-verified through a buffer smaller than the
# data; a peer without TLS and a peer whose certificate another CA signed
# are refused, each with a clear log line; tls = on with verbs, or
# without its files, is a configuration error (78, file:line).
. "$(dirname "$0")/lib.sh"
require_cmd openssl python3 jq
[ "$TEST_TRANSPORT" = tcp ] || skip "TLS is tcp's"
FAMTEST=$top_builddir/tests/tools/famtest
RELAY=$top_srcdir/tests/e2e/relay.py
FINDPAT=$top_srcdir/tests/e2e/findpat.py

# ---- a CA, certificates of the memory node and the host; another CA
pki=$T/pki
mkdir -p "$pki"
# cert NAME CA: a key and a certificate for NAME signed by CA.
cert() {
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout "$pki/$1.key" -out "$pki/$1.csr" -subj "/CN=$1" 2>/dev/null &&
		openssl x509 -req -in "$pki/$1.csr" -CA "$pki/$2.crt" -CAkey "$pki/$2.key" \
			-CAcreateserial -out "$pki/$1.crt" -days 1 2>/dev/null ||
		fail "openssl: certificate of $1"
	chmod 600 "$pki/$1.key"
}
for ca in ca rogue-ca; do
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-keyout "$pki/$ca.key" -out "$pki/$ca.crt" -days 1 -subj "/CN=famd test $ca" \
		2>/dev/null || fail "openssl: $ca"
done
cert mem ca
cert host ca
cert dpu ca
cert rogue rogue-ca
printf 'tls-test-secret\n' >"$T/secret"
chmod 600 "$T/secret"
# tls NAME [CA]: the options that give a famd TLS with NAME's certificate.
tls() {
	echo -o famd.tls=on -o famd.tls_cert="$pki/$1.crt" -o famd.tls_key="$pki/$1.key" \
		-o famd.tls_ca="$pki/${2:-ca}.crt"
}
# relay NAME UPSTREAM: starts relay.py; sets RELAY_ADDR.
relay() {
	python3 "$RELAY" "$T/$1.port" "$2" "$T/$1.cap" 2>>"$T/$1.log" &
	wait_until 10 test -s "$T/$1.port" || fail "relay $1 did not start"
	RELAY_ADDR=127.0.0.1:$(cat "$T/$1.port")
}

# ---- with TLS: the data on the wire is not the program's
# shellcheck disable=SC2046
start_memory mem -o famd.secret_file="$T/secret" $(tls mem)
relay wire "$MEM_ADDR"
# shellcheck disable=SC2046
start_host host 8M "$RELAY_ADDR" -o famd.secret_file="$T/secret" $(tls host)
shim "$FAMTEST" -f -s 16M seq random >"$T/tls.out" 2>&1 || fail "famtest over TLS: $(cat "$T/tls.out")"
found=$(python3 "$FINDPAT" "$T/wire.cap" 16777216 1)
echo "# over TLS: $(stat -c %s "$T/wire.cap") bytes crossed the relay; famtest's words: $found"
[ "$found" = "found 0 of 256" ] || fail "famtest's data crossed the link in clear over TLS: $found"
grep -q "tls: .*: TLSv1.3 .*peer certificate .*CN *= *host" "$T/mem.log" ||
	fail "the memory node does not log the host's TLS: $(grep tls "$T/mem.log")"
grep -q "tls: .*: TLSv1.3 .*peer certificate .*CN *= *mem" "$T/host.log" ||
	fail "the host does not log the memory node's TLS: $(grep tls "$T/host.log")"
pass "tls = on: famtest 16M through an 8M buffer, every byte checked; none of its words on the wire"

# ---- through a dpu: host to dpu and dpu to memory node, both TLS
# shellcheck disable=SC2046
start_dpu dpu "$MEM_ADDR" -o famd.secret_file="$T/secret" $(tls dpu)
# shellcheck disable=SC2046
start_host hostd 8M "$DPU_ADDR" -o famd.secret_file="$T/secret" -o famd.op_timeout=10s $(tls host)
shim "$FAMTEST" -f -s 16M seq random >"$T/dpu.out" 2>&1 || fail "famtest through a dpu over TLS: $(cat "$T/dpu.out")"
grep -q "tls: .*: TLSv1.3 .*peer certificate .*CN *= *dpu" "$T/mem.log" ||
	fail "the memory node does not log the dpu's TLS"
grep -q "tls: .*: TLSv1.3 .*peer certificate .*CN *= *host" "$T/dpu.log" ||
	fail "the dpu does not log the host's TLS"
pass "tls = on through a dpu: famtest 16M through an 8M buffer, host to dpu and dpu to memory node in TLS"

# ---- without TLS the same relay sees them (the check above can fail)
start_memory mem2 -o famd.secret_file="$T/secret"
relay plain "$MEM_ADDR"
start_host host2 8M "$RELAY_ADDR" -o famd.secret_file="$T/secret"
shim "$FAMTEST" -f -s 16M seq random >"$T/plain.out" 2>&1 || fail "famtest without TLS: $(cat "$T/plain.out")"
found=$(python3 "$FINDPAT" "$T/plain.cap" 16777216 1)
echo "# without TLS: famtest's words on the wire: $found"
[ "$found" != "found 0 of 256" ] || fail "without TLS the relay should see famtest's data"
pass "tls = off: an eavesdropper on the link reads the program's data ($found of its words)"

# ---- a host without TLS is refused by the TLS memory node
mem_tls_addr=$(mem_addr mem)
cat >"$T/plainhost.conf" <<CONF
[famd]
role = host
secret_file = $T/secret
op_timeout = 3s
[host]
memory_nodes = $mem_tls_addr
buffer_size = 8M
session_socket = $T/plainhost.session
CONF
start_famd plainhost "$T/plainhost.conf"
wait_until 10 grep -q "tls: 127.0.0.1:[0-9]*: handshake failed: the peer does not speak TLS (.*): \[famd\] tls must be on at both ends" \
	"$T/mem.log" || fail "no clear refusal of a peer without TLS: $(grep tls "$T/mem.log" | tail -3)"
ctl plainhost status -j | jq -e '[.peers[] | select(.state == "up")] | length == 0' >/dev/null ||
	fail "a host without TLS reached the TLS memory node"
pass "a host without TLS is refused: $(grep -o 'handshake failed: the peer does not speak TLS[^:]*' "$T/mem.log" | head -1)"

# ---- a host whose certificate another CA signed is refused
# shellcheck disable=SC2046
start_famd roguehost "$T/plainhost.conf" -o host.session_socket="$T/roguehost.session" $(tls rogue ca)
wait_until 10 grep -q "tls: 127.0.0.1:[0-9]*: handshake failed: its certificate is refused: .* (it must be signed by \[famd\] tls_ca)" \
	"$T/mem.log" || fail "no clear refusal of another CA's certificate: $(grep tls "$T/mem.log" | tail -3)"
ctl roguehost status -j | jq -e '[.peers[] | select(.state == "up")] | length == 0' >/dev/null ||
	fail "a host with another CA's certificate reached the memory node"
wait_until 10 grep -q "tls: $mem_tls_addr: the peer refused this node's certificate (.*): is \[famd\] tls_cert signed by the CA the peer trusts?" \
	"$T/roguehost.log" || fail "the refused host does not say why: $(grep tls "$T/roguehost.log" | tail -3)"
# ... and a host that trusts only another CA refuses the memory node.
# shellcheck disable=SC2046
start_famd naivehost "$T/plainhost.conf" -o host.session_socket="$T/naivehost.session" $(tls host rogue-ca)
wait_until 10 grep -q "tls: $mem_tls_addr: handshake failed: its certificate is refused" "$T/naivehost.log" ||
	fail "a host does not refuse a memory node of another CA: $(grep tls "$T/naivehost.log" | tail -3)"
pass "a certificate of another CA is refused, by the memory node and by the host"

# ---- configuration errors
cat >"$T/verbs.conf" <<CONF
[famd]
role = memory
transport = verbs
tls = on
tls_cert = $pki/mem.crt
tls_key = $pki/mem.key
tls_ca = $pki/ca.crt
CONF
"$FAMD" -t -c "$T/verbs.conf" 2>"$T/verbs.err"
rc=$?
[ "$rc" = 78 ] || fail "tls with verbs: exit $rc, expected 78"
grep -q "^famd: $T/verbs.conf:4: \[famd\] tls = on with transport = verbs: TLS applies to tcp only" "$T/verbs.err" ||
	fail "unclear refusal: $(cat "$T/verbs.err")"
printf '[famd]\nrole = memory\ntls = on\ntls_ca = %s\n' "$pki/ca.crt" >"$T/nocert.conf"
"$FAMD" -t -c "$T/nocert.conf" 2>"$T/nocert.err"
rc=$?
[ "$rc" = 78 ] || fail "tls without a certificate: exit $rc, expected 78"
grep -q "^famd: $T/nocert.conf:3: \[famd\] tls = on needs \[famd\] tls_cert" "$T/nocert.err" ||
	fail "unclear refusal: $(cat "$T/nocert.err")"
pass "tls = on with transport = verbs, or without tls_cert: exit 78 with file:line"
