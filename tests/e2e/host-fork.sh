#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# fork with copy on write (doc/fork.md), through a 16 MiB buffer: a parent
# writes 64 MiB and forks; the child reads the parent's data of the fork,
# every word, and writes the first half while the parent writes the second;
# each sees its own writes only, both directions. Both page through the
# host famd all along. After the child's exit its copy is gone from
# `famctl call regions`, the parent's data is still right, and once the
# parent frees it nothing is left on the host or the memory node. A parent
# that frees its block while its child shares it leaves the child the
# data of the fork. A child of a child (fork of a fork) gets its parent's
# data too. FAM_FORK=0 keeps the old behaviour: no copy, a child touching
# the parent's block gets SIGSEGV. When the host famd dies, a child
# touching its copy gets SIGBUS; so does one whose copy the uid's quota
# cannot hold.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAMTEST=$top_builddir/tests/tools/famtest
start_memory mem
start_host host "$(scaled 16M)" "$MEM_ADDR"

export FAMTEST_HOLD=$T/hold
shim "$FAMTEST" -f -s "$(scaled 64M)" cow >"$T/cow.out" 2>&1 &
job=$!
wait_until 60 test -s "$T/hold" || fail "famtest cow: $(cat "$T/cow.out")"
child=$(cat "$T/hold")
regions=$(ctl host call regions)
echo "$regions" | jq -e --argjson c "$child" '[.[] | select(.pid == $c)] | length == 0' >/dev/null ||
	fail "the child $child exited, but its regions are listed: $regions"
echo "$regions" | jq -e 'length == 1 and .[0].regions >= 1' >/dev/null ||
	fail "the parent's regions are not listed: $regions"
rm -f "$T/hold"
wait "$job" || fail "famtest cow: $(cat "$T/cow.out")"
cat "$T/cow.out"
unset FAMTEST_HOLD
st=$(ctl host status -j)
echo "$st" | jq -e '.counters.forks >= 1 and .counters.forks_adopted >= 1 and .counters.fork_errors == 0 and
	.counters.fork_shared_reads > 0 and .counters.fork_copy_bytes > 0' >/dev/null ||
	fail "fork counters: $(echo "$st" | jq -c .counters)"
echo "$st" | jq -e '.counters.sigbus == 0 and .counters.writebacks > 0 and .counters.fetches > 0' >/dev/null ||
	fail "SIGBUS, or no paging: $(echo "$st" | jq -c .counters)"
pass "parent and child see the data of the fork and their own writes only, 4x the buffer; the child's regions go with it"

regions_gone() {
	[ "$(ctl host status -j | jq .programs.regions)" = 0 ] &&
		[ "$(ctl mem status -j | jq .counters.regions)" = 0 ]
}
wait_until 10 regions_gone || fail "regions left: host $(ctl host status -j | jq -c .programs), memory $(ctl mem status -j | jq -c .counters.regions)"
pass "every region released on the host and the memory node"

shim "$FAMTEST" -f -s "$(scaled 64M)" cowfree >"$T/cowfree.out" 2>&1 ||
	fail "famtest cowfree: $(cat "$T/cowfree.out")"
wait_until 10 regions_gone || fail "regions left after cowfree: host $(ctl host status -j | jq -c .programs), memory $(ctl mem status -j | jq -c .counters.regions)"
pass "the parent freed its block while the child shared it: the child read the data of the fork; nothing left after"

shim "$FAMTEST" -f -s "$(scaled 16M)" fork >"$T/fork.out" 2>&1 ||
	fail "famtest fork: $(cat "$T/fork.out")"
pass "famtest fork: fork+exec, a child's own blocks, a child writing an inherited block"

if command -v python3 >/dev/null 2>&1; then
	cat >"$T/grand.py" <<'PY'
import os, sys
n = 8 << 20
a = bytearray(n)
for i in range(0, n, 4096):
    a[i] = (i >> 12) & 0xff
pid = os.fork()
if pid == 0:
    a[0] = 1
    pid2 = os.fork()
    if pid2 == 0:
        ok = all(a[i] == ((i >> 12) & 0xff if i else 1) for i in range(0, n, 4096))
        a[4096] = 7
        os._exit(0 if ok else 3)
    _, st = os.waitpid(pid2, 0)
    ok = a[4096] == 1 and all(a[i] == ((i >> 12) & 0xff if i else 1) for i in range(0, n, 4096))
    os._exit(os.waitstatus_to_exitcode(st) or (0 if ok else 4))
