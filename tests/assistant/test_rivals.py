"""Captures that lost a race, on one workspace: judged one at a time, out of the winner's way.

Only one capture can land per version (compare-and-set, never a rebase). The ones that waited for
a rival take its answer as a baton, one after another (and are refused before the group commit if
it landed); before they are judged they yield to a batch of their workspace being made, so the
next winner makes its batch alone. Each of these is only a
wait: the answers are pinned in test_refusal_order.py, and here too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from memframe.core.edits import MemoryChange
from memframe.core.errors import VersionConflict
from memframe.core.types import Mode
from memframe.service import capture
from memframe.service.capture import _Rivals
from tests.assistant.conftest import Stage

ADD = [MemoryChange("add", "- prefers tea")]


def _capture(stage: Stage, admission: object, expected: int) -> object:
    a = admission
    return stage.assistant.commit_capture(
        "ws",
        a.credential,  # type: ignore[attr-defined]
        idempotency_key=f"memory:{a.id}",  # type: ignore[attr-defined]
        key_session_id=a.key_session_id,  # type: ignore[attr-defined]
        changes=ADD,
        expected_version=expected,
    )


def _in_thread(name: str, call: Callable[[], object], out: dict[str, object]) -> threading.Thread:
    def run() -> None:
        try:
            out[name] = call()
        except Exception as exc:
            out[name] = exc

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


@pytest.fixture
def at_version_two(stage: Stage) -> Stage:
    """Auto, the memory at version 2 (two Saves by a person)."""
    stage.person.save("# Memory\n", 0)
    stage.person.save("# Memory\n- a person's edit\n", 1)
    stage.set_mode(Mode.AUTO)
    return stage


@pytest.mark.race
def test_the_captures_behind_a_rival_are_judged_one_at_a_time(
    at_version_two: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    stage = at_version_two
    rival, waiters = stage.admit("rival"), [stage.admit(f"conv{n}") for n in range(4)]
    held = threading.Event()
    release = threading.Event()
    real_write = stage.service.db.write_together

    def write_together(work):  # type: ignore[no-untyped-def]
        if threading.current_thread().name == "rival":
            held.set()
            assert release.wait(30), "the rival was never released"
        return real_write(work)

    behind: set[str] = set()  # the waiters that found the rival in flight
    arrived = threading.Semaphore(0)
    real_wait = stage.assistant._rivals.wait

    def wait(workspace_id: str, expected_version: int, batons: list[threading.Lock]) -> bool:
        arrived.release()
        found = real_wait(workspace_id, expected_version, batons)
        if found:
            behind.add(threading.current_thread().name)
        return found

    inside, most, count = [0], [0], threading.Lock()
    real_key = stage.service.key_sessions.key_and_opener

    def key_and_opener(session_id, workspace_id):  # type: ignore[no-untyped-def]
        # Judged behind the rival: count how many are here at once (with time to overlap).
        mine = threading.current_thread().name in behind
        if mine:
            with count:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.02)
            with count:
                inside[0] -= 1
        return real_key(session_id, workspace_id)

    monkeypatch.setattr(stage.service.db, "write_together", write_together)
    monkeypatch.setattr(stage.assistant._rivals, "wait", wait)
    monkeypatch.setattr(stage.service.key_sessions, "key_and_opener", key_and_opener)
    out: dict[str, object] = {}
    threads = [_in_thread("rival", lambda: _capture(stage, rival, 2), out)]
    assert held.wait(30)
    for n, admission in enumerate(waiters):
        threads.append(_in_thread(f"waiter{n}", lambda a=admission: _capture(stage, a, 2), out))  # type: ignore[misc]
    for _ in waiters:
        assert arrived.acquire(timeout=30)
    time.sleep(0.05)  # let them reach the rival's answer
    release.set()
    for thread in threads:
        thread.join(30)
    assert not isinstance(out["rival"], Exception)
    refusals = [out[f"waiter{n}"] for n in range(len(waiters))]
    assert all(isinstance(r, VersionConflict) and r.current_version == 3 for r in refusals)
    assert not any(stage.consumed(a) for a in waiters) and stage.fence_rows() == 1
    assert behind, "no waiter found the rival in flight"
    assert most[0] == 1


def _waiting(rivals: _Rivals, name: str, order: list[str]) -> threading.Thread:
    """A capture waiting behind the rival with base 1; it records when it may be judged, then passes
    its baton on (as `commit_capture` does once it has its answer)."""

    def run() -> None:
        batons: list[threading.Lock] = []
        assert rivals.wait("ws", 1, batons)
        order.append(name)
        for baton in batons:
            baton.release()

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


@pytest.mark.race
def test_a_capture_behind_a_rival_yields_to_a_batch_being_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the rival answered, a capture waiting for it is judged only after the batch of its
    workspace that is being made meanwhile (the next winner's) is made."""
    monkeypatch.setattr(capture, "_YIELD_SECONDS", 30.0)
    rivals, order = _Rivals(), []
    rival = rivals.flying("ws", 1)
    rival.__enter__()
    waiter = _waiting(rivals, "waiter", order)
    time.sleep(0.05)  # it waits for the rival's answer
    with rivals.flying("ws", 2) as next_winner:
        rivals.making("ws", next_winner)
        rival.__exit__(None, None, None)  # the rival answered
        time.sleep(0.05)
        order.append("made")
        rivals.made("ws", next_winner)
        waiter.join(30)
    assert order == ["made", "waiter"]


