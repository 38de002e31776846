"""The people's routes: encrypted file versions, workspaces and the memory policy.

These models carry version metadata, ciphertext in base64 and policy fields,
never a plaintext or a key.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import Field, field_validator, model_validator

from memframe.core.types import Author, Mode, Operation, StoredVersion, VersionInfo
from memframe.wire.base import MAX_NUMBER, Sealed, WireIn, WireOut, decode_base64


class VersionOut(WireOut):
    """One revision's metadata: everything a list needs, no text."""

    version: int = Field(description="The revision number; 1 is the first write.")
    created_at: float = Field(description="When the server stored it, in seconds since the epoch.")
    author: Author
    actor: str = Field(description="The user (or assistant) that wrote it.")
    operation: Operation
    size: int = Field(description="Plaintext size in UTF-8 bytes, known from the ciphertext length.")
    content_hash: str = Field(description="SHA-256 of the ciphertext, hex.")
    restored_from: int | None = Field(None, description="The revision an undo restored.")
    source_note: Sealed | None = Field(
        None,
        description="For a version a person imported from a file: the file's name, sealed under the workspace key"
        " at this version's place, base64; the server cannot read it.",
        json_schema_extra={"contentEncoding": "base64"},
    )

    def to_info(self) -> VersionInfo:
        note = None if self.source_note is None else decode_base64(self.source_note)
        return self.to_core(VersionInfo, source_note=note)


class StoredVersionOut(VersionOut):
    """One revision with its ciphertext; `ciphertext` is null for a delete tombstone."""

    ciphertext: Sealed | None = Field(
        description="The sealed text, base64; the server cannot read it.",
        json_schema_extra={"contentEncoding": "base64"},
    )

    @model_validator(mode="before")
    @classmethod
    def _flatten(cls, data: Any) -> Any:
        """A `StoredVersion` is its metadata plus the ciphertext; on the wire they sit side by side."""
        if isinstance(data, StoredVersion):
            return {**dataclasses.asdict(data.info), "ciphertext": data.ciphertext}
        return data

    def to_stored(self) -> StoredVersion:
        return StoredVersion(self.to_info(), None if self.ciphertext is None else decode_base64(self.ciphertext))


class StoredVersionRun(WireOut):
    """Consecutive revisions with their ciphertexts, oldest first: a delta's earlier versions in one answer."""

    versions: list[StoredVersionOut] = Field(description="Oldest first, every version from `first` to `last`.")


class VersionPage(WireOut):
    versions: list[VersionOut] = Field(description="Newest first.")
    next_before: int | None = Field(
        description="Pass as `before` for the next (older) page; null when this page is the last."
    )


class FileEntry(WireOut):
    path: str
    version: int = Field(description="The head version.")
    deleted: bool


class FileList(WireOut):
    files: list[FileEntry]


class WorkspaceEntry(WireOut):
    id: str


class WorkspaceList(WireOut):
    user: str = Field(description="The user the bearer token speaks for.")
    workspaces: list[WorkspaceEntry]


class PolicyOut(WireOut):
    mode: Mode
    revision: int = Field(description="Bumped by every real mode change; retires older admissions.")
    clear_generation: int = Field(description="Advanced by every successful Clear.")


class PutFileIn(WireIn):
    """One direct upload of an encrypted document."""

    ciphertext: str = Field(
        description="The sealed text, base64 (standard alphabet, padded).",
        json_schema_extra={"contentEncoding": "base64"},
    )
    restored_from: int | None = Field(
        None, ge=1, le=MAX_NUMBER, description="Set by an undo: the revision whose text this restores."
    )
    source_note: str | None = Field(
        None,
        max_length=1024,
        description="Set by an import: the name of the file the text came from, sealed under the workspace key"
        " at the new version's place, base64. Only a Save carries one.",
        json_schema_extra={"contentEncoding": "base64"},
    )

    @field_validator("ciphertext", "source_note")
    @classmethod
    def _strict_base64(cls, value: str | None) -> str | None:
        if value is not None:
            decode_base64(value)
        return value

    def blob(self) -> bytes:
        return decode_base64(self.ciphertext)

    def note(self) -> bytes | None:
        """The sealed source note, if the Save carries one."""
        return None if self.source_note is None else decode_base64(self.source_note)


class PolicyIn(WireIn):
    """Compare-and-set of the mode: a stale `expectedRevision` is a 409 that changes nothing."""

    # FastAPI validates the decoded JSON as Python data, where a strict enum wants a `Mode`
    # instance; the value is still one of the schema's strings, and nothing else.
    mode: Mode = Field(strict=False)
    expected_revision: int = Field(ge=0, le=MAX_NUMBER)
