"""The pytest side of `tools/mutate.py`: which test runs which line, and running only those tests.

Loaded with `-p mutate_pytest` (tools/ on PYTHONPATH) and steered by environment variables, so
the mutation runner stays a plain subprocess per mutant:

- `MUTATE_COVER=a.py,b.py` and `MUTATE_MAP=out.json`: measure line coverage of those files with
  one coverage context per test node id, and write `{"lines": {file: {line: [node ids]}},
  "seconds": {node id: duration}, "failed": [node ids]}`. Lines run outside any test (imports,
  collection) belong to the context "", which the runner reads as "every test".
- `MUTATE_SELECT=ids.txt`: run only the node ids listed there (one a line), in that order.

Coverage starts when this plugin is imported — before the conftests import memframe — so a
module's import-time lines are seen too.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

_COVER = [p for p in os.environ.get("MUTATE_COVER", "").split(",") if p]
_cov = None
if _COVER:
    import coverage

    _cov = coverage.Coverage(data_file=None, include=_COVER, branch=False, config_file=False)
    _cov.start()

_seconds: dict[str, float] = {}
_failed: list[str] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Attribute what setup, call and teardown execute to this test, and time it."""
    if _cov is not None:
        _cov.switch_context(item.nodeid)
    began = time.perf_counter()
    yield
    _seconds[item.nodeid] = time.perf_counter() - began
    if _cov is not None:
        _cov.switch_context("")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.failed and report.nodeid not in _failed:
        _failed.append(report.nodeid)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With MUTATE_SELECT: keep only the listed tests, in the listed order (fastest first)."""
    listing = os.environ.get("MUTATE_SELECT")
    if not listing:
        return
    wanted = [line for line in Path(listing).read_text().splitlines() if line]
    by_id = {item.nodeid: item for item in items}
    keep = [by_id[nodeid] for nodeid in wanted if nodeid in by_id]
    chosen = {id(item) for item in keep}
    config.hook.pytest_deselected(items=[item for item in items if id(item) not in chosen])
    items[:] = keep


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("MUTATE_MAP")
    if _cov is None or not out:
        return
    _cov.stop()
    data = _cov.get_data()
    lines = {}
    for path in data.measured_files():
        by_line = data.contexts_by_lineno(path)
        lines[path] = {str(n): sorted(set(contexts)) for n, contexts in by_line.items()}
    Path(out).write_text(json.dumps({"lines": lines, "seconds": _seconds, "failed": _failed}))
