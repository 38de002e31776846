"""Shared fixtures: an isolated memframe home, a service, and a `world` per backend kind and engine.

Contract tests take `world` and run once per backend kind in BACKEND_MAKERS and
per storage engine in ENGINES (SQLite, and a real PostgreSQL that the session
starts itself, see tests/support/pg_server.py); any behaviour difference between backends
or engines is a bug. Where no PostgreSQL can be found its variants are skipped with
a loud reason; under CI=true they fail instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from memframe import sealing
from memframe.backend.sealed import SealedBackend
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from tests.support.pg_server import PostgresServer, find_bin

#: The storage engines every contract and reliability test runs over.
ENGINES = ("sqlite", "postgresql")
NO_POSTGRES = (
    "NO POSTGRESQL ON THIS MACHINE: the PostgreSQL variants of the contract and reliability suites "
    "did NOT run (install Debian's `postgresql` package; `make test` does when it runs as root)"
)


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


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One real PostgreSQL for the whole session (initdb + pg_ctl in a temp dir), stopped at the end."""
    bindir = find_bin()
    if bindir is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(NO_POSTGRES + "; CI must run them.")
        pytest.skip(NO_POSTGRES)
    server = PostgresServer(bindir).start()
    yield server
    server.close()


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def database_for(engine: str, request: pytest.FixtureRequest, directory: Path, name: str = "service.db") -> str:
    """Where a test's database lives on `engine`: a file in `directory`, or a fresh PostgreSQL schema
    (dropped when the test ends)."""
    if engine == "sqlite":
        return str(directory / name)
    server: PostgresServer = request.getfixturevalue("postgres_server")
    url = server.fresh_url()
    request.addfinalizer(lambda: server.drop(url))
    return url


@pytest.fixture
def database_url(engine: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database on the test's engine."""
    return database_for(engine, request, tmp_path)


@pytest.fixture
def engine_service(database_url: str, clock: FakeClock) -> Iterator[MemoryService]:
    """`service` on each engine in turn."""
    svc = MemoryService(database_url, clock=clock)
    svc.accounts.add_user(LOCAL_USER)
    svc.accounts.create_workspace("ws", LOCAL_USER)
    yield svc
    svc.close()


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
    from tests.support.remote_kinds import REMOTE_MAKERS
except ImportError:  # pragma: no cover - before the server exists
    REMOTE_MAKERS = {}
BACKEND_MAKERS.update(REMOTE_MAKERS)


@pytest.fixture(params=sorted(BACKEND_MAKERS))
def world(request: pytest.FixtureRequest, engine_service: MemoryService) -> Iterator[World]:
    service = engine_service
    w = World(
        kind=request.param,
        service=service,
        workspace_id="ws",
        key=sealing.new_key(),
        user=LOCAL_USER,
        make=BACKEND_MAKERS[request.param],
    )
    yield w
    w.close()


@pytest.fixture
def backend(world: World) -> SealedBackend:
    return world.client()
