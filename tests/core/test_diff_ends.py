"""`unified_diff_text` over the edits a history holds: at the ends, within a line, repeated lines, a
last line without "\\n", walked back over a chain of texts: always the line diff of its pair, byte for
byte.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memframe.core import diffs
from memframe.core.diffs import unified_diff_text

#: Lines that make the ends ambiguous: repeats, empty lines, shared beginnings, a last line without "\n".
PIECES = ["- a\n", "- ab\n", "- a b\n", "\n", "x\n", "x", "- a", "# T\n", "- b\n"]
TEXTS = st.lists(st.sampled_from(PIECES), max_size=25).map("".join)
EDIT = st.tuples(st.integers(0, 400), st.integers(0, 30), st.text(alphabet="-ab x\n#", max_size=20))


def edited(a: str, edit: tuple[int, int, str]) -> str:
    at, cut, insert = edit
    at %= len(a) + 1
    return a[:at] + insert + a[at + cut :]


LONG = "".join(f"- fact number {i}\n" for i in range(40))


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (LONG, LONG.replace("- fact number 20\n", "- fact number 20\n- a new one\n")),  # an insertion
        (LONG, LONG.replace("- fact number 20\n", "")),  # a deletion: the suffix reaches back to the prefix
        (LONG, "- first\n" + LONG),  # at the start
        (LONG, LONG + "- last\n"),  # at the end: `old` is all prefix
        (LONG + "- last\n", LONG),
        (LONG, LONG.replace("number 20", "number twenty")),  # within a line
        (LONG, LONG.replace("- fact number 20\n", "- fact number 20\n- fact number 20\n")),  # a repeated line
        ("x\n" * 30, "x\n" * 31),  # the suffix could be matched anywhere: it is extended to the line start
        ("x\n" * 31, "x\n" * 30),
        ("x\nx\nx", "x\nx"),
        ("", "one\ntwo\n"),
        ("one\ntwo\n", ""),
        ("a\nb", "a\nb\n"),  # only the last newline added
        ("a\nb\n", "a\nb"),
        ("- a\n- ab\n", "- a\n- a\n- ab\n"),  # the inserted line shares a start with the next
        ("- ab\n- a\n", "- ab\n- ab\n- a\n"),
        ("abc\n", "abXbc\n"),  # within a line: the suffix is extended back only part of the way
        ("same\nabc\nend\n", "same\nabXbc\nend\n"),
    ],
)
def test_edge_cases_are_the_line_diff(old: str, new: str) -> None:
    for n in (0, 1, 3):
        assert unified_diff_text(old, new, "x", "y", n=n) == line_reference(old, new, n)


def line_reference(a: str, b: str, n: int = 3) -> str:
    """The diff as the line-based `unified_diff` makes it (difflib's grouping), written as a text diff."""
    lines = diffs.unified_diff(a.splitlines(keepends=True), b.splitlines(keepends=True), "x", "y", n=n)
    return "".join(line if line.endswith("\n") else line + "\n" + diffs.NO_NEWLINE for line in lines)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([*PIECES, "- é\n", "ü"]), max_size=25).map("".join),
    st.lists(
        st.tuples(st.integers(0, 400), st.integers(0, 30), st.text(alphabet="-ab x\n#é", max_size=20)), max_size=12
    ),
    st.integers(0, 4),
)
def test_a_varied_history_walked_back_gives_the_line_diff_of_every_pair(
    first: str, edits: list[tuple[int, int, str]], n: int
) -> None:
    """What `history -p` does over a history (each text the one before, edited; with and without a
    last newline, ASCII or not): walked newest first, every diff is the line diff of its pair."""
    chain = [first]
    for edit in edits:
        chain.append(edited(chain[-1], edit))
    for newer, older in itertools.pairwise(chain[::-1]):
        diff = unified_diff_text(older, newer, "x", "y", n=n)
        assert diff == ("" if older == newer else line_reference(older, newer, n))
