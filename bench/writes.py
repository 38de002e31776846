"""Writes: a person's durable Save against `git commit`, and the commit fence under concurrency."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.data import Workspace, admit_many, create_workspaces, memory_text, new_service, open_key_sessions, revisions
from bench.harness import Figure, Stats, latency_figure, log, ms
from bench.settings import Settings
from memframe.backend.local import LocalBackend
from memframe.core.edits import MemoryChange
from memframe.core.errors import FenceRefused, VersionConflict
from memframe.core.types import MEMORY_PATH, Mode
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.service.admissions import Admission


def git_env(home: Path) -> dict[str, str]:
    """git with no user or system configuration: the same git on every machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="bench",
        GIT_AUTHOR_EMAIL="bench@example.invalid",
        GIT_COMMITTER_NAME="bench",
        GIT_COMMITTER_EMAIL="bench@example.invalid",
        # Durable like memframe's save: git fsyncs its objects, refs and index (git ≥ 2.36);
        # without this `git commit` returns before anything is on disk.
        GIT_CONFIG_COUNT="2",
        GIT_CONFIG_KEY_0="core.fsync",
        GIT_CONFIG_VALUE_0="committed,index",
        GIT_CONFIG_KEY_1="core.fsyncMethod",
        GIT_CONFIG_VALUE_1="fsync",
    )
    return env


def durable_git_commits(tmp: Path, texts: list[str]) -> Stats:
    """`git commit -a` of each text in a fresh repository, durable (see `git_env`): the save's peer."""
    repo = tmp / f"git-peer-{time.monotonic_ns()}"
    repo.mkdir()
    env = git_env(tmp)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    memory = repo / "MEMORY.md"
    memory.write_text(texts[0])
    subprocess.run(["git", "add", "MEMORY.md"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "first"], cwd=repo, check=True, env=env)
    times = []
    for n, text in enumerate(texts[1:]):
        memory.write_text(text)
        start = time.perf_counter()
        subprocess.run(["git", "commit", "-q", "-a", "-m", f"save {n}"], cwd=repo, check=True, env=env)
        times.append(time.perf_counter() - start)
    return Stats.of(times)


