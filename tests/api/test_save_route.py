"""The Save's own handler (`memframe.api.save_route`) answers as FastAPI's handler of `put_file` does.

Every request below, well-formed or not, goes to the app as it is and to a twin app on a twin
service whose Save route is answered by FastAPI's own request handler; both answers must be the
same bytes (status, headers, body). A case a new FastAPI answers differently fails here first.
"""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import Route
from starlette.types import Message

from memframe import sealing
from memframe.api import create_app
from memframe.api.save_route import HEADERS, SaveRoute
from memframe.core.types import MEMORY_PATH
from memframe.service import MemoryService
from tests.conftest import FakeClock
from tests.support.remote_kinds import asgi_client

KEY = sealing.new_key()
MEMORY = f"/api/v1/workspaces/ws/files/{MEMORY_PATH}"
NOTE = "/api/v1/workspaces/ws/files/notes/a.md"


@dataclass
class Twins:
    ours: tuple[FastAPI, httpx.Client]
    fastapis: tuple[FastAPI, httpx.Client]
    token: str


def _service(path: Path) -> MemoryService:
    service = MemoryService(path, clock=FakeClock())
    service.accounts.add_user("alice")
    service.accounts.create_workspace("ws", "alice")
    service.accounts.add_user("bob")
    service.accounts.create_workspace("bobs", "bob")
    return service


@pytest.fixture
def twins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Twins]:
    token = "mf_" + secrets.token_urlsafe(32)
    monkeypatch.setattr(secrets, "token_urlsafe", lambda n: token.removeprefix("mf_"))
    ours, theirs = _service(tmp_path / "ours.db"), _service(tmp_path / "theirs.db")
    assert ours.accounts.create_token("alice")[1] == theirs.accounts.create_token("alice")[1] == token
    app = create_app(ours)
    with monkeypatch.context() as m:  # FastAPI's own handler for the same route and endpoint
        m.setattr(SaveRoute, "get_route_handler", APIRoute.get_route_handler)
        reference = create_app(theirs)
    try:
        with asgi_client(app) as one, asgi_client(reference) as two:
            yield Twins((app, one), (reference, two), token)
    finally:
        ours.close()
        theirs.close()


def _blob(version: int, text: str = "text\n", previous: bytes | None = None, path: str = MEMORY_PATH) -> str:
    sealed = sealing.seal(KEY, text, workspace_id="ws", path=path, version=version, previous=previous)
    return base64.b64encode(sealed).decode()


def _same(twins: Twins, url: str = MEMORY, *, auth: bool = True, **request: Any) -> httpx.Response:
    """The request to both apps; their answers must be byte for byte the same. Returns ours."""
    headers = {"Content-Type": "application/json", **request.pop("headers", {})}
    if auth:
        headers.setdefault("Authorization", f"Bearer {twins.token}")
    if "json" in request:
        request["content"] = json.dumps(request.pop("json")).encode()
    answers = [client.put(url, headers=headers, **request) for _, client in (twins.ours, twins.fastapis)]
    ours, theirs = ([(k, v) for k, v in a.headers.items() if k != "date"] for a in answers)
    assert (answers[0].status_code, ours, answers[0].content) == (answers[1].status_code, theirs, answers[1].content)
    return answers[0]


GOOD = {"ciphertext": "AAAA"}  # well-formed as far as the route can tell; the service refuses it

HEADER_CASES: list[dict[str, Any]] = [
    *({"X-Base-Version": v} for v in ["0", "-1", "two", "", " 1", "+1", "01", "1.0", "1e3", "0x10", "1_000"]),
    *({"X-Base-Version": v} for v in [str(2**53 - 1), str(2**53), str(10**30)]),
    {"X-Base-Version": "\u00b2".encode("latin-1")},
    {},
    *({"X-Base-Version": "0", name: v} for name in ("X-Memory-Clear", "X-Revive") for v in ["1", "maybe", "", "yes"]),
    {"X-Base-Version": "x", "X-Memory-Clear": "x", "X-Revive": "x"},
    {"X-Base-Version": "0", "Content-Type": "text/plain"},
    {"X-Base-Version": "0", "Content-Type": "application/json; charset=utf-8"},
    {"X-Base-Version": "0", "Content-Type": "application/merge-patch+json"},
    {"X-Base-Version": "0", "Content-Type": ";;;"},
    {"X-Base-Version": "0", "Content-Type": ""},
]


