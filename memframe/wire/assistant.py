"""The people's Assistant routes: AI consent, key sessions, sends, receipts, transcript, proposals.

A person's message and the Assistant's answer travel as text (the model must
read them); memory never travels here, and proposals and transcripts travel sealed.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from memframe.core.blame import CaptureOrigin
from memframe.core.turns import (
    AIConsent,
    CallRecord,
    KeySessionInfo,
    OutcomeKind,
    ProposalReason,
    ProposalRecord,
    ProposalStatus,
    Receipt,
    ToolOutcome,
    TurnResult,
)
from memframe.core.types import RecallStatus
from memframe.wire.base import Sealed, WireIn, WireOut, decode_base64


class AIConsentOut(WireOut):
    enabled: bool
    revision: int = Field(description="Bumped by every change; retires admissions taken before it.")

    def to_consent(self) -> AIConsent:
        return self.to_core(AIConsent)


class AIConsentIn(WireIn):
    enabled: bool


class KeySessionIn(WireIn):
    """The workspace key, base64: kept only in the server's memory, never written anywhere."""

    key: str = Field(json_schema_extra={"contentEncoding": "base64"})
    holdSeconds: float | None = Field(
        default=None,
        gt=0,
        description="Hold the key this long whether used or not (at most the server's key-session lifetime), "
        "for chat clients: `memframe key unlock --for`. Without it the session ends after idling.",
    )

    @field_validator("key")
    @classmethod
    def _strict(cls, value: str) -> str:
        decode_base64(value)
        return value


class KeySessionOut(WireOut):
    # A key session's id and lifetime; who opened it and when stay on the server.

    id: str
    workspace_id: str
    expires_at: float
    idle_timeout: float

    def to_info(self) -> KeySessionInfo:
        return self.to_core(KeySessionInfo, user_id="", created_at=0.0)


class MessageIn(WireIn):
    workspace: str = Field(description="The workspace the conversation belongs to.")
    text: str = Field(min_length=1, max_length=100_000)


class CallRecordOut(WireOut):
    call_index: int
    status: RecallStatus
    revision: int | None


class ToolOutcomeOut(WireOut):
    tool: str
    kind: OutcomeKind
    message: str
    version: int | None = None
    proposal_id: str | None = None


class TurnOut(WireOut):
    answer: str
    admission_id: str
    calls: list[CallRecordOut]
    outcomes: list[ToolOutcomeOut]
    cut_off: bool = False
    ended_early: bool = False
    failure: str | None = None

    def result(self) -> TurnResult:
        return self.to_core(
            TurnResult,
            calls=[c.to_core(CallRecord) for c in self.calls],
            outcomes=[o.to_core(ToolOutcome) for o in self.outcomes],
        )


class ReceiptOut(WireOut):
    admission_id: str
    call_index: int
    status: RecallStatus
    revision: int | None
    created_at: float

    def to_receipt(self) -> Receipt:
        return self.to_core(Receipt)


class ReceiptList(WireOut):
    receipts: list[ReceiptOut]


class CaptureOriginOut(WireOut):
    version: int
    admission_id: str
    conversation_id: str
    message_seq: int | None

    def to_origin(self) -> CaptureOrigin:
        return self.to_core(CaptureOrigin)


class CaptureOriginList(WireOut):
    captures: list[CaptureOriginOut]


class SealedMessageOut(WireOut):
    role: Literal["user", "assistant"]
    ciphertext: Sealed = Field(json_schema_extra={"contentEncoding": "base64"})


class TranscriptOut(WireOut):
    messages: list[SealedMessageOut]


class ProposalOut(WireOut):
    id: str
    workspace_id: str
    admission_id: str
    base_version: int
    clear_generation: int
    reason: ProposalReason
    sealed_edits: Sealed = Field(json_schema_extra={"contentEncoding": "base64"})
    status: ProposalStatus
    created_at: float

    def record(self) -> ProposalRecord:
        return self.to_core(ProposalRecord, sealed_edits=decode_base64(self.sealed_edits))


class ProposalList(WireOut):
    proposals: list[ProposalOut]


class ProposalResolveIn(WireIn):
    status: Literal["applied", "dismissed"]


class KeyCheck(BaseModel):
    """HMAC-SHA256(key, "memframe key check v1" + workspace id): proves a key, decrypts nothing."""

    keyCheck: str | None = Field(default=None, description="64 hex digits; null until a key holder writes it.")
