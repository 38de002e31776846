"""The HTTP surface itself: status codes, JSON shapes, limits and the OpenAPI schema.

Every failure a client can provoke answers in the one error shape
`{"error": CODE, "message": …}` with the right status, and never a 500.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.types import Message

from memframe import sealing
from memframe.api import create_app
from memframe.api.errors import MAX_BODY_BYTES
from memframe.core.types import MEMORY_PATH, Policy
from memframe.service import MemoryService
from memframe.service.files import MAX_DOCUMENT_BYTES
from tests.support.remote_kinds import asgi_client
from tests.support.stand_in import stand_in

WS = "/api/v1/workspaces/ws"
MEMORY = f"{WS}/files/{MEMORY_PATH}"
VERSION_KEYS = {
    "version",
    "createdAt",
    "author",
    "actor",
    "operation",
    "size",
    "contentHash",
    "restoredFrom",
    "sourceNote",
}


@dataclass
class Api:
    service: MemoryService
    app: FastAPI
    client: httpx.Client

    def put(self, url: str, blob: bytes, base: int | str, **headers: str) -> httpx.Response:
        body = {"ciphertext": base64.b64encode(blob).decode()}
        return self.client.put(url, json=body, headers={"X-Base-Version": str(base), **headers})


@pytest.fixture
def api(service: MemoryService) -> Iterator[Api]:
    service.accounts.add_user("alice")
    service.accounts.add_member("ws", "alice")
    token = service.accounts.create_token("alice")[1]
    app = create_app(service)
    with asgi_client(app) as client:
        client.headers["Authorization"] = f"Bearer {token}"
        yield Api(service, app, client)


def sealed(size: int = 5) -> bytes:
    """Stand-in ciphertext: the server cannot tell it from a real one, and must not try."""
    return stand_in(size)


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    payload = response.json()
    assert payload["error"] == code
    assert isinstance(payload["message"], str) and payload["message"]
    assert "detail" not in payload
    return payload


# --- the happy paths and their shapes ------------------------------------------------------


def test_write_read_history_and_revision_shapes(api: Api) -> None:
    first = api.put(MEMORY, sealed(3), 0)
    assert first.status_code == 200
    assert set(first.json()) == VERSION_KEYS
    assert first.json() | {"createdAt": 0} == {
        "version": 1,
        "createdAt": 0,
        "author": "person",
        "actor": "alice",
        "operation": "save",
        "size": 3,
        "contentHash": first.json()["contentHash"],
        "restoredFrom": None,
        "sourceNote": None,
    }
    api.put(MEMORY, sealed(4), 1)
    undo = api.client.put(
        MEMORY,
        json={"ciphertext": base64.b64encode(sealed(3)).decode(), "restoredFrom": 1},
        headers={"X-Base-Version": "2"},
    )
    assert (undo.json()["operation"], undo.json()["restoredFrom"]) == ("undo", 1)

    head = api.client.get(MEMORY).json()
    assert set(head) == VERSION_KEYS | {"ciphertext"}
    assert base64.b64decode(head["ciphertext"]) == sealed(3) and head["version"] == 3

    page = api.client.get(f"{WS}/history/{MEMORY_PATH}", params={"limit": 2}).json()
    assert [v["version"] for v in page["versions"]] == [3, 2] and page["nextBefore"] == 2
    rest = api.client.get(f"{WS}/history/{MEMORY_PATH}", params={"limit": 2, "before": 2}).json()
    assert [v["version"] for v in rest["versions"]] == [1] and rest["nextBefore"] is None
    assert all("ciphertext" not in v for v in page["versions"])

    one = api.client.get(f"{WS}/revisions/2/{MEMORY_PATH}").json()
    assert one["version"] == 2 and base64.b64decode(one["ciphertext"]) == sealed(4)

    listing = api.client.get(f"{WS}/files").json()
    assert listing == {"files": [{"path": MEMORY_PATH, "version": 3, "deleted": False}]}


def test_a_save_carries_a_sealed_source_note_and_the_history_returns_it(api: Api) -> None:
    note = sealing.seal_source(sealing.new_key(), "CLAUDE.md", workspace_id="ws", path=MEMORY_PATH, version=1)
    body = {"ciphertext": base64.b64encode(sealed(3)).decode(), "sourceNote": "not base64!"}
    assert_error(api.client.put(MEMORY, json=body, headers={"X-Base-Version": "0"}), 422, "invalid_input")
    body["sourceNote"] = base64.b64encode(b"CLAUDE.md").decode()  # not sealed: refused, nothing written
    assert_error(api.client.put(MEMORY, json=body, headers={"X-Base-Version": "0"}), 422, "invalid_input")
    body["sourceNote"] = base64.b64encode(note).decode()
    saved = api.client.put(MEMORY, json=body, headers={"X-Base-Version": "0"}).json()
    assert saved["version"] == 1 and base64.b64decode(saved["sourceNote"]) == note
    assert api.put(MEMORY, sealed(4), 1).json()["sourceNote"] is None
    page = api.client.get(f"{WS}/history/{MEMORY_PATH}").json()["versions"]
    assert [v["sourceNote"] for v in page] == [None, body["sourceNote"]]
    assert api.client.get(f"{WS}/revisions/1/{MEMORY_PATH}").json()["sourceNote"] == body["sourceNote"]


def test_clear_and_policy_shapes(api: Api) -> None:
    api.put(MEMORY, sealed(3), 0)
    policy = api.client.get(f"{WS}/memory/policy").json()
    assert policy == {"mode": "read_only", "revision": 0, "clearGeneration": 0}
    changed = api.client.put(f"{WS}/memory/policy", json={"mode": "auto", "expectedRevision": 0})
    assert changed.json() == {"mode": "auto", "revision": 1, "clearGeneration": 0}
    cleared = api.put(MEMORY, sealed(0), 1, **{"X-Memory-Clear": "1"})
    assert (cleared.json()["operation"], cleared.json()["size"]) == ("clear", 0)
    assert api.client.get(f"{WS}/memory/policy").json() == {"mode": "auto", "revision": 1, "clearGeneration": 1}


def test_delete_is_a_tombstone_and_revive_needs_the_header(api: Api) -> None:
    api.put(MEMORY, sealed(), 0)
    gone = api.client.delete(MEMORY, headers={"X-Base-Version": "1"})
    assert gone.json()["operation"] == "delete" and gone.json()["version"] == 2
    assert api.client.get(MEMORY).json()["ciphertext"] is None
    refused = assert_error(api.put(MEMORY, sealed(), 2), 409, "document_deleted")
    assert refused["current_version"] == 2
    assert api.put(MEMORY, sealed(), 2, **{"X-Revive": "1"}).json()["version"] == 3


def test_workspaces_and_healthz(api: Api) -> None:
    assert api.client.get("/api/v1/workspaces").json() == {"user": "alice", "workspaces": [{"id": "ws"}]}
    health = api.client.get("/healthz", headers={"Authorization": ""})
    assert health.status_code == 200 and health.json()["status"] == "ok"


# --- every error, in the one shape -----------------------------------------------------------


def test_never_created_file_is_its_own_404(api: Api) -> None:
    payload = assert_error(api.client.get(MEMORY), 404, "file_not_found")
    assert "version 0" in payload["message"]
    assert_error(api.client.get(f"{WS}/revisions/4/{MEMORY_PATH}"), 404, "not_found")


def test_conflicts_name_what_the_server_holds(api: Api) -> None:
    api.put(MEMORY, sealed(), 0)
    api.put(MEMORY, sealed(), 1)
    stale = assert_error(api.put(MEMORY, sealed(), 1), 409, "version_conflict")
    assert stale["current_version"] == 2
    assert assert_error(api.put(MEMORY, sealed(), 0), 409, "version_conflict")["current_version"] == 2
    api.client.put(f"{WS}/memory/policy", json={"mode": "off", "expectedRevision": 0})
    policy = assert_error(
        api.client.put(f"{WS}/memory/policy", json={"mode": "auto", "expectedRevision": 0}), 409, "policy_conflict"
    )
    assert (policy["current_revision"], policy["current_mode"]) == (1, "off")
    assert len(api.service.list_versions("alice", "ws", MEMORY_PATH)) == 2


def test_unauthorized_says_bearer(api: Api) -> None:
    response = api.client.get(f"{WS}/memory/policy", headers={"Authorization": ""})
    assert_error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"


BAD_PUTS: list[tuple[str, dict[str, str], Any]] = [
    ("bad base64 character", {"X-Base-Version": "0"}, {"ciphertext": "AA*A"}),
    ("unpadded base64", {"X-Base-Version": "0"}, {"ciphertext": "AAA"}),
    ("non-ASCII base64", {"X-Base-Version": "0"}, {"ciphertext": "ÅÅÅÅ"}),
    ("ciphertext not a string", {"X-Base-Version": "0"}, {"ciphertext": 12}),
    ("no ciphertext", {"X-Base-Version": "0"}, {}),
    ("a plaintext field", {"X-Base-Version": "0"}, {"ciphertext": "AAAA", "plaintext": "hello"}),
    ("body is a list", {"X-Base-Version": "0"}, ["AAAA"]),
    ("negative base version", {"X-Base-Version": "-1"}, {"ciphertext": "AAAA"}),
    ("base version not a number", {"X-Base-Version": "two"}, {"ciphertext": "AAAA"}),
    ("missing base version", {}, {"ciphertext": "AAAA"}),
    ("huge base version", {"X-Base-Version": str(10**30)}, {"ciphertext": "AAAA"}),
    ("negative restoredFrom", {"X-Base-Version": "0"}, {"ciphertext": "AAAA", "restoredFrom": -3}),
    ("huge restoredFrom", {"X-Base-Version": "0"}, {"ciphertext": "AAAA", "restoredFrom": 10**30}),
    ("clear header not a flag", {"X-Base-Version": "0", "X-Memory-Clear": "maybe"}, {"ciphertext": "AAAA"}),
]


@pytest.mark.parametrize(("why", "headers", "body"), BAD_PUTS, ids=[b[0] for b in BAD_PUTS])
def test_malformed_writes_are_422_and_echo_nothing(api: Api, why: str, headers: dict[str, str], body: Any) -> None:
    response = api.client.put(MEMORY, json=body, headers=headers)
    payload = assert_error(response, 422, "invalid_input")
    assert payload["errors"] and all(set(e) == {"where", "problem"} for e in payload["errors"])
    assert "hello" not in response.text and "ÅÅÅÅ" not in response.text
    assert api.service.get_file("alice", "ws", MEMORY_PATH) is None


def test_json_that_does_not_parse_is_422(api: Api) -> None:
    response = api.client.put(
        MEMORY, content=b'{"ciphertext": ', headers={"X-Base-Version": "0", "Content-Type": "application/json"}
    )
    assert assert_error(response, 422, "invalid_input")["message"].startswith("body: not valid JSON")


@pytest.mark.parametrize(
    ("url", "params"),
    [
        (f"{WS}/revisions/-1/{MEMORY_PATH}", {}),
        (f"{WS}/revisions/one/{MEMORY_PATH}", {}),
        (f"{WS}/revisions/{10**30}/{MEMORY_PATH}", {}),
        (f"{WS}/history/{MEMORY_PATH}", {"limit": 0}),
        (f"{WS}/history/{MEMORY_PATH}", {"limit": 1001}),
        (f"{WS}/history/{MEMORY_PATH}", {"before": -1}),
        (f"{WS}/history/{MEMORY_PATH}", {"before": 10**30}),
        (f"{WS}/files/a/%2e%2e/%2e%2e/etc", {}),
        (f"{WS}/files/a%00b", {}),
        (f"{WS}/files/", {}),
    ],
)
def test_malformed_reads_are_422(api: Api, url: str, params: dict[str, Any]) -> None:
    assert_error(api.client.get(url, params=params), 422, "invalid_input")


@pytest.mark.parametrize(
    "body",
    [
        {"mode": "sometimes", "expectedRevision": 0},
        {"mode": "auto"},
        {"mode": "auto", "expectedRevision": -1},
        {"mode": "auto", "expectedRevision": "0x"},
        {"mode": None, "expectedRevision": 0},
    ],
)
def test_malformed_policy_is_422(api: Api, body: dict[str, Any]) -> None:
    assert_error(api.client.put(f"{WS}/memory/policy", json=body), 422, "invalid_input")
    assert api.service.get_policy("alice", "ws").revision == 0


def test_clear_rules_are_the_services(api: Api) -> None:
    api.client.put(f"{WS}/files/notes/a.md", json={"ciphertext": "AAAA"}, headers={"X-Base-Version": "0"})
    not_memory = api.put(f"{WS}/files/notes/a.md", sealed(), 1, **{"X-Memory-Clear": "1"})
    assert "memory document" in assert_error(not_memory, 422, "invalid_input")["message"]
    assert_error(api.put(MEMORY, sealed(4), 0, **{"X-Memory-Clear": "1"}), 422, "invalid_input")


def test_unknown_route_and_wrong_method_keep_the_shape(api: Api) -> None:
    assert "no API route" in assert_error(api.client.get("/api/v1/nothing"), 404, "not_found")["message"]
    wrong = api.client.post(f"{WS}/memory/policy")
    assert_error(wrong, 405, "method_not_allowed")
    assert "allow" in wrong.headers


# --- body limits -----------------------------------------------------------------------------


def test_declared_oversize_body_is_refused_before_it_is_read(api: Api) -> None:
    async def never_read() -> Message:
        raise AssertionError("the body was read")

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "PUT",
        "scheme": "http",
        "path": MEMORY,
        "raw_path": MEMORY.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-length", str(MAX_BODY_BYTES + 1).encode()), (b"x-base-version", b"0")],
        "client": ("127.0.0.1", 1),
        "server": ("memframe.test", 80),
    }
    asyncio.run(api.app(scope, never_read, send))
    assert sent[0]["status"] == 413
    assert json.loads(sent[1]["body"])["error"] == "too_large"


def test_streamed_oversize_body_is_refused_while_streaming(api: Api) -> None:
    chunks_sent = 0

    def chunks() -> Iterator[bytes]:
        nonlocal chunks_sent
        for _ in range(64):
            chunks_sent += 1
            yield b'{"ciphertext": "' if chunks_sent == 1 else b"A" * 65536

    response = api.client.put(MEMORY, content=chunks(), headers={"X-Base-Version": "0"})
    assert_error(response, 413, "too_large")
    assert api.service.get_file("alice", "ws", MEMORY_PATH) is None


def test_document_over_the_services_bound_is_413(api: Api) -> None:
    response = api.put(MEMORY, b"\x01" * (MAX_DOCUMENT_BYTES + 1), 0)
    assert_error(response, 413, "too_large")


# --- nothing a client sends is a 500 ---------------------------------------------------------


def test_internal_errors_are_bare_500_and_logged_without_bodies(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the disk caught fire")

    monkeypatch.setattr(api.service, "put_file_async", broken)
    with caplog.at_level(logging.ERROR, logger="memframe.api"):
        response = api.client.put(MEMORY, json={"ciphertext": "c2VjcmV0Ym9keQ=="}, headers={"X-Base-Version": "0"})
    assert response.status_code == 500
    assert response.json() == {"error": "internal", "message": "The server failed unexpectedly; see its log."}
    assert [r.getMessage() for r in caplog.records] == [f"internal error answering PUT {MEMORY}"]
    logged = caplog.text
    assert "c2VjcmV0Ym9keQ" not in logged and "Bearer" not in logged and "mf_" not in logged


def test_a_validation_bug_is_logged_without_the_data_it_quotes(
    api: Api, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """pydantic's error text quotes the offending value; the log keeps only type and frames."""
    monkeypatch.setattr(api.service, "get_policy", lambda *a: Policy("c2VjcmV0-data", 0, 0))  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, logger="memframe.api"):
        response = api.client.get(f"{WS}/memory/policy")
    assert response.status_code == 500 and response.json()["error"] == "internal"
    assert "ValidationError" in caplog.text and "c2VjcmV0" not in caplog.text


