"""The counts and runs a receipt names read as a person says them."""

from memframe.core.wording import many, versions


def test_one_of_a_kind_is_singular_and_more_are_plural() -> None:
    assert many(1, "version") == "1 version"
    assert many(0, "proposal") == "0 proposals"
    assert many(10_000, "message") == "10,000 messages"


def test_a_run_of_one_version_is_named_alone() -> None:
    assert versions(4, 4) == "version 4"
    assert versions(1, 3) == "versions 1–3"
