"""Tokens stay off the command line (issue 29, item 3).

`--token-file PATH` sits beside `--token` on every command that takes a token, MEMFRAME_TOKEN keeps
working, `--token` warns once on stderr (a command line is readable by every local user), and a
token file that cannot be used is one line and exit 1.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from memframe import settings
from memframe.cli import EXIT_ERROR, build_parser, main

TOKEN = "mf_" + "t" * 43
NOT_ONE = "The token file {path} does not hold one token"


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _parse(*argv: str) -> argparse.Namespace:
    return build_parser(settings.current()).parse_args(list(argv))


def test_every_command_that_takes_a_token_takes_a_token_file() -> None:
    commands = _commands(build_parser(settings.current()))
    with_token = {name for name, p in commands.items() if "--token" in p._option_string_actions}
    assert {"frame", "show", "chat", "mcp", "init", "key", "ai"} <= with_token
    for name in with_token:
        assert "--token-file" in commands[name]._option_string_actions, name


@pytest.mark.parametrize("command", ["frame", "show", "chat", "mcp"])
def test_the_token_file_gives_the_token_without_a_warning(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n", encoding="utf-8")
    args = _parse(command, "--remote", "http://127.0.0.1:8765", "--token-file", str(path))
    assert args.token == TOKEN
    assert capsys.readouterr().err == ""


def test_memframe_token_still_works_without_a_warning(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMFRAME_TOKEN", TOKEN)
    assert _parse("show").token == TOKEN
    assert capsys.readouterr().err == ""


def test_token_on_the_command_line_warns_once_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    args = _parse("show", "--token", "mf_a", "--token", TOKEN)
    assert args.token == TOKEN
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("memframe: warning: --token")
    assert "/proc/PID/cmdline" in err and "--token-file" in err and "MEMFRAME_TOKEN" in err
    assert TOKEN not in err and "mf_a" not in err


def test_token_and_token_file_together_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN, encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["show", "--token-file", str(path), "--token", TOKEN])
    assert exc.value.code == 2 and "not allowed with" in capsys.readouterr().err


def _unreadable(tmp_path: Path) -> Path:
    path = tmp_path / "locked"
    path.write_text(TOKEN, encoding="utf-8")
    path.chmod(0)
    return path


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda d: d / "missing", "Cannot read the token file {path}: No such file or directory."),
        (lambda d: d, "Cannot read the token file {path}: Is a directory."),
        (lambda d: (d / "empty").write_text("\n\n") and d / "empty", "The token file {path} is empty"),
        (lambda d: (d / "two").write_text("mf_a mf_b\n") and d / "two", NOT_ONE),
        (lambda d: (d / "bin").write_bytes(b"\xff\xfe") and d / "bin", NOT_ONE),
        (_unreadable, "Cannot read the token file {path}: Permission denied."),
    ],
    ids=["missing", "directory", "empty", "two words", "not text", "unreadable"],
)
def test_a_token_file_that_cannot_be_used_is_one_line_and_exit_1(
    make: object, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    if says.endswith("Permission denied.") and os.geteuid() == 0:
        pytest.skip("root reads any file")
    code = main(["show", "--remote", "http://127.0.0.1:9", "--token-file", str(path)])
    err = capsys.readouterr().err
    assert code == EXIT_ERROR
    assert err.startswith("memframe: " + says.format(path=path)) and err.count("\n") == 1, err
    assert "Traceback" not in err
