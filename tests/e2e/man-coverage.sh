#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The manual pages cover what exists, and only that: every admin method a
# host, a dpu or a memory famd answers is in famctl(8); every environment
# variable the programs read is in a man page, and every one a man page
# names (.Ev) is read somewhere; every configuration key is in
# famd.conf(5), and every key famd.conf(5) names is in the table.
. "$(dirname "$0")/lib.sh"
require_cmd jq

MAN=$top_srcdir/man
start_memory mem
start_host host 8M "$MEM_ADDR"
start_dpu dpu "$MEM_ADDR"
methods=$(for r in mem host dpu; do ctl "$r" commands -j | jq -r '.[].name'; done | sort -u)
for m in $methods; do
	grep -qF "$m" "$MAN/famctl.8" || fail "admin method $m is not in famctl(8)"
done
pass "famctl(8) names all $(echo "$methods" | wc -w) admin methods"
for m in $(grep -oE '^\.It Cm [a-z]+\.[a-z.]+' "$MAN/famctl.8" | awk '{ print $3 }'); do
	echo "$methods" | grep -qx "$m" || fail "famctl(8) describes $m, which no famd answers"
done
pass "famctl(8) describes no method that does not exist"

src_env=$(grep -rhoE '(getenv|shim_env_on)\("[A-Z_]+"\)' "$top_srcdir/src" | grep -oE '[A-Z_]{3,}' | grep -v '^getenv$' | sort -u)
man_env=$(cat "$MAN"/*.[0-9] "$MAN"/*.in | grep -oE '^\.(It )?Ev [A-Z_]+' | awk '{ print $NF }' | sort -u)
for e in $src_env; do
	echo "$man_env" | grep -qx "$e" || fail "environment variable $e is read but in no man page"
done
for e in $man_env; do
	[ "$e" = LD_PRELOAD ] && continue # the dynamic linker's
	echo "$src_env" | grep -qx "$e" || fail "a man page names environment variable $e, which nothing reads"
done
pass "environment variables: $(echo "$src_env" | wc -w) read, the same documented"

conf5=$top_builddir/man/famd.conf.5
for k in $(ctl host config -j | jq -r '.keys | to_entries[] | .value | keys[]' | sort -u); do
	grep -q "^\.It Ic $k No" "$conf5" || fail "key $k is not in famd.conf(5)"
done
for k in $(grep -oE '^\.It Ic [a-z_]+' "$conf5" | awk '{ print $3 }'); do
	ctl host config -j | jq -e --arg k "$k" '[.keys[] | has($k)] | any' >/dev/null ||
		fail "famd.conf(5) describes key $k, which famd does not know"
done
pass "famd.conf(5) describes every configuration key and no other"