_, st = os.waitpid(pid, 0)
ok = all(a[i] == (i >> 12) & 0xff for i in range(0, n, 4096))
print("grandchild", os.waitstatus_to_exitcode(st), "parent", ok)
sys.exit(0 if ok and os.waitstatus_to_exitcode(st) == 0 else 1)
PY
	FAM_THRESHOLD=1M shim python3 "$T/grand.py" >"$T/grand.out" 2>&1 ||
		fail "fork of a fork: $(cat "$T/grand.out")"
	pass "a child of a child reads its parent's data and writes privately: $(cat "$T/grand.out")"
fi

cat >"$T/nocopy.py" <<'PY'
import os, signal, sys
a = bytearray(8 << 20)
a[0] = 5
pid = os.fork()
if pid == 0:
    x = a[0]
    os._exit(0)
_, st = os.waitpid(pid, 0)
sys.exit(0 if os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGSEGV else 1)
PY
if command -v python3 >/dev/null 2>&1; then
	FAM_FORK=0 FAM_THRESHOLD=1M shim python3 "$T/nocopy.py" ||
		fail "FAM_FORK=0: the child was not killed by SIGSEGV"
	pass "FAM_FORK=0: no copy; a child touching the parent's block gets SIGSEGV"
fi

# Last: the host famd dies while a forked child holds its copy. The child
# touching it (a chunk it had read, and one it had not) gets SIGBUS, never
# the data of another process or zeros.
if command -v python3 >/dev/null 2>&1; then
	cat >"$T/lost.py" <<'PY'
import os, sys, time
a = bytearray(8 << 20)
for i in range(0, len(a), 4096):
    a[i] = 3
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    x = a[0]
    os.read(r, 1)
    time.sleep(1)              # the watchdog sees the session end
    x = a[4096 * 1000]
    os._exit(0 if x == 3 else 4)
print("ready", flush=True)
sys.stdin.readline()
os.write(w, b"x")
_, st = os.waitpid(pid, 0)
print("child", "SIGBUS" if os.WIFSIGNALED(st) and os.WTERMSIG(st) == 7 else st, flush=True)
PY
	mkfifo "$T/lost.in"
	# FAM_MMAP=0: python's own object arenas (1 MiB mappings) stay local,
	# so that the parent outlives famd to report on its child.
	# FAM_RESTART_WAIT=0: no wait for a famd to come back (host-restart.sh).
	FAM_RESTART_WAIT=0 FAM_MMAP=0 FAM_THRESHOLD=1M shim python3 "$T/lost.py" <"$T/lost.in" >"$T/lost.out" 2>&1 &
	job=$!
	exec 7>"$T/lost.in"
	wait_until 20 grep -q '^ready' "$T/lost.out" || fail "lost.py: $(cat "$T/lost.out")"
	kill -KILL "$HOST_PID"
	wait "$HOST_PID" 2>/dev/null
	echo >&7
	exec 7>&-
	wait "$job"
	grep -q '^child SIGBUS' "$T/lost.out" || fail "the host famd died: the child was not killed by SIGBUS: $(cat "$T/lost.out")"
	pass "the host famd died: a forked child touching its copy gets SIGBUS"
fi

# A host famd whose uid quota holds the parent's block but not its copy
# too: the FORK is refused (EDQUOT), the child says so and gets SIGBUS on
# a touch of the parent's block, never wrong data; the parent goes on.
start_host hostq "$(scaled 16M)" "$MEM_ADDR" -o host.uid_max_bytes=$(($(mib 32M) * 3 / 2))M
shim "$FAMTEST" -f -s "$(scaled 32M)" cow >"$T/quota.out" 2>&1 &&
	fail "famtest cow over the quota passed: $(cat "$T/quota.out")"
grep -q "could not be copied for this child.*EDQUOT.*SIGBUS" "$T/quota.out" ||
	fail "over the quota, the child did not say why: $(cat "$T/quota.out")"
[ "$(counter hostq quota_refusals)" -ge 1 ] && [ "$(counter hostq forks)" = 0 ] ||
	fail "over the quota: $(ctl hostq status -j | jq -c .counters)"
pass "a FORK over the uid's quota: refused, the child says so and gets SIGBUS on a touch"
