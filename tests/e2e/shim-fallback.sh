#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Without a reachable host famd, programs under libfamshim get libc memory
# and exactly one warning; FAM_STRICT=1 makes large allocations fail with
# ENOMEM instead; FAM_DISABLE=1 turns it all off; FAM_THRESHOLD is obeyed.
# Every malloc-family entry point keeps its semantics, under 8 threads and
# across fork and exec.
. "$(dirname "$0")/lib.sh"
require_cmd perl

SHIM=$top_builddir/src/.libs/libfamshim.so
SHIMTEST=$top_builddir/tests/shim/shimtest
[ -x "$SHIMTEST" ] || fail "no $SHIMTEST (make check builds it)"

# shim OUT ERR ENV... -- ARGS...: runs shimtest under the shim with env.
shim() {
	local out=$1 err=$2
	shift 2
	local envs=()
	while [ "$1" != -- ]; do
		envs+=("$1")
		shift
	done
	shift
	env FAM_SOCKET="$T/none.sock" FAM_THRESHOLD=1M "${envs[@]}" \
		LD_PRELOAD="$SHIM" "$SHIMTEST" "$@" >"$out" 2>"$err"
}

# lines FILE: its number of lines.
lines() {
	wc -l <"$1" | tr -d ' '
}

# No famd at all: libc memory, one warning naming the socket.
shim "$T/out" "$T/err" -- all || fail "shimtest all: $(cat "$T/out" "$T/err")"
cat "$T/out"
[ "$(lines "$T/err")" = 1 ] || fail "expected one warning, got: $(cat "$T/err")"
grep -q "^libfamshim: cannot reach the host famd at $T/none.sock: No such file or directory (ENOENT); large allocations use libc memory$" \
	"$T/err" || fail "unexpected warning: $(cat "$T/err")"
pass "no famd: libc memory, semantics kept, exactly one warning"

# A socket file nobody listens on: refused, still one warning.
perl -MSocket -e 'socket(my $s, PF_UNIX, SOCK_STREAM, 0) or die;
	bind($s, pack_sockaddr_un($ARGV[0])) or die "bind: $!"' "$T/dead.sock" ||
	fail "could not make a socket file"
env FAM_SOCKET="$T/dead.sock" LD_PRELOAD="$SHIM" "$SHIMTEST" alloc 8388608 \
	>"$T/out" 2>"$T/err" || fail "alloc on a dead socket: $(cat "$T/err")"
[ "$(lines "$T/err")" = 1 ] && grep -q "cannot reach the host famd at $T/dead.sock" "$T/err" ||
	fail "dead socket warning: $(cat "$T/err")"
pass "a socket nobody listens on: libc memory, one warning"

# FAM_DISABLE: not a word, and the same semantics.
shim "$T/out" "$T/err" FAM_DISABLE=1 -- all || fail "FAM_DISABLE: $(cat "$T/out" "$T/err")"
[ ! -s "$T/err" ] || fail "FAM_DISABLE printed: $(cat "$T/err")"
pass "FAM_DISABLE=1: libc only, nothing printed"

# FAM_STRICT: large requests fail with ENOMEM, one warning.
shim "$T/out" "$T/err" FAM_STRICT=1 -- strict || fail "FAM_STRICT: $(cat "$T/out" "$T/err")"
cat "$T/out"
[ "$(lines "$T/err")" = 1 ] && grep -q "large allocations fail (FAM_STRICT=1)$" "$T/err" ||
	fail "FAM_STRICT warning: $(cat "$T/err")"
pass "FAM_STRICT=1: large requests are NULL/ENOMEM, one warning"

# FAM_THRESHOLD, seen through FAM_STRICT: at or above fails, below works.
# check_alloc THRESHOLD BYTES WANT(0 memory, 1 NULL)
check_alloc() {
	local rc=0
	shim "$T/out" "$T/err" FAM_STRICT=1 FAM_THRESHOLD="$1" -- alloc "$2" || rc=$?
	[ "$rc" = "$3" ] || fail "FAM_THRESHOLD=$1 malloc($2): exit $rc, want $3: $(cat "$T/out" "$T/err")"
}
check_alloc 64K 65535 0
check_alloc 64K 65536 1
check_alloc 3m 3145727 0
check_alloc 3m 3145728 1
check_alloc 1G 1073741824 1
check_alloc 8M 4194304 0
[ ! -s "$T/err" ] || fail "an allocation below the threshold asked famd: $(cat "$T/err")"
check_alloc 1000000 1000000 1
pass "FAM_THRESHOLD with K, M, G suffixes: at or above goes to FAM, below to libc"

shim "$T/out" "$T/err" FAM_STRICT=1 FAM_THRESHOLD=12X -- alloc 1048576 && fail "FAM_THRESHOLD=12X ignored"
grep -q "^libfamshim: FAM_THRESHOLD=12X is not a size" "$T/err" || fail "no warning for 12X: $(cat "$T/err")"
check_alloc 12X 1048575 0
pass "a bad FAM_THRESHOLD is reported and the 1M default applies"

# famtest (the data checks the end-to-end tests with a famd run) passes on
# libc memory, and finds no fabric-attached memory.
env FAM_SOCKET="$T/none.sock" LD_PRELOAD="$SHIM" \
	"$top_builddir/tests/tools/famtest" -l -s 16M -n 500 >"$T/out" 2>"$T/err" ||
	fail "famtest -l: $(cat "$T/out" "$T/err")"
cat "$T/out"
[ "$(lines "$T/err")" = 1 ] || fail "famtest: expected one warning: $(cat "$T/err")"
pass "famtest's checks pass on libc memory"
