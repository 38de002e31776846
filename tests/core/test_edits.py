"""remember_in_memory's exact edits: each rule by name, then properties."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memframe.core.edits import (
    MAX_EDITS,
    MAX_LINE_BYTES,
    MemoryChange,
    apply_memory_changes,
    parse_changes,
)
from memframe.core.errors import EditRefused, InvalidInput
from memframe.core.types import MEMORY_RECALL_MAX_BYTES


def add(line: str, heading: str | None = None) -> MemoryChange:
    return MemoryChange(op="add", line=line, heading=heading)


def replace(line: str, new_line: str) -> MemoryChange:
    return MemoryChange(op="replace", line=line, new_line=new_line)


def remove(line: str) -> MemoryChange:
    return MemoryChange(op="remove", line=line)


def refusal(text: str, *changes: MemoryChange) -> EditRefused:
    with pytest.raises(EditRefused) as caught:
        apply_memory_changes(text, changes)
    return caught.value


DOC = """# Memory

## Prefs
- likes tea
- short answers

## Projects
- zudo launch in May

"""

# --- add ----------------------------------------------------------------------------------


def test_add_without_heading_appends_at_the_end() -> None:
    assert apply_memory_changes("- a\n", [add("- b")]) == "- a\n- b\n"


def test_add_without_heading_first_ends_the_document_with_a_newline() -> None:
    assert apply_memory_changes("- a", [add("- b")]) == "- a\n- b\n"


def test_add_to_an_empty_document() -> None:
    assert apply_memory_changes("", [add("- b")]) == "- b\n"


def test_add_already_present_anywhere_is_a_no_op() -> None:
    assert apply_memory_changes(DOC, [add("- likes tea")]) == DOC
    assert apply_memory_changes(DOC, [add("- likes tea", heading="Projects")]) == DOC


def test_add_matches_presence_ignoring_a_crlf_carriage_return() -> None:
    text = "- a\r\n- b\r\n"
    assert apply_memory_changes(text, [add("- a")]) == text


def test_add_under_heading_goes_after_the_sections_last_non_blank_line() -> None:
    result = apply_memory_changes(DOC, [add("- green tea, no sugar", heading="## Prefs")])
    assert result == DOC.replace("- short answers\n", "- short answers\n- green tea, no sugar\n")


def test_add_under_the_last_section_skips_its_trailing_blank_lines() -> None:
    result = apply_memory_changes(DOC, [add("- beta in June", heading="## Projects")])
    assert result == DOC.replace("in May\n", "in May\n- beta in June\n")
    assert result.endswith("- beta in June\n\n")


def test_add_under_heading_ends_before_the_next_heading_of_same_or_higher_level() -> None:
    text = "## A\n- a\n### A.1\n- a1\n## B\n- b\n"
    result = apply_memory_changes(text, [add("- a2", heading="## A")])
    assert result == "## A\n- a\n### A.1\n- a1\n- a2\n## B\n- b\n"


def test_add_under_a_heading_at_the_very_end_without_newline() -> None:
    assert apply_memory_changes("## A\n- a", [add("- b", heading="A")]) == "## A\n- a\n- b\n"


def test_add_under_an_empty_section_goes_right_after_the_heading() -> None:
    text = "## A\n\n## B\n- b\n"
    assert apply_memory_changes(text, [add("- a", heading="## A")]) == "## A\n- a\n\n## B\n- b\n"


def test_add_under_absent_heading_appends_blank_heading_and_line() -> None:
    result = apply_memory_changes("- a\n", [add("- b", heading="## New")])
    assert result == "- a\n\n## New\n- b\n"


def test_add_under_absent_heading_does_not_double_an_existing_blank_line() -> None:
    assert apply_memory_changes("- a\n\n", [add("- b", heading="New")]) == "- a\n\n## New\n- b\n"


def test_add_under_absent_heading_in_an_empty_document() -> None:
    assert apply_memory_changes("", [add("- b", heading="New")]) == "## New\n- b\n"


def test_heading_without_hash_gets_a_level_two_prefix() -> None:
    assert apply_memory_changes("x\n", [add("- b", heading="Prefs")]) == "x\n\n## Prefs\n- b\n"


def test_heading_without_hash_matches_that_title_at_any_level() -> None:
    text = "# Prefs\n- a\n"
    assert apply_memory_changes(text, [add("- b", heading="Prefs")]) == "# Prefs\n- a\n- b\n"


def test_heading_matching_normalises_hashes_and_whitespace() -> None:
    text = "##   Prefs  ##\n- a\n"
    for heading in ("## Prefs", "##Prefs", "  ## Prefs ", "## Prefs ##"):
        assert apply_memory_changes(text, [add("- b", heading=heading)]) == text + "- b\n"


def test_heading_with_a_different_level_is_a_different_heading() -> None:
    result = apply_memory_changes("# Prefs\n- a\n", [add("- b", heading="### Prefs")])
    assert result == "# Prefs\n- a\n\n### Prefs\n- b\n"


def test_heading_match_is_exact_on_the_title() -> None:
    result = apply_memory_changes("## prefs\n- a\n", [add("- b", heading="## Prefs")])
    assert result == "## prefs\n- a\n\n## Prefs\n- b\n"


def test_hash_lines_inside_a_code_fence_are_not_headings() -> None:
    text = "```sh\n## Prefs\n```\n- a\n"
    assert apply_memory_changes(text, [add("- b", heading="## Prefs")]) == text + "\n## Prefs\n- b\n"


def test_a_heading_that_appears_twice_is_refused() -> None:
    error = refusal("## A\n- a\n## A\n- b\n", add("- c", heading="A"))
    assert error.details == {"reason": "ambiguous_heading", "index": 1}


def test_crlf_documents_get_crlf_lines() -> None:
    text = "## A\r\n- a\r\n"
    assert apply_memory_changes(text, [add("- b", heading="A")]) == "## A\r\n- a\r\n- b\r\n"
    assert apply_memory_changes(text, [add("- c")]) == "## A\r\n- a\r\n- c\r\n"


# --- replace and remove -------------------------------------------------------------------


def test_replace_changes_exactly_the_matching_line() -> None:
    result = apply_memory_changes(DOC, [replace("- likes tea", "- likes coffee")])
    assert result == DOC.replace("- likes tea", "- likes coffee")


def test_remove_deletes_exactly_the_matching_line() -> None:
    assert apply_memory_changes(DOC, [remove("- likes tea")]) == DOC.replace("- likes tea\n", "")


def test_replace_and_remove_ignore_a_trailing_carriage_return_and_keep_it() -> None:
    assert apply_memory_changes("- a\r\n- b\r\n", [replace("- a", "- z")]) == "- z\r\n- b\r\n"
    assert apply_memory_changes("- a\r\n- b\r\n", [remove("- a")]) == "- b\r\n"


def test_replace_and_remove_match_whole_lines_only() -> None:
    for change in (replace("likes tea", "x"), remove("- likes")):
        assert refusal(DOC, change).details["reason"] == "no_match"


def test_match_is_exact_not_whitespace_tolerant() -> None:
    assert refusal("- a \n", remove("- a")).details["reason"] == "no_match"


def test_zero_matches_is_no_match_naming_the_edit() -> None:
    error = refusal(DOC, add("- x"), remove("- not there"))
    assert error.details == {"reason": "no_match", "index": 2}
    assert error.message.startswith("Edit 2: ")


def test_several_matches_is_ambiguous_naming_the_edit() -> None:
    error = refusal("- a\n- a\n", replace("- a", "- b"))
    assert error.details == {"reason": "ambiguous", "index": 1}
    assert "2 lines" in error.message


def test_refusal_messages_never_quote_memory_text() -> None:
    secret = "- my door code is 4711"
    for error in (refusal(f"{secret}\n{secret}\n", remove(secret)), refusal("", remove(secret))):
        assert "4711" not in error.message


def test_replace_keeps_a_missing_final_newline() -> None:
    assert apply_memory_changes("- a", [replace("- a", "- b")]) == "- b"


def test_removing_the_last_line_keeps_the_break_before_it() -> None:
    assert apply_memory_changes("- a\n- b", [remove("- b")]) == "- a\n"
    assert apply_memory_changes("\n- b", [remove("- b")]) == "\n"
    assert apply_memory_changes("- b", [remove("- b")]) == ""


# --- order, atomicity and size ------------------------------------------------------------


def test_edits_apply_in_order() -> None:
    result = apply_memory_changes("- a\n", [add("- b"), replace("- b", "- c"), remove("- a")])
    assert result == "- c\n"


def test_a_later_failure_applies_nothing() -> None:
    text = "- a\n"
    with pytest.raises(EditRefused):
        apply_memory_changes(text, [add("- b"), remove("- missing")])
    assert text == "- a\n"  # strings are immutable; the point is that nothing is returned


def test_at_most_five_edits() -> None:
    changes = [add(f"- {i}") for i in range(MAX_EDITS + 1)]
    error = refusal("", *changes)
    assert error.details == {"reason": "too_many"}
    assert apply_memory_changes("", changes[:MAX_EDITS]).count("\n") == MAX_EDITS


def test_no_edits_is_refused() -> None:
    assert refusal("x\n").details == {"reason": "no_edits"}


def test_a_result_over_the_bound_is_refused() -> None:
    text = ("- " + "x" * 98 + "\n") * 81  # 8181 bytes
    error = refusal(text, add("- " + "y" * 20))
    assert error.details == {"reason": "oversized"}
    assert str(MEMORY_RECALL_MAX_BYTES) in error.message


def test_a_result_exactly_at_the_bound_is_accepted() -> None:
    text = "x" * (MEMORY_RECALL_MAX_BYTES - 5)  # plus "\n", "abc" and "\n" is exactly the bound
    assert len(apply_memory_changes(text, [add("abc")]).encode()) == MEMORY_RECALL_MAX_BYTES


def test_memory_already_over_the_bound_is_refused_before_applying() -> None:
    text = "é" * (MEMORY_RECALL_MAX_BYTES // 2 + 1)  # characters under, bytes over
    error = refusal(text, remove("not there"))
    assert error.details == {"reason": "memory_oversized"}
    assert "a person must shorten it" in error.message


def test_edit_refused_is_invalid_input() -> None:
    assert isinstance(refusal("", remove("- a")), InvalidInput)


# --- the checks on each line --------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (add("a\nb"), "multiline"),
        (add("a\rb"), "multiline"),
        (add("a\u2028b"), "multiline"),
        (add(""), "blank"),
        (add("   "), "blank"),
        (add("x" * (MAX_LINE_BYTES + 1)), "line_too_long"),
        (add("é" * (MAX_LINE_BYTES // 2 + 1)), "line_too_long"),
        (add("a\u200bb"), "invisible_characters"),
        (add("a\u200fb"), "invisible_characters"),
        (add("a\u202eb"), "invisible_characters"),
        (add("a\u2066b"), "invisible_characters"),
        (add("\ufeffa"), "invisible_characters"),
        (add("a\tb"), "invisible_characters"),
        (add("a\x00b"), "invisible_characters"),
        (add("a\x85b"), "invisible_characters"),
        (add("a\U000e0041b"), "invisible_characters"),
        (add("a", heading="Prefs\n"), "multiline"),
        (add("a", heading="##"), "blank"),
        (add("a", heading="####### Deep"), "invalid_heading"),
        (add("a", heading="Pre\u200bfs"), "invisible_characters"),
        (replace("a", "b\nc"), "multiline"),
        (replace("a", ""), "blank"),
        (MemoryChange(op="replace", line="a"), "missing_field"),
        (MemoryChange(op="remove", line="a", new_line="b"), "unexpected_field"),
        (MemoryChange(op="remove", line="a", heading="H"), "unexpected_field"),
        (MemoryChange(op="rewrite", line="a"), "unknown_op"),  # type: ignore[arg-type]
    ],
)
def test_each_line_is_checked(change: MemoryChange, reason: str) -> None:
    error = refusal("a\n", add("fine"), change)
    assert error.details == {"reason": reason, "index": 2}
    assert error.message.startswith("Edit 2: ")


def test_a_line_of_exactly_500_bytes_is_accepted() -> None:
    line = "x" * MAX_LINE_BYTES
    assert apply_memory_changes("", [add(line)]) == line + "\n"


def test_invisible_character_message_names_the_code_point() -> None:
    assert "U+202E" in refusal("", add("a\u202eb")).message


# --- parse_changes ------------------------------------------------------------------------


def test_parse_a_list() -> None:
    raw = [
        {"op": "add", "line": "- a", "heading": "## Prefs"},
        {"op": "replace", "line": "- old", "new_line": "- new"},
        {"op": "remove", "line": "- gone"},
    ]
    assert parse_changes(raw) == [
        MemoryChange(op="add", line="- a", heading="## Prefs"),
        MemoryChange(op="replace", line="- old", new_line="- new"),
        MemoryChange(op="remove", line="- gone"),
    ]


def test_parse_the_edits_object_and_json_text() -> None:
    raw = {"edits": [{"op": "add", "line": "- a"}]}
    assert parse_changes(raw) == [add("- a")]
    assert parse_changes(json.dumps(raw)) == [add("- a")]
    assert parse_changes(json.dumps(raw).encode()) == [add("- a")]


def test_parse_accepts_null_for_fields_that_do_not_apply() -> None:
    assert parse_changes([{"op": "add", "line": "- a", "heading": None}]) == [add("- a")]
    strict = [
        {"op": "add", "line": "- a", "new_line": None, "heading": None},
        {"op": "remove", "line": "- b", "new_line": None, "heading": None},
    ]
    assert parse_changes(strict) == [add("- a"), remove("- b")]


@pytest.mark.parametrize(
    ("raw", "details"),
    [
        ("{not json", {"reason": "invalid_json"}),
        ({"changes": []}, {"reason": "invalid_shape"}),
        ({"edits": [], "why": "x"}, {"reason": "invalid_shape"}),
        ("42", {"reason": "invalid_shape"}),
        ([], {"reason": "no_edits"}),
        ([{"op": "add", "line": str(i)} for i in range(6)], {"reason": "too_many"}),
        (["add - a"], {"reason": "invalid_shape", "index": 1}),
        ([{"line": "- a"}], {"reason": "unknown_op", "index": 1}),
        ([{"op": "Add", "line": "- a"}], {"reason": "unknown_op", "index": 1}),
        ([{"op": "add"}], {"reason": "missing_field", "index": 1}),
        ([{"op": "add", "line": 3}], {"reason": "invalid_field", "index": 1}),
        ([{"op": "add", "line": "- a", "section": "Prefs"}], {"reason": "unexpected_field", "index": 1}),
        ([{"op": "remove", "line": "- a", "new_line": "b"}], {"reason": "unexpected_field", "index": 1}),
        ([{"op": "replace", "line": "- a"}], {"reason": "missing_field", "index": 1}),
        ([{"op": "replace", "line": "- a", "new_line": None}], {"reason": "missing_field", "index": 1}),
        (
            [{"op": "add", "line": "- ok"}, {"op": "add", "line": "a\u202eb"}],
            {"reason": "invisible_characters", "index": 2},
        ),
        ([{"op": "add", "line": "- a", "heading": ""}], {"reason": "blank", "index": 1}),
    ],
)
def test_parse_refusals_name_the_edit_and_reason(raw: Any, details: dict[str, Any]) -> None:
    with pytest.raises(EditRefused) as caught:
        parse_changes(raw)
    assert caught.value.details == details
    if "index" in details:
        assert caught.value.message.startswith(f"Edit {details['index']}: ")


def test_unknown_field_message_lists_the_allowed_fields() -> None:
    with pytest.raises(EditRefused) as caught:
        parse_changes([{"op": "add", "line": "- a", "section": "Prefs"}])
    assert "section" in caught.value.message
    assert "op, line, heading" in caught.value.message


# --- properties ---------------------------------------------------------------------------

SAFE_CHARS = st.characters(
    codec="utf-8", exclude_categories=("Cc", "Cf", "Cs", "Co", "Zl", "Zp"), exclude_characters="\n\r"
)
LINE = st.text(SAFE_CHARS, min_size=1, max_size=30).filter(lambda s: s.strip() != "")
DOC_LINE = st.one_of(
    LINE,
    st.just(""),
    st.sampled_from(["## Prefs", "# Top", "### Deep", "```", "- item", "   "]),
)
DOCUMENT = st.builds(
    lambda lines, end: "\n".join(lines) + end,
    st.lists(DOC_LINE, max_size=15),
    st.sampled_from(["", "\n"]),
)


@settings(max_examples=300, deadline=None)
@given(DOCUMENT, st.lists(LINE, min_size=1, max_size=MAX_EDITS, unique=True))
def test_adding_then_removing_new_lines_returns_the_text(text: str, new: list[str]) -> None:
    existing = set(text.split("\n"))
    new = [line for line in new if line not in existing]
    if not new:
        return
    added = apply_memory_changes(text, [add(line) for line in new])
    restored = apply_memory_changes(added, [remove(line) for line in new])
    assert restored.rstrip("\n") == text.rstrip("\n")
    assert restored == text or restored == text + "\n"


@settings(max_examples=300, deadline=None)
@given(DOCUMENT, st.lists(LINE, min_size=1, max_size=MAX_EDITS, unique=True))
def test_adding_under_a_present_heading_then_removing_returns_the_text(text: str, new: list[str]) -> None:
    text = "## Prefs\n- a\n\n## Rest\n" + text.replace("## Prefs", "##")
    # A line that is itself a heading starts a new section, so later adds land before it: not this property.
    new = [line for line in new if line not in set(text.split("\n")) and not line.lstrip().startswith("#")]
    if not new:
        return
    added = apply_memory_changes(text, [add(line, heading="## Prefs") for line in new])
    assert added.startswith("## Prefs\n- a\n" + "".join(f"{line}\n" for line in new))
    assert apply_memory_changes(added, [remove(line) for line in new]) == text


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    if text.endswith("\n") or not text:
        lines.pop()
    return lines


def _without_one(lines: list[str], line: str) -> list[str]:
    at = lines.index(line)
    return lines[:at] + lines[at + 1 :]


@settings(max_examples=300, deadline=None)
@given(DOCUMENT, st.data())
def test_no_edit_changes_a_line_it_does_not_target(text: str, data: st.DataObject) -> None:
    before = _lines(text)
    unique = [line for line in before if before.count(line) == 1 and line.strip()]
    op = data.draw(st.sampled_from(["add", "add_heading", "replace", "remove"]))
    fresh = data.draw(LINE.filter(lambda s: s not in before and not s.lstrip().startswith("#")))
    if op in ("replace", "remove") and not unique:
        op = "add"
    target = data.draw(st.sampled_from(unique)) if op in ("replace", "remove") else None
    try:
        if op == "add":
            result = apply_memory_changes(text, [add(fresh)])
        elif op == "add_heading":
            result = apply_memory_changes(text, [add(fresh, heading="## Prefs")])
        elif op == "replace":
            assert target is not None
            result = apply_memory_changes(text, [replace(target, fresh)])
        else:
            assert target is not None
            result = apply_memory_changes(text, [remove(target)])
    except EditRefused as error:
        assert error.details["reason"] == "ambiguous_heading"
        return
    after = _lines(result)
    if op == "remove":
        assert after == _without_one(before, str(target))
    elif op == "replace":
        at = before.index(str(target))
        assert after == [*before[:at], fresh, *before[at + 1 :]]
    else:
        remaining = _without_one(after, fresh)
        if remaining != before:  # a new heading (and perhaps a blank line) went at the end
            assert op == "add_heading"
            assert remaining[: len(before)] == before
            assert remaining[len(before) :] in (["## Prefs"], ["", "## Prefs"])
