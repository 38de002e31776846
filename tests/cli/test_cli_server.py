"""`memframe admin …` and `memframe serve`, as a person running a team's server uses them.

Admin commands run in-process. `serve` runs as a real subprocess on a free
port; the CLI then works against it with MEMFRAME_URL/MEMFRAME_TOKEN exactly
as it does locally, and SIGTERM/SIGINT stop it cleanly.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from memframe.cli import EXIT_CONFLICT, EXIT_ERROR, main
from memframe.cli.listening import BALANCED_REUSEPORT, listen_each


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "team.db")


def admin(capsys: pytest.CaptureFixture[str], db: str, *argv: str) -> tuple[int, str, str]:
    return run(capsys, "admin", *argv, "--db", db)


@pytest.fixture
def team(capsys: pytest.CaptureFixture[str], db: str) -> dict[str, str]:
    """alice owns `notes`, bob is a member; carol has a token but no membership."""
    for user in ("alice", "bob", "carol"):
        assert admin(capsys, db, "user", "add", user)[0] == 0
    assert admin(capsys, db, "workspace", "create", "notes", "--owner", "alice")[0] == 0
    assert admin(capsys, db, "member", "add", "notes", "bob")[0] == 0
    return {user: admin(capsys, db, "token", "create", "--user", user)[1].strip() for user in ("alice", "carol")}


# --- admin ----------------------------------------------------------------------------------


def test_admin_users_workspaces_and_members(capsys: pytest.CaptureFixture[str], db: str, team: dict[str, str]) -> None:
    assert admin(capsys, db, "user", "list")[1].split() == ["alice", "bob", "carol"]
    code, _, err = admin(capsys, db, "user", "add", "alice")
    assert code == EXIT_ERROR and err == "memframe: The user 'alice' already exists.\n"
    assert admin(capsys, db, "workspace", "list")[1] == "notes  members: alice, bob\n"
    assert admin(capsys, db, "member", "list", "notes")[1].split() == ["alice", "bob"]
    assert admin(capsys, db, "member", "remove", "notes", "bob")[0] == 0
    assert admin(capsys, db, "member", "list", "notes")[1].split() == ["alice"]
    code, _, err = admin(capsys, db, "member", "remove", "notes", "bob")
    assert code == EXIT_ERROR and "not a member" in err
    code, _, err = admin(capsys, db, "workspace", "create", "bad name!", "--owner", "alice")
    assert code == EXIT_ERROR and "not a workspace name" in err
    code, _, err = admin(capsys, db, "member", "add", "notes", "nobody")
    assert code == EXIT_ERROR and "no user 'nobody'" in err


def test_tokens_are_shown_once_listed_without_secrets_and_revocable(
    capsys: pytest.CaptureFixture[str], db: str, team: dict[str, str]
) -> None:
    code, out, err = admin(capsys, db, "token", "create", "--user", "bob", "--label", "bob's laptop")
    token = out.strip()
    assert code == 0 and re.fullmatch(r"mf_[A-Za-z0-9_-]{40,}", token)
    assert "shown only this once" in err and token not in err
    code, out, _ = admin(capsys, db, "token", "list", "--user", "bob")
    assert token not in out and "bob's laptop" in out and "active" in out
    token_id = out.splitlines()[1].split()[0]
    assert admin(capsys, db, "token", "revoke", token_id)[0] == 0
    assert "revoked" in admin(capsys, db, "token", "list", "--user", "bob")[1]
    code, _, err = admin(capsys, db, "token", "revoke", token_id)
    assert code == EXIT_ERROR and "no active token" in err
    all_tokens = admin(capsys, db, "token", "list")[1]
    assert not any(t in all_tokens for t in team.values())
    code, _, err = admin(capsys, db, "token", "create", "--user", "nobody")
    assert code == EXIT_ERROR and err.count("\n") == 1


def test_a_token_can_expire(capsys: pytest.CaptureFixture[str], db: str, team: dict[str, str]) -> None:
    """Issue 17: `--expires-in 90d`; a bad duration is one line; an expired token is refused."""
    from memframe.core.errors import Unauthorized
    from memframe.service import MemoryService

    code, out, err = admin(capsys, db, "token", "create", "--user", "bob", "--expires-in", "90d")
    assert code == 0 and "expiring in 90d" in err
    token = out.strip()
    for bad in ("90", "0d", "1w", "d"):
        code, _, err = admin(capsys, db, "token", "create", "--user", "bob", "--expires-in", bad)
        assert code == EXIT_ERROR and "not a duration" in err and err.count("\n") == 1
    now = [time.time()]
    service = MemoryService(db, clock=lambda: now[0])
    try:
        assert service.accounts.authenticate(token) == "bob"
        now[0] += 90 * 86400 + 1
        with pytest.raises(Unauthorized):
            service.accounts.authenticate(token)
        assert service.accounts.authenticate(team["alice"]) == "alice"  # no expiry: still works
    finally:
        service.close()


def test_admin_never_creates_a_database_by_mistake(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    for argv in (("user", "list"), ("workspace", "list"), ("token", "list")):
        code, _, err = admin(capsys, str(missing), *argv)
        assert code == EXIT_ERROR and "There is no database" in err
    assert not missing.exists()
    code, _, _ = run(capsys, "admin", "user", "list")
    assert code == 2  # --db is required without $MEMFRAME_DB


# --- serve ----------------------------------------------------------------------------------


@dataclass
class Server:
    process: subprocess.Popen[str]
    url: str

    def stop(self, sig: signal.Signals) -> tuple[int, str, str]:
        self.process.send_signal(sig)
        out, err = self.process.communicate(timeout=20)
        return self.process.returncode, out, err


@contextmanager
def serving(db: str, *options: str) -> Iterator[Server]:
    process = subprocess.Popen(
        [sys.executable, "-m", "memframe", "serve", "--db", db, "--port", "0", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        found = re.search(r"at (http://127\.0\.0\.1:\d+) ", first)
        if found is None:
            process.kill()
            out, err = process.communicate(timeout=20)
            raise AssertionError(f"serve did not start: {first}{out}{err}")
        yield Server(process, found.group(1))
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=20)


@pytest.mark.server
def test_the_cli_works_against_a_served_workspace_then_sigterm_stops_it(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    db: str,
    team: dict[str, str],
    tmp_path: Path,
) -> None:
    memory = tmp_path / "m.md"
    with serving(db) as server:
        monkeypatch.setenv("MEMFRAME_URL", server.url)
        monkeypatch.setenv("MEMFRAME_TOKEN", team["alice"])
        monkeypatch.setenv("MEMFRAME_WORKSPACE", "notes")

        code, out, err = run(capsys, "init")
        assert code == 0 and server.url in out and "key created" in out, err
        memory.write_text("# Memory\n- the harbour code is 4711\n", encoding="utf-8")
        assert run(capsys, "save", str(memory), "--base", "0")[1].startswith("Saved version 1 ")
        memory.write_text("# Memory\n- the harbour code is 4711\n- tea, no sugar\n", encoding="utf-8")
        assert run(capsys, "save", str(memory), "--base", "1")[1].startswith("Saved version 2 ")
        code, _, err = run(capsys, "save", str(memory), "--base", "1")
        assert code == EXIT_CONFLICT and "now version 2" in err

        code, out, _ = run(capsys, "show")
        assert code == 0 and f"workspace notes · {server.url}" in out and "- tea, no sugar" in out
        assert [line.split()[0] for line in run(capsys, "history")[1].splitlines()[1:]] == ["2", "1"]
        assert "+- tea, no sugar" in run(capsys, "diff", "1", "2")[1]
        assert "Restored revision 1's text as version 3." in run(capsys, "undo", "1", "--base", "2")[1]
        assert "clear generation is now 1" in run(capsys, "clear", "--base", "3")[1]
        assert run(capsys, "mode", "auto")[1].startswith("Auto (policy revision 1)")
        code, _, err = run(capsys, "mode", "off", "--expected-revision", "0")
        assert code == EXIT_CONFLICT and "now auto, revision 1" in err
        assert run(capsys, "show", "--text-only")[1] == ""

        # what a person sees when something is wrong: one line, no token, no traceback
        code, _, err = run(capsys, "show", "--token", "mf_wrong")
        assert code == EXIT_ERROR and "needs a valid token" in err and "mf_wrong" not in err
        carol = tmp_path / "carol.token"
        carol.write_text(team["carol"] + "\n", encoding="utf-8")
        code, _, err = run(capsys, "init", "--workspace", "notes2", "--token-file", str(carol))
        assert code == EXIT_ERROR and err == "memframe: No such workspace, or you are not a member of it.\n"
        code, _, err = run(capsys, "init", "--workspace", "other", "--remote", server.url + "/oops")
        assert code == EXIT_ERROR and "is the server URL right?" in err

        # admin works on the live database: a new token works on the next request
        fresh = admin(capsys, db, "token", "create", "--user", "bob")[1].strip()
        monkeypatch.setenv("MEMFRAME_TOKEN", fresh)
        assert run(capsys, "history", "--limit", "1")[1].splitlines()[1].split()[0] == "4"

        code, out, err = server.stop(signal.SIGTERM)
    assert code == 0, err
    assert "memframe stopped on SIGTERM; the database is closed." in out
    assert "Traceback" not in err and "Shutting down" in err
    log = out + err
    assert '"PUT /api/v1/workspaces/notes/files/.zudotext/memory/MEMORY.md HTTP/1.1" 200' in log
    assert "4711" not in log and "harbour" not in log and team["alice"] not in log and fresh not in log
    code, _, err = run(capsys, "show")
    assert code == EXIT_ERROR and "Cannot reach the memory server" in err and "nothing was changed" in err


@pytest.mark.server
def test_log_level_warning_writes_no_access_lines(db: str, team: dict[str, str]) -> None:
    """Access lines are INFO, as uvicorn's are: `--log-level warning` asks for none."""
    with serving(db, "--log-level", "warning") as server:
        answer = httpx.get(f"{server.url}/api/v1/workspaces", headers={"Authorization": f"Bearer {team['alice']}"})
        assert answer.status_code == 200
        code, out, err = server.stop(signal.SIGTERM)
    assert code == 0 and "memframe stopped on SIGTERM" in out
    assert "/api/v1/workspaces" not in out + err and "INFO:" not in out + err


