"""The Save's lane (`memframe.api.save_lane`) answers exactly as the `PUT …/files` route does.

Two apps on two services set up alike, one with the lane and one without, get the same requests
in the same order; every answer (status, raw headers, body) and every service call must match,
for Saves the lane answers itself and for every request it must hand to the route.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from starlette.types import Message

from memframe.api import create_app
from memframe.core.types import MEMORY_PATH
from memframe.service import MemoryService
from tests.conftest import FakeClock
from tests.sealing import stand_in

MEMORY = f"/api/v1/workspaces/ws/files/{MEMORY_PATH}"


@dataclass
class Side:
    service: MemoryService
    app: FastAPI
    token: str
    calls: list[str] = field(default_factory=list)


@dataclass
class Answer:
    status: int | None
    headers: list[tuple[bytes, bytes]]
    body: bytes
    raised: str | None


def _side(directory: Path, clock: FakeClock, *, lane: bool) -> Side:
    service = MemoryService(directory / "service.db", clock=clock)
    service.accounts.add_user("alice")
    service.accounts.create_workspace("ws", "alice")
    service.accounts.create_workspace("other", "alice")
    token = service.accounts.create_token("alice")[1]
    side = Side(service, create_app(service, save_lane=lane), token)
    put_file = service.put_file

    def noted_put_file(*args: Any, **kwargs: Any) -> Any:
        side.calls.append("put_file")
        return put_file(*args, **kwargs)

    service.put_file = noted_put_file  # type: ignore[method-assign]
    return side


@pytest.fixture
def sides(tmp_path: Path) -> Iterator[tuple[Side, Side]]:
    clock = FakeClock()
    (tmp_path / "lane").mkdir()
    (tmp_path / "route").mkdir()
    lane, route = _side(tmp_path / "lane", clock, lane=True), _side(tmp_path / "route", clock, lane=False)
    yield lane, route
    lane.service.close()
    route.service.close()


def _call(app: FastAPI, path: str, headers: list[tuple[bytes, bytes]], messages: list[Message], query: bytes) -> Answer:
    """One PUT straight into the app, its body as `messages`, then a disconnect if it reads on."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 5000),
        "scheme": "http",
        "method": "PUT",
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "headers": headers,
        "state": {},
    }
    pending = list(messages)
    sent: list[Message] = []

    async def receive() -> Message:
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    raised = None
    try:
        asyncio.run(app(scope, receive, send))
    except Exception as exc:
        raised = type(exc).__name__
    start = next((m for m in sent if m["type"] == "http.response.start"), None)
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return Answer(start and start["status"], list(start["headers"]) if start else [], body, raised)


def _body(blob: bytes, **more: Any) -> bytes:
    return json.dumps({"ciphertext": base64.b64encode(blob).decode(), **more}).encode()


def _request(
    side: Side,
    *,
    path: str = MEMORY,
    base: str | None = "0",
    body: bytes | None = None,
    content_type: bytes | None = b"application/json",
    authorization: bytes | None = None,
    extra: tuple[tuple[bytes, bytes], ...] = (),
    messages: list[Message] | None = None,
    query: bytes = b"",
) -> Answer:
    data = _body(stand_in(5)) if body is None else body
    headers = [(b"host", b"memframe.test")]
    headers.append((b"authorization", f"Bearer {side.token}".encode() if authorization is None else authorization))
    if content_type is not None:
        headers.append((b"content-type", content_type))
    if base is not None:
        headers.append((b"x-base-version", base.encode()))
    if messages is None:
        headers.append((b"content-length", str(len(data)).encode()))
        messages = [{"type": "http.request", "body": data, "more_body": False}]
    headers += list(extra)
    return _call(side.app, path, headers, messages, query)


def _both(sides: tuple[Side, Side], **request: Any) -> Answer:
    lane, route = sides
    lane.calls.clear()
    route.calls.clear()
    with_lane, without = _request(lane, **request), _request(route, **request)
    assert with_lane == without
    return with_lane


def test_a_well_formed_save_takes_the_lane_and_answers_as_the_route(sides: tuple[Side, Side]) -> None:
    answer = _both(sides)
    assert answer.status == 200 and json.loads(answer.body)["version"] == 1
    assert [side.calls for side in sides] == [["put_file"], ["put_file"]]
    again = _both(sides, base="1", body=_body(stand_in(9)), extra=((b"x-revive", b"0"),))
    assert again.status == 200 and json.loads(again.body)["version"] == 2
    assert sides[0].calls == ["put_file"]
    undo = _both(sides, base="2", body=_body(stand_in(5), restoredFrom=1))
    assert undo.status == 200 and json.loads(undo.body)["restoredFrom"] == 1
    for side in sides:
        assert [v.version for v in side.service.list_versions("alice", "ws", MEMORY_PATH)] == [3, 2, 1]


