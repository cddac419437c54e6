#!/bin/bash
# run.sh - the verbs tests, in a Soft-RoCE guest: boots the rxe-vm harness
# (../shared/rxe-vm/run-in-rxe-vm, or $RXE_VM_RUN) twice - rxe0 loopback,
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

vm=${RXE_VM_RUN:-$top_srcdir/../shared/rxe-vm/run-in-rxe-vm}
[ -x "$vm" ] || skip "no rxe-vm harness at $vm (set RXE_VM_RUN to run-in-rxe-vm)"
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
# The cache: a kernel and busybox fetched with apt-get download.
if ! "$vm" --prepare >"$log" 2>&1; then
	tail -n 5 "$log"
	skip "the guest cannot be prepared here (its kernel and busybox come from apt-get download; see above)"
fi

# tc netem for tests/rxe/netem.sh: Debian builds it as a module, which the
# guest's kernel cache leaves out; sch_netem.ko comes from the same kernel
# package (apt-get download), kept in famd's own cache. Without it that test
# skips and says why.
kdir=$(sed -n 's/^.*cache ready: //p' "$log" | tail -n 1)
if [ -n "$kdir" ] && [ -r "$kdir/package" ]; then
	kver=$(basename "$kdir")
	ncache=${FAMD_TEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/famd-test}/$kver
	ko=$ncache/sch_netem.ko
	if [ ! -s "$ko" ]; then
		tmp=$(mktemp -d "${ncache%/*}.XXXXXX" 2>/dev/null || mktemp -d)
		if (cd "$tmp" && apt-get download -q "$(cat "$kdir/package")" >apt.log 2>&1 &&
			dpkg-deb --fsys-tarfile ./*.deb | tar -x --wildcards '*/sch_netem.ko'); then
			mkdir -p "$ncache" &&
				find "$tmp" -name sch_netem.ko -exec cp {} "$ko" \;
		else
			echo "rxe: no sch_netem.ko: apt-get download $(cat "$kdir/package") failed: $(tail -n 2 "$tmp/apt.log" 2>/dev/null)"
		fi
		rm -rf "$tmp"
	fi
	# The guest sees the host's / except its /tmp and /run.
	[ -s "$ko" ] && export FAMD_NETEM_KO=$ko
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
# FAMD_TEST_TRANSPORT): the data path through a host famd.
# Left out: the tests that drive raw tcp frames or sockets (memory-badframes,
# flood, host-badsession, the famclient attacks), those of the admin socket,
# configuration and shim alone (no transport in them), and those that need
# network namespaces or tc on tcp (dpu-netns, host-memory-stalled).
# Left out for now (to be tried again with smaller sizes or on KVM):
# - host-memory-lost: its 2 s op_timeout is shorter than the memory node
#   takes to create (register) famlost's 512 MiB region in the guest (5.5 s):
#   the host times the connection out before the test kills the node.
# - host-famtest: famtest -s 128M through its 64M buffer had not ended after
#   200 s under TCG (256M, its own size, takes longer still); verbs-host.sh
#   runs famtest over verbs through a smaller buffer.
# - host-programs: sort -S 64M over 30 MiB had not ended after 200 s.
# - host-readahead: its first famtest -s 32M runs pass had not ended after
#   4 minutes.
# - dpu-forward: asserts the memory node served the dpu's 64 reads and writes
#   (over verbs they are one-sided: it serves none) and runs famtest -s 192M
#   through a 64M buffer, too long here.
# - dpu-static, dpu-dynamic, dpu-path, dpu-aggregate: not yet run here; they
#   page PageRank, a 128 MiB scan, 160 MiB of passes and 4 x 32 MiB, each
#   likely beyond the 200 s the tests above needed for far less.
E2E_VERBS="host-shared-file host-striping host-client-exit"
# e2e_env NAME: the environment a test of tests/e2e gets in the guest, where
# Soft-RoCE moves tens of MB/s: smaller data through the same buffers.
e2e_env() {
	case $1 in
	host-striping) echo FAMTEST_SIZE=16M ;;
	# famtest many: 2 MiB blocks held at once, each pinned by the
	# memory node (capacity 1G here)
	# (and its split test's 16 blocks of 2 MiB for each thread: 2 threads)
	host-famtest) echo FAMTEST_COUNT=200 FAMTEST_THREADS=2 ;;
	# (guest.sh divides their data by 16: these need more than a 1 MiB
	# buffer, the least a host takes: read-ahead runs of two chunks or
	# more on each of two memory nodes; the graph's build scatters over
	# more chunks than 16, and with 32 it pages ~2 MiB of its 40 MiB
	# fast enough only at 1/16 of its size)
	host-readahead) echo FAMD_TEST_SCALE=4 ;;
	host-programs) echo FAMD_TEST_SCALE=4 GRAPH_SCALE=14 ;;
	# (1/64: 4 dpus, 3 hosts and their programs start in the guest, each
	# start costing seconds; famtest's threads and programs fewer,
	# each program paging its buffer through a host's 1 MiB)
	dpu-aggregate) echo FAMD_TEST_SCALE=64 FAMTEST_THREADS=2 FAMTEST_PROGRAMS=1 ;;
	# (famtest through the second host and dpu: its reads cost, and
	# 2M through a 1M buffer pages enough)
	dpu-dynamic) echo FAMTEST_SIZE=2M FAMTEST_THREADS=2 ;;
	esac
}
# verbs-portdown stays last: rdma_cm in the guest's kernel cannot connect
# after it.
tests=()
for t in ${RXE_ONLY:-verbs-transport verbs-memory verbs-host verbs-dpu verbs-dpu-imm verbs-dpu-async
	$(printf 'e2e-%s ' $E2E_VERBS) verbs-portdown}; do
	case $t in
	e2e-*) tests+=($(e2e_env "${t#e2e-}") "$top_srcdir/tests/e2e/${t#e2e-}.sh") ;;
	*) tests+=("$top_srcdir/tests/rxe/$t.sh") ;;
	esac
done
failed=0
for mode in "${modes[@]}"; do
	case $mode in
	loopback) rxe=loopback ;;
	veth) rxe=veth ;;
	*) echo "usage: $0 [loopback|veth]..."; exit 64 ;;
	esac
	mtests=("${tests[@]}")
	if [ -z "${RXE_ONLY:-}" ] && [ "$mode" = veth ]; then
		# Not host-shared-file across the veth pair: its two sharers
		# wait 30 s for SIGUSR1 while the private copy pages, which
		# took 38 s there (they gave up: "no SIGUSR1 within 30 s").
		mtests=()
		for t in "${tests[@]}"; do
			[ "$t" = "$top_srcdir/tests/e2e/host-shared-file.sh" ] ||
				mtests+=("$t")
		done
		mtests+=("$top_srcdir/tests/rxe/netem.sh")
	fi
	start=$SECONDS
	echo "==== rxe: $mode (booting the guest)"
	"$vm" "${share[@]}" --rxe "$rxe" --timeout "${RXE_TEST_TIMEOUT:-1200}" -- \
		bash "$top_srcdir/tests/rxe/guest.sh" "$mode" "${mtests[@]}" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	if [ "$rc" = 125 ] && ! grep -q '^guest: ' "$log"; then
		skip "the guest did not start (run-in-rxe-vm exit 125; run it with -v to see why)"
	fi
	if [ "$rc" != 0 ]; then
		echo "FAIL: rxe $mode (exit $rc)"
		failed=1
	fi
	echo "==== rxe: $mode took $((SECONDS - start)) s"
done
exit $failed
