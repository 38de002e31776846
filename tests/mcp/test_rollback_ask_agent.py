"""`memframe mcp`'s ask_agent on a machine that saw a Clear, after the database was rolled back past it.

A real `memframe mcp` subprocess, driven by the `mcp` client over stdio, serves the workspace while
the person runs `memframe clear` on the same machine; then the database loses the Clear by hand (as
a restored dump or a lagging standby would hold it). ask_agent has no Saves of its own, yet it
reports the version this machine has seen: the memory is withheld as `stale` and `remember:` writes
nothing. The embedded SQLite workspace, and a server on PostgreSQL reached with `MEMFRAME_URL`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp.server.mcpserver", reason="the MCP SDK, version 2, is not installed")

from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from memframe.cli import main
from memframe.core.types import MEMORY_PATH
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from tests.reliability.support import raw
from tests.support.remote_kinds import app_for, loopback_server, user_token

ROOT = Path(__file__).resolve().parents[2]
SECRET = "# Memory\n- The launch code is PINEAPPLE.\n"


@pytest.fixture
def database(
    engine: str, request: pytest.FixtureRequest, memframe_home: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str | Path, str]:
    """(the database to roll back, the workspace): the embedded one, or a server's on PostgreSQL."""
    if engine == "sqlite":
        return memframe_home / "memframe.db", "default"
    service: MemoryService = request.getfixturevalue("engine_service")  # workspace "ws", LOCAL_USER
    server = loopback_server()
    url = server.mount(app_for(service))
    request.addfinalizer(lambda: server.unmount(url))
    monkeypatch.setenv("MEMFRAME_URL", url)
    monkeypatch.setenv("MEMFRAME_TOKEN", user_token(service, LOCAL_USER))
    monkeypatch.setenv("MEMFRAME_WORKSPACE", "ws")
    return service.db.url, "ws"  # type: ignore[attr-defined]


def memframe(*argv: str) -> None:
    """A command the person runs on this machine (in this process, with the test's environment)."""
    assert main(list(argv)) == 0, argv


@pytest.fixture
def ask(database: tuple[str | Path, str], tmp_path: Path) -> Iterator[Any]:
    """ask_agent of a `memframe mcp` started on the prepared workspace: message -> structured result."""
    (tmp_path / "m.md").write_text(SECRET)
    for argv in (["init"], ["save", str(tmp_path / "m.md"), "--base", "0"], ["ai", "on"], ["mode", "auto"]):
        memframe(*argv)
    env = {k: v for k, v in os.environ.items() if k.startswith("MEMFRAME_")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "memframe", "mcp"], env=env, cwd=ROOT)
    with (tmp_path / "server.stderr").open("w") as errlog, start_blocking_portal() as portal:
        client = Client(stdio_client(params, errlog=errlog), read_timeout_seconds=30)
        with portal.wrap_async_context_manager(client) as entered:
            yield _asker(portal, entered)
    assert "Traceback" not in (tmp_path / "server.stderr").read_text()


def _asker(portal: BlockingPortal, client: Client) -> Any:
    def ask(message: str) -> dict[str, Any]:
        result = portal.call(client.call_tool, "ask_agent", {"message": message})
        assert not result.is_error, result.content[0].text
        return {"text": result.content[0].text, **result.structured_content}

    return ask


def test_ask_agent_after_a_rollback_past_a_clear_gets_no_memory_and_writes_nothing(
    ask: Any, database: tuple[str | Path, str]
) -> None:
    db, ws = database
    assert ask("what do you know?")["receipts"][0]["status"] == "provided"  # the server is running
    memframe("clear", "--base", "1")  # in another terminal of this machine
    with raw(db) as conn:  # by hand, as a restore from before the Clear would leave it
        conn.execute("DELETE FROM file_versions WHERE workspace_id = ? AND path = ? AND version = 2", (ws, MEMORY_PATH))
        conn.execute("UPDATE files SET current_version = 1 WHERE workspace_id = ? AND path = ?", (ws, MEMORY_PATH))
        conn.execute("UPDATE workspace_memory_policy SET clear_generation = 0 WHERE workspace_id = ?", (ws,))
    answer = ask("what do you know?")
    assert "PINEAPPLE" not in answer["text"] and "status=stale" in answer["answer"]
    assert [(r["status"], r["revision"]) for r in answer["receipts"]] == [("stale", 1)]
    answer = ask("remember: - The launch code is MANGO.")
    assert [o["kind"] for o in answer["tool_outcomes"]] == ["refused"]
    with raw(db) as conn:
        versions = conn.execute(
            "SELECT version FROM file_versions WHERE workspace_id = ? AND path = ?", (ws, MEMORY_PATH)
        )
        assert [int(v) for (v,) in versions] == [1], "no capture on top of the rolled-back head"
