"""`memframe history -p`: git-like output, the same through every backend."""

from __future__ import annotations

import difflib
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memframe import paths
from memframe.backend.sealed import SealedBackend
from memframe.backend.workspaces import open_backend
from memframe.cli import EXIT_ERROR, main
from memframe.cli import history as cli_history
from tests.conftest import World

TEXTS = [
    "# Memory\n- tea\n",
    "# Memory\n- coffee\n",  # a line replaced
    "# Memory\n- coffee\n- no newline at the end",  # a last line without newline added
    "# Memory\n- coffee\n- now with one\n",  # ... and given one
    "# Notes\n" + "".join(f"- fact {i}\n" for i in range(40)),  # most lines replaced
    "# Notes\n" + "".join(f"- fact {i}\n" for i in range(40) if i not in (3, 30)),  # two hunks
]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def reference(backend: SealedBackend, limit: int = 50, before: int | None = None) -> str:
    """`history -p` as difflib writes it, over each pair of texts' lines."""
    out = []
    for r in backend.history(limit=limit, before=before):
        old = backend.read_revision(r.version - 1) if r.version > 1 else ""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.created_at))
        out.append(f"revision {r.version} · {when} · {r.author.value} {r.actor} · {r.operation.value}\n")
        lines = difflib.unified_diff(
            old.splitlines(keepends=True),
            backend.read_revision(r.version).splitlines(keepends=True),
            f"revision {r.version - 1}",
            f"revision {r.version}",
        )
        out += [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines]
        out.append("\n")
    return "".join(out)


def fill(backend: SealedBackend) -> None:
    version = 0
    for text in TEXTS:
        version = backend.save(text, version).version
    version = backend.undo(2, version).version
    backend.clear(version)  # an empty revision last


@pytest.fixture
def local(capsys: pytest.CaptureFixture[str]) -> Iterator[SealedBackend]:
    assert run(capsys, "init")[0] == 0
    backend = open_backend("default")
    fill(backend)
    yield backend
    backend.close()


def test_history_p_prints_each_revision_with_its_diff(capsys, local) -> None:  # type: ignore[no-untyped-def]
    code, out, err = run(capsys, "history", "-p")
    assert (code, err) == (0, "")
    assert out == reference(local)
    assert out.count("\n+++ ") + out.startswith("+++ ") == len(TEXTS) + 2
    assert "\\ No newline at end of file\n" in out and "-# Memory\n" in out


def test_before_is_honoured_with_p(capsys, local) -> None:  # type: ignore[no-untyped-def]
    out = run(capsys, "history", "-p", "--before", "4", "--limit", "2")[1]
    assert out == reference(local, limit=2, before=4)
    assert out.startswith("revision 3 ") and "\nrevision 2 " in out and "revision 1 " not in out


def test_the_same_output_through_every_backend(world: World) -> None:
    backend = world.client()
    fill(backend)
    assert cli_history.patch(backend, 50, None) == reference(backend)
    assert cli_history.patch(backend, 2, 6) == reference(backend, limit=2, before=6)


def test_no_revisions_prints_nothing(capsys) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "init")
    assert run(capsys, "history", "-p") == (0, "", "")


# --- its errors ----------------------------------------------------------------------------------


def same_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """`history -p …` fails exactly as the plain `history …` does."""
    code, out, err = run(capsys, "history", "-p", *argv)
    assert (code, out) == (EXIT_ERROR, "")
    assert run(capsys, "history", *argv) == (EXIT_ERROR, "", err)
    assert err.startswith("memframe: ") and err.count("\n") == 1
    return err


def test_no_database_and_no_workspace_are_the_full_clis_errors(capsys) -> None:  # type: ignore[no-untyped-def]
    assert "There is no local workspace 'default'" in same_error(capsys)
    run(capsys, "init")
    assert "There is no local workspace 'nope'" in same_error(capsys, "-w", "nope")
    assert "not a workspace name" in same_error(capsys, "-w", "no/pe")
    assert "1 to 1000 revisions" in same_error(capsys, "--limit", "1001")


