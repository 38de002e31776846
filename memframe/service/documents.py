"""The workspace's ordinary notes, as automation (the Assistant, MCP clients) reaches them.

Notes are encrypted and versioned exactly like the memory. Every automation
route here passes each path — the source and the target of a move too —
through `validate_document_path`, which refuses every spelling of the reserved
memory namespace with MEMORY_NAMESPACE_RESERVED: the memory route is the only
automatic way in. Writes also refuse lookalike names (invisible characters,
bidi controls, combining marks: `validate_written_path`). Listing and search
never show the namespace.
"""

from __future__ import annotations

import sqlite3

from memframe import sealing
from memframe.core.errors import DecryptionFailed, InvalidInput, NotFound
from memframe.core.namespace import is_reserved, validate_document_path, validate_written_path
from memframe.core.types import Author, DocumentHit, Operation, VersionInfo
from memframe.service import files
from memframe.service.admissions import AssistantBase

SEARCH_LIMIT = 20
#: The snippet of a note that could not be decrypted: named, so the turn knows it was not searched.
UNREADABLE_NOTE = "(this note could not be decrypted, so the search skipped it)"


class DocumentsMixin(AssistantBase):
    def _key_for(self, workspace_id: str, credential: str) -> bytes:
        """Automation reaches plaintext only through the turn's key session, in RAM."""
        with self.db.read() as conn:
            admission = self._live_admission_for(conn, workspace_id, credential)
        return self.key_sessions.resolve(admission.key_session_id, workspace_id)

    def _open(self, key: bytes, workspace_id: str, path: str, blob: bytes | None, version: int) -> str:
        """A note's version, opened at its own version (a copied row fails). The service keeps no
        record of what it has seen, so it admits an old-format text; clients refuse one after a
        document's chain began, and `memframe verify` walks the chain. A note a person saved as a
        delta opens against the versions before it, read as it needs them."""
        if blob is None:
            return ""
        fetch = files.keyframe_runs(self.db.read, workspace_id, path)
        return sealing.open_sealed(
            key, blob, workspace_id=workspace_id, path=path, version=version, legacy=True, fetch=fetch
        )

    def list_documents(self, workspace_id: str, credential: str) -> list[tuple[str, int]]:
        """Live notes only; the memory namespace is never listed."""
        with self.db.read() as conn:
            self._live_admission_for(conn, workspace_id, credential)
            rows = files.list_files(conn, workspace_id)
        return [(path, version) for path, version, deleted in rows if not deleted and not is_reserved(path)]

    def search_documents(self, workspace_id: str, credential: str, query: str) -> list[DocumentHit]:
        """Case-insensitive substring search over decrypted notes, never inside the namespace."""
        needle = query.strip().casefold()
        if not needle:
            raise InvalidInput("Search for at least one character.")
        key = self._key_for(workspace_id, credential)
        hits: list[DocumentHit] = []
        for path, version in self.list_documents(workspace_id, credential):
            with self.db.read() as conn:
                stored = files.get_version(conn, workspace_id, path, version)
            try:
                text = self._open(key, workspace_id, path, stored.ciphertext, version)
            except DecryptionFailed:  # one damaged note must not make the whole search fail
                hits.append(DocumentHit(path, version, UNREADABLE_NOTE))
                continue
            at = text.casefold().find(needle)
            if at >= 0:
                line_start = text.rfind("\n", 0, at) + 1
                line_end = text.find("\n", at)
                hits.append(DocumentHit(path, version, text[line_start : line_end if line_end >= 0 else None][:200]))
                if len(hits) >= SEARCH_LIMIT:
                    break
        return hits

    def read_document(self, workspace_id: str, credential: str, path: str) -> tuple[int, str]:
        path = validate_document_path(path)
        key = self._key_for(workspace_id, credential)
        with self.db.read() as conn:
            head = files.get_current(conn, workspace_id, path)
        if head is None or head.info.operation is Operation.DELETE:
            raise NotFound(f"There is no note {path!r}.")
        return head.info.version, self._open(key, workspace_id, path, head.ciphertext, head.info.version)

    def put_document(self, workspace_id: str, credential: str, path: str, text: str, base_version: int) -> VersionInfo:
        """Create (base 0) or update a note against its exact current version."""
        path = validate_written_path(path)
        key = self._key_for(workspace_id, credential)

        def batch(conn: sqlite3.Connection) -> VersionInfo:  # group commit: see `Database.write_together`
            version = files.check_base(conn, workspace_id, path, base_version)
            head = files.get_current(conn, workspace_id, path)
            previous = None if head is None else head.ciphertext
            blob = sealing.seal(key, text, workspace_id=workspace_id, path=path, version=version, previous=previous)
            return self._insert(conn, workspace_id, path, version, Operation.SAVE, blob)

        return self.db.write_together(batch)

    def delete_document(self, workspace_id: str, credential: str, path: str, base_version: int) -> VersionInfo:
        path = validate_written_path(path)
        self._key_for(workspace_id, credential)
        with self.db.write() as conn:
            version = files.check_base(conn, workspace_id, path, base_version)
            if version == 1:
                raise NotFound(f"There is no note {path!r}.")
            return self._insert(conn, workspace_id, path, version, Operation.DELETE, None)

    def move_document(
        self, workspace_id: str, credential: str, source: str, target: str, base_version: int
    ) -> VersionInfo:
        """Copy to a new path (create-only) and leave a tombstone behind, in one transaction."""
        source, target = validate_written_path(source), validate_written_path(target)
        if source == target:
            raise InvalidInput("A note cannot be moved onto itself.")
        key = self._key_for(workspace_id, credential)
        with self.db.write() as conn:
            head = files.get_current(conn, workspace_id, source)
            if head is None or head.info.operation is Operation.DELETE:
                raise NotFound(f"There is no note {source!r}.")
            version = files.check_base(conn, workspace_id, source, base_version)
            text = self._open(key, workspace_id, source, head.ciphertext, head.info.version)
            blob = sealing.seal(key, text, workspace_id=workspace_id, path=target, version=1)
            target_version = files.check_base(conn, workspace_id, target, 0)
            self._insert(conn, workspace_id, source, version, Operation.DELETE, None)
            return self._insert(conn, workspace_id, target, target_version, Operation.SAVE, blob)

    def restore_document(self, workspace_id: str, credential: str, path: str, base_version: int) -> VersionInfo:
        """Bring a deleted note back with the text it had before it was deleted."""
        path = validate_written_path(path)
        key = self._key_for(workspace_id, credential)

        def batch(conn: sqlite3.Connection) -> VersionInfo:  # group commit: see `Database.write_together`
            version = files.check_base(conn, workspace_id, path, base_version, revive=True)
            last = files.get_version(conn, workspace_id, path, base_version) if base_version else None
            if last is None or last.info.operation is not Operation.DELETE:
                raise InvalidInput(f"The note {path!r} is not deleted; there is nothing to restore.")
            previous = next(
                (
                    files.get_version(conn, workspace_id, path, info.version)
                    for info in files.list_versions(conn, workspace_id, path, limit=1000, before=base_version)
                    if info.operation is not Operation.DELETE
                ),
                None,
            )
            if previous is None:
                raise NotFound(f"The note {path!r} has no earlier text to restore.")
            text = self._open(key, workspace_id, path, previous.ciphertext, previous.info.version)
            known = sealing.header(previous.ciphertext)  # the chain start carries across the deletion
            blob = sealing.seal(
                key,
                text,
                workspace_id=workspace_id,
                path=path,
                version=version,
                previous=None,
                since=None if known is None else known.since,
            )
            return self._insert(
                conn, workspace_id, path, version, Operation.UNDO, blob, restored_from=previous.info.version
            )

        return self.db.write_together(batch)

    def _insert(
        self,
        conn: sqlite3.Connection,
        workspace_id: str,
        path: str,
        version: int,
        operation: Operation,
        blob: bytes | None,
        restored_from: int | None = None,
    ) -> VersionInfo:
        return files.insert_version(
            conn,
            workspace_id=workspace_id,
            path=path,
            version=version,
            now=self.db.clock(),
            author=Author.ASSISTANT,
            actor="assistant",
            operation=operation,
            ciphertext=blob,
            restored_from=restored_from,
        )
