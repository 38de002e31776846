"""Every failure memframe reports, as one small hierarchy (the whole tree in one module, so it runs
past 400 lines: one class per failure, each mapped to its status in one place).

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
    ├── CaptureRefused          409  automatic capture is not allowed now (mode, deleted, replay)
    │   └── CaptureUngrounded   409  grounded capture: the person's message does not support a line
    ├── AIDisabled              409  workspace AI is off: nothing is sent to a model
    ├── ProposalRetired         409  a proposal made before a Clear cannot be applied
    ├── KeySessionUnavailable   409  the key session is closed, expired, evicted, revoked or unknown
    │   └── KeySessionServiceDown 503  the key-session service cannot be reached: no key is usable now
    ├── DecryptionFailed        422  wrong key, tampered ciphertext, or moved ciphertext
    │   ├── ChainBroken         422  a version does not chain onto the one before it
    │   └── WrongKey            422  the key does not match the workspace's key check
    ├── RolledBack              409  the server shows an older head than this machine has seen
    ├── KeyRotated              409  the workspace key was rotated: this machine holds the old one
    ├── KeyFileError            400  a key file is missing or unreadable
    ├── ModelUnavailable        502  the Assistant's model server failed; memory is untouched
    ├── SchemaTooNew            500  the database was written by a newer memframe
    ├── MCPUnavailable          500  the MCP SDK (version 2) is not installed
    ├── ProposalNotMarked       ---  a proposal's Save landed, marking it applied did not (client only)
    └── Unavailable             503  the memory service is offline, timed out, or failed

`KeySessionUnavailable` and `ModelUnavailable` are deliberately not kinds of
`Unavailable`: that family means "the memory service cannot be reached", and a
client that sees it says it is offline. A closed key session is a state the
person resolves by opening a new one (a conflict, 409), and a model outage
leaves the memory server and the memory itself working (a bad gateway, 502).

Every subclass registers its `code` when it is defined (`__init_subclass__`),
wherever it is defined, so each code names exactly one class. The HTTP layer
maps to and from these in exactly one place: `status`/`to_payload` on the way
out and `error_from_payload` (each class's `from_payload`) on the way back, so
the server and the remote client can never disagree about what a status means.
Messages never carry memory text, ciphertext or keys.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

#: Every error class by its wire `code`; filled as each class is defined.
_BY_CODE: dict[str, type[MemframeError]] = {}


class MemframeError(Exception):
    """Base of every error a person or client may see; `str()` is one clear line."""

    code: ClassVar[str] = "error"
    status: ClassVar[int] = 500

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Register the new class under its own code, so `error_from_payload` can rebuild it."""
        super().__init_subclass__(**kwargs)
        if "code" not in cls.__dict__:
            raise TypeError(f"{cls.__qualname__} must declare its own error code.")
        taken = _BY_CODE.get(cls.code)
        if taken is not None and (taken.__module__, taken.__qualname__) != (cls.__module__, cls.__qualname__):
            raise TypeError(f"The error code {cls.code!r} already names {taken.__qualname__}.")
        _BY_CODE[cls.code] = cls

    def __init__(self, message: str = "", **details: Any) -> None:
        self.message = message or _first_line(self.__class__.__doc__) or self.code
        super().__init__(self.message)
        self.details = details

    def __str__(self) -> str:
        return self.message

    def to_payload(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, **self.details}

    @classmethod
    def from_payload(cls, message: str, payload: dict[str, Any]) -> Self:
        """This error again, from the payload `to_payload` made; classes with arguments override it."""
        extra = {k: v for k, v in payload.items() if k not in ("error", "message")}
        return cls(message, **extra)


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().split("\n", 1)[0]


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

    @classmethod
    def from_payload(cls, message: str, payload: dict[str, Any]) -> Self:
        return cls(int(payload.get("current_version", 0)), message)


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

    @classmethod
    def from_payload(cls, message: str, payload: dict[str, Any]) -> Self:
        return cls(int(payload.get("current_revision", 0)), str(payload.get("current_mode", "")), message)


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


class CaptureUngrounded(CaptureRefused):
    """Grounded capture is on and the person's message of the turn does not support a line the
    capture would write: nothing was written, and the same change may become a proposal."""

    code = "capture_ungrounded"


class AIDisabled(MemframeError):
    """Workspace AI is off for this workspace; nothing was sent to a model.

    Consent is the person's, separate from the memory mode: no mode turns it on.
    """

    code = "ai_disabled"
    status = 409


