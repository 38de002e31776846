"""Crash trials of a rotation: `memframe forget` SIGKILLed at random points, then checked.

Each trial copies one prepared memframe home (a local workspace of many versions and its key file),
runs `memframe forget --before N --yes` there in a child process and SIGKILLs it somewhere between
its start and its end. Whatever the kill point, the workspace is wholly under one key that this
machine holds (the key file's, or the pending one written before the upload), every version that is
left opens under it to its own text, the current text is unchanged, and running `memframe key
rotate --yes` finishes (or drops) the interrupted rotation, after which the CLI reads the same text.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memframe import sealing
from memframe.backend.heads import SeenHeads
from memframe.backend.local import LocalBackend
from memframe.sealing import keyfiles
from memframe.service import MemoryService
from tests.reliability.support import sized

pytestmark = pytest.mark.crash

VERSIONS = 400
FORGET_BEFORE = 150
TRIALS = sized(6, 60)
TEXTS = [f"# Memory\n- line {i}: something said on day {i}\n" * 3 for i in range(1, VERSIONS + 1)]


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "MEMFRAME_HOME": str(home), "PYTHONPATH": os.getcwd()}


def cli(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memframe", *argv], env=_env(home), capture_output=True, text=True, timeout=120
    )


def started(home: Path, *argv: str) -> subprocess.Popen[bytes]:
    """A command to be killed: its output goes nowhere."""
    return subprocess.Popen(
        [sys.executable, "-m", "memframe", *argv],
        env=_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def keys(home: Path) -> tuple[bytes, bytes | None]:
    folder = home / "keys" / "local"
    current = keyfiles.decode_key_file((folder / "default.key").read_bytes())
    pending = folder / "default.key.pending"
    return current, keyfiles.decode_key_file(pending.read_bytes()) if pending.exists() else None


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("forget-template")
    assert cli(home, "init").returncode == 0
    key, _ = keys(home)
    backend = LocalBackend(home / "memframe.db", "default", key, seen=SeenHeads(None))
    for i, text in enumerate(TEXTS):
        backend.save(text, i)
    backend.close()
    return home


def test_a_killed_forget_leaves_one_key_and_every_text(template: Path, tmp_path: Path) -> None:
    calibration = tmp_path / "calibration"
    shutil.copytree(template, calibration)
    begun = time.perf_counter()
    assert cli(calibration, "forget", "--before", str(FORGET_BEFORE), "--yes").returncode == 0
    whole = time.perf_counter() - begun
    rng = random.Random(os.environ.get("MEMFRAME_CRASH_SEED", "forget"))
    outcomes: set[str] = set()
    for trial in range(TRIALS):
        home = tmp_path / f"trial{trial}"
        shutil.copytree(template, home)
        child = started(home, "forget", "--before", str(FORGET_BEFORE), "--yes")
        time.sleep(rng.uniform(0.2, 1.1) * whole)
        child.send_signal(signal.SIGKILL)
        child.wait()
        outcomes.add(_check(home))
        finish = cli(home, "key", "rotate", "--yes")
        assert finish.returncode == 0, finish.stderr
        assert cli(home, "show", "--text-only").stdout == TEXTS[-1]
        assert cli(home, "verify").returncode == 0
    assert outcomes, "no trial ran"


def _check(home: Path) -> str:
    """The workspace opens under exactly one key this machine holds, every version to its text."""
    current, pending = keys(home)
    service = MemoryService(home / "memframe.db")
    try:
        stored = service.get_key_check("local", "default")
        holders = [k for k in (current, pending) if k is not None and sealing.key_check(k, "default") == stored]
        assert len(holders) == 1, "no key on this machine matches the workspace's key check"
        backend = LocalBackend(service, "default", holders[0], seen=SeenHeads(None))
        first = 1 if service.latest_rotation("local", "default") is None else FORGET_BEFORE
        texts = backend.read_revisions(list(range(first, VERSIONS + 1)))
        assert texts == {v: TEXTS[v - 1] for v in range(first, VERSIONS + 1)}
        assert backend.load().text == TEXTS[-1]
        assert backend.verify() == [(".zudotext/memory/MEMORY.md", VERSIONS)]
        return "new" if holders[0] is pending or first > 1 else "old"
    finally:
        service.close()


#: The server's side of a rotation in a child process: it opens the database, says it is ready, waits
#: for the go, swaps in the plan the client made (pickled), then says how long the swap took.
_SERVER = """
import pickle, sys, time
from memframe.service import MemoryService
service = MemoryService(sys.argv[1])
plan = pickle.loads(open(sys.argv[2], "rb").read())
print("ready", flush=True)
sys.stdin.readline()
began = time.perf_counter()
service.rotate_key("local", "default", plan)
print(time.perf_counter() - began, flush=True)
"""


def test_a_killed_server_swaps_all_or_nothing(template: Path, tmp_path: Path) -> None:
    """The client re-seals; the server process is SIGKILLed during the swap or the disk rewrite."""
    import pickle

    from memframe.backend.rotation import rotate
    from memframe.core.rotation import RotationPlan

    old, _ = keys(template)
    new = sealing.new_key()
    plans: list[RotationPlan] = []

    class Capture(Exception):
        pass

    def captured(plan: RotationPlan) -> None:
        plans.append(plan)
        raise Capture

    service = MemoryService(template / "memframe.db")
    backend = LocalBackend(service, "default", old, seen=SeenHeads(None))
    backend.store.rotate_key = captured  # type: ignore[method-assign]  # the plan, not the swap
    with pytest.raises(Capture):
        rotate(backend.store, old, new, who="ada", forget_before=FORGET_BEFORE)
    service.close()
    (tmp_path / "plan").write_bytes(pickle.dumps(plans[0]))

    def serve(home: Path) -> subprocess.Popen[str]:
        child = subprocess.Popen(
            [sys.executable, "-c", _SERVER, str(home / "memframe.db"), str(tmp_path / "plan")],
            env=_env(home),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        return child

    calibration = tmp_path / "calibration"
    shutil.copytree(template, calibration)
    child = serve(calibration)
    whole = float(child.communicate("go\n", timeout=60)[0])
    rng = random.Random(os.environ.get("MEMFRAME_CRASH_SEED", "server"))
    for trial in range(TRIALS):
        home = tmp_path / f"server{trial}"
        shutil.copytree(template, home)
        child = serve(home)
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        time.sleep(rng.uniform(0.0, 1.2) * whole)
        child.send_signal(signal.SIGKILL)
        child.communicate()
        landed = MemoryService(home / "memframe.db")
        try:
            stored = landed.get_key_check("local", "default")
            assert stored in (sealing.key_check(old, "default"), sealing.key_check(new, "default"))
            key = new if stored == sealing.key_check(new, "default") else old
            first = FORGET_BEFORE if key is new else 1
            reader = LocalBackend(landed, "default", key, seen=SeenHeads(None))
            texts = reader.read_revisions(list(range(first, VERSIONS + 1)))
            assert texts == {v: TEXTS[v - 1] for v in range(first, VERSIONS + 1)}
            assert reader.verify() == [(".zudotext/memory/MEMORY.md", VERSIONS)]
            with landed.db.read() as conn:
                assert conn.execute("SELECT MIN(version) FROM file_versions").fetchone()[0] == first
        finally:
            landed.close()
