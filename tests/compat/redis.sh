#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# redis-server, an in-memory store that snapshots from a forked child:
# 256 MiB of values written, BGSAVE (the child writes the dataset to disk
# while the parent serves), the snapshot loaded back by a second server.
. "$(dirname "$0")/lib-compat.sh"
compat_need redis-server:redis-server redis-tools:redis-cli

cat >"$T/redis.sh" <<'SH'
set -e
d=$(mktemp -d "$1/r.XXXXXX")
port=$((20000 + RANDOM % 20000))
redis-server --port "$port" --bind 127.0.0.1 --dir "$d" --save '' --appendonly no --daemonize no >"$d/log" 2>&1 &
pid=$!
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$port" eval "for i = 1, 256 do redis.call('set', 'k' .. i, string.rep(string.char(65 + i % 26), 1048576)) end return 1" 0 >/dev/null
redis-cli -p "$port" bgsave >/dev/null
for _ in $(seq 600); do [ "$(redis-cli -p "$port" info persistence | tr -d '\r' | sed -n 's/^rdb_bgsave_in_progress://p')" = 0 ] && break; sleep 0.1; done
redis-cli -p "$port" info persistence | tr -d '\r' | grep '^rdb_last_bgsave_status'
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$pid" || true
redis-server --port "$port" --bind 127.0.0.1 --dir "$d" --daemonize no >"$d/log2" 2>&1 &
pid=$!
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$port" dbsize
redis-cli -p "$port" get k77 | md5sum
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$pid" || true
rm -rf "$d"
SH
compat_run "redis-server BGSAVE" -- bash "$T/redis.sh" "$T"
