"""Timing, figures and the results files: everything the figures share.

Every figure is measured beside its floor (or peer) in the same run, with the
two interleaved round by round, so a noisy neighbour slows both alike and the
ratio stays meaningful even when the absolute numbers drift.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path


def child_env(tmp: Path, **extra: str) -> dict[str, str]:
    """The environment of a measured Python child process: with a bytecode cache, as any installed
    program has one (under `tmp`, so the checkout stays clean). Without it, a shell that sets
    PYTHONDONTWRITEBYTECODE would make every child recompile memframe from source while Textual and
    the other installed packages load their compiled files: a cost only one side of a ratio pays."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    env.update(extra)
    return env


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Stats:
    """Seconds per operation: the median, the 99th percentile, the worst, and how many."""

    p50: float
    p99: float
    worst: float
    n: int

    @classmethod
    def of(cls, samples: list[float]) -> Stats:
        return cls(percentile(samples, 50), percentile(samples, 99), max(samples), len(samples))


def time_once(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def paired(
    subject: Callable[[int], object], floor: Callable[[int], object], n: int, *, rounds: int = 10, warmup: int = 5
) -> tuple[Stats, Stats]:
    """Time `subject(i)` and `floor(i)` n times each, alternating in `rounds` blocks."""
    for i in range(warmup):
        subject(i)
        floor(i)
    a: list[float] = []
    b: list[float] = []
    per_round = max(1, n // rounds)
    i = 0
    while len(a) < n:
        for _ in range(min(per_round, n - len(a))):
            a.append(time_once(lambda i=i: subject(i)))  # type: ignore[misc]
            i += 1
        for _ in range(per_round):
            if len(b) >= n:
                break
            b.append(time_once(lambda i=i: floor(i)))  # type: ignore[misc]
            i += 1
    return Stats.of(a), Stats.of(b)


@dataclass
class Figure:
    """One line of the table and one object of results.json.

    `value` is in `unit`; times are milliseconds (the median), rates are per second.
    `aim_op` is "ratio<=", "ratio>=", "value<=" or "value>=" against `aim_limit`, or "none" for a
    figure shown for context that has no aim of its own (one no person feels on its own, or an old
    database, which the issue lets keep its whole copies): it is neither met nor missed, and the count
    of aims leaves it out.
    """

    name: str
    value: float
    unit: str
    aim: str
    aim_op: str
    aim_limit: float
    p99: float | None = None
    floor: float | None = None
    floor_p99: float | None = None
    floor_name: str | None = None
    samples: int | None = None
    checks: dict[str, bool] = field(default_factory=dict)
    note: str = ""
    #: For a rate: the 99th percentile of its requests' latencies, in milliseconds.
    latency_p99_ms: float | None = None

    @property
    def ratio(self) -> float | None:
        if self.floor is None or self.floor == 0:
            return None
        return self.value / self.floor

    @property
    def met(self) -> bool | None:
        if self.aim_op == "none":
            return None
        measured = self.ratio if self.aim_op.startswith("ratio") else self.value
        if measured is None:
            return False
        ok = measured >= self.aim_limit if self.aim_op.endswith(">=") else measured <= self.aim_limit
        return ok and all(self.checks.values())

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["ratio"] = None if self.ratio is None else round(self.ratio, 3)
        data["met"] = self.met
        for key in ("value", "p99", "floor", "floor_p99", "latency_p99_ms"):
            if isinstance(data[key], float):
                data[key] = round(data[key], 4)
        order = ["name", "value", "unit", "floor", "ratio", "aim", "met"]
        return {k: data[k] for k in order} | {k: v for k, v in data.items() if k not in order}


def ms(seconds: float) -> float:
    return seconds * 1000.0


def latency_figure(
    name: str, subject: Stats, floor: Stats | None, *, aim: str, aim_op: str, aim_limit: float, floor_name: str = ""
) -> Figure:
    return Figure(
        name=name,
        value=ms(subject.p50),
        unit="ms",
        aim=aim,
        aim_op=aim_op,
        aim_limit=aim_limit,
        p99=ms(subject.p99),
        floor=None if floor is None else ms(floor.p50),
        floor_p99=None if floor is None else ms(floor.p99),
        floor_name=floor_name or None,
        samples=subject.n,
    )


# --- the machine ------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_version() -> str:
    try:
        out = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "absent"
    return out.strip().removeprefix("git version ")


def machine(mode: str) -> dict[str, object]:
    import textual

    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "textual": textual.__version__,
        "git": _git_version(),
        "os": f"{platform.system()} {platform.release()}",
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average_at_start": [round(x, 2) for x in load],
        "mode": mode,
    }


# --- output -------------------------------------------------------------------------------


def num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}" if abs(value) < 1 else f"{value:.1f}"
    return f"{text} {unit}".strip()


