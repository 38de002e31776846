"""Every setting memframe reads, from one place: the environment and one config file.

Precedence, highest first: a command-line option (the CLI uses these values as
its defaults), then a `MEMFRAME_*` environment variable, then the config file,
then the built-in default. The environment variables:

| variable | what it sets |
| --- | --- |
| `MEMFRAME_HOME` | the home folder (database, keys; tests always set it) |
| `MEMFRAME_CONFIG` | the config file (default: `config.toml` in `$MEMFRAME_HOME`, else the user's config directory) |
| `MEMFRAME_WORKSPACE` | the workspace name |
| `MEMFRAME_URL`, `MEMFRAME_TOKEN` | a memframe server and its bearer token |
| `MEMFRAME_PASSPHRASE` | the passphrase of a wrapped key file |
| `MEMFRAME_EXPORT_PASSPHRASE` | the passphrase for `memframe key export` / `import` |
| `MEMFRAME_DB` | the server's database for `memframe serve` / `admin`: a SQLite file or a `postgresql://` URL |
| `MEMFRAME_MODEL_KEY` | the API key sent to an OpenAI-compatible model server |
| `MEMFRAME_KEYSESSIONS_CREDENTIAL` | the secret between servers and `memframe keysessions` (or `--credential-file`) |

The config file keeps what a person would keep (TOML; every key optional)::

    workspace = "notes"          # the default workspace
    theme = "textual-dark"
    [keymap]                     # binding id -> keys
    save = "ctrl+s"
    [model]
    url = "http://127.0.0.1:8080/v1"
    name = "gemma-3-270m"
    max_tokens = 512
    timeout = 60
    tool_choice = "auto"
    system_as_user = false
    temperature = 0.2

Secrets (tokens, passphrases, API keys) come only from the environment, never
from the file. A file memframe cannot read or understand is one `InvalidInput`
line naming the file and the problem.

Start-up stays light: this module imports only `os`, `sys` and `types` at the top (the
fast `history -p` path loads it), TOML is parsed only when the file exists, and
`Settings` is a hand-written frozen record because `dataclasses` would import
`inspect` on that path. Nor does that path import `pathlib` (with `fnmatch`, `re` and
`urllib.parse` behind it, a third of its start-up): the folders are read as strings, and a
`Path` is made the first time a caller asks for `home` or `config_file`; and on Linux, without
`MEMFRAME_HOME`, the folders are found without importing platformdirs (`_user_dir`).
"""

from __future__ import annotations

import os
import sys
from types import MappingProxyType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

CONFIG_NAME = "config.toml"
DEFAULT_WORKSPACE = "default"
DEFAULT_MODEL_NAME = "default"


