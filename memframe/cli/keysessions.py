"""`memframe keysessions`: the one key-session service that several servers share.

    memframe keysessions --listen HOST:PORT [--credential-file FILE] [--allow-host NAME …]
                         [--key-session-idle 1800] [--key-session-lifetime 43200] [--read-timeout 30]

Workspace keys live in this process's RAM only: nothing is written anywhere, no request is
logged, and stopping or restarting it forgets every key (clients then open new sessions).
Servers reach it with `memframe serve --key-sessions http://HOST:PORT` and the same credential,
from `--credential-file` or `$MEMFRAME_KEYSESSIONS_CREDENTIAL`: it refuses to start without one,
loopback included, since any local process may reach a loopback port.
"""

from __future__ import annotations

import argparse
import ipaddress
import signal
import sys
import time
from pathlib import Path
from typing import Any

from memframe.settings import Settings


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


def required_credential(path: Path | None, settings: Settings, who: str) -> str:
    """`read_credential`, or InvalidInput naming `who` needs it: every key-session service has one."""
    from memframe.core.errors import InvalidInput

    credential = read_credential(path, settings)
    if credential is None:
        option = "--credential-file" if who == "memframe keysessions" else "--key-sessions-credential-file"
        raise InvalidInput(
            f"{who} needs the key-session service's credential, loopback included: {option} FILE or "
            "$MEMFRAME_KEYSESSIONS_CREDENTIAL (the same one the service and every server use)."
        )
    return credential


def _listen_address(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not HOST:PORT (e.g. 127.0.0.1:8790)")
    return host.strip("[]"), int(port)


def _unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def allowed_hosts(host: str, bound: str, named: list[str]) -> list[str]:
    """The Host names the service answers: where it listens (as given and as bound), the names given
    with --allow-host, and on loopback the loopback names; an IPv6 address as a Host header spells it."""
    from memframe.cli.listening import is_loopback

    names = {host, bound, *named}
    if is_loopback(host):
        names |= {"localhost", "127.0.0.1", "::1"}
    return sorted(f"[{n}]" if ":" in n else n.lower() for n in names if n and not _unspecified(n))


def cmd_keysessions(args: argparse.Namespace) -> int:
    from memframe.cli.listening import is_loopback, listen
    from memframe.core.errors import InvalidInput
    from memframe.keysessions.app import create_app, serve_on
    from memframe.keysessions.store import DEFAULT_IDLE_SECONDS, DEFAULT_LIFETIME_SECONDS, KeySessions
    from memframe.settings import current

    host, port = args.listen
    credential = required_credential(args.credential_file, current(), "memframe keysessions")
    if _unspecified(host) and not args.allow_host:
        raise InvalidInput(
            f"Listening on {host} needs --allow-host NAME: the host name or address servers put in their "
            "--key-sessions URL (any other Host is refused)."
        )
    sessions = KeySessions(
        time.time,
        idle_seconds=args.key_session_idle or DEFAULT_IDLE_SECONDS,
        lifetime_seconds=args.key_session_lifetime or DEFAULT_LIFETIME_SECONDS,
    )
    sock = listen(host, port)
    try:
        bound_host, bound_port = sock.getsockname()[:2]
        app = create_app(sessions, credential, allowed_hosts(host, str(bound_host), args.allow_host))
        shown = bound_host if ":" not in bound_host else f"[{bound_host}]"
        print(
            f"memframe key-session service at http://{shown}:{bound_port}, with a credential; keys in RAM only "
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
        stopped = serve_on(app, sock, read_timeout=args.read_timeout, log_level=args.log_level)
    finally:
        sock.close()
    how = f" on {signal.Signals(stopped).name}" if stopped else ""
    print(f"memframe key-session service stopped{how}; every key is forgotten.", flush=True)
    return 0


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
        help="where servers reach it, e.g. 10.0.0.5:8790",
    )
    p.add_argument(
        "--credential-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="the secret every server presents (required; default: $MEMFRAME_KEYSESSIONS_CREDENTIAL)",
    )
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="a host name servers use in their --key-sessions URL (repeatable; "
                        "the listening address is always allowed)")  # fmt: skip
    p.add_argument("--key-session-idle", type=_seconds, default=None, metavar="SECONDS",
                   help="forget a key after this long unused (default: 1800)")  # fmt: skip
    p.add_argument("--key-session-lifetime", type=_seconds, default=None, metavar="SECONDS",
                   help="forget it this long after it opened (default: 43200)")  # fmt: skip
    p.add_argument("--read-timeout", type=_seconds, default=None, metavar="SECONDS",
                   help="drop a request not arrived whole within this (default: 30, as serve)")  # fmt: skip
    p.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(handler=cmd_keysessions)