def test_a_database_of_a_newer_memframe_is_refused(capsys, local) -> None:  # type: ignore[no-untyped-def]
    with sqlite3.connect(paths.local_database()) as conn:  # written by a newer memframe
        conn.execute("INSERT INTO schema_migrations VALUES (9999, 'future', 0)")
    assert "newer memframe" in same_error(capsys)


def test_a_workspace_the_local_user_left_is_refused(capsys, local) -> None:  # type: ignore[no-untyped-def]
    with sqlite3.connect(paths.local_database()) as conn:
        conn.execute("DELETE FROM memberships")
    assert "not a member" in same_error(capsys)


def test_a_wrong_key_is_one_line_and_prints_no_text(capsys, local, memframe_home: Path) -> None:  # type: ignore[no-untyped-def]
    from memframe import sealing
    from memframe.sealing import keyfiles

    key_file = memframe_home / "keys" / "local" / "default.key"
    key_file.write_bytes(keyfiles.encode_key_file(sealing.new_key(), "default"))
    code, out, err = run(capsys, "history", "-p")
    assert (code, out) == (EXIT_ERROR, "")
    assert err.startswith("memframe: ") and err.count("\n") == 1 and "Traceback" not in err
    assert "coffee" not in err


# --- as the benchmark runs it: a subprocess, output through a pipe -----------------------------


def test_a_subprocess_starts_without_the_frame_the_server_or_a_client(capsys, memframe_home: Path) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "init")
    backend = open_backend("default")
    lines = [f"- fact {i}\n" for i in range(50)]
    version = 0
    for n, where in enumerate((0, 10, 49, 49, 20)):  # typical edits: one line each
        lines[where] = f"- fact {where}, edited {n}\n"
        version = backend.save("".join(lines), version).version
    expected = reference(backend)
    backend.close()
    probe = (
        "import sys\n"
        "from memframe.cli import main\n"
        "code = main(['history', '-p'])\n"
        "heavy = ('textual', 'httpx', 'fastapi', 'uvicorn', 'mcp', 'asyncio', 'tomllib', 'platformdirs',\n"
        "         'logging', 'secrets', 'getpass', 'difflib')  # the last four: only writes, prompts, long middles\n"
        "print('HEAVY', sorted(m for m in heavy if m in sys.modules), code, file=sys.stderr)\n"
    )
    env = {**os.environ, "MEMFRAME_HOME": str(memframe_home)}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, check=True)
    assert b"HEAVY [] 0" in done.stderr, done.stderr
    assert done.stdout.decode() == expected


def test_a_large_output_through_an_unbuffered_pipe(capsys, memframe_home: Path) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "init")
    backend = open_backend("default")
    version = 0
    for n in range(12):  # every line changes every time: about 20 KiB of diff per revision
        version = backend.save("".join(f"- line {i} of revision {n}\n" for i in range(400)), version).version
    expected = reference(backend)
    backend.close()
    env = {**os.environ, "MEMFRAME_HOME": str(memframe_home), "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-u", "-m", "memframe", "history", "-p"]
    done = subprocess.run(command, env=env, capture_output=True, check=True)
    assert done.stdout.decode() == expected and len(done.stdout) > 200_000


# --- a history stored as deltas, read a keyframe run at a time --------------------------------

FACTS = "".join(f"- a remembered fact number {n}, with some words around it\n" for n in range(80))


def delta_history(home: Path, count: int = 140) -> list[str]:
    """`count` revisions of workspace "w", each one edit from the last, stored as the saves write
    them (deltas, a keyframe every KEYFRAME_EVERY); returns the texts."""
    from bench.data import local_home

    texts = [FACTS]
    for n in range(1, count):
        texts.append(texts[-1].replace(f"number {n % 80},", f"number {n % 80} (edit {n}),"))
    local_home(home, "w", iter(texts), deltas=True)
    return texts


def set_rows(rows: dict[int, bytes]) -> None:
    """Replace stored ciphertexts of "w"'s memory, as anyone who can write the database might."""
    from memframe import sealing
    from memframe.core.types import MEMORY_PATH

    with sqlite3.connect(paths.local_database()) as conn:
        for version, blob in rows.items():
            conn.execute(
                "UPDATE file_versions SET ciphertext = ?, content_hash = ?"
                " WHERE workspace_id = 'w' AND path = ? AND version = ?",
                (blob, sealing.content_hash(blob), MEMORY_PATH, version),
            )


