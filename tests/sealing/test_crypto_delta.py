"""Payload encoding 2: a version sealed as a delta against the one before it, inside the seal.

The promises: any history of edits opens back to exactly its texts, in any order; keyframes
are whole; a delta's base is the exact ciphertext its authenticated header names, so a swapped,
missing or re-pointed base fails with the one clear "could not be decrypted" line; and nothing
of the text is readable in what is stored.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memframe import sealing
from memframe.core.errors import DecryptionFailed
from memframe.sealing.format import _ad_v2

KEY = bytes(range(32))
W, P = "w", "p"
BASE = "".join(f"- a remembered fact number {n}, with some words around it\n" for n in range(120))


def seal_history(texts: list[str]) -> list[bytes]:
    """Seal `texts` as versions 1, 2, … each chained (and where smaller, delta'd) onto the last."""
    blobs: list[bytes] = []
    for version, text in enumerate(texts, start=1):
        previous = blobs[-1] if blobs else None
        prior = texts[version - 2] if blobs else None
        blobs.append(
            sealing.seal(KEY, text, workspace_id=W, path=P, version=version, previous=previous, previous_text=prior)
        )
    return blobs


def encoding(blob: bytes, version: int) -> int:
    """The payload encoding byte, read with the key (tests only)."""
    aead = sealing.aead(KEY)
    plain = aead.decrypt(
        blob[sealing.HEADER_BYTES : sealing.HEADER_BYTES + sealing.NONCE_BYTES],
        blob[sealing.HEADER_BYTES + sealing.NONCE_BYTES :],
        _ad_v2(sealing.file_place(W, P, version), blob[: sealing.HEADER_BYTES]),
    )
    return plain[0]


def opener_over(blobs: list[bytes]):  # type: ignore[no-untyped-def]
    return sealing.opener(KEY, workspace_id=W, path=P, fetch=lambda v: blobs[v - 1] if 0 < v <= len(blobs) else None)


edit = st.tuples(st.integers(0, 10_000), st.integers(0, 40), st.text(max_size=30))


@settings(max_examples=60, deadline=None)
@given(st.lists(edit, min_size=1, max_size=90), st.randoms(use_true_random=False))
def test_any_edit_history_opens_back_to_its_texts_in_any_order(edits: list[tuple[int, int, str]], rnd) -> None:  # type: ignore[no-untyped-def]
    texts = [BASE]
    for at, cut, insert in edits:
        old = texts[-1]
        at %= len(old) + 1
        texts.append(old[:at] + insert + old[at + cut :])
    blobs = seal_history(texts)
    order = list(range(1, len(blobs) + 1))
    rnd.shuffle(order)
    fresh = opener_over(blobs)  # every order, from a cold cache and a warm one
    for version in order:
        assert fresh(blobs[version - 1], version) == texts[version - 1]
        assert opener_over(blobs)(blobs[version - 1], version) == texts[version - 1]
        assert sealing.plaintext_size(blobs[version - 1]) == len(texts[version - 1].encode())
        assert sealing.is_well_formed(blobs[version - 1])


def test_small_edits_are_deltas_keyframes_are_whole_and_nothing_is_readable() -> None:
    texts = [BASE]
    for n in range(1, 140):
        texts.append(texts[-1].replace(f"number {n % 120},", f"number {n % 120} (secret edit {n}),"))
    blobs = seal_history(texts)
    kinds = {v: encoding(b, v) for v, b in enumerate(blobs, start=1)}
    assert kinds[1] == sealing.ZLIB and kinds[1 + sealing.KEYFRAME_EVERY] == sealing.ZLIB  # keyframes
    assert all(kinds[v] == sealing.DELTA for v in range(2, sealing.KEYFRAME_EVERY + 1))
    assert max(len(b) for b in blobs[1:10]) < 200  # a one-line edit costs ~a line, not a memory
    assert all(b"secret" not in b and b"number" not in b for b in blobs)
    open_blob = opener_over(blobs)
    assert [open_blob(b, v) for v, b in reversed(list(enumerate(blobs, start=1)))] == texts[::-1]


def _opens_clearly_refused(open_blob, blob: bytes, version: int) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DecryptionFailed) as err:
        open_blob(blob, version)
    assert "\n" not in str(err.value) and "could not be decrypted" in str(err.value).lower()
    assert "fact" not in str(err.value)


def test_a_delta_whose_base_was_swapped_missing_or_absent_fails_in_one_clear_line() -> None:
    texts = [BASE, BASE + "- one more\n", BASE + "- one more\n- and another\n"]
    blobs = seal_history(texts)
    fork = seal_history([BASE, BASE + "- a different second version\n"])[1]  # genuine, same key and place
    swapped = [blobs[0], fork, blobs[2]]
    _opens_clearly_refused(opener_over(swapped), blobs[2], 3)
    _opens_clearly_refused(opener_over(blobs[2:]), blobs[2], 3)  # the base row is gone
    _opens_clearly_refused(sealing.opener(KEY, workspace_id=W, path=P), blobs[2], 3)  # no way to read a base
    with pytest.raises(DecryptionFailed):
        sealing.open_sealed(KEY, blobs[2], workspace_id=W, path=P, version=3)


def test_a_delta_cannot_be_repointed_or_moved() -> None:
    blobs = seal_history([BASE, BASE + "- one more\n", BASE + "- two more\n"])
    repointed = blobs[2][:12] + sealing.NO_PREVIOUS + blobs[2][44:]  # the header is authenticated
    _opens_clearly_refused(opener_over(blobs), repointed, 3)
    moved = [*blobs[:2], blobs[2], blobs[2]]  # a copy at version 4 names version 3 as its base
    _opens_clearly_refused(opener_over(moved), blobs[2], 4)