@pytest.mark.server
def test_sigint_stops_the_server_cleanly(db: str, team: dict[str, str]) -> None:
    with serving(db) as server:
        code, out, err = server.stop(signal.SIGINT)
    assert code == 0 and "memframe stopped on SIGINT" in out
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


def test_serve_refuses_a_database_from_a_newer_memframe(
    capsys: pytest.CaptureFixture[str], db: str, team: dict[str, str]
) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', 0)")
    conn.close()
    code, out, err = run(capsys, "serve", "--db", db, "--port", "0")
    assert code == EXIT_ERROR and out == ""
    assert err.count("\n") == 1 and "written by a newer memframe" in err and "upgrade memframe" in err


def test_serve_says_so_when_the_port_is_taken(
    capsys: pytest.CaptureFixture[str], db: str, team: dict[str, str]
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        code, out, err = run(capsys, "serve", "--db", db, "--port", str(taken.getsockname()[1]))
    assert code == EXIT_ERROR and out == ""
    assert err.startswith("memframe: Cannot listen on 127.0.0.1:") and err.count("\n") == 1


@pytest.mark.parametrize("taken_by", ["one listener", "another serve's workers"])
def test_serve_with_workers_says_so_when_the_port_is_taken(
    capsys: pytest.CaptureFixture[str], db: str, team: dict[str, str], taken_by: str
) -> None:
    # Its workers' sockets share the port with SO_REUSEPORT; a second serve (the same user, whose
    # sockets could otherwise join that group) is refused like any other taker, before a worker starts.
    held = [socket.create_server(("127.0.0.1", 0))] if taken_by == "one listener" else listen_each("127.0.0.1", 0, 2)
    try:
        port = held[0].getsockname()[1]
        code, out, err = run(capsys, "serve", "--db", db, "--port", str(port), "--workers", "2")
    finally:
        for sock in held:
            sock.close()
    assert code == EXIT_ERROR and out == ""
    assert err.startswith(f"memframe: Cannot listen on 127.0.0.1:{port}:") and err.count("\n") == 1


@pytest.mark.skipif(not BALANCED_REUSEPORT, reason="SO_REUSEPORT balances connections on Linux only")
def test_each_worker_gets_a_socket_of_its_own_on_one_port_and_connections_spread_over_them() -> None:
    # One socket shared by every worker let whichever accept loop woke first take a whole burst.
    sockets = listen_each("127.0.0.1", 0, 2)
    clients: list[socket.socket] = []
    try:
        assert len({sock.getsockname() for sock in sockets}) == 1 and len(set(sockets)) == 2
        for _ in range(64):  # all at once, as the bench's keep-alive clients open them
            clients.append(socket.create_connection(sockets[0].getsockname()))
        accepted = []
        for sock in sockets:
            sock.setblocking(False)
            count = 0
            while True:
                try:
                    conn, _ = sock.accept()
                except BlockingIOError:
                    break
                conn.close()
                count += 1
            accepted.append(count)
        # Spread by a hash of each connection's addresses: all 64 on one socket has odds of 2 in 2**64.
        assert sum(accepted) == 64 and min(accepted) > 0, accepted
    finally:
        for sock in [*clients, *sockets]:
            sock.close()


def test_serve_takes_the_key_session_idle_time_and_lifetime(tmp_path: Path) -> None:
    from memframe.cli import build_parser
    from memframe.cli.server import open_service
    from memframe.keysessions.store import DEFAULT_IDLE_SECONDS, DEFAULT_LIFETIME_SECONDS

    db = str(tmp_path / "t.db")
    args = build_parser().parse_args(["serve", "--db", db, "--key-session-idle", "60", "--key-session-lifetime", "90"])
    with open_service(args, create=True) as service:
        assert (service.key_sessions.idle_seconds, service.key_sessions.lifetime_seconds) == (60, 90)
    with open_service(build_parser().parse_args(["serve", "--db", db]), create=True) as service:
        assert (service.key_sessions.idle_seconds, service.key_sessions.lifetime_seconds) == (1800, 43200)
    assert (DEFAULT_IDLE_SECONDS, DEFAULT_LIFETIME_SECONDS) == (1800, 43200)  # what --help says


def test_serve_refuses_a_duration_that_is_not_one(capsys: pytest.CaptureFixture[str], db: str) -> None:
    code, _, err = run(capsys, "serve", "--db", db, "--key-session-idle", "0")
    assert code == 2 and "above 0" in err


@pytest.mark.server
def test_a_long_chat_outlives_the_servers_idle_eviction(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], db: str, team: dict[str, str]
) -> None:
    """`memframe chat` against a real server whose key sessions die after one idle second."""
    import time

    with serving(db, "--key-session-idle", "1") as server:
        monkeypatch.setenv("MEMFRAME_URL", server.url)
        monkeypatch.setenv("MEMFRAME_TOKEN", team["alice"])
        monkeypatch.setenv("MEMFRAME_WORKSPACE", "notes")
        assert run(capsys, "init")[0] == 0
        assert run(capsys, "ai", "on")[0] == 0
        chat = subprocess.Popen(
            [sys.executable, "-m", "memframe", "chat", "-c", "long"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        assert chat.stdin is not None and chat.stdout is not None
        try:
            chat.stdin.write("hello\n")
            chat.stdin.flush()
            while "receipt" not in (line := chat.stdout.readline()) and "memory" not in line:
                assert line, chat.stderr.read() if chat.stderr else ""
            time.sleep(1.5)  # longer than the idle time: the server forgets the key
            out, err = chat.communicate("and now?\n\n", timeout=60)
        finally:
            if chat.poll() is None:
                chat.kill()
        assert chat.returncode == 0, err
        assert out.count("assistant ›") == 1 and "key session" not in out + err
        code, out, _ = run(capsys, "receipts", "-c", "long")
        assert code == 0 and len(out.splitlines()) == 3  # the header and one model call per message
