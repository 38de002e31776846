"""A workspace with AI enabled, a key session, and helpers to admit turns."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memframe import sealing
from memframe.backend.local import LocalBackend
from memframe.core.types import Mode
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.service.admissions import Admission
from tests.conftest import FakeClock


@dataclass
class Stage:
    service: MemoryService
    clock: FakeClock
    key: bytes
    person: LocalBackend
    key_session: str
    turns: int = 0

    @property
    def assistant(self):  # type: ignore[no-untyped-def]
        return self.service.assistant

    def admit(
        self, conversation: str = "conv", *, memory_state: str | None = None, key_session: str | None = "default"
    ) -> Admission:
        self.turns += 1
        return self.assistant.admit(
            LOCAL_USER,
            "ws",
            conversation,
            idempotency_key=f"send-{self.turns}",
            key_session_id=self.key_session if key_session == "default" else key_session,
            memory_state=memory_state,
        )

    def set_mode(self, mode: Mode) -> None:
        policy = self.person.get_policy()
        self.person.set_policy(mode, policy.revision)

    def fence_rows(self) -> int:
        with self.service.db.read() as conn:
            return int(conn.execute("SELECT COUNT(*) FROM workspace_memory_commit_fence").fetchone()[0])

    def before_fence_batch(self, action: Callable[[], object]) -> None:
        """Run `action` each time a capture has resolved its key session, which it does immediately
        before its batch: after the credential, idempotency and key-session checks, in the window
        the fence exists for. (The key-session store is the real collaborator the capture calls last.)"""
        sessions = self.assistant.key_sessions
        resolve = sessions.key_and_opener

        def resolved_then(session_id: str | None, workspace_id: str) -> Any:
            found = resolve(session_id, workspace_id)
            action()
            return found

        sessions.key_and_opener = resolved_then

    def consumed(self, admission: Admission) -> bool:
        with self.service.db.read() as conn:
            row = conn.execute(
                "SELECT consumed_at FROM workspace_memory_admissions WHERE id = ?", (admission.id,)
            ).fetchone()
        return row[0] is not None


@pytest.fixture
def stage(tmp_path: Path, clock: FakeClock) -> Iterator[Stage]:
    service = MemoryService(tmp_path / "a.db", clock=clock)
    service.accounts.add_user(LOCAL_USER)
    service.accounts.create_workspace("ws", LOCAL_USER)
    key = sealing.new_key()
    person = LocalBackend(service, "ws", key)
    service.assistant.set_ai(LOCAL_USER, "ws", True)
    session = service.assistant.open_key_session(LOCAL_USER, "ws", key)
    yield Stage(service, clock, key, person, session.id)
    service.close()


class CountingAutomation:
    """An Automation that counts requests by route before passing them on, so a test can prove a
    refusal made no request. Test scaffolding: the shipped InProcessAutomation counts nothing."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return attr(*args, **kwargs)

        return call


@pytest.fixture
def counted_automation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every local backend's Assistant runtime made in this test runs on a CountingAutomation
    (`backend.store.endpoint.runtime.automation.calls`)."""
    from memframe.assistant import automation

    real = automation.InProcessAutomation
    monkeypatch.setattr(automation, "InProcessAutomation", lambda service: CountingAutomation(real(service)))
