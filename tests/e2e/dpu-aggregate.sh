#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
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
# Sizes scale (lib.sh's scaled), and famtest's blocks with them: it makes
# them just above the shim's threshold, which goes down alike.
# FAMTEST_THREADS, when set, is the number of threads of every famtest (8
# for the first, 4 for the others); FAMTEST_PROGRAMS the number of programs
# on each of hosts ha and hb (3).
fenv=()
[ "$TEST_SCALE" = 1 ] || fenv=(FAM_THRESHOLD=$((1024 / TEST_SCALE))K)
start_memory mem
fwd() { ctl "$1" status -j | jq -er ".forwarding.$2"; }
# famclient's round trip: 4 MiB at the least (128 requests), enough for
# batches to form when requests trickle in over a slow link.
rwmib=$(mib 32M)
[ "$rwmib" -ge 4 ] || rwmib=4

for async in off on; do
	for agg in off on; do
		name=dpu-$async-$agg
		start_dpu "$name" "$MEM_ADDR" -o dpu.async=$async -o dpu.aggregate=$agg \
			-o dpu.dynamic_cache=off
		addr=$DPU_ADDR
		"$FAMCLIENT" -q "$addr" rw "${rwmib}M" 64K 32 >"$T/rw.txt" 2>&1 ||
			fail "async=$async aggregate=$agg: $(cat "$T/rw.txt")"
		ctl "$name" status -j >"$T/st.json"
		# Every check in one jq (each process costs seconds in the
		# emulated Soft-RoCE guest): the first that fails, or "ok".
		# Over verbs a forwarded request arrives as its own receive
		# completion, so fewer come together than over tcp's stream,
		# and how many depends on how the (soft) device paces them:
		# aggregated means fewer flushes than requests, and work
		# requests chained behind fewer doorbells; each request went
		# one-sided against the dpu's lease (none served by the memory
		# node's processor), each alone behind its doorbell without
		# aggregation.
		res=$(jq -r --arg agg $agg --arg async $async --arg tr "$TEST_TRANSPORT" '
			(.counters.memory_reads + .counters.memory_writes) as $reqs |
			.forwarding as $f | $f.memory_link as $ml |
			if $agg == "on" and ($f.aggregate and $f.batch_max > 1 and $f.batches > 0
			    and $f.batched_requests >= $f.batches | not) then "no batches"
			elif $agg == "on" and $tr == "tcp" and $f.flushes >= ($reqs / 4 | floor) then
				"aggregated, yet \($f.flushes) flushes for \($reqs) requests"
			elif $agg == "on" and $tr == "verbs" and ($f.flushes >= $reqs
			    or $ml.work_requests <= $ml.doorbells) then
				"aggregated, yet \($f.flushes) flushes, \($ml.doorbells) doorbells for \($reqs) requests"
			elif $agg == "off" and ($f.aggregate or $f.batches > 0) then "batches without aggregation"
			elif $agg == "off" and $f.flushes < $reqs then
				"not aggregated, yet \($f.flushes) flushes for \($reqs) requests"
			elif $agg == "off" and $tr == "verbs" and $ml.work_requests != $ml.doorbells then
				"not aggregated, yet work requests chained"
			elif $async == "on" and ($f.async and $f.queue_to_back_max >= 1
			    and $f.queue_to_front_max >= 1 | not) then "async queues"
			elif $async == "off" and ($f.async or $f.queue_to_back_max != 0) then "queues without async"
			elif $f.requests_in_flight != 0 or $f.memory_in_flight != 0 then "requests left in flight"
			elif $tr == "verbs" and ($ml.onesided != $reqs or $ml.twosided != 0) then
				"not one-sided"
			else "ok \($reqs) \($f.flushes) \($f.batch_mean * 10 | floor / 10) \($ml.work_requests) \($ml.doorbells)"
			end' "$T/st.json")
		set -- $res
		[ "$1" = ok ] || fail "async=$async aggregate=$agg: $res: $(jq -c .forwarding "$T/st.json")"
		over="$2 requests, $3 flushes, mean batch $4"
		[ "$TEST_TRANSPORT" = verbs ] && over="$over; one-sided, $5 work requests behind $6 doorbells"
		pass "async=$async aggregate=$agg: $rwmib MiB verified; $over"
	done
done

# Threads of a program through a host: concurrent faults are batched.
start_host host "$(scaled 64M)" "$MEM_ADDR" -o host.dpu="$addr" -o host.path=dpu -o famd.op_timeout=10s
shim env ${fenv[@]+"${fenv[@]}"} "$FAMTEST" -f -s "$(scaled 192M)" seq shared split random >"$T/ft.txt" 2>&1 ||
	fail "famtest through async + aggregate: $(tail -3 "$T/ft.txt")"
max=$(fwd dpu-on-on batch_max)
[ "$max" -gt 1 ] || fail "a host's concurrent requests were not batched"
pass "famtest's ${FAMTEST_THREADS:-8} threads through the dpu (async, aggregated): every byte verified, batches up to $max"

# batch_limit is reloadable (aggregate too; here it is set with -o, which
# a reload keeps).
sed -i 's/^memory_nodes = .*/&\nbatch_limit = 4/' "$T/dpu-on-on.conf"
ctl dpu-on-on reload >/dev/null || fail "reload"
[ "$(fwd dpu-on-on batch_limit)" = 4 ] || fail "batch_limit = 4 not applied by reload"
ctl dpu-on-on stats-reset >/dev/null || fail "stats-reset"
"$FAMCLIENT" -q "$addr" rw "$(scaled 8M)" 64K 32 >/dev/null || fail "rw after the reload"
max=$(fwd dpu-on-on batch_max)
[ "$max" -le 4 ] && [ "$max" -ge 2 ] || fail "batch_limit 4, yet batches of $max"
pass "batch_limit = 4 by reload: batches of at most 4 from then on"

# Two more hosts share the dpu, three programs each at once: every byte
# verified, each host its own session, both hosts' requests in batches.
nprog=${FAMTEST_PROGRAMS:-3}
# Each program's data is twice its host's buffer at every scale (at a
# large scale the buffer stays at its 1M floor while the data would shrink
# to it, and a program whose data fits asks the memory node for little: a
# fresh chunk is zeros filled in here), so that every host pages through
# the dpu.
hbuf=$(scaled 32M)
hdata=$(scaled 64M)
[ "$(mib 64M)" -ge $((2 * $(mib 32M))) ] || hdata=$((2 * $(mib 32M)))M
ctl dpu-on-on stats-reset >/dev/null
# (famclient's last session may still be listed: over verbs its going is
# seen later)
others='[.peers[] | select(.role == "host" and .name != "famclient")] | length'
sessions=$(ctl dpu-on-on status -j | jq "$others")
pids=()
for h in ha hb; do
	start_host "$h" "$hbuf" "$MEM_ADDR" -o host.dpu="$addr" -o host.path=dpu \
		-o famd.node_name="$h" -o famd.op_timeout=10s
	for i in $(seq "$nprog"); do
		shim env ${fenv[@]+"${fenv[@]}"} "$FAMTEST" -f -s "$hdata" -t "${FAMTEST_THREADS:-4}" -S "$i" seq random shared split >"$T/$h-$i.txt" 2>&1 &
		pids+=($!)
	done
done
for p in "${pids[@]}"; do
	wait "$p" || fail "a program on hosts ha/hb: $(tail -n 2 "$T"/h[ab]-*.txt)"
done
ctl dpu-on-on status -j >"$T/st.json"
jq -e --argjson s "$sessions" "$others == \$s + 2" "$T/st.json" \
	>/dev/null || fail "host sessions: $(jq -c '[.peers[] | select(.role == "host")]' "$T/st.json")"
for h in ha hb; do
	jq -e --arg h "$h" '[.peers[] | select(.role == "host" and .name == $h and .state == "connected")]
		| length == 1' "$T/st.json" >/dev/null || fail "no session of host $h"
	ops=$(ctl "$h" status -j | jq .counters.ops_dpu)
	[ "$ops" -gt $((1000 / TEST_SCALE)) ] || fail "host $h sent little through the dpu: $ops requests"
done
# (over verbs, every request of theirs forwarded one-sided)
jq -e --arg tr "$TEST_TRANSPORT" '.counters.rw_errors == 0 and .forwarding.batch_max > 1 and
	($tr == "tcp" or .forwarding.memory_link.twosided == 0)' "$T/st.json" >/dev/null ||
	fail "dpu: $(jq -c '{counters: .counters.rw_errors, fwd: .forwarding}' "$T/st.json")"
pass "hosts ha and hb, $nprog program(s) each at once, through one dpu: every byte verified, a session per host, batches up to $(jq .forwarding.batch_max "$T/st.json")"
