"""Benchmark data, made fast: many workspaces, revisions and admissions in one transaction each.

The rows are written with the service's own helpers (`files.insert_version`,
`policy.write_mode`) inside one `db.write()` batch, so they are exactly what
the service would have written, without paying one fsync per row.
"""

from __future__ import annotations

import os
import random
import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from memframe import sealing
from memframe.core.types import MEMORY_PATH, Author, Mode, Operation
from memframe.service import MemoryService, files
from memframe.service.accounts import LOCAL_USER
from memframe.service.admissions import ADMISSION_SECONDS, Admission, read_consent, write_admission
from memframe.service.assistant import AssistantService
from memframe.service.policy import read_policy, write_mode

_PHRASES = (
    "prefers concise answers; uses metric units; timezone Asia/Tokyo; reviews on Fridays; "
    "project Zudo ships quarterly; writes notes in Japanese and English; avoid emoji; "
    "the staging server is called kiri; tests run with pytest -q; deploys need two approvals"
)
_WORDS = _PHRASES.split()


def memory_text(size: int = 8000, seed: int = 0) -> str:
    """A plausible Markdown memory of about `size` UTF-8 bytes (never over it)."""
    rng = random.Random(seed)
    lines: list[str] = []
    used = 0
    section = 0
    while True:
        if len(lines) % 12 == 0:
            section += 1
            line = f"## Topic {section}"
        else:
            line = "- " + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 9)))
        if used + len(line) + 1 > size:
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines) + "\n"


def revisions(count: int, size: int = 8000, seed: int = 0) -> Iterator[str]:
    """`count` successive texts, each one edit from the one before, every one within `size` bytes.

    The edits are what a person or a capture makes of a memory: a bullet rewritten (most often),
    a bullet added, or one removed. A text near `size` removes before it adds, so the history of
    an 8 KiB memory stays 8 KiB after any number of edits (it once grew ~1.2 KB by suffixes).
    """
    rng = random.Random(seed ^ 0x5EED)
    lines = memory_text(size, seed).splitlines()

    def bullet() -> str:
        return "- " + " ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 9)))

    def used() -> int:
        return sum(len(line) + 1 for line in lines)

    for _ in range(count):
        bullets = [i for i, line in enumerate(lines) if line.startswith("- ")]
        roll, room = rng.random(), size - used()
        if (roll < 0.15 or room < 60) and len(bullets) > 1:
            del lines[rng.choice(bullets)]
        elif roll < 0.3 or room > 300:
            lines.insert(rng.choice(bullets) + 1, bullet())
        else:
            lines[rng.choice(bullets)] = bullet()
        while used() > size:  # over the budget: drop bullets until it fits again
            bullets = [i for i, line in enumerate(lines) if line.startswith("- ")]
            del lines[rng.choice(bullets)]
        yield "\n".join(lines) + "\n"


@dataclass
class Workspace:
    id: str
    key: bytes
    version: int = 0
    key_session: str | None = None
    admissions: list[Admission] = field(default_factory=list)


def new_service(path: str) -> MemoryService:
    service = MemoryService(path)
    service.accounts.add_user(LOCAL_USER, exist_ok=True)
    return service


def create_workspaces(
    service: MemoryService,
    count: int,
    *,
    prefix: str = "ws",
    text: str | None = None,
    mode: Mode = Mode.READ_ONLY,
    ai: bool = False,
    names: list[str] | None = None,
) -> list[Workspace]:
    """`count` workspaces owned by the local user, each with one revision of `text` (if given)."""
    made = [Workspace(name, sealing.new_key()) for name in names or [f"{prefix}{i:05d}" for i in range(count)]]
    now = service.db.clock()
    with service.db.write() as conn:
        for ws in made:
            conn.execute("INSERT INTO workspaces (id, owner_id, created_at) VALUES (?, ?, ?)", (ws.id, LOCAL_USER, now))
            conn.execute(
                "INSERT INTO memberships (workspace_id, user_id, created_at) VALUES (?, ?, ?)", (ws.id, LOCAL_USER, now)
            )
            if mode is not Mode.READ_ONLY:
                write_mode(conn, ws.id, mode, 0)
            if ai:
                conn.execute(
                    "INSERT INTO workspace_ai_consent (workspace_id, enabled, consent_revision) VALUES (?, 1, 1)",
                    (ws.id,),
                )
            if text is not None:
                _insert(conn, ws, text, now)
    return made


