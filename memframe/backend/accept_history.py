"""Accepting a server's history after a restore: the one step that lowers what this machine expects.

A restored dump or a promoted standby may hold older versions than a machine has seen: that
machine then refuses to read or write (`memframe.backend.heads`) and its Assistant turns get no
memory (`stale`), and it cannot tell a restore from an attack by itself. When the restore was
meant, the person says so once (`memframe history --accept-server`): the record forgets the
versions it held, takes the server's heads as they are now (each one opened with the key, so a
tampered head is still refused, and the record is put back), and appends one line per document
that went back to a log beside the key, so the step stays on record.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memframe.backend.sealed import SealedBackend


@dataclass(frozen=True)
class WentBack:
    """One document whose history on the server is older than (or other than) what was seen."""

    path: str
    seen: int  # the newest version this machine had seen
    server: int  # the version the server shows now (0: none)

    def line(self) -> str:
        if self.server == self.seen:
            return f"{self.path}: the server shows another text as version {self.seen} than this machine had seen"
        return f"{self.path}: this machine had seen version {self.seen}; the server shows version {self.server}"


def accepted_log(seen_file: Path) -> Path:
    """The log beside the seen-heads record: ``keys/<scope>/<workspace>.accepted.log``."""
    return seen_file.with_name(seen_file.name.removesuffix(".seen.json") + ".accepted.log")


def accept_server_history(backend: SealedBackend) -> list[WentBack]:
    """Take the server's heads as what this machine expects; the documents that went back, logged.

    Every document's head is read and opened as by any other read; if one fails (a wrong key, a
    tampered text, the server gone), what was recorded before is put back and the error raised."""
    before = backend.seen.forget_versions()
    try:
        for path, _, _ in backend.list_files():
            backend.read_file(path)  # opened and noted as the new newest version seen
    except BaseException:
        backend.seen.remember(before)
        raise
    went_back: list[WentBack] = []
    for path, old in sorted(before.items()):
        now = backend.seen.get(path)
        server = 0 if now is None else now.version
        other_text = now is not None and now.content_hash != old.content_hash and bool(old.content_hash)
        if server < old.version or (server == old.version > 0 and other_text):
            went_back.append(WentBack(path, old.version, server))
    if went_back and backend.seen.file is not None:
        _log(accepted_log(backend.seen.file), backend, went_back)
    return went_back


def _log(log: Path, backend: SealedBackend, went_back: list[WentBack]) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    where = f"workspace {backend.workspace_id!r} at {backend.location}"
    text = "".join(f"{stamp} accepted the history of {where}: {w.line()}\n" for w in went_back)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as fh:
        fh.write(text)