#: The aim of an old database's history: none. The issue lets it keep its whole copies (it keeps
#: opening as it is) or be compacted by `memframe admin compact`, and the compacted figure has the aim.
OLD_DATABASE_AIM = "none: an old database keeps its whole copies until `memframe admin compact`"
#: The aim of a figure kept for context only: measured on the way to an aimed figure, so it costs
#: nearly nothing, and it explains that figure; no aim of the issue's list is its own.
CONTEXT = "none: context"


def verdict(met: bool | None) -> str:
    """The table's last column: a figure with no aim (context) says so rather than yes or no."""
    return "—" if met is None else "yes" if met else "**no**"


def table(figures: list[Figure]) -> list[list[str]]:
    rows = [["figure", "value", "p99", "floor / peer (value, p99)", "ratio", "aim", "met"]]
    for f in figures:
        floor = "—"
        if f.floor is not None:
            floor = f"{f.floor_name}: {num(f.floor, f.unit)}"
            if f.floor_p99 is not None:
                floor += f", {num(f.floor_p99, f.unit)}"
        ratio = "—" if f.ratio is None else f"{f.ratio:.2f}×"
        met = verdict(f.met)
        if f.checks:
            met += " (" + ", ".join(f"{k}: {'ok' if v else 'FAILED'}" for k, v in f.checks.items()) + ")"
        p99 = num(f.p99, f.unit) if f.latency_p99_ms is None else num(f.latency_p99_ms, "ms")
        rows.append([f.name, num(f.value, f.unit), p99, floor, ratio, f.aim, met])
    return rows


def render_text(figures: list[Figure]) -> str:
    rows = table(figures)
    widths = [max(len(r[i].replace("**", "")) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [c.replace("**", "").ljust(w) for c, w in zip(row, widths, strict=True)]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def render_markdown(figures: list[Figure], host: dict[str, object], elapsed: float) -> str:
    rows = table(figures)
    out = [
        "# memframe benchmark results",
        "",
        f"Measured {host['date']} on {host['cpu']} ({host['cores']} cores), Python {host['python']}, "
        f"SQLite {host['sqlite']}, Textual {host['textual']}, git {host['git']}, {host['os']}; "
        f"load average at start {host['load_average_at_start']}; {host['mode']} run in {elapsed:.0f} s.",
        "Every ratio is to a floor or peer measured in the same run. A value is the median (p50) of its samples,"
        " except for rates (/s), worst cases, peaks and the longest stall, which say so. Reproduce with `make bench`.",
        "",
        "| " + " | ".join(rows[0]) + " |",
        "| " + " | ".join("---" for _ in rows[0]) + " |",
    ]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows[1:]]
    notes = [f for f in figures if f.note]
    if notes:
        out += ["", "Notes:", ""]
        out += [f"- **{f.name}**: {f.note}" for f in notes]
    return "\n".join(out) + "\n"


def write_results(out_dir: Path, figures: list[Figure], host: dict[str, object], elapsed: float) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    payload = {"machine": host, "elapsed_seconds": round(elapsed, 1), "figures": [f.to_json() for f in figures]}
    (out_dir / "results.json").write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out_dir / "results.md").write_text(render_markdown(figures, host, elapsed), encoding="utf-8")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
