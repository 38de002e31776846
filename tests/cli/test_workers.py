"""`memframe serve --workers 2` for real: two worker processes on one port, one key-session service.

Over SQLite (the workers share the file) and over a real PostgreSQL (the fixture's; under
CI=true a missing PostgreSQL fails instead of skipping). Requests go on fresh connections, so
they spread over both workers; each worker's access lines carry its pid, which is how a test
knows a promise held on both. Killing a worker mid-burst loses nothing that was acknowledged.
"""

from __future__ import annotations

import base64
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from memframe.backend.remote import RemoteBackend
from memframe.core.errors import KeySessionServiceDown, MemframeError, Unavailable, VersionConflict
from memframe.core.types import Mode
from memframe.keysessions.client import RemoteKeySessions
from memframe.service import MemoryService
from tests.conftest import database_for

pytestmark = [pytest.mark.server, pytest.mark.slow]

CREDENTIAL = "workers-test-credential-0123456789"
WORKER_LINE = re.compile(r'\[worker (\d+)\] \S+ - "(\w+) (\S+) HTTP/1.1" (\d+)')
START_SECONDS = 60.0


@dataclass
class Process:
    """A memframe command running in the background, its output going to files we can read."""

    popen: subprocess.Popen[bytes]
    out: Path
    err: Path

    def output(self) -> str:
        return self.out.read_text(encoding="utf-8", errors="replace")

    def errors(self) -> str:
        return self.err.read_text(encoding="utf-8", errors="replace")

    def wait_for(self, pattern: str, seconds: float = START_SECONDS) -> re.Match[str]:
        deadline = time.monotonic() + seconds
        while (found := re.search(pattern, self.output() + self.errors())) is None:
            if self.popen.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no {pattern!r} in:\n{self.output()}\n{self.errors()}")
            time.sleep(0.05)
        return found

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        return self.popen.wait(timeout=40)


