"""Automatic capture and proposals: the only automatic writer, behind the commit fence.

Scope, idempotency and key-session checks come first; then one transaction
writes the version (expected version, no tombstone revival), inserts the fence
row whose CHECK judges the admission, and marks the admission committed. A
change that may not be written becomes a proposal a person reviews.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from memframe import sealing
from memframe.core.edits import MemoryChange, apply_memory_changes
from memframe.core.errors import CaptureRefused, FenceRefused, InvalidInput, NotFound, ProposalRetired, VersionConflict
from memframe.core.turns import CaptureReceipt, ProposalReason, ProposalRecord, ProposalStatus
from memframe.core.types import MEMORY_PATH, Author, Mode, Operation, VersionInfo
from memframe.service import files
from memframe.service.accounts import require_member
from memframe.service.admissions import (
    ADMISSION_COLUMNS,
    Admission,
    AssistantBase,
    checked_admission,
    parse_credential,
)
from memframe.service.fence import FENCE_INSERT, failed_predicates
from memframe.service.policy import read_policy

_CURRENT_VERSION = "SELECT current_version FROM files WHERE workspace_id = ? AND path = ?"

#: The admission a capture presents and, in the same snapshot, the current version of the memory
#: (None if never written): read after a rival answered, it tells whether the rival made the base
#: stale without a second statement.
_CAPTURE_ADMISSION = (
    f"SELECT {ADMISSION_COLUMNS}, committed_version, commit_request_hash, ({_CURRENT_VERSION})"
    " FROM workspace_memory_admissions WHERE id = ?"
)

#: The longest a capture refused behind a rival yields to another capture of its workspace whose
#: batch is being made (a bound only: the yield ends as soon as that batch is made).
_YIELD_SECONDS = 0.005
#: How long after a rival's answer the captures that waited for it, all but the first, give the
#: next batch of their workspace to start (the first one's retry, usually) before they are judged.
#: A bound on a wait, shared by all of them: none waits longer for a batch that does not come.
_GRACE_SECONDS = 0.0005


@dataclasses.dataclass(frozen=True, slots=True)
class _Ahead:
    """A capture's version made before its batch, from the head `base` (None: never written)."""

    base: bytes | None
    text: str
    blob: bytes


class _FenceDidNotHold(Exception):
    """A capture's batch found its fence row or its admission not as the fence requires."""


class _Flight:
    """One capture of this process between its last check and its batch's answer."""

    __slots__ = ("answered", "answered_at", "behind", "made", "starts_seen", "told_made")

    def __init__(self) -> None:
        #: Held until the batch has its answer; then passed from one waiter to the next.
        self.answered = threading.Lock()
        self.answered.acquire()
        self.answered_at = 0.0  # monotonic; set before `answered` is first released
        self.starts_seen = 0  # the batches started by then, in any workspace (`_Rivals._starts`)
        self.behind = 0  # the waiters that have taken the baton so far
        #: Held while the batch is being made (its statements, the seal): released before its
        #: COMMIT, when this capture no longer needs the interpreter.
        self.made = threading.Lock()
        self.made.acquire()
        self.told_made = False  # `made` released (under `_Rivals._lock`: exactly once)