class ProposalRetired(MemframeError):
    """This proposal was made before the memory was cleared, so it cannot be applied; dismiss it.

    Read only proposals carry the Clear generation they were made under; a Clear
    retires every one made before it, as it retires every older admission.
    """

    code = "proposal_retired"
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


class KeySessionServiceDown(KeySessionUnavailable):
    """The key-session service cannot be reached; nothing that needs the workspace key can run now (Saves still work).

    Raised by the key-session client (`memframe keysessions`, or the one `memframe serve --workers N`
    starts for its workers) when the service is down or refuses this server's credential. A kind of
    `KeySessionUnavailable`, so everything that needs a key refuses as it does for a dead session:
    sends and captures are refused, recall withholds with `unavailable`. Its own code and 503,
    because opening a new session cannot help until the service is back.
    """

    code = "key_session_service_unavailable"
    status = 503


class DecryptionFailed(MemframeError):
    """The text could not be decrypted: wrong key, or the stored data was altered or moved."""

    code = "decryption_failed"
    status = 422


class ChainBroken(DecryptionFailed):
    """The history does not chain: a version was moved, copied, reordered or dropped."""

    code = "history_does_not_chain"


class WrongKey(DecryptionFailed):
    """This key is not the workspace's key (it does not match the workspace's key check)."""

    code = "wrong_key"


class RolledBack(MemframeError):
    """The server shows an older version than this machine has seen; the history may have been rolled back."""

    code = "history_rolled_back"
    status = 409


class KeyRotated(MemframeError):
    """The workspace key was rotated; this machine holds the old one, which writes nothing."""

    code = "key_rotated"
    status = 409

    @classmethod
    def since(cls, rotated_at: float, rotated_by: str) -> KeyRotated:
        """The one line a member with the old key reads (`rotated_at` in seconds since the epoch)."""
        import time

        day = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(rotated_at))
        return cls(
            f"The workspace key was rotated on {day} by {rotated_by}; ask them for the new key "
            "(memframe key export). Nothing was written with the old one.",
            rotated_at=rotated_at,
            rotated_by=rotated_by,
        )


class KeyFileError(MemframeError):
    """The workspace key is missing or cannot be read."""

    code = "key_unavailable"
    status = 400


class ModelUnavailable(MemframeError):
    """The Assistant's model server could not be reached or answered badly.

    It says nothing about memory: a capture committed earlier in the same turn
    stays committed, and the turn reports it beside this failure.
    """

    code = "model_unavailable"
    status = 502


class SchemaTooNew(MemframeError):
    """The database was written by a newer memframe."""

    code = "schema_too_new"
    status = 500


class MCPUnavailable(MemframeError):
    """The `mcp` package (version 2) is not installed."""

    code = "mcp_unavailable"
    status = 500


class ProposalNotMarked(MemframeError):
    """A proposal was applied (its Save was acknowledged) but could not be marked applied.

    Not a failure of the write: `info` is the exact version the server acknowledged, and the
    caller must move to it as after any Save. The proposal still shows as pending.
    """

    code = "proposal_not_marked"
    status = 500

    info: Any = None  # the VersionInfo the Save acknowledged (set by `landed`)

    @classmethod
    def landed(cls, info: Any, reason: MemframeError) -> ProposalNotMarked:
        """The error for a Save acknowledged as `info` whose proposal could not be marked (`reason`)."""
        error = cls(
            f"Applied as version {info.version}; could not mark the proposal applied ({reason}); "
            "if it still shows as pending, dismiss it.",
            version=info.version,
        )
        error.info = info
        return error


class Unavailable(MemframeError):
    """The memory service cannot be reached right now; nothing was changed."""

    code = "unavailable"
    status = 503


def error_from_payload(status: int, payload: Any) -> MemframeError:
    """Rebuild the typed error a server sent; unknown shapes become Unavailable."""
    if not isinstance(payload, dict) or not isinstance(payload.get("error"), str):
        if status == 401:
            return Unauthorized()
        if status == 404:
            return NotFound()
        return Unavailable(f"The server answered with status {status}.")
    message = str(payload.get("message") or "")
    cls = _BY_CODE.get(payload["error"])
    if cls is None:
        return Unavailable(message or f"The server answered with status {status}.")
    return cls.from_payload(message, payload)


def error_classes() -> tuple[type[MemframeError], ...]:
    """Every registered error class (each code once), for tests and documentation."""
    return tuple(_BY_CODE.values())
