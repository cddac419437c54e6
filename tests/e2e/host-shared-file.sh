#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# A file preloaded on the memory node, mapped by two programs at once with
# fam_alloc_file(FAM_FILE_SHARED) through a host buffer smaller than the
# file: both read exactly the file's bytes (and zeros past its end), a write
# raises SIGSEGV, and the memory node holds one shared region, created
# once and opened again. A FAM_FILE_PRIVATE copy is writable and private:
# the file and the shared copy keep their bytes. A path that leaves
# preload_dir, or names nothing, is refused with a clear errno.
. "$(dirname "$0")/lib.sh"
require_cmd jq

FAMFILE=$top_builddir/tests/tools/famfile
mkdir -p "$T/preload/sub"
# 12 MiB and 1000 bytes: more than the 8 MiB buffer, and a last chunk the
# file fills only in part.
head -c $((12 * 1048576 + 1000)) /dev/urandom >"$T/preload/data.bin"
cp "$T/preload/data.bin" "$T/orig.bin"
echo outside >"$T/outside.bin"
ln -s "$T/outside.bin" "$T/preload/link-out"
start_memory mem
start_host host 8M "$MEM_ADDR"

"$FAMFILE" shared data.bin "$T/orig.bin" >"$T/a.out" 2>&1 &
a_job=$!
"$FAMFILE" shared data.bin "$T/orig.bin" >"$T/b.out" 2>&1 &
b_job=$!
wait_until 10 grep -q '^mapped' "$T/a.out" || fail "first sharer: $(cat "$T/a.out")"
wait_until 10 grep -q '^mapped' "$T/b.out" || fail "second sharer: $(cat "$T/b.out")"
a=$(awk '/^mapped/ { print $2 }' "$T/a.out")
b=$(awk '/^mapped/ { print $2 }' "$T/b.out")
ctl mem call regions | jq -e 'length == 1 and .[0].flags == "file,shared" and
	.[0].file == "data.bin" and .[0].size == 12587008 and .[0].users == 1' >/dev/null ||
	fail "memory node regions: $(ctl mem call regions)"
ctl mem status -j | jq -e '.counters.regions_created == 1 and .counters.regions_opened == 1' >/dev/null ||
	fail "memory node counters: $(ctl mem status -j | jq -c .counters)"
ctl host call regions | jq -e "[.[] | select(.pid == $a or .pid == $b) | .regions] == [1, 1]" >/dev/null ||
	fail "host regions: $(ctl host call regions)"
pass "two programs map data.bin shared: one region on the memory node, created once and opened again"

reads() {
	ctl host status -j | jq '.counters.fetches + .counters.prefetches'
}
before=$(reads)
kill -USR1 "$a" "$b"
wait_until 20 grep -q '^checked' "$T/a.out" || fail "first sharer: $(cat "$T/a.out")"
wait_until 20 grep -q '^checked' "$T/b.out" || fail "second sharer: $(cat "$T/b.out")"
cat "$T/a.out"
# Two readers of 193 chunks each (each its own copy in the buffer) through
# a buffer of 128 chunks.
[ "$(reads)" -ge $((before + 2 * 193)) ] && [ "$(counter host evictions_clean)" -gt 0 ] ||
	fail "the file was not paged from the memory node: $(ctl host status -j | jq -c .counters)"
pass "both read exactly the file's bytes at once through an 8 MiB buffer; writes raise SIGSEGV"

"$FAMFILE" private data.bin "$T/orig.bin" >"$T/p.out" 2>&1 || fail "private: $(cat "$T/p.out")"
cat "$T/p.out"
cmp -s "$T/preload/data.bin" "$T/orig.bin" || fail "writing the private copy changed the file"
ctl host status -j | jq -e '.counters.writeback_errors == 0 and .counters.fetch_errors == 0 and
	.counters.writebacks > 0' >/dev/null ||
	fail "the private copy did not page cleanly: $(ctl host status -j | jq -c .counters)"
grep -q "SIGBUS: write past the end of a file's copy on the memory node" "$T/host.log" ||
	fail "the write past the copy's end is not explained in the log"
kill -USR1 "$a" "$b"
wait "$a_job" || fail "first sharer after the private copy: $(cat "$T/a.out")"
wait "$b_job" || fail "second sharer after the private copy: $(cat "$T/b.out")"
grep -q '^done' "$T/a.out" && grep -q '^done' "$T/b.out" || fail "sharers did not finish"
pass "a private copy is writable; the file and the shared copy keep their bytes"

wait_until 10 counter_is mem regions 0 || fail "regions left on the memory node: $(ctl mem call regions)"
wait_until 10 sh -c "[ \"\$(\"$FAMCTL\" -s \"$(sock host)\" status -j | jq '.programs.regions + .buffer.used_bytes')\" = 0 ]" ||
	fail "regions left on the host: $(ctl host status -j | jq -c '[.programs, .buffer]')"
pass "the shared region goes with its last user; the host's buffer is empty"

for refused in "../outside.bin EACCES" "$T/outside.bin EACCES" "link-out EACCES" \
	"sub/../../outside.bin EACCES" "sub EACCES" "missing.bin ENOENT" " EINVAL"; do
	set -- $refused
	[ $# = 1 ] && set -- "" "$1"
	"$FAMFILE" refuse "$1" "$2" >"$T/r.out" 2>&1 || fail "$(cat "$T/r.out")"
	cat "$T/r.out"
done
counter_is mem regions 0 || fail "a refused path left a region"
grep -q "may not preload '../outside.bin'" "$T/mem.log" || fail "the refusal is not logged"
pass "paths escaping preload_dir are refused with EACCES, a missing file with ENOENT"
