"""The frame's own import rules: no cycle inside it, no test scaffolding shipped, a light first paint.

No two tui modules import each other in a
circle, not even through an import under TYPE_CHECKING or inside a function: a side screen asks the
main screen for things by message, and the flows see the main screen only as a `FlowHost`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import memframe.tui
from tests.conftest import modules_loaded
from tests.support.imports import PACKAGE, find_cycle
from tests.support.imports import graph as import_graph

TUI = Path(memframe.tui.__file__).parent
# What tui/ may import is in the one rule table, tests/test_layers.py.


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


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
        "dialogs", "calls", "changes_calls", "assistant_calls", "conversation",
        "screens.changes", "screens.assistant", "screens.proposals", "screens.mode",
    )  # fmt: skip
    loaded = modules_loaded("import memframe.tui.app", ("memframe.tui.",))
    assert "memframe.tui.screens.memory" in loaded and "memframe.tui.flows" in loaded
    assert [m for m in loaded if m.removeprefix("memframe.tui.").startswith(late)] == []


def test_the_frame_reaches_app_run_without_what_its_first_paint_does_not_need(memframe_home: Path) -> None:
    """Up to `App.run` on a local workspace (the command line parsed, the store opened, the first read
    done), the frame loads neither the Assistant's records, nor the edit parser, nor serve's workers,
    nor what only a key rotation or the Changes screen uses."""
    from memframe.backend.workspaces import init_local_workspace

    init_local_workspace("default")
    run_until_app_run = (
        "import threading, textual.app\n"
        "def ran(app, *args, **kwargs):\n"
        "    [t.join() for t in threading.enumerate() if t.name == 'memframe-first-load']\n"
        "textual.app.App.run = ran\n"
        "from memframe.cli import main\n"
        "assert main(['frame']) == 0\n"
    )
    late = (
        "memframe.core.turns", "memframe.core.edits", "memframe.assistant", "multiprocessing", "httpx",
        "memframe.core.rotation", "memframe.service.rotation", "memframe.backend.verify", "memframe.tui.changes_calls",
    )  # fmt: skip
    loaded = modules_loaded(run_until_app_run, ("memframe.tui.calls", *late))
    assert loaded == ["memframe.tui.calls"]  # the first read ran, and nothing late came with it


# --- no import cycle -------------------------------------------------------------------------------


def test_the_frame_has_no_import_cycle() -> None:
    """Counting every import, however lazy. Modules outside tui/ never import it (tests/test_layers.py),
    so a cycle through the frame would have to lie inside it."""
    graph = import_graph(sorted(TUI.rglob("*.py")))
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
