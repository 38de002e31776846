"""Reading a local workspace's revisions without starting the service: the short path of `history -p`.

Starting a `MemoryService` imports the whole service, opens a writer and checks the
migrations inside a write transaction; a command that reads a page of revisions and
exits needs none of that. `open_local_revisions` opens one query-only connection and
reads in one snapshot, but only when the database is exactly what this memframe's
service would find after opening it (every shipped migration applied, nothing newer)
and the local user is a member of the workspace. Otherwise it returns None and the
caller goes through the service, which migrates, or refuses in its own words.

What it reads is what `MemoryService.list_versions` and `get_versions` return for the
memory document, and it decrypts on this machine; it writes nothing. It imports
neither the service nor `core.types` (the constants it shares with them are checked
equal by a test), so that `history -p` starts quickly; `memframe.service` imports
`MemoryService` only when asked for it, for the same reason. For the same reason it uses
`_sqlite3`, the module `sqlite3` is made of (the same connection and error classes).
"""

from __future__ import annotations

import os

from memframe import sealing

try:  # the C module itself: the `sqlite3` package around it adds datetime adapters (and datetime's import)
    import _sqlite3 as sqlite3
except ImportError:  # pragma: no cover - an interpreter without it
    import sqlite3  # type: ignore[no-redef]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    #: (version, created_at, author, actor, operation, text, ends): a revision as `history -p` shows it;
    #: ends, when known, is what the text shares with the revision before (`Opener.with_ends`).
    Revision = tuple[int, float, str, str, str, str, tuple[int, int] | None]

#: `memframe.core.types.MEMORY_PATH` and `memframe.service.accounts.LOCAL_USER`.
MEMORY_PATH = ".zudotext/memory/MEMORY.md"
LOCAL_USER = "local"
#: How `memframe.service.db` names a migration file.
_MIGRATION_PATTERN = r"^(\d{4})_([a-z0-9_]+)\.sql$"
_MIGRATION_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_")
_MIGRATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "migrations")


def shipped_migrations() -> set[int] | None:
    """The numbers of the migrations shipped with this memframe; None if they cannot be listed."""
    try:
        names = os.listdir(_MIGRATIONS)
    except OSError:
        return None
    found = set()
    for name in names:
        number = _migration_number(name)
        if number is not None:
            found.add(number)
    return found or None


def _migration_number(name: str) -> int | None:
    """The number `_MIGRATION_PATTERN` reads in `name`, or None: a usual name is read by hand, and
    only a `.sql` name it cannot read goes to the pattern (and `re`'s import, which start-up skips)."""
    if name.endswith(".sql"):
        if name[:4].isascii() and name[:4].isdigit() and name[4:5] == "_":
            middle = name[5:-4]
            if middle and _MIGRATION_NAME_CHARS.issuperset(middle):
                return int(name[:4])
    elif not name.endswith(".sql\n"):  # the pattern's `$` also matches before a final newline
        return None
    import re

    match = re.match(_MIGRATION_PATTERN, name)
    return int(match.group(1)) if match else None


