"""The authoritative memory service: the contract enforced over one SQLite file.

Both the local backend (in-process) and the HTTP API call this class; neither
adds rules of its own. Every method takes the acting user and checks
membership inside the same transaction that reads or writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from memframe.core.errors import InvalidInput, MemframeError
from memframe.core.namespace import refuse_lookalike
from memframe.core.types import (
    MEMORY_PATH,
    Author,
    Mode,
    Operation,
    Policy,
    StoredVersion,
    VersionInfo,
)
from memframe.keysessions.store import (
    DEFAULT_IDLE_SECONDS,
    DEFAULT_LIFETIME_SECONDS,
    KeySessions,
    KeySessionStore,
)
from memframe.sealing import SEALED_EMPTY_BYTES, is_sealed_empty
from memframe.service import files, key_checks
from memframe.service.accounts import Accounts, require_member
from memframe.service.db import Clock
from memframe.service.engines import open_database
from memframe.service.policy import ADVANCE_CLEAR_GENERATION, read_policy, write_mode

if TYPE_CHECKING:
    import sqlite3

    from memframe.core.rotation import Destroyed, Rotation, RotationPart, RotationPlan, SealedRecords
    from memframe.service.assistant import AssistantService


def check_file_path(path: str) -> str:
    """People's file routes take plain relative paths; one spelling per file."""
    if not path or "\x00" in path or len(path.encode("utf-8")) > 1024:
        raise InvalidInput("A file path must be 1 to 1024 bytes with no NUL character.")
    parts = [p for p in path.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        raise InvalidInput(f"{path!r} is not a plain relative file path.")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in path):
        raise InvalidInput("A file path cannot contain control characters.")
    return "/".join(parts)