class Settings:
    """What memframe runs with, resolved once from the environment and the config file; frozen.

    - `home`: where the database and key files live; `home_from_env` says it came from `$MEMFRAME_HOME`;
      `home_dir` is the same folder as a string (`str(home)`), for callers that need no `Path`.
    - `config_file`: the config file looked at (it may not exist).
    - `workspace`: the default workspace name.
    - `remote_url`, `token`: a memframe server and its bearer token (None: the local embedded workspace).
    - `passphrase`, `export_passphrase`: passphrases for wrapped key files (environment only).
    - `db`: the server's database for `serve` and `admin` (None: `--db` is required).
    - `keysessions_credential`: the secret servers and the key-session service share (environment only).
    - `model_url`, `model_name`, `model_key`: an OpenAI-compatible model server, the model to ask it
      for, and its API key (None url: the built-in scripted model).
    - `model_max_tokens`, `model_timeout`, `model_tool_choice`, `model_system_as_user`, `model_temperature`:
      how to call that model; None leaves the model client's own default.
    - `theme`, `keymap`: the frame's look and its key bindings (binding id -> keys).
    """

    #: The fields, in the order `repr` shows them.
    _FIELDS = (
        "config_file",
        "db",
        "export_passphrase",
        "home",
        "home_from_env",
        "keymap",
        "keysessions_credential",
        "model_key",
        "model_max_tokens",
        "model_name",
        "model_system_as_user",
        "model_temperature",
        "model_timeout",
        "model_tool_choice",
        "model_url",
        "passphrase",
        "remote_url",
        "theme",
        "token",
        "workspace",
    )
    # `home` and `config_file` are kept as strings (or as the Paths given) and made Paths when read.
    __slots__ = (*(n for n in _FIELDS if n not in ("home", "config_file")), "_config_file", "_home", "home_dir")

    _home: Path | str
    _config_file: Path | str
    home_dir: str
    home_from_env: bool
    workspace: str
    remote_url: str | None
    token: str | None
    passphrase: str | None
    export_passphrase: str | None
    db: str | None
    keysessions_credential: str | None
    model_url: str | None
    model_name: str
    model_key: str | None
    model_max_tokens: int | None
    model_timeout: float | None
    model_tool_choice: str | None
    model_system_as_user: bool | None
    model_temperature: float | None
    theme: str | None
    keymap: Mapping[str, str]

    def __init__(self, **values: Any) -> None:
        """`home` and `config_file` may be given as a `Path` or as a path string."""
        unknown = set(values) - set(self._FIELDS)
        missing = set(self._FIELDS) - set(values)
        if unknown or missing:
            raise TypeError(f"Settings: unknown {sorted(unknown)}, missing {sorted(missing)}")
        for name, value in values.items():
            if name in ("home", "config_file"):
                name = "_" + name
                if name == "_home":
                    object.__setattr__(self, "home_dir", os.fspath(value))
            object.__setattr__(self, name, value)

    @property
    def home(self) -> Path:
        return self._path_in("_home")

    @property
    def config_file(self) -> Path:
        return self._path_in("_config_file")

    def _path_in(self, slot: str) -> Path:
        """The Path kept in `slot`, made (once) from the string it was given as."""
        value = getattr(self, slot)
        if isinstance(value, str):
            value = _path(value)
            object.__setattr__(self, slot, value)
        return value  # type: ignore[no-any-return]

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Settings are frozen; cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Settings):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._FIELDS)

    __hash__ = None  # type: ignore[assignment]  # keymap is a mapping

    def __repr__(self) -> str:
        secret = {"token", "passphrase", "export_passphrase", "model_key", "keysessions_credential"}
        shown = (f"{n}={'***' if n in secret and getattr(self, n) else repr(getattr(self, n))}" for n in self._FIELDS)
        return f"Settings({', '.join(shown)})"


def _path(location: str) -> Path:
    from pathlib import Path

    return Path(location)


def _plain(location: str) -> bool:
    """Whether `Path(location)` (after `expanduser`) is `location` itself, so the string can stand in
    for the Path: no `~`, no empty or `.` component, no trailing slash. Anything else takes pathlib."""
    return bool(location) and not (
        location[0] == "~"
        or location.endswith(("/", "/."))
        or location.startswith("./")
        or location == "."
        or "//" in location
        or "/./" in location
        or os.sep != "/"
    )


def _location(location: str) -> str:
    """`str(Path(location).expanduser())`, without importing pathlib when the string is plain already."""
    if _plain(location):
        return location
    return str(_path(location).expanduser())


def join_location(folder: str, name: str) -> str:
    """`str(Path(folder) / name)` for a `folder` that is `str()` of a Path already (`Settings.home_dir`)."""
    if folder == ".":
        return name
    return folder + name if folder.endswith("/") else f"{folder}/{name}"


def _config_location(environ: Mapping[str, str]) -> str:
    """`config_path(environ)` as a string."""
    named = environ.get("MEMFRAME_CONFIG")
    if named:
        return _location(named)
    home = environ.get("MEMFRAME_HOME")
    if home:
        return join_location(_location(home), CONFIG_NAME)
    return join_location(_user_dir("config"), CONFIG_NAME)


#: kind -> (the XDG variable naming the folder, the folder in $HOME without it), as platformdirs reads them.
_XDG_USER_DIRS = {"data": ("XDG_DATA_HOME", "/.local/share"), "config": ("XDG_CONFIG_HOME", "/.config")}


def _user_dir(kind: str) -> str:
    """`str(Path(platformdirs.user_<kind>_dir("memframe", appauthor=False)))` for kind "data" or
    "config": the folder with no `MEMFRAME_HOME` (or `MEMFRAME_CONFIG`), as a string.

    platformdirs takes ~30 ms to import (pathlib, re, tempfile and its own modules), which a person
    without `MEMFRAME_HOME` would pay on every command, `history -p` too. On Linux with an absolute
    `$HOME` its answer is short to give (`_xdg_user_dir`); everywhere else it is asked."""
    plain = _xdg_user_dir(kind)
    if plain is not None:
        return plain
    import platformdirs

    found = platformdirs.user_data_dir if kind == "data" else platformdirs.user_config_dir
    return str(_path(found("memframe", appauthor=False)))


