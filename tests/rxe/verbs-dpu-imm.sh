#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A host whose SENDs to the dpu carry immediate data that does not name the
# type in their header (famclient -B: the type byte flipped, so also a type
# nobody knows) is refused: the violation is counted, that connection alone
# is closed, and the dpu goes on serving another host, whose data comes
# back right.
. "$(dirname "$0")/lib-rxe.sh"
require_cmd jq

start_memory_verbs m
start_dpu d "$MEM_ADDR" -o famd.transport=verbs -o dpu.listen="$SRV_IP:0" -o dpu.async=off

# A good client holds its region through the dpu while the bad one comes.
"$FAMCLIENT" -T verbs "$DPU_ADDR" create 1M write 0 256K 7 hold 120 read 0 256K 7 \
	>"$T/good.txt" 2>&1 &
good=$!
wait_until 60 grep -q '^holding' "$T/good.txt" || fail "good client: $(cat "$T/good.txt")"

bf0=$(counter d bad_frames)
for step in "create 1M" "stats"; do
	if fc -B -t 5000 "$DPU_ADDR" $step >"$T/bad.txt" 2>&1; then
		fail "a SEND with the wrong immediate data was served: $(cat "$T/bad.txt")"
	fi
done
bad_counted() { [ "$(counter d bad_frames)" -ge $((bf0 + 2)) ]; }
wait_until 20 bad_counted || fail "bad_frames $(counter d bad_frames), expected $((bf0 + 2))"
[ "$(grep -c 'protocol violation.*immediate data' "$T/d.log")" -ge 2 ] ||
	fail "no violation logged: $(grep -i violation "$T/d.log")"

# The good client's connection stayed up: it goes on and reads its data.
kill -USR1 "$good"
fc "$DPU_ADDR" create 1M write 0 512K 9 read 0 512K 9 free >"$T/good2.txt" 2>&1 ||
	fail "a second host after the bad one: $(cat "$T/good2.txt")"
wait "$good" || fail "the good client's held connection: $(cat "$T/good.txt")"
pass "SENDs whose immediate data disagree with their header: refused, $(( $(counter d bad_frames) - bf0 )) bad frames counted, that peer disconnected, other hosts served"
stop_famd "$DPU_PID" || fail "the dpu famd did not stop cleanly"
stop_famd "$MEM_PID" || fail "the memory famd did not stop cleanly"
