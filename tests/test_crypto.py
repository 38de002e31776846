"""Encryption promises: AES-256-GCM, fresh nonces, bound to workspace and path, clear failures."""

from __future__ import annotations

import os
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memframe import crypto
from memframe.core.errors import DecryptionFailed, KeyFileError

KEY = bytes(range(32))


def test_round_trip_and_size_is_derivable_without_the_key() -> None:
    blob = crypto.seal(KEY, "Grüße\n", workspace_id="w", path="p")
    assert crypto.open_sealed(KEY, blob, workspace_id="w", path="p") == "Grüße\n"
    assert crypto.plaintext_size(blob) == len("Grüße\n".encode())


def test_fresh_nonce_per_version() -> None:
    a = crypto.seal(KEY, "same", workspace_id="w", path="p")
    b = crypto.seal(KEY, "same", workspace_id="w", path="p")
    assert a[:12] != b[:12] and a != b
    assert crypto.content_hash(a) != crypto.content_hash(b)


def test_content_hash_is_sha256_of_ciphertext() -> None:
    import hashlib

    blob = crypto.seal(KEY, "x", workspace_id="w", path="p")
    assert crypto.content_hash(blob) == hashlib.sha256(blob).hexdigest()


@pytest.mark.parametrize(
    ("key", "workspace", "path"),
    [(bytes(32), "w", "p"), (KEY, "other", "p"), (KEY, "w", "other/path")],
    ids=["wrong-key", "moved-workspace", "moved-path"],
)
def test_wrong_key_or_moved_ciphertext_fails_clearly(key: bytes, workspace: str, path: str) -> None:
    blob = crypto.seal(KEY, "secret", workspace_id="w", path="p")
    with pytest.raises(DecryptionFailed) as err:
        crypto.open_sealed(key, blob, workspace_id=workspace, path=path)
    assert "secret" not in str(err.value)


@pytest.mark.fuzz
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_flipped_byte_is_decryption_failed(data: st.DataObject) -> None:
    blob = bytearray(crypto.seal(KEY, "memory text", workspace_id="w", path="p"))
    i = data.draw(st.integers(0, len(blob) - 1))
    blob[i] ^= data.draw(st.integers(1, 255))
    with pytest.raises(DecryptionFailed):
        crypto.open_sealed(KEY, bytes(blob), workspace_id="w", path="p")


@pytest.mark.parametrize("blob", [b"", b"short", bytes(27)])
def test_truncated_ciphertext_is_decryption_failed(blob: bytes) -> None:
    with pytest.raises(DecryptionFailed):
        crypto.open_sealed(KEY, blob, workspace_id="w", path="p")


def test_key_file_plain_and_wrapped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    raw = crypto.encode_key_file(KEY, "w")
    assert crypto.decode_key_file(raw) == KEY and not crypto.key_file_is_wrapped(raw)
    wrapped = crypto.encode_key_file(KEY, "w", "correct horse")
    assert crypto.key_file_is_wrapped(wrapped)
    assert KEY.hex() not in wrapped.decode() and "correct horse" not in wrapped.decode()
    assert crypto.decode_key_file(wrapped, "correct horse") == KEY
    with pytest.raises(KeyFileError, match="Wrong passphrase"):
        crypto.decode_key_file(wrapped, "wrong")
    with pytest.raises(KeyFileError, match="passphrase"):
        crypto.decode_key_file(wrapped, None)


@pytest.mark.parametrize("raw", [b"", b"{", b'{"format": "other"}', b'{"format": "memframe-key/1"}'])
def test_damaged_key_file(raw: bytes) -> None:
    with pytest.raises(KeyFileError, match="damaged"):
        crypto.decode_key_file(raw)


def test_private_file_is_0600(tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "keys" / "k.key"
    old = os.umask(0)
    try:
        crypto.write_private_file(target, b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert not list(target.parent.glob("*.tmp*"))


def test_new_key_files_use_scrypt_n_2_17_and_old_ones_still_open() -> None:
    import base64
    import json
    import os

    wrapped = json.loads(crypto.encode_key_file(KEY, "w", "correct horse battery"))
    assert (wrapped["kdf"], wrapped["n"]) == ("scrypt", 2**17)
    # A file written before the bump: N = 2**15, which the file itself records.
    salt, nonce = os.urandom(16), os.urandom(12)
    old = dict(wrapped, n=2**15, salt=base64.b64encode(salt).decode(), nonce=base64.b64encode(nonce).decode())
    old["wrapped"] = base64.b64encode(
        crypto._aesgcm(crypto._kdf("old passphrase", salt, 2**15)).encrypt(nonce, KEY, b"w")
    ).decode()
    assert crypto.decode_key_file(json.dumps(old).encode(), "old passphrase") == KEY
    with pytest.raises(KeyFileError, match="damaged"):  # a cost outside the known range is not run
        crypto.decode_key_file(json.dumps(dict(old, n=2**30)).encode(), "old passphrase")


def test_a_key_file_of_another_workspace_is_refused_in_one_line() -> None:
    for raw in (crypto.encode_key_file(KEY, "team"), crypto.encode_key_file(KEY, "team", "correct horse battery")):
        with pytest.raises(KeyFileError) as refused:
            crypto.decode_key_file(raw, "correct horse battery", source="key file x.mfkey", workspace_id="default")
        assert str(refused.value) == (
            "The key file x.mfkey holds the key of workspace 'team', not 'default'; nothing was imported."
        )
        assert crypto.decode_key_file(raw, "correct horse battery", workspace_id="team") == KEY


def test_an_export_passphrase_needs_twelve_characters() -> None:
    from memframe.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="at least 12 characters"):
        crypto.check_export_passphrase("x" * 11)
    crypto.check_export_passphrase("x" * 12)
