"""The authoritative state: SQLite, the contract's rules, no plaintext at rest."""

from __future__ import annotations

from memframe.service.service import MemoryService

__all__ = ["MemoryService"]
