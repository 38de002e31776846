"""The contract's vocabulary as plain values shared by every layer.

Nothing here does I/O; the service, both backends, the frame and the
assistant all speak in these types so a promise has one name everywhere.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

#: The reserved namespace; only the memory route may write inside it.
MEMORY_NAMESPACE = ".zudotext/memory/"
#: The one memory document of a workspace.
MEMORY_PATH = ".zudotext/memory/MEMORY.md"
#: Recall supplies at most this many UTF-8 bytes of memory text.
MEMORY_RECALL_MAX_BYTES = 8192
#: A version's source note names the file it was imported from in at most this many UTF-8 bytes.
SOURCE_NAME_MAX_BYTES = 200


class Mode(enum.StrEnum):
    """Workspace memory policy; a missing policy row reads as READ_ONLY."""

    OFF = "off"
    READ_ONLY = "read_only"
    AUTO = "auto"

    @classmethod
    def parse(cls, value: str) -> Mode:
        """Accept the spellings a person types (`read-only`, `Read only`)."""
        key = value.strip().lower().replace("-", "_").replace(" ", "_")
        for mode in cls:
            if mode.value == key:
                return mode
        raise ValueError(f"unknown mode {value!r}: choose off, read-only or auto")

    @property
    def label(self) -> str:
        return {"off": "Off", "read_only": "Read only", "auto": "Auto"}[self.value]

    @property
    def explanation(self) -> str:
        """One line a person reads before choosing the mode."""
        return {
            "off": "The Assistant neither reads nor changes memory.",
            "read_only": "The Assistant reads memory; its suggested changes wait for you.",
            "auto": "The Assistant reads memory and may change it by itself, while Auto stays on.",
        }[self.value]


class Author(enum.StrEnum):
    PERSON = "person"
    ASSISTANT = "assistant"


class Operation(enum.StrEnum):
    """What a revision was; stored at write time so listing never decrypts."""

    SAVE = "save"
    CLEAR = "clear"
    UNDO = "undo"
    CAPTURE = "capture"
    DELETE = "delete"


class RecallStatus(enum.StrEnum):
    """Why recall supplied the memory, or why it was withheld."""

    PROVIDED = "provided"
    OFF = "off"
    EMPTY = "empty"
    PENDING = "pending"
    CONFLICT = "conflict"
    STALE = "stale"
    OVERSIZED = "oversized"
    DELETED = "deleted"
    UNAVAILABLE = "unavailable"
    NO_ACCESS = "no_access"
    SUPERSEDED = "superseded"

    @property
    def withheld(self) -> bool:
        """Withheld statuses become an explicit note; OFF and EMPTY add nothing."""
        return self not in (RecallStatus.PROVIDED, RecallStatus.OFF, RecallStatus.EMPTY)


@dataclass(frozen=True)
class Policy:
    """One workspace's row of workspace_memory_policy (or its default)."""

    mode: Mode = Mode.READ_ONLY
    revision: int = 0
    clear_generation: int = 0


@dataclass(frozen=True)
class VersionInfo:
    """Metadata of one stored revision: everything a list needs, no text."""

    version: int
    created_at: float
    author: Author
    actor: str
    operation: Operation
    size: int
    content_hash: str
    restored_from: int | None = None
    #: The name of the file a person imported this version from, sealed under the workspace key at
    #: this version's place (`memframe.sealing.seal_source`); None for every other version.
    source_note: bytes | None = None


@dataclass(frozen=True)
class StoredVersion:
    """One revision as the server holds it: metadata and ciphertext."""

    info: VersionInfo
    ciphertext: bytes | None  # None for a delete tombstone


@dataclass(frozen=True)
class DocumentHit:
    """One note that matched a search: where, at which version, and the matching line (cut to 200 characters)."""

    path: str
    version: int
    snippet: str


@dataclass(frozen=True)
class MemoryDocument:
    """The decrypted current memory as a client sees it.

    `version` is the exact server version the text belongs to; 0 means the
    document was never created. A deleted document has empty text and
    `deleted=True`; a plain save does not revive it.
    """

    text: str
    version: int
    deleted: bool = False
    info: VersionInfo | None = None

    @property
    def size(self) -> int:
        return utf8_size(self.text)

    @property
    def oversized(self) -> bool:
        return self.size > MEMORY_RECALL_MAX_BYTES


def utf8_size(text: str) -> int:
    """The size bound is measured in UTF-8 bytes, never characters."""
    return len(text.encode("utf-8"))


@dataclass(frozen=True)
class MemoryHead:
    """What a frame polls to notice changes made elsewhere: no text, nothing decrypted.

    `info` is the head revision's metadata (None: never created), `policy` the mode, its
    revision and the Clear generation."""

    info: VersionInfo | None
    policy: Policy

    @property
    def version(self) -> int:
        return 0 if self.info is None else self.info.version
