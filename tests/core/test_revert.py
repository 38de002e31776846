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


def test_an_edit_beside_the_change_is_a_conflict_too() -> None:
    assert revert("a\nc\n", "a\nb\nc\n", "a\nb\nB\nc\n").text is None


def test_reverting_the_first_version_removes_its_lines() -> None:
    assert revert("", "a\nb\n", "a\nb\n").text == ""


def test_lines_added_right_beside_the_change_conflict_as_in_git() -> None:
    assert revert("", "a\n", "a\nc\n").text is None
    assert revert("a\nb\nc\n", "a\nB\nc\n", "a\nB\nc\nd\n").text == "a\nb\nc\nd\n"


def test_a_change_already_undone_by_hand_is_a_conflict_not_a_double_undo() -> None:
    assert revert("a\n", "a\nb\n", "a\n").conflicts


lines = st.lists(st.sampled_from(["a\n", "b\n", "c\n", "d\n", "\n"]), max_size=8).map("".join)


@given(lines, lines)
def test_reverting_the_newest_change_gives_the_text_before_it(before: str, after: str) -> None:
    assert revert(before, after, after).text == before


@given(lines, lines, lines)
def test_a_clean_revert_then_reapplied_returns_today(before: str, after: str, current: str) -> None:
    reverted = revert(before, after, current)
    if reverted.text is not None:
        again = revert(after, before, reverted.text)
        assert again.text in (None, current)
