"""Secrets hygiene: keys, tokens, credentials and memory text never reach logs, errors or reprs.

One full session — init (passphrase-wrapped key), saves, a Clear, an Undo, AI on,
a key session, chat turns in which the scripted model remembers things (Auto)
and proposes them (Read only), proposals applied and dismissed, receipts, the
transcript — plus every failure a person can run into along the way (a
conflict, a wrong key, a wrong passphrase, a tampered revision, a fenced
capture, a revoked key session, a forged credential, a storage failure). All
logging is captured at DEBUG from the root logger, and every exception's
message, repr, payload and formatted traceback is kept, as is every error line
the CLI prints and the repr of every object the session handled. None may
contain a memory text, the key (raw, hex, base64), the passphrase, a bearer
token or a delivery credential. At rest, the database and its WAL hold none of
them either, and the decrypted transcript holds no recall block or system prompt.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from memframe import paths, sealing
from memframe.assistant.models import Message, ModelReply, ScriptedModel
from memframe.assistant.runtime import SYSTEM_PROMPT
from memframe.backend.local import LocalBackend
from memframe.backend.workspaces import open_backend
from memframe.cli import main
from memframe.core.edits import MemoryChange
from memframe.core.errors import MemframeError, Unavailable
from memframe.core.types import MEMORY_PATH, Mode
from memframe.sealing import keyfiles
from memframe.sealing.keyfiles import load_key
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER

pytestmark = pytest.mark.access

PASSPHRASE = "correct horse battery staple 9"
SAVED = ["SAVEDSECRET-lapsang-souchong", "SAVEDSECRET-alarm-code-4711"]
REMEMBERED = "REMEMBEREDSECRET-allergic-to-peanuts"
PROPOSED = "PROPOSEDSECRET-prefers-aisle-seats"
MEMORY_TEXTS = [*SAVED, REMEMBERED, PROPOSED]


class Session:
    """Runs the session and keeps everything it would be embarrassing to leak."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []
        self.objects: list[Any] = []  # what the session handled, for their reprs
        self.cli_errors: list[str] = []
        self.secrets: list[str] = [PASSPHRASE]  # keys, the passphrase, bearer tokens
        self.credentials: list[str] = []  # delivery credentials

    def keep(self, value: Any) -> Any:
        self.objects.append(value)
        return value

    def expect_error(self, action: Callable[[], object]) -> BaseException:
        try:
            action()
        except MemframeError as exc:
            self.errors.append(exc)
            return exc
        raise AssertionError(f"{action} did not fail")

    def add_key(self, key: bytes) -> None:
        for b64 in (base64.b64encode(key), base64.urlsafe_b64encode(key)):
            self.secrets += [b64.decode(), b64.decode().rstrip("=")]
        self.secrets += [key.hex(), key.hex().upper(), repr(key)[2:-1]]


class QuietModel(ScriptedModel):
    """Like the scripted model, but its answers never quote memory: any memory text found in the
    transcript can then only have come from a recall block, which must never be stored."""

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> ModelReply:  # type: ignore[override]
        reply = super().complete(messages, tools)
        if reply.tool_calls or (reply.content or "").startswith("Tool result"):
            return reply
        return ModelReply("Noted.")


