"""`memframe verify`: walk every document's whole chain of versions and name the first break.

Each save checks only the link to the version before it, so a reader who wants to know that the
whole stored history is what its writers sealed (nothing moved, copied, reordered, dropped or
altered, and no old-format text after the chain began) walks it here, opening every version once,
and with it the sealed name of the file each import came from.
"""

from __future__ import annotations

from memframe import sealing
from memframe.backend.base import MemoryStore
from memframe.backend.heads import SeenHeads
from memframe.core.errors import ChainBroken, DecryptionFailed, NotFound
from memframe.core.types import MEMORY_PATH

#: Versions read in one request while walking a chain.
_READ_AT_ONCE = 200


def verify_chains(
    store: MemoryStore, key: bytes, seen: SeenHeads, starts: dict[str, int] | None = None
) -> list[tuple[str, int]]:
    """(path, head version) of every document whose whole chain holds, or ChainBroken / RolledBack
    naming the first break. Reads every version once, opening each with the key. `starts` names
    the first kept version of a document whose older ones were forgotten (a sealed record says so)."""
    checked: list[tuple[str, int]] = []
    for path, head_version, _deleted in store.list_files():
        seen.check(path, head_version, "")
        start = (starts or {}).get(path, 1)
        checked.append((path, _verify_path(store, key, seen, path, head_version, start)))
    if MEMORY_PATH not in {p for p, _ in checked}:
        seen.check(MEMORY_PATH, 0, "")
    return checked


def walked(checked: list[tuple[str, int]], starts: dict[str, int]) -> int:
    """How many versions `verify_chains` opened: each document from its first kept version."""
    return sum(head - starts.get(path, 1) + 1 for path, head in checked if head)


def _verify_path(store: MemoryStore, key: bytes, seen: SeenHeads, path: str, head_version: int, start: int = 1) -> int:
    # Versions are read oldest first, so a delta's base is always the version just opened, which
    # the opener remembers (nothing is fetched twice).
    open_blob = sealing.opener(key, workspace_id=store.workspace_id, path=path, remember=True)
    previous: bytes | None = None
    previous_was_deletion = False
    since: int | None = None
    last_digest = ""
    for at in range(start, head_version + 1, _READ_AT_ONCE):
        wanted = list(range(at, min(head_version, at + _READ_AT_ONCE - 1) + 1))
        try:
            stored = store.get_versions(path, wanted)
        except NotFound as exc:
            raise ChainBroken(f"The history of {path} does not chain: {exc.message}") from None
        for s in stored:
            version, blob = s.info.version, s.ciphertext
            where = f"version {version} of {path}"
            digest = "" if blob is None else sealing.content_hash(blob)
            if digest != s.info.content_hash:
                raise ChainBroken(f"The history does not chain at {where}: its hash is not its ciphertext's.")
            header = sealing.header(blob)
            if blob is not None and header is None and since is not None:
                raise ChainBroken(f"The history does not chain at {where}: an old-format text after the chain began.")
            if header is not None:
                # The hash of the version before's ciphertext, or of the one its re-seal stands for
                # (`memframe admin compact`): authenticated under the key, so a server cannot forge it.
                expected = sealing.NO_PREVIOUS if previous is None else open_blob.chain_hash(previous, version - 1)
                if header.previous != expected:
                    raise ChainBroken(
                        f"The history does not chain at {where}: it does not follow version {version - 1}."
                    )
                if previous_was_deletion:  # a revival may not know the chain start: any start so far
                    since_ok = 0 < header.since <= version
                elif since is None:
                    since_ok = header.since == version
                else:
                    since_ok = header.since == since
                if not since_ok:
                    raise ChainBroken(f"The history does not chain at {where}: its chain start is wrong.")
                since = header.since
            try:
                open_blob(blob, version, legacy=header is None)
            except DecryptionFailed:
                raise ChainBroken(
                    f"The history does not chain at {where}: it could not be decrypted (moved, copied or altered)."
                ) from None
            if s.info.source_note is not None:  # an import's file name, sealed at this version
                try:
                    sealing.open_source(
                        key, s.info.source_note, workspace_id=store.workspace_id, path=path, version=version
                    )
                except DecryptionFailed:
                    raise ChainBroken(
                        f"The history does not chain at {where}: its source note does not open at that version"
                        " (moved from another version or altered: tampering)."
                    ) from None
            previous, previous_was_deletion = blob, blob is None
            last_digest = digest
    if head_version:
        seen.check(path, head_version, last_digest)
    return head_version
