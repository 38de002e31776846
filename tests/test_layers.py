"""Import rules that keep the layers honest (STYLE.md, DESIGN.md "Dependency direction")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import modules_loaded

ROOT = Path(__file__).resolve().parents[1] / "memframe"

#: layer -> the memframe layers it may import (besides itself).
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "crypto": {"core"},
    "settings": {"core"},
    "paths": {"core", "settings"},
    "wire": {"core"},
    "service": {"core", "crypto", "paths"},
    "api": {"core", "crypto", "paths", "service", "assistant", "wire"},
    "backend": {"core", "crypto", "paths", "settings", "service", "assistant", "wire"},
    "assistant": {"core", "crypto", "paths", "service", "wire"},
    "tui": {"core", "crypto", "paths", "settings", "backend", "assistant"},
}
FORBIDDEN_THIRD_PARTY = {
    "core": {"sqlite3", "httpx", "textual", "fastapi", "starlette", "cryptography"},
    # The wire format is pydantic models only: both the server and the remote client import it.
    "wire": {"sqlite3", "httpx", "textual", "fastapi", "starlette", "uvicorn"},
}


def _layer(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


MODULES = sorted(p for p in ROOT.rglob("*.py") if _layer(p) in ALLOWED)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_layer_imports(path: Path) -> None:
    layer = _layer(path)
    for name in _imports(path):
        if name.startswith("memframe."):
            target = name.split(".", 2)[1]
            dotted = ".".join(name.split(".")[1:3])
            assert target == layer or target in ALLOWED[layer] or dotted in ALLOWED[layer], (
                f"{path.relative_to(ROOT)} ({layer}) imports {name}"
            )
        assert name.split(".")[0] not in FORBIDDEN_THIRD_PARTY.get(layer, set()), (
            f"{path.relative_to(ROOT)} imports {name}"
        )


def test_nothing_imports_the_frame() -> None:
    for path in ROOT.rglob("*.py"):
        if _layer(path) in ("tui", "cli"):
            continue
        assert not any(n.startswith("memframe.tui") for n in _imports(path)), path


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
