"""A held key session (`memframe key unlock --for`): kept for its time whether used or not, never longer
than the store's lifetime, in this process and through the key-session service alike."""

from __future__ import annotations

import os

import pytest

from memframe.core.errors import KeySessionServiceDown
from memframe.keysessions.app import create_app
from memframe.keysessions.client import RemoteKeySessions
from memframe.keysessions.store import KeySessions
from tests.conftest import FakeClock
from tests.support.remote_kinds import PortalASGITransport

CREDENTIAL = "c" * 43


def test_a_held_session_outlives_idling_and_ends_on_time() -> None:
    clock = FakeClock()
    sessions = KeySessions(clock, idle_seconds=60, lifetime_seconds=3600)
    held = sessions.open("ws", "alice", os.urandom(32), hold_seconds=600)
    plain = sessions.open("ws", "alice", os.urandom(32))
    assert (held.expires_at - held.created_at, held.idle_timeout) == (600, 600)
    clock.advance(120)  # past the idle timeout, unused
    assert sessions.describe(plain.id) is None and sessions.describe(held.id) is not None
    clock.advance(480)
    assert sessions.describe(held.id) is None


def test_a_hold_is_at_most_the_lifetime() -> None:
    sessions = KeySessions(FakeClock(), idle_seconds=60, lifetime_seconds=3600)
    held = sessions.open("ws", "alice", os.urandom(32), hold_seconds=10 * 3600)
    assert held.expires_at - held.created_at == 3600


def test_the_key_session_service_holds_one_too() -> None:
    clock = FakeClock()
    sessions = KeySessions(clock, idle_seconds=60, lifetime_seconds=3600)
    transport = PortalASGITransport(create_app(sessions, CREDENTIAL, ["keysessions.test"]))
    store = RemoteKeySessions("http://keysessions.test", CREDENTIAL, transport=transport)
    try:
        held = store.open("ws", "alice", os.urandom(32), hold_seconds=600)
        clock.advance(120)
        assert store.describe(held.id) is not None
        with pytest.raises(KeySessionServiceDown):  # the service refuses a hold that is not a number
            store.open("ws", "alice", os.urandom(32), hold_seconds="soon")  # type: ignore[arg-type]
    finally:
        store.close()
        transport.close()
