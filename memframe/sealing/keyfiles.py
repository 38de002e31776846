"""Key files: a workspace key written to disk for its owner, or exported for another person.

A raw key file is JSON with the key in base64, readable only by its owner (mode 0600, under the
user's data directory); an exported one wraps the key with scrypt and AES-GCM under a passphrase,
because it travels between people. Sealing and opening versions is `memframe.sealing.format`'s;
this module only carries the key itself.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidTag

from memframe import paths, settings
from memframe.core.errors import InvalidInput, KeyFileError
from memframe.sealing.format import KEY_BYTES, NONCE_BYTES, aead, key_fingerprint

if TYPE_CHECKING:  # pathlib loads with the first key file written or loaded, not when `history -p` reads one
    from pathlib import Path

#: Asks the person for a passphrase: the question in, the answer out.
PassphrasePrompt = Callable[[str], str]

_KEYFILE_FORMAT = "memframe-key/1"
# scrypt for new files: 2**17 * 8 * 128 bytes = 128 MiB of memory: slow for guessing, quick for a
# person. A file records its own N, so files written with the older 2**15 still open.
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**17, 8, 1
#: The N a key file may name: powers of two from the oldest files' 2**15 up to 2**20 (1 GiB).
_SCRYPT_N_ALLOWED = frozenset(2**e for e in range(15, 21))
#: The shortest passphrase `key export` accepts: the file travels between people, so it meets guessers.
MIN_EXPORT_PASSPHRASE = 12


def _kdf(passphrase: str, salt: bytes, n: int = _SCRYPT_N) -> bytes:
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
        raise InvalidInput(
            f"The passphrase must be at least {MIN_EXPORT_PASSPHRASE} characters long; nothing was written."
        )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
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
    return (json.dumps(doc, indent=2) + "\n").encode()


def decode_key_file(
    raw: bytes, passphrase: str | None = None, *, source: str = "key file", workspace_id: str | None = None
) -> bytes:
    """Read a key file; a wrong passphrase, a damaged file, or (given `workspace_id`) another
    workspace's file is a KeyFileError, one line."""
    from_damaged: BaseException | None = None
    try:
        key = _key_from_file(raw, passphrase, source, workspace_id)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        key, from_damaged = b"", exc
    if len(key) != KEY_BYTES:
        raise KeyFileError(f"The {source} is damaged or not a memframe key file.") from from_damaged
    return key


def _key_from_file(raw: bytes, passphrase: str | None, source: str, expected_workspace: str | None) -> bytes:
    doc: Any = json.loads(raw)
    if doc.get("format") != _KEYFILE_FORMAT:
        raise ValueError
    workspace = str(doc["workspace"])
    if expected_workspace is not None and workspace != expected_workspace:
        raise KeyFileError(
            f"The {source} holds the key of workspace {workspace!r}, not {expected_workspace!r}; nothing was imported."
        )
    if "key" in doc:
        return _unb64(doc["key"])
    if not passphrase:
        raise KeyFileError(f"The {source} is protected by a passphrase; none was given.")
    salt, nonce, wrapped = _unb64(doc["salt"]), _unb64(doc["nonce"]), _unb64(doc["wrapped"])
    try:
        return aead(_kdf(passphrase, salt, int(doc.get("n", 2**15)))).decrypt(nonce, wrapped, workspace.encode())
    except InvalidTag:
        raise KeyFileError("Wrong passphrase for the workspace key.") from None


def key_file_is_wrapped(raw: bytes) -> bool:
    try:
        return "wrapped" in json.loads(raw)
    except (ValueError, TypeError):
        return False


# --- this person's key files ----------------------------------------------------------------


def write_key(
    key: bytes,
    workspace_id: str,
    *,
    remote_url: str | None = None,
    passphrase: str | None = None,
    overwrite: bool = False,
) -> Path:
    """Store a workspace key for this person: 0600, wrapped when a passphrase is given."""
    target = paths.key_file(workspace_id, remote_url)
    if target.exists() and not overwrite:
        raise InvalidInput(f"A key for {workspace_id!r} already exists at {target}; nothing was changed.")
    paths.write_private_file(target, encode_key_file(key, workspace_id, passphrase))
    return target


