"""People's Saves, Clears and Undos committed together (group commit), on SQLite and PostgreSQL.

A burst of Saves shares one transaction and one fsync (`Database.write_together`), and that changes
nothing a Save means: each is checked against its own base and lands or fails alone, a storage
failure fails every Save of the group and writes none of them, and every acknowledged Save is committed.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from memframe import sealing
from memframe.core.errors import Unavailable, VersionConflict
from memframe.core.types import MEMORY_PATH, Operation
from memframe.service import MemoryService
from memframe.service import service as service_module
from memframe.service.accounts import LOCAL_USER

KEY = sealing.new_key()


def _sealed(workspace: str, version: int, text: str, path: str = MEMORY_PATH) -> bytes:
    return sealing.seal(KEY, text, workspace_id=workspace, path=path, version=version)


def _save(service: MemoryService, workspace: str, base: int, text: str, path: str = MEMORY_PATH) -> int:
    return service.put_file(LOCAL_USER, workspace, path, _sealed(workspace, base + 1, text, path), base).version


def _head(service: MemoryService, workspace: str, path: str = MEMORY_PATH) -> int:
    head = service.get_file(LOCAL_USER, workspace, path)
    return 0 if head is None else head.info.version


class _Outcome:
    def __init__(self) -> None:
        self.value: Any = None
        self.error: BaseException | None = None


@contextmanager
def _one_group(
    service: MemoryService, expected: int, *, queued: int | None = None
) -> Iterator[Callable[[Callable[[], Any]], _Outcome]]:
    """Calls started inside this block queue behind a batch held open at the writer, and are
    committed as one group once the block ends (the held batch commits first, alone).

    Yields `start(call)`; `expected` is how many calls the block starts, `queued` how many batches
    they queue (`expected` unless one call queues several). On leaving, it waits until all of them
    wait at the writer, lets the held batch go, and waits for every call to end.
    """
    db = service.db
    inside, release = threading.Event(), threading.Event()

    def hold(conn: object) -> None:
        inside.set()
        assert release.wait(timeout=60)

    holder = threading.Thread(target=db.write_together, args=(hold,))
    holder.start()
    assert inside.wait(timeout=60)
    threads: list[threading.Thread] = []

    def start(call: Callable[[], Any]) -> _Outcome:
        outcome = _Outcome()

        def run() -> None:
            try:
                outcome.value = call()
            except BaseException as exc:
                outcome.error = exc

        threads.append(threading.Thread(target=run))
        threads[-1].start()
        return outcome

    try:
        yield start
        assert len(threads) == expected
        batches = expected if queued is None else queued
        deadline = time.monotonic() + 60
        while len(db._group._queue) < batches and time.monotonic() < deadline:  # all queued behind the held batch
            time.sleep(0.001)
        assert len(db._group._queue) == batches
    finally:
        release.set()
        holder.join(timeout=60)
        for thread in threads:
            thread.join(timeout=60)


@pytest.fixture
def workspaces(engine_service: MemoryService) -> list[str]:
    names = [f"team{n}" for n in range(8)]
    for name in names:
        engine_service.accounts.create_workspace(name, LOCAL_USER)
    return names


def _count_batches(service: MemoryService, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many transactions the database opens from now on (one entry each)."""
    opened: list[int] = []
    write = service.db.write

    @contextmanager
    def counted() -> Iterator[Any]:
        opened.append(1)
        with write() as conn:
            yield conn

    monkeypatch.setattr(service.db, "write", counted)
    return opened


