"""Recall's key-session resolve, awaited on the event loop: the in-process store's async variant,
the pipelined line client (calls written as they come, answers matched first in, first out), a
restart of the service mid-pipeline, and recall's statuses and receipts through the async route."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from memframe.api import create_app
from memframe.api.keysessions_app import create_keysessions_app
from memframe.backend.local import LocalBackend
from memframe.core.errors import KeySessionServiceDown, KeySessionUnavailable
from memframe.core.turns import RecallResult
from memframe.core.types import Mode, RecallStatus
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.service.keysession_client import RemoteKeySessions
from memframe.service.keysessions import KeySessions
from tests.conftest import FakeClock
from tests.remote_kinds import PortalASGITransport
from tests.test_keysession_service import CREDENTIAL, _LineService

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
def socket_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import shutil
    import tempfile

    where = tempfile.mkdtemp(prefix="ksa-")  # short: a unix socket's path is at most ~100 bytes
    yield os.path.join(where, "ks.sock")
    shutil.rmtree(where, ignore_errors=True)


def _answer(status: int, body: dict[str, object]) -> bytes:
    return json.dumps({"status": status, "body": body}).encode() + b"\n"


def _key_of(session_id: str) -> bytes:
    return session_id.encode().ljust(32, b"k")[:32]


def _resolved(line: bytes) -> bytes:
    """A stand-in service's answer to one resolve: a key that names the session it was asked for."""
    session_id = json.loads(line)["body"]["session_id"]
    return _answer(200, {"key": base64.b64encode(_key_of(session_id)).decode()})


@contextlib.asynccontextmanager
async def _client_of(path: str, handler: Handler, timeout: float = 5.0) -> AsyncIterator[RemoteKeySessions]:
    """A client of a stand-in service on `path`, each connection's writer closed however its
    handler ends (the loop ending cancels it); client and service closed at the end."""

    async def closing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_unix_server(closing, path=path)
    store = RemoteKeySessions("http://keysessions", CREDENTIAL, uds=path, timeout=timeout)
    try:
        yield store
    finally:
        store.close()
        server.close()


# --- the in-process store ---------------------------------------------------------------------


def test_the_in_process_stores_async_variant_judges_now_as_the_sync_one_does() -> None:
    clock = FakeClock()
    sessions = KeySessions(clock, idle_seconds=60, lifetime_seconds=600)
    key = os.urandom(32)
    info = sessions.open("ws", "alice", key)

    async def main() -> None:
        opener = await sessions.memory_opener_async(info.id, "ws")
        assert opener is sessions.memory_opener(info.id, "ws")  # the same cipher, made once per session
        assert await sessions.key_and_opener_async(info.id, "ws") == (key, opener)
        clock.advance(59)  # the awaited call touched the session, as the sync one does
        assert (await sessions.key_and_opener_async(info.id, "ws"))[0] == key
        for session_id, workspace in ((None, "ws"), ("ks_unknown", "ws"), (info.id, "another")):
            with pytest.raises(KeySessionUnavailable):
                await sessions.memory_opener_async(session_id, workspace)
        clock.advance(60)  # idle: gone, the moment it is asked for
        with pytest.raises(KeySessionUnavailable):
            await sessions.memory_opener_async(info.id, "ws")

    asyncio.run(main())


# --- the pipelined line client ------------------------------------------------------------------


def test_pipelined_calls_are_written_before_any_answer_and_answered_in_order(socket_path: str) -> None:
    """A stand-in service that answers nothing until every call has arrived, then all at once:
    a client that waited for each answer before writing its next call would never be answered."""
    calls = 6
    connections: list[int] = []

    async def all_then_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        lines = [await reader.readline() for _ in range(calls)]
        writer.write(b"".join(_resolved(line) for line in lines))
        await writer.drain()
        await reader.read()  # the client keeps the connection; wait for it to go
        writer.close()

    async def main() -> None:
        async with _client_of(socket_path, all_then_answer) as store:
            ids = [f"ks_{n}" for n in range(calls)]
            keys = await asyncio.gather(*(store.resolve_async(i, "ws") for i in ids))
            assert keys == [_key_of(i) for i in ids]  # each call got its own answer
            assert connections == [1]  # all on one kept connection

    asyncio.run(main())


