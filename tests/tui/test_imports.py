"""The frame's import rules: only the Backend seam below it, no cycle inside it, a light first paint.

No tui module imports memframe.service or memframe.api, and no two tui modules import each other in a
circle, not even through an import under TYPE_CHECKING or inside a function: a side screen asks the
main screen for things by message, and the flows see the main screen only as a `FlowHost`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import memframe
import memframe.tui
from tests.conftest import modules_loaded

TUI = Path(memframe.tui.__file__).parent
PACKAGE = Path(memframe.__file__).parent
FORBIDDEN = ("memframe.service", "memframe.api", "memframe.assistant")
ALLOWED = ("memframe.tui", "memframe.backend", "memframe.core", "memframe.crypto", "memframe.settings")


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_tui_sources_import_only_backend_core_and_crypto() -> None:
    sources = sorted(TUI.rglob("*.py"))
    assert len(sources) > 5
    for path in sources:
        for name in _imports(path):
            if name == "memframe" or name.startswith("memframe."):
                assert name.startswith(ALLOWED), f"{path.relative_to(TUI)} imports {name}"
                assert not name.startswith(FORBIDDEN), f"{path.relative_to(TUI)} imports {name}"


def test_importing_the_app_pulls_in_no_server_code() -> None:
    """In a fresh interpreter the frame alone loads neither the HTTP API nor the assistant."""
    server = ("memframe.api", "memframe.service", "memframe.assistant", "fastapi", "uvicorn")
    assert modules_loaded("import memframe.tui.app", server) == []


def test_the_shipped_package_carries_no_test_scaffolding() -> None:
    """Pilots, scenarios and the screenshot command live under tests/; the package never reaches for them."""
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in _imports(path):
            assert not (name == "tests" or name.startswith(("tests.", "textual.pilot"))), f"{path} imports {name}"


def test_the_first_paint_loads_only_the_main_screen() -> None:
    """Dialogs, the backend calls and the side screens load when first used, not before the frame is on screen."""
    late = (
        "dialogs", "calls", "assistant_calls", "conversation",
        "screens.changes", "screens.assistant", "screens.proposals", "screens.mode",
    )  # fmt: skip
    loaded = modules_loaded("import memframe.tui.app", ("memframe.tui.",))
    assert "memframe.tui.screens.memory" in loaded and "memframe.tui.flows" in loaded
    assert [m for m in loaded if m.removeprefix("memframe.tui.").startswith(late)] == []


# --- no import cycle -------------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    base = PACKAGE.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def every_import(path: Path) -> set[str]:
    """Every memframe module `path` imports anywhere in its body: at the top, under TYPE_CHECKING,
    inside functions. `from package import name` counts as importing the submodule when `name` is one."""
    module = _module_name(path)
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
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if _is_module(f"{base}.{alias.name}"))
    return {name for name in found if name.startswith("memframe.") and name != module}


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


def _tui_graph() -> Iterator[tuple[str, set[str]]]:
    for path in sorted(TUI.rglob("*.py")):
        yield _module_name(path), every_import(path)


def test_the_frame_has_no_import_cycle() -> None:
    """Counting every import, however lazy. Modules outside tui/ never import it (tests/test_layers.py),
    so a cycle through the frame would have to lie inside it."""
    graph = dict(_tui_graph())
    assert {"memframe.tui.app", "memframe.tui.flows", "memframe.tui.screens.memory"} <= graph.keys()
    assert "memframe.tui.screens.proposals" in graph["memframe.tui.app"]  # TYPE_CHECKING imports count
    assert "memframe.tui.screens.changes" in graph["memframe.tui.screens.memory"]  # and imports inside functions
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    """So the test above can fail: a lazy import back to the main screen would be caught."""
    graph = {"tui.app": {"tui.memory"}, "tui.memory": {"tui.apply", "core"}, "tui.apply": {"tui.memory"}}
    assert find_cycle(graph) == ["tui.memory", "tui.apply", "tui.memory"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
