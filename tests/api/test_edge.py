"""The HTTP edge against a real uvicorn on 127.0.0.1, spoken to over raw sockets.

What is pinned here is what no in-process transport can show: a client that trickles
its request head or stalls its body is dropped after the read timeout, connections
beyond the limit are refused at once, h11's own refusals and doubled or ambiguous
headers answer in the one error shape, and the access log shows no query strings
and no handles.
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn

from memframe.api import create_app
from memframe.api.edge import header_problem
from memframe.api.server import uvicorn_config
from memframe.service import MemoryService

pytestmark = pytest.mark.server

READ_TIMEOUT = 1.0
MAX_CONNECTIONS = 8
#: How long a test waits for the server to act before calling it held; far above READ_TIMEOUT.
PATIENCE = 15.0


@dataclass
class Edge:
    port: int
    token: str
    service: MemoryService

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=PATIENCE)
        return sock

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def edge(tmp_path: Path) -> Iterator[Edge]:
    service = MemoryService(tmp_path / "edge.db")
    service.accounts.add_user("alice")
    service.accounts.create_workspace("ws", "alice")
    token = service.accounts.create_token("alice")[1]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn_config(
        create_app(service),
        read_timeout=READ_TIMEOUT,
        max_connections=MAX_CONNECTIONS,
        log_level="warning",
        log_config=None,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + PATIENCE
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield Edge(sock.getsockname()[1], token, service)
    finally:
        server.should_exit = True
        thread.join(timeout=PATIENCE)
        sock.close()
        service.close()


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes; a socket timeout here means the server held on."""
    chunks = []
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def answer(raw: bytes) -> tuple[int, dict[str, str], dict[str, object]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    return status, headers, json.loads(body)


def assert_one_shape(payload: dict[str, object], code: str) -> None:
    assert payload["error"] == code and isinstance(payload["message"], str) and payload["message"]


# --- read timeouts and the connection bound ---------------------------------------------------------


def test_a_client_trickling_its_request_head_is_dropped(edge: Edge) -> None:
    sock = edge.connect()
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        sent = 0
        # One header byte at a time, well past the read timeout, unless the server closes first.
        try:
            while sent < 200:
                sock.sendall(b"X")
                sent += 1
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            pass
        raw = read_until_closed(sock)
    finally:
        sock.close()
    assert sent < 200, "the server kept a trickling request head open"
    status, headers, payload = answer(raw)
    assert status == 408 and headers["connection"] == "close"
    assert_one_shape(payload, "request_timeout")


def test_an_upload_that_declares_a_megabyte_and_stalls_is_dropped(edge: Edge, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    sock = edge.connect()
    try:
        head = (
            "PUT /api/v1/workspaces/ws/files/notes/a.md HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {edge.token}\r\nX-Base-Version: 0\r\n"
            "Content-Type: application/json\r\nContent-Length: 1048576\r\n\r\n"
        )
        sock.sendall(head.encode() + b'{"ciphertext": "')
        raw = read_until_closed(sock)  # the server must close; our socket would time out at PATIENCE
    finally:
        sock.close()
    status, headers, payload = answer(raw)
    assert status == 408 and headers["connection"] == "close"
    assert_one_shape(payload, "request_timeout")
    assert edge.service.list_files("alice", "ws") == [], "the stalled upload wrote something"
    # One access line, saying 408; the route that was reading the body fails quietly, not as an internal error.
    deadline = time.monotonic() + PATIENCE
    while not any(r.name == "memframe.access" for r in caplog.records) and time.monotonic() < deadline:
        time.sleep(0.01)
    lines = [r.getMessage() for r in caplog.records if r.name == "memframe.access"]
    assert lines == [lines[0]] and lines[0].endswith('"PUT /api/v1/workspaces/ws/files/notes/a.md HTTP/1.1" 408')
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_an_upload_trickled_a_byte_at_a_time_is_dropped(edge: Edge) -> None:
    sock = edge.connect()
    try:
        head = (
            "PUT /api/v1/workspaces/ws/files/notes/a.md HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {edge.token}\r\nX-Base-Version: 0\r\n"
            "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
        )
        sock.sendall(head.encode())
        sent = 0
        try:
            while sent < 200:  # each byte well within the read timeout, the whole body far past it
                sock.sendall(b" ")
                sent += 1
                time.sleep(0.05)
        except (BrokenPipeError, ConnectionResetError):
            pass
        raw = read_until_closed(sock)
    finally:
        sock.close()
    assert sent < 200, "the server kept a trickling upload open"
    status, headers, payload = answer(raw)
    assert status == 408 and headers["connection"] == "close"
    assert_one_shape(payload, "request_timeout")


def test_a_silent_connection_is_dropped_and_a_prompt_one_is_served(edge: Edge) -> None:
    silent = edge.connect()
    try:
        assert answer(read_until_closed(silent))[0] == 408
    finally:
        silent.close()
    # A kept-alive client that is merely quick is unaffected by the deadline of its earlier request.
    with httpx.Client(base_url=edge.url(""), headers={"Authorization": f"Bearer {edge.token}"}) as client:
        for _ in range(3):
            assert client.get("/api/v1/workspaces/ws/ai").status_code == 200
            time.sleep(READ_TIMEOUT / 2)


def test_the_second_request_on_a_kept_alive_connection_has_its_own_deadline(edge: Edge) -> None:
    sock = edge.connect()
    try:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        first = b""
        while b"\r\n\r\n" not in first or not first.rstrip().endswith(b"}"):
            first += sock.recv(65536)
        assert first.startswith(b"HTTP/1.1 200")
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")  # the next head starts, and never ends
        status, _, payload = answer(read_until_closed(sock))
    finally:
        sock.close()
    assert status == 408
    assert_one_shape(payload, "request_timeout")


def test_connections_beyond_the_limit_are_refused_at_once(edge: Edge) -> None:
    held = [edge.connect() for _ in range(MAX_CONNECTIONS)]
    try:
        time.sleep(0.2)  # let uvicorn accept them all before the one over the limit
        extra = edge.connect()
        try:
            status, headers, payload = answer(read_until_closed(extra))
        finally:
            extra.close()
        assert status == 503 and headers["connection"] == "close"
        assert_one_shape(payload, "unavailable")
    finally:
        for sock in held:
            sock.close()


# --- refusals in the one error shape ----------------------------------------------------------------


def raw_request(edge: Edge, request: bytes) -> tuple[int, dict[str, str], dict[str, object]]:
    sock = edge.connect()
    try:
        sock.sendall(request)
        return answer(read_until_closed(sock))
    finally:
        sock.close()


def test_an_invalid_http_request_answers_in_the_error_shape(edge: Edge) -> None:
    status, headers, payload = raw_request(edge, b"GET /healthz HTTP/1.1\r\nHost x\r\n\r\n")
    assert status == 400 and headers["content-type"] == "application/json"
    assert_one_shape(payload, "bad_request")


@pytest.mark.parametrize(
    ("head", "status"),
    [
        # A head still incomplete past h11's 16 KiB (one that arrives whole in one read is parsed).
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"p" * 20_000, 431),
        (b"PUT /api/v1/workspaces/ws/ai HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
    ],
)
def test_h11_refusals_keep_their_status_and_the_error_shape(edge: Edge, head: bytes, status: int) -> None:
    answered, headers, payload = raw_request(edge, head)
    assert answered == status and headers["content-type"] == "application/json"
    assert_one_shape(payload, "bad_request")


def test_content_length_with_chunked_encoding_is_refused(edge: Edge) -> None:
    body = b'{"enabled": true}'
    request = (
        b"PUT /api/v1/workspaces/ws/ai HTTP/1.1\r\nHost: x\r\n"
        + f"Authorization: Bearer {edge.token}\r\n".encode()
        + b"Content-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
        + f"{len(body):x}\r\n".encode()
        + body
        + b"\r\n0\r\n\r\n"
    )
    status, headers, payload = raw_request(edge, request)
    assert status == 400 and headers["connection"] == "close"
    assert_one_shape(payload, "bad_request")
    assert "Transfer-Encoding" in str(payload["message"])
    assert edge.service.assistant.ai_consent("alice", "ws").enabled is False


@pytest.mark.parametrize(
    "name",
    [
        "Authorization",
        "Idempotency-Key",
        "X-Base-Version",
        "X-Memory-Clear",
        "X-Key-Session",
        "X-Memory-State",
        "X-Revive",
    ],
)
def test_a_doubled_single_valued_header_is_refused(edge: Edge, name: str) -> None:
    blob = base64.b64encode(b"x" * 40).decode()
    body = json.dumps({"ciphertext": blob}).encode()
    lines = [
        "PUT /api/v1/workspaces/ws/files/notes/a.md HTTP/1.1",
        "Host: x",
        f"Authorization: Bearer {edge.token}",
        "X-Base-Version: 0",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
    ]
    # The second copy of a header the request already has, or two copies of one it has not.
    seconds = {"Authorization": [f"Authorization: Bearer {edge.token}"], "X-Base-Version": ["X-Base-Version: 1"]}
    lines += seconds.get(name, [f"{name}: one", f"{name}: two"])
    status, _, payload = raw_request(edge, ("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    assert status == 400
    assert_one_shape(payload, "bad_request")
    assert name in str(payload["message"])
    assert edge.service.list_files("alice", "ws") == []


def test_header_problem_names_the_header_and_passes_single_ones() -> None:
    assert header_problem([(b"authorization", b"a"), (b"x-base-version", b"1")]) is None
    assert header_problem([(b"x-memory-clear", b"1"), (b"x-memory-clear", b"2")]) == (
        "The X-Memory-Clear header was sent 2 times; send it once."
    )


# --- the access log --------------------------------------------------------------------------------


def test_the_access_log_shows_no_query_and_no_handles(edge: Edge, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="memframe.access")
    secret_session = "ks_" + "s3cr3t" * 4
    with httpx.Client(base_url=edge.url("")) as client:
        client.get("/api/v1/workspaces/ws/ai", params={"token": edge.token})
        client.delete(
            f"/api/v1/automation/key-sessions/{secret_session}", headers={"Authorization": f"Bearer {edge.token}"}
        )
        client.get("/api/v1/agents/assistant/conv-s3cr3t/memory-receipts", params={"token": "mf_guess"})
        client.get(f"/no/such/{secret_session}", params={"token": edge.token})
        client.get("/api/v1/workspaces/ws/files/notes/a%09b.md", headers={"Authorization": f"Bearer {edge.token}"})
        client.get("/api/v1/workspaces/ws/files/notes/a%0Ab.md", headers={"Authorization": f"Bearer {edge.token}"})
    lines = [r.getMessage() for r in caplog.records if r.name == "memframe.access"]
    assert len(lines) == 6 and not [line for line in lines if "\n" in line], lines
    text = "\n".join(lines)
    assert edge.token not in text and "s3cr3t" not in text and "mf_guess" not in text and "?" not in text
    # (A query parameter no route declares is refused before the token is even looked at.)
    assert '"GET /api/v1/workspaces/ws/ai HTTP/1.1" 422' in lines[0]
    assert '"DELETE /api/v1/automation/key-sessions/{session_id} HTTP/1.1"' in lines[1]
    assert '"GET /api/v1/agents/assistant/{conversation_id}/memory-receipts HTTP/1.1" 422' in lines[2]
    assert '"GET /…/…/… HTTP/1.1" 404' in lines[3]
    assert "/files/notes/a\\x09b.md" in lines[4]
    assert '"GET /…/…/…/…/…/…/… HTTP/1.1" 404' in lines[5]  # a newline matches no route: nothing of it is shown
    assert lines[0].startswith("127.0.0.1:")


def test_no_access_line_when_the_level_is_above_info(edge: Edge, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="memframe.access")
    with httpx.Client(base_url=edge.url("")) as client:
        answer = client.get("/api/v1/workspaces", headers={"Authorization": f"Bearer {edge.token}"})
    assert answer.status_code == 200
    assert [r for r in caplog.records if r.name == "memframe.access"] == []


# --- strict request models ------------------------------------------------------------------------


@pytest.mark.parametrize("enabled", ["yes", "on", "true", 1, 0, None])
def test_consent_takes_only_a_json_boolean(edge: Edge, enabled: object) -> None:
    with httpx.Client(base_url=edge.url(""), headers={"Authorization": f"Bearer {edge.token}"}) as client:
        response = client.put("/api/v1/workspaces/ws/ai", json={"enabled": enabled})
    assert response.status_code == 422 and response.json()["error"] == "invalid_input"
    assert set(response.json()) == {"error", "message", "errors"}
    assert edge.service.assistant.ai_consent("alice", "ws").enabled is False


@pytest.mark.parametrize(
    "body",
    [
        {"mode": "auto", "expectedRevision": "0"},
        {"mode": "auto", "expectedRevision": 0.0},
        {"mode": "auto", "expectedRevision": True},
        {"mode": "auto", "expectedRevision": 0, "force": True},
        {"mode": 1, "expectedRevision": 0},
    ],
)
def test_policy_takes_no_coerced_number_and_no_unknown_field(edge: Edge, body: dict[str, object]) -> None:
    with httpx.Client(base_url=edge.url(""), headers={"Authorization": f"Bearer {edge.token}"}) as client:
        response = client.put("/api/v1/workspaces/ws/memory/policy", json=body)
        assert response.status_code == 422 and response.json()["error"] == "invalid_input", response.text
        assert client.put(
            "/api/v1/workspaces/ws/memory/policy", json={"mode": "auto", "expectedRevision": 0}
        ).is_success


def test_an_unknown_query_parameter_is_refused(edge: Edge) -> None:
    with httpx.Client(base_url=edge.url(""), headers={"Authorization": f"Bearer {edge.token}"}) as client:
        history = "/api/v1/workspaces/ws/history/.zudotext/memory/MEMORY.md"
        assert client.get(history, params={"limit": 5}).status_code != 422
        response = client.get(history, params={"limt": 5})
    assert response.status_code == 422 and response.json()["message"] == "query limt: not a parameter of this route"
    with httpx.Client(base_url=edge.url(""), headers={"Authorization": f"Bearer {edge.token}"}) as client:
        response = client.get(history, params={edge.token: ""})
    assert response.status_code == 422 and edge.token not in response.text


def test_the_schema_says_request_models_are_closed_and_typed(edge: Edge) -> None:
    schemas = httpx.get(edge.url("/openapi.json")).json()["components"]["schemas"]
    assert schemas["AIConsentIn"]["additionalProperties"] is False
    assert schemas["AIConsentIn"]["properties"]["enabled"]["type"] == "boolean"
    assert schemas["PolicyIn"]["additionalProperties"] is False
    assert schemas["PolicyIn"]["properties"]["expectedRevision"]["type"] == "integer"
    assert all(s.get("additionalProperties") is False for name, s in schemas.items() if name.endswith("In"))


def test_an_unparsable_body_answers_in_the_error_shape(edge: Edge) -> None:
    with httpx.Client(base_url=edge.url(""), headers={"Authorization": f"Bearer {edge.token}"}) as client:
        for content in (b"{not json", b"\xff\xfe", b""):
            response = client.put(
                "/api/v1/workspaces/ws/ai", content=content, headers={"content-type": "application/json"}
            )
            assert response.status_code == 422, response.text
            assert response.json()["error"] == "invalid_input" and response.json()["message"]


@pytest.mark.parametrize("option", [["--read-timeout", "0"], ["--read-timeout", "soon"], ["--max-connections", "0"]])
def test_serve_refuses_a_limit_that_is_not_above_zero(option: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from memframe.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["serve", "--db", "x.db", *option])
    assert exited.value.code == 2 and option[0] in capsys.readouterr().err
