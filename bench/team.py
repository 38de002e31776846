"""The team server: recall and save throughput and p99 over loopback HTTP against `memframe serve`,
at 1, 4, 16 and 64 concurrent clients, on SQLite and on PostgreSQL, with one worker and with two.

Every configuration is a real `memframe serve` process (through `bench._serve`, which is that
command) on a database the bench fills first; the load comes from `bench.load`, in this process.
The floors are measured in the same run: the no-op route at one client, each rate at the level of
concurrency below it (throughput must not fall as concurrency rises), the save path as it was
before group commit (`bench._serve --ungrouped-saves`, one transaction and fsync per Save), and
one worker beside two.
"""

from __future__ import annotations

import base64
import json
import math
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
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

LEVELS = (1, 4, 16, 64)
#: The old save path at saturation in the issue that asked for group commit (for the notes only:
#: the aim is judged against the old path measured beside the new one in this run).
ISSUE_SAVES_PER_SECOND = 680.0


@dataclass
class Served:
    """One `memframe serve` process and what the bench set up on it."""

    url: str
    proc: subprocess.Popen[bytes]
    token: str
    spaces: list[Workspace]
    heads: dict[str, tuple[int, bytes]]  # workspace id → (version, ciphertext) of the memory's head


@dataclass
class Curve:
    """One configuration's rates at each level of concurrency."""

    label: str
    loads: dict[int, Load]

    def rate(self, clients: int) -> float:
        return self.loads[clients].rate

    def p99_ms(self, clients: int) -> float:
        return ms(percentile(self.loads[clients].latencies, 99))

    def p50_ms(self, clients: int) -> float:
        return ms(percentile(self.loads[clients].latencies, 50))

    def peak(self) -> tuple[int, float]:
        clients = max(self.loads, key=self.rate)
        return clients, self.rate(clients)


def workers_supported() -> bool:
    """Whether this memframe's `serve` takes `--workers` (it runs one process otherwise)."""
    done = subprocess.run(
        [sys.executable, "-m", "memframe", "serve", "--help"], capture_output=True, text=True, check=False
    )
    return "--workers" in done.stdout


# --- PostgreSQL ---------------------------------------------------------------------------------


@contextmanager
def postgres(tmp: Path) -> Iterator[Callable[[], str] | None]:
    """A throwaway PostgreSQL server (the tests' own, tests/pg_server.py) with its durability on,
    as a team would run it (the tests turn fsync off): yields a maker of fresh empty databases
    (schemas), or None when no PostgreSQL is installed here."""
    try:
        from tests.pg_server import PostgresServer, find_bin
    except ImportError:
        yield None
        return
    bindir = find_bin()
    if bindir is None:
        yield None
        return

    class DurablePostgres(PostgresServer):
        def pg_ctl_start(self) -> None:
            options = (
                f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1"
                " -c max_connections=300 -c shared_buffers=64MB"
            )
            self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.dir / "log"), "-w", "start")

    server = DurablePostgres(bindir).start()
    try:
        yield server.fresh_url
    finally:
        server.close()


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
    workers: int = 1
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
    if wanted.workers > 1:
        command += ["--workers", str(wanted.workers)]
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


def _rate_figure(
    name: str, value: float, load: Load, *, aim: str, limit: float, floor: float, floor_name: str
) -> Figure:
    return Figure(
        name=name,
        value=value,
        unit="/s",
        aim=aim,
        aim_op="ratio>=",
        aim_limit=limit,
        floor=floor,
        floor_name=floor_name,
        samples=len(load.latencies),
        latency_p99_ms=ms(percentile(load.latencies, 99)),
        note=f"p50 {ms(percentile(load.latencies, 50)):.2f} ms, p99 {ms(percentile(load.latencies, 99)):.2f} ms",
    )


