#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# FAM_HEAP=all: a program of many small allocations (64 bytes to 4 KiB, three
# times the host buffer, from two threads) runs under libfamshim with every
# byte right; famd holds the heap's memory beyond the buffer (famctl
# regions), the objects are fabric-attached, and the program's resident size
# stays within the buffer and a small constant. A forked child frees some of
# its parent's objects and allocates its own; the parent's data is intact
# after it. A shell runs its commands (forked children) under it. Without FAM_HEAP, small allocations stay in libc's memory;
# without famd, FAM_HEAP=all falls back to libc (or fails under
# FAM_STRICT=1).
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAMHEAP=$top_builddir/tests/tools/famheap
buf_mib=$(mib 16M)
buffer=${buf_mib}M
total=$((buf_mib * 3))M
slack_mib=24

start_memory mem
start_host host "$buffer" "$MEM_ADDR"

env FAM_HEAP=all LD_PRELOAD="$SHIM" "$FAMHEAP" -t "$total" -T 2 -H >"$T/heap.out" 2>"$T/heap.err" &
pid=$!
wait_until 120 grep -q '^holding$' "$T/heap.out" ||
	fail "famheap did not get to hold: $(cat "$T/heap.out" "$T/heap.err")"
held=$(ctl host regions -j | jq '[.[].bytes] | add // 0')
rss_kib=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status")
kill -USR1 "$pid"
wait "$pid" || fail "famheap under FAM_HEAP=all: $(cat "$T/heap.out" "$T/heap.err")"
cat "$T/heap.out"
grep -q '^famheap: child ok$' "$T/heap.out" || fail "the child did not finish"
grep -q '^famheap: parent ok after the child$' "$T/heap.out" ||
	fail "the parent's data after the child"
[ ! -s "$T/heap.err" ] || fail "famheap printed on stderr: $(cat "$T/heap.err")"
read -r objs bytes fam <<<"$(sed -n 's/^famheap: objects \([0-9]*\) bytes \([0-9]*\) fam \([0-9]*\).*/\1 \2 \3/p' "$T/heap.out")"
[ "${objs:-0}" -gt 0 ] || fail "no summary line: $(cat "$T/heap.out")"
[ "$fam" = "$objs" ] || fail "$fam of $objs objects are fabric-attached"
pass "$objs objects of 64 B to 4 KiB, $((bytes >> 20)) MiB in all, through a $buffer buffer: every byte right, all fabric-attached, the child's allocations too"

buf_b=$((buf_mib << 20))
[ "$held" -gt "$buf_b" ] && [ "$held" -ge "$bytes" ] ||
	fail "famd held $held bytes in regions, for $bytes bytes of objects and a $buffer buffer"
pass "famd held $((held >> 20)) MiB of regions for them, more than the $buffer buffer"

[ $((rss_kib >> 10)) -le $((buf_mib + slack_mib)) ] ||
	fail "resident $((rss_kib >> 10)) MiB, more than the $buffer buffer and $slack_mib MiB"
pass "resident $((rss_kib >> 10)) MiB with $((bytes >> 20)) MiB of objects: within the $buffer buffer and $slack_mib MiB"

# A shell under FAM_HEAP=all: its environment and its locale live in the
# fabric-attached heap, and each command it runs is a forked child, which
# opens its session before it maps its copy of that heap: it must touch
# neither then (the socket's path from the environment; a thread started,
# which reads the locale).
script='export V=fam; for i in 1 2 3; do (exit $i); echo "sub $?"; done
x=$(echo "$V" | tr a-z A-Z); echo "cs $x"; seq 1 2000 | sort -rn | head -3
env | grep -c "^V=fam$"'
LC_ALL=C.UTF-8 bash -c "$script" >"$T/sh.local" 2>&1
forks=$(counter host forks)
env LC_ALL=C.UTF-8 FAM_HEAP=all LD_PRELOAD="$SHIM" bash -c "$script" >"$T/sh.fam" 2>&1 ||
	fail "a shell under FAM_HEAP=all: $(cat "$T/sh.fam")"
