"""The frame: first paint against a bare Textual app, peak memory, and the UI never held up."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.harness import CONTEXT, Figure, Stats, child_env, latency_figure, log
from bench.history import BENCH_WORKSPACE
from bench.settings import Settings

ROOT = Path(__file__).resolve().parents[1]


def run_child(kind: str, action: str, home: Path, tmp: Path, walk: int = 0) -> dict[str, Any]:
    """One fresh child process; both kinds show the head revision's text (`tmp/head.md`)."""
    result = tmp / f"child-{kind}-{action}.json"
    env = child_env(
        tmp,
        MEMFRAME_HOME=str(home),
        BENCH_WORKSPACE=BENCH_WORKSPACE,
        PYTHONPATH=str(ROOT),
        BENCH_WALK=str(walk),  # rows the tour walks down the Changes list (pages load near the end)
        BENCH_TEXT_FILE=str(tmp / "head.md"),
        BENCH_T0=repr(time.time()),  # the child measures from here: process start included
    )
    subprocess.run(
        [sys.executable, "-m", "bench._frame_child", kind, action, str(result)],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    data: dict[str, Any] = json.loads(result.read_text())
    result.unlink()
    return data


def frame_figures(tmp: Path, s: Settings, home: Path, revisions: int, head: str) -> list[Figure]:
    (tmp / "head.md").write_text(head, encoding="utf-8")
    frame: list[dict[str, Any]] = []
    bare: list[dict[str, Any]] = []
    # Untimed: warm the page cache and the children's bytecode cache for both, screens the tour opens included.
    run_child("bare", "tour", home, tmp, 1)
    run_child("frame", "tour", home, tmp, 1)
    plain: list[dict[str, Any]] = []
    for _ in range(s.paint_runs):
        frame.append(run_child("frame", "paint", home, tmp))
        bare.append(run_child("bare", "paint", home, tmp))
        plain.append(run_child("bare-plain", "paint", home, tmp))
    tours: list[dict[str, Any]] = []
    bare_tours: list[dict[str, Any]] = []
    for _ in range(s.rss_runs):
        tours.append(run_child("frame", "tour", home, tmp, s.walk_rows))
        bare_tours.append(run_child("bare", "tour", home, tmp, s.walk_rows))
    log(f"  frame modules at first paint: {frame[-1]['modules']}; bare: {bare[-1]['modules']}")

    paint = latency_figure(
        f"frame first paint, memory on screen, {revisions:,} revisions (fresh process)",
        Stats.of([r["first_paint"] for r in frame]),
        Stats.of([r["first_paint"] for r in bare]),
        aim="≤ 1.25× bare app",
        aim_op="ratio<=",
        aim_limit=1.25,
        floor_name="bare Textual app, same widgets, same text in its TextArea, Markdown highlighted as the frame's",
    )
    plain_p50 = Stats.of([r["first_paint"] for r in plain]).p50
    screen = Stats.of([r["screen_paint"] for r in frame])
    # cryptography is not on this list: the first read of the memory (which opens its text) begins
    # on a thread before Textual starts, so it may be loaded by the first screen of any kind; what a
    # local frame never needs (an HTTP client, the server) must still not be.
    heavy = [m for m in frame[-1]["modules"] if m in ("httpx", "fastapi", "uvicorn")]
    paint.checks = {"no httpx/FastAPI/uvicorn before first paint": not heavy}
    modules = ", ".join(frame[-1]["modules"]) or "none of httpx, FastAPI, uvicorn, cryptography, markdown-it"
    paint.note = (
        "from process start to the paint showing the head revision's text in the editor (p50), the head poll "
        "on at its default 3 s; the frame's "
        f"first screen of any kind is painted at {screen.p50 * 1000:.0f} ms; "
        f"modules loaded at first paint: {modules}; against the same bare app without Markdown highlighting "
        f"({plain_p50 * 1000:.0f} ms): {paint.value / (plain_p50 * 1000):.2f}×"
    )
    rss_mib = max(t["max_rss_kib"] for t in tours) / 1024
    bare_rss = max(b["max_rss_kib"] for b in bare_tours) / 1024
    memory = Figure(
        name=f"frame peak RSS, {revisions:,} revisions (opens Changes, walks {s.walk_rows} rows)",
        value=rss_mib,
        unit="MiB",
        aim="≤ 80 MiB",
        aim_op="value<=",
        aim_limit=80.0,
        floor=bare_rss,
        floor_name="bare app, 150-row table",
        samples=len(tours),
        note=f"{tours[-1]['rows_loaded']} rows loaded into Changes",
    )
    stall = Figure(
        name=f"frame longest UI stall, Changes paging and diffing {s.walk_rows} rows (10 ms timer lag)",
        value=max(t["worst_stall"] for t in tours) * 1000,
        unit="ms",
        aim=CONTEXT,
        aim_op="none",
        aim_limit=0.0,
        floor=max(t["worst_stall"] for t in bare_tours) * 1000,
        floor_name="bare app walking a full table",
        samples=len(tours),
        note="the floor is the same walk in a bare Textual app with no I/O and no workers: "
        "what this machine's load and Textual's own rendering stall an event loop by; the frame's head/policy "
        f"poll runs every 0.5 s throughout ({min(t['polls'] for t in tours)} polls or more per walk)",
    )
    stall.checks = {"the head poll ran during the walk": all(t["polls"] > 0 for t in tours)}
    return [paint, memory, stall]