@pytest.mark.parametrize("headers", HEADER_CASES)
def test_headers_are_read_as_fastapi_reads_them(twins: Twins, headers: dict[str, Any]) -> None:
    _same(twins, json=GOOD, headers=headers)
    _same(twins, json={"ciphertext": 1, "extra": 2}, headers=headers)
    _same(twins, json=GOOD, headers=headers, auth=False)


BODIES: list[bytes] = [
    *(
        json.dumps(body).encode()
        for body in [
            ["AAAA"],
            "AAAA",
            1,
            None,
            {},
            {"ciphertext": "AAAA", "plaintext": "hello"},
            {"ciphertext": "AA*A"},
            {"ciphertext": "AAA"},
            {"ciphertext": "ÅÅÅÅ"},
            {"ciphertext": 12},
            {"ciphertext": None},
            {"ciphertext": "AAAA", "restoredFrom": -3},
            {"ciphertext": "AAAA", "restoredFrom": 10**30},
            {"ciphertext": "AAAA", "restoredFrom": "1"},
            {"ciphertext": "AAAA", "restoredFrom": 1.0},
            {"ciphertext": "AAAA", "restoredFrom": True},
            {"ciphertext": "AAAA", "restored_from": 1},
        ]
    ),
    b"",
    b"null",
    b'{"ciphertext": ',
    b"\xff\xfe",
    b'"\xff"',
    b"\x00\x00\x00{",
    '{"ciphertext": "AAAA"}'.encode("utf-16"),
    b'{"ciphertext": 1, "ciphertext": "AAAA"}',
    b'{"ciphertext": "AAAA", "restoredFrom": NaN}',
]


@pytest.mark.parametrize("body", BODIES)
def test_bodies_are_read_as_fastapi_reads_them(twins: Twins, body: bytes) -> None:
    _same(twins, content=body, headers={"X-Base-Version": "0"})
    _same(twins, content=body, headers={"X-Base-Version": "0"}, auth=False)
    _same(twins, content=body, headers={"X-Base-Version": "-1"})
    _same(twins, content=body, headers={"X-Base-Version": "0", "Content-Type": "text/plain"})
    _same(twins, MEMORY + "?x=1", content=body, headers={"X-Base-Version": "0"})


@pytest.mark.parametrize(
    "authorization", ["", "Bearer nope", "Basic abc", "Bearer", "Bearer   ", "bearer {t}", "Bearer  {t}"]
)
def test_tokens_are_read_as_fastapi_reads_them(twins: Twins, authorization: str) -> None:
    headers = {"X-Base-Version": "0", "Authorization": authorization.format(t=twins.token)}
    _same(twins, json=GOOD, headers=headers)
    _same(twins, content=b"{", headers=headers)


@pytest.mark.parametrize(
    "url", [f"{MEMORY}?x=1", f"{MEMORY}?{'t' * 40}=1", f"{MEMORY}?", "/api/v1/workspaces/bobs/files/a.md"]
)
def test_queries_and_workspaces_are_judged_as_by_fastapi(twins: Twins, url: str) -> None:
    _same(twins, url, json=GOOD, headers={"X-Base-Version": "0"})
    _same(twins, url, json=GOOD, headers={"X-Base-Version": "x"})
    _same(twins, url, json=GOOD, headers={"X-Base-Version": "0"}, auth=False)


