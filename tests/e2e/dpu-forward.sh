#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A dpu between hosts and a memory node: it creates regions there for its
# hosts, forwards their reads and writes (every byte checked, by famclient
# and by famtest under the shim through a host famd), answers with where
# each region lives so that a host can adopt it on the memory node, and
# frees a host's regions there when the host goes. A malformed request
# closes that connection only, counted; errors keep it.
. "$(dirname "$0")/lib.sh"
require_cmd jq

start_memory mem
start_dpu dpu "$MEM_ADDR" -o dpu.session_grace=0 -o dpu.dynamic_cache=off
fc() { "$FAMCLIENT" -t 5000 "$DPU_ADDR" "$@"; }

fc -n h1 rw 4M 64K 8 >"$T/rw.txt" || fail "round trip: $(cat "$T/rw.txt")"
grep -q verified "$T/rw.txt" || fail "not verified: $(cat "$T/rw.txt")"
wait_until 5 counter_is mem regions 0 || fail "region left on the memory node"
ctl dpu status -j >"$T/st.json"
jq -e '.counters | .reads == 64 and .writes == 64 and .memory_reads == 64
	and .memory_writes == 64 and .rw_errors == 0 and .regions == 0
	and .regions_created == 1 and .regions_freed == 1' "$T/st.json" >/dev/null ||
	fail "dpu counters: $(jq -c .counters "$T/st.json")"
jq -e '.links.memory.read_bytes == 4194304 and .links.memory.write_bytes == 4194304
	and .links.host.ondemand_bytes == 8388608 and .links.memory.background_bytes == 0' \
	"$T/st.json" >/dev/null || fail "links: $(jq -c .links "$T/st.json")"
if [ "$TEST_TRANSPORT" = verbs ]; then
	# One-sided: the memory node's processor serves none of them.
	[ "$(counter mem reads)" = 0 ] && [ "$(counter mem writes)" = 0 ] &&
		jq -e '.forwarding.memory_link.onesided >= 128' "$T/st.json" >/dev/null ||
		fail "memory node counters: $(ctl mem status -j | jq -c .counters), dpu: $(jq -c .forwarding.memory_link "$T/st.json")"
else
	[ "$(counter mem reads)" = 64 ] && [ "$(counter mem writes)" = 64 ] ||
		fail "memory node counters: $(ctl mem status -j | jq -c .counters)"
fi
fc -q rw 16M 2M 8 >/dev/null || fail "2 MiB chunks through the dpu"
pass "4 MiB in 64 KiB chunks and 16 MiB in 2 MiB chunks through the dpu; counters on both sides match"

# The answer says where the region lives; a client of the memory node adopts
# it there with the key and reads what went through the dpu.
minst=$(ctl mem status -j | jq -r .memory.instance)
hold_client "$T/a.txt" -n h2 "$DPU_ADDR" create 1M write 0 1M 5 hold 30 write 0 64K 6
holder=$HOLD_PID
read -r key mi mr <<<"$(sed -n 's/^where key=\([0-9a-f]*\) mem_instance=\([0-9a-f]*\) mem_region=\([0-9]*\) .*/\1 \2 \3/p' "$T/a.txt")"
mkey=$(sed -n 's/.* mem_key=\([0-9a-f]*\)$/\1/p' "$T/a.txt")
[ "$mi" = "$minst" ] || fail "mem_instance $mi, memory node is $minst"
[ "$mr" -gt 0 ] && [ "$((16#$mkey))" != 0 ] || fail "no memory-node location: $(cat "$T/a.txt")"
"$FAMCLIENT" -n h2 "$MEM_ADDR" expect EACCES adopt 0 "$mr" 12345678 adopt 0 "$mr" "$mkey" \
	read 0 1M 5 free >"$T/ad.txt" 2>&1 || fail "adopt on the memory node: $(cat "$T/ad.txt")"
pass "REGION_CREATE through the dpu names the memory node's region; adopted there with its key (a wrong key: EACCES), the dpu's writes read back"

# An exclusive adoption is a fence: what the dpu sends after it is refused.
hold_client "$T/ex.txt" -n h2 "$MEM_ADDR" adopt "$mi" "$mr" "$mkey" exclusive \
	write 0 64K 9 hold 30 read 0 64K 9 free
fencer=$HOLD_PID
[ "$(counter mem handles_revoked)" = 1 ] || fail "no handle revoked"
kill -USR1 "$holder"
wait "$holder" && fail "the dpu's write after the fence was applied"
# (over verbs the dpu's write is one-sided, against a lease the fence
# invalidated: the memory node's RDMA device refuses it, EACCES)
fenced=ENOENT
[ "$TEST_TRANSPORT" = verbs ] && fenced=EACCES
grep -q "write: $fenced" "$T/a.txt" || fail "dpu write after the fence: $(tail -2 "$T/a.txt")"
kill -USR1 "$fencer"
wait "$fencer" || fail "the fence's holder lost its data: $(cat "$T/ex.txt")"
pass "an exclusive adoption revokes the dpu's handle: its next write fails ($fenced), nothing overtakes the fence"
wait_until 5 counter_is mem regions 0 || fail "regions left: $(ctl mem call regions)"
wait_until 5 counter_is dpu regions 0 || fail "dpu regions left"
pass "a host's regions are freed on the memory node when it disconnects (session_grace 0)"

