"""`memframe serve` for the team figures: `python -m bench._serve [--ungrouped-saves] serve --db …`.

Exactly the `memframe serve` command, run in this process. With `--ungrouped-saves` first, every
group-committed batch (`Database.write_together`) is committed alone in its own `write()` instead:
the save path as it was before group commit, so the bench can measure the old way side by side with
the new in one run. A batch from the event loop (`write_together_async`, the HTTP Save's) goes to a
thread and is committed alone there, as the Save route did before group commit. The switch lives
here only; memframe itself has no such option.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def _alone(self: Any, work: Callable[[Any], Any]) -> Any:
    """One batch, one transaction, one fsync: the save path without group commit."""
    with self.write() as conn:
        return work(conn)


async def _alone_async(self: Any, work: Callable[[Any], Any]) -> Any:
    """The same, for a batch from the event loop: on a thread of the pool, as the route ran a Save."""
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(_alone, self, work)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--ungrouped-saves"]:
        from memframe.service.db import Database

        Database.write_together = _alone  # type: ignore[method-assign,assignment]
        Database.write_together_async = _alone_async  # type: ignore[method-assign]
        argv = argv[1:]
    from memframe.cli import main as memframe_main

    return int(memframe_main(argv) or 0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
