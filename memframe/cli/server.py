"""`memframe serve`: running the service for a team, and the server's database every command of it opens.

    memframe serve --db team.db [--host 127.0.0.1] [--port 8765] [--workers N]
                   [--key-session-idle 1800] [--key-session-lifetime 43200]
                   [--key-sessions URL]     several workers or hosts: see cli/serve.py

`memframe admin …` (cli/admin.py) works on the same database through `open_service`.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memframe.cli.listening import announce as _announce
from memframe.cli.listening import listen as _listen
from memframe.cli.listening import seconds as _seconds
from memframe.cli.options import add_model_options, model_client
from memframe.settings import Settings

if TYPE_CHECKING:
    from memframe.service import MemoryService

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


# --- the database ------------------------------------------------------------------------


def db_target(value: str) -> Path | str:
    """`--db`: a SQLite file (a path or sqlite:///path), or a PostgreSQL URL kept as it is."""
    if value.startswith(("postgresql://", "postgres://")):
        return value
    if value.startswith("sqlite:///"):  # sqlite:///relative/path, sqlite:////absolute/path
        value = value.removeprefix("sqlite:///")
    return Path(value)


def db_option(settings: Settings) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--db",
        type=db_target,
        default=None if settings.db is None else db_target(settings.db),
        required=settings.db is None,
        metavar="PATH|URL",
        help="the server's SQLite file, or postgresql://… for a PostgreSQL server (default: $MEMFRAME_DB)",
    )
    return parent


@contextmanager
def open_service(
    args: argparse.Namespace, *, create: bool = False, key_sessions: Any = None
) -> Iterator[MemoryService]:
    """The service on `--db`; only commands that start a team's database may create the file,
    so a mistyped path is an error instead of a new, empty database."""
    from memframe.core.errors import NotFound
    from memframe.service import MemoryService

    path: Path | str = args.db
    if isinstance(path, Path) and not create and not path.exists():
        raise NotFound(f"There is no database at {path}; start one with 'memframe admin user add NAME --db {path}'.")
    # serve's --key-session-idle/--key-session-lifetime; admin commands have neither (None: the default)
    lifetimes = {
        name: value
        for name in ("key_session_idle", "key_session_lifetime")
        if (value := getattr(args, name, None)) is not None
    }
    grounded = bool(getattr(args, "grounded_capture", False))  # serve's --grounded-capture; admin has none
    service = MemoryService(path, key_sessions=key_sessions, grounded_capture=grounded, **lifetimes)
    try:
        yield service
    finally:
        service.close()


# --- serve -------------------------------------------------------------------------------


class _Stopped:
    """Our SIGINT/SIGTERM handler around uvicorn's own.

    uvicorn installs its handlers while it serves, shuts down gracefully on a
    signal, then re-raises the signal to the handler that was there before:
    this one, which records it so `serve` closes the database and exits 0
    instead of dying mid-cleanup. A signal that lands just before uvicorn's
    handlers are in place still stops the server, through `should_exit`.
    """

    def __init__(self, server: Any) -> None:
        self.server = server
        self.signal: int | None = None

    def __call__(self, signum: int, frame: Any) -> None:
        self.signal = signum
        self.server.should_exit = True


