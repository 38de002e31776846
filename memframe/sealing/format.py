"""The sealed format: workspace keys, and how every text the server stores is sealed and opened.

A workspace key is 32 random bytes that live with the person (a 0600 key file, optionally wrapped
by a passphrase), never with the server. Everything the server stores of a text is sealed here,
with AES-256-GCM under that key.

Sealed format v2 (every new ciphertext)::

    offset  bytes  field
    0       4      magic  b"MF\\x00\\x02"  (the format's version is the last byte)
    4       4      since  big-endian u32: the first version of this document sealed v2
                          (0 for a transcript message or a proposal, which are not chained)
    8       4      size   big-endian u32: UTF-8 bytes of the text (what the server records as size)
    12      32     prev   SHA-256 of the previous version's ciphertext (the chain); 32 zero bytes
                          for version 1, after a deletion, and for unchained records
    44      12     nonce  fresh per seal
    56      n+17   AES-256-GCM(plaintext) || tag(16)
    plaintext = encoding(1) || payload: encoding 0 = the UTF-8 text, 1 = zlib(UTF-8 text),
    2 = a delta against the previous version (`memframe.sealing.delta`), each chosen only when it
    saves bytes (payload length never exceeds `size`); 3 = a re-seal (below)

A delta's base is always `version - 1`, and the base's ciphertext is the one whose SHA-256 is
`prev` in this header: both are authenticated, so a server cannot re-point a delta at another
text, and a delta whose base row was swapped fails to open (`open_version`'s `base` holds the
base to that hash). Everything stays ciphertext: the delta is inside the seal.

A re-seal (encoding 3, written only by `memframe admin compact`) is ``original(32) || encoding(1)
|| payload``: the same text as the ciphertext whose SHA-256 is `original`, sealed again (as a
delta where smaller) with that ciphertext's very header. The chain names ciphertexts: a
version's `prev` stays the hash of its predecessor's *original* ciphertext, and a re-sealed
predecessor answers for it with the `original` it carries, authenticated under the key (a server
cannot make one; it can only put the original back, which opens to the same text).

The associated data is ``b"memframe/v2\\x00" + place + b"\\x00" + header(44 bytes)``, so the
header is authenticated with the text. `place` says where the text belongs:

* a file version: ``b"file\\x00" workspace \\x00 path \\x00 version``: a row copied to another
  version, path or workspace fails to open, and `prev` chains each version to the exact
  ciphertext before it (checked by `memframe verify`, and by the server as each version arrives);
* a transcript message: ``b"transcript\\x00" workspace \\x00 conversation \\x00 seq \\x00 role``,
  a namespace no note path can take, so a message cannot be swapped into a note, reordered or
  dropped from the middle;
* a proposal: ``b"proposal\\x00" workspace \\x00 proposal id``;
* a key rotation's record: ``b"rotation\\x00" workspace \\x00 rotation number``.

A sealed empty text is exactly `SEALED_EMPTY_BYTES` (73) bytes: what a Clear must send.

Format v1 (before v2) is ``nonce(12) || AES-256-GCM(text) || tag`` with associated data
``b"memframe/v1\\x00" workspace \\x00 path``. It opens only where the caller says a legacy text is
legitimate (`legacy_ad` given): the rule, "no v1 text at or after a document's first v2 version",
is applied by the callers and stated in RELIABILITY.md.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections.abc import Callable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memframe.core.errors import DecryptionFailed
from memframe.sealing import delta

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
_MAX_U32 = 2**32 - 1
_HEADER = struct.Struct(">4sII32s")

#: `(version, hash named) -> UTF-8 text`: how a delta's base is found. It must return the text of
#: the ciphertext whose chain hash is the one named, or raise ValueError.
Base = Callable[[int, bytes], bytes]


def aead(key: bytes) -> AESGCM:
    """AES-256-GCM with `key`; every encryption and decryption in memframe is made through here."""
    return AESGCM(key)


def new_key() -> bytes:
    return os.urandom(KEY_BYTES)


def key_check(key: bytes, workspace_id: str) -> str:
    """HMAC-SHA256(key, "memframe key check v1" + workspace): proves a key, useless for decrypting."""
    return hmac.new(key, b"memframe key check v1\x00" + workspace_id.encode(), hashlib.sha256).hexdigest()


def key_fingerprint(key: bytes) -> str:
    """A short id that lets two people check they hold the same key, revealing nothing of it."""
    return hashlib.sha256(b"memframe-key-id\x00" + key).hexdigest()[:16]


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


def rotation_place(workspace_id: str, number: int) -> bytes:
    """A key rotation's record (which heads were re-sealed, which versions forgotten)."""
    return b"rotation\x00" + workspace_id.encode() + b"\x00" + str(number).encode()


