"""Diffs, sizes, times and places, worded the way a person reads them.

Pure functions (Rich `Text` at most, no widgets), so every screen words the
same fact the same way and tests can check the wording directly.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

from memframe.core.diffs import unified_diff
from memframe.core.types import MEMORY_RECALL_MAX_BYTES, Author, Operation, VersionInfo
from memframe.settings import current as current_settings

if TYPE_CHECKING:
    from memframe.tui.changes_calls import RevisionDiff

OVERSIZED_EXPLANATION = (
    f"Memory over {MEMORY_RECALL_MAX_BYTES:,} bytes is kept intact, but it is not given to the Assistant, "
    "and automatic capture is refused until it is shortened."
)


def diff_text(old: str, new: str, old_label: str, new_label: str) -> Text | DiffLines:
    """A coloured unified diff; says so plainly when there is no difference."""
    lines = list(unified_diff(old.splitlines(), new.splitlines(), old_label, new_label, lineterm="", n=2))
    if not lines:
        return Text(f"No differences between {old_label} and {new_label}.", style="dim")
    return DiffLines(lines)


def _diff_style(line: str) -> str:
    if line.startswith(("---", "+++")):
        return "bold"
    if line.startswith("@@"):
        return "cyan"
    return {"+": "green", "-": "red"}.get(line[:1], "")


class DiffLines:
    """A unified diff whose long lines wrap under their own `+`, `-` or space, so every row says its side.

    A Rich renderable: it wraps at the width it is given, which only the widget showing it knows.
    """

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    @property
    def plain(self) -> str:
        return "\n".join(self.lines)

    def __str__(self) -> str:
        return self.plain

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, max((cell_len(line) for line in self.lines), default=1))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        for line in self.lines:
            style = _diff_style(line)
            if width < 3 or line[:1] not in "+- " or line.startswith(("---", "+++")):
                yield Text(line, style=style, overflow="fold")
                continue
            sign, body = line[:1], Text(line[1:], style=style)
            for row in body.wrap(console, width - 1, overflow="fold") or [Text()]:
                yield Text.assemble((sign, style), row)


def size_meter(size: int, width: int = 10) -> Text:
    """`1,234 / 8,192 bytes ▰▰▱▱▱▱▱▱▱▱`: UTF-8 bytes against the recall bound."""
    limit = MEMORY_RECALL_MAX_BYTES
    filled = min(width, round(width * size / limit)) if size else 0
    style = "bold red" if size > limit else "yellow" if size > limit * 0.85 else "green"
    meter = Text(f"{size:,} / {limit:,} bytes ", style=style if size > limit else "")
    meter.append("▰" * filled, style=style)
    meter.append("▱" * (width - filled), style="dim")
    if size > limit:
        meter.append(f"  over by {size - limit:,}", style=style)
    return meter


def human_size(size: int) -> str:
    return f"{size:,} B" if size < 10_000 else f"{size / 1024:,.1f} KiB"


def when(ts: float, now: float) -> str:
    """Local wall time plus how long ago, by the frame's (possibly frozen) clock."""
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))
    return f"{stamp} ({ago(now - ts)})"


def ago(seconds: float) -> str:
    if seconds < 60:
        return "just now"
    minutes = int(seconds // 60)
    if minutes < 60:
        return f"{minutes} min ago"
    hours = minutes // 60
    if hours < 48:
        return f"{hours} h ago"
    return f"{hours // 24} days ago"


def short_location(location: str) -> str:
    """The backend's place, shortened: a URL as is, a file under the memframe home or ~ abbreviated."""
    if "://" in location:
        return location
    path = Path(location)
    current = current_settings()
    if current.home_from_env and path.is_relative_to(current.home):
        return str(Path("$MEMFRAME_HOME") / path.relative_to(current.home))
    home = Path.home()
    if path.is_relative_to(home):
        return str(Path("~") / path.relative_to(home))
    return location


def who(info: VersionInfo) -> str:
    return "assistant" if info.author is Author.ASSISTANT else f"person ({info.actor})"


def operation(info: VersionInfo) -> str:
    if info.operation is Operation.UNDO and info.restored_from is not None:
        return f"undo → {info.restored_from}"
    return info.operation.value


def revision_title(
    diff: RevisionDiff, info: VersionInfo | None, opened: bool, contains: str | None, view_key: str, against_key: str
) -> str:
    """The title over a revision's diff in Changes: what it was, by whom, and what the two keys switch to.
    `opened`: the revision Changes was opened at (an answer's receipt); `contains`: the search's query."""
    title = f"Revision {diff.version}"
    if info is not None:
        title += f" · {operation(info)} by {who(info)} · {human_size(info.size)}"
    if opened:
        title += " · the revision that answer used"
    if contains:
        title += f" · contains “{contains}”"
    if diff.against == "text":
        return title + f"\nIts whole text   ({view_key}: its diff)"
    title += f"\n{diff.old_label} → {diff.new_label}   ({against_key}: compare with the "
    title += "current text" if diff.against == "previous" else "previous revision"
    return title + f"; {view_key}: its whole text)"
