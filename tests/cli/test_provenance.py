"""blame, revert, show --sections, import, export and verify --archive against the local workspace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memframe import paths
from memframe.cli import EXIT_CONFLICT, EXIT_ERROR, main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def save(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, base: int) -> None:
    (tmp_path / "m.md").write_text(text, encoding="utf-8")
    assert run(capsys, "save", str(tmp_path / "m.md"), "--base", str(base))[0] == 0


@pytest.fixture
def three(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Versions 1-3: a first text, a line added, a line elsewhere changed."""
    assert run(capsys, "init")[0] == 0
    save(capsys, tmp_path, "# Prefs\n- tea\n\n# Work\n- rust\n", 0)
    save(capsys, tmp_path, "# Prefs\n- tea\n- jazz\n\n# Work\n- rust\n", 1)
    save(capsys, tmp_path, "# Prefs\n- tea\n- jazz\n\n# Work\n- python\n", 2)


def porcelain(out: str) -> list[list[str]]:
    return [line.split("\t") for line in out.splitlines()]


def test_blame_porcelain_names_each_lines_version(capsys, three) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run(capsys, "blame", "--porcelain")
    rows = porcelain(out)
    assert code == 0 and [(r[0], r[4]) for r in rows] == [
        ("1", "# Prefs"),
        ("1", "- tea"),
        ("2", "- jazz"),
        ("1", ""),
        ("1", "# Work"),
        ("3", "- python"),
    ]
    assert {(r[1], r[2]) for r in rows} == {("person", "local")}
    assert all(r[3].endswith("Z") and "T" in r[3] for r in rows)
    assert [r[0] for r in porcelain(run(capsys, "blame", "--at", "1", "--porcelain")[1])] == ["1"] * 5
    code, _, err = run(capsys, "blame", "--at", "9")
    assert code == EXIT_ERROR and "no version 9" in err


def test_blame_of_a_capture_shows_the_persons_message(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "init")
    save(capsys, tmp_path, "# Prefs\n- tea\n", 0)
    run(capsys, "ai", "on")
    run(capsys, "mode", "auto")
    assert "Remembered (memory version 2)" in run(capsys, "chat", "-m", "remember: - likes jam", "-c", "c7")[1]
    rows = porcelain(run(capsys, "blame", "--porcelain")[1])
    assert rows[-1][:3] == ["2", "assistant", "c7"] and rows[-1][4] == "- likes jam"
    out = run(capsys, "blame")[1]
    assert (
        "Assistant c7" in out
        and "conversation c7" in out
        and "memframe receipts -c c7" in out
        and "'remember: - likes jam'" in out
    )


def test_revert_one_change_keeps_later_edits(capsys, three) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run(capsys, "revert", "2")
    assert code == 0 and "Reverted version 2's change as version 4" in out
    assert run(capsys, "show", "--text-only")[1] == "# Prefs\n- tea\n\n# Work\n- python\n"
    assert [r[0] for r in porcelain(run(capsys, "blame", "--porcelain")[1])] == ["1", "1", "1", "1", "3"]


def test_a_conflicting_revert_prints_the_lines_and_exits_3(capsys, three, tmp_path) -> None:  # type: ignore[no-untyped-def]
    save(capsys, tmp_path, "# Prefs\n- tea\n- jazz, loud\n\n# Work\n- python\n", 3)
    code, out, err = run(capsys, "revert", "2")
    assert code == EXIT_CONFLICT and "nothing was written" in err
    assert "- - jazz" in out and "jazz, loud" in out
    assert "version 4" in run(capsys, "show")[1]  # nothing new


def test_show_sections_and_an_oversized_import(capsys, three, tmp_path) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run(capsys, "show", "--sections")
    lines = out.splitlines()
    assert code == 0 and lines[1].split() == ["Prefs", "22", "0.3%"] and lines[2].split()[:2] == ["Work", "16"]
    assert lines[3].split()[:2] == ["total", "38"] and "8,192 bytes" in lines[3]
    (tmp_path / "CLAUDE.md").write_text("# Style\n- use uv\n", encoding="utf-8")
    code, out, _ = run(capsys, "import", str(tmp_path / "CLAUDE.md"), "--under", "Work")
    assert code == 0 and "Imported CLAUDE.md as version 4" in out and "over the bound" not in out
    assert run(capsys, "show", "--text-only")[1].endswith("# Work\n- python\n\n## Style\n- use uv\n")
    (tmp_path / "big.md").write_text("- x\n" * 2100, encoding="utf-8")
    code, out, _ = run(capsys, "import", str(tmp_path / "big.md"))
    assert code == 0 and "kept, and withheld from recall" in out
    assert "withheld from recall" in run(capsys, "show", "--sections")[1]


