#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The host role over verbs: a program under libfamshim.so (famtest) gets its
# data back through a host famd and a memory famd that speak verbs, with a
# working set four times the buffer; with completion errors injected, the
# host reconnects, resumes its session, gets new leases and the data is
# still right; when the host famd is killed the program gets SIGBUS and the
# memory node notices.
. "$(dirname "$0")/lib-rxe.sh"
require_cmd jq

# What the host role needs of the guest's kernel (6.1): userfaultfd with
# write protection on shmem (5.19+), /dev/userfaultfd (6.1+).
[ -c /dev/userfaultfd ] || fail "no /dev/userfaultfd in this kernel ($(uname -r))"
start_memory_verbs m
start_host_verbs h 2M "$MEM_ADDR" -o verbs.qps_per_peer=2 -o host.max_fetches=32

shim "$FAMTEST" -f -s 8M -t 4 -n 64 seq random shared calloc realloc many \
	>"$T/famtest.out" 2>&1 || fail "famtest: $(cat "$T/famtest.out")"
cat "$T/famtest.out"
grep -h 'userfaultfd: kernel features' "$T/h.log"
[ "$(counter h fetches)" -gt 0 ] && [ "$(counter h writebacks)" -gt 0 ] ||
	fail "no fetches or write-backs: $(ctl h status -j | jq -c .counters)"
[ "$(counter m reads)" = 0 ] && [ "$(counter m writes)" = 0 ] ||
	fail "chunks went through the memory node's CPU"
pass "famtest over verbs (8M through a 2M buffer): every byte right, chunks moved one-sided"

[ "${RXE_TEST_MODE:-loopback}" = veth ] && exit 0

# Completion errors injected on the host (1 in 100): it reconnects,
# resumes its session and asks for new leases; the data stays right. A run
# may fail only because its allocation fell back to libc (an error hit its
# REGION_CREATE); it must never read a wrong word. Required: a run that
# passed while errors were injected and the session resumed.
stop_famd "$HOST_PID" || fail "host did not stop"
start_host_verbs h2 2M "$MEM_ADDR" -o verbs.inject_error_ppm=10000
ok=0
for attempt in 1 2 3 4 5; do
	inj0=$(grep -c 'injecting an error' "$T/h2.log")
	res0=$(grep -c 'session resumed' "$T/h2.log")
	shim "$FAMTEST" -f -s 8M -t 2 seq random >"$T/inj.out" 2>&1
	rc=$?
	grep -q 'wrong word\|should be zero' "$T/inj.out" && fail "wrong data: $(cat "$T/inj.out")"
	inj=$(( $(grep -c 'injecting an error' "$T/h2.log") - inj0 ))
	res=$(( $(grep -c 'session resumed' "$T/h2.log") - res0 ))
	echo "run $attempt: famtest exit $rc, $inj errors injected, $res resumes"
	if [ "$rc" = 0 ] && [ "$inj" -gt 0 ] && [ "$res" -gt 0 ]; then
		ok=1
		break
	fi
done
[ "$ok" = 1 ] || fail "no run passed with errors injected: $(cat "$T/inj.out")"
grep -q 'asked for [0-9]* new lease' "$T/h2.log" || fail "no new lease was asked for"
pass "with $inj injected completion errors the host reconnected $res times, re-leased, and famtest's data stayed right"
stop_famd "$HOST_PID" || fail "host did not stop"

# The host famd is killed under reading threads, and does not come back
# within FAM_RESTART_WAIT (2 s here: the memory node keeps the host's
# session detached for session_grace, 30 s, and the check below must come
# within it).
start_host_verbs h3 2M "$MEM_ADDR"
detached=$(counter m sessions_detached)
FAM_RESTART_WAIT=2 shim "$FAMLOST" -s 8M -t 2 -w 60 >"$T/lost.out" 2>"$T/lost.err" &
lost=$!
wait_until 60 grep -q '^ready' "$T/lost.out" || fail "famlost never got ready: $(cat "$T/lost.out" "$T/lost.err")"
sleep 0.5
kill -KILL "$HOST_PID"
wait "$HOST_PID" 2>/dev/null
wait "$lost"
rc=$?
[ "$rc" = 0 ] || fail "famlost exit $rc: $(cat "$T/lost.out" "$T/lost.err")"
wait_until 20 counter_is m sessions_detached $((detached + 1)) ||
	fail "the memory node did not notice the killed host"
pass "host famd killed: SIGBUS in the program, the memory node noticed the lost connection"
stop_famd "$MEM_PID" || fail "the memory famd did not stop cleanly"
