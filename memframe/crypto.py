"""Workspace keys and the sealing of memory text.

A workspace key is 32 random bytes that live with the person (a 0600 key file,
optionally wrapped by a passphrase), never with the server. Everything the
server stores of a text is sealed here, with AES-256-GCM under that key.

Sealed format v2 (every new ciphertext)::

    offset  bytes  field
    0       4      magic  b"MF\x00\x02"  (the format's version is the last byte)
    4       4      since  big-endian u32: the first version of this document sealed v2
                          (0 for a transcript message or a proposal, which are not chained)
    8       4      size   big-endian u32: UTF-8 bytes of the text (what the server records as size)
    12      32     prev   SHA-256 of the previous version's ciphertext (the chain); 32 zero bytes
                          for version 1, after a deletion, and for unchained records
    44      12     nonce  fresh per seal
    56      n+17   AES-256-GCM(plaintext) || tag(16)
    plaintext = encoding(1) || payload: encoding 0 = the UTF-8 text, 1 = zlib(UTF-8 text),
    2 = a delta against the previous version (below), each chosen only when it saves bytes
    (payload length never exceeds `size`); 3 = a re-seal (below)

A delta (encoding 2) is ``base(u32) || prefix(u32) || suffix(u32) || packing(1) || middle``: the
text is the base version's first `prefix` bytes, then `middle` (raw for packing 0, zlib for 1),
then its last `suffix` bytes. `base` is always `version - 1`, and the base's ciphertext is the one
whose SHA-256 is `prev` in this header: both are authenticated, so a server cannot re-point a
delta at another text, and a delta whose base row was swapped fails to open. Versions
1, 1 + `KEYFRAME_EVERY`, 1 + 2·`KEYFRAME_EVERY`, … are never deltas, so opening any version walks at
most `KEYFRAME_EVERY - 1` earlier ones (`opener(fetch=…)` caches what it opened, so reading a run
of versions in either direction opens each once). Everything stays ciphertext: the delta is
inside the seal, and no plaintext, readable diff or key is stored.

A re-seal (encoding 3, written only by `memframe admin compact`) is ``original(32) || encoding(1)
|| payload``: the same text as the ciphertext whose SHA-256 is `original`, sealed again (as a
delta where smaller) with that ciphertext's very header. The chain names ciphertexts: a
version's `prev` stays the hash of its predecessor's *original* ciphertext, and a re-sealed
predecessor answers for it with the `original` it carries, authenticated under the key (a server
cannot make one; it can only put the original back, which opens to the same text). So compaction
rewrites old rows without touching any later one, and `Opener.chain_hash` is the hash a
successor's `prev` must name.

The associated data is ``b"memframe/v2\x00" + place + b"\x00" + header(44 bytes)``, so the
header is authenticated with the text. `place` says where the text belongs:

* a file version: ``b"file\x00" workspace \x00 path \x00 version``: a row copied to another
  version, path or workspace fails to open, and `prev` chains each version to the exact
  ciphertext before it (checked by `memframe verify`, and by the server as each version arrives);
* a transcript message: ``b"transcript\x00" workspace \x00 conversation \x00 seq \x00 role``,
  a namespace no note path can take (a path never starts a place), so a message cannot be
  swapped into a note, reordered or dropped from the middle;
* a proposal: ``b"proposal\x00" workspace \x00 proposal id``.

A sealed empty text is exactly `SEALED_EMPTY_BYTES` (73) bytes: what a Clear must send.

Format v1 (before this change) is ``nonce(12) || AES-256-GCM(text) || tag`` with associated data
``b"memframe/v1\x00" workspace \x00 path``. It opens only where the caller says a legacy text is
legitimate (`legacy=True`): the rule, "no v1 text at or after a document's first v2 version", is
applied by the callers and stated in RELIABILITY.md.
"""

from __future__ import annotations

import os
from _struct import Struct  # `struct` is this C module re-exported: one import fewer at start-up

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    #: `version -> ciphertext` (None if there is none): how an opener reads a delta's earlier versions.
    Fetch = Callable[[int], bytes | None]

# Start-up stays light (`memframe history -p` is measured against `git log -p`): hashlib, the
# errors and cryptography are imported where they are used, and random bytes come from
# os.urandom, which is what `secrets.token_bytes` returns.

KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
MAGIC = b"MF\x00\x02"
HASH_BYTES = 32
HEADER_BYTES = len(MAGIC) + 4 + 4 + HASH_BYTES
#: A v2 sealed empty text: header, nonce, the encoding byte and the tag. A Clear is exactly this long.
SEALED_EMPTY_BYTES = HEADER_BYTES + NONCE_BYTES + 1 + TAG_BYTES
#: Bytes a v2 seal adds to a raw (uncompressed) text.
SEAL_OVERHEAD = SEALED_EMPTY_BYTES
#: Bytes a v1 seal added (nonce and tag): no sealed text of either format is shorter.
V1_OVERHEAD = NONCE_BYTES + TAG_BYTES
NO_PREVIOUS = bytes(HASH_BYTES)
RAW, ZLIB, DELTA, RESEAL = 0, 1, 2, 3
#: A full (non-delta) version at least this often: no read walks further back than this.
KEYFRAME_EVERY = 64
_DELTA_HEAD = Struct(">IIIB")
_GRAM = Struct("=Q")  # a text's 8-byte window as `memoryview.cast("Q")` reads it (`TextGrams`)
_MAX_U32 = 2**32 - 1
_HEADER = Struct(">4sII32s")
#: Texts shorter than this are never worth compressing (zlib's own overhead is ~11 bytes).
_COMPRESS_FROM = 64


def aead(key: bytes):  # type: ignore[no-untyped-def]
    """AES-256-GCM with `key`; every encryption and decryption in memframe is made through here."""
    return _aesgcm_class()(key)


_AESGCM: Any = None


def _aesgcm_class():  # type: ignore[no-untyped-def]
    # Imported on first use: cryptography costs start-up time the CLI's cheap commands avoid. The
    # public module `cryptography.hazmat.primitives.ciphers.aead` is this very class re-exported, after
    # importing `typing` and every cipher and mode: going to the binding directly saves half the
    # import. Should a cryptography release move it, the public name is used.
    global _AESGCM
    if _AESGCM is None:
        try:
            from cryptography.hazmat.bindings._rust import openssl

            _AESGCM = openssl.aead.AESGCM
        except (ImportError, AttributeError):
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            _AESGCM = AESGCM
    return _AESGCM


# --- places: where a sealed text belongs ---------------------------------------------------


def file_place(workspace_id: str, path: str, version: int) -> bytes:
    """A file version's place; NUL cannot occur in a workspace id or a path."""
    return b"file\x00" + workspace_id.encode() + b"\x00" + path.encode() + b"\x00" + str(version).encode()


def transcript_place(workspace_id: str, conversation_id: str, seq: int, role: str) -> bytes:
    """A transcript message's place: its conversation, its position (1, 2, …) and its role."""
    parts = (workspace_id, conversation_id, str(seq), role)
    return b"transcript\x00" + b"\x00".join(p.encode() for p in parts)


def proposal_place(workspace_id: str, proposal_id: str) -> bytes:
    return b"proposal\x00" + workspace_id.encode() + b"\x00" + proposal_id.encode()


def associated_data(workspace_id: str, path: str) -> bytes:
    """The v1 associated data (workspace and path only), for opening texts sealed before v2."""
    return b"memframe/v1\x00" + workspace_id.encode() + b"\x00" + path.encode()


def _ad_v2(place: bytes, header: bytes | memoryview) -> bytes:
    return b"memframe/v2\x00" + place + b"\x00" + bytes(header)


def _decrypt_v2(decrypt: Callable[..., bytes], blob: bytes, place: bytes) -> bytes:
    """The payload of the v2 text `blob` at `place` (`aead.decrypt` raises if it is not that):
    its nonce and ciphertext follow the header, which the associated data (`_ad_v2`'s, written
    out: every revision `history -p` shows comes through here) authenticates."""
    view = memoryview(blob)
    return decrypt(
        view[HEADER_BYTES : HEADER_BYTES + NONCE_BYTES],
        view[HEADER_BYTES + NONCE_BYTES :],
        b"memframe/v2\x00" + place + b"\x00" + blob[:HEADER_BYTES],
    )


# --- the header, readable without the key ----------------------------------------------------


class Header:
    """The clear, authenticated header of a v2 sealed text."""

    __slots__ = ("previous", "since", "size")

    def __init__(self, since: int, size: int, previous: bytes) -> None:
        self.since, self.size, self.previous = since, size, previous

    def __repr__(self) -> str:
        return f"<Header since={self.since} size={self.size} previous={self.previous.hex()[:12]}>"


def header(blob: bytes | None) -> Header | None:
    """The v2 header of `blob`, or None for a v1 text (or anything not v2): no key needed."""
    if blob is None or len(blob) < SEALED_EMPTY_BYTES or blob[:4] != MAGIC:
        return None
    _, since, size, previous = _HEADER.unpack_from(blob)
    return Header(since, size, previous)


