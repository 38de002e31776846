"""tests/PROMISES.md names tests by id; every one of them must exist, or the index lies."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INDEX = ROOT / "tests" / "PROMISES.md"
_ID = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
    }


def test_every_test_named_in_the_promise_index_exists() -> None:
    named = _ID.findall(INDEX.read_text())
    assert len(named) > 100, "the index names too few tests; is the id pattern still `tests/…py::test_…`?"
    missing = []
    found: dict[str, set[str]] = {}
    for file, name in named:
        path = ROOT / file
        if not path.is_file():
            missing.append(f"{file} (no such file)")
            continue
        if file not in found:
            found[file] = _test_functions(path)
        if name not in found[file]:
            missing.append(f"{file}::{name}")
    assert not missing, "PROMISES.md names tests that do not exist:\n" + "\n".join(sorted(set(missing)))


def test_every_promise_row_names_a_test_or_says_why_not() -> None:
    rows = [line for line in INDEX.read_text().splitlines() if re.match(r"\| [A-Z]\d+ \|", line)]
    assert len(rows) > 60
    bare = [row.split("|")[1].strip() for row in rows if not _ID.search(row) and "no memframe promise" not in row]
    assert not bare, f"promises without a test: {bare}"