def human_save(tmp: Path, s: Settings) -> list[Figure]:
    texts = list(revisions(s.saves + s.git_commits + 10, size=8 * 1024 - 64, seed=3))
    service = new_service(str(tmp / "save.db"))
    (ws,) = create_workspaces(service, 1, prefix="save")
    backend = LocalBackend(service, ws.id, ws.key)
    repo = tmp / "save-git"
    repo.mkdir()
    env = git_env(tmp)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    memory = repo / "MEMORY.md"
    memory.write_text(texts[0])
    subprocess.run(["git", "add", "MEMORY.md"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "first"], cwd=repo, check=True, env=env)
    version = backend.save(texts[0], 0).version

    saves: list[float] = []
    commits: list[float] = []
    n = 1
    rounds = max(1, min(s.git_commits, 10))
    for r in range(rounds):
        for _ in range(s.saves // rounds):
            text = texts[n]
            start = time.perf_counter()
            version = backend.save(text, version).version
            saves.append(time.perf_counter() - start)
            n += 1
        for _ in range(s.git_commits // rounds):
            memory.write_text(texts[n % len(texts)])
            start = time.perf_counter()
            subprocess.run(["git", "commit", "-q", "-a", "-m", f"save {r}"], cwd=repo, check=True, env=env)
            commits.append(time.perf_counter() - start)
            n += 1
    backend.close()
    service.close()
    fsyncs = _bare_fsyncs(tmp / "fsync.bin", max(10, s.git_commits))
    figure = latency_figure(
        "human save, local, durable (8 KiB, WAL, synchronous=FULL)",
        Stats.of(saves),
        Stats.of(commits),
        aim="≤ 0.1× git",
        aim_op="ratio<=",
        aim_limit=0.1,
        floor_name="git commit -a, core.fsync=committed,index",
    )
    figure.note = (
        f"one bare write + fsync of 8 KiB takes {ms(fsyncs.p50):.2f} ms p50 here: the save pays one "
        f"({ms(Stats.of(saves).p50) / ms(fsyncs.p50):.1f}× it), durable git ~"
        f"{ms(Stats.of(commits).p50) / ms(fsyncs.p50):.0f}× it (objects, index, ref and a process start)"
    )
    return [figure]


def _bare_fsyncs(path: Path, count: int) -> Stats:
    """What one durable write costs on this disk right now: the unit both sides of the save pay."""
    data = os.urandom(8 * 1024)
    times = []
    with open(path, "wb") as fh:
        for _ in range(count):
            start = time.perf_counter()
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            times.append(time.perf_counter() - start)
    return Stats.of(times)


# --- the commit fence --------------------------------------------------------------------


@dataclass
class _Writer:
    """One concurrent writer: its own line of the memory, rewritten by each capture."""

    number: int
    workspace: Workspace
    admissions: list[Admission]
    latencies: list[float] = field(default_factory=list)
    committed: int = 0
    conflicts: int = 0
    error: BaseException | None = None


def _line(writer: int, n: int) -> str:
    return f"- writer {writer} note {n:05d}"


def _fence_memory(writers: range) -> str:
    lines = "".join(_line(w, 0) + "\n" for w in writers)
    return memory_text(8 * 1024 - 64 - len(lines)) + lines


def _run_writer(service: MemoryService, w: _Writer, go: threading.Event) -> None:
    ws = w.workspace
    go.wait()
    try:
        for n, admission in enumerate(w.admissions, start=1):
            change = MemoryChange("replace", _line(w.number, n - 1), new_line=_line(w.number, n))
            while True:
                with service.db.read() as conn:
                    expected = int(
                        conn.execute(
                            "SELECT current_version FROM files WHERE workspace_id = ? AND path = ?",
                            (ws.id, MEMORY_PATH),
                        ).fetchone()[0]
                    )
                start = time.perf_counter()
                try:
                    service.assistant.commit_capture(
                        ws.id,
                        admission.credential,
                        idempotency_key=f"memory:{admission.id}",
                        key_session_id=ws.key_session,
                        changes=[change],
                        expected_version=expected,
                    )
                except VersionConflict:
                    w.latencies.append(time.perf_counter() - start)
                    w.conflicts += 1  # another writer won; a conflict writes nothing and consumes nothing
                    continue
                w.latencies.append(time.perf_counter() - start)
                w.committed += 1
                break
    except BaseException as exc:  # reported by the caller
        w.error = exc


def _fence_run(service: MemoryService, spaces: list[Workspace], writers: int) -> tuple[float, list[_Writer]]:
    go = threading.Event()
    if len(spaces) == 1:  # all on one workspace: its admissions dealt out among the writers
        crew = [_Writer(i, spaces[0], spaces[0].admissions[i::writers]) for i in range(writers)]
    else:
        crew = [_Writer(i, spaces[i], spaces[i].admissions) for i in range(writers)]
    threads = [threading.Thread(target=_run_writer, args=(service, w, go)) for w in crew]
    for t in threads:
        t.start()
    start = time.perf_counter()
    go.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    for w in crew:
        if w.error is not None:
            raise w.error
    return elapsed, crew


def _plain_inserts(path: Path, count: int, size: int, writers: int) -> tuple[float, Stats]:
    """The floor: `writers` threads, each on its own connection, each making `count // writers`
    durable (WAL, synchronous=FULL) transactions of one blob the size of a sealed memory.
    What SQLite itself gives eight concurrent writers: (commits per second, latency per commit)."""
    setup = sqlite3.connect(path, isolation_level=None)
    setup.execute("PRAGMA journal_mode = WAL")
    setup.execute("CREATE TABLE blobs (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
    setup.close()
    blob = os.urandom(size)
    go = threading.Event()
    samples: list[list[float]] = [[] for _ in range(writers)]

    def writer(mine: list[float]) -> None:
        conn = sqlite3.connect(path, isolation_level=None, timeout=60.0, check_same_thread=False)
        conn.execute("PRAGMA synchronous = FULL")
        go.wait()
        for _ in range(max(1, count // writers)):
            start = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO blobs (body) VALUES (?)", (blob,))
            conn.execute("COMMIT")
            mine.append(time.perf_counter() - start)
        conn.close()

    threads = [threading.Thread(target=writer, args=(mine,)) for mine in samples]
    for t in threads:
        t.start()
    start = time.perf_counter()
    go.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    flat = [x for mine in samples for x in mine]
    return len(flat) / elapsed, Stats.of(flat)


def _fence_setup(
    tmp: Path, name: str, workspaces: int, admissions: int, text: str
) -> tuple[MemoryService, list[Workspace]]:
    service = new_service(str(tmp / f"fence-{name}.db"))
    spaces = create_workspaces(service, workspaces, prefix=f"{name}-", text=text, mode=Mode.AUTO, ai=True)
    open_key_sessions(service, spaces)
    admit_many(service, spaces, admissions)
    return service, spaces


def fence_commits(tmp: Path, s: Settings) -> list[Figure]:
    """Eight writers against the fence, beside eight threads of plain durable inserts; on one
    workspace (one capture per version can land: compare-and-set, never a rebase) the aims are
    the fence's decisions per second and landed captures beside one writer's serial rate."""
    figures: list[Figure] = []
    writers = s.fence_writers
    per = s.fence_captures_per_writer
    text = _fence_memory(range(writers))
    floor_rate, floor = _plain_inserts(tmp / "floor.db", s.floor_inserts, len(text.encode()) + 73, writers)
    floor_name = f"plain durable insert, {writers} threads"
    log(f"  floor: {floor_rate:,.0f} plain inserts/s from {writers} threads")

    service, spaces = _fence_setup(tmp, "serial", 1, per, text)
    serial_elapsed, serial_crew = _fence_run(service, spaces, 1)
    serial_rate = serial_crew[0].committed / serial_elapsed
    service.close()
    log(f"  one writer, serial: {serial_rate:,.0f} captures/s")

    for label, workspace_count in (("one workspace", 1), (f"{writers} workspaces", writers)):
        service, spaces = _fence_setup(tmp, f"w{workspace_count}", workspace_count, per * writers // workspace_count,
                                       text)  # fmt: skip
        elapsed, crew = _fence_run(service, spaces, writers)
        service.close()
        committed = sum(w.committed for w in crew)
        conflicts = sum(w.conflicts for w in crew)
        stats = Stats.of([x for w in crew for x in w.latencies])
        log(f"  fence, {label}: {committed} commits in {elapsed:.2f} s, {conflicts} conflicts retried")
        if workspace_count == 1:
            decisions = (committed + conflicts) / elapsed
            figures.append(
                Figure(
                    name=f"fence decisions/s, {writers} writers, one workspace",
                    value=decisions,
                    unit="/s",
                    aim="≥ 1,000/s",
                    aim_op="value>=",
                    aim_limit=1000.0,
                    floor=floor_rate,
                    floor_name=floor_name,
                    samples=committed + conflicts,
                    note=f"{committed} landed, {conflicts} refused as version conflicts (nothing written) and "
                    "retried against the newer version",
                )
            )
            figures.append(
                Figure(
                    name=f"fence landed captures/s, {writers} writers, one workspace",
                    value=committed / elapsed,
                    unit="/s",
                    aim="≥ 0.8× one writer",
                    aim_op="ratio>=",
                    aim_limit=0.8,
                    floor=serial_rate,
                    floor_name="one writer, serial captures",
                    samples=committed,
                )
            )
        else:
            figures.append(
                Figure(
                    name=f"fence commits/s, {writers} writers, {label}",
                    value=committed / elapsed,
                    unit="/s",
                    aim="≥ 1,000/s",
                    aim_op="value>=",
                    aim_limit=1000.0,
                    floor=floor_rate,
                    floor_name=floor_name,
                    samples=committed,
                )
            )
        figures.append(
            Figure(
                name=f"fence commit worst latency, {writers} writers, {label}",
                value=ms(stats.worst),
                unit="ms",
                aim="≤ 250 ms",
                aim_op="value<=",
                aim_limit=250.0,
                p99=ms(stats.p99),
                floor=ms(floor.worst),
                floor_p99=ms(floor.p99),
                floor_name=f"{floor_name}, worst",
                samples=stats.n,
                note=f"the median call took {ms(stats.p50):.2f} ms",
            )
        )
    return figures


def refused_fence(tmp: Path, s: Settings) -> list[Figure]:
    """A capture whose mode changed since admission: the CHECK refuses it and nothing is written."""
    service = new_service(str(tmp / "refused.db"))
    (ws,) = create_workspaces(service, 1, prefix="refused", text=memory_text(4000), mode=Mode.AUTO, ai=True)
    open_key_sessions(service, [ws])
    admit_many(service, [ws], 1)
    policy = service.get_policy(LOCAL_USER, ws.id)
    policy = service.set_policy(LOCAL_USER, ws.id, Mode.READ_ONLY, policy.revision)
    service.set_policy(LOCAL_USER, ws.id, Mode.AUTO, policy.revision)
    admission = ws.admissions[0]
    counts = _row_counts(service)
    change = MemoryChange("add", "- a refused fact")
    samples: list[float] = []
    refusals = 0
    for _ in range(s.refused_samples + 10):
        start = time.perf_counter()
        try:
            service.assistant.commit_capture(
                ws.id,
                admission.credential,
                idempotency_key=f"memory:{admission.id}",
                key_session_id=ws.key_session,
                changes=[change],
                expected_version=ws.version,
            )
        except FenceRefused:
            refusals += 1
        samples.append(time.perf_counter() - start)
    untouched = _row_counts(service) == counts
    service.close()
    figure = latency_figure(
        "refused fence commit (mode changed since admission)",
        Stats.of(samples[10:]),
        None,
        aim="≤ 0.5 ms; leaves no rows",
        aim_op="value<=",
        aim_limit=0.5,
    )
    figure.checks = {"refused every time": refusals == len(samples), "no rows written": untouched}
    return [figure]


def _row_counts(service: MemoryService) -> tuple[int, ...]:
    with service.db.read() as conn:
        return tuple(
            int(conn.execute(sql).fetchone()[0])
            for sql in (
                "SELECT COUNT(*) FROM file_versions",
                "SELECT COUNT(*) FROM workspace_memory_commit_fence",
                "SELECT COUNT(*) FROM workspace_memory_admissions WHERE consumed_at IS NOT NULL",
                "SELECT MAX(current_version) FROM files",
            )
        )


def write_figures(tmp: Path, s: Settings) -> list[Figure]:
    return human_save(tmp, s) + fence_commits(tmp, s) + refused_fence(tmp, s)
