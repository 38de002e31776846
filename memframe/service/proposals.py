"""Proposals: a change the Assistant may not write becomes one a person reviews.

In Read only, and when a capture meets newer human text, the Assistant's edits are sealed and kept
with the Clear generation they were made under, so a person applies them (as their own Save) or
dismisses them, and one made before a Clear can never be applied.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections.abc import Sequence
from typing import Any

from memframe import sealing
from memframe.core.edits import MemoryChange
from memframe.core.errors import CaptureRefused, InvalidInput, NotFound, ProposalRetired
from memframe.core.grounding import refuse_frame_residue
from memframe.core.turns import ProposalReason, ProposalRecord, ProposalStatus
from memframe.core.types import Mode
from memframe.service.accounts import require_member
from memframe.service.admissions import AssistantBase
from memframe.service.policy import read_policy


class ProposalsMixin(AssistantBase):
    def propose(
        self,
        workspace_id: str,
        credential: str,
        *,
        changes: Sequence[MemoryChange],
        base_version: int,
        reason: str,
    ) -> ProposalRecord:
        """A reviewable change for a person: sealed, tagged with the generation it was made under."""
        why = _proposal_reason(reason)
        with self.db.read() as conn:
            admission = self._live_admission_for(conn, workspace_id, credential)
            current_mode = read_policy(conn, workspace_id).mode
        # The current policy, not the mode frozen at admission: Off means nothing happens, even
        # for a turn admitted in Auto or Read only before the switch.
        if Mode.OFF in (admission.mode, current_mode):
            raise CaptureRefused("Memory is Off; the Assistant proposes nothing.")
        refuse_frame_residue(changes)  # a line from the frame around memory is junk, even for review
        key = self.key_sessions.resolve(admission.key_session_id, workspace_id)
        proposal_id = "prop_" + secrets.token_hex(8)
        sealed = sealing.seal_proposal(key, _edits_json(changes), workspace_id=workspace_id, proposal_id=proposal_id)
        now = self.db.clock()
        record = ProposalRecord(
            proposal_id,
            workspace_id,
            admission.id,
            base_version,
            admission.clear_generation,
            why,
            sealed,
            ProposalStatus.PENDING,
            now,
        )
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO workspace_memory_proposals (id, workspace_id, admission_id, base_version,"
                " clear_generation, reason, sealed_edits, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                dataclasses.astuple(record),
            )
        return record

    def proposals(
        self, user: str, workspace_id: str, *, status: ProposalStatus = ProposalStatus.PENDING
    ) -> list[ProposalRecord]:
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            return [
                _proposal_record(row)
                for row in conn.execute(
                    "SELECT id, workspace_id, admission_id, base_version, clear_generation, reason,"
                    " sealed_edits, status, created_at FROM workspace_memory_proposals"
                    " WHERE workspace_id = ? AND status = ? ORDER BY created_at, id",
                    (workspace_id, status),
                )
            ]

    def resolve_proposal(self, user: str, workspace_id: str, proposal_id: str, status: str) -> None:
        """A person marks a proposal applied (after their own Save) or dismissed.

        A proposal made before a Clear cannot be marked applied, whoever asks: the Clear fenced
        the automatic work it came from. It can still be dismissed.
        """
        if status not in (ProposalStatus.APPLIED, ProposalStatus.DISMISSED):
            raise InvalidInput("A proposal is resolved as applied or dismissed.")
        with self.db.write() as conn:
            require_member(conn, user, workspace_id)
            if status == "applied":
                made_under = conn.execute(
                    "SELECT clear_generation FROM workspace_memory_proposals"
                    " WHERE id = ? AND workspace_id = ? AND status = 'pending'",
                    (proposal_id, workspace_id),
                ).fetchone()
                if made_under is not None and made_under[0] != read_policy(conn, workspace_id).clear_generation:
                    raise ProposalRetired(
                        "This proposal was made before the memory was cleared, so it cannot be applied; dismiss it."
                    )
            cur = conn.execute(
                "UPDATE workspace_memory_proposals SET status = ?, resolved_at = ?"
                " WHERE id = ? AND workspace_id = ? AND status = 'pending'",
                (status, self.db.clock(), proposal_id, workspace_id),
            )
            if cur.rowcount != 1:
                raise NotFound("No such pending proposal.")


def edit_dicts(changes: Sequence[MemoryChange]) -> list[dict[str, str]]:
    """The edits as the JSON objects a proposal seals and a capture's request hash covers."""
    return [c.as_dict() for c in changes]


def _edits_json(changes: Sequence[MemoryChange]) -> str:
    return json.dumps(edit_dicts(changes), ensure_ascii=False, sort_keys=True)


def _proposal_reason(reason: str) -> ProposalReason:
    try:
        return ProposalReason(reason)
    except ValueError:
        raise InvalidInput("A proposal's reason is read_only or conflict.") from None


def _proposal_record(row: Sequence[Any]) -> ProposalRecord:
    """A stored row, with its reason and status as the contract's values rather than bare text."""
    pid, workspace_id, admission_id, base_version, generation, reason, sealed, status, created_at = row
    return ProposalRecord(
        pid,
        workspace_id,
        admission_id,
        base_version,
        generation,
        ProposalReason(reason),
        sealed,
        ProposalStatus(status),
        created_at,
    )
