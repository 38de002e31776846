"""The tests' own PostgreSQL never outlives the run that started it, even one killed outright."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.pg_server import find_bin

ROOT = Path(__file__).resolve().parents[2]
NO_POSTGRES = "PostgreSQL is not installed here (Debian's postgresql package)"

STARTER = """
import sys, time
from tests.support.pg_server import PostgresServer, find_bin
server = PostgresServer(find_bin()).start()
print(server.dir, server.port, flush=True)
time.sleep(120)
"""


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.skipif(find_bin() is None and os.environ.get("CI", "").lower() != "true", reason=NO_POSTGRES)
def test_a_run_killed_without_its_teardown_leaves_no_postgresql_running() -> None:
    """SIGKILL skips every `finally` and fixture teardown: the server's watchdog stops it and removes
    its directory once the process that started it is gone."""
    starter = subprocess.Popen([sys.executable, "-c", STARTER], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert starter.stdout is not None
    folder, port = starter.stdout.readline().split()
    assert Path(folder).is_dir() and _listening(int(port))
    starter.kill()
    starter.wait()
    starter.stdout.close()
    deadline = time.monotonic() + 30
    while (Path(folder).exists() or _listening(int(port))) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not Path(folder).exists(), "the killed run's PostgreSQL directory is still there"
    assert not _listening(int(port)), "the killed run's PostgreSQL still listens"
