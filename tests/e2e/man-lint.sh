#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The man pages are clean under mandoc -Tlint; the systemd unit verifies.
. "$(dirname "$0")/lib.sh"
require_cmd mandoc

PAGES=("$top_builddir/man/famd.8" "$top_srcdir/man/famctl.8" \
	"$top_builddir/man/famd.conf.5" "$top_srcdir/man/libfamd-client.3" \
	"$top_srcdir/man/libfamshim.7")
out=$(mandoc -Tlint -W warning "${PAGES[@]}" 2>&1)
[ -z "$out" ] || fail "mandoc -Tlint: $out"
# Style notes other than cross references to pages not installed yet (or
# missing from this machine's stale mandoc.db).
out=$(mandoc -Tlint "${PAGES[@]}" 2>&1 |
	grep -v -e 'referenced manual not found' -e 'outdated mandoc.db')
[ -z "$out" ] || fail "mandoc -Tlint style: $out"
pass "man pages lint clean"

if command -v systemd-analyze >/dev/null 2>&1; then
	sed -e "s|^ExecStartPre=.*|ExecStartPre=$FAMD -t -c $CONFDIR/famd-host.conf|" \
		-e "s|^ExecStart=.*|ExecStart=$FAMD -f -c $CONFDIR/famd-host.conf|" \
		"$top_builddir/systemd/famd.service" >"$T/famd.service"
	out=$(systemd-analyze verify --man=no "$T/famd.service" 2>&1)
	[ -z "$out" ] || fail "systemd-analyze verify: $out"
	pass "famd.service verifies"
	score=$(systemd-analyze security --offline=yes "$T/famd.service" 2>&1 |
		sed -n 's/^→ Overall exposure level for famd.service: \([0-9.]*\) .*/\1/p')
	[ -n "$score" ] || fail "systemd-analyze security gave no score"
	awk -v s="$score" 'BEGIN { exit !(s <= 3.0) }' ||
		fail "famd.service exposure $score, more than 3.0: $(systemd-analyze security --offline=yes "$T/famd.service" 2>&1 | grep '✗' | head -5)"
	pass "famd.service exposure level $score (systemd-analyze security)"
else
	echo "note: systemd-analyze not installed; unit not verified"
fi
grep -q '^Type=notify$' "$top_builddir/systemd/famd.service" || fail "unit is not Type=notify"
grep -q '^LimitMEMLOCK=infinity$' "$top_builddir/systemd/famd.service" || fail "no LimitMEMLOCK"
grep -q '^RuntimeDirectory=famd$' "$top_builddir/systemd/famd.service" || fail "no RuntimeDirectory"
pass "unit has Type=notify, LimitMEMLOCK=infinity, RuntimeDirectory"
