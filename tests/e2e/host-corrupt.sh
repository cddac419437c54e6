#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Chunk data corrupted between the memory node and the host (one bit of
# every READ response flipped by a proxy) is never handed to a program:
# each READ fails its CRC32C, the chunk is lost, and the thread that needs
# it gets SIGBUS - never a wrong byte. The host famd logs why and serves on.
. "$(dirname "$0")/lib.sh"
require_cmd jq python3
PEER=$top_srcdir/tests/e2e/fake-peer.py

start_memory mem
python3 "$PEER" corrupt "$T/proxy.port" "$MEM_ADDR" "$T/flip" "$T/flips" &
proxy=$!
wait_until 10 test -s "$T/proxy.port" || fail "the proxy did not start"
touch "$T/flip"
start_host host 8M "127.0.0.1:$(cat "$T/proxy.port")" -o famd.op_timeout=2s

# 32 MiB written (four times the buffer), then read back twice and compared.
cat >"$T/check.py" <<'PY'
import sys
n = 32 << 20
pat = bytes(range(256)) * 4096
b = bytearray(n)
for off in range(0, n, 1 << 20):
    b[off:off + (1 << 20)] = pat
bad = 0
for rnd in range(2):
    for off in range(0, n, 1 << 20):
        if b[off:off + (1 << 20)] != pat:
            bad += 1
print("wrong" if bad else "right", bad, flush=True)
sys.exit(3 if bad else 0)
PY
FAM_THRESHOLD=4M shim python3 "$T/check.py" >"$T/check.out" 2>"$T/check.err"
st=$?
[ -s "$T/flips" ] || fail "the proxy flipped nothing (status $st): $(cat "$T/check.out" "$T/check.err")"
grep -q wrong "$T/check.out" && fail "the program read corrupted data: $(cat "$T/check.out")"
[ "$st" = 135 ] || fail "exit status $st, expected SIGBUS (135): $(cat "$T/check.out" "$T/check.err")"
grep -Eq "SIGBUS: cannot bring in chunk [0-9]+ of region [0-9]+: Bad message" "$T/host.log" ||
	fail "the SIGBUS is not explained in the log"
grep -q "does not match its CRC32C" "$T/host.log" || fail "the CRC mismatch is not logged"
[ "$(counter host sigbus)" -ge 1 ] || fail "sigbus counter $(counter host sigbus)"
pass "$(cat "$T/flips") corrupted READs: the program got SIGBUS, never a wrong byte"

# The same path, clean again: every byte right.
rm -f "$T/flip"
FAM_THRESHOLD=4M shim python3 "$T/check.py" >"$T/check2.out" 2>&1 ||
	fail "clean path: $(cat "$T/check2.out")"
pass "the host famd serves on once the data is clean"
