"""A small HTTP/1.1 load generator: N keep-alive connections, each sending its next request as soon
as the last answer arrived (a closed loop, like N people's clients), on one asyncio loop.

It shares the machine's cores with the server it measures, so what it spends per request is taken
from the server: every request is prepared bytes, and each connection is an `asyncio.Protocol` that
parses its answers in `data_received` itself (the status line and Content-Length, nothing else) and
writes the next request from there, one callback per arriving chunk instead of asyncio streams' task
wake-up, `readuntil` and `readexactly` per answer.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

#: The next request of one connection, given the body of the answer to its last one (None at first);
#: None when that connection has nothing more to send.
Requests = Callable[[bytes | None], bytes | None]

_HEAD_END = b"\r\n\r\n"
_CONTENT_LENGTH = b"\r\ncontent-length:"


@dataclass
class Load:
    """What one run of `drive` measured."""

    connections: int
    elapsed: float
    latencies: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.elapsed if self.elapsed > 0 else 0.0


def request(method: str, path: str, host: str, headers: dict[str, str] | None = None, body: bytes = b"") -> bytes:
    """One HTTP/1.1 request as bytes, kept alive."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if body or method in ("PUT", "POST"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class _Client(asyncio.Protocol):
    """One keep-alive connection's closed loop: send, read the whole answer, check it, send the next."""

    def __init__(self, requests: Requests, ok: int, deadline: list[float], out: Load) -> None:
        self.requests = requests
        self.ok = ok
        self.deadline = deadline
        self.out = out
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.status = 0
        self.body_at = -1  # where the body of the answer being read starts; -1 until its head is whole
        self.length = 0
        self.at = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send_next(self, last: bytes | None) -> None:
        """The next request, or the end of this connection (its time is up or it has nothing more)."""
        assert self.transport is not None
        if time.perf_counter() >= self.deadline[0]:
            return self.finish()
        data = self.requests(last)
        if data is None:
            return self.finish()
        self.at = time.perf_counter()
        self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        try:
            if self.body_at < 0:
                end = buffer.find(_HEAD_END)
                if end < 0:
                    return
                if buffer[:9] not in (b"HTTP/1.1 ", b"HTTP/1.0 "):
                    raise ValueError(f"not an HTTP answer: {bytes(buffer[:40])!r}")
                self.status = int(buffer[9:12])
                head = bytes(buffer[: end + 2]).lower()
                at = head.find(_CONTENT_LENGTH)
                if at < 0:
                    raise ValueError(f"{self.status} answer without Content-Length")
                self.length = int(head[at + len(_CONTENT_LENGTH) : head.index(b"\r\n", at + 2)])
                self.body_at = end + 4
            if len(buffer) < self.body_at + self.length:
                return
            if len(buffer) > self.body_at + self.length:
                raise ValueError("more bytes than the answer's Content-Length (none were asked for)")
            body = bytes(buffer[self.body_at :])
            self.out.latencies.append(time.perf_counter() - self.at)
            buffer.clear()
            self.body_at = -1
            if self.status != self.ok:
                self.out.failures.append(f"{self.status} {body[:200]!r}")
                return self.finish()
            self.send_next(body)
        except Exception as exc:  # a malformed answer, or a check in `requests` failed: the run fails
            self.fail(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.out.failures.append(f"the connection closed mid-run ({exc or 'by the server'})")
            self.done.set_result(None)

    def finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)
        if self.transport is not None:
            self.transport.close()

    def fail(self, exc: BaseException) -> None:
        if not self.done.done():
            self.done.set_exception(exc)
        if self.transport is not None:
            self.transport.close()


def drive(url: str, each: list[Requests], *, seconds: float, ok: int = 200) -> Load:
    """Run one connection per entry of `each`, all at once, for at most `seconds` (or until every
    connection has nothing more to send); the rate counts answers over the time until the last one."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80

    async def run() -> Load:
        loop = asyncio.get_running_loop()
        out = Load(len(each), 0.0)
        deadline = [float("inf")]

        def factory(requests: Requests) -> Callable[[], _Client]:
            return lambda: _Client(requests, ok, deadline, out)

        opened = await asyncio.gather(*(loop.create_connection(factory(r), host, port) for r in each))
        clients = [client for _, client in opened]  # every connection open before the clock starts
        try:
            start = time.perf_counter()
            deadline[0] = start + seconds
            for client in clients:
                client.send_next(None)
            await asyncio.gather(*(client.done for client in clients))
            out.elapsed = time.perf_counter() - start
        finally:
            for client in clients:
                client.finish()
        return out

    return asyncio.run(run())
