"""Two clients race through saves, clears, undos and mode changes against a reference model.

The model is the contract in miniature: a write succeeds exactly when its base
is the current version, gets exactly the next version, and a conflict changes
nothing. At every step the service must agree with the model, and every
acknowledged revision must still decrypt to exactly the text that was saved.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from memframe import sealing
from memframe.backend.local import LocalBackend
from memframe.core.errors import PolicyConflict, VersionConflict
from memframe.core.types import Mode, Operation
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
clients = st.sampled_from([0, 1])


@pytest.mark.race
class TwoClients(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        self.service = MemoryService(Path(self.tmp.name) / "m.db")
        self.service.accounts.add_user(LOCAL_USER)
        self.service.accounts.create_workspace("ws", LOCAL_USER)
        key = sealing.new_key()
        self.clients = [LocalBackend(self.service, "ws", key) for _ in range(2)]
        self.base = [0, 0]  # each client's idea of the server version
        self.policy_seen = [0, 0]
        # the reference model
        self.versions: dict[int, str] = {}
        self.ops: dict[int, Operation] = {}
        self.mode, self.revision, self.generation = Mode.READ_ONLY, 0, 0

    def teardown(self) -> None:
        for c in self.clients:
            c.close()
        self.service.close()
        self.tmp.cleanup()

    @property
    def current(self) -> int:
        return max(self.versions, default=0)

    def _write(self, who: int, text: str, op: Operation, do) -> None:  # type: ignore[no-untyped-def]
        expected_ok = self.base[who] == self.current
        try:
            info = do()
        except VersionConflict as exc:
            assert not expected_ok, "a write against the current version was refused"
            assert exc.current_version == self.current
            self.base[who] = exc.current_version
            return
        assert expected_ok, "a write against a stale base was accepted"
        assert info.version == self.current + 1, "acknowledged version is not exact"
        self.versions[info.version] = text
        self.ops[info.version] = op
        self.base[who] = info.version
        if op is Operation.CLEAR:
            self.generation += 1

    @rule(who=clients, text=texts)
    def save(self, who: int, text: str) -> None:
        self._write(who, text, Operation.SAVE, lambda: self.clients[who].save(text, self.base[who]))

    @rule(who=clients)
    def clear(self, who: int) -> None:
        self._write(who, "", Operation.CLEAR, lambda: self.clients[who].clear(self.base[who]))

    @precondition(lambda self: bool(self.versions))
    @rule(who=clients, data=st.data())
    def undo(self, who: int, data: st.DataObject) -> None:
        revision = data.draw(st.sampled_from(sorted(self.versions)))
        self._write(
            who,
            self.versions[revision],
            Operation.UNDO,
            lambda: self.clients[who].undo(revision, self.base[who]),
        )

    @rule(who=clients)
    def reload(self, who: int) -> None:
        doc = self.clients[who].load()
        assert doc.version == self.current
        assert doc.text == self.versions.get(self.current, "")
        self.base[who] = doc.version

    @rule(who=clients, mode=st.sampled_from(list(Mode)))
    def set_mode(self, who: int, mode: Mode) -> None:
        try:
            policy = self.clients[who].set_policy(mode, self.policy_seen[who])
        except PolicyConflict as exc:
            assert self.policy_seen[who] != self.revision
            assert exc.current_revision == self.revision
            self.policy_seen[who] = exc.current_revision
            return
        assert self.policy_seen[who] == self.revision
        if mode is not self.mode:
            self.mode, self.revision = mode, self.revision + 1
        assert (policy.mode, policy.revision) == (self.mode, self.revision)
        self.policy_seen[who] = self.revision

    @invariant()
    def policy_matches(self) -> None:
        policy = self.clients[0].get_policy()
        assert (policy.mode, policy.revision, policy.clear_generation) == (
            self.mode,
            self.revision,
            self.generation,
        )

    @invariant()
    def no_acknowledged_write_is_lost(self) -> None:
        history = self.clients[1].history(limit=1000)
        assert [r.version for r in history] == sorted(self.versions, reverse=True)
        assert {r.version: r.operation for r in history} == self.ops
        for version, text in self.versions.items():
            assert self.clients[0].read_revision(version) == text


TwoClients.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
test_two_clients = TwoClients.TestCase
