"""What the Assistant left behind, opened on this machine: receipts, transcripts, proposals.

The server keeps them sealed or as ids only; this mixin of `SealedBackend` opens them with the
person's key, so a conversation, the message behind a capture or a proposal's edits are read
here and nowhere else. Applying a proposal is the person's own Save.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from memframe import sealing
from memframe.backend.base import MemoryStore
from memframe.core.errors import MemframeError, NotFound, ProposalNotMarked, ProposalRetired, VersionConflict
from memframe.core.paths import proposal_path
from memframe.core.types import MemoryDocument, Policy, VersionInfo

if TYPE_CHECKING:  # the Assistant's records and the edit parser load with the first proposal, not at start
    from memframe.core.blame import CaptureMessage
    from memframe.core.turns import Proposal, ProposalRecord, Receipt


class AssistantRecords:
    """Receipts, transcripts, capture messages and proposals, for `SealedBackend`."""

    store: MemoryStore
    _key: bytes

    @property
    def workspace_id(self) -> str:
        raise NotImplementedError  # SealedBackend's

    def load(self) -> MemoryDocument:
        raise NotImplementedError  # SealedBackend's

    def save(self, text: str, base_version: int, *, revive: bool = False) -> VersionInfo:
        raise NotImplementedError  # SealedBackend's

    def get_policy(self) -> Policy:
        raise NotImplementedError  # SealedBackend's

    def receipts(self, conversation_id: str) -> list[Receipt]:
        return self.store.receipts(conversation_id)

    def transcript(self, conversation_id: str) -> list[tuple[str, str]]:
        """Each message opens only at its position and role (see `sealing.open_transcript`)."""
        return sealing.open_transcript(
            self._key, self.workspace_id, conversation_id, self.store.transcript(conversation_id)
        )

    def capture_messages(self) -> dict[int, CaptureMessage]:
        from memframe.core.blame import CaptureMessage
        from memframe.core.errors import DecryptionFailed

        found: dict[int, CaptureMessage] = {}
        opened: dict[str, list[tuple[str, str]]] = {}
        for origin in self.store.capture_origins():
            message = None
            if origin.message_seq is not None:
                if origin.conversation_id not in opened:
                    try:
                        opened[origin.conversation_id] = self.transcript(origin.conversation_id)
                    except (NotFound, DecryptionFailed):  # gone, or sealed with another key: no message
                        opened[origin.conversation_id] = []
                rows = opened[origin.conversation_id]
                if 0 < origin.message_seq <= len(rows):
                    message = rows[origin.message_seq - 1][1]
            found[origin.version] = CaptureMessage(origin.conversation_id, origin.admission_id, message)
        return found

    def proposals(self) -> list[Proposal]:
        return [self._open_proposal(record) for record in self.store.proposals()]

    def _open_proposal(self, record: ProposalRecord) -> Proposal:
        from memframe.core.edits import parse_changes
        from memframe.core.turns import Proposal

        raw = sealing.open_proposal(
            self._key,
            record.sealed_edits,
            workspace_id=self.workspace_id,
            proposal_id=record.id,
            legacy_path=proposal_path(record.id),
        )
        return Proposal(
            record.id,
            record.base_version,
            record.clear_generation,
            record.reason,
            tuple(parse_changes(json.loads(raw))),
            record.created_at,
        )

    def apply_proposal(self, proposal_id: str, base_version: int) -> VersionInfo:
        from memframe.core.edits import apply_memory_changes
        from memframe.core.turns import ProposalStatus

        proposal = next((p for p in self.proposals() if p.id == proposal_id), None)
        if proposal is None:
            raise NotFound("No such pending proposal.")
        if proposal.clear_generation != self.get_policy().clear_generation:
            raise ProposalRetired()
        current = self.load()
        if current.version != base_version:
            raise VersionConflict(current.version)
        info = self.save(apply_memory_changes(current.text, list(proposal.changes)), base_version)
        try:
            self.store.resolve_proposal(proposal_id, ProposalStatus.APPLIED)
        except MemframeError as exc:  # the Save landed: say so, with its version, never "not applied"
            raise ProposalNotMarked.landed(info, exc) from None
        return info

    def dismiss_proposal(self, proposal_id: str) -> None:
        from memframe.core.turns import ProposalStatus

        self.store.resolve_proposal(proposal_id, ProposalStatus.DISMISSED)
