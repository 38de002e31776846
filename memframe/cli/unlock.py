"""`memframe key unlock|lock`: a key session for a person's chat clients, for as long as they choose.

The OpenAI-compatible endpoint reads memory only through a live key session of the token's user,
since the server never keeps a key; `unlock` hands the key to the server's RAM for `--for` (held
whether used or not), and `lock` revokes it: the revocation row first, then the key is forgotten.
The session's id stays on this machine, beside the key file, so `lock` closes exactly what
`unlock` opened and leaves the frame's own sessions alone.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from pathlib import Path
from typing import TYPE_CHECKING

from memframe.cli.output import out, prompt
from memframe.core.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from memframe.backend.remote import RemoteStore


def spoken(seconds: float) -> str:
    """A duration as a person says it: `8 h`, `1 h 30 min`, `45 s`."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours} h" if hours else "", f"{minutes} min" if minutes else "", f"{secs} s" if secs else ""]
    return " ".join(p for p in parts if p) or "0 s"


def unlocked_file(workspace_id: str, remote_url: str) -> Path:
    """Where this machine keeps the ids of the sessions `unlock` opened (no secret: ids only)."""
    from memframe import paths

    return paths.key_file(workspace_id, remote_url).with_suffix(".unlocked")


def _store(args: argparse.Namespace) -> RemoteStore:
    if not args.remote:
        raise InvalidInput(
            "unlock and lock act on a memframe server's key sessions: pass --remote URL (or set MEMFRAME_URL). "
            "A local workspace has no server for chat clients to reach."
        )
    from memframe.backend.remote import RemoteStore

    return RemoteStore(args.remote, args.token, args.workspace)


def cmd_unlock(args: argparse.Namespace) -> int:
    from memframe.sealing.keyfiles import load_key

    store = _store(args)
    try:
        key = load_key(args.workspace, remote_url=args.remote, prompt=prompt)
        info = store.open_key_session(key, hold_seconds=args.hold)
    finally:
        store.close()
    path = unlocked_file(args.workspace, args.remote)
    from memframe import paths

    known = path.read_text().split() if path.exists() else []
    paths.write_private_file(path, "\n".join([*known, info.id, ""]).encode())
    held = info.idle_timeout  # a held session idles out only when its time is up: its idle timeout is its hold
    until = time.strftime("%Y-%m-%d %H:%M %Z", time.localtime(info.expires_at))
    out(f"Unlocked {args.workspace!r} for your chat clients for {spoken(held)} (until {until}).")
    if held < args.hold - 60:
        out(f"(You asked for {spoken(args.hold)}; this server holds a key at most {spoken(held)}.)")
    base = args.remote.rstrip("/")
    out(f"Point them at {base}/v1 with your memframe token as the API key and {args.workspace!r} as the model.")
    out(f"Lock it sooner with: memframe key lock --workspace {args.workspace}")
    return 0


def cmd_lock(args: argparse.Namespace) -> int:
    path = unlocked_file(args.workspace, args.remote or "")
    ids = path.read_text().split() if args.remote and path.exists() else []
    if not ids:
        _store(args)  # says why when there is no server at all
        out(f"Nothing to lock: no `memframe key unlock` of this machine is open for {args.workspace!r}.")
        return 0
    store = _store(args)
    try:
        for session_id in ids:
            with contextlib.suppress(NotFound):  # expired or revoked already: nothing of it is left to lock
                store.revoke_key_session(session_id)  # the revocation row first, then the key is forgotten
    finally:
        store.close()
    path.unlink(missing_ok=True)
    out(f"Locked {args.workspace!r}: chat clients get answers without its memory until you unlock it again.")
    return 0
