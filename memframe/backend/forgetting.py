"""Forgetting as a person runs it, from `memframe forget` / `memframe key rotate` or from Changes in the frame.

Both run this one path, so what a crash leaves behind is the same whichever started it: the new key
is written (pending) beside the key file before anything is uploaded and made the key only once the
server has acknowledged the swap, and a pending key left by a crash is made the key (the server took
it) or dropped (it never did) before another rotation begins. What was destroyed comes back as one
receipt text, printed by the CLI, shown by the frame and kept beside the keys (metadata only).
"""

from __future__ import annotations

import getpass
import textwrap
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memframe import paths, sealing
from memframe.core.errors import InvalidInput, KeyFileError, Unavailable
from memframe.core.wording import many, versions
from memframe.sealing import keyfiles

if TYPE_CHECKING:
    from pathlib import Path

    from memframe.backend.sealed import SealedBackend
    from memframe.core.rotation import Destroyed
    from memframe.sealing.keyfiles import PassphrasePrompt

#: What stays out of memframe's reach after a forgetting, in a person's words (the receipt and the frame's dialog).
BOUNDARY = (
    "copies of the old key (exports, other machines) still open backups and copies of the database made before now",
    "what a model provider logged of your conversations is outside memframe",
    "the other members keep working only once they import the new key (memframe key export)",
)


def who() -> str:
    """This machine's user, as a receipt and the forgetting record name them."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "this machine's user"


def key_url(backend: SealedBackend) -> str | None:
    """The server URL the workspace's key file is filed under (None: a local workspace)."""
    from memframe.backend.local import LocalStore

    return None if isinstance(backend.store, LocalStore) else backend.store.location


@dataclass(frozen=True)
class WhatGoes:
    """What a rotation will destroy, named before it runs (counts and ranges; never text)."""

    head: int
    #: The memory's first version still held (after an earlier forgetting, that forgetting's N).
    first: int
    forget_before: int | None
    conversations: bool
    #: Stored transcript messages and proposals (None: not counted).
    messages: int | None = None
    proposals: int | None = None

    @property
    def versions(self) -> int:
        """How many versions of the memory go."""
        return 0 if self.forget_before is None else self.forget_before - self.first

    def lines(self) -> list[str]:
        """What the CLI prints before asking, one sentence a line (the frame shows them too)."""
        lines = ["A new key will be made on this machine and everything that stays re-sealed under it."]
        if self.forget_before is not None:
            lines.append(
                f"{versions(self.first, self.forget_before - 1).capitalize()} of the memory will be destroyed;"
                f" {versions(self.forget_before, self.head)} will stay."
            )
        if self.conversations:
            counted = ""
            if self.messages is not None:
                counted = f" ({many(self.messages, 'message')}, {many(self.proposals or 0, 'proposal')})"
            lines.append(f"Every stored conversation message and proposal will be destroyed{counted}.")
        lines.append("Every key session of the workspace is revoked; members need the new key (memframe key export).")
        return lines


def what_goes(
    backend: SealedBackend, forget_before: int | None, conversations: bool, *, count: bool = False
) -> WhatGoes:
    """What rotating now would destroy; InvalidInput (nothing changed) for an N that forgets nothing.
    `count`: also count the stored transcript messages and proposals."""
    head = backend.load().version
    gone = backend.forgotten() if forget_before is not None else None
    first = gone.before if gone else 1
    if forget_before is not None and not first < forget_before <= head:
        if head <= first:
            held = "the memory has no versions yet" if head == 0 else f"it holds only version {head}"
        else:
            held = f"it holds versions {first}–{head}, so N is {first + 1} to {head}"
        raise InvalidInput(f"Versions before {forget_before} cannot be forgotten: {held}; nothing was changed.")
    if not count:
        return WhatGoes(head, first, forget_before, conversations)
    records = backend.store.sealed_records()
    return WhatGoes(head, first, forget_before, conversations, len(records.messages), len(records.proposals))


def needs_passphrase(workspace_id: str, remote_url: str | None) -> bool:
    """Whether a rotation must ask for the key file's passphrase (it is wrapped and none is set)."""
    wrapped = keyfiles.key_is_wrapped(workspace_id, remote_url)
    return wrapped and keyfiles.passphrase_for(workspace_id, remote_url=remote_url) is None


