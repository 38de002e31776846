"""Snapshot tests of the frame's main states, at a fixed size on a frozen clock.

The states are the screenshot command's scenarios (tests/tui/scenarios.py),
so the pictures in screenshots/ and these snapshots show the same things.
Update with `pytest tests/tui/test_snapshots.py --snapshot-update`, then look.
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from tests.tui.scenarios import SCENARIOS, SIZE, Scenario, Stage, predictable_ids


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_snapshot(scenario: Scenario, stage: Stage, snap_compare: Any) -> None:
    with predictable_ids():
        scenario.seed(stage)

        async def run_before(pilot: Pilot[Any]) -> None:
            await scenario.drive(pilot, stage)

        assert snap_compare(stage.app(), terminal_size=SIZE, run_before=run_before)