def test_every_save_and_refusal_of_a_history_is_answered_alike(twins: Twins) -> None:
    """Saves that land, conflicts, an Undo, a Clear, a deletion and a revival, in one history."""
    v1 = _blob(1, "one\n")
    for url, body, headers in [
        ("/api/v1/workspaces/ws/files/", {"ciphertext": v1}, {}),
        ("/api/v1/workspaces/ws/files/a%00b", {"ciphertext": v1}, {}),
        ("/api/v1/workspaces/ws/files/a/%2e%2e/%2e%2e/b", {"ciphertext": v1}, {}),
        (NOTE, {"ciphertext": v1}, {"X-Memory-Clear": "1"}),
        (MEMORY, {"ciphertext": v1}, {"X-Memory-Clear": "1"}),
        (MEMORY, {"ciphertext": base64.b64encode(b"\x01" * (1024 * 1024 + 1)).decode()}, {}),
        (MEMORY, {"ciphertext": v1}, {}),
        (MEMORY, {"ciphertext": v1}, {}),
    ]:
        _same(twins, url, json=body, headers={"X-Base-Version": "0", **headers})
    v2 = sealing.seal(KEY, "two\n", workspace_id="ws", path=MEMORY_PATH, version=2, previous=base64.b64decode(v1))
    saved = _same(twins, json={"ciphertext": base64.b64encode(v2).decode()}, headers={"X-Base-Version": "1"})
    assert saved.status_code == 200 and saved.json()["version"] == 2
    v3 = _blob(3, "one\n", v2)
    _same(twins, json={"ciphertext": v3, "restoredFrom": 9}, headers={"X-Base-Version": "2"})
    _same(twins, json={"ciphertext": v3, "restoredFrom": 1}, headers={"X-Base-Version": "2", "X-Memory-Clear": "1"})
    assert _same(twins, json={"ciphertext": v3, "restoredFrom": 1}, headers={"X-Base-Version": "2"}).status_code == 200
    v4 = _blob(4, "", base64.b64decode(v3))
    assert _same(twins, json={"ciphertext": v4}, headers={"X-Base-Version": "3", "X-Memory-Clear": "1"}).is_success
    _same(twins, json={"ciphertext": _blob(5, "x\n", base64.b64decode(v1))}, headers={"X-Base-Version": "4"})
    for _, client in (twins.ours, twins.fastapis):
        deleted = client.delete(MEMORY, headers={"X-Base-Version": "4", "Authorization": f"Bearer {twins.token}"})
        assert deleted.status_code == 200
    v6 = _blob(6, "back\n", base64.b64decode(v4))
    assert _same(twins, json={"ciphertext": v6}, headers={"X-Base-Version": "5"}).status_code == 409
    _same(twins, json={"ciphertext": v6}, headers={"X-Base-Version": "5", "X-Revive": "1"})


def _asgi(app: FastAPI, messages: list[Message], headers: list[tuple[bytes, bytes]]) -> list[Message]:
    """One PUT of the memory straight to `app`, its body as `messages`; what the app sent back."""
    sent: list[Message] = []
    pending = list(messages)

    async def receive() -> Message:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "PUT",
        "scheme": "http",
        "path": MEMORY,
        "raw_path": MEMORY.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("memframe.test", 80),
    }
    asyncio.run(app(scope, receive, send))
    return sent


@pytest.mark.parametrize(
    "messages",
    [
        [{"type": "http.request", "body": b'{"ciphertext": "AA', "more_body": True}, {"type": "http.disconnect"}],
        [{"type": "http.request", "body": b"A" * 65536, "more_body": True}] * 40,
    ],
    ids=["a client gone mid-body", "a streamed body over the limit"],
)
def test_a_body_cut_short_or_too_long_is_answered_alike(twins: Twins, messages: list[Message]) -> None:
    headers = [(b"authorization", f"Bearer {twins.token}".encode()), (b"x-base-version", b"0")]
    headers += [(b"content-type", b"application/json")]
    ours, theirs = (_asgi(app, messages, headers) for app, _ in (twins.ours, twins.fastapis))
    assert ours == theirs and ours[0]["status"] in (400, 413)


def test_the_handler_reads_every_header_the_route_documents(twins: Twins) -> None:
    app = twins.ours[0]
    spec = app.openapi()["paths"]["/api/v1/workspaces/{workspace_id}/files/{path}"]["put"]
    documented = [(p["name"], p["required"]) for p in spec["parameters"] if p["in"] == "header"]
    assert documented == [(header, absent is not False) for _, header, _, absent in HEADERS]
    saves = [n for n, route in enumerate(app.router.routes) if isinstance(route, SaveRoute)]
    assert len(saves) == 1  # one entrance
    assert all(type(route) is Route for route in app.router.routes[: saves[0]])  # only the docs' before it
