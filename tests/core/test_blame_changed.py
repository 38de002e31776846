"""Blame's fast path (strings compared in C) finds the same change as comparing line by line."""

from __future__ import annotations

import random

from memframe.core.blame import _alike_end, _alike_start, _changed, _changed_lines

PIECES = ["a\n", "b\n", "c\n", "a", "b", "\n", "ab\n", "", "a\nb", "é\n", "x" * 70 + "\n", "y" * 90, "\r", "\u2028"]


def test_the_fast_path_finds_the_same_lines_as_the_line_by_line_one() -> None:
    rng = random.Random(32)
    for _ in range(20000):
        old, new = ("".join(rng.choice(PIECES) for _ in range(rng.randint(0, 12))) for _ in range(2))
        if rng.random() < 0.5:  # most edits change one place
            cut = rng.randint(0, len(old))
            new = old[:cut] + "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 2))) + old[cut + 3 :]
        lines = old.splitlines(keepends=True)
        plain = not any(c in old for c in "\r\u2028")
        head, tail, old_mid, new_mid, _ = _changed(old, new, len(lines), plain)
        line_head, line_tail, line_old, line_new = _changed_lines(lines, new.splitlines(keepends=True))
        # the same lines between; an alike last line with no line end may count at either end
        assert (head + tail, old_mid, new_mid) == (line_head + line_tail, line_old, line_new), (old, new)


def test_the_alike_ends_are_whole_lines() -> None:
    rng = random.Random(28)
    for _ in range(5000):
        same = "".join(rng.choice(["ab", "\n", "x" * 90]) for _ in range(rng.randint(0, 20)))
        a, b = ("".join(rng.choice("ab\n") for _ in range(rng.randint(0, 200))) for _ in range(2))
        start = _alike_start(same + a, same + b)
        lines_a, lines_b = (same + a).splitlines(keepends=True), (same + b).splitlines(keepends=True)
        alike = next((i for i, (x, y) in enumerate(zip(lines_a, lines_b, strict=False)) if x != y), None)
        if alike is None:
            alike = min(len(lines_a), len(lines_b))
        assert start == len("".join(lines_a[:alike])) or start == len(same + a) == len(same + b)
        most = rng.randint(0, min(len(a + same), len(b + same)))
        end = _alike_end(a + same, b + same, most)
        assert end <= most and (a + same).endswith((b + same)[len(b + same) - end :])
        for text in (a + same, b + same):
            assert end in (0, len(text)) or text[len(text) - end - 1] == "\n"
