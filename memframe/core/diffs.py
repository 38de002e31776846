"""Unified line diffs that stay fast on long texts with small edits.

`difflib.SequenceMatcher` is pure Python and indexes every line of both texts
for every diff, even when one line changed; a memory's history is almost all
such edits, and `history -p` or the Changes pane diff hundreds of them. Like
git's xdiff, `unified_diff` first trims the lines the two texts share at the
start and at the end, and lets difflib match only what is left. The output is
difflib's unified format; when the middle alone is matched the hunks can
differ from difflib's on texts with many repeated lines, but they are always a
correct diff of the same two texts.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

Opcode = tuple[Literal["replace", "delete", "insert", "equal"], int, int, int, int]


def opcodes(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    """difflib-style opcodes turning `a` into `b`, with the common prefix and suffix trimmed first."""
    len_a, len_b = len(a), len(b)
    shortest = min(len_a, len_b)
    head = _common_run(lambda lo, hi: a[lo:hi] == b[lo:hi], shortest)
    tail = _common_run(lambda lo, hi: a[len_a - hi : len_a - lo] == b[len_b - hi : len_b - lo], shortest - head)
    codes: list[Opcode] = [("equal", 0, head, 0, head)] if head else []
    middle = difflib.SequenceMatcher(None, a[head : len_a - tail], b[head : len_b - tail])
    codes += [(tag, i1 + head, i2 + head, j1 + head, j2 + head) for tag, i1, i2, j1, j2 in middle.get_opcodes()]
    if tail:
        codes.append(("equal", len_a - tail, len_a, len_b - tail, len_b))
    return codes


def _common_run(same: Callable[[int, int], bool], limit: int) -> int:
    """The largest n <= limit with same(0, n), by bisection: `same(lo, hi)` compares only lines
    lo..hi (a slice comparison, done in C), so the whole search compares each line at most about twice."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if same(lo, mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


class _Trimmed(difflib.SequenceMatcher):
    """difflib's hunk grouping over the trimmed opcodes."""

    def __init__(self, a: Sequence[str], b: Sequence[str]) -> None:
        super().__init__(None, [], [])
        self._codes = opcodes(a, b)

    def get_opcodes(self) -> list[Opcode]:
        return list(self._codes)


def _range(start: int, stop: int) -> str:
    """A hunk's line range as unified diffs write it (difflib's rule)."""
    beginning = start + 1
    length = stop - start
    if length == 1:
        return str(beginning)
    if not length:
        beginning -= 1
    return f"{beginning},{length}"


def unified_diff(
    a: Sequence[str], b: Sequence[str], fromfile: str = "", tofile: str = "", *, n: int = 3, lineterm: str = "\n"
) -> Iterator[str]:
    """Like `difflib.unified_diff(a, b, fromfile, tofile, n=n, lineterm=lineterm)`, trimmed first."""
    started = False
    for group in _Trimmed(a, b).get_grouped_opcodes(n):
        if not started:
            started = True
            yield f"--- {fromfile}{lineterm}"
            yield f"+++ {tofile}{lineterm}"
        first, last = group[0], group[-1]
        yield f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@{lineterm}"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for line in a[i1:i2]:
                    yield " " + line
                continue
            if tag in ("replace", "delete"):
                for line in a[i1:i2]:
                    yield "-" + line
            if tag in ("replace", "insert"):
                for line in b[j1:j2]:
                    yield "+" + line
