#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# run.sh - the verbs tests, in a Soft-RoCE guest: boots tests/rxe/vm/famd-rxe-vm
# (or $RXE_VM_RUN) twice - rxe0 loopback,
# then a veth pair with rxe1 and rxe2 - and runs tests/rxe/verbs-*.sh in it
# against the binaries of this build tree (nothing is built in the guest).
# `make check-rxe` runs it; scripts/check too.
#
# Exits 0 when every test passed, 1 when one failed, and 77 (skip) with the
# reason when the guest cannot run here: no harness, no QEMU, or no kernel
# package to boot (apt-get download needs apt's lists).
#
# usage: tests/rxe/run.sh [loopback|veth]...   (default: both)
# RXE_ONLY="verbs-memory e2e-host-striping ..." runs only those tests.
set -u
: "${top_builddir:=$PWD}"
: "${top_srcdir:=$(cd "$(dirname "$0")/../.." && pwd)}"
top_builddir=$(cd "$top_builddir" && pwd)
top_srcdir=$(cd "$top_srcdir" && pwd)
export top_builddir top_srcdir

skip() {
	echo "SKIP: rxe: $*"
	exit 77
}

vm=${RXE_VM_RUN:-$top_srcdir/tests/rxe/vm/famd-rxe-vm}
[ -x "$vm" ] || skip "no guest harness at $vm (RXE_VM_RUN)"
command -v qemu-system-x86_64 >/dev/null 2>&1 ||
	skip "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
for p in tests/unit/check_verbs tests/tools/famclient tests/tools/famtest \
    tests/tools/famlost src/famd src/famctl src/.libs/libfamshim.so; do
	[ -e "$top_builddir/$p" ] || {
		echo "FAIL: rxe: $top_builddir/$p is not built (make check-rxe builds it)"
		exit 1
	}
done
log=$(mktemp /tmp/famd-rxe.XXXXXX)
trap 'rm -f "$log"' EXIT
# The cache: Debian's kernel, fetched with apt-get download (tc netem's
# sch_netem.ko for tests/rxe/netem.sh too: guest.sh finds it).
if ! "$vm" --prepare >"$log" 2>&1; then
	tail -n 5 "$log"
	skip "the guest cannot be prepared here (its kernel and busybox come from apt-get download; see above)"
fi

# The guest sees the host's / read-only, except /tmp, /run and /dev/shm
# (its own): a tree there is shared with it explicitly.
share=()
for d in "$top_srcdir" "$top_builddir"; do
	case $d/ in
	/tmp/* | /run/* | /dev/shm/*) share+=(--rw "$d") ;;
	esac
done

modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(loopback veth)
# Then tests of tests/e2e, unchanged, with transport = verbs (guest.sh sets
# FAMD_TEST_TRANSPORT, and divides their data: e2e_env below): the host's
# data path in rxe0 loopback, the dpu's across the veth pair (each test
# once: in the emulated guest they take 10-70 s each, and CI's time is
# counted).
# Left out: the tests that drive raw tcp frames or sockets (memory-badframes,
# flood, host-badsession, the famclient attacks: dpu-forward runs their
# refused requests as famclient steps over verbs, and verbs-dpu-imm sends
# SENDs that lie), those of the admin socket, configuration and shim alone
# (no transport in them), those of the memory node alone that check its tcp
# address (memory-*: verbs-memory covers the memory role over verbs), and
# those that need network namespaces or tc on tcp (dpu-netns,
# host-memory-stalled; netem.sh puts the memory node in a namespace over
# verbs).
E2E_LOOPBACK="host-famtest host-killed host-readahead host-programs
	host-memory-lost host-striping host-client-exit host-shared-file
	host-restart host-restart-redundant"
# host-replicate and host-ec (memory nodes over the veth pair) run in the
# veth guest: with them the loopback guest would outlast RXE_TEST_TIMEOUT.
E2E_VETH="dpu-forward dpu-path dpu-aggregate dpu-static dpu-dynamic dpu-adaptive
	host-replicate host-ec"
# e2e_env NAME: the environment a test of tests/e2e gets in the guest, where
# Soft-RoCE moves tens of MB/s: smaller data through the same buffers.
e2e_env() {
	case $1 in
	# (guest.sh divides their data by 16: these need more than a 1 MiB
	# buffer, the least a host takes: for read-ahead runs of two chunks or
	# more on each of two memory nodes; to keep 4x the buffer)
	host-readahead | host-striping) echo FAMD_TEST_SCALE=4 ;;
	# famtest, every test, over 8 MiB through a 2 MiB buffer (6 MiB
	# through the dpu; dpu-path's passes over 8 MiB while it switches)
	host-famtest | dpu-forward | dpu-path) echo FAMD_TEST_SCALE=32 ;;
	# famlost's written half larger than the buffer (1M at the least);
	# famtest's passes over three times the buffer (1M at the least)
	host-memory-lost | host-replicate | host-ec | host-restart | \
	host-restart-redundant) echo FAMD_TEST_SCALE=8 ;;
	# the graph at 1/32 of its size: through 16 chunks of buffer a larger
	# one's build thrashes under emulation
	host-programs) echo GRAPH_SCALE=13 ;;
	# (1/64: 4 dpus, 3 hosts and their programs start in the guest, each
	# start costing seconds; famtest's threads and programs fewer,
	# each program paging its buffer through a host's 1 MiB)
	dpu-aggregate) echo FAMD_TEST_SCALE=64 FAMTEST_PROGRAMS=1 ;;
	# (famtest: its reads of 4 KiB chunks cost, and
	# 2M through a 1M buffer pages enough)
	dpu-dynamic) echo FAMTEST_SIZE=2M ;;
	esac
}
# tests_of MODE: the tests a mode runs (RXE_ONLY: those), each a path,
# an e2e test's VAR=VALUE before it; verbs-portdown stays last: rdma_cm in
# the guest's kernel cannot connect after it (netem.sh makes devices of
# its own).
tests_of() {
	local t list e2e=$E2E_LOOPBACK
	[ "$1" = veth ] && e2e=$E2E_VETH
	list=${RXE_ONLY:-verbs-transport verbs-memory verbs-host verbs-dpu verbs-dpu-imm
		verbs-dpu-async $(printf 'e2e-%s ' $e2e) verbs-portdown}
	[ -z "${RXE_ONLY:-}" ] && [ "$1" = veth ] && list="$list netem"
	for t in $list; do
		case $t in
		e2e-*) e2e_env "${t#e2e-}"; echo "$top_srcdir/tests/e2e/${t#e2e-}.sh" ;;
		*) echo "$top_srcdir/tests/rxe/$t.sh" ;;
		esac
	done
}
failed=0
for mode in "${modes[@]}"; do
	case $mode in
	loopback) rxe=loopback ;;
	veth) rxe=veth ;;
	*) echo "usage: $0 [loopback|veth]..."; exit 64 ;;
	esac
	mtests=($(tests_of "$mode"))
	start=$SECONDS
	echo "==== rxe: $mode (booting the guest)"
	"$vm" "${share[@]}" --rxe "$rxe" --timeout "${RXE_TEST_TIMEOUT:-1200}" -- \
		bash "$top_srcdir/tests/rxe/guest.sh" "$mode" "${mtests[@]}" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	if [ "$rc" = 125 ] && ! grep -q '^guest: ' "$log"; then
		skip "the guest did not start (harness exit 125; run $vm -v -- true to see why)"
	fi
	if [ "$rc" != 0 ]; then
		echo "FAIL: rxe $mode (exit $rc)"
		failed=1
	fi
	echo "==== rxe: $mode took $((SECONDS - start)) s"
done
exit $failed
