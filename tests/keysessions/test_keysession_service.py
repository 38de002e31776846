"""The key-session service and its client: the same `KeySessionStore` as the in-process one,
behind a credential, with no key in any message; the service down is one clear refusal."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memframe.backend.local import LocalBackend
from memframe.core.edits import MemoryChange
from memframe.core.errors import KeySessionServiceDown, KeySessionUnavailable, NotFound
from memframe.core.turns import RecallResult
from memframe.core.types import Mode, RecallStatus
from memframe.keysessions.app import create_app
from memframe.keysessions.client import RemoteKeySessions
from memframe.keysessions.private import PRIVATE_URL
from memframe.keysessions.store import KeySessions
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from tests.conftest import FakeClock
from tests.keysessions.support import CREDENTIAL, UnixService, socket_dir
from tests.support.remote_kinds import PortalASGITransport


class _Switch(httpx.BaseTransport):
    """The service's transport, or a refused connection once `down`."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner, self.down = inner, False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        return self.inner.handle_request(request)


@pytest.fixture
def sessions(clock: FakeClock) -> KeySessions:
    return KeySessions(clock, idle_seconds=60, lifetime_seconds=600)


@pytest.fixture
def transport(sessions: KeySessions) -> Iterator[PortalASGITransport]:
    t = PortalASGITransport(create_app(sessions, CREDENTIAL, ["keysessions.test"]))
    yield t
    t.close()


@pytest.fixture
def socket_path() -> Iterator[str]:
    with socket_dir() as where:
        yield os.path.join(where, "ks.sock")


@pytest.fixture(params=["asgi", "unix socket"])
def remote(
    request: pytest.FixtureRequest, transport: PortalASGITransport, sessions: KeySessions, socket_path: str
) -> Iterator[RemoteKeySessions]:
    """The client over HTTP to the app in-process (as `--key-sessions URL` reaches it) and to the app
    under uvicorn on a unix socket (as serve's workers reach their private service)."""
    if request.param == "asgi":
        store = RemoteKeySessions("http://keysessions.test", CREDENTIAL, transport=transport)
        yield store
        store.close()
        return
    service = UnixService(sessions, socket_path)
    store = RemoteKeySessions(PRIVATE_URL, CREDENTIAL, uds=socket_path)
    yield store
    store.close()
    service.close()


def test_the_client_presents_the_same_store_as_the_service_holds(
    remote: RemoteKeySessions, sessions: KeySessions, clock: FakeClock
) -> None:
    key = os.urandom(32)
    info = remote.open("ws", "alice", key)
    assert sessions.describe(info.id) == info and remote.describe(info.id) == info
    assert remote.resolve(info.id, "ws") == key and len(remote) == 1
    assert (remote.idle_seconds, remote.lifetime_seconds) == (60, 600)
    assert remote.sessions_of("alice") == [(info.id, "ws")] and remote.sessions_of("bob") == []
    with pytest.raises(KeySessionUnavailable):
        remote.resolve(info.id, "other")
    assert remote.memory_opener(info.id, "ws") is remote.memory_opener(info.id, "ws")  # the cipher is kept...
    clock.advance(61)
    with pytest.raises(KeySessionUnavailable):  # ...but liveness is the service's, judged on every call
        remote.memory_opener(info.id, "ws")
    again = remote.open("ws", "alice", key)
    remote.forget(again.id)
    assert remote.describe(again.id) is None and len(remote) == 0
    assert repr(remote) in ("<RemoteKeySessions http://keysessions.test>", f"<RemoteKeySessions {PRIVATE_URL}>")


def test_a_wrong_credential_is_refused_and_nothing_echoes_a_key(transport: PortalASGITransport) -> None:
    key = os.urandom(32)
    store = RemoteKeySessions("http://keysessions.test", "another-credential-entirely", transport=transport)
    with pytest.raises(KeySessionServiceDown) as refused:
        store.open("ws", "alice", key)
    assert "credential" in str(refused.value) and key.hex() not in str(refused.value)
    store.close()


