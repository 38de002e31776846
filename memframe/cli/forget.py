"""`memframe key rotate` and `memframe forget --before N`: forgetting is key rotation.

Both ask first (at a terminal, or `--yes`), then run `memframe.backend.forgetting`, the path the
frame's Changes runs too, and print its receipt; a rotation cut short is finished by running it again.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from memframe.cli.options import add_command, open_workspace, positive
from memframe.cli.output import out, prompt


def cmd_rotate(args: argparse.Namespace) -> int:
    """`memframe key rotate`: a new key for a lost device or a member who left; nothing forgotten."""
    return _rotate(args, forget_before=None, conversations=False)


def cmd_forget(args: argparse.Namespace) -> int:
    return _rotate(args, forget_before=args.before, conversations=args.conversations)


def _rotate(args: argparse.Namespace, *, forget_before: int | None, conversations: bool) -> int:
    from memframe.backend import forgetting

    backend = open_workspace(args)
    try:
        landed = forgetting.finish_pending(backend, args.remote, prompt=prompt)
        if landed is not None:
            out(f"An earlier rotation had landed on the server; {landed} now holds its key.")
            out("Run the command again if needed.")
            return 0
        _confirm(
            args, "\n".join(forgetting.what_goes(backend, forget_before, conversations, count=conversations).lines())
        )
        done = forgetting.rotate(
            backend, args.remote, forget_before=forget_before, conversations=conversations, prompt=prompt
        )
    finally:
        backend.close()
    sys.stdout.write(done.receipt)
    out(f"This receipt is kept at {done.kept_at}.")
    return 0


def _confirm(args: argparse.Namespace, what: str) -> None:
    from memframe.core.errors import InvalidInput

    out(what)
    if args.yes:
        return
    if not sys.stdin.isatty():
        raise InvalidInput("No terminal to confirm at: pass --yes to go ahead; nothing was changed.")
    if input("Type 'yes' to go ahead: ").strip().lower() != "yes":
        raise InvalidInput("Not confirmed; nothing was changed.")


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add `forget` to the memframe command (`key rotate` is registered by `memframe.cli.keys`)."""
    p = add_command(sub, common, "forget", cmd_forget, "destroy memory versions before N by rotating the key")
    p.add_argument("--before", type=positive, required=True, metavar="N", help="keep versions N to current")
    p.add_argument("--conversations", action="store_true", help="also destroy the stored transcripts and proposals")
    p.add_argument("--yes", action="store_true", help="go ahead without asking (for scripts)")