def test_export_markdown_and_a_verified_archive(capsys, three, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert run(capsys, "export", "--markdown")[1] == "# Prefs\n- tea\n- jazz\n\n# Work\n- python\n"
    archive = tmp_path / "a.json"
    code, out, _ = run(capsys, "export", "--archive", str(archive))
    assert code == 0 and "3 sealed versions" in out
    data = json.loads(archive.read_text())
    assert data["keyCheck"] and "python" not in archive.read_text()
    paths.local_database().unlink()  # offline: only the key and the archive
    code, out, _ = run(capsys, "verify", "--archive", str(archive))
    assert code == 0 and "3 versions verified" in out


@pytest.mark.parametrize("tamper", ["relabel", "drop_newest", "ciphertext", "key_check"])
def test_a_tampered_archive_is_refused(capsys, three, tmp_path, tamper: str) -> None:  # type: ignore[no-untyped-def]
    archive = tmp_path / "a.json"
    run(capsys, "export", "--archive", str(archive))
    data = json.loads(archive.read_text())
    versions = data["files"][0]["versions"]
    if tamper == "relabel":
        versions[1]["actor"] = "mallory"
    elif tamper == "drop_newest":
        versions.pop()
    elif tamper == "ciphertext":
        blob = bytearray(versions[0]["ciphertext"].encode())
        blob[-6] = ord("A") if blob[-6] != ord("A") else ord("B")
        versions[0]["ciphertext"] = blob.decode()
    else:
        data["keyCheck"] = "0" * 64
    archive.write_text(json.dumps(data))
    code, _, err = run(capsys, "verify", "--archive", str(archive))
    assert code == EXIT_ERROR and err.startswith("memframe: ") and "verified" not in err


def test_verify_archive_refuses_what_is_not_an_archive(capsys, three, tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "x.json").write_text("{}")
    code, _, err = run(capsys, "verify", "--archive", str(tmp_path / "x.json"))
    assert code == EXIT_ERROR and "not a memframe archive" in err


def swap_notes(first: int, second: int) -> None:
    """What a server could do to the notes it stores: swap two versions' sealed source notes."""
    import sqlite3

    with sqlite3.connect(paths.local_database()) as conn:
        notes = dict(
            conn.execute("SELECT version, source_note FROM file_versions WHERE version IN (?, ?)", (first, second))
        )
        assert notes[first] is not None and notes[second] is not None
        for version, other in ((first, second), (second, first)):
            conn.execute("UPDATE file_versions SET source_note = ? WHERE version = ?", (notes[other], version))


@pytest.fixture
def imported(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Version 1 saved by hand, version 2 imported from CLAUDE.md, version 3 from AGENTS.md under Work."""
    assert run(capsys, "init")[0] == 0
    save(capsys, tmp_path, "# Prefs\n- tea\n", 0)
    (tmp_path / "CLAUDE.md").write_text("# Style\n- use uv\n", encoding="utf-8")
    assert "Imported CLAUDE.md as version 2" in run(capsys, "import", str(tmp_path / "CLAUDE.md"))[1]
    (tmp_path / "AGENTS.md").write_text("- run make check\n", encoding="utf-8")
    assert "Imported AGENTS.md as version 3" in run(capsys, "import", str(tmp_path / "AGENTS.md"), "--under", "Work")[1]


def test_blame_shows_imported_lines_as_imported_from_the_files_name(capsys, imported) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run(capsys, "blame", "--porcelain")
    rows = porcelain(out)
    assert code == 0 and [(r[0], r[1], r[2], r[4]) for r in rows] == [
        ("1", "person", "local", "# Prefs"),
        ("1", "person", "local", "- tea"),
        ("2", "person", "imported from CLAUDE.md", ""),
        ("2", "person", "imported from CLAUDE.md", "# Style"),
        ("2", "person", "imported from CLAUDE.md", "- use uv"),
        ("3", "person", "imported from AGENTS.md", ""),
        ("3", "person", "imported from AGENTS.md", "# Work"),
        ("3", "person", "imported from AGENTS.md", ""),
        ("3", "person", "imported from AGENTS.md", "- run make check"),
    ]
    assert "imported from CLAUDE.md" in run(capsys, "blame")[1]
    # A revert is the person's own Save: it carries no source.
    assert run(capsys, "revert", "3")[0] == 0
    assert {r[2] for r in porcelain(run(capsys, "blame", "--porcelain")[1])} == {"local", "imported from CLAUDE.md"}


@pytest.mark.parametrize(("name", "why"), [("x" * 201 + ".md", "1 to 200 bytes"), ("a\x01b.md", "printable")])
def test_an_import_whose_name_blame_cannot_print_is_refused(capsys, three, tmp_path, name: str, why: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / name).write_text("- x\n", encoding="utf-8")
    code, _, err = run(capsys, "import", str(tmp_path / name))
    assert code == EXIT_ERROR and why in err and "nothing was saved" in err and "\x01" not in err
    assert "version 3" in run(capsys, "show")[1]  # nothing new


def test_a_note_swapped_between_versions_is_reported_as_tampering(capsys, imported) -> None:  # type: ignore[no-untyped-def]
    swap_notes(2, 3)
    for argv in (("blame", "--porcelain"), ("blame",)):
        code, out, err = run(capsys, *argv)
        assert code == EXIT_ERROR and "tampering" in err and "CLAUDE.md" not in out + err


def test_the_archive_carries_the_notes_and_verify_opens_each(capsys, imported, tmp_path) -> None:  # type: ignore[no-untyped-def]
    archive = tmp_path / "a.json"
    assert run(capsys, "export", "--archive", str(archive))[0] == 0
    text = archive.read_text()
    assert "CLAUDE.md" not in text and "AGENTS.md" not in text
    notes = [v["sourceNote"] for v in json.loads(text)["files"][0]["versions"]]
    assert notes[0] is None and notes[1] and notes[2]
    paths.local_database().unlink()  # offline: only the key and the archive
    code, out, _ = run(capsys, "verify", "--archive", str(archive))
    assert code == 0 and "3 versions verified" in out


def test_an_archive_of_swapped_notes_is_refused(capsys, imported, tmp_path) -> None:  # type: ignore[no-untyped-def]
    swap_notes(2, 3)  # by the server, before the export: the archive's own seal holds over it
    archive = tmp_path / "a.json"
    assert run(capsys, "export", "--archive", str(archive))[0] == 0
    code, _, err = run(capsys, "verify", "--archive", str(archive))
    assert code == EXIT_ERROR and "tampering" in err and "version 2" in err
