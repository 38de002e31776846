"""One settings module: the environment beats the config file, a command-line option beats both,
and a config file memframe cannot use is one line naming the file, exit 1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memframe import settings
from memframe.cli import EXIT_ERROR, build_parser, main
from memframe.core.errors import InvalidInput
from memframe.tui.text import short_location

CONFIG = """\
workspace = "notes"
theme = "textual-light"

[keymap]
save = "ctrl+w"

[model]
url = "http://127.0.0.1:8080/v1"
name = "gemma"
max_tokens = 256
timeout = 30.5
tool_choice = "required"
system_as_user = true
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def config(memframe_home: Path) -> Path:
    memframe_home.mkdir(parents=True, exist_ok=True)
    path = memframe_home / "config.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def test_without_a_file_the_built_in_defaults_apply(memframe_home: Path) -> None:
    current = settings.load()
    assert (current.home, current.home_from_env) == (memframe_home, True)
    assert current.config_file == memframe_home / "config.toml"
    assert (current.workspace, current.remote_url, current.token, current.db) == ("default", None, None, None)
    assert (current.model_url, current.model_name, current.model_max_tokens, current.theme) == (
        None,
        "default",
        None,
        None,
    )
    assert dict(current.keymap) == {}


def test_the_file_sets_what_a_person_keeps(config: Path) -> None:
    current = settings.load()
    assert current.workspace == "notes" and current.theme == "textual-light"
    assert dict(current.keymap) == {"save": "ctrl+w"}
    assert (current.model_url, current.model_name) == ("http://127.0.0.1:8080/v1", "gemma")
    assert (current.model_max_tokens, current.model_timeout) == (256, 30.5)
    assert (current.model_tool_choice, current.model_system_as_user) == ("required", True)


def test_the_environment_beats_the_file_and_an_option_beats_both(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert build_parser(settings.load()).parse_args(["show"]).workspace == "notes"
    monkeypatch.setenv("MEMFRAME_WORKSPACE", "from-env")
    assert settings.load().workspace == "from-env"
    assert build_parser(settings.load()).parse_args(["show"]).workspace == "from-env"
    assert build_parser(settings.load()).parse_args(["show", "-w", "typed"]).workspace == "typed"
    chat = build_parser(settings.load()).parse_args(["chat", "--model", "other"])
    assert (chat.model_url, chat.model) == ("http://127.0.0.1:8080/v1", "other")


def test_secrets_come_from_the_environment_only_and_are_not_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMFRAME_TOKEN", "mf_secret-token")
    monkeypatch.setenv("MEMFRAME_MODEL_KEY", "sk-secret")
    current = settings.load()
    assert (current.token, current.model_key) == ("mf_secret-token", "sk-secret")
    assert "mf_secret-token" not in repr(current) and "sk-secret" not in repr(current)
    with pytest.raises(AttributeError):
        current.workspace = "other"  # type: ignore[misc]


def test_memframe_config_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    named = tmp_path / "elsewhere.toml"
    named.write_text('workspace = "team"\n', encoding="utf-8")
    monkeypatch.setenv("MEMFRAME_CONFIG", str(named))
    assert settings.load().workspace == "team"
    named.unlink()
    with pytest.raises(InvalidInput, match="there is no such file"):
        settings.load()  # a file named on purpose must exist; the default one may not


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("workspace = \n", "is not valid TOML"),
        ("colour = 'red'\n", "unknown setting colour"),
        ("[model]\nmax_tokens = 'many'\n", "model.max_tokens must be a positive whole number"),
        ("[model]\nmax_tokens = true\n", "model.max_tokens must be a positive whole number"),
        ("[model]\ntimeout = -1\n", "model.timeout must be a positive number of seconds"),
        ("[model]\nsystem_as_user = 'yes'\n", "model.system_as_user must be true or false"),
        ("[model]\nkey = 'sk-x'\n", "unknown setting model.key"),
        ("[keymap]\nsave = 1\n", "keymap.save must be keys as a string"),
        ("keymap = 'ctrl+s'\n", "keymap must be a table"),
    ],
)
def test_a_config_file_memframe_cannot_use_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str], memframe_home: Path, text: str, problem: str
) -> None:
    memframe_home.mkdir(parents=True, exist_ok=True)
    path = memframe_home / "config.toml"
    path.write_text(text, encoding="utf-8")
    for argv in (["show"], ["history", "-p"]):  # the full CLI and the fast history path alike
        code, out, err = run(capsys, *argv)
        assert (code, out) == (EXIT_ERROR, "")
        assert err.count("\n") == 1 and str(path) in err and problem in err, err


