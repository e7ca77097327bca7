"""Scenario 6's growth: many tables and commit rows written straight into the owner's database.

Every grown table looks like a table the owner has served for a while: ``rows`` ratified commits, all
backfilled (the audit trail the owner keeps), latest = backfilled = ``rows``.
"""

from __future__ import annotations

import time
from typing import Any

from coordinator.bench.env import BenchEnv

_PG_TABLES = """
INSERT INTO owned_tables (table_id, location, commit_dir, base_version, latest_version, latest_backfilled_version,
                          last_commit_timestamp, accepting, status, created_at, updated_at, last_commit_at)
SELECT md5(%(tag)s || g)::uuid::text, %(prefix)s || %(tag)s || '-' || g, '_commits', 0, %(rows)s, %(rows)s,
       %(rows)s, true, 'ACTIVE', 0, 0, 0
FROM generate_series(1, %(n)s::int) AS g
"""
_PG_COMMITS = """
INSERT INTO commits (table_id, version, file_name, idempotency_key, file_size, file_modification_time,
                     commit_timestamp, content_sha256, ratified_at, backfilled_at)
SELECT md5(%(tag)s || g)::uuid::text, v, lpad(v::text, 20, '0') || '.' || md5(g || '-' || v)::uuid || '.json',
       md5(v || '-' || g)::uuid::text, 600, 0, v, repeat('0', 64), 0, 0
FROM generate_series(%(lo)s::int, %(hi)s::int) AS g, generate_series(1, %(rows)s::int) AS v
"""
_SQLITE_TABLES = """
WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < :n)
INSERT INTO owned_tables (table_id, location, commit_dir, base_version, latest_version, latest_backfilled_version,
                          last_commit_timestamp, accepting, status, created_at, updated_at, last_commit_at)
SELECT printf('%08d-%s-4000-8000-%012d', i, :tag, i), :prefix || :tag || '-' || i, '_commits', 0, :rows, :rows,
       :rows, 1, 'ACTIVE', 0, 0, 0 FROM g
"""
_SQLITE_COMMITS = """
WITH RECURSIVE g(i) AS (SELECT :lo UNION ALL SELECT i + 1 FROM g WHERE i < :hi),
               v(j) AS (SELECT 1 UNION ALL SELECT j + 1 FROM v WHERE j < :rows)
INSERT INTO commits (table_id, version, file_name, idempotency_key, file_size, file_modification_time,
                     commit_timestamp, content_sha256, ratified_at, backfilled_at)
SELECT printf('%08d-%s-4000-8000-%012d', i, :tag, i), j,
       printf('%020d', j) || '.' || lower(hex(randomblob(16))) || '.json', lower(hex(randomblob(16))),
       600, 0, j, '0000000000000000000000000000000000000000000000000000000000000000', 0, 0 FROM g, v
"""


def grow(env: BenchEnv, tables: int, rows: int) -> dict[str, Any]:
    """Insert ``tables`` tables with ``rows`` backfilled commits each; returns counts and seconds."""
    t0 = time.perf_counter()
    db = env.sync_db()  # autocommit: the transaction below is explicit on both databases
    try:
        n_tables, n_commits = add_grown_tables(db, env.database == "sqlite", env.location("growth-"), tables, rows)
    finally:
        db.close()
    time.sleep(2.0)  # let the machine settle (autovacuum workers wake up after big inserts)
    return {"tables_added": tables, "rows_added": tables * rows, "tables_total": n_tables,
            "commit_rows_total": n_commits, "seconds": round(time.perf_counter() - t0, 1)}


def add_grown_tables(db: Any, sqlite: bool, prefix: str, tables: int, rows: int,
                     batch: int = 10_000) -> tuple[int, int]:
    """Insert the grown tables through ``db`` (a DB-API connection in autocommit: sqlite3 or psycopg), in one
    transaction, each statement generating its rows in the database; returns the tables and commit rows now
    in it. Then fresh planner statistics, and the bulk load flushed now, since a checkpoint spread over the
    next minutes would compete with the probe for the 2 cores and the disk (the target is about large tables,
    not about a bulk load)."""
    tag = "a%03x" % (int(time.time() * 1000) % 4096)
    add_tables, add_commits = (_SQLITE_TABLES, _SQLITE_COMMITS) if sqlite else (_PG_TABLES, _PG_COMMITS)
    settle = (["ANALYZE", "PRAGMA wal_checkpoint(TRUNCATE)"] if sqlite
              else ["VACUUM ANALYZE owned_tables", "VACUUM ANALYZE commits", "CHECKPOINT"])
    db.execute("BEGIN IMMEDIATE" if sqlite else "BEGIN")
    db.execute(add_tables, {"n": tables, "tag": tag, "prefix": prefix, "rows": rows})
    for lo in range(1, tables + 1, batch):
        db.execute(add_commits, {"lo": lo, "hi": min(tables, lo + batch - 1), "tag": tag, "rows": rows})
    db.execute("COMMIT")
    for statement in settle:
        db.execute(statement)
    n_tables = db.execute("SELECT count(*) FROM owned_tables").fetchone()[0]
    n_commits = db.execute("SELECT count(*) FROM commits").fetchone()[0]
    return int(n_tables), int(n_commits)