def test_the_service_down_refuses_key_work_and_withholds_recall_while_saves_go_on(tmp_path: Path) -> None:
    """A `MemoryService` whose key sessions are in a service that is not there."""
    down = RemoteKeySessions("http://127.0.0.1:9", CREDENTIAL, timeout=0.5)  # the discard port: nothing answers
    service = MemoryService(tmp_path / "s.db", key_sessions=down)
    try:
        service.accounts.add_user(LOCAL_USER)
        service.accounts.create_workspace("ws", LOCAL_USER)
        key = os.urandom(32)
        person = LocalBackend(service, "ws", key)
        assert person.save("# Memory\n- tea\n", 0).version == 1  # a person's Save needs no key session
        person.set_policy(Mode.AUTO, 0)
        person.set_ai(True)
        with pytest.raises(KeySessionServiceDown) as refused:
            service.assistant.open_key_session(LOCAL_USER, "ws", key)
        assert "Saves still work" in str(refused.value) and refused.value.status == 503
        with pytest.raises(KeySessionServiceDown) as refused:
            service.assistant.admit(
                LOCAL_USER, "ws", "c", idempotency_key="t1", key_session_id="ks_gone", memory_state=None
            )
        assert refused.value.admission_refused and "nothing was admitted" in str(refused.value)
        with pytest.raises(NotFound):  # nothing was written: not even the conversation
            service.assistant.receipts(LOCAL_USER, "c", "ws")
    finally:
        service.close()
        down.close()


def test_recall_withholds_when_the_service_goes_away_after_admission(
    tmp_path: Path, transport: PortalASGITransport, sessions: KeySessions
) -> None:
    switch = _Switch(transport)
    store = RemoteKeySessions("http://keysessions.test", CREDENTIAL, transport=switch)
    service = MemoryService(tmp_path / "s.db", key_sessions=store)
    try:
        service.accounts.add_user(LOCAL_USER)
        service.accounts.create_workspace("ws", LOCAL_USER)
        key = os.urandom(32)
        person = LocalBackend(service, "ws", key)
        person.save("# Memory\n- tea\n", 0)
        person.set_policy(Mode.AUTO, 0)
        person.set_ai(True)
        a = service.assistant
        session = a.open_key_session(LOCAL_USER, "ws", key).id
        admitted = a.admit(LOCAL_USER, "ws", "c", idempotency_key="t1", key_session_id=session, memory_state=None)
        assert a.recall("ws", admitted.credential).status is RecallStatus.PROVIDED
        switch.down = True  # the service is gone
        assert a.recall("ws", admitted.credential) == RecallResult(RecallStatus.UNAVAILABLE, 1)
        assert person.save("# Memory\n- tea\n- scones\n", 1).version == 2
    finally:
        service.close()
        store.close()


def test_serve_takes_one_to_64_workers(capsys: pytest.CaptureFixture[str]) -> None:
    from memframe.cli import main

    with pytest.raises(SystemExit):
        main(["serve", "--db", "x.db", "--workers", "0"])
    assert "--workers is 1 to 64" in capsys.readouterr().err


# --- the service's promises with its keys in the key-session service ---------------------------


@pytest.fixture
def shared(tmp_path: Path, remote: RemoteKeySessions, clock: FakeClock) -> Iterator[MemoryService]:
    """A `MemoryService` whose key sessions live in the key-session service (in-process here, on the
    test's clock), as each worker's do."""
    service = MemoryService(tmp_path / "s.db", clock=clock, key_sessions=remote)
    service.accounts.add_user(LOCAL_USER)
    service.accounts.create_workspace("ws", LOCAL_USER)
    yield service
    service.close()


def _auto(service: MemoryService, key: bytes) -> LocalBackend:
    person = LocalBackend(service, "ws", key)
    person.save("# Memory\n- tea\n", 0)
    person.set_policy(Mode.AUTO, 0)
    person.set_ai(True)
    return person


def _capture(service: MemoryService, admitted: Any, session: str, line: str, expected: int) -> Any:
    return service.assistant.commit_capture(
        "ws",
        admitted.credential,
        idempotency_key=f"memory:{admitted.id}",
        key_session_id=session,
        changes=[MemoryChange("add", line)],
        expected_version=expected,
    )


def test_a_revocation_writes_its_row_before_the_service_forgets_and_nothing_lands_under_it(
    shared: MemoryService, sessions: KeySessions
) -> None:
    key = os.urandom(32)
    _auto(shared, key)
    a = shared.assistant
    session = a.open_key_session(LOCAL_USER, "ws", key).id
    assert sessions.describe(session) is not None  # held by the service, not by this process
    first = a.admit(LOCAL_USER, "ws", "c", idempotency_key="t1", key_session_id=session, memory_state=None)
    assert _capture(shared, first, session, "- scones", 1).version.version == 2
    second = a.admit(LOCAL_USER, "ws", "c", idempotency_key="t2", key_session_id=session, memory_state=None)
    order: list[str] = []
    forget = sessions.forget

    def noting_forget(session_id: str) -> None:
        with shared.db.read() as conn:
            row = conn.execute("SELECT 1 FROM key_session_revocations WHERE key_session_id = ?", (session_id,))
            order.append("row, then forget" if row.fetchone() else "forget before the row")
        forget(session_id)

    sessions.forget = noting_forget  # type: ignore[method-assign]
    a.revoke_key_session(LOCAL_USER, session)
    assert order == ["row, then forget"] and sessions.describe(session) is None
    with pytest.raises(KeySessionUnavailable):
        _capture(shared, second, session, "- jam", 2)
    assert a.recall("ws", second.credential).status is RecallStatus.UNAVAILABLE


