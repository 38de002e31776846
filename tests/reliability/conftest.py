"""Fixtures shared by the reliability families."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


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
