"""The package's import graph, read from the source with `ast`: every import counts, however lazy.

Shared by the layer rules (tests/test_layers.py) and the frame's own rules (tests/tui/test_imports.py).
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import memframe

PACKAGE = Path(memframe.__file__).parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = PACKAGE.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def every_import(path: Path) -> set[str]:
    """Every memframe module `path` imports anywhere in its body: at the top, under TYPE_CHECKING,
    inside functions. `from package import name` counts as importing the submodule when `name` is one
    (and then not as importing the package itself: a package's lazy `__getattr__` is no cycle)."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            submodules = {f"{base}.{alias.name}" for alias in node.names if _is_module(f"{base}.{alias.name}")}
            found.update(submodules)
            if len(submodules) < len(node.names):  # a name from the module itself, not only its submodules
                found.add(base)
    return {name for name in found if name.startswith("memframe.") and name != module}


def third_party_imports(path: Path) -> set[str]:
    """The top-level names of everything `path` imports that is not memframe (anywhere in its body)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names - {"memframe"}


def graph(paths: list[Path] | None = None) -> dict[str, set[str]]:
    """module → the memframe modules it imports, for every module of the package (or of `paths`)."""
    return {module_name(p): every_import(p) for p in sorted(paths or PACKAGE.rglob("*.py"))}


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One import cycle in `graph` (module → the modules it imports) as a path that ends where it
    starts, or None when there is none."""
    done: set[str] = set()
    path: list[str] = []
    on_path: set[str] = set()

    def visit(node: str) -> list[str] | None:
        path.append(node)
        on_path.add(node)
        for target in sorted(graph.get(node, ())):
            if target in on_path:
                return [*path[path.index(target) :], target]
            if target not in done and (cycle := visit(target)) is not None:
                return cycle
        path.pop()
        on_path.discard(node)
        done.add(node)
        return None

    for start in sorted(graph):
        if start not in done and (cycle := visit(start)) is not None:
            return cycle
    return None