cmp -s "$T/sh.local" "$T/sh.fam" ||
	fail "a shell under FAM_HEAP=all: $(diff "$T/sh.local" "$T/sh.fam" | head -5)"
[ "$(counter host forks)" -gt "$forks" ] ||
	fail "a shell under FAM_HEAP=all: famd copied no heap for its children"
pass "a shell under FAM_HEAP=all: subshells, pipes and command substitution give the same output as locally ($(($(counter host forks) - forks)) forks)"

# What the C library allocates for itself stays local under FAM_HEAP=all:
# a forked child's C library resets its NSS state before any fork handler
# runs, before the child has mapped its copy of the FAM heap.
nss='my @u = getpwnam("root"); my @h = gethostbyname("localhost");
my $p = fork(); if (!$p) { print "child $u[0]\n"; exit 0 }
waitpid($p, 0); print "parent ", $? >> 8, " ", $? & 127, "\n"'
env FAM_HEAP=all LD_PRELOAD="$SHIM" perl -e "$nss" >"$T/nss.out" 2>&1 ||
	fail "perl under FAM_HEAP=all: $(cat "$T/nss.out")"
[ "$(cat "$T/nss.out")" = "$(printf 'child root\nparent 0 0')" ] ||
	fail "a child forked after NSS lookups under FAM_HEAP=all: $(cat "$T/nss.out")"
pass "a child forked after NSS lookups under FAM_HEAP=all runs and exits 0"

# The default: small allocations are libc's, and famd gets none of them.
shim "$FAMHEAP" -t "$(scaled 4M)" -T 1 >"$T/plain.out" 2>&1 ||
	fail "famheap without FAM_HEAP: $(cat "$T/plain.out")"
grep -q ' fam 0 ' "$T/plain.out" || fail "without FAM_HEAP: $(cat "$T/plain.out")"
pass "without FAM_HEAP, small allocations stay in libc's memory"

# No famd: FAM_HEAP=all falls back to libc with one warning, or fails the
# allocations under FAM_STRICT=1; an unknown FAM_HEAP is reported.
env FAM_HEAP=all FAM_SOCKET="$T/none.sock" LD_PRELOAD="$SHIM" "$FAMHEAP" -t 2M -T 2 >"$T/none.out" 2>"$T/none.err" ||
	fail "FAM_HEAP=all without famd: $(cat "$T/none.out" "$T/none.err")"
grep -q ' fam 0 ' "$T/none.out" || fail "FAM_HEAP=all without famd: $(cat "$T/none.out")"
[ "$(wc -l <"$T/none.err")" -eq 1 ] && grep -q "cannot reach the host famd.*; allocations use libc memory" "$T/none.err" ||
	fail "FAM_HEAP=all without famd: expected one warning: $(cat "$T/none.err")"
rc=0
env FAM_HEAP=all FAM_STRICT=1 FAM_SOCKET="$T/none.sock" LD_PRELOAD="$SHIM" "$FAMHEAP" -t 2M -T 1 >"$T/strict.out" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && grep -q '^FAIL - ' "$T/strict.out" ||
	fail "FAM_HEAP=all FAM_STRICT=1 without famd: rc $rc: $(cat "$T/strict.out")"
pass "without famd: FAM_HEAP=all falls back to libc with one warning; FAM_STRICT=1 fails the allocations"
env FAM_HEAP=some FAM_SOCKET="$T/none.sock" LD_PRELOAD="$SHIM" "$FAMHEAP" -t 1M -T 1 >"$T/bad.out" 2>"$T/bad.err" ||
	fail "FAM_HEAP=some: $(cat "$T/bad.out" "$T/bad.err")"
grep -q "FAM_HEAP=some is neither all nor large; using large" "$T/bad.err" ||
	fail "FAM_HEAP=some was not reported: $(cat "$T/bad.err")"
pass "FAM_HEAP=some is reported, and large used"
