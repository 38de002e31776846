"""Shared by the reliability families: the soak switch, a row-for-row dump, and the store's invariants.

`make test` runs every family at a CI size; `MEMFRAME_SOAK=1` (what `make soak`
sets) runs the same tests at the soak size. `store_problems` is the one
definition of "the database is sound" that crash trials, fault injection and
the race schedules all check.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from memframe.core.types import MEMORY_PATH
from memframe.sealing import plaintext_size


def _soak_factor() -> float:
    raw_value = os.environ.get("MEMFRAME_SOAK", "").strip()
    try:
        return max(0.0, float(raw_value)) if raw_value else 0.0
    except ValueError:
        return 1.0  # any other non-empty value means "soak"


#: 0 in `make test`; 1 under MEMFRAME_SOAK=1 (`make soak`); a fraction such as 0.2 runs a reduced soak.
SOAK_FACTOR = _soak_factor()
SOAK = SOAK_FACTOR > 0


def sized(ci: int, soak: int) -> int:
    """The CI size in `make test`; the soak size under MEMFRAME_SOAK=1 (scaled by a fractional factor)."""
    return max(ci, round(soak * SOAK_FACTOR)) if SOAK else ci


def is_postgres(target: str | Path) -> bool:
    return isinstance(target, str) and target.startswith("postgresql://")


@contextmanager
def raw(target: str | Path) -> Iterator[Any]:
    """A plain connection of our own, outside the service (as a crash-recovering reader would be):
    sqlite3 on a file, or psycopg (autocommit, the neutral `?` placeholders) on a PostgreSQL URL."""
    if is_postgres(target):
        import psycopg

        from memframe.service.pg import _PgConnection

        with psycopg.connect(str(target), autocommit=True) as conn:
            yield _PgConnection(conn)
        return
    with closing(sqlite3.connect(target, isolation_level=None, timeout=10.0)) as conn:
        yield conn


def _is_pg(conn: Any) -> bool:
    return not isinstance(conn, sqlite3.Connection)


def tables(conn: Any) -> list[str]:
    if _is_pg(conn):
        sql = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"
    else:
        sql = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    return [r[0] for r in conn.execute(sql)]


def _schema(conn: Any) -> list[tuple[Any, ...]]:
    if _is_pg(conn):
        return conn.execute(  # pg_catalog, not information_schema: a tenth of the time
            "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull FROM pg_attribute AS a"
            " JOIN pg_class AS c ON c.oid = a.attrelid WHERE c.relnamespace = current_schema()::regnamespace"
            " AND a.attnum > 0 AND NOT a.attisdropped"
        ).fetchall()
    return conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()


def dump(target: str | Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, sorted, and the schema: two equal dumps are the same database, row for row."""
    with raw(target) as conn:
        out: dict[str, list[tuple[Any, ...]]] = {"sqlite_master": sorted(_schema(conn), key=repr)}
        for name in tables(conn):
            out[name] = sorted((tuple(r) for r in conn.execute(f'SELECT * FROM "{name}"').fetchall()), key=repr)
    return out


def diff_dumps(before: dict[str, list[tuple[Any, ...]]], after: dict[str, list[tuple[Any, ...]]]) -> list[str]:
    """Which tables differ (for a readable assertion message)."""
    return [
        f"{name}: {len(before.get(name, []))} rows before, {len(after.get(name, []))} after"
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    ]


