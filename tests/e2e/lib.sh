# SPDX-License-Identifier: Apache-2.0
# lib.sh - shared by the end-to-end tests: each test starts its own famd
# processes in a private directory, with their own sockets, and stops them
# (and removes the directory) when it exits. Waits poll a condition with a
# deadline; nothing sleeps blindly.

set -u

: "${top_builddir:?run through make check}"
: "${top_srcdir:=$top_builddir}"
FAMD=${TEST_FAMD:-$top_builddir/src/famd}
FAMCTL=$top_builddir/src/famctl
FAMCLIENT=$top_builddir/tests/tools/famclient
CONFDIR=$top_srcdir/conf
TEST_NAME=$(basename "$0" .sh)

T=$(mktemp -d "/tmp/famd-$TEST_NAME.XXXXXX")
chmod 755 "$T"
FAMD_PIDS=()

# The transport the famd processes of a test speak: tcp on 127.0.0.1 unless
# FAMD_TEST_TRANSPORT=verbs, which tests/rxe/guest.sh sets (with
# FAMD_TEST_LISTEN_IP, the address of its rxe device) to run tests of this
# directory unchanged over Soft-RoCE. famclient then speaks verbs too.
TEST_TRANSPORT=${FAMD_TEST_TRANSPORT:-tcp}
LISTEN_IP=127.0.0.1
TRANSPORT_OPTS=()
case $TEST_TRANSPORT in
tcp) ;;
verbs)
	LISTEN_IP=${FAMD_TEST_LISTEN_IP:?FAMD_TEST_TRANSPORT=verbs needs FAMD_TEST_LISTEN_IP}
	# A memory node on an address other nodes reach needs a secret
	# (famd refuses to start without one): every famd and famclient of
	# the test has the same.
	printf 'fabric-test-secret\n' >"$T/fabric.secret"
	chmod 600 "$T/fabric.secret"
	TRANSPORT_OPTS=(-o famd.transport=verbs
		-o famd.secret_file="$T/fabric.secret")
	cat >"$T/famclient" <<SH
#!/bin/sh
exec "$FAMCLIENT" -T verbs -S "$T/fabric.secret" "\$@"
SH
	chmod 755 "$T/famclient"
	FAMCLIENT=$T/famclient
	;;
*)
	echo "FAIL: $TEST_NAME: FAMD_TEST_TRANSPORT=$TEST_TRANSPORT (tcp or verbs)"
	rm -rf "$T"
	exit 1
	;;
esac

# The data a test moves is divided by FAMD_TEST_SCALE (1 unless set:
# tests/rxe/guest.sh sets it, where Soft-RoCE under emulation moves tens of
# MB/s); buffers and data shrink alike, so "4x the buffer" stays 4x.
TEST_SCALE=${FAMD_TEST_SCALE:-1}
# scaled SIZE: SIZE (a number and K, M or G) divided by the scale, in M
# when whole, else in K; 1M at the least (a host's smallest buffer, and
# below it the shim leaves blocks to libc).
scaled() {
	local n=${1%[KMG]} k
	case $1 in
	*K) k=$n ;;
	*M) k=$((n << 10)) ;;
	*G) k=$((n << 20)) ;;
	*) k=$((n >> 10)) ;;
	esac
	k=$((k / TEST_SCALE))
	[ "$k" -ge 1024 ] || k=1024
	if [ $((k % 1024)) = 0 ]; then echo "$((k >> 10))M"; else echo "${k}K"; fi
}
# log2 N: the base-2 logarithm of N, rounded down.
log2() {
	local n=$1 l=0
	while [ "$n" -gt 1 ]; do
		n=$((n >> 1))
		l=$((l + 1))
	done
	echo "$l"
}
# mib SIZE: SIZE scaled, in MiB (for messages that name it so).
mib() {
	local s
	s=$(scaled "$1")
	case $s in
	*M) echo "${s%M}" ;;
	*) echo "$((${s%K} >> 10))" ;;
	esac
}

