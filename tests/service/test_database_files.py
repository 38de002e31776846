"""The server's database files are readable by their owner only: they hold every ciphertext."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.service.db import Database


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_the_database_and_its_wal_and_shm_are_created_0600(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        service = MemoryService(tmp_path / "memframe.db")
        try:
            service.accounts.add_user(LOCAL_USER)
            service.accounts.create_workspace("ws", LOCAL_USER)  # a write: the -wal and -shm exist now
            files = [tmp_path / name for name in ("memframe.db", "memframe.db-wal", "memframe.db-shm")]
            assert all(f.exists() for f in files)
            assert {f.name: _mode(f) for f in files} == {f.name: 0o600 for f in files}
        finally:
            service.close()
    finally:
        os.umask(old)


def test_an_existing_database_keeps_the_mode_its_owner_gave_it(tmp_path: Path) -> None:
    path = tmp_path / "memframe.db"
    Database(path).close()
    path.chmod(0o640)
    Database(path).close()
    assert _mode(path) == 0o640
