"""Recall's key-session resolve awaited on the event loop (the recall route on SQLite): the same
statuses and receipts as the sync recall, asked of the store on every call, in process and from the
key-session service over its unix socket."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memframe.api import create_app
from memframe.backend.local import LocalBackend
from memframe.core.errors import KeySessionUnavailable
from memframe.core.turns import RecallResult
from memframe.core.types import Mode, RecallStatus
from memframe.keysessions.client import RemoteKeySessions
from memframe.keysessions.private import PRIVATE_URL
from memframe.keysessions.store import KeySessions
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from tests.conftest import FakeClock
from tests.keysessions.support import CREDENTIAL, UnixService, socket_dir

#: httpx (through httpcore 1.0.9) leaves the socket of a refused unix-socket connect to the garbage collector.
REFUSED_CONNECT_SOCKET = "ignore:Exception ignored in:pytest.PytestUnraisableExceptionWarning"


def test_the_in_process_stores_awaited_opener_judges_now_as_the_sync_one_does() -> None:
    clock = FakeClock()
    sessions = KeySessions(clock, idle_seconds=60, lifetime_seconds=600)
    session = sessions.open("ws", "alice", os.urandom(32)).id
    opener = asyncio.run(sessions.memory_opener_async(session, "ws"))
    assert opener is sessions.memory_opener(session, "ws")
    clock.advance(60)
    with pytest.raises(KeySessionUnavailable):
        asyncio.run(sessions.memory_opener_async(session, "ws"))


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[tuple[MemoryService, KeySessions, UnixService]]:
    """A `MemoryService` whose keys are in the key-session service on a unix socket, as a worker's are."""
    sessions = KeySessions(FakeClock(), idle_seconds=60, lifetime_seconds=600)
    with socket_dir() as where:
        path = os.path.join(where, "ks.sock")
        keysessions = UnixService(sessions, path)
        store = RemoteKeySessions(PRIVATE_URL, CREDENTIAL, uds=path, timeout=2.0)
        service = MemoryService(tmp_path / "s.db", key_sessions=store)
        service.accounts.add_user(LOCAL_USER)
        service.accounts.create_workspace("ws", LOCAL_USER)
        yield service, sessions, keysessions
        service.close()
        store.close()
        keysessions.close()


def _auto(service: MemoryService, key: bytes) -> None:
    person = LocalBackend(service, "ws", key)
    person.save("# Memory\n- tea\n", 0)
    person.set_policy(Mode.AUTO, 0)
    person.set_ai(True)


@pytest.mark.filterwarnings(REFUSED_CONNECT_SOCKET)
def test_recall_awaiting_its_key_gives_the_same_statuses_and_receipts_as_recall(
    remote: tuple[MemoryService, KeySessions, UnixService],
) -> None:
    service, sessions, keysessions = remote
    key = os.urandom(32)
    _auto(service, key)
    a = service.assistant
    session = a.open_key_session(LOCAL_USER, "ws", key).id
    first = a.admit(LOCAL_USER, "ws", "c", idempotency_key="t1", key_session_id=session, memory_state=None)
    pending = a.admit(LOCAL_USER, "ws", "p", idempotency_key="t1", key_session_id=session, memory_state="pending")

    async def main() -> list[RecallResult]:
        got = list(await asyncio.gather(*(a.recall_awaiting_key("ws", first.credential) for _ in range(4))))
        got.append(await a.recall_awaiting_key("ws", pending.credential))  # judged without the key
        sessions.forget(session)  # the key session is gone: withheld, never from a kept answer
        got.append(await a.recall_awaiting_key("ws", first.credential))
        return got

    provided = RecallResult(RecallStatus.PROVIDED, 1, "# Memory\n- tea\n")
    unavailable = RecallResult(RecallStatus.UNAVAILABLE, 1)
    assert asyncio.run(main()) == [provided] * 4 + [RecallResult(RecallStatus.PENDING, 1), unavailable]
    statuses = [r.status for r in a.receipts(LOCAL_USER, "c", "ws")]
    assert statuses == [RecallStatus.PROVIDED] * 4 + [RecallStatus.UNAVAILABLE]
    assert [r.status for r in a.receipts(LOCAL_USER, "p", "ws")] == [RecallStatus.PENDING]

    second_session = a.open_key_session(LOCAL_USER, "ws", key).id
    second = a.admit(LOCAL_USER, "ws", "c", idempotency_key="t2", key_session_id=second_session, memory_state=None)
    keysessions.close()  # the service down: recall withholds `unavailable`, and says so in its receipt
    assert asyncio.run(a.recall_awaiting_key("ws", second.credential)) == unavailable
    assert a.recall("ws", second.credential) == unavailable  # as the sync one does
    assert [r.status for r in a.receipts(LOCAL_USER, "c", "ws")][-2:] == [RecallStatus.UNAVAILABLE] * 2


def test_the_recall_route_on_sqlite_asks_the_service_on_every_call(
    remote: tuple[MemoryService, KeySessions, UnixService],
) -> None:
    service, sessions, _ = remote
    assert service.db.local_reads
    key = os.urandom(32)
    _auto(service, key)
    a = service.assistant
    session = a.open_key_session(LOCAL_USER, "ws", key).id
    admitted = a.admit(LOCAL_USER, "ws", "c", idempotency_key="t1", key_session_id=session, memory_state=None)
    url = "/api/v1/automation/workspaces/ws/memory"
    with TestClient(create_app(service)) as client:
        auth = {"authorization": f"Bearer {admitted.credential}"}
        answer = client.get(url, headers=auth)
        assert answer.status_code == 200 and answer.json()["status"] == "provided"
        assert answer.json()["text"] == "# Memory\n- tea\n"
        sessions.forget(session)
        answer = client.get(url, headers=auth)
        assert answer.status_code == 200 and answer.json()["status"] == "unavailable"
        assert answer.json().get("text") is None
