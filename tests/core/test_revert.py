"""Revert one change: version N's edit undone on today's text, or the conflicting lines named."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memframe.core.revert import revert


def test_a_later_edit_elsewhere_is_kept() -> None:
    before, after = "# Prefs\n- tea\n\n# Work\n- rust\n", "# Prefs\n- tea\n- jazz\n\n# Work\n- rust\n"
    current = "# Prefs\n- tea\n- jazz\n\n# Work\n- python\n"
    assert revert(before, after, current).text == "# Prefs\n- tea\n\n# Work\n- python\n"


def test_a_later_edit_of_the_same_lines_is_a_conflict() -> None:
    reverted = revert("- tea\n", "- coffee\n", "- coffee, black\n")
    assert reverted.text is None
    (conflict,) = reverted.conflicts
    assert conflict.removing == ("- coffee\n",) and conflict.restoring == ("- tea\n",)
    assert conflict.current == ("- coffee, black\n",) and conflict.line == 1


def test_an_edit_beside_the_change_is_kept() -> None:
    assert revert("a\nc\n", "a\nb\nc\n", "a\nb\nB\nc\n").text == "a\nB\nc\n"
    assert revert("- tea\n", "- tea\n- jam\n", "- green tea\n- jam\n").text == "- green tea\n"


def test_reverting_the_first_version_removes_its_lines() -> None:
    assert revert("", "a\nb\n", "a\nb\n").text == ""


def test_lines_put_back_beside_a_neighbour_still_there() -> None:
    assert revert("", "a\n", "a\nc\n").text == "c\n"
    assert revert("a\nb\nc\n", "a\nc\n", "a\nc\nd\n").text == "a\nb\nc\nd\n"
    assert revert("a\nb\nc\n", "a\nc\n", "A\nc\n").text == "A\nb\nc\n"
    assert revert("a\nb\nc\n", "a\nc\n", "A\nC\n").conflicts
    assert revert("a\nb\nc\n", "a\nB\nc\n", "a\nB\nc\nd\n").text == "a\nb\nc\nd\n"


def test_a_change_already_undone_by_hand_is_a_conflict_not_a_double_undo() -> None:
    assert revert("a\n", "a\nb\n", "a\n").conflicts


lines = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "d\n", "\n"]), max_size=8).map("".join)


@given(lines, lines)
def test_reverting_the_newest_change_gives_the_text_before_it(before: str, after: str) -> None:
    assert revert(before, after, after).text == before


tails = st.lists(st.sampled_from(["x\n", "y\n"]), max_size=4).map("".join)


@given(lines, lines, tails)
def test_lines_written_after_n_below_its_text_are_kept(before: str, after: str, tail: str) -> None:
    reverted = revert(before, after, after + "SEP\n" + tail)
    if after:
        assert reverted.text == before + "SEP\n" + tail
    else:  # N emptied the memory: its text goes back only into an empty one
        assert reverted.text is None or before == ""
