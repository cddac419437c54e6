#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Attacks a local program makes on the host famd's own resources, each
# refused or contained: no other user affected, bounded CPU and log, no
# wrong byte (issue 16). famsess (tests/tools) plays the program: it
# shrinks its arena under write-back; returns from SIGBUS handlers (with
# UFFDIO_POISON and without); asks for /dev/userfaultfd as a user outside
# uffd_device_group and in it; ALLOCs arenas it never maps; lets a forked
# worker fault; holds connections while famd is out of descriptors; opens
# more sessions than allowed; maps two files with one 64-character prefix.
# Last, famd is given a lock file that is a symbolic link.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAMSESS=$top_builddir/tests/tools/famsess
start_memory mem
start_host host 8M "$MEM_ADDR" -o host.session_mode=0666
fs() { "$FAMSESS" "$FAM_SOCKET" "$@"; }
# disconnects NAME: how often host NAME lost a memory node.
disconnects() {
	ctl "$1" status -j | jq -er '[.peers[].disconnects] | add'
}

# ---- a program shrinks its arena under famd's write-back
fs -s 32 arena-shrink >"$T/shrink.out" 2>&1
rc=$?
cat "$T/shrink.out"
kill -0 "$HOST_PID" 2>/dev/null || fail "the host famd died of the shrunk arena"
[ "$(disconnects host)" = 0 ] ||
	fail "the shared memory-node connection was reset $(disconnects host) times by one program's arena"
[ "$(counter host writeback_errors)" = 0 ] ||
	fail "write-back errors: $(counter host writeback_errors)"
[ "$rc" = 0 ] || fail "arena-shrink"
pass "an arena cannot be shrunk or sealed by its program; write-backs and the memory-node connection unharmed"

# cpu_ticks PID: user + system clock ticks the process has used.
cpu_ticks() {
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}

# ---- a SIGBUS handler that returns: the fault comes again at once
lines0=$(grep -c SIGBUS "$T/host.log")
ticks0=$(cpu_ticks "$HOST_PID")
fs sigbus-returns >"$T/sigbus.out" 2>&1 || fail "sigbus-returns: $(cat "$T/sigbus.out")"
cat "$T/sigbus.out"
ticks=$(($(cpu_ticks "$HOST_PID") - ticks0))
lines=$(($(grep -c SIGBUS "$T/host.log") - lines0))
echo "# host famd: $ticks clock ticks and $lines log lines about SIGBUS in the 2 s"
kill -0 "$HOST_PID" 2>/dev/null || fail "the host famd died"
[ "$lines" -le 40 ] || fail "$lines log lines about SIGBUS in 2 s (at most 40)"
[ "$ticks" -le 40 ] || fail "the host famd used $ticks clock ticks in 2 s (at most 40)"
pass "a SIGBUS handler that returns costs the host famd bounded CPU and log"

# ---- the same without UFFDIO_POISON (as before Linux 6.6): the session ends
start_host host2 8M "$MEM_ADDR" -o host.uffd_poison=off -o host.session_mode=0666
lines0=$(grep -c SIGBUS "$T/host2.log")
ticks0=$(cpu_ticks "$HOST_PID")
fs sigbus-returns >"$T/sigbus2.out" 2>&1 || fail "sigbus-returns: $(cat "$T/sigbus2.out")"
cat "$T/sigbus2.out"
ticks=$(($(cpu_ticks "$HOST_PID") - ticks0))
lines=$(($(grep -c SIGBUS "$T/host2.log") - lines0))
echo "# host famd: $ticks clock ticks and $lines log lines about SIGBUS in the 2 s"
[ "$lines" -le 40 ] || fail "$lines log lines about SIGBUS in 2 s (at most 40)"
[ "$ticks" -le 40 ] || fail "the host famd used $ticks clock ticks in 2 s (at most 40)"
[ "$(counter host2 sessions_given_up)" = 1 ] || fail "sessions_given_up: $(counter host2 sessions_given_up)"
grep -q "faulted 16 times on 0x[0-9a-f]* after SIGBUS; ending the session" "$T/host2.log" ||
	fail "the session's end is not logged"
pass "without UFFDIO_POISON, a thread faulting again after SIGBUS ends its session after 16"

