"""Writing payload encoding 2: saves and captures store deltas, and `memframe admin compact`.

The promises: every version a person saves or a capture writes opens back to exactly its text,
cold or warm, whether its row is whole, a delta or a re-seal; a keyframe at least every
`KEYFRAME_EVERY` versions; the version after a Clear is whole, so nothing of the text before the
Clear is reachable through it; a missing or altered base refuses in one line that shows no text;
recall opens a new head with one decrypt; old databases (every version whole) keep opening, and
compaction rewrites them crash-safely, idempotently, under a chain `memframe verify` still accepts.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bench.data import add_revisions, admit_many, create_workspaces, new_service, open_key_sessions, revisions
from memframe import sealing
from memframe.backend.heads import SeenHeads
from memframe.backend.local import LocalBackend
from memframe.core.edits import MemoryChange
from memframe.core.errors import ChainBroken, DecryptionFailed, InvalidInput
from memframe.core.types import MEMORY_PATH, Mode, RecallStatus
from memframe.sealing.format import _ad_v2
from memframe.service import files

SECRET = "- the door code is 4417"


def texts_of(count: int, seed: int = 3) -> list[str]:
    return list(revisions(count, size=4000, seed=seed))


def rows(db: Path, ws: str) -> dict[int, bytes | None]:
    conn = sqlite3.connect(db)
    try:
        found = conn.execute(
            "SELECT version, ciphertext FROM file_versions WHERE workspace_id = ? AND path = ?", (ws, MEMORY_PATH)
        ).fetchall()
    finally:
        conn.close()
    return {int(v): None if b is None else bytes(b) for v, b in found}


def encoding(key: bytes, ws: str, blob: bytes, version: int, path: str = MEMORY_PATH) -> int:
    """The payload encoding byte, read with the key (tests only); a re-seal says what it carries."""
    plain = sealing.aead(key).decrypt(
        blob[sealing.HEADER_BYTES : sealing.HEADER_BYTES + sealing.NONCE_BYTES],
        blob[sealing.HEADER_BYTES + sealing.NONCE_BYTES :],
        _ad_v2(sealing.file_place(ws, path, version), blob[: sealing.HEADER_BYTES]),
    )
    return plain[0]


@pytest.fixture
def local(tmp_path: Path):  # type: ignore[no-untyped-def]
    db = tmp_path / "m.db"
    service = new_service(str(db))
    (ws,) = create_workspaces(service, 1, names=["w"])
    service.close()
    backend = LocalBackend(db, "w", ws.key, seen=SeenHeads(None))
    yield db, ws, backend
    backend.close()


def test_a_save_chain_of_200_versions_opens_to_its_texts_with_a_keyframe_every_n(local) -> None:  # type: ignore[no-untyped-def]
    db, ws, backend = local
    texts = texts_of(200)
    for version, text in enumerate(texts):
        assert backend.save(text, version).version == version + 1
    stored = rows(db, "w")
    kinds = {v: encoding(ws.key, "w", b, v) for v, b in stored.items() if b is not None}
    assert all(kinds[v] != sealing.DELTA for v in kinds if sealing.keyframe(v))
    assert all(kinds[v] == sealing.DELTA for v in kinds if not sealing.keyframe(v))
    whole = len(stored[1] or b"")
    assert max(len(stored[v] or b"") for v in kinds if not sealing.keyframe(v)) < whole / 4
    # Cold: a fresh client, every version alone and all at once; warm: newest first, one opener.
    fresh = LocalBackend(db, "w", ws.key, seen=SeenHeads(None))
    try:
        for version in (200, 1, 64, 65, 66, 129, 130, 199):
            assert fresh.read_revision(version) == texts[version - 1]
        assert fresh.read_revisions(list(range(200, 0, -1))) == {v: texts[v - 1] for v in range(1, 201)}
        assert fresh.load().text == texts[-1]
        assert fresh.verify() == [(MEMORY_PATH, 200)]
    finally:
        fresh.close()
    # Every row opens through a bare opener over the stored rows (what any other reader does).
    for version, blob in stored.items():
        assert blob is not None
        got = sealing.open_sealed(ws.key, blob, workspace_id="w", path=MEMORY_PATH, version=version, fetch=stored.get)
        assert got == texts[version - 1]
        assert SECRET not in blob.decode("latin-1")


def test_the_version_after_a_clear_is_whole_and_reaches_nothing_before_it(local) -> None:  # type: ignore[no-untyped-def]
    db, ws, backend = local
    base = texts_of(1)[0]
    backend.save(base + SECRET + "\n", 0)
    backend.save(base + SECRET + "\n- one more\n", 1)
    cleared = backend.clear(2)
    after = backend.save(base + "- new evidence after the Clear\n", cleared.version)
    stored = rows(db, "w")
    assert len(stored[3] or b"") == sealing.SEALED_EMPTY_BYTES
    blob = stored[after.version]
    assert blob is not None and encoding(ws.key, "w", blob, after.version) != sealing.DELTA
    # It opens with no earlier row at all: nothing of the text before the Clear is part of its chain.
    alone = sealing.open_sealed(ws.key, blob, workspace_id="w", path=MEMORY_PATH, version=after.version)
    assert alone == base + "- new evidence after the Clear\n"


def test_a_missing_or_altered_base_refuses_in_one_line_without_text(local, capsys) -> None:  # type: ignore[no-untyped-def]
    db, ws, backend = local
    base = texts_of(1)[0]
    backend.save(base + SECRET + "\n", 0)
    backend.save(base + SECRET + "\n- another\n", 1)
    backend.save(base + SECRET + "\n- another\n- third\n", 2)
    stored = rows(db, "w")
    assert encoding(ws.key, "w", stored[3] or b"", 3) == sealing.DELTA
    conn = sqlite3.connect(db)
    try:  # version 2 (version 3's base) altered: one flipped bit of its ciphertext
        altered = bytearray(stored[2] or b"")
        altered[-5] ^= 1
        conn.execute("UPDATE file_versions SET ciphertext = ? WHERE version = 2", (bytes(altered),))
        conn.commit()
    finally:
        conn.close()
    fresh = LocalBackend(db, "w", ws.key, seen=SeenHeads(None))
    try:
        with pytest.raises(DecryptionFailed) as caught:
            fresh.read_revision(3)
        assert "door code" not in str(caught.value) and "\n" not in str(caught.value)
        with pytest.raises(ChainBroken):
            fresh.verify()
    finally:
        fresh.close()
    conn = sqlite3.connect(db)
    try:  # the base missing altogether
        conn.execute("DELETE FROM file_versions WHERE version = 2")
        conn.commit()
    finally:
        conn.close()
    with pytest.raises(DecryptionFailed):
        sealing.open_sealed(
            ws.key, stored[3] or b"", workspace_id="w", path=MEMORY_PATH, version=3, fetch=rows(db, "w").get
        )


def test_the_cli_reports_a_broken_delta_in_one_line(tmp_path: Path, memframe_home: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from memframe import paths
    from memframe.backend.workspaces import init_local_workspace
    from memframe.cli import main

    init_local_workspace("w")
    base = texts_of(1)[0]
    for n in range(3):
        (tmp_path / "t.md").write_text(base + SECRET + f"\n- edit {n}\n")
        assert main(["save", "-w", "w", str(tmp_path / "t.md"), "--base", str(n)]) == 0
    conn = sqlite3.connect(paths.local_database())
    try:
        conn.execute("DELETE FROM file_versions WHERE version = 2")
        conn.commit()
    finally:
        conn.close()
    capsys.readouterr()
    assert main(["diff", "-w", "w", "1", "3"]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "door code" not in err


def test_captures_under_a_key_session_write_deltas_and_recall_opens_with_one_decrypt(tmp_path: Path) -> None:
    service = new_service(str(tmp_path / "m.db"))
    try:
        text = texts_of(1)[0]
        (ws,) = create_workspaces(service, 1, text=text, mode=Mode.AUTO, ai=True)
        open_key_sessions(service, [ws])
        admit_many(service, [ws], 3)
        first = service.assistant.recall(ws.id, ws.admissions[0].credential)
        assert first.status is RecallStatus.PROVIDED and first.text == text
        opener = service.key_sessions.memory_opener(ws.key_session, ws.id)
        decrypts = 0
        real = opener._aead

        class Counting:
            def decrypt(self, *args):  # type: ignore[no-untyped-def]
                nonlocal decrypts
                decrypts += 1
                return real.decrypt(*args)

        opener._aead = Counting()
        for n, admission in enumerate(ws.admissions[:2], start=1):
            receipt = service.assistant.commit_capture(
                ws.id,
                admission.credential,
                idempotency_key=f"memory:{admission.id}",
                key_session_id=ws.key_session,
                changes=[MemoryChange("add", f"- captured {n}")],
                expected_version=n,
            )
            assert receipt.version.version == n + 1
        assert decrypts == 0  # each capture's base was the head this session had opened (or written)
        recalled = service.assistant.recall(ws.id, ws.admissions[2].credential)
        assert recalled.status is RecallStatus.PROVIDED
        assert recalled.text == text + "- captured 1\n- captured 2\n"
        assert decrypts == 0  # the head is what the session's last capture wrote
        with service.db.read() as conn:
            head = files.get_current(conn, ws.id, MEMORY_PATH)
        assert head is not None and head.ciphertext is not None
        assert encoding(ws.key, ws.id, head.ciphertext, 3) == sealing.DELTA
        # A person's Save (sealed by their client as a delta): the next recall decrypts it alone.
        saved = recalled.text + "- saved by a person\n"
        blob = sealing.seal(
            ws.key,
            saved,
            workspace_id=ws.id,
            path=MEMORY_PATH,
            version=4,
            previous=head.ciphertext,
            previous_text=recalled.text,
        )
        service.put_file("local", ws.id, MEMORY_PATH, blob, 3)
        admit_many(service, [ws], 1)
        assert service.assistant.recall(ws.id, ws.admissions[-1].credential).text == saved
        assert decrypts == 1
    finally:
        service.close()


def old_database(tmp_path: Path, count: int) -> tuple[Path, bytes, list[str]]:
    """A database as memframe wrote it before deltas: every version whole (zlib inside the seal)."""
    db = tmp_path / "old.db"
    service = new_service(str(db))
    try:
        (ws,) = create_workspaces(service, 1, names=["w"])
        texts = texts_of(count, seed=11)
        add_revisions(service, ws, iter(texts), deltas=False)
    finally:
        service.close()
    return db, ws.key, texts


def every_version_opens(db: Path, key: bytes, texts: list[str]) -> None:
    backend = LocalBackend(db, "w", key, seen=SeenHeads(None))
    try:
        assert backend.read_revisions(list(range(1, len(texts) + 1))) == {v: t for v, t in enumerate(texts, start=1)}
        assert backend.verify() == [(MEMORY_PATH, len(texts))]
    finally:
        backend.close()
    stored = rows(db, "w")
    for version, blob in stored.items():  # cold, each alone
        got = sealing.open_sealed(
            key, blob or b"", workspace_id="w", path=MEMORY_PATH, version=version, fetch=stored.get
        )
        assert got == texts[version - 1]


class Crash(Exception):
    """Stands for a kill between two rewrites: each rewrite is its own committed transaction."""


def test_an_old_full_copy_database_opens_and_its_next_save_is_a_delta(tmp_path: Path) -> None:
    db, key, texts = old_database(tmp_path, 30)
    every_version_opens(db, key, texts)
    backend = LocalBackend(db, "w", key, seen=SeenHeads(None))
    try:
        backend.load()
        backend.save(texts[-1] + "- one more\n", 30)
    finally:
        backend.close()
    assert encoding(key, "w", rows(db, "w")[31] or b"", 31) == sealing.DELTA
    every_version_opens(db, key, [*texts, texts[-1] + "- one more\n"])


def test_compact_is_crash_safe_idempotent_and_keeps_the_chain(tmp_path: Path) -> None:
    db, key, texts = old_database(tmp_path, 150)
    before = rows(db, "w")
    seen = SeenHeads(None)  # what one client remembers of the head, across everything below
    backend = LocalBackend(db, "w", key, seen=seen)
    stopped_at: list[int] = []

    def crash(path: str, version: int) -> None:
        if not stopped_at and version >= 40:
            stopped_at.append(version)
            raise Crash

    try:
        backend.load()
        with pytest.raises(Crash):
            backend.compact(after_each=crash)
    finally:
        backend.close()
    every_version_opens(db, key, texts)  # half compacted: every version opens the same
    stored = rows(db, "w")
    assert encoding(key, "w", stored[stopped_at[0]] or b"", stopped_at[0]) == sealing.RESEAL
    assert stored[stopped_at[0] + 1] == before[stopped_at[0] + 1]  # nothing after the crash point
    assert stored[150] == before[150]  # the head is never rewritten

    # A save lands between two runs (the head moves on); the next run finishes the rest.
    backend = LocalBackend(db, "w", key, seen=seen)
    try:
        backend.load()
        backend.save(texts[-1] + "- saved meanwhile\n", 150)
        done = backend.compact()
        again = backend.compact()
        assert backend.verify() == [(MEMORY_PATH, 151)]  # the chain, and the head this client saw
    finally:
        backend.close()
    texts = [*texts, texts[-1] + "- saved meanwhile\n"]
    assert done.rewritten > 100 and again.rewritten == 0 and again.versions == done.versions
    every_version_opens(db, key, texts)
    stored = rows(db, "w")
    assert sum(len(b or b"") for b in stored.values()) < sum(len(b or b"") for b in before.values()) / 4
    kinds = {v: encoding(key, "w", b or b"", v) for v, b in stored.items()}
    assert all(kinds[v] != sealing.RESEAL for v in kinds if sealing.keyframe(v))
    assert kinds[150] == sealing.RESEAL and kinds[151] == sealing.DELTA  # the old head is old now
    assert all(stored[v][: sealing.HEADER_BYTES] == before[v][: sealing.HEADER_BYTES] for v in before)  # type: ignore[index]


def test_the_server_takes_a_compaction_only_as_a_smaller_reseal_below_the_head(tmp_path: Path) -> None:
    db, key, texts = old_database(tmp_path, 5)
    service = new_service(str(db))
    try:
        stored = rows(db, "w")
        opener = sealing.opener(key, workspace_id="w", path=MEMORY_PATH, fetch=stored.get)

        def resealed(version: int) -> bytes:
            blob = stored[version] or b""
            return sealing.reseal(
                key,
                opener(blob, version),
                blob,
                chain=opener.chain_hash(blob, version),
                workspace_id="w",
                path=MEMORY_PATH,
                version=version,
                previous_text=texts[version - 2],
            )

        def digest(version: int) -> str:
            return sealing.content_hash(stored[version] or b"")

        head = resealed(5)
        assert not service.compact_version("local", "w", MEMORY_PATH, 5, digest(5), head)  # never the head
        other = bytearray(resealed(3))
        other[8] ^= 1  # another header (its size)
        with pytest.raises(InvalidInput):
            service.compact_version("local", "w", MEMORY_PATH, 3, digest(3), bytes(other))
        assert not service.compact_version("local", "w", MEMORY_PATH, 3, "0" * 64, resealed(3))  # stale hash
        assert service.compact_version("local", "w", MEMORY_PATH, 3, digest(3), resealed(3))
        assert not service.compact_version("local", "w", MEMORY_PATH, 3, digest(3), resealed(3))  # done once
    finally:
        service.close()
    every_version_opens(db, key, texts)


def test_compact_from_the_command_line(tmp_path: Path, memframe_home: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from memframe import paths
    from memframe.cli import main
    from memframe.sealing.keyfiles import write_key

    service = new_service(str(paths.local_database()))
    try:
        (ws,) = create_workspaces(service, 1, names=["w"])
        texts = texts_of(80, seed=2)
        add_revisions(service, ws, iter(texts), deltas=False)
        write_key(ws.key, "w")
    finally:
        service.close()
    assert main(["admin", "compact", "-w", "w"]) == 0
    out = capsys.readouterr().out
    assert "re-sealed as deltas" in out and SECRET not in out
    assert main(["admin", "compact", "-w", "w"]) == 0
    assert "0 of 79 old versions" in capsys.readouterr().out
    assert main(["verify", "-w", "w"]) == 0
    every_version_opens(paths.local_database(), ws.key, texts)


_CHILD = """
import sys
from memframe.backend.heads import SeenHeads
from memframe.backend.local import LocalBackend

