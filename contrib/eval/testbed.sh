# SPDX-License-Identifier: Apache-2.0
# testbed.sh - the emulated three-node testbed of contrib/eval/run-eval,
# sourced by it: three network namespaces (host, dpu, memory) joined by two
# veth links, each shaped with tc (tbf) in both directions; a memory cgroup
# for the thin compute node; a swap file for the node-local swap baseline.
# Everything is named famev-ID / fe<ID>... / famd-eval-ID so that it can be
# found and removed (tb_remove_all), and is removed by tb_down.
#
#   host 198.18.1.1 --[B_intra]-- 198.18.1.2 dpu 198.18.2.1 --[B_net]-- 198.18.2.2 memory
#
# The addresses are from 198.18.0.0/15, set aside for benchmarking (RFC 2544),
# and live only inside these namespaces. The dpu namespace routes between
# its two links, so a host going straight to the memory node crosses both
# (as host-NIC-network does on the paper's testbed); a dpu famd crosses one.
#
# netem is not needed: tbf shapes bandwidth only. Latency is not emulated.

TB_HOST_IP=198.18.1.1
TB_DPU_HOST_IP=198.18.1.2
TB_DPU_MEM_IP=198.18.2.1
TB_MEM_IP=198.18.2.2

# tb_names ID: sets the names of ID's namespaces and links.
tb_names() {
	TB_ID=$1
	TB_NS_HOST=famev-$1-host
	TB_NS_DPU=famev-$1-dpu
	TB_NS_MEM=famev-$1-mem
	TB_IF_HOST=fe$1h   # host's end of the host-dpu link
	TB_IF_DPUH=fe$1dh  # dpu's end of the host-dpu link
	TB_IF_DPUM=fe$1dm  # dpu's end of the dpu-memory link
	TB_IF_MEM=fe$1m    # memory's end of the dpu-memory link
}

# tb_shape NS DEV MBIT: tbf at MBIT Mbit/s on DEV's egress in NS; the
# bucket holds 5 ms of traffic (at least 256 KiB), the queue 20 ms (at
# least 1 MiB).
tb_shape() {
	local ns=$1 dev=$2 mbit=$3 burst limit
	burst=$((mbit * 1000000 / 8 / 200))
	[ "$burst" -ge 262144 ] || burst=262144
	limit=$((mbit * 1000000 / 8 / 50))
	[ "$limit" -ge 1048576 ] || limit=1048576
	ip netns exec "$ns" tc qdisc replace dev "$dev" root tbf rate "${mbit}mbit" \
		burst "$burst" limit "$limit"
}

# tb_up ID INTRA_MBIT NET_MBIT: creates the namespaces and links and shapes
# them. Returns non-zero (with a message) if any step fails; tb_down
# removes whatever was made.
tb_up() {
	local intra=$2 net=$3 ns
	tb_names "$1"
	for ns in "$TB_NS_HOST" "$TB_NS_DPU" "$TB_NS_MEM"; do
		ip netns add "$ns" || return 1
		ip -n "$ns" link set lo up || return 1
	done
	ip link add "$TB_IF_HOST" netns "$TB_NS_HOST" type veth peer name "$TB_IF_DPUH" netns "$TB_NS_DPU" || return 1
	ip link add "$TB_IF_DPUM" netns "$TB_NS_DPU" type veth peer name "$TB_IF_MEM" netns "$TB_NS_MEM" || return 1
	ip -n "$TB_NS_HOST" addr add "$TB_HOST_IP/24" dev "$TB_IF_HOST" &&
	ip -n "$TB_NS_DPU" addr add "$TB_DPU_HOST_IP/24" dev "$TB_IF_DPUH" &&
	ip -n "$TB_NS_DPU" addr add "$TB_DPU_MEM_IP/24" dev "$TB_IF_DPUM" &&
	ip -n "$TB_NS_MEM" addr add "$TB_MEM_IP/24" dev "$TB_IF_MEM" || return 1
	ip -n "$TB_NS_HOST" link set "$TB_IF_HOST" up &&
	ip -n "$TB_NS_DPU" link set "$TB_IF_DPUH" up &&
	ip -n "$TB_NS_DPU" link set "$TB_IF_DPUM" up &&
	ip -n "$TB_NS_MEM" link set "$TB_IF_MEM" up || return 1
	ip -n "$TB_NS_HOST" route add 198.18.2.0/24 via "$TB_DPU_HOST_IP" &&
	ip -n "$TB_NS_MEM" route add 198.18.1.0/24 via "$TB_DPU_MEM_IP" || return 1
	ip netns exec "$TB_NS_DPU" sysctl -qw net.ipv4.ip_forward=1 || return 1
	tb_shape "$TB_NS_HOST" "$TB_IF_HOST" "$intra" &&
	tb_shape "$TB_NS_DPU" "$TB_IF_DPUH" "$intra" &&
	tb_shape "$TB_NS_DPU" "$TB_IF_DPUM" "$net" &&
	tb_shape "$TB_NS_MEM" "$TB_IF_MEM" "$net" || return 1
	ip netns exec "$TB_NS_HOST" ping -c 1 -W 2 "$TB_MEM_IP" >/dev/null 2>&1 ||
		tb_reach "$TB_NS_HOST" "$TB_MEM_IP" || return 1
}

