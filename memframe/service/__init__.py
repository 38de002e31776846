"""The authoritative state: SQLite, the contract's rules, no plaintext at rest."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from memframe.service.service import MemoryService

__all__ = ["MemoryService"]


def __getattr__(name: str) -> type[MemoryService]:
    # Imported on first use: `memframe.service.reads` (the quick read path of `history -p`) lives
    # in this package and must not pay for the whole service, or `typing`, when it is imported.
    if name == "MemoryService":
        from memframe.service.service import MemoryService

        return MemoryService
    raise AttributeError(name)
