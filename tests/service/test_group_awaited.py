"""Saves awaited on an event loop (the HTTP Save's way, `MemoryService.put_file_async`) join the same
group commits as threads' Saves, with no thread of their own, and mean exactly what a thread's Save means.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from memframe import sealing
from memframe.core.errors import Unavailable, VersionConflict
from memframe.core.types import MEMORY_PATH
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from tests.service.test_group_saves import _count_batches, _head, _save, _sealed, _storage_fails_for

KEY = sealing.new_key()


def _saving(service: MemoryService, workspace: str, base: int, text: str) -> Awaitable[Any]:
    return service.put_file_async(LOCAL_USER, workspace, MEMORY_PATH, _sealed(workspace, base + 1, text), base)


@contextmanager
def _held(service: MemoryService) -> Iterator[Callable[[int], None]]:
    """A batch held open at the writer by a thread while the block runs; yields `let_go(queued)`,
    which waits until `queued` batches wait behind it, then lets it commit."""
    inside, release = threading.Event(), threading.Event()

    def hold(conn: object) -> None:
        inside.set()
        assert release.wait(timeout=60)

    holder = threading.Thread(target=service.db.write_together, args=(hold,))
    holder.start()
    assert inside.wait(timeout=60)

    def let_go(queued: int) -> None:
        deadline = time.monotonic() + 60
        while len(service.db._group._queue) < queued and time.monotonic() < deadline:
            time.sleep(0.001)
        assert len(service.db._group._queue) == queued
        release.set()

    try:
        yield let_go
    finally:
        release.set()
        holder.join(timeout=60)


async def _burst(saves: list[Awaitable[Any]], let_go: Callable[[int], None]) -> list[Any]:
    """Start every save, let the held batch go once all of them wait behind it, gather the outcomes."""
    tasks = [asyncio.ensure_future(save) for save in saves]
    await asyncio.get_running_loop().run_in_executor(None, let_go, len(saves))
    return await asyncio.gather(*tasks, return_exceptions=True)


@pytest.fixture
def workspaces(engine_service: MemoryService) -> list[str]:
    names = [f"team{n}" for n in range(8)]
    for name in names:
        engine_service.accounts.create_workspace(name, LOCAL_USER)
    return names


def test_awaited_saves_and_a_threads_save_land_in_one_transaction(
    engine_service: MemoryService, workspaces: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    service = engine_service
    opened = _count_batches(service, monkeypatch)
    threaded: list[int] = []

    threads: list[int] = []

    def counted(let_go: Callable[[int], None], queued: int) -> None:
        let_go(queued)
        threads.append(threading.active_count())

    async def run() -> list[Any]:
        saves = [_saving(service, ws, 0, f"# {ws}\n") for ws in workspaces[1:]]
        threads.append(threading.active_count())
        with _held(service) as let_go:
            thread = threading.Thread(target=lambda: threaded.append(_save(service, workspaces[0], 0, "# thread\n")))
            thread.start()
            outcomes = await _burst(saves, lambda n: counted(let_go, n + 1))
        thread.join(timeout=60)
        return outcomes

    outcomes = asyncio.run(run())
    assert [o.version for o in outcomes] == [1] * (len(workspaces) - 1)
    assert threaded == [1]
    # Seven Saves waited without a thread each: the threads then were the holder's, the thread's
    # Save's and the one that let the holder go.
    assert threads[1] - threads[0] <= 3, threads
    assert len(opened) == 2  # the held batch, then the whole burst together
    assert [_head(service, ws) for ws in workspaces] == [1] * len(workspaces)


def test_awaited_saves_on_one_base_one_wins_the_rest_conflict(engine_service: MemoryService) -> None:
    service = engine_service
    base = _save(service, "ws", 0, "first\n")

    async def run() -> list[Any]:
        with _held(service) as let_go:
            return await _burst([_saving(service, "ws", base, f"draft {n}\n") for n in range(6)], let_go)

    outcomes = asyncio.run(run())
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert [o.version for o in won] == [base + 1]
    assert len(lost) == 5 and all(isinstance(o, VersionConflict) and o.current_version == base + 1 for o in lost)
    assert len(service.list_versions(LOCAL_USER, "ws", MEMORY_PATH)) == 2  # nothing else was written


def test_a_storage_failure_fails_every_awaited_save_of_the_group(
    engine_service: MemoryService, workspaces: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    service = engine_service
    insert = _storage_fails_for(service, workspaces[2], monkeypatch)

    async def run() -> list[Any]:
        with _held(service) as let_go:
            return await _burst([_saving(service, ws, 0, f"# {ws}\n") for ws in workspaces], let_go)

    outcomes = asyncio.run(run())
    assert all(isinstance(o, Unavailable) and "nothing was written" in str(o) for o in outcomes), outcomes
    assert [_head(service, ws) for ws in workspaces] == [0] * len(workspaces)
    monkeypatch.setattr("memframe.service.service.files.insert_version", insert)
    assert asyncio.run(_saving(service, workspaces[0], 0, "after\n")).version == 1  # usable again at once


def test_a_cancelled_wait_withdraws_nothing_and_holds_up_no_one(engine_service: MemoryService) -> None:
    """Like a thread's, an awaited batch commits whole once queued: cancelling the wait (a client
    gone) only means its outcome goes unheard, and the Saves after it commit as ever."""
    service = engine_service

    async def run() -> int:
        with _held(service) as let_go:
            gone = asyncio.ensure_future(_saving(service, "ws", 0, "from a client that left\n"))
            await asyncio.get_running_loop().run_in_executor(None, let_go, 1)
            gone.cancel()
        next_one = await _saving(service, "ws", 1, "the next Save\n")
        return int(next_one.version)

    assert asyncio.run(run()) == 2
    assert _head(service, "ws") == 2


def test_an_awaited_save_after_closing_is_refused_not_hung(tmp_path: Any) -> None:
    service = MemoryService(tmp_path / "closing.db")
    service.accounts.add_user(LOCAL_USER)
    service.accounts.create_workspace("ws", LOCAL_USER)
    assert asyncio.run(_saving(service, "ws", 0, "one\n")).version == 1
    service.close()
    with pytest.raises(Exception):  # noqa: B017 - the closed database's own refusal, at once
        asyncio.run(_saving(service, "ws", 1, "two\n"))