def test_idle_eviction_and_a_removed_member_end_sessions_held_by_the_service(
    shared: MemoryService, sessions: KeySessions, clock: FakeClock
) -> None:
    key = os.urandom(32)
    _auto(shared, key)
    a = shared.assistant
    session = a.open_key_session(LOCAL_USER, "ws", key).id
    admitted = a.admit(LOCAL_USER, "ws", "c", idempotency_key="t1", key_session_id=session, memory_state=None)
    clock.advance(sessions.idle_seconds)  # the service's idle eviction, on its clock
    assert a.recall("ws", admitted.credential).status is RecallStatus.UNAVAILABLE
    with pytest.raises(KeySessionUnavailable) as refused:
        a.admit(LOCAL_USER, "ws", "c", idempotency_key="t2", key_session_id=session, memory_state=None)
    assert refused.value.admission_refused

    shared.accounts.add_user("bob")
    shared.accounts.add_member("ws", "bob")
    theirs = a.open_key_session("bob", "ws", key).id
    shared.accounts.remove_member("ws", "bob")  # revoked in the service too, row first
    assert sessions.describe(theirs) is None and len(shared.key_sessions) == 0
    with shared.db.read() as conn:
        assert conn.execute("SELECT 1 FROM key_session_revocations WHERE key_session_id = ?", (theirs,)).fetchone()


class _Counting(httpx.BaseTransport):
    """The service's transport, noting each call's path (never its body)."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.calls: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request.url.path)
        return self.inner.handle_request(request)


def test_each_recall_send_and_capture_asks_the_service_once(tmp_path: Path, transport: PortalASGITransport) -> None:
    """One round trip each: the fence and recall ask the service immediately before (liveness is
    never cached), and nothing asks it twice for the same request."""
    counting = _Counting(transport)
    store = RemoteKeySessions("http://keysessions.test", CREDENTIAL, transport=counting)
    service = MemoryService(tmp_path / "s.db", key_sessions=store)
    try:
        service.accounts.add_user(LOCAL_USER)
        service.accounts.create_workspace("ws", LOCAL_USER)
        key = os.urandom(32)
        _auto(service, key)
        a = service.assistant
        session = a.open_key_session(LOCAL_USER, "ws", key).id
        counting.calls.clear()
        admitted = a.admit(LOCAL_USER, "ws", "c", idempotency_key="t1", key_session_id=session, memory_state=None)
        assert counting.calls == ["/v1/describe"]
        for _ in range(2):  # the second with the opener kept: still asked, once
            counting.calls.clear()
            assert a.recall("ws", admitted.credential).status is RecallStatus.PROVIDED
            assert counting.calls == ["/v1/resolve"]
        counting.calls.clear()
        assert _capture(service, admitted, session, "- scones", 1).version.version == 2
        assert counting.calls == ["/v1/resolve"]
    finally:
        service.close()
        store.close()


#: httpcore (1.0.9) leaves the socket of a refused unix-socket connect to the garbage collector.
REFUSED_CONNECT_SOCKET = "ignore:Exception ignored in:pytest.PytestUnraisableExceptionWarning"


@pytest.mark.filterwarnings(REFUSED_CONNECT_SOCKET)
def test_over_the_unix_socket_a_stranger_is_refused_the_service_gone_is_down_and_a_restart_forgets(
    sessions: KeySessions, socket_path: str
) -> None:
    key = os.urandom(32)
    service = UnixService(sessions, socket_path)
    try:
        stranger = RemoteKeySessions(PRIVATE_URL, "another-credential-entirely", uds=socket_path)
        with pytest.raises(KeySessionServiceDown) as refused:
            stranger.open("ws", "alice", key)
        assert "credential" in str(refused.value) and key.hex() not in str(refused.value)
        stranger.close()
        assert len(sessions) == 0
        store = RemoteKeySessions(PRIVATE_URL, CREDENTIAL, uds=socket_path, timeout=1.0)
        info = store.open("ws", "alice", key)
        assert store.resolve(info.id, "ws") == key
    finally:
        service.close()
    with pytest.raises(KeySessionServiceDown):  # gone: nothing answers
        store.resolve(info.id, "ws")
    restarted = UnixService(KeySessions(FakeClock()), socket_path)
    try:  # a restart forgets every key; the client connects again and hears so
        with pytest.raises(KeySessionUnavailable):
            store.resolve(info.id, "ws")
        assert store.open("ws", "alice", key).id != info.id
    finally:
        store.close()
        restarted.close()
