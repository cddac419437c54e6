#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A program that brings its own malloc (as programs linked with jemalloc
# do) and maps large blocks with mmap() while its allocator holds its
# lock. The shim opened the session from inside that mmap(), and starting
# the session's watchdog thread called the program's calloc() for the
# thread's TLS: the program waited on its own lock forever. Such a
# program's mmap() calls stay the kernel's unless FAM_MMAP=1; with it,
# they are fabric-attached memory, and the watchdog thread was started
# before any lock was taken.
. "$(dirname "$0")/lib.sh"
require_cmd jq

OWN=$top_builddir/tests/tools/famownalloc
start_memory mem
start_host host 8M "$MEM_ADDR"

timeout 60 env LD_PRELOAD="$SHIM" "$OWN" -l -t 2 >"$T/own.out" 2>&1 ||
	fail "its own malloc, FAM_MMAP unset: exit $?: $(tail -3 "$T/own.out")"
pass "a program with its own malloc runs under the shim; its mappings stay the kernel's"

before=$(counter host faults_missing)
timeout 60 env FAM_MMAP=1 LD_PRELOAD="$SHIM" "$OWN" -f -t 2 >"$T/own.out" 2>&1 ||
	fail "its own malloc, FAM_MMAP=1: exit $? (124: it hung): $(tail -3 "$T/own.out")"
[ "$(counter host faults_missing)" -gt "$before" ] ||
	fail "no fault served for its blocks"
[ "$(counter host evictions_dirty)" -gt 0 ] ||
	fail "64 MiB written through an 8 MiB buffer, nothing written back"
pass "with FAM_MMAP=1, its allocator's mmap() under its own lock is fabric-attached memory: no hang, data right"

timeout 60 env FAM_MMAP=1 LD_PRELOAD="$SHIM" "$OWN" -f -t 1 >"$T/own.out" 2>&1 ||
	fail "one thread, FAM_MMAP=1: exit $?: $(tail -3 "$T/own.out")"
pass "and from the program's only thread"
