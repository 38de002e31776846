"""Workspace keys and the sealing of memory text.

A workspace key is 32 random bytes that live with the person (a 0600 key file,
optionally wrapped by a passphrase), never with the server. Every stored
version is `nonce(12) || AES-256-GCM(ciphertext || tag)`, with associated data
binding the workspace id and the path, so a ciphertext moved to another
workspace or path fails to open instead of showing the wrong text.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from memframe.core.errors import DecryptionFailed, KeyFileError

KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
#: Bytes a sealed text adds to its plaintext: the service derives sizes from this.
SEAL_OVERHEAD = NONCE_BYTES + TAG_BYTES
_KEYFILE_FORMAT = "memframe-key/1"
# scrypt: 2**15 * 8 * 128 bytes = 32 MiB of memory, ~0.1 s: slow for guessing, quick for a person.
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**15, 8, 1


def _aesgcm(key: bytes):  # type: ignore[no-untyped-def]
    # Imported lazily: cryptography's import costs start-up time the CLI's cheap commands avoid.
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    return AESGCM(key)


def associated_data(workspace_id: str, path: str) -> bytes:
    """Bind a ciphertext to where it belongs; NUL cannot occur in either part."""
    return b"memframe/v1\x00" + workspace_id.encode() + b"\x00" + path.encode()


def new_key() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def seal(key: bytes, text: str, *, workspace_id: str, path: str) -> bytes:
    """Encrypt `text` with a fresh nonce; the result is all the server ever stores."""
    nonce = secrets.token_bytes(NONCE_BYTES)
    return nonce + _aesgcm(key).encrypt(nonce, text.encode("utf-8"), associated_data(workspace_id, path))


def open_sealed(key: bytes, blob: bytes, *, workspace_id: str, path: str) -> str:
    """Decrypt, or fail with DecryptionFailed: never garbage text, never a crash."""
    from cryptography.exceptions import InvalidTag

    if len(blob) < SEAL_OVERHEAD:
        raise DecryptionFailed()
    try:
        plain = _aesgcm(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], associated_data(workspace_id, path))
        return plain.decode("utf-8")
    except (InvalidTag, UnicodeDecodeError, ValueError) as exc:
        raise DecryptionFailed() from exc


def plaintext_size(blob: bytes) -> int:
    """GCM preserves length, so the server knows a text's size without reading it."""
    return max(0, len(blob) - SEAL_OVERHEAD)


def content_hash(blob: bytes) -> str:
    """The only fingerprint of a text the server stores: SHA-256 of the ciphertext."""
    return hashlib.sha256(blob).hexdigest()


def key_fingerprint(key: bytes) -> str:
    """A short id that lets two people check they hold the same key, revealing nothing of it."""
    return hashlib.sha256(b"memframe-key-id\x00" + key).hexdigest()[:16]


# --- key files ---------------------------------------------------------------------------


@dataclass(frozen=True)
class KeyFile:
    """A key file's contents: either the raw key or one wrapped by a passphrase."""

    workspace_id: str
    wrapped: bool
    data: dict[str, str]


def _kdf(passphrase: str, salt: bytes) -> bytes:
    return hashlib.scrypt(
        passphrase.encode("utf-8"),
        salt=salt,
        n=_SCRYPT_N,
        r=_SCRYPT_R,
        p=_SCRYPT_P,
        maxmem=64 * 1024 * 1024,
        dklen=KEY_BYTES,
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
        salt = secrets.token_bytes(16)
        nonce = secrets.token_bytes(NONCE_BYTES)
        wrapped = _aesgcm(_kdf(passphrase, salt)).encrypt(nonce, key, workspace_id.encode())
        doc.update(kdf="scrypt", n=_SCRYPT_N, salt=_b64(salt), nonce=_b64(nonce), wrapped=_b64(wrapped))
    else:
        doc.update(key=_b64(key))
    return (json.dumps(doc, indent=2) + "\n").encode()


def decode_key_file(raw: bytes, passphrase: str | None = None, *, source: str = "key file") -> bytes:
    """Read a key file; a wrong passphrase or a damaged file is a KeyFileError, one line.

    A raw key file needs only base64: cryptography is imported for a wrapped one alone,
    so opening the frame on an unwrapped key does not load it before the first paint.
    """
    try:
        doc = json.loads(raw)
        if doc.get("format") != _KEYFILE_FORMAT:
            raise ValueError
        workspace = str(doc["workspace"])
        if "key" in doc:
            key = base64.b64decode(doc["key"], validate=True)
        else:
            if not passphrase:
                raise KeyFileError(f"The {source} is protected by a passphrase; none was given.")
            salt = base64.b64decode(doc["salt"], validate=True)
            nonce = base64.b64decode(doc["nonce"], validate=True)
            wrapped = base64.b64decode(doc["wrapped"], validate=True)
            from cryptography.exceptions import InvalidTag

            try:
                key = _aesgcm(_kdf(passphrase, salt)).decrypt(nonce, wrapped, workspace.encode())
            except InvalidTag:
                raise KeyFileError("Wrong passphrase for the workspace key.") from None
    except KeyFileError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise KeyFileError(f"The {source} is damaged or not a memframe key file.") from exc
    if len(key) != KEY_BYTES:
        raise KeyFileError(f"The {source} is damaged or not a memframe key file.")
    return key


def key_file_is_wrapped(raw: bytes) -> bool:
    try:
        return "wrapped" in json.loads(raw)
    except ValueError:
        return False


def write_private_file(path: Path, data: bytes) -> None:
    """Create a file readable only by its owner, atomically: no window where it is 0644."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
