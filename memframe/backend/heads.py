"""What this machine has seen of each document's history, so a rolled-back server is noticed.

Every client (CLI, frame, MCP server) reaches a workspace through `SealedBackend`, which
records here, per store, workspace and document, the newest version it has acknowledged or
seen, that version's ciphertext hash, and the version the document's chain starts at
(`since`, from the sealed header). A server that later presents an older head, or another
ciphertext for the same version, is refused with one line naming both versions.

The record is a small JSON file beside the workspace's key, under the memframe home
(`MEMFRAME_HOME` in tests): ``keys/<scope>/<workspace>.seen.json``. It holds versions and
hashes only, never text. Writes are atomic (a temporary file renamed over the old one) and
taken under an advisory lock, merged with what another process recorded meanwhile, so two
clients on one machine never lower each other's record.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memframe import paths
from memframe.core.errors import RolledBack

_FORMAT = "memframe-seen/1"


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
        self._docs: dict[str, Seen] = self._read()

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
                " — the history may have been rolled back. Nothing was changed."
            )
        if version == seen.version and content_hash and seen.content_hash and content_hash != seen.content_hash:
            raise RolledBack(
                f"The server shows another text as version {version} of {path} than this machine has seen"
                " — the history may have been rewritten. Nothing was changed."
            )

    def note(self, path: str, version: int, content_hash: str, since: int | None) -> None:
        """Record a head seen or acknowledged (only ever moving forward); persisted at once."""
        seen = self._docs.get(path)
        if seen is not None and (seen.version > version or seen == Seen(version, content_hash, since)):
            return
        if seen is not None and since is None:
            since = seen.since
        self._docs[path] = Seen(version, content_hash, since)
        if self.file is not None:
            self._persist()

    # --- the file -----------------------------------------------------------------------------

    def _read(self) -> dict[str, Seen]:
        if self.file is None:
            return {}
        try:
            doc = json.loads(self.file.read_bytes())
        except (OSError, ValueError):
            return {}  # none yet, or unreadable: nothing seen is the safe reading of a damaged one
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT or not isinstance(doc.get("documents"), dict):
            return {}
        out: dict[str, Seen] = {}
        for path, entry in doc["documents"].items():
            try:
                since = entry.get("since")
                out[str(path)] = Seen(int(entry["version"]), str(entry["hash"]), None if since is None else int(since))
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
        return out

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        assert self.file is not None
        self.file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not a POSIX system: the rename alone stays atomic
            yield
            return
        fd = os.open(self.file.with_name(self.file.name + ".lock"), os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _persist(self) -> None:
        assert self.file is not None
        with self._locked():
            merged = self._read()  # another client on this machine may have seen more meanwhile
            for path, mine in self._docs.items():
                theirs = merged.get(path)
                if theirs is None or mine.version >= theirs.version:
                    since = mine.since if mine.since is not None else None if theirs is None else theirs.since
                    merged[path] = Seen(mine.version, mine.content_hash, since)
            self._docs = merged
            doc = {
                "format": _FORMAT,
                "documents": {
                    p: {"version": s.version, "hash": s.content_hash, "since": s.since}
                    for p, s in sorted(merged.items())
                },
            }
            _replace(self.file, (json.dumps(doc, indent=1) + "\n").encode())


def _replace(target: Path, data: bytes) -> None:
    """Atomic (a 0600 temporary file renamed over the old one), but not fsync'd: a record lost
    to a power cut only falls back to an older version seen, never to a false alarm, and a save
    does not pay a second fsync for it."""
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
