"""The CLI against the local embedded workspace: what a person types and sees."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from memframe.cli import EXIT_CONFLICT, EXIT_ERROR, build_parser, main
from tests.conftest import modules_loaded


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def initialised(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "init")[0] == 0


def write(tmp_path: Path, text: str, name: str = "m.md") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_init_creates_a_0600_key_under_memframe_home(capsys, memframe_home: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = run(capsys, "init", "--workspace", "notes")
    key = memframe_home / "keys" / "local" / "notes.key"
    assert code == 0 and str(key) in out
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    code, _, err = run(capsys, "init", "--workspace", "notes")
    assert code == EXIT_ERROR and "already exists" in err


def test_full_round_trip(capsys, initialised, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert run(capsys, "save", write(tmp_path, "# Prefs\n- tea\n"), "--base", "0")[1] == (
        "Saved version 1 (14 / 8,192 bytes).\n"
    )
    code, out, _ = run(capsys, "show")
    assert code == 0 and "version 1" in out and "- tea" in out and "Read only" in out
    run(capsys, "save", write(tmp_path, "# Prefs\n- coffee\n"), "--base", "1")
    code, out, _ = run(capsys, "diff", "1")
    assert "-- tea" in out and "+- coffee" in out
    assert "Restored revision 1" in run(capsys, "undo", "1", "--base", "2")[1]
    assert "clear generation is now 1" in run(capsys, "clear", "--base", "3")[1]
    code, out, _ = run(capsys, "history")
    lines = out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["4", "3", "2", "1"]
    assert "clear" in lines[1] and "undo of 1" in lines[2]
    code, out, _ = run(capsys, "history", "-p", "--limit", "2")
    assert "revision 4" in out and "-# Prefs" in out
    assert run(capsys, "show", "--text-only")[1] == ""


def test_diff_is_git_like(capsys, initialised, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "save", write(tmp_path, "# Prefs\n- tea"), "--base", "0")
    run(capsys, "save", write(tmp_path, "# Prefs\n- coffee\n"), "--base", "1")
    assert run(capsys, "diff", "1", "2") == (
        0,
        "--- revision 1\n+++ revision 2\n@@ -1,2 +1,2 @@\n # Prefs\n-- tea\n\\ No newline at end of file\n+- coffee\n",
        "",
    )
    assert run(capsys, "diff", "2")[1] == "Revisions 2 and 2 have the same text.\n"


def test_conflict_exits_3_names_the_version_and_writes_nothing(capsys, initialised, tmp_path) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "save", write(tmp_path, "one\n"), "--base", "0")
    code, _, err = run(capsys, "save", write(tmp_path, "two\n"), "--base", "0")
    assert code == EXIT_CONFLICT and "version 1" in err and "nothing was written" in err
    assert run(capsys, "show", "--text-only")[1] == "one\n"
    assert run(capsys, "clear", "--base", "5")[0] == EXIT_CONFLICT


def test_mode_show_change_and_stale_revision(capsys, initialised) -> None:  # type: ignore[no-untyped-def]
    assert "Read only (policy revision 0)" in run(capsys, "mode")[1]
    assert "Auto (policy revision 1)" in run(capsys, "mode", "auto")[1]
    code, _, err = run(capsys, "mode", "off", "--expected-revision", "0")
    assert code == EXIT_CONFLICT and "now auto" in err
    assert "Off (policy revision 2)" in run(capsys, "mode", "off", "--expected-revision", "1")[1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["show", "--workspace", "missing"], "no local workspace 'missing'"),
        (["diff", "7"], "no revision 7"),
        (["undo", "3", "--base", "0"], "no revision 3"),
        (["init", "--workspace", "../evil"], "not a workspace name"),
    ],
)
def test_bad_input_is_one_clear_line(capsys, initialised, argv, message) -> None:  # type: ignore[no-untyped-def]
    code, _out, err = run(capsys, *argv)
    assert code == EXIT_ERROR
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_non_utf8_file_is_refused(capsys, initialised, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"caf\xe9\n")
    code, _, err = run(capsys, "save", str(bad), "--base", "0")
    assert code == EXIT_ERROR and "not UTF-8" in err
    assert run(capsys, "save", str(tmp_path / "absent.md"), "--base", "0")[0] == EXIT_ERROR


def test_missing_key_is_a_clear_error(capsys, initialised, memframe_home: Path) -> None:  # type: ignore[no-untyped-def]
    (memframe_home / "keys" / "local" / "default.key").unlink()
    code, _, err = run(capsys, "show")
    assert code == EXIT_ERROR and "No key for workspace 'default'" in err


def test_passphrase_wrapped_key(capsys, monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MEMFRAME_PASSPHRASE", "s3cret phrase")
    assert run(capsys, "init", "--passphrase")[0] == 0
    assert run(capsys, "save", write(tmp_path, "x\n"), "--base", "0")[0] == 0
    monkeypatch.setenv("MEMFRAME_PASSPHRASE", "wrong")
    code, _, err = run(capsys, "show")
    assert code == EXIT_ERROR and "Wrong passphrase" in err


def test_key_export_and_import(capsys, initialised, monkeypatch, tmp_path: Path, memframe_home) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "save", write(tmp_path, "shared\n"), "--base", "0")
    monkeypatch.setenv("MEMFRAME_EXPORT_PASSPHRASE", "pass for bob")
    export = tmp_path / "default.mfkey"
    code, out, _ = run(capsys, "key", "export", str(export))
    assert code == 0 and "Fingerprint" in out
    key_path = memframe_home / "keys" / "local" / "default.key"
    original = key_path.read_bytes()
    key_path.unlink()
    assert run(capsys, "show")[0] == EXIT_ERROR
    assert run(capsys, "key", "import", str(export))[0] == 0
    assert run(capsys, "show", "--text-only")[1] == "shared\n"
    assert key_path.read_bytes() == original  # the same key, unwrapped again
    monkeypatch.setenv("MEMFRAME_EXPORT_PASSPHRASE", "wrong")
    assert run(capsys, "key", "import", str(export), "--force")[0] == EXIT_ERROR


def test_key_export_refuses_a_short_passphrase_and_import_another_workspace(  # type: ignore[no-untyped-def]
    capsys, initialised, monkeypatch, tmp_path: Path
) -> None:
    export = tmp_path / "default.mfkey"
    monkeypatch.setenv("MEMFRAME_EXPORT_PASSPHRASE", "short")
    code, _, err = run(capsys, "key", "export", str(export))
    assert code == EXIT_ERROR and "at least 12 characters" in err and len(err.strip().splitlines()) == 1
    assert not export.exists()
    monkeypatch.setenv("MEMFRAME_EXPORT_PASSPHRASE", "twelve chars")
    assert run(capsys, "key", "export", str(export))[0] == 0
    code, _, err = run(capsys, "key", "import", str(export), "--workspace", "other")
    assert code == EXIT_ERROR and "holds the key of workspace 'default', not 'other'" in err
    assert len(err.strip().splitlines()) == 1


def test_usage_errors_exit_2(capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as err:
        main(["save", "x.md"])
    assert err.value.code == 2
    with pytest.raises(SystemExit):
        main(["undo", "1", "--base", "-1"])
    capsys.readouterr()


def test_python_dash_m_and_light_start_up(memframe_home: Path) -> None:
    env = {**os.environ, "MEMFRAME_HOME": str(memframe_home)}
    subprocess.run([sys.executable, "-m", "memframe", "init"], check=True, env=env, capture_output=True)
    probe = (
        "import sys, runpy; sys.argv=['memframe','show']\n"
        "try:\n    runpy.run_module('memframe', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "heavy = sorted(m for m in ('textual', 'fastapi', 'uvicorn', 'httpx') if m in sys.modules)\n"
        "print('HEAVY', heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert "HEAVY []" in done.stdout, done.stdout + done.stderr


def test_a_command_line_parses_as_with_the_whole_parser_when_only_its_group_is_built(capsys) -> None:  # type: ignore[no-untyped-def]
    """`main` builds the command groups only up to the one holding the command: the frame's start
    does not build serve's, the Assistant's or the key commands'; what the command line means is the same."""
    lines = (["frame"], ["frame", "-w", "notes", "--poll", "0.5"], ["show", "--workspace", "x"], ["serve", "--db", "t"])
    for argv in lines:
        assert vars(build_parser(command=argv[0]).parse_args(argv)) == vars(build_parser().parse_args(argv))
    others = (
        "memframe.cli.server",
        "memframe.cli.admin",
        "memframe.cli.assistant",
        "memframe.cli.keys",
        "memframe.cli.mcp",
    )
    assert modules_loaded("import memframe.cli as c; c.build_parser(command='frame')", others) == []
    errors = []
    for parser in (build_parser(command="nope"), build_parser()):  # a word no group holds: every command listed
        with pytest.raises(SystemExit):
            parser.parse_args(["nope"])
        errors.append(capsys.readouterr().err)
    assert errors[0] == errors[1] and "'serve'" in errors[0] and "'mcp'" in errors[0]