def _log_to_stderr() -> None:
    """memframe's own records (an internal error's traceback) beside uvicorn's lines."""
    import logging

    logger = logging.getLogger("memframe")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(name)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def _serve_on(
    sock: socket.socket, service: MemoryService, args: argparse.Namespace, *, fresh: bool, say_serving: bool = True
) -> _Stopped:
    """Run uvicorn on a bound socket until a signal; returns which signal stopped it.
    A worker of several does not say it is serving: serve said it once."""
    import uvicorn

    from memframe.api import create_app
    from memframe.api.server import access_log_to_stdout, uvicorn_config

    _log_to_stderr()
    if hasattr(sys.stdout, "reconfigure"):  # uvicorn's access lines go to stdout: one per line, now
        sys.stdout.reconfigure(line_buffering=True)
    access_log_to_stdout(args.log_level)  # method, redacted path and status only: never a body or a query
    app = create_app(service, model=model_client(args))
    config = uvicorn_config(
        app,
        log_level=args.log_level,
        read_timeout=args.read_timeout,
        max_connections=args.max_connections,
    )
    server = uvicorn.Server(config)
    # Our handlers go in before the "serving" line: whoever reads it may signal at once.
    stopped = _Stopped(server)
    previous = {sig: signal.signal(sig, stopped) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if say_serving:
            _announce(sock, args, fresh=fresh, users=bool(service.accounts.users()))
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return stopped


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve until SIGINT/SIGTERM; refuses a database written by a newer memframe."""
    from memframe.cli.serve import serve_workers, shared_store

    fresh = isinstance(args.db, Path) and not args.db.exists()
    if args.workers > 1:  # migrated (or refused as newer) here, once, before any worker starts
        with open_service(args, create=True) as service:
            users = bool(service.accounts.users())
        return serve_workers(
            args, lambda sock: _announce(sock, args, fresh=fresh, users=users), open_service, _serve_on
        )
    with open_service(args, create=True, key_sessions=shared_store(args)) as service:  # a newer schema is refused here
        sock = _listen(args.host, args.port)
        try:
            stopped = _serve_on(sock, service, args, fresh=fresh)
        finally:
            sock.close()
    how = f" on {signal.Signals(stopped.signal).name}" if stopped.signal else ""
    print(f"memframe stopped{how}; the database is closed.", flush=True)
    return 0


# --- parser ------------------------------------------------------------------------------


def register(subparsers: Any, settings: Settings) -> None:
    """Add `serve` to the memframe command: it takes no workspace options (--workspace, --remote,
    --token), since it serves a team's database directly, never through a workspace client."""
    db = db_option(settings)

    serve = subparsers.add_parser(
        "serve",
        parents=[db],
        help="run the memory service over HTTP",
        description="Run the memory service (FastAPI under uvicorn) for a team's workspaces.",
    )
    serve.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default: {DEFAULT_HOST})")
    serve.add_argument("--port", type=_port, default=DEFAULT_PORT, help=f"0 = any free port (default: {DEFAULT_PORT})")
    serve.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="info (the default) writes one access line per request; warning and above write none",
    )
    serve.add_argument(
        "--key-session-idle",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="forget a key session's key after this long unused (default: 1800, half an hour); "
        "clients open a fresh one by themselves",
    )
    serve.add_argument(
        "--key-session-lifetime",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="forget it this long after it opened, used or not (default: 43200, twelve hours)",
    )
    add_model_options(serve, settings, purpose="the Assistant's")
    serve.add_argument(
        "--grounded-capture",
        action=argparse.BooleanOptionalAction,
        default=settings.grounded_capture,
        help="an automatic memory edit whose words the person's message does not contain becomes a proposal "
        "instead of a commit; recommended for small models (default: the config file's grounded_capture, else off)",
    )
    serve.add_argument(
        "--read-timeout",
        type=_positive(float),
        default=30.0,
        metavar="SECONDS",
        help="drop a client whose request headers or body take longer than this (default: 30)",
    )
    serve.add_argument(
        "--max-connections",
        type=_positive(int),
        default=512,
        metavar="N",
        help="answer 503 and close connections beyond this many open at once (default: 512)",
    )
    from memframe.cli.serve import add_options

    add_options(serve)
    serve.set_defaults(handler=cmd_serve)


def _port(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a port number") from None
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError("a port is 0 to 65535")
    return number


def _positive(kind: type[float] | type[int]) -> Callable[[str], float | int]:
    def parse(value: str) -> float | int:
        try:
            number = kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
        if number <= 0:
            raise argparse.ArgumentTypeError(f"{value!r} is not above zero")
        return number

    return parse
