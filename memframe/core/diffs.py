"""Unified diffs that stay fast on long texts with small edits.

`difflib.SequenceMatcher` is pure Python and indexes every line of both texts
for every diff, even when one line changed; a memory's history is almost all
such edits, and `history -p` or the Changes pane diff hundreds of them. Like
git's xdiff, both diffs here first trim what the two texts share at the start
and at the end, and let difflib match only what is left (usually nothing: one
line replaced, added or removed needs no matching at all). The hunks are
grouped exactly as difflib groups them; when the middle alone is matched they
can differ from difflib's on texts with many repeated lines, but they are
always a correct diff of the same two texts.

`unified_diff` works on lists of lines, like difflib's. `unified_diff_text`
works on two whole texts and never splits the lines they share: it finds the
shared start and end by comparing slices (in C), cuts them at line ends, and
splits only the changed middle and the few lines of context around it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Literal

Opcode = tuple[Literal["replace", "delete", "insert", "equal"], int, int, int, int]

NO_NEWLINE = "\\ No newline at end of file\n"


def opcodes(a: Sequence[str], b: Sequence[str]) -> list[Opcode]:
    """difflib-style opcodes turning `a` into `b`, with the common prefix and suffix trimmed first."""
    len_a, len_b = len(a), len(b)
    shortest = min(len_a, len_b)
    head = _common_run(lambda lo, hi: a[lo:hi] == b[lo:hi], shortest)
    tail = _common_run(lambda lo, hi: a[len_a - hi : len_a - lo] == b[len_b - hi : len_b - lo], shortest - head)
    codes: list[Opcode] = [("equal", 0, head, 0, head)] if head else []
    codes += _middle(a[head : len_a - tail], b[head : len_b - tail], head)
    if tail:
        codes.append(("equal", len_a - tail, len_a, len_b - tail, len_b))
    return codes


def _middle(a: Sequence[str], b: Sequence[str], offset: int) -> list[Opcode]:
    """Opcodes for what is left between a shared start and end, shifted by `offset` lines.

    The first lines differ and so do the last (they would have been trimmed otherwise), so
    when either side is empty, or one side is a single line and the other at most two, no
    line can match and the whole middle is one opcode; only a longer middle needs difflib.
    """
    len_a, len_b = len(a), len(b)
    if not len_a and not len_b:
        return []
    if not len_a:
        return [("insert", offset, offset, offset, offset + len_b)]
    if not len_b:
        return [("delete", offset, offset + len_a, offset, offset)]
    if (len_a == 1 and len_b <= 2) or (len_b == 1 and len_a <= 2):
        return [("replace", offset, offset + len_a, offset, offset + len_b)]
    import difflib  # here: most diffs never get this far, and `history -p` starts without it

    matcher = difflib.SequenceMatcher(None, a, b)
    return [(tag, i1 + offset, i2 + offset, j1 + offset, j2 + offset) for tag, i1, i2, j1, j2 in matcher.get_opcodes()]


def _common_run(same: Callable[[int, int], bool], limit: int) -> int:
    """The largest n <= limit with same(0, n), by bisection: `same(lo, hi)` compares only items
    lo..hi (a slice comparison, done in C), so the whole search compares each item at most about twice."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if same(lo, mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def grouped_opcodes(codes: list[Opcode], n: int = 3) -> Iterator[list[Opcode]]:
    """difflib's `SequenceMatcher.get_grouped_opcodes(n)`, over opcodes already made: hunks with
    up to `n` lines of context, split where more than 2n lines go unchanged."""
    codes = list(codes) or [("equal", 0, 1, 0, 1)]
    tag, i1, i2, j1, j2 = codes[0]
    if tag == "equal":
        codes[0] = tag, max(i1, i2 - n), i2, max(j1, j2 - n), j2
    tag, i1, i2, j1, j2 = codes[-1]
    if tag == "equal":
        codes[-1] = tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)
    group: list[Opcode] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > n + n:
            group.append((tag, i1, min(i2, i1 + n), j1, min(j2, j1 + n)))
            yield group
            group = []
            i1, j1 = max(i1, i2 - n), max(j1, j2 - n)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group


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
    for group in grouped_opcodes(opcodes(a, b), n):
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


# --- whole texts -----------------------------------------------------------------------------


def unified_diff_text(a: str, b: str, fromfile: str = "", tofile: str = "", *, n: int = 3) -> str:
    """The unified diff turning text `a` into text `b`, as one string, the way `git diff` writes it.

    Lines end at "\\n" (and only there); a last line without one is followed by
    "\\ No newline at end of file". The hunks are those `unified_diff` makes from the
    two texts' lines. Returns "" when the texts are the same.
    """
    if a == b:
        return ""
    head, end_a, end_b = _shared_ends(a, b)
    len_a = len(a)
    # Up to n lines of context on each side: the only shared lines ever looked at.
    before, shared = head, 0
    while shared < n and before:
        before = a.rfind("\n", 0, before - 1) + 1
        shared += 1
    after = end_a
    for _ in range(n):
        if after >= len_a:
            break
        after = a.find("\n", after) + 1 or len_a
        shared += 1
    middle_a, middle_b = a[head:end_a], b[head:end_b]
    count_a = middle_a.count("\n") + (middle_a[-1:] not in ("\n", ""))
    count_b = middle_b.count("\n") + (middle_b[-1:] not in ("\n", ""))
    first_line = a.count("\n", 0, before)  # the number of the first line shown, counted from 0
    header = f"--- {fromfile}\n+++ {tofile}\n"
    if count_a and count_b and (count_a > 2 or count_b > 2 or count_a == count_b == 2):
        return header + _hunks(
            _lines(a[before:head]), _lines(middle_a), _lines(middle_b), _lines(a[end_a:after]), first_line, n
        )
    # The usual edit: nothing in the middle can match (see `_middle`), so there is one hunk (its
    # ranges as `_range` writes them, the start counted from 1 unless the range is empty).
    length_a, length_b = shared + count_a, shared + count_b
    range_a = str(first_line + 1) if length_a == 1 else f"{first_line + (length_a > 0)},{length_a}"
    range_b = str(first_line + 1) if length_b == 1 else f"{first_line + (length_b > 0)},{length_b}"
    hunk = f"{header}@@ -{range_a} +{range_b} @@\n"
    if a[-1:] == "\n" and b[-1:] == "\n":
        # Both texts end with a newline, so each part is whole lines or nothing: `_marked` is then
        # the mark before each line, the one put after the last "\n" sliced off (an empty part's too).
        return (
            hunk
            + (" " + a[before:head].replace("\n", "\n "))[:-1]
            + ("-" + middle_a.replace("\n", "\n-"))[:-1]
            + ("+" + middle_b.replace("\n", "\n+"))[:-1]
            + (" " + a[end_a:after].replace("\n", "\n "))[:-1]
        )
    return (
        f"{hunk}{_marked(' ', a[before:head])}{_marked('-', middle_a)}{_marked('+', middle_b)}"
        f"{_marked(' ', a[end_a:after])}"
    )


