"""The tool's promises (T1–T3) pinned with the contract's own numbers, and the edge cases that
mutation testing showed no other test would notice (issue 18).

The numbers are literals on purpose: a test written against `MAX_EDITS` would follow a wrong
constant; the contract says five edits and 500 bytes.
"""

from __future__ import annotations

import pytest

from memframe.assistant import memory_tool
from memframe.core import edits
from memframe.core.edits import MemoryChange, apply_memory_changes, parse_changes
from memframe.core.errors import EditRefused


def add(line: str, heading: str | None = None) -> MemoryChange:
    return MemoryChange(op="add", line=line, heading=heading)


def reason(text: str, *changes: MemoryChange) -> str:
    with pytest.raises(EditRefused) as caught:
        apply_memory_changes(text, changes)
    return str(caught.value.details["reason"])


# --- T1: at most five edits, each one line of at most 500 bytes -------------------------------


def test_T1_five_edits_apply_and_six_are_refused() -> None:
    five = [add(f"- fact {n}") for n in range(5)]
    assert apply_memory_changes("", five) == "".join(f"- fact {n}\n" for n in range(5))
    assert reason("", *five, add("- fact 5")) == "too_many"
    with pytest.raises(EditRefused):
        parse_changes([{"op": "add", "line": f"- {n}"} for n in range(6)])
    assert len(parse_changes([{"op": "add", "line": f"- {n}"} for n in range(5)])) == 5


def test_T1_a_line_of_500_bytes_applies_and_501_is_refused() -> None:
    assert apply_memory_changes("", [add("x" * 500)]) == "x" * 500 + "\n"
    assert reason("", add("x" * 501)) == "line_too_long"
    # bytes, not characters: 166 three-byte characters and two more bytes are 500
    assert apply_memory_changes("", [add("あ" * 166 + "xx")]) == "あ" * 166 + "xx\n"
    assert reason("", add("あ" * 167)) == "line_too_long"


def test_T1_the_tool_schema_and_core_share_one_source_of_5_and_500() -> None:
    assert (memory_tool.MAX_EDITS, memory_tool.MAX_LINE_BYTES) == (edits.MAX_EDITS, edits.MAX_LINE_BYTES) == (5, 500)
    schema = memory_tool.SCHEMA["function"]["parameters"]["properties"]["edits"]
    assert schema["maxItems"] == 5
    assert "500 bytes" in memory_tool.SCHEMA["function"]["description"]


@pytest.mark.parametrize(
    "line",
    ["- a\u2029b", "- a\u2028b", "- a\rb", "- a\nb"],
    ids=["U+2029", "U+2028", "CR", "LF"],
)
def test_T1_one_line_means_no_line_or_paragraph_separator(line: str) -> None:
    assert reason("", add(line)) == "multiline"


@pytest.mark.parametrize(
    "line",
    ["- a\ue000b", "- a\U000f0000b", "- a\ud800b", "- a\udfffb", "- a\u200bb", "- a\x07b"],
    ids=["private-use", "supplementary-private-use", "high-surrogate", "low-surrogate", "zero-width", "control"],
)
def test_T1_one_visible_line_refuses_private_use_surrogate_and_hidden_characters(line: str) -> None:
    assert reason("", add(line)) == "invisible_characters"


# --- add under a heading: what counts as a heading -------------------------------------------


def test_T1_a_heading_after_a_closed_code_fence_is_still_found() -> None:
    text = "```\n## Not a heading\n```\n## Prefs\n- tea\n"
    assert apply_memory_changes(text, [add("- coffee", "Prefs")]) == text + "- coffee\n"


def test_T1_a_fence_closes_only_with_its_own_character_and_at_least_its_length() -> None:
    text = "````\n```\n~~~~\n## Inside\n````\n## Prefs\n- tea\n"
    assert apply_memory_changes(text, [add("- coffee", "Prefs")]) == text + "- coffee\n"
    # "## Inside" is code, so adding under it makes the heading instead of writing into the block
    assert apply_memory_changes(text, [add("- x", "Inside")]) == text + "\n## Inside\n- x\n"


