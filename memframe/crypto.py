"""Workspace keys and the sealing of memory text.

A workspace key is 32 random bytes that live with the person (a 0600 key file,
optionally wrapped by a passphrase), never with the server. Every stored
version is `nonce(12) || AES-256-GCM(ciphertext || tag)`, with associated data
binding the workspace id and the path, so a ciphertext moved to another
workspace or path fails to open instead of showing the wrong text.
"""

from __future__ import annotations

import base64
import json
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

# Start-up stays light (`memframe history -p` is measured against `git log -p`): hashlib, the
# errors and cryptography are imported where they are used, and random bytes come from
# os.urandom, which is what `secrets.token_bytes` returns.

KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16
#: Bytes a sealed text adds to its plaintext: the service derives sizes from this.
SEAL_OVERHEAD = NONCE_BYTES + TAG_BYTES
_KEYFILE_FORMAT = "memframe-key/1"
# scrypt for new files: 2**17 * 8 * 128 bytes = 128 MiB of memory, ~0.4 s: slow for guessing, quick
# for a person. A file records its own N, so files written with the older 2**15 still open.
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**17, 8, 1
#: The N a key file may name: powers of two from the oldest files' 2**15 up to 2**20 (1 GiB).
_SCRYPT_N_ALLOWED = frozenset(2**e for e in range(15, 21))
#: The shortest passphrase `key export` accepts: the file travels between people, so it meets guessers.
MIN_EXPORT_PASSPHRASE = 12


def _aesgcm(key: bytes):  # type: ignore[no-untyped-def]
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


def associated_data(workspace_id: str, path: str) -> bytes:
    """Bind a ciphertext to where it belongs; NUL cannot occur in either part."""
    return b"memframe/v1\x00" + workspace_id.encode() + b"\x00" + path.encode()


def new_key() -> bytes:
    return os.urandom(KEY_BYTES)


def seal(key: bytes, text: str, *, workspace_id: str, path: str) -> bytes:
    """Encrypt `text` with a fresh nonce; the result is all the server ever stores."""
    nonce = os.urandom(NONCE_BYTES)
    return nonce + _aesgcm(key).encrypt(nonce, text.encode("utf-8"), associated_data(workspace_id, path))


def open_sealed(key: bytes, blob: bytes, *, workspace_id: str, path: str) -> str:
    """Decrypt, or fail with DecryptionFailed: never garbage text, never a crash."""
    return opener(key, workspace_id=workspace_id, path=path)(blob)


def opener(key: bytes, *, workspace_id: str, path: str) -> Callable[[bytes | None], str]:
    """`open_sealed` for many blobs of one file: the cipher and the associated data are made once,
    and the blob is not copied. A missing blob (a deletion's) opens as ""."""
    aead = _aesgcm(key)
    ad = associated_data(workspace_id, path)

    def open_blob(blob: bytes | None) -> str:
        if blob is None:
            return ""
        try:
            if len(blob) < SEAL_OVERHEAD:
                raise ValueError("shorter than a sealed text")
            view = memoryview(blob)
            return aead.decrypt(view[:NONCE_BYTES], view[NONCE_BYTES:], ad).decode("utf-8")  # type: ignore[no-any-return]
        except Exception as exc:
            from cryptography.exceptions import InvalidTag

            if not isinstance(exc, (InvalidTag, UnicodeDecodeError, ValueError)):
                raise
            from memframe.core.errors import DecryptionFailed

            raise DecryptionFailed() from exc

    return open_blob


def plaintext_size(blob: bytes) -> int:
    """GCM preserves length, so the server knows a text's size without reading it."""
    return max(0, len(blob) - SEAL_OVERHEAD)


def content_hash(blob: bytes) -> str:
    """The only fingerprint of a text the server stores: SHA-256 of the ciphertext."""
    import hashlib

    return hashlib.sha256(blob).hexdigest()


def key_fingerprint(key: bytes) -> str:
    """A short id that lets two people check they hold the same key, revealing nothing of it."""
    import hashlib

    return hashlib.sha256(b"memframe-key-id\x00" + key).hexdigest()[:16]


# --- key files ---------------------------------------------------------------------------


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
        wrapped = _aesgcm(_kdf(passphrase, salt)).encrypt(nonce, key, workspace_id.encode())
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
    from memframe.core.errors import KeyFileError

    if expected_workspace is not None and workspace != expected_workspace:
        raise KeyFileError(
            f"The {source} holds the key of workspace {workspace!r}, not {expected_workspace!r}; nothing was imported."
        )
    if "key" in doc:
        return base64.b64decode(doc["key"], validate=True)
    if not passphrase:
        raise KeyFileError(f"The {source} is protected by a passphrase; none was given.")
    salt = base64.b64decode(doc["salt"], validate=True)
    nonce = base64.b64decode(doc["nonce"], validate=True)
    wrapped = base64.b64decode(doc["wrapped"], validate=True)
    from cryptography.exceptions import InvalidTag

    try:
        kdf_key = _kdf(passphrase, salt, int(doc.get("n", 2**15)))
        return _aesgcm(kdf_key).decrypt(nonce, wrapped, workspace.encode())  # type: ignore[no-any-return]
    except InvalidTag:
        raise KeyFileError("Wrong passphrase for the workspace key.") from None


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