def recall_figures_for(curve: Curve, noop: Load, where: str) -> list[Figure]:
    """One row per level: one client beside the no-op route at one client, each level beside the one
    below it (no fall as concurrency rises), 64 clients beside the peak."""
    figures = []
    peak_at, peak = curve.peak()
    for i, clients in enumerate(LEVELS):
        load = curve.loads[clients]
        name = f"recall/s over HTTP, {where}, {clients} client{'s' if clients > 1 else ''}"
        if clients == 1:
            figure = _rate_figure(
                name,
                load.rate,
                load,
                aim="≥ 0.4× no-op",
                limit=0.4,
                floor=noop.rate,
                floor_name="GET /healthz, 1 client",
            )
        elif clients == LEVELS[-1]:
            figure = _rate_figure(
                name, load.rate, load, aim="≥ 0.9× its peak", limit=0.9, floor=peak,
                floor_name=f"its peak ({peak_at} client{'s' if peak_at > 1 else ''})",
            )  # fmt: skip
        else:
            below = LEVELS[i - 1]
            figure = _rate_figure(
                name, load.rate, load, aim=f"≥ 0.9× at {below}", limit=0.9, floor=curve.rate(below),
                floor_name=f"{below} client{'s' if below > 1 else ''}",
            )  # fmt: skip
        figures.append(figure)
    return figures


def save_figures_for(curve: Curve, old: Curve, where: str) -> list[Figure]:
    """One row per level: one client and 64 beside the old save path (one fsync per Save) at the same
    level, the levels between beside the one below; and the p99 at 64 clients."""
    figures = []
    top = LEVELS[-1]
    for i, clients in enumerate(LEVELS):
        load = curve.loads[clients]
        name = f"saves/s over HTTP, {where}, {clients} client{'s' if clients > 1 else ''}"
        if clients in old.loads:
            aim, limit = ("≥ 2× one fsync per Save", 2.0) if clients == top else ("≥ 0.9× one fsync per Save", 0.9)
            figure = _rate_figure(
                name, load.rate, load, aim=aim, limit=limit, floor=old.rate(clients),
                floor_name=f"one transaction and fsync per Save, {clients} client{'s' if clients > 1 else ''}",
            )  # fmt: skip
            if clients == top:
                figure.note += (
                    f"; the old path here: {old.rate(clients):,.0f}/s, p99 {old.p99_ms(clients):.1f} ms "
                    f"(the issue measured ~{ISSUE_SAVES_PER_SECOND:,.0f}/s on its machine)"
                )
        else:
            below = LEVELS[i - 1]
            figure = _rate_figure(
                name, load.rate, load, aim=f"≥ 0.9× at {below}", limit=0.9, floor=curve.rate(below),
                floor_name=f"{below} client{'s' if below > 1 else ''}",
            )  # fmt: skip
        figures.append(figure)
    load = curve.loads[top]
    figures.append(
        Figure(
            name=f"save p99 over HTTP, {where}, {top} clients",
            value=ms(percentile(load.latencies, 99)),
            unit="ms",
            aim="≤ 100 ms",
            aim_op="value<=",
            aim_limit=100.0,
            p99=ms(percentile(load.latencies, 99)),
            floor=old.p99_ms(top),
            floor_name=f"one fsync per Save, {top} clients, p99",
            samples=len(load.latencies),
            note=f"the value is the p99 itself; p50 {ms(percentile(load.latencies, 50)):.2f} ms",
        )
    )
    return figures


def _merged(loads: list[Load]) -> Load:
    """Several rounds of one load as one: their answers over their summed time."""
    out = Load(loads[0].connections, sum(load.elapsed for load in loads))
    for load in loads:
        out.latencies += load.latencies
        out.failures += load.failures
    return out


def _saves_per_round(s: Settings, clients: int) -> int:
    return max(s.team_saves_min, clients * s.team_saves_per_client)