class MemoryService:
    """Files, versions, policy and Clear: the part of the contract people write through."""

    def __init__(
        self,
        db_path: str | Path,
        *,
        clock: Clock = time.time,
        key_session_idle: float = DEFAULT_IDLE_SECONDS,
        key_session_lifetime: float = DEFAULT_LIFETIME_SECONDS,
        key_sessions: KeySessionStore | None = None,
        grounded_capture: bool = False,
    ) -> None:
        """`key_session_idle` and `key_session_lifetime` (seconds) bound how long a key stays in RAM:
        unused for the first, or at all past the second (`memframe serve --key-session-idle/-lifetime`).

        `key_sessions` is where keys live when not in this process: a `RemoteKeySessions` that asks the
        one key-session service several workers share (which then holds the idle time and lifetime).

        `grounded_capture` (`memframe serve --grounded-capture`, or the config file's `grounded_capture`
        for a local workspace) makes an automatic edit the person's message does not support a proposal."""
        self.db = open_database(db_path, clock=clock)
        if key_sessions is None:
            key_sessions = KeySessions(clock, idle_seconds=key_session_idle, lifetime_seconds=key_session_lifetime)
        self.key_sessions: KeySessionStore = key_sessions
        self.accounts = Accounts(self.db, self.key_sessions)
        self.grounded_capture = grounded_capture

    @cached_property
    def assistant(self) -> AssistantService:
        """The Assistant's side (consent, key sessions, admissions, recall, the fence), built on
        first use: the frame and the file commands never import it."""
        from memframe.service.assistant import AssistantService

        return AssistantService(self.db, self.accounts, self.key_sessions, grounded_capture=self.grounded_capture)

    def close(self) -> None:
        self.db.close()

    # --- files ---------------------------------------------------------------------------

    def get_file(self, user: str, workspace_id: str, path: str) -> StoredVersion | None:
        path = check_file_path(path)
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            return files.get_current(conn, workspace_id, path)

    def put_file(
        self,
        user: str,
        workspace_id: str,
        path: str,
        ciphertext: bytes,
        base_version: int,
        *,
        clear: bool = False,
        restored_from: int | None = None,
        revive: bool = False,
        source_note: bytes | None = None,
    ) -> VersionInfo:
        """One direct write against `base_version`; a Clear also advances the generation.

        `source_note` is a Save's sealed source note (the file it was imported from), stored as is.

        Saves, Clears and Undos share their transaction and fsync with whatever other writes wait
        at the writer at that moment (group commit), with no change to what each one means: each is
        checked against its own base and commits or fails alone, and returns only once committed.

        The Clear's empty revision and its generation advance commit in one
        transaction: the advancing statement is conditioned on this write's own
        version row, so a Clear that loses the race moves nothing.
        """
        batch = self._put_file_batch(
            user,
            workspace_id,
            path,
            ciphertext,
            base_version,
            clear=clear,
            restored_from=restored_from,
            revive=revive,
            source_note=source_note,
        )
        return self.db.write_together(batch)

    async def put_file_async(
        self,
        user: str,
        workspace_id: str,
        path: str,
        ciphertext: bytes,
        base_version: int,
        *,
        clear: bool = False,
        restored_from: int | None = None,
        revive: bool = False,
        source_note: bytes | None = None,
    ) -> VersionInfo:
        """`put_file` for a caller on an event loop (the HTTP Save): the same checks, here, and the
        same batch in the same group, awaited without a thread of its own (`Database.write_together_async`)."""
        batch = self._put_file_batch(
            user,
            workspace_id,
            path,
            ciphertext,
            base_version,
            clear=clear,
            restored_from=restored_from,
            revive=revive,
            source_note=source_note,
        )
        return await self.db.write_together_async(batch)

    def _put_file_batch(
        self,
        user: str,
        workspace_id: str,
        path: str,
        ciphertext: bytes,
        base_version: int,
        *,
        clear: bool,
        restored_from: int | None,
        revive: bool,
        source_note: bytes | None = None,
    ) -> Callable[[sqlite3.Connection], VersionInfo]:
        """A direct write's checks (each refusal raised here, before anything queues) and its batch."""
        path = check_file_path(path)
        if clear and path != MEMORY_PATH:
            raise InvalidInput("Only the memory document can be cleared.")
        files.check_well_formed(ciphertext)
        if clear and not is_sealed_empty(ciphertext):
            raise InvalidInput(
                f"A Clear writes exactly a sealed empty revision ({SEALED_EMPTY_BYTES} bytes); nothing was written."
            )
        if clear and restored_from is not None:
            raise InvalidInput("A Clear cannot also restore a revision.")
        if source_note is not None:
            if clear or restored_from is not None:
                raise InvalidInput("Only a Save carries a source note; nothing was written.")
            files.check_source_note(source_note)
        operation = Operation.CLEAR if clear else Operation.UNDO if restored_from is not None else Operation.SAVE

        def batch(conn: sqlite3.Connection) -> VersionInfo:
            # Run by whichever caller commits the group (`Database.write_together`), in its own
            # savepoint: the base is checked here, inside the shared transaction, so a second Save
            # on the same base in the same group is the conflict it is and rolls back alone.
            require_member(conn, user, workspace_id)
            version = files.check_base(conn, workspace_id, path, base_version, revive=revive)
            if version == 1:  # a new path may not look like another one; existing odd paths stay usable
                refuse_lookalike(path, combining_marks=False)
            if restored_from is not None:
                files.check_restorable(conn, workspace_id, path, restored_from)
            info = files.insert_version(
                conn,
                workspace_id=workspace_id,
                path=path,
                version=version,
                now=self.db.clock(),
                author=Author.PERSON,
                actor=user,
                operation=operation,
                ciphertext=ciphertext,
                restored_from=restored_from,
                source_note=source_note,
            )
            if clear:
                conn.execute(ADVANCE_CLEAR_GENERATION, {"ws": workspace_id, "path": path, "version": version})
            return info

        return batch

    def compact_version(
        self, user: str, workspace_id: str, path: str, version: int, expected_hash: str, ciphertext: bytes
    ) -> bool:
        """Replace an old version's ciphertext with a smaller re-seal of the same text (made by a key
        holder: `memframe admin compact`), in a transaction of its own; see `files.replace_ciphertext`."""
        path = check_file_path(path)
        with self.db.write() as conn:
            require_member(conn, user, workspace_id)
            return files.replace_ciphertext(conn, workspace_id, path, version, expected_hash, ciphertext)

    def get_key_check(self, user: str, workspace_id: str) -> str | None:
        """The workspace's key check, or None if its owner has not written one yet."""
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            return key_checks.stored(conn, workspace_id)

    def set_key_check(self, user: str, workspace_id: str, key_check: str) -> str:
        """Only the owner writes the key check, once; the same value again is a no-op (`key_checks`)."""
        with self.db.write() as conn:
            return key_checks.set_once(conn, user, workspace_id, key_check, self.db.clock())

    def reset_key_check(self, workspace_id: str) -> bool:
        """An admin's repair: remove the key check, so the owner's next init or key session sets it anew."""
        with self.db.write() as conn:
            return key_checks.reset(conn, workspace_id)

    # --- key rotation (forgetting) ------------------------------------------------------------
    # (The rotation modules are imported by these methods: the frame's first paint calls none of them.)

    def sealed_records(self, user: str, workspace_id: str) -> SealedRecords:
        """What a rotation re-seals besides file versions (`memframe.service.rotation`)."""
        from memframe.service import rotation

        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            return rotation.sealed_records(conn, workspace_id)

    def latest_rotation(self, user: str, workspace_id: str) -> Rotation | None:
        """The newest rotation of the workspace's key (when, by whom, its sealed record), if any."""
        from memframe.service import rotation

        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            return rotation.latest_rotation(conn, workspace_id)

    def start_rotation_upload(self, user: str, workspace_id: str) -> str:
        """A staged upload for a rotation over one request's bound (`rotation_uploads`), owner only."""
        from memframe.service import rotation_uploads

        with self.db.write() as conn:
            require_member(conn, user, workspace_id)
            return rotation_uploads.start(conn, workspace_id, user, self.db.clock())

    def stage_rotation_part(self, user: str, workspace_id: str, upload: str, part: RotationPart) -> int:
        """Stage one part of an upload; nothing is read from it until the rotation naming it."""
        from memframe.service import rotation_uploads

        with self.db.write() as conn:
            require_member(conn, user, workspace_id)
            return rotation_uploads.add(conn, workspace_id, user, upload, part)

    def rotate_key(self, user: str, workspace_id: str, plan: RotationPlan, upload: str | None = None) -> Destroyed:
        """Swap in a rotation in one transaction (`rotation.rotate`), with the parts `upload` staged,
        forget the revoked sessions' keys, then take the old bytes off the disk (`Database.scrub`)."""
        from memframe.service import rotation, rotation_uploads

        live = self._live_sessions(user, workspace_id)  # asked before the batch: the store may be a service
        try:
            with self.db.destroying(), self.db.write() as conn:
                require_member(conn, user, workspace_id)
                if upload is not None:
                    plan = rotation_uploads.take(conn, workspace_id, user, upload, plan)
                done = rotation.rotate(conn, workspace_id, user, self.db.clock(), plan, live)
        except MemframeError:
            if upload is not None:  # made against a state that is gone: a new rotation re-seals afresh
                with contextlib.suppress(MemframeError), self.db.write() as conn:
                    rotation_uploads.drop(conn, workspace_id, user, upload)
            raise
        for session in live:
            self.key_sessions.forget(session)
        # A session opened with the old key while the rotation ran (it read the old key check before
        # the swap) is revoked now; any later one is refused by the new key check.
        late = self._live_sessions(user, workspace_id) - live
        if late:
            with self.db.write() as conn:
                rotation.revoke(conn, workspace_id, self.db.clock(), late)
            for session in late:
                self.key_sessions.forget(session)
        return dataclasses.replace(done, disk=self.db.scrub())

    def _live_sessions(self, user: str, workspace_id: str) -> set[str]:
        """The key sessions the store holds for the workspace, every member's."""
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            rows = conn.execute("SELECT user_id FROM memberships WHERE workspace_id = ?", (workspace_id,)).fetchall()
        return {sid for (member,) in rows for sid, _ in self.key_sessions.sessions_of(str(member), workspace_id)}

    def delete_file(self, user: str, workspace_id: str, path: str, base_version: int) -> VersionInfo:
        """A delete is a tombstone version: history stays, and plain writes do not revive it."""
        path = check_file_path(path)

        def batch(conn: sqlite3.Connection) -> VersionInfo:
            require_member(conn, user, workspace_id)
            version = files.check_base(conn, workspace_id, path, base_version)
            if version == 1:
                raise InvalidInput("There is nothing to delete: the file was never created.")
            return files.insert_version(
                conn,
                workspace_id=workspace_id,
                path=path,
                version=version,
                now=self.db.clock(),
                author=Author.PERSON,
                actor=user,
                operation=Operation.DELETE,
                ciphertext=None,
            )

        return self.db.write_together(batch)

    def list_versions(
        self, user: str, workspace_id: str, path: str, *, limit: int = 50, before: int | None = None
    ) -> list[VersionInfo]:
        path = check_file_path(path)
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            return files.list_versions(conn, workspace_id, path, limit=limit, before=before)

    def get_version(self, user: str, workspace_id: str, path: str, version: int) -> StoredVersion:
        path = check_file_path(path)
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            return files.get_version(conn, workspace_id, path, version)

    def get_versions(self, user: str, workspace_id: str, path: str, versions: Sequence[int]) -> list[StoredVersion]:
        """Several revisions in one read transaction (`history -p` reads a thousand at once)."""
        path = check_file_path(path)
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            return files.get_versions(conn, workspace_id, path, versions)

    def list_files(self, user: str, workspace_id: str) -> list[tuple[str, int, bool]]:
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            return files.list_files(conn, workspace_id)

    # --- policy --------------------------------------------------------------------------

    def get_policy(self, user: str, workspace_id: str) -> Policy:
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            return read_policy(conn, workspace_id)

    def set_policy(self, user: str, workspace_id: str, mode: Mode, expected_revision: int) -> Policy:
        """Needs only workspace membership: it never enables AI, opens a key session or trusts skills."""
        with self.db.write() as conn:
            require_member(conn, user, workspace_id)
            return write_mode(conn, workspace_id, mode, expected_revision)
