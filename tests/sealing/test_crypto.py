"""Encryption promises: AES-256-GCM, fresh nonces, bound to workspace and path, clear failures."""

from __future__ import annotations

import os
import stat

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memframe import paths, sealing
from memframe.core.errors import DecryptionFailed, KeyFileError
from memframe.sealing import keyfiles

KEY = bytes(range(32))


W, P = "w", "p"


def test_round_trip_and_size_is_derivable_without_the_key() -> None:
    blob = sealing.seal(KEY, "Grüße\n", workspace_id=W, path=P, version=1)
    assert sealing.open_sealed(KEY, blob, workspace_id=W, path=P, version=1) == "Grüße\n"
    assert sealing.plaintext_size(blob) == len("Grüße\n".encode())


def test_fresh_nonce_per_version() -> None:
    a = sealing.seal(KEY, "same", workspace_id=W, path=P, version=1)
    b = sealing.seal(KEY, "same", workspace_id=W, path=P, version=1)
    assert a[sealing.HEADER_BYTES :][:12] != b[sealing.HEADER_BYTES :][:12] and a != b
    assert sealing.content_hash(a) != sealing.content_hash(b)


def test_content_hash_is_sha256_of_ciphertext() -> None:
    import hashlib

    blob = sealing.seal(KEY, "x", workspace_id=W, path=P, version=1)
    assert sealing.content_hash(blob) == hashlib.sha256(blob).hexdigest()


@pytest.mark.parametrize(
    ("key", "workspace", "path", "version"),
    [(bytes(32), W, P, 1), (KEY, "other", P, 1), (KEY, W, "other/path", 1), (KEY, W, P, 2)],
    ids=["wrong-key", "moved-workspace", "moved-path", "copied-to-another-version"],
)
def test_wrong_key_or_moved_ciphertext_fails_clearly(key: bytes, workspace: str, path: str, version: int) -> None:
    blob = sealing.seal(KEY, "secret", workspace_id=W, path=P, version=1)
    with pytest.raises(DecryptionFailed) as err:
        sealing.open_sealed(key, blob, workspace_id=workspace, path=path, version=version)
    assert "secret" not in str(err.value)


def test_the_layout_is_the_documented_one() -> None:
    first = sealing.seal(KEY, "", workspace_id=W, path=P, version=1)
    assert len(first) == sealing.SEALED_EMPTY_BYTES == 73 and sealing.is_sealed_empty(first)
    assert first[:4] == b"MF\x00\x02" and first[12:44] == sealing.NO_PREVIOUS
    second = sealing.seal(KEY, "two", workspace_id=W, path=P, version=2, previous=first)
    head = sealing.header(second)
    assert head is not None and head.since == 1 and head.size == 3
    assert head.previous.hex() == sealing.content_hash(first)  # the chain: one hash of the predecessor
    assert len(second) == sealing.SEALED_EMPTY_BYTES + 3


def test_compressed_only_when_it_saves_bytes_and_size_stays_the_texts() -> None:
    text = "- the same line, again and again\n" * 200
    blob = sealing.seal(KEY, text, workspace_id=W, path=P, version=1)
    assert len(blob) < len(text) // 4 and sealing.plaintext_size(blob) == len(text.encode())
    assert sealing.open_sealed(KEY, blob, workspace_id=W, path=P, version=1) == text
    short = sealing.seal(KEY, "short", workspace_id=W, path=P, version=1)
    assert len(short) == sealing.SEALED_EMPTY_BYTES + 5  # raw: zlib would not save anything
    assert sealing.is_well_formed(blob) and sealing.is_well_formed(short)


def test_a_v1_text_opens_only_where_it_is_legitimate() -> None:
    old = sealing.seal_v1(KEY, "from before", workspace_id=W, path=P)
    assert sealing.open_sealed(KEY, old, workspace_id=W, path=P, version=7, legacy=True) == "from before"
    with pytest.raises(DecryptionFailed, match="format due here"):
        sealing.open_sealed(KEY, old, workspace_id=W, path=P, version=7)
    # the first v2 version after a v1 one starts the chain there
    nxt = sealing.seal(KEY, "new", workspace_id=W, path=P, version=8, previous=old)
    head = sealing.header(nxt)
    assert head is not None and head.since == 8 and head.previous.hex() == sealing.content_hash(old)


def test_transcript_messages_are_bound_to_position_and_role_not_to_any_path() -> None:
    blob = sealing.seal_message(KEY, "hello", workspace_id=W, conversation_id="c1", seq=2, role="user")
    assert sealing.open_message(KEY, blob, workspace_id=W, conversation_id="c1", seq=2, role="user") == "hello"
    for seq, role, cid in [(1, "user", "c1"), (2, "assistant", "c1"), (2, "user", "c2")]:
        with pytest.raises(DecryptionFailed):
            sealing.open_message(KEY, blob, workspace_id=W, conversation_id=cid, seq=seq, role=role)
    for version in (1, 2):  # never as a note, whatever its path
        with pytest.raises(DecryptionFailed):
            sealing.open_sealed(KEY, blob, workspace_id=W, path="conversations/c1", version=version, legacy=True)


