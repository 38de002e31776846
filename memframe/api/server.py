"""How `memframe serve` runs the app under uvicorn: read deadlines, a connection bound, our error shape.

uvicorn bounds an idle kept-alive connection (`timeout_keep_alive`) and the size of a request head
(`h11_max_incomplete_event_size`), and an ASGI middleware (`edge.BodyDeadline`) bounds how long a body
takes; but nothing in uvicorn bounds how long a client takes to send its request head, and its
`limit_concurrency` answers only once a head has arrived, so a client trickling header bytes, or one
opening connections it never uses, would hold them for ever. `EdgeProtocol` is uvicorn's `H11Protocol`
with what only the protocol can do:

* a head deadline: from a connection's opening, or the first byte of its next request, until that
  request's head is complete, at most `read_timeout` seconds; past it, a 408 in the one error shape,
  and the connection is closed;
* a connection bound: a connection beyond `max_connections` gets a 503 in the one error shape and is
  closed at once, before anything is read from it;
* h11's refusals (uvicorn's plain-text `400 Invalid HTTP request received.`) in the one JSON shape,
  with the status h11 meant: 431 for a head still incomplete past 16 KiB, 501 for a transfer coding
  other than chunked, 400 for the rest.

It overrides methods of a uvicorn class that uvicorn does not document as public, so pyproject.toml
pins the uvicorn versions this module is tested against; tests/api/test_edge.py is what a new uvicorn
release must pass before the pin moves.
"""

from __future__ import annotations

import asyncio
import json
import sys
from http import HTTPStatus
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from memframe.api.edge import BodyDeadline, access_logger, bad_request, log_access

DEFAULT_READ_TIMEOUT = 30.0
DEFAULT_MAX_CONNECTIONS = 512
#: How large a request head may grow before h11 refuses it (uvicorn's `h11_max_incomplete_event_size`).
MAX_HEAD_BYTES = 16 * 1024

#: What h11 refuses, by the status it hints at; the text says what to fix.
REFUSALS = {
    400: "Invalid HTTP request received.",
    431: f"The request head grew past the server's limit of {MAX_HEAD_BYTES // 1024} KiB before it was complete.",
    501: "Only Transfer-Encoding: chunked is supported.",
}


def _raw_json(status: int, payload: dict[str, str]) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, for when h11 has no request to answer."""
    body = json.dumps(payload).encode()
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class EdgeProtocol(H11Protocol):
    """uvicorn's h11 protocol with a head deadline, a connection bound and JSON refusals.

    The limits are class attributes: `edge_protocol()` makes a subclass holding them,
    since uvicorn builds the protocol itself from a class.
    """

    read_timeout: float = DEFAULT_READ_TIMEOUT
    max_connections: int | None = DEFAULT_MAX_CONNECTIONS
    _head_clock: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if self.max_connections is not None and len(self.connections) >= self.max_connections:
            self.transport = transport  # uvicorn's connection_lost closes it
            message = f"The server is at its limit of {self.max_connections} connections; try again shortly."
            self._refuse(503, {"error": "unavailable", "message": message}, transport.get_extra_info("peername"))
            return
        super().connection_made(transport)
        self._start_head_clock()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            self._start_head_clock()  # the first bytes of a request head: its clock starts now
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._stop_head_clock()  # the head is complete (or refused); a body's deadline is BodyDeadline's

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_clock()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        # uvicorn calls this while it handles h11's RemoteProtocolError, which hints at the status h11 meant.
        status = getattr(sys.exc_info()[1], "error_status_hint", 400)
        status = status if status in REFUSALS else 400
        self._stop_head_clock()
        self._refuse(status, bad_request(REFUSALS[status]), self.client)

    def _start_head_clock(self) -> None:
        if self._head_clock is None:
            self._head_clock = self.loop.call_later(self.read_timeout, self._head_timed_out)

    def _stop_head_clock(self) -> None:
        if self._head_clock is not None:
            self._head_clock.cancel()
            self._head_clock = None

    def _head_timed_out(self) -> None:
        self._head_clock = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            message = f"The request did not arrive within {self.read_timeout:g} seconds; the connection is closed."
            self._refuse(408, {"error": "request_timeout", "message": message}, self.client)

    def _refuse(self, status: int, payload: dict[str, str], client: Any) -> None:
        self.transport.write(_raw_json(status, payload))
        self.transport.close()
        log_access(client, "-", "-", "1.1", status)


def edge_protocol(read_timeout: float, max_connections: int | None) -> type[EdgeProtocol]:
    """An `EdgeProtocol` class with these limits, for `uvicorn.Config(http=…)`."""
    if read_timeout <= 0:
        raise ValueError("the read timeout must be positive")
    if max_connections is not None and max_connections < 1:
        raise ValueError("the connection limit must be at least 1")
    limits = {"read_timeout": float(read_timeout), "max_connections": max_connections}
    return type("EdgeProtocol", (EdgeProtocol,), limits)


def access_log_to_stdout(log_level: str = "info", *, who: str = "") -> None:
    """Our access lines where uvicorn's went: stdout, one per line as it happens, each after `who`
    (a worker of several names its pid). They are INFO lines, as uvicorn's are: `--log-level warning`
    (or above) has none, and then nothing per request is formatted or written either. The first
    call sets the format; later ones only the level."""
    import logging

    if not access_logger.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter(f"%(levelname)s:     {who}%(message)s"))
        access_logger.addHandler(handler)
        access_logger.propagate = False
    access_logger.setLevel(logging.getLevelName(log_level.upper()))


def uvicorn_config(
    app: Any,
    *,
    read_timeout: float = DEFAULT_READ_TIMEOUT,
    max_connections: int | None = DEFAULT_MAX_CONNECTIONS,
    log_level: str = "info",
    **options: Any,
) -> uvicorn.Config:
    """The uvicorn configuration `memframe serve` uses (and the edge tests run): `app` behind the
    body deadline, under `EdgeProtocol` with these limits.

    uvicorn's own access log is off: `memframe.api.edge.AccessLog` writes one that
    shows no query strings and no handles.
    """
    return uvicorn.Config(
        BodyDeadline(app, read_timeout),
        http=edge_protocol(read_timeout, max_connections),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        lifespan="off",
        # uvloop (a dependency where it builds) under "auto": its loop and transports cost less per
        # request than asyncio's own, which "auto" falls back to where uvloop is missing.
        loop="auto",
        log_level=log_level,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=10,
        **options,
    )
