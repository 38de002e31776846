"""Forgetting is key rotation: everything that stays re-sealed under a new key on this machine.

The server never sees a key or a text, so a rotation is made here: every kept version (with its
source note), transcript message and proposal is opened with the old key and sealed under the new
one, with a record (also sealed under the new key) of which heads were re-sealed and which versions
were forgotten, when and by whom; the server swaps them in one transaction
(`memframe.service.rotation`). The record is what lets a history that starts at version N be told
from one a server cut short.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memframe import sealing
from memframe.backend.base import MemoryStore
from memframe.backend.heads import SeenHeads
from memframe.core.errors import DecryptionFailed, InvalidInput, KeyRotated, MemframeError, RolledBack, WrongKey
from memframe.core.paths import proposal_path
from memframe.core.types import MEMORY_PATH, StoredVersion

if TYPE_CHECKING:  # the rotation records load with the first rotation: the frame's first paint makes none
    from memframe.core.rotation import Destroyed, Rotation

_FORMAT = "memframe-rotation/1"
#: Versions read in one request while re-sealing.
_READ_AT_ONCE = 200


@dataclass(frozen=True)
class Forgotten:
    """Versions before `before` of a document were forgotten at `at` (seconds) by `by`."""

    before: int
    at: float
    by: str

    def line(self) -> str:
        """What Changes and `memframe history` show where the history starts."""
        day = time.strftime("%Y-%m-%d", time.gmtime(self.at))
        span = "version 1 was" if self.before == 2 else f"versions 1–{self.before - 1} were"
        return f"{span} forgotten on {day} by {self.by}"


@dataclass(frozen=True)
class RotationRecord:
    """A rotation's record, opened: the heads it re-sealed and every forgetting so far."""

    heads: dict[str, tuple[int, str]]
    forgotten: dict[str, Forgotten]


def rotated(rotation: Rotation | None) -> Exception:
    """What a machine whose key no longer matches the workspace's key check is told."""
    if rotation is None:
        return WrongKey("This key is not the workspace's key; nothing was changed.")
    return KeyRotated.since(rotation.rotated_at, rotation.rotated_by)


def read_record(key: bytes, workspace_id: str, rotation: Rotation | None) -> RotationRecord | None:
    """The newest rotation's record, opened under `key` (DecryptionFailed if it does not open)."""
    if rotation is None or rotation.sealed_record is None:
        return None
    raw = json.loads(
        sealing.open_rotation(key, rotation.sealed_record, workspace_id=workspace_id, number=rotation.number)
    )
    return RotationRecord(
        {p: (int(v), str(h)) for p, (v, h) in raw["heads"].items()},
        {p: Forgotten(int(f["before"]), float(f["at"]), str(f["by"])) for p, f in raw["forgotten"].items()},
    )


