"""How `memframe serve` runs the app under uvicorn: read timeouts, a connection bound, our error shape.

uvicorn's h11 protocol bounds how long an *idle* kept-alive connection stays open
(`timeout_keep_alive`) and how large a request head may grow
(`h11_max_incomplete_event_size`, 16 KiB), but not how long a client may take to
send one: a client trickling header bytes, or one that declares a 1 MB body and
stalls, holds its connection for ever. `limit_concurrency` answers 503 only once a
request head has arrived, so it does not bound connections that never finish one.

`EdgeProtocol` is uvicorn's `H11Protocol` with three additions:

* a read deadline: from a connection's first byte of a request (or its opening)
  until that request's last body byte, at most `read_timeout` seconds; past it the
  client gets a 408 in the one error shape (unless its answer has already begun)
  and the connection is closed, and a route still reading the body sees a
  disconnect;
* a connection bound: a connection beyond `max_connections` gets a 503 in the one
  error shape and is closed at once, before anything is read from it;
* uvicorn's own `400 Invalid HTTP request received.` (plain text) is sent in the
  one JSON shape instead, with the status h11 meant: 431 for a head still
  incomplete past 16 KiB, 501 for a transfer coding other than chunked, 400
  for the rest.
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

from memframe.api.edge import TIMED_OUT, bad_request, log_access

DEFAULT_READ_TIMEOUT = 30.0
DEFAULT_MAX_CONNECTIONS = 512


#: What h11 refuses, by the status it hints at; the text says what to fix.
REFUSALS = {
    400: "Invalid HTTP request received.",
    431: "The request head grew past the server's limit of 16 KiB before it was complete.",
    501: "Only Transfer-Encoding: chunked is supported.",
}


def _raw_json(status: int, payload: dict[str, str]) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection, written past h11 (which has no request to answer)."""
    body = json.dumps(payload).encode()
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class EdgeProtocol(H11Protocol):
    """uvicorn's h11 protocol with a read deadline, a connection bound and JSON refusals.

    The limits are class attributes: `edge_protocol()` makes a subclass holding them,
    since uvicorn builds the protocol itself from a class.
    """

    read_timeout: float = DEFAULT_READ_TIMEOUT
    max_connections: int | None = DEFAULT_MAX_CONNECTIONS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_deadline: asyncio.TimerHandle | None = None
        # uvicorn catches h11's refusal and calls send_400_response with a fixed text; the status
        # h11 meant (431 for an oversized head, 501 for an unknown transfer coding) is kept here.
        self._refusal_status = 400
        next_event = self.conn.next_event

        def noting_refusals() -> Any:
            try:
                return next_event()
            except h11.RemoteProtocolError as exc:
                self._refusal_status = exc.error_status_hint
                raise

        self.conn.next_event = noting_refusals  # type: ignore[method-assign]

    # --- the connection bound ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if self.max_connections is not None and len(self.connections) >= self.max_connections:
            self.transport = transport
            message = f"The server is at its limit of {self.max_connections} connections; try again shortly."
            transport.write(_raw_json(503, {"error": "unavailable", "message": message}))
            transport.close()
            log_access(transport.get_extra_info("peername"), "-", "-", "1.1", 503)
            return
        super().connection_made(transport)
        self._arm()

    # --- the read deadline --------------------------------------------------------------

    def _arm(self) -> None:
        if self._read_deadline is None:
            self._read_deadline = self.loop.call_later(self.read_timeout, self._read_timed_out)

    def _disarm(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _settle(self) -> None:
        """The request has fully arrived (or the connection is over): the deadline no longer applies."""
        if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):
            self._disarm()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE:
            self._arm()  # the first bytes of a request head: its clock starts now
        super().data_received(data)
        self._settle()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # A pipelined request already partly read has its own deadline; an idle connection has keep-alive's.
        partial = self.conn.their_state is h11.SEND_BODY or (
            self.conn.their_state is h11.IDLE and bool(self.conn.trailing_data[0])
        )
        if partial and not self.transport.is_closing():
            self._arm()
        else:
            self._settle()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _read_timed_out(self) -> None:
        self._read_deadline = None
        if self.transport.is_closing():
            return
        cycle = self.cycle if self.cycle is not None and not self.cycle.response_complete else None
        reading_body = cycle is not None and self.conn.their_state is h11.SEND_BODY
        if not (reading_body and cycle is not None and cycle.response_started):
            message = f"The request did not arrive within {self.read_timeout:g} seconds; the connection is closed."
            self.transport.write(_raw_json(408, {"error": "request_timeout", "message": message}))
        if reading_body and cycle is not None:
            # The route reading the body gets http.disconnect and its answer goes nowhere;
            # the access log writes this request's line, with 408 rather than that answer's status.
            cycle.scope[TIMED_OUT] = True  # type: ignore[literal-required]
            cycle.disconnected = True
            cycle.message_event.set()
        else:
            log_access(self.client, "-", "-", "1.1", 408)
        self.transport.close()

    # --- uvicorn's own refusal, in our shape ----------------------------------------------

    def send_400_response(self, msg: str) -> None:
        self._disarm()
        status = self._refusal_status if self._refusal_status in REFUSALS else 400
        self.transport.write(_raw_json(status, bad_request(REFUSALS[status])))
        self.transport.close()
        log_access(self.client, "-", "-", "1.1", status)


def edge_protocol(read_timeout: float, max_connections: int | None) -> type[EdgeProtocol]:
    """An `EdgeProtocol` class with these limits, for `uvicorn.Config(http=…)`."""
    if read_timeout <= 0:
        raise ValueError("the read timeout must be positive")
    if max_connections is not None and max_connections < 1:
        raise ValueError("the connection limit must be at least 1")
    limits = {"read_timeout": float(read_timeout), "max_connections": max_connections}
    return type("EdgeProtocol", (EdgeProtocol,), limits)


def settle_heap(app: Any) -> None:
    """Build what the app otherwise builds on its first requests (the OpenAPI schema, which the access
    log's path redactor reads), then leave every object alive now out of the garbage collector's walks.

    A served process holds a large, lasting heap (FastAPI's routes, pydantic's validators and schemas),
    and CPython's full collection walks all of it: measured under a burst of Saves, one took 90-150 ms,
    stalling every request in flight at once, which was the tail of the Saves' latency. After
    `gc.freeze()` a full collection walks only what was made since; nothing frozen is ever freed, which
    for objects that live as long as the server costs nothing. For `memframe serve` only (tests build
    many apps in one process, and freezing each would keep its garbage for good).
    """
    import gc

    app.openapi()
    gc.collect()
    gc.freeze()


def access_log_to_stdout(log_level: str = "info") -> None:
    """Our access lines where uvicorn's went: stdout, one per line as it happens. They are INFO
    lines, as uvicorn's are: `--log-level warning` (or above) has none, and then nothing per
    request is formatted or written either."""
    import logging

    from memframe.api.edge import access_logger

    if not access_logger.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
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
    """The uvicorn configuration `memframe serve` uses (and the edge tests run).

    uvicorn's own access log is off: `memframe.api.edge.AccessLog` writes one that
    shows no query strings and no handles.
    """
    return uvicorn.Config(
        app,
        http=edge_protocol(read_timeout, max_connections),
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