def test_the_frame_creates_a_missing_local_workspace_once(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    opened: list[str] = []

    def fake_run_frame(backend, **options) -> int:  # type: ignore[no-untyped-def]
        opened.append(backend.workspace_id)
        backend.close()
        return 0

    monkeypatch.setattr("memframe.tui.app.run_frame", fake_run_frame)
    code, _, err = run(capsys)  # the first run, under the default name: created without asking
    assert code == 0 and "Created local workspace 'default'." in err
    code, _, err = run(capsys)
    assert code == 0 and "Created" not in err
    assert opened == ["default", "default"]


def test_a_mistyped_workspace_is_never_created_without_asking(capsys, monkeypatch, memframe_home: Path) -> None:  # type: ignore[no-untyped-def]
    from memframe.backend.workspaces import local_workspaces

    opened: list[str] = []

    def fake_run_frame(backend, **options) -> int:  # type: ignore[no-untyped-def]
        opened.append(backend.workspace_id)
        backend.close()
        return 0

    monkeypatch.setattr("memframe.tui.app.run_frame", fake_run_frame)
    code, _, err = run(capsys, "-w", "fresh")  # not the default: even on a first run, a script is refused
    assert code == EXIT_ERROR and err.count("\n") == 1
    assert "There is no local workspace 'fresh' (this machine has none yet); nothing was created." in err
    assert "memframe init --workspace fresh" in err
    assert run(capsys, "init", "-w", "notes")[0] == 0
    code, _, err = run(capsys, "-w", "notse")
    assert code == EXIT_ERROR and "(this machine has 'notes')" in err
    code, _, err = run(capsys)  # the default name once other workspaces exist: asked too
    assert code == EXIT_ERROR and "no local workspace 'default'" in err
    assert local_workspaces() == ["notes"] and opened == []
    assert not (memframe_home / "keys" / "local" / "notse.key").exists()

    # at a terminal the person is asked; only "y" creates
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    answers = iter(["", "y"])
    monkeypatch.setattr("builtins.input", lambda question: next(answers))
    code, _, err = run(capsys, "-w", "notse")
    assert code == EXIT_ERROR and "Nothing was created." in err and local_workspaces() == ["notes"]
    code, _, err = run(capsys, "-w", "fresh")
    assert code == 0 and "Created local workspace 'fresh'." in err
    assert local_workspaces() == ["fresh", "notes"] and opened == ["fresh"]


def test_the_frame_polls_every_three_seconds_unless_told(capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    seen: list[dict[str, float]] = []

    def fake_run_frame(backend, **options) -> int:  # type: ignore[no-untyped-def]
        seen.append(options)
        backend.close()
        return 0

    monkeypatch.setattr("memframe.tui.app.run_frame", fake_run_frame)
    assert run(capsys)[0] == 0
    assert run(capsys, "--poll", "0")[0] == 0
    assert seen == [{"poll_seconds": 3.0}, {"poll_seconds": 0.0}]
    with pytest.raises(SystemExit) as usage:  # argparse's own usage error: exit 2
        main(["--poll", "0.1"])
    assert usage.value.code == 2 and "at least 0.5 seconds" in capsys.readouterr().err


def test_key_export_and_import_name_their_variable_when_there_is_no_terminal(  # type: ignore[no-untyped-def]
    capsys, initialised, monkeypatch, tmp_path: Path
) -> None:
    export = tmp_path / "default.mfkey"
    code, _, err = run(capsys, "key", "export", str(export))  # no terminal, no variable
    assert code == EXIT_ERROR
    assert err == "memframe: No terminal to ask for a passphrase: set MEMFRAME_EXPORT_PASSPHRASE.\n"
    monkeypatch.setenv("MEMFRAME_EXPORT_PASSPHRASE", "pass for bob")
    assert run(capsys, "key", "export", str(export))[0] == 0
    monkeypatch.delenv("MEMFRAME_EXPORT_PASSPHRASE")
    code, _, err = run(capsys, "key", "import", str(export), "--force")
    assert code == EXIT_ERROR and "set MEMFRAME_EXPORT_PASSPHRASE." in err and err.count("\n") == 1
