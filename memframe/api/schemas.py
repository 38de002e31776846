"""The JSON shapes of the people's routes, as pydantic models.

These models are the wire format and nothing more: they carry version
metadata, ciphertext in base64 and policy fields, never a plaintext or a
key. Field names are camelCase on the wire (`restoredFrom`,
`expectedRevision`, as the contract spells them); error details keep the
snake_case names `memframe.core.errors` gives them.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from memframe.core.types import Author, Mode, Operation, Policy, StoredVersion, VersionInfo

#: Versions and revisions fit in SQLite's INTEGER and in a JavaScript number.
MAX_NUMBER = 2**53 - 1


def decode_base64(value: str) -> bytes:
    """Strict base64: anything but the standard alphabet with correct padding is refused."""
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ValueError("not valid base64 (standard alphabet, padded)") from None


def encode_base64(blob: bytes | None) -> str | None:
    return None if blob is None else base64.b64encode(blob).decode("ascii")


class _Out(BaseModel):
    """Responses are built by field name and sent with camelCase aliases."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True)


class _In(BaseModel):
    """Requests use the camelCase names only; an unknown field is an error, not ignored,
    so a client that sends something the server must never receive (a plaintext, a key)
    is told so instead of having it silently dropped."""

    model_config = ConfigDict(alias_generator=to_camel, extra="forbid")


class VersionOut(_Out):
    """One revision's metadata: everything a list needs, no text."""

    version: int = Field(description="The revision number; 1 is the first write.")
    created_at: float = Field(description="When the server stored it, in seconds since the epoch.")
    author: Author
    actor: str = Field(description="The user (or assistant) that wrote it.")
    operation: Operation
    size: int = Field(description="Plaintext size in UTF-8 bytes, known from the ciphertext length.")
    content_hash: str = Field(description="SHA-256 of the ciphertext, hex.")
    restored_from: int | None = Field(None, description="The revision an undo restored.")

    def to_info(self) -> VersionInfo:
        return VersionInfo(
            self.version,
            self.created_at,
            self.author,
            self.actor,
            self.operation,
            self.size,
            self.content_hash,
            self.restored_from,
        )

    @classmethod
    def of(cls, info: VersionInfo) -> VersionOut:
        return cls(
            version=info.version,
            created_at=info.created_at,
            author=info.author,
            actor=info.actor,
            operation=info.operation,
            size=info.size,
            content_hash=info.content_hash,
            restored_from=info.restored_from,
        )


class StoredVersionOut(VersionOut):
    """One revision with its ciphertext; `ciphertext` is null for a delete tombstone."""

    ciphertext: str | None = Field(
        description="The sealed text, base64; the server cannot read it.",
        json_schema_extra={"contentEncoding": "base64"},
    )

    @classmethod
    def of_stored(cls, stored: StoredVersion) -> StoredVersionOut:
        return cls(**VersionOut.of(stored.info).model_dump(), ciphertext=encode_base64(stored.ciphertext))


class VersionPage(_Out):
    versions: list[VersionOut] = Field(description="Newest first.")
    next_before: int | None = Field(
        description="Pass as `before` for the next (older) page; null when this page is the last."
    )


class FileEntry(_Out):
    path: str
    version: int = Field(description="The head version.")
    deleted: bool


class FileList(_Out):
    files: list[FileEntry]


class WorkspaceEntry(_Out):
    id: str


class WorkspaceList(_Out):
    user: str = Field(description="The user the bearer token speaks for.")
    workspaces: list[WorkspaceEntry]


class PolicyOut(_Out):
    mode: Mode
    revision: int = Field(description="Bumped by every real mode change; retires older admissions.")
    clear_generation: int = Field(description="Advanced by every successful Clear.")

    @classmethod
    def of(cls, policy: Policy) -> PolicyOut:
        return cls(mode=policy.mode, revision=policy.revision, clear_generation=policy.clear_generation)


class PutFileIn(_In):
    """One direct upload of an encrypted document."""

    ciphertext: str = Field(
        description="The sealed text, base64 (standard alphabet, padded).",
        json_schema_extra={"contentEncoding": "base64"},
    )
    restored_from: int | None = Field(
        None, ge=1, le=MAX_NUMBER, description="Set by an undo: the revision whose text this restores."
    )

    @field_validator("ciphertext")
    @classmethod
    def _strict_base64(cls, value: str) -> str:
        decode_base64(value)
        return value

    def blob(self) -> bytes:
        return decode_base64(self.ciphertext)


class PolicyIn(_In):
    """Compare-and-set of the mode: a stale `expectedRevision` is a 409 that changes nothing."""

    mode: Mode
    expected_revision: int = Field(ge=0, le=MAX_NUMBER)


class ErrorOut(BaseModel):
    """Every error: a stable code, one readable line, and the code's own details."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"additionalProperties": True})

    error: str = Field(description="A stable code, e.g. `version_conflict` or `not_found`.")
    message: str = Field(description="One line a person can read.")


class Health(BaseModel):
    status: str
    version: str


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses a route can answer, all in the one error shape."""
    described = {
        401: "No token, or a token that is not valid (revoked or unknown).",
        403: "MEMORY_NAMESPACE_RESERVED: automation may not touch the memory namespace, in any spelling.",
        404: "No such workspace (or not a member: the same answer), file or revision.",
        409: "A conflict: the base version or the expected policy revision is stale; nothing changed.",
        413: "The request body is over the server's limit.",
        422: "Malformed input: bad base64, a negative version, an unknown mode, a bad path.",
    }
    return {status: {"model": ErrorOut, "description": described[status]} for status in statuses}
