#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The verbs transport on a real (Soft-RoCE) device: tests/unit/check_verbs -
# hello and refusals, one-sided reads and writes with their data checked,
# two-sided fallback, long replies, several QPs, a stale rkey refused,
# deadlines, injected completion errors, a killed peer.
. "$(dirname "$0")/lib-rxe.sh"

sent0=$(rxe_counter "$CLI_DEV" sent_pkts)
"$top_builddir/tests/unit/check_verbs" >"$T/check.out" 2>&1
rc=$?
cat "$T/check.out" | grep -v ': debug: '
[ "$rc" = 0 ] || fail "check_verbs exit $rc"
grep -q '^100%: Checks: [1-9]' "$T/check.out" || fail "check_verbs ran no checks"
sent=$(( $(rxe_counter "$CLI_DEV" sent_pkts) - sent0 ))
[ "$sent" -gt 1000 ] || fail "only $sent packets left $CLI_DEV"
pass "check_verbs: every case passed ($sent packets sent on $CLI_DEV to $SRV_IP)"