def test_old_full_versions_and_v1_texts_still_open_through_an_opener_with_fetch() -> None:
    v1 = sealing.seal_v1(KEY, "old\n", workspace_id=W, path=P)
    full = sealing.seal(KEY, BASE, workspace_id=W, path=P, version=2, previous=v1, previous_text="old\n")
    assert encoding(full, 2) != sealing.DELTA  # never a delta against an old-format text
    open_blob = opener_over([v1, full])
    assert open_blob(v1, 1, legacy=True) == "old\n" and open_blob(full, 2) == BASE


def test_history_p_reads_a_history_stored_as_deltas(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`history -p`'s one read of many revisions opens delta rows against the rows before them."""
    from bench.data import local_home
    from memframe import paths
    from memframe.backend.workspaces import open_backend

    monkeypatch.setenv("MEMFRAME_HOME", str(tmp_path))
    texts = [BASE]
    for n in range(1, 100):
        texts.append(texts[-1].replace(f"number {n % 120},", f"number {n % 120} (edit {n}),"))
    ws = local_home(tmp_path, "w", iter(texts), deltas=True)
    import sqlite3

    with sqlite3.connect(paths.local_database()) as conn:
        sql = "SELECT MAX(LENGTH(ciphertext)) FROM file_versions WHERE version % 64 != 1"
        (largest,) = conn.execute(sql).fetchone()
    assert largest < 300  # every later row is a delta, not a whole 7 KB text
    backend = open_backend(ws.id)
    try:
        shown = backend.read_revisions(range(len(texts), 0, -1))
    finally:
        backend.close()
    assert list(shown.values()) == texts[::-1]


def test_the_client_opens_a_history_stored_as_deltas_everywhere_it_reads(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Load, one revision, several revisions and `verify` all open delta rows (local backend)."""
    from bench.data import local_home
    from memframe.backend.workspaces import open_backend
    from memframe.core.types import MEMORY_PATH

    monkeypatch.setenv("MEMFRAME_HOME", str(tmp_path))
    texts = [BASE]
    for n in range(1, 150):
        texts.append(texts[-1].replace(f"number {n % 120},", f"number {n % 120} (edit {n}),"))
    local_home(tmp_path, "w", iter(texts), deltas=True)
    backend = open_backend("w")
    try:
        doc = backend.load()
        assert (doc.text, doc.version) == (texts[-1], len(texts))
        assert backend.read_revision(100) == texts[99] and backend.read_revision(65) == texts[64]
        assert backend.read_revisions([3, 64, 66, 150]) == {v: texts[v - 1] for v in (3, 64, 66, 150)}
        assert backend.verify() == [(MEMORY_PATH, len(texts))]
        backend.save(texts[-1] + "- saved after\n", len(texts))  # the next save chains onto a delta head
        assert backend.load().text == texts[-1] + "- saved after\n"
    finally:
        backend.close()


def test_a_capture_applies_its_edit_to_a_head_stored_as_a_delta(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from bench.data import add_revisions, admit_many, create_workspaces, new_service, open_key_sessions
    from memframe.core.edits import MemoryChange
    from memframe.core.types import MEMORY_PATH, Mode
    from memframe.service import files

    service = new_service(str(tmp_path / "m.db"))
    try:
        (ws,) = create_workspaces(service, 1, text=BASE, mode=Mode.AUTO, ai=True)
        texts = [BASE + f"- added {n}\n" for n in range(1, 5)]
        add_revisions(service, ws, iter(texts), deltas=True)
        open_key_sessions(service, [ws])
        admit_many(service, [ws], 1)
        (admission,) = ws.admissions
        service.assistant.commit_capture(
            ws.id,
            admission.credential,
            idempotency_key=f"memory:{admission.id}",
            key_session_id=ws.key_session,
            changes=[MemoryChange("add", "- captured")],
            expected_version=ws.version,
        )
        with service.db.read() as conn:
            head = files.get_current(conn, ws.id, MEMORY_PATH)
            assert head is not None and head.ciphertext is not None
            fetch = files.ciphertexts(conn, ws.id, MEMORY_PATH)
            text = sealing.open_sealed(
                ws.key, head.ciphertext, workspace_id=ws.id, path=MEMORY_PATH, version=6, fetch=fetch
            )
        assert text == texts[-1] + "- captured\n"
        # The capture itself is sealed as a delta against the head it applied its edit to.
        with pytest.raises(DecryptionFailed):
            sealing.open_sealed(ws.key, head.ciphertext, workspace_id=ws.id, path=MEMORY_PATH, version=6)
    finally:
        service.close()


def test_a_run_holds_each_delta_to_the_base_its_header_names() -> None:
    texts = [BASE, BASE + "- one more\n", BASE + "- one more\n- and another\n"]
    blobs = seal_history(texts)
    fork = seal_history([BASE, BASE + "- a different second version\n"])[1]  # genuine, same key and place
    opener = opener_over(blobs)
    assert [opener(b, v) for v, b in enumerate(blobs, start=1)] == texts
    swapped = [blobs[0], fork, blobs[2]]
    forked = opener_over(swapped)
    with pytest.raises(DecryptionFailed) as err:
        [forked(b, v) for v, b in enumerate(swapped, start=1)]
    assert "\n" not in str(err.value) and "fact" not in str(err.value)
