"""A NUL character in any text a person or a client sends: one clear error, alike on both engines.

PostgreSQL cannot store NUL in TEXT (psycopg refuses the value before it is sent); SQLite can. So
both engines refuse a text parameter holding one before the statement runs (`db.refuse_nul`): a
lookup by such a value and a write of one get the same InvalidInput, the batch rolls back, and
nothing is written; over HTTP it is the one JSON error shape, a 422.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator

import httpx
import pytest

from memframe import sealing
from memframe.api import create_app
from memframe.core.errors import InvalidInput
from memframe.core.types import MEMORY_PATH
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from memframe.service.db import NUL_IN_TEXT
from tests.support.remote_kinds import asgi_client

NUL = "a\x00b"

#: Every service call below takes text from outside (a name, an id, a label, a key) that reaches a
#: statement as a parameter. Each gets NUL in that one place and must fail with NUL_IN_TEXT.
CALLS: dict[str, Callable[[MemoryService], object]] = {
    "a token's label": lambda s: s.accounts.create_token(LOCAL_USER, NUL),
    "a workspace id in a read": lambda s: s.get_file(LOCAL_USER, NUL, "notes/a.md"),
    "a user id in a read": lambda s: s.list_files(NUL, "ws"),
    "a workspace id in a save": lambda s: s.put_file(LOCAL_USER, NUL, "notes/a.md", _blob(NUL, "notes/a.md"), 0),
    "a user id in a save": lambda s: s.put_file(NUL, "ws", "notes/a.md", _blob("ws", "notes/a.md"), 0),
    "a member to add": lambda s: s.accounts.add_member("ws", NUL),
    "a token to revoke": lambda s: s.accounts.revoke_token(NUL),
    "an idempotency key": lambda s: s.assistant.admit(
        LOCAL_USER, "ws", "c1", idempotency_key=NUL, key_session_id=None, memory_state=None
    ),
    "a key session id": lambda s: s.assistant.admit(
        LOCAL_USER, "ws", "c2", idempotency_key="k2", key_session_id=NUL, memory_state=None
    ),
    "a proposal id": lambda s: s.assistant.resolve_proposal(LOCAL_USER, "ws", NUL, "dismissed"),
    "a workspace id in a policy change": lambda s: s.set_policy(
        LOCAL_USER, NUL, s.get_policy(LOCAL_USER, "ws").mode, 0
    ),
    "a delivery credential": lambda s: s.assistant.recall("ws", "cred_" + NUL + ".nonce"),
}


def _blob(workspace: str, path: str) -> bytes:
    return sealing.seal(sealing.new_key(), "text\n", workspace_id=workspace, path=path, version=1)


def _rows(service: MemoryService) -> tuple[int, ...]:
    with service.db.read() as conn:
        return tuple(
            int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
            for table in ("file_versions", "tokens", "memberships", "workspace_memory_admissions", "conversations")
        )


@pytest.fixture
def ai_on(engine_service: MemoryService) -> MemoryService:
    engine_service.assistant.set_ai(LOCAL_USER, "ws", True)
    return engine_service


@pytest.mark.parametrize("where", sorted(CALLS))
def test_a_nul_in_text_is_one_clear_error_on_every_engine_and_writes_nothing(ai_on: MemoryService, where: str) -> None:
    before = _rows(ai_on)
    with pytest.raises(InvalidInput) as refused:
        CALLS[where](ai_on)
    assert str(refused.value) == NUL_IN_TEXT
    assert _rows(ai_on) == before
    assert ai_on.list_files(LOCAL_USER, "ws") == []  # the store is fine afterwards


def test_a_nul_in_a_group_committed_save_fails_that_save_alone(ai_on: MemoryService) -> None:
    """Inside a group commit the refused Save rolls back in its own savepoint; the next one lands."""
    with pytest.raises(InvalidInput):
        ai_on.put_file(NUL, "ws", "notes/a.md", _blob("ws", "notes/a.md"), 0)
    assert ai_on.put_file(LOCAL_USER, "ws", "notes/a.md", _blob("ws", "notes/a.md"), 0).version == 1


@pytest.fixture
def http(ai_on: MemoryService) -> Iterator[httpx.Client]:
    token = ai_on.accounts.create_token(LOCAL_USER)[1]
    with asgi_client(create_app(ai_on)) as client:
        client.headers["Authorization"] = f"Bearer {token}"
        yield client


@pytest.mark.parametrize(
    "method, url",
    [
        ("GET", "/api/v1/workspaces/a%00b/files"),
        ("GET", f"/api/v1/workspaces/a%00b/files/{MEMORY_PATH}"),
        ("PUT", "/api/v1/workspaces/a%00b/files/notes/a.md"),
        ("GET", "/api/v1/workspaces/a%00b/memory/policy"),
        ("PUT", "/api/v1/workspaces/ws/memory/proposals/a%00b"),
    ],
)
def test_over_http_a_nul_is_a_422_in_the_one_error_shape(http: httpx.Client, method: str, url: str) -> None:
    body = {"ciphertext": base64.b64encode(_blob("ws", "notes/a.md")).decode()}
    if url.endswith("proposals/a%00b"):
        body = {"status": "dismissed"}
    answer = http.request(method, url, json=body if method == "PUT" else None, headers={"X-Base-Version": "0"})
    assert answer.status_code == 422, answer.text
    assert answer.json() == {"error": "invalid_input", "message": NUL_IN_TEXT}
