"""What this machine has seen of each document's history, so a rolled-back server is noticed.

Every client (CLI, frame, MCP server) reaches a workspace through `SealedBackend`, which
records here, per store, workspace and document, the newest version it has acknowledged or
seen, that version's ciphertext hash, and the version the document's chain starts at
(`since`, from the sealed header). A server that later presents an older head, or another
ciphertext for the same version, is refused with one line naming both versions; and every
Assistant send reports the newest memory version recorded here, so recall withholds the memory
(`stale`) from such a server instead of handing the model an older copy.

The record is a small file beside the workspace's key, under the memframe home
(`MEMFRAME_HOME` in tests): ``keys/<scope>/<workspace>.seen.json``. It holds versions and
hashes only, never text. It is JSON Lines: a format line, then one line per document as last
written whole, then one line per head noted since, each appended in one write under an
advisory lock. Reading folds the lines in order, a later line winning only at a version at
least as new, so the record never goes back (only a person's explicit acceptance of a restored
server's history lowers it, `forget_versions`) and two clients on one machine never lower each
other's record: each one, under the lock, first reads what the other appended, then appends
its own line. A line is taken only whole (ending in a newline, valid JSON): a write torn by a
crash is skipped, which leaves the version seen before it. Every so often the record is
rewritten whole, also under the lock and after reading it all, atomically (a temporary file
renamed over the old one). Nothing here is fsync'd: a record lost to a power cut only falls
back to an older version seen, never to a false alarm, and a save does not pay a second fsync
for it. (A save used to rewrite the whole file and rename it every time: on ext4 the rename
over an existing file starts the new file's writeback, a third of a local save's time.)

A record in the earlier format (``memframe-seen/1``, one JSON document) is still read, and is
rewritten in this one on the next note.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from memframe import paths
from memframe.core.errors import RolledBack

_FORMAT = "memframe-seen/2"
_FORMAT_V1 = "memframe-seen/1"
_HEAD_LINE = json.dumps({"format": _FORMAT}).encode() + b"\n"
#: Lines past one per document before the record is rewritten whole (so a reader folds few).
_REWRITE_AFTER = 64
#: How a person gets past a refusal when the server's history went back on purpose (a restore).
ACCEPT_HINT = " If the server was restored on purpose, 'memframe history --accept-server' takes its history."


@dataclass(frozen=True)
class Seen:
    """The newest version of one document this machine has seen."""

    version: int
    content_hash: str
    since: int | None  # the first version sealed v2, once known; None while only v1 was seen


def seen_file(location: str, workspace_id: str) -> Path:
    """Beside the key: one record per store (a local database or a server) and workspace."""
    return paths.home() / "keys" / paths.key_scope(location) / f"{paths.check_workspace_id(workspace_id)}.seen.json"


class SeenHeads:
    """The per-document record of one workspace on one store."""

    def __init__(self, file: Path | None) -> None:
        """`file` None keeps the record in memory only (a client that must leave no trace)."""
        self.file = file
        self._docs: dict[str, Seen] = {}
        # How far this client has read the file: its identity, the offset after the last whole
        # line, whether that is the end (no torn line after it), and how many document lines it
        # holds (None: not a record in this format, so the next note rewrites it whole).
        self._at: tuple[int, int] | None = None
        self._offset = 0
        self._clean_end = True
        self._lines: int | None = None
        self._dir_made = False
        if file is not None:
            # None yet, or unreadable: nothing seen is the safe reading of a missing or damaged record.
            with contextlib.suppress(OSError), open(file, "rb") as fh:
                self._take(fh, whole=True)

    @classmethod
    def for_store(cls, location: str, workspace_id: str) -> SeenHeads:
        return cls(seen_file(location, workspace_id))

    def get(self, path: str) -> Seen | None:
        return self._docs.get(path)

    def check(self, path: str, version: int, content_hash: str) -> None:
        """Refuse a head older than what was seen, or a different ciphertext at the same version."""
        seen = self._docs.get(path)
        if seen is None:
            return
        if version < seen.version:
            raise RolledBack(
                f"The server shows version {version} of {path}; this machine has seen version {seen.version}"
                f" — the history may have been rolled back. Nothing was changed.{ACCEPT_HINT}"
            )
        if version == seen.version and content_hash and seen.content_hash and content_hash != seen.content_hash:
            raise RolledBack(
                f"The server shows another text as version {version} of {path} than this machine has seen"
                f" — the history may have been rewritten. Nothing was changed.{ACCEPT_HINT}"
            )

    def latest(self, path: str) -> Seen | None:
        """`get`, after reading what other clients on this machine noted since this one last read the
        record: what a long-running client (the frame, `memframe mcp`) reports is what the machine saw."""
        if self.file is not None and self.file.exists():
            with self._locked(), contextlib.suppress(OSError), open(self.file, "rb") as fh:
                self._take(fh, whole=False)
        return self._docs.get(path)

    def forget_versions(self) -> dict[str, Seen]:
        """Stop expecting any version: the one way the record goes back, taken only on a person's
        word (`memframe history --accept-server`). Each document keeps the version its chain starts
        at, so an old-format text stays refused above it. Returns what was held before."""
        with self._rewriting():
            before = dict(self._docs)
            self._docs = {path: Seen(0, "", seen.since) for path, seen in before.items()}
        return before

    def remember(self, held: dict[str, Seen]) -> None:
        """Take `held` back (an acceptance that failed half way): each document at the newer of it
        and what is recorded now."""
        with self._rewriting():
            for path, seen in held.items():
                self._fold(path, seen)

    def note(self, path: str, version: int, content_hash: str, since: int | None) -> None:
        """Record a head seen or acknowledged (only ever moving forward); persisted at once."""
        seen = self._docs.get(path)
        if seen is not None and (seen.version > version or seen == Seen(version, content_hash, since)):
            return
        if seen is not None and since is None:
            since = seen.since
        self._docs[path] = Seen(version, content_hash, since)
        if self.file is not None:
            self._persist(path)

    # --- the file -----------------------------------------------------------------------------

    def _fold(self, path: str, seen: Seen) -> None:
        """Take `seen` unless what is held is newer (the one merge rule, for lines and for notes):
        at the same version the later one wins; a `since` it does not know is kept."""
        held = self._docs.get(path)
        if held is not None and held.version > seen.version:
            return
        if held is not None and seen.since is None and held.since is not None:
            seen = Seen(seen.version, seen.content_hash, held.since)
        self._docs[path] = seen

    def _take(self, fh: BinaryIO, *, whole: bool) -> None:
        """Fold what the open record `fh` holds past what was read of it (all of it if `whole`, or if
        it is another file than the one read before, or shorter than that)."""
        fd = fh.fileno()
        st = os.fstat(fd)
        start = 0 if whole or self._at != (st.st_dev, st.st_ino) or st.st_size < self._offset else self._offset
        data = os.pread(fd, st.st_size - start, start) if st.st_size > start else b""
        self._at = (st.st_dev, st.st_ino)
        if start == 0:
            self._offset, self._clean_end, self._lines = 0, True, None
            if not data.startswith(_HEAD_LINE):
                self._offset = len(data)
                self._fold_v1(data)
                return
            data, start, self._lines = data[len(_HEAD_LINE) :], len(_HEAD_LINE), 0
        end = data.rfind(b"\n") + 1
        self._offset = start + end
        self._clean_end = end == len(data)
        if not end:
            return
        lines = data[:end].splitlines()
        if self._lines is not None:
            self._lines += len(lines)
        for path, seen in _entries(lines):
            self._fold(path, seen)

    def _fold_v1(self, data: bytes) -> None:
        try:
            doc = json.loads(data)
        except ValueError:
            return  # damaged: nothing more seen is the safe reading of it
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT_V1 or not isinstance(doc.get("documents"), dict):
            return
        for path, entry in doc["documents"].items():
            seen = _entry(entry)
            if seen is not None:
                self._fold(str(path), seen)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        assert self.file is not None
        if not self._dir_made:
            self.file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._dir_made = True
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not a POSIX system: each write stays whole
            yield
            return
        fd = os.open(f"{self.file}.lock", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _persist(self, path: str) -> None:
        """Under the lock: read what other clients appended meanwhile, then append `path`'s line; or
        rewrite the record whole (after reading all of it) when it is not in this format, or long."""
        assert self.file is not None
        mine = self._docs[path]
        with self._locked():
            fd = os.open(self.file, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "r+b", buffering=0) as fh:
                self._take(fh, whole=False)  # another client on this machine may have seen more meanwhile
                self._fold(path, mine)  # what is noted wins at its own version, as it did in memory
                lines = self._lines
                if lines is None or lines >= len(self._docs) + _REWRITE_AFTER:
                    if lines is not None:
                        self._take(fh, whole=True)  # all of it, before anything is written over it
                        self._fold(path, mine)
                    self._rewrite()
                    return
                line = _line(path, self._docs[path])
                fh.write(line if self._clean_end else b"\n" + line)  # a torn line before stays a line of its own
                self._offset, self._clean_end, self._lines = os.fstat(fd).st_size, True, lines + 1

    @contextlib.contextmanager
    def _rewriting(self) -> Iterator[None]:
        """Under the lock, with the whole record read: the caller changes what is held, which is then
        written whole (a record kept in memory only is just changed)."""
        if self.file is None:
            yield
            return
        with self._locked():
            with contextlib.suppress(FileNotFoundError), open(self.file, "rb") as fh:
                self._take(fh, whole=True)
            yield
            self._rewrite()

    def _rewrite(self) -> None:
        assert self.file is not None
        data = _HEAD_LINE + b"".join(_line(p, s) for p, s in sorted(self._docs.items()))
        _replace(self.file, data)
        st = os.stat(self.file)
        self._at, self._offset, self._clean_end, self._lines = (st.st_dev, st.st_ino), len(data), True, len(self._docs)


def _entries(lines: list[bytes]) -> Iterator[tuple[str, Seen]]:
    """(path, seen) of each whole, valid document line; anything else (a torn write) is skipped."""
    try:  # one parse for the usual record, every line whole
        entries = json.loads(b"[" + b",".join(lines) + b"]")
        if not isinstance(entries, list) or len(entries) != len(lines):
            raise ValueError("not one entry a line")
    except ValueError:
        entries = []
        for line in lines:
            with contextlib.suppress(ValueError):
                entries.append(json.loads(line))
    for entry in entries:
        path = entry.get("path") if isinstance(entry, dict) else None
        seen = _entry(entry) if isinstance(path, str) else None
        if path is not None and seen is not None:
            yield path, seen


def _entry(entry: object) -> Seen | None:
    try:
        since = entry.get("since")  # type: ignore[attr-defined]
        return Seen(int(entry["version"]), str(entry["hash"]), None if since is None else int(since))  # type: ignore[index]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def _line(path: str, seen: Seen) -> bytes:
    entry = {"path": path, "version": seen.version, "hash": seen.content_hash, "since": seen.since}
    return json.dumps(entry).encode() + b"\n"


def _replace(target: Path, data: bytes) -> None:
    """Atomic (a 0600 temporary file renamed over the old one), but not fsync'd (see above)."""
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
