"""Several revisions read at once (what `history -p` uses), on every backend kind."""

from __future__ import annotations

import pytest

from memframe.core.errors import NotFound
from tests.conftest import World


def test_read_revisions_returns_each_asked_revision_decrypted(world: World) -> None:
    backend = world.client()
    first = backend.save("one\n", 0).version
    second = backend.save("two\n", first).version
    assert backend.read_revisions([second, first]) == {second: "two\n", first: "one\n"}
    assert backend.read_revisions([]) == {}


def test_read_revisions_refuses_a_missing_revision_whole(world: World) -> None:
    backend = world.client()
    first = backend.save("one\n", 0).version
    with pytest.raises(NotFound):
        backend.read_revisions([first, first + 5])
    with pytest.raises(NotFound):
        backend.read_revisions([0])
