"""One fresh process for the frame figures: `python -m bench._frame_child KIND ACTION RESULT_FILE`.

KIND is `frame` (the real `memframe -w bench` path, run headless) or `bare` (a
Textual app with the same kinds of widgets and nothing else, its TextArea highlighting Markdown
as the frame's editor does wherever Textual's syntax extra is installed) or `bare-plain` (the
same without highlighting: the floor before, given in the figure's note). ACTION is
`paint` (time from process start, BENCH_T0, to the first painted screen, and to
the paint with the memory on screen: the editor holding the text of BENCH_TEXT_FILE; the bare
app reads that file into its TextArea) or `tour` (paint, open Changes, walk 120 rows down the
list (BENCH_WALK), then report the peak RSS and the longest stall of the UI's event loop;
the bare app walks the same distance down a table already holding 150 rows, which
shows how long this machine itself stalls an event loop that does no I/O).
The frame runs with its head/policy poll on, as people run it: every 3 s (the default) for `paint`,
and every 0.5 s (the fastest `--poll` allows) for `tour`, so polls land during the walk; the tour
counts them (`polls`), and the stall figure holds only if some ran.
The result is one JSON object written to RESULT_FILE.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

T0 = float(os.environ.get("BENCH_T0", time.time()))

import textual.app  # noqa: E402  (after T0: its import is part of what is measured)

RESULT: dict[str, Any] = {}
#: The head revision's text (the bench writes it to BENCH_TEXT_FILE): what must be on screen.
EXPECTED = Path(os.environ["BENCH_TEXT_FILE"]).read_text(encoding="utf-8") if "BENCH_TEXT_FILE" in os.environ else ""


async def _after_refresh(app: textual.app.App[Any]) -> float:
    """When the next refresh has painted the screen."""
    return (await _painted(app))[0]


async def _painted(app: textual.app.App[Any]) -> tuple[float, bool]:
    """When the next refresh has painted the screen, and whether the editor held the memory in that paint.

    Textual runs after-refresh callbacks as the very next thing after the paint, so what the editor
    holds here is what was painted."""
    done: asyncio.Future[tuple[float, bool]] = asyncio.get_running_loop().create_future()
    app.call_after_refresh(lambda: done.done() or done.set_result((time.time(), _editor_text(app) == EXPECTED)))
    return await done


async def _until(condition: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the frame did not get there in time")
        await asyncio.sleep(0.005)


class _Stalls:
    """The longest gap between ticks of a 10 ms timer on the UI's event loop."""

    def __init__(self, app: textual.app.App[Any]) -> None:
        self.last = time.perf_counter()
        self.worst = 0.0
        app.set_interval(0.01, self.tick)

    def tick(self) -> None:
        now = time.perf_counter()
        self.worst = max(self.worst, now - self.last - 0.01)
        self.last = now


def _autopilot(kind: str, action: str) -> Any:
    async def pilot(p: Any) -> None:
        app = p.app
        painted, shown = await _painted(app)
        RESULT["screen_paint"] = painted - T0
        RESULT["modules"] = sorted(
            m for m in ("httpx", "fastapi", "uvicorn", "cryptography", "markdown_it") if m in sys.modules
        )
        # The figure: the first paint with the memory itself on screen, the editor holding exactly the
        # head revision's text (both apps show the same text in a TextArea): the first screen when it
        # held it already, or else the refresh after the text arrived.
        if not shown:
            await _until(lambda: _editor_text(app) == EXPECTED)
            painted = await _after_refresh(app)
        RESULT["first_paint"] = painted - T0
        walk = int(os.environ.get("BENCH_WALK", "120"))
        if action == "tour" and kind == "frame":
            polls = _count_polls()
            stalls = _Stalls(app)
            await p.press("ctrl+g")
            await _until(lambda: len(getattr(app.screen, "rows", ())) > 0)
            for _ in range(walk):
                await p.press("down")
            await _until(lambda: not app.screen.fetching and (app.screen.complete or len(app.screen.rows) > walk))
            await p.pause(0.3)  # let the last diff arrive
            if float(_poll(action)) > 0:  # the walk is quick: let the poll tick under the stall timer too
                await _until(lambda: polls[0] >= 2)
            RESULT["rows_loaded"] = len(app.screen.rows)
            RESULT["worst_stall"] = stalls.worst
            RESULT["polls"] = polls[0]
        elif action == "tour":  # the same walk down a table that is already full: no I/O, no workers
            stalls = _Stalls(app)
            app.query_one("DataTable").focus()
            for _ in range(walk):
                await p.press("down")
            await p.pause(0.3)
            RESULT["worst_stall"] = stalls.worst
        RESULT["max_rss_kib"] = peak_rss_kib()
        app.exit(0)

    return pilot


