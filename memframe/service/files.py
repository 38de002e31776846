"""Encrypted file versions: compare-and-set writes, tombstones, Clear, history.

The service stores ciphertext it cannot read. A write names its base: the
exact current version, or 0 (create-only) for a never-created file; anything
else is a VersionConflict that writes nothing. The acknowledged version is
exactly the row this transaction inserted.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from memframe import sealing
from memframe.core.errors import DocumentDeleted, InvalidInput, KeyRotated, NotFound, TooLarge, VersionConflict
from memframe.core.types import SOURCE_NAME_MAX_BYTES, Author, Operation, StoredVersion, VersionInfo
from memframe.sealing import content_hash, plaintext_size

#: A stored document's ciphertext may not exceed this (memory over 8 KiB is kept, just not recalled).
MAX_DOCUMENT_BYTES = 1024 * 1024

_INFO_COLUMNS = "version, created_at, author, actor, operation, size, content_hash, restored_from, source_note"
_INFO_WIDTH = 9  # the columns above; the ciphertext follows them


def _info(row: tuple[Any, ...] | sqlite3.Row) -> VersionInfo:
    return VersionInfo(
        version=int(row[0]),
        created_at=float(row[1]),
        author=Author(row[2]),
        actor=str(row[3]),
        operation=Operation(row[4]),
        size=int(row[5]),
        content_hash=str(row[6]),
        restored_from=None if row[7] is None else int(row[7]),
        source_note=None if row[8] is None else bytes(row[8]),
    )


def _stored(row: tuple[Any, ...] | sqlite3.Row) -> StoredVersion:
    """A row of the info columns followed by the ciphertext."""
    blob = row[_INFO_WIDTH]
    return StoredVersion(_info(row[:_INFO_WIDTH]), None if blob is None else bytes(blob))


def current_state(conn: sqlite3.Connection, workspace_id: str, path: str) -> tuple[int, bool]:
    """(current version, deleted); (0, False) for a file never created."""
    row = conn.execute(
        "SELECT current_version, deleted FROM files WHERE workspace_id = ? AND path = ?",
        (workspace_id, path),
    ).fetchone()
    return (0, False) if row is None else (int(row[0]), bool(row[1]))


def check_base(
    conn: sqlite3.Connection, workspace_id: str, path: str, base_version: int, *, revive: bool = False
) -> int:
    """Raise unless `base_version` is exactly current; returns the version the write will get."""
    if base_version < 0:
        raise InvalidInput("The base version cannot be negative.")
    current, deleted = current_state(conn, workspace_id, path)
    if base_version != current:
        raise VersionConflict(current)
    if deleted and not revive:
        raise DocumentDeleted(current)
    return current + 1


def insert_version(
    conn: sqlite3.Connection,
    *,
    workspace_id: str,
    path: str,
    version: int,
    now: float,
    author: Author,
    actor: str,
    operation: Operation,
    ciphertext: bytes | None,
    restored_from: int | None = None,
    source_note: bytes | None = None,
) -> VersionInfo:
    """Append one version row and move the file's head to it, inside the caller's batch."""
    if ciphertext is not None and len(ciphertext) > MAX_DOCUMENT_BYTES:
        raise TooLarge(f"A document may be at most {MAX_DOCUMENT_BYTES} bytes once encrypted.")
    if ciphertext is not None:
        check_well_formed(ciphertext)
        check_chain(conn, workspace_id, path, version, ciphertext)
    if source_note is not None:
        check_source_note(source_note)
    size = 0 if ciphertext is None else plaintext_size(ciphertext)
    digest = "" if ciphertext is None else content_hash(ciphertext)
    conn.execute(
        f"INSERT INTO file_versions (workspace_id, path, {_INFO_COLUMNS}, ciphertext)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            workspace_id,
            path,
            version,
            now,
            author.value,
            actor,
            operation.value,
            size,
            digest,
            restored_from,
            source_note,
            ciphertext,
        ),
    )
    conn.execute(
        "INSERT INTO files (workspace_id, path, current_version, deleted) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (workspace_id, path) DO UPDATE SET"
        " current_version = excluded.current_version, deleted = excluded.deleted",
        (workspace_id, path, version, 1 if operation is Operation.DELETE else 0),
    )
    return VersionInfo(version, now, author, actor, operation, size, digest, restored_from, source_note)


def check_well_formed(ciphertext: bytes) -> None:
    """The door: a stored text must be a well-formed v2 sealed text (the server cannot read it,
    but it can refuse what is too short, in an old format, or claims a size it cannot have)."""
    if len(ciphertext) > MAX_DOCUMENT_BYTES:
        raise TooLarge(f"A document may be at most {MAX_DOCUMENT_BYTES} bytes once encrypted.")
    if len(ciphertext) < sealing.V1_OVERHEAD or not sealing.is_well_formed(ciphertext):
        raise InvalidInput(
            f"The body is not a sealed text in memframe's format (at least {sealing.SEALED_EMPTY_BYTES} bytes,"
            " with its header); nothing was written."
        )


def check_source_note(note: bytes) -> None:
    """What a server can check of a source note without the key: a well-formed, unchained v2 sealed
    text of a name 1 to `SOURCE_NAME_MAX_BYTES` bytes long (its header says the size)."""
    head = sealing.header(note)
    if (
        head is None
        or not sealing.is_well_formed(note)
        or not 0 < head.size <= SOURCE_NAME_MAX_BYTES
        or head.since != 0
        or head.previous != sealing.NO_PREVIOUS
    ):
        raise InvalidInput(
            f"A source note is a file name of 1 to {SOURCE_NAME_MAX_BYTES} bytes, sealed; nothing was written."
        )


def check_chain(conn: sqlite3.Connection, workspace_id: str, path: str, version: int, ciphertext: bytes) -> None:
    """A version that names a predecessor must name the stored one: what a client still holding a
    head from before a key rotation sends (its old ciphertext), refused before it lands under the
    old key beside versions under the new one."""
    head = sealing.header(ciphertext)
    if head is None or head.previous == sealing.NO_PREVIOUS or version < 2:
        return
    row = conn.execute(
        "SELECT content_hash FROM file_versions WHERE workspace_id = ? AND path = ? AND version = ?",
        (workspace_id, path, version - 1),
    ).fetchone()
    if row is not None and str(row[0]) == head.previous.hex():
        return
    rotated = conn.execute(
        "SELECT rotated_at, rotated_by FROM workspace_key_rotations WHERE workspace_id = ?"
        " ORDER BY rotation DESC LIMIT 1",
        (workspace_id,),
    ).fetchone()
    if rotated is not None:
        raise KeyRotated.since(float(rotated[0]), str(rotated[1]))
    raise InvalidInput(
        f"Version {version} of {path} does not follow the stored version before it; nothing was written."
    )


def replace_ciphertext(
    conn: sqlite3.Connection, workspace_id: str, path: str, version: int, expected_hash: str, ciphertext: bytes
) -> bool:
    """Compaction's one write: an old version's ciphertext swapped for a re-seal of it, compare-and-set.

    Only a version below the head, still holding the ciphertext whose hash is `expected_hash`, and
    only for a well-formed re-seal under the very same header (chain start, size, previous hash:
    what the server can check without the key) that is smaller. False (nothing written) otherwise:
    a concurrent compaction got there first, or the row is the head now. The head is never
    rewritten, so what clients remember of it (`SeenHeads`) and chain their next save onto stays true.
    """
    check_well_formed(ciphertext)
    row = conn.execute(
        "SELECT v.ciphertext FROM file_versions AS v JOIN files AS f ON f.workspace_id = v.workspace_id"
        " AND f.path = v.path WHERE v.workspace_id = ? AND v.path = ? AND v.version = ? AND v.content_hash = ?"
        " AND v.version < f.current_version",
        (workspace_id, path, version, expected_hash),
    ).fetchone()
    if row is None or row[0] is None:
        return False
    old = bytes(row[0])
    header_end = sealing.HEADER_BYTES
    if ciphertext[:header_end] != old[:header_end] or len(ciphertext) >= len(old):
        raise InvalidInput("A compacted version keeps its header and is smaller; nothing was written.")
    updated = conn.execute(
        "UPDATE file_versions SET ciphertext = ?, content_hash = ?"
        " WHERE workspace_id = ? AND path = ? AND version = ? AND content_hash = ?",
        (ciphertext, content_hash(ciphertext), workspace_id, path, version, expected_hash),
    )
    return updated.rowcount == 1


def check_restorable(conn: sqlite3.Connection, workspace_id: str, path: str, version: int) -> None:
    row = conn.execute(
        "SELECT operation FROM file_versions WHERE workspace_id = ? AND path = ? AND version = ?",
        (workspace_id, path, version),
    ).fetchone()
    if row is None:
        raise NotFound(f"There is no revision {version}.")
    if row[0] == Operation.DELETE.value:
        raise InvalidInput(f"Revision {version} is a deletion; there is no text to restore.")


def get_current(conn: sqlite3.Connection, workspace_id: str, path: str) -> StoredVersion | None:
    """The head version (a tombstone for a deleted file), or None if never created; one statement."""
    row = conn.execute(
        f"SELECT {', '.join('v.' + c for c in _INFO_COLUMNS.split(', '))}, v.ciphertext FROM files AS f"
        " JOIN file_versions AS v ON v.workspace_id = f.workspace_id AND v.path = f.path"
        " AND v.version = f.current_version WHERE f.workspace_id = ? AND f.path = ?",
        (workspace_id, path),
    ).fetchone()
    return None if row is None else _stored(row)


def get_version(conn: sqlite3.Connection, workspace_id: str, path: str, version: int) -> StoredVersion:
    row = conn.execute(
        f"SELECT {_INFO_COLUMNS}, ciphertext FROM file_versions WHERE workspace_id = ? AND path = ? AND version = ?",
        (workspace_id, path, version),
    ).fetchone()
    if row is None:
        raise NotFound(f"There is no revision {version}.")
    return _stored(row)


def ciphertexts(conn: sqlite3.Connection, workspace_id: str, path: str) -> Callable[[int], bytes | None]:
    """`version -> ciphertext` (None if absent) over `conn`: how an opener reads the earlier versions
    a delta (payload encoding 2) is made against, in the same snapshot as the version itself."""

    def fetch(version: int) -> bytes | None:
        try:
            return get_version(conn, workspace_id, path, version).ciphertext
        except NotFound:
            return None

    return fetch


def keyframe_runs(
    read: Callable[[], AbstractContextManager[sqlite3.Connection]], workspace_id: str, path: str
) -> Callable[[int], bytes | None]:
    """`version -> ciphertext` for a reader outside any snapshot (recall's key-session opener): a
    miss reads the version's whole keyframe run (its keyframe up to it) in one statement of a
    snapshot of its own. Mixing snapshots is sound: every base is held to the hash its successor's
    authenticated header names, so a row changed meanwhile fails to open, never opens wrong."""
    run: dict[int, bytes | None] = {}

    def fetch(version: int) -> bytes | None:
        if version not in run:
            first = max(1, version - (version - 1) % sealing.KEYFRAME_EVERY)
            with read() as conn:
                rows = conn.execute(
                    "SELECT version, ciphertext FROM file_versions WHERE workspace_id = ? AND path = ?"
                    " AND version BETWEEN ? AND ?",
                    (workspace_id, path, first, version),
                ).fetchall()
            run.clear()
            run.update((int(r[0]), None if r[1] is None else bytes(r[1])) for r in rows)
        return run.get(version)

    return fetch


def get_versions(
    conn: sqlite3.Connection, workspace_id: str, path: str, versions: Sequence[int]
) -> list[StoredVersion]:
    """Several revisions in one read, in the order asked; NotFound if any is missing."""
    found: dict[int, StoredVersion] = {}
    wanted = sorted(set(versions))
    for start in range(0, len(wanted), 500):  # well under SQLite's limit on bound parameters
        chunk = wanted[start : start + 500]
        for row in conn.execute(
            f"SELECT {_INFO_COLUMNS}, ciphertext FROM file_versions WHERE workspace_id = ? AND path = ?"
            f" AND version IN ({', '.join('?' * len(chunk))})",
            (workspace_id, path, *chunk),
        ):
            found[int(row[0])] = _stored(row)
    missing = [v for v in versions if v not in found]
    if missing:
        raise NotFound(f"There is no revision {missing[0]}.")
    return [found[v] for v in versions]


def list_versions(
    conn: sqlite3.Connection, workspace_id: str, path: str, *, limit: int, before: int | None
) -> list[VersionInfo]:
    """Newest first, one page; reads metadata only, never the ciphertext."""
    if limit < 1 or limit > 1000:
        raise InvalidInput("A page holds 1 to 1000 revisions.")
    rows = conn.execute(
        f"SELECT {_INFO_COLUMNS} FROM file_versions WHERE workspace_id = ? AND path = ?"
        " AND version < ? ORDER BY version DESC LIMIT ?",
        (workspace_id, path, before if before is not None else 2**62, limit),
    ).fetchall()
    return [_info(r) for r in rows]


def list_files(conn: sqlite3.Connection, workspace_id: str) -> list[tuple[str, int, bool]]:
    return [
        (str(r[0]), int(r[1]), bool(r[2]))
        for r in conn.execute(
            "SELECT path, current_version, deleted FROM files WHERE workspace_id = ? ORDER BY path",
            (workspace_id,),
        )
    ]
