"""`make bench` still runs: the whole harness at tiny counts, in a fresh process.

Nothing here is timed or judged: the machines are shared and noisy, so the
figures are read by people from bench/results.md, never asserted by a test.
This only proves every figure is still measured and written in the agreed shape.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIELDS = {"name", "value", "unit", "floor", "ratio", "aim", "met"}
MACHINE = {"cpu", "cores", "python", "sqlite", "date"}
#: Issue 28's "Performance aims, restated", as the figures spell them, and issue 31's forget.
RESTATED_AIMS = {
    "p50 ≤ 1.5× floor",  # recall in-process against its fair floor
    "p50 ≤ 2× floor",  # the same at 100,000 workspaces (--scale)
    "≤ 0.1× git",  # a local durable Save against a durable git commit
    "≥ 2× one fsync per Save",  # saves/s over HTTP at 64 clients
    "≤ 100 ms",  # their p99
    "≥ 0.8× no-op",  # recall/s over HTTP against a no-op route on the same server
    "≤ 1.25× bare app",  # first paint
    "≤ 80 MiB",  # frame RSS
    "≤ 1.0× git",  # history bytes per revision; history -p per revision
    "≤ 3× opening every revision once",  # issue 31: forget over 10,000 revisions
    "≤ 2× open",  # blame of the newest revision against opening every revision (issue 32)
}


@pytest.mark.slow
def test_the_bench_runs_quickly_end_to_end_and_writes_every_figure(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFRAME_")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert results["machine"].keys() >= MACHINE
    names = [figure["name"] for figure in results["figures"]]
    for expected in (
        "recall in-process",
        "recall/s over HTTP, SQLite, 1 client",
        "human save",
        "saves/s over HTTP, SQLite, 64 clients",
        "save p99 over HTTP, SQLite, 64 clients",
        "history list",
        "diffs from the newest page",
        "memframe history -p",
        "blame of the newest revision",
        "frame first paint",
        "frame peak RSS",
        "frame longest UI stall",
        "history bytes per revision",
        "open any one revision",
    ):
        assert any(expected in name for name in names), f"{expected!r} is missing from {names}"
    # the aims are issue 28's restated list, and nothing else
    aims = {figure["aim"] for figure in results["figures"] if figure["met"] is not None}
    assert aims <= RESTATED_AIMS, aims - RESTATED_AIMS
    for figure in results["figures"]:
        assert figure.keys() >= FIELDS, figure
        assert isinstance(figure["value"], int | float), figure
        # met is yes or no, except for a figure shown for context, which has no aim to meet
        assert isinstance(figure["met"], bool) or (figure["met"] is None and figure["aim_op"] == "none"), figure
    context = [f for f in results["figures"] if f["met"] is None]
    assert context and all(f["aim"].startswith("none: ") for f in context), context
    # the correctness checks riding on the figures hold even at tiny counts
    checks = {f["name"]: f.get("checks", {}) for f in results["figures"]}
    assert all(all(c.values()) for c in checks.values()), checks
    assert (tmp_path / "results.md").read_text(encoding="utf-8").startswith("# memframe benchmark results")
    assert "figure" in done.stdout  # the table is printed too


def test_the_readme_table_is_regenerated_from_the_results_and_only_between_its_markers(tmp_path: Path) -> None:
    from bench import readme

    assert readme.START in (ROOT / "README.md").read_text(encoding="utf-8")
    figure = {"name": "recall x", "value": 0.02, "unit": "ms", "floor": 0.016, "ratio": 1.25, "aim": "≤ 1.5×"}
    results = {
        "machine": {"date": "d", "cores": 2, "cpu": "c", "load_average_at_start": [1], "python": "3", "sqlite": "3"}
        | {"git": "2"},
        "figures": [
            figure | {"met": True, "floor_name": "contract reads"},
            figure | {"name": "old y", "met": None, "floor_name": "git", "aim": "none: by design"},
        ],
    }
    (tmp_path / "results.json").write_text(json.dumps(results), encoding="utf-8")
    page = tmp_path / "README.md"
    page.write_text(f"before\n{readme.START}\n| old | hand-written |\n{readme.END}\nafter\n", encoding="utf-8")
    assert readme.update(page, tmp_path / "results.json")
    text = page.read_text(encoding="utf-8")
    assert text.startswith("before\n") and text.endswith("\nafter\n") and "hand-written" not in text
    assert "| recall x | 0.02 ms | contract reads: 0.016 ms | 1.25× | ≤ 1.5× | yes |" in text
    assert "| old y | 0.02 ms | git: 0.016 ms | 1.25× | none: by design | — |" in text
    assert "1 of 1 aims met (1 more shown for context, with no aim)" in text
    assert not readme.update(page, tmp_path / "results.json")  # the same run: nothing changes