class _Rivals:
    """The captures of this process now between their last check and their batch's answer, by
    (workspace, expected version): of two such captures at most one can land.

    A capture that finds a rival in flight waits for its answer before judging its own; if the
    rival landed, its own base is then known stale and is refused before it queues for the group
    commit (see `CaptureMixin._refuse_known_stale`). The rival's answer is a baton: the first
    waiter takes it, and passes it to the next only when it has its own answer, so the writers
    that lost a race are judged one at a time instead of all at once. And each of them, before
    it is judged, yields to a capture of its workspace whose batch is being made (the next
    winner, usually), until that batch is made: the winner's statements and seal do not share
    the interpreter with their refusals, which run while it waits for its COMMIT's fsync instead.
    All but the first also give such a batch a moment to start (`_GRACE_SECONDS` after the
    rival's answer): the first is refused at once, and its retry is usually the next winner.
    Only ever a wait (for a rival's answer, or bounded): every answer, and the order refusals are
    decided in, is what it is without it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._started = threading.Condition(self._lock)  # a batch started being made
        self._flying: dict[tuple[str, int], _Flight] = {}
        #: Per workspace, the flight whose batch is being made (the first, if several); and how
        #: many captures' batches have started being made so far, in any workspace (a grace ends
        #: at the next one: one count, so nothing here grows with the workspaces this process saw).
        self._making: dict[str, _Flight] = {}
        self._starts = 0

    def wait(self, workspace_id: str, expected_version: int, batons: list[threading.Lock]) -> bool:
        """Wait for the rival in flight, if there is one, then yield to a batch being made; True if
        there was a rival. Its baton is added to `batons`: the caller releases it once it has its
        own answer (a capture that goes on to its own batch keeps its successors waiting for that)."""
        with self._lock:
            rival = self._flying.get((workspace_id, expected_version))
        if rival is None:
            return False
        rival.answered.acquire()
        batons.append(rival.answered)
        rival.behind += 1
        self._yield(workspace_id, rival, grace=rival.behind > 1)
        return True

    def _yield(self, workspace_id: str, rival: _Flight, *, grace: bool) -> None:
        """Before a capture behind `rival` is judged: let a batch of its workspace being made be
        made; with `grace`, first give one until a moment after the rival's answer to start."""
        with self._lock:
            if grace:
                deadline = rival.answered_at + _GRACE_SECONDS
                while self._starts == rival.starts_seen:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._started.wait(left)
            making = self._making.get(workspace_id)
        if making is not None and making.made.acquire(timeout=_YIELD_SECONDS):
            making.made.release()

    @contextmanager
    def flying(self, workspace_id: str, expected_version: int) -> Iterator[_Flight | None]:
        """This capture's batch, announced to its rivals until it has its answer (unless another
        capture with the same base is announced already: then both queue, and the batch judges).
        The flight yielded (None if not announced) is to be told `made` by its batch."""
        key = (workspace_id, expected_version)
        with self._lock:
            mine = None if key in self._flying else _Flight()
            if mine is not None:
                self._flying[key] = mine
        try:
            yield mine
        finally:
            if mine is not None:
                self.made(workspace_id, mine)  # a batch that never ran is made too
                with self._lock:
                    del self._flying[key]
                    mine.starts_seen = self._starts
                mine.answered_at = time.monotonic()
                mine.answered.release()

    def making(self, workspace_id: str, flight: _Flight | None) -> None:
        """`flight`'s batch is being made now, on the thread committing its group: the captures
        refused behind a rival in its workspace yield to it until it is made."""
        if flight is None:
            return
        with self._lock:
            self._starts += 1
            if not flight.told_made:
                self._making.setdefault(workspace_id, flight)
            self._started.notify_all()

    def made(self, workspace_id: str, flight: _Flight | None) -> None:
        """`flight`'s batch is made (only its COMMIT remains): the captures yielding to it go on.
        Told by the batch, on the thread committing the group, and again when the answer is in."""
        if flight is None:
            return
        with self._lock:
            if flight.told_made:
                return
            flight.told_made = True
            if self._making.get(workspace_id) is flight:
                del self._making[workspace_id]
        flight.made.release()


