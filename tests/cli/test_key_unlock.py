"""`memframe key unlock|lock`: a key session held for a person's chat clients, and closed again."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from memframe import sealing
from memframe.api.app import create_app
from memframe.assistant.openai_chat import ModelOptions, OpenAIChatModel
from memframe.cli import main
from memframe.cli.options import duration
from memframe.cli.unlock import spoken
from memframe.keysessions.store import DEFAULT_IDLE_SECONDS
from memframe.sealing.keyfiles import write_key
from memframe.service import MemoryService
from tests.assistant.strict_openai import StrictChatServer
from tests.conftest import FakeClock
from tests.support.remote_kinds import loopback_server


@pytest.fixture
def server(tmp_path: Path, clock: FakeClock) -> Iterator[tuple[MemoryService, str, str]]:
    service = MemoryService(tmp_path / "s.db", clock=clock)
    service.accounts.add_user("alice")
    service.accounts.create_workspace("ws", "alice")
    service.assistant.set_ai("alice", "ws", True)
    fake = StrictChatServer()
    model = OpenAIChatModel(ModelOptions(fake.url))
    loopback = loopback_server()
    url = loopback.mount(create_app(service, model=model))
    write_key(sealing.new_key(), "ws", remote_url=url)
    try:
        yield service, url, service.accounts.create_token("alice", "t")[1]
    finally:
        loopback.unmount(url)
        model.close()
        fake.close()
        service.close()


def test_unlock_holds_a_session_past_idling_and_lock_revokes_it(
    server: tuple[MemoryService, str, str], clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    service, url, token = server
    where = ["--workspace", "ws", "--remote", url, "--token", token]
    assert main(["key", "unlock", *where, "--for", "2h"]) == 0
    said = capsys.readouterr().out
    assert "for your chat clients for 2 h" in said and f"{url}/v1" in said and "memframe key lock" in said
    session = service.assistant.live_key_session("alice", "ws")
    assert session is not None
    clock.advance(DEFAULT_IDLE_SECONDS + 60)  # unused past the idle timeout: still held
    assert service.assistant.live_key_session("alice", "ws") == session
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=token, max_retries=0)
    try:
        raw = client.chat.completions.with_raw_response.create(model="ws", messages=[{"role": "user", "content": "hi"}])
        assert "X-Memframe-Memory-Note" not in raw.headers
        assert main(["key", "lock", *where]) == 0
        assert "Locked 'ws'" in capsys.readouterr().out
        with service.db.read() as conn:
            revoked = conn.execute("SELECT key_session_id FROM key_session_revocations").fetchall()
        assert [r[0] for r in revoked] == [session]
        assert service.assistant.live_key_session("alice", "ws") is None
        raw = client.chat.completions.with_raw_response.create(model="ws", messages=[{"role": "user", "content": "hi"}])
        assert "memframe key unlock" in raw.headers["X-Memframe-Memory-Note"]
    finally:
        client.close()
    assert main(["key", "lock", *where]) == 0
    assert "Nothing to lock" in capsys.readouterr().out


def test_a_held_session_ends_when_its_time_is_up(
    server: tuple[MemoryService, str, str], clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    service, url, token = server
    assert main(["key", "unlock", "--workspace", "ws", "--remote", url, "--token", token, "--for", "30m"]) == 0
    clock.advance(29 * 60)
    assert service.assistant.live_key_session("alice", "ws") is not None
    clock.advance(2 * 60)
    assert service.assistant.live_key_session("alice", "ws") is None


def test_unlock_needs_a_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["key", "unlock", "--workspace", "ws"]) != 0
    assert "--remote" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "seconds"), [("8h", 28800), ("90m", 5400), ("2d", 172800), ("45s", 45)])
def test_durations(text: str, seconds: float) -> None:
    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0h", "-1h", "8x", "h", "1h30m", "45"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration(text)


def test_spoken() -> None:
    assert (spoken(7200), spoken(5400), spoken(45)) == ("2 h", "1 h 30 min", "45 s")
