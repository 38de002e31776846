"""The key-session service: one process's `KeySessions`, reached over HTTP by every server.

The contract's KeySessions Durable Object: keys live in this process's RAM only, and every server
(each `memframe serve` worker, or servers on several hosts) asks it, immediately before each batch,
whether a session is live and what its key is. `memframe keysessions --listen` runs it on TCP;
`memframe serve --workers N` runs one on a private unix socket for its workers (`private.py`).

What it never does: write anything anywhere (a restart forgets every key), log a request (no
access log: no session id, key or body reaches a line), or answer a caller that does not present
the shared credential (compared in constant time), name a Host it expects, and send
`application/json`. Every call is a POST with a JSON body, so a session id is never part of a URL.

    POST /v1/open         {workspace_id, user_id, key}  -> a session's facts
    POST /v1/resolve      {session_id, workspace_id}    -> {key}  (touches it), or 409
    POST /v1/describe     {session_id}                  -> {session: facts | null}
    POST /v1/forget       {session_id}                  -> {}
    POST /v1/sessions-of  {user_id, workspace_id}       -> {sessions: [[id, workspace], …]}
    POST /v1/status       {}                            -> {live, idle_seconds, lifetime_seconds}

Keys travel base64 in bodies; the credential is `Authorization: Bearer …`. `serve_on` runs the app
under `memframe serve`'s own uvicorn configuration, so a half-sent request is dropped after the
same read timeout as serve's.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import signal
import socket
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memframe.api.server import uvicorn_config
from memframe.core.errors import KeySessionUnavailable
from memframe.keysessions.store import KeySessions

#: The largest body a call may send (a key is 44 base64 characters; ids are short).
MAX_BODY_BYTES = 4096
#: The shortest credential the service accepts.
MIN_CREDENTIAL_CHARS = 16

Call = Callable[[dict[str, Any]], dict[str, Any]]


def _refusal(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status)


def _text(body: dict[str, Any], name: str, *, optional: bool = False) -> str | None:
    value = body.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > 200:
        raise ValueError(name)
    return value


def keysession_calls(sessions: KeySessions) -> dict[str, Call]:
    """The service's calls by name, each from a JSON body to a JSON answer (raising
    KeySessionUnavailable, ValueError or binascii.Error)."""

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
        idle, lifetime = sessions.idle_seconds, sessions.lifetime_seconds
        return {"live": len(sessions), "idle_seconds": idle, "lifetime_seconds": lifetime}

    return {
        "open": open_,
        "resolve": resolve,
        "describe": describe,
        "forget": forget,
        "sessions-of": sessions_of,
        "status": status,
    }


def _answer(call: Call, raw: bytes) -> tuple[int, dict[str, Any]]:
    """One call on its raw JSON body: (status, answer). Never echoes the body: it may hold a key."""
    try:
        body = json.loads(raw or b"{}")
        if not isinstance(body, dict):
            raise ValueError("body")
        return 200, call(body)
    except KeySessionUnavailable as exc:
        return 409, exc.to_payload()
    except (ValueError, binascii.Error) as exc:
        return 422, {"error": "invalid_input", "message": f"The call's {exc or 'body'} is missing or malformed."}


async def _body(request: Request) -> bytes | None:
    """The request's body, or None once it grows past what any call needs (read no further)."""
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            return None
    return raw


def _is_json(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def create_app(sessions: KeySessions, credential: str, hosts: Iterable[str]) -> Starlette:
    """The service over `sessions`, answering only callers that present `credential` and name one
    of `hosts` in their Host header (any other Host is refused with 400: a page in a browser that a
    rebound DNS name points here cannot reach it, credential or not)."""
    if len(credential) < MIN_CREDENTIAL_CHARS:
        raise ValueError(f"the key-session service's credential must be at least {MIN_CREDENTIAL_CHARS} characters")
    expected = f"Bearer {credential}".encode()

    def route(call: Call) -> Callable[[Request], Awaitable[JSONResponse]]:
        async def endpoint(request: Request) -> JSONResponse:
            presented = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(presented, expected):
                return _refusal(401, "unauthorized", "This key-session service needs its credential.")
            if not _is_json(request.headers.get("content-type", "")):
                return _refusal(415, "unsupported_media_type", "Every call's body is application/json.")
            try:
                raw = await _body(request)
            except ClientDisconnect:  # gone, or cut off at the read timeout: this answer goes nowhere
                return _refusal(408, "request_timeout", "The request did not arrive whole.")
            if raw is None:
                return _refusal(413, "too_large", "The request is larger than any call needs.")
            status, payload = _answer(call, raw)
            return JSONResponse(payload, status_code=status)

        return endpoint

    routes = [Route(f"/v1/{name}", route(call), methods=["POST"]) for name, call in keysession_calls(sessions).items()]
    guard = Middleware(TrustedHostMiddleware, allowed_hosts=sorted(set(hosts)), www_redirect=False)
    return Starlette(routes=routes, middleware=[guard])


def serve_on(
    app: Any, sock: socket.socket, *, read_timeout: float | None = None, log_level: str = "warning"
) -> int | None:
    """Run `app` under uvicorn on a bound, listening socket until SIGINT/SIGTERM (from the main
    thread); the signal that stopped it. serve's own configuration (`api.server.uvicorn_config`): its read timeout and
    connection bound, and no access log, since these requests carry keys and session ids."""
    if read_timeout is None:  # serve's default
        config = uvicorn_config(app, log_level=log_level)
    else:
        config = uvicorn_config(app, log_level=log_level, read_timeout=read_timeout)
    server = uvicorn.Server(config)
    stopped: list[int] = []

    def note(signum: int, frame: Any) -> None:
        stopped.append(signum)

    # uvicorn handles the signals while it runs, then raises the one it caught again: noted here.
    previous = {sig: signal.signal(sig, note) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return stopped[0] if stopped else None