class CaptureMixin(AssistantBase):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._rivals = _Rivals()

    def commit_capture(
        self,
        workspace_id: str,
        credential: str,
        *,
        idempotency_key: str,
        key_session_id: str | None,
        changes: Sequence[MemoryChange],
        expected_version: int,
    ) -> CaptureReceipt:
        """The only automatic writer. Scope, idempotency and key-session checks first; then
        one transaction: the version (expected version, no tombstone revival), the fence row
        whose CHECK judges the admission, and the admission marked committed."""
        batons: list[threading.Lock] = []  # rivals' answers this capture holds until it has its own
        try:
            return self._commit_capture(
                workspace_id, credential, idempotency_key, key_session_id, changes, expected_version, batons
            )
        finally:
            for baton in batons:  # the next capture that waited for the same rival goes on
                baton.release()

    def _commit_capture(
        self,
        workspace_id: str,
        credential: str,
        idempotency_key: str,
        key_session_id: str | None,
        changes: Sequence[MemoryChange],
        expected_version: int,
        batons: list[threading.Lock],
    ) -> CaptureReceipt:
        # A rival with the same base in flight: its answer first, so this capture's checks run after
        # the rival's batch instead of beside it (on one interpreter), and see whether it landed.
        rival_seen = self._rivals.wait(workspace_id, expected_version, batons)
        # One statement, no transaction: the caller's thread does as little as it can before the
        # batch, where the thread committing the group does the rest (see `batch` below). The same
        # snapshot gives the memory's current version, read after the rival (if any) answered.
        admission_id, _ = parse_credential(credential)
        row = self.db.read_row(_CAPTURE_ADMISSION, (workspace_id, MEMORY_PATH, admission_id))
        admission = checked_admission(None if row is None else row[:-3], workspace_id, credential)
        if idempotency_key != f"memory:{admission.id}":
            raise InvalidInput("The Idempotency-Key must be memory:<admissionId> of this turn.")
        committed_version, committed_hash, current = row[-3:]
        if committed_version is not None:
            return self._replay(
                admission, int(committed_version), committed_hash, _request_hash(changes, expected_version)
            )
        # One took off meanwhile: its answer, and the version after it.
        rival_since = self._rivals.wait(workspace_id, expected_version, batons)
        # The key session is resolved immediately before the batch (an evicted or forgotten one fails
        # here), once: what comes between is this capture's own work (its version made ahead, its
        # place in the group commit), never a wait for a person. An explicit revocation is also a
        # durable row, which the fence's predicate reads in the batch, however late it comes.
        # One look at the session gives the key that seals and the opener that holds its opened heads.
        key, opener = self.key_sessions.key_and_opener(key_session_id, workspace_id)
        if rival_since:
            current = self._current_version(workspace_id)
        if (rival_seen or rival_since) and current is not None and expected_version < int(current):
            current = self._behind_next(workspace_id, int(current), batons)
        self._refuse_known_stale(
            expected_version, 0 if current is None else int(current), rival_seen=rival_seen or rival_since
        )
        now = self.db.clock()
        params = {
            "admission_id": admission.id,
            "ws": workspace_id,
            "now": now,
            "nonce": admission.credential_nonce,
            "key_session": key_session_id,
        }

        def batch(conn: sqlite3.Connection) -> VersionInfo:
            # Run by whichever caller commits the group (see `Database.write_together`): every capture
            # waiting at the writer is made and committed by one thread in one transaction with one
            # fsync, each in its own savepoint, so a refused one rolls back alone and the waiting
            # threads do not fight over the interpreter meanwhile. The base is read here, in the
            # batch, so an earlier capture of the same group is seen as the conflict it is.
            self._rivals.making(workspace_id, flight)
            try:
                return made(conn)
            finally:
                self._rivals.made(workspace_id, flight)  # only the COMMIT is left: rivals may go on

        def made(conn: sqlite3.Connection) -> VersionInfo:
            base = self._current_base(conn, workspace_id, expected_version)
            version = expected_version + 1
            if ahead is not None and ahead.base == base:  # the very head it was made from: the same text
                text, blob = ahead.text, ahead.blob
            else:
                text, blob = self._sealed(conn, workspace_id, expected_version, base, key, opener, changes)
            # The fence row first: a refused capture aborts before any version is written, and an
            # accepted one writes its version in the same transaction, so either both land or neither.
            if conn.execute(FENCE_INSERT, {**params, "version": version}).rowcount != 1:
                raise _FenceDidNotHold("fence row missing")  # the CHECK judged no row
            info = files.insert_version(
                conn,
                workspace_id=workspace_id,
                path=MEMORY_PATH,
                version=version,
                now=now,
                author=Author.ASSISTANT,
                actor="assistant",
                operation=Operation.CAPTURE,
                ciphertext=blob,
            )
            marked = conn.execute(
                "UPDATE workspace_memory_admissions SET consumed_at = ?, committed_version = ?,"
                " commit_request_hash = ? WHERE id = ? AND consumed_at IS NULL",
                (now, version, request_hash, admission.id),
            )
            if marked.rowcount != 1:
                raise _FenceDidNotHold("admission already consumed")
            written.append((blob, version, text))
            return info

        written: list[tuple[bytes, int, str]] = []  # what the batch sealed, once it ran

        refused: tuple[type[Exception], ...] = (_FenceDidNotHold, *self.db.integrity_errors)
        try:
            with self._rivals.flying(workspace_id, expected_version) as flight:
                request_hash = _request_hash(changes, expected_version)  # the batch's: it may land
                ahead = self._made_ahead(workspace_id, expected_version, key, opener, changes)
                if self.before_fence_batch is not None:
                    self.before_fence_batch()
                info = self.db.write_together(batch)
        except refused:
            with self.db.read() as conn:
                reasons = failed_predicates(conn, params) or ["the fence did not hold"]
            raise FenceRefused(
                "Memory was not changed: " + "; ".join(f"not true that {r}" for r in reasons) + ".",
                reasons=reasons,
            ) from None
        opener.hold(*written[-1])  # the next recall and capture start from the text just written
        return CaptureReceipt(admission.id, info)

    def _made_ahead(
        self,
        workspace_id: str,
        expected_version: int,
        key: bytes,
        opener: sealing.Opener,
        changes: Sequence[MemoryChange],
    ) -> _Ahead | None:
        """The version this capture would write, made on the caller's thread from the head read now,
        before it queues: the thread committing the group then only checks, in the batch's snapshot,
        that the head is still that very ciphertext (versions are never rewritten in place, and the
        head is never compacted), instead of opening, editing and sealing there, where the captures
        of a group are made one after another. None where the head is not the expected version or
        anything fails: then the batch makes it, and refuses what it refuses, in its own place in
        the order of refusals (nothing is decided here)."""
        try:
            with self.db.read() as conn:
                base = self._current_base(conn, workspace_id, expected_version)
                text, blob = self._sealed(conn, workspace_id, expected_version, base, key, opener, changes)
        except Exception:  # every refusal is the batch's to give
            return None
        return _Ahead(base, text, blob)

    def _sealed(
        self,
        conn: sqlite3.Connection,
        workspace_id: str,
        expected_version: int,
        base: bytes | None,
        key: bytes,
        opener: sealing.Opener,
        changes: Sequence[MemoryChange],
    ) -> tuple[str, bytes]:
        """(text, ciphertext) of the version after `base` (the head at `expected_version`, read in
        `conn`'s snapshot): the base opened, the changes applied, the result sealed."""
        base_text = _open_base(opener, workspace_id, expected_version, base, conn)
        text = apply_memory_changes(base_text, list(changes))
        blob = sealing.seal(  # a delta against the base where smaller (never against a Clear's "")
            key,
            text,
            workspace_id=workspace_id,
            path=MEMORY_PATH,
            version=expected_version + 1,
            previous=base,
            previous_text=base_text,
        )
        return text, blob

    def _replay(self, a: Admission, committed_version: int, committed_hash: str, request_hash: str) -> CaptureReceipt:
        """A transport retry of the turn's committed capture replays its receipt; a different
        change in the same turn is refused."""
        if committed_hash != request_hash:
            raise CaptureRefused("This turn has already changed memory once; a further change needs a new message.")
        with self.db.read() as conn:
            version = files.get_version(conn, a.workspace_id, MEMORY_PATH, committed_version)
        return CaptureReceipt(a.id, version.info, replayed=True)

    def _behind_next(self, workspace_id: str, current: int, batons: list[threading.Lock]) -> int:
        """The current version for a capture known stale, once the capture in flight on `current`
        (if any) has its answer: the loser's retry against `current` would wait for that answer and
        then, if it landed, be refused again; waiting for it here, once, gives the version after it
        in one refusal instead of two. The batons held are passed on first (the other waiters of the
        rival this one lost to go on meanwhile). Only a wait: the refusal and its place in the order
        are the same, and the version given is read after the wait, as the batch would read it."""
        while batons:
            batons.pop().release()
        if not self._rivals.wait(workspace_id, current, batons):
            return current
        return self._current_version(workspace_id)

    @staticmethod
    def _refuse_known_stale(expected_version: int, current: int, *, rival_seen: bool) -> None:
        """The batch's first two answers, given before joining a group where they are already
        certain: a negative base, and, after a rival with the same base answered, a base below
        the current version (versions only grow, so the batch would find it stale too). Same
        refusal, same place in the order of refusals (after the credential, idempotency and
        key-session checks, before every other one), but a writer that lost the race is told
        without queueing behind the group commit or taking a savepoint there. `current` was read
        after the rival answered. Without a rival the batch judges the base: a base made stale by
        a person's Save is refused there, with the same answer, at the batch's own commit point."""
        if expected_version < 0:
            raise InvalidInput("The base version cannot be negative.")
        if rival_seen and expected_version < current:
            raise VersionConflict(current)

    def _current_version(self, workspace_id: str) -> int:
        row = self.db.read_row(_CURRENT_VERSION, (workspace_id, MEMORY_PATH))
        return 0 if row is None else int(row[0])

    @staticmethod
    def _current_base(conn: sqlite3.Connection, workspace_id: str, expected_version: int) -> bytes | None:
        """The ciphertext a capture applies its edits to: the current memory, only if it is the
        expected version (None for a memory never written); a stale base is a VersionConflict."""
        if expected_version < 0:
            raise InvalidInput("The base version cannot be negative.")
        head = files.get_current(conn, workspace_id, MEMORY_PATH)
        current = 0 if head is None else head.info.version
        if expected_version != current:
            raise VersionConflict(current)
        if head is None:
            return None
        if head.info.operation is Operation.DELETE:
            raise CaptureRefused("The memory was deleted; nothing was written.")
        return head.ciphertext or b""

    def current_memory(self, workspace_id: str, credential: str) -> tuple[int, str]:
        """The current version and text, for turning a refused capture into a proposal against it.

        Refused while memory is Off, so no automation path can read memory that recall withholds.
        """
        with self.db.read() as conn:
            admission = self._live_admission_for(conn, workspace_id, credential)
            if read_policy(conn, workspace_id).mode is Mode.OFF:
                raise CaptureRefused("Memory is Off for this workspace; nothing can be read or proposed.")
            version, _ = files.current_state(conn, workspace_id, MEMORY_PATH)
            opener = self.key_sessions.memory_opener(admission.key_session_id, workspace_id)
            base = self._current_base(conn, workspace_id, version)
            return version, _open_base(opener, workspace_id, version, base, conn)

    # --- proposals -------------------------------------------------------------------------

    def propose(
        self,
        workspace_id: str,
        credential: str,
        *,
        changes: Sequence[MemoryChange],
        base_version: int,
        reason: str,
    ) -> ProposalRecord:
        """A reviewable change for a person: sealed, tagged with the generation it was made under."""
        why = _proposal_reason(reason)
        with self.db.read() as conn:
            admission = self._live_admission_for(conn, workspace_id, credential)
            current_mode = read_policy(conn, workspace_id).mode
        # The current policy, not the mode frozen at admission: Off means nothing happens, even
        # for a turn admitted in Auto or Read only before the switch.
        if Mode.OFF in (admission.mode, current_mode):
            raise CaptureRefused("Memory is Off; the Assistant proposes nothing.")
        key = self.key_sessions.resolve(admission.key_session_id, workspace_id)
        proposal_id = "prop_" + secrets.token_hex(8)
        sealed = sealing.seal_proposal(key, _edits_json(changes), workspace_id=workspace_id, proposal_id=proposal_id)
        now = self.db.clock()
        record = ProposalRecord(
            proposal_id,
            workspace_id,
            admission.id,
            base_version,
            admission.clear_generation,
            why,
            sealed,
            ProposalStatus.PENDING,
            now,
        )
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO workspace_memory_proposals (id, workspace_id, admission_id, base_version,"
                " clear_generation, reason, sealed_edits, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                dataclasses.astuple(record),
            )
        return record

    def proposals(
        self, user: str, workspace_id: str, *, status: ProposalStatus = ProposalStatus.PENDING
    ) -> list[ProposalRecord]:
        with self.db.read() as conn:
            require_member(conn, user, workspace_id)
            return [
                _proposal_record(row)
                for row in conn.execute(
                    "SELECT id, workspace_id, admission_id, base_version, clear_generation, reason,"
                    " sealed_edits, status, created_at FROM workspace_memory_proposals"
                    " WHERE workspace_id = ? AND status = ? ORDER BY created_at, id",
                    (workspace_id, status),
                )
            ]

    def resolve_proposal(self, user: str, workspace_id: str, proposal_id: str, status: str) -> None:
        """A person marks a proposal applied (after their own Save) or dismissed.

        A proposal made before a Clear cannot be marked applied, whoever asks: the Clear fenced
        the automatic work it came from. It can still be dismissed.
        """
        if status not in (ProposalStatus.APPLIED, ProposalStatus.DISMISSED):
            raise InvalidInput("A proposal is resolved as applied or dismissed.")
        with self.db.write() as conn:
            require_member(conn, user, workspace_id)
            if status == "applied":
                made_under = conn.execute(
                    "SELECT clear_generation FROM workspace_memory_proposals"
                    " WHERE id = ? AND workspace_id = ? AND status = 'pending'",
                    (proposal_id, workspace_id),
                ).fetchone()
                if made_under is not None and made_under[0] != read_policy(conn, workspace_id).clear_generation:
                    raise ProposalRetired(
                        "This proposal was made before the memory was cleared, so it cannot be applied; dismiss it."
                    )
            cur = conn.execute(
                "UPDATE workspace_memory_proposals SET status = ?, resolved_at = ?"
                " WHERE id = ? AND workspace_id = ? AND status = 'pending'",
                (status, self.db.clock(), proposal_id, workspace_id),
            )
            if cur.rowcount != 1:
                raise NotFound("No such pending proposal.")


