"""The authoritative state: SQLite, the contract's rules, no plaintext at rest."""

from memframe.service.service import MemoryService

__all__ = ["MemoryService"]
