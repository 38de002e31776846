"""The app's own edge: headers that must come once, and an access log that leaks nothing.

Both are ASGI middleware, so every route gets them without naming them:

* `HeaderGuard` refuses (400) a request that sends a header the routes read once
  (`Authorization`, `Idempotency-Key`, `X-Base-Version`, `X-Memory-Clear`,
  `X-Key-Session`, `X-Memory-State`, `X-Revive`) more than once, where "first wins" would let a proxy and the
  server disagree about which value counts; and one that sends both
  Content-Length and Transfer-Encoding, which h11 accepts (chunked wins) but a
  proxy in front may read the other way.
* `AccessLog` writes one line per request, like uvicorn's, but the path has no
  query string (a token tried as `?token=` stays out) and ids that work as
  handles (key sessions, conversations, proposals) are replaced by their
  parameter's name. Workspace ids and file paths stay: an operator needs them,
  and the test of `serve` reads them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

from fastapi import Request
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
)

#: Path parameters an access line shows as they are; every other one is shown as `{name}`.
SHOWN_PARAMETERS = frozenset({"workspace_id", "path", "version"})

BAD_REQUEST = "bad_request"

#: Set in a request's scope by the server when the body did not arrive in time: it was answered 408.
TIMED_OUT = "memframe.read_timed_out"


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


class PathRedactor:
    """A request path as the access log shows it: matched against the app's route templates.

    A path that matches a route keeps its literal segments and `SHOWN_PARAMETERS`; other
    parameters become `{name}`. A path that matches no route keeps only the segments some
    route spells literally; the rest become `…`.
    """

    def __init__(self, templates: Iterable[str]) -> None:
        self._routes: list[tuple[re.Pattern[str], str]] = []
        self._literals: set[str] = set()
        for template in sorted(set(templates), key=lambda t: (t.count("{"), -len(t))):
            pattern = "".join(
                f"(?P<{part[1:-1]}>.+)"
                if part == "{path}"
                else f"(?P<{part[1:-1]}>[^/]+)"
                if part.startswith("{")
                else re.escape(part)
                for part in re.split(r"(\{[^}]+\})", template)
                if part
            )
            self._routes.append((re.compile(pattern + r"\Z", re.DOTALL), template))
            self._literals.update(s for s in template.split("/") if s and "{" not in s)

    def __call__(self, path: str) -> str:
        for pattern, template in self._routes:
            match = pattern.match(path)
            if match:
                return printable(re.sub(r"\{([^}]+)\}", partial(_shown, match.groupdict()), template))
        return printable("/".join(s if not s or s in self._literals else "…" for s in path.split("/")))


def _shown(values: dict[str, str], parameter: re.Match[str]) -> str:
    return values[parameter[1]] if parameter[1] in SHOWN_PARAMETERS else parameter[0]


def log_access(client: Any, method: str, path: str, http_version: str, status: int) -> None:
    """One access line: `client - "METHOD path HTTP/v" status`, the shape uvicorn's has."""
    where = f"{client[0]}:{client[1]}" if client else "-"
    access_logger.info('%s - "%s %s HTTP/%s" %d', where, method, path, http_version, status)


class AccessLog:
    """One line per answered request, with the path from `redact` (no query, no handles)."""

    def __init__(self, app: ASGIApp, templates: Callable[[], Iterable[str]]) -> None:
        self.app = app
        self._templates = templates
        self._redact: PathRedactor | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not access_logger.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)  # no line to write (--log-level warning): no work per request
            return
        status = 500
        logged = False

        def log() -> None:
            nonlocal logged
            if self._redact is None:
                self._redact = PathRedactor(self._templates())
            path = self._redact(scope.get("path", ""))
            shown = 408 if scope.get(TIMED_OUT) else status
            log_access(scope.get("client"), scope.get("method", "-"), path, scope.get("http_version", "1.1"), shown)
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
