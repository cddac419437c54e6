#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The memory role over verbs, driven by famclient: one-sided round trips
# (registered and bounced buffers) that the memory node's CPU never sees;
# an rkey is refused once its lease ends (REGION_FREE), on another session's
# connection, and after its connection dies; a resumed session gets a new
# lease; a shared region is read-only for the hardware; a wrong secret is
# refused; a killed client is noticed.
. "$(dirname "$0")/lib-rxe.sh"
require_cmd jq

printf 's3cret\n' >"$T/secret"
chmod 600 "$T/secret"
start_memory_verbs m -o famd.secret_file="$T/secret" -o memory.session_grace=60s
S=(-s s3cret)

# Round trips, registered (-R) and through the transport's bounce slabs.
fc "${S[@]}" -R "$MEM_ADDR" rw 4M 65536 16 >"$T/rw1.txt" 2>&1 || fail "rw -R: $(cat "$T/rw1.txt")"
fc "${S[@]}" "$MEM_ADDR" rw 3M 100000 4 >"$T/rw2.txt" 2>&1 || fail "rw: $(cat "$T/rw2.txt")"
grep -q '^lease addr=' "$T/rw1.txt" || fail "no lease in the answer: $(cat "$T/rw1.txt")"
grep -h '^rw:' "$T/rw1.txt" "$T/rw2.txt"
[ "$(counter m reads)" = 0 ] && [ "$(counter m writes)" = 0 ] ||
	fail "the memory node served reads or writes itself: $(ctl m status -j | jq -c .counters)"
pass "one-sided round trips verified; the memory node's CPU saw none of them"

# The lease ends with REGION_FREE: the old rkey reads nothing.
fc "${S[@]}" "$MEM_ADDR" create 1M write 0 1M 5 read 0 1M 5 free \
	expect EACCES read 0 4096 5 >"$T/stale.txt" 2>&1 || fail "stale rkey: $(cat "$T/stale.txt")"
grep -q 'read: EACCES as expected' "$T/stale.txt" || fail "$(cat "$T/stale.txt")"
pass "a freed region's rkey is refused (EACCES)"

# A held session: its rkey is useless on another connection.
hold_client "$T/a.txt" "${S[@]}" -T verbs "$MEM_ADDR" create 1M write 0 65536 9 hold 120
id=$(sed -n 's/^region id=\([0-9]*\) .*/\1/p' "$T/a.txt")
lease=$(sed -n 's/^lease addr=\([0-9a-f]*\) rkey=\([0-9a-f]*\)$/\1:\2/p' "$T/a.txt")
token=$(sed -n 's/^hello session=\([0-9a-f]*\) .*/\1/p' "$T/a.txt")
[ -n "$id" ] && [ -n "$lease" ] && [ -n "$token" ] || fail "no region, lease or session: $(cat "$T/a.txt")"
fc "${S[@]}" "$MEM_ADDR" use "$id" 1M lease="$lease" expect EACCES read 0 4096 9 \
	>"$T/b.txt" 2>&1 || fail "other session with the rkey: $(cat "$T/b.txt")"
fc "${S[@]}" "$MEM_ADDR" use "$id" 1M expect ENOENT read 0 4096 9 \
	>"$T/c.txt" 2>&1 || fail "other session, two-sided: $(cat "$T/c.txt")"
pass "another session cannot use the rkey (EACCES) nor the region (ENOENT)"

# The holder is killed: the memory node notices; its lease died with it.
detached=$(counter m sessions_detached)
kill -KILL "$HOLD_PID"
wait "$HOLD_PID" 2>/dev/null
wait_counter m sessions_detached $((detached + 1))
fc "${S[@]}" -r "$token" "$MEM_ADDR" use "$id" 1M lease="$lease" expect EACCES \
	read 0 4096 9 >"$T/d.txt" 2>&1 || fail "resumed, old lease: $(cat "$T/d.txt")"
fc "${S[@]}" -r "$token" "$MEM_ADDR" use "$id" 1M lease read 0 65536 9 \
	>"$T/e.txt" 2>&1 || fail "resumed, new lease: $(cat "$T/e.txt")"
grep -q '^lease addr=' "$T/e.txt" || fail "no new lease: $(cat "$T/e.txt")"
[ "$(counter m sessions_resumed)" -ge 2 ] || fail "sessions were not resumed"
pass "a killed client is noticed; its rkey dies with its connection; REGION_LEASE gives a new one"

# A shared region is read-only for the hardware too.
fc "${S[@]}" "$MEM_ADDR" create 64K name=ro shared read 0 4096 0 expect EACCES \
	write 0 4096 1 >"$T/ro.txt" 2>&1 || fail "shared: $(cat "$T/ro.txt")"
pass "a shared region's lease allows RDMA READ only"

# A wrong secret is refused, and counted.
refused=$(counter m hello_refusals)
fc -s wrong "$MEM_ADDR" stats >"$T/w.txt" 2>&1 && fail "a wrong secret was accepted"
grep -q 'Permission denied\|EACCES' "$T/w.txt" || fail "refusal: $(cat "$T/w.txt")"
wait_counter m hello_refusals $((refused + 1))
pass "a wrong secret is refused before anything is lent"

# Still serving.
fc "${S[@]}" "$MEM_ADDR" rw 1M >/dev/null 2>&1 || fail "the memory node stopped serving"
[ "$(counter m completion_errors)" = 0 ] || fail "completion errors on the memory node"
stop_famd "$MEM_PID" || fail "the memory famd did not stop cleanly"
pass "the memory node goes on serving and stops cleanly"