backend = LocalBackend(sys.argv[1], "w", bytes.fromhex(sys.argv[2]), seen=SeenHeads(None))
backend.compact(after_each=lambda path, version: print(version, flush=True))
"""


def test_compact_killed_between_rewrites_leaves_every_version_opening(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    db, key, texts = old_database(tmp_path, 200)
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(db), key.hex()], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    assert child.stdout is not None
    with child.stdout:
        landed = [int(child.stdout.readline()) for _ in range(25)]  # 25 rewrites committed, more may follow
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert landed == sorted(landed)
    every_version_opens(db, key, texts)
    backend = LocalBackend(db, "w", key, seen=SeenHeads(None))
    try:
        rest = backend.compact()
    finally:
        backend.close()
    assert 0 < rest.rewritten < 200 - 25
    every_version_opens(db, key, texts)


def test_a_note_a_person_saved_as_deltas_reads_and_searches_for_the_assistant(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    service = new_service(str(db))
    try:
        (ws,) = create_workspaces(service, 1, mode=Mode.AUTO, ai=True)
        backend = LocalBackend(service, ws.id, ws.key, seen=SeenHeads(None))
        base = texts_of(1)[0]
        for n in range(5):
            backend.write_file("notes/plan.md", base + f"- step {n}\n", n)
        stored = service.get_file("local", ws.id, "notes/plan.md")
        assert stored is not None and stored.ciphertext is not None
        assert encoding(ws.key, ws.id, stored.ciphertext, 5, "notes/plan.md") == sealing.DELTA
        open_key_sessions(service, [ws])
        admit_many(service, [ws], 1)
        credential = ws.admissions[0].credential
        assert service.assistant.read_document(ws.id, credential, "notes/plan.md") == (5, base + "- step 4\n")
        (hit,) = service.assistant.search_documents(ws.id, credential, "step 4")
        assert hit.path == "notes/plan.md" and "step 4" in hit.snippet
    finally:
        service.close()


def test_compaction_never_rewrites_the_memorys_head_beside_a_document_with_more_versions(tmp_path: Path) -> None:
    db, key, texts = old_database(tmp_path, 5)
    service = new_service(str(db))
    try:
        blob = rows(db, "w")[1]
        for base in range(8):  # another path of the same workspace, far ahead of the memory's head
            service.put_file("local", "w", "notes/a.md", blob, base)
        stored = rows(db, "w")
        opener = sealing.opener(key, workspace_id="w", path=MEMORY_PATH, fetch=stored.get)
        head = stored[5] or b""
        resealed = sealing.reseal(
            key,
            opener(head, 5),
            head,
            chain=opener.chain_hash(head, 5),
            workspace_id="w",
            path=MEMORY_PATH,
            version=5,
            previous_text=texts[3],
        )
        assert not service.compact_version("local", "w", MEMORY_PATH, 5, sealing.content_hash(head), resealed)
        with pytest.raises(InvalidInput):  # the same bytes again are not smaller
            service.compact_version(
                "local", "w", MEMORY_PATH, 3, sealing.content_hash(stored[3] or b""), stored[3] or b""
            )
    finally:
        service.close()