def test_pages_cut_anywhere_in_a_keyframe_run_are_difflibs(memframe_home: Path) -> None:
    texts = delta_history(memframe_home)
    for limit, before in [(1, None), (3, None), (64, None), (139, None), (1000, None), (1, 2), (1, 65),
                          (2, 66), (63, 64), (64, 129), (65, 130), (70, 100), (5, 2000)]:  # fmt: skip
        backend, fresh = open_backend("w"), open_backend("w")  # nothing opened before is kept
        try:
            assert cli_history.patch(backend, limit, before) == reference(fresh, limit, before)
        finally:
            backend.close()
            fresh.close()
    assert every_text() == texts


def every_text() -> list[str]:
    """Every revision of "w"'s memory, oldest first, read at once as `history -p` reads them."""
    backend = open_backend("w")
    try:
        head = backend.history(limit=1)[0].version
        return list(backend.read_revisions(range(1, head + 1)).values())
    finally:
        backend.close()


def test_old_format_revisions_open_only_before_the_chain_began(capsys, memframe_home: Path) -> None:  # type: ignore[no-untyped-def]
    from memframe import sealing
    from memframe.core.types import MEMORY_PATH
    from memframe.sealing.keyfiles import load_key

    texts = delta_history(memframe_home, 100)
    key = load_key("w")
    # What an old memframe left (versions 1 and 2 sealed v1), then the chain from version 3 on.
    rows = {v: sealing.seal_v1(key, texts[v - 1], workspace_id="w", path=MEMORY_PATH) for v in (1, 2)}
    for version in range(3, len(texts) + 1):
        rows[version] = sealing.seal(
            key, texts[version - 1], workspace_id="w", path=MEMORY_PATH, version=version,
            previous=rows[version - 1], previous_text=texts[version - 2],
        )  # fmt: skip
    set_rows(rows)
    assert every_text() == texts
    backend, fresh = open_backend("w"), open_backend("w")
    try:
        assert cli_history.patch(backend, 1000, None) == reference(fresh, 1000)
    finally:
        backend.close()
        fresh.close()
    # An old-format text after the chain began is refused, in one line and with no text shown.
    set_rows({70: sealing.seal_v1(key, texts[69], workspace_id="w", path=MEMORY_PATH)})
    code, out, err = run(capsys, "history", "-p", "-w", "w", "--limit", "1000")
    assert (code, out) == (EXIT_ERROR, "") and err.count("\n") == 1 and "format due here" in err
    assert "remembered" not in err


@pytest.mark.parametrize("damage", ["swapped", "missing", "moved"])
def test_a_delta_whose_base_row_was_changed_fails_in_one_line(capsys, memframe_home: Path, damage) -> None:  # type: ignore[no-untyped-def]
    from memframe import sealing
    from memframe.core.types import MEMORY_PATH
    from memframe.sealing.keyfiles import load_key

    texts = delta_history(memframe_home, 100)
    key = load_key("w")
    with sqlite3.connect(paths.local_database()) as conn:
        stored = dict(conn.execute("SELECT version, ciphertext FROM file_versions WHERE workspace_id = 'w'"))
    if damage == "swapped":  # a genuine version 80 of another history: same key, same place
        fork = sealing.seal(key, "- another text\n", workspace_id="w", path=MEMORY_PATH, version=80,
                           previous=stored[79], previous_text=texts[78])  # fmt: skip
        set_rows({80: fork})
    elif damage == "missing":
        with sqlite3.connect(paths.local_database()) as conn:
            conn.execute("DELETE FROM file_versions WHERE workspace_id = 'w' AND version = 80")
    else:  # version 79's row copied over version 80
        set_rows({80: stored[79]})
    # Versions 81 … 100 are deltas whose chain runs through 80 (the keyframe before them is 65).
    code, out, err = run(capsys, "history", "-p", "-w", "w", "--limit", "5")
    assert (code, out) == (EXIT_ERROR, "") and err.startswith("memframe: ") and err.count("\n") == 1
    assert "remembered" not in err and "another" not in err
    # A page that needs nothing of version 80 still opens.
    assert run(capsys, "history", "-p", "-w", "w", "--limit", "10", "--before", "80")[0] == 0
