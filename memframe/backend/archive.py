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

from memframe.backend.base import MemoryStore
from memframe.backend.heads import SeenHeads
from memframe.backend.sealed import SealedBackend
from memframe.backend.verify import walked
from memframe.core.errors import ChainBroken, InvalidInput, NotFound
from memframe.core.rotation import Rotation
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
    """Every version of every document of the workspace, sealed; proves the key first. A document
    whose older versions were forgotten starts at its first kept version, and the archive carries the
    rotation's record (sealed under the key) that says so, as the server does."""
    backend.prove_key()
    store = backend.store
    rotation = store.rotation()
    starts = backend.chain_starts()
    files = []
    for path, head, deleted in sorted(store.list_files()):
        versions: list[dict[str, Any]] = []
        for start in range(starts.get(path, 1), head + 1, _BATCH):
            wanted = list(range(start, min(head, start + _BATCH - 1) + 1))
            versions.extend(_version_entry(s) for s in store.get_versions(path, wanted))
        files.append({"path": path, "deleted": deleted, "versions": versions})
    body = {
        "format": FORMAT,
        "workspace": store.workspace_id,
        "keyCheck": store.get_key_check(),
        "files": files,
        "rotation": None if rotation is None else _rotation_entry(rotation),
    }
    return {**body, "tag": _tag(key, body)}


def _rotation_entry(rotation: Rotation) -> dict[str, Any]:
    sealed = rotation.sealed_record
    return {
        "number": rotation.number,
        "rotatedAt": rotation.rotated_at,
        "rotatedBy": rotation.rotated_by,
        "sealedRecord": None if sealed is None else base64.b64encode(sealed).decode("ascii"),
    }


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
        self._rotation: Rotation | None = None
        self.files: dict[str, tuple[bool, dict[int, StoredVersion]]] = {}
        try:
            for entry in data["files"]:
                stored = [_stored(v) for v in entry["versions"]]
                self.files[str(entry["path"])] = (bool(entry["deleted"]), {s.info.version: s for s in stored})
            if (held := data.get("rotation")) is not None:  # an archive from before forgetting has none
                sealed = held["sealedRecord"]
                self._rotation = Rotation(
                    number=int(held["number"]),
                    rotated_at=float(held["rotatedAt"]),
                    rotated_by=str(held["rotatedBy"]),
                    sealed_record=None if sealed is None else base64.b64decode(sealed, validate=True),
                )
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

    def rotation(self) -> Rotation | None:
        """The rotation the archive carries: its record, sealed under the key, says where a chain
        whose older versions were forgotten starts (an unsealed gap is still a break)."""
        return self._rotation


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


def verify_archive(data: dict[str, Any], key: bytes, name: str) -> tuple[list[tuple[str, int]], int]:
    """(path, head version) of every document and how many versions were walked, once the key matches
    the archive's key check, its seal holds, and every version opens and chains, source note and all
    (`verify_chains`); else WrongKey, or ChainBroken naming the break."""
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
    return checked, walked(checked, backend.chain_starts())