def _xdg_user_dir(kind: str) -> str | None:
    """platformdirs' user folder of `kind` on Linux (not Android) with an absolute `$HOME`: the XDG
    variable when it is an absolute path, else that folder in `$HOME`; then "memframe" in it. None
    anywhere else, and for a location pathlib would rewrite. platformdirs reads `os.environ`, and so
    does this. (Checked against platformdirs itself by the tests.)"""
    environ = os.environ
    if sys.platform != "linux" or hasattr(sys, "getandroidapilevel"):
        return None
    if environ.get("ANDROID_DATA") == "/data" and environ.get("ANDROID_ROOT") == "/system":
        return None  # what platformdirs takes for an Android app: it decides
    home = environ.get("HOME", "")
    if not home.startswith("/"):
        return None  # no HOME, or a relative one: platformdirs asks the password database
    variable, in_home = _XDG_USER_DIRS[kind]
    base = environ.get(variable, "")
    if not base.startswith("/"):  # unset, empty or relative: ignored, as the XDG spec says
        base = (home.rstrip("/") + in_home) or "/"  # os.path.expanduser("~" + in_home)
    folder = os.path.join(base, "memframe")
    return folder if _plain(folder) else None


def config_path(environ: Mapping[str, str]) -> Path:
    """`$MEMFRAME_CONFIG`, else `config.toml` in `$MEMFRAME_HOME`, else in the user's config directory."""
    return _path(_config_location(environ))


def load(environ: Mapping[str, str] | None = None) -> Settings:
    """Read the environment (default `os.environ`) and the config file it points at, once."""
    env = os.environ if environ is None else environ
    config_file = _config_location(env)
    file = _read_file(config_file, required=bool(env.get("MEMFRAME_CONFIG")))
    model: dict[str, Any] = file.get("model", {})
    home_env = env.get("MEMFRAME_HOME")
    home = _location(home_env) if home_env else _user_dir("data")
    db = env.get("MEMFRAME_DB")
    return Settings(
        home=home,
        home_from_env=bool(home_env),
        config_file=config_file,
        workspace=env.get("MEMFRAME_WORKSPACE") or file.get("workspace") or DEFAULT_WORKSPACE,
        remote_url=env.get("MEMFRAME_URL") or None,
        token=env.get("MEMFRAME_TOKEN") or None,
        passphrase=env.get("MEMFRAME_PASSPHRASE") or None,
        export_passphrase=env.get("MEMFRAME_EXPORT_PASSPHRASE") or None,
        db=db or None,
        keysessions_credential=env.get("MEMFRAME_KEYSESSIONS_CREDENTIAL") or None,
        model_url=model.get("url"),
        model_name=model.get("name", DEFAULT_MODEL_NAME),
        model_key=env.get("MEMFRAME_MODEL_KEY") or None,
        model_max_tokens=model.get("max_tokens"),
        model_timeout=model.get("timeout"),
        model_tool_choice=model.get("tool_choice"),
        model_system_as_user=model.get("system_as_user"),
        model_temperature=model.get("temperature"),
        theme=file.get("theme"),
        keymap=MappingProxyType(dict(file.get("keymap", {}))),
    )


_cache: tuple[tuple[object, ...], Settings] | None = None


def current() -> Settings:
    """`load()` for this process, read again only when a `MEMFRAME_*` variable or the file changes
    (tests change the environment between calls; a long-running frame sees an edited file)."""
    global _cache
    env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("MEMFRAME_")))
    try:
        stamp: object = os.stat(_config_location(os.environ)).st_mtime_ns
    except OSError:
        stamp = None
    key = (env, stamp)
    if _cache is None or _cache[0] != key:
        _cache = (key, load())
    return _cache[1]


# --- the config file ---------------------------------------------------------------------------

