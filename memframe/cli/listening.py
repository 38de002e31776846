"""Listening for `memframe serve` and `memframe keysessions`: the socket, and the line that says so.

Binding happens before serving, in the command's own process, so a taken port is one clear
line rather than a uvicorn log, and so several workers can share the one listening socket.
"""

from __future__ import annotations

import argparse
import ipaddress
import socket
import sys
from pathlib import Path


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
        sock.bind(address)
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
