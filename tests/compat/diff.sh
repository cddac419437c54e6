#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# GNU diff (diffutils): two 165 MiB text files, read whole into memory,
# compared line by line; a few hundred lines differ.
. "$(dirname "$0")/lib-compat.sh"
compat_need diffutils:diff

seq 1 5000000 | awk '{ printf "%09d line of the first file\n", $1 * 7 }' >"$T/a"
awk 'NR % 40000 == 0 { print "changed", NR; next } { print }' "$T/a" >"$T/b"
compat_run "diff" -- sh -c "diff '$T/a' '$T/b' | md5sum"
