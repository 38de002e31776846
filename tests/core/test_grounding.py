"""The grounding rule and the frame-residue rule, as properties a person can predict."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memframe.core.edits import MemoryChange, RefusalReason
from memframe.core.errors import EditRefused
from memframe.core.grounding import (
    STOP_WORDS,
    content_words,
    frame_residue,
    refuse_frame_residue,
    supports,
    unsupported_lines,
    words,
)
from memframe.core.recall import frame_markers, new_boundary, render_recall_block
from memframe.core.types import RecallStatus

#: Words of two or more letters that are not stop words: the stuff facts are made of.
content_word = st.text(string.ascii_lowercase, min_size=2, max_size=8).filter(lambda w: w not in STOP_WORDS)
separator = st.sampled_from([" ", ", ", ". ", " - ", "! ", ": ", " (", ") ", "'s "])
message_words = st.lists(content_word, min_size=1, max_size=8)


def spelled(ws: list[str], seps: list[str]) -> str:
    return "".join(w + s for w, s in zip(ws, seps, strict=False)) + " ".join(ws[len(seps) :])


@given(message_words, st.data())
def test_a_line_made_of_the_messages_words_is_supported(said: list[str], data: st.DataObject) -> None:
    message = " ".join(said)
    picked = data.draw(st.lists(st.sampled_from(said), min_size=1, max_size=6))
    stop = data.draw(st.lists(st.sampled_from(sorted(STOP_WORDS)), max_size=3))
    seps = data.draw(st.lists(separator, max_size=len(picked) + len(stop)))
    line = "- " + spelled(picked + stop, seps)
    assert supports(message, line)


@given(message_words, content_word)
def test_one_word_the_person_did_not_say_is_enough_to_refuse(said: list[str], extra: str) -> None:
    if extra in said:
        return
    assert not supports(" ".join(said), " ".join([*said, extra]))


@given(message_words, st.sampled_from([str.upper, str.title, str.lower]), separator)
def test_case_and_punctuation_do_not_matter(said: list[str], case: object, sep: str) -> None:
    line = sep.join(said)
    assert supports(case(" ".join(said)), line)  # type: ignore[operator]
    assert supports(" ".join(said), case(line) + "!")  # type: ignore[operator]


@given(st.lists(st.sampled_from(sorted(STOP_WORDS)), max_size=6), st.text(string.punctuation + " ", max_size=10))
def test_a_line_of_stop_words_and_punctuation_has_nothing_to_ground_it(stop: list[str], punctuation: str) -> None:
    line = " ".join(stop) + punctuation
    assert content_words(line) == [] and not supports(" ".join(stop) + punctuation, line)


@given(st.integers(0, 10_000), st.integers(0, 10_000))
def test_a_number_must_be_the_persons_number(said: int, written: int) -> None:
    assert supports(f"I have {said} cats", f"User has {written} cats") == (said == written)


def test_a_negation_is_never_a_stop_word() -> None:
    assert not supports("I like tea", "The user does not like tea")
    assert not supports("I like tea", "The user never drinks tea")
    assert supports("I do not like tea", "User does not like tea")


def test_there_is_no_stemming() -> None:
    assert not supports("I have cats", "User has a cat")


def test_compatibility_forms_read_as_their_plain_letters() -> None:
    assert words("Ｍｉｓｏ ＭＩＳＯ") == ["miso", "miso"]
    assert supports("my cat is Ｍｉｓｏ", "cat: Miso")


def test_an_unspaced_script_is_cut_where_the_script_changes_and_found_anywhere() -> None:
    assert words("猫はミソ") == ["猫", "は", "ミソ"]
    assert supports("私の猫の名前はミソです", "猫の名前はミソ")
    assert not supports("私の猫の名前はミソです", "猫はミソではない")  # an invented negation
    assert not supports("私の猫の名前はミソです", "犬はミソ")


def test_only_written_lines_are_judged() -> None:
    changes = [
        MemoryChange("add", "- cat Miso", heading="Pets and animals"),
        MemoryChange("replace", "- anything at all", new_line="- dog Rex"),
        MemoryChange("remove", "- whatever was there"),
    ]
    [unsupported] = unsupported_lines("my cat is Miso", changes)
    assert (unsupported.index, unsupported.line) == (2, "- dog Rex")


# --- frame residue ---------------------------------------------------------------------------


def test_every_line_of_a_provided_recall_block_frame_is_residue() -> None:
    block = render_recall_block(
        status=RecallStatus.PROVIDED,
        text="- tea\n",
        revision=3,
        workspace="ws",
        bound_to="adm_0123456789abcdef01234567/0",
    )
    assert block is not None
    first, last = block.splitlines()[0], block.splitlines()[-1]
    for line in (first, last, first.split(" ")[-1], "call=adm_0123456789abcdef01234567/0"):
        assert frame_residue([MemoryChange("add", line)]) == 1, line


@given(st.sampled_from(["<", "[", "&lt;", "＜", "<\u200b"]), st.sampled_from(["", "/", " / "]), st.booleans())
def test_markers_in_any_spelling_neutralize_reads_are_residue(opening: str, slash: str, upper: bool) -> None:
    name = "WORKSPACE-MEMORY" if upper else "workspace-memory"
    line = f"- {opening}{slash}{name}]"
    assert frame_residue([MemoryChange("add", line)]) == 1


@given(st.text(alphabet=string.ascii_letters + " .,-'", min_size=1, max_size=80))
def test_ordinary_prose_is_never_residue(line: str) -> None:
    assert frame_residue([MemoryChange("add", line), MemoryChange("replace", line, new_line=line)]) is None


def test_a_boundary_value_is_residue_but_a_longer_hex_string_is_not() -> None:
    assert frame_residue([MemoryChange("add", f"- {new_boundary()}")]) == 1
    _, closing = frame_markers("revision=1", new_boundary())
    assert frame_residue([MemoryChange("add", closing)]) == 1
    assert frame_residue([MemoryChange("add", "- commit " + "ab" * 20)]) is None  # a git commit id


def test_residue_is_judged_where_it_would_be_written() -> None:
    marker = "[/workspace-memory]"
    assert frame_residue([MemoryChange("add", "- tea", heading=marker)]) == 1
    assert frame_residue([MemoryChange("add", "- tea"), MemoryChange("replace", "- a", new_line=marker)]) == 2
    assert frame_residue([MemoryChange("remove", marker)]) is None  # removing residue is how it leaves
    with pytest.raises(EditRefused) as refused:
        refuse_frame_residue([MemoryChange("add", marker)])
    assert refused.value.details == {"reason": RefusalReason.FRAME_RESIDUE, "index": 1}