def is_well_formed(blob: bytes) -> bool:
    """What a server can check of a v2 text without the key: magic, length, and a payload that
    is no longer than the size it declares (zlib is used only when it saves bytes)."""
    head = header(blob)
    return head is not None and len(blob) - SEALED_EMPTY_BYTES <= head.size


def is_sealed_empty(blob: bytes) -> bool:
    """Exactly a v2 sealed empty text: what a Clear must upload."""
    head = header(blob)
    return head is not None and len(blob) == SEALED_EMPTY_BYTES and head.size == 0


def plaintext_size(blob: bytes) -> int:
    """A text's UTF-8 size without reading it: the v2 header says it; v1 GCM preserved length."""
    head = header(blob)
    if head is not None:
        return head.size
    return max(0, len(blob) - V1_OVERHEAD)


def content_hash(blob: bytes) -> str:
    """The only fingerprint of a text the server stores: SHA-256 of the ciphertext."""
    import hashlib

    return hashlib.sha256(blob).hexdigest()


def chain_link(previous: bytes | None, version: int, *, since: int | None = None) -> tuple[int, bytes]:
    """(since, prev) for sealing `version` after the ciphertext `previous` (None: none, or a deletion).

    One hash per save: the predecessor's ciphertext, never a walk of the history. A v2
    predecessor passes its `since` on; a v1 one makes this version the first v2 one; after a
    deletion the caller's `since` (what it knows of the document) is kept, else this version.
    """
    if previous is None:
        return (since if since is not None and 0 < since <= version else version), NO_PREVIOUS
    import hashlib

    head = header(previous)
    return (version if head is None else head.since), hashlib.sha256(previous).digest()


# --- sealing ------------------------------------------------------------------------------


def new_key() -> bytes:
    return os.urandom(KEY_BYTES)


def _seal_v2(
    key: bytes,
    text: str,
    place: bytes,
    *,
    since: int = 0,
    previous: bytes = NO_PREVIOUS,
    delta: tuple[int, bytes] | None = None,
    original: bytes | None = None,
    grams: TextGrams | None = None,
) -> bytes:
    data = text.encode("utf-8")
    if len(data) > _MAX_U32 or not 0 <= since <= _MAX_U32 or len(previous) != HASH_BYTES:
        raise ValueError("cannot seal this text")
    payload, encoding = _payload(data, delta, grams)
    if original is not None:  # a re-seal: the original's hash, then the payload as it would be
        if len(original) != HASH_BYTES:
            raise ValueError("cannot seal this text")
        payload, encoding = original + bytes([encoding]) + payload, RESEAL
    head = _HEADER.pack(MAGIC, since, len(data), previous)
    nonce = os.urandom(NONCE_BYTES)
    return head + nonce + aead(key).encrypt(nonce, bytes([encoding]) + payload, _ad_v2(place, head))


def _payload(data: bytes, delta: tuple[int, bytes] | None, grams: TextGrams | None = None) -> tuple[bytes, int]:
    """The smallest of raw, zlib and (given a base) a delta: (payload, encoding).

    With `grams` (what a client keeps of the base's text, see `TextGrams`), the whole text is not
    compressed when the delta is provably smaller than any zlib of it could be: the choice is the
    very one compressing it would make (a delta smaller than zlib, and still only where it is
    smaller than the text), for a small fraction of the work."""
    payload, encoding = data, RAW
    edit = None
    floor = 0  # no zlib of `data` is shorter than this
    if delta is not None:
        edit = _delta(delta[0], delta[1], data)
        if grams is not None:
            _, prefix, suffix, _ = _DELTA_HEAD.unpack_from(edit)
            floor = grams.follow(delta[1], data, prefix, suffix)
    if len(data) >= _COMPRESS_FROM and (edit is None or len(edit) >= floor):
        import zlib

        packed = zlib.compress(data, 6)
        if len(packed) < len(data):
            payload, encoding = packed, ZLIB
    if edit is not None and len(edit) < len(payload):
        payload, encoding = edit, DELTA
    return payload, encoding


