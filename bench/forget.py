"""Forgetting over a long history: `forget --before N` against opening every revision once.

A rotation opens every version with the old key and seals the kept ones under the new one, then the
server swaps them and rewrites its file; the aim holds that whole job to a few times the bare cost
of opening the history, which any reader of it pays.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.data import Workspace, memframe_home
from bench.harness import Figure, log, ms, time_once
from bench.settings import Settings
from memframe import sealing
from memframe.backend.heads import SeenHeads
from memframe.backend.local import LocalBackend
from memframe.service import MemoryService

#: Revisions read per request while opening them all (what `history -p` asks for at once).
_BATCH = 1000


def forget_figures(tmp: Path, s: Settings, home: Path, ws: Workspace) -> list[Figure]:
    count = s.history_revisions
    copy = tmp / "home-forget"
    shutil.copytree(home, copy)
    with memframe_home(copy):
        from memframe import paths

        db = paths.local_database()

    def client() -> LocalBackend:
        return LocalBackend(MemoryService(db), ws.id, ws.key, seen=SeenHeads(None), owns_service=True)

    def open_all() -> None:
        backend = client()
        try:
            for at in range(1, count + 1, _BATCH):
                backend.read_revisions(list(range(at, min(count, at + _BATCH - 1) + 1)))
        finally:
            backend.close()

    opened = time_once(open_all)
    backend = client()
    backend.prove_key()  # the bench's workspace was made without a key check
    before = count // 2
    try:
        took = time_once(lambda: backend.rotate_key(sealing.new_key(), who="bench", forget_before=before))
        kept = backend.read_revisions([before, count])
    finally:
        backend.close()
    log(f"  forget over {count:,} revisions: {took:.2f} s; opening them all: {opened:.2f} s")
    figure = Figure(
        name=f"forget --before {before:,} over {count:,} revisions of 8 KiB (re-seal, swap, rewrite the file)",
        value=ms(took),
        unit="ms",
        aim="≤ 3× opening every revision once",
        aim_op="ratio<=",
        aim_limit=3.0,
        floor=ms(opened),
        floor_name=f"opening all {count:,} revisions",
        samples=1,
    )
    figure.checks = {"kept versions open": len(kept) == 2}
    return [figure]