def _edit_dicts(changes: Sequence[MemoryChange]) -> list[dict[str, str]]:
    return [c.as_dict() for c in changes]


def _edits_json(changes: Sequence[MemoryChange]) -> str:
    return json.dumps(_edit_dicts(changes), ensure_ascii=False, sort_keys=True)


def _request_hash(changes: Sequence[MemoryChange], expected_version: int) -> str:
    # The same bytes as hashing json.loads(_edits_json(...)), without the round trip.
    body = json.dumps({"edits": _edit_dicts(changes), "expected": expected_version}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()


def _proposal_reason(reason: str) -> ProposalReason:
    try:
        return ProposalReason(reason)
    except ValueError:
        raise InvalidInput("A proposal's reason is read_only or conflict.") from None


def _proposal_record(row: Sequence[Any]) -> ProposalRecord:
    """A stored row, with its reason and status as the contract's values rather than bare text."""
    pid, workspace_id, admission_id, base_version, generation, reason, sealed, status, created_at = row
    return ProposalRecord(
        pid,
        workspace_id,
        admission_id,
        base_version,
        generation,
        ProposalReason(reason),
        sealed,
        ProposalStatus(status),
        created_at,
    )


def _open_base(
    opener: sealing.Opener, workspace_id: str, version: int, base: bytes | None, conn: sqlite3.Connection
) -> str:
    """The memory text a capture applies its edits to, opened at its own version (a row copied
    from another version fails here). An old-format head still opens: it is the document's last
    text from before sealing v2, and the capture's new version starts its chain. `opener` is the
    key session's, which usually holds the head already (recall opened it); a head stored as a
    delta opens against the versions before it, read in the batch's own snapshot."""
    if base is None:
        return ""
    return opener(base, version, legacy=True, fetch=files.ciphertexts(conn, workspace_id, MEMORY_PATH))
