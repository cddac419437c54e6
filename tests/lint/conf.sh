#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# conf.sh - the example configurations checked in under conf/ are what
# famd-confgen writes from the key table (src/core/cfg-table.c) today.
# After a change to the table, `make update-conf` writes them again.
set -u
: "${top_builddir:?run through make check}"
: "${top_srcdir:=$top_builddir}"

confgen=$top_builddir/src/famd-confgen
[ -x "$confgen" ] || { echo "conf.sh: no $confgen (run make first)"; exit 99; }
T=$(mktemp -d /tmp/famd-conf.XXXXXX) || exit 99
trap 'rm -rf "$T"' EXIT

stale=
for role in host dpu memory; do
	f=$top_srcdir/conf/famd-$role.conf
	[ -f "$f" ] || { echo "FAIL: $f is missing"; stale="$stale $role"; continue; }
	"$confgen" example "$role" >"$T/$role.conf" || { echo "FAIL: famd-confgen example $role"; exit 1; }
	if ! diff -u "$f" "$T/$role.conf"; then
		echo "FAIL: conf/famd-$role.conf differs from the key table (diff above: - conf/, + the table)"
		stale="$stale $role"
	fi
done
if [ -n "$stale" ]; then
	echo "conf/ is stale for:$stale; refresh it with: make update-conf (then commit conf/)"
	exit 1
fi
echo "PASS: conf/famd-{host,dpu,memory}.conf match the key table"
