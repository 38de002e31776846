"""Listening for `memframe serve` and `memframe keysessions`: the socket, and the line that says so.

Binding happens before serving, in the command's own process, so a taken port is one clear
line rather than a uvicorn log, and so serve's workers get their sockets from serve (one each,
on one port: `listen_each`).
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
from pathlib import Path

#: Whether SO_REUSEPORT spreads a port's connections over its sockets (Linux 3.9 and later).
BALANCED_REUSEPORT = sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def _err(line: str) -> None:
    print(f"memframe: {line}", file=sys.stderr, flush=True)


def shown(target: Path | str) -> str:
    """The database as the serving line shows it: a PostgreSQL URL without its password."""
    if isinstance(target, Path):
        return str(target)
    from memframe.service.pg import safe_location

    return safe_location(target)


def listen(host: str, port: int) -> socket.socket:
    """Bind and listen before serving, so a taken port is one clear line rather than a uvicorn log."""
    return _listening(_bound(host, port, shared=False), host, port)


def listen_each(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` listening sockets on one port, one per worker, each with SO_REUSEPORT: the kernel
    spreads new connections over them by a hash of each connection's addresses.

    One socket shared by every worker is taken from by whichever worker's accept loop wakes first,
    and asyncio's accepts every connection waiting (up to the backlog) in one go: a burst of
    connections opened at once (64 keep-alive clients starting together) landed 46 and 18, or all 4
    of 4, on one worker, which then served them all while the other idled.

    SO_REUSEPORT alone would let a second `serve` by the same user join this port's group silently;
    so the port is first bound by a socket without it, which fails on any listener already there
    (another serve, with workers or not, or anything else) with the same one line as one worker's
    `listen`, and for port 0 learns which port the kernel chose. Only then, with that probe closed,
    are the group's sockets bound to that port.

    Only on Linux, whose SO_REUSEPORT balances; elsewhere (macOS and the BSDs hand a port's
    connections to one socket of the group, Windows has no such option) every worker shares one
    socket, as before."""
    from memframe.core.errors import Unavailable

    if not BALANCED_REUSEPORT:
        return [listen(host, port)] * count
    probe = _bound(host, port, shared=False)
    port = int(probe.getsockname()[1])
    probe.close()
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sockets.append(_listening(_bound(host, port, shared=True), host, port))
    except Unavailable:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _bound(host: str, port: int, *, shared: bool) -> socket.socket:
    """A TCP socket bound to host:port (with SO_REUSEPORT when `shared`); Unavailable in one line."""
    from memframe.core.errors import Unavailable

    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        # Naming IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on such sockets.
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise Unavailable(f"Cannot listen on {host}:{port}: {exc.strerror or exc}.") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if shared:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise Unavailable(f"Cannot listen on {host}:{port}: {exc.strerror or exc}.") from None
    return sock


def _listening(sock: socket.socket, host: str, port: int) -> socket.socket:
    from memframe.core.errors import Unavailable

    try:
        # Listening now, before "serving … at URL" is printed: a client that connects at once
        # waits in the backlog until uvicorn accepts, instead of being refused.
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise Unavailable(f"Cannot listen on {host}:{port}: {exc.strerror or exc}.") from None
    return sock


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def announce(sock: socket.socket, args: argparse.Namespace, *, fresh: bool, users: bool) -> None:
    """The serving line (whoever reads it may connect, or signal, at once) and its warnings."""
    host, port = sock.getsockname()[:2]
    url = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
    state = "new database" if fresh else "database"
    workers = f" with {args.workers} workers" if getattr(args, "workers", 1) > 1 else ""
    print(f"memframe serving {state} {shown(args.db)} at {url}{workers} (Ctrl+C or SIGTERM stops it)", flush=True)
    if not users:
        _err("no users yet: add one with 'memframe admin user add NAME --db …' (works while serving).")
    if not is_loopback(str(host)):
        _err(
            "warning: listening beyond this machine over plain HTTP; "
            "put TLS in front so tokens do not cross the network in clear."
        )


def seconds(value: str) -> float:
    """A duration in seconds: more than 0."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not number > 0 or number == float("inf"):
        raise argparse.ArgumentTypeError("a duration is a finite number of seconds above 0")
    return number
