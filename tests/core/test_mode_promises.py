"""M1: the three modes a person chooses, in the spellings a person types.

Written for a survivor of `make mutate` (issue 18): `Mode.parse` was only reached through the
CLI's tests, so its matching could be inverted with the core tests still green.
"""

from __future__ import annotations

import pytest

from memframe.core.types import Mode


@pytest.mark.parametrize(
    ("typed", "mode"),
    [
        ("off", Mode.OFF),
        ("Off", Mode.OFF),
        ("read-only", Mode.READ_ONLY),
        ("Read only", Mode.READ_ONLY),
        (" read_only ", Mode.READ_ONLY),
        ("AUTO", Mode.AUTO),
    ],
)
def test_M1_a_mode_is_read_in_the_spellings_a_person_types(typed: str, mode: Mode) -> None:
    assert Mode.parse(typed) is mode


@pytest.mark.parametrize("typed", ["", "readonly", "on", "automatic"])
def test_M1_anything_else_is_not_a_mode(typed: str) -> None:
    with pytest.raises(ValueError, match="choose off, read-only or auto"):
        Mode.parse(typed)
