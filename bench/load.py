"""A small HTTP/1.1 load generator: N keep-alive connections, each sending its next request as soon
as the last answer arrived (a closed loop, like N people's clients), on one asyncio loop.

Written on raw asyncio streams rather than httpx so the client costs far less per request than the
server it measures (both share the same two cores): each request is prepared bytes, each answer is
read by its Content-Length and checked by its status line only.
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


async def _answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, await reader.readexactly(length) if length else b""


async def _connection(
    host: str, port: int, requests: Requests, ok: int, deadline: list[float], out: Load, started: asyncio.Event
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    await started.wait()
    last: bytes | None = None
    try:
        while time.perf_counter() < deadline[0]:
            data = requests(last)
            if data is None:
                return
            at = time.perf_counter()
            writer.write(data)
            status, last = await _answer(reader)
            out.latencies.append(time.perf_counter() - at)
            if status != ok:
                out.failures.append(f"{status} {last[:200]!r}")
                return
    finally:
        writer.close()


def drive(url: str, each: list[Requests], *, seconds: float, ok: int = 200) -> Load:
    """Run one connection per entry of `each`, all at once, for at most `seconds` (or until every
    connection has nothing more to send); the rate counts answers over the time until the last one."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80

    async def run() -> Load:
        out = Load(len(each), 0.0)
        started = asyncio.Event()
        deadline = [float("inf")]
        tasks = [asyncio.create_task(_connection(host, port, r, ok, deadline, out, started)) for r in each]
        await asyncio.sleep(0.05 + 0.002 * len(each))  # every connection open before the clock starts
        start = time.perf_counter()
        deadline[0] = start + seconds
        started.set()
        await asyncio.gather(*tasks)
        out.elapsed = time.perf_counter() - start
        return out

    return asyncio.run(run())
