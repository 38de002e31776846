"""`python -m tests.tui.screenshots DIR` (`make screenshots`): SVG screenshots of the frame's main states.

The states are the snapshot tests' scenarios (tests/tui/scenarios.py), run the
way those tests run them: a fresh embedded workspace under a temporary
MEMFRAME_HOME whose service is built on the frozen clock, UTC, the fixed
terminal size, no cursor blink, and predictable ids. It lives with the tests
because everything it needs to hold still (the clock, the ids, an outage) is
test scaffolding, which the shipped package does not carry.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from memframe import sealing
from memframe.backend.local import LocalBackend
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from tests.tui.scenarios import BY_NAME, SCENARIOS, SIZE, SMALL, FrozenClock, Outage, Scenario, Stage, predictable_ids

STANDARD = (80, 24)

WORKSPACE = "default"


async def screenshot(stage: Stage, scenario: Scenario, size: tuple[int, int] = SIZE) -> str:
    """Seed, open the frame at `size`, drive the scenario, and return the SVG."""
    scenario.seed(stage)
    app = stage.app()
    async with app.run_test(size=size) as pilot:
        await scenario.drive(pilot, stage)
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        return app.export_screenshot(title=f"memframe — {scenario.description}")


def local_stage(home: Path) -> tuple[Stage, MemoryService]:
    """A fresh workspace in `home`'s embedded database, on the frozen clock (revisions carry its time)."""
    clock = FrozenClock()
    service = MemoryService(home / "memframe.db", clock=clock)
    service.accounts.add_user(LOCAL_USER)
    service.accounts.create_workspace(WORKSPACE, LOCAL_USER)
    key = sealing.new_key()
    return Stage(Outage(LocalBackend(service, WORKSPACE, key)), LocalBackend(service, WORKSPACE, key), clock), service


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.tui.screenshots", description=__doc__)
    parser.add_argument("directory", type=Path)
    parser.add_argument("--only", nargs="*", choices=sorted(BY_NAME), help="just these states")
    args = parser.parse_args(argv)
    args.directory.mkdir(parents=True, exist_ok=True)
    os.environ["TZ"] = "UTC"
    time.tzset()
    shots = [(s, SIZE, s.name) for s in SCENARIOS]
    shots += [(BY_NAME[name], STANDARD, f"{name}-80x24") for name in SMALL]  # the standard terminal too
    for scenario, size, stem in shots:
        if args.only and scenario.name not in args.only:
            continue
        with tempfile.TemporaryDirectory(prefix="memframe-shot-") as home:
            os.environ["MEMFRAME_HOME"] = home
            stage, service = local_stage(Path(home))
            try:
                with predictable_ids():
                    svg = asyncio.run(screenshot(stage, scenario, size))
            finally:
                stage.frame.close()
                stage.other.close()
                service.close()
        target = args.directory / f"{stem}.svg"
        target.write_text(svg, encoding="utf-8")
        print(f"{target}: {scenario.description} ({size[0]}×{size[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
