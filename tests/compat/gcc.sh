#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# gcc on a large translation unit: 6,000 generated functions compiled at
# -O2 (cc1's garbage-collected heap is memory it maps itself).
. "$(dirname "$0")/lib-compat.sh"
compat_need gcc:gcc

awk 'BEGIN { for (i = 0; i < 6000; i++) {
	printf "int f%d(int *a, int n) { int s = %d; for (int i = 0; i < n; i++) { s += a[i] * %d; if (s > %d) s ^= a[(i * 7) %% n]; } return s; }\n", i, i, i % 13 + 1, i * 31
} }' >"$T/big.c"
compat_run "gcc -O2 (6,000 functions)" -- sh -c "gcc -O2 -c '$T/big.c' -o '$T/big.o' && md5sum <'$T/big.o'"
