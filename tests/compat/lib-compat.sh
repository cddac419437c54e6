# SPDX-License-Identifier: Apache-2.0
# lib-compat.sh - shared by the compatibility suite (tests/compat/*.sh): a
# real program from Debian's packages, that nobody here wrote, runs once on
# local memory and once under libfamshim.so with a host buffer a third of
# its footprint (its peak resident size when run locally); its output must
# be the same, and famd must have held more of its memory than the buffer
# can (famctl regions, sampled while it runs) and moved it to and from the
# memory node, and its resident size must stay within the buffer and a
# small constant. Each case prints one line for the README's table.
. "$(dirname "$0")/../e2e/lib.sh"

COMPAT_RESULTS=${COMPAT_RESULTS:-$top_builddir/tests/compat/results.tsv}
mkdir -p "$(dirname "$COMPAT_RESULTS")"

# compat_need PKG:CMD...: skips, naming the package, when a command is
# missing (scripts/install-deps installs them all).
compat_need() {
	local pc
	for pc in "$@"; do
		command -v "${pc#*:}" >/dev/null 2>&1 ||
			skip "${pc#*:} is not installed (Debian package ${pc%%:*}; scripts/install-deps installs it)"
	done
}

# kib_to_buffer KIB: a third of KIB, in whole MiB (4 MiB at the least), as
# a size for buffer_size.
kib_to_buffer() {
	local m=$(($1 / 3 / 1024))
	[ "$m" -ge 4 ] || m=4
	echo "${m}M"
}

# timed OUT STATS CMD...: runs CMD with stdout to OUT, and writes
# "seconds peak_rss_kib exit_status" to STATS (GNU time).
timed() {
	local out=$1 stats=$2
	shift 2
	/usr/bin/time -o "$stats" -f '%e %M %x' "$@" >"$out" 2>>"$T/prog.err"
}

# sample_regions NAME FILE: until killed, writes the largest total of
# bytes in the host famd's regions seen so far to FILE.
sample_regions() {
	local max=0 b
	while :; do
		b=$(ctl "$1" regions -j 2>/dev/null | jq '[.[].bytes] | add // 0' 2>/dev/null) || b=0
		[ "${b:-0}" -gt "$max" ] && { max=$b; echo "$max" >"$2"; }
		sleep 0.1
	done
}

# moved NAME: the bytes the host famd moved to and from memory nodes.
moved() {
	ctl "$1" status -j | jq -er '.counters | .ondemand_bytes + .background_read_bytes + .background_write_bytes'
}

# compat_run LABEL [ENV=VALUE...] -- CMD...: the comparison described at
# the top. CMD's stdout is what is compared (a case prints checksums of
# what it wrote to files). ENV applies under the shim only.
compat_run() {
	local label=$1 envs=() local_s local_kib famd_s famd_kib st buffer
	local held moved_b spid budget
	shift
	while [ "$1" != -- ]; do
		envs+=("$1")
		shift
	done
	shift
	cd "$T" || fail "cd $T"
	timed "$T/local.out" "$T/local.stats" "$@" ||
		fail "$label alone failed: $(tail -5 "$T/prog.err")"
	read -r local_s local_kib st <"$T/local.stats"
	buffer=$(kib_to_buffer "$local_kib")

	start_memory mem
	start_host host "$buffer" "$MEM_ADDR"
	echo 0 >"$T/held"
	sample_regions host "$T/held" &
	spid=$!
	# A guard against a hang, not a speed test (the times go to the
	# table): five minutes, or 20 times the local run if that is longer.
	budget=$(awk -v s="$local_s" 'BEGIN { b = int(s * 20); print (b < 300 ? 300 : b) }')
	timed "$T/famd.out" "$T/famd.stats" timeout -k 5 "$budget" \
		env ${envs[@]+"${envs[@]}"} LD_PRELOAD="$SHIM" "$@" ||
		fail "$label under the shim failed or took over $budget s ($local_s s locally): $(tail -5 "$T/prog.err")"
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	read -r famd_s famd_kib st <"$T/famd.stats"
	cmp -s "$T/local.out" "$T/famd.out" ||
		fail "$label: output differs under famd: $(diff "$T/local.out" "$T/famd.out" | head -5)"
	held=$(cat "$T/held")
	moved_b=$(moved host) || fail "no counters from the host famd"
	[ "$(counter host sigbus)" = 0 ] || fail "$label: famd sent SIGBUS"
	local buf_b=$(( ${buffer%M} << 20 ))
	[ "$held" -gt "$buf_b" ] ||
		fail "$label: famd held at most $held bytes of its memory, not more than the $buffer buffer (footprint $((local_kib >> 10)) MiB): its memory stayed local"
	[ "$moved_b" -gt 0 ] || fail "$label: nothing moved to or from the memory node"
	# Its resident size stays within the buffer and a small constant
	# (COMPAT_SLACK_MIB, 64): what famd does not hold stays local.
	[ $((famd_kib >> 10)) -le $(( (buf_b >> 20) + ${COMPAT_SLACK_MIB:-64} )) ] ||
		fail "$label: resident $((famd_kib >> 10)) MiB under famd (locally $((local_kib >> 10)) MiB), more than the $buffer buffer and ${COMPAT_SLACK_MIB:-64} MiB: much of its memory stayed local"
	printf '%s\t%d MiB\t%s\t%.1f s\t%.1f s\t%d MiB\t%d MiB\t%d MiB\n' "$label" \
		$((local_kib >> 10)) "$buffer" "$local_s" "$famd_s" $((held >> 20)) \
		$((moved_b >> 20)) $((famd_kib >> 10)) | tee -a "$COMPAT_RESULTS"
	pass "$label: same output; famd held $((held >> 20)) MiB through a $buffer buffer, moved $((moved_b >> 20)) MiB; ${local_s} s local, ${famd_s} s under famd"
}
