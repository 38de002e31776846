"""Plaintext over any MemoryStore: sealing on the client, and save-state tracking.

This is the only place a human write's text is encrypted, whichever backend is used, so local
and remote cannot drift apart in what they store. It is the whole `Backend` protocol over a store,
one short method per promise; walking a chain (`verify`), re-sealing old versions (`compact`), key
rotations (`rotation`), an import's source note (`source_notes`) and opening what the Assistant
left behind (`assistant_records`) live in modules of their own.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from memframe import sealing
from memframe.backend.assistant_records import AssistantRecords
from memframe.backend.base import MemoryStore
from memframe.backend.heads import SeenHeads
from memframe.backend.rotation import Rotating
from memframe.backend.save_state import SaveState, reported
from memframe.backend.source_notes import SourceNotes
from memframe.core.errors import (
    ChainBroken,
    DecryptionFailed,
    Forbidden,
    InvalidInput,
    KeySessionUnavailable,
    MemframeError,
    NotFound,
    VersionConflict,
    WrongKey,
)
from memframe.core.memory_state import MemoryState
from memframe.core.types import (
    MEMORY_PATH,
    MemoryDocument,
    MemoryHead,
    Mode,
    Operation,
    Policy,
    StoredVersion,
    VersionInfo,
)

if TYPE_CHECKING:  # the Assistant's records and the edit parser load with the first proposal, not at start
    from memframe.backend.compact import Compacted
    from memframe.core.turns import AIConsent, TurnResult


class SealedBackend(AssistantRecords, Rotating, SourceNotes):
    """The Backend every frame and CLI command uses; see `memframe.backend.base.Backend`."""

    def __init__(
        self,
        store: MemoryStore,
        key: bytes,
        *,
        save_state: SaveState | None = None,
        seen: SeenHeads | None = None,
    ) -> None:
        self.store = store
        self._key = key
        self._key_session: str | None = None
        self._key_session_lock = threading.Lock()  # the frame's poll and a send may run at once
        self.save_state = save_state or SaveState()
        #: What this machine has seen of each document (rollback detection), beside the key.
        self.seen = seen if seen is not None else SeenHeads.for_store(store.location, store.workspace_id)
        # The newest version this client holds per path, its ciphertext and its text: the next
        # version chains onto the ciphertext and is sealed as a delta against the text.
        self._heads: dict[str, tuple[int, bytes | None, str]] = {}
        self._openers: dict[str, sealing.Opener] = {}

    @property
    def workspace_id(self) -> str:
        return self.store.workspace_id

    @property
    def location(self) -> str:
        return self.store.location

    @property
    def assistant_model(self) -> str:
        return self.store.assistant_model

    def __repr__(self) -> str:  # never shows the key
        return f"<{type(self).__name__} {self.workspace_id} at {self.location}>"

    # --- sealing: version-bound, chained, and checked against what this machine has seen --------

    def _legacy_ok(self, path: str, version: int) -> bool:
        """A v1 text is legitimate only below the version the document's chain starts at."""
        seen = self.seen.get(path)
        return seen is None or seen.since is None or version < seen.since

    def _open_version(self, path: str, version: int, blob: bytes | None) -> str:
        if blob is None:
            return ""
        return self._opener(path)(blob, version, legacy=self._legacy_ok(path, version))

    def _opener(self, path: str) -> sealing.Opener:
        """This client's opener for `path`, made once: it reads a delta's earlier versions (payload
        encoding 2) from the store, a keyframe's run at a time, each checked against the hash its
        successor names, and remembers what it opened (this process's memory only), so the Changes
        page and `history -p` open each revision of a run once, however they ask for it."""
        made = self._openers.get(path)
        if made is not None:
            return made
        runs: dict[int, bytes | None] = {}
        lock = threading.Lock()  # the frame's workers share the opener

        def fetch(version: int) -> bytes | None:
            with lock:
                if version not in runs:
                    runs.clear()
                    first = max(1, version - (version - 1) % sealing.KEYFRAME_EVERY)
                    try:
                        stored = self.store.get_versions(path, list(range(first, version + 1)))
                    except NotFound:  # the run starts before a forgetting: this version alone
                        try:
                            stored = self.store.get_versions(path, [version])
                        except NotFound:
                            return None
                    runs.update((s.info.version, s.ciphertext) for s in stored)
                return runs.get(version)

        made = sealing.opener(self._key, workspace_id=self.workspace_id, path=path, fetch=fetch)
        self._openers[path] = made
        return made

    def _observe_head(self, path: str, head: StoredVersion | None) -> str:
        """Check a head the server presents against what was seen, open it, then record it."""
        if head is None:
            self.seen.check(path, 0, "")
            return ""
        blob = head.ciphertext
        self.seen.check(path, head.info.version, "")  # an older head: refused before any opening
        text = self._open_version(path, head.info.version, blob)  # an altered one fails here
        digest = "" if blob is None else sealing.content_hash(blob)
        self.seen.check(path, head.info.version, digest)  # another genuine text at the same version
        self._note(path, head.info.version, blob, digest, text)
        return text

    def _note(self, path: str, version: int, blob: bytes | None, digest: str, text: str) -> None:
        header = sealing.header(blob)
        if header is not None and not 0 < header.since <= version:
            raise ChainBroken(f"Version {version} of {path} does not chain (its chain start is wrong).")
        self.seen.note(path, version, digest, None if header is None else header.since)
        self._heads[path] = (version, blob, text)

    def _seal_next(self, path: str, text: str, base_version: int) -> bytes:
        """Seal version base+1, chained onto the base's ciphertext (fetched only if not held), as a
        delta against the base's text where that is smaller and base+1 is not a keyframe (the base
        is what this client saw or saved, so it holds the text: nothing is opened for it)."""
        if base_version < 0:
            raise InvalidInput("The base version cannot be negative.")
        previous: bytes | None = None
        previous_text: str | None = None
        held = self._heads.get(path)
        if base_version > 0:
            if held is None or held[0] != base_version:
                head = self.store.get_file(path)
                if head is not None and head.info.version == base_version:
                    self._observe(path, head)
                held = self._heads.get(path)
            if held is not None and held[0] == base_version:
                previous, previous_text = held[1], held[2]
        seen = self.seen.get(path)
        return sealing.seal(
            self._key,
            text,
            workspace_id=self.workspace_id,
            path=path,
            version=base_version + 1,
            previous=previous,
            since=None if seen is None else seen.since,
            previous_text=previous_text,
        )

    def _put(self, path: str, blob: bytes, base_version: int, text: str, **kwargs: object) -> VersionInfo:
        """One upload; a conflict naming a version older than this machine has seen is a rollback."""
        try:
            info = self.store.put_file(path, blob, base_version, **kwargs)  # type: ignore[arg-type]
        except VersionConflict as exc:
            self.seen.check(path, exc.current_version, "")
            raise
        self._acknowledged(path, info, blob, text)
        return info

    def _acknowledged(self, path: str, info: VersionInfo, blob: bytes, text: str) -> None:
        digest = sealing.content_hash(blob)
        if info.content_hash and info.content_hash != digest:
            raise ChainBroken(f"The server acknowledged version {info.version} of {path} with another hash.")
        self.seen.check(path, info.version, digest)
        self._note(path, info.version, blob, digest, text)

    # --- any file of the workspace (people manage every path, the memory's included) -------

    def list_files(self) -> list[tuple[str, int, bool]]:
        """(path, head version, deleted) of every file, without decrypting anything."""
        return self.store.list_files()

    def read_file(self, path: str) -> tuple[int, str, bool]:
        """(version, text, deleted) of a file's head; (0, "", False) if it was never created."""
        head = self.store.get_file(path)
        text = self._observe(path, head)
        if head is None:
            return 0, "", False
        return head.info.version, text, head.info.operation is Operation.DELETE

    def write_file(self, path: str, text: str, base_version: int) -> VersionInfo:
        """One direct write of any file against its exact base version (0 = create-only)."""
        return self._put(path, self._seal_next(path, text, base_version), base_version, text)

    # --- reads ---------------------------------------------------------------------------

    def load(self) -> MemoryDocument:
        head = self.store.get_file(MEMORY_PATH)
        text = self._observe(MEMORY_PATH, head)
        if head is None:
            return MemoryDocument("", 0)
        deleted = head.info.operation is Operation.DELETE
        return MemoryDocument(text, head.info.version, deleted, head.info)

    def history(self, *, limit: int = 50, before: int | None = None) -> list[VersionInfo]:
        rows = self.store.list_versions(MEMORY_PATH, limit=limit, before=before)
        if before is None:  # the first page starts at the head: it may not be older than what was seen
            self._check_seen(MEMORY_PATH, rows[0].version if rows else 0, rows[0].content_hash if rows else "")
        return rows

    def head(self) -> MemoryHead:
        rows = self.store.list_versions(MEMORY_PATH, limit=1)
        return MemoryHead(rows[0] if rows else None, self.store.get_policy())

    def read_revision(self, version: int) -> str:
        if version < 1:
            raise NotFound(f"There is no revision {version}.")
        try:
            return self._open_version(MEMORY_PATH, version, self.store.get_version(MEMORY_PATH, version).ciphertext)
        except DecryptionFailed as exc:  # the key was rotated away: say so
            self._after_rotation(MEMORY_PATH, version, "", exc)
            raise

    def read_revisions(self, versions: Sequence[int]) -> dict[int, str]:
        """The decrypted texts of several revisions, read together (one transaction locally)."""
        if any(v < 1 for v in versions):
            raise NotFound(f"There is no revision {min(versions)}.")
        stored = self.store.get_versions(MEMORY_PATH, versions)
        open_blob = self._opener(MEMORY_PATH)  # one cipher
        return {
            s.info.version: open_blob(s.ciphertext, s.info.version, legacy=self._legacy_ok(MEMORY_PATH, s.info.version))
            for s in stored
        }

    def compact(self, *, after_each: Callable[[str, int], None] | None = None) -> Compacted:
        """Re-seal old whole versions as deltas (`memframe.backend.compact`)."""
        from memframe.backend.compact import compact  # here: only `compact` re-seals

        return compact(self.store, self._key, self.seen, after_each=after_each)

    def _set_key_check(self, mine: str) -> None:
        """Only the workspace's owner writes the key check; a member, refused, proves her key by
        opening the memory instead, and with no memory she has nothing to prove it against."""
        try:
            self.store.set_key_check(mine)
        except Forbidden:
            doc = self.load()  # a wrong key raises here
            if doc.version == 0 or doc.deleted:
                raise

    def get_policy(self) -> Policy:
        return self.store.get_policy()

    # --- writes: each one direct upload, tracked for X-Memory-State -----------------------

    def _write(self, text: str, base_version: int, **kwargs: object) -> VersionInfo:
        blob = self._seal_next(MEMORY_PATH, text, base_version)
        with self.save_state.saving():
            info = self._put(MEMORY_PATH, blob, base_version, text, **kwargs)
            self.save_state.acknowledge(info.version)
        return info

    def save(self, text: str, base_version: int, *, revive: bool = False, source: str | None = None) -> VersionInfo:
        return self._write(text, base_version, revive=revive, source_note=self._source_note(source, base_version))

    def clear(self, base_version: int) -> VersionInfo:
        return self._write("", base_version, clear=True)

    def undo(self, revision: int, base_version: int) -> VersionInfo:
        # Decrypting first proves the revision is ours and readable before anything is written.
        text = self.read_revision(revision)
        return self._write(text, base_version, restored_from=revision)

    def set_policy(self, mode: Mode, expected_revision: int) -> Policy:
        return self.store.set_policy(mode, expected_revision)

    # --- the Assistant ----------------------------------------------------------------------

    def get_ai(self) -> AIConsent:
        return self.store.get_ai()

    def set_ai(self, enabled: bool) -> AIConsent:
        return self.store.set_ai(enabled)

    def key_session(self) -> str:
        """This client's key session, opened on first use and reused until closed or gone."""
        with self._key_session_lock:
            if self._key_session is None:
                try:
                    self._key_session = self.store.open_key_session(self._key).id
                except WrongKey as exc:  # rotated away: say who rotated it
                    self._after_rotation(MEMORY_PATH, 0, "", exc)
                    raise
            return self._key_session

    def close_key_session(self) -> None:
        with self._key_session_lock:
            session, self._key_session = self._key_session, None
        if session is not None:
            self.store.revoke_key_session(session)

    def _forget_key_session(self, session: str) -> None:
        """The server no longer holds `session` (idle eviction, expiry, a restart): drop our id, so
        the next use opens a fresh one. There is nothing to revoke: the server forgot the key already."""
        with self._key_session_lock:
            if self._key_session == session:
                self._key_session = None

    def send(
        self,
        conversation_id: str,
        text: str,
        *,
        idempotency_key: str | None = None,
        on_text: Callable[[str], None] | None = None,
    ) -> TurnResult:
        state = self.save_state.for_send()  # waits up to 5 s for an in-flight Save
        return self.send_turn(
            conversation_id, text, idempotency_key=idempotency_key, memory_state=state, on_text=on_text
        )

    def send_turn(
        self,
        conversation_id: str,
        text: str,
        *,
        idempotency_key: str | None = None,
        memory_state: MemoryState | None,
        on_text: Callable[[str], None] | None = None,
    ) -> TurnResult:
        """One send under this client's key session: every Assistant turn (chat, the frame, MCP's
        ask_agent) starts here. It reports `memory_state` (None: no Saves of its own) raised to the
        newest memory version this machine has seen, so a rolled-back server withholds it as stale.

        A long-running client outlives its key session (the server evicts it after its idle time, and
        every session ends at its lifetime). Only the key-session open is ever repeated: when ingress
        refused the send because the session is gone, it wrote nothing (`admission_refused`), so a
        fresh session is opened and the same message, with the same idempotency key, goes once more.
        A session that ends later in a turn is not re-sent (the turn may have written); the next send
        opens a fresh one.
        """
        import secrets  # here, not at the top: reading commands (`history -p`) never make a key

        key = idempotency_key or secrets.token_hex(8)
        seen = self.seen.latest(MEMORY_PATH)
        state = reported(memory_state, 0 if seen is None else seen.version)
        header = None if state is None else state.header()
        session = self.key_session()
        try:
            return self.store.send_message(
                conversation_id,
                text,
                idempotency_key=key,
                key_session_id=session,
                memory_state=header,
                on_text=on_text,
            )
        except KeySessionUnavailable as exc:
            self._forget_key_session(session)
            if not exc.admission_refused:
                raise KeySessionUnavailable(
                    "The key session ended during this turn, so it may be incomplete; nothing was sent again. "
                    "The next message opens a fresh key session."
                ) from None
        return self.store.send_message(
            conversation_id,
            text,
            idempotency_key=key,
            key_session_id=self.key_session(),
            memory_state=header,
            on_text=on_text,
        )

    def close(self) -> None:
        # Already gone (expired, revoked, or the server is down): nothing is left to forget.
        with contextlib.suppress(MemframeError):
            self.close_key_session()
        self.store.close()