class TextGrams:
    """The distinct 8-byte windows of one text, counted, and kept up to date as the text is edited
    (`follow`), for a floor under the size of any zlib of it, without compressing it.

    The floor: zlib is a 2-byte header, deflate, and a 4-byte Adler-32. Deflate writes the text as
    literals and matches (a copy of up to 258 earlier bytes); each literal costs at least one bit and
    each match at least two (a length code, and a distance code, which RFC 1951 spends one bit on even
    when it is the only one), in fixed, dynamic and stored blocks alike (a stored byte costs eight).
    A window of Q bytes seen for the first time cannot lie inside one match (a match copies what
    came before), so its last byte is a literal or one of the first Q - 1 bytes of a match: with D
    distinct windows, D <= literals + (Q - 1) * matches, so the bits are at least 2 * D / (Q - 1).
    For an 8 KiB memory that floor is 150-350 bytes, where the delta of an edit is 30-150 and zlib
    itself 2-4 KB. A client keeps one for the text it last sealed or read, updating only the
    windows an edit touches; it holds fragments of plaintext, in this process's memory only."""

    Q = 8
    __slots__ = ("_counts", "_lock", "data")

    def __init__(self) -> None:
        import threading

        self.data: bytes | None = None  # the text counted (None: none yet)
        self._counts: dict[int, int] = {}
        self._lock = threading.Lock()  # the frame's workers may save at once: the counts are never shared

    def follow(self, base: bytes, data: bytes, prefix: int | None = None, suffix: int | None = None) -> int:
        """Count `data`, the text `base` became (`prefix` and `suffix`: the bytes they share at each
        end, found if not given), and return the floor of any zlib of it (0 if busy elsewhere)."""
        if not self._lock.acquire(blocking=False):
            return 0
        try:
            if self.data != base:
                self._count_all(data)
            else:
                if prefix is None or suffix is None:
                    prefix, suffix = _shared_ends(base, data)
                self._recount(base, data, prefix, suffix)
            self.data = data
            bits = (2 * len(self._counts) + self.Q - 2) // (self.Q - 1)
            return 6 + (bits + 7) // 8
        finally:
            self._lock.release()

    def _count_all(self, data: bytes) -> None:
        from collections import Counter

        counts: Counter[int] = Counter()
        view = memoryview(data)
        for start in range(self.Q):  # the windows at start, start + Q, …: one native-order u64 each
            whole = (len(data) - start) // self.Q
            if whole > 0:
                counts.update(view[start : start + whole * self.Q].cast("Q").tolist())
        self._counts = dict(counts)

    def _recount(self, base: bytes, data: bytes, prefix: int, suffix: int) -> None:
        """Only the windows that overlap the edited middle change; those inside the shared prefix or
        suffix are in both texts."""
        counts, q, word = self._counts, self.Q, _GRAM.unpack_from
        first = max(0, prefix - q + 1)
        for at in range(first, min(len(base) - q, len(base) - suffix - 1) + 1):
            (gram,) = word(base, at)
            left = counts[gram] - 1
            if left:
                counts[gram] = left
            else:
                del counts[gram]
        for at in range(first, min(len(data) - q, len(data) - suffix - 1) + 1):
            (gram,) = word(data, at)
            counts[gram] = counts.get(gram, 0) + 1


