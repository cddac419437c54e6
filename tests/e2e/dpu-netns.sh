#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The three roles on three network namespaces, as on three machines: the
# host reaches the dpu over one veth link and the memory node over another
# (its direct path), the dpu reaches the memory node over a third, and the
# dpu-memory link is shaped (tc tbf) slower than the host-dpu link. Every
# access pattern of famtest goes through the dpu with every byte checked,
# and the chunks really travel host -> dpu -> memory node: the dpu-memory
# veth carries them, the host-memory one next to nothing. The dpu killed
# mid-run: the host goes direct over its own link and loses nothing.
# Needs root and ip netns; skips otherwise.
. "$(dirname "$0")/lib.sh"
require_cmd jq
require_cmd ip
require_cmd tc

[ "$(id -u)" = 0 ] || skip "network namespaces need root"
netns_make famd h d m
veth hd h 10.231.1.1 d 10.231.1.2
veth dm d 10.231.2.1 m 10.231.2.2
veth hm h 10.231.3.1 m 10.231.3.2
# The memory network: 2 Gbit/s each way, the host-dpu link unshaped.
for side in "d dma" "m dmb"; do
	set -- $side
	tc -n "$NS$1" qdisc add dev "$NS$2" root tbf rate 2gbit burst 1mb latency 50ms ||
		fail "tc on $NS$2"
done
# bytes NS IF: bytes sent and received on an interface.
bytes() {
	ip -n "$NS$1" -j -s link show "$NS$2" | jq '.[0].stats64 | .rx.bytes + .tx.bytes'
}

FAMTEST=$top_builddir/tests/tools/famtest
# A memory node other nodes reach needs a secret; every role has it.
printf 'netns-secret\n' >"$T/secret"
chmod 600 "$T/secret"
S=(-o famd.secret_file="$T/secret")
FAMD_NETNS=${NS}m start_memory mem -o memory.listen=0.0.0.0:0 "${S[@]}"
port=${MEM_ADDR##*:}
FAMD_NETNS=${NS}d start_dpu dpu 10.231.2.2:$port -o dpu.listen=10.231.1.2:0 "${S[@]}"
FAMD_NETNS=${NS}h start_host host 64M 10.231.3.2:$port -o host.dpu="$DPU_ADDR" \
	-o host.path=dpu -o famd.op_timeout=10s "${S[@]}"
hc() { ctl host status -j | jq -er ".counters.$1"; }

dm0=$(bytes m dmb)
hm0=$(bytes m hmb)
shim "$FAMTEST" -f -s 192M -n 1000 seq random strided shared split calloc realloc align many fork \
	>"$T/f1.out" 2>&1 || fail "famtest across namespaces: $(tail -3 "$T/f1.out")"
[ "$(hc ops_direct)" = 0 ] && [ "$(hc sigbus)" = 0 ] || fail "host: $(ctl host status -j | jq -c .counters)"
mem_link=$(ctl dpu status -j | jq '.links.memory.read_bytes + .links.memory.write_bytes')
dm=$(($(bytes m dmb) - dm0))
hm=$(($(bytes m hmb) - hm0))
[ "$mem_link" -gt $((64 << 20)) ] && [ "$dm" -ge "$mem_link" ] ||
	fail "the dpu-memory link carried $dm bytes, the dpu counts $mem_link"
[ "$hm" -lt $((dm / 20)) ] || fail "the host-memory link carried $hm bytes beside $dm through the dpu"
pass "famtest's every pattern across three namespaces through the dpu: $((dm >> 20)) MiB on the dpu-memory veth (shaped), $((hm >> 10)) KiB on the host's own link to the memory node"

# The dpu dies mid-run: the host goes direct over its own link.
shim "$FAMTEST" -f -s 192M seq random strided shared >"$T/f2.out" 2>&1 &
ft=$!
base=$(hc ops_dpu)
more_dpu_ops() { [ "$(hc ops_dpu)" -gt "$((base + 500))" ]; }
wait_until 30 more_dpu_ops || fail "no traffic through the dpu"
hm0=$(bytes m hmb)
kill -KILL "$DPU_PID"
wait "$DPU_PID" 2>/dev/null
wait "$ft" || fail "famtest with the dpu killed: $(tail -3 "$T/f2.out")"
hm=$(($(bytes m hmb) - hm0))
[ "$(hc sigbus)" = 0 ] && [ "$(hc ops_direct)" -gt 0 ] ||
	fail "after the dpu died: $(ctl host status -j | jq -c .counters)"
[ "$hm" -gt $((16 << 20)) ] || fail "only $hm bytes on the host's own link to the memory node"
pass "dpu killed mid-run: the host went direct over its own link ($((hm >> 20)) MiB), famtest verified every byte"