def test_a_bad_config_file_in_a_fresh_interpreter_has_no_traceback(memframe_home: Path) -> None:
    memframe_home.mkdir(parents=True, exist_ok=True)
    (memframe_home / "config.toml").write_bytes(b"\xff\xfe not text")
    env = {**os.environ, "MEMFRAME_HOME": str(memframe_home)}
    done = subprocess.run([sys.executable, "-m", "memframe", "show"], env=env, capture_output=True, text=True)
    assert done.returncode == EXIT_ERROR
    assert done.stderr.startswith("memframe: The config file ") and "not UTF-8" in done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1


def test_history_uses_the_files_workspace(capsys: pytest.CaptureFixture[str], config: Path, tmp_path: Path) -> None:
    assert run(capsys, "init")[0] == 0  # the file's workspace: notes
    (tmp_path / "m.md").write_text("- tea\n", encoding="utf-8")
    code, out, _ = run(capsys, "save", str(tmp_path / "m.md"), "--base", "0")
    assert code == 0 and out.startswith("Saved version 1 ")

    code, out, _ = run(capsys, "history", "-p")
    assert code == 0 and "+- tea" in out


def test_the_frame_shortens_places_under_memframe_home(memframe_home: Path) -> None:
    assert short_location(str(memframe_home / "memframe.db")) == str(Path("$MEMFRAME_HOME") / "memframe.db")


# --- writing the theme back ----------------------------------------------------------------------


def test_write_setting_replaces_the_line_and_keeps_everything_else(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("# my settings\n" + CONFIG, encoding="utf-8")
    settings.write_setting(path, "theme", "nord")
    text = path.read_text(encoding="utf-8")
    assert text == "# my settings\n" + CONFIG.replace('theme = "textual-light"', 'theme = "nord"')
    loaded = settings.load({"MEMFRAME_CONFIG": str(path), "MEMFRAME_HOME": str(tmp_path)})
    assert loaded.theme == "nord" and loaded.keymap == {"save": "ctrl+w"} and loaded.model_max_tokens == 256


def test_write_setting_adds_a_missing_key_before_the_first_table(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('workspace = "notes"\n\n[keymap]\nsave = "ctrl+w"\n', encoding="utf-8")
    settings.write_setting(path, "theme", 'odd "name" ☃')
    assert path.read_text(encoding="utf-8") == (
        'workspace = "notes"\ntheme = "odd \\"name\\" ☃"\n\n[keymap]\nsave = "ctrl+w"\n'
    )
    assert settings.load({"MEMFRAME_CONFIG": str(path)}).theme == 'odd "name" ☃'


def test_write_setting_creates_a_missing_file_and_folder(tmp_path: Path) -> None:
    path = tmp_path / "not" / "yet" / "config.toml"
    settings.write_setting(path, "theme", "dracula")
    assert path.read_text(encoding="utf-8") == 'theme = "dracula"\n'
    assert [p.name for p in path.parent.iterdir()] == ["config.toml"]  # no temporary file left behind


def test_write_setting_never_overwrites_a_file_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("theme = [unclosed\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match="not valid TOML"):
        settings.write_setting(path, "theme", "nord")
    assert path.read_text(encoding="utf-8") == "theme = [unclosed\n"


def test_write_setting_a_write_failure_is_one_line_naming_the_file(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")  # so the config's folder cannot be made, even by root
    target = blocker / "config.toml"
    with pytest.raises(InvalidInput, match=r"cannot (read|write) it") as caught:
        settings.write_setting(target, "theme", "nord")
    assert str(target) in str(caught.value) and "\n" not in str(caught.value)
    assert blocker.read_text(encoding="utf-8") == "not a folder"


def test_write_setting_only_writes_top_level_strings(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        settings.write_setting(tmp_path / "config.toml", "keymap", "x")


def test_without_memframe_home_the_folders_are_platformdirs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import platformdirs

    for name in ("MEMFRAME_HOME", "MEMFRAME_CONFIG", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # never a real home
    current = settings.load()
    assert (current.home, current.home_from_env) == (platformdirs.user_data_path("memframe", appauthor=False), False)
    assert current.config_file == platformdirs.user_config_path("memframe", appauthor=False) / "config.toml"


@pytest.mark.parametrize("location", ["/tmp/a", "/tmp/a/", "~/x", "~", "a/./b", "./a", "a//b"])
def test_memframe_home_and_config_are_read_as_paths(location: str) -> None:
    loaded = settings.load({"MEMFRAME_HOME": location})
    assert loaded.home == Path(location).expanduser()
    assert loaded.config_file == Path(location).expanduser() / "config.toml"
    assert settings.config_path({"MEMFRAME_CONFIG": location}) == Path(location).expanduser()
