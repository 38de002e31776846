"""Run every figure, print the table, write bench/results.md and bench/results.json."""

from __future__ import annotations

import argparse
import gc
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness import CONTEXT, Figure, log, machine, render_text, write_results
from bench.settings import FULL, QUICK, Settings

HERE = Path(__file__).resolve().parent
STAGES = ("recall", "writes", "team", "history", "frame", "storage", "forget")
SCALE = ("scale",)


def frame_at_scale(tmp: Path, settings: Settings) -> list[Figure]:
    """The frame's first paint and RSS, and the database's bytes, with a history of `scale_revisions`."""
    from bench.frame import frame_figures
    from bench.history import big_home
    from bench.storage import _db_bytes

    count = settings.scale_revisions
    home, _, head = big_home(tmp, settings, count)
    figures = frame_figures(tmp, settings, home, count, head)
    size = _db_bytes(home / "memframe.db") if (home / "memframe.db").exists() else None
    if size is not None:
        figures.append(
            Figure(
                name=f"database bytes, {count:,} revisions of 8 KiB (sealed deltas, as saves write them)",
                value=size / 2**20,
                unit="MiB",
                aim=CONTEXT,
                aim_op="none",
                aim_limit=0.0,
                samples=count,
            )
        )
    return figures


def run(settings: Settings, out_dir: Path, stages: tuple[str, ...] = STAGES) -> list[Figure]:
    from bench.forget import forget_figures
    from bench.frame import frame_figures
    from bench.history import big_home, history_figures
    from bench.recall import recall_figures, scale_figures
    from bench.storage import storage_figures
    from bench.team import team_figures
    from bench.writes import write_figures

    host = machine(settings.mode)
    started = time.perf_counter()
    figures: list[Figure] = []
    with tempfile.TemporaryDirectory(prefix="memframe-bench-") as raw:
        tmp = Path(raw)

        def stage(name: str, make: Callable[[], list[Figure]]) -> None:
            if name not in stages:
                return
            log(f"{name}…")
            gc.collect()  # each stage starts without the last one's garbage waiting to be walked
            at = time.perf_counter()
            made = make()
            figures.extend(made)
            log(f"  done in {time.perf_counter() - at:.1f} s")

        stage("recall", lambda: recall_figures(tmp, settings))
        stage("writes", lambda: write_figures(tmp, settings))
        stage("team", lambda: team_figures(tmp, settings))
        if "history" in stages or "frame" in stages or "forget" in stages:
            home, ws, head = big_home(tmp, settings)
        stage("history", lambda: history_figures(tmp, settings, home, ws))
        stage("frame", lambda: frame_figures(tmp, settings, home, settings.history_revisions, head))
        stage("storage", lambda: storage_figures(tmp, settings))
        stage("forget", lambda: forget_figures(tmp, settings, home, ws))
        stage("scale", lambda: scale_figures(tmp, settings) + frame_at_scale(tmp, settings))
    elapsed = time.perf_counter() - started
    if not figures:
        return figures
    print(render_text(figures))
    print("\nvalue: the median (p50), except for rates (/s), worst cases, peaks and the longest stall.")
    print(f"\n{host['cpu']}, {host['cores']} cores, Python {host['python']}, SQLite {host['sqlite']}; {elapsed:.0f} s")
    write_results(out_dir, figures, host, elapsed)
    log(f"wrote {out_dir / 'results.md'} and {out_dir / 'results.json'}")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny counts: proves the harness runs (seconds)")
    parser.add_argument("--out", type=Path, default=None, help="where results.md/json go (default: bench/)")
    parser.add_argument(
        "--scale",
        action="store_true",
        help="add the figures at scale: recall and save among 10 to 100,000 workspaces; the frame and the "
        "database at 100,000 revisions (tens of minutes)",
    )
    parser.add_argument(
        "--only", default=",".join(STAGES), help=f"comma-separated stages to run (default: all of {', '.join(STAGES)})"
    )
    args = parser.parse_args(argv)
    stages = tuple(name.strip() for name in args.only.split(",") if name.strip())
    if args.scale:
        stages += SCALE
    unknown = set(stages) - set(STAGES) - set(SCALE)
    if unknown:
        parser.error(f"unknown stage(s): {', '.join(sorted(unknown))}")
    settings = QUICK if args.quick else FULL
    partial = args.quick or stages[: len(STAGES)] != STAGES  # only a full run replaces bench/results.*
    out = args.out or (Path(tempfile.mkdtemp(prefix="memframe-bench-")) if partial else HERE)
    run(settings, out, stages)
    if out == HERE:
        from bench import readme

        readme.main([])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