def test_the_line_service_answers_pipelined_lines_in_order(sessions_and_service: tuple[KeySessions, str]) -> None:
    sessions, path = sessions_and_service
    keys = [os.urandom(32) for _ in range(3)]
    ids = [sessions.open("ws", "alice", key).id for key in keys]
    frame = {"authorization": f"Bearer {CREDENTIAL}"}
    lines = [
        {"call": "resolve", "body": {"session_id": ids[0], "workspace_id": "ws"}},
        {"call": "resolve", "body": {"session_id": "ks_unknown", "workspace_id": "ws"}},
        {"call": "describe", "body": {"session_id": ids[2]}},
        {"call": "resolve", "body": {"session_id": ids[1], "workspace_id": "ws"}},
    ]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.settimeout(5)
        raw.connect(path)
        raw.sendall(b"".join(json.dumps({**frame, **line}).encode() + b"\n" for line in lines))  # all at once
        received = raw.makefile("rb")
        answers = [json.loads(received.readline()) for _ in lines]
    assert [a["status"] for a in answers] == [200, 409, 200, 200]
    assert base64.b64decode(answers[0]["body"]["key"]) == keys[0]
    assert answers[2]["body"]["session"]["id"] == ids[2]
    assert base64.b64decode(answers[3]["body"]["key"]) == keys[1]


@pytest.fixture
def sessions_and_service(socket_path: str) -> Iterator[tuple[KeySessions, str]]:
    sessions = KeySessions(FakeClock(), idle_seconds=60, lifetime_seconds=600)
    service = _LineService(sessions, CREDENTIAL, socket_path)
    service.start()
    yield sessions, socket_path
    service.close()