def test_a_burst_of_saves_to_different_workspaces_lands_in_one_transaction(
    engine_service: MemoryService, workspaces: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    service = engine_service
    opened = _count_batches(service, monkeypatch)
    with _one_group(service, len(workspaces)) as start:
        outcomes = [start(lambda ws=ws: _save(service, ws, 0, f"# {ws}\n")) for ws in workspaces]
    assert [o.error for o in outcomes] == [None] * len(workspaces)
    assert [o.value for o in outcomes] == [1] * len(workspaces)
    assert len(opened) == 2  # the held batch, then every Save of the burst together
    for ws in workspaces:
        head = service.get_file(LOCAL_USER, ws, MEMORY_PATH)
        assert head is not None and head.info.version == 1
        text = sealing.open_sealed(KEY, head.ciphertext or b"", workspace_id=ws, path=MEMORY_PATH, version=1)
        assert text == f"# {ws}\n"


def test_concurrent_saves_on_one_workspace_one_per_base_wins_the_rest_conflict(engine_service: MemoryService) -> None:
    service = engine_service
    base = _save(service, "ws", 0, "first\n")
    with _one_group(service, 6) as start:
        outcomes = [start(lambda n=n: _save(service, "ws", base, f"draft {n}\n")) for n in range(6)]
    won = [o for o in outcomes if o.error is None]
    lost = [o for o in outcomes if o.error is not None]
    assert [o.value for o in won] == [base + 1]
    assert len(lost) == 5 and all(isinstance(o.error, VersionConflict) for o in lost)
    assert {o.error.current_version for o in lost} == {base + 1}  # type: ignore[union-attr]
    assert _head(service, "ws") == base + 1
    assert len(service.list_versions(LOCAL_USER, "ws", MEMORY_PATH)) == 2  # nothing else was written


def test_racing_savers_never_lose_an_acknowledged_save(engine_service: MemoryService) -> None:
    """Free-running writers, each saving against the version it last read: exactly one Save lands
    per base version, every other gets the conflict, and the history holds exactly the winners."""
    service = engine_service
    _save(service, "ws", 0, "start\n")
    go = threading.Barrier(6)
    won: list[tuple[int, str]] = []
    conflicts: list[int] = []

    def saver(n: int) -> None:
        go.wait()
        for r in range(8):
            base = _head(service, "ws")
            text = f"writer {n} round {r}\n"
            try:
                won.append((_save(service, "ws", base, text), text))
            except VersionConflict as exc:
                assert exc.current_version > base
                conflicts.append(base)

    threads = [threading.Thread(target=saver, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    versions = sorted(v for v, _ in won)
    assert versions == list(range(2, 2 + len(won)))  # one winner per base, no gaps, no duplicates
    assert _head(service, "ws") == 1 + len(won)
    assert len(won) + len(conflicts) == 48
    history = {v.version for v in service.list_versions(LOCAL_USER, "ws", MEMORY_PATH, limit=100)}
    assert history == {1, *versions}


def test_a_clear_and_an_undo_in_one_group_each_judge_their_own_base(engine_service: MemoryService) -> None:
    service = engine_service
    v1 = _save(service, "ws", 0, "one\n")
    v2 = _save(service, "ws", v1, "two\n")
    empty = sealing.seal(KEY, "", workspace_id="ws", path=MEMORY_PATH, version=v2 + 1)
    before = service.get_policy(LOCAL_USER, "ws").clear_generation
    with _one_group(service, 2) as start:
        cleared = start(lambda: service.put_file(LOCAL_USER, "ws", MEMORY_PATH, empty, v2, clear=True))
        restored = _sealed("ws", v2 + 1, "one\n")
        undone = start(lambda: service.put_file(LOCAL_USER, "ws", MEMORY_PATH, restored, v2, restored_from=v1))
    outcomes = [cleared, undone]
    assert sum(o.error is None for o in outcomes) == 1
    assert sum(isinstance(o.error, VersionConflict) for o in outcomes) == 1
    head = service.list_versions(LOCAL_USER, "ws", MEMORY_PATH, limit=1)[0]
    assert head.version == v2 + 1
    generation = service.get_policy(LOCAL_USER, "ws").clear_generation
    if cleared.error is None:  # the Clear's generation advance rides with its own row only
        assert head.operation is Operation.CLEAR and generation == before + 1
    else:
        assert head.operation is Operation.UNDO and generation == before


def _storage_failure(service: MemoryService) -> Exception:
    """What the engine's driver raises when the storage itself fails."""
    if service.db.dialect == "postgresql":
        import psycopg

        return psycopg.OperationalError("server closed the connection unexpectedly")
    return sqlite3.OperationalError("disk I/O error")


def _storage_fails_for(service: MemoryService, workspace: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The storage fails whenever a version of `workspace` is inserted; returns the real insert."""
    insert = service_module.files.insert_version

    def failing(conn: Any, **kw: Any) -> Any:
        if kw["workspace_id"] == workspace:
            raise _storage_failure(service)
        return insert(conn, **kw)

    monkeypatch.setattr(service_module.files, "insert_version", failing)
    return insert


def test_a_storage_failure_fails_every_save_of_the_group_and_writes_nothing(
    engine_service: MemoryService, workspaces: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    service = engine_service
    insert = _storage_fails_for(service, workspaces[2], monkeypatch)
    with _one_group(service, len(workspaces)) as start:
        outcomes = [start(lambda ws=ws: _save(service, ws, 0, f"# {ws}\n")) for ws in workspaces]
    assert all(isinstance(o.error, Unavailable) for o in outcomes), [o.error for o in outcomes]
    assert all("nothing was written" in str(o.error) for o in outcomes)
    assert [_head(service, ws) for ws in workspaces] == [0] * len(workspaces)
    monkeypatch.setattr(service_module.files, "insert_version", insert)
    assert _save(service, workspaces[0], 0, "after\n") == 1  # the store is usable again at once


def test_a_save_after_closing_is_refused_not_hung(tmp_path: Any) -> None:
    service = MemoryService(tmp_path / "closing.db")
    service.accounts.add_user(LOCAL_USER)
    service.accounts.create_workspace("ws", LOCAL_USER)
    assert _save(service, "ws", 0, "one\n") == 1
    service.close()
    with pytest.raises(Exception):  # noqa: B017 - the closed database's own refusal, at once
        _save(service, "ws", 1, "two\n")
