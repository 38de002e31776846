"""Plaintext over any MemoryStore: sealing on the client, and save-state tracking.

This is the only place a human write's text is encrypted, whichever backend
is used, so local and remote cannot drift apart in what they store.
"""

from __future__ import annotations

from memframe.backend.base import MemoryStore
from memframe.backend.save_state import SaveState
from memframe.core.errors import NotFound
from memframe.core.types import MEMORY_PATH, MemoryDocument, Mode, Operation, Policy, VersionInfo
from memframe.crypto import open_sealed, seal


class SealedBackend:
    """The Backend every frame and CLI command uses; see `memframe.backend.base.Backend`."""

    def __init__(self, store: MemoryStore, key: bytes, *, save_state: SaveState | None = None) -> None:
        self.store = store
        self._key = key
        self.save_state = save_state or SaveState()

    @property
    def workspace_id(self) -> str:
        return self.store.workspace_id

    @property
    def location(self) -> str:
        return self.store.location

    def __repr__(self) -> str:  # never shows the key
        return f"<{type(self).__name__} {self.workspace_id} at {self.location}>"

    # --- sealing -------------------------------------------------------------------------

    def _seal(self, text: str) -> bytes:
        return seal(self._key, text, workspace_id=self.workspace_id, path=MEMORY_PATH)

    def _open(self, blob: bytes | None) -> str:
        if blob is None:
            return ""
        return open_sealed(self._key, blob, workspace_id=self.workspace_id, path=MEMORY_PATH)

    # --- reads ---------------------------------------------------------------------------

    def load(self) -> MemoryDocument:
        head = self.store.get_file(MEMORY_PATH)
        if head is None:
            return MemoryDocument("", 0)
        deleted = head.info.operation is Operation.DELETE
        return MemoryDocument(self._open(head.ciphertext), head.info.version, deleted, head.info)

    def history(self, *, limit: int = 50, before: int | None = None) -> list[VersionInfo]:
        return self.store.list_versions(MEMORY_PATH, limit=limit, before=before)

    def read_revision(self, version: int) -> str:
        if version < 1:
            raise NotFound(f"There is no revision {version}.")
        return self._open(self.store.get_version(MEMORY_PATH, version).ciphertext)

    def get_policy(self) -> Policy:
        return self.store.get_policy()

    # --- writes: each one direct upload, tracked for X-Memory-State -----------------------

    def _write(self, text: str, base_version: int, **kwargs: object) -> VersionInfo:
        blob = self._seal(text)
        with self.save_state.saving():
            info = self.store.put_file(MEMORY_PATH, blob, base_version, **kwargs)  # type: ignore[arg-type]
            self.save_state.acknowledge(info.version)
        return info

    def save(self, text: str, base_version: int, *, revive: bool = False) -> VersionInfo:
        return self._write(text, base_version, revive=revive)

    def clear(self, base_version: int) -> VersionInfo:
        return self._write("", base_version, clear=True)

    def undo(self, revision: int, base_version: int) -> VersionInfo:
        # Decrypting first proves the revision is ours and readable before anything is written.
        text = self.read_revision(revision)
        return self._write(text, base_version, restored_from=revision)

    def set_policy(self, mode: Mode, expected_revision: int) -> Policy:
        return self.store.set_policy(mode, expected_revision)

    def close(self) -> None:
        self.store.close()
