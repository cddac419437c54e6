#!/bin/bash
# guest.sh MODE TEST... - runs inside the Soft-RoCE guest (tests/rxe/run.sh
# starts it with run-in-rxe-vm): each test script with RXE_TEST_MODE=MODE,
# its output prefixed by its name; prints one PASS/FAIL/SKIP line per test
# and exits 1 if any failed. Builds nothing: the binaries come from the
# host's build tree over 9p.
set -u
mode=$1
shift
export RXE_TEST_MODE=$mode
: "${top_builddir:?}" "${top_srcdir:?}"
[ "${RXE_VM:-}" = 1 ] || { echo "guest.sh: not inside run-in-rxe-vm"; exit 2; }
echo "guest: $(uname -r), devices: ${RXE_VM_DEVS:-?}, mode $mode"
failed=0
for t in "$@"; do
	name=$(basename "$t" .sh)
	start=$SECONDS
	bash "$t" 2>&1 | sed "s/^/[$mode $name] /"
	rc=${PIPESTATUS[0]}
	case $rc in
	0) res=PASS ;;
	77) res=SKIP ;;
	*) res=FAIL; failed=1 ;;
	esac
	echo "$res: rxe/$mode/$name ($((SECONDS - start)) s)"
done
exit $failed
