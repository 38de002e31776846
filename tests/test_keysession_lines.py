"""serve's private key-session transport, piece by piece: the unix socket's permissions and its
loop, the service's line protocol (in order, paused while its answers do not drain, every
connection closed when it stops), the framing written without json.dumps (the same JSON as
json.dumps would give, for any string), and the client's one timer per connection."""

from __future__ import annotations

import asyncio
import base64
import json
import multiprocessing
import os
import secrets
import shutil
import socket
import stat
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest

from memframe.api.keysessions_app import LineProtocol, _line, _parsed, keysession_calls
from memframe.cli.keysessions import _loop_factory, run_private, wait_until_answering
from memframe.core.errors import KeySessionServiceDown, KeySessionUnavailable
from memframe.service.keysession_client import RESOLVED, RemoteKeySessions, _framed
from memframe.service.keysessions import KeySessions
from tests.conftest import FakeClock
from tests.test_keysession_async import _client_of, _key_of, _resolved
from tests.test_keysession_service import CREDENTIAL, _LineService

#: Strings a session id, workspace id or credential could carry that would break a hand-written frame.
AWKWARD = ["plain", 'a"quote', "back\\slash", "new\nline", "tab\tand\rreturn", "\u2028sep", "é and 😀", "\x00nul"]


@pytest.fixture
def socket_path() -> Iterator[str]:
    where = tempfile.mkdtemp(prefix="ksl-")  # short: a unix socket's path is at most ~100 bytes
    yield os.path.join(where, "ks.sock")
    shutil.rmtree(where, ignore_errors=True)


# --- the private service's socket and loop ----------------------------------------------------------


def test_the_private_service_listens_on_a_socket_only_its_user_can_reach_and_removes_it(socket_path: str) -> None:
    where = os.path.dirname(socket_path)
    assert stat.S_IMODE(os.stat(where).st_mode) == 0o700  # as serve makes it (tempfile.mkdtemp)
    credential = secrets.token_urlsafe(32)
    process = multiprocessing.get_context("spawn").Process(
        target=run_private, args=(socket_path, credential, 60.0, 600.0), daemon=True
    )
    process.start()
    store = RemoteKeySessions("http://keysessions", credential, uds=socket_path, timeout=2.0)
    try:
        wait_until_answering(store, process)
        assert stat.S_IMODE(os.stat(socket_path).st_mode) == 0o600
        assert stat.S_ISSOCK(os.stat(socket_path).st_mode)
        key = os.urandom(32)
        info = store.open("ws", "alice", key)
        assert asyncio.run(store.resolve_async(info.id, "ws")) == key
        stranger = RemoteKeySessions("http://keysessions", "another-credential-entirely", uds=socket_path)
        with pytest.raises(KeySessionServiceDown) as refused:
            stranger.resolve(info.id, "ws")
        assert "credential" in str(refused.value) and key.hex() not in str(refused.value)
        stranger.close()
    finally:
        process.terminate()
        process.join(10)
    assert process.exitcode == 0  # SIGTERM is its graceful stop
    assert not os.path.exists(socket_path) and not os.path.exists(where)  # it cleans up after itself
    with pytest.raises(KeySessionServiceDown):  # gone: every key-needing call is a clear refusal
        store.resolve(info.id, "ws")
    with pytest.raises(KeySessionServiceDown):
        asyncio.run(store.resolve_async(info.id, "ws"))
    store.close()


def test_the_private_service_runs_on_uvloop_where_it_is_installed_and_on_asyncios_loop_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    try:
        import uvloop
    except ImportError:
        assert _loop_factory() is None
    else:
        assert _loop_factory() is uvloop.new_event_loop
    monkeypatch.setitem(sys.modules, "uvloop", None)  # not installed: the import fails
    assert _loop_factory() is None
    # asyncio's own loop serving the same protocol: `_LineService` runs serve_lines under asyncio.run
    sessions = KeySessions(FakeClock(), idle_seconds=60, lifetime_seconds=600)
    where = tempfile.mkdtemp(prefix="ksl-")
    path = os.path.join(where, "ks.sock")
    service = _LineService(sessions, CREDENTIAL, path)
    service.start()
    store = RemoteKeySessions("http://keysessions", CREDENTIAL, uds=path, timeout=2.0)
    try:
        key = os.urandom(32)
        info = store.open("ws", "alice", key)
        assert store.resolve(info.id, "ws") == key
    finally:
        store.close()
        service.close()
        shutil.rmtree(where, ignore_errors=True)


