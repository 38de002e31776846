"""K1: each Assistant send waits up to 5 s for an in-flight Save, then reports the state.

No timing assertion: the wait runs against a fake monotonic clock that moves only when the
condition is waited on, so the test measures how long the send *would* wait.
"""

from __future__ import annotations

import threading

import pytest

from memframe.backend import save_state
from memframe.backend.save_state import SaveState


class _FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now


def test_K1_a_send_waits_5_seconds_for_an_in_flight_save_then_reports_pending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake = _FakeTime()
    monkeypatch.setattr(save_state.time, "monotonic", fake.monotonic)
    state = SaveState()

    class Condition(type(threading.Condition())):  # type: ignore[misc]
        def wait(self, timeout: float | None = None) -> bool:
            assert timeout is not None
            fake.waits.append(timeout)
            fake.now += timeout
            return False

    state._cond = Condition()
    with state.saving():
        assert state.for_send().header() == "pending"
        assert sum(fake.waits) == 5.0
        fake.waits.clear()
        assert state.header_for_send() == "pending"
        assert sum(fake.waits) == 5.0
    state.acknowledge(3)
    assert state.for_send().header() == "saved; version=3"


def test_K1_the_send_wait_is_five_seconds() -> None:
    assert save_state.SEND_WAIT_SECONDS == 5
