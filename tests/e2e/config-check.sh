#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# famd -t accepts every shipped example and rejects broken files with
# file:line and exit status 78.
. "$(dirname "$0")/lib.sh"

for role in host dpu memory; do
	out=$("$FAMD" -t -c "$CONFDIR/famd-$role.conf") ||
		fail "example for $role does not pass famd -t: $out"
	case $out in *"role $role"*) ;; *) fail "famd -t said: $out" ;; esac
done
pass "every example config passes famd -t"

cat >"$T/broken.conf" <<'CONF'
[famd]
role = memory
admin_max_clients = many
[nosuch]
CONF
"$FAMD" -t -c "$T/broken.conf" 2>"$T/err.txt"
rc=$?
[ "$rc" -eq 78 ] || fail "broken config: exit $rc, expected 78"
grep -q "$T/broken.conf:3: \[famd\] admin_max_clients: 'many' is not an integer" "$T/err.txt" ||
	fail "no file:line for the bad value: $(cat "$T/err.txt")"
grep -q "$T/broken.conf:4: unknown section \[nosuch\]" "$T/err.txt" ||
	fail "no file:line for the unknown section: $(cat "$T/err.txt")"
pass "broken config names file:line and exits 78"

# Starting (not just checking) with a broken file fails the same way.
"$FAMD" -f -c "$T/broken.conf" 2>/dev/null
[ $? -eq 78 ] || fail "famd -f with a broken config did not exit 78"
"$FAMD" -t -c "$T/missing.conf" 2>/dev/null
[ $? -eq 78 ] || fail "missing config file did not exit 78"
"$FAMD" -t -c "$CONFDIR/famd-host.conf" -o famd.bogus=1 2>/dev/null
[ $? -eq 78 ] || fail "bad -o override did not exit 78"
"$FAMD" -Z 2>/dev/null
[ $? -eq 64 ] || fail "bad option did not exit 64"
"$FAMD" -V | grep -q '^famd [0-9]' || fail "famd -V prints no version"
"$FAMD" --version | grep -q '^famd [0-9]' || fail "famd --version prints no version"
"$FAMD" --help | grep -q '^usage: famd' || fail "famd --help: no usage on stdout, or not exit 0"
"$FAMCTL" --version | grep -q '^famctl [0-9]' || fail "famctl --version prints no version"
"$FAMCTL" --help | grep -q '^usage: famctl' || fail "famctl --help: no usage on stdout, or not exit 0"
pass "missing file, bad override, bad option, -V, and --help and --version of famd and famctl"
