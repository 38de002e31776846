"""The short `history -p` path reads settings, paths and migration names without pathlib or re:
each hand-written reader must agree with the library it stands in for."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from memframe import paths, settings
from memframe.service import reads


@pytest.mark.parametrize(
    "location",
    ["/tmp/a", "/tmp/a/", "//tmp/a", "///tmp", "~/x", "~", "/", ".", "a/./b", "./a", "a", "/tmp/a/.", "a//b"],
)
def test_locations_are_what_pathlib_makes_of_them(location: str) -> None:
    env = {"MEMFRAME_HOME": location}
    loaded = settings.load(env)
    assert loaded.home == Path(location).expanduser()
    assert loaded.home_dir == str(loaded.home)
    assert settings.config_path(env) == Path(location).expanduser() / "config.toml"
    assert settings._config_location({"MEMFRAME_CONFIG": location}) == str(Path(location).expanduser())


def test_the_string_locations_are_the_paths(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMFRAME_HOME", str(tmp_path) + "/")
    assert paths.local_database_location() == str(paths.local_database())
    assert paths.key_file_location("notes") == str(paths.key_file("notes"))
    url = "https://example.org/x"
    assert paths.key_file_location("notes", url) == str(paths.key_file("notes", url))


def test_workspace_ids_are_checked_as_the_pattern_checks_them() -> None:
    names = ["a", "A9", "a" * 64, "a" * 65, "", "-a", ".a", "a.b_c-d", "a b", "é", "a\n", "ab/c", "٣"]
    names += ["".join(p) for n in range(1, 4) for p in itertools.product("a.-_\n", repeat=n)]
    for name in names:
        assert paths._workspace_id_ok(name) == bool(re.match(paths._WORKSPACE_PATTERN, name)), repr(name)


def test_migration_names_are_read_as_the_pattern_reads_them() -> None:
    names = ["0001_a.sql", "0001_.sql", "001_a.sql", "00011_a.sql", "0001_A.sql", "0001_a.sql\n", "0001_a.txt"]
    names += ["0001_a-b.sql", "٠٠٠١_a.sql", "__init__.py", "0002_files.sql", "x0001_a.sql", "0001_a.sqlx"]
    for name in names:
        match = re.match(reads._MIGRATION_PATTERN, name)
        assert reads._migration_number(name) == (int(match.group(1)) if match else None), repr(name)
