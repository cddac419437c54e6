#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Real programs from Debian's packages run unmodified under libfamshim
# without a host famd: same output as without it, one warning, and
# FAM_STRICT=1 turns a large allocation into the program's own
# out-of-memory error.
. "$(dirname "$0")/lib.sh"
require_cmd sort

SHIM=$top_builddir/src/.libs/libfamshim.so
PYTHON=/usr/bin/python3
[ -x "$PYTHON" ] || PYTHON=$(command -v python3) || skip "python3 is not installed"

# under ENV... -- CMD...: runs CMD under the shim, stderr to $T/err.
under() {
	local envs=()
	while [ "$1" != -- ]; do
		envs+=("$1")
		shift
	done
	shift
	env FAM_SOCKET="$T/none.sock" "${envs[@]}" LD_PRELOAD="$SHIM" "$@" 2>"$T/err"
}

seq 1 300000 | awk '{ print ($1 * 7919) % 300007 }' >"$T/numbers"
sort -n "$T/numbers" >"$T/want"
# -S 64M: sort allocates its buffer at once, well above the threshold.
under -- sort -n -S 64M "$T/numbers" >"$T/got" || fail "sort under the shim: $(cat "$T/err")"
cmp -s "$T/want" "$T/got" || fail "sort's output differs under the shim"
[ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "cannot reach the host famd" "$T/err" ||
	fail "sort: expected one warning: $(cat "$T/err")"
pass "sort -n -S 64M of 300000 lines: same output, one warning"

prog='
import sys
blocks = [bytearray(3 << 20) for _ in range(20)]
for i, b in enumerate(blocks):
    b[::4096] = bytes([i]) * len(b[::4096])
big = bytearray(64 << 20)
big[-1] = 255
print(sum(sum(b[::4096]) for b in blocks), sum(big), len(b"".join(blocks)))
'
want=$("$PYTHON" -c "$prog") || fail "python3 alone failed"
got=$(under -- "$PYTHON" -c "$prog") || fail "python3 under the shim: $(cat "$T/err")"
[ "$got" = "$want" ] || fail "python3 printed [$got], not [$want]"
pass "python3 with 20 blocks of 3 MiB and one of 64 MiB: same output"

under FAM_DISABLE=1 -- "$PYTHON" -c "$prog" >/dev/null || fail "python3 with FAM_DISABLE=1"
[ ! -s "$T/err" ] || fail "FAM_DISABLE=1 printed: $(cat "$T/err")"

rc=0
under FAM_STRICT=1 -- "$PYTHON" -c 'bytearray(64 << 20)' || rc=$?
[ "$rc" -ne 0 ] && grep -q MemoryError "$T/err" || fail "FAM_STRICT python3: rc $rc: $(cat "$T/err")"
under FAM_STRICT=1 -- "$PYTHON" -c 'print(len(bytearray(100000)))' >/dev/null ||
	fail "FAM_STRICT broke a small allocation: $(cat "$T/err")"
pass "FAM_STRICT=1: python3 gets MemoryError for 64 MiB, small allocations work"
