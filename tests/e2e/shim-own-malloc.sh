#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A program that brings its own malloc (as programs linked with jemalloc
# do) and maps large blocks with mmap() while its allocator holds its
# lock. The shim opened the session from inside that mmap(), and starting
# the session's watchdog thread called the program's calloc() for the
# thread's TLS: the program waited on its own lock forever. Now the
# watchdog thread is started before any lock is taken and watches the
# session once one opens. Its allocator's fork handler, registered before
# any of libfam's, touched its metadata (fabric-attached memory) in a
# forked child before the child had its copy: SIGSEGV. The shim now puts
# libfam's child handler ahead of every other.
. "$(dirname "$0")/lib.sh"
require_cmd jq

OWN=$top_builddir/tests/tools/famownalloc

# holding NAME CMD...: starts CMD in the background (stdout to
# $T/NAME.out, stderr to $T/NAME.err) and waits until it prints "ready":
# it holds its fabric-attached memory.
holding() {
	local name=$1
	shift
	fresh "$T/$name.out" "$T/$name.err"
	"$@" >"$T/$name.out" 2>"$T/$name.err" &
	HOLD_JOB=$!
	wait_until 30 grep -q '^ready' "$T/$name.out" ||
		fail "$name: $(cat "$T/$name.out" "$T/$name.err")"
}

# watched N NAME: kills the host famd under what holding NAME started, and
# wants N processes' watchdogs to say that no host famd took their memory
# back within 1 s (FAM_RESTART_WAIT=1); then stops it.
watched() {
	local n=$1 name=$2
	kill -KILL "$HOST_PID"
	wait "$HOST_PID" 2>/dev/null
	wait_until 10 eval '[ "$(grep -c "no host famd took this program.s fabric-attached memory back within 1 s" "$T/$name.err")" -ge "$n" ]' ||
		fail "$name: fewer than $n sessions watched: $(cat "$T/$name.err")"
	kill "$HOLD_JOB" 2>/dev/null
	wait "$HOLD_JOB" 2>/dev/null
}
start_memory mem
start_host host 8M "$MEM_ADDR"

timeout -k 5 60 env FAM_MMAP=0 LD_PRELOAD="$SHIM" "$OWN" -l -t 2 >"$T/own.out" 2>&1 ||
	fail "its own malloc, FAM_MMAP=0: exit $?: $(tail -3 "$T/own.out")"
pass "with FAM_MMAP=0, a program with its own malloc runs under the shim; its mappings stay the kernel's"

before=$(counter host faults_missing)
timeout -k 5 60 env LD_PRELOAD="$SHIM" "$OWN" -f -t 2 >"$T/own.out" 2>&1 ||
	fail "its own malloc: exit $? (124: it hung): $(tail -3 "$T/own.out")"
[ "$(counter host faults_missing)" -gt "$before" ] ||
	fail "no fault served for its blocks"
[ "$(counter host evictions_dirty)" -gt 0 ] ||
	fail "64 MiB written through an 8 MiB buffer, nothing written back"
pass "its allocator's mmap() under its own lock is fabric-attached memory: no hang, data right"

# fork() after its allocator's metadata and a 16 MiB block went to famd
# (twice the buffer): the allocator's child handler counts the fork there.
timeout -k 5 60 env LD_PRELOAD="$SHIM" "$OWN" -f -C -s 16M >"$T/own.out" 2>&1 ||
	fail "fork after its blocks: exit $? (139 or status 0xb: SIGSEGV in the allocator's child handler): $(tail -3 "$T/own.out")"
grep -q '^fork ok' "$T/own.out" || fail "fork: $(cat "$T/own.out")"
pass "a child forked with its allocator's metadata in famd has it before the allocator's fork handler runs; parent and child each keep their own data"

# Its allocator set up by the shim's own pthread_create() (the spare's),
# mapping its metadata then, as jemalloc does: that mapping stays the
# kernel's (the shim held libfam's lock there and waited on it).
timeout -s KILL 30 env FAMOWNALLOC_META_FIRST=1 LD_PRELOAD="$SHIM" "$OWN" -f -t 1 \
	>"$T/own.out" 2>&1 ||
	fail "metadata mapped at its allocator's first call: exit $? (137: it hung): $(tail -3 "$T/own.out")"
pass "an allocator that maps its metadata at its first call, from the shim's pthread_create(): no hang"

timeout -k 5 60 env LD_PRELOAD="$SHIM" "$OWN" -f -t 1 >"$T/own.out" 2>&1 ||
	fail "one thread: exit $?: $(tail -3 "$T/own.out")"
pass "and from one thread"

timeout -k 5 60 env LD_PRELOAD="$SHIM" "$OWN" -f -t 1 -F >"$T/own.out" 2>&1 ||
	fail "forked first: exit $? (124: it hung): $(tail -3 "$T/own.out")"
grep -q '^child ok' "$T/own.out" || fail "the child did not pass: $(cat "$T/own.out")"
pass "a child forked before any session opens its own from inside its allocator's mmap(): no hang, data right"

# The session is watched: the host famd killed while the program holds
# its blocks, the spare watchdog sees it go and waits for it (1 s).
holding hold env FAM_RESTART_WAIT=1 LD_PRELOAD="$SHIM" \
	timeout -k 5 60 "$OWN" -f -t 1 -w 20
watched 1 hold
pass "its session is watched: the host famd's end is seen and waited for"

# A forked child's session is watched too (by a spare of its own, started
# once its allocator works again): with the host famd killed, parent and
# child each say so.
start_host host 8M "$MEM_ADDR"
holding fork env FAM_RESTART_WAIT=1 LD_PRELOAD="$SHIM" \
	timeout -k 5 60 "$OWN" -f -C -w 20
watched 2 fork
pass "a forked child's session is watched too"

# An allocator library behind the shim (Debian's libjemalloc.so.2), and a
# library whose constructor allocates before the shim's (libfamearly.so):
# the session opens before the shim's constructor, so there is no spare,
# and a forked child's later handler starts its watchdog thread, after
# the allocator's handler. A shell's subshell holding its copy of that
# memory is watched (the shell and the subshell each say so; timeout runs
# outside the shim, or it would have a session too).
JE=$(ls /usr/lib/*/libjemalloc.so.2 2>/dev/null | head -n 1)
EARLY=$top_builddir/tests/tools/.libs/libfamearly.so
[ -f "$EARLY" ] || fail "no $EARLY"
if [ -z "$JE" ]; then
	echo "# not checked: the watch of a child whose allocator library's handler runs before its watchdog starts (no libjemalloc.so.2: Debian package libjemalloc2, which scripts/install-deps installs)"
	exit 0
fi
start_host host 8M "$MEM_ADDR"
mkfifo "$T/fifo"
holding sub timeout -k 5 60 env FAM_RESTART_WAIT=1 \
	LD_PRELOAD="$SHIM $EARLY $JE" bash -c '
	( exec 3<>"$0"; echo ready; read -r -t 20 x <&3 ) &
	wait' "$T/fifo"
[ "$(counter host forks_adopted)" -ge 1 ] ||
	fail "the subshell did not adopt the shell's copy"
watched 2 sub
pass "with its allocator behind the shim and its first FAM from before the shim's constructor, a forked child's session is watched"