def test_T1_an_unclosed_fence_runs_to_the_end_and_hides_the_headings_in_it() -> None:
    text = "## Prefs\n- tea\n```\n## Later\n"
    assert apply_memory_changes(text, [add("- x", "Later")]) == text + "\n## Later\n- x\n"
    assert apply_memory_changes(text, [add("- coffee", "Prefs")]) == "## Prefs\n- tea\n- coffee\n```\n## Later\n"


def test_T1_a_level_one_heading_ends_a_level_two_section() -> None:
    text = "# Top\n## Prefs\n- tea\n# Other\n- unrelated\n"
    expected = "# Top\n## Prefs\n- tea\n- coffee\n# Other\n- unrelated\n"
    assert apply_memory_changes(text, [add("- coffee", "Prefs")]) == expected


def test_T1_a_heading_right_after_the_target_heading_ends_its_empty_section() -> None:
    text = "## A\n## B\n- b\n"
    assert apply_memory_changes(text, [add("- a", "A")]) == "## A\n- a\n## B\n- b\n"


def test_T1_a_deeper_heading_does_not_end_the_section() -> None:
    text = "## Prefs\n- tea\n### Detail\n- green\n## Next\n"
    expected = "## Prefs\n- tea\n### Detail\n- green\n- coffee\n## Next\n"
    assert apply_memory_changes(text, [add("- coffee", "## Prefs")]) == expected


def test_T1_six_hashes_are_a_heading_and_seven_are_not() -> None:
    text = "###### Deep\n- one\n####### Not\n"
    assert apply_memory_changes(text, [add("- two", "###### Deep")]) == "###### Deep\n- one\n####### Not\n- two\n"
    assert apply_memory_changes(text, [add("- two", "Deep")]) == "###### Deep\n- one\n####### Not\n- two\n"
    assert reason(text, add("- two", "####### Not")) == "invalid_heading"
    # "####### Not" is body text, so a heading of that title is created
    assert apply_memory_changes(text, [add("- x", "Not")]) == text + "\n## Not\n- x\n"


def test_T1_an_edit_reads_back_as_the_same_edit() -> None:
    """The shape proposals are sealed in and the capture's request hash is made of."""
    changes = [
        MemoryChange("add", "- a", heading="## H"),
        MemoryChange("replace", "- a", new_line="- b"),
        MemoryChange("remove", "- c"),
    ]
    assert parse_changes([c.as_dict() for c in changes]) == changes
    assert changes[2].as_dict() == {"op": "remove", "line": "- c"}


# --- T2 / T3 ---------------------------------------------------------------------------------


def test_T2_replace_and_remove_match_exactly_once() -> None:
    text = "- a\n- b\n- a\n"
    assert reason(text, MemoryChange("replace", "- a", new_line="- c")) == "ambiguous"
    assert reason(text, MemoryChange("remove", "- z")) == "no_match"
    assert apply_memory_changes(text, [MemoryChange("remove", "- b")]) == "- a\n- a\n"


def test_T3_an_add_already_present_changes_nothing() -> None:
    assert apply_memory_changes("## P\n- tea\n", [add("- tea", "Other")]) == "## P\n- tea\n"


# --- S: the 8192-byte bound ------------------------------------------------------------------


def test_S2_memory_of_exactly_8192_bytes_can_still_be_changed_and_8193_cannot() -> None:
    text = ("x" * 499 + "\n") * 16 + "y" * 191 + "\n"
    assert len(text.encode()) == 8192
    changed = apply_memory_changes(text, [MemoryChange("replace", "y" * 191, new_line="z" * 191)])
    assert changed.endswith("z" * 191 + "\n")
    assert reason(text + "z", MemoryChange("remove", "z")) == "memory_oversized"
    assert reason(text, add("- one more")) == "oversized"


def test_T1_a_code_block_inside_a_section_does_not_end_it() -> None:
    text = "## Notes\n```\ncode\n```\n- item\n"
    assert apply_memory_changes(text, [add("- new", "Notes")]) == text + "- new\n"


def test_T1_a_memory_that_starts_with_an_empty_line_keeps_its_line_endings() -> None:
    # CRLF is read from the first line break, even when the first line is empty
    assert apply_memory_changes("\r\n- a\r\n", [add("- b")]) == "\r\n- a\r\n- b\r\n"
    # a first line break with nothing before it is LF: the text's last character is not looked at
    assert apply_memory_changes("\n- a\r", [add("- b")]) == "\n- a\r\n- b\n"
