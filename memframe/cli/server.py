"""`memframe serve` and `memframe admin …`: running the service for a team.

    memframe serve --db team.db [--host 127.0.0.1] [--port 8765] [--workers N]
                   [--key-session-idle 1800] [--key-session-lifetime 43200]
                   [--key-sessions URL]     several workers or hosts: see cli/serve.py
    memframe admin user add|list …           people
    memframe admin token create|list|revoke  bearer tokens (shown once, stored hashed)
    memframe admin workspace create|list     workspaces (the owner becomes a member)
    memframe admin member add|remove|list    who may reach a workspace
    memframe admin compact -w WORKSPACE      rewrite old whole versions as sealed deltas (needs the key)

Admin commands work directly on the database file, so they need no token and
no running server; they are safe to run while `serve` runs (SQLite WAL). Like
every command, a failure prints one line and exits non-zero.
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
from memframe.cli.listening import shown
from memframe.cli.options import Handler, add_model_options, model_client
from memframe.cli.output import when
from memframe.settings import Settings

if TYPE_CHECKING:
    from memframe.service import MemoryService

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def _err(line: str) -> None:
    print(f"memframe: {line}", file=sys.stderr, flush=True)


# --- the database ------------------------------------------------------------------------


def _db_target(value: str) -> Path | str:
    """`--db`: a SQLite file (a path or sqlite:///path), or a PostgreSQL URL kept as it is."""
    if value.startswith(("postgresql://", "postgres://")):
        return value
    if value.startswith("sqlite:///"):  # sqlite:///relative/path, sqlite:////absolute/path
        value = value.removeprefix("sqlite:///")
    return Path(value)


def _db_parent(settings: Settings) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--db",
        type=_db_target,
        default=None if settings.db is None else _db_target(settings.db),
        required=settings.db is None,
        metavar="PATH|URL",
        help="the server's SQLite file, or postgresql://… for a PostgreSQL server (default: $MEMFRAME_DB)",
    )
    return parent


@contextmanager
def _service(args: argparse.Namespace, *, create: bool = False, key_sessions: Any = None) -> Iterator[MemoryService]:
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
    service = MemoryService(path, key_sessions=key_sessions, **lifetimes)
    try:
        yield service
    finally:
        service.close()


def cmd_compact(args: argparse.Namespace) -> int:
    """Compaction needs the workspace key (the server cannot read what it stores), so it runs on a
    key holder's machine against the database file itself: the local one, or a team's with --db."""
    from memframe.backend.local import LocalBackend
    from memframe.cli.output import prompt
    from memframe.core.errors import NotFound
    from memframe.sealing.keyfiles import load_key
    from memframe.service.accounts import LOCAL_USER

    db: Path | str = args.db if args.db is not None else _local_db()
    key = load_key(args.workspace, remote_url=args.key_for, prompt=prompt)
    with _service(argparse.Namespace(db=db)) as service:
        if args.workspace not in service.accounts.workspaces():
            raise NotFound(f"There is no workspace {args.workspace!r} in {shown(db)}; nothing was changed.")
        backend = LocalBackend(service, args.workspace, key, user=args.user or LOCAL_USER, owns_service=False)
        backend.prove_key()
        done = backend.compact()
    print(
        f"Compacted {args.workspace!r}: {done.rewritten} of {done.versions} old versions re-sealed as deltas,"
        f" {done.bytes_before:,} bytes of ciphertext became {done.bytes_after:,} (SQLite reuses the freed pages;"
        " VACUUM returns them to the disk)."
    )
    return 0


