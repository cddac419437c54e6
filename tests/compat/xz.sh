#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# xz -9: the LZMA2 encoder's 64 MiB dictionary and match finder (about
# 670 MiB), compressing 3 MiB of text and decompressing it again.
. "$(dirname "$0")/lib-compat.sh"
compat_need xz-utils:xz
# Random access over three times the buffer: the configuration famd(8)
# gives such programs (a fault reads the grains around it, not its whole
# chunk); by whole chunks it takes about twice as long.
HOST_CONF_EXTRA="fetch = adaptive"

seq 1 4000000 | awk '{ print $1 * 7919 % 1000003, "line", $1 }' | head -c 3M >"$T/text"
compat_run "xz -9" -- sh -c "xz -9 -T1 -c '$T/text' >'$T/text.xz' && md5sum <'$T/text.xz' && xz -d -c '$T/text.xz' | md5sum"