class LocalRevisions:
    """One read snapshot of a local workspace, open until `close()`."""

    def __init__(self, conn: sqlite3.Connection, workspace_id: str) -> None:
        self._conn = conn
        self.workspace_id = workspace_id
        self._run: dict[int, bytes | None] = {}  # ciphertexts read ahead for a delta's bases

    def revisions(self, key: bytes, *, limit: int, before: int | None = None) -> Iterator[Revision]:
        """The memory's revisions newest first (below `before`, at most `limit` of them), each
        decrypted on the way: the rows stream in newest first and are opened a keyframe run at a
        time, oldest first, so each delta's base is the text opened just before it (one decrypt per
        version, and no row read twice). At most one run of rows and texts is held at once."""
        open_blob = sealing.opener(key, workspace_id=self.workspace_id, path=MEMORY_PATH, fetch=self._ciphertext)
        every = sealing.KEYFRAME_EVERY
        try:
            rows = self._conn.execute(
                "SELECT version, created_at, author, actor, operation, ciphertext FROM file_versions"
                " WHERE workspace_id = ? AND path = ? AND version < ? ORDER BY version DESC LIMIT ?",
                (self.workspace_id, MEMORY_PATH, before if before is not None else 2**62, limit),
            )
            since: int | None = None  # the chain start, from the newest new-format text read
            run: list[tuple[int, float, str, str, str, bytes | None]] = []
            opening: list[tuple[bytes | None, int, bool]] = []  # each row's (ciphertext, version, legacy)
            start = 0  # the first version of the run being gathered
            for row in rows:
                version = row[0]
                if version < start:
                    yield from _opened(open_blob, run, opening)
                    run, opening = [], []
                if not run:
                    start = version - (version - 1) % every
                if since is None:
                    header = sealing.header(row[5])
                    if header is not None:
                        since = header.since
                run.append(row)
                legacy = since is None or version < since  # no old-format text after the chain began
                opening.append((row[5], version, legacy))
            yield from _opened(open_blob, run, opening)
        except sqlite3.DatabaseError as exc:
            from memframe.core.errors import Unavailable

            raise Unavailable("The memory store could not be read right now.") from exc

    def _ciphertext(self, version: int) -> bytes | None:
        """One version's ciphertext: what a delta (payload encoding 2) is opened against.

        A delta's bases are asked for newest first, down to the keyframe before them, so a miss
        reads that whole run (from its keyframe up to `version`) in one statement, and the rest of
        the walk is answered from it: one query per run of versions, not one per version."""
        run = self._run
        if version in run:
            return run.pop(version)
        start = version - (version - 1) % sealing.KEYFRAME_EVERY
        self._run = run = dict(
            self._conn.execute(
                "SELECT version, ciphertext FROM file_versions"
                " WHERE workspace_id = ? AND path = ? AND version >= ? AND version <= ?",
                (self.workspace_id, MEMORY_PATH, start, version),
            )
        )
        return run.pop(version, None)

    def close(self) -> None:
        try:
            if self._conn.in_transaction:
                self._conn.execute("COMMIT")
        finally:
            self._conn.close()


def _opened(
    open_blob: sealing.Opener,
    run: list[tuple[int, float, str, str, str, bytes | None]],
    opening: list[tuple[bytes | None, int, bool]],
) -> Iterator[Revision]:
    """A run of rows (newest first) with their texts, opened oldest first (`opening`: each row's
    ciphertext, version and whether an old-format text may open there) and shown newest first."""
    texts = open_blob.run_with_ends(opening[::-1])
    for row, opened in zip(run, reversed(texts), strict=True):
        yield row[:5] + opened


def open_local_revisions(workspace_id: str, db: str | Path) -> LocalRevisions | None:
    """A snapshot of `workspace_id` in the database `db`, or None when only the service should open it.

    Raises NotFound, as opening the local backend does, when there is no such workspace.
    """
    if not os.path.exists(db):
        return None
    shipped = shipped_migrations()
    if shipped is None:
        return None
    try:
        conn = sqlite3.connect(db, isolation_level=None, timeout=10.0)
    except sqlite3.Error:
        return None
    try:
        conn.execute("PRAGMA query_only = ON")
        # The revisions stream through once: a small page cache keeps reusing the same few pages'
        # memory instead of filling 2 MiB of fresh memory (a third faster on a thousand revisions).
        conn.execute("PRAGMA cache_size = 64")
        conn.execute("BEGIN")
        applied = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
        if applied != shipped:
            raise LookupError("not the schema this memframe's service would leave")
        if conn.execute("SELECT 1 FROM workspaces WHERE id = ?", (workspace_id,)).fetchone() is None:
            from memframe.core.errors import NotFound

            raise NotFound(
                f"There is no local workspace {workspace_id!r}; "
                f"create it with 'memframe init --workspace {workspace_id}'."
            )
        member = conn.execute(
            "SELECT 1 FROM memberships WHERE workspace_id = ? AND user_id = ?", (workspace_id, LOCAL_USER)
        ).fetchone()
        if member is None:
            raise LookupError("the service says why")
    except (sqlite3.Error, LookupError):
        conn.close()
        return None
    except BaseException:
        conn.close()
        raise
    return LocalRevisions(conn, workspace_id)
