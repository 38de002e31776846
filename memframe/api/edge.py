"""The app's own edge: headers that must come once, a body deadline, and an access log that leaks nothing.

All are ASGI middleware, so every route gets them without naming them:

* `HeaderGuard` refuses (400) a request that sends a header the routes read once
  (`Authorization`, `Idempotency-Key`, `X-Base-Version`, `X-Memory-Clear`,
  `X-Key-Session`, `X-Memory-State`, `X-Revive`, `X-Conversation-Id`) more than once, where "first wins"
  would let a proxy and the
  server disagree about which value counts; and one that sends both
  Content-Length and Transfer-Encoding, which h11 accepts (chunked wins) but a
  proxy in front may read the other way.
* `BodyDeadline` answers 408 and closes the connection when a route has waited for a
  request's body longer than the read timeout in all (the head's own deadline is
  `memframe.api.server.EdgeProtocol`'s), so a client that declares a body and stalls,
  or trickles it, holds nothing.
* `AccessLog` writes one line per request, like uvicorn's, but the path has no
  query string (a token tried as `?token=` stays out) and ids that work as
  handles (key sessions, conversations, proposals) are replaced by their
  parameter's name. Workspace ids and file paths stay: an operator needs them,
  and the test of `serve` reads them.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from fastapi import Request
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memframe.api.errors import send_json
from memframe.core.errors import InvalidInput

access_logger = logging.getLogger("memframe.access")

#: The headers a route reads as one value (every one our routes declare, and the bearer token).
SINGLE_HEADERS = (
    b"authorization",
    b"idempotency-key",
    b"x-base-version",
    b"x-memory-clear",
    b"x-key-session",
    b"x-memory-state",
    b"x-revive",
    b"x-conversation-id",
)

#: Path parameters an access line shows as they are; every other one is shown as `{name}`.
SHOWN_PARAMETERS = frozenset({"workspace_id", "path", "version"})

BAD_REQUEST = "bad_request"


def bad_request(message: str) -> dict[str, str]:
    """The one error shape for a request refused before any route reads it."""
    return {"error": BAD_REQUEST, "message": message}


def header_problem(headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """Why these request headers are refused, or None when they are fine."""
    counts: dict[bytes, int] = {}
    for name, _ in headers:
        counts[name.lower()] = counts.get(name.lower(), 0) + 1
    for name in SINGLE_HEADERS:
        if counts.get(name, 0) > 1:
            spelled = "-".join(part.capitalize() for part in name.decode().split("-"))
            return f"The {spelled} header was sent {counts[name]} times; send it once."
    if counts.get(b"content-length") and counts.get(b"transfer-encoding"):
        return "The request has both Content-Length and Transfer-Encoding; send one."
    return None


class HeaderGuard:
    """Refuse requests whose framing or single-valued headers are ambiguous, before any route."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = header_problem(scope.get("headers", ()))
            if problem is not None:
                # Connection: close, since which body framing the client meant is not known.
                await send_json(send, 400, bad_request(problem), {"connection": "close"})
                return
        await self.app(scope, receive, send)


class RequestTimedOut(HTTPException):
    """Raised from `receive` when the body is late; FastAPI passes HTTPExceptions from body reading
    through to the app's error handler, which answers in the one error shape."""

    def __init__(self, seconds: float) -> None:
        message = f"The request body did not arrive within {seconds:g} seconds; the connection is closed."
        super().__init__(408, message, headers={"connection": "close"})


class BodyDeadline:
    """A request may keep the app waiting for its body `seconds` in all, or it is answered 408.

    Only the time the app waits in `receive` counts, so a slow server never times out a client
    that sent its body at once; a client that stalls, or trickles its body, runs out of time.
    """

    def __init__(self, app: ASGIApp, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        left = self.seconds
        whole = False

        async def timed() -> Message:
            nonlocal left, whole
            if whole:  # after the body, a route may wait for the client to leave: no deadline for that
                return await receive()
            started = loop.time()
            try:
                async with asyncio.timeout(left):
                    message = await receive()
            except TimeoutError:
                raise RequestTimedOut(self.seconds) from None
            left -= loop.time() - started
            whole = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        await self.app(scope, timed, send)


def _query_names(dependant: Any) -> Iterator[str]:
    """The query parameters a route and its dependencies declare."""
    for param in dependant.query_params:
        yield param.alias
    for sub in dependant.dependencies:
        yield from _query_names(sub)


async def known_query(request: Request) -> None:
    """Refuse a query parameter the route does not declare, as a body refuses an unknown field.

    An app-wide dependency: a misspelt `?befor=3` is named instead of silently ignored.
    """
    if not request.scope.get("query_string"):  # nearly every request: nothing to judge
        return
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    names = frozenset(_query_names(dependant))  # a walk over a handful of nodes: cheaper than a cache to get right
    unknown = sorted({name for name in request.query_params if name not in names})
    if unknown:
        # Named when it looks like a misspelt parameter; anything longer may be a token sent by mistake.
        shown = unknown[0] if re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,19}", unknown[0]) else "(unnamed)"
        raise InvalidInput(
            f"query {shown}: not a parameter of this route",
            errors=[{"where": f"query {shown}", "problem": "not a parameter of this route"}],
        )


def printable(text: str) -> str:
    """Control characters escaped, so a path cannot forge a second log line."""
    if text.isprintable():  # nearly every path: no character to look at one by one
        return text
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def shown_path(scope: Scope, routes: Sequence[BaseRoute]) -> str:
    """A request path as the access log shows it: the template of the route it matched, with only
    `SHOWN_PARAMETERS` filled in; a path that matches no route shows `…` for each segment."""
    route, params = scope.get("route"), scope.get("path_params", {})
    if route is None:  # refused before routing (or a route of Starlette's own): match it here
        for candidate in routes:
            match, child = candidate.matches(scope)
            if match is not Match.NONE:
                route, params = candidate, child.get("path_params", {})
                break
    template = getattr(route, "path_format", None)
    if template is None:
        return "/".join("…" if segment else "" for segment in scope.get("path", "").split("/"))
    filled = re.sub(
        r"\{([^}]+)\}", lambda p: str(params[p[1]]) if p[1] in SHOWN_PARAMETERS and p[1] in params else p[0], template
    )
    return printable(filled)


def log_access(client: Any, method: str, path: str, http_version: str, status: int) -> None:
    """One access line: `client - "METHOD path HTTP/v" status`, the shape uvicorn's has."""
    where = f"{client[0]}:{client[1]}" if client else "-"
    access_logger.info('%s - "%s %s HTTP/%s" %d', where, method, path, http_version, status)


class AccessLog:
    """One line per answered request, with the path as `shown_path` shows it (no query, no handles)."""

    def __init__(self, app: ASGIApp, routes: Sequence[BaseRoute]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not access_logger.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)  # no line to write (--log-level warning): no work per request
            return
        status = 500
        logged = False

        def log() -> None:
            nonlocal logged
            path = shown_path(scope, self.routes)
            log_access(scope.get("client"), scope.get("method", "-"), path, scope.get("http_version", "1.1"), status)
            logged = True

        async def noting(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body", False) and not logged:
                log()  # before the answer ends, so whoever has read the answer can read its line
            await send(message)

        try:
            await self.app(scope, receive, noting)
        finally:
            if not logged:
                log()
