"""A server rolled back past a Clear, met by an Assistant turn from the machine that made the Clear.

Every path that starts a turn goes through `SealedBackend.send_turn`: `send` (chat, the frame) and
`send_turn` with no state of its own (MCP's ask_agent, through `NoteTools`). Each reports the newest
memory version this machine has seen, so recall withholds the memory as `stale` (the model gets
the "not provided because" note, never the pre-Clear text) and `remember_in_memory` writes
nothing. Then `accept_server_history`, the person's explicit word, takes the restored history and
logs it. Over every backend kind and both engines (`world`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memframe.backend.accept_history import accept_server_history, accepted_log
from memframe.core.errors import MemframeError, RolledBack
from memframe.core.turns import OutcomeKind
from memframe.core.types import MEMORY_PATH, Mode, RecallStatus
from memframe.mcp.tools import NoteTools
from tests.conftest import World
from tests.reliability.support import raw

SECRET = "# Memory\n- The launch code is PINEAPPLE.\n"


def _db(world: World) -> Path | str:
    db = world.service.db
    return Path(db.path) if db.path is not None else db.url  # type: ignore[attr-defined]


def made_then_cleared(world: World) -> None:
    """Version 1 holds SECRET, version 2 is the Clear (generation 1), Auto and workspace AI on."""
    person = world.client()
    person.save(SECRET, 0)
    person.set_policy(Mode.AUTO, person.get_policy().revision)
    person.set_ai(True)
    assert person.clear(1).version == 2


def roll_back_past_the_clear(world: World) -> None:
    """What a restored dump or a lagging standby holds: no Clear row, the head and generation lowered."""
    ws = world.workspace_id
    with raw(_db(world)) as conn:
        conn.execute("DELETE FROM file_versions WHERE workspace_id = ? AND path = ? AND version = 2", (ws, MEMORY_PATH))
        conn.execute("UPDATE files SET current_version = 1 WHERE workspace_id = ? AND path = ?", (ws, MEMORY_PATH))
        conn.execute("UPDATE workspace_memory_policy SET clear_generation = 0 WHERE workspace_id = ?", (ws,))


def memory_versions(world: World) -> list[int]:
    with raw(_db(world)) as conn:
        rows = conn.execute(
            "SELECT version FROM file_versions WHERE workspace_id = ? AND path = ? ORDER BY version",
            (world.workspace_id, MEMORY_PATH),
        )
        return [int(r[0]) for r in rows]


def test_every_send_after_a_rollback_withholds_memory_and_writes_nothing(world: World) -> None:
    running = world.client()  # a frame or `memframe mcp` already open before the Clear was made
    made_then_cleared(world)
    roll_back_past_the_clear(world)
    later = world.client()  # a `memframe chat` started afterwards, on the same machine
    for client in (running, later):
        turn = client.send(f"c-{id(client)}", "what do you know?")
        assert [(c.status, c.revision) for c in turn.calls] == [(RecallStatus.STALE, 1)]
        assert "PINEAPPLE" not in turn.answer and "not provided because" in turn.answer
        turn = client.send(f"c-{id(client)}", "remember: - The launch code is MANGO.")
        assert [c.status for c in turn.calls] == [RecallStatus.STALE, RecallStatus.STALE]
        assert [o.kind for o in turn.outcomes] == [OutcomeKind.REFUSED]
    asked = NoteTools(world.client()).ask_agent("what do you know?")  # MCP: no Saves of its own
    assert "PINEAPPLE" not in asked.text and asked.data["receipts"][0]["status"] == "stale"
    asked = NoteTools(world.client()).ask_agent("remember: - The launch code is MANGO.")
    assert [o["kind"] for o in asked.data["tool_outcomes"]] == ["refused"]
    assert memory_versions(world) == [1], "nothing was written on top of the rolled-back head"
    assert world.client().get_policy().clear_generation == 0


def test_accepting_the_servers_history_is_explicit_and_logged(world: World) -> None:
    made_then_cleared(world)
    roll_back_past_the_clear(world)
    client = world.client()
    with pytest.raises(RolledBack, match="--accept-server") as refused:
        client.load()
    assert "\n" not in str(refused.value)
    (went_back,) = accept_server_history(client)
    assert (went_back.path, went_back.seen, went_back.server) == (MEMORY_PATH, 2, 1)
    assert client.seen.file is not None
    log = accepted_log(client.seen.file).read_text()
    assert "this machine had seen version 2; the server shows version 1" in log and "PINEAPPLE" not in log
    assert accepted_log(client.seen.file).stat().st_mode & 0o777 == 0o600
    fresh = world.client()  # every client on the machine now takes the restored history
    assert fresh.load().text == SECRET
    turn = fresh.send("c", "what do you know?")
    assert [(c.status, c.revision) for c in turn.calls] == [(RecallStatus.PROVIDED, 1)]
    assert accept_server_history(fresh) == [], "nothing more to accept"


def test_an_acceptance_that_cannot_open_the_servers_head_changes_nothing(world: World) -> None:
    made_then_cleared(world)
    roll_back_past_the_clear(world)
    with raw(_db(world)) as conn:  # the restored head does not open with this key
        conn.execute(
            "UPDATE file_versions SET ciphertext = ? WHERE workspace_id = ? AND path = ? AND version = 1",
            (b"\x00" * 64, world.workspace_id, MEMORY_PATH),
        )
    client = world.client()
    with pytest.raises(MemframeError):
        accept_server_history(client)
    with pytest.raises(RolledBack, match="seen version 2"):
        world.client().load()
    assert client.seen.file is not None and not accepted_log(client.seen.file).exists()