def _local_db() -> Path:
    from memframe import paths

    return paths.local_database()


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
    from memframe.api.server import access_log_to_stdout, settle_heap, uvicorn_config

    _log_to_stderr()
    if hasattr(sys.stdout, "reconfigure"):  # uvicorn's access lines go to stdout: one per line, now
        sys.stdout.reconfigure(line_buffering=True)
    access_log_to_stdout(args.log_level)  # method, redacted path and status only: never a body or a query
    app = create_app(service, model=model_client(args))
    settle_heap(app)  # no full garbage collection walks the app's lasting heap mid-burst
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
        with _service(args, create=True) as service:
            users = bool(service.accounts.users())
        return serve_workers(args, lambda sock: _announce(sock, args, fresh=fresh, users=users), _service, _serve_on)
    with _service(args, create=True, key_sessions=shared_store(args)) as service:  # a newer schema is refused here
        sock = _listen(args.host, args.port)
        try:
            stopped = _serve_on(sock, service, args, fresh=fresh)
        finally:
            sock.close()
    how = f" on {signal.Signals(stopped.signal).name}" if stopped.signal else ""
    print(f"memframe stopped{how}; the database is closed.", flush=True)
    return 0


# --- admin -------------------------------------------------------------------------------


def cmd_user_add(args: argparse.Namespace) -> int:
    with _service(args, create=True) as service:
        service.accounts.add_user(args.name)
    print(f"Added user {args.name!r}.")
    return 0


def cmd_user_list(args: argparse.Namespace) -> int:
    with _service(args) as service:
        users = service.accounts.users()
    for user in users:
        print(user)
    if not users:
        print("No users yet.", file=sys.stderr)
    return 0


def cmd_token_create(args: argparse.Namespace) -> int:
    """The token goes alone to stdout (for `TOKEN=$(…)`); the explanation goes to stderr."""
    expires_in = _duration(args.expires_in) if args.expires_in else None
    with _service(args) as service:
        token_id, token = service.accounts.create_token(args.user, args.label, expires_in=expires_in)
    print(
        f"Token {token_id} for {args.user!r}{f' ({args.label})' if args.label else ''}"
        f"{f', expiring in {args.expires_in}' if args.expires_in else ''}. "
        "It is shown only this once and stored only as a hash: keep it now.",
        file=sys.stderr,
    )
    print(token, flush=True)
    return 0


def _duration(text: str) -> float:
    """Seconds in `90d`, `12h`, `30m` or `45s`; anything else is one clear line."""
    from memframe.core.errors import InvalidInput

    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    number, unit = text[:-1], text[-1:].lower()
    if unit not in units or not number.isdigit() or int(number) == 0:
        raise InvalidInput(f"{text!r} is not a duration: use a number and d, h, m or s, e.g. 90d.")
    return float(int(number) * units[unit])


def cmd_token_list(args: argparse.Namespace) -> int:
    with _service(args) as service:
        tokens = service.accounts.tokens(args.user)
    if not tokens:
        print("No tokens.", file=sys.stderr)
        return 0
    print(f"{'id':12}  {'user':16}  {'created':19}  {'state':27}  label")
    for t in tokens:
        state = "active" if t.revoked_at is None else f"revoked {when(t.revoked_at)}"
        print(f"{t.id:12}  {t.user_id[:16]:16}  {when(t.created_at)}  {state:27}  {t.label}")
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    with _service(args) as service:
        service.accounts.revoke_token(args.token_id)
    print(f"Revoked token {args.token_id}; it stops working on the next request.")
    return 0


def cmd_workspace_create(args: argparse.Namespace) -> int:
    with _service(args) as service:
        service.accounts.create_workspace(args.workspace, args.owner)
    print(f"Created workspace {args.workspace!r}, owned by {args.owner!r}.")
    print(f"Its key is made on a member's machine: memframe init --workspace {args.workspace} --remote URL")
    return 0


def cmd_workspace_list(args: argparse.Namespace) -> int:
    with _service(args) as service:
        rows = [(w, service.accounts.members(w)) for w in service.accounts.workspaces()]
    for workspace, members in rows:
        print(f"{workspace}  members: {', '.join(members) or '-'}")
    if not rows:
        print("No workspaces yet.", file=sys.stderr)
    return 0


def cmd_member_add(args: argparse.Namespace) -> int:
    with _service(args) as service:
        service.accounts.add_member(args.workspace, args.user)
    print(f"{args.user!r} is a member of {args.workspace!r}.")
    print("They still need the workspace key from a member: memframe key export / memframe key import.")
    return 0