@pytest.mark.fuzz
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    base=st.one_of(st.text(max_size=12), st.integers().map(str)),
    clear=st.sampled_from(["", "1", "0", "true", "x"]),
    body=st.one_of(
        st.dictionaries(
            st.sampled_from(["ciphertext", "restoredFrom", "mode"]),
            st.one_of(st.text(max_size=20), st.integers(), st.none()),
            max_size=3,
        ),
        st.text(max_size=20),
    ),
    path=st.text(max_size=20),
)
def test_no_put_input_is_a_500(api: Api, base: str, clear: str, body: Any, path: str) -> None:
    headers = {"X-Base-Version": "".join(c for c in base if " " <= c <= "~").strip() or "0"}
    if clear:
        headers["X-Memory-Clear"] = clear
    url = f"{WS}/files/" + quote(path, safe="/")
    response = api.client.put(url, json=body, headers=headers)
    # 404: a path with a control character matches no route at all; 404 or 405: a path of dot
    # segments ("a/..", "."), which the client resolves away (RFC 3986) to another route
    assert response.status_code in (200, 404, 405, 409, 413, 422), response.text
    assert set(response.json()) >= ({"version"} if response.status_code == 200 else {"error", "message"})


# --- OpenAPI ---------------------------------------------------------------------------------

