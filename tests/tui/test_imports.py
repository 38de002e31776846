"""The frame talks only to the Backend seam: no tui module imports memframe.service or memframe.api."""

from __future__ import annotations

import ast
from pathlib import Path

import memframe.tui
from tests.conftest import modules_loaded

TUI = Path(memframe.tui.__file__).parent
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
    assert modules_loaded("import memframe.tui.app, memframe.tui.screenshots", server) == []


def test_the_first_paint_loads_only_the_main_screen() -> None:
    """Dialogs, the backend calls and the side screens load when first used, not before the frame is on screen."""
    late = ("dialogs", "apply", "calls", "changes", "assistant", "assistant_calls", "conversation", "proposals", "mode")
    loaded = modules_loaded("import memframe.tui.app", ("memframe.tui.",))
    assert [m for m in loaded if m.removeprefix("memframe.tui.") in late] == []
