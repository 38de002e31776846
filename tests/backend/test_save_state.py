"""X-Memory-State: this client's own saves, never its unsaved draft."""

from __future__ import annotations

import threading

import pytest

from memframe.backend.save_state import MemoryState, SaveState, reported
from memframe.core.errors import Unavailable, VersionConflict


def test_none_until_a_save_is_acknowledged() -> None:
    state = SaveState()
    assert state.header_for_send() == "none"
    with state.saving():
        state.acknowledge(4)
    assert state.header_for_send() == "saved; version=4"


def test_conflict_is_reported_with_the_server_version() -> None:
    state = SaveState()
    with pytest.raises(VersionConflict), state.saving():
        raise VersionConflict(9)
    assert state.header_for_send() == "conflict; version=9"


def test_offline_failure_changes_nothing() -> None:
    state = SaveState()
    with state.saving():
        state.acknowledge(2)
    with pytest.raises(Unavailable), state.saving():
        raise Unavailable()
    assert state.header_for_send() == "saved; version=2"


def test_send_waits_for_an_in_flight_save() -> None:
    state = SaveState()
    started, release = threading.Event(), threading.Event()

    def save() -> None:
        with state.saving():
            started.set()
            release.wait(5)
            state.acknowledge(3)

    t = threading.Thread(target=save)
    t.start()
    started.wait(5)
    threading.Timer(0.05, release.set).start()
    assert state.header_for_send(timeout=5) == "saved; version=3"
    t.join()


def test_pending_when_the_save_outlasts_the_wait() -> None:
    state = SaveState()
    release = threading.Event()
    entered = threading.Event()

    def save() -> None:
        with state.saving():
            entered.set()
            release.wait(5)

    t = threading.Thread(target=save)
    t.start()
    entered.wait(5)
    assert state.header_for_send(timeout=0.01) == "pending"
    release.set()
    t.join()


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("none", MemoryState("none")),
        ("pending", MemoryState("pending")),
        ("saved; version=3", MemoryState("saved", 3)),
        ("conflict;version=12", MemoryState("conflict", 12)),
        ("saved", None),
        ("none; version=2", None),
        ("draft", None),
        (None, None),
    ],
)
def test_parse_header(raw: str | None, parsed: MemoryState | None) -> None:
    assert MemoryState.parse(raw) == parsed


def test_taking_the_servers_version_resolves_a_conflict_and_nothing_else() -> None:
    state = SaveState()
    state.take_server_version(3)
    assert state.header_for_send() == "none"  # not a conflict: left alone
    with pytest.raises(VersionConflict), state.saving():
        raise VersionConflict(9)
    state.take_server_version(8)
    assert state.header_for_send() == "conflict; version=9"  # an older version does not resolve it
    state.take_server_version(9)
    assert state.header_for_send() == "saved; version=9"


@pytest.mark.parametrize(
    ("own", "seen", "sent"),
    [
        (None, 0, None),  # MCP on a machine that has seen nothing: no X-Memory-State
        (None, 4, "saved; version=4"),
        (MemoryState(), 0, "none"),
        (MemoryState(), 4, "saved; version=4"),
        (MemoryState("saved", 3), 4, "saved; version=4"),
        (MemoryState("saved", 5), 4, "saved; version=5"),
        (MemoryState("pending"), 4, "pending"),
        (MemoryState("conflict", 2), 4, "conflict; version=2"),
    ],
)
def test_a_send_reports_its_own_state_raised_to_the_newest_version_seen(
    own: MemoryState | None, seen: int, sent: str | None
) -> None:
    state = reported(own, seen)
    assert (None if state is None else state.header()) == sent