def source_place(workspace_id: str, path: str, version: int) -> bytes:
    """A version's source note: the name of the file its text was imported from."""
    return b"source\x00" + workspace_id.encode() + b"\x00" + path.encode() + b"\x00" + str(version).encode()


def associated_data(workspace_id: str, path: str) -> bytes:
    """The v1 associated data (workspace and path only), for opening texts sealed before v2."""
    return b"memframe/v1\x00" + workspace_id.encode() + b"\x00" + path.encode()


def _ad_v2(place: bytes, header: bytes) -> bytes:
    return b"memframe/v2\x00" + place + b"\x00" + header


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
    return hashlib.sha256(blob).hexdigest()


def chain_link(previous: bytes | None, version: int, *, since: int | None = None) -> tuple[int, bytes]:
    """(since, prev) for sealing `version` after the ciphertext `previous` (None: none, or a deletion).

    One hash per save: the predecessor's ciphertext, never a walk of the history. A v2
    predecessor passes its `since` on; a v1 one makes this version the first v2 one; after a
    deletion the caller's `since` (what it knows of the document) is kept, else this version.
    """
    if previous is None:
        return (since if since is not None and 0 < since <= version else version), NO_PREVIOUS
    head = header(previous)
    return (version if head is None else head.since), hashlib.sha256(previous).digest()


# --- sealing ------------------------------------------------------------------------------


def seal_v2(
    key: bytes,
    text: str,
    place: bytes,
    *,
    since: int = 0,
    previous: bytes = NO_PREVIOUS,
    base: tuple[int, bytes] | None = None,
    original: bytes | None = None,
) -> bytes:
    """`text` sealed v2 at `place` (a transcript message or a proposal is only this: unchained)."""
    data = text.encode("utf-8")
    if len(data) > _MAX_U32 or not 0 <= since <= _MAX_U32 or len(previous) != HASH_BYTES:
        raise ValueError("cannot seal this text")
    payload, encoding = _payload(data, base)
    if original is not None:  # a re-seal: the original's hash, then the payload as it would be
        if len(original) != HASH_BYTES:
            raise ValueError("cannot seal this text")
        payload, encoding = original + bytes([encoding]) + payload, RESEAL
    head = _HEADER.pack(MAGIC, since, len(data), previous)
    nonce = os.urandom(NONCE_BYTES)
    return head + nonce + aead(key).encrypt(nonce, bytes([encoding]) + payload, _ad_v2(place, head))


#: A delta at most this fraction of its text is taken without trying zlib on the whole text, which
#: costs more time than the few bytes it could save over so small a delta.
_SMALL_DELTA = 8


def _payload(data: bytes, base: tuple[int, bytes] | None) -> tuple[bytes, int]:
    """(payload, encoding): a delta against the base version's text where it is under an eighth of
    the text, else the smallest of raw, zlib and (given a base) a delta."""
    edit = None if base is None else delta.encode(base[0], base[1], data)
    if edit is not None and len(edit) * _SMALL_DELTA <= len(data):
        return edit, DELTA
    payload, encoding = data, RAW
    packed = delta.compress(data)
    if packed is not None:
        payload, encoding = packed, ZLIB
    if edit is not None and len(edit) < len(payload):
        payload, encoding = edit, DELTA
    return payload, encoding


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
) -> bytes:
    """Seal `text` as `version` of `path`, chained onto `previous`, the ciphertext it follows.

    `previous` is None for version 1 and after a deletion (then `since` carries the document's
    protection start, if the caller knows it). With `previous_text` (the text `previous` opens
    to), the version may be sealed as a delta against it, when that is smaller and `version` is
    not a keyframe; its readers then need a `fetch` of earlier versions (`memframe.sealing.opener`).
    An empty `previous_text` (a Clear's revision) is never a base: the version after a Clear is
    whole, so no chain reaches past it. The result is all the server ever stores.
    """
    if version < 1:
        raise ValueError("versions start at 1")
    first, prev = chain_link(previous, version, since=since)
    base = None
    if previous is not None and previous_text and not delta.keyframe(version) and header(previous):
        base = (version - 1, previous_text.encode("utf-8"))
    return seal_v2(key, text, file_place(workspace_id, path, version), since=first, previous=prev, base=base)


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
    base = None
    if previous_text and head.previous != NO_PREVIOUS and not delta.keyframe(version):
        base = (version - 1, previous_text.encode("utf-8"))
    place = file_place(workspace_id, path, version)
    return seal_v2(key, text, place, since=head.since, previous=head.previous, base=base, original=chain)


