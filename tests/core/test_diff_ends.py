"""`unified_diff_text(ends=…)`: the shared ends a caller already knows (a delta's) spare the search;
`unified_diff_counted`: the count of lines carried along a chain of texts spares counting from the start.

The promise: the diff is byte for byte the one made without them, whatever pair is given; the
pair a delta stores for an ASCII edit is taken (the search is really skipped), and any other pair
is refused by its check and the search is made as before. Carried counts give the same diff
and the exact count of the older text's lines.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memframe import sealing
from memframe.core import diffs
from memframe.core.diffs import unified_diff_counted, unified_diff_text
from memframe.sealing.delta import shared_ends
from tests.test_crypto_delta import KEY, P, W, seal_history

#: Lines that make the ends ambiguous: repeats, empty lines, shared beginnings, a last line without "\n".
PIECES = ["- a\n", "- ab\n", "- a b\n", "\n", "x\n", "x", "- a", "# T\n", "- b\n"]
TEXTS = st.lists(st.sampled_from(PIECES), max_size=25).map("".join)
EDIT = st.tuples(st.integers(0, 400), st.integers(0, 30), st.text(alphabet="-ab x\n#", max_size=20))


def delta_ends(a: str, b: str) -> tuple[int, int]:
    """What a delta from `a` to `b` stores (`sealing.delta.encode`): the bytes shared at the start, then at the end."""
    return shared_ends(a.encode(), b.encode())


def edited(a: str, edit: tuple[int, int, str]) -> str:
    at, cut, insert = edit
    at %= len(a) + 1
    return a[:at] + insert + a[at + cut :]


@settings(max_examples=400, deadline=None)
@given(TEXTS, st.lists(EDIT, min_size=1, max_size=3), st.integers(0, 4))
def test_a_deltas_ends_are_taken_and_give_the_same_diff(a: str, edits: list[tuple[int, int, str]], n: int) -> None:
    b = a
    for edit in edits:
        b = edited(b, edit)
    ends = delta_ends(a, b)
    if a != b:
        # Taken, not refused (else this test would only exercise the search), and the same answer.
        assert diffs._known_ends(a, b, *ends) == diffs._shared_ends(a, b)
    assert unified_diff_text(a, b, "x", "y", n=n, ends=ends) == unified_diff_text(a, b, "x", "y", n=n)


@settings(max_examples=300, deadline=None)
@given(TEXTS, EDIT, st.integers(-3, 300), st.integers(-3, 300))
def test_any_other_pair_gives_the_same_diff(a: str, edit: tuple[int, int, str], prefix: int, suffix: int) -> None:
    b = edited(a, edit)
    known = diffs._known_ends(a, b, prefix, suffix) if a != b else None
    if known is not None:  # only the exact pair passes the check
        assert (prefix, suffix) == delta_ends(a, b)
    for n in (0, 3):
        assert unified_diff_text(a, b, "x", "y", n=n, ends=(prefix, suffix)) == unified_diff_text(a, b, "x", "y", n=n)


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
def test_edge_cases_take_the_deltas_ends_and_match(old: str, new: str) -> None:
    ends = delta_ends(old, new)
    assert diffs._known_ends(old, new, *ends) == diffs._shared_ends(old, new)
    for n in (0, 1, 3):
        assert unified_diff_text(old, new, "x", "y", n=n, ends=ends) == unified_diff_text(old, new, "x", "y", n=n)


def test_a_pair_that_is_not_the_most_shared_is_refused() -> None:
    old, new = LONG, LONG.replace("number 20", "number twenty")
    prefix, suffix = delta_ends(old, new)
    for wrong in [(prefix - 1, suffix), (prefix, suffix - 1), (prefix + 1, suffix), (prefix, suffix + 1),
                  (-1, suffix), (prefix, -1), (len(old), len(old)), (0, 0)]:  # fmt: skip
        assert diffs._known_ends(old, new, *wrong) is None, wrong
        assert unified_diff_text(old, new, "x", "y", ends=wrong) == unified_diff_text(old, new, "x", "y")


def test_the_same_texts_have_no_diff_whatever_the_ends() -> None:
    assert unified_diff_text(LONG, LONG, "x", "y", ends=(len(LONG), 0)) == ""


@settings(max_examples=300, deadline=None)
@given(TEXTS, st.lists(EDIT, min_size=1, max_size=3), st.integers(0, 4), st.booleans())
def test_carried_line_counts_give_the_same_diff_and_the_older_count(
    b: str, edits: list[tuple[int, int, str]], n: int, with_ends: bool
) -> None:
    a = b
    for edit in edits:
        a = edited(a, edit)
    ends = delta_ends(a, b) if with_ends else None
    expected = unified_diff_text(a, b, "x", "y", n=n)
    assert unified_diff_counted(a, b, "x", "y", n=n, ends=ends, newlines_b=b.count("\n")) == (expected, a.count("\n"))
    assert unified_diff_counted(a, b, "x", "y", n=n, ends=ends) == (expected, None)


def test_a_chain_of_long_texts_diffed_back_with_carried_counts() -> None:
    """As `history -p` walks a history: edits near the start and near the end of a long text."""
    chain = [LONG]
    for i in (1, 38, 20, 0, 39, 2, 37):
        chain.append(chain[-1].replace(f"- fact number {i}\n", f"- fact number {i} (edited)\n- and more\n"))
    newlines: int | None = chain[-1].count("\n")
    for newer, older in itertools.pairwise(chain[::-1]):
        diff, newlines = unified_diff_counted(
            older, newer, "x", "y", ends=delta_ends(older, newer), newlines_b=newlines
        )
        assert diff == unified_diff_text(older, newer, "x", "y")
        assert newlines == older.count("\n")


# --- where the ends come from: the opener of a delta ---------------------------------------------


def test_the_opener_reports_a_deltas_ends_and_nothing_else() -> None:
    texts = [LONG]
    for i in range(sealing.KEYFRAME_EVERY + 3):
        texts.append(texts[-1].replace(f"- fact number {i % 40}\n", f"- fact number {i % 40}\n- added {i}\n", 1))
    texts.append(texts[-1] + "- ünïcode\n")  # not ASCII: the delta's bytes are not characters
    blobs = seal_history(texts)
    opener = sealing.opener(KEY, workspace_id=W, path=P, fetch=lambda v: blobs[v - 1] if 0 < v <= len(blobs) else None)
    for version, (text, blob) in enumerate(zip(texts, blobs, strict=True), start=1):
        shown, ends = opener.with_ends(blob, version)
        assert shown == text
        if version == 1 or sealing.keyframe(version) or not text.isascii():
            assert ends is None, version
        else:
            assert ends == delta_ends(texts[version - 2], text), version
            assert unified_diff_text(texts[version - 2], text, ends=ends) == unified_diff_text(texts[version - 2], text)
    # A text held from before (opened again) has no ends to report, and a deletion none at all.
    assert opener.with_ends(blobs[2], 3) == (texts[2], None)
    assert opener.with_ends(None, 4) == ("", None)


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
    last newline, ASCII or not): walked newest first with the delta's ends and carried line counts,
    every diff is the line diff of its pair, byte for byte, as the output was before."""
    chain = [first]
    for edit in edits:
        chain.append(edited(chain[-1], edit))
    newlines: int | None = chain[-1].count("\n")
    for newer, older in itertools.pairwise(chain[::-1]):
        ascii_pair = newer.isascii() and older.isascii()  # a delta's ends count bytes: given only then
        ends = delta_ends(older, newer) if ascii_pair else None
        diff, newlines = unified_diff_counted(older, newer, "x", "y", n=n, ends=ends, newlines_b=newlines)
        assert diff == ("" if older == newer else line_reference(older, newer, n))
        assert newlines == older.count("\n")
