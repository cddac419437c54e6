#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# famd's status as OpenMetrics text: `famctl metrics` and GET /metrics on
# metrics_listen give text that a real OpenMetrics parser (Debian's
# python3-prometheus-client) accepts, with typed families (counters with
# _total, gauges, the fault-service histogram with buckets, _count and
# _sum); counters that a program's faults move are there, right, and do
# not go backwards between two scrapes; other paths and methods are
# refused; a taken port stops famd with the reason.
. "$(dirname "$0")/lib.sh"
require_cmd jq
PYTHON=/usr/bin/python3
"$PYTHON" -c 'import prometheus_client.openmetrics.parser' 2>/dev/null ||
	skip "python3-prometheus-client is not installed (scripts/install-deps installs it)"

start_memory mem
start_host host 16M "$MEM_ADDR" -o famd.metrics_listen=127.0.0.1:0
addr=$(ctl host status -j | jq -r .metrics_listen)
case $addr in 127.0.0.1:[1-9]*) ;; *) fail "status shows metrics_listen [$addr]" ;; esac
shim "$top_builddir/tests/tools/famtest" -f -s 48M seq random >"$T/ft.out" 2>&1 || fail "famtest: $(tail -3 "$T/ft.out")"

# check FILE: parses FILE; prints "families faults_total hist_count".
check() {
	"$PYTHON" - "$1" <<'PY'
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
text = open(sys.argv[1]).read()
fams = {f.name: f for f in text_string_to_metric_families(text)}
assert fams["famd"].type == "info", fams["famd"].type
faults = fams["famd_host_faults_missing"]
assert faults.type == "counter"
h = fams["famd_host_fault_service_seconds"]
assert h.type == "histogram"
buckets = [s for s in h.samples if s.name.endswith("_bucket")]
count = [s.value for s in h.samples if s.name.endswith("_count")][0]
assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == count
assert all(a.value <= b.value for a, b in zip(buckets, buckets[1:]))
assert fams["famd_host_buffer_size_bytes"].type == "gauge"
print(len(fams), int(faults.samples[0].value), int(count))
PY
}
ctl host metrics >"$T/m1.txt" || fail "famctl metrics failed"
read -r nf faults count < <(check "$T/m1.txt") || fail "famctl metrics does not parse: $(tail -3 "$T/m1.txt")"
want=$(ctl host status -j | jq .counters.faults_missing)
[ "$faults" = "$want" ] && [ "$faults" -gt 0 ] || fail "faults_missing $faults in metrics, $want in status"
[ "$count" -gt 0 ] || fail "an empty fault-service histogram after famtest"
pass "famctl metrics: $nf families parsed; faults_missing $faults as in status; histogram of $count faults"

http_get() {
	"$PYTHON" - "$@" <<'PY'
import sys, urllib.request, urllib.error
url, out = sys.argv[1], sys.argv[2]
method = sys.argv[3] if len(sys.argv) > 3 else "GET"
try:
    r = urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10)
    open(out, "wb").write(r.read())
    print(r.status, r.headers.get("Content-Type"))
except urllib.error.HTTPError as e:
    print(e.code, "-")
PY
}
read -r code ctype < <(http_get "http://$addr/metrics" "$T/m2.txt")
[ "$code" = 200 ] || fail "GET /metrics: $code"
case $ctype in application/openmetrics-text*) ;; *) fail "GET /metrics: Content-Type $ctype" ;; esac
read -r _ faults2 _ < <(check "$T/m2.txt") || fail "/metrics does not parse"
[ "$faults2" -ge "$faults" ] || fail "faults_missing went back from $faults to $faults2"
shim "$top_builddir/tests/tools/famtest" -f -s 32M seq >/dev/null 2>&1 || fail "second famtest"
http_get "http://$addr/metrics" "$T/m3.txt" >/dev/null
read -r _ faults3 _ < <(check "$T/m3.txt") || fail "/metrics does not parse the second time"
[ "$faults3" -gt "$faults2" ] || fail "faults_missing did not grow: $faults2 then $faults3"
pass "GET /metrics: $ctype, parses, counters grow ($faults2 -> $faults3)"

# Every role's text parses (the memory node's and a dpu's too).
start_dpu dpu "$MEM_ADDR"
for r in mem dpu; do
	ctl "$r" metrics >"$T/$r.txt" || fail "famctl metrics on $r"
	n=$("$PYTHON" -c '
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
f = list(text_string_to_metric_families(open(sys.argv[1]).read()))
assert any(x.type == "counter" for x in f) and any(x.type == "gauge" for x in f)
print(len(f))' "$T/$r.txt") || fail "the $r famd's metrics do not parse: $(tail -3 "$T/$r.txt")"
	pass "$r: $n families parse"
done

read -r code _ < <(http_get "http://$addr/other" "$T/x")
[ "$code" = 404 ] || fail "GET /other: $code, not 404"
read -r code _ < <(http_get "http://$addr/metrics" "$T/x" PUT)
case $code in 405|501) ;; *) fail "PUT /metrics: $code" ;; esac
pass "another path is 404, another method refused ($code)"

# The same port a second time: famd says why and exits.
cat >"$T/h2.conf" <<CONF
[famd]
role = host
metrics_listen = $addr
[host]
memory_nodes = $MEM_ADDR
buffer_size = 8M
session_socket = $T/h2.session
CONF
rc=0
"$top_builddir/src/famd" -f -c "$T/h2.conf" -o famd.admin_socket="$T/h2.sock" >"$T/h2.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] && grep -q "metrics_listen $addr: cannot listen" "$T/h2.log" ||
	fail "a taken metrics port: rc $rc: $(tail -2 "$T/h2.log")"
pass "a taken metrics port: famd exits $rc and names it"
