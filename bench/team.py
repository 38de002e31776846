"""The team server over loopback HTTP: Saves at 64 clients beside one fsync per Save, and recall
beside a no-op route on the same server.

Every configuration is a real `memframe serve` process (through `bench._serve`, which is that
command) on a database the bench fills first; the load comes from `bench.load`, in this process.
The floors run in the same rounds: `GET /healthz` on the recall's own server, and the save path as
it was before group commit (`bench._serve --ungrouped-saves`: one transaction and fsync per Save).
"""

from __future__ import annotations

import base64
import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bench.data import Workspace, admit_many, create_workspaces, memory_text, new_service
from bench.harness import Figure, child_env, log, ms, percentile
from bench.load import Load, Requests, drive, request
from bench.settings import Settings
from memframe import sealing
from memframe.core.types import MEMORY_PATH, Mode
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER

#: The Saves' level of concurrency, as the aim names it (one workspace per client).
CLIENTS = 64


@dataclass
class Served:
    """One `memframe serve` process and what the bench set up on it."""

    url: str
    proc: subprocess.Popen[bytes]
    token: str
    spaces: list[Workspace]
    heads: dict[str, tuple[int, bytes]]  # workspace id → (version, ciphertext) of the memory's head


# --- one server -------------------------------------------------------------------------------


def _wait_for_url(out: Path, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in out.read_text(errors="replace").splitlines():
            if line.startswith("memframe serving") and " at http" in line:
                return line.split(" at ", 1)[1].split()[0]
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"memframe serve did not start: {out.read_text(errors='replace')[-2000:]}")


@dataclass(frozen=True)
class Wanted:
    """One server to start: its name, its database, how many workspaces, how it runs."""

    name: str
    db: str
    count: int
    ungrouped: bool = False


@dataclass
class _Starting:
    service: MemoryService
    token: str
    spaces: list[Workspace]
    heads: dict[str, tuple[int, bytes]]
    out: Path
    proc: subprocess.Popen[bytes] | None = None


def _start(tmp: Path, wanted: Wanted) -> _Starting:
    """Fills `wanted.db` with its workspaces (8 KiB of memory each, in Auto) and starts its
    `memframe serve` without waiting for it to answer."""
    service = new_service(wanted.db)
    _, token = service.accounts.create_token(LOCAL_USER, "bench")
    spaces = create_workspaces(
        service, wanted.count, prefix=f"{wanted.name}-", text=memory_text(8 * 1024 - 64), mode=Mode.AUTO, ai=True
    )
    heads: dict[str, tuple[int, bytes]] = {}
    for ws in spaces:
        head = service.get_file(LOCAL_USER, ws.id, MEMORY_PATH)
        assert head is not None and head.ciphertext is not None
        heads[ws.id] = (head.info.version, head.ciphertext)
    starting = _Starting(service, token, spaces, heads, tmp / f"serve-{wanted.name}.out")
    command = [sys.executable, "-m", "bench._serve", *(["--ungrouped-saves"] if wanted.ungrouped else [])]
    command += ["serve", "--db", wanted.db, "--port", "0", "--log-level", "warning"]
    with starting.out.open("wb") as sink:
        starting.proc = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=child_env(tmp, MEMFRAME_HOME=str(tmp / "home"))
        )
    return starting


def _ready(starting: _Starting) -> Served:
    """Waits for the server to answer, opens a key session over HTTP for each workspace and writes
    one admission (its delivery credential) naming it, as ingress writes them."""
    assert starting.proc is not None
    url = _wait_for_url(starting.out, starting.proc)
    _open_key_sessions(url, starting.token, starting.spaces)
    admit_many(starting.service, starting.spaces, 1)
    starting.service.close()
    return Served(url, starting.proc, starting.token, starting.spaces, starting.heads)


