"""The caching reader: opens many versions of one file under one key, remembering what it opened.

A head stored as a delta would otherwise cost every recall a walk back to its keyframe (up to
`KEYFRAME_EVERY` decrypts), so a key session keeps one opener per workspace and recall stays within
its aim against the fair floor of one decrypt. What it remembers is plaintext in this process's
memory only, each text beside the exact ciphertext it came from, so a changed row is never
answered from memory.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable

from memframe.sealing.delta import KEYFRAME_EVERY
from memframe.sealing.format import MAGIC, aead, associated_data, file_place, header, open_version, utf8

#: `version -> ciphertext` (None if there is none): how an opener reads a delta's earlier versions.
Fetch = Callable[[int], bytes | None]


class Opener:
    """`open_sealed` for many versions of one file, the cipher made once: call it as
    `open_blob(blob, version, legacy=False, fetch=None)`. A missing blob (a deletion's) opens as "".

    `fetch(version)` (given here, or per call) returns a version's ciphertext (None if there is
    none): a delta's earlier versions are read through it, each checked against the hash its
    successor's header names (`chain_hash`). With `remember` (the default when a `fetch` is given),
    what was opened is kept (the last `2 * KEYFRAME_EVERY` versions, each with the exact ciphertext it
    came from), so reading a run of versions opens each once, and a key session's recall opens a new
    head with one decrypt; without it nothing is kept."""

    __slots__ = ("_aead", "_fetch", "_legacy_ad", "_lock", "_opened", "_place", "_remember")

    def __init__(
        self, key: bytes, *, workspace_id: str, path: str, fetch: Fetch | None = None, remember: bool | None = None
    ) -> None:
        self._aead = aead(key)
        self._legacy_ad = associated_data(workspace_id, path)
        self._place = file_place(workspace_id, path, 0)[:-1]  # + str(version): a version's place
        self._fetch = fetch
        self._remember = fetch is not None if remember is None else remember
        # version -> (ciphertext, UTF-8 text, chain hash or None: the ciphertext's SHA-256, made when
        # needed); one lock, as a key session's opener is shared by threads
        self._opened: dict[int, tuple[bytes, bytes, bytes | None]] = {}
        self._lock = threading.Lock()

    def __call__(self, blob: bytes | None, version: int, *, legacy: bool = False, fetch: Fetch | None = None) -> str:
        if blob is None:
            return ""
        return utf8(self._open(blob, version, legacy, fetch or self._fetch)[0])

    def chain_hash(self, blob: bytes, version: int, *, legacy: bool = False, fetch: Fetch | None = None) -> bytes:
        """What the next version's `prev` must be: the SHA-256 of `blob`, or for a re-seal, of the
        ciphertext it stands for (opening it, if it is one; a v2 text's payload encoding is sealed)."""
        digest = hashlib.sha256(blob).digest()
        if header(blob) is None:
            return digest
        return self._open(blob, version, legacy, fetch or self._fetch, digest)[1] or digest

    def hold(self, blob: bytes, version: int, text: str) -> None:
        """Remember `text` as what `blob` (sealed by this process, with this key) opens to, so the next
        read of it, or of a delta against it, needs no decrypt of it. Only a remembering opener keeps it."""
        if self._remember and blob[:4] == MAGIC:
            self._keep(version, blob, text.encode("utf-8"), None)

    def _keep(self, version: int, blob: bytes, data: bytes, chain: bytes | None) -> None:
        opened = self._opened
        with self._lock:
            if opened.pop(version, None) is None and len(opened) >= 2 * KEYFRAME_EVERY:
                opened.pop(next(iter(opened)), None)
            opened[version] = (blob, data, chain)

    def _open(
        self, blob: bytes, version: int, legacy: bool, fetch: Fetch | None, digest: bytes | None = None
    ) -> tuple[bytes, bytes | None, tuple[int, int] | None]:
        """(UTF-8 text, chain hash, a delta's ends) of `blob` at `version`. The chain hash is None where
        it is the SHA-256 of `blob` itself and not yet known: it is made only when a delta names the
        text as its base (or `chain_hash` asks). The ends are `open_version`'s, when this call
        decrypted a delta (not for a text held)."""
        opened = self._opened if self._remember else None
        if opened is not None:
            held = opened.get(version)
            if held is not None and held[0] == blob:
                return held[1], held[2], None

        def base(at: int, named: bytes) -> bytes:
            return self._base(at, named, fetch)

        place = self._place + str(version).encode()
        data, original, ends = open_version(self._aead, blob, place, self._legacy_ad if legacy else None, base)
        if original is None:
            original = digest
        if opened is not None and blob[:4] == MAGIC:  # only v2: a v1 text must be judged (legacy) every time
            self._keep(version, blob, data, original)
        return data, original, ends

    def _base(self, at: int, named: bytes, fetch: Fetch | None) -> bytes:
        """The UTF-8 text of version `at`, a delta's base, from what was opened or through `fetch`:
        opened (so a swapped row fails as any altered text does) and then held to the hash `named`,
        which the delta's header names."""
        held = self._opened.get(at) if self._remember else None
        if held is not None:
            older, text, chain = held
        else:
            fetched = None if fetch is None else fetch(at)
            if fetched is None:  # (an old-format one fails to open below: a delta's base is always v2)
                raise ValueError("the base of this delta is missing or not the version it names")
            older = fetched
            text, chain, _ = self._open(older, at, False, fetch)
        if (chain or hashlib.sha256(older).digest()) != named:
            raise ValueError("the base of this delta is missing or not the version it names")
        return text


def opener(
    key: bytes, *, workspace_id: str, path: str, fetch: Fetch | None = None, remember: bool | None = None
) -> Opener:
    """An `Opener` for `path` of `workspace_id` (see there)."""
    return Opener(key, workspace_id=workspace_id, path=path, fetch=fetch, remember=remember)


def open_sealed(
    key: bytes,
    blob: bytes,
    *,
    workspace_id: str,
    path: str,
    version: int,
    legacy: bool = False,
    fetch: Fetch | None = None,
) -> str:
    """Decrypt `version` of `path`, or fail with DecryptionFailed: never garbage text, never a crash.

    `legacy` admits a v1 text (sealed before the chain existed); callers pass it only where the
    document's protection has not begun (see RELIABILITY.md, "Sealing v2"). `fetch(version)`
    returns an earlier version's ciphertext, for a text stored as a delta.
    """
    return Opener(key, workspace_id=workspace_id, path=path, fetch=fetch)(blob, version, legacy=legacy)