def seal_v1(key: bytes, text: str, *, workspace_id: str, path: str) -> bytes:
    """A text in the format before v2: only tests and migrations of old data make one."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce + aead(key).encrypt(nonce, text.encode("utf-8"), associated_data(workspace_id, path))


# --- opening ------------------------------------------------------------------------------


def failed(exc: BaseException | None = None, message: str = "") -> DecryptionFailed:
    """The one error of a text that does not open: never garbage text, never a crash."""
    error = DecryptionFailed(message) if message else DecryptionFailed()
    error.__cause__ = exc
    return error


def utf8(data: bytes) -> str:
    """The text of opened bytes: not UTF-8 is as undecryptable as a wrong tag."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise failed(exc) from exc


def open_version(
    cipher: AESGCM, blob: bytes, place: bytes, legacy_ad: bytes | None, base: Base | None = None
) -> tuple[bytes, bytes | None, tuple[int, int] | None]:
    """Open a v2 text at `place`; a v1 one only when `legacy_ad` (its v1 associated data) is given.
    `base(version, previous_hash)` returns the UTF-8 bytes of the version a delta is made against.
    Returns the text's UTF-8 bytes (checked where they are decoded: a delta's bases are bytes
    only), for a re-seal the hash of the ciphertext it stands for (else None), and for a delta the
    (prefix, suffix) bytes it keeps of its base (else None). Anything that does not open is
    DecryptionFailed."""
    try:
        if len(blob) >= SEALED_EMPTY_BYTES and blob[:4] == MAGIC:
            nonce, sealed = blob[HEADER_BYTES : HEADER_BYTES + NONCE_BYTES], blob[HEADER_BYTES + NONCE_BYTES :]
            try:
                plain = cipher.decrypt(nonce, sealed, _ad_v2(place, blob[:HEADER_BYTES]))
            except (InvalidTag, ValueError):
                if legacy_ad is None:  # else: a v1 nonce that happens to begin with the magic (2**-32)
                    raise
            else:
                _, _, size, previous = _HEADER.unpack_from(blob)
                return _decode(plain, size, previous, base)
        elif legacy_ad is None:
            if len(blob) >= V1_OVERHEAD:
                raise failed(
                    None, "This text is not sealed in the format due here (old or altered); it was not opened."
                )
            raise ValueError("not a sealed text")
        if len(blob) < V1_OVERHEAD:
            raise ValueError("shorter than a sealed text")
        return cipher.decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], legacy_ad), None, None
    except (InvalidTag, ValueError) as exc:
        raise failed(exc) from exc


def _decode(
    plain: bytes, size: int, previous: bytes, base: Base | None
) -> tuple[bytes, bytes | None, tuple[int, int] | None]:
    """The text of an opened v2 plaintext (`size` and `previous` from its header), with a re-seal's
    original hash and a delta's (prefix, suffix) (see `open_version`)."""
    if not plain:
        raise ValueError("unknown payload encoding")
    encoding, at, original, ends = plain[0], 1, None, None
    if encoding == RESEAL:  # a re-seal: the original's hash, then an ordinary payload
        if len(plain) < 1 + HASH_BYTES + 1 or plain[1 + HASH_BYTES] == RESEAL:
            raise ValueError("damaged re-seal")
        original, encoding, at = plain[1 : 1 + HASH_BYTES], plain[1 + HASH_BYTES], 2 + HASH_BYTES
    if encoding == DELTA:
        if base is None:
            raise ValueError("a delta opened without its earlier versions")
        if previous == NO_PREVIOUS:
            raise ValueError("a delta with no previous version")
        data, ends = delta.decode(plain, at, size, lambda version: base(version, previous))
    elif encoding == RAW:
        data = plain[at:]
    elif encoding == ZLIB:
        data = delta.inflate(memoryview(plain)[at:], size)
    else:
        raise ValueError("unknown payload encoding")
    if len(data) != size:
        raise ValueError("the text is not the size its header says")
    return data, original, ends