def _insert(conn: sqlite3.Connection, ws: Workspace, text: str, now: float, previous_text: str | None = None) -> None:
    head = files.get_current(conn, ws.id, MEMORY_PATH)
    previous = None if head is None else head.ciphertext
    ws.version += 1
    files.insert_version(
        conn,
        workspace_id=ws.id,
        path=MEMORY_PATH,
        version=ws.version,
        now=now,
        author=Author.PERSON,
        actor=LOCAL_USER,
        operation=Operation.SAVE,
        ciphertext=sealing.seal(
            ws.key,
            text,
            workspace_id=ws.id,
            path=MEMORY_PATH,
            version=ws.version,
            previous=previous,
            previous_text=previous_text,
        ),
    )


def add_revisions(
    service: MemoryService,
    ws: Workspace,
    texts: Iterator[str],
    *,
    step: float = 60.0,
    deltas: bool = False,
    count: int = 0,
) -> None:
    """Append many revisions in one transaction, `step` seconds apart, ending now; with `deltas`,
    each sealed (where smaller) as a delta against the one before (payload encoding 2). Given
    `count` (how many there are), the texts are streamed rather than held."""
    batch = texts if count else list(texts)
    start = service.db.clock() - step * (count or len(batch))  # type: ignore[arg-type]
    before: str | None = None
    with service.db.write() as conn:
        for n, text in enumerate(batch):
            _insert(conn, ws, text, start + n * step, before if deltas else None)
            before = text


def open_key_sessions(service: MemoryService, workspaces: list[Workspace]) -> None:
    """Key sessions live only in the service's RAM: no write is involved."""
    for ws in workspaces:
        ws.key_session = service.key_sessions.open(ws.id, LOCAL_USER, ws.key).id


def admit_many(service: MemoryService, workspaces: list[Workspace], per_workspace: int) -> None:
    """`per_workspace` admissions per workspace, each in its own conversation (so each keeps its
    credential), written as `AssistantService.admit` writes them, all in one transaction."""
    now = service.db.clock()
    with service.db.write() as conn:
        for ws in workspaces:
            policy = read_policy(conn, ws.id)
            consent = read_consent(conn, ws.id)
            for _ in range(per_workspace):
                conversation = "c-" + secrets.token_hex(6)
                AssistantService._claim_conversation(conn, LOCAL_USER, ws.id, conversation, now)
                admission = Admission(
                    id="adm_" + secrets.token_hex(12),
                    conversation_id=conversation,
                    workspace_id=ws.id,
                    user_id=LOCAL_USER,
                    mode=policy.mode,
                    policy_revision=policy.revision,
                    clear_generation=policy.clear_generation,
                    ai_consent_revision=consent.revision,
                    key_session_id=ws.key_session,
                    client_memory_state=None,
                    credential_nonce=secrets.token_urlsafe(24),
                    created_at=now,
                    expires_at=now + ADMISSION_SECONDS,
                )
                write_admission(conn, admission, "bench-" + secrets.token_hex(4))
                ws.admissions.append(admission)


@contextmanager
def memframe_home(home: Path) -> Iterator[Path]:
    """Point MEMFRAME_HOME at `home` for a while (key files and the local database live there)."""
    before = os.environ.get("MEMFRAME_HOME")
    os.environ["MEMFRAME_HOME"] = str(home)
    try:
        yield home
    finally:
        if before is None:
            del os.environ["MEMFRAME_HOME"]
        else:
            os.environ["MEMFRAME_HOME"] = before


def local_home(
    home: Path, workspace_id: str, texts: Iterator[str], count: int = 0, *, deltas: bool = False
) -> Workspace:
    """A memframe home with one local workspace holding `texts` as its revisions, and its key file:
    what `memframe -w WORKSPACE` opens."""
    from memframe import paths
    from memframe.sealing.keyfiles import write_key

    with memframe_home(home):
        service = new_service(str(paths.local_database()))
        try:
            (ws,) = create_workspaces(service, 1, names=[workspace_id])
            add_revisions(service, ws, texts, count=count, deltas=deltas)
            write_key(ws.key, workspace_id)
        finally:
            service.close()
    return ws
