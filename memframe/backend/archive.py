"""A workspace's whole sealed history in one file, and its offline check with the key.

A person keeps a copy of every version they could not read without the key, so the archive holds
the ciphertexts, their metadata and the key check, sealed whole with an HMAC under the key; checking
it opens every version through the same chain verification a live workspace gets, with no server.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import Any, cast

from memframe import sealing
from memframe.backend.base import MemoryStore
from memframe.backend.heads import SeenHeads
from memframe.backend.sealed import SealedBackend
from memframe.core.errors import ChainBroken, DecryptionFailed, InvalidInput, NotFound
from memframe.core.types import Author, Operation, StoredVersion, VersionInfo

FORMAT = "memframe-archive/1"
_BATCH = 1000  # versions per read: what `history -p` reads at once


def _tag(key: bytes, body: dict[str, Any]) -> str:
    """The archive's seal: HMAC-SHA256 under the workspace key over its canonical JSON, so a
    version dropped, reordered or relabelled (author, time, operation) is refused."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    return hmac.new(key, b"memframe archive v1\x00" + canonical, hashlib.sha256).hexdigest()


def _version_entry(s: StoredVersion) -> dict[str, Any]:
    i = s.info
    return {
        "version": i.version,
        "createdAt": i.created_at,
        "author": i.author.value,
        "actor": i.actor,
        "operation": i.operation.value,
        "size": i.size,
        "contentHash": i.content_hash,
        "restoredFrom": i.restored_from,
        "sourceNote": None if i.source_note is None else base64.b64encode(i.source_note).decode("ascii"),
        "ciphertext": None if s.ciphertext is None else base64.b64encode(s.ciphertext).decode("ascii"),
    }


def build_archive(backend: SealedBackend, key: bytes) -> dict[str, Any]:
    """Every version of every document of the workspace, sealed; proves the key first."""
    backend.prove_key()
    store = backend.store
    files = []
    for path, head, deleted in sorted(store.list_files()):
        versions: list[dict[str, Any]] = []
        for start in range(1, head + 1, _BATCH):
            wanted = list(range(start, min(head, start + _BATCH - 1) + 1))
            versions.extend(_version_entry(s) for s in store.get_versions(path, wanted))
        files.append({"path": path, "deleted": deleted, "versions": versions})
    body = {"format": FORMAT, "workspace": store.workspace_id, "keyCheck": store.get_key_check(), "files": files}
    return {**body, "tag": _tag(key, body)}


def read_archive(raw: bytes) -> dict[str, Any]:
    """The archive's JSON, or one line saying it is not one."""
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        data = None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("workspace"), str):
        raise InvalidInput(f"This is not a memframe archive ({FORMAT}).")
    return data


class _ArchiveStore:
    """The reads chain verification makes, answered from an archive."""

    def __init__(self, data: dict[str, Any], name: str) -> None:
        self.workspace_id: str = data["workspace"]
        self.location = f"archive {name}"
        self._key_check: str | None = data.get("keyCheck")
        self.files: dict[str, tuple[bool, dict[int, StoredVersion]]] = {}
        try:
            for entry in data["files"]:
                stored = [_stored(v) for v in entry["versions"]]
                self.files[str(entry["path"])] = (bool(entry["deleted"]), {s.info.version: s for s in stored})
        except (KeyError, TypeError, ValueError) as exc:
            raise ChainBroken(f"The archive is damaged: {exc!r}; nothing in it is trusted.") from None

    def list_files(self) -> list[tuple[str, int, bool]]:
        return [(path, max(versions, default=0), deleted) for path, (deleted, versions) in self.files.items()]

    def get_versions(self, path: str, versions: Sequence[int]) -> list[StoredVersion]:
        held = self.files.get(path, (False, {}))[1]
        missing = [v for v in versions if v not in held]
        if missing:
            raise NotFound(f"version {missing[0]} of {path} is not in the archive")
        return [held[v] for v in versions]

    def get_version(self, path: str, version: int) -> StoredVersion:
        return self.get_versions(path, [version])[0]

    def get_key_check(self) -> str | None:
        return self._key_check

    def set_key_check(self, key_check: str) -> None:
        raise ChainBroken("The archive has no key check; nothing in it is trusted.")

    def rotation(self) -> None:
        """An archive records no key rotation: its chains are walked whole, from version 1."""
        return None


def _stored(v: dict[str, Any]) -> StoredVersion:
    blob, note = v["ciphertext"], v.get("sourceNote")  # an archive from before source notes has none
    info = VersionInfo(
        version=int(v["version"]),
        created_at=float(v["createdAt"]),
        author=Author(v["author"]),
        actor=str(v["actor"]),
        operation=Operation(v["operation"]),
        size=int(v["size"]),
        content_hash=str(v["contentHash"]),
        restored_from=None if v["restoredFrom"] is None else int(v["restoredFrom"]),
        source_note=None if note is None else base64.b64decode(note, validate=True),
    )
    return StoredVersion(info, None if blob is None else base64.b64decode(blob, validate=True))


def verify_archive(data: dict[str, Any], key: bytes, name: str) -> list[tuple[str, int]]:
    """(path, head version) of every document, once the key matches the archive's key check, its
    seal holds, and every version opens and chains, source note and all; else WrongKey, ChainBroken
    naming the break, or DecryptionFailed naming a note that does not open at its version."""
    store = _ArchiveStore(data, name)
    # Only the reads above are made: an archive is never written to.
    backend = SealedBackend(cast(MemoryStore, store), key, seen=SeenHeads(None))
    backend.prove_key()
    body = {k: v for k, v in data.items() if k != "tag"}
    if not hmac.compare_digest(str(data.get("tag", "")), _tag(key, body)):
        raise ChainBroken(
            "The archive was altered after it was written (its seal does not hold); nothing in it is trusted."
        )
    checked = backend.verify()
    for path, (_, versions) in store.files.items():
        for s in versions.values():
            if s.info.source_note is not None:
                _open_note(key, store.workspace_id, path, s.info.version, s.info.source_note)
    return checked


def _open_note(key: bytes, workspace: str, path: str, version: int, note: bytes) -> None:
    """A version's source note must open at that very version; one that does not is tampering."""
    try:
        sealing.open_source(key, note, workspace_id=workspace, path=path, version=version)
    except DecryptionFailed:
        raise DecryptionFailed(
            f"The source note of version {version} of {path} does not open at that version: it was altered or"
            " moved from another version (tampering); nothing in the archive is trusted."
        ) from None
