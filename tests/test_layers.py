"""Import rules that keep the layers honest (STYLE.md, DESIGN.md "Dependency direction")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import modules_loaded
from tests.support.imports import PACKAGE, every_import, find_cycle, graph, third_party_imports

ROOT = PACKAGE

#: The one rule table (DESIGN.md "Dependency direction"): layer -> {layer it may import: why}.
#: Every arrow has its reason, and an arrow nothing uses any more fails `test_every_allowed_arrow_is_used`,
#: so the table cannot keep exceptions that have gone stale. Modules at the package's top level are
#: their own layer (`paths`, `settings`, `__main__`).
RULES: dict[str, dict[str, str]] = {
    "core": {},
    "sealing": {
        "core": "a text that does not open is DecryptionFailed; a bad key file is a KeyFileError",
        "paths": "a person's key file lives under the user's data directory, written 0600",
        "settings": "a key file's passphrase may come from the environment, read once in settings",
    },
    "settings": {"core": "a bad config file is an InvalidInput"},
    "paths": {"core": "errors", "settings": "MEMFRAME_HOME is read once, in settings"},
    "wire": {"core": "the HTTP bodies are read from and into the core dataclasses"},
    "service": {
        "core": "the contract's rules",
        "sealing": "the service opens memory only inside a key session, in RAM",
        "paths": "workspace ids are checked by the same rule the key files use",
        "keysessions": "keys live in the in-RAM store, or in the key-session service its client reaches",
    },
    "keysessions": {
        "core": "errors, the memory path and a key session's facts",
        "sealing": "a live session's memory opener is made from its key, in RAM",
        "api": "the key-session service runs under serve's own uvicorn configuration (its read timeout)",
    },
    "api": {
        "core": "errors and types",
        "service": "each route is a thin call into the service",
        "wire": "request and response bodies",
        "assistant": "the server runs the Assistant's turn next to the service (InProcessAutomation)",
    },
    "assistant": {
        "core": "turns, edits, recall framing",
        "service": "the runtime's automation calls go to the service in-process (no HTTP hop on one host)",
    },
    "backend": {
        "core": "the Backend protocol speaks core types and errors",
        "sealing": "sealing happens on the person's machine, in the backend, with the person's key file",
        "paths": "key files and this machine's records live under the user's data directory",
        "wire": "the remote backend reads the server's own models",
        "service": "the local backend is the service in-process on an embedded SQLite file",
        "assistant": "the local backend runs the Assistant in-process, as the server does",
    },
    "mcp": {
        "core": "errors and the namespace rules",
        "backend": "an MCP client reaches the workspace only through the person's backend",
    },
    "tui": {
        "core": "types, errors, edits",
        "backend": "the frame's one seam",
        "settings": "theme, keymap and where the frame's files live",
    },
    "cli": {
        "core": "errors and wording",
        "settings": "option defaults",
        "backend": "every command goes through the Backend",
        "tui": "`memframe frame` opens the Memory frame",
        "mcp": "`memframe mcp` serves the tools",
        "api": "`memframe serve` runs the HTTP app",
        "service": "`memframe admin` manages accounts on the database",
        "assistant": "the chat command builds the model client",
        "sealing": "`key export/import` wrap and unwrap a key with a passphrase and show its fingerprint",
        "paths": "`key export` writes the key file 0600; `admin` finds the local database",
        "keysessions": "`memframe keysessions` runs the service; serve starts its private one for its workers",
    },
    "__main__": {"cli": "`python -m memframe` is the memframe command"},
}
#: Third-party packages a layer must never import, and why.
FORBIDDEN_THIRD_PARTY: dict[str, dict[str, str]] = {
    "core": dict.fromkeys(("sqlite3", "httpx", "textual", "fastapi", "starlette", "cryptography", "psycopg"),
                          "core is pure contract logic: no I/O, no UI, no crypto"),
    "wire": dict.fromkeys(("sqlite3", "httpx", "textual", "fastapi", "starlette", "uvicorn", "psycopg"),
                          "the wire format is pydantic models only: both the server and the remote client import it"),
    "tui": dict.fromkeys(("sqlite3", "fastapi", "starlette", "uvicorn", "psycopg"),
                         "the frame reaches storage only through the Backend"),
}  # fmt: skip


def _layer(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


MODULES = sorted(p for p in ROOT.rglob("*.py") if p != ROOT / "__init__.py")


def _arrows() -> dict[tuple[str, str], list[str]]:
    """(layer, layer it imports) -> the modules that make that arrow, counting every import however lazy."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for path in MODULES:
        layer = _layer(path)
        for name in every_import(path):
            target = name.split(".")[1]
            if target != layer:
                arrows.setdefault((layer, target), []).append(str(path.relative_to(ROOT)))
    return arrows


