"""The Save's short way through the app: `PUT …/files/{path}` answered without FastAPI's machinery.

A person's Save is the one write that comes in bursts (a team saving at once), and most of the
CPU it costs the server was FastAPI's: matching the route among all the others, solving its
dependencies, validating each header and the body field by field, each in its own layer. The
group commit can only share an fsync among Saves the event loop has finished parsing, so that
CPU was what bounded a burst.

`SaveLane` is an ASGI middleware, inside the edge's (`AccessLog`, `InternalErrorGuard`,
`HeaderGuard`, `BodyLimit`, which all still apply), that answers a Save itself when the request is
one the route would accept as it stands: the route's path (no query string, no control
characters), `Content-Type: application/json`, a Content-Length, `X-Base-Version` in its plain
decimal form, `X-Memory-Clear` and `X-Revive` absent or `0`/`1`, and a JSON body that `PutFileIn`
validates. It then does exactly what `memframe.api.files.put_file` does: the bearer token as
`HTTPBearer` reads it, `current_user`'s authentication where `local_or_threaded` puts it, the
service's `put_file` (on the thread pool, as the route calls it), and the answer as FastAPI
would send it (a `VersionOut` serialised by alias, or `error_response` for a `MemframeError`);
any other exception goes on to `InternalErrorGuard` as the route's would.

Everything else (a malformed header or body, an unusual content type, a streamed body, a
disconnect while reading) goes to the app with the body read so far replayed, so every refusal
is the route's own: its 422 naming where, its error order, its shapes. Only requests that would
have reached the service come out of the lane, and they come out as the route's answer would:
the lane is a shortcut, never a second set of rules.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memframe.api.deps import local_or_threaded
from memframe.api.errors import error_response
from memframe.core.errors import MemframeError
from memframe.service import MemoryService
from memframe.wire.base import MAX_NUMBER
from memframe.wire.files import PutFileIn, VersionOut

#: The route `PUT /api/v1/workspaces/{workspace_id}/files/{path:path}`, as Starlette matches it
#: (`[^/]+` for a plain parameter, `.*` for a path one) on a path with no control characters.
_SAVE_PATH = re.compile(r"/api/v1/workspaces/([^/]+)/files/(.*)\Z")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: A header integer in the one form whose meaning no parser can read differently.
_PLAIN_NUMBER = re.compile(rb"(?:0|[1-9][0-9]{0,15})\Z")
_FLAGS = {b"0": False, b"1": True}
#: The headers the lane reads; any of them sent twice goes to the route.
_READ = frozenset(
    {b"x-base-version", b"content-type", b"content-length", b"x-memory-clear", b"x-revive", b"authorization"}
)


class SaveLane:
    """Answer well-formed Saves directly; hand every other request to `app` untouched."""

    def __init__(self, app: ASGIApp, service: MemoryService) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        save = _save_request(scope) if scope["type"] == "http" and scope.get("method") == "PUT" else None
        if save is None:
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        body = await _read_body(receive, messages)
        given = _put_file_in(body) if body is not None else None
        if given is None:
            await self.app(scope, _replaying(messages, receive), send)
            return
        workspace_id, path, base_version, clear, revive, token = save
        service = self.service
        try:
            user = await local_or_threaded(service, service.accounts.authenticate, token)
            info = await run_in_threadpool(
                service.put_file,
                user,
                workspace_id,
                path,
                given.blob(),
                base_version,
                clear=clear,
                restored_from=given.restored_from,
                revive=revive,
            )
        except MemframeError as exc:
            await error_response(exc)(scope, receive, send)
            return
        answer = VersionOut.model_validate(info).model_dump_json(by_alias=True).encode()
        await Response(answer, media_type="application/json")(scope, receive, send)


def _save_request(scope: Scope) -> tuple[str, str, int, bool, bool, str | None] | None:
    """(workspace id, path, base version, clear, revive, bearer token) of a PUT the lane may answer,
    or None when the route must judge it."""
    if scope.get("query_string") or scope.get("root_path"):
        return None
    target = scope.get("path", "")
    match = _SAVE_PATH.match(target)
    if match is None or _CONTROL.search(target):
        return None
    base: bytes | None = None
    content_type = length = False
    flags = {b"x-memory-clear": False, b"x-revive": False}
    authorization: bytes | None = None
    seen: set[bytes] = set()
    for name, value in scope["headers"]:
        if name in _READ:
            if name in seen:
                return None  # which one counts is the route's call (or the edge's refusal)
            seen.add(name)
        if name == b"x-base-version":
            base = value
        elif name == b"content-type":
            content_type = value == b"application/json"
        elif name == b"content-length":
            length = True
        elif name == b"transfer-encoding":
            return None
        elif name in flags:
            if value not in _FLAGS:
                return None
            flags[name] = _FLAGS[value]
        elif name == b"authorization":
            authorization = value
    if base is None or not content_type or not length or not _PLAIN_NUMBER.match(base):
        return None
    base_version = int(base)
    if base_version > MAX_NUMBER:
        return None
    return (
        match[1],
        match[2],
        base_version,
        flags[b"x-memory-clear"],
        flags[b"x-revive"],
        _bearer(authorization),
    )


def _bearer(authorization: bytes | None) -> str | None:
    """The token as `fastapi.security.HTTPBearer(auto_error=False)` reads it: None unless the header
    is `Bearer` (any case), one space and a non-blank credential."""
    if not authorization:
        return None
    scheme, _, credentials = authorization.decode("latin-1").partition(" ")
    credentials = credentials.strip()
    if not scheme or not credentials or scheme.lower() != "bearer":
        return None
    return credentials


async def _read_body(receive: Receive, messages: list[Message]) -> bytes | None:
    """The whole body, every message kept in `messages`; None when it did not arrive whole
    (a disconnect, the read deadline) or is empty, for the app to answer as it does."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            body = b"".join(chunks)
            return body or None


def _put_file_in(body: bytes) -> PutFileIn | None:
    """The body as the route's `PutFileIn` (FastAPI's `json.loads`, then the model), or None when
    the route would refuse it: it then says why, in its own words."""
    try:
        data: Any = json.loads(body)
        return PutFileIn.model_validate(data) if isinstance(data, dict) else None
    except Exception:  # whatever the route makes of it (a 422, a 400), it says so itself
        return None


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    """`receive` as the app would have seen it: the messages already read, then the rest."""
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