# tb_reach NS IP: whether a TCP connection from NS to IP gets an answer
# (refused counts: the route works), for machines without ping.
tb_reach() {
	local msg
	msg=$(ip netns exec "$1" timeout 3 bash -c "exec 3<>/dev/tcp/$2/9" 2>&1)
	case $msg in *[Rr]efused*) return 0 ;; esac
	echo "testbed: $1 cannot reach $2" >&2
	return 1
}

# tb_down: removes the namespaces of TB_ID (their links and qdiscs go
# with them).
tb_down() {
	local ns
	[ -n "${TB_ID:-}" ] || return 0
	for ns in "$TB_NS_HOST" "$TB_NS_DPU" "$TB_NS_MEM"; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	return 0
}

# tb_link_bytes NS DEV: rx + tx bytes of DEV in NS.
tb_link_bytes() {
	ip -n "$1" -s -j link show dev "$2" |
		jq '.[0].stats64 | .rx.bytes + .tx.bytes'
}

# tb_measure FROM_NS TO_NS TO_IP MIB: MB/s of a MIB MiB TCP transfer.
tb_measure() {
	local from=$1 to=$2 ip=$3 mib=$4 t0 t1 lpid
	ip netns exec "$to" timeout 60 socat -b 1048576 -u TCP-LISTEN:5999,reuseaddr OPEN:/dev/null &
	lpid=$!
	for _ in $(seq 100); do
		ip netns exec "$to" ss -ltn 2>/dev/null | grep -q ':5999 ' && break
		sleep 0.02
	done
	t0=$(date +%s.%N)
	head -c "$((mib << 20))" /dev/zero |
		ip netns exec "$from" timeout 60 socat -b 1048576 -u - "TCP:$ip:5999" || true
	wait "$lpid" 2>/dev/null || true
	t1=$(date +%s.%N)
	echo "$t0 $t1 $mib" | awk '{printf "%.1f\n", $3 * 1.048576 / ($2 - $1)}'
}

# ---- cgroup ------------------------------------------------------------

# tb_cgroup_create ID: a memory cgroup for the thin compute node; sets
# TB_CG (its directory) and TB_CG_VER (1 or 2). Returns 1 with
# TB_CG_WHY set when no memory controller can be used.
tb_cgroup_create() {
	TB_CG=
	TB_CG_VER=
	if [ -f /sys/fs/cgroup/cgroup.controllers ] &&
		grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
		grep -qw memory /sys/fs/cgroup/cgroup.subtree_control ||
			echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
		TB_CG=/sys/fs/cgroup/famd-eval-$1
		TB_CG_VER=2
	elif [ -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
		# cgroup v1 (a hybrid hierarchy): a child of this process's own
		# memory cgroup.
		local parent
		parent=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)
		TB_CG=/sys/fs/cgroup/memory${parent%/}/famd-eval-$1
		TB_CG_VER=1
	else
		TB_CG_WHY="no cgroup memory controller (neither v2 nor v1) is mounted"
		return 1
	fi
	if ! mkdir "$TB_CG" 2>/dev/null; then
		TB_CG_WHY="cannot create $TB_CG"
		TB_CG=
		return 1
	fi
}

# tb_cgroup_limit BYTES SWAP: the limit (0: none) and whether the cgroup
# may swap (yes/no).
tb_cgroup_limit() {
	local bytes=$1 swap=$2
	if [ "$TB_CG_VER" = 2 ]; then
		if [ "$bytes" = 0 ]; then echo max; else echo "$bytes"; fi >"$TB_CG/memory.max"
		if [ -f "$TB_CG/memory.swap.max" ]; then
			if [ "$swap" = yes ]; then echo max; else echo 0; fi >"$TB_CG/memory.swap.max"
		fi
	else
		[ -f "$TB_CG/memory.memsw.limit_in_bytes" ] &&
			echo -1 >"$TB_CG/memory.memsw.limit_in_bytes"
		if [ "$bytes" = 0 ]; then echo -1; else echo "$bytes"; fi >"$TB_CG/memory.limit_in_bytes"
		if [ "$swap" != yes ] && [ "$bytes" != 0 ] &&
			[ -f "$TB_CG/memory.memsw.limit_in_bytes" ]; then
			echo "$bytes" >"$TB_CG/memory.memsw.limit_in_bytes"
		fi
		echo 60 >"$TB_CG/memory.swappiness" 2>/dev/null || true
	fi
}

# tb_cgroup_reset_peak: starts a new peak measurement where it can.
tb_cgroup_reset_peak() {
	if [ "$TB_CG_VER" = 1 ]; then
		echo 0 >"$TB_CG/memory.max_usage_in_bytes" 2>/dev/null || true
	elif [ -f "$TB_CG/memory.peak" ]; then
		echo 0 >"$TB_CG/memory.peak" 2>/dev/null || true
	fi
}

