"""History storage: bytes stored per revision beside git's pack of the same commits, and the time
to open any one revision of a history stored as deltas (payload encoding 2)."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import time
from pathlib import Path

from bench.data import add_revisions as _add
from bench.data import create_workspaces, new_service, revisions
from bench.harness import Figure, Stats, latency_figure, log
from bench.history import _git_repo
from bench.settings import Settings
from bench.writes import git_env
from memframe import crypto
from memframe.core.types import MEMORY_PATH


def _db_bytes(path: Path) -> int:
    """The database's size once its write-ahead log is folded in and free pages dropped."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("VACUUM")
        pages, size = conn.execute("PRAGMA page_count").fetchone()[0], conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()
    return int(pages) * int(size)


def _git_bytes(repo: Path, env: dict[str, str]) -> int:
    """Everything git keeps of the history after `git gc`: its packs and their indexes."""
    subprocess.run(["git", "gc", "-q"], cwd=repo, check=True, env=env)
    return sum(f.stat().st_size for f in (repo / ".git" / "objects").rglob("*") if f.is_file())


def _memframe_bytes(tmp: Path, name: str, texts: list[str], *, deltas: bool) -> tuple[int, Path, object]:
    """What `texts` add to a database holding the workspace with no revision yet (the schema and
    empty tables are the database's, not the history's, as git's are its empty repository's)."""
    path = tmp / f"storage-{name}.db"
    service = new_service(str(path))
    (ws,) = create_workspaces(service, 1, prefix=name)
    service.close()
    empty = _db_bytes(path)
    service = new_service(str(path))
    _add(service, ws, iter(texts), deltas=deltas)
    service.close()
    return _db_bytes(path) - empty, path, ws


def _open_one(path: Path, ws: object, count: int, samples: int) -> Stats:
    """Open one revision, chosen at random, with a fresh opener each time (nothing cached): at worst
    it reads and opens the KEYFRAME_EVERY - 1 versions before it."""
    conn = sqlite3.connect(path, isolation_level=None)
    rng = random.Random(9)
    wid, key = ws.id, ws.key  # type: ignore[attr-defined]
    times: list[float] = []
    for _ in range(samples):
        version = rng.randrange(1, count + 1)
        start = time.perf_counter()
        first = version - (version - 1) % crypto.KEYFRAME_EVERY
        rows = dict(
            conn.execute(
                "SELECT version, ciphertext FROM file_versions WHERE workspace_id = ? AND path = ?"
                " AND version BETWEEN ? AND ?",
                (wid, MEMORY_PATH, first, version),
            ).fetchall()
        )
        open_blob = crypto.opener(key, workspace_id=wid, path=MEMORY_PATH, fetch=rows.get)
        open_blob(rows[version], version)
        times.append(time.perf_counter() - start)
    conn.close()
    return Stats.of(times)


def storage_figures(tmp: Path, s: Settings) -> list[Figure]:
    figures: list[Figure] = []
    env = git_env(tmp)
    for count in s.storage_revisions:
        started = time.perf_counter()
        texts = list(revisions(count, size=8 * 1024 - 64, seed=5))
        repo = tmp / f"storage-git-{count}"
        _git_repo(repo, texts, env)
        git = _git_bytes(repo, env) / count
        full, _, _ = _memframe_bytes(tmp, f"full{count}", texts, deltas=False)
        delta, delta_db, ws = _memframe_bytes(tmp, f"delta{count}", texts, deltas=True)
        log(f"  {count:,} revisions: git {git:,.0f} B, full {full / count:,.0f} B, delta {delta / count:,.0f} B"
            f" per revision ({time.perf_counter() - started:.1f} s)")  # fmt: skip
        figures.append(
            Figure(
                name=f"history bytes per revision, {count:,} revisions of 8 KiB, sealed deltas (encoding 2)",
                value=delta / count,
                unit="B",
                aim="≤ 1.0× git",
                aim_op="ratio<=",
                aim_limit=1.0,
                floor=git,
                floor_name="git gc of the same commits (.git/objects)",
                samples=count,
                note=f"what the history adds to the SQLite file (rows, indexes, metadata; after VACUUM), / {count:,};"
                " every revision "
                f"whole (each sealed zlib, as saves store them today) takes {full / count:,.0f} B "
                f"({full / count / git:.1f}× git)",
            )
        )
        figures.append(
            Figure(
                name=f"history bytes per revision, {count:,} revisions of 8 KiB, every revision whole (saves today)",
                value=full / count,
                unit="B",
                aim="≤ 1.0× git",
                aim_op="ratio<=",
                aim_limit=1.0,
                floor=git,
                floor_name="git gc of the same commits (.git/objects)",
                samples=count,
                note="saves do not seal deltas yet: recall and the remote readers open the head with one decrypt "
                "and no earlier rows",
            )
        )
        if count == max(s.storage_revisions):
            opened = _open_one(delta_db, ws, count, s.open_samples)
            one = latency_figure(
                f"open any one revision of {count:,} stored as deltas (cold, walks to its keyframe)",
                opened,
                None,
                aim="≤ 1 ms",
                aim_op="value<=",
                aim_limit=1.0,
            )
            one.note = f"worst {opened.worst * 1000:.2f} ms; a keyframe every {crypto.KEYFRAME_EVERY} versions"
            figures.append(one)
    return figures
