# SPDX-License-Identifier: Apache-2.0
# lib-redundancy.sh - what the tests of redundancy share (host-replicate.sh,
# host-ec.sh, ...), sourced after lib.sh: famtest, famred, the buffer and
# the data's size, the redundancy status, famtest's
# passes (its output in $T/p.out, its pid in $ft), and the memory famds'
# pids in MEMPIDS, in the order started, for the kills.

# The programs, and their data: three times the host's buffer.
FAMTEST=$top_builddir/tests/tools/famtest
FAMRED=$top_builddir/tests/tools/famred
buffer=$(scaled 8M)
size=$(scaled 24M)

# red NAME FILTER: true when the host's redundancy status passes FILTER.
red() {
	ctl "$1" status -j | jq -e ".redundancy | $2" >/dev/null
}

# npasses: passes famtest finished so far.
npasses() {
	grep -c '^pass ' "$T/p.out"
}

# passes_past N: famtest finished N passes (or died).
passes_past() {
	[ "$(npasses)" -ge "$1" ] || ! kill -0 "$ft"
}

MEMPIDS=()
start_memory_orig=$(declare -f start_memory)
eval "${start_memory_orig/start_memory/start_memory_plain}"
start_memory() {
	start_memory_plain "$@"
	MEMPIDS+=("$MEM_PID")
}

# start_memories PREFIX N: N memory famds called PREFIX0, PREFIX1, ...
# (MEMPIDS holds theirs alone): their addresses in ADDRS, their names in
# NAMES, the host's memory_nodes of them in NODES.
start_memories() {
	local i
	MEMPIDS=() ADDRS=() NAMES=()
	for ((i = 0; i < $2; i++)); do
		start_memory "$1$i"
		ADDRS+=("$MEM_ADDR")
		NAMES+=("$1$i")
	done
	NODES=$(IFS=,; echo "${ADDRS[*]}")
}

# verbs_chains NAME: over verbs, the host NAME read and wrote every memory
# node it is up with one-sided RDMA READs and WRITEs (on whichever of its
# connections to the node), posted in chains: more reads and writes than
# doorbells. The figures are printed.
verbs_chains() {
	local links
	links=$(ctl "$1" status -j | jq -c '[.peers[] | select(.role == "memory" and .state == "up")
		| [.link, .background_link] | {reads: (map(.reads) | add), writes: (map(.writes) | add),
		onesided: (map(.onesided) | add), doorbells: (map(.doorbells) | add),
		work_requests: (map(.work_requests) | add)}]')
	echo "# memory links: $links"
	echo "$links" | jq -e 'length > 0 and all(.writes > 0 and .onesided == .reads + .writes
		and .reads + .writes > .doorbells)' >/dev/null ||
		fail "write-backs not posted as chains of one-sided writes: $links"
}
