#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# sqlite3 with a page cache larger than the buffer, FAM_HEAP=all (its
# cache is many small allocations): a 2-million-row table built, indexed,
# scanned and queried in memory. Its keys grow with the rowid, as a
# timestamp's would (sqlite3-rand.sh builds one in random key order).
. "$(dirname "$0")/lib-compat.sh"
compat_need sqlite3:sqlite3

cat >"$T/q.sql" <<'SQL'
PRAGMA cache_size = -400000;
PRAGMA temp_store = MEMORY;
CREATE TABLE t(k INTEGER, v TEXT);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 2000000)
INSERT INTO t SELECT i * 3 + i % 3, printf('%.60d', (i * 7919) % 2000003) FROM c;
CREATE INDEX tk ON t(k);
SELECT count(*), sum(k), max(v) FROM t;
SELECT k, v FROM t WHERE k BETWEEN 3000 AND 3030 ORDER BY k;
SELECT count(*) FROM t WHERE v LIKE '%12345%';
SQL
compat_run "sqlite3 (FAM_HEAP=all)" FAM_HEAP=all -- sqlite3 :memory: ".read $T/q.sql"
