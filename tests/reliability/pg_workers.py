"""Processes that share one PostgreSQL database: a capturer, a mode flipper and a reader.

Each runs its own `MemoryService` over the same URL (several writers in several processes,
as several workers would be) until its deadline, and sends back what it saw.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from multiprocessing.connection import Connection

from memframe.backend.local import LocalBackend
from memframe.core.edits import MemoryChange
from memframe.core.errors import EditRefused, FenceRefused, VersionConflict
from memframe.core.types import MEMORY_PATH, Mode
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.service.policy import read_policy

WORKSPACE = "ws"


def capturer(url: str, key: bytes, seconds: float, conversation: str, out: Connection) -> None:
    """Admit and capture in a loop; reports (committed, refused) counts."""
    service = MemoryService(url)
    person, a = LocalBackend(service, WORKSPACE, key), service.assistant
    session = a.open_key_session(LOCAL_USER, WORKSPACE, key).id
    committed = refused = turn = 0
    reasons: Counter[str] = Counter()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        turn += 1
        adm = a.admit(
            LOCAL_USER, WORKSPACE, conversation, idempotency_key=f"t{turn}", key_session_id=session, memory_state=None
        )
        try:
            a.commit_capture(
                WORKSPACE,
                adm.credential,
                idempotency_key=f"memory:{adm.id}",
                key_session_id=session,
                changes=[MemoryChange("add", f"- fact {turn}")],
                expected_version=person.load().version,
            )
            committed += 1
        except (EditRefused, FenceRefused, VersionConflict) as exc:  # a flip retired the turn, or a race
            refused += 1
            reasons[(getattr(exc, "reasons", None) and exc.reasons[0]) or type(exc).__name__] += 1
    out.send((committed, refused, dict(reasons)))
    service.close()


def flipper(url: str, key: bytes, seconds: float, seed: int, out: Connection) -> None:
    """Read only, then Auto again, in a loop: every flip retires the turns admitted before it."""
    service = MemoryService(url)
    person = LocalBackend(service, WORKSPACE, key)
    revision = person.get_policy().revision
    flips = 0
    deadline = time.monotonic() + seconds
    rng = random.Random(seed)
    while time.monotonic() < deadline:
        for mode in (Mode.READ_ONLY, Mode.AUTO):
            revision = person.set_policy(mode, revision).revision
            flips += 1
            time.sleep(rng.choice([0, 0.01, 0.03, 0.06]))  # let some turns commit between flips
    out.send(flips)
    service.close()


def reader(url: str, seconds: float, out: Connection) -> None:
    """(policy revision, memory version) from one snapshot, again and again."""
    service = MemoryService(url)
    seen: list[tuple[int, int]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with service.db.read() as conn:
            revision = read_policy(conn, WORKSPACE).revision
            row = conn.execute(
                "SELECT current_version FROM files WHERE workspace_id = ? AND path = ?", (WORKSPACE, MEMORY_PATH)
            ).fetchone()
        seen.append((revision, 0 if row is None else int(row[0])))
    out.send(seen)
    service.close()
