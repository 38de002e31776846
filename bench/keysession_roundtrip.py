"""One key-session round trip's CPU on each side, as serve's workers make it before every recall.

    python -m bench.keysession_roundtrip [CALLS]

Starts serve's private key-session service (`run_private`, a child process on a unix socket),
opens one session and resolves it CALLS times (a recall's `memory_opener`), then prints the CPU
per call in this process (the worker's side) and in the service's, from /proc. Not part of
`make bench`: it isolates the cost the team stage's two-worker figures pay on every request.
"""

from __future__ import annotations

import multiprocessing
import os
import secrets
import shutil
import sys
import tempfile
import time

from memframe.cli.keysessions import run_private
from memframe.service.keysession_client import RemoteKeySessions


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str]) -> int:
    calls = int(argv[0]) if argv else 2000
    where = tempfile.mkdtemp(prefix="ks-")
    uds, credential = os.path.join(where, "ks.sock"), secrets.token_urlsafe(32)
    service = multiprocessing.get_context("spawn").Process(
        target=run_private, args=(uds, credential, 3600.0, 36000.0), daemon=True
    )
    service.start()
    store = RemoteKeySessions("http://keysessions", credential, uds=uds)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                len(store)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        session = store.open("ws", "bench", os.urandom(32)).id
        for _ in range(200):
            store.memory_opener(session, "ws")
        mine, theirs, wall = time.process_time(), _cpu_seconds(service.pid or 0), time.perf_counter()
        for _ in range(calls):
            store.memory_opener(session, "ws")
        mine = time.process_time() - mine
        theirs = _cpu_seconds(service.pid or 0) - theirs
        wall = time.perf_counter() - wall
        print(
            f"{calls} round trips: worker CPU {1e3 * mine / calls:.3f} ms, service CPU {1e3 * theirs / calls:.3f} ms, "
            f"wall {1e3 * wall / calls:.3f} ms each (load average {os.getloadavg()[0]:.1f})"
        )
    finally:
        store.close()
        service.terminate()
        service.join(5)
        shutil.rmtree(where, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
