"""A pytest fork server for `tools/mutate.py`: start-up paid once, not once per mutant.

Starting pytest on these tests costs seconds, most of it importing third-party libraries
(FastAPI, pydantic, psycopg, httpx) that no mutant touches. This process imports those once,
then for each request forks a child that runs `pytest.main` in the mutant's tree; the child
imports memframe and the tests afresh (neither is ever imported here), so it sees the mutant
exactly as a new interpreter would.

    python tools/mutate_server.py TREE      # then one JSON request a line on stdin:
    {"args": [...pytest args], "env": {...}, "timeout": 60}  →  {"rc": 0, "out": "..."}

It stays single-threaded (forking is safe), gives each child a process group of its own (a
timeout kills it whole) and a private TMPDIR under TREE, so a PostgreSQL a killed child
started can be found and stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

#: imported once here, never by a mutant: libraries only, no pytest plugin (pytest would warn
#: that it cannot rewrite an already imported plugin's asserts) and nothing of memframe's
PRELOAD = ("fastapi", "fastapi.testclient", "starlette", "pydantic", "psycopg", "psycopg_pool", "httpx", "uvicorn",
           "cryptography", "rich", "_pytest.python", "_pytest.fixtures")  # fmt: skip


def _stop_leaked_postgres(tmp: Path) -> None:
    """A child killed mid-run leaves its PostgreSQL (pg_ctl daemonises it) running: stop it."""
    pg_ctl = shutil.which("pg_ctl")
    for data in tmp.glob("memframe-pg-*/data"):
        if pg_ctl:
            user = pwd.getpwuid(data.stat().st_uid).pw_name if os.geteuid() == 0 else None
            subprocess.run([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"], user=user,
                           capture_output=True, check=False, timeout=60)  # fmt: skip
        shutil.rmtree(data.parent, ignore_errors=True)


def run(tree: Path, args: list[str], env: dict[str, str], timeout: float) -> tuple[int, str]:
    """Fork, run pytest in `tree` with `args`, wait at most `timeout`: (exit code, output)."""
    out = tree / "t" / "pytest.out"
    pid = os.fork()
    if pid == 0:  # the child: become what `cd TREE && python -m pytest ARGS` would be
        code = 3
        try:
            os.setpgid(0, 0)
            os.chdir(tree)
            sys.path.insert(0, str(tree))
            os.environ.update(env)
            fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            import pytest

            code = int(pytest.main(args))
        except BaseException:
            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            rc = os.waitstatus_to_exitcode(status)
            break
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            _stop_leaked_postgres(Path(os.environ["TMPDIR"]))
            rc = -1  # timed out
            break
        time.sleep(0.02)
    text = out.read_text(errors="replace") if out.is_file() else ""
    return rc, text


def main() -> int:
    tree = Path(sys.argv[1]).resolve()
    tmp = tree / "t" / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(tmp)  # before anything asks tempfile where to write
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # the selection plugin (-p mutate_pytest)
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            __import__(name)
    assert not any(m == "memframe" or m.startswith(("memframe.", "tests")) for m in sys.modules)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        rc, text = run(tree, request["args"], request.get("env", {}), float(request["timeout"]))
        print(json.dumps({"rc": rc, "out": text}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
