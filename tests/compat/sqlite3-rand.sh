#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# sqlite3 with a page cache larger than the buffer, FAM_HEAP=all, its
# index built in random key order: the B-tree's pages are touched at
# random over three times the buffer. Through whole 64 KiB chunks that
# thrashes (over 20 times the local run); the host reads by grains where
# chunks are sparsely used (fetch = adaptive), and it runs in about 3
# times the local run.
. "$(dirname "$0")/lib-compat.sh"
HOST_CONF_EXTRA="fetch = adaptive"
compat_need sqlite3:sqlite3

cat >"$T/q.sql" <<'SQL'
PRAGMA cache_size = -400000;
PRAGMA temp_store = MEMORY;
CREATE TABLE t(k INTEGER, r INTEGER, v TEXT);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 2000000)
INSERT INTO t SELECT i * 3 + i % 3, (i * 7919) % 2000003, printf('%.40d', i) FROM c;
CREATE INDEX tr ON t(r);
SELECT count(*), sum(k), max(v) FROM t;
SELECT r, v FROM t WHERE r BETWEEN 3000 AND 3030 ORDER BY r;
SELECT count(*) FROM t WHERE v LIKE '%12345%';
SQL
compat_run "sqlite3 random keys (FAM_HEAP=all)" FAM_HEAP=all -- sqlite3 :memory: ".read $T/q.sql"
