"""The JSON shapes of the Assistant's routes: ids, versions, statuses, and sealed text.

A person's message and the Assistant's answer travel as text (the model must
read them); memory never travels here except inside the automation recall
answer, and proposals and transcripts travel sealed.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from memframe.api.schemas import MAX_NUMBER, _In, _Out, decode_base64, encode_base64
from memframe.core.edits import MemoryChange, parse_changes
from memframe.core.turns import (
    AIConsent,
    CallRecord,
    KeySessionInfo,
    ProposalRecord,
    Receipt,
    ToolOutcome,
    TurnResult,
)
from memframe.core.types import RecallStatus


class AIConsentOut(_Out):
    enabled: bool
    revision: int = Field(description="Bumped by every change; retires admissions taken before it.")

    @classmethod
    def of(cls, consent: AIConsent) -> AIConsentOut:
        return cls(enabled=consent.enabled, revision=consent.revision)

    def to_consent(self) -> AIConsent:
        return AIConsent(self.enabled, self.revision)


class AIConsentIn(_In):
    enabled: bool


class KeySessionIn(_In):
    """The workspace key, base64: kept only in the server's memory, never written anywhere."""

    key: str = Field(json_schema_extra={"contentEncoding": "base64"})

    @field_validator("key")
    @classmethod
    def _strict(cls, value: str) -> str:
        decode_base64(value)
        return value


class KeySessionOut(_Out):
    id: str
    workspace_id: str
    expires_at: float
    idle_timeout: float

    @classmethod
    def of(cls, info: KeySessionInfo) -> KeySessionOut:
        return cls(
            id=info.id, workspace_id=info.workspace_id, expires_at=info.expires_at, idle_timeout=info.idle_timeout
        )


class MessageIn(_In):
    workspace: str = Field(description="The workspace the conversation belongs to.")
    text: str = Field(min_length=1, max_length=100_000)


class CallRecordOut(_Out):
    call_index: int
    status: RecallStatus
    revision: int | None


class ToolOutcomeOut(_Out):
    tool: str
    kind: str
    message: str
    version: int | None = None
    proposal_id: str | None = None


class TurnOut(_Out):
    answer: str
    admission_id: str
    calls: list[CallRecordOut]
    outcomes: list[ToolOutcomeOut]
    cut_off: bool = False
    failure: str | None = None

    @classmethod
    def of(cls, result: TurnResult) -> TurnOut:
        return cls(
            answer=result.answer,
            cut_off=result.cut_off,
            failure=result.failure,
            admission_id=result.admission_id,
            calls=[CallRecordOut(call_index=c.call_index, status=c.status, revision=c.revision) for c in result.calls],
            outcomes=[
                ToolOutcomeOut(
                    tool=o.tool, kind=o.kind, message=o.message, version=o.version, proposal_id=o.proposal_id
                )
                for o in result.outcomes
            ],
        )

    def result(self) -> TurnResult:
        return TurnResult(
            answer=self.answer,
            admission_id=self.admission_id,
            calls=[CallRecord(c.call_index, c.status, c.revision) for c in self.calls],
            outcomes=[ToolOutcome(o.tool, o.kind, o.message, o.version, o.proposal_id) for o in self.outcomes],
            cut_off=self.cut_off,
            failure=self.failure,
        )


class ReceiptOut(_Out):
    admission_id: str
    call_index: int
    status: RecallStatus
    revision: int | None
    created_at: float

    @classmethod
    def of(cls, r: Receipt) -> ReceiptOut:
        return cls(
            admission_id=r.admission_id,
            call_index=r.call_index,
            status=r.status,
            revision=r.revision,
            created_at=r.created_at,
        )


class ReceiptList(_Out):
    receipts: list[ReceiptOut]


class SealedMessageOut(_Out):
    role: Literal["user", "assistant"]
    ciphertext: str = Field(json_schema_extra={"contentEncoding": "base64"})


class TranscriptOut(_Out):
    messages: list[SealedMessageOut]


class ProposalOut(_Out):
    id: str
    workspace_id: str
    admission_id: str
    base_version: int
    clear_generation: int
    reason: str
    sealed_edits: str = Field(json_schema_extra={"contentEncoding": "base64"})
    status: str
    created_at: float

    @classmethod
    def of(cls, p: ProposalRecord) -> ProposalOut:
        return cls(
            id=p.id,
            workspace_id=p.workspace_id,
            admission_id=p.admission_id,
            base_version=p.base_version,
            clear_generation=p.clear_generation,
            reason=p.reason,
            sealed_edits=encode_base64(p.sealed_edits) or "",
            status=p.status,
            created_at=p.created_at,
        )

    def record(self) -> ProposalRecord:
        return ProposalRecord(
            self.id,
            self.workspace_id,
            self.admission_id,
            self.base_version,
            self.clear_generation,
            self.reason,
            decode_base64(self.sealed_edits),
            self.status,
            self.created_at,
        )


class ProposalList(_Out):
    proposals: list[ProposalOut]


class ProposalResolveIn(_In):
    status: Literal["applied", "dismissed"]


# --- automation ------------------------------------------------------------------------


class RecallOut(_Out):
    status: RecallStatus
    revision: int | None
    text: str | None = Field(None, description="Only when the status is `provided`.")


class CurrentMemoryOut(_Out):
    version: int
    text: str


class EditsIn(_In):
    """At most five exact one-line edits, validated by the same rules as the tool."""

    edits: list[dict[str, Any]] = Field(max_length=5)

    def changes(self) -> list[MemoryChange]:
        return parse_changes({"edits": self.edits})


class CaptureIn(EditsIn):
    expected_version: int = Field(ge=0, le=MAX_NUMBER)


class ProposeIn(EditsIn):
    base_version: int = Field(ge=0, le=MAX_NUMBER)
    reason: Literal["read_only", "conflict"]


class CaptureOut(_Out):
    admission_id: str
    version: int
    replayed: bool


class TranscriptIn(_In):
    role: Literal["user", "assistant"]
    content: str = Field(max_length=200_000)


class HistoryOut(_Out):
    messages: list[dict[str, str]]


class DocumentEntry(_Out):
    path: str
    version: int


class DocumentList(_Out):
    documents: list[DocumentEntry]


class SearchHit(_Out):
    path: str
    version: int
    snippet: str


class SearchOut(_Out):
    hits: list[SearchHit]


class DocumentOut(_Out):
    path: str
    version: int
    text: str


class DocumentIn(_In):
    text: str = Field(max_length=1_000_000)


class MoveIn(_In):
    source: str
    target: str
    base_version: int = Field(ge=0, le=MAX_NUMBER)


class RestoreIn(_In):
    path: str
    base_version: int = Field(ge=0, le=MAX_NUMBER)