def finish_pending(backend: SealedBackend, remote_url: str | None, *, prompt: PassphrasePrompt | None) -> Path | None:
    """A pending key from a rotation cut short: made the key if the server took it (its key file's
    path is returned; the backend's key is then the old one), else dropped (None)."""
    workspace = backend.workspace_id
    pending = keyfiles.load_pending_key(workspace, remote_url=remote_url, prompt=prompt)
    if pending is None:
        return None
    if backend.store.get_key_check() == sealing.key_check(pending, workspace):
        return keyfiles.promote_pending_key(workspace, remote_url=remote_url)
    keyfiles.discard_pending_key(workspace, remote_url=remote_url)
    return None


@dataclass(frozen=True)
class Forgetting:
    """A rotation done: what it destroyed, the receipt a person reads, and where it is kept."""

    destroyed: Destroyed
    receipt: str
    kept_at: Path


def rotate(
    backend: SealedBackend,
    remote_url: str | None,
    *,
    forget_before: int | None,
    conversations: bool,
    prompt: PassphrasePrompt | None,
    now: float | None = None,
) -> Forgetting:
    """Make a new key, keep it pending, have the server swap everything that stays under it, then
    make it the key and keep the receipt. A refusal drops the pending key (nothing changed); an
    unreachable server keeps it, since the swap may have landed (`finish_pending` finds out).

    `prompt` asks for the key file's passphrase (the new key is wrapped with it, and it is checked
    against the key file first, so a mistyped one cannot lock the person out); `now` is when the
    forgetting is recorded (the frame's clock; default the time)."""
    workspace = backend.workspace_id
    where = {"remote_url": remote_url}
    passphrase = keyfiles.passphrase_for(workspace, prompt=prompt, **where)
    if keyfiles.key_is_wrapped(workspace, remote_url):
        if not passphrase:
            raise KeyFileError("The key file is protected by a passphrase; none was given. Nothing was changed.")
        keyfiles.load_key(workspace, prompt=lambda _question: passphrase, **where)  # a wrong one: KeyFileError
    new_key = sealing.new_key()
    keyfiles.write_pending_key(new_key, workspace, passphrase=passphrase, **where)
    person = who()
    try:
        destroyed = backend.rotate_key(
            new_key, who=person, forget_before=forget_before, conversations=conversations, now=now
        )
    except BaseException as exc:
        if not isinstance(exc, Unavailable):  # refused: the server never took the new key
            keyfiles.discard_pending_key(workspace, **where)
        raise  # Unavailable: it may have landed; the next rotation finds out
    keyfiles.promote_pending_key(workspace, **where)
    text = receipt(workspace, backend.location, destroyed, sealing.key_fingerprint(new_key), person)
    return Forgetting(destroyed, text, keep_receipt(workspace, remote_url, destroyed.rotated_at, text))


def receipt(workspace: str, location: str, done: Destroyed, fingerprint: str, here: str | None = None) -> str:
    """The receipt a person reads and keeps: what was destroyed, when, by whom, and what was not."""
    day = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(done.rotated_at))
    lines = [
        f"memframe forgetting receipt — workspace {workspace} at {location}",
        f"when:      {day}",
        f"by:        {done.rotated_by} (on the server), {here or who()} (on this machine)",
        f"new key:   fingerprint {fingerprint}; this machine's key file holds only the new key",
        "destroyed:",
    ]
    for path, (first, last, count) in sorted(done.versions.items()):
        lines.append(f"  {versions(first, last)} of {path} ({count})")
    if done.messages or done.proposals:
        lines.append(f"  {many(done.messages, 'transcript message')} and {many(done.proposals, 'proposal')}")
    if not done.versions and not done.messages and not done.proposals:
        lines.append("  nothing but the old key: every text was re-sealed under the new one")
    lines += [
        f"re-sealed: {many(done.resealed_versions, 'version')}, {many(done.resealed_messages, 'message')},"
        f" {many(done.resealed_proposals, 'proposal')} under the new key",
        f"revoked:   {many(done.key_sessions_revoked, 'key session')}",
        f"disk:      {done.disk}",
        "what remains outside memframe's reach:",
        *(
            textwrap.fill(f"{line}{end}", 99, initial_indent="  - ", subsequent_indent="    ")
            for line, end in zip(BOUNDARY, (";", ";", "."), strict=True)
        ),
    ]
    return "\n".join(lines) + "\n"


def keep_receipt(workspace: str, remote_url: str | None, at: float, text: str) -> Path:
    """Kept on this machine beside the keys (metadata only): receipts/<scope>/<workspace>-<time>.txt."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(at))
    target = paths.home() / "receipts" / paths.key_scope(remote_url) / f"{workspace}-{stamp}.txt"
    paths.write_private_file(target, text.encode("utf-8"))
    return target
