"""`memframe key rotate` and `memframe forget`: what a person types, sees and keeps."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from memframe import sealing
from memframe.cli import EXIT_ERROR, main
from memframe.sealing import keyfiles


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def saved(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> list[str]:
    assert run(capsys, "init")[0] == 0
    texts = [f"# Prefs\n- version {i}\n" for i in range(1, 6)]
    for i, text in enumerate(texts):
        source = tmp_path / f"{i}.md"
        source.write_text(text, encoding="utf-8")
        assert run(capsys, "save", str(source), "--base", str(i))[0] == 0
    return texts


def key_of(memframe_home: Path) -> bytes:
    return keyfiles.decode_key_file((memframe_home / "keys" / "local" / "default.key").read_bytes())


def test_forget_prints_and_keeps_a_receipt(capsys, saved, memframe_home: Path) -> None:  # type: ignore[no-untyped-def]
    old = key_of(memframe_home)
    code, out, err = run(capsys, "forget", "--before", "3", "--yes")
    assert code == 0, err
    assert "Versions 1–2 of the memory will be destroyed; versions 3–5 will stay." in out
    assert "versions 1–2 of .zudotext/memory/MEMORY.md (2)" in out
    assert "copies of the old key (exports, other machines) still open backups" in out
    assert "what a model provider logged" in out and "-wal were rewritten" in out
    kept = sorted((memframe_home / "receipts" / "local").iterdir())
    assert len(kept) == 1 and kept[0].read_text() in out
    assert stat.S_IMODE(kept[0].stat().st_mode) == 0o600
    assert "- version" not in kept[0].read_text()  # metadata only, never text
    new = key_of(memframe_home)
    assert new != old and not (memframe_home / "keys" / "local" / "default.key.pending").exists()
    assert sealing.key_fingerprint(new) in out
    code, out, _ = run(capsys, "history")
    assert code == 0 and "versions 1–2 were forgotten on " in out and "\n      1  " not in out
    assert run(capsys, "show", "--text-only")[1] == saved[-1]
    code, out, _ = run(capsys, "verify")
    assert code == 0 and "1 document, 3 versions verified" in out  # versions 3–5: the kept ones


def test_an_archive_after_forgetting_starts_where_the_sealed_record_says(  # type: ignore[no-untyped-def]
    capsys, saved, tmp_path: Path
) -> None:
    assert run(capsys, "forget", "--before", "3", "--yes")[0] == 0
    archive = tmp_path / "a.json"
    code, _, err = run(capsys, "export", "--archive", str(archive))
    assert code == 0, err  # it read version 1 before, which is gone
    data = json.loads(archive.read_text())
    assert [v["version"] for v in data["files"][0]["versions"]] == [3, 4, 5]
    code, out, err = run(capsys, "verify", "--archive", str(archive))
    assert code == 0 and "1 document, 3 versions verified" in out, err
    data["rotation"] = None  # a gap no sealed record explains is a break, not a forgetting
    archive.write_text(json.dumps(data))
    code, _, err = run(capsys, "verify", "--archive", str(archive))
    assert code == EXIT_ERROR and "altered" in err


def test_key_rotate_keeps_every_version(capsys, saved, memframe_home: Path) -> None:  # type: ignore[no-untyped-def]
    old = key_of(memframe_home)
    code, out, err = run(capsys, "key", "rotate", "--yes")
    assert code == 0, err
    assert "nothing but the old key" in out
    assert key_of(memframe_home) != old
    code, out, _ = run(capsys, "history")
    assert code == 0 and "forgotten" not in out and "\n      1  " in out
    assert run(capsys, "diff", "1", "5")[0] == 0


def test_without_a_terminal_or_yes_nothing_changes(capsys, saved, memframe_home: Path) -> None:  # type: ignore[no-untyped-def]
    old = key_of(memframe_home)
    code, _, err = run(capsys, "forget", "--before", "3")
    assert code == EXIT_ERROR and "pass --yes" in err
    assert key_of(memframe_home) == old
    assert run(capsys, "history")[1].count("\n") == 6


def test_the_old_key_is_told_who_rotated_it(capsys, saved, memframe_home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    key_file = memframe_home / "keys" / "local" / "default.key"
    old_file = key_file.read_bytes()
    assert run(capsys, "key", "rotate", "--yes")[0] == 0
    key_file.write_bytes(old_file)  # another machine's copy of the old key
    code, _, err = run(capsys, "show")
    assert code != 0 and "The workspace key was rotated on " in err and "memframe key export" in err
    source = tmp_path / "x.md"
    source.write_text("written with the old key\n", encoding="utf-8")
    code, _, err = run(capsys, "save", str(source), "--base", "5")
    assert code != 0 and "was rotated" in err


def test_a_pending_key_the_server_took_is_made_current(capsys, saved, memframe_home: Path) -> None:  # type: ignore[no-untyped-def]
    """A rotation cut short after the swap and before the key file's rename: finished by running it again."""
    from memframe.backend.workspaces import open_backend

    new = sealing.new_key()
    keyfiles.write_pending_key(new, "default", passphrase=None)
    backend = open_backend("default")
    try:
        backend.rotate_key(new, who="alice")  # the server swapped; the key file was never renamed
    finally:
        backend.close()
    code, out, err = run(capsys, "key", "rotate", "--yes")
    assert code == 0 and "An earlier rotation had landed" in out, err
    assert key_of(memframe_home) == new
    assert run(capsys, "show", "--text-only")[1] == saved[-1]


def test_a_pending_key_the_server_never_took_is_dropped(capsys, saved, memframe_home: Path) -> None:  # type: ignore[no-untyped-def]
    keyfiles.write_pending_key(sealing.new_key(), "default", passphrase=None)
    old = key_of(memframe_home)
    code, out, _ = run(capsys, "key", "rotate", "--yes")
    assert code == 0 and "receipt" in out
    assert key_of(memframe_home) != old
    assert json.loads((memframe_home / "keys" / "local" / "default.key").read_bytes())["format"] == "memframe-key/1"


def test_a_before_that_forgets_nothing_is_refused_first(capsys, saved, memframe_home: Path) -> None:  # type: ignore[no-untyped-def]
    old = key_of(memframe_home)
    for before in ("1", "6"):
        code, out, err = run(capsys, "forget", "--before", before, "--yes")
        assert code == EXIT_ERROR and "holds versions 1–5" in err and "will be destroyed" not in out
    assert key_of(memframe_home) == old
