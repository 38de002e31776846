"""Every failure memframe reports, as one small hierarchy.

    MemframeError
    ├── InvalidInput            422  malformed request, bad mode, bad base64, not UTF-8
    │   └── EditRefused         422  a remember_in_memory edit that cannot apply
    ├── TooLarge                413  a body over the server's limit
    ├── Unauthorized            401  no credential, a bad or revoked token
    ├── Forbidden               403  authenticated, but this action is not allowed
    ├── NotFound                404  no such workspace (or not a member), file or revision
    │   └── FileNotFound        404  a member asked for a file that was never created
    ├── VersionConflict         409  the base version is not the server's current version
    │   └── DocumentDeleted     409  the document is a tombstone; a plain write does not revive it
    ├── PolicyConflict          409  the expected policy revision is stale
    ├── FenceRefused            409  the commit fence retired an automatic write
    ├── NamespaceReserved       403  an automation route touched the memory namespace
    ├── CaptureRefused          409  automatic capture is not allowed now (mode, size, replay)
    ├── KeySessionUnavailable   409  the key session is closed, expired, evicted or unknown
    ├── DecryptionFailed        422  wrong key, tampered ciphertext, or moved ciphertext
    ├── KeyFileError            400  a key file is missing or unreadable
    ├── ProposalNotMarked       ---  a proposal's Save landed, marking it applied did not (client only)
    └── Unavailable             503  offline, timed out, or the server failed

The HTTP layer maps to and from these in exactly one place: `to_payload`
on the way out and `error_from_payload` on the way back, so the server and
the remote client can never disagree about what a status means.
Messages never carry memory text, ciphertext or keys.
"""

from __future__ import annotations

from typing import Any, ClassVar


class MemframeError(Exception):
    """Base of every error a person or client may see; `str()` is one clear line."""

    code: ClassVar[str] = "error"
    status: ClassVar[int] = 500

    def __init__(self, message: str = "", **details: Any) -> None:
        super().__init__(message or self.__class__.__doc__ or self.code)
        self.message = message or (self.__class__.__doc__ or self.code).strip().splitlines()[0]
        self.details = details

    def __str__(self) -> str:
        return self.message

    def to_payload(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, **self.details}


class InvalidInput(MemframeError):
    """The request is malformed."""

    code = "invalid_input"
    status = 422


class EditRefused(InvalidInput):
    """A memory edit cannot be applied as given."""

    code = "edit_refused"


class TooLarge(MemframeError):
    """The request body is too large."""

    code = "too_large"
    status = 413


class Unauthorized(MemframeError):
    """A valid token is required."""

    code = "unauthorized"
    status = 401


class Forbidden(MemframeError):
    """This action is not allowed."""

    code = "forbidden"
    status = 403


class NotFound(MemframeError):
    """Not found."""

    code = "not_found"
    status = 404


class FileNotFound(NotFound):
    """The file was never created.

    Distinct from NotFound so a remote client can tell "this document does not
    exist yet" (version 0) from "no such workspace"; membership is checked
    first, so a non-member only ever sees the plain NotFound.
    """

    code = "file_not_found"


class VersionConflict(MemframeError):
    """Someone else wrote first; nothing was written."""

    code = "version_conflict"
    status = 409

    def __init__(self, current_version: int, message: str = "") -> None:
        super().__init__(
            message or f"The memory changed on the server (now version {current_version}); nothing was written.",
            current_version=current_version,
        )
        self.current_version = current_version


class DocumentDeleted(VersionConflict):
    """The document was deleted; a plain write does not bring it back."""

    code = "document_deleted"

    def __init__(self, current_version: int, message: str = "") -> None:
        super().__init__(
            current_version,
            message or f"The document was deleted (version {current_version}); restore it explicitly to write again.",
        )


class PolicyConflict(MemframeError):
    """The policy changed first; nothing was changed."""

    code = "policy_conflict"
    status = 409

    def __init__(self, current_revision: int, current_mode: str, message: str = "") -> None:
        super().__init__(
            message
            or f"The mode was changed elsewhere (now {current_mode}, revision {current_revision}); "
            "nothing was changed.",
            current_revision=current_revision,
            current_mode=current_mode,
        )
        self.current_revision = current_revision
        self.current_mode = current_mode


class FenceRefused(MemframeError):
    """The commit fence refused the automatic write; nothing was written."""

    code = "fence_refused"
    status = 409


class NamespaceReserved(MemframeError):
    """The memory namespace is reserved for the memory route."""

    code = "MEMORY_NAMESPACE_RESERVED"
    status = 403


class CaptureRefused(MemframeError):
    """Automatic capture is not allowed now."""

    code = "capture_refused"
    status = 409


class KeySessionUnavailable(MemframeError):
    """The key session is closed, expired or unknown; open a new one.

    Raised by the service's KeySessions (RAM only: an idle eviction, an expiry or a restart forgets a
    key). Ingress refuses a dead session before it writes anything and says so with
    `admission_refused=True`: only then may a client open a fresh session and send the same message
    again, because the server recorded nothing of the first try.
    """

    code = "key_session_unavailable"
    status = 409

    @property
    def admission_refused(self) -> bool:
        """True when ingress refused the send before writing anything (safe to send again)."""
        return bool(self.details.get("admission_refused"))


class DecryptionFailed(MemframeError):
    """The text could not be decrypted: wrong key, or the stored data was altered or moved."""

    code = "decryption_failed"
    status = 422


class KeyFileError(MemframeError):
    """The workspace key is missing or cannot be read."""

    code = "key_unavailable"
    status = 400


class ProposalNotMarked(MemframeError):
    """A proposal was applied (its Save was acknowledged) but could not be marked applied.

    Not a failure of the write: `info` is the exact version the server acknowledged, and the
    caller must move to it as after any Save. The proposal still shows as pending.
    """

    code = "proposal_not_marked"
    status = 500

    def __init__(self, info: Any, reason: MemframeError) -> None:
        super().__init__(
            f"Applied as version {info.version}; could not mark the proposal applied ({reason}); "
            "if it still shows as pending, dismiss it.",
            version=info.version,
        )
        self.info = info
        self.reason = reason


class Unavailable(MemframeError):
    """The memory service cannot be reached right now; nothing was changed."""

    code = "unavailable"
    status = 503


_BY_CODE: dict[str, type[MemframeError]] = {}


def _register(cls: type[MemframeError]) -> None:
    _BY_CODE[cls.code] = cls
    for sub in cls.__subclasses__():
        _register(sub)


_register(MemframeError)


def error_from_payload(status: int, payload: Any) -> MemframeError:
    """Rebuild the typed error a server sent; unknown shapes become Unavailable."""
    if not isinstance(payload, dict) or not isinstance(payload.get("error"), str):
        if status == 401:
            return Unauthorized()
        if status == 404:
            return NotFound()
        return Unavailable(f"The server answered with status {status}.")
    code = payload["error"]
    message = str(payload.get("message") or "")
    cls = _BY_CODE.get(code)
    if cls is VersionConflict or cls is DocumentDeleted:
        return cls(int(payload.get("current_version", 0)), message)
    if cls is PolicyConflict:
        return PolicyConflict(int(payload.get("current_revision", 0)), str(payload.get("current_mode", "")), message)
    if cls is None or cls is MemframeError:
        return Unavailable(message or f"The server answered with status {status}.")
    extra = {k: v for k, v in payload.items() if k not in ("error", "message")}
    return cls(message, **extra)