EXPECTED_OPERATIONS = {
    ("get", "/healthz"),
    ("get", "/api/v1/workspaces"),
    ("get", "/api/v1/workspaces/{workspace_id}/files"),
    ("get", "/api/v1/workspaces/{workspace_id}/key-check"),
    ("put", "/api/v1/workspaces/{workspace_id}/key-check"),
    ("get", "/api/v1/workspaces/{workspace_id}/sealed-records"),
    ("get", "/api/v1/workspaces/{workspace_id}/key-rotation"),
    ("post", "/api/v1/workspaces/{workspace_id}/key-rotations"),
    ("post", "/api/v1/workspaces/{workspace_id}/key-rotation-uploads"),
    ("post", "/api/v1/workspaces/{workspace_id}/key-rotation-uploads/{upload_id}/parts"),
    ("get", "/api/v1/workspaces/{workspace_id}/files/{path}"),
    ("put", "/api/v1/workspaces/{workspace_id}/files/{path}"),
    ("delete", "/api/v1/workspaces/{workspace_id}/files/{path}"),
    ("get", "/api/v1/workspaces/{workspace_id}/history/{path}"),
    ("get", "/api/v1/workspaces/{workspace_id}/revisions/{version}/{path}"),
    ("get", "/api/v1/workspaces/{workspace_id}/revision-runs/{path}"),
    ("get", "/api/v1/workspaces/{workspace_id}/memory/policy"),
    ("put", "/api/v1/workspaces/{workspace_id}/memory/policy"),
    # the Assistant, for people
    ("get", "/api/v1/workspaces/{workspace_id}/ai"),
    ("put", "/api/v1/workspaces/{workspace_id}/ai"),
    ("post", "/api/v1/workspaces/{workspace_id}/key-sessions"),
    ("delete", "/api/v1/automation/key-sessions/{session_id}"),
    ("post", "/api/v1/agents/assistant/{conversation_id}/messages"),
    ("get", "/api/v1/agents/assistant/{conversation_id}/memory-receipts"),
    ("get", "/api/v1/agents/assistant/{conversation_id}/transcript"),
    ("get", "/api/v1/workspaces/{workspace_id}/memory/proposals"),
    ("get", "/api/v1/workspaces/{workspace_id}/memory/capture-origins"),
    ("put", "/api/v1/workspaces/{workspace_id}/memory/proposals/{proposal_id}"),
    # automation, with a turn's delivery credential
    ("get", "/api/v1/automation/workspaces/{workspace_id}/memory"),
    ("put", "/api/v1/automation/workspaces/{workspace_id}/memory"),
    ("post", "/api/v1/automation/workspaces/{workspace_id}/memory/proposals"),
    ("get", "/api/v1/automation/workspaces/{workspace_id}/transcript"),
    ("post", "/api/v1/automation/workspaces/{workspace_id}/transcript"),
    ("get", "/api/v1/automation/workspaces/{workspace_id}/documents"),
    ("get", "/api/v1/automation/workspaces/{workspace_id}/documents-search"),
    ("get", "/api/v1/automation/workspaces/{workspace_id}/documents/{path}"),
    ("put", "/api/v1/automation/workspaces/{workspace_id}/documents/{path}"),
    ("delete", "/api/v1/automation/workspaces/{workspace_id}/documents/{path}"),
    ("post", "/api/v1/automation/workspaces/{workspace_id}/documents/move"),
    ("post", "/api/v1/automation/workspaces/{workspace_id}/documents/restore"),
}


