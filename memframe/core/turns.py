"""The Assistant's records as plain values, shared by the service, both backends and the frame.

None of these carries memory text except a decrypted `Proposal`, which only a
client holding the workspace key can build.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from memframe.core.edits import MemoryChange
from memframe.core.types import RecallStatus, VersionInfo


class OutcomeKind(enum.StrEnum):
    """What a tool call did; only REMEMBERED is a committed receipt ("Remembered")."""

    REMEMBERED = "remembered"
    PROPOSED = "proposed"
    OFF = "off"
    REFUSED = "refused"
    ERROR = "error"
    OK = "ok"


class ProposalStatus(enum.StrEnum):
    """A proposal waits for a person, who applies it (after their own Save) or dismisses it."""

    PENDING = "pending"
    APPLIED = "applied"
    DISMISSED = "dismissed"


class ProposalReason(enum.StrEnum):
    """Why the Assistant proposed instead of committing."""

    READ_ONLY = "read_only"  # the admission was Read only
    CONFLICT = "conflict"  # Auto, but the memory changed meanwhile: never an automatic rebase
    UNGROUNDED = "ungrounded"  # Auto with grounded capture, but the person's message does not support it


@dataclass(frozen=True)
class AIConsent:
    """Workspace AI: off until a person turns it on; each change bumps the revision."""

    enabled: bool = False
    revision: int = 0


@dataclass(frozen=True)
class KeySessionInfo:
    id: str
    workspace_id: str
    user_id: str
    created_at: float
    expires_at: float
    idle_timeout: float


@dataclass(frozen=True)
class Receipt:
    """Which revision one model call used, or why memory was withheld: ids and versions only."""

    admission_id: str
    call_index: int
    status: RecallStatus
    revision: int | None
    created_at: float


@dataclass(frozen=True)
class ProposalRecord:
    """A proposal as the server stores it: the edits are sealed with the workspace key."""

    id: str
    workspace_id: str
    admission_id: str
    base_version: int
    clear_generation: int
    reason: ProposalReason
    sealed_edits: bytes
    status: ProposalStatus
    created_at: float


@dataclass(frozen=True)
class Proposal:
    """A proposal opened on the client: the exact edits the Assistant suggested."""

    id: str
    base_version: int
    clear_generation: int
    reason: ProposalReason
    changes: tuple[MemoryChange, ...]
    created_at: float


@dataclass(frozen=True)
class CallRecord:
    """One model call's recall: the receipt shown beside the answer."""

    call_index: int
    status: RecallStatus
    revision: int | None


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool call did, for the person (the UI) and the model (`message`)."""

    tool: str
    kind: OutcomeKind
    message: str
    version: int | None = None
    proposal_id: str | None = None

    @property
    def committed(self) -> bool:
        """Only a committed receipt may be shown as "Remembered"."""
        return self.kind == OutcomeKind.REMEMBERED


@dataclass
class TurnResult:
    answer: str
    admission_id: str
    calls: list[CallRecord] = field(default_factory=list)
    outcomes: list[ToolOutcome] = field(default_factory=list)
    #: The model stopped at its token limit (finish_reason "length"): the answer is incomplete.
    cut_off: bool = False
    #: The server ended the streamed answer without a finish_reason (another request interrupted it): it may
    #: be incomplete.
    ended_early: bool = False
    #: Why the turn ended without an answer after its tools had done something (the outcomes say what).
    failure: str | None = None

    @property
    def remembered(self) -> bool:
        return any(o.committed for o in self.outcomes)


@dataclass(frozen=True)
class RecallResult:
    """What one model call may see: the text only when the status is PROVIDED."""

    status: RecallStatus
    revision: int | None
    text: str | None = None


@dataclass(frozen=True)
class CaptureReceipt:
    """A committed automatic change: the exact version, and whether this answer is a replay."""

    admission_id: str
    version: VersionInfo
    replayed: bool = False
