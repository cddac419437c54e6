#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Python multiprocessing with the fork start method: the parent fills a
# 192 MiB bytearray, four forked workers each hash their quarter of it
# (reading what the parent wrote before the fork) and write into a private
# copy-on-write view of it.
. "$(dirname "$0")/lib-compat.sh"
compat_need python3:/usr/bin/python3

cat >"$T/mp.py" <<'PY'
import hashlib, multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
N = 192 << 20
data = bytearray(N)
for i in range(0, N, 4096):
    data[i] = (i >> 12) & 0xff
def work(q):
    part = bytes(data[q * N // 4:(q + 1) * N // 4])
    data[q * N // 4] = 0xee    # private to this child
    return hashlib.sha256(part).hexdigest()
with ProcessPoolExecutor(4, mp_context=mp.get_context("fork")) as ex:
    print(*ex.map(work, range(4)))
print(data[0], hashlib.sha256(data).hexdigest())
PY
compat_run "python3 multiprocessing (fork)" -- /usr/bin/python3 "$T/mp.py"
