"""The trimmed unified diff: difflib's format, always a correct diff, identical on typical edits."""

from __future__ import annotations

import difflib

from hypothesis import given
from hypothesis import strategies as st

from memframe.core.diffs import unified_diff

LINES = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "# T\n", "- x\n", "\n"]), max_size=30)


def patch(a: list[str], diff: list[str]) -> list[str]:
    """Apply a unified diff to `a` (what `patch` would do), to check the diff is right."""
    out: list[str] = []
    i = 0
    lines = diff[2:]
    k = 0
    while k < len(lines):
        header = lines[k].split()[1][1:]
        start, _, length = header.partition(",")
        begin = int(start) - (1 if length != "0" else 0)
        out += a[i:begin]
        i = begin
        k += 1
        while k < len(lines) and not lines[k].startswith("@@"):
            tag, line = lines[k][0], lines[k][1:]
            if tag == " ":
                assert a[i] == line
                out.append(line)
                i += 1
            elif tag == "-":
                assert a[i] == line
                i += 1
            else:
                out.append(line)
            k += 1
    return out + a[i:]


@given(LINES, LINES, st.integers(0, 3))
def test_the_diff_turns_a_into_b(a: list[str], b: list[str], context: int) -> None:
    diff = list(unified_diff(a, b, "a", "b", n=context))
    assert (diff == []) == (a == b)
    if diff:
        assert diff[:2] == ["--- a\n", "+++ b\n"]
        assert patch(a, diff) == b


def test_one_line_edits_in_a_long_text_match_difflib_exactly() -> None:
    text = [f"- fact number {i}\n" for i in range(300)]
    for where in (0, 1, 150, 298, 299):
        for edit in ("replace", "insert", "delete"):
            b = list(text)
            if edit == "replace":
                b[where] = "- changed\n"
            elif edit == "insert":
                b.insert(where, "- new\n")
            else:
                del b[where]
            for n in (0, 2, 3):
                expected = list(difflib.unified_diff(text, b, "x", "y", n=n))
                assert list(unified_diff(text, b, "x", "y", n=n)) == expected, (where, edit, n)


def test_lineterm_and_labels_follow_difflib() -> None:
    a, b = ["one", "two"], ["one", "three"]
    assert list(unified_diff(a, b, "r1", "r2", lineterm="", n=2)) == list(
        difflib.unified_diff(a, b, "r1", "r2", lineterm="", n=2)
    )
