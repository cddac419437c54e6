#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# node (V8): a 24 million element Float64Array (192 MiB, an ArrayBuffer
# the runtime allocates outside its own heap) filled, sorted and summed.
. "$(dirname "$0")/lib-compat.sh"
compat_need nodejs:node

cat >"$T/ta.js" <<'JS'
const n = 24e6, a = new Float64Array(n);
let x = 1;
for (let i = 0; i < n; i++) { x = (x * 48271) % 2147483647; a[i] = x / 2147483647; }
a.sort();
let s = 0;
for (let i = 0; i < n; i += 7) s += a[i];
console.log(s.toFixed(6), a[1000].toFixed(12), a[n - 1].toFixed(12));
JS
compat_run "node typed array" -- node "$T/ta.js"