# tb_cgroup_peak: the most bytes the cgroup held since the last reset.
tb_cgroup_peak() {
	if [ "$TB_CG_VER" = 1 ]; then
		cat "$TB_CG/memory.max_usage_in_bytes"
	elif [ -f "$TB_CG/memory.peak" ]; then
		cat "$TB_CG/memory.peak"
	else
		echo 0
	fi
}

# tb_cgroup_ooms: how many times the cgroup's OOM killer has killed.
tb_cgroup_ooms() {
	local f=$TB_CG/memory.oom_control
	[ "$TB_CG_VER" = 2 ] && f=$TB_CG/memory.events
	awk '$1 == "oom_kill" { print $2; n = 1 } END { if (!n) print 0 }' "$f" 2>/dev/null || echo 0
}

# tb_cgroup_kill: kills every process in the cgroup.
tb_cgroup_kill() {
	local p
	[ -n "${TB_CG:-}" ] && [ -d "$TB_CG" ] || return 0
	for _ in 1 2 3; do
		for p in $(cat "$TB_CG/cgroup.procs" 2>/dev/null); do
			kill -KILL "$p" 2>/dev/null
		done
	done
}

# tb_cgroup_destroy: kills what is left in the cgroup and removes it.
tb_cgroup_destroy() {
	[ -n "${TB_CG:-}" ] && [ -d "$TB_CG" ] || return 0
	tb_cgroup_kill
	for _ in $(seq 100); do
		rmdir "$TB_CG" 2>/dev/null && break
		sleep 0.05
	done
	TB_CG=
}

# ---- swap --------------------------------------------------------------

# tb_swap_on FILE BYTES: a swap file of BYTES, enabled. Returns 1 with
# TB_SWAP_WHY set when the machine cannot swap to it.
tb_swap_on() {
	local f=$1 bytes=$2 fs out
	fs=$(stat -f -c %T "$(dirname "$f")")
	if [ "$fs" = tmpfs ] || [ "$fs" = ramfs ]; then
		TB_SWAP_WHY="$(dirname "$f") is on $fs, which cannot hold swap"
		return 1
	fi
	rm -f "$f"
	if ! { fallocate -l "$bytes" "$f" 2>/dev/null ||
		dd if=/dev/zero of="$f" bs=1M count=$((bytes >> 20)) status=none; }; then
		TB_SWAP_WHY="cannot create a $bytes-byte swap file in $(dirname "$f")"
		rm -f "$f"
		return 1
	fi
	chmod 600 "$f"
	if ! out=$(mkswap "$f" 2>&1); then
		TB_SWAP_WHY="mkswap: $out"
		rm -f "$f"
		return 1
	fi
	if ! out=$(swapon "$f" 2>&1); then
		TB_SWAP_WHY="swapon: $out"
		rm -f "$f"
		return 1
	fi
}

# tb_swap_off FILE: disables and removes the swap file.
tb_swap_off() {
	[ -n "${1:-}" ] || return 0
	if grep -q "^$1 " /proc/swaps 2>/dev/null; then
		swapoff "$1" 2>/dev/null
	fi
	rm -f "$1"
}

# tb_swap_pages: pages swapped in and out since boot ("IN OUT").
tb_swap_pages() {
	awk '$1 == "pswpin" { i = $2 } $1 == "pswpout" { o = $2 } END { print i + 0, o + 0 }' /proc/vmstat
}

# ---- leftovers ---------------------------------------------------------

# tb_remove_all: removes every testbed object any run left behind (its
# namespaces, cgroups and swap files), whatever its ID. Prints what.
tb_remove_all() {
	local ns cg f
	for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^famev-/ { print $1 }'); do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
		ip netns del "$ns" && echo "removed namespace $ns"
	done
	for cg in $(find /sys/fs/cgroup -maxdepth 6 -type d -name 'famd-eval-*' 2>/dev/null); do
		for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
		sleep 0.1
		rmdir "$cg" && echo "removed cgroup $cg"
	done
	for f in $(awk 'NR > 1 && $1 ~ /famd-eval-swap/ { print $1 }' /proc/swaps); do
		swapoff "$f" && rm -f "$f" && echo "removed swap file $f"
	done
	return 0
}

# tb_leftovers: prints any testbed object that exists now; false if none.
tb_leftovers() {
	local found=1
	ip netns list 2>/dev/null | awk '$1 ~ /^famev-/ { print "namespace " $1; f = 1 } END { exit !f }' && found=0
	find /sys/fs/cgroup -maxdepth 6 -type d -name 'famd-eval-*' 2>/dev/null | grep . && found=0
	awk 'NR > 1 && $1 ~ /famd-eval-swap/ { print "swap " $1; f = 1 } END { exit !f }' /proc/swaps && found=0
	ip -o link show 2>/dev/null | awk -F': ' '$2 ~ /^fe[0-9a-f]+(h|dh|dm|m)(@|$)/ { print "link " $2; f = 1 } END { exit !f }' && found=0
	return $found
}
