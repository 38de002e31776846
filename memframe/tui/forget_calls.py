"""Forgetting and key rotation as the frame's worker threads run them: never raising, always an outcome.

The work itself is `memframe.backend.forgetting`, the path `memframe forget` and `memframe key rotate`
run, so the frame's receipt is the CLI's, kept in the same place, and a rotation cut short in either
is finished by either. This module only turns its failures into data a dialog shows, as
`memframe.tui.calls` does for the other backend calls (no Textual here).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memframe.core.wording import many, versions
from memframe.tui.calls import as_error

if TYPE_CHECKING:
    from pathlib import Path

    from memframe.backend.base import Backend
    from memframe.backend.forgetting import Forgetting, WhatGoes
    from memframe.core.errors import MemframeError


@dataclass(frozen=True)
class Preview:
    """What a rotation would destroy now, and whether the key file's passphrase must be asked for."""

    goes: WhatGoes | None
    needs_passphrase: bool = False
    error: MemframeError | None = None
    #: A rotation a crash cut short had landed: this key file now holds its key (the frame's is old).
    landed: Path | None = None


@dataclass(frozen=True)
class Outcome:
    """A rotation's receipt; or that an earlier rotation cut short had landed (its key file); or why not."""

    done: Forgetting | None = None
    landed: Path | None = None
    error: MemframeError | None = None


def _sealed(backend: Backend) -> Any:
    """The backend as `memframe.backend.forgetting` takes it: one that seals on this machine."""
    if not callable(getattr(backend, "rotate_key", None)):
        from memframe.core.errors import InvalidInput

        raise InvalidInput("This workspace's backend cannot rotate its key; nothing was changed.")
    return backend


def preview(backend: Backend, forget_before: int | None) -> Preview:
    """What forgetting before `forget_before` (None: a rotation only) would destroy, counted."""
    from memframe.backend import forgetting

    try:
        sealed = _sealed(backend)
        url = forgetting.key_url(sealed)
        ask = forgetting.needs_passphrase(backend.workspace_id, url)
        # A rotation cut short is finished first, as the CLI does (a wrapped one once the passphrase is typed).
        if not ask and (landed := forgetting.finish_pending(sealed, url, prompt=None)) is not None:
            return Preview(None, landed=landed)
        goes = forgetting.what_goes(sealed, forget_before, conversations=False, count=True)
        return Preview(goes, ask)
    except Exception as exc:
        return Preview(None, error=as_error(exc))


def rotate(backend: Backend, forget_before: int | None, *, conversations: bool, passphrase: str, now: float) -> Outcome:
    """Finish a rotation a crash cut short, else rotate now; the passphrase is the key file's (or "")."""
    from memframe.backend import forgetting

    def given(_question: str) -> str:
        return passphrase

    try:
        sealed = _sealed(backend)
        url = forgetting.key_url(sealed)
        landed = forgetting.finish_pending(sealed, url, prompt=given)
        if landed is not None:
            return Outcome(landed=landed)
        done = forgetting.rotate(
            sealed, url, forget_before=forget_before, conversations=conversations, prompt=given, now=now
        )
        return Outcome(done)
    except Exception as exc:
        return Outcome(error=as_error(exc))


def described(goes: WhatGoes, *, conversations: bool) -> str:
    """What goes and what stays of the memory and the conversations, named before anything is done."""
    stored = f"{many(goes.messages or 0, 'transcript message')} and {many(goes.proposals or 0, 'proposal')}"
    if goes.forget_before is None:
        return (f"• Nothing is destroyed but the old key: {versions(goes.first, goes.head)} of the memory and "
                f"{stored} are re-sealed under the new key; the current text does not change.")  # fmt: skip
    last = goes.forget_before - 1
    fate = "are destroyed too" if conversations else "stay, re-sealed (the switch destroys them)"
    return (
        f"• {versions(goes.first, last).capitalize()} of the memory {'is' if goes.first == last else 'are'} destroyed"
        f" ({many(goes.versions, 'version')}); {versions(goes.forget_before, goes.head)}"
        f" {'stays' if goes.forget_before == goes.head else 'stay'}, and the current text does not change.\n"
        f"• The stored conversations ({stored}) {fate}."
    )


def boundary() -> str:
    """What a rotation does to the key, and the honest boundary: what stays out of memframe's reach."""
    from memframe.backend.forgetting import BOUNDARY

    return "\n".join(
        [
            "• A new key is made on this machine and everything that stays is re-sealed under it; this "
            "machine's key file then holds only the new key, and every key session is revoked.",
            "What remains outside memframe's reach:",
            *(f"  – {line}." for line in BOUNDARY),
        ]
    )
