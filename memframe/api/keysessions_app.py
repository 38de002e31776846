"""The key-session service: one process's `KeySessions`, reached by every worker.

The contract's KeySessions Durable Object: keys live in this process's RAM only, and every
server (each `memframe serve` worker, or servers on several hosts) asks it, immediately before
each batch, whether a session is live and what its key is. `memframe keysessions --listen`
runs it alone; `memframe serve --workers N` runs one on a private unix socket for its workers.

What it never does: write anything anywhere (a restart forgets every key), log a request (it
has no access log at all: no session id, key or body reaches a line), or answer a caller
without the shared credential (compared in constant time). Every call is a POST with a JSON
body, so a session id is never part of a URL a proxy in between might log.

    POST /v1/open         {workspace_id, user_id, key}  -> a session's facts
    POST /v1/resolve      {session_id, workspace_id}    -> {key}  (touches it), or 409
    POST /v1/describe     {session_id}                  -> {session: facts | null}
    POST /v1/forget       {session_id}                  -> {}
    POST /v1/sessions-of  {user_id, workspace_id}       -> {sessions: [[id, workspace], …]}
    POST /v1/status       {}                            -> {live, idle_seconds, lifetime_seconds}

Keys travel base64 in bodies; the credential is `Authorization: Bearer …`.

Two framings of those same calls, credential and answers. `memframe keysessions --listen` serves
them over HTTP (`create_keysessions_app`: a proxy or TLS may stand in between, and tests reach it
in-process over ASGI). serve's private service for its own workers, on a unix socket, speaks one
JSON line per call (`LineProtocol`): there HTTP framing was most of each round trip's CPU, and a
round trip precedes every recall and every batch.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import json
import socket
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any, cast

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memframe.core.errors import KeySessionUnavailable
from memframe.service.keysession_client import RESOLVED
from memframe.service.keysessions import KeySessions

#: The largest body a call may send (a key is 44 base64 characters; ids are short).
MAX_BODY_BYTES = 4096
#: The longest line a call may send over the line framing (its body plus the framing and credential).
LINE_LIMIT = MAX_BODY_BYTES + 1024

_scan = json.JSONDecoder().raw_decode
_JSON_SPACE = " \t\n\r"


def _refusal(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status)


def _text(body: dict[str, Any], name: str, *, optional: bool = False) -> str | None:
    value = body.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > 200:
        raise ValueError(name)
    return value


def keysession_calls(sessions: KeySessions) -> dict[str, Callable[[dict[str, Any]], dict[str, Any]]]:
    """The service's calls by name, each from a JSON body to a JSON answer (raising
    KeySessionUnavailable, ValueError or binascii.Error), whichever framing carries them."""

    def open_(body: dict[str, Any]) -> dict[str, Any]:
        key = base64.b64decode(str(body.get("key", "")), validate=True)
        if len(key) != 32:
            raise ValueError("key")
        hold = body.get("hold_seconds")
        if hold is not None and (isinstance(hold, bool) or not isinstance(hold, (int, float)) or not hold > 0):
            raise ValueError("hold_seconds")
        info = sessions.open(str(_text(body, "workspace_id")), str(_text(body, "user_id")), key, hold_seconds=hold)
        return asdict(info)

    def resolve(body: dict[str, Any]) -> dict[str, Any]:
        key = sessions.resolve(_text(body, "session_id"), str(_text(body, "workspace_id")))
        return {"key": base64.b64encode(key).decode("ascii")}

    def describe(body: dict[str, Any]) -> dict[str, Any]:
        info = sessions.describe(str(_text(body, "session_id")))
        return {"session": None if info is None else asdict(info)}

    def forget(body: dict[str, Any]) -> dict[str, Any]:
        sessions.forget(str(_text(body, "session_id")))
        return {}

    def sessions_of(body: dict[str, Any]) -> dict[str, Any]:
        found = sessions.sessions_of(str(_text(body, "user_id")), _text(body, "workspace_id", optional=True))
        return {"sessions": [list(pair) for pair in found]}

    def status(body: dict[str, Any]) -> dict[str, Any]:
        return {
            "live": len(sessions),
            "idle_seconds": sessions.idle_seconds,
            "lifetime_seconds": sessions.lifetime_seconds,
        }

    return {
        "open": open_,
        "resolve": resolve,
        "describe": describe,
        "forget": forget,
        "sessions-of": sessions_of,
        "status": status,
    }


def answer_call(call: Callable[[dict[str, Any]], dict[str, Any]], raw: bytes) -> tuple[int, dict[str, Any]]:
    """One call on its raw JSON body: (HTTP-like status, answer). Never echoes the body: it may hold a key.

    On the event loop itself: every call is a dict look-up under a lock no one holds for longer than
    that, so a thread hop would only add latency to every batch."""
    if len(raw) > MAX_BODY_BYTES:
        return 413, {"error": "too_large", "message": "The request is larger than any call needs."}
    try:
        body = json.loads(raw or b"{}")
    except ValueError:
        return 422, {"error": "invalid_input", "message": "The call's body is not JSON."}
    return _answer(call, body)


def _answer(call: Callable[[dict[str, Any]], dict[str, Any]], body: Any) -> tuple[int, dict[str, Any]]:
    try:
        if not isinstance(body, dict):
            raise ValueError("body")
        return 200, call(body)
    except KeySessionUnavailable as exc:
        return 409, exc.to_payload()
    except (ValueError, binascii.Error) as exc:
        return 422, {"error": "invalid_input", "message": f"The call's {exc or 'body'} is missing or malformed."}


def _expected(credential: str | None) -> bytes | None:
    if credential is not None and len(credential) < 16:
        raise ValueError("the key-session service's credential must be at least 16 characters")
    return None if credential is None else f"Bearer {credential}".encode()


def create_keysessions_app(sessions: KeySessions, credential: str | None) -> Starlette:
    """The service over `sessions`, answering only callers that present `credential` (None: anyone
    who can reach it, which `memframe keysessions` allows on loopback only)."""
    expected = _expected(credential)

    def route(call: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[Request], Awaitable[JSONResponse]]:
        async def endpoint(request: Request) -> JSONResponse:
            presented = request.headers.get("authorization", "").encode()
            if expected is not None and not hmac.compare_digest(presented, expected):
                return _refusal(401, "unauthorized", "This key-session service needs its credential.")
            status, payload = answer_call(call, await request.body())
            return JSONResponse(payload, status_code=status)

        return endpoint

    calls = keysession_calls(sessions)
    return Starlette(routes=[Route(f"/v1/{name}", route(call), methods=["POST"]) for name, call in calls.items()])


# --- the same calls, one JSON line each ------------------------------------------------------------


class LineProtocol(asyncio.Protocol):
    """The service as one JSON line per call on one connection (serve's private unix socket).

    HTTP framing was most of a round trip's CPU on both sides (uvicorn/h11/Starlette here, httpx in
    every worker), paid before every recall and batch; these are the same calls, credential and
    answers, framed as `{"call", "authorization", "body"}` → `{"status", "body"}`, one line each,
    several calls on one kept connection. A client may pipeline them (write its next calls before
    the answers to the earlier ones come: a worker's recalls awaiting their resolves on its event
    loop).

    A protocol, not a stream handler: every wake-up's bytes arrive in `data_received`, where every
    whole line is answered in order and the answers go out in one write, with no task, reader or
    future between the socket and the answer. Measured on 2 cores, one resolve at a time, back to
    back: a stream handler on asyncio's loop spent ~50-80 µs of the service's CPU per call, this
    protocol on uvloop with the framing below ~10-15 µs. A client that stops reading its answers
    stops being read (`pause_writing` pauses reading until the answers drain). A line longer than
    any call needs is refused (after the answers to the lines before it) and the connection closed."""

    def __init__(
        self,
        calls: dict[str, Callable[[dict[str, Any]], dict[str, Any]]],
        expected: bytes | None,
        connections: set[asyncio.Transport],
    ) -> None:
        self._calls, self._expected = calls, expected
        self._connections = connections  # every open one, closed when the service stops
        self._pending = b""  # the start of a line whose end has not arrived yet
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is one without subclassing it
        self._connections.add(self._transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._transport is not None:
            self._connections.discard(self._transport)

    def data_received(self, data: bytes) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        *lines, self._pending = (self._pending + data).split(b"\n")
        answers, refused = _answer_lines(self._calls, self._expected, lines, self._pending)
        if answers:
            transport.write(answers)
        if refused:
            self._pending = b""
            transport.close()

    def eof_received(self) -> bool:
        return False  # the client is done: close our side too

    def pause_writing(self) -> None:
        if self._transport is not None:
            self._transport.pause_reading()

    def resume_writing(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.resume_reading()


def _answer_lines(
    calls: dict[str, Callable[[dict[str, Any]], dict[str, Any]]],
    expected: bytes | None,
    lines: list[bytes],
    pending: bytes,
) -> tuple[bytes, bool]:
    """The answers to every whole line one wake-up read, in order and joined for one write; and
    whether the connection ends: a line (or the unfinished `pending` one) longer than any call
    needs is answered 413 in its place, and nothing after it is read."""
    answers: list[bytes] = []
    for line in lines:
        if len(line) >= LINE_LIMIT:
            return b"".join([*answers, _TOO_LARGE]), True
        answers.append(_line(*_answer_line(calls, expected, line)))
    if len(pending) >= LINE_LIMIT:
        return b"".join([*answers, _TOO_LARGE]), True
    return b"".join(answers), False


def _answer_line(
    calls: dict[str, Callable[[dict[str, Any]], dict[str, Any]]], expected: bytes | None, line: bytes
) -> tuple[int, dict[str, Any]]:
    try:
        framed = _parsed(line)
    except ValueError:
        return 422, {"error": "invalid_input", "message": "The call is not one line of JSON."}
    if not isinstance(framed, dict):
        return 422, {"error": "invalid_input", "message": "The call is not one line of JSON."}
    presented = str(framed.get("authorization", "")).encode()
    if expected is not None and not hmac.compare_digest(presented, expected):
        return 401, {"error": "unauthorized", "message": "This key-session service needs its credential."}
    call = calls.get(str(framed.get("call", "")))
    if call is None:
        return 404, {"error": "not_found", "message": "No such call."}
    return _answer(call, framed.get("body", {}))


def _parsed(line: bytes) -> Any:
    """One line's JSON value (ValueError if it is not exactly one): json.loads without its bytes
    sniffing and second whitespace scan, which were half of what it cost per call."""
    text = line.decode().strip(_JSON_SPACE)  # not UTF-8: UnicodeDecodeError, a ValueError
    value, end = _scan(text)
    if end != len(text):
        raise ValueError("more than one JSON value")
    return value


def _is_base64(text: str) -> bool:
    """Only letters, digits, + and / (then = padding): nothing JSON would escape."""
    return text.isascii() and text.rstrip("=").replace("+", "").replace("/", "").isalnum()


def _line(status: int, payload: dict[str, Any]) -> bytes:
    """An answer line. A resolve's, the one that precedes every recall, is framed as the client
    recognises it without parsing (`keysession_client.RESOLVED`: the same bytes json.dumps writes)."""
    if status == 200 and len(payload) == 1 and isinstance(key := payload.get("key"), str) and _is_base64(key):
        head, tail = RESOLVED
        return b"".join((head, key.encode("ascii"), tail, b"\n"))
    return json.dumps({"status": status, "body": payload}, separators=(",", ":")).encode() + b"\n"


_TOO_LARGE = _line(413, {"error": "too_large", "message": "The request is larger than any call needs."})


async def serve_lines(sessions: KeySessions, credential: str | None, sock: socket.socket, stop: asyncio.Event) -> None:
    """`LineProtocol` over `sessions` on a bound, listening unix socket until `stop` is set, answering
    only callers that present `credential`; then every connection is closed (its client hears the
    service is gone at once, rather than at its timeout)."""
    expected, calls = _expected(credential), keysession_calls(sessions)
    connections: set[asyncio.Transport] = set()
    loop = asyncio.get_running_loop()
    server = await loop.create_unix_server(lambda: LineProtocol(calls, expected, connections), sock=sock)
    try:
        await stop.wait()
    finally:  # not `async with`: from 3.12 that waits for every kept connection to be closed by its worker
        server.close()
        for transport in list(connections):
            transport.close()
        await asyncio.sleep(0)  # their connection_lost, before the loop goes
