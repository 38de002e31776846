"""The trimmed unified diff: difflib's format, always a correct diff, identical on typical edits."""

from __future__ import annotations

import difflib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memframe.core.diffs import unified_diff, unified_diff_text

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


# --- whole texts -------------------------------------------------------------------------------

TEXT_LINES = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "# T\n", "- x\n", "\n", "b", "- x"]), max_size=30)


def git_style(a: str, b: str, n: int = 3) -> str:
    """difflib's unified diff of the texts' lines, with git's remark after a line without its newline."""
    lines = difflib.unified_diff(a.splitlines(keepends=True), b.splitlines(keepends=True), "x", "y", n=n)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def joined(lines: list[str]) -> str:
    """Lines joined into a text; only the last may lack its newline, as in any text."""
    return "".join(line if line.endswith("\n") or i == len(lines) - 1 else line + "\n" for i, line in enumerate(lines))


@given(TEXT_LINES, TEXT_LINES, st.integers(0, 4))
def test_the_text_diff_is_the_line_diff_of_the_texts(a: list[str], b: list[str], context: int) -> None:
    old, new = joined(a), joined(b)
    expected = "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        for line in unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True), "x", "y", n=context)
    )
    assert unified_diff_text(old, new, "x", "y", n=context) == expected


@given(TEXT_LINES, TEXT_LINES)
def test_the_text_diff_turns_a_into_b(a: list[str], b: list[str]) -> None:
    old, new = joined(a), joined(b)
    diff = unified_diff_text(old, new, "a", "b")
    assert (diff == "") == (old == new)
    if diff:
        lines: list[str] = []
        for line in diff.splitlines(keepends=True):
            if line == "\\ No newline at end of file\n":
                lines[-1] = lines[-1][:-1]  # git's remark: the line before has no newline
            else:
                lines.append(line)
        assert "".join(patch(old.splitlines(keepends=True), lines)) == new


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("", "one\ntwo\n"),  # from empty
        ("one\ntwo\n", ""),  # to empty
        ("", "no newline"),
        ("no newline", ""),
        ("a\nb", "a\nc"),  # neither ends with a newline
        ("a\nb", "a\nb\n"),  # only the newline added
        ("a\nb\n", "a\nb"),  # only the newline removed
        ("a\nb", "a\nx\nb"),  # a line inserted before a last line without newline
        ("first\n" + "same\n" * 20, "FIRST\n" + "same\n" * 20),  # change at the start
        ("same\n" * 20 + "last\n", "same\n" * 20 + "LAST\n"),  # change at the end
        ("same\n" * 20 + "last", "same\n" * 20 + "LAST"),  # at the end, no newline
        ("x\n" * 30, "x\n" * 31),  # repeated lines: one more
        ("x\n" * 31, "x\n" * 30),
    ],
)
def test_text_diff_edge_cases_match_difflib(old: str, new: str) -> None:
    for n in (0, 1, 3):
        assert unified_diff_text(old, new, "x", "y", n=n) == git_style(old, new, n)


def test_identical_texts_have_no_diff() -> None:
    for text in ("", "a", "a\n", "a\nb\n" * 100):
        assert unified_diff_text(text, text, "x", "y") == ""


def test_multiple_hunks_with_context_match_difflib() -> None:
    old = "".join(f"line {i}\n" for i in range(100))
    new = old.replace("line 10\n", "line ten\n").replace("line 50\n", "").replace("line 90\n", "line 90\nadded\n")
    for n in (0, 2, 3, 7):
        diff = unified_diff_text(old, new, "x", "y", n=n)
        assert diff == git_style(old, new, n)
        assert diff.count("\n@@ ") == 3
    # Changes closer than 2n lines share a hunk, as in difflib.
    close = old.replace("line 10\n", "line ten\n").replace("line 15\n", "line fifteen\n")
    assert unified_diff_text(old, close, "x", "y").count("@@ ") == 1 == git_style(old, close).count("@@ ")


def test_one_line_edits_in_a_long_text_match_difflib_as_texts() -> None:
    text = "".join(f"- fact number {i}\n" for i in range(300))
    lines = text.splitlines(keepends=True)
    for where in (0, 1, 150, 298, 299):
        for edit in ("replace", "insert", "delete", "grow"):
            b = list(lines)
            if edit == "replace":
                b[where] = "- changed\n"
            elif edit == "insert":
                b.insert(where, "- new\n")
            elif edit == "delete":
                del b[where]
            else:
                b[where] = b[where][:-1] + " (rev 2)\n"
            for n in (0, 2, 3):
                assert unified_diff_text(text, "".join(b), "x", "y", n=n) == git_style(text, "".join(b), n)


def test_lines_end_only_at_newlines() -> None:
    """Unlike str.splitlines, a form feed or a line separator inside a line does not end it (as in git)."""
    old, new = "a\x0cb\u2028c\nsame\n", "a\x0cB\u2028c\nsame\n"
    assert unified_diff_text(old, new, "x", "y") == (
        "--- x\n+++ y\n@@ -1,2 +1,2 @@\n-a\x0cb\u2028c\n+a\x0cB\u2028c\n same\n"
    )
