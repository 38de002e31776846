"""`memframe serve` for the team figures: `python -m bench._serve [--ungrouped-saves] serve --db …`.

Exactly the `memframe serve` command, run in this process. With `--ungrouped-saves` first, every
group-committed batch (`Database.write_together`) is committed alone in its own `write()` instead:
the save path as it was before group commit, so the bench can measure the old way side by side with
the new in one run. The switch lives here only; memframe itself has no such option.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def _alone(self: Any, work: Callable[[Any], Any]) -> Any:
    """One batch, one transaction, one fsync: the save path without group commit."""
    with self.write() as conn:
        return work(conn)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--ungrouped-saves"]:
        from memframe.service.db import Database

        Database.write_together = _alone  # type: ignore[method-assign,assignment]
        argv = argv[1:]
    from memframe.cli import main as memframe_main

    return int(memframe_main(argv) or 0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
