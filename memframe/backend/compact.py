"""`memframe admin compact`: re-seal a database's old whole versions as deltas, on a key holder's machine.

A database written before deltas holds every version whole, about ten times git's pack for the same
history; compaction brings it within the history-size aim without touching the chain, because each
re-seal carries the hash of the ciphertext it replaces (see `memframe.sealing.format`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memframe import sealing
from memframe.backend.base import MemoryStore
from memframe.backend.heads import SeenHeads
from memframe.core.errors import ChainBroken, DecryptionFailed, InvalidInput, NotFound

#: Versions read in one request while compacting.
_READ_AT_ONCE = 200


@dataclass
class Compacted:
    """What `compact` did: versions read, versions rewritten, and their bytes."""

    versions: int = 0
    rewritten: int = 0
    bytes_before: int = 0
    bytes_after: int = 0


def compact(
    store: MemoryStore, key: bytes, seen: SeenHeads, *, after_each: Callable[[str, int], None] | None = None
) -> Compacted:
    """Rewrite old whole versions as re-sealed deltas: every document, every version below its head,
    each rewrite its own compare-and-set transaction, so a crash or a concurrent save leaves every
    version opening to its same text; running it again rewrites only what is left. Needs the key
    (the server cannot read what it stores) and a store that can rewrite a row (local; a server's
    database is compacted on a key holder's machine with `--db`). `after_each(path, version)` runs
    after each rewrite (tests stop there, as a crash would)."""
    replace = getattr(store, "replace_version", None)
    if replace is None:
        raise InvalidInput(
            "Compaction rewrites a database directly: run it where the database is, with the key; nothing was changed."
        )
    done = Compacted()
    for path, head_version, _deleted in store.list_files():
        seen.check(path, head_version, "")
        _compact_path(store, key, path, head_version, replace, done, after_each)
    return done


def _compact_path(
    store: MemoryStore,
    key: bytes,
    path: str,
    head_version: int,
    replace: Callable[[str, int, str, bytes], bool],
    done: Compacted,
    after_each: Callable[[str, int], None] | None,
) -> None:
    open_blob = sealing.opener(key, workspace_id=store.workspace_id, path=path, remember=True)
    held: dict[int, bytes | None] = {}  # this run and the keyframe run before it: what deltas open against
    chained = False  # no old-format text opens once a new-format one was read (as `verify` judges)
    prev_blob: bytes | None = None
    prev_text = ""
    for start in range(1, head_version, _READ_AT_ONCE):  # the head itself is never rewritten
        for stale in [v for v in held if v < start - sealing.KEYFRAME_EVERY]:
            del held[stale]
        try:
            stored = store.get_versions(path, list(range(start, min(head_version - 1, start + _READ_AT_ONCE - 1) + 1)))
        except NotFound as exc:
            raise ChainBroken(f"The history of {path} does not chain: {exc.message}") from None
        for row in stored:
            version, blob = row.info.version, row.ciphertext
            held[version] = blob
            chained = chained or sealing.header(blob) is not None
            try:
                text = open_blob(blob, version, legacy=not chained, fetch=held.get)
                new = _recompacted(
                    key, open_blob, store.workspace_id, path, version, blob, text, prev_blob, prev_text, held
                )
            except DecryptionFailed:
                raise ChainBroken(
                    f"Version {version} of {path} could not be decrypted, so nothing after it was compacted."
                ) from None
            done.versions += 1
            if new is not None and blob is not None and replace(path, version, row.info.content_hash, new):
                held[version] = new
                done.rewritten += 1
                done.bytes_before += len(blob)
                done.bytes_after += len(new)
                if after_each is not None:
                    after_each(path, version)
            prev_blob, prev_text = held[version], text


def _recompacted(
    key: bytes,
    open_blob: sealing.Opener,
    workspace_id: str,
    path: str,
    version: int,
    blob: bytes | None,
    text: str,
    prev_blob: bytes | None,
    prev_text: str,
    held: dict[int, bytes | None],
) -> bytes | None:
    """A smaller re-seal of `blob` as a delta against the version before, checked to open to the
    same text; None when there is nothing to gain (a keyframe, a delta already, after a deletion,
    a Clear or an old-format text)."""
    header = sealing.header(blob)
    if (
        blob is None
        or header is None
        or sealing.keyframe(version)
        or header.previous == sealing.NO_PREVIOUS
        or prev_blob is None
        or sealing.header(prev_blob) is None
        or not prev_text
        or open_blob.chain_hash(prev_blob, version - 1, fetch=held.get) != header.previous
    ):
        return None
    new = sealing.reseal(
        key,
        text,
        blob,
        chain=open_blob.chain_hash(blob, version, fetch=held.get),
        workspace_id=workspace_id,
        path=path,
        version=version,
        previous_text=prev_text,
    )
    if len(new) >= len(blob) or open_blob(new, version, fetch=held.get) != text:
        return None
    return new