# A host famd that takes the dpu for its memory node: famtest through it.
FAMTEST=$top_builddir/tests/tools/famtest
start_host host "$(scaled 64M)" "$DPU_ADDR" -o famd.op_timeout=10s
shim "$FAMTEST" -f -s "$(scaled 192M)" seq random strided shared split calloc realloc align fork \
	>"$T/famtest.out" 2>&1 || fail "famtest through the dpu: $(tail -5 "$T/famtest.out")"
ctl host status -j | jq -e '.counters | .sigbus == 0 and .fetch_errors == 0 and .fetches > 0
	and .writebacks > 0' >/dev/null || fail "host: $(ctl host status -j | jq -c .counters)"
[ "$(counter dpu memory_reads)" -gt $((1000 / TEST_SCALE)) ] || fail "dpu forwarded few reads"
regions_gone() {
	counter_is mem regions 0 && counter_is dpu regions 0 &&
		[ "$(ctl host status -j | jq .programs.regions)" = 0 ]
}
wait_until 10 regions_gone || fail "regions left: dpu $(counter dpu regions), memory $(counter mem regions)"
pass "famtest (3x the buffer, every access pattern) through host -> dpu -> memory; every region freed after"

# Malformed frames close that connection only, counted; errors keep it.
# (famclient's attacks write raw bytes on a tcp socket; over verbs,
# tests/rxe/verbs-dpu-imm.sh sends the dpu SENDs that lie.)
if [ "$TEST_TRANSPORT" = tcp ]; then
bad=$(counter dpu bad_frames)
for attack in bad-magic truncated huge-length unknown-type bad-flags \
	before-hello reserved-set bad-create second-hello response-frame; do
	fc attack "$attack" >"$T/at.txt" 2>&1 || fail "$attack: $(cat "$T/at.txt")"
	bad=$((bad + 1))
	wait_counter dpu bad_frames "$bad"
	fc -q rw 256K 64K 4 >/dev/null 2>&1 || fail "no service after $attack"
done
for attack in unknown-region past-end shared-write dup-writer foreign-region; do
	fc attack "$attack" >"$T/at.txt" 2>&1 || fail "$attack: $(cat "$T/at.txt")"
done
counter_is dpu bad_frames "$bad" || fail "an error status counted as a bad frame"
pass "10 malformed frames dropped and counted, 5 refused requests answered; the dpu serves on"
else
	fc -n h4 create 4K expect ERANGE read 4K 4K 1 expect ERANGE read 0 8K 1 \
		expect ERANGE write 2K 4K 1 write 0 4K 2 read 0 4K 2 free >"$T/at.txt" 2>&1 ||
		fail "past the end: $(cat "$T/at.txt")"
	fc -n h4 use 4294967280 4K expect ENOENT read 0 4K 1 expect ENOENT write 0 4K 1 \
		>"$T/at.txt" 2>&1 || fail "unknown region: $(cat "$T/at.txt")"
	fc -q rw 256K 64K 4 >/dev/null 2>&1 || fail "no service after the refused requests"
	pass "reads and writes past a region's end (ERANGE) or of an unknown region (ENOENT) refused; the dpu serves on (raw frames need tcp: tests/rxe/verbs-dpu-imm.sh sends the dpu SENDs that lie)"
fi

stop_famd "$DPU_PID" || fail "dpu did not stop cleanly"
grep -q "dpu: stopped" "$T/dpu.log" || fail "no stop line"
pass "dpu stops cleanly"

printf '[famd]\nrole = dpu\n[dpu]\nlisten = 127.0.0.1:0\n' >"$T/empty.conf"
"$FAMD" -f -c "$T/empty.conf" -o famd.admin_socket="$T/empty.sock" 2>"$T/empty.log" &&
	fail "a dpu without memory nodes started"
grep -q "memory_nodes is empty" "$T/empty.log" || fail "no reason given: $(cat "$T/empty.log")"
pass "a dpu without memory_nodes refuses to start and says why"

# A dpu no memory node has answered yet (just started; here its memory famd
# is stopped) refuses hosts, saying why, rather than failing their every
# request; once one has answered, it serves them.
start_memory mem2
kill -STOP "$MEM_PID"
sed "s|^memory_nodes = .*|memory_nodes = $MEM_ADDR|" "$T/dpu.conf" >"$T/early.conf"
start_famd early "$T/early.conf"
early=$(ctl early status -j | jq -er .dpu.listen) || { kill -CONT "$MEM_PID"; fail "no dpu address"; }
"$FAMCLIENT" -t 3000 "$early" rw 256K 64K 4 >"$T/early.txt" 2>&1 &&
	{ kill -CONT "$MEM_PID"; fail "served with no memory node: $(cat "$T/early.txt")"; }
kill -CONT "$MEM_PID"
grep -q "refused or failed: EHOSTDOWN" "$T/early.txt" || fail "refusal: $(cat "$T/early.txt")"
grep -q "is early: no memory node has answered yet" "$T/early.log" || fail "not logged"
wait_until 10 dpu_nodes_up early || fail "the memory node did not answer the dpu"
"$FAMCLIENT" -q -t 5000 "$early" rw 256K 64K 4 >/dev/null || fail "not served once the memory node answered"
pass "a dpu refuses hosts (EHOSTDOWN) until a memory node has answered it, then serves them"
