"""A throwaway PostgreSQL server for the tests: `initdb` + `pg_ctl` in a temp dir on a free port.

`PostgresServer.start()` finds Debian's PostgreSQL binaries (on PATH, or under
/usr/lib/postgresql/*/bin), makes a cluster in a fresh temp directory and starts it on
127.0.0.1 on a free port. PostgreSQL refuses to run as root, so under root the cluster
belongs to the `postgres` system user (which Debian's package creates) or, failing that,
`nobody`, with the directory chowned to it. Each test gets a schema of its own
(`fresh_url`), which is far cheaper than a database of its own; the cluster runs with
`fsync=off` because what these tests kill is memframe, never the server (PostgreSQL's own
durability is PostgreSQL's).
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import psycopg

#: Run beside the server: when the process that started it is gone without stopping it (a test run
#: killed by a timeout or ^C skips every teardown), stop the server and remove its directory, so no
#: PostgreSQL outlives the run that needed it. Stopped normally, the directory is gone: it just ends.
_WATCHDOG = """
import os, shutil, subprocess, sys, time
owner, pg_ctl, data, folder, user = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] or None
def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True
while alive(owner) and os.path.isdir(data):
    time.sleep(1.0)
if os.path.isdir(data):
    subprocess.run([pg_ctl, "-D", data, "-m", "immediate", "-w", "stop"], user=user, capture_output=True, timeout=60)
    shutil.rmtree(folder, ignore_errors=True)
"""

SUPERUSER = "memframe"
DATABASE = "memframe"


def find_bin() -> Path | None:
    """The directory holding initdb and pg_ctl, or None when PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4] or 0))
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as() -> str | None:
    """The user the server runs as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise RuntimeError("running as root and there is neither a 'postgres' nor a 'nobody' user to run PostgreSQL as")


class PostgresServer:
    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.user = _run_as()
        self.dir = Path(tempfile.mkdtemp(prefix="memframe-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self._schemas = itertools.count(1)
        self._watchdog: subprocess.Popen[bytes] | None = None
        self.base_url = f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{DATABASE}"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            user=self.user,
            cwd=self.dir,
            capture_output=True,
            text=True,
            check=check,
            timeout=120,
        )

    def start(self) -> PostgresServer:
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
            os.chmod(self.dir, 0o700)
        if not self.data.exists():
            self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--locale=C")
        self.pg_ctl_start()
        self._watch()
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")
        return self

    def _watch(self) -> None:
        """The watchdog (`_WATCHDOG`), in a session of its own so a ^C to the test run spares it."""
        args = [str(os.getpid()), str(self.bindir / "pg_ctl"), str(self.data), str(self.dir), self.user or ""]
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def url(self, dbname: str = DATABASE) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}"

    def pg_ctl_start(self) -> None:
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c full_page_writes=off -c max_connections=300 -c shared_buffers=32MB"
        )
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.dir / "log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def restart(self) -> None:
        self.stop()
        self.pg_ctl_start()

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url(), connect_timeout=2):
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def fresh_url(self) -> str:
        """A URL whose tables live in a new, empty schema of their own."""
        schema = f"t{os.getpid()}_{next(self._schemas)}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        options = urllib.parse.quote(f"-csearch_path={schema}")
        return f"{self.url()}?options={options}"

    def drop(self, url: str) -> None:
        schema = urllib.parse.unquote(url.partition("search_path=")[2] or url.partition("search_path%3D")[2])
        if schema:
            with contextlib.suppress(psycopg.Error), psycopg.connect(self.url(), autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")

    def close(self) -> None:
        if self._watchdog is not None:  # stopped here: the watchdog's work is done
            self._watchdog.kill()
            self._watchdog.wait()
            self._watchdog = None
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