class Rotating:
    """What `SealedBackend` knows of key rotations: a rotated-away key named as such, a re-sealed
    head accepted on the sealed record's word, the record read, and a rotation made."""

    store: MemoryStore
    seen: SeenHeads
    _key: bytes
    _heads: dict[str, tuple[int, bytes | None, str]]
    _openers: dict[str, sealing.Opener]

    def close_key_session(self) -> None:
        raise NotImplementedError  # SealedBackend's

    def _observe_head(self, path: str, head: StoredVersion | None) -> str:
        raise NotImplementedError  # SealedBackend's

    def _set_key_check(self, mine: str) -> None:
        raise NotImplementedError  # SealedBackend's: only the workspace's owner writes it

    def _observe(self, path: str, head: StoredVersion | None) -> str:
        """`_observe_head`, where a head that fails because the key was rotated says so."""
        try:
            return self._observe_head(path, head)
        except (DecryptionFailed, RolledBack) as exc:
            blob = None if head is None else head.ciphertext
            digest = "" if blob is None else sealing.content_hash(blob)
            self._after_rotation(path, 0 if head is None else head.info.version, digest, exc)
        return self._observe_head(path, head)

    def _check_seen(self, path: str, version: int, digest: str) -> None:
        """`SeenHeads.check`, where a head re-sealed by a rotation is accepted on its record's word."""
        try:
            self.seen.check(path, version, digest)
        except RolledBack as exc:
            self._after_rotation(path, version, digest, exc)

    def verify(self) -> list[tuple[str, int]]:
        """Walk every document's whole chain (`memframe.backend.verify`); (path, head version) of each.
        A document whose older versions were forgotten is walked from its first kept version, as the
        rotation record sealed under this key says; any other gap is a break."""
        from memframe.backend.verify import verify_chains

        return verify_chains(self.store, self._key, self.seen, self.chain_starts())

    def chain_starts(self) -> dict[str, int]:
        """path -> its first kept version, for each document whose older versions were forgotten."""
        record = self.rotation_record()
        return {} if record is None else {p: f.before for p, f in record.forgotten.items()}

    def _after_rotation(self, path: str, version: int, digest: str, exc: MemframeError) -> None:
        """Explain `exc` by a key rotation where one explains it, else raise it unchanged.

        A key that no longer matches the key check was rotated away: KeyRotated, and nothing is
        written with it. With the current key, a head re-sealed by a rotation (the same version,
        another ciphertext than this machine saw) is accepted, and noted, when the rotation's
        record, sealed under this key, names exactly that ciphertext as the head it made."""
        stored = self.store.get_key_check()
        if stored is not None and stored != sealing.key_check(self._key, self.store.workspace_id):
            raise rotated(self.store.rotation()) from None
        if not digest or not isinstance(exc, RolledBack):
            raise exc
        record = read_record(self._key, self.store.workspace_id, self.store.rotation())
        if record is None or record.heads.get(path) != (version, digest):
            raise exc
        self.seen.note(path, version, digest, None)

    def rotation_record(self) -> RotationRecord | None:
        """The newest key rotation's record, opened under this key (KeyRotated if this key is old)."""
        rotation = self.store.rotation()
        try:
            return read_record(self._key, self.store.workspace_id, rotation)
        except DecryptionFailed:
            raise rotated(rotation) from None

    def forgotten(self, path: str = MEMORY_PATH) -> Forgotten | None:
        """Whether (and when, by whom) the versions before some N of `path` were forgotten."""
        record = self.rotation_record()
        return None if record is None else record.forgotten.get(path)

    def prove_key(self) -> None:
        """Check this key against the workspace's key check; only the owner writes a missing one
        (`_set_key_check`). A key rotated away is told who rotated it."""
        mine = sealing.key_check(self._key, self.store.workspace_id)
        stored = self.store.get_key_check()
        if stored is None:
            self._set_key_check(mine)
        elif stored != mine:
            rotation = self.store.rotation()
            if rotation is not None:
                raise rotated(rotation)
            raise WrongKey(f"This key is not the key of workspace {self.store.workspace_id!r}; nothing was changed.")

    def forgotten_line(self) -> str | None:
        gone = self.forgotten()
        return None if gone is None else gone.line()

    def rotate_key(
        self,
        new_key: bytes,
        *,
        who: str,
        forget_before: int | None = None,
        conversations: bool = False,
        after_each: Callable[[str, int], None] | None = None,
        now: float | None = None,
    ) -> Destroyed:
        """Rotate the workspace key (`memframe.backend.rotation`), then use the new one: the key
        session under the old key is gone (the server revoked it) and what was seen is re-noted."""
        with contextlib.suppress(MemframeError):
            self.close_key_session()
        destroyed, record = rotate(
            self.store,
            self._key,
            new_key,
            who=who,
            forget_before=forget_before,
            conversations=conversations,
            after_each=after_each,
            now=now,
        )
        self._key = new_key
        self._heads.clear()
        self._openers.clear()
        for path, (version, digest) in record.heads.items():
            start = record.forgotten[path].before if path in record.forgotten else 1
            self.seen.note(path, version, digest, start)
        return destroyed


