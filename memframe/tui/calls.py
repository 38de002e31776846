"""Backend calls as the frame's worker threads run them: never raising, always an outcome.

Each function here runs off the UI thread and returns a plain value that a
message carries back. A failure is data, not an exception, so no backend
error (offline, auth, conflict, a bug in a backend) can take the frame down
and the draft always survives. Nothing here retries: a refused write comes
back refused, with the newer server text for the person to look at.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from memframe.backend.base import Backend
from memframe.core.errors import MemframeError, ProposalNotMarked, Unavailable, VersionConflict
from memframe.core.types import MemoryDocument, MemoryHead, Mode, Policy
from memframe.tui.state import WriteKind, WriteOutcome, WriteRequest

T = TypeVar("T")


def as_error(exc: BaseException) -> MemframeError:
    """Every failure becomes one of ours; an unknown one is reported, never raised."""
    if isinstance(exc, MemframeError):
        return exc
    return Unavailable(f"The backend failed unexpectedly ({type(exc).__name__}: {exc}); nothing was changed.")


def attempt(call: Callable[[], T]) -> tuple[T | None, MemframeError | None]:
    try:
        return call(), None
    except Exception as exc:
        return None, as_error(exc)


@dataclass(frozen=True)
class LoadOutcome:
    """The current document and policy, or why they could not be read."""

    doc: MemoryDocument | None
    policy: Policy | None
    error: MemframeError | None = None


def load(backend: Backend) -> LoadOutcome:
    doc, error = attempt(backend.load)
    if doc is None:
        return LoadOutcome(None, None, error)
    policy, error = attempt(backend.get_policy)
    return LoadOutcome(doc, policy, error)


@dataclass(frozen=True)
class HeadOutcome:
    """The server's head revision and policy (the frame's poll), or why they could not be read."""

    head: MemoryHead | None
    error: MemframeError | None = None


def head(backend: Backend) -> HeadOutcome:
    found, error = attempt(backend.head)
    return HeadOutcome(found, error)


def write(backend: Backend, request: WriteRequest) -> WriteOutcome:
    """One direct upload. On a conflict, also read the newer document so it can be shown."""
    text = request.text
    warning = ""
    try:
        if request.kind is WriteKind.SAVE:
            info = backend.save(text, request.base_version, revive=request.revive)
        elif request.kind is WriteKind.CLEAR:
            text = ""
            info = backend.clear(request.base_version)
        elif request.kind is WriteKind.APPLY:
            assert request.proposal is not None
            try:
                info = backend.apply_proposal(request.proposal.id, request.base_version)
            except ProposalNotMarked as exc:  # the Save landed: an outcome with its version and a warning
                info, warning = exc.info, str(exc)
            # The backend applied the edits to exactly `base_version`'s text, as `text` was computed;
            # reading the revision back makes the editor show what the server holds even so.
            applied = attempt(lambda: backend.read_revision(info.version))[0]
            text = text if applied is None else applied
        else:
            assert request.revision is not None
            text = backend.read_revision(request.revision)
            info = backend.undo(request.revision, request.base_version)
    except VersionConflict as exc:
        server, _ = attempt(backend.load)
        policy, _ = attempt(backend.get_policy)
        return WriteOutcome(request, text, error=exc, server=server, policy=policy)
    except Exception as exc:
        return WriteOutcome(request, text, error=as_error(exc))
    policy = attempt(backend.get_policy)[0] if request.kind is WriteKind.CLEAR else None
    return WriteOutcome(request, text, info=info, policy=policy, warning=warning)


@dataclass(frozen=True)
class ModeOutcome:
    """The policy after a compare-and-set, or the error (a PolicyConflict names the current mode)."""

    requested: Mode
    policy: Policy | None
    error: MemframeError | None = None


def set_mode(backend: Backend, mode: Mode, expected_revision: int) -> ModeOutcome:
    policy, error = attempt(lambda: backend.set_policy(mode, expected_revision))
    return ModeOutcome(mode, policy, error)
