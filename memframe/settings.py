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
    grounded_capture = true      # an automatic edit the person's message does not support becomes a proposal
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
line naming the file and the problem. The frame checks what only it can judge
(that each key of `[keymap]` is a key, and the theme a theme) when it starts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from memframe.core.errors import InvalidInput

CONFIG_NAME = "config.toml"
DEFAULT_WORKSPACE = "default"
DEFAULT_MODEL_NAME = "default"


@dataclass(frozen=True)
class Settings:
    """What memframe runs with, resolved once from the environment and the config file."""

    #: Where the database and key files live: `$MEMFRAME_HOME`, else the user data directory.
    home: Path
    #: Whether `home` came from `$MEMFRAME_HOME` (the frame then shows places under it shortened).
    home_from_env: bool
    #: The config file looked at (it may not exist).
    config_file: Path
    #: The default workspace name.
    workspace: str = DEFAULT_WORKSPACE
    #: A memframe server (None: the local embedded workspace).
    remote_url: str | None = None
    #: The server's bearer token (environment only).
    token: str | None = field(default=None, repr=False)
    #: The passphrase of a wrapped key file (environment only).
    passphrase: str | None = field(default=None, repr=False)
    #: The passphrase `memframe key export` / `import` wrap with (environment only).
    export_passphrase: str | None = field(default=None, repr=False)
    #: The server's database for `serve` and `admin` (None: `--db` is required).
    db: str | None = None
    #: The secret servers and the key-session service share (environment only).
    keysessions_credential: str | None = field(default=None, repr=False)
    #: An OpenAI-compatible model server (None: the built-in scripted model).
    model_url: str | None = None
    #: The model to ask that server for.
    model_name: str = DEFAULT_MODEL_NAME
    #: The API key sent to the model server (environment only).
    model_key: str | None = field(default=None, repr=False)
    #: How to call the model; None leaves the model client's own default.
    model_max_tokens: int | None = None
    model_timeout: float | None = None
    model_tool_choice: str | None = None
    model_system_as_user: bool | None = None
    model_temperature: float | None = None
    #: Whether an automatic edit the person's message of the turn does not support becomes a proposal
    #: (`memframe.core.grounding`): for small models; a local workspace's, and `serve`'s default.
    grounded_capture: bool = False
    #: The frame's theme (None: Textual's default).
    theme: str | None = None
    #: The frame's key bindings: binding id (with or without `memframe.`) -> keys.
    keymap: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


def config_path(environ: Mapping[str, str]) -> Path:
    """`$MEMFRAME_CONFIG`, else `config.toml` in `$MEMFRAME_HOME`, else in the user's config directory."""
    if named := environ.get("MEMFRAME_CONFIG"):
        return Path(named).expanduser()
    if home := environ.get("MEMFRAME_HOME"):
        return Path(home).expanduser() / CONFIG_NAME
    return _user_path("config") / CONFIG_NAME


def _user_path(kind: str) -> Path:
    """The platform's user data or config folder for memframe, as platformdirs names it."""
    import platformdirs  # it loads its platform's module on import: only a home not named by MEMFRAME_HOME needs it

    named = platformdirs.user_data_path if kind == "data" else platformdirs.user_config_path
    return named("memframe", appauthor=False)


def load(environ: Mapping[str, str] | None = None) -> Settings:
    """Read the environment (default `os.environ`) and the config file it points at, once."""
    env = os.environ if environ is None else environ
    config_file = config_path(env)
    file = _read_file(config_file, required=bool(env.get("MEMFRAME_CONFIG")))
    model: dict[str, Any] = file.get("model", {})
    home_env = env.get("MEMFRAME_HOME")
    home = Path(home_env).expanduser() if home_env else _user_path("data")
    return Settings(
        home=home,
        home_from_env=bool(home_env),
        config_file=config_file,
        workspace=env.get("MEMFRAME_WORKSPACE") or file.get("workspace") or DEFAULT_WORKSPACE,
        remote_url=env.get("MEMFRAME_URL") or None,
        token=env.get("MEMFRAME_TOKEN") or None,
        passphrase=env.get("MEMFRAME_PASSPHRASE") or None,
        export_passphrase=env.get("MEMFRAME_EXPORT_PASSPHRASE") or None,
        db=env.get("MEMFRAME_DB") or None,
        keysessions_credential=env.get("MEMFRAME_KEYSESSIONS_CREDENTIAL") or None,
        model_url=model.get("url"),
        model_name=model.get("name", DEFAULT_MODEL_NAME),
        model_key=env.get("MEMFRAME_MODEL_KEY") or None,
        model_max_tokens=model.get("max_tokens"),
        model_timeout=model.get("timeout"),
        model_tool_choice=model.get("tool_choice"),
        model_system_as_user=model.get("system_as_user"),
        model_temperature=model.get("temperature"),
        grounded_capture=file.get("grounded_capture", False),
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
        stamp: object = config_path(os.environ).stat().st_mtime_ns
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
    "grounded_capture": ((bool,), "true or false"),
    "keymap": ((dict,), "a table of binding id = keys"),
    "model": ((dict,), "a table"),
}


def _read_file(path: Path, *, required: bool) -> dict[str, Any]:
    """The file's settings, checked; {} when there is no file (unless `$MEMFRAME_CONFIG` named it)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        if not required:
            return {}
        raise invalid_file(path, "there is no such file ($MEMFRAME_CONFIG names it)") from None
    except OSError as exc:
        raise invalid_file(path, f"cannot read it ({exc.strerror})") from None
    import tomllib  # it compiles its patterns on import: only a file that exists pays for them

    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise invalid_file(path, "it is not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise invalid_file(path, f"it is not valid TOML ({exc})") from None
    _check(path, data, _TOP_KEYS, "")
    _check(path, data.get("model", {}), _MODEL_KEYS, "model.")
    for binding, keys in data.get("keymap", {}).items():
        if not isinstance(keys, str) or not keys:
            raise invalid_file(path, f'keymap.{binding} must be keys as a string, e.g. "ctrl+s"')
    return data


def _check(path: Path, table: dict[str, Any], known: dict[str, tuple[tuple[type, ...], str]], prefix: str) -> None:
    for name, value in table.items():
        if name not in known:
            raise invalid_file(path, f"unknown setting {prefix}{name} (known: {', '.join(prefix + k for k in known)})")
        types, wanted = known[name]
        stray_bool = isinstance(value, bool) and types != (bool,)  # TOML true is no number of tokens
        if (
            stray_bool
            or not isinstance(value, types)
            or (isinstance(value, (int, float)) and wanted.startswith("a positive") and value <= 0)
            or (isinstance(value, (int, float)) and wanted.endswith("0 or more") and not value >= 0)
        ):
            raise invalid_file(path, f"{prefix}{name} must be {wanted}, not {value!r}")


def invalid_file(path: Path, problem: str) -> InvalidInput:
    """The one error for a config file memframe cannot use: one line naming the file and the problem."""
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
    import tomllib

    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise invalid_file(path, f"cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    try:
        tomllib.loads(old)
    except tomllib.TOMLDecodeError as exc:
        raise invalid_file(path, f"it is not valid TOML ({exc}), so it was left as it is") from None
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
        raise invalid_file(path, f"{key} could not be set without breaking it ({exc})") from None
    if written.get(key) != value:
        raise invalid_file(path, f"{key} could not be set without breaking it")
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(new, encoding="utf-8")
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise invalid_file(path, f"cannot write it ({exc.strerror or exc})") from None