@contextmanager
def memframe(tmp_path: Path, name: str, *argv: str) -> Iterator[Process]:
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    with out.open("wb") as o, err.open("wb") as e:
        popen = subprocess.Popen(
            [sys.executable, "-m", "memframe", *argv],
            stdout=o,
            stderr=e,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    process = Process(popen, out, err)
    try:
        yield process
    finally:
        if popen.poll() is None:
            popen.send_signal(signal.SIGTERM)
            try:
                popen.wait(timeout=40)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()


@dataclass
class Team:
    db: str
    token: str
    key: bytes


def _team(db: str) -> Team:
    service = MemoryService(db)
    try:
        service.accounts.add_user("alice")
        service.accounts.create_workspace("ws", "alice")
        _, token = service.accounts.create_token("alice")
    finally:
        service.close()
    return Team(db, token, os.urandom(32))


@contextmanager
def served(tmp_path: Path, team: Team, *options: str) -> Iterator[tuple[Process, str]]:
    """`memframe serve --workers 2` on a free port, answering."""
    with memframe(tmp_path, "serve", "serve", "--db", team.db, "--port", "0", "--workers", "2", *options) as serve:
        url = serve.wait_for(r"at (http://127\.0\.0\.1:\d+) with 2 workers").group(1)
        serve.wait_for(r"memframe workers started")
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                if httpx.get(f"{url}/api/v1/workspaces", headers=_auth(team.token), timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, serve.errors()
            time.sleep(0.1)
        yield serve, url


def _secrets(team: Team) -> set[str]:
    """What no log line may hold: the key (hex or base64), the token, the shared credential."""
    return {team.key.hex(), base64.b64encode(team.key).decode(), team.token, CREDENTIAL}


def _words(log: str) -> set[str]:
    return set(re.findall(r"[A-Za-z0-9+/=_\-]{16,}", log))


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def served_by(serve: Process, route: str, since: int) -> list[str]:
    """The pids of the workers whose access lines after offset `since` name `route`."""
    return [m.group(1) for m in WORKER_LINE.finditer(serve.output()[since:]) if route in m.group(3)]


def on_both_workers(serve: Process, route: str, call: Callable[[], Any], tries: int = 200) -> list[Any]:
    """`call()` on fresh connections until both workers answered `route` at least once; every answer."""
    since = len(serve.output())
    answers = []
    for _ in range(tries):
        answers.append(call())
        time.sleep(0.01)
        if len(set(served_by(serve, route, since))) >= 2:
            return answers
    time.sleep(0.5)  # the last access lines may trail their answers
    assert len(set(served_by(serve, route, since))) >= 2, f"one worker answered every {route} in {tries} tries"
    return answers


# --- the fence promises, on both workers -----------------------------------------------------


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_captures_recalls_and_every_fence_promise_hold_across_two_workers(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    team = _team(database_for(engine, request, tmp_path))
    (tmp_path / "credential").write_text(CREDENTIAL + "\n", encoding="utf-8")
    with memframe(
        tmp_path,
        "keysessions",
        "keysessions",
        "--listen",
        "127.0.0.1:0",
        "--credential-file",
        str(tmp_path / "credential"),
    ) as ks:
        ks_url = ks.wait_for(r"at (http://127\.0\.0\.1:\d+),").group(1)
        options = ("--key-sessions", ks_url, "--key-sessions-credential-file", str(tmp_path / "credential"))
        with served(tmp_path, team, *options) as (serve, url):
            person = RemoteBackend(url, team.token, "ws", team.key)
            # The test's own ingress: the same database and key-session service the workers use.
            store = RemoteKeySessions(ks_url, CREDENTIAL)
            ingress = MemoryService(team.db, key_sessions=store)
            http = httpx.Client(base_url=url, headers={"Connection": "close"}, timeout=30)
            try:
                _fence_promises(serve, person, ingress, http)
                # the server-side turn (recall and capture in whichever worker took the send)
                turn = person.send("chat", "remember: - from a turn")
                assert turn.remembered and "- from a turn" in person.load().text
            finally:
                http.close()
                ingress.close()
                store.close()
                person.close()
            assert serve.stop() == 0
        log = serve.output() + serve.errors() + ks.output() + ks.errors()
    assert "memframe stopped on SIGTERM" in log and "Traceback" not in log
    assert not _secrets(team) & _words(log) and "likes" not in log


def _fence_promises(serve: Process, person: RemoteBackend, ingress: MemoryService, http: httpx.Client) -> None:
    a = ingress.assistant
    person.save("# Memory\n- likes tea\n", 0)
    person.set_policy(Mode.AUTO, person.get_policy().revision)
    person.set_ai(True)
    session = person.key_session()  # opened through a worker, held by the key-session service
    root = "/api/v1/automation/workspaces/ws/memory"
    turns = iter(range(10**6))

    def admit() -> Any:
        n = next(turns)
        return a.admit("alice", "ws", f"c{n}", idempotency_key=f"t{n}", key_session_id=session, memory_state=None)

    def recall(adm: Any) -> dict[str, Any]:
        return http.get(root, headers=_auth(adm.credential)).json()  # type: ignore[no-any-return]

    def capture(adm: Any, line: str, expected: int, key_session: str = session) -> httpx.Response:
        headers = {**_auth(adm.credential), "Idempotency-Key": f"memory:{adm.id}", "X-Key-Session": key_session}
        return http.put(
            root, headers=headers, json={"edits": [{"op": "add", "line": line}], "expectedVersion": expected}
        )

    # Captures and recalls spread over both workers: each turn recalls the newest revision and commits once.
    version = 1

    def one_turn() -> None:
        nonlocal version
        adm = admit()
        assert recall(adm)["revision"] == version
        answer = capture(adm, f"- fact {version}", version)
        assert answer.status_code == 200, answer.text
        version = answer.json()["version"]

    on_both_workers(serve, root, one_turn)
    text = person.load().text
    assert all(f"- fact {v}" in text for v in range(1, version))

    # A Clear acknowledged on one worker retires an admission on every worker: recall withholds
    # nothing older, and every capture under it is refused by the fence.
    before_clear = admit()
    assert recall(before_clear)["status"] == "provided"
    cleared = person.clear(person.load().version)
    refusals = on_both_workers(serve, root, lambda: capture(before_clear, "- after the clear", cleared.version))
    assert {(r.status_code, r.json()["error"]) for r in refusals} == {(409, "fence_refused")}
    assert all("memory was not cleared since the turn began" in r.json()["message"] for r in refusals)
    assert person.load().text == ""

    # A mode change on one worker: an admission taken before it is retired everywhere.
    before_mode = admit()
    policy = person.set_policy(Mode.READ_ONLY, person.get_policy().revision)
    person.set_policy(Mode.AUTO, policy.revision)
    refusals = on_both_workers(serve, root, lambda: capture(before_mode, "- after the flip", cleared.version))
    assert {r.status_code for r in refusals} == {409}

    # A key session revoked through one worker refuses on every worker: the capture is refused,
    # recall withholds, and a send under it is refused before anything is admitted.
    live = admit()
    assert recall(live)["status"] == "empty"
    person.close_key_session()  # DELETE …/key-sessions/:id: the revocation row, then the service forgets
    refusals = on_both_workers(serve, root, lambda: capture(live, "- after revocation", cleared.version))
    assert {r.status_code for r in refusals} == {409}
    person.save("# Memory\n- likes scones\n", cleared.version)
    withheld = on_both_workers(serve, root, lambda: recall(live))
    assert {r["status"] for r in withheld} == {"unavailable"}
    assert person.load().text == "# Memory\n- likes scones\n"


# --- a worker killed mid-burst ----------------------------------------------------------------


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_a_worker_killed_in_a_burst_of_writes_loses_nothing_acknowledged(
    engine: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    team = _team(database_for(engine, request, tmp_path))
    with served(tmp_path, team) as (serve, url):
        started = serve.wait_for(r"workers started \(pids (\d+), (\d+), key-session service pid (\d+)\)")
        pids = [int(p) for p in started.groups()]
        acknowledged: dict[tuple[str, int], str] = {}
        lock = threading.Lock()
        stop = threading.Event()
        failures: list[str] = []

        def writer(n: int) -> None:
            backend = RemoteBackend(url, team.token, "ws", team.key, timeout=30)
            path, i = f"burst/{n}.md", 0
            base: int | None = 0
            try:
                while not stop.is_set():
                    i += 1
                    try:
                        if base is None:  # after an unknown outcome: what the server holds now
                            base = backend.read_file(path)[0]
                        text = f"writer {n}, write {i}\n"
                        info = backend.write_file(path, text, base)
                    except (Unavailable, VersionConflict) as exc:  # cut off by the kill: the outcome is unknown
                        failures.append(type(exc).__name__)
                        base = None
                        continue
                    with lock:
                        acknowledged[(path, info.version)] = text
                    base = info.version
            except MemframeError as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
            finally:
                backend.close()

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        while len(acknowledged) < 20:
            time.sleep(0.02)
        os.kill(pids[0], signal.SIGKILL)
        at_kill = len(acknowledged)
        serve.wait_for(rf"worker 1 \(pid {pids[0]}\) was killed by SIGKILL; starting another", seconds=30)
        deadline = time.monotonic() + 30
        while len(acknowledged) < at_kill + 20 and time.monotonic() < deadline:
            time.sleep(0.02)
        stop.set()
        for t in threads:
            t.join(60)
        assert len(acknowledged) >= at_kill + 20, f"writes did not go on after the kill: {failures}"
        assert not [f for f in failures if ":" in f], failures  # only the kill's unknown outcomes

        reader = RemoteBackend(url, team.token, "ws", team.key)
        try:
            assert {path for path, _ in reader.verify()} == {f"burst/{n}.md" for n in range(4)}  # every chain whole
            for n in range(4):
                path = f"burst/{n}.md"
                mine = sorted(v for p, v in acknowledged if p == path)
                stored = reader.store.get_versions(path, mine)
                assert [s.info.version for s in stored] == mine
                open_version = reader._opener(path)
                for s in stored:
                    assert open_version(s.ciphertext, s.info.version) == acknowledged[(path, s.info.version)]
            # The replacement worker and the survivor share serve's own key-session service.
            reader.set_policy(Mode.AUTO, reader.get_policy().revision)
            reader.set_ai(True)
            assert reader.send("chat", "remember: - after the kill").remembered
            assert "- after the kill" in reader.load().text
            # serve's own key-session service killed: started again, knowing no key; the client opens a new session.
            os.kill(pids[2], signal.SIGKILL)
            serve.wait_for(rf"the key-session service \(pid {pids[2]}\) was killed by SIGKILL; starting it again")
            deadline = time.monotonic() + 30
            while True:
                try:
                    assert "- after the kill" in reader.send("chat", "what now?").answer
                    break
                except KeySessionServiceDown:  # until it answers again
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
        finally:
            reader.close()
        assert serve.stop() == 0
    assert "Traceback" not in serve.errors()
    assert not _secrets(team) & _words(serve.output() + serve.errors())


# --- the key-session service restarting, and down ---------------------------------------------


def test_the_key_session_service_restart_forgets_keys_and_its_absence_is_a_clear_refusal(tmp_path: Path) -> None:
    team = _team(str(tmp_path / "team.db"))
    credential = tmp_path / "credential"
    credential.write_text(CREDENTIAL, encoding="utf-8")
    ks_argv = ("keysessions", "--credential-file", str(credential), "--listen")
    with memframe(tmp_path, "ks1", *ks_argv, "127.0.0.1:0") as ks:
        ks_url = ks.wait_for(r"at (http://127\.0\.0\.1:(\d+)),")
        options = ("--key-sessions", ks_url.group(1), "--key-sessions-credential-file", str(credential))
        with served(tmp_path, team, *options) as (serve, url):
            person = RemoteBackend(url, team.token, "ws", team.key)
            store = RemoteKeySessions(ks_url.group(1), CREDENTIAL)
            ingress = MemoryService(team.db, key_sessions=store)
            http = httpx.Client(base_url=url, headers={"Connection": "close"}, timeout=30)
            try:
                person.save("# Memory\n- likes tea\n", 0)
                person.set_policy(Mode.AUTO, person.get_policy().revision)
                person.set_ai(True)
                assert "- likes tea" in person.send("c1", "hello").answer
                old_session = person.key_session()
                admitted = ingress.assistant.admit(
                    "alice", "ws", "c2", idempotency_key="t1", key_session_id=old_session, memory_state=None
                )
                root = "/api/v1/automation/workspaces/ws/memory"

                assert ks.stop() == 0  # the service is down
                assert "every key is forgotten" in ks.output()
                assert person.save("# Memory\n- likes tea\n- and scones\n", 1).version == 2  # Saves go on
                with pytest.raises(KeySessionServiceDown) as refused:
                    person.send("c1", "and now?")
                assert "key-session service cannot be reached" in str(refused.value)
                recalls = on_both_workers(serve, root, lambda: http.get(root, headers=_auth(admitted.credential)))
                assert {r.json()["status"] for r in recalls} == {"unavailable"}
                headers = {
                    **_auth(admitted.credential),
                    "Idempotency-Key": f"memory:{admitted.id}",
                    "X-Key-Session": old_session,
                }
                body = {"edits": [{"op": "add", "line": "- no"}], "expectedVersion": 2}
                down = http.put(root, headers=headers, json=body)
                assert (down.status_code, down.json()["error"]) == (503, "key_session_service_unavailable")

                # Started again on the same port: it holds no key. The old session is unknown everywhere,
                # and the long-running client opens a new one by itself.
                with memframe(tmp_path, "ks2", *ks_argv, f"127.0.0.1:{ks_url.group(2)}") as ks2:
                    ks2.wait_for(r"key-session service at")
                    gone = http.put(root, headers=headers, json=body)
                    assert (gone.status_code, gone.json()["error"]) == (409, "key_session_unavailable")
                    assert http.get(root, headers=_auth(admitted.credential)).json()["status"] == "unavailable"
                    answer = person.send("c1", "and now?").answer
                    assert "- and scones" in answer and person.key_session() != old_session
                    assert person.load().text == "# Memory\n- likes tea\n- and scones\n"
            finally:
                http.close()
                ingress.close()
                store.close()
                person.close()
        log = serve.output() + serve.errors()
    assert not _secrets(team) & _words(log) and "scones" not in log
