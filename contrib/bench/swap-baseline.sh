# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# swap-baseline.sh - the swap baseline of famd-bench (sourced): a swap file
# and a memory cgroup whose limit is the host buffer's size, made by the
# bench and removed by sb_teardown, which the bench calls on every exit
# (SIGINT and SIGTERM included).
#
# Owns: SB_SWAP (the swap file or loop device swapped to), SB_FILE (the
# file behind it), SB_LOOP (the loop device, if one), SB_CG (the cgroup's
# directory), SB_CG_VER (1 or 2), SB_WHERE (a sentence: where the swap is),
# SB_WHY (why there is no baseline). Every object is named famd-bench-*
# with the bench's pid, so that two benches never touch each other's.

SB_SWAP=
SB_FILE=
SB_LOOP=
SB_CG=
SB_CG_VER=
SB_WHERE=
SB_WHY=

# sb_cgroup_make ID: a memory cgroup famd-bench-ID, v2 (at the root of the
# unified hierarchy) or v1 (a child of this process's memory cgroup).
sb_cgroup_make() {
	local parent
	if [ -f /sys/fs/cgroup/cgroup.controllers ] &&
		grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
		grep -qw memory /sys/fs/cgroup/cgroup.subtree_control ||
			echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
		SB_CG_VER=2
		SB_CG=/sys/fs/cgroup/famd-bench-$1
	elif [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
		parent=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)
		SB_CG_VER=1
		SB_CG=/sys/fs/cgroup/memory${parent%/}/famd-bench-$1
	else
		SB_WHY="no cgroup memory controller is mounted (neither v2 nor v1)"
		return 1
	fi
	if ! mkdir "$SB_CG" 2>/dev/null; then
		SB_WHY="cannot create the cgroup $SB_CG"
		SB_CG=
		return 1
	fi
}

# sb_cgroup_limit BYTES: the cgroup may hold BYTES of memory and swap the
# rest.
sb_cgroup_limit() {
	if [ "$SB_CG_VER" = 2 ]; then
		echo "$1" >"$SB_CG/memory.max" || return 1
		[ ! -f "$SB_CG/memory.swap.max" ] || echo max >"$SB_CG/memory.swap.max"
	else
		[ ! -f "$SB_CG/memory.memsw.limit_in_bytes" ] ||
			echo -1 >"$SB_CG/memory.memsw.limit_in_bytes"
		echo "$1" >"$SB_CG/memory.limit_in_bytes" || return 1
		echo 60 >"$SB_CG/memory.swappiness" 2>/dev/null || true
	fi
}

# sb_swap_try DEV: mkswap and swapon DEV; SB_WHY says why not.
sb_swap_try() {
	local out
	if ! out=$(mkswap "$1" 2>&1); then
		SB_WHY="mkswap $1: $(echo "$out" | tail -n 1)"
		return 1
	fi
	if ! out=$(swapon "$1" 2>&1); then
		SB_WHY="swapon $1: $(echo "$out" | tail -n 1)"
		return 1
	fi
	SB_SWAP=$1
}

# sb_swap_file DIR BYTES: a swap file of BYTES in DIR, swapped to directly
# or, where the file system cannot hold swap, through a loop device.
sb_swap_file() {
	local dir=$1 bytes=$2 fs
	fs=$(stat -f -c %T "$dir" 2>/dev/null) || return 1
	case $fs in tmpfs | ramfs) SB_WHY="$dir is on $fs (memory)"; return 1 ;; esac
	SB_FILE=$dir/famd-bench-swap-$$
	if ! { fallocate -l "$bytes" "$SB_FILE" 2>/dev/null ||
		dd if=/dev/zero of="$SB_FILE" bs=1M count=$((bytes >> 20)) status=none 2>/dev/null; }; then
		SB_WHY="cannot write a $((bytes >> 20)) MiB file in $dir"
		rm -f "$SB_FILE"
		SB_FILE=
		return 1
	fi
	chmod 600 "$SB_FILE"
	if sb_swap_try "$SB_FILE"; then
		SB_WHERE="swap file $SB_FILE ($fs)"
		return 0
	fi
	if command -v losetup >/dev/null &&
		SB_LOOP=$(losetup -f --show "$SB_FILE" 2>/dev/null) &&
		sb_swap_try "$SB_LOOP"; then
		SB_WHERE="loop device $SB_LOOP over $SB_FILE ($fs cannot hold a swap file)"
		return 0
	fi
	[ -z "$SB_LOOP" ] || losetup -d "$SB_LOOP" 2>/dev/null
	SB_LOOP=
	rm -f "$SB_FILE"
	SB_FILE=
	return 1
}

# sb_setup ID BYTES LIMIT: swap of BYTES and a cgroup limited to LIMIT;
# returns 1 with SB_WHY set when this machine cannot have them.
sb_setup() {
	local id=$1 bytes=$2 limit=$3 d why=
	[ "$(id -u)" = 0 ] || { SB_WHY="needs root (swapon, cgroups)"; return 1; }
	command -v mkswap >/dev/null && command -v swapon >/dev/null ||
		{ SB_WHY="no mkswap or swapon"; return 1; }
	sb_cgroup_make "$id" || return 1
	sb_cgroup_limit "$limit" || { SB_WHY="cannot set the limit of $SB_CG"; sb_teardown; return 1; }
	for d in "$BENCH_RUN" /var/tmp; do
		sb_swap_file "$d" "$bytes" && break
		why="$why${why:+; }$SB_WHY"
	done
	[ -n "$SB_SWAP" ] || { SB_WHY=$why; sb_teardown; return 1; }
	[ "$d" = "$BENCH_RUN" ] || SB_WHERE="$SB_WHERE; not in $BENCH_RUN: $why"
}

# sb_run CMD...: runs CMD inside the cgroup (the same process, exec'd).
sb_run() {
	sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$SB_CG" "$@"
}

# sb_pages: pages swapped in plus pages swapped out since boot.
sb_pages() {
	awk '$1 == "pswpin" || $1 == "pswpout" { n += $2 } END { print n + 0 }' /proc/vmstat
}

# sb_teardown: kills what runs in the cgroup, removes it, swaps off and
# removes the swap file and its loop device. Safe to call more than once,
# and under set -e (a process gone before its kill is no error).
sb_teardown() {
	local p
	if [ -n "$SB_CG" ] && [ -d "$SB_CG" ]; then
		# A program killed with much of its memory swapped out can take
		# seconds to leave, on a loaded machine.
		for _ in $(seq 600); do
			for p in $(cat "$SB_CG/cgroup.procs" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
			rmdir "$SB_CG" 2>/dev/null && break
			sleep 0.05
		done
		[ ! -d "$SB_CG" ] || echo "famd-bench: cannot remove the cgroup $SB_CG" >&2
	fi
	SB_CG=
	if [ -n "$SB_SWAP" ] && grep -q "^$SB_SWAP " /proc/swaps; then
		swapoff "$SB_SWAP" || echo "famd-bench: swapoff $SB_SWAP failed" >&2
	fi
	SB_SWAP=
	if [ -n "$SB_LOOP" ]; then
		losetup -d "$SB_LOOP" 2>/dev/null || echo "famd-bench: losetup -d $SB_LOOP failed" >&2
	fi
	SB_LOOP=
	[ -z "$SB_FILE" ] || rm -f "$SB_FILE"
	SB_FILE=
}
