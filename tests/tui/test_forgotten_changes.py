"""Changes after `memframe forget --before N`: the history starts at N and says why."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widgets import Static

from memframe import sealing
from memframe.backend.local import LocalBackend
from tests.tui.conftest import WORKSPACE, drive
from tests.tui.scenarios import Stage, open_changes


def test_changes_starts_at_n_with_the_forgotten_line(stage: Stage) -> None:
    for version in range(10):
        stage.other.save(f"line {version}\n", version)
    stage.other.prove_key()  # type: ignore[attr-defined]
    new_key = sealing.new_key()
    stage.other.rotate_key(new_key, who="ada", forget_before=4)  # type: ignore[attr-defined]
    service = stage.other.store.service  # type: ignore[attr-defined]
    app = stage.app(LocalBackend(service, WORKSPACE, new_key))

    async def script(pilot: Pilot[Any]) -> None:
        screen = await open_changes(pilot)
        assert screen.complete and sorted(screen.rows) == list(range(4, 11))
        title = str(screen.query_one("#changes-title", Static).content)
        assert "versions 1–3 were forgotten on " in title and " by ada" in title

    drive(app, script)
