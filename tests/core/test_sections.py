"""The section budget: bytes per top-level heading, and import's placement under a heading."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memframe.core.sections import PREAMBLE, place_under, sections
from memframe.core.types import MEMORY_RECALL_MAX_BYTES, utf8_size


def test_bytes_per_top_level_heading() -> None:
    text = "intro\n# Prefs\n- thé\n## Sub\n- x\n```\n# not a heading\n```\n# Work\n- rust\n"
    got = [(s.title, s.size) for s in sections(text)]
    assert [t for t, _ in got] == [PREAMBLE, "Prefs", "Work"]
    assert sum(size for _, size in got) == utf8_size(text)
    assert sections("# A\n")[0].share == 4 / MEMORY_RECALL_MAX_BYTES


def test_the_top_level_is_the_highest_level_used() -> None:
    assert [s.title for s in sections("\n## One\nx\n### in\n## Two\n")] == ["One", "Two"]
    assert sections("") == [] and [s.title for s in sections("plain\n")] == [PREAMBLE]


@given(st.lists(st.sampled_from(["# A\n", "## B\n", "x\n", "\n", "```\n", "é"]), max_size=10).map("".join))
def test_the_sections_add_up_to_the_whole(text: str) -> None:
    assert sum(s.size for s in sections(text)) == utf8_size(text)


def test_place_under_an_existing_heading_or_a_new_one() -> None:
    text = "# Prefs\n- tea\n\n# Work\n- rust\n"
    assert place_under(text, "- jazz", "Prefs") == "# Prefs\n- tea\n\n- jazz\n\n# Work\n- rust\n"
    assert place_under(text, "- go\n", "Work") == "# Prefs\n- tea\n\n# Work\n- rust\n\n- go\n"
    assert place_under(text, "- x\n", "Imported") == text + "\n# Imported\n\n- x\n"
    assert place_under("", "- x\n", None) == "- x\n"
    assert place_under("a", "- x\n", None) == "a\n\n- x\n"


def test_an_imported_files_headings_stay_inside_the_section() -> None:
    got = place_under("# Work\n- rust\n", "# Claude\n## Style\n- uv\n", "Work")
    assert got == "# Work\n- rust\n\n## Claude\n### Style\n- uv\n"
    assert [s.title for s in sections(got)] == ["Work"]
