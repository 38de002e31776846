"""`memframe keysessions`: the one key-session service that several servers share.

    memframe keysessions --listen HOST:PORT [--credential-file FILE]
                         [--key-session-idle 1800] [--key-session-lifetime 43200]

Workspace keys live in this process's RAM only: nothing is written anywhere, no request is
logged, and stopping or restarting it forgets every key (clients then open new sessions).
Servers reach it with `memframe serve --key-sessions http://HOST:PORT` and the same
credential, from `--credential-file` or `$MEMFRAME_KEYSESSIONS_CREDENTIAL`; beyond loopback it
refuses to start without one. `memframe serve --workers N` runs one of these itself, on a
private unix socket (`run_private`), for its own workers.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from memframe.settings import Settings

#: How long `memframe serve` waits for its own key-session service to answer.
START_SECONDS = 30.0


def read_credential(path: Path | None, settings: Settings) -> str | None:
    """The shared secret: the file's first line, else `$MEMFRAME_KEYSESSIONS_CREDENTIAL`, else None."""
    from memframe.core.errors import InvalidInput

    if path is None:
        return settings.keysessions_credential
    try:
        text = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            f"Cannot read the credential file {path}: {getattr(exc, 'strerror', None) or exc}."
        ) from None
    if len(text) < 16 or any(ch.isspace() for ch in text):
        raise InvalidInput(f"The credential in {path} must be one line of at least 16 characters, with no spaces.")
    return text


def _listen_address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not HOST:PORT (e.g. 127.0.0.1:8790)")
    return host.strip("[]"), int(port)


def _serve_app(app: Any, sock: socket.socket, log_level: str = "warning") -> int | None:
    """Run `app` under uvicorn on a bound socket until SIGINT/SIGTERM; the signal that stopped it.

    uvicorn's access log is off: this service's requests carry keys in their bodies and session
    ids, and none of that may reach a line."""
    import uvicorn

    config = uvicorn.Config(app, lifespan="off", log_level=log_level, access_log=False, server_header=False)
    server = uvicorn.Server(config)
    stopped: list[int] = []

    def stop(signum: int, frame: Any) -> None:
        stopped.append(signum)
        server.should_exit = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return stopped[0] if stopped else None


def cmd_keysessions(args: argparse.Namespace) -> int:
    from memframe.api.keysessions_app import create_keysessions_app
    from memframe.cli.listening import is_loopback, listen
    from memframe.core.errors import InvalidInput
    from memframe.service.keysessions import DEFAULT_IDLE_SECONDS, DEFAULT_LIFETIME_SECONDS, KeySessions
    from memframe.settings import current

    host, port = args.listen
    credential = read_credential(args.credential_file, current())
    if credential is None and not is_loopback(host):
        raise InvalidInput(
            f"Listening on {host} needs a credential: --credential-file FILE or $MEMFRAME_KEYSESSIONS_CREDENTIAL "
            "(the same one every server passes)."
        )
    sessions = KeySessions(
        time.time,
        idle_seconds=args.key_session_idle or DEFAULT_IDLE_SECONDS,
        lifetime_seconds=args.key_session_lifetime or DEFAULT_LIFETIME_SECONDS,
    )
    app = create_keysessions_app(sessions, credential)
    sock = listen(host, port)
    try:
        bound_host, bound_port = sock.getsockname()[:2]
        shown = bound_host if ":" not in bound_host else f"[{bound_host}]"
        guard = "a credential" if credential else "no credential (loopback only)"
        print(
            f"memframe key-session service at http://{shown}:{bound_port}, with {guard}; keys in RAM only "
            "(Ctrl+C or SIGTERM stops it and forgets every key)",
            flush=True,
        )
        if not is_loopback(str(bound_host)):
            print(
                "memframe: warning: keys cross the network in these requests over plain HTTP; "
                "keep this port on a private network, or put TLS in front (servers take an https:// URL).",
                file=sys.stderr,
                flush=True,
            )
        stopped = _serve_app(app, sock, args.log_level)
    finally:
        sock.close()
    how = f" on {signal.Signals(stopped).name}" if stopped else ""
    print(f"memframe key-session service stopped{how}; every key is forgotten.", flush=True)
    return 0


# --- the private service `memframe serve --workers N` starts -----------------------------


def run_private(uds: str, credential: str, idle: float, lifetime: float) -> None:
    """The key-session service on a unix socket (a child process of `memframe serve`).

    Its directory is private to serve's user (0700) and the credential came through the spawn
    pipe, never a file, an argument list or the environment."""
    from memframe.service.keysessions import KeySessions

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # serve stops it, after its workers, with SIGTERM
    stop_with_parent()
    sessions = KeySessions(time.time, idle_seconds=idle, lifetime_seconds=lifetime)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(uds)
    sock.bind(uds)
    os.chmod(uds, 0o600)
    sock.listen(2048)
    try:
        _serve_lines(sessions, credential, sock)
    finally:
        sock.close()
        with contextlib.suppress(OSError):  # serve removes the directory too; this covers serve being killed
            os.unlink(uds)
            os.rmdir(os.path.dirname(uds))


def _serve_lines(sessions: Any, credential: str, sock: socket.socket) -> None:
    """serve's private service: one JSON line per call (`keysessions_app.LineProtocol`), until SIGTERM.

    On uvloop where it is installed, as the workers' uvicorn runs (`api.server.uvicorn_config`): a
    round trip here precedes every recall, and uvloop's loop and transports cost less per wake-up."""
    import asyncio

    from memframe.api.keysessions_app import serve_lines

    async def main() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await serve_lines(sessions, credential, sock, stop)

    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(main())


def _loop_factory() -> Any:
    """uvloop's event loop maker, or None (asyncio's own) where uvloop is not installed."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def stop_with_parent() -> None:
    """SIGTERM ourselves (a graceful stop) if serve goes away without stopping us (killed by SIGKILL),
    so no worker or key-session service is left serving on its own."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="memframe-parent-watch", daemon=True).start()


def wait_until_answering(store: Any, process: Any, seconds: float = START_SECONDS) -> None:
    """Until the key-session service answers `store`'s calls; Unavailable if it died or never did."""
    from memframe.core.errors import KeySessionServiceDown, Unavailable

    deadline = time.monotonic() + seconds
    while True:
        try:
            len(store)
            return
        except KeySessionServiceDown:
            if not process.is_alive() or time.monotonic() > deadline:
                raise Unavailable("The key-session service for the workers did not start.") from None
            time.sleep(0.05)


# --- the parser --------------------------------------------------------------------------


def register(subparsers: Any, settings: Settings) -> None:
    """Add `keysessions` to the memframe command."""
    from memframe.cli.listening import seconds as _seconds

    p = subparsers.add_parser(
        "keysessions",
        help="run the key-session service that several servers share",
        description="Hold workspace keys in RAM for several memframe servers (never on disk, never logged).",
    )
    p.add_argument(
        "--listen",
        type=_listen_address,
        required=True,
        metavar="HOST:PORT",
        help="where servers reach it, e.g. 10.0.0.5:8790 (beyond loopback a credential is required)",
    )
    p.add_argument(
        "--credential-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="the secret every server presents (default: $MEMFRAME_KEYSESSIONS_CREDENTIAL)",
    )
    p.add_argument("--key-session-idle", type=_seconds, default=None, metavar="SECONDS",
                   help="forget a key after this long unused (default: 1800)")  # fmt: skip
    p.add_argument("--key-session-lifetime", type=_seconds, default=None, metavar="SECONDS",
                   help="forget it this long after it opened (default: 43200)")  # fmt: skip
    p.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(handler=cmd_keysessions)
