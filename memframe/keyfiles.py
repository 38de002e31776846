"""Key files: a workspace key written to disk for its owner, or exported for another person.

A raw key file is JSON with the key in base64, readable only by its owner; an exported one wraps
the key with scrypt and AES-GCM under a passphrase, because it travels between people. Sealing
and opening versions is `crypto`'s; this module only carries the key itself.
"""

from __future__ import annotations

import base64
import json
import os

from memframe.crypto import KEY_BYTES, NONCE_BYTES, aead, key_fingerprint

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
    return base64.b64encode(data).decode("ascii")


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


def _key_from_file(raw: bytes, passphrase: str | None, source: str, expected_workspace: str | None) -> bytes:
    doc = json.loads(raw)
    if doc.get("format") != _KEYFILE_FORMAT:
        raise ValueError
    workspace = str(doc["workspace"])
    if expected_workspace is not None and workspace != expected_workspace:
        from memframe.core.errors import KeyFileError  # imported only here: `history -p` reads keys too

        raise KeyFileError(
            f"The {source} holds the key of workspace {workspace!r}, not {expected_workspace!r}; nothing was imported."
        )
    if "key" in doc:
        return base64.b64decode(doc["key"], validate=True)
    if not passphrase:
        from memframe.core.errors import KeyFileError

        raise KeyFileError(f"The {source} is protected by a passphrase; none was given.")
    salt = base64.b64decode(doc["salt"], validate=True)
    nonce = base64.b64decode(doc["nonce"], validate=True)
    wrapped = base64.b64decode(doc["wrapped"], validate=True)
    from cryptography.exceptions import InvalidTag

    try:
        kdf_key = _kdf(passphrase, salt, int(doc.get("n", 2**15)))
        return aead(kdf_key).decrypt(nonce, wrapped, workspace.encode())  # type: ignore[no-any-return]
    except InvalidTag:
        from memframe.core.errors import KeyFileError

        raise KeyFileError("Wrong passphrase for the workspace key.") from None


def key_file_is_wrapped(raw: bytes) -> bool:
    try:
        return "wrapped" in json.loads(raw)
    except ValueError:
        return False