def _measure(
    servers: dict[str, Served], new: Served, old: Served, s: Settings, two: Served | None = None
) -> tuple[Load, dict[str, Curve], Curve, Curve, Curve | None]:
    """Every load of one engine, interleaved round by round so a noisy neighbour slows all alike:
    each round runs the no-op, then recall at every level on every server in `servers` (one worker,
    two), then Saves at every level on `new` and, at one client and at the top level, on `old` (the
    save path without group commit) and at the top level on `two` (group commit with two workers),
    taking turns at going first. `new`, `old` and `two` serve Saves only, so none carries the other
    loads' receipts. Returns the no-op, the recall curves, and the save curves (new, old, two)."""
    top = LEVELS[-1]
    first = next(iter(servers.values()))
    noop: list[Load] = []
    recalls: dict[str, dict[int, list[Load]]] = {name: {c: [] for c in LEVELS} for name in servers}
    saves: dict[int, list[Load]] = {c: [] for c in LEVELS}
    olds: dict[int, list[Load]] = {1: [], top: []}
    twos: dict[int, list[Load]] = {top: []}
    seconds = s.team_seconds / s.team_rounds
    for server in (*servers.values(), new, old, *([two] if two else [])):
        _checked(recall_load(server, 4, seconds), "warm-up")
    for round_ in range(s.team_rounds):
        noop.append(_checked(noop_load(first, 1, seconds), "GET /healthz"))
        for clients in LEVELS:
            for name, server in servers.items():
                recalls[name][clients].append(_checked(recall_load(server, clients, seconds), f"recall, {name}"))
        for clients in LEVELS:
            n = _saves_per_round(s, clients)
            turns = [(new, saves)] + ([(old, olds)] if clients in olds else [])
            turns += [(two, twos)] if two is not None and clients in twos else []
            shift = round_ % len(turns)  # each takes its turn at going first
            turns = turns[shift:] + turns[:shift]
            for server, into in turns:
                into[clients].append(_checked(save_load(server, clients, n), f"saves, {clients} clients"))
    curves = {name: Curve(name, {c: _merged(v) for c, v in levels.items()}) for name, levels in recalls.items()}
    new_saves = Curve("saves", {c: _merged(v) for c, v in saves.items()})
    old_saves = Curve("one fsync per Save", {c: _merged(v) for c, v in olds.items() if v})
    two_saves = Curve("2 workers", {c: _merged(v) for c, v in twos.items()}) if two is not None else None
    noop_load_ = _merged(noop)
    log(f"  GET /healthz, 1 client: {noop_load_.rate:,.0f}/s")
    for name, curve in curves.items():
        for c in LEVELS:
            log(f"  recall, {name}, {c:2} clients: {curve.rate(c):7,.0f}/s, p99 {curve.p99_ms(c):6.1f} ms")
    labelled = [("group commit", new_saves), ("one fsync per Save", old_saves)]
    labelled += [("group commit, 2 workers", two_saves)] if two_saves is not None else []
    for label, curve in labelled:
        for c in curve.loads:
            log(f"  saves, {label}, {c:2} clients: {curve.rate(c):7,.0f}/s, p99 {curve.p99_ms(c):6.1f} ms")
    return noop_load_, curves, new_saves, old_saves, two_saves


