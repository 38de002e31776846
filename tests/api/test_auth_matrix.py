"""Every people's route × every way of not being allowed in.

No token, a malformed header, an unknown or a revoked token: 401. A valid
token of someone who is not a member: 404, byte for byte the answer for a
workspace that does not exist. None of these answers names anything of the
workspace (its id, its owner, its paths, its ciphertext), and none changes it.
The route table is checked against the OpenAPI schema, so a new route cannot
join the API without joining this matrix.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from memframe.api import create_app
from memframe.core.types import MEMORY_PATH
from memframe.service import MemoryService
from tests.support.remote_kinds import asgi_client
from tests.support.stand_in import stand_in

pytestmark = pytest.mark.access

SECRET_WS = "atlantis-plans"
OWNER = "olivia-owner"
SECRET_FILE = "plans/harbour-secret.md"
CIPHERTEXT = stand_in(40, fill=0x5A)
SECRETS = (SECRET_WS, "atlantis", OWNER, "harbour", base64.b64encode(CIPHERTEXT).decode()[:16])

PUT_BODY = {"ciphertext": base64.b64encode(stand_in(2, fill=1)).decode()}


@dataclass(frozen=True)
class Call:
    method: str
    url: Callable[[str], str]
    headers: dict[str, str]
    json: Any = None


#: (method, OpenAPI path) → how to call it against a workspace id.
ROUTES: dict[tuple[str, str], Call] = {
    ("get", "/api/v1/workspaces/{workspace_id}/files"): Call("GET", lambda w: f"/api/v1/workspaces/{w}/files", {}),
    ("get", "/api/v1/workspaces/{workspace_id}/files/{path}"): Call(
        "GET", lambda w: f"/api/v1/workspaces/{w}/files/{SECRET_FILE}", {}
    ),
    ("put", "/api/v1/workspaces/{workspace_id}/files/{path}"): Call(
        "PUT", lambda w: f"/api/v1/workspaces/{w}/files/{SECRET_FILE}", {"X-Base-Version": "1"}, PUT_BODY
    ),
    ("delete", "/api/v1/workspaces/{workspace_id}/files/{path}"): Call(
        "DELETE", lambda w: f"/api/v1/workspaces/{w}/files/{SECRET_FILE}", {"X-Base-Version": "1"}
    ),
    ("get", "/api/v1/workspaces/{workspace_id}/history/{path}"): Call(
        "GET", lambda w: f"/api/v1/workspaces/{w}/history/{SECRET_FILE}", {}
    ),
    ("get", "/api/v1/workspaces/{workspace_id}/revisions/{version}/{path}"): Call(
        "GET", lambda w: f"/api/v1/workspaces/{w}/revisions/1/{SECRET_FILE}", {}
    ),
    ("get", "/api/v1/workspaces/{workspace_id}/revision-runs/{path}"): Call(
        "GET", lambda w: f"/api/v1/workspaces/{w}/revision-runs/{SECRET_FILE}?first=1&last=1", {}
    ),
    ("get", "/api/v1/workspaces/{workspace_id}/memory/policy"): Call(
        "GET", lambda w: f"/api/v1/workspaces/{w}/memory/policy", {}
    ),
    ("put", "/api/v1/workspaces/{workspace_id}/memory/policy"): Call(
        "PUT", lambda w: f"/api/v1/workspaces/{w}/memory/policy", {}, {"mode": "off", "expectedRevision": 0}
    ),
    # the Assistant, for people (conversations are named after the workspace in this matrix)
    ("get", "/api/v1/workspaces/{workspace_id}/ai"): Call("GET", lambda w: f"/api/v1/workspaces/{w}/ai", {}),
    ("put", "/api/v1/workspaces/{workspace_id}/ai"): Call(
        "PUT", lambda w: f"/api/v1/workspaces/{w}/ai", {}, {"enabled": True}
    ),
    ("get", "/api/v1/workspaces/{workspace_id}/key-check"): Call(
        "GET", lambda w: f"/api/v1/workspaces/{w}/key-check", {}
    ),
    ("put", "/api/v1/workspaces/{workspace_id}/key-check"): Call(
        "PUT", lambda w: f"/api/v1/workspaces/{w}/key-check", {}, {"keyCheck": "0" * 64}
    ),
    ("post", "/api/v1/workspaces/{workspace_id}/key-sessions"): Call(
        "POST", lambda w: f"/api/v1/workspaces/{w}/key-sessions", {}, {"key": base64.b64encode(bytes(32)).decode()}
    ),
    # forgetting: key rotation
    ("get", "/api/v1/workspaces/{workspace_id}/sealed-records"): Call(
        "GET", lambda w: f"/api/v1/workspaces/{w}/sealed-records", {}
    ),
    ("get", "/api/v1/workspaces/{workspace_id}/key-rotation"): Call(
        "GET", lambda w: f"/api/v1/workspaces/{w}/key-rotation", {}
    ),
    ("post", "/api/v1/workspaces/{workspace_id}/key-rotations"): Call(
        "POST",
        lambda w: f"/api/v1/workspaces/{w}/key-rotations",
        {},
        {
            "oldKeyCheck": "f" * 64,
            "newKeyCheck": "1" * 64,
            "heads": {},
            "versions": [],
            "messages": [],
            "proposals": [],
            "sealedRecord": base64.b64encode(bytes(73)).decode(),
        },
    ),
    ("post", "/api/v1/workspaces/{workspace_id}/key-rotation-uploads"): Call(
        "POST", lambda w: f"/api/v1/workspaces/{w}/key-rotation-uploads", {}
    ),
    ("post", "/api/v1/workspaces/{workspace_id}/key-rotation-uploads/{upload_id}/parts"): Call(
        "POST", lambda w: f"/api/v1/workspaces/{w}/key-rotation-uploads/rku-{w}/parts", {}, {"versions": []}
    ),
    ("delete", "/api/v1/automation/key-sessions/{session_id}"): Call(
        "DELETE", lambda w: f"/api/v1/automation/key-sessions/ks-{w}", {}
    ),
    ("post", "/api/v1/agents/assistant/{conversation_id}/messages"): Call(
        "POST",
        lambda w: f"/api/v1/agents/assistant/conv-{w}/messages",
        {"Idempotency-Key": "k1"},
        {"workspace": SECRET_WS, "text": "hello"},
    ),
    ("get", "/api/v1/agents/assistant/{conversation_id}/memory-receipts"): Call(
        "GET", lambda w: f"/api/v1/agents/assistant/conv-{w}/memory-receipts", {}
    ),
    ("get", "/api/v1/agents/assistant/{conversation_id}/transcript"): Call(
        "GET", lambda w: f"/api/v1/agents/assistant/conv-{w}/transcript", {}
    ),
    ("get", "/api/v1/workspaces/{workspace_id}/memory/proposals"): Call(
        "GET", lambda w: f"/api/v1/workspaces/{w}/memory/proposals", {}
    ),
    ("get", "/api/v1/workspaces/{workspace_id}/memory/capture-origins"): Call(
        "GET", lambda w: f"/api/v1/workspaces/{w}/memory/capture-origins", {}
    ),
    ("put", "/api/v1/workspaces/{workspace_id}/memory/proposals/{proposal_id}"): Call(
        "PUT", lambda w: f"/api/v1/workspaces/{w}/memory/proposals/prop_x", {}, {"status": "dismissed"}
    ),
}
#: What the owner's well-formed call may answer besides 200 (the matrix's data is not real ciphertext).
OWNER_ALSO = {
    ("post", "/api/v1/workspaces/{workspace_id}/key-sessions"): 422,  # the key cannot open the fake memory
    ("put", "/api/v1/workspaces/{workspace_id}/key-check"): 422,  # another key check is already there
    ("post", "/api/v1/workspaces/{workspace_id}/key-rotations"): 422,  # not the workspace's key check
    ("post", "/api/v1/workspaces/{workspace_id}/key-rotation-uploads/{upload_id}/parts"): 404,  # no such upload
    ("delete", "/api/v1/automation/key-sessions/{session_id}"): 404,
    ("post", "/api/v1/agents/assistant/{conversation_id}/messages"): 409,  # workspace AI is off
    ("put", "/api/v1/workspaces/{workspace_id}/memory/proposals/{proposal_id}"): 404,
}
_AUTO = "/api/v1/automation/workspaces/{w}"
#: Automation routes: only a turn's delivery credential opens them; a person's token never does.
AUTOMATION: dict[tuple[str, str], Call] = {
    ("get", "/api/v1/automation/workspaces/{workspace_id}/memory"): Call(
        "GET", lambda w: f"{_AUTO.format(w=w)}/memory", {}
    ),
    ("put", "/api/v1/automation/workspaces/{workspace_id}/memory"): Call(
        "PUT",
        lambda w: f"{_AUTO.format(w=w)}/memory",
        {"Idempotency-Key": "memory:x"},
        {"edits": [{"op": "add", "line": "- x"}], "expectedVersion": 1},
    ),
    ("post", "/api/v1/automation/workspaces/{workspace_id}/memory/proposals"): Call(
        "POST",
        lambda w: f"{_AUTO.format(w=w)}/memory/proposals",
        {},
        {"edits": [{"op": "add", "line": "- x"}], "baseVersion": 1, "reason": "read_only"},
    ),
    ("get", "/api/v1/automation/workspaces/{workspace_id}/transcript"): Call(
        "GET", lambda w: f"{_AUTO.format(w=w)}/transcript", {}
    ),
    ("post", "/api/v1/automation/workspaces/{workspace_id}/transcript"): Call(
        "POST", lambda w: f"{_AUTO.format(w=w)}/transcript", {}, {"role": "user", "content": "x"}
    ),
    ("get", "/api/v1/automation/workspaces/{workspace_id}/documents"): Call(
        "GET", lambda w: f"{_AUTO.format(w=w)}/documents", {}
    ),
    ("get", "/api/v1/automation/workspaces/{workspace_id}/documents-search"): Call(
        "GET", lambda w: f"{_AUTO.format(w=w)}/documents-search?q=harbour", {}
    ),
    ("get", "/api/v1/automation/workspaces/{workspace_id}/documents/{path}"): Call(
        "GET", lambda w: f"{_AUTO.format(w=w)}/documents/{SECRET_FILE}", {}
    ),
    ("put", "/api/v1/automation/workspaces/{workspace_id}/documents/{path}"): Call(
        "PUT", lambda w: f"{_AUTO.format(w=w)}/documents/{SECRET_FILE}", {"X-Base-Version": "1"}, {"text": "x"}
    ),
    ("delete", "/api/v1/automation/workspaces/{workspace_id}/documents/{path}"): Call(
        "DELETE", lambda w: f"{_AUTO.format(w=w)}/documents/{SECRET_FILE}", {"X-Base-Version": "1"}
    ),
    ("post", "/api/v1/automation/workspaces/{workspace_id}/documents/move"): Call(
        "POST",
        lambda w: f"{_AUTO.format(w=w)}/documents/move",
        {},
        {"source": SECRET_FILE, "target": "b.md", "baseVersion": 1},
    ),
    ("post", "/api/v1/automation/workspaces/{workspace_id}/documents/restore"): Call(
        "POST", lambda w: f"{_AUTO.format(w=w)}/documents/restore", {}, {"path": SECRET_FILE, "baseVersion": 1}
    ),
}
#: Routes that take no workspace: only the 401 cases apply.
UNSCOPED: dict[tuple[str, str], Call] = {
    ("get", "/api/v1/workspaces"): Call("GET", lambda w: "/api/v1/workspaces", {}),
}
PUBLIC = {("get", "/healthz")}


@dataclass
class Matrix:
    service: MemoryService
    client: httpx.Client
    tokens: dict[str, str]

    def call(self, call: Call, workspace: str, auth: str | None) -> httpx.Response:
        headers = dict(call.headers)
        if auth is not None:
            headers["Authorization"] = auth
        return self.client.request(call.method, call.url(workspace), headers=headers, json=call.json)

    def state(self) -> tuple[Any, ...]:
        """Everything a write could change, to prove a refused call changed nothing."""
        s = self.service
        return (
            s.list_versions(OWNER, SECRET_WS, SECRET_FILE),
            s.list_files(OWNER, SECRET_WS),
            s.get_policy(OWNER, SECRET_WS),
        )


@pytest.fixture
def matrix(service: MemoryService) -> Iterator[Matrix]:
    accounts = service.accounts
    for user in (OWNER, "mallory"):
        accounts.add_user(user)
    accounts.create_workspace(SECRET_WS, OWNER)
    service.put_file(OWNER, SECRET_WS, SECRET_FILE, CIPHERTEXT, 0)
    service.put_file(OWNER, SECRET_WS, MEMORY_PATH, CIPHERTEXT, 0)
    revoked_id, revoked = accounts.create_token(OWNER, "old laptop")
    accounts.revoke_token(revoked_id)
    accounts.add_member(SECRET_WS, "mallory")  # create the owner's conversation, then leave again
    service.assistant.set_ai(OWNER, SECRET_WS, True)
    service.assistant.admit(
        OWNER, SECRET_WS, f"conv-{SECRET_WS}", idempotency_key="k0", key_session_id=None, memory_state=None
    )
    service.assistant.set_ai(OWNER, SECRET_WS, False)
    accounts.remove_member(SECRET_WS, "mallory")
    tokens = {
        "owner": accounts.create_token(OWNER)[1],
        "outsider": accounts.create_token("mallory")[1],
        "revoked": revoked,
    }
    with asgi_client(create_app(service)) as client:
        yield Matrix(service, client, tokens)


def test_the_matrix_covers_every_route(matrix: Matrix) -> None:
    spec = matrix.client.get("/openapi.json").json()
    operations = {(m, p) for p, item in spec["paths"].items() for m in item}
    assert operations == set(ROUTES) | set(UNSCOPED) | set(AUTOMATION) | PUBLIC


def test_the_owner_gets_in_everywhere(matrix: Matrix) -> None:
    """The control: the matrix's calls are well-formed, so a 401/404 below is about access alone."""
    for key, call in {**ROUTES, **UNSCOPED}.items():
        response = matrix.call(call, SECRET_WS, f"Bearer {matrix.tokens['owner']}")
        # the PUT moves the file to version 2, so the DELETE after it is a (well-formed) conflict
        allowed = {200, OWNER_ALSO.get(key, 200)} | ({409} if call.method == "DELETE" else set())
        assert response.status_code in allowed, (key, response.text)


