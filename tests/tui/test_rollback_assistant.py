"""The frame's Assistant on a machine that saw a Clear, after the database was rolled back past it.

The frame is open at version 1 when `memframe clear` on the same machine makes version 2; then the
database loses the Clear (its row deleted, `current_version` and `clear_generation` lowered, as a
restored dump or a lagging standby would hold it). The frame itself saved nothing, yet its
Assistant reports the version this machine has seen: the model gets the "not provided because"
note, never the pre-Clear text, and a `remember:` writes nothing. On SQLite and PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from memframe import sealing
from memframe.assistant.models import ScriptedModel
from memframe.backend.local import LocalBackend
from memframe.core.turns import OutcomeKind
from memframe.core.types import MEMORY_PATH, Mode, RecallStatus
from memframe.service import MemoryService
from memframe.tui.screens.assistant import AssistantScreen, ExchangeItem
from tests.conftest import FakeClock
from tests.reliability.support import raw
from tests.tui.conftest import drive
from tests.tui.scenarios import Outage, Stage, ask, press

SECRET = "# Memory\n- The launch code is PINEAPPLE.\n"
WS = "ws"  # the workspace `engine_service` made


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel()  # keeps the system message of every call it was given


@pytest.fixture
def stage(engine_service: MemoryService, clock: FakeClock, model: ScriptedModel) -> Stage:
    """The frame's backend (with `model`) and `memframe clear`'s, one machine, on the engine's database."""
    key = sealing.new_key()
    frame = LocalBackend(engine_service, WS, key, model=model)
    other = LocalBackend(engine_service, WS, key)
    return Stage(Outage(frame), other, clock)


def database(service: MemoryService) -> Path | str:
    db = service.db
    return Path(db.path) if db.path is not None else db.url  # type: ignore[attr-defined]


def roll_back_past_the_clear(service: MemoryService) -> None:
    with raw(database(service)) as conn:
        conn.execute("DELETE FROM file_versions WHERE workspace_id = ? AND path = ? AND version = 2", (WS, MEMORY_PATH))
        conn.execute("UPDATE files SET current_version = 1 WHERE workspace_id = ? AND path = ?", (WS, MEMORY_PATH))
        conn.execute("UPDATE workspace_memory_policy SET clear_generation = 0 WHERE workspace_id = ?", (WS,))


def test_the_frames_assistant_gets_no_pre_clear_text_and_writes_nothing(
    stage: Stage, engine_service: MemoryService, model: ScriptedModel
) -> None:
    stage.other.save(SECRET, 0)
    stage.other.set_policy(Mode.AUTO, 0)
    stage.other.set_ai(True)
    app = stage.app()

    async def script(pilot: Pilot[Any]) -> None:
        assert app.state.base_version == 1
        stage.other.clear(1)  # `memframe clear` in another terminal of this machine
        roll_back_past_the_clear(engine_service)
        await press(pilot, "f2")
        screen = pilot.app.screen
        assert isinstance(screen, AssistantScreen)
        await ask(pilot, "what do you know?")
        exchange = screen.conversation.exchanges[-1]
        assert [(c.status, c.revision) for c in exchange.calls] == [(RecallStatus.STALE, 1)]
        assert "status=stale" in model.seen[-1] and "PINEAPPLE" not in model.seen[-1]
        shown = str(list(screen.query(ExchangeItem))[-1].query_one(Static).content)
        assert "PINEAPPLE" not in shown
        await ask(pilot, "remember: - The launch code is MANGO.")
        result = screen.conversation.exchanges[-1].result
        assert result is not None and [o.kind for o in result.outcomes] == [OutcomeKind.REFUSED]
        assert all("PINEAPPLE" not in system for system in model.seen)

    drive(app, script)
    with raw(database(engine_service)) as conn:
        versions = conn.execute(
            "SELECT version FROM file_versions WHERE workspace_id = ? AND path = ?", (WS, MEMORY_PATH)
        )
        assert [int(v) for (v,) in versions] == [1], "nothing was written on top of the rolled-back head"