def _engine_figures(
    tmp: Path, s: Settings, engine: str, new_db: Callable[[str], str], *, two_workers: bool = False
) -> list[Figure]:
    """The figures of one engine: recall and Saves at every level with one worker, the old save path
    beside them, and (with `two_workers`) recall with two workers beside one, and Saves with two
    workers at the top level beside the old save path."""
    count = LEVELS[-1]
    where = f"{engine}, 1 worker"
    wanted = [Wanted(f"{engine}-1w", new_db(f"{engine}-1w"), count)]
    wanted += [Wanted(f"{engine}-2w", new_db(f"{engine}-2w"), count, workers=2)] if two_workers else []
    wanted += [
        Wanted(f"{engine}-old", new_db(f"{engine}-old"), count, ungrouped=True),
        Wanted(f"{engine}-saves", new_db(f"{engine}-saves"), count),
    ]
    wanted += [Wanted(f"{engine}-2w-saves", new_db(f"{engine}-2w-saves"), count, workers=2)] if two_workers else []
    with served(tmp, *wanted) as running:
        servers = {where: running[0]}
        if two_workers:
            servers[f"{engine}, 2 workers"] = running[1]
        old, new = running[-3:-1] if two_workers else running[-2:]
        two = running[-1] if two_workers else None
        noop, recalls, saves, old_saves, two_saves = _measure(servers, new, old, s, two)
    figures = recall_figures_for(recalls[where], noop, where) + save_figures_for(saves, old_saves, engine)
    if two_workers:
        figures += _two_worker_figures(recalls[f"{engine}, 2 workers"], recalls[where], engine)
    if two_saves is not None:
        figures += two_worker_save_figures(two_saves, old_saves, engine)
    return figures


def _two_worker_figures(two: Curve, one: Curve, engine: str) -> list[Figure]:
    top = LEVELS[-1]
    return [
        _rate_figure(
            f"recall/s over HTTP, {engine}, 2 workers, {clients} client{'s' if clients > 1 else ''}",
            two.rate(clients),
            two.loads[clients],
            aim="≥ 1.6× one worker" if clients == top else "≥ 0.9× one worker",
            limit=1.6 if clients == top else 0.9,
            floor=one.rate(clients),
            floor_name=f"1 worker, {clients} client{'s' if clients > 1 else ''}",
        )
        for clients in LEVELS
    ]


def two_worker_save_figures(two: Curve, old: Curve, engine: str) -> list[Figure]:
    """Saves with two workers at the top level beside the old save path (one transaction and fsync
    per Save, one worker) at that level, with the same aim as one worker's; and their p99. Each
    worker group-commits its own Saves; the two meet at SQLite's file lock."""
    top = LEVELS[-1]
    where = f"{engine}, 2 workers, {top} clients"
    load = two.loads[top]
    rate = _rate_figure(
        f"saves/s over HTTP, {where}", load.rate, load, aim="≥ 2× one fsync per Save", limit=2.0,
        floor=old.rate(top), floor_name=f"one transaction and fsync per Save, {top} clients",
    )  # fmt: skip
    p99 = ms(percentile(load.latencies, 99))
    return [
        rate,
        Figure(
            name=f"save p99 over HTTP, {where}",
            value=p99,
            unit="ms",
            aim="≤ 100 ms",
            aim_op="value<=",
            aim_limit=100.0,
            p99=p99,
            floor=old.p99_ms(top),
            floor_name=f"one fsync per Save, {top} clients, p99",
            samples=len(load.latencies),
            note=f"the value is the p99 itself; p50 {ms(percentile(load.latencies, 50)):.2f} ms",
        ),
    ]


def _not_measured_two_workers(engine: str) -> Figure:
    top = LEVELS[-1]
    return Figure(
        name=f"recall/s over HTTP, {engine}, 2 workers, {top} clients",
        value=0.0,
        unit="/s",
        aim="≥ 1.6× one worker",
        aim_op="ratio>=",
        aim_limit=1.6,
        note="NOT MEASURED: this memframe serve has no --workers option",
    )


def team_figures(tmp: Path, s: Settings) -> list[Figure]:
    workers = workers_supported()
    if not workers:
        log("  two workers: not measured (this memframe serve has no --workers)")
    figures = _engine_figures(tmp, s, "SQLite", lambda name: str(tmp / f"team-{name}.db"), two_workers=workers)
    if not workers:
        figures.append(_not_measured_two_workers("SQLite"))
    with postgres(tmp) as fresh:
        if fresh is None:
            log("  PostgreSQL: not measured (no PostgreSQL installed here)")
        else:
            figures += _engine_figures(tmp, s, "PostgreSQL", lambda name: fresh())
    return figures
