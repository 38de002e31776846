"""What an attack on the key-session service found, closed: every listener needs the credential
(loopback included), a call must be application/json and name a Host the service expects, and a
half-sent request is dropped after serve's read timeout instead of being held for ever."""

from __future__ import annotations

import base64
import multiprocessing
import os
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memframe.cli import main
from memframe.cli.keysessions import allowed_hosts
from memframe.core.errors import KeySessionServiceDown
from memframe.keysessions.app import create_app
from memframe.keysessions.client import RemoteKeySessions
from memframe.keysessions.private import PRIVATE_URL, PrivateService
from memframe.keysessions.store import KeySessions
from tests.conftest import FakeClock
from tests.keysessions.support import CREDENTIAL
from tests.support.remote_kinds import PortalASGITransport

CALLS = ("open", "resolve", "describe", "forget", "sessions-of", "status")
AUTH = {"authorization": f"Bearer {CREDENTIAL}"}
#: httpx (through httpcore 1.0.9) leaves the socket of a refused unix-socket connect to the garbage collector.
REFUSED_CONNECT_SOCKET = "ignore:Exception ignored in:pytest.PytestUnraisableExceptionWarning"


@pytest.fixture
def sessions() -> KeySessions:
    return KeySessions(FakeClock(), idle_seconds=60, lifetime_seconds=600)


@pytest.fixture
def client(sessions: KeySessions) -> Iterator[httpx.Client]:
    """Raw HTTP to the app in-process, its expected Host `ks.internal`."""
    transport = PortalASGITransport(create_app(sessions, CREDENTIAL, ["ks.internal"]))
    with httpx.Client(base_url="http://ks.internal", transport=transport) as raw:
        yield raw
    transport.close()


def _open_body() -> dict[str, str]:
    return {"workspace_id": "ws", "user_id": "alice", "key": base64.b64encode(os.urandom(32)).decode()}


# --- the credential ---------------------------------------------------------------------------------