@pytest.mark.race
def test_the_captures_behind_the_first_give_the_next_batch_a_moment_to_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first capture behind a rival that answered is judged at once (its retry is usually the
    next winner); the others wait for a batch of their workspace to start, then for it to be made."""
    monkeypatch.setattr(capture, "_GRACE_SECONDS", 30.0)
    monkeypatch.setattr(capture, "_YIELD_SECONDS", 30.0)
    rivals, order = _Rivals(), []
    rival = rivals.flying("ws", 1)
    rival.__enter__()
    waiters = [_waiting(rivals, f"waiter{n}", order) for n in range(2)]
    time.sleep(0.05)
    rival.__exit__(None, None, None)
    deadline = time.monotonic() + 30
    while not order and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.05)
    assert len(order) == 1  # the first one, and only it
    with rivals.flying("ws", 2) as next_winner:
        order.append("making")
        rivals.making("ws", next_winner)
        time.sleep(0.05)
        order.append("made")
        rivals.made("ws", next_winner)
        for waiter in waiters:
            waiter.join(30)
    assert len(order) == 4 and order[1:3] == ["making", "made"]
    assert sorted([order[0], order[3]]) == ["waiter0", "waiter1"]


@pytest.mark.race
def test_a_loser_behind_the_next_flight_is_refused_with_the_version_after_it(
    at_version_two: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capture known stale behind a rival that landed waits, once, for the capture in flight on
    the new current version: its retry would only lose to that one, so it is refused with the
    version after it (the same refusal, read after the wait) and writes and consumes nothing."""
    stage = at_version_two
    rival, loser, nxt = stage.admit("rival"), stage.admit("loser"), stage.admit("next")
    held = {name: threading.Event() for name in ("rival", "next")}
    release = {name: threading.Event() for name in ("rival", "next")}
    next_flying = threading.Event()
    real_write = stage.service.db.write_together

    def write_together(work):  # type: ignore[no-untyped-def]
        name = threading.current_thread().name
        if name in held:
            held[name].set()
            assert release[name].wait(30), f"{name} was never released"
        return real_write(work)

    arrived = threading.Event()
    real_wait = stage.assistant._rivals.wait

    def wait(workspace_id: str, expected_version: int, batons: list[threading.Lock]) -> bool:
        if threading.current_thread().name == "loser" and expected_version == 2:
            arrived.set()
        return real_wait(workspace_id, expected_version, batons)

    real_key = stage.service.key_sessions.key_and_opener

    def key_and_opener(session_id, workspace_id):  # type: ignore[no-untyped-def]
        if threading.current_thread().name == "loser":  # judged only once the next one is in flight
            assert next_flying.wait(30)
        return real_key(session_id, workspace_id)

    monkeypatch.setattr(stage.service.db, "write_together", write_together)
    monkeypatch.setattr(stage.assistant._rivals, "wait", wait)
    monkeypatch.setattr(stage.service.key_sessions, "key_and_opener", key_and_opener)
    out: dict[str, object] = {}
    threads = [_in_thread("rival", lambda: _capture(stage, rival, 2), out)]
    assert held["rival"].wait(30)
    threads.append(_in_thread("loser", lambda: _capture(stage, loser, 2), out))
    assert arrived.wait(30)
    time.sleep(0.05)  # let it reach the rival's answer
    release["rival"].set()
    threads[0].join(30)
    assert not isinstance(out["rival"], Exception)
    threads.append(_in_thread("next", lambda: _capture(stage, nxt, 3), out))
    assert held["next"].wait(30)
    next_flying.set()
    time.sleep(0.05)  # let the loser reach the next one's answer
    assert "loser" not in out, "the loser was refused before the capture in flight had its answer"
    release["next"].set()
    for thread in threads:
        thread.join(30)
    assert not isinstance(out["next"], Exception)
    refusal = out["loser"]
    assert isinstance(refusal, VersionConflict) and refusal.current_version == 4
    assert not stage.consumed(loser) and stage.fence_rows() == 2
