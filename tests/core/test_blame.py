"""Blame: each line of the newest revision names the revision that introduced it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memframe.core.blame import Revision, blame
from memframe.core.types import Author, Operation

P, A = Author.PERSON, Author.ASSISTANT


def rev(version: int, text: str, op: Operation = Operation.SAVE, author: Author = P, **kw: object) -> Revision:
    who = "alice" if author is P else "conv-1"
    return Revision(version, author, who, float(version), op, text, **kw)  # type: ignore[arg-type]


def test_each_line_names_the_version_that_introduced_it() -> None:
    lines = blame(
        [
            rev(1, "# Prefs\n- tea\n"),
            rev(2, "# Prefs\n- tea\n- jazz\n", Operation.CAPTURE, A),
            rev(3, "# Prefs\n- coffee\n- jazz\n"),
        ]
    )
    assert [(b.version, b.who, b.text) for b in lines] == [
        (1, "alice", "# Prefs\n"),
        (3, "alice", "- coffee\n"),
        (2, "conv-1", "- jazz\n"),
    ]
    assert lines[2].author is A and lines[2].operation is Operation.CAPTURE


def test_a_clear_starts_every_line_afresh() -> None:
    lines = blame([rev(1, "a\nb\n"), rev(2, "", Operation.CLEAR), rev(3, "a\nb\n")])
    assert [b.version for b in lines] == [3, 3]


def test_an_undo_is_the_persons_with_the_version_it_restored_from() -> None:
    lines = blame(
        [rev(1, "a\n"), rev(2, "a\nb\n", Operation.CAPTURE, A), rev(3, "a\n", Operation.UNDO, restored_from=1)]
    )
    assert [(b.version, b.restored_from) for b in lines] == [(1, None)]
    lines = blame([rev(1, "a\n"), rev(2, "b\n"), rev(3, "a\n", Operation.UNDO, restored_from=1)])
    assert [(b.version, b.author, b.restored_from) for b in lines] == [(3, P, 1)]


def test_empty_history_blames_nothing() -> None:
    assert blame([]) == []


texts = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "# H\n", "\n", "x"]), max_size=8).map("".join)


@given(st.lists(st.tuples(texts, st.sampled_from(list(Operation))), min_size=1, max_size=6))
def test_the_lines_are_the_newest_text_and_versions_never_from_the_future(steps: list[tuple[str, Operation]]) -> None:
    revisions = [rev(n, text, op) for n, (text, op) in enumerate(steps, start=1)]
    lines = blame(revisions)
    assert "".join(b.text for b in lines) == revisions[-1].text
    assert all(1 <= b.version <= len(revisions) for b in lines)
    if revisions[-1].operation is Operation.CLEAR:
        assert all(b.version == len(revisions) for b in lines)
