#!/bin/bash
# With a real memory famd and host famd, an unmodified program's large
# allocations are fabric-attached memory whose faults the host famd serves:
# every byte read back is the byte written, over a working set four times
# the host's buffer, from 8 threads, across realloc, fork and 10000 blocks;
# an unprivileged program gets its userfaultfd through famd; and when the
# host famd dies, the program's threads get SIGBUS - never wrong data,
# never a hang - and the program goes on.
#
# Skips until the host role serves its session socket.
. "$(dirname "$0")/lib.sh"

SHIM=$top_builddir/src/.libs/libfamshim.so
FAMTEST=$top_builddir/tests/tools/famtest
FAMLOST=$top_builddir/tests/tools/famlost
SESSION=$T/session.sock
port=$((20000 + $$ % 20000))

start_famd mem "$CONFDIR/famd-memory.conf" -o memory.listen=127.0.0.1:$port \
	-o memory.capacity=64G
start_famd host "$CONFDIR/famd-host.conf" -o host.memory_nodes=127.0.0.1:$port \
	-o host.session_socket="$SESSION" -o host.buffer_size=64M
host_pid=$FAMD_PID
wait_until 5 test -S "$SESSION" ||
	skip "the host famd does not serve sessions yet (no $SESSION)"

# Data checks; 256M is four times the 64M buffer.
FAM_SOCKET=$SESSION LD_PRELOAD=$SHIM "$FAMTEST" -f -s 256M >"$T/famtest.out" 2>&1 ||
	fail "famtest: $(cat "$T/famtest.out")"
cat "$T/famtest.out"
pass "famtest -f -s 256M (4x the buffer): every check"

# An unprivileged program: the userfaultfd comes from famd's /dev/userfaultfd.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	FAM_SOCKET=$SESSION LD_PRELOAD=$SHIM setpriv --reuid=nobody --regid=nogroup \
		--clear-groups "$FAMTEST" -f -s 128M seq random shared fork \
		>"$T/nobody.out" 2>&1 || fail "famtest as nobody: $(cat "$T/nobody.out")"
	pass "famtest as nobody: userfaultfd through /dev/userfaultfd"
fi

# The host famd dies under reading threads.
FAM_SOCKET=$SESSION LD_PRELOAD=$SHIM "$FAMLOST" -s 256M -t 4 -w 30 \
	>"$T/lost.out" 2>"$T/lost.err" &
lost=$!
wait_until 30 grep -q '^ready' "$T/lost.out" || fail "famlost never got ready: $(cat "$T/lost.out" "$T/lost.err")"
sleep 0.5
kill -KILL "$host_pid"
wait "$host_pid" 2>/dev/null
wait "$lost"
rc=$?
cat "$T/lost.out"
[ "$rc" = 0 ] || fail "famlost exit $rc: $(cat "$T/lost.out" "$T/lost.err")"
grep -q "the host famd closed the session: 1 region (256 MiB) of fabric-attached memory lost" \
	"$T/lost.err" || fail "no loss message: $(cat "$T/lost.err")"
pass "host famd killed: SIGBUS in every reading thread, no wrong word, the program goes on"
