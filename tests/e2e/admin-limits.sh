#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The admin socket cannot be held or swollen by one client: a request must
# arrive whole within admin_idle_timeout however its bytes trickle in
# (slowloris), and a client that pipes requests without reading their
# answers is closed once 4 MiB of them wait, famd's memory bounded.
. "$(dirname "$0")/lib.sh"
require_cmd jq python3

conf=$T/famd.conf
printf '[famd]\nrole = memory\nadmin_idle_timeout = 2s\n' >"$conf"
start_famd m "$conf"

# One byte every 300 ms, never a newline: closed at 2 s, not held.
held=$(python3 - "$(sock m)" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
start = time.time()
try:
    while time.time() - start < 15:
        s.send(b"{")
        time.sleep(0.3)
except OSError:
    pass
print("%.1f" % (time.time() - start))
PY
)
awk -v h="$held" 'BEGIN { exit !(h < 4) }' || fail "a trickling client held its connection ${held}s (admin_idle_timeout 2s)"
pass "a request trickling in a byte at a time is cut at admin_idle_timeout (held ${held}s)"

# Requests piped in, answers never read.
rss0=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$FAMD_PID/status")
python3 - "$(sock m)" >"$T/pipe.out" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.setblocking(False)
req = b'{"jsonrpc":"2.0","method":"status","id":1}\n' * 100
sent = 0
start = time.time()
while time.time() - start < 15:
    try:
        sent += s.send(req)
    except BlockingIOError:
        time.sleep(0.01)
    except OSError:
        break
print("sent", sent, "closed after %.1fs" % (time.time() - start))
PY
rss1=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$FAMD_PID/status")
grep -q "closed after" "$T/pipe.out" || fail "pipe: $(cat "$T/pipe.out")"
secs=$(sed -n 's/.*closed after \([0-9.]*\)s/\1/p' "$T/pipe.out")
awk -v s="$secs" 'BEGIN { exit !(s < 14) }' || fail "the client was never closed: $(cat "$T/pipe.out")"
# Under AddressSanitizer freed memory waits in quarantine: RSS says little.
if ! ldd "$FAMD" 2>/dev/null | grep -q libasan; then
	[ $((rss1 - rss0)) -lt 20480 ] || fail "famd grew from $rss0 to $rss1 KiB"
fi
[ "$(ctl m status -j | jq .admin.overflows)" = 1 ] || fail "overflows: $(ctl m status -j | jq -c .admin)"
ctl m status >/dev/null || fail "famd stopped answering"
pass "a client that never reads its answers is closed ($(cat "$T/pipe.out")); RSS $rss0 -> $rss1 KiB"
