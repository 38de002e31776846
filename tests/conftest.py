"""Shared fixtures: an isolated memframe home, a service, and a `world` per backend kind.

Contract tests take `world` and run once per backend kind in BACKEND_KINDS;
any behaviour difference between backends is a bug.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memframe import crypto
from memframe.backend.sealed import SealedBackend
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER


def modules_loaded(statements: str, prefixes: Iterable[str]) -> list[str]:
    """Which modules named by (or under) `prefixes` a fresh interpreter has loaded after `statements`:
    how the tests keep start-up light."""
    probe = (
        f"import sys\n{statements}\n"
        f"print(','.join(sorted(m for m in sys.modules if m.startswith({tuple(prefixes)!r}))))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return [m for m in out.stdout.strip().split(",") if m]


class FakeClock:
    """A clock tests move by hand, so times in snapshots and histories are fixed."""

    def __init__(self, start: float = 1_798_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float = 1.0) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def memframe_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own MEMFRAME_HOME; nothing touches a real home."""
    home = tmp_path / "home"
    monkeypatch.setenv("MEMFRAME_HOME", str(home))
    for var in ("MEMFRAME_URL", "MEMFRAME_TOKEN", "MEMFRAME_WORKSPACE", "MEMFRAME_PASSPHRASE", "MEMFRAME_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def service(tmp_path: Path, clock: FakeClock) -> Iterator[MemoryService]:
    svc = MemoryService(tmp_path / "service.db", clock=clock)
    svc.accounts.add_user(LOCAL_USER)
    svc.accounts.create_workspace("ws", LOCAL_USER)
    yield svc
    svc.close()


@dataclass
class World:
    """One workspace on one service, reached through one kind of backend."""

    kind: str
    service: MemoryService
    workspace_id: str
    key: bytes
    user: str
    make: Callable[[World], SealedBackend]
    opened: list[SealedBackend] = field(default_factory=list)
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def client(self) -> SealedBackend:
        """A fresh client of the same workspace (two clients race each other)."""
        backend = self.make(self)
        self.opened.append(backend)
        return backend

    def close(self) -> None:
        for backend in self.opened:
            backend.close()
        for cleanup in reversed(self.cleanups):
            cleanup()


def _local(world: World) -> SealedBackend:
    from memframe.backend.local import LocalBackend

    return LocalBackend(world.service, world.workspace_id, world.key, user=world.user)


#: Backend kinds every contract test runs against; the server adds its own.
BACKEND_MAKERS: dict[str, Callable[[World], SealedBackend]] = {"local": _local}
try:  # the remote kinds live beside the server's tests
    from tests.remote_kinds import REMOTE_MAKERS
except ImportError:  # pragma: no cover - before the server exists
    REMOTE_MAKERS = {}
BACKEND_MAKERS.update(REMOTE_MAKERS)


@pytest.fixture(params=sorted(BACKEND_MAKERS))
def world(request: pytest.FixtureRequest, service: MemoryService) -> Iterator[World]:
    w = World(
        kind=request.param,
        service=service,
        workspace_id="ws",
        key=crypto.new_key(),
        user=LOCAL_USER,
        make=BACKEND_MAKERS[request.param],
    )
    yield w
    w.close()


@pytest.fixture
def backend(world: World) -> SealedBackend:
    return world.client()
