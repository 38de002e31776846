"""`memframe chat` on the machine that made a Clear, after its database was rolled back past it.

As a person meets it: the embedded SQLite workspace, and a team server on PostgreSQL reached with
`--remote` (`MEMFRAME_URL`). The rollback is done by hand, as a restored dump or a lagging standby
would hold it: the Clear's row deleted, `current_version` and `clear_generation` lowered. The chat
quotes the "not provided because" note it got instead of the pre-Clear text, a `remember:` writes
nothing, and `memframe history --accept-server` is the explicit, logged way back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memframe.cli import EXIT_ERROR, main
from memframe.core.types import MEMORY_PATH
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from tests.reliability.support import raw
from tests.support.remote_kinds import app_for, loopback_server, user_token

SECRET = "# Memory\n- The launch code is PINEAPPLE.\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


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


def test_chat_after_a_rollback_past_a_clear_gets_no_memory_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, database: tuple[str | Path, str]
) -> None:
    db, ws = database
    (tmp_path / "m.md").write_text(SECRET)
    for argv in (["init"], ["save", str(tmp_path / "m.md"), "--base", "0"], ["ai", "on"], ["mode", "auto"]):
        assert run(capsys, *argv)[0] == 0, argv
    assert "Cleared: version 2" in run(capsys, "clear", "--base", "1")[1]
    with raw(db) as conn:  # by hand, as a restore from before the Clear would leave it
        conn.execute("DELETE FROM file_versions WHERE workspace_id = ? AND path = ? AND version = 2", (ws, MEMORY_PATH))
        conn.execute("UPDATE files SET current_version = 1 WHERE workspace_id = ? AND path = ?", (ws, MEMORY_PATH))
        conn.execute("UPDATE workspace_memory_policy SET clear_generation = 0 WHERE workspace_id = ?", (ws,))

    code, out, _ = run(capsys, "chat", "-m", "what do you know?")
    assert code == 0 and "PINEAPPLE" not in out
    assert "[workspace-memory status=stale]not provided because the server holds an older revision" in out
    assert "memory: not provided to call 1 because" in out and "memframe history --accept-server" in out
    code, out, _ = run(capsys, "chat", "-m", "remember: - The launch code is MANGO.")
    assert code == 0 and "Not remembered" in out and "Remembered (" not in out
    with raw(db) as conn:
        versions = conn.execute(
            "SELECT version FROM file_versions WHERE workspace_id = ? AND path = ?", (ws, MEMORY_PATH)
        )
        assert [int(v) for (v,) in versions] == [1], "no capture on top of the rolled-back head"

    code, _, err = run(capsys, "show")
    assert code == EXIT_ERROR and "this machine has seen version 2" in err and "--accept-server" in err
    code, out, _ = run(capsys, "history", "--accept-server")
    assert code == 0 and "this machine had seen version 2; the server shows version 1" in out
    assert "Recorded in " in out and Path(out.rsplit("Recorded in ", 1)[1].strip().rstrip(".")).is_file()
    assert run(capsys, "show", "--text-only")[1] == SECRET  # what the restore brought back, Clear undone
    assert "revision 1 was provided to call 1" in run(capsys, "chat", "-m", "and now?")[1]
