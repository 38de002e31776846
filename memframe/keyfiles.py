"""Key files: a workspace key written to disk for its owner, or exported for another person.

A raw key file is JSON with the key in base64, readable only by its owner; an exported one wraps
the key with scrypt and AES-GCM under a passphrase, because it travels between people. Sealing
and opening versions is `crypto`'s; this module only carries the key itself.
"""

from __future__ import annotations

import os

from memframe.crypto import KEY_BYTES, NONCE_BYTES, aead, key_fingerprint

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing itself is not loaded at run time: `history -p` reads key files
    from typing import Any

_KEYFILE_FORMAT = "memframe-key/1"
# scrypt for new files: 2**17 * 8 * 128 bytes = 128 MiB of memory, ~0.4 s: slow for guessing, quick
# for a person. A file records its own N, so files written with the older 2**15 still open.
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**17, 8, 1
#: The N a key file may name: powers of two from the oldest files' 2**15 up to 2**20 (1 GiB).
_SCRYPT_N_ALLOWED = frozenset(2**e for e in range(15, 21))
#: The shortest passphrase `key export` accepts: the file travels between people, so it meets guessers.
MIN_EXPORT_PASSPHRASE = 12


def _kdf(passphrase: str, salt: bytes, n: int = _SCRYPT_N) -> bytes:
    import hashlib

    if n not in _SCRYPT_N_ALLOWED:
        raise ValueError("scrypt cost out of range")
    return hashlib.scrypt(
        passphrase.encode("utf-8"),
        salt=salt,
        n=n,
        r=_SCRYPT_R,
        p=_SCRYPT_P,
        maxmem=2 * 128 * _SCRYPT_R * n,
        dklen=KEY_BYTES,
    )


def check_export_passphrase(passphrase: str) -> None:
    """Refuse a passphrase too short to protect a key file that travels between people."""
    if len(passphrase) < MIN_EXPORT_PASSPHRASE:
        from memframe.core.errors import InvalidInput

        raise InvalidInput(
            f"The passphrase must be at least {MIN_EXPORT_PASSPHRASE} characters long; nothing was written."
        )


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode("ascii")


_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")


def _b64decode(text: str) -> bytes:
    """`base64.b64decode(text, validate=True)`; the base64 module imports `re` (for this check), so
    a well-formed value is checked by hand and decoded by binascii, and anything else goes to it."""
    body = text[:-2] if text.endswith("==") else text[:-1] if text.endswith("=") else text
    if text.isascii() and _B64_CHARS.issuperset(body):
        import binascii

        return binascii.a2b_base64(text, strict_mode=True)
    import base64

    return base64.b64decode(text, validate=True)


def encode_key_file(key: bytes, workspace_id: str, passphrase: str | None = None) -> bytes:
    """Serialise a key, wrapping it with scrypt + AES-GCM when a passphrase is given."""
    doc: dict[str, str | int] = {
        "format": _KEYFILE_FORMAT,
        "workspace": workspace_id,
        "fingerprint": key_fingerprint(key),
    }
    if passphrase:
        salt = os.urandom(16)
        nonce = os.urandom(NONCE_BYTES)
        wrapped = aead(_kdf(passphrase, salt)).encrypt(nonce, key, workspace_id.encode())
        doc.update(kdf="scrypt", n=_SCRYPT_N, salt=_b64(salt), nonce=_b64(nonce), wrapped=_b64(wrapped))
    else:
        doc.update(key=_b64(key))
    import json

    return (json.dumps(doc, indent=2) + "\n").encode()


def decode_key_file(
    raw: bytes, passphrase: str | None = None, *, source: str = "key file", workspace_id: str | None = None
) -> bytes:
    """Read a key file; a wrong passphrase, a damaged file, or (given `workspace_id`) another
    workspace's file is a KeyFileError, one line.

    A raw key file needs only json and base64: cryptography is imported for a wrapped one
    alone, so opening the frame on an unwrapped key does not load it before the first paint.
    """
    from_damaged: BaseException | None = None
    try:
        key = _key_from_file(raw, passphrase, source, workspace_id)
    except (ValueError, KeyError, TypeError) as exc:
        key, from_damaged = b"", exc
    if len(key) != KEY_BYTES:
        from memframe.core.errors import KeyFileError

        raise KeyFileError(f"The {source} is damaged or not a memframe key file.") from from_damaged
    return key


#: What may stand in a string of a file `_as_written` reads: JSON gives it back unchanged.
_PLAIN_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=._:-")


def _as_written(raw: bytes) -> dict[str, str] | None:
    """`json.loads(raw)` for a file laid out exactly as `encode_key_file` writes a raw key (string
    values of plain characters, two-space indent), without importing json (and `re`, which json
    imports): `history -p` reads a key on its short path. None for any other file: json reads it."""
    lines = raw.split(b"\n")
    if len(lines) < 3 or lines[0] != b"{" or lines[-2:] != [b"}", b""]:
        return None
    doc: dict[str, str] = {}
    last = len(lines) - 4  # the last name: no comma after it
    for at, line in enumerate(lines[1:-2]):
        if at != last:
            if not line.endswith(b","):
                return None
            line = line[:-1]
        name, sep, value = line.partition(b'": "')
        if not sep or not name.startswith(b'  "') or not value.endswith(b'"'):
            return None
        name, value = name[3:], value[:-1]
        if not (_PLAIN_CHARS.issuperset(name) and _PLAIN_CHARS.issuperset(value)):
            return None
        doc[name.decode("ascii")] = value.decode("ascii")
    return doc


def _loads(raw: bytes) -> Any:  # json.loads's answer: whatever the file holds
    doc = _as_written(raw)
    if doc is not None:
        return doc
    import json

    return json.loads(raw)


def _key_from_file(raw: bytes, passphrase: str | None, source: str, expected_workspace: str | None) -> bytes:
    doc = _loads(raw)
    if doc.get("format") != _KEYFILE_FORMAT:
        raise ValueError
    workspace = str(doc["workspace"])
    if expected_workspace is not None and workspace != expected_workspace:
        from memframe.core.errors import KeyFileError  # imported only here: `history -p` reads keys too

        raise KeyFileError(
            f"The {source} holds the key of workspace {workspace!r}, not {expected_workspace!r}; nothing was imported."
        )
    if "key" in doc:
        return _b64decode(doc["key"])
    if not passphrase:
        from memframe.core.errors import KeyFileError

        raise KeyFileError(f"The {source} is protected by a passphrase; none was given.")
    salt = _b64decode(doc["salt"])
    nonce = _b64decode(doc["nonce"])
    wrapped = _b64decode(doc["wrapped"])
    from cryptography.exceptions import InvalidTag

    try:
        kdf_key = _kdf(passphrase, salt, int(doc.get("n", 2**15)))
        return aead(kdf_key).decrypt(nonce, wrapped, workspace.encode())  # type: ignore[no-any-return]
    except InvalidTag:
        from memframe.core.errors import KeyFileError

        raise KeyFileError("Wrong passphrase for the workspace key.") from None


def key_file_is_wrapped(raw: bytes) -> bool:
    try:
        return "wrapped" in _loads(raw)  # type: ignore[operator]
    except ValueError:
        return False
