"""A key rotation on the wire: the sealed records a client re-seals, its plan, and what it destroyed.

Everything sealed travels as base64 ciphertext; no key or text is ever part of a rotation.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from memframe.core.rotation import Destroyed, Rotation, RotationPart, RotationPlan, SealedRecords
from memframe.wire.base import Sealed, WireIn, WireOut, decode_base64, encode_base64


class RotationOut(WireOut):
    number: int
    rotated_at: float
    rotated_by: str
    sealed_record: str | None = Field(default=None, json_schema_extra={"contentEncoding": "base64"})

    @classmethod
    def of(cls, rotation: Rotation | None) -> RotationOut | None:
        if rotation is None:
            return None
        return cls(
            number=rotation.number,
            rotated_at=rotation.rotated_at,
            rotated_by=rotation.rotated_by,
            sealed_record=encode_base64(rotation.sealed_record),
        )

    def to_rotation(self) -> Rotation:
        record = None if self.sealed_record is None else decode_base64(self.sealed_record)
        return Rotation(self.number, self.rotated_at, self.rotated_by, record)


class LatestRotationOut(WireOut):
    rotation: RotationOut | None


class SealedRecordsOut(WireOut):
    key_check: str | None
    #: [conversation id, seq, role, base64 ciphertext]
    messages: list[tuple[str, int, str, str]]
    #: [proposal id, base64 ciphertext]
    proposals: list[tuple[str, str]]
    rotation: RotationOut | None

    @classmethod
    def of(cls, records: SealedRecords) -> SealedRecordsOut:
        return cls(
            key_check=records.key_check,
            messages=[(c, s, r, encode_base64(b) or "") for c, s, r, b in records.messages],
            proposals=[(p, encode_base64(b) or "") for p, b in records.proposals],
            rotation=RotationOut.of(records.rotation),
        )

    def to_records(self) -> SealedRecords:
        return SealedRecords(
            self.key_check,
            [(c, s, r, decode_base64(b)) for c, s, r, b in self.messages],
            [(p, decode_base64(b)) for p, b in self.proposals],
            None if self.rotation is None else self.rotation.to_rotation(),
        )


class ResealedVersion(WireIn):
    path: str
    version: int
    ciphertext: Sealed | None = Field(description="base64; null for a deletion's tombstone")


class ResealedMessage(WireIn):
    conversation_id: str
    seq: int
    ciphertext: Sealed


class ResealedProposal(WireIn):
    id: str
    ciphertext: Sealed


class ResealedNote(WireIn):
    path: str
    version: int
    note: Sealed


class RotationPartIn(WireIn):
    """Some of a plan's re-sealed records, uploaded ahead of a rotation too large for one request."""

    versions: list[ResealedVersion] = Field(default_factory=list)
    messages: list[ResealedMessage] = Field(default_factory=list)
    proposals: list[ResealedProposal] = Field(default_factory=list)

    def to_part(self) -> RotationPart:
        return RotationPart(
            versions=[
                (v.path, v.version, None if v.ciphertext is None else decode_base64(v.ciphertext))
                for v in self.versions
            ],
            messages=[(m.conversation_id, m.seq, decode_base64(m.ciphertext)) for m in self.messages],
            proposals=[(p.id, decode_base64(p.ciphertext)) for p in self.proposals],
        )


class RotationUploadOut(WireOut):
    upload_id: str


class RotationPartOut(WireOut):
    staged: int


#: What one request of a rotation carries at most, in JSON: well under the server's body bound.
PART_BYTES = 1024 * 1024
_RECORDS = ("versions", "messages", "proposals")


class RotationIn(RotationPartIn):
    """A rotation plan (`memframe.core.rotation.RotationPlan`), its ciphertexts in base64. With
    `uploadId`, the records that upload's parts staged join the ones sent here."""

    old_key_check: str = Field(min_length=64, max_length=64)
    new_key_check: str = Field(min_length=64, max_length=64)
    heads: dict[str, int]
    sealed_record: Sealed
    forget_before: dict[str, int] = Field(default_factory=dict)
    forget_conversations: bool = False
    upload_id: str | None = Field(default=None, max_length=100)
    notes: list[ResealedNote] = Field(default_factory=list, description="Every kept source note, re-sealed")

    @staticmethod
    def body(plan: RotationPlan) -> dict[str, Any]:
        """What a client sends for `plan`."""
        return {
            "oldKeyCheck": plan.old_key_check,
            "newKeyCheck": plan.new_key_check,
            "heads": plan.heads,
            "versions": [{"path": p, "version": v, "ciphertext": encode_base64(b)} for p, v, b in plan.versions],
            "messages": [{"conversationId": c, "seq": s, "ciphertext": encode_base64(b)} for c, s, b in plan.messages],
            "proposals": [{"id": p, "ciphertext": encode_base64(b)} for p, b in plan.proposals],
            "sealedRecord": encode_base64(plan.sealed_record),
            "forgetBefore": plan.forget_before,
            "forgetConversations": plan.forget_conversations,
            "notes": [{"path": p, "version": v, "note": encode_base64(b)} for p, v, b in plan.notes],
        }

    @staticmethod
    def split(plan: RotationPlan, limit: int = PART_BYTES) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """`plan`'s body and no parts when its JSON fits in `limit` bytes; else the body without its
        records, and the records in parts of at most `limit` bytes each (one record alone may be
        more), to upload ahead of it."""
        body = RotationIn.body(plan)
        if len(json.dumps(body)) <= limit:
            return body, []
        parts: list[dict[str, Any]] = []
        used = limit
        for kind in _RECORDS:
            for record in body[kind]:
                size = len(json.dumps(record)) + 2
                if used + size > limit:
                    parts.append({k: [] for k in _RECORDS})
                    used = 0
                parts[-1][kind].append(record)
                used += size
        return {**body, **{k: [] for k in _RECORDS}}, parts

    def to_plan(self) -> RotationPlan:
        part = self.to_part()
        return RotationPlan(
            old_key_check=self.old_key_check,
            new_key_check=self.new_key_check,
            heads=dict(self.heads),
            versions=part.versions,
            messages=part.messages,
            proposals=part.proposals,
            sealed_record=decode_base64(self.sealed_record),
            forget_before=dict(self.forget_before),
            forget_conversations=self.forget_conversations,
            notes=[(n.path, n.version, decode_base64(n.note)) for n in self.notes],
        )


class DestroyedOut(WireOut):
    rotated_at: float
    rotated_by: str
    #: path -> [first, last, count] of the versions deleted
    versions: dict[str, tuple[int, int, int]]
    messages: int
    proposals: int
    resealed_versions: int
    resealed_messages: int
    resealed_proposals: int
    key_sessions_revoked: int
    disk: str

    def to_destroyed(self) -> Destroyed:
        return self.to_core(Destroyed, versions={p: tuple(v) for p, v in self.versions.items()})
