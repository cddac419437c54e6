#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Regions preloaded from files under preload_dir: read back exactly; paths
# that leave the directory are refused; a shared region is one read-only
# copy opened by name by several clients; a named writable region has one
# writer.
. "$(dirname "$0")/lib.sh"
require_cmd jq

pre=$T/preload
mkdir -p "$pre/sub"
head -c 300000 /dev/urandom >"$pre/data.bin"
head -c 5000 /dev/urandom >"$pre/sub/inner.bin"
echo "outside" >"$T/outside.bin"
ln -s data.bin "$pre/link-in"
ln -s "$T/outside.bin" "$pre/link-out"
ln -s ../../outside.bin "$pre/sub/rel-out"
: >"$pre/empty.bin"
mkfifo "$pre/fifo"

conf=$T/famd.conf
printf '[famd]\nrole = memory\n[memory]\ncapacity = 64M\npreload_dir = %s\nsession_grace = 0\n' \
	"$pre" >"$conf"
start_famd m "$conf"
addr=$(mem_addr m)
fc() { "$FAMCLIENT" "$addr" "$@"; }

fc create 0 file=data.bin readfile 0 303104 "$pre/data.bin" >"$T/a.txt" 2>&1 ||
	fail "preload: $(cat "$T/a.txt")"
grep -q "region id=1 size=303104 flags=1 length=300000$" "$T/a.txt" ||
	fail "size 0 is not the file's size: $(cat "$T/a.txt")"
fc create 1M file=sub/inner.bin readfile 0 1M "$pre/sub/inner.bin" \
	create 0 file=link-in readfile 0 300000 "$pre/data.bin" \
	create 0 file=./sub//inner.bin readfile 0 5000 "$pre/sub/inner.bin" >"$T/b.txt" 2>&1 ||
	fail "preload: $(cat "$T/b.txt")"
grep -q "size=1048576 flags=1 length=5000$" "$T/b.txt" || fail "explicit size: $(cat "$T/b.txt")"
pass "files preload byte for byte (size 0 = the file's size, larger sizes zero-filled, links inside allowed)"

cp "$pre/data.bin" "$T/copy.bin"
fc create 0 file=data.bin write 0 4096 5 read 0 4096 5 readfile 4096 4096 "$pre/data.bin" \
	>"$T/c.txt" 2>&1 || fail "private copy: $(cat "$T/c.txt")"
cmp -s "$pre/data.bin" "$T/copy.bin" || fail "writing a private copy changed the file"
pass "a private file region is writable and leaves the file alone"

fc expect EACCES create 0 file=../outside.bin \
	expect EACCES create 0 file="$T/outside.bin" \
	expect EACCES create 0 file=link-out \
	expect EACCES create 0 file=sub/rel-out \
	expect EACCES create 0 file=sub/../../outside.bin \
	expect EACCES create 0 file=sub/../data.bin \
	expect EACCES create 0 file=.. \
	expect EACCES create 0 file=sub \
	expect EACCES create 0 file=fifo \
	expect ENOENT create 0 file=missing.bin \
	expect EINVAL create 0 file=empty.bin >"$T/d.txt" 2>&1 || fail "escapes: $(cat "$T/d.txt")"
[ "$(grep -c "as expected" "$T/d.txt")" -eq 11 ] || fail "escapes: $(cat "$T/d.txt")"
wait_counter m sessions_connected 0
counter_is m regions 0 || fail "a refused preload left a region"
pass "'..', absolute paths, symlinks out, directories and FIFOs are refused (EACCES); missing files ENOENT"

# Two clients share one read-only copy by name.
hold_client "$T/sa.txt" "$addr" -n a create 0 file=data.bin name=graph shared hold 30 \
	readfile 0 300000 "$pre/data.bin"
holder=$HOLD_PID
id=$(sed -n 's/^region id=\([0-9]*\) .*flags=3 .*/\1/p' "$T/sa.txt")
[ -n "$id" ] || fail "shared region: $(cat "$T/sa.txt")"
hold_client "$T/sb.txt" "$addr" -n b create 0 file=data.bin name=graph shared \
	readfile 0 300000 "$pre/data.bin" expect EROFS write 0 4096 1 hold 30
second=$HOLD_PID
grep -q "^region id=$id " "$T/sb.txt" || fail "second sharer got another region: $(cat "$T/sb.txt")"
grep -q "EROFS as expected" "$T/sb.txt" || fail "write to a shared region: $(cat "$T/sb.txt")"
ctl m call regions | jq -e "length == 1 and .[0].id == $id and .[0].users == 2 and
	.[0].flags == \"file,shared\" and .[0].file == \"data.bin\"" >/dev/null ||
	fail "regions: $(ctl m call regions)"
counter_is m bytes_reserved 303104 || fail "shared region reserved twice"
kill -TERM "$second"
wait "$second"
wait_until 10 sh -c "\"$FAMCTL\" -s \"$(sock m)\" call regions | jq -e '.[0].users == 1'" ||
	fail "users not dropped: $(ctl m call regions)"
kill -USR1 "$holder"
wait "$holder" || fail "first sharer after the second left: $(cat "$T/sa.txt")"
wait_counter m regions 0
pass "two clients share one read-only copy by name (EROFS on writes); it goes with its last user"

# A named writable region has one writer.
hold_client "$T/w1.txt" "$addr" -n w1 create 1M name=scratch hold 30
writer=$HOLD_PID
fc -n w2 expect EBUSY create 1M name=scratch expect EBUSY create 1M name=scratch shared \
	>"$T/w2.txt" 2>&1 || fail "second writer: $(cat "$T/w2.txt")"
kill -TERM "$writer"
wait "$writer"
wait_counter m regions 0
fc -n w2 create 1M name=scratch >/dev/null || fail "the name stayed taken"
pass "a second writer of a named region gets EBUSY; the name frees with the region"