# ---- /dev/userfaultfd: handed only to members of uffd_device_group
# as USER GROUP CMD...: runs CMD as USER with GROUP as its only group.
as() {
	local user=$1 group=$2
	shift 2
	setpriv --reuid "$user" --regid "$group" --clear-groups "$@"
}
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ] &&
	[ "$(sysctl -n vm.unprivileged_userfaultfd 2>/dev/null)" = 0 ]; then
	chmod 711 "$T"
	as nobody daemon "$FAMSESS" "$FAM_SOCKET" devfd >"$T/devfd.out" 2>&1 || fail "devfd: $(cat "$T/devfd.out")"
	cat "$T/devfd.out"
	grep -q "^devfd: none$" "$T/devfd.out" || fail "an unprivileged program was handed /dev/userfaultfd"
	as nobody daemon "$FAMSESS" "$FAM_SOCKET" kernel-fault >"$T/kf.out" 2>&1 || fail "kernel-fault: $(cat "$T/kf.out")"
	cat "$T/kf.out"
	grep -q "^read(2) into a page not resident: EFAULT$" "$T/kf.out" ||
		fail "a user-mode-only userfaultfd: expected EFAULT"
	pass "a program outside uffd_device_group gets no /dev/userfaultfd and a user-mode-only userfaultfd (a system call into a page not resident: EFAULT)"

	start_host host3 8M "$MEM_ADDR" -o host.uffd_device_group=nogroup -o host.session_mode=0666
	as nobody nogroup "$FAMSESS" "$FAM_SOCKET" devfd kernel-fault >"$T/devfd3.out" 2>&1 ||
		fail "devfd in the group: $(cat "$T/devfd3.out")"
	cat "$T/devfd3.out"
	grep -q "^devfd: given; USERFAULTFD_IOC_NEW: 0$" "$T/devfd3.out" &&
		grep -q "^read(2) into a page not resident: ok$" "$T/devfd3.out" ||
		fail "a member of uffd_device_group: the device and kernel faults expected"
	as nobody daemon "$FAMSESS" "$FAM_SOCKET" devfd >"$T/devfd4.out" 2>&1 || fail "devfd: $(cat "$T/devfd4.out")"
	grep -q "^devfd: none$" "$T/devfd4.out" || fail "a user outside uffd_device_group was handed the device"
	pass "uffd_device_group members get the device, and their system calls into pages not resident work"
else
	echo "# skipped the userfaultfd device checks: they need root, setpriv and vm.unprivileged_userfaultfd = 0"
fi
"$FAMSESS" "$FAM_SOCKET" kernel-fault >"$T/kf0.out" 2>&1 || fail "kernel-fault as root: $(cat "$T/kf0.out")"
grep -q "^read(2) into a page not resident: ok$" "$T/kf0.out" || fail "root: $(cat "$T/kf0.out")"
pass "root's programs still get a userfaultfd that catches kernel faults"

# ---- ALLOCs whose arenas are never mapped
fds0=$(ls "/proc/$HOST_PID/fd" | wc -l)
fs arena-flood >"$T/flood.out" 2>&1 || fail "arena-flood: $(cat "$T/flood.out")"
cat "$T/flood.out"
grep -q "^arenas: 1 granted, then EBUSY$" "$T/flood.out" ||
	fail "a session got more than one arena it never mapped"
echo "# host famd: $fds0 descriptors before, $(ls "/proc/$HOST_PID/fd" | wc -l) after"
start_host host4 8M "$MEM_ADDR" -o host.uid_max_arenas=4 -o host.session_mode=0666
mkfifo "$T/hold"
FAMSESS_HOLD=1 "$FAMSESS" "$FAM_SOCKET" arena-sessions <"$T/hold" >"$T/asess.out" 2>&1 &
exec 9>"$T/hold"
wait_until 10 grep -q '^holding$' "$T/asess.out" || fail "arena-sessions: $(cat "$T/asess.out")"
cat "$T/asess.out"
[ "$(grep -c "^arenas: 1 granted" "$T/asess.out")" = 4 ] &&
	[ "$(grep -c "^arenas: 0 granted, then EDQUOT" "$T/asess.out")" = 4 ] ||
	fail "uid_max_arenas = 4: expected 4 arenas granted, then EDQUOT"
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
	chmod 711 "$T"
	setpriv --reuid nobody --regid nogroup --clear-groups "$FAMSESS" "$FAM_SOCKET" arena-flood >"$T/other.out" 2>&1 ||
		fail "another user: $(cat "$T/other.out")"
	grep -q "^arenas: 1 granted, then EBUSY$" "$T/other.out" || fail "another user: $(cat "$T/other.out")"
fi
exec 9>&-
pass "one unmapped arena per session (EBUSY), uid_max_arenas per user (EDQUOT); other users unaffected"

# ---- SIGBUS for a thread of a process other than the one that connected
# (host2: no UFFDIO_POISON, so famd signals)
FAM_SOCKET=$T/host2.session
fs forked-worker >"$T/fork.out" 2>&1
rc=$?
cat "$T/fork.out"
[ "$rc" = 0 ] && grep -q "^parent: alive$" "$T/fork.out" ||
	fail "the process that connected was killed for its forked worker's fault"
pass "a forked worker's fault never signals the process that connected"

