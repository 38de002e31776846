"""Every failure leaves the server in the one error shape: `{"error", "message", **details}`.

Three sources, one shape:

* a `MemframeError` from the service → its own `code`/`status` via `to_payload()`
  (the same mapping the remote client reads back with `error_from_payload`);
* a request FastAPI cannot validate → 422 `invalid_input`, naming where and what,
  never echoing the input (it may be a ciphertext);
* anything else → 500 `internal`, logged with the method and path only.

The body-size limit is an ASGI middleware so an oversized request is refused
from its Content-Length before any of it is read, and a body streamed without
one is refused as soon as it crosses the limit.
"""

from __future__ import annotations

import json
import logging
import traceback
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError, ResponseValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memframe.core.errors import InvalidInput, MemframeError, NotFound, TooLarge, Unauthorized

logger = logging.getLogger("memframe.api")

#: Request bodies over this are refused with 413. A document is at most 1 MiB of
#: ciphertext (the service's own bound), which is about 1.4 MiB in base64.
MAX_BODY_BYTES = 2 * 1024 * 1024

INTERNAL_PAYLOAD = {"error": "internal", "message": "The server failed unexpectedly; see its log."}

_HTTP_CODES = {
    404: NotFound.code,
    405: "method_not_allowed",
    408: "request_timeout",
    413: TooLarge.code,
}


def error_response(exc: MemframeError, headers: dict[str, str] | None = None) -> JSONResponse:
    if isinstance(exc, Unauthorized):
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return JSONResponse(exc.to_payload(), status_code=exc.status, headers=headers)


async def _memframe_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, MemframeError)
    return error_response(exc)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [_describe(error) for error in exc.errors()]
    first = problems[0] if problems else {"where": "request", "problem": "malformed"}
    message = f"{first['where']}: {first['problem']}"
    return error_response(InvalidInput(message, errors=problems))


def _describe(error: Any) -> dict[str, str]:
    """Where and what, from one pydantic error; the offending input is never echoed."""
    loc = [str(part) for part in error.get("loc", ())]
    if loc and loc[0] in ("header", "query", "path", "body"):
        where = loc[0] + (" " + ".".join(loc[1:]) if loc[1:] else "")
    else:
        where = ".".join(loc) or "request"
    problem = str(error.get("msg", "invalid"))
    problem = problem.removeprefix("Value error, ")
    if error.get("type") == "json_invalid":
        where, problem = "body", f"not valid JSON ({error.get('ctx', {}).get('error', 'decode error')})"
    return {"where": where, "problem": problem}


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own 404/405 and the edge's 408/413 (no route, wrong method, a late or oversized body)."""
    assert isinstance(exc, HTTPException)
    message = str(exc.detail)
    if exc.status_code == 404:
        message = f"There is no API route {request.method} {request.url.path}; is the server URL right?"
    elif exc.status_code == 405:
        message = f"{request.url.path} does not accept {request.method}."
    payload = {"error": _HTTP_CODES.get(exc.status_code, "http_error"), "message": message}
    return JSONResponse(payload, status_code=exc.status_code, headers=exc.headers)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(MemframeError, _memframe_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)


async def send_json(send: Send, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
    body = json.dumps(payload).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


class _BodyTooLarge(HTTPException):
    """Raised from `receive` mid-stream; FastAPI passes HTTPExceptions from body reading through."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"The request body is over the server's limit of {limit} bytes.")


class BodyLimit:
    """Refuse bodies over `limit` bytes: by Content-Length before reading, else while streaming."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            too_large = TooLarge(f"The request body is over the server's limit of {self.limit} bytes.")
            # Connection: close, since the unread body cannot be skipped on a kept-alive connection.
            await send_json(send, 413, too_large.to_payload(), {"connection": "close"})
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise _BodyTooLarge(self.limit)
            return message

        await self.app(scope, limited, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class InternalErrorGuard:
    """The catch-all: an unexpected exception becomes a bare 500 and one log record.

    The record names the method and path and carries the traceback; it never
    includes headers (the token) or the body (ciphertext). Nothing about the
    failure reaches the client beyond `{"error": "internal"}`.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception as exc:
            where = (scope.get("method"), scope.get("path"))
            if isinstance(exc, (ValidationError, ResponseValidationError)):
                # Their text quotes the data they checked (a ciphertext, say): type and frames only.
                frames = "".join(traceback.format_tb(exc.__traceback__))
                logger.error("internal error answering %s %s: %s\n%s", *where, type(exc).__name__, frames)
            else:
                logger.exception("internal error answering %s %s", *where)
            if started:
                raise
            await send_json(send, 500, INTERNAL_PAYLOAD, {})
