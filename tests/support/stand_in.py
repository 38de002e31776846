"""Stand-ins for sealed texts, for tests of a server that cannot read them and must not try."""

from __future__ import annotations

import struct

from memframe import sealing


def stand_in(size: int = 5, *, fill: int | None = None) -> bytes:
    """A well-formed v2 sealed text of a `size`-byte text: a real header, an unreadable body."""
    header = sealing.MAGIC + struct.pack(">II", 1, size) + sealing.NO_PREVIOUS
    body_length = sealing.SEALED_EMPTY_BYTES - sealing.HEADER_BYTES + size
    return header + bytes([(size if fill is None else fill) % 251]) * body_length
