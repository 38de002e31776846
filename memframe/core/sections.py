"""The memory's size per top-level heading, against the bound recall supplies.

A memory over the bound is kept but withheld from recall, so a person trimming it needs to see which
section holds the bytes; this measures each section in UTF-8 bytes, as the bound is measured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memframe.core.types import MEMORY_RECALL_MAX_BYTES, utf8_size

#: Text before the first heading is counted under this name.
PREAMBLE = "(before the first heading)"

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Section:
    """One top-level heading's section: its title, its bytes, and their share of the bound."""

    title: str
    size: int

    @property
    def share(self) -> float:
        return self.size / MEMORY_RECALL_MAX_BYTES


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, level, title) of every ATX heading outside fenced code."""
    found: list[tuple[int, int, str]] = []
    fenced = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line.rstrip("\r\n"))
        if match:
            found.append((i, len(match.group(1)), match.group(2)))
    return found


def sections(text: str) -> list[Section]:
    """Bytes per section, in order; the top level is the highest heading level the text uses.

    The sizes add up to the whole text's size (a blank preamble is not listed)."""
    lines = text.splitlines(keepends=True)
    heads = _headings(lines)
    top = min((level for _, level, _ in heads), default=1)
    starts = [(i, title) for i, level, title in heads if level == top]
    if not starts:
        return [Section(PREAMBLE, utf8_size(text))] if text else []
    out: list[Section] = []
    preamble = "".join(lines[: starts[0][0]])
    if preamble.strip():
        out.append(Section(PREAMBLE, utf8_size(preamble)))
    else:  # blank lines before the first heading count with it
        starts[0] = (0, starts[0][1])
    for n, (start, title) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        out.append(Section(title, utf8_size("".join(lines[start:end]))))
    return out


def _nested(text: str, level: int) -> str:
    """`text` with its headings moved down so the highest is at `level` (at most 6): an imported
    file's own headings stay inside the section it is placed under."""
    lines = text.splitlines(keepends=True)
    heads = _headings(lines)
    shift = level - min((lv for _, lv, _ in heads), default=level)
    if shift <= 0:
        return text
    for i, lv, _ in heads:
        lines[i] = "#" * min(6, lv + shift) + lines[i][lv:]
    return "".join(lines)


def place_under(text: str, addition: str, heading: str | None) -> str:
    """`text` with `addition` appended: at the end of the section titled `heading` (a top-level
    heading is made at the end when none has that title), or at the end when `heading` is None."""
    if addition and not addition.endswith("\n"):
        addition += "\n"
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    if heading is None:
        return "".join(lines) + ("\n" if lines else "") + addition
    heads = _headings(lines)
    top = min((level for _, level, _ in heads), default=1)
    addition = _nested(addition, top + 1)
    for n, (i, level, title) in enumerate(heads):
        if level == top and title == heading.strip():
            end = next((j for j, lv, _ in heads[n + 1 :] if lv <= top), len(lines))
            while end > i + 1 and not lines[end - 1].strip():
                end -= 1
            return "".join(
                [
                    *lines[:end],
                    "\n",
                    addition,
                    *(["\n"] if end < len(lines) and lines[end].strip() else []),
                    *lines[end:],
                ]
            )
    block = f"{'#' * top} {heading.strip()}\n\n{addition}"
    return "".join(lines) + ("\n" if lines else "") + block