def store_problems(conn: Any) -> list[str]:
    """Everything that must hold of a memframe database at rest; [] when sound.

    * SQLite's own integrity and foreign-key checks pass (PostgreSQL enforces its foreign keys on
      every write, and its pages are its own to check);
    * every document's versions are exactly 1..current with no gap (the primary key
      rules out a fork), and `files.current_version` is the newest version;
    * every stored hash and size matches its ciphertext;
    * every capture version has exactly one fence row with ok = 1, every fence row
      names a capture version, and the admission it consumed records that version;
    * each workspace's clear generation equals its number of committed Clear revisions.
    """
    problems: list[str] = []
    if not _is_pg(conn):
        integrity = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        if integrity != ["ok"]:
            problems.append(f"integrity_check: {integrity[:5]}")
            return problems
        fk = conn.execute("PRAGMA foreign_key_check").fetchall()
        if fk:
            problems.append(f"foreign_key_check: {fk[:5]}")

    heads = {
        (r[0], r[1]): (int(r[2]), int(r[3]))
        for r in conn.execute("SELECT workspace_id, path, current_version, deleted FROM files")
    }
    chains: dict[tuple[str, str], list[int]] = {}
    ops: dict[tuple[str, str, int], str] = {}
    for ws, path, version, operation, size, digest, blob in conn.execute(
        "SELECT workspace_id, path, version, operation, size, content_hash, ciphertext FROM file_versions"
        " ORDER BY workspace_id, path, version"
    ):
        chains.setdefault((ws, path), []).append(int(version))
        ops[(ws, path, int(version))] = operation
        if blob is None:
            if operation != "delete" or digest != "" or size != 0:
                problems.append(f"{ws}:{path}@{version}: a {operation} without ciphertext")
            continue
        blob = bytes(blob)
        if digest != hashlib.sha256(blob).hexdigest():
            problems.append(f"{ws}:{path}@{version}: content_hash does not match the ciphertext")
        if size != plaintext_size(bytes(blob)):
            problems.append(f"{ws}:{path}@{version}: size does not match the ciphertext")
    for doc, versions in chains.items():
        if versions != list(range(1, len(versions) + 1)):
            problems.append(f"{doc}: version chain {versions[:10]}… has a gap")
        head = heads.get(doc)
        if head is None or head[0] != versions[-1]:
            problems.append(f"{doc}: files.current_version {head} is not the newest version {versions[-1]}")
        elif bool(head[1]) != (ops[(*doc, versions[-1])] == "delete"):
            problems.append(f"{doc}: files.deleted disagrees with the head revision")
    for doc in set(heads) - set(chains):
        problems.append(f"{doc}: a files row with no versions")

    fence = conn.execute("SELECT admission_id, workspace_id, version, ok FROM workspace_memory_commit_fence").fetchall()
    captures = {(ws, v) for (ws, path, v), op in ops.items() if op == "capture"}
    fenced = [(ws, int(v)) for _, ws, v, _ in fence]
    if sorted(fenced) != sorted(captures):
        problems.append(f"fence rows {sorted(fenced)[:10]} do not match capture versions {sorted(captures)[:10]}")
    if any(ok != 1 for *_, ok in fence):
        problems.append("a fence row with ok != 1")
    if any(ops.get((ws, MEMORY_PATH, int(v))) != "capture" for _, ws, v, _ in fence):
        problems.append("a fence row whose version is not a capture of the memory document")
    consumed = {
        r[0]: (r[1], r[2], r[3])
        for r in conn.execute(
            "SELECT id, workspace_id, consumed_at, committed_version FROM workspace_memory_admissions"
            " WHERE consumed_at IS NOT NULL OR committed_version IS NOT NULL"
        )
    }
    by_admission = {a: (ws, int(v)) for a, ws, v, _ in fence}
    if set(consumed) != set(by_admission):
        problems.append("consumed admissions and fence rows disagree")
    for admission, (ws, _, committed) in consumed.items():
        if by_admission.get(admission) != (ws, committed):
            problems.append(
                f"admission {admission}: committed_version {committed} != fence {by_admission.get(admission)}"
            )

    clears: dict[str, int] = {}
    for (ws, path, _), op in ops.items():
        if op == "clear" and path == MEMORY_PATH:
            clears[ws] = clears.get(ws, 0) + 1
    generations = dict(conn.execute("SELECT workspace_id, clear_generation FROM workspace_memory_policy").fetchall())
    for ws in set(clears) | set(generations):
        if generations.get(ws, 0) != clears.get(ws, 0):
            problems.append(f"{ws}: clear_generation {generations.get(ws, 0)} but {clears.get(ws, 0)} Clear revisions")
    return problems


def check_store(path: str | Path) -> None:
    """`store_problems` of the database at `path` (a file or a PostgreSQL URL) is empty."""
    with raw(path) as conn:
        problems = store_problems(conn)
    assert not problems, "\n".join(problems)


def record_figures(family: str, **figures: Any) -> None:
    """Append a family's figures as one JSON line to $MEMFRAME_RELIABILITY_REPORT, if set.

    `make soak` sets it so RELIABILITY.md can quote the last run's numbers.
    """
    import json
    import time

    target = os.environ.get("MEMFRAME_RELIABILITY_REPORT")
    line = {"family": family, "soak": SOAK_FACTOR, "at": time.strftime("%Y-%m-%d %H:%M:%S"), **figures}
    print(json.dumps(line, ensure_ascii=False))
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