def test_a_service_gone_mid_pipeline_fails_the_calls_in_flight_and_the_next_call_reconnects(
    socket_path: str,
) -> None:
    """The first connection answers one call of three and closes (the service restarting); the
    two left waiting are service-down, and the next call is answered on a fresh connection."""
    seen: list[int] = []

    async def one_then_gone(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(len(seen))
        if len(seen) == 1:
            lines = [await reader.readline() for _ in range(3)]
            writer.write(_resolved(lines[0]))
            await writer.drain()
            writer.close()
            return
        while line := await reader.readline():
            writer.write(_resolved(line))
            await writer.drain()
        writer.close()

    async def main() -> None:
        async with _client_of(socket_path, one_then_gone) as store:
            got = await asyncio.gather(
                *(store.resolve_async(f"ks_{n}", "ws") for n in range(3)), return_exceptions=True
            )
            assert got[0] == _key_of("ks_0")
            assert [type(g) for g in got[1:]] == [KeySessionServiceDown, KeySessionServiceDown]
            assert all("ks_" not in str(g) for g in got[1:])  # no session id (nor key) in the message
            assert await store.resolve_async("ks_again", "ws") == _key_of("ks_again")
            assert seen == [0, 1]

    asyncio.run(main())


def test_a_service_that_does_not_answer_in_time_is_down_for_every_call_waiting(socket_path: str) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    async def main() -> None:
        async with _client_of(socket_path, silent, timeout=0.2) as store:
            got = await asyncio.gather(
                *(store.resolve_async(f"ks_{n}", "ws") for n in range(3)), return_exceptions=True
            )
            assert [type(g) for g in got] == [KeySessionServiceDown] * 3

    asyncio.run(main())


def test_the_real_service_restarting_forgets_every_key_and_the_awaited_client_hears_so(socket_path: str) -> None:
    sessions = KeySessions(FakeClock(), idle_seconds=60, lifetime_seconds=600)
    service = _LineService(sessions, CREDENTIAL, socket_path)
    service.start()
    store = RemoteKeySessions("http://keysessions", CREDENTIAL, uds=socket_path, timeout=2.0)
    key = os.urandom(32)
    info = store.open("ws", "alice", key)

    async def main() -> None:
        opener = await store.memory_opener_async(info.id, "ws")
        assert opener is store.memory_opener(info.id, "ws")  # the kept cipher, confirmed on each call
        assert await store.key_and_opener_async(info.id, "ws") == (key, opener)
        service.close()  # gone: the kept connection closes, and nothing answers a new one
        with pytest.raises(KeySessionServiceDown) as down:
            await store.memory_opener_async(info.id, "ws")
        assert key.hex() not in str(down.value) and socket_path not in str(down.value)
        restarted = _LineService(KeySessions(FakeClock()), CREDENTIAL, socket_path)
        restarted.start()
        try:
            with pytest.raises(KeySessionUnavailable):  # a fresh connection: the restart forgot the key
                await store.memory_opener_async(info.id, "ws")
        finally:
            restarted.close()

    try:
        asyncio.run(main())
    finally:
        store.close()


def test_over_http_the_awaited_resolve_is_the_sync_call_on_a_thread() -> None:
    sessions = KeySessions(FakeClock(), idle_seconds=60, lifetime_seconds=600)
    transport = PortalASGITransport(create_keysessions_app(sessions, CREDENTIAL))
    store = RemoteKeySessions("http://keysessions.test", CREDENTIAL, transport=transport)
    key = os.urandom(32)
    try:
        info = store.open("ws", "alice", key)

        async def main() -> None:
            assert (await store.key_and_opener_async(info.id, "ws"))[0] == key
            sessions.forget(info.id)
            with pytest.raises(KeySessionUnavailable):
                await store.memory_opener_async(info.id, "ws")

        asyncio.run(main())
    finally:
        store.close()
        transport.close()


# --- recall through the async route -----------------------------------------------------------------


@pytest.fixture
def lined(tmp_path: Path, socket_path: str) -> Iterator[tuple[MemoryService, KeySessions, _LineService]]:
    """A `MemoryService` whose keys are in the line service (serve's private one), as a worker's are."""
    sessions = KeySessions(FakeClock(), idle_seconds=60, lifetime_seconds=600)
    line_service = _LineService(sessions, CREDENTIAL, socket_path)
    line_service.start()
    store = RemoteKeySessions("http://keysessions", CREDENTIAL, uds=socket_path, timeout=2.0)
    service = MemoryService(tmp_path / "s.db", key_sessions=store)
    service.accounts.add_user(LOCAL_USER)
    service.accounts.create_workspace("ws", LOCAL_USER)
    yield service, sessions, line_service
    service.close()
    store.close()
    line_service.close()


def test_recall_awaiting_its_key_gives_the_same_statuses_and_receipts_as_recall(
    lined: tuple[MemoryService, KeySessions, _LineService],
) -> None:
    service, sessions, line_service = lined
    key = os.urandom(32)
    person = LocalBackend(service, "ws", key)
    person.save("# Memory\n- tea\n", 0)
    person.set_policy(Mode.AUTO, 0)
    person.set_ai(True)
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

    got = asyncio.run(main())
    provided = RecallResult(RecallStatus.PROVIDED, 1, "# Memory\n- tea\n")
    assert got == [provided] * 4 + [
        RecallResult(RecallStatus.PENDING, 1),
        RecallResult(RecallStatus.UNAVAILABLE, 1),
    ]
    assert [r.status for r in a.receipts(LOCAL_USER, "c", "ws")] == [RecallStatus.PROVIDED] * 4 + [
        RecallStatus.UNAVAILABLE
    ]
    assert [r.status for r in a.receipts(LOCAL_USER, "p", "ws")] == [RecallStatus.PENDING]

    second_session = a.open_key_session(LOCAL_USER, "ws", key).id
    second = a.admit(LOCAL_USER, "ws", "c", idempotency_key="t2", key_session_id=second_session, memory_state=None)
    line_service.close()  # the service down: recall withholds `unavailable`, and says so in its receipt

    async def down() -> RecallResult:
        return await a.recall_awaiting_key("ws", second.credential)

    assert asyncio.run(down()) == RecallResult(RecallStatus.UNAVAILABLE, 1)
    assert a.recall("ws", second.credential) == RecallResult(RecallStatus.UNAVAILABLE, 1)  # as the sync one does
    assert [r.status for r in a.receipts(LOCAL_USER, "c", "ws")][-2:] == [RecallStatus.UNAVAILABLE] * 2


def test_the_recall_route_awaits_the_resolve_on_sqlite(lined: tuple[MemoryService, KeySessions, _LineService]) -> None:
    """Over HTTP: the route's recall (on the event loop, SQLite) asks the service on every call."""
    service, sessions, _ = lined
    assert service.db.local_reads
    key = os.urandom(32)
    person = LocalBackend(service, "ws", key)
    person.save("# Memory\n- tea\n", 0)
    person.set_policy(Mode.AUTO, 0)
    person.set_ai(True)
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
        assert "text" not in answer.json() or answer.json()["text"] is None


def test_each_event_loop_gets_its_own_kept_connection(sessions_and_service: tuple[KeySessions, str]) -> None:
    """A store awaited from one loop, then from another (a server started again in one process):
    the first loop's connection is not used from the second."""
    sessions, path = sessions_and_service
    key = os.urandom(32)
    info = sessions.open("ws", "alice", key)
    store = RemoteKeySessions("http://keysessions", CREDENTIAL, uds=path, timeout=2.0)
    try:
        for _ in range(2):
            assert asyncio.run(store.resolve_async(info.id, "ws")) == key
    finally:
        store.close()


# --- the pipe's own socket: an answer read the moment its write returns, a full socket buffer --------


class _AnsweredBeforeReturning:
    """The pipe's socket, whose `send` returns only once the service thread has written its answers
    (as happens when the write wakes the service on this very core and it runs at once)."""

    def __init__(self, sock: socket.socket, answered: Callable[[], None]) -> None:
        self._sock, self._answered = sock, answered

    def send(self, data: bytes) -> int:
        sent = self._sock.send(data)
        self._answered()
        return sent

    def __getattr__(self, name: str) -> object:
        return getattr(self._sock, name)


def test_a_call_alone_whose_answer_is_there_when_its_write_returns_is_answered_without_waiting(
    socket_path: str,
) -> None:
    """The call completes on its first step (the coroutine never suspends): the answer is read
    right after the write, not on a later turn of the loop; and it is still the service's answer to
    this call, asked now (a second call asks again and gets its own answer)."""
    import threading

    from memframe.service.keysession_client import _LinePipe

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_path)
    listener.listen(1)
    answered = threading.Event()
    asked: list[bytes] = []

    def service() -> None:  # blocking: reads one line at a time, answers it, says so
        conn, _ = listener.accept()
        with conn, conn.makefile("rb") as lines:
            while line := lines.readline():
                asked.append(line)
                conn.sendall(_resolved(line))
                answered.set()

    thread = threading.Thread(target=service, daemon=True)
    thread.start()

    def wait_for_answer() -> None:
        assert answered.wait(5)
        answered.clear()

    async def main() -> list[bytes]:
        store = RemoteKeySessions("http://keysessions", CREDENTIAL, uds=socket_path, timeout=5.0)
        try:
            pipe = _LinePipe(asyncio.get_running_loop(), socket_path, 5.0)
            await asyncio.shield(pipe._connected)
            assert pipe._sock is not None
            pipe._sock = _AnsweredBeforeReturning(pipe._sock, wait_for_answer)  # type: ignore[assignment]
            keys = []
            for session_id in ("ks_a", "ks_b"):
                step = pipe.call(store._line("resolve", {"session_id": session_id, "workspace_id": "ws"}))
                with pytest.raises(StopIteration) as done:  # finished on its first step: never suspended
                    step.send(None)
                status, body = done.value.value
                assert status == 200
                keys.append(base64.b64decode(body["key"]))
            pipe.close_soon()
            return keys
        finally:
            store.close()

    try:
        assert asyncio.run(main()) == [_key_of("ks_a"), _key_of("ks_b")]
        assert [json.loads(line)["body"]["session_id"] for line in asked] == ["ks_a", "ks_b"]  # each asked
    finally:
        listener.close()
        thread.join(5)


