"""A3, A5 and M4 at the admission: the credential's shape, its secrecy, and consent's default.

Written for survivors of `make mutate` (issue 18): malformed credentials were only ever refused
further on (an unknown admission), the nonce's absence from an admission's repr was never
checked, and a missing consent row was never read for its revision.
"""

from __future__ import annotations

import pytest

from memframe.core.edits import MemoryChange
from memframe.core.errors import InvalidInput, Unauthorized
from memframe.core.turns import AIConsent
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.service.admissions import parse_credential
from tests.assistant.conftest import Stage


def test_A3_a_delivery_credential_reads_back_as_the_admission_and_its_nonce(stage: Stage) -> None:
    a = stage.admit()
    assert a.credential == f"cred_{a.id}.{a.credential_nonce}"
    assert parse_credential(a.credential) == (a.id, a.credential_nonce)


@pytest.mark.parametrize(
    "credential",
    [None, "", "cred_", "cred_adm", "cred_adm.", "cred_.nonce", "adm.nonce", "bearer cred_adm.nonce"],
)
def test_A5_anything_but_a_whole_credential_is_unauthorized(credential: str | None) -> None:
    with pytest.raises(Unauthorized):
        parse_credential(credential)


def test_A3_the_nonce_never_appears_in_an_admissions_repr(stage: Stage) -> None:
    """The nonce is the secret half of the credential: a logged admission must not carry it."""
    a = stage.admit()
    assert a.credential_nonce not in repr(a) and a.id in repr(a)


def test_M4_workspace_ai_is_off_at_revision_0_until_a_person_turns_it_on(service: MemoryService) -> None:
    assert service.assistant.ai_consent(LOCAL_USER, "ws") == AIConsent(False, 0)
    assert service.assistant.set_ai(LOCAL_USER, "ws", True) == AIConsent(True, 1)
    assert service.assistant.ai_consent(LOCAL_USER, "ws") == AIConsent(True, 1)


def _sql(stage: Stage, statement: str) -> None:
    with stage.service.db.write() as conn:
        conn.execute(statement)


#: each falsifies one condition a turn's credential must still meet before it may read or propose
_NO_LONGER_HOLDS = {
    "a newer message took over": lambda s: s.admit(),
    "the credential slot is gone": lambda s: _sql(s, "DELETE FROM agent_delivery_credentials"),
    "the slot carries another nonce": lambda s: _sql(s, "UPDATE agent_delivery_credentials SET credential_nonce = 'x'"),
    "15 minutes have passed": lambda s: s.clock.advance(900),
    "the person left the workspace": lambda s: _sql(s, "DELETE FROM memberships"),
    "workspace AI was switched off": lambda s: s.assistant.set_ai(LOCAL_USER, "ws", False),
    "workspace AI was switched off and on": lambda s: (
        s.assistant.set_ai(LOCAL_USER, "ws", False),
        s.assistant.set_ai(LOCAL_USER, "ws", True),
    ),
}


def _propose(stage: Stage, credential: str) -> object:
    return stage.assistant.propose(
        "ws", credential, changes=[MemoryChange("add", "- x")], base_version=1, reason="read_only"
    )


@pytest.mark.parametrize("change", sorted(_NO_LONGER_HOLDS))
def test_A6_a_turn_whose_credential_no_longer_holds_proposes_nothing(stage: Stage, change: str) -> None:
    stage.person.save("# Memory\n", 0)
    a = stage.admit()
    _NO_LONGER_HOLDS[change](stage)
    with pytest.raises(Unauthorized, match="no longer holds"):
        _propose(stage, a.credential)
    with stage.service.db.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM workspace_memory_proposals").fetchone()[0] == 0


def test_A6_a_turn_proposes_until_the_end_of_its_original_15_minutes(stage: Stage) -> None:
    stage.person.save("# Memory\n", 0)
    a = stage.admit()
    stage.clock.advance(899)
    assert _propose(stage, a.credential) is not None


def test_A1_a_conversation_id_used_in_two_workspaces_is_told_apart_by_the_workspace(stage: Stage) -> None:
    stage.service.accounts.create_workspace("ws2", LOCAL_USER)
    stage.assistant.set_ai(LOCAL_USER, "ws2", True)
    stage.admit("conv")
    stage.assistant.admit(LOCAL_USER, "ws2", "conv", idempotency_key="ws2-send", key_session_id=None, memory_state=None)
    with pytest.raises(InvalidInput, match="several workspaces"):
        stage.assistant.receipts(LOCAL_USER, "conv")
    assert stage.assistant.receipts(LOCAL_USER, "conv", "ws") == []
    assert stage.assistant.receipts(LOCAL_USER, "conv", "ws2") == []
