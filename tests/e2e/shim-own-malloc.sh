#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A program that brings its own malloc (as programs linked with jemalloc
# do) and maps large blocks with mmap() while its allocator holds its
# lock. The shim opened the session from inside that mmap(), and starting
# the session's watchdog thread called the program's calloc() for the
# thread's TLS: the program waited on its own lock forever. Such a
# program's mmap() calls stay the kernel's unless FAM_MMAP=1; with it,
# they are fabric-attached memory, and the watchdog thread was started
# before any lock was taken; it watches the session once one opens.
. "$(dirname "$0")/lib.sh"
require_cmd jq

OWN=$top_builddir/tests/tools/famownalloc
start_memory mem
start_host host 8M "$MEM_ADDR"

timeout -k 5 60 env LD_PRELOAD="$SHIM" "$OWN" -l -t 2 >"$T/own.out" 2>&1 ||
	fail "its own malloc, FAM_MMAP unset: exit $?: $(tail -3 "$T/own.out")"
pass "a program with its own malloc runs under the shim; its mappings stay the kernel's"

before=$(counter host faults_missing)
timeout -k 5 60 env FAM_MMAP=1 LD_PRELOAD="$SHIM" "$OWN" -f -t 2 >"$T/own.out" 2>&1 ||
	fail "its own malloc, FAM_MMAP=1: exit $? (124: it hung): $(tail -3 "$T/own.out")"
[ "$(counter host faults_missing)" -gt "$before" ] ||
	fail "no fault served for its blocks"
[ "$(counter host evictions_dirty)" -gt 0 ] ||
	fail "64 MiB written through an 8 MiB buffer, nothing written back"
pass "with FAM_MMAP=1, its allocator's mmap() under its own lock is fabric-attached memory: no hang, data right"

timeout -k 5 60 env FAM_MMAP=1 LD_PRELOAD="$SHIM" "$OWN" -f -t 1 >"$T/own.out" 2>&1 ||
	fail "one thread, FAM_MMAP=1: exit $?: $(tail -3 "$T/own.out")"
pass "and from one thread"

timeout -k 5 60 env FAM_MMAP=1 LD_PRELOAD="$SHIM" "$OWN" -f -t 1 -F >"$T/own.out" 2>&1 ||
	fail "forked first, FAM_MMAP=1: exit $? (124: it hung): $(tail -3 "$T/own.out")"
grep -q '^child ok' "$T/own.out" || fail "the child did not pass: $(cat "$T/own.out")"
pass "a child forked before any session opens its own from inside its allocator's mmap(): no hang, data right"

# The session is watched: the host famd killed while the program holds
# its blocks, the spare watchdog sees it go and waits for it (1 s).
fresh "$T/hold.out" "$T/hold.err"
FAM_MMAP=1 FAM_RESTART_WAIT=1 LD_PRELOAD="$SHIM" timeout -k 5 60 "$OWN" -f -t 1 -w 20 \
	>"$T/hold.out" 2>"$T/hold.err" &
job=$!
wait_until 30 grep -q '^ready' "$T/hold.out" || fail "famownalloc -w: $(cat "$T/hold.out" "$T/hold.err")"
kill -KILL "$HOST_PID"
wait "$HOST_PID" 2>/dev/null
wait_until 10 grep -q "no host famd took this program's fabric-attached memory back within 1 s" "$T/hold.err" ||
	fail "nothing watched the session: $(cat "$T/hold.err")"
kill "$job" 2>/dev/null
wait "$job" 2>/dev/null
pass "its session is watched: the host famd's end is seen and waited for"