def test_openapi_lists_every_route_with_headers_and_error_shape(api: Api) -> None:
    spec = api.client.get("/openapi.json", headers={"Authorization": ""}).json()
    operations = {(m, p): op for p, item in spec["paths"].items() for m, op in item.items()}
    assert set(operations) == EXPECTED_OPERATIONS

    def headers(op: dict[str, Any]) -> dict[str, bool]:
        return {p["name"]: p["required"] for p in op.get("parameters", []) if p["in"] == "header"}

    files = "/api/v1/workspaces/{workspace_id}/files/{path}"
    assert headers(operations[("put", files)]) == {"X-Base-Version": True, "X-Memory-Clear": False, "X-Revive": False}
    assert headers(operations[("delete", files)]) == {"X-Base-Version": True}
    put_body = operations[("put", files)]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert set(spec["components"]["schemas"][put_body.rsplit("/", 1)[-1]]["properties"]) == {
        "ciphertext",
        "restoredFrom",
        "sourceNote",
    }
    scheme = spec["components"]["securitySchemes"]["token"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    error_ref = "#/components/schemas/ErrorOut"
    for (method, path), op in operations.items():
        if path == "/healthz":
            assert "security" not in op
            continue
        assert op["security"] == [{"token": []}]
        people_workspace = "{workspace_id}" in path and "/automation/" not in path
        statuses = ["401", "404", "422"] if people_workspace else ["401"]
        versioned = any(part in path for part in ("/files/", "/policy", "/automation/workspaces/"))
        if method in ("put", "delete") and versioned:  # writes against a version or revision
            statuses.append("409")
        for status in statuses:
            assert op["responses"][status]["content"]["application/json"]["schema"]["$ref"] == error_ref
    assert "HTTPValidationError" not in spec["components"]["schemas"]


def test_a_put_whose_path_the_client_resolves_away_gets_the_route_it_reaches(api: Api) -> None:
    """A file path of dot segments never reaches the file route: the client resolves it (RFC 3986)
    before sending, and the route it lands on answers in one clear line (hypothesis found "a/..")."""
    for path, status in (("a/..", 405), (".", 405), ("..", 404)):
        response = api.client.put(f"{WS}/files/{path}", json={}, headers={"X-Base-Version": "0"})
        assert response.status_code == status, (path, response.text)
        assert set(response.json()) >= {"error", "message"}