@contextmanager
def served(tmp: Path, *wanted: Wanted) -> Iterator[list[Served]]:
    """`memframe serve` for each of `wanted`, each on a fresh database. Every server is started
    before any is waited for, so their start-ups (seconds each: the imports) overlap; they are
    stopped together too."""
    started: list[_Starting] = []
    try:
        for spec in wanted:
            started.append(_start(tmp, spec))
        yield [_ready(one) for one in started]
    finally:
        procs = [one.proc for one in started if one.proc is not None]
        for one in started:
            one.service.close()
        for proc in procs:
            proc.terminate()
        deadline = time.monotonic() + 30
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _open_key_sessions(url: str, token: str, spaces: list[Workspace]) -> None:
    import httpx

    with httpx.Client(base_url=url, timeout=60.0, headers={"Authorization": f"Bearer {token}"}) as client:
        for ws in spaces:
            answer = client.post(
                f"/api/v1/workspaces/{ws.id}/key-sessions", json={"key": base64.b64encode(ws.key).decode()}
            )
            answer.raise_for_status()
            ws.key_session = answer.json()["id"]


# --- the loads --------------------------------------------------------------------------------


def _host(url: str) -> str:
    return urlsplit(url).netloc


def recall_load(server: Served, clients: int, seconds: float) -> Load:
    """`clients` connections, each recalling one workspace's memory (spread over them) back to back."""
    host = _host(server.url)
    each: list[Requests] = []
    for n in range(clients):
        ws = server.spaces[n % len(server.spaces)]
        data = request(
            "GET",
            f"/api/v1/automation/workspaces/{ws.id}/memory?purpose=recall",
            host,
            {"Authorization": f"Bearer {ws.admissions[0].credential}"},
        )
        each.append(_constant(data, b'"status":"provided"'))
    return drive(server.url, each, seconds=seconds)


def noop_load(server: Served, clients: int, seconds: float) -> Load:
    data = request("GET", "/healthz", _host(server.url))
    return drive(server.url, [_constant(data, None) for _ in range(clients)], seconds=seconds)


def _constant(data: bytes, expect: bytes | None) -> Requests:
    def next_request(last: bytes | None) -> bytes | None:
        if last is not None and expect is not None and expect not in last:
            raise AssertionError(f"unexpected answer {last[:200]!r}")
        return data

    return next_request


def save_load(server: Served, clients: int, saves: int) -> Load:
    """`clients` people saving their own workspace's memory, `saves` Saves in all, each against the
    version its last Save was acknowledged at (sealed beforehand, so the client's crypto is not timed)."""
    host = _host(server.url)
    per_client = max(2, math.ceil(saves / clients))
    each: list[Requests] = []
    for n in range(clients):
        ws = server.spaces[n]
        version, previous = server.heads[ws.id]
        bodies: list[bytes] = []
        for k in range(per_client):
            blob = sealing.seal(
                ws.key,
                memory_text(8 * 1024 - 96) + f"- save {version + k + 1}\n",
                workspace_id=ws.id,
                path=MEMORY_PATH,
                version=version + k + 1,
                previous=previous,
            )
            body = json.dumps({"ciphertext": base64.b64encode(blob).decode()}).encode()
            headers = {
                "Authorization": f"Bearer {server.token}",
                "Content-Type": "application/json",
                "X-Base-Version": str(version + k),
            }
            bodies.append(request("PUT", f"/api/v1/workspaces/{ws.id}/files/{MEMORY_PATH}", host, headers, body))
            previous = blob
        server.heads[ws.id] = (version + per_client, previous)
        each.append(_sequence(bodies))
    return drive(server.url, each, seconds=600.0)


def _sequence(requests: list[bytes]) -> Requests:
    it = iter(requests)

    def next_request(last: bytes | None) -> bytes | None:
        return next(it, None)

    return next_request


def _checked(load: Load, what: str) -> Load:
    if load.failures:
        raise RuntimeError(f"{what}: {len(load.failures)} request(s) failed, first: {load.failures[0]}")
    return load


# --- the figures --------------------------------------------------------------------------------


