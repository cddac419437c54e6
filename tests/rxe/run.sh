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
# RXE_ONLY="verbs-memory ..." runs only those tests.
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

modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(loopback veth)
tests=()
for t in ${RXE_ONLY:-verbs-transport verbs-memory verbs-host verbs-portdown verbs-dpu}; do
	tests+=("$top_srcdir/tests/rxe/$t.sh")
done
failed=0
for mode in "${modes[@]}"; do
	case $mode in
	loopback) rxe=loopback ;;
	veth) rxe=veth ;;
	*) echo "usage: $0 [loopback|veth]..."; exit 64 ;;
	esac
	start=$SECONDS
	echo "==== rxe: $mode (booting the guest)"
	"$vm" --rxe "$rxe" --timeout "${RXE_TEST_TIMEOUT:-1200}" -- \
		bash "$top_srcdir/tests/rxe/guest.sh" "$mode" "${tests[@]}" 2>&1 | tee "$log"
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
