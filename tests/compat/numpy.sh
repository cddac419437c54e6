#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# numpy: a scientific-Python array workload: 20 million random doubles
# (160 MiB) sorted, summed cumulatively and gathered at random indices.
# numpy advises its large arrays (madvise MADV_HUGEPAGE).
. "$(dirname "$0")/lib-compat.sh"
compat_need python3-numpy:/usr/bin/python3
/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip "numpy is not installed (Debian package python3-numpy; scripts/install-deps installs it)"

cat >"$T/np.py" <<'PY'
import numpy as np
rng = np.random.default_rng(1)
a = rng.random(20_000_000)
b = np.sort(a)
c = np.cumsum(b)
idx = rng.integers(0, a.size, 200_000)
print(f"{c[-1]:.6f} {b[1000]:.12f} {a[idx].sum():.6f} {np.median(a):.12f}")
PY
compat_run "python3 numpy" -- /usr/bin/python3 "$T/np.py"