def test_keysessions_refuses_to_start_without_a_credential_loopback_included(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MEMFRAME_KEYSESSIONS_CREDENTIAL", raising=False)
    for where in ("127.0.0.1:0", "[::1]:0", "localhost:0", "0.0.0.0:0"):
        assert main(["keysessions", "--listen", where]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "needs the key-session service's credential" in err, err
        assert "loopback included" in err and "--credential-file" in err


def test_serve_refuses_a_key_session_service_without_its_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MEMFRAME_KEYSESSIONS_CREDENTIAL", raising=False)
    argv = ["serve", "--db", str(tmp_path / "s.db"), "--port", "0", "--key-sessions", "http://127.0.0.1:9"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--key-sessions-credential-file" in err, err


def test_every_call_without_the_credential_is_refused_and_opens_nothing(
    client: httpx.Client, sessions: KeySessions
) -> None:
    for call in CALLS:
        for headers in ({}, {"authorization": "Bearer another-credential-entirely"}, {"authorization": CREDENTIAL}):
            answer = client.post(f"/v1/{call}", json=_open_body(), headers=headers)
            assert answer.status_code == 401 and answer.json()["error"] == "unauthorized"
    assert len(sessions) == 0
    assert client.post("/v1/open", json=_open_body(), headers=AUTH).status_code == 200
    for credential in ("", "fifteen-chars-x"):
        with pytest.raises(ValueError):
            create_app(sessions, credential, ["ks.internal"])


# --- JSON only, and the Host it expects -------------------------------------------------------------


def test_a_call_that_is_not_application_json_is_refused_with_415(client: httpx.Client, sessions: KeySessions) -> None:
    body = b'{"workspace_id": "ws", "user_id": "alice", "key": "' + base64.b64encode(os.urandom(32)) + b'"}'
    for content_type in (None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data", "json"):
        headers = AUTH if content_type is None else {**AUTH, "content-type": content_type}
        answer = client.post("/v1/open", content=body, headers=headers)
        assert answer.status_code == 415 and answer.json()["error"] == "unsupported_media_type", content_type
    assert len(sessions) == 0
    answer = client.post("/v1/open", content=body, headers={**AUTH, "content-type": "Application/JSON; charset=utf-8"})
    assert answer.status_code == 200 and len(sessions) == 1


def test_a_foreign_host_is_refused_credential_or_not(client: httpx.Client, sessions: KeySessions) -> None:
    for host in ("evil.example", "ks.internal.evil.example", "127.0.0.1", ""):
        answer = client.post("/v1/open", json=_open_body(), headers={**AUTH, "host": host})
        assert answer.status_code == 400, host
    assert len(sessions) == 0
    assert client.post("/v1/open", json=_open_body(), headers={**AUTH, "host": "KS.internal:8790"}).status_code == 200


def test_a_client_naming_a_foreign_host_hears_why(sessions: KeySessions) -> None:
    transport = PortalASGITransport(create_app(sessions, CREDENTIAL, ["ks.internal"]))
    store = RemoteKeySessions("http://10.0.0.5:8790", CREDENTIAL, transport=transport)
    try:
        with pytest.raises(KeySessionServiceDown) as refused:
            len(store)
        assert "--allow-host" in str(refused.value) and CREDENTIAL not in str(refused.value)
    finally:
        store.close()
        transport.close()


def test_the_hosts_allowed_are_where_it_listens_and_the_names_given() -> None:
    assert allowed_hosts("127.0.0.1", "127.0.0.1", []) == ["127.0.0.1", "[::1]", "localhost"]
    assert allowed_hosts("::1", "::1", []) == ["127.0.0.1", "[::1]", "localhost"]
    assert allowed_hosts("10.0.0.5", "10.0.0.5", ["KS.internal"]) == ["10.0.0.5", "ks.internal"]
    assert allowed_hosts("0.0.0.0", "0.0.0.0", ["ks.internal"]) == ["ks.internal"]


def test_a_wildcard_listener_needs_the_names_servers_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMFRAME_KEYSESSIONS_CREDENTIAL", CREDENTIAL)
    assert main(["keysessions", "--listen", "0.0.0.0:0"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--allow-host NAME" in err, err


# --- the command itself: all of it over TCP, and the read timeout -----------------------------------


@pytest.fixture
def listening(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """`memframe keysessions --listen 127.0.0.1:0 --read-timeout 1` running, with a credential file."""
    credential = tmp_path / "credential"
    credential.write_text(CREDENTIAL + "\n", encoding="utf-8")
    argv = ["keysessions", "--listen", "127.0.0.1:0", "--credential-file", str(credential), "--read-timeout", "1"]
    process = subprocess.Popen(
        [sys.executable, "-m", "memframe", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "with a credential" in line, line + (process.stderr.read() if process.stderr else "")
        host, port = line.split("http://", 1)[1].split(",", 1)[0].rsplit(":", 1)
        yield host, int(port)
    finally:
        process.terminate()
        out, err = process.communicate(timeout=30)
        assert process.returncode == 0 and "every key is forgotten" in out and err == "", (out, err)


@pytest.mark.server
def test_the_command_guards_every_call_and_drops_a_half_sent_request(listening: tuple[str, int]) -> None:
    host, port = listening
    url = f"http://{host}:{port}"
    with httpx.Client(base_url=url, trust_env=False, timeout=10) as raw:
        assert raw.post("/v1/status", json={}).status_code == 401
        assert raw.post("/v1/status", content=b"{}", headers=AUTH).status_code == 415
        assert raw.post("/v1/status", json={}, headers={**AUTH, "host": "evil.example"}).status_code == 400
        assert raw.post("/v1/status", json={}, headers={**AUTH, "host": f"localhost:{port}"}).status_code == 200
    store = RemoteKeySessions(url, CREDENTIAL)
    try:
        key = os.urandom(32)
        assert store.resolve(store.open("ws", "alice", key).id, "ws") == key
    finally:
        store.close()

    head = f"POST /v1/status HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n".encode()
    for half_sent in (head, head + f"authorization: Bearer {CREDENTIAL}\r\ncontent-length: 100\r\n\r\n{{".encode()):
        with socket.create_connection((host, port), timeout=10) as sock:
            sock.sendall(half_sent)
            started = time.monotonic()
            answer = b""
            while chunk := sock.recv(4096):  # the service closes the connection
                answer += chunk
            assert 0.5 < time.monotonic() - started < 8
            assert answer.startswith(b"HTTP/1.1 408"), answer


# --- serve's private service ------------------------------------------------------------------------


@pytest.mark.filterwarnings(REFUSED_CONNECT_SOCKET)
def test_the_private_service_listens_where_only_its_user_reaches_and_cleans_up() -> None:
    private = PrivateService(multiprocessing.get_context("spawn"), 60.0, 600.0)
    url, credential, uds = private.spec
    where = os.path.dirname(uds)
    assert url == PRIVATE_URL and len(credential) >= 32
    assert stat.S_IMODE(os.stat(where).st_mode) == 0o700
    process = private.start()
    store = RemoteKeySessions(url, credential, uds=uds, timeout=2.0)
    try:
        assert stat.S_IMODE(os.stat(uds).st_mode) == 0o600 and stat.S_ISSOCK(os.stat(uds).st_mode)
        key = os.urandom(32)
        info = store.open("ws", "alice", key)
        assert store.resolve(info.id, "ws") == key and (store.idle_seconds, store.lifetime_seconds) == (60, 600)
        stranger = RemoteKeySessions(url, "another-credential-entirely", uds=uds)
        with pytest.raises(KeySessionServiceDown) as refused:
            stranger.resolve(info.id, "ws")
        assert "credential" in str(refused.value) and key.hex() not in str(refused.value)
        stranger.close()
    finally:
        private.stop()
    assert process.exitcode == 0  # SIGTERM is its graceful stop
    assert not os.path.exists(where)
    with pytest.raises(KeySessionServiceDown):  # gone: every key-needing call is a clear refusal
        store.resolve(info.id, "ws")
    store.close()
