#!/bin/bash
# Task aggregation and asynchronous forwarding: with aggregate = on, requests
# that arrive together leave for the memory node as one batch with one
# flush; with it off, one flush each. With async = on the memory-node side
# runs on its own thread behind a queue. In all four combinations every
# byte comes back as written, from famclient with 32 requests in flight and
# from famtest's threads through a host famd, and from three programs on
# each of two more hosts at once.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAMTEST=$top_builddir/tests/tools/famtest
start_memory mem
fwd() { ctl "$1" status -j | jq -er ".forwarding.$2"; }

for async in off on; do
	for agg in off on; do
		name=dpu-$async-$agg
		start_dpu "$name" "$MEM_ADDR" -o dpu.async=$async -o dpu.aggregate=$agg \
			-o dpu.dynamic_cache=off
		addr=$DPU_ADDR
		"$FAMCLIENT" -q "$addr" rw 32M 64K 32 >"$T/rw.txt" 2>&1 ||
			fail "async=$async aggregate=$agg: $(cat "$T/rw.txt")"
		ctl "$name" status -j >"$T/st.json"
		reqs=$(jq '.counters.memory_reads + .counters.memory_writes' "$T/st.json")
		flushes=$(jq .forwarding.flushes "$T/st.json")
		if [ $agg = on ]; then
			jq -e '.forwarding | .aggregate and .batch_max > 1 and .batches > 0
				and .batched_requests >= .batches' "$T/st.json" >/dev/null ||
				fail "no batches: $(jq -c .forwarding "$T/st.json")"
			[ "$flushes" -lt $((reqs / 4)) ] ||
				fail "aggregated, yet $flushes flushes for $reqs requests"
		else
			jq -e '.forwarding | (.aggregate | not) and .batches == 0' "$T/st.json" >/dev/null ||
				fail "batches without aggregation: $(jq -c .forwarding "$T/st.json")"
			[ "$flushes" -ge "$reqs" ] || fail "not aggregated, yet $flushes flushes for $reqs requests"
		fi
		if [ $async = on ]; then
			jq -e '.forwarding | .async and .queue_to_back_max >= 1 and .queue_to_front_max >= 1' \
				"$T/st.json" >/dev/null || fail "async queues: $(jq -c .forwarding "$T/st.json")"
		else
			jq -e '.forwarding | (.async | not) and .queue_to_back_max == 0' "$T/st.json" \
				>/dev/null || fail "queues without async: $(jq -c .forwarding "$T/st.json")"
		fi
		jq -e '.forwarding | .requests_in_flight == 0 and .memory_in_flight == 0' "$T/st.json" \
			>/dev/null || fail "requests left in flight: $(jq -c .forwarding "$T/st.json")"
		pass "async=$async aggregate=$agg: 32 MiB verified; $reqs requests, $flushes flushes, mean batch $(jq -r '.forwarding.batch_mean * 10 | floor / 10' "$T/st.json")"
	done
done

# Threads of a program through a host: concurrent faults are batched.
start_host host 64M "$MEM_ADDR" -o host.dpu="$addr" -o host.path=dpu -o famd.op_timeout=10s
shim "$FAMTEST" -f -s 192M -t 8 seq shared split random >"$T/ft.txt" 2>&1 ||
	fail "famtest through async + aggregate: $(tail -3 "$T/ft.txt")"
[ "$(fwd dpu-on-on batch_max)" -gt 1 ] || fail "a host's concurrent requests were not batched"
pass "famtest's 8 threads through the dpu (async, aggregated): every byte verified, batches up to $(fwd dpu-on-on batch_max)"

# batch_limit is reloadable (aggregate too; here it is set with -o, which
# a reload keeps).
sed -i 's/^memory_nodes = .*/&\nbatch_limit = 4/' "$T/dpu-on-on.conf"
ctl dpu-on-on reload >/dev/null || fail "reload"
[ "$(fwd dpu-on-on batch_limit)" = 4 ] || fail "batch_limit = 4 not applied by reload"
ctl dpu-on-on stats-reset >/dev/null || fail "stats-reset"
"$FAMCLIENT" -q "$addr" rw 8M 64K 32 >/dev/null || fail "rw after the reload"
[ "$(fwd dpu-on-on batch_max)" -le 4 ] && [ "$(fwd dpu-on-on batch_max)" -ge 2 ] ||
	fail "batch_limit 4, yet batches of $(fwd dpu-on-on batch_max)"
pass "batch_limit = 4 by reload: batches of at most 4 from then on"

# Two more hosts share the dpu, three programs each at once: every byte
# verified, each host its own session, both hosts' requests in batches.
ctl dpu-on-on stats-reset >/dev/null
sessions=$(ctl dpu-on-on status -j | jq '[.peers[] | select(.role == "host")] | length')
pids=()
for h in ha hb; do
	start_host "$h" 32M "$MEM_ADDR" -o host.dpu="$addr" -o host.path=dpu \
		-o famd.node_name="$h" -o famd.op_timeout=10s
	for i in 1 2 3; do
		shim "$FAMTEST" -f -s 64M -t 4 -S "$i" seq random shared split >"$T/$h-$i.txt" 2>&1 &
		pids+=($!)
	done
done
for p in "${pids[@]}"; do
	wait "$p" || fail "a program on hosts ha/hb: $(tail -n 2 "$T"/h[ab]-*.txt)"
done
ctl dpu-on-on status -j >"$T/st.json"
jq -e --argjson s "$sessions" '[.peers[] | select(.role == "host")] | length == $s + 2' "$T/st.json" \
	>/dev/null || fail "host sessions: $(jq -c '[.peers[] | select(.role == "host")]' "$T/st.json")"
for h in ha hb; do
	jq -e --arg h "$h" '[.peers[] | select(.role == "host" and .name == $h and .state == "connected")]
		| length == 1' "$T/st.json" >/dev/null || fail "no session of host $h"
	[ "$(ctl "$h" status -j | jq '.counters.ops_dpu')" -gt 1000 ] || fail "host $h sent little through the dpu"
done
jq -e '.counters.rw_errors == 0 and .forwarding.batch_max > 1' "$T/st.json" >/dev/null ||
	fail "dpu: $(jq -c '{counters: .counters.rw_errors, fwd: .forwarding}' "$T/st.json")"
pass "hosts ha and hb, three programs each at once, through one dpu: every byte verified, a session per host, batches up to $(jq .forwarding.batch_max "$T/st.json")"