def load_key(workspace_id: str, *, remote_url: str | None = None, prompt: PassphrasePrompt | None = None) -> bytes:
    """The workspace key from its key file; a passphrase comes from the env or a prompt."""
    source = paths.key_file(workspace_id, remote_url)
    try:
        raw = source.read_bytes()
    except OSError as exc:
        raise _key_unreadable(workspace_id, source, exc) from None
    passphrase = None
    if key_file_is_wrapped(raw):
        passphrase = _passphrase(prompt, f"Passphrase for workspace {workspace_id!r}: ")
    return decode_key_file(raw, passphrase, source=f"key file {source}")


# --- a rotation's new key: pending until the server has acknowledged it ---------------------------


def pending_key_file(workspace_id: str, remote_url: str | None = None) -> Path:
    """Where a rotation keeps its new key before the upload: beside the key file."""
    current = paths.key_file(workspace_id, remote_url)
    return current.with_name(current.name + ".pending")


def key_is_wrapped(workspace_id: str, remote_url: str | None = None) -> bool:
    try:
        return key_file_is_wrapped(paths.key_file(workspace_id, remote_url).read_bytes())
    except OSError:
        return False


def write_pending_key(key: bytes, workspace_id: str, *, remote_url: str | None = None, passphrase: str | None) -> Path:
    """The new key, written (0600, fsync'd) before anything is uploaded: no crash loses its only copy."""
    target = pending_key_file(workspace_id, remote_url)
    paths.write_private_file(target, encode_key_file(key, workspace_id, passphrase))
    return target


def load_pending_key(
    workspace_id: str, *, remote_url: str | None = None, prompt: PassphrasePrompt | None = None
) -> bytes | None:
    """A rotation's new key not yet made current (a rotation was interrupted), or None."""
    source = pending_key_file(workspace_id, remote_url)
    try:
        raw = source.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise KeyFileError(f"Cannot read the pending key file {source}: {exc.strerror}.") from None
    passphrase = (
        _passphrase(prompt, f"Passphrase for workspace {workspace_id!r}: ") if key_file_is_wrapped(raw) else None
    )
    return decode_key_file(raw, passphrase, source=f"pending key file {source}")


def promote_pending_key(workspace_id: str, *, remote_url: str | None = None) -> Path:
    """Make the pending key the key (one atomic rename over the old key file, which is gone)."""
    target = paths.key_file(workspace_id, remote_url)
    os.replace(pending_key_file(workspace_id, remote_url), target)
    _sync_folder(target)
    return target


def discard_pending_key(workspace_id: str, *, remote_url: str | None = None) -> None:
    """A pending key the server never took (the rotation did not land): removed."""
    pending_key_file(workspace_id, remote_url).unlink(missing_ok=True)


def _sync_folder(path: Path) -> None:
    """The rename itself made durable."""
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def passphrase_for(
    workspace_id: str, *, remote_url: str | None = None, prompt: PassphrasePrompt | None = None
) -> str | None:
    """The passphrase the workspace's key file is wrapped with (None if it is not wrapped)."""
    if not key_is_wrapped(workspace_id, remote_url):
        return None
    return _passphrase(prompt, f"Passphrase to wrap the new key of {workspace_id!r} (the key file's own): ")


def _passphrase(prompt: PassphrasePrompt | None, question: str) -> str | None:
    value = settings.current().passphrase  # $MEMFRAME_PASSPHRASE
    if value:
        return value
    if prompt is None:
        return None
    return prompt(question) or None


def _key_unreadable(workspace_id: str, source: Path, exc: OSError) -> KeyFileError:
    if isinstance(exc, FileNotFoundError):
        return KeyFileError(
            f"No key for workspace {workspace_id!r} on this machine (looked in {source}). "
            "Run 'memframe init' for a new workspace, or 'memframe key import' with a key a member exported."
        )
    return KeyFileError(f"Cannot read the key file {source}: {exc.strerror}.")