def _poll(action: str) -> str:
    """The frame's --poll: 3 s (the default) to paint, 0.5 s (the fastest allowed) on the tour;
    BENCH_POLL overrides both, to compare by hand (0 turns the poll off)."""
    return os.environ.get("BENCH_POLL") or ("0.5" if action == "tour" else "3")


def _count_polls() -> list[int]:
    """Count the head polls from here on (the frame's poll worker calls `calls.head` once a tick)."""
    from memframe.tui import calls

    count = [0]
    head = calls.head

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return head(*args, **kwargs)

    calls.head = counted  # type: ignore[assignment]
    return count


def _editor_text(app: textual.app.App[Any]) -> str | None:
    from textual.widgets import TextArea

    areas = app.screen.query(TextArea)
    return areas.first().text if areas else None


def peak_rss_kib() -> int:
    """This process's peak RSS. Linux's VmHWM, not ru_maxrss: after fork and exec, ru_maxrss still
    counts the parent's pages (the benchmark parent is large), VmHWM only this program's."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _bare_app(rows: int, *, highlight: bool) -> textual.app.App[Any]:
    from importlib.util import find_spec

    from textual.widgets import DataTable, Footer, Header, TextArea

    markdown = highlight and find_spec("tree_sitter") is not None and find_spec("tree_sitter_markdown") is not None

    class Bare(textual.app.App[int]):
        def compose(self) -> Any:
            yield Header()
            area = TextArea(EXPECTED, soft_wrap=True)
            if markdown:  # as the frame's editor sets it: after the TextArea is made
                area.language = "markdown"
            yield area
            yield DataTable(cursor_type="row", zebra_stripes=True)
            yield Footer()

        def on_mount(self) -> None:
            table = self.query_one(DataTable)
            for label in ("Version", "When", "Who", "What", "Size"):
                table.add_column(label)
            for n in range(rows, 0, -1):  # only for the tour: the paint figure's floor has no rows
                table.add_row(str(n), "2026-11-30 14:26 (3 days ago)", "person (local)", "save", "8.0 KiB")

    return Bare()


def main(kind: str, action: str, result_file: str) -> None:
    pilot = _autopilot(kind, action)
    original_run = textual.app.App.run

    def headless_run(self: textual.app.App[Any], *args: Any, **kwargs: Any) -> Any:
        RESULT["run_called"] = time.time() - T0  # imports and opening the backend are done by now
        kwargs.update(headless=True, size=(120, 40), auto_pilot=pilot)
        return original_run(self, *args, **kwargs)

    textual.app.App.run = headless_run  # type: ignore[method-assign]
    if kind == "frame":
        from memframe.cli import main as memframe_main

        memframe_main(["frame", "-w", os.environ["BENCH_WORKSPACE"], "--poll", _poll(action)])
    else:
        _bare_app(150 if action == "tour" else 0, highlight=kind == "bare").run()
    with open(result_file, "w", encoding="utf-8") as fh:
        json.dump(RESULT, fh)


if __name__ == "__main__":
    main(*sys.argv[1:4])