def test_calls_beyond_what_the_socket_buffer_holds_are_all_written_in_order_and_answered(socket_path: str) -> None:
    """Thousands of calls pipelined at once while the service has not started reading: more than
    the socket takes in one send, so the rest waits for it to drain; every call gets its own answer."""
    calls = 4000
    started = asyncio.Event()

    async def slow_then_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await started.wait()  # nothing read until every call is queued
        while line := await reader.readline():
            writer.write(_resolved(line))
            await writer.drain()

    async def main() -> None:
        async with _client_of(socket_path, slow_then_answer) as store:
            ids = [f"ks_{n}_{'x' * 100}" for n in range(calls)]  # ~200 bytes a line: ~800 KB in all
            waiting = asyncio.gather(*(store.resolve_async(i, "ws") for i in ids))
            for _ in range(3):
                await asyncio.sleep(0)  # the first call connects, written; the rest gathered and flushed
            pipe = store._pipe
            assert pipe is not None
            for _ in range(500):
                if pipe._unsent:
                    break
                await asyncio.sleep(0.001)
            assert pipe._unsent  # the socket did not take everything at once
            started.set()
            assert await waiting == [_key_of(i) for i in ids]
            assert not pipe._unsent and not pipe.dead

    asyncio.run(main())


def test_a_connect_cancelled_with_its_loop_closes_its_socket(socket_path: str) -> None:
    """The loop ending while the pipe connects (a worker stopping) cancels the connect: its socket
    is closed then, not left to the garbage collector."""
    from memframe.service.keysession_client import _LinePipe

    made: list[socket.socket] = []
    real = socket.socket

    def recording(*args: object, **kwargs: object) -> socket.socket:
        sock = real(*args, **kwargs)  # type: ignore[arg-type]
        made.append(sock)
        return sock

    async def main() -> None:
        loop = asyncio.get_running_loop()
        never = loop.create_future()

        async def hanging_connect(sock: socket.socket, address: object) -> None:
            await never  # a connect that never completes

        loop.sock_connect = hanging_connect  # type: ignore[method-assign]
        pipe = _LinePipe(loop, socket_path, 5.0)
        await asyncio.sleep(0)  # the connect has begun
        pipe._connected.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pipe._connected
        assert pipe.dead

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket, "socket", recording)
        asyncio.run(main())
    assert made and all(sock.fileno() == -1 for sock in made)  # closed
