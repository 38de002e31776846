"""Snapshot tests of the frame's main states, at fixed sizes (100×30, and 80×24 and 60×20) on a frozen clock.

The states are the screenshot command's scenarios (tests/tui/scenarios.py),
so the pictures in screenshots/ and these snapshots show the same things.
Update with `pytest tests/tui/test_snapshots.py --snapshot-update`, then look.
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from tests.tui.scenarios import BY_NAME, SCENARIOS, SIZE, SMALL, SMALL_SIZES, Scenario, Stage, predictable_ids


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_snapshot(scenario: Scenario, stage: Stage, snap_compare: Any) -> None:
    with predictable_ids():
        scenario.seed(stage)

        async def run_before(pilot: Pilot[Any]) -> None:
            await scenario.drive(pilot, stage)

        assert snap_compare(stage.app(), terminal_size=SIZE, run_before=run_before)


@pytest.mark.parametrize("size", SMALL_SIZES, ids=[f"{w}x{h}" for w, h in SMALL_SIZES])
@pytest.mark.parametrize("name", SMALL)
def test_snapshot_small(name: str, size: tuple[int, int], stage: Stage, snap_compare: Any) -> None:
    """80×24 (the standard terminal) and 60×20: nothing vanishes, every dialog scrolls or fits."""
    scenario = BY_NAME[name]
    with predictable_ids():
        scenario.seed(stage)

        async def run_before(pilot: Pilot[Any]) -> None:
            await scenario.drive(pilot, stage)

        assert snap_compare(stage.app(), terminal_size=size, run_before=run_before)