# ---- out of descriptors: the session listener backs off, it does not spin
if command -v prlimit >/dev/null; then
	start_host host5 8M "$MEM_ADDR" -o host.uid_max_sessions=1000 -o host.max_sessions=1000 -o host.session_mode=0666
	fds=$(ls "/proc/$HOST_PID/fd" | wc -l)
	prlimit --pid "$HOST_PID" --nofile=$((fds + 8)):$((fds + 8)) || fail "prlimit"
	mkfifo "$T/hold5"
	"$FAMSESS" "$FAM_SOCKET" conn-hold <"$T/hold5" >"$T/hold5.out" 2>&1 &
	exec 9>"$T/hold5"
	wait_until 10 grep -q '^holding$' "$T/hold5.out" || fail "conn-hold: $(cat "$T/hold5.out")"
	lines0=$(wc -l <"$T/host5.log")
	ticks0=$(cpu_ticks "$HOST_PID")
	sleep 2
	ticks=$(($(cpu_ticks "$HOST_PID") - ticks0))
	lines=$(($(wc -l <"$T/host5.log") - lines0))
	echo "# host famd out of descriptors: $ticks clock ticks and $lines log lines in 2 s"
	exec 9>&-
	[ "$ticks" -le 40 ] || fail "the host famd used $ticks clock ticks in 2 s out of descriptors (at most 40)"
	[ "$lines" -le 40 ] || fail "$lines log lines in 2 s out of descriptors (at most 40)"
	wait_until 10 sh -c "[ \"\$(\"$FAMCTL\" -s \"$(sock host5)\" status -j | jq .programs.sessions)\" = 0 ]" ||
		fail "the held connections are still sessions"
	fs stat-nowhere >"$T/after5.out" 2>&1 || fail "a session once descriptors are back: $(cat "$T/after5.out")"
	pass "out of descriptors, the session listener backs off (bounded CPU and log) and serves again after"
fi

# ---- sessions per user and in all
start_host host6 8M "$MEM_ADDR" -o host.uid_max_sessions=3 -o host.max_sessions=5 -o host.session_mode=0666
mkfifo "$T/hold6"
FAMSESS_HOLD=1 "$FAMSESS" "$FAM_SOCKET" session-count <"$T/hold6" >"$T/count.out" 2>&1 &
exec 9>"$T/hold6"
wait_until 10 grep -q '^holding$' "$T/count.out" || fail "session-count: $(cat "$T/count.out")"
cat "$T/count.out"
grep -q "^sessions: 3 answered, 5 closed$" "$T/count.out" || fail "uid_max_sessions = 3 not held"
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
	chmod 711 "$T"
	setpriv --reuid nobody --regid nogroup --clear-groups "$FAMSESS" "$FAM_SOCKET" session-count >"$T/count2.out" 2>&1 ||
		fail "session-count as nobody: $(cat "$T/count2.out")"
	cat "$T/count2.out"
	grep -q "^sessions: 2 answered, 6 closed$" "$T/count2.out" || fail "max_sessions = 5 not held"
fi
exec 9>&-
[ "$(counter host6 sessions_refused)" -ge 5 ] || fail "sessions_refused $(counter host6 sessions_refused)"
pass "uid_max_sessions and max_sessions: connections beyond are closed at once and counted"

# ---- two files whose paths share their first 64 characters
FAMFILE=$top_builddir/tests/tools/famfile
FAM_SOCKET=$T/host.session
long=$(printf 'd%.0s' $(seq 1 70))
mkdir -p "$T/preload"
head -c 100000 /dev/urandom >"$T/preload/${long}-a"
head -c 100000 /dev/urandom >"$T/preload/${long}-b"
"$FAMFILE" -w 20 shared "${long}-a" "$T/preload/${long}-a" >"$T/fa.out" 2>&1 &
fa=$!
wait_until 10 grep -q '^mapped' "$T/fa.out" || fail "first file: $(cat "$T/fa.out")"
"$FAMFILE" -w 20 shared "${long}-b" "$T/preload/${long}-b" >"$T/fb.out" 2>&1 &
fb=$!
wait_until 10 grep -q '^mapped' "$T/fb.out" || fail "second file: $(cat "$T/fb.out")"
a=$(awk '/^mapped/ { print $2 }' "$T/fa.out")
b=$(awk '/^mapped/ { print $2 }' "$T/fb.out")
kill -USR1 "$a" "$b"
wait_until 20 grep -Eq '^(checked|FAIL)' "$T/fb.out"
wait_until 20 grep -Eq '^(checked|FAIL)' "$T/fa.out"
cat "$T/fb.out"
grep -q '^checked' "$T/fa.out" || fail "first file: $(cat "$T/fa.out")"
grep -q '^checked' "$T/fb.out" || fail "the second file's region holds other bytes: $(cat "$T/fb.out")"
kill -USR1 "$a" "$b"
wait "$fa" "$fb"
pass "two shared files whose paths share 64 characters each get their own bytes"

# ---- a lock file that is a symbolic link
echo "precious" >"$T/victim"
ln -s "$T/victim" "$T/ln.sock.lock"
timeout 10 "$FAMD" -f -c "$T/mem.conf" -o famd.admin_socket="$T/ln.sock" \
	-o memory.listen=127.0.0.1:0 >"$T/ln.out" 2>&1
rc=$?
[ "$(cat "$T/victim")" = precious ] || fail "famd wrote through the lock file's symbolic link: $(cat "$T/victim")"
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "famd started (status $rc) with its lock file a symbolic link"
grep -q "ln.sock.lock" "$T/ln.out" || fail "the refusal does not name the lock file: $(cat "$T/ln.out")"
pass "a lock file that is a symbolic link is refused, its target untouched"