# Prints the logs of every famd this test started.
dump_logs() {
	local f
	for f in "$T"/*.log; do
		[ -e "$f" ] || continue
		echo "---- $f"
		tail -n 50 "$f"
	done
}

cleanup() {
	local rc=$? pid st live=()
	for pid in "${FAMD_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null && live+=("$pid")
	done
	# A famd stopped here must stop cleanly (sanitizers report at exit).
	for pid in "${live[@]}"; do
		wait "$pid" 2>/dev/null
		st=$?
		if [ "$st" -ne 0 ] && [ "$st" -ne 127 ]; then
			echo "FAIL: $TEST_NAME: famd $pid exited with status $st when stopped"
			[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] && rc=1
		fi
	done
	# Stragglers (helpers started with &) must not outlive the test.
	pkill -KILL -P $$ 2>/dev/null
	[ -n "${CLEANUP_HOOK:-}" ] && $CLEANUP_HOOK
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
		dump_logs
	fi
	rm -rf "$T"
	exit "$rc"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $TEST_NAME: $*"
	exit 1
}

pass() {
	echo "ok - $*"
}

# skip REASON: this test cannot run here; says why (automake counts 77).
skip() {
	echo "SKIP: $TEST_NAME: $*"
	exit 77
}

# require_cmd CMD...: skip with the reason when a tool is missing.
require_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 ||
			skip "$c is not installed (scripts/install-deps installs it)"
	done
}

# wait_until SECONDS CMD...: polls CMD every 20 ms until it succeeds.
wait_until() {
	local deadline=$((SECONDS + $1))
	shift
	while ! "$@" >/dev/null 2>&1; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			return 1
		fi
		sleep 0.02
	done
	return 0
}

# fresh FILE...: empties FILEs before a program started in the background
# writes them: its own `>FILE` truncates only once the child runs, so a
# wait that reads FILE right after `&` could read what the last run left.
fresh() {
	local f
	for f in "$@"; do
		: >"$f"
	done
}

# sock NAME: the admin socket of the famd called NAME.
sock() {
	echo "$T/$1.sock"
}

# ctl NAME ARGS...: famctl against the famd called NAME.
ctl() {
	local name=$1
	shift
	"$FAMCTL" -s "$(sock "$name")" "$@"
}

# FAMD_WRAP, when set (an array), is the command famd is started under.
FAMD_WRAP=()

# start_famd NAME CONF [famd options...]: starts famd in the foreground
# with its admin socket at $T/NAME.sock and its log at $T/NAME.log, and
# waits until it answers. A memory role listens on a free loopback port
# (mem_addr NAME tells which). Sets FAMD_PID. With FAMD_NETNS set, famd
# runs in that network namespace (ip netns exec execs it: same pid).
# With FAMD_TEST_TRANSPORT=verbs, famd speaks verbs on $LISTEN_IP.
start_famd() {
	local name=$1 conf=$2 wrap=()
	shift 2
	[ -n "${FAMD_NETNS:-}" ] && wrap=(ip netns exec "$FAMD_NETNS")
	[ "${#FAMD_WRAP[@]}" -gt 0 ] && wrap=("${FAMD_WRAP[@]}")
	"${wrap[@]}" "$FAMD" -f -c "$conf" -o famd.admin_socket="$(sock "$name")" \
		${TRANSPORT_OPTS[@]+"${TRANSPORT_OPTS[@]}"} \
		-o memory.listen="$LISTEN_IP:0" "$@" 2>>"$T/$name.log" &
	FAMD_PID=$!
	FAMD_PIDS+=("$FAMD_PID")
	if ! wait_until 10 ctl "$name" status; then
		fail "famd $name did not start"
	fi
}

# stop_famd PID: SIGTERM and wait; returns famd's exit status.
stop_famd() {
	kill -TERM "$1"
	wait "$1"
}

# json FILTER: jq on stdin, raw output, failing on null.
json() {
	jq -er "$1"
}

# rpc NAME LINE...: sends raw lines on one admin connection, prints replies.
rpc() {
	local name=$1
	shift
	printf '%s\n' "$@" | timeout 10 socat -t 2 - UNIX-CONNECT:"$(sock "$name")"
}

SHIM=$top_builddir/src/.libs/libfamshim.so

# start_memory NAME [famd options...]: a memory famd on a free loopback
# port (port 0: it picks), preload_dir $T/preload; sets MEM_ADDR, MEM_PID.
# Over verbs its capacity is 1G: verbs pins what it lends, and the
# Soft-RoCE guest has 2G in all. MEM_CAPACITY, when set, is its capacity.
start_memory() {
	local name=$1 cap=${MEM_CAPACITY:-64G}
	shift
	[ "$TEST_TRANSPORT" = verbs ] && cap=${MEM_CAPACITY:-1G}
	mkdir -p "$T/preload"
	cat >"$T/$name.conf" <<CONF
[famd]
role = memory
[memory]
listen = $LISTEN_IP:0
capacity = $cap
preload_dir = $T/preload
CONF
	start_famd "$name" "$T/$name.conf" "$@"
	MEM_PID=$FAMD_PID
	MEM_ADDR=$(mem_addr "$name") || fail "memory famd $name has no address"
}

# start_host NAME BUFFER MEMORY_NODES [famd options...]: a host famd whose
# session socket is $T/NAME.session; sets HOST_PID and FAM_SOCKET.
# Over verbs its op_timeout is 10 s (Soft-RoCE in an emulated guest is
# slow), as tests/rxe/lib-rxe.sh's.
# HOST_CONF_EXTRA, when set, is added to its [host] section; so is
# fault_threads = TEST_FAULT_THREADS when that is set (make check-threads).
start_host() {
	local name=$1 buffer=$2 nodes=$3 op_timeout=3s
	shift 3
	[ "$TEST_TRANSPORT" = verbs ] && op_timeout=10s
	cat >"$T/$name.conf" <<CONF
[famd]
role = host
op_timeout = $op_timeout
[host]
memory_nodes = $nodes
buffer_size = $buffer
session_socket = $T/$name.session
${HOST_CONF_EXTRA:-}
${TEST_FAULT_THREADS:+fault_threads = $TEST_FAULT_THREADS}
CONF
	start_famd "$name" "$T/$name.conf" "$@"
	HOST_PID=$FAMD_PID
	FAM_SOCKET=$T/$name.session
	export FAM_SOCKET
	wait_until 10 host_nodes_up "$name" || fail "host $name: memory nodes not up"
}

# start_dpu NAME MEMORY_NODES [famd options...]: a dpu famd on a free
# loopback port, forwarding to MEMORY_NODES; sets DPU_ADDR, DPU_PID and
# waits until every memory node is up. Its op_timeout is 10 s: the tests
# that use it page hundreds of MiB on a machine that may be busy.
start_dpu() {
	local name=$1 nodes=$2
	shift 2
	cat >"$T/$name.conf" <<CONF
[famd]
role = dpu
op_timeout = 10s
[dpu]
listen = $LISTEN_IP:0
memory_nodes = $nodes
CONF
	start_famd "$name" "$T/$name.conf" "$@"
	DPU_PID=$FAMD_PID
	DPU_ADDR=$(ctl "$name" status -j | jq -er .dpu.listen) ||
		fail "dpu famd $name has no address"
	wait_until 10 dpu_nodes_up "$name" || fail "dpu $name: memory nodes not up"
}

# dpu_nodes_up NAME: every memory node of dpu NAME is connected.
dpu_nodes_up() {
	ctl "$1" status -j | jq -e '[.peers[] | select(.role == "memory" and .state != "up")] | length == 0' >/dev/null
}

# link NAME LINK KIND: bytes on a dpu's link (host|memory), KIND ondemand,
# background, read or write.
link() {
	ctl "$1" status -j | jq -er ".links.$2.$3_bytes"
}

# host_nodes_up NAME: every memory node of host NAME is connected.
host_nodes_up() {
	ctl "$1" status -j | jq -e '[.peers[] | select(.state != "up")] | length == 0' >/dev/null
}

# shim CMD...: runs CMD with libfamshim.so preloaded (famd at $FAM_SOCKET).
shim() {
	LD_PRELOAD=$SHIM "$@"
}

# start_famlost ARGS...: tests/tools/famlost ARGS under the shim in the
# background, its output in $T/lost.out and $T/lost.err; returns once it
# says it is ready, with LOST_JOB its job and LOST_PID the pid it reported.
start_famlost() {
	shim "$top_builddir/tests/tools/famlost" "$@" >"$T/lost.out" 2>"$T/lost.err" &
	LOST_JOB=$!
	wait_until 30 grep -q '^ready' "$T/lost.out" ||
		fail "famlost never got ready: $(cat "$T/lost.out" "$T/lost.err")"
	LOST_PID=$(awk '/^ready/ { print $2 }' "$T/lost.out")
}

# mem_addr NAME: the address the memory famd called NAME listens on.
mem_addr() {
	ctl "$1" status -j | jq -er .memory.listen
}

# counter NAME KEY: one of the role's counters, from famctl status --json.
counter() {
	ctl "$1" status -j | jq -er ".counters.$2"
}

# counter_is NAME KEY VALUE: true when the counter has that value.
counter_is() {
	[ "$(counter "$1" "$2")" = "$3" ]
}

# wait_counter NAME KEY VALUE: waits (10 s at most) for a counter's value.
wait_counter() {
	wait_until 10 counter_is "$@" ||
		fail "counter $2 is $(counter "$1" "$2"), expected $3"
}

# hold_client OUT ARGS...: runs famclient ARGS (which include a hold step)
# in the background with its output in OUT, and waits until it holds.
# Sets HOLD_PID (SIGUSR1 lets it go on, SIGTERM ends it).
hold_client() {
	local out=$1
	shift
	"$FAMCLIENT" "$@" >"$out" 2>&1 &
	HOLD_PID=$!
	wait_until 10 grep -q '^holding$' "$out" || fail "famclient $*: $(cat "$out")"
}

# netns_make PREFIX NAME...: network namespaces $NS$NAME (NS=PREFIX$$),
# each with its loopback up, deleted when the test ends; the test skips
# where they cannot be made. veth then joins two of them.
netns_make() {
	local n
	NS=$1$$
	shift
	NS_NAMES="$*"
	CLEANUP_HOOK=netns_del
	for n in "$@"; do
		ip netns add "$NS$n" 2>"$T/ns.err" || skip "cannot make a network namespace: $(cat "$T/ns.err")"
		ip -n "$NS$n" link set lo up
	done
}

# netns_del: deletes netns_make's namespaces.
netns_del() {
	local n
	for n in $NS_NAMES; do
		ip netns del "$NS$n" 2>/dev/null
	done
}

# veth LINK NS_A ADDR_A NS_B ADDR_B: a /24 link between two namespaces.
veth() {
	ip link add "$NS$1a" netns "$NS$2" type veth peer name "$NS$1b" netns "$NS$4" ||
		fail "veth $1"
	ip -n "$NS$2" addr add "$3/24" dev "$NS$1a"
	ip -n "$NS$4" addr add "$5/24" dev "$NS$1b"
	ip -n "$NS$2" link set "$NS$1a" up
	ip -n "$NS$4" link set "$NS$1b" up
}
