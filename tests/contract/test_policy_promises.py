"""M1–M3 and C2 with the contract's numbers: what the policy row holds after each change.

Written for survivors of `make mutate` (issue 18): every test compared a revision with the one it
had just read, so a change that bumped the revision by two, or moved it back, went unnoticed, and
the Clear generation's statement was only ever tried on a workspace that had never been cleared.
"""

from __future__ import annotations

import pytest

from memframe import sealing
from memframe.backend.local import LocalBackend
from memframe.core.errors import PolicyConflict
from memframe.core.types import MEMORY_PATH, Mode, Policy
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.service.policy import ADVANCE_CLEAR_GENERATION


def test_M3_every_mode_change_bumps_the_policy_revision_by_exactly_one(service: MemoryService) -> None:
    assert service.get_policy(LOCAL_USER, "ws") == Policy(Mode.READ_ONLY, 0, 0)
    assert service.set_policy(LOCAL_USER, "ws", Mode.AUTO, 0) == Policy(Mode.AUTO, 1, 0)
    assert service.get_policy(LOCAL_USER, "ws") == Policy(Mode.AUTO, 1, 0)
    assert service.set_policy(LOCAL_USER, "ws", Mode.OFF, 1) == Policy(Mode.OFF, 2, 0)
    assert service.get_policy(LOCAL_USER, "ws") == Policy(Mode.OFF, 2, 0)
    # choosing the mode already set is no change: the revision stays
    assert service.set_policy(LOCAL_USER, "ws", Mode.OFF, 2) == Policy(Mode.OFF, 2, 0)


def test_M2_a_stale_revision_is_a_conflict_naming_the_current_one(service: MemoryService) -> None:
    service.set_policy(LOCAL_USER, "ws", Mode.AUTO, 0)
    with pytest.raises(PolicyConflict) as conflict:
        service.set_policy(LOCAL_USER, "ws", Mode.OFF, 0)
    assert conflict.value.status == 409
    assert service.get_policy(LOCAL_USER, "ws") == Policy(Mode.AUTO, 1, 0)


def test_C2_a_later_clear_whose_row_does_not_exist_does_not_advance_the_generation(service: MemoryService) -> None:
    """The statement looks for this Clear's own version row, not any Clear of the memory."""
    key = sealing.new_key()
    person = LocalBackend(service, "ws", key)
    person.save("- a\n", 0)
    person.clear(1)  # version 2, a real Clear: generation 1
    assert service.get_policy(LOCAL_USER, "ws").clear_generation == 1
    with service.db.write() as conn:
        conn.execute(ADVANCE_CLEAR_GENERATION, {"ws": "ws", "path": MEMORY_PATH, "version": 3})
    assert service.get_policy(LOCAL_USER, "ws").clear_generation == 1
    person.save("- b\n", 2)
    person.clear(3)
    assert service.get_policy(LOCAL_USER, "ws") == Policy(Mode.READ_ONLY, 0, 2)
