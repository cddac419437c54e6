#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# findpat.py FILE SIZE [SEED]: how many of 256 words of famtest's pattern
# (tool_pat in tests/tools/toolutil.h, the "seq" test's words), spread
# over SIZE bytes, occur in FILE, as the little-endian bytes a program
# wrote to memory. Prints "found N of 256".
import struct
import sys

M = (1 << 64) - 1


def pat(off, seed):
    x = (((off + 1) * 0x9e3779b97f4a7c15) & M) ^ seed
    x ^= x >> 31
    return (x * 0xbf58476d1ce4e5b9) & M


data = open(sys.argv[1], "rb").read()
size = int(sys.argv[2])
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
words = size // 8
found = 0
for k in range(256):
    i = k * (words // 256) + 7
    if data.find(struct.pack("<Q", pat(i * 8, seed))) >= 0:
        found += 1
print("found %d of 256" % found)
