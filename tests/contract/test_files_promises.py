"""D3: Changes reads a document's history from its own versions — every one asked, however many.

Written for survivors of `make mutate` (issue 18): `get_versions` reads in chunks of 500 (under
SQLite's limit on bound parameters) and no test asked for more than a few revisions at once, so
a chunk that skipped or dropped a revision went unnoticed.
"""

from __future__ import annotations

import pytest

from memframe import sealing
from memframe.core.errors import NotFound
from memframe.core.types import MEMORY_PATH, Author, Operation
from memframe.service import MemoryService, files
from memframe.service.accounts import LOCAL_USER


def _versions(service: MemoryService, count: int) -> None:
    """`count` revisions of the memory, written straight into one transaction (no text is opened)."""
    blob = sealing.seal(sealing.new_key(), "x\n", workspace_id="ws", path=MEMORY_PATH, version=1)
    with service.db.write() as conn:
        for version in range(1, count + 1):
            files.insert_version(
                conn,
                workspace_id="ws",
                path=MEMORY_PATH,
                version=version,
                now=float(version),
                author=Author.PERSON,
                actor=LOCAL_USER,
                operation=Operation.SAVE,
                ciphertext=blob,
            )


def test_D3_a_thousand_and_one_revisions_read_at_once_come_back_every_one_in_the_order_asked(
    service: MemoryService,
) -> None:
    _versions(service, 1001)
    asked = [*range(1001, 0, -1), 500, 501]
    read = service.get_versions(LOCAL_USER, "ws", MEMORY_PATH, asked)
    assert [v.info.version for v in read] == asked
    assert all(v.ciphertext for v in read)


def test_D3_a_missing_revision_among_many_refuses_the_read_whole(service: MemoryService) -> None:
    _versions(service, 1001)
    with pytest.raises(NotFound, match="1002"):
        service.get_versions(LOCAL_USER, "ws", MEMORY_PATH, [*range(1, 1003)])
