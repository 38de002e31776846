"""X-Memory-State: what a client reports about its own Saves with each Assistant send.

The values, from DESIGN.md (an unsaved editor draft is never reported):

    none                  this client has no Save of its own, and this machine has seen no version
    saved; version=N      N is acknowledged: its last Save, or the newest version this machine has
                          seen, whichever is newer (a server showing an older one was rolled back)
    pending               a Save is still in flight after the wait
    conflict; version=N   its last Save was refused; the server holds N

The client renders it (memframe.backend.save_state); the server parses it at ingress, and recall
withholds the memory as `stale` when it holds an older version than the one acknowledged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADER_RE = re.compile(r"^\s*(none|pending|saved|conflict)\s*(?:;\s*version\s*=\s*(\d+)\s*)?$")


@dataclass(frozen=True)
class MemoryState:
    """One reportable state; `version` is set for saved and conflict."""

    kind: str = "none"
    version: int | None = None

    def header(self) -> str:
        return self.kind if self.version is None else f"{self.kind}; version={self.version}"

    @classmethod
    def parse(cls, value: str | None) -> MemoryState | None:
        """Read a client's header on the server; None if absent or malformed."""
        if value is None:
            return None
        match = _HEADER_RE.match(value)
        if not match:
            return None
        kind, version = match.group(1), match.group(2)
        if (kind in ("saved", "conflict")) != (version is not None):
            return None
        return cls(kind, None if version is None else int(version))
