# SPDX-License-Identifier: Apache-2.0
# lib-redundancy.sh - what the tests of redundancy share (host-replicate.sh,
# host-ec.sh), sourced after lib.sh: the redundancy status, famtest's
# passes (its output in $T/p.out, its pid in $ft), and the memory famds'
# pids in MEMPIDS, in the order started, for the kills.

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
