"""Fixtures for the Memory frame: a workspace on a frozen clock, the frame's backend and a racing client.

The frame runs with `build_app` (the CLI's factory) through `Stage.app()`.
Times are shown in UTC here so snapshots do not depend on the machine's zone.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from textual.pilot import Pilot

from memframe import sealing
from memframe.backend.local import LocalBackend
from memframe.core.errors import Unauthorized
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.tui.app import MemoryFrameApp
from tests.conftest import FakeClock
from tests.tui.scenarios import SIZE, Outage, Stage, settle

WORKSPACE = "default"


@pytest.fixture(autouse=True)
def utc() -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = old
    time.tzset()


@pytest.fixture
def tui_service(memframe_home: Any, clock: FakeClock) -> Iterator[MemoryService]:
    """The embedded service under MEMFRAME_HOME, so the frame shows `$MEMFRAME_HOME/memframe.db`."""
    svc = MemoryService(memframe_home / "memframe.db", clock=clock)
    svc.accounts.add_user(LOCAL_USER)
    svc.accounts.create_workspace(WORKSPACE, LOCAL_USER)
    yield svc
    svc.close()


@pytest.fixture
def stage(tui_service: MemoryService, clock: FakeClock) -> Stage:
    key = sealing.new_key()
    frame = LocalBackend(tui_service, WORKSPACE, key)
    other = LocalBackend(tui_service, WORKSPACE, key)
    return Stage(Outage(frame), other, clock)


def drive(
    app: MemoryFrameApp, script: Callable[[Pilot[Any]], Awaitable[None]], *, size: tuple[int, int] = SIZE
) -> None:
    """Run the frame headless (at the snapshot size unless told), let it load, then run `script`."""

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await script(pilot)

    asyncio.run(main())


class Refusing(Outage):
    """The frame's backend with a revoked token: every call raises Unauthorized while `down`."""

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._backend, name)
        if not callable(attr) or name == "close":
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise Unauthorized("Your token was revoked; sign in again.")
            return attr(*args, **kwargs)

        return call


class Gate:
    """Holds the frame's writes on their worker thread until `release()`: an in-flight save, made visible."""

    def __init__(self, backend: Any) -> None:
        self._backend = backend
        self.opened = threading.Event()
        self.entered = threading.Event()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._backend, name)
        if name not in ("save", "clear", "undo"):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.entered.set()
            assert self.opened.wait(10), "the test never released the gate"
            return attr(*args, **kwargs)

        return call

    def release(self) -> None:
        self.opened.set()