def test_a_full_session_leaks_nothing(
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)  # the root logger, and so every library's, at DEBUG
    s = Session()

    # --- init, with a passphrase-wrapped key --------------------------------------------------------
    monkeypatch.setenv("MEMFRAME_PASSPHRASE", PASSPHRASE)
    assert main(["init", "--passphrase"]) == 0
    assert keyfiles.key_file_is_wrapped(paths.key_file("default").read_bytes())
    key = load_key("default")
    s.add_key(key)
    monkeypatch.delenv("MEMFRAME_PASSPHRASE")
    s.cli_errors.append(capsys.readouterr().err)
    monkeypatch.setenv("MEMFRAME_PASSPHRASE", "not the passphrase")
    s.expect_error(lambda: load_key("default"))
    assert main(["show"]) != 0
    s.cli_errors.append(capsys.readouterr().err)
    monkeypatch.setenv("MEMFRAME_PASSPHRASE", PASSPHRASE)

    # --- the person's writes --------------------------------------------------------------------------
    me = open_backend("default", model=QuietModel())
    assert isinstance(me, LocalBackend)
    service: MemoryService = me.store.service  # type: ignore[attr-defined]
    s.keep(me)
    s.keep(me.store)
    s.keep(me.save(f"# Memory\n- {SAVED[0]}\n", 0))
    s.keep(me.save(f"# Memory\n- {SAVED[0]}\n- {SAVED[1]}\n", 1))
    s.expect_error(lambda: me.save("stale\n", 1))
    s.keep(me.clear(2))
    s.keep(me.undo(2, 3))
    s.keep(me.load())
    s.keep(me.history())
    _, token = service.accounts.create_token(LOCAL_USER, "laptop")
    s.secrets.append(token)
    s.keep(service.accounts.tokens())

    # --- the Assistant: Auto remembers, Read only proposes ------------------------------------------------
    s.keep(me.set_ai(True))
    s.keep(me.set_policy(Mode.AUTO, me.get_policy().revision))
    s.keep(me.key_session())
    s.keep(service.key_sessions.describe(me.key_session()))
    s.keep(service.key_sessions._sessions[me.key_session()])
    turn = s.keep(me.send("conv", f"remember: - {REMEMBERED}"))
    assert turn.remembered, turn.outcomes
    s.keep(me.send("conv", "What do you know about me?"))
    s.keep(me.set_policy(Mode.READ_ONLY, me.get_policy().revision))
    s.keep(me.send("conv", f"remember: - {PROPOSED}"))
    proposals = s.keep(me.proposals())
    s.keep(me.store.proposals())  # type: ignore[attr-defined]
    assert len(proposals) == 1
    s.keep(me.apply_proposal(proposals[0].id, me.load().version))
    s.keep(me.send("conv", f"remember: - {PROPOSED}-again"))
    s.keep(me.dismiss_proposal(me.proposals()[0].id))
    s.keep(me.receipts("conv"))
    transcript = s.keep(me.transcript("conv"))

    # --- the failures a session can meet -----------------------------------------------------------------
    a = service.assistant
    admission = s.keep(
        a.admit(
            LOCAL_USER, "default", "conv2", idempotency_key="h1", key_session_id=me.key_session(), memory_state=None
        )
    )
    s.keep(repr(admission))
    fenced = a.admit(
        LOCAL_USER, "default", "conv3", idempotency_key="h2", key_session_id=me.key_session(), memory_state=None
    )
    for adm in (admission, fenced):
        s.credentials += [adm.credential, adm.credential_nonce]
    me.set_policy(Mode.AUTO, me.get_policy().revision)
    me.set_policy(Mode.READ_ONLY, me.get_policy().revision)
    me.set_policy(Mode.AUTO, me.get_policy().revision)
    s.expect_error(
        lambda: a.commit_capture(
            "default",
            fenced.credential,
            idempotency_key=f"memory:{fenced.id}",
            key_session_id=me.key_session(),
            changes=[MemoryChange("add", f"- {REMEMBERED}-fenced")],
            expected_version=me.load().version,
        )
    )
    s.expect_error(lambda: a.read_document("default", admission.credential[:-3] + "xyz", "notes/a.md"))
    s.expect_error(lambda: a.current_memory("other", admission.credential))
    wrong = LocalBackend(service, "default", sealing.new_key())
    s.expect_error(wrong.load)
    s.expect_error(lambda: wrong.key_session())
    s.expect_error(lambda: a.open_key_session(LOCAL_USER, "default", b"short"))
    session = me.key_session()
    me.close_key_session()
    s.expect_error(lambda: a.read_document("default", admission.credential, "notes/a.md"))
    s.expect_error(lambda: a.revoke_key_session(LOCAL_USER, session))
    with service.db.write() as conn:  # tamper with the newest revision
        (blob,) = conn.execute(
            "SELECT ciphertext FROM file_versions WHERE path = ? ORDER BY version DESC LIMIT 1", (MEMORY_PATH,)
        ).fetchone()
        conn.execute(
            "UPDATE file_versions SET ciphertext = ? WHERE path = ? AND ciphertext = ?",
            (bytes(blob)[:-1] + bytes([blob[-1] ^ 1]), MEMORY_PATH, blob),
        )
    s.expect_error(me.load)
    assert main(["show"]) != 0
    s.cli_errors.append(capsys.readouterr().err)
    head = me.history()[0].version
    writer = service.db._writer
    writer.execute(f"PRAGMA max_page_count = {writer.execute('PRAGMA page_count').fetchone()[0]}")
    big = "".join(f"- {SAVED[1]} {os.urandom(6).hex()}\n" for _ in range(5000))  # does not compress away
    assert isinstance(s.expect_error(lambda: me.save(big, head)), Unavailable)
    writer.execute("PRAGMA max_page_count = 1073741823")
    me.close()

    # --- nothing leaked ---------------------------------------------------------------------------------
    key_like = [*s.secrets, *s.credentials]
    logs = [r.getMessage() for r in caplog.records] + [caplog.text]
    errors = []
    for exc in s.errors:
        errors += [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
        if isinstance(exc, MemframeError):
            errors.append(repr(exc.to_payload()))
    reprs = [repr(o) for o in s.objects]
    found = []
    for where, texts, forbidden in [
        ("log", logs, [*MEMORY_TEXTS, *key_like]),
        ("error", errors, [*MEMORY_TEXTS, *key_like]),
        ("CLI error line", s.cli_errors, [*MEMORY_TEXTS, *key_like]),
        # a decrypted proposal or turn result legitimately holds memory text; keys never
        ("repr", reprs, key_like),
    ]:
        for text in texts:
            for secret in forbidden:
                if secret and secret in text:
                    found.append(f"{where} shows {secret[:16]!r}…: {text[:160]!r}")
    assert not found, "\n".join(found[:20])
    assert len(s.errors) >= 10 and caplog.records is not None

    # --- the transcript and the database at rest --------------------------------------------------------------
    stored = "\n".join(text for _, text in transcript)
    assert "[workspace-memory" not in stored and SYSTEM_PROMPT[:40] not in stored
    assert SAVED[1] not in stored, "recalled memory reached the durable transcript"
    raw = b"".join(p.read_bytes() for p in paths.local_database().parent.glob(paths.local_database().name + "*"))
    # (Delivery credentials are compared by the fence in SQL, so the database holds them; see RELIABILITY.md.)
    for secret in [*MEMORY_TEXTS, *s.secrets]:
        assert secret.encode() not in raw, f"{secret[:16]!r}… is stored in the clear"
    assert key not in raw


def test_a_session_over_http_leaks_nothing(caplog: pytest.LogCaptureFixture, fast_tmp: Path) -> None:
    """The same promise across the wire: what the client, the app and httpx log, and every error."""
    from memframe.backend.remote import RemoteBackend
    from tests.support.remote_kinds import PortalASGITransport, app_for

    caplog.set_level(logging.DEBUG)
    s = Session()
    service = MemoryService(fast_tmp / "http.db")
    try:
        service.accounts.add_user(LOCAL_USER)
        service.accounts.add_user("mallory")
        service.accounts.create_workspace("ws", LOCAL_USER)
        token = service.accounts.create_token(LOCAL_USER)[1]
        outsider = service.accounts.create_token("mallory")[1]
        s.secrets += [token, outsider]
        key = sealing.new_key()
        s.add_key(key)
        transport = PortalASGITransport(app_for(service))
        try:
            me = RemoteBackend("http://memframe.test", token, "ws", key, transport=transport)
            s.keep(me)
            s.keep(me.store)
            s.keep(me.save(f"# Memory\n- {SAVED[0]}\n", 0))
            s.keep(me.save(f"# Memory\n- {SAVED[1]}\n", 1))
            s.expect_error(lambda: me.save(f"- {REMEMBERED}\n", 1))
            s.keep(me.clear(2))
            s.keep(me.undo(2, 3))
            s.keep(me.history())
            s.keep(me.read_revision(1))
            s.keep(me.set_policy(Mode.AUTO, 0))
            s.expect_error(lambda: me.set_policy(Mode.OFF, 0))
            for bad in (None, "mf_not-a-token", outsider):
                other = RemoteBackend("http://memframe.test", bad, "ws", key, transport=transport)
                s.keep(other)
                s.expect_error(other.load)
                s.expect_error(lambda other=other: other.save(f"- {PROPOSED}\n", 4))
            wrong = RemoteBackend("http://memframe.test", token, "ws", sealing.new_key(), transport=transport)
            s.expect_error(wrong.load)
            s.expect_error(lambda: wrong.undo(1, 4))
        finally:
            transport.close()
    finally:
        service.close()
    logs = [r.getMessage() for r in caplog.records] + [caplog.text]
    errors = [t for e in s.errors for t in (str(e), repr(e), "".join(traceback.format_exception(e)))]
    found = [
        f"{where}: {secret[:16]!r}… in {text[:120]!r}"
        for where, texts, forbidden in [
            ("log", logs, [*MEMORY_TEXTS, *s.secrets]),
            ("error", errors, [*MEMORY_TEXTS, *s.secrets]),
            ("repr", [repr(o) for o in s.objects], s.secrets),
        ]
        for text in texts
        for secret in forbidden
        if secret in text
    ]
    assert not found, "\n".join(found[:20])
    assert len(s.errors) >= 9


@pytest.mark.server
def test_a_served_access_log_shows_no_query_strings_and_no_key_session_ids(fast_tmp: Path) -> None:
    """`memframe serve`'s own output, captured whole: a token tried as `?token=` and a key session id
    in a revoke URL appear nowhere, while each request still has its line."""
    db = fast_tmp / "served.db"
    service = MemoryService(db)
    try:
        service.accounts.add_user("alice")
        service.accounts.create_workspace("ws", "alice")
        token = service.accounts.create_token("alice")[1]
    finally:
        service.close()
    process = subprocess.Popen(
        [sys.executable, "-m", "memframe", "serve", "--db", str(db), "--port", "0", "--read-timeout", "5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        found = re.search(r"at (http://127\.0\.0\.1:\d+) ", process.stdout.readline())
        assert found, "serve did not start"
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=found.group(1), timeout=20) as client:
            assert client.get("/api/v1/workspaces/ws/ai", params={"token": token}).status_code == 422
            assert client.get("/healthz", params={"token": token}).status_code == 422
            key = base64.b64encode(sealing.new_key()).decode()
            opened = client.post("/api/v1/workspaces/ws/key-sessions", json={"key": key}, headers=auth)
            assert opened.status_code == 200, opened.text
            session = opened.json()["id"]
            assert client.delete(f"/api/v1/automation/key-sessions/{session}", headers=auth).status_code == 200
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=20)
    log = out + err
    assert process.returncode == 0, err
    assert token not in log and session not in log and key not in log and "?" not in log
    assert '"GET /api/v1/workspaces/ws/ai HTTP/1.1" 422' in out
    assert '"POST /api/v1/workspaces/ws/key-sessions HTTP/1.1" 200' in out
    assert '"DELETE /api/v1/automation/key-sessions/{session_id} HTTP/1.1" 200' in out
