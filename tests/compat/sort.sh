#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# sort -S: GNU sort (coreutils) sorting 2 million lines in one 256 MiB
# buffer it allocates at once.
. "$(dirname "$0")/lib-compat.sh"
compat_need coreutils:sort

awk 'BEGIN { srand(7); for (i = 0; i < 2000000; i++) printf "%08d %s\n", int(rand() * 1e8), i }' >"$T/lines"
compat_run "sort -S 256M" -- sh -c "sort -S 256M '$T/lines' | md5sum"
