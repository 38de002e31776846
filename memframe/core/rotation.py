"""What a key rotation carries between the person's machine and the server, and what it destroyed.

Forgetting is key rotation: the client re-seals everything that stays under a new key and the
server swaps it in one transaction, so these records hold ciphertext, ids and counts, never text.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Rotation:
    """The newest rotation of a workspace's key: clear metadata, and the rotator's sealed record."""

    number: int
    rotated_at: float
    rotated_by: str
    sealed_record: bytes | None


@dataclass(frozen=True)
class SealedRecords:
    """Everything sealed under the workspace key that is not a file version, for re-sealing."""

    key_check: str | None
    #: (conversation id, seq, role, sealed) of every stored message of the workspace's conversations.
    messages: list[tuple[str, int, str, bytes]] = field(default_factory=list)
    #: (proposal id, sealed edits) of every proposal of the workspace, pending or resolved.
    proposals: list[tuple[str, bytes]] = field(default_factory=list)
    rotation: Rotation | None = None


@dataclass(frozen=True)
class RotationPlan:
    """One rotation, as the server swaps it in: every kept record re-sealed under the new key.

    `heads` is the base it was made against (path -> head version): a workspace that moved since
    refuses the whole plan. `forget_before` maps a path to its first kept version."""

    old_key_check: str
    new_key_check: str
    heads: dict[str, int]
    #: (path, version, ciphertext) of every kept version; None for a deletion's tombstone.
    versions: list[tuple[str, int, bytes | None]]
    messages: list[tuple[str, int, bytes]]
    proposals: list[tuple[str, bytes]]
    sealed_record: bytes
    forget_before: dict[str, int] = field(default_factory=dict)
    forget_conversations: bool = False
    #: (path, version, sealed note) of every kept version's source note, re-sealed at its version.
    notes: list[tuple[str, int, bytes]] = field(default_factory=list)


@dataclass(frozen=True)
class RotationPart:
    """Some of a plan's re-sealed records, uploaded ahead of it when the whole is over one request."""

    versions: list[tuple[str, int, bytes | None]] = field(default_factory=list)
    messages: list[tuple[str, int, bytes]] = field(default_factory=list)
    proposals: list[tuple[str, bytes]] = field(default_factory=list)


@dataclass(frozen=True)
class Destroyed:
    """What one rotation destroyed on the server (counts and ranges; never text)."""

    rotated_at: float
    rotated_by: str
    #: path -> (first, last, count) of the versions deleted.
    versions: dict[str, tuple[int, int, int]]
    messages: int
    proposals: int
    resealed_versions: int
    resealed_messages: int
    resealed_proposals: int
    key_sessions_revoked: int
    #: What the engine did to take the old bytes off its disk, in a person's words.
    disk: str = ""
