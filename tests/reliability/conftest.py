"""Fixtures shared by the reliability families."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import ENGINES, database_for


def fast_dir() -> str | None:
    """A RAM-backed directory when there is one, else None (the system temp directory).

    Families whose subject is not durability (faults, races, fuzzing, access) put their
    databases here so that fsync does not dominate their run time; the crash trials
    never do, they run on the real disk.
    """
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


@pytest.fixture
def fast_tmp(tmp_path: Path) -> Iterator[Path]:
    base = fast_dir()
    if base is None:
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="memframe-reliability-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=ENGINES)
def store_at(request: pytest.FixtureRequest, fast_tmp: Path) -> Callable[[str], str]:
    """Where a family's databases live, on each engine in turn: `store_at("name.db")` is a file in
    `fast_tmp` on SQLite, a fresh schema (its own empty database) on PostgreSQL. `.engine` says which."""
    engine = str(request.param)

    def at(name: str) -> str:
        return database_for(engine, request, fast_tmp, name)

    at.engine = engine  # type: ignore[attr-defined]
    return at