def test_key_check_is_keyed_and_bound_to_the_workspace() -> None:
    check = sealing.key_check(KEY, W)
    assert len(check) == 64 and check != sealing.key_check(bytes(32), W) and check != sealing.key_check(KEY, "x")
    assert KEY.hex() not in check


@pytest.mark.fuzz
@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_flipped_byte_is_decryption_failed(data: st.DataObject) -> None:
    blob = bytearray(sealing.seal(KEY, "memory text", workspace_id=W, path=P, version=1))
    i = data.draw(st.integers(0, len(blob) - 1))
    blob[i] ^= data.draw(st.integers(1, 255))
    with pytest.raises(DecryptionFailed):
        sealing.open_sealed(KEY, bytes(blob), workspace_id=W, path=P, version=1, legacy=data.draw(st.booleans()))


@pytest.mark.parametrize("blob", [b"", b"short", bytes(27), bytes(72), b"MF\x00\x02" + bytes(69)])
def test_truncated_ciphertext_is_decryption_failed(blob: bytes) -> None:
    for legacy in (False, True):
        with pytest.raises(DecryptionFailed):
            sealing.open_sealed(KEY, blob, workspace_id=W, path=P, version=1, legacy=legacy)


def test_key_file_plain_and_wrapped(tmp_path) -> None:  # type: ignore[no-untyped-def]
    raw = keyfiles.encode_key_file(KEY, "w")
    assert keyfiles.decode_key_file(raw) == KEY and not keyfiles.key_file_is_wrapped(raw)
    wrapped = keyfiles.encode_key_file(KEY, "w", "correct horse")
    assert keyfiles.key_file_is_wrapped(wrapped)
    assert KEY.hex() not in wrapped.decode() and "correct horse" not in wrapped.decode()
    assert keyfiles.decode_key_file(wrapped, "correct horse") == KEY
    with pytest.raises(KeyFileError, match="Wrong passphrase"):
        keyfiles.decode_key_file(wrapped, "wrong")
    with pytest.raises(KeyFileError, match="passphrase"):
        keyfiles.decode_key_file(wrapped, None)


@pytest.mark.parametrize("raw", [b"", b"{", b'{"format": "other"}', b'{"format": "memframe-key/1"}'])
def test_damaged_key_file(raw: bytes) -> None:
    with pytest.raises(KeyFileError, match="damaged"):
        keyfiles.decode_key_file(raw)


def test_private_file_is_0600(tmp_path) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "keys" / "k.key"
    old = os.umask(0)
    try:
        paths.write_private_file(target, b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert not list(target.parent.glob("*.tmp*"))


def test_new_key_files_use_scrypt_n_2_17_and_old_ones_still_open() -> None:
    import base64
    import json
    import os

    wrapped = json.loads(keyfiles.encode_key_file(KEY, "w", "correct horse battery"))
    assert (wrapped["kdf"], wrapped["n"]) == ("scrypt", 2**17)
    # A file written before the bump: N = 2**15, which the file itself records.
    salt, nonce = os.urandom(16), os.urandom(12)
    old = dict(wrapped, n=2**15, salt=base64.b64encode(salt).decode(), nonce=base64.b64encode(nonce).decode())
    old["wrapped"] = base64.b64encode(
        sealing.aead(keyfiles._kdf("old passphrase", salt, 2**15)).encrypt(nonce, KEY, b"w")
    ).decode()
    assert keyfiles.decode_key_file(json.dumps(old).encode(), "old passphrase") == KEY
    with pytest.raises(KeyFileError, match="damaged"):  # a cost outside the known range is not run
        keyfiles.decode_key_file(json.dumps(dict(old, n=2**30)).encode(), "old passphrase")


def test_a_key_file_of_another_workspace_is_refused_in_one_line() -> None:
    for raw in (keyfiles.encode_key_file(KEY, "team"), keyfiles.encode_key_file(KEY, "team", "correct horse battery")):
        with pytest.raises(KeyFileError) as refused:
            keyfiles.decode_key_file(raw, "correct horse battery", source="key file x.mfkey", workspace_id="default")
        assert str(refused.value) == (
            "The key file x.mfkey holds the key of workspace 'team', not 'default'; nothing was imported."
        )
        assert keyfiles.decode_key_file(raw, "correct horse battery", workspace_id="team") == KEY


def test_an_export_passphrase_needs_twelve_characters() -> None:
    from memframe.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="at least 12 characters"):
        keyfiles.check_export_passphrase("x" * 11)
    keyfiles.check_export_passphrase("x" * 12)
