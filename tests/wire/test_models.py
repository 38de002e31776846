"""The wire models read the core dataclasses as they are and give them back unchanged."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from memframe.core.turns import AIConsent, CallRecord, KeySessionInfo, ProposalRecord, Receipt, ToolOutcome, TurnResult
from memframe.core.types import Author, Mode, Operation, Policy, RecallStatus, StoredVersion, VersionInfo
from memframe.wire.assistant import AIConsentOut, KeySessionOut, ProposalOut, ReceiptOut, TurnOut
from memframe.wire.base import WireOut
from memframe.wire.files import PolicyOut, StoredVersionOut, VersionOut

INFO = VersionInfo(3, 1_798_000_000.5, Author.PERSON, "alice", Operation.UNDO, 12, "ab" * 32, restored_from=1)
TURN = TurnResult(
    "Remembered.",
    "adm_1",
    [CallRecord(0, RecallStatus.PROVIDED, 1), CallRecord(1, RecallStatus.PENDING, None)],
    [ToolOutcome("remember_in_memory", "remembered", "Remembered (memory version 2).", 2)],
)
IMPORTED = VersionInfo(4, 1_798_000_001.0, Author.PERSON, "alice", Operation.SAVE, 9, "cd" * 32, None, b"\x00note")
PROPOSAL = ProposalRecord("prop_1", "ws", "adm_1", 2, 0, "read_only", b"\x00sealed\xff", "pending", 5.0)

#: (wire model, core record, how the model gives the record back)
ROUND_TRIPS: list[tuple[type[WireOut], Any, Any]] = [
    (VersionOut, INFO, VersionOut.to_info),
    (VersionOut, IMPORTED, VersionOut.to_info),
    (PolicyOut, Policy(Mode.AUTO, 4, 2), lambda out: out.to_core(Policy)),
    (AIConsentOut, AIConsent(True, 7), AIConsentOut.to_consent),
    (ReceiptOut, Receipt("adm_1", 1, RecallStatus.STALE, 3, 9.0), ReceiptOut.to_receipt),
    (TurnOut, TURN, TurnOut.result),
    (ProposalOut, PROPOSAL, ProposalOut.record),
    (StoredVersionOut, StoredVersion(INFO, b"\x01\x02sealed"), StoredVersionOut.to_stored),
    (StoredVersionOut, StoredVersion(INFO, None), StoredVersionOut.to_stored),
]


@pytest.mark.parametrize(("model", "record", "back"), ROUND_TRIPS, ids=lambda v: getattr(v, "__name__", ""))
def test_a_record_survives_the_wire_unchanged(model: type[WireOut], record: Any, back: Any) -> None:
    """Server side: model_validate(record) → JSON; client side: JSON → model → the same record."""
    sent = model.model_validate(record).model_dump_json()
    assert back(model.model_validate_json(sent)) == record


def test_field_names_are_camel_case_on_the_wire() -> None:
    assert list(VersionOut.model_validate(INFO).model_dump()) == [
        "version",
        "createdAt",
        "author",
        "actor",
        "operation",
        "size",
        "contentHash",
        "restoredFrom",
        "sourceNote",
    ]
    turn = TurnOut.model_validate(TURN).model_dump(mode="json")
    assert turn["calls"][1] == {"callIndex": 1, "status": "pending", "revision": None}
    assert turn["outcomes"][0]["proposalId"] is None


def test_sealed_bytes_travel_as_base64_and_a_bad_answer_is_refused() -> None:
    out = ProposalOut.model_validate(PROPOSAL).model_dump(mode="json")
    assert out["sealedEdits"] == "AHNlYWxlZP8="
    with pytest.raises(ValidationError):
        ProposalOut.model_validate({**out, "sealedEdits": "not base64!"})
    stored = StoredVersionOut.model_validate(StoredVersion(INFO, b"x")).model_dump(mode="json")
    with pytest.raises(ValidationError):
        StoredVersionOut.model_validate({**stored, "ciphertext": "eA"})  # unpadded


def test_a_key_session_answer_names_no_owner() -> None:
    info = KeySessionInfo("ks_1", "ws", "alice", 1.0, 2.0, 3.0)
    sent = KeySessionOut.model_validate(info).model_dump(mode="json")
    assert sent == {"id": "ks_1", "workspaceId": "ws", "expiresAt": 2.0, "idleTimeout": 3.0}
    assert KeySessionOut.model_validate(sent).to_info() == KeySessionInfo("ks_1", "ws", "", 0.0, 2.0, 3.0)


def test_a_tool_outcome_with_a_proposal_round_trips() -> None:
    outcome = ToolOutcome("remember_in_memory", "proposed", "Waits for review.", None, "prop_1")
    turn = TurnResult("ok", "adm_2", [], [outcome])
    assert TurnOut.model_validate_json(TurnOut.model_validate(turn).model_dump_json()).result() == turn
