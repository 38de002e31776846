"""History storage: bytes stored per revision beside git's pack of the same commits (as saves and
captures now write a history: sealed deltas; an old database, every revision whole; and that old
database after `memframe admin compact`), and the time to open any one revision of a history stored
as deltas (payload encoding 2)."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import time
from pathlib import Path

from bench.data import add_revisions as _add
from bench.data import create_workspaces, new_service, revisions
from bench.harness import CONTEXT, OLD_DATABASE_AIM, Figure, Stats, latency_figure, log
from bench.history import _git_repo
from bench.settings import Settings
from bench.writes import git_env
from memframe import sealing
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


def _compacted_bytes(path: Path, ws: object, count: int) -> tuple[int, float]:
    """`memframe admin compact`'s work on an old database (every revision whole): what the history
    takes after it (VACUUM'd, less the empty database as before), and how long it took."""
    from memframe.backend.heads import SeenHeads
    from memframe.backend.local import LocalBackend

    started = time.perf_counter()
    backend = LocalBackend(str(path), ws.id, ws.key, seen=SeenHeads(None))  # type: ignore[attr-defined]
    try:
        done = backend.compact()
        assert done.rewritten > 0 and backend.read_revision(count) and backend.read_revision(count // 2 + 1)
    finally:
        backend.close()
    return _db_bytes(path), time.perf_counter() - started


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
        first = version - (version - 1) % sealing.KEYFRAME_EVERY
        rows = dict(
            conn.execute(
                "SELECT version, ciphertext FROM file_versions WHERE workspace_id = ? AND path = ?"
                " AND version BETWEEN ? AND ?",
                (wid, MEMORY_PATH, first, version),
            ).fetchall()
        )
        open_blob = sealing.opener(key, workspace_id=wid, path=MEMORY_PATH, fetch=rows.get)
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
        full, full_db, full_ws = _memframe_bytes(tmp, f"full{count}", texts, deltas=False)
        delta, delta_db, ws = _memframe_bytes(tmp, f"delta{count}", texts, deltas=True)
        empty = _db_bytes(full_db) - full
        log(f"  {count:,} revisions: git {git:,.0f} B, full {full / count:,.0f} B, delta {delta / count:,.0f} B"
            f" per revision ({time.perf_counter() - started:.1f} s)")  # fmt: skip
        figures.append(
            _beside_git(
                f"history bytes per revision, {count:,} revisions of 8 KiB, sealed deltas (as saves write them)",
                delta / count,
                git,
                count,
                f"what the history adds to the SQLite file (rows, indexes, metadata; after VACUUM), / {count:,};"
                " saves and captures seal each version as a delta against the one before (inside the seal),"
                f" a whole keyframe every {sealing.KEYFRAME_EVERY}; every revision whole (an old database) takes "
                f"{full / count:,.0f} B ({full / count / git:.1f}× git)",
            )
        )
        figures.append(
            _beside_git(
                f"history bytes per revision, {count:,} revisions of 8 KiB, every revision whole (an old database)",
                full / count,
                git,
                count,
                "what a database written before deltas holds; it keeps opening as it is, or is compacted (below)",
                aim=OLD_DATABASE_AIM,
            )
        )
        if count == min(s.storage_revisions):  # one rewrite (and fsync) per revision: the smaller history
            after, took = _compacted_bytes(full_db, full_ws, count)
            figures.append(
                _beside_git(
                    f"history bytes per revision, {count:,} revisions of 8 KiB, an old database after"
                    " `memframe admin compact`",
                    (after - empty) / count,
                    git,
                    count,
                    f"each old whole revision re-sealed as a delta (encoding 3: it carries the hash of the "
                    f"ciphertext it replaces, so the chain still verifies), one transaction each; took {took:.1f} s",
                )
            )
        if count == max(s.storage_revisions):
            opened = _open_one(delta_db, ws, count, s.open_samples)
            one = latency_figure(
                f"open any one revision of {count:,} stored as deltas (cold, walks to its keyframe)",
                opened,
                None,
                aim=CONTEXT,
                aim_op="none",
                aim_limit=0.0,
            )
            one.note = f"worst {opened.worst * 1000:.2f} ms; a keyframe every {sealing.KEYFRAME_EVERY} versions"
            figures.append(one)
    return figures


def _beside_git(
    name: str, per_revision: float, git: float, count: int, note: str, *, aim: str = "≤ 1.0× git"
) -> Figure:
    """One bytes-per-revision figure, its floor git's pack of the same commits (aim: no larger, or none)."""
    return Figure(
        name=name,
        value=per_revision,
        unit="B",
        aim=aim,
        aim_op="none" if aim == OLD_DATABASE_AIM else "ratio<=",
        aim_limit=1.0,
        floor=git,
        floor_name="git gc of the same commits (.git/objects)",
        samples=count,
        note=note,
    )