# --- the service's line protocol ------------------------------------------------------------------


class _Transport:
    """What `LineProtocol` writes and how it is told to pause, for a test that drives it by hand."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.reading, self.closed = True, False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def _protocol(sessions: KeySessions) -> tuple[LineProtocol, _Transport, set[Any]]:
    connections: set[Any] = set()
    protocol = LineProtocol(keysession_calls(sessions), f"Bearer {CREDENTIAL}".encode(), connections)
    transport = _Transport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    return protocol, transport, connections


def _call(name: str, body: dict[str, Any], credential: str = CREDENTIAL) -> bytes:
    return json.dumps({"call": name, "authorization": f"Bearer {credential}", "body": body}).encode() + b"\n"


def test_every_whole_line_of_a_wake_up_is_answered_in_order_in_one_write_and_a_split_line_waits() -> None:
    sessions = KeySessions(FakeClock(), idle_seconds=60, lifetime_seconds=600)
    key = os.urandom(32)
    sid = sessions.open("ws", "alice", key).id
    protocol, transport, connections = _protocol(sessions)
    assert connections == {transport}
    first, second = _call("resolve", {"session_id": sid, "workspace_id": "ws"}), _call("status", {})
    protocol.data_received(first + second[:10])  # one whole line and the start of the next
    assert len(transport.written) == 1
    protocol.data_received(second[10:] + _call("resolve", {"session_id": sid, "workspace_id": "ws"}, "wrong"))
    assert len(transport.written) == 2  # the rest of the split line and one more, answered together
    answers = [json.loads(line) for line in b"".join(transport.written).splitlines()]
    assert [a["status"] for a in answers] == [200, 200, 401]
    assert base64.b64decode(answers[0]["body"]["key"]) == key and answers[1]["body"]["live"] == 1
    assert key.hex() not in str(answers[2]) and "key" not in answers[2]["body"]
    protocol.connection_lost(None)
    assert connections == set()


def test_a_client_that_stops_reading_stops_being_read_and_an_overlong_line_ends_the_connection() -> None:
    sessions = KeySessions(FakeClock(), idle_seconds=60, lifetime_seconds=600)
    protocol, transport, _ = _protocol(sessions)
    protocol.pause_writing()  # its answers are not draining
    assert not transport.reading
    protocol.resume_writing()
    assert transport.reading
    protocol.data_received(_call("status", {}) + b"x" * 3000)
    assert not transport.closed  # an unfinished line within the limit waits for its end
    protocol.data_received(b"x" * 3000)
    assert transport.closed  # past any call's size, with no end: refused and closed
    answers = b"".join(transport.written).splitlines()
    assert [json.loads(a)["status"] for a in answers] == [200, 413]
    protocol.data_received(_call("status", {}))  # nothing more is read once it is closing
    assert len(b"".join(transport.written).splitlines()) == 2


def test_stopping_the_service_closes_every_connection_at_once(socket_path: str) -> None:
    sessions = KeySessions(FakeClock(), idle_seconds=60, lifetime_seconds=600)
    service = _LineService(sessions, CREDENTIAL, socket_path)
    service.start()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.settimeout(5)
        raw.connect(socket_path)
        raw.sendall(_call("status", {}))
        received = raw.makefile("rb")
        assert json.loads(received.readline())["status"] == 200
        started = time.monotonic()
        service.close()
        assert received.readline() == b""  # closed by the service, not left for the client's timeout
        assert time.monotonic() - started < 5


# --- the framing ----------------------------------------------------------------------------------


@pytest.mark.parametrize("text", AWKWARD)
def test_a_call_line_is_the_json_json_dumps_would_write_on_one_line(text: str) -> None:
    store = RemoteKeySessions("http://keysessions", f"cred-{text.encode().hex()}", uds="/nowhere/ks.sock")
    try:
        for body in ({"session_id": text, "workspace_id": text}, {"user_id": text, "workspace_id": None}, {}):
            line = store._line("sessions-of", body)
            assert line.endswith(b"\n") and line.count(b"\n") == 1 and line.isascii()
            assert json.loads(line) == {"call": "sessions-of", "authorization": store._authorization, "body": body}
            assert _parsed(line.rstrip(b"\n")) == json.loads(line)
        odd = {"n": 1, "list": [text]}  # not a flat body of strings: json.dumps writes it
        assert json.loads(store._line("status", odd))["body"] == odd
    finally:
        store.close()


def test_a_resolve_answer_is_recognised_by_its_bytes_and_every_other_answer_is_parsed() -> None:
    for _ in range(50):
        key = base64.b64encode(os.urandom(32)).decode()
        line = _line(200, {"key": key})
        assert line == json.dumps({"status": 200, "body": {"key": key}}, separators=(",", ":")).encode() + b"\n"
        assert line.startswith(RESOLVED[0]) and _framed(line) == (200, {"key": key})
    assert _framed(_line(409, {"error": "x", "message": "gone"})) == (409, {"error": "x", "message": "gone"})
    assert _framed(_line(200, {"key": 'not"base64'})) == (200, {"key": 'not"base64'})  # through JSON
    assert _framed(_line(200, {"key": "abc", "more": "x"}))[1] == {"key": "abc", "more": "x"}
    tricky = RESOLVED[0] + b'a", "status": 500, "x": "' + RESOLVED[1]  # the shape, but not a base64 key
    assert _framed(tricky) == (200, {"key": "a", "status": 500, "x": ""})  # read as the JSON it is
    for garbled in (b"", b"{", b"[]", b'{"status":200}', b'{"status":"x","body":{}}', b'{"status":200,"body":[]}'):
        with pytest.raises(KeySessionServiceDown):
            _framed(garbled)
    for bad in (b"", b"{} {}", b"\xff", b"[1", b"{}x"):
        with pytest.raises(ValueError):
            _parsed(bad)


@pytest.mark.parametrize("text", AWKWARD)
def test_awkward_ids_travel_the_real_line_service_and_come_back_as_refusals(socket_path: str, text: str) -> None:
    sessions = KeySessions(FakeClock(), idle_seconds=60, lifetime_seconds=600)
    service = _LineService(sessions, CREDENTIAL, socket_path)
    service.start()
    store = RemoteKeySessions("http://keysessions", CREDENTIAL, uds=socket_path, timeout=2.0)
    try:
        key = os.urandom(32)
        info = store.open(f"ws-{text}", "alice", key)
        assert asyncio.run(store.resolve_async(info.id, f"ws-{text}")) == key
        with pytest.raises(KeySessionUnavailable):  # an unknown id, quotes and newlines and all
            asyncio.run(store.resolve_async(f"ks_{text}", f"ws-{text}"))
        assert store.sessions_of("alice", f"ws-{text}") == [(info.id, f"ws-{text}")]
    finally:
        store.close()
        service.close()


# --- the client's timer -------------------------------------------------------------------------


def test_the_timeout_is_each_calls_own_though_the_connection_has_one_timer(socket_path: str) -> None:
    """A service that answers each call 0.3 s after it came, with a timeout of 0.5 s: three calls
    one after another take 0.9 s on one connection, yet none waited past its own deadline."""

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            await asyncio.sleep(0.3)
            writer.write(_resolved(line))
            await writer.drain()

    async def main() -> None:
        async with _client_of(socket_path, slow, timeout=0.5) as store:
            for n in range(3):
                assert await store.resolve_async(f"ks_{n}", "ws") == _key_of(f"ks_{n}")
            late = asyncio.gather(*(store.resolve_async(f"ks_late{n}", "ws") for n in range(3)), return_exceptions=True)
            got = await late  # the second waits 0.6 s behind the first: past its deadline, down (all of them)
            assert got[0] == _key_of("ks_late0")
            assert [type(g) for g in got[1:]] == [KeySessionServiceDown] * 2
            assert await store.resolve_async("ks_after", "ws") == _key_of("ks_after")  # a fresh connection

    asyncio.run(main())


def test_an_answer_no_call_asked_for_or_an_overlong_one_ends_the_connection(socket_path: str) -> None:
    async def babbling(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        writer.write(_resolved(line) + _resolved(line))  # one answer too many
        await writer.drain()
        await reader.read()

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(b"x" * ((1 << 20) + 10))  # longer than any answer, and no end
        await writer.drain()
        await reader.read()

    async def main(handler: Any) -> list[Any]:
        async with _client_of(socket_path, handler, timeout=2.0) as store:
            first = await asyncio.gather(store.resolve_async("ks_a", "ws"), return_exceptions=True)
            pipe = store._pipe
            assert pipe is not None
            for _ in range(50):
                if pipe.dead:
                    break
                await asyncio.sleep(0.01)
            return [*first, pipe.dead]

    assert asyncio.run(main(babbling)) == [_key_of("ks_a"), True]  # answered, then never used again
    got = asyncio.run(main(endless))
    assert type(got[0]) is KeySessionServiceDown and got[1] is True
