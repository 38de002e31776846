"""The frame talks only to the Backend seam: no tui module imports memframe.service or memframe.api."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import memframe.tui

TUI = Path(memframe.tui.__file__).parent
FORBIDDEN = ("memframe.service", "memframe.api", "memframe.assistant")
ALLOWED = ("memframe.tui", "memframe.backend", "memframe.core", "memframe.crypto")


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
    code = (
        "import sys, memframe.tui.app, memframe.tui.screenshots\n"
        "bad = sorted(m for m in sys.modules if m.startswith(('memframe.api', 'memframe.service', "
        "'memframe.assistant', 'fastapi', 'uvicorn')))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_first_paint_loads_only_the_main_screen() -> None:
    """Dialogs, the backend calls and the side screens load when first used, not before the frame is on screen."""
    code = (
        "import sys, memframe.tui.app\n"
        "late = ('memframe.tui.' + m for m in ('dialogs', 'apply', 'calls', 'changes', 'assistant', "
        "'assistant_calls', 'conversation', 'proposals', 'mode'))\n"
        "print(','.join(sorted(m for m in late if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