UNAUTHENTICATED = {
    "no header": None,
    "empty header": "",
    "bearer without token": "Bearer",
    "basic scheme": "Basic b2xpdmlhOnB3",
    "unknown token": "Bearer mf_thisTokenWasNeverIssued",
    "revoked token": "revoked",
}


@pytest.mark.parametrize("case", list(UNAUTHENTICATED))
def test_without_a_valid_token_every_route_is_401_and_says_nothing(matrix: Matrix, case: str) -> None:
    auth = UNAUTHENTICATED[case]
    if auth == "revoked":
        auth = f"Bearer {matrix.tokens['revoked']}"
    before = matrix.state()
    for key, call in {**ROUTES, **UNSCOPED}.items():
        real = matrix.call(call, SECRET_WS, auth)
        unknown = matrix.call(call, "no-such-workspace", auth)
        assert real.status_code == 401, (key, real.text)
        assert real.json()["error"] == "unauthorized"
        assert real.headers["www-authenticate"] == "Bearer"
        assert real.content == unknown.content, key
        assert not any(secret in real.text for secret in SECRETS), (key, real.text)
    assert matrix.state() == before


def test_a_non_member_sees_exactly_what_an_unknown_workspace_shows(matrix: Matrix) -> None:
    auth = f"Bearer {matrix.tokens['outsider']}"
    before = matrix.state()
    for key, call in ROUTES.items():
        real = matrix.call(call, SECRET_WS, auth)
        unknown = matrix.call(call, "no-such-workspace", auth)
        assert real.status_code == 404, (key, real.text)
        assert real.json()["error"] == "not_found"
        assert real.content == unknown.content, key
        assert _headers(real) == _headers(unknown), key
        assert not any(secret in real.text for secret in SECRETS), (key, real.text)
    assert matrix.state() == before
    listing = matrix.client.get("/api/v1/workspaces", headers={"Authorization": auth})
    assert listing.json() == {"user": "mallory", "workspaces": []}


