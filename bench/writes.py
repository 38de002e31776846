"""Writes: a person's durable Save against a durable `git commit`."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from bench.data import create_workspaces, new_service, revisions
from bench.harness import Figure, Stats, latency_figure, ms
from bench.settings import Settings
from memframe.backend.local import LocalBackend


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


def write_figures(tmp: Path, s: Settings) -> list[Figure]:
    return human_save(tmp, s)