def _common_prefix(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix, found by halving (memcmp per step, no Python loop per byte)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: bytes, b: bytes, limit: int) -> int:
    """Length of the longest common suffix, at most `limit`, halving like `_common_prefix` (without
    reversing either text first: a reversed copy costs more than all the comparisons)."""
    la, lb = len(a), len(b)
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[la - mid : la - lo] == b[lb - mid : lb - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _shared_ends(base: bytes, data: bytes) -> tuple[int, int]:
    """(prefix, suffix): the bytes `base` and `data` share at the start, then at the end of what is left."""
    prefix = _common_prefix(base, data)
    return prefix, _common_suffix(base, data, min(len(base), len(data)) - prefix)


def _delta(base_version: int, base: bytes, data: bytes) -> bytes:
    """The edit from `base` to `data`: the common prefix and suffix kept, the middle carried."""
    prefix, suffix = _shared_ends(base, data)
    middle, packing = data[prefix : len(data) - suffix], 0
    if len(middle) >= _COMPRESS_FROM:
        import zlib

        packed = zlib.compress(middle, 6)
        if len(packed) < len(middle):
            middle, packing = packed, 1
    return _DELTA_HEAD.pack(base_version, prefix, suffix, packing) + middle


def keyframe(version: int) -> bool:
    """True for the versions that are always sealed whole (1, 1 + KEYFRAME_EVERY, …)."""
    return version % KEYFRAME_EVERY == 1


def seal(
    key: bytes,
    text: str,
    *,
    workspace_id: str,
    path: str,
    version: int,
    previous: bytes | None = None,
    since: int | None = None,
    previous_text: str | None = None,
    grams: TextGrams | None = None,
) -> bytes:
    """Seal `text` as `version` of `path`, chained onto `previous`, the ciphertext it follows.

    `previous` is None for version 1 and after a deletion (then `since` carries the document's
    protection start, if the caller knows it). With `previous_text` (the text `previous` opens
    to), the version may be sealed as a delta against it, when that is smaller and `version` is
    not a keyframe; its readers then need `opener(fetch=…)`. An empty `previous_text` (a Clear's
    revision) is never a base: the version after a Clear is whole, so no chain reaches past it.
    `grams` (kept by a client across its saves of `path`) spares compressing the whole text where a
    delta is sure to be smaller (`_payload`); it then counts `text`. The result is all the server
    ever stores.
    """
    if version < 1:
        raise ValueError("versions start at 1")
    first, prev = chain_link(previous, version, since=since)
    delta = None
    if previous is not None and previous_text and not keyframe(version) and header(previous):
        delta = (version - 1, previous_text.encode("utf-8"))
    elif grams is not None and previous_text:  # a keyframe: sealed whole, but the next one follows it
        grams.follow(previous_text.encode("utf-8"), text.encode("utf-8"))
    return _seal_v2(
        key, text, file_place(workspace_id, path, version), since=first, previous=prev, delta=delta, grams=grams
    )


def reseal(
    key: bytes,
    text: str,
    stored: bytes,
    *,
    chain: bytes,
    workspace_id: str,
    path: str,
    version: int,
    previous_text: str | None,
) -> bytes:
    """`stored` (a v2 ciphertext of `version`, opened to `text`; `chain` its `Opener.chain_hash`)
    sealed again, as a delta against `previous_text` (version - 1's text) where that is smaller:
    encoding 3, under `stored`'s own header, so every later version's `prev` still names it."""
    head = header(stored)
    if head is None or version < 1 or len(chain) != HASH_BYTES:
        raise ValueError("only a new-format text can be re-sealed")
    delta = None
    if previous_text and head.previous != NO_PREVIOUS and not keyframe(version):
        delta = (version - 1, previous_text.encode("utf-8"))
    return _seal_v2(
        key,
        text,
        file_place(workspace_id, path, version),
        since=head.since,
        previous=head.previous,
        delta=delta,
        original=chain,
    )


def seal_message(key: bytes, text: str, *, workspace_id: str, conversation_id: str, seq: int, role: str) -> bytes:
    """A transcript message, bound to its conversation, position and role."""
    return _seal_v2(key, text, transcript_place(workspace_id, conversation_id, seq, role))


def seal_proposal(key: bytes, text: str, *, workspace_id: str, proposal_id: str) -> bytes:
    return _seal_v2(key, text, proposal_place(workspace_id, proposal_id))


def seal_v1(key: bytes, text: str, *, workspace_id: str, path: str) -> bytes:
    """A text in the format before v2: only tests and migrations of old data make one."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce + aead(key).encrypt(nonce, text.encode("utf-8"), associated_data(workspace_id, path))


# --- opening ------------------------------------------------------------------------------


def _failed(exc: BaseException | None = None, message: str = "") -> Exception:
    from memframe.core.errors import DecryptionFailed

    error = DecryptionFailed(message) if message else DecryptionFailed()
    error.__cause__ = exc
    return error


def _open(aead: Any, blob: bytes, place: bytes, legacy_ad: bytes | None, base: Any = None) -> str:
    """Open a text at `place` (see `_open_chained`), its text only."""
    return _utf8(_open_chained(aead, blob, place, legacy_ad, base)[0])


def _utf8(data: bytes) -> str:
    """The text of opened bytes: not UTF-8 is as undecryptable as a wrong tag."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _failed(exc) from exc


def _open_chained(
    aead: Any, blob: bytes, place: bytes, legacy_ad: bytes | None, base: Any = None
) -> tuple[bytes, bytes | None, tuple[int, int] | None]:
    """Open a v2 text at `place`; a v1 one only when `legacy_ad` (its v1 associated data) is given.
    `base(version, previous_hash)` returns the UTF-8 bytes of the version a delta is made against.
    Returns the text's UTF-8 bytes (checked where they are decoded: a delta's bases are bytes
    only), for a re-seal the hash of the ciphertext it stands for (else None), and for a delta the
    (prefix, suffix) bytes it keeps of its base, the version before (else None; see `_decode`).

    cryptography's exceptions are imported only when something fails: `memframe history -p`
    opens every revision and is measured against `git log -p` (so the header is read here
    directly, as `header` reads it, without making a `Header`)."""
    view = memoryview(blob)
    try:
        if len(blob) >= SEALED_EMPTY_BYTES and blob[:4] == MAGIC:
            try:
                plain = _decrypt_v2(aead.decrypt, blob, place)
            except Exception:
                if legacy_ad is None:  # else: a v1 nonce that happens to begin with the magic (2**-32)
                    raise
            else:
                _, _, size, previous = _HEADER.unpack_from(blob)
                return _decode(plain, size, previous, base)
        elif legacy_ad is None:
            if len(blob) >= V1_OVERHEAD:
                raise _failed(
                    None, "This text is not sealed in the format due here (old or altered); it was not opened."
                )
            raise ValueError("not a sealed text")
        if len(blob) < V1_OVERHEAD:
            raise ValueError("shorter than a sealed text")
        return aead.decrypt(view[:NONCE_BYTES], view[NONCE_BYTES:], legacy_ad), None, None
    except Exception as exc:
        from cryptography.exceptions import InvalidTag

        if not isinstance(exc, (InvalidTag, UnicodeDecodeError, ValueError)):
            raise
        raise _failed(exc) from exc


def _inflate(payload: bytes | memoryview, limit: int) -> bytes:
    import zlib

    try:
        unpack = zlib.decompressobj()
        data = unpack.decompress(payload, limit + 1)
        if unpack.unconsumed_tail or not unpack.eof:
            raise ValueError("the compressed text does not end where it should")
    except zlib.error as exc:
        raise ValueError("damaged compressed text") from exc
    return data


def _decode(
    plain: bytes, size: int, previous: bytes, base: Any = None
) -> tuple[bytes, bytes | None, tuple[int, int] | None]:
    """The text of an opened v2 plaintext (`size` and `previous` from its header): the payload is
    read in place, at an offset past its encoding byte (and a re-seal's hash), never copied first.
    With it, a re-seal's original hash, and a delta's (prefix, suffix): what it shares with its base
    at each end, as the writer found them (`_shared_ends`); a reader must not rely on their being
    the most it shares (`memframe.core.diffs.unified_diff_text` checks them)."""
    if not plain:
        raise ValueError("unknown payload encoding")
    encoding, at, original, ends = plain[0], 1, None, None
    if encoding == RESEAL:  # a re-seal: the original's hash, then an ordinary payload
        if len(plain) < 1 + HASH_BYTES + 1 or plain[1 + HASH_BYTES] == RESEAL:
            raise ValueError("damaged re-seal")
        original, encoding, at = plain[1 : 1 + HASH_BYTES], plain[1 + HASH_BYTES], 2 + HASH_BYTES
    if encoding == DELTA:
        data, ends = _undelta(plain, at, size, previous, base)
    elif encoding == RAW:
        data = plain[at:]
    elif encoding == ZLIB:
        data = _inflate(memoryview(plain)[at:], size)
    else:
        raise ValueError("unknown payload encoding")
    if len(data) != size:
        raise ValueError("the text is not the size its header says")
    return data, original, ends


def _undelta(plain: bytes, at: int, size: int, previous: bytes, base: Any) -> tuple[bytes, tuple[int, int]]:
    """The text of the delta that starts at `plain[at]`, against `base(version, previous)`, and the
    (prefix, suffix) it keeps of the base."""
    if len(plain) - at < _DELTA_HEAD.size:
        raise ValueError("damaged delta")
    base_version, prefix, suffix, packing = _DELTA_HEAD.unpack_from(plain, at)
    if base is None:
        raise ValueError("a delta opened without its earlier versions")
    if previous == NO_PREVIOUS:
        raise ValueError("a delta with no previous version")
    old = base(base_version, previous)
    if prefix + suffix > len(old) or packing not in (0, 1):
        raise ValueError("a delta that does not fit its base")
    at += _DELTA_HEAD.size
    middle = _inflate(memoryview(plain)[at:], size) if packing else plain[at:]
    return old[:prefix] + middle + old[len(old) - suffix :], (prefix, suffix)


def open_sealed(
    key: bytes,
    blob: bytes,
    *,
    workspace_id: str,
    path: str,
    version: int,
    legacy: bool = False,
    fetch: Callable[[int], bytes | None] | None = None,
) -> str:
    """Decrypt `version` of `path`, or fail with DecryptionFailed: never garbage text, never a crash.

    `legacy` admits a v1 text (sealed before the chain existed); callers pass it only where the
    document's protection has not begun (see RELIABILITY.md, "Sealing v2"). `fetch(version)`
    returns an earlier version's ciphertext, for a text stored as a delta (see `opener`).
    """
    return opener(key, workspace_id=workspace_id, path=path, fetch=fetch)(blob, version, legacy=legacy)


class Opener:
    """`open_sealed` for many versions of one file, the cipher made once: call it as
    `open_blob(blob, version, legacy=False, fetch=None)`. A missing blob (a deletion's) opens as "".

    `fetch(version)` (given here, or per call) returns a version's ciphertext (None if there is
    none): a delta's earlier versions are read through it, each checked against the hash its
    successor's header names (`chain_hash`). With `remember` (the default when a `fetch` is given),
    what was opened is kept (the last `2 * KEYFRAME_EVERY` versions, each with the exact ciphertext it
    came from, in this process's memory only), so reading a run of versions opens each once, and a
    key session's recall opens a new head with one decrypt; without it nothing is kept."""

    __slots__ = (
        "__weakref__",  # a capture keeps its `TextGrams` beside the key session's opener, for as long as it lives
        "_aead",
        "_fetch",
        "_legacy_ad",
        "_lock",
        "_opened",
        "_path",
        "_place",
        "_remember",
        "_sha256",
        "_workspace_id",
    )

    def __init__(
        self, key: bytes, *, workspace_id: str, path: str, fetch: Fetch | None = None, remember: bool | None = None
    ) -> None:
        import _thread  # `threading.Lock` itself; the interpreter has it loaded, `threading` costs start-up

        self._aead = aead(key)
        self._workspace_id, self._path = workspace_id, path
        self._legacy_ad = associated_data(workspace_id, path)
        self._place = file_place(workspace_id, path, 0)[:-1]  # + str(version): a version's place
        self._sha256 = _sha256()
        self._fetch = fetch
        self._remember = fetch is not None if remember is None else remember
        # version -> (ciphertext, UTF-8 text, chain hash or None: the ciphertext's SHA-256, made when
        # needed); one lock, as a key session's is shared by threads
        self._opened: dict[int, tuple[bytes, bytes, bytes | None]] = {}
        self._lock = _thread.allocate_lock()

    def __call__(self, blob: bytes | None, version: int, *, legacy: bool = False, fetch: Fetch | None = None) -> str:
        if blob is None:
            return ""
        return _utf8(self._open(blob, version, legacy, fetch or self._fetch)[0])

    def with_ends(
        self, blob: bytes | None, version: int, *, legacy: bool = False, fetch: Fetch | None = None
    ) -> tuple[str, tuple[int, int] | None]:
        """The text, as a call opens it, and what it is known to share with `version - 1` (its base,
        when it is stored as a delta): (prefix, suffix) in characters, for `unified_diff_text`'s `ends`.
        None when it was not opened from a delta here, or is not ASCII (the delta counts bytes)."""
        if blob is None:
            return "", None
        data, _, ends = self._open(blob, version, legacy, fetch or self._fetch)
        text = _utf8(data)
        return text, ends if ends is not None and len(text) == len(data) else None

    def chain_hash(self, blob: bytes, version: int, *, legacy: bool = False, fetch: Fetch | None = None) -> bytes:
        """What the next version's `prev` must be: the SHA-256 of `blob`, or for a re-seal, of the
        ciphertext it stands for (opening it, if it is one; a v2 text's payload encoding is sealed)."""
        digest = self._sha256(blob).digest()
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
        text as its base (or `chain_hash` asks), so a history stored whole is opened without hashing a
        byte. The ends are `_decode`'s, when this call decrypted a delta (not for a text held)."""
        opened = self._opened if self._remember else None
        if opened is not None:
            held = opened.get(version)
            if held is not None and held[0] == blob:
                return held[1], held[2], None

        def base(at: int, named: bytes) -> bytes:
            return self._base(at, named, fetch)

        place = self._place + str(version).encode()
        data, original, ends = _open_chained(self._aead, blob, place, self._legacy_ad if legacy else None, base)
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
        if (chain or self._sha256(older).digest()) != named:
            raise ValueError("the base of this delta is missing or not the version it names")
        return text

    def run_with_ends(
        self, run: Sequence[tuple[bytes | None, int, bool]], *, fetch: Fetch | None = None
    ) -> list[tuple[str, tuple[int, int] | None]]:
        """`with_ends` for each (blob, version, legacy) of `run`, oldest first: how `history -p` opens
        a keyframe run. The result is the same, text for text and failure for failure; what differs
        is the work. A v2 text that follows the version opened just before it is decrypted here, and
        a delta on that version is made against the text in hand (held to the hash its header names,
        as `_open` holds a base), with no cache look-ups and nothing kept but the run's last text
        (a later delta's base). Anything else (a first version, an old-format text, one that fails
        to decrypt) is opened as `with_ends` opens it, which says why not in its own words where it cannot."""
        fetch = fetch or self._fetch
        decrypt, sha256, place = self._aead.decrypt, self._sha256, self._place
        out: list[tuple[str, tuple[int, int] | None]] = []
        last = None  # the version opened just before, and its ciphertext, UTF-8 text and chain hash
        last_blob, last_data, last_chain = b"", b"", None

        def base(at: int, named: bytes) -> bytes:
            if at != last:
                return self._base(at, named, fetch)
            if (last_chain or sha256(last_blob).digest()) != named:
                raise ValueError("the base of this delta is missing or not the version it names")
            return last_data

        for blob, version, legacy in run:
            if blob is None:  # a deletion's: "" (and no delta's base)
                out.append(("", None))
                last = None
                continue
            plain = None
            if last == version - 1 and len(blob) >= SEALED_EMPTY_BYTES and blob[:4] == MAGIC:
                try:
                    plain = _decrypt_v2(decrypt, blob, place + str(version).encode())
                except Exception:  # (opened again below, which fails in its own words or opens it as v1)
                    plain = None
            if plain is None:
                data, original, ends = self._open(blob, version, legacy, fetch)
            else:
                _, _, size, previous = _HEADER.unpack_from(blob)
                try:
                    data, original, ends = _decode(plain, size, previous, base)
                except ValueError as exc:
                    raise _failed(exc) from exc
            text = _utf8(data)
            out.append((text, ends if ends is not None and len(text) == len(data) else None))
            # Only a v2 text is a delta's base here, as only a v2 one is kept by `_open`.
            last = version if blob[:4] == MAGIC else None
            last_blob, last_data, last_chain = blob, data, original
        if last is not None and self._remember:
            self._keep(last, last_blob, last_data, last_chain)
        return out


def _sha256() -> Callable[[bytes], Any]:
    """hashlib's SHA-256 when this process has loaded hashlib (a server, the frame: OpenSSL's is the
    fastest on long inputs), else the interpreter's own (`history -p`: loading OpenSSL for hashlib
    would cost more start-up than it saves on a thousand delta ciphertexts of ~150 bytes)."""
    import sys

    if "hashlib" not in sys.modules:
        try:
            from _sha256 import sha256  # Python 3.11 (3.12 on: _sha2)

            return sha256  # type: ignore[no-any-return]
        except ImportError:
            try:
                from _sha2 import sha256  # type: ignore[import-not-found,no-redef]

                return sha256  # type: ignore[no-any-return]
            except ImportError:
                pass
    import hashlib

    return hashlib.sha256


def opener(
    key: bytes, *, workspace_id: str, path: str, fetch: Fetch | None = None, remember: bool | None = None
) -> Opener:
    """An `Opener` for `path` of `workspace_id` (see there)."""
    return Opener(key, workspace_id=workspace_id, path=path, fetch=fetch, remember=remember)


def open_message(
    key: bytes, blob: bytes, *, workspace_id: str, conversation_id: str, seq: int, role: str, legacy: bool = False
) -> str:
    """A transcript message at position `seq`; `legacy` admits one sealed v1 under its old path."""
    legacy_ad = associated_data(workspace_id, f"conversations/{conversation_id}") if legacy else None
    return _open(aead(key), blob, transcript_place(workspace_id, conversation_id, seq, role), legacy_ad)


def open_transcript(
    key: bytes, workspace_id: str, conversation_id: str, rows: list[tuple[str, bytes]]
) -> list[tuple[str, str]]:
    """Open a conversation's (role, sealed) messages in order, each at its position and role; an
    old-format message opens only before the conversation's first new-format one (no downgrade)."""
    out: list[tuple[str, str]] = []
    chained = False
    for seq, (role, blob) in enumerate(rows, start=1):
        chained = chained or header(blob) is not None
        text = open_message(
            key,
            blob,
            workspace_id=workspace_id,
            conversation_id=conversation_id,
            seq=seq,
            role=role,
            legacy=not chained,
        )
        out.append((role, text))
    return out


def open_proposal(key: bytes, blob: bytes, *, workspace_id: str, proposal_id: str, legacy_path: str) -> str:
    """Proposals are short-lived: a v1 one (under its old path) still opens."""
    return _open(aead(key), blob, proposal_place(workspace_id, proposal_id), associated_data(workspace_id, legacy_path))


def key_check(key: bytes, workspace_id: str) -> str:
    """HMAC-SHA256(key, "memframe key check v1" + workspace): proves a key, useless for decrypting."""
    import hashlib
    import hmac

    return hmac.new(key, b"memframe key check v1\x00" + workspace_id.encode(), hashlib.sha256).hexdigest()


def key_fingerprint(key: bytes) -> str:
    """A short id that lets two people check they hold the same key, revealing nothing of it."""
    import hashlib

    return hashlib.sha256(b"memframe-key-id\x00" + key).hexdigest()[:16]