#: key -> (type, what a value must be); a table of keys nests another such mapping.
_MODEL_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "url": ((str,), "a URL string"),
    "name": ((str,), "a string"),
    "max_tokens": ((int,), "a positive whole number"),
    "timeout": ((int, float), "a positive number of seconds"),
    "tool_choice": ((str,), 'a string such as "auto"'),
    "system_as_user": ((bool,), "true or false"),
    "temperature": ((int, float), "a number, 0 or more"),
}
_TOP_KEYS: dict[str, tuple[tuple[type, ...], str]] = {
    "workspace": ((str,), "a workspace name"),
    "theme": ((str,), "a theme name"),
    "keymap": ((dict,), "a table of binding id = keys"),
    "model": ((dict,), "a table"),
}


def _read_file(path: str, *, required: bool) -> dict[str, Any]:
    """The file's settings, checked; {} when there is no file (unless `$MEMFRAME_CONFIG` named it)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        if not required:
            return {}
        raise _invalid(path, "there is no such file ($MEMFRAME_CONFIG names it)") from None
    except OSError as exc:
        raise _invalid(path, f"cannot read it ({exc.strerror})") from None
    import tomllib

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise _invalid(path, "it is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise _invalid(path, f"it is not valid TOML ({exc})") from None
    _check(path, data, _TOP_KEYS, "")
    _check(path, data.get("model", {}), _MODEL_KEYS, "model.")
    for binding, keys in data.get("keymap", {}).items():
        if not isinstance(keys, str) or not keys:
            raise _invalid(path, f'keymap.{binding} must be keys as a string, e.g. "ctrl+s"')
    return data


def _check(path: str, table: dict[str, Any], known: dict[str, tuple[tuple[type, ...], str]], prefix: str) -> None:
    for name, value in table.items():
        if name not in known:
            raise _invalid(path, f"unknown setting {prefix}{name} (known: {', '.join(prefix + k for k in known)})")
        types, wanted = known[name]
        stray_bool = isinstance(value, bool) and types != (bool,)  # TOML true is no number of tokens
        if (
            stray_bool
            or not isinstance(value, types)
            or (isinstance(value, (int, float)) and wanted.startswith("a positive") and value <= 0)
            or (isinstance(value, (int, float)) and wanted.endswith("0 or more") and not value >= 0)
        ):
            raise _invalid(path, f"{prefix}{name} must be {wanted}, not {value!r}")


def _invalid(path: str | Path, problem: str) -> Exception:
    from memframe.core.errors import InvalidInput

    return InvalidInput(f"The config file {path} is not usable: {problem}.")


# --- writing one setting back ------------------------------------------------------------------


def write_setting(path: Path, key: str, value: str) -> None:
    """Set the top-level string setting `key` in the config file at `path`, keeping everything else.

    The frame remembers the theme picked in the command palette this way. The file's other lines
    (comments, tables, keys) are kept as they are: an existing top-level `key = …` line is replaced,
    otherwise the line goes before the first table (or at the end). A missing file (and folder) is
    created. The result is parsed again before it replaces the file, atomically, so a file memframe
    cannot read is never overwritten and a half-written one never left behind. Any failure is one
    `InvalidInput` line naming the file.
    """
    if key not in _TOP_KEYS or _TOP_KEYS[key][0] != (str,):
        raise ValueError(f"{key!r} is not a top-level string setting")
    import json
    import tomllib

    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise _invalid(path, f"cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        tomllib.loads(old)
    except tomllib.TOMLDecodeError as exc:
        raise _invalid(path, f"it is not valid TOML ({exc}), so it was left as it is") from None
    line = f"{key} = {json.dumps(value, ensure_ascii=False)}"  # a JSON string is a TOML basic string
    lines = old.splitlines()
    first_table = next((i for i, text in enumerate(lines) if text.lstrip().startswith("[")), len(lines))
    for i in range(first_table):
        name = lines[i].split("=", 1)[0].strip()
        if "=" in lines[i] and name.strip("\"'") == key:
            lines[i] = line
            break
    else:
        at = first_table
        while at > 0 and not lines[at - 1].strip():
            at -= 1  # after the last top-level line, not after the blank lines before a table
        lines.insert(at, line)
    new = "\n".join(lines) + "\n"
    try:
        written = tomllib.loads(new)
    except tomllib.TOMLDecodeError as exc:  # e.g. the key sat inside a multi-line string
        raise _invalid(path, f"{key} could not be set without breaking it ({exc})") from None
    if written.get(key) != value:
        raise _invalid(path, f"{key} could not be set without breaking it")
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(new, encoding="utf-8")
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise _invalid(path, f"cannot write it ({exc.strerror or exc})") from None