def test_every_module_has_a_layer_in_the_table() -> None:
    assert {_layer(p) for p in MODULES} <= RULES.keys()


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_layer_imports(path: Path) -> None:
    layer = _layer(path)
    for name in every_import(path):
        target = name.split(".")[1]
        assert target == layer or target in RULES[layer], f"{path.relative_to(ROOT)} ({layer}) imports {name}"
    for name in third_party_imports(path) & FORBIDDEN_THIRD_PARTY.get(layer, {}).keys():
        pytest.fail(f"{path.relative_to(ROOT)} imports {name}: {FORBIDDEN_THIRD_PARTY[layer][name]}")


def test_every_allowed_arrow_is_used() -> None:
    """An exception nothing needs any more is taken out of the table, not left to excuse the next one."""
    used = _arrows().keys()
    stale = [f"{layer} -> {target}" for layer, targets in RULES.items() for target in targets
             if (layer, target) not in used]  # fmt: skip
    assert stale == []


def test_the_house_has_no_import_cycle() -> None:
    """Counting imports under TYPE_CHECKING and inside functions, across the whole package."""
    modules = graph()
    assert "memframe.tui.screens.changes" in modules["memframe.tui.screens.memory"]  # lazy imports count
    cycle = find_cycle(modules)
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def test_nothing_imports_the_frame() -> None:
    for path in ROOT.rglob("*.py"):
        if _layer(path) in ("tui", "cli"):
            continue
        assert not any(n.startswith("memframe.tui") for n in every_import(path)), path


def test_core_imports_no_io_in_a_fresh_interpreter() -> None:
    every_core_module = (
        "import pkgutil, importlib, memframe.core as c\n"
        "for m in pkgutil.iter_modules(c.__path__): importlib.import_module('memframe.core.' + m.name)"
    )
    assert modules_loaded(every_core_module, ("sqlite3", "httpx", "textual", "fastapi", "cryptography")) == []


def test_the_wire_format_loads_no_server_or_client_in_a_fresh_interpreter() -> None:
    """The remote client and the server share `memframe.wire`; reading it starts neither side."""
    every_wire_module = (
        "import pkgutil, importlib, memframe.wire as w\n"
        "for m in pkgutil.iter_modules(w.__path__): importlib.import_module('memframe.wire.' + m.name)"
    )
    heavy = ("fastapi", "starlette", "httpx", "sqlite3", "memframe.api", "memframe.service", "memframe.backend")
    assert modules_loaded(every_wire_module, heavy) == []


def _private(name: str) -> bool:
    """A dotted name with a private segment (`_struct`, `textual.widgets._footer`); dunders are public."""
    return any(part.startswith("_") and not part.endswith("__") for part in name.split("."))


def private_imports(path: Path) -> list[str]:
    """What `path` imports from outside memframe through a private name: a module whose path has a
    segment starting with `_`, a `_name` taken from another package, or either given to `import_module`."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if _private(alias.name)]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*"]
            found += [name for name in [node.module, *names] if _private(name)][:1]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute):
            called = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            if called in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant):
                found += [str(node.args[0].value)] if _private(str(node.args[0].value)) else []
    return [name for name in found if name.split(".")[0] != "memframe"]


def test_no_private_module_of_the_standard_library_or_a_dependency_is_imported() -> None:
    """Issue 28: a private module (`_struct`, `_sqlite3`, `cryptography.hazmat.bindings._rust`,
    `textual.widgets._footer`) may change or vanish in any release of its owner, so memframe uses
    public names only; memframe's own private modules are its own business."""
    found = {str(p.relative_to(ROOT)): names for p in sorted(ROOT.rglob("*.py")) if (names := private_imports(p))}
    assert found == {}


def test_the_private_import_rule_can_fail(tmp_path: Path) -> None:
    source = tmp_path / "sample.py"
    source.write_text(
        "from __future__ import annotations\n"
        "import _thread\n"
        "import cryptography.hazmat.bindings._rust as rust\n"
        "from textual.widgets._footer import FooterKey\n"
        "from textual.widgets import _footer\n"
        "from memframe.tui import _own\n"
        "from textual.widgets import Footer\n"
        "def later() -> None:\n"
        "    import _struct\n"
        "    importlib.import_module('_sqlite3')\n",
        encoding="utf-8",
    )
    assert private_imports(source) == [
        "_thread", "cryptography.hazmat.bindings._rust", "textual.widgets._footer", "textual.widgets._footer",
        "_struct", "_sqlite3",
    ]  # fmt: skip