def cmd_member_remove(args: argparse.Namespace) -> int:
    with _service(args) as service:
        service.accounts.remove_member(args.workspace, args.user)
    print(f"{args.user!r} is no longer a member of {args.workspace!r}.")
    print("They keep any key they already have: for old text, that cannot be taken back.")
    return 0


def cmd_member_list(args: argparse.Namespace) -> int:
    from memframe.core.errors import NotFound

    with _service(args) as service:
        if args.workspace not in service.accounts.workspaces():
            raise NotFound(f"There is no workspace {args.workspace!r}.")
        members = service.accounts.members(args.workspace)
    for member in members:
        print(member)
    return 0


# --- parser ------------------------------------------------------------------------------


def register(subparsers: Any, settings: Settings) -> None:
    """Add `serve` and `admin` to the memframe command.

    They take no workspace options (--workspace, --remote, --token): these
    commands act on a server's database directly, never through a workspace client.
    """
    db = _db_parent(settings)

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

    admin = subparsers.add_parser(
        "admin",
        help="manage users, tokens, workspaces and members of a server's database",
        description="Manage a server's database directly (no token, no running server needed).",
    )
    kinds = admin.add_subparsers(dest="admin_kind", metavar="WHAT", required=True)

    def leaf(group: Any, name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = group.add_parser(name, parents=[db], help=help_, description=help_)
        p.set_defaults(handler=handler)
        return p

    users = kinds.add_parser("user", help="people").add_subparsers(dest="action", metavar="ACTION", required=True)
    leaf(users, "add", cmd_user_add, "add a user (creates the database if needed)").add_argument("name")
    leaf(users, "list", cmd_user_list, "list users")

    tokens = kinds.add_parser("token", help="bearer tokens").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    p = leaf(tokens, "create", cmd_token_create, "create a token for a user and print it once")
    p.add_argument("--user", required=True)
    p.add_argument("--label", default="", help="what the token is for, e.g. a machine's name")
    p.add_argument("--expires-in", metavar="DURATION", help="stop working after e.g. 90d, 12h or 30m (default: never)")
    p = leaf(tokens, "list", cmd_token_list, "list tokens (never the tokens themselves)")
    p.add_argument("--user", default=None)
    leaf(tokens, "revoke", cmd_token_revoke, "revoke a token by its id").add_argument("token_id", metavar="ID")

    workspaces = kinds.add_parser("workspace", help="workspaces").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    p = leaf(workspaces, "create", cmd_workspace_create, "create a workspace; its owner becomes a member")
    p.add_argument("workspace", metavar="WORKSPACE")
    p.add_argument("--owner", required=True)
    leaf(workspaces, "list", cmd_workspace_list, "list workspaces and their members")

    members = kinds.add_parser("member", help="workspace membership").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    for name, handler, help_ in (
        ("add", cmd_member_add, "give a user access to a workspace"),
        ("remove", cmd_member_remove, "take a user's access to a workspace away"),
    ):
        p = leaf(members, name, handler, help_)
        p.add_argument("workspace", metavar="WORKSPACE")
        p.add_argument("user", metavar="USER")
    leaf(members, "list", cmd_member_list, "list a workspace's members").add_argument("workspace", metavar="WORKSPACE")

    help_ = "rewrite a workspace's old whole versions as sealed deltas, with its key (crash-safe, repeatable)"
    p = kinds.add_parser("compact", help=help_, description=help_)
    p.add_argument("-w", "--workspace", required=True, metavar="WORKSPACE")
    p.add_argument(
        "--db", type=_db_target, default=None, metavar="PATH|URL", help="a team's database (default: the local one)"
    )
    p.add_argument("--user", default=None, help="a member of the workspace, for --db (default: the local user)")
    p.add_argument("--key-for", default=None, metavar="URL", help="use the key imported for this server")
    p.set_defaults(handler=cmd_compact)


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
