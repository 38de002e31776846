"""D0 and S1 on the records a frame holds: a never-created memory, and the 8192-byte bound.

Written for survivors of `make mutate` (issue 18): the size bound was tested where recall applies
it, not on the document a frame shows (whose `oversized` drives the frame's warning), and a
never-created memory was never checked to be neither deleted nor versioned.
"""

from __future__ import annotations

from memframe import sealing
from memframe.backend.local import LocalBackend
from memframe.core.types import MemoryDocument, MemoryHead, Policy
from memframe.service import MemoryService


def test_D0_a_never_created_memory_loads_empty_at_version_0_and_not_deleted(service: MemoryService) -> None:
    doc = LocalBackend(service, "ws", sealing.new_key()).load()
    assert (doc.text, doc.version, doc.deleted, doc.info) == ("", 0, False, None)
    assert MemoryHead(None, Policy()).version == 0


def test_S1_a_document_of_8192_utf8_bytes_is_within_the_bound_and_8193_is_over() -> None:
    assert not MemoryDocument("x" * 8192, 1).oversized
    assert MemoryDocument("x" * 8193, 1).oversized
    assert MemoryDocument("é" * 4096, 1).size == 8192 and not MemoryDocument("é" * 4096, 1).oversized
    assert MemoryDocument("é" * 4096 + "x", 1).oversized  # bytes, not characters