def rotate(
    store: MemoryStore,
    old_key: bytes,
    new_key: bytes,
    *,
    who: str,
    forget_before: int | None = None,
    conversations: bool = False,
    after_each: Callable[[str, int], None] | None = None,
    now: float | None = None,
) -> tuple[Destroyed, RotationRecord]:
    """Re-seal everything that stays under `new_key` and have the server swap it in.

    With `forget_before` N, versions 1..N-1 of the memory are left out (the server deletes them)
    and version N starts its chain afresh; with `conversations`, every transcript message and
    proposal goes too; `now` is when the forgetting is recorded (default the time). The caller keeps
    `new_key` (pending) before calling this (`memframe.backend.forgetting`): from the swap on, only
    the new key opens the workspace."""
    from memframe.core.rotation import RotationPlan

    workspace = store.workspace_id
    records = store.sealed_records()
    if records.key_check != sealing.key_check(old_key, workspace):
        raise rotated(records.rotation)
    previous = read_record(old_key, workspace, records.rotation)
    forgotten = dict(previous.forgotten) if previous else {}
    now = time.time() if now is None else now
    heads: dict[str, int] = {}
    versions: list[tuple[str, int, bytes | None]] = []
    new_heads: dict[str, tuple[int, str]] = {}
    starts: dict[str, int] = {}
    notes: list[tuple[str, int, bytes]] = []
    for path, head, _deleted in store.list_files():
        heads[path] = head
        first = forgotten[path].before if path in forgotten else 1
        start = first
        if path == MEMORY_PATH and forget_before is not None:
            if not first < forget_before <= head:
                raise InvalidInput(
                    f"Only versions {first + 1} to {head} can start the kept history of the memory;"
                    " nothing was changed."
                )
            start = forget_before
            forgotten[path] = Forgotten(forget_before, now, who)
            starts[path] = forget_before
        resealed = _reseal_path(store, old_key, new_key, path, first, start, head, after_each, notes)
        versions.extend(resealed)
        last = resealed[-1][2] if resealed else None
        new_heads[path] = (head, "" if last is None else sealing.content_hash(last))
    if forget_before is not None and MEMORY_PATH not in heads:
        raise InvalidInput("The memory has no versions to forget; nothing was changed.")
    messages: list[tuple[str, int, bytes]] = []
    proposals: list[tuple[str, bytes]] = []
    if not conversations:
        messages = _reseal_messages(old_key, new_key, workspace, records.messages)
        for proposal, blob in records.proposals:
            text = sealing.open_proposal(
                old_key, blob, workspace_id=workspace, proposal_id=proposal, legacy_path=proposal_path(proposal)
            )
            proposals.append(
                (proposal, sealing.seal_proposal(new_key, text, workspace_id=workspace, proposal_id=proposal))
            )
    number = 1 if records.rotation is None else records.rotation.number + 1
    record = RotationRecord(new_heads, forgotten)
    body = {
        "format": _FORMAT,
        "heads": {p: list(v) for p, v in new_heads.items()},
        "forgotten": {p: {"before": f.before, "at": f.at, "by": f.by} for p, f in forgotten.items()},
    }
    plan = RotationPlan(
        old_key_check=records.key_check,
        new_key_check=sealing.key_check(new_key, workspace),
        heads=heads,
        versions=versions,
        messages=messages,
        proposals=proposals,
        sealed_record=sealing.seal_rotation(new_key, json.dumps(body), workspace_id=workspace, number=number),
        forget_before=starts,
        forget_conversations=conversations,
        notes=notes,
    )
    return store.rotate_key(plan), record


def _reseal_path(
    store: MemoryStore,
    old_key: bytes,
    new_key: bytes,
    path: str,
    first: int,
    start: int,
    head: int,
    after_each: Callable[[str, int], None] | None,
    notes: list[tuple[str, int, bytes]],
) -> list[tuple[str, int, bytes | None]]:
    """Versions `start`..`head` of `path` re-sealed under `new_key`, chained afresh from `start`
    (versions from `first` are opened: a delta's base may lie before `start`); their source notes
    re-sealed at their versions are added to `notes`."""
    workspace = store.workspace_id
    open_blob = sealing.opener(old_key, workspace_id=workspace, path=path, remember=True)
    out: list[tuple[str, int, bytes | None]] = []
    previous: bytes | None = None
    previous_text: str | None = None
    chained = False
    for at in range(first, head + 1, _READ_AT_ONCE):
        for stored in store.get_versions(path, list(range(at, min(head, at + _READ_AT_ONCE - 1) + 1))):
            version, blob = stored.info.version, stored.ciphertext
            if blob is None:
                text = None
            else:
                chained = chained or sealing.header(blob) is not None
                text = open_blob(blob, version, legacy=not chained)
            if version < start:
                continue
            if stored.info.source_note is not None:
                note = _reseal_note(old_key, new_key, workspace, path, version, stored.info.source_note)
                notes.append((path, version, note))
            if text is None:
                out.append((path, version, None))
                previous, previous_text = None, None
            else:
                previous = sealing.seal(
                    new_key,
                    text,
                    workspace_id=workspace,
                    path=path,
                    version=version,
                    previous=previous,
                    since=start,
                    previous_text=previous_text,
                )
                previous_text = text
                out.append((path, version, previous))
            if after_each is not None:
                after_each(path, version)
    return out


def _reseal_note(old_key: bytes, new_key: bytes, workspace: str, path: str, version: int, note: bytes) -> bytes:
    """A version's source note opened under the old key at its version and sealed under the new one."""
    name = sealing.open_source(old_key, note, workspace_id=workspace, path=path, version=version)
    return sealing.seal_source(new_key, name, workspace_id=workspace, path=path, version=version)


def _reseal_messages(
    old_key: bytes, new_key: bytes, workspace: str, rows: list[tuple[str, int, str, bytes]]
) -> list[tuple[str, int, bytes]]:
    """Every message opened at its place (an old-format one only before its conversation's first
    new-format one) and sealed again at the same place."""
    out: list[tuple[str, int, bytes]] = []
    chained: set[str] = set()
    for conversation, seq, role, blob in rows:
        if sealing.header(blob) is not None:
            chained.add(conversation)
        text = sealing.open_message(
            old_key,
            blob,
            workspace_id=workspace,
            conversation_id=conversation,
            seq=seq,
            role=role,
            legacy=conversation not in chained,
        )
        out.append(
            (
                conversation,
                seq,
                sealing.seal_message(
                    new_key, text, workspace_id=workspace, conversation_id=conversation, seq=seq, role=role
                ),
            )
        )
    return out
