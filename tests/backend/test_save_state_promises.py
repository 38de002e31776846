"""K1 and C8 on the save tracker: the whole 5 s wait, the in-flight flag a Clear waits on, and a
conflict resolved by taking the server's version.

Written for survivors of `make mutate` (issue 18). No timing assertion: as in
`test_send_wait_promise.py`, the wait runs against a fake monotonic clock that moves only when the
condition is waited on.
"""

from __future__ import annotations

import threading

import pytest

from memframe.backend import save_state
from memframe.backend.save_state import SaveState
from memframe.core.errors import VersionConflict
from memframe.core.memory_state import MemoryState


def test_K1_a_wake_up_before_5_seconds_keeps_the_send_waiting_for_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = {"now": 1000.0}
    waited: list[float] = []
    monkeypatch.setattr(save_state.time, "monotonic", lambda: clock["now"])

    class Condition(type(threading.Condition())):  # type: ignore[misc]
        def wait(self, timeout: float | None = None) -> bool:
            assert timeout is not None
            step = timeout - 0.5 if not waited else timeout  # first: woken 0.5 s early, save still running
            waited.append(step)
            clock["now"] += step
            return False

    state = SaveState()
    state._cond = Condition()
    with state.saving():
        assert state.for_send() == MemoryState("pending")
    assert waited == [4.5, 0.5] and sum(waited) == 5.0


def test_C8_a_save_is_in_flight_exactly_while_it_runs() -> None:
    state = SaveState()
    assert not state.in_flight
    with state.saving():
        assert state.in_flight
        with state.saving():
            assert state.in_flight
        assert state.in_flight
    assert not state.in_flight
    with pytest.raises(VersionConflict), state.saving():
        raise VersionConflict(4)
    assert not state.in_flight


def test_K1_taking_the_servers_version_resolves_a_conflict_even_at_version_0() -> None:
    state = SaveState()
    with pytest.raises(VersionConflict), state.saving():
        raise VersionConflict(0)  # the server holds no memory at all
    assert state.last == MemoryState("conflict", 0)
    state.take_server_version(0)
    assert state.last == MemoryState("saved", 0)
