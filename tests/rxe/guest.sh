#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# guest.sh MODE TEST... - runs inside the Soft-RoCE guest (tests/rxe/run.sh
# starts it with tests/rxe/vm/famd-rxe-vm): each test script with
# RXE_TEST_MODE=MODE, its output prefixed by its name; prints one
# PASS/FAIL/SKIP line per test and exits 1 if any failed. Builds nothing: the binaries come from the
# host's build tree over 9p. A test of tests/e2e runs unchanged with
# FAMD_TEST_TRANSPORT=verbs (tests/e2e/lib.sh starts every famd with
# transport = verbs on the servers' rxe address), named e2e-NAME; an
# argument VAR=VALUE is in the environment of the next test only.
set -u
mode=$1
shift
export RXE_TEST_MODE=$mode
: "${top_builddir:?}" "${top_srcdir:?}"
[ "${RXE_VM:-}" = 1 ] || { echo "guest.sh: not inside the Soft-RoCE guest"; exit 2; }
echo "guest: $(uname -r), devices: ${RXE_VM_DEVS:-?}, mode $mode"
# sch_netem.ko for tests/rxe/netem.sh, kept by the harness.
if [ -z "${FAMD_NETEM_KO:-}" ] && [ -r "${RXE_VM_MODULES:-}/sch_netem.ko" ]; then
	export FAMD_NETEM_KO=$RXE_VM_MODULES/sch_netem.ko
fi
# The guest's /dev has no /dev/fd (bash's <(...) needs it).
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
if [ "$mode" = veth ]; then
	srv_ip=${RXE_VM_VETH_IP1:-}
else
	srv_ip=${RXE_VM_IP:-}
fi
failed=0
env=()
for t in "$@"; do
	case $t in
	*=*) env+=("$t"); continue ;;
	esac
	name=$(basename "$t" .sh)
	limit=()
	case $t in
	*/tests/e2e/*)
		name=e2e-$name
		# (the test's own VAR=VALUE after these: it may set the scale)
		# Data 1/16 of its size, and famtest's threads, blocks held at
		# once (many) and made by each thread (split) fewer: Soft-RoCE
		# under emulation moves about 10 MB/s.
		env=(FAMD_TEST_TRANSPORT=verbs FAMD_TEST_LISTEN_IP="$srv_ip"
		    FAMD_TEST_SCALE="${RXE_E2E_SCALE:-16}" FAMTEST_THREADS=2
		    FAMTEST_COUNT=50 FAMTEST_BLOCKS=4 ${env[@]+"${env[@]}"})
		# Written for tcp on real hardware: one that runs away under
		# emulation fails here instead of eating the guest's time.
		limit=(timeout -k 10 "${RXE_E2E_TIMEOUT:-240}")
		;;
	esac
	start=$SECONDS
	${limit[@]+"${limit[@]}"} env ${env[@]+"${env[@]}"} bash "$t" 2>&1 |
		sed -u "s/^/[$mode $name] /"
	rc=${PIPESTATUS[0]}
	case $rc in
	0) res=PASS ;;
	77) res=SKIP ;;
	124 | 137) res=FAIL; failed=1; echo "[$mode $name] FAIL: no end within ${RXE_E2E_TIMEOUT:-240} s" ;;
	*) res=FAIL; failed=1 ;;
	esac
	echo "$res: rxe/$mode/$name ($((SECONDS - start)) s)"
	env=()
done
exit $failed