def test_removed_member_and_revoked_token_take_effect_on_the_next_request(matrix: Matrix) -> None:
    accounts = matrix.service.accounts
    accounts.add_member(SECRET_WS, "mallory")
    call = ROUTES[("get", "/api/v1/workspaces/{workspace_id}/memory/policy")]
    auth = f"Bearer {matrix.tokens['outsider']}"
    assert matrix.call(call, SECRET_WS, auth).status_code == 200
    accounts.remove_member(SECRET_WS, "mallory")
    assert matrix.call(call, SECRET_WS, auth).status_code == 404
    accounts.add_member(SECRET_WS, "mallory")
    for token in accounts.tokens("mallory"):
        accounts.revoke_token(token.id)
    assert matrix.call(call, SECRET_WS, auth).status_code == 401


@pytest.mark.parametrize("case", ["owner token", "outsider token", "revoked token", "forged", "none"])
def test_automation_opens_only_to_a_delivery_credential(matrix: Matrix, case: str) -> None:
    auth = {
        "owner token": f"Bearer {matrix.tokens['owner']}",
        "outsider token": f"Bearer {matrix.tokens['outsider']}",
        "revoked token": f"Bearer {matrix.tokens['revoked']}",
        "forged": "Bearer cred_adm_0.nonce",
        "none": None,
    }[case]
    before = matrix.state()
    for key, call in AUTOMATION.items():
        real = matrix.call(call, SECRET_WS, auth)
        unknown = matrix.call(call, "no-such-workspace", auth)
        assert real.status_code == 401, (key, real.text)
        assert real.content == unknown.content, key
        assert not any(secret in real.text for secret in SECRETS), (key, real.text)
    assert matrix.state() == before


def _headers(response: httpx.Response) -> list[tuple[str, str]]:
    return sorted((k, v) for k, v in response.headers.items() if k != "date")