def _shared_ends(a: str, b: str) -> tuple[int, int, int]:
    """(head, end_a, end_b): a[:head] == b[:head] and a[end_a:] == b[end_b:] are the most whole
    lines the texts share at the start and, after that, at the end (as lists of lines would be trimmed)."""
    len_a, len_b = len(a), len(b)
    shortest = min(len_a, len_b)
    # Bisect (comparing slices, in C) until the first difference is known to within a line or so...
    lo, hi = 0, shortest
    while hi - lo > 64:
        mid = (lo + hi) // 2
        if a.startswith(b[lo:mid], lo):  # a[lo:mid] == b[lo:mid], copying only one side
            lo = mid
        else:
            hi = mid
    # ...then walk whole lines: `head` becomes the start of the line the first difference is in.
    head = a.rfind("\n", 0, lo) + 1
    while True:
        end = a.find("\n", lo, hi) + 1
        if not end or a[lo:end] != b[lo:end]:
            break
        head = lo = end
    # The shared end starts at a line start of both: that of the line the first difference is in,
    # or a later one. A small edit ends within a line or two of it; try those before bisecting.
    shift = len_b - len_a
    start = head
    for _ in range(4):
        if start >= len_a:
            return head, len_a, len_b
        if (
            start + shift >= head
            and a.endswith(b[start + shift :])  # a[start:] == b[start + shift:]: they are as long
            and (start + shift == head or b[start + shift - 1] == "\n")
        ):
            return head, start, start + shift
        start = a.find("\n", start) + 1 or len_a
    tail = _common_run(lambda lo, hi: a[len_a - hi : len_a - lo] == b[len_b - hi : len_b - lo], shortest - head)
    return _whole_lines(a, b, head, tail)


def _whole_lines(a: str, b: str, head: int, tail: int) -> tuple[int, int, int]:
    """`_shared_ends`'s answer from `head` and `tail`, the most characters the texts share at the end
    (no more than `min(len(a), len(b)) - head`): the shared end is cut to start at a line start of both."""
    len_a, len_b = len(a), len(b)
    end_a, end_b = len_a - tail, len_b - tail
    if not ((not end_a or a[end_a - 1] == "\n") and (not end_b or b[end_b - 1] == "\n")):  # not line starts
        cut = a.find("\n", end_a) + 1  # the shared end is equal text, so it cuts b at the same place
        if cut:
            end_b += cut - end_a
            end_a = cut
        else:
            end_a, end_b = len_a, len_b
    return head, end_a, end_b


def _hunks(
    before: list[str], middle_a: list[str], middle_b: list[str], after: list[str], first_line: int, n: int
) -> str:
    """Hunks for a middle that needs matching, with the context lines around it."""
    lines_a, lines_b = before + middle_a + after, before + middle_b + after
    kept = len(before)
    codes: list[Opcode] = [("equal", 0, kept, 0, kept)] if kept else []
    codes += _middle(middle_a, middle_b, kept)
    if after:
        stop_a, stop_b = kept + len(middle_a), kept + len(middle_b)
        codes.append(("equal", stop_a, stop_a + len(after), stop_b, stop_b + len(after)))
    out = []
    for group in grouped_opcodes(codes, n):
        first, last = group[0], group[-1]
        out.append(
            f"@@ -{_range(first[1] + first_line, last[2] + first_line)}"
            f" +{_range(first[3] + first_line, last[4] + first_line)} @@\n"
        )
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [" " + line for line in lines_a[i1:i2]]
                continue
            if tag != "insert":
                out += ["-" + line for line in lines_a[i1:i2]]
            if tag != "delete":
                out += ["+" + line for line in lines_b[j1:j2]]
    return "".join(line if line[-1] == "\n" else line + "\n" + NO_NEWLINE for line in out)


def _marked(mark: str, text: str) -> str:
    """Each line of `text` behind `mark`; a last line without its newline gets git's remark."""
    if not text:
        return ""
    marked = mark + text.replace("\n", "\n" + mark)
    if text[-1] == "\n":
        return marked[: -len(mark)]
    return marked + "\n" + NO_NEWLINE


def _lines(text: str) -> list[str]:
    """`text` split after each "\\n" (and nowhere else), every line keeping its end."""
    lines = [line + "\n" for line in text.split("\n")]
    last = lines.pop()
    if last != "\n":
        lines.append(last[:-1])
    return lines
