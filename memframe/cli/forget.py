"""`memframe key rotate` and `memframe forget --before N`: forgetting is key rotation.

Both make a new key on this machine, re-seal what stays under it, have the server swap it in, and
print a receipt of what was destroyed with its honest boundary, kept on this machine (metadata only).
The new key is written (pending) before the upload and made the key only once the server has
acknowledged it, so no crash loses its only copy; a rotation cut short is finished by running it again.
"""

from __future__ import annotations

import argparse
import getpass
import sys
import time
from typing import TYPE_CHECKING, Any

from memframe.cli.options import add_command, open_workspace, positive
from memframe.cli.output import out, prompt

if TYPE_CHECKING:
    from pathlib import Path

    from memframe.backend.sealed import SealedBackend
    from memframe.core.rotation import Destroyed


def cmd_rotate(args: argparse.Namespace) -> int:
    """`memframe key rotate`: a new key for a lost device or a member who left; nothing forgotten."""
    return _rotate(args, forget_before=None, conversations=False)


def cmd_forget(args: argparse.Namespace) -> int:
    return _rotate(args, forget_before=args.before, conversations=args.conversations)


def _rotate(args: argparse.Namespace, *, forget_before: int | None, conversations: bool) -> int:
    from memframe import sealing
    from memframe.sealing import keyfiles

    where = {"remote_url": args.remote}
    backend = open_workspace(args)
    try:
        if _finish_pending(backend, args):
            return 0
        _confirm(args, _what_goes(backend, forget_before, conversations))
        new_key = sealing.new_key()
        passphrase = keyfiles.passphrase_for(args.workspace, prompt=prompt, **where)
        keyfiles.write_pending_key(new_key, args.workspace, passphrase=passphrase, **where)
        try:
            destroyed = backend.rotate_key(
                new_key, who=_who(), forget_before=forget_before, conversations=conversations
            )
        except BaseException as exc:
            from memframe.core.errors import Unavailable

            if not isinstance(exc, Unavailable):  # refused: the server never took the new key
                keyfiles.discard_pending_key(args.workspace, **where)
            raise  # Unavailable: it may have landed; the next `key rotate` finds out
        keyfiles.promote_pending_key(args.workspace, **where)
    finally:
        backend.close()
    text = receipt(args.workspace, backend.location, destroyed, sealing.key_fingerprint(new_key))
    path = keep_receipt(args.workspace, args.remote, destroyed.rotated_at, text)
    sys.stdout.write(text)
    out(f"This receipt is kept at {path}.")
    return 0


def _finish_pending(backend: SealedBackend, args: argparse.Namespace) -> bool:
    """A pending key from a rotation cut short: made the key if the server took it, else dropped."""
    from memframe import sealing
    from memframe.sealing import keyfiles

    pending = keyfiles.load_pending_key(args.workspace, remote_url=args.remote, prompt=prompt)
    if pending is None:
        return False
    if backend.store.get_key_check() == sealing.key_check(pending, args.workspace):
        path = keyfiles.promote_pending_key(args.workspace, remote_url=args.remote)
        out(f"An earlier rotation had landed on the server; {path} now holds its key. Run the command again if needed.")
        return True
    keyfiles.discard_pending_key(args.workspace, remote_url=args.remote)
    return False


def _what_goes(backend: SealedBackend, forget_before: int | None, conversations: bool) -> str:
    head = backend.load().version
    lines = ["A new key will be made on this machine and everything that stays re-sealed under it."]
    if forget_before is not None:
        gone = backend.forgotten()
        first = gone.before if gone else 1
        if not first < forget_before <= head:
            from memframe.core.errors import InvalidInput

            if head <= first:
                held = "the memory has no versions yet" if head == 0 else f"it holds only version {head}"
            else:
                held = f"it holds versions {first}–{head}, so N is {first + 1} to {head}"
            raise InvalidInput(f"Versions before {forget_before} cannot be forgotten: {held}; nothing was changed.")
        lines.append(
            f"Versions {first}–{forget_before - 1} of the memory will be destroyed; {forget_before}–{head} stay."
        )
    if conversations:
        lines.append("Every stored conversation message and proposal will be destroyed.")
    lines.append("Every key session of the workspace is revoked; members need the new key (memframe key export).")
    return "\n".join(lines)


def _confirm(args: argparse.Namespace, what: str) -> None:
    from memframe.core.errors import InvalidInput

    out(what)
    if args.yes:
        return
    if not sys.stdin.isatty():
        raise InvalidInput("No terminal to confirm at: pass --yes to go ahead; nothing was changed.")
    if input("Type 'yes' to go ahead: ").strip().lower() != "yes":
        raise InvalidInput("Not confirmed; nothing was changed.")


def _who() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "this machine's user"


def receipt(workspace: str, location: str, done: Destroyed, fingerprint: str) -> str:
    """The receipt a person reads and keeps: what was destroyed, when, by whom, and what was not."""
    day = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(done.rotated_at))
    lines = [
        f"memframe forgetting receipt — workspace {workspace} at {location}",
        f"when:      {day}",
        f"by:        {done.rotated_by} (on the server), {_who()} (on this machine)",
        f"new key:   fingerprint {fingerprint}; this machine's key file holds only the new key",
        "destroyed:",
    ]
    for path, (first, last, count) in sorted(done.versions.items()):
        lines.append(f"  versions {first}–{last} of {path} ({count})")
    if done.messages or done.proposals:
        lines.append(f"  {done.messages} transcript message(s) and {done.proposals} proposal(s)")
    if not done.versions and not done.messages and not done.proposals:
        lines.append("  nothing but the old key: every text was re-sealed under the new one")
    lines += [
        f"re-sealed: {done.resealed_versions} version(s), {done.resealed_messages} message(s),"
        f" {done.resealed_proposals} proposal(s) under the new key",
        f"revoked:   {done.key_sessions_revoked} key session(s)",
        f"disk:      {done.disk}",
        "what remains outside memframe's reach:",
        "  - copies of the old key (exports, other machines) still open backups and copies of the database",
        "    made before now;",
        "  - what a model provider logged of your conversations is outside memframe;",
        "  - the other members keep working only once they import the new key (memframe key export).",
    ]
    return "\n".join(lines) + "\n"


def keep_receipt(workspace: str, remote_url: str | None, at: float, text: str) -> Path:
    """Kept on this machine beside the keys (metadata only): receipts/<scope>/<workspace>-<time>.txt."""
    from memframe import paths

    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(at))
    target = paths.home() / "receipts" / paths.key_scope(remote_url) / f"{workspace}-{stamp}.txt"
    paths.write_private_file(target, text.encode("utf-8"))
    return target


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add `forget` to the memframe command (`key rotate` is registered by `memframe.cli.keys`)."""
    p = add_command(sub, common, "forget", cmd_forget, "destroy memory versions before N by rotating the key")
    p.add_argument("--before", type=positive, required=True, metavar="N", help="keep versions N to current")
    p.add_argument("--conversations", action="store_true", help="also destroy the stored transcripts and proposals")
    p.add_argument("--yes", action="store_true", help="go ahead without asking (for scripts)")