@pytest.mark.parametrize(
    ("why", "request_"),
    [
        ("a stale base", {"base": "5"}),
        ("no token", {"authorization": b""}),
        ("another scheme", {"authorization": b"Basic YWxpY2U6eA=="}),
        ("a bearer with no credential", {"authorization": b"Bearer    "}),
        ("an unknown token", {"authorization": b"bearer mf_not-a-token"}),
        ("an unknown workspace", {"path": f"/api/v1/workspaces/nope/files/{MEMORY_PATH}"}),
        ("not a sealed text", {"body": _body(b"plain words")}),
        ("a path the service refuses", {"path": "/api/v1/workspaces/ws/files/../escape.md"}),
        ("an empty file path", {"path": "/api/v1/workspaces/ws/files/"}),
        (
            "a Clear of another file",
            {"path": "/api/v1/workspaces/ws/files/notes.md", "extra": ((b"x-memory-clear", b"1"),)},
        ),
        ("a Clear that is not empty", {"extra": ((b"x-memory-clear", b"1"),)}),
        ("an undo of a revision that is not there", {"body": _body(stand_in(5), restoredFrom=7)}),
    ],
)
def test_a_save_the_service_refuses_is_refused_as_the_route_refuses_it(
    sides: tuple[Side, Side], why: str, request_: dict[str, Any]
) -> None:
    assert _both(sides).status == 200  # version 1 exists: a base of 5 is stale
    answer = _both(sides, **({"base": "1"} | request_))
    assert answer.status is not None and answer.status >= 400, why
    assert "error" in json.loads(answer.body)


@pytest.mark.parametrize(
    ("why", "request_"),
    [
        ("a base with a leading zero", {"base": "01"}),
        ("a base with a sign", {"base": "+0"}),
        ("a negative base", {"base": "-1"}),
        ("a base past the largest number", {"base": str(2**53)}),
        ("a base with spaces", {"base": " 0"}),
        ("no base", {"base": None}),
        ("a body that is not JSON", {"body": b"{not json"}),
        ("a JSON list", {"body": b"[]"}),
        ("an empty body", {"body": b""}),
        ("an unknown field", {"body": _body(stand_in(5), plaintext="hi")}),
        ("bad base64", {"body": b'{"ciphertext": "not*base64"}'}),
        ("a number for the ciphertext", {"body": b'{"ciphertext": 5}'}),
        ("a deeply nested body", {"body": b"[" * 5_000 + b"]" * 5_000}),
        ("no content type", {"content_type": None}),
        ("a content type with a charset", {"content_type": b"application/json; charset=utf-8"}),
        ("another content type", {"content_type": b"text/plain"}),
        ("a query string", {"query": b"x=1"}),
        ("a misspelt query parameter", {"query": b"befor=3"}),
        ("a flag spelled another way", {"extra": ((b"x-memory-clear", b"true"),)}),
        ("a revive spelled another way", {"extra": ((b"x-revive", b"yes"),)}),
        ("two content types", {"extra": ((b"content-type", b"text/plain"),)}),
        ("a control character in the path", {"path": "/api/v1/workspaces/ws/files/a\nb.md"}),
        ("a path below files", {"path": "/api/v1/workspaces/ws/files"}),
    ],
)
def test_a_request_the_route_must_judge_is_handed_to_it(
    sides: tuple[Side, Side], why: str, request_: dict[str, Any]
) -> None:
    answer = _both(sides, **request_)
    assert answer.status is not None, why


def test_json_in_another_unicode_encoding_is_read_as_the_route_reads_it(sides: tuple[Side, Side]) -> None:
    """`json.loads` (FastAPI's) takes UTF-16 and UTF-32 too; so does the lane, to the same answer."""
    answer = _both(sides, body=_body(stand_in(5)).decode().encode("utf-16"))
    assert answer.status == 200 and sides[0].calls == ["put_file"]


def test_a_body_in_pieces_or_cut_off_is_replayed_to_the_route(sides: tuple[Side, Side]) -> None:
    data = _body(stand_in(5))
    pieces: list[Message] = [
        {"type": "http.request", "body": data[:10], "more_body": True},
        {"type": "http.request", "body": data[10:], "more_body": False},
    ]
    whole = _both(sides, messages=pieces, extra=((b"content-length", str(len(data)).encode()),))
    assert whole.status == 200 and sides[0].calls == ["put_file"]
    streamed = _both(sides, base="1", messages=pieces, extra=((b"transfer-encoding", b"chunked"),))
    assert streamed.status == 200 and sides[0].calls == ["put_file"]  # no Content-Length: the route's
    cut: list[Message] = [{"type": "http.request", "body": data[:10], "more_body": True}, {"type": "http.disconnect"}]
    _both(sides, base="2", messages=cut, extra=((b"content-length", str(len(data)).encode()),))
    assert sides[0].calls == []
    for side in sides:
        assert [v.version for v in side.service.list_versions("alice", "ws", MEMORY_PATH)] == [2, 1]


def test_the_edge_still_stands_before_the_lane(sides: tuple[Side, Side]) -> None:
    """A doubled single-valued header and an oversized body are refused before any Save."""
    doubled = _both(sides, extra=((b"x-base-version", b"0"),))
    assert doubled.status == 400 and json.loads(doubled.body)["error"] == "bad_request"
    oversized = _both(
        sides,
        messages=[{"type": "http.request", "body": b"{}", "more_body": False}],
        extra=((b"content-length", str(64 * 1024 * 1024).encode()),),
    )
    assert oversized.status == 413
    assert sides[0].calls == [] and sides[1].calls == []