def _rate_figure(name: str, load: Load, floor: Load, *, aim: str, limit: float, floor_name: str) -> Figure:
    """`load`'s rate beside `floor`'s, with its latencies in the note."""
    return Figure(
        name=name,
        value=load.rate,
        unit="/s",
        aim=aim,
        aim_op="ratio>=",
        aim_limit=limit,
        floor=floor.rate,
        floor_name=floor_name,
        samples=len(load.latencies),
        latency_p99_ms=ms(percentile(load.latencies, 99)),
        note=f"p50 {ms(percentile(load.latencies, 50)):.2f} ms, p99 {ms(percentile(load.latencies, 99)):.2f} ms",
    )


def _merged(loads: list[Load]) -> Load:
    """Several rounds of one load as one: their answers over their summed time."""
    out = Load(loads[0].connections, sum(load.elapsed for load in loads))
    for load in loads:
        out.latencies += load.latencies
        out.failures += load.failures
    return out


def _measure(recall: Served, new: Served, old: Served, s: Settings) -> dict[str, Load]:
    """Every load, interleaved round by round so a noisy neighbour slows all alike, each pair taking
    turns at going first: the no-op and recall at one client on `recall`, then Saves at 64 clients
    on `new` (group commit) and on `old` (one fsync per Save). `new` and `old` serve Saves only, so
    neither carries recall's receipts."""
    runs: dict[str, list[Load]] = {"noop": [], "recall": [], "saves": [], "old": []}
    seconds = s.team_seconds / s.team_rounds
    saves = max(s.team_saves_min, CLIENTS * s.team_saves_per_client)
    for server in (recall, new, old):
        _checked(recall_load(server, 4, seconds), "warm-up")
    for round_ in range(s.team_rounds):
        reads = [
            ("noop", lambda: noop_load(recall, 1, seconds)),
            ("recall", lambda: recall_load(recall, 1, seconds)),
        ]
        writes = [
            ("saves", lambda: save_load(new, CLIENTS, saves)),
            ("old", lambda: save_load(old, CLIENTS, saves)),
        ]
        for pair in (reads, writes):
            for name, run in pair[round_ % 2 :] + pair[: round_ % 2]:
                runs[name].append(_checked(run(), name))
    loads = {name: _merged(each) for name, each in runs.items()}
    for name, load in loads.items():
        log(f"  {name}: {load.rate:7,.0f}/s, p99 {ms(percentile(load.latencies, 99)):6.1f} ms")
    return loads


def team_figures(tmp: Path, s: Settings) -> list[Figure]:
    wanted = [
        Wanted("recall", str(tmp / "team-recall.db"), CLIENTS),
        Wanted("old", str(tmp / "team-old.db"), CLIENTS, ungrouped=True),
        Wanted("saves", str(tmp / "team-saves.db"), CLIENTS),
    ]
    with served(tmp, *wanted) as (recall, old, new):
        loads = _measure(recall, new, old, s)
    saves, old_saves = loads["saves"], loads["old"]
    p99 = ms(percentile(saves.latencies, 99))
    return [
        _rate_figure(
            "recall/s over HTTP, SQLite, 1 client",
            loads["recall"],
            loads["noop"],
            aim="≥ 0.8× no-op",
            limit=0.8,
            floor_name="GET /healthz on the same server, 1 client",
        ),
        _rate_figure(
            f"saves/s over HTTP, SQLite, {CLIENTS} clients",
            saves,
            old_saves,
            aim="≥ 2× one fsync per Save",
            limit=2.0,
            floor_name=f"one transaction and fsync per Save, {CLIENTS} clients",
        ),
        Figure(
            name=f"save p99 over HTTP, SQLite, {CLIENTS} clients",
            value=p99,
            unit="ms",
            aim="≤ 100 ms",
            aim_op="value<=",
            aim_limit=100.0,
            p99=p99,
            floor=ms(percentile(old_saves.latencies, 99)),
            floor_name=f"one fsync per Save, {CLIENTS} clients, p99",
            samples=len(saves.latencies),
            note=f"the value is the p99 itself; p50 {ms(percentile(saves.latencies, 50)):.2f} ms",
        ),
    ]
