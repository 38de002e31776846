"""The automation routes over HTTP: recall and capture behind the fence, credentials, the namespace fence."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from memframe.core.types import Mode, RecallStatus
from memframe.service.admissions import Admission
from tests.assistant.conftest import Stage
from tests.assistant.test_documents import SPELLINGS
from tests.support.remote_kinds import PortalASGITransport, app_for

BASE = "http://memframe.test"


@pytest.fixture
def transport(stage: Stage) -> Iterator[PortalASGITransport]:
    t = PortalASGITransport(app_for(stage.service))
    yield t
    t.close()


@pytest.fixture
def http(transport: PortalASGITransport) -> Iterator[httpx.Client]:
    with httpx.Client(transport=transport, base_url=BASE) as client:
        yield client


def test_the_memory_routes_recall_capture_and_propose_behind_the_fence(stage: Stage, http: httpx.Client) -> None:
    """The automation memory routes end to end: what a runtime apart from the service would speak."""
    stage.person.save("# Memory\n- likes tea\n", 0)
    stage.set_mode(Mode.AUTO)
    root = "/api/v1/automation/workspaces/ws"
    edits = [{"op": "add", "line": "- likes scones"}]

    def capture(a: Admission, expected: int) -> httpx.Response:
        headers = {"Authorization": f"Bearer {a.credential}", "Idempotency-Key": f"memory:{a.id}"}
        headers["X-Key-Session"] = stage.key_session
        return http.put(f"{root}/memory", headers=headers, json={"edits": edits, "expectedVersion": expected})

    admitted = stage.admit()
    auth = {"Authorization": f"Bearer {admitted.credential}"}
    recall = http.get(f"{root}/memory", headers=auth)
    assert recall.json() == {"status": "provided", "revision": 1, "text": "# Memory\n- likes tea\n"}
    first = capture(admitted, 1)
    assert (first.status_code, first.json()) == (200, {"admissionId": admitted.id, "version": 2, "replayed": False})
    assert stage.person.load().text == "# Memory\n- likes tea\n- likes scones\n"
    assert capture(admitted, 1).json() == {"admissionId": admitted.id, "version": 2, "replayed": True}

    stage.set_mode(Mode.READ_ONLY)
    read_only = stage.admit()
    refused = capture(read_only, 2)
    assert (refused.status_code, refused.json()["error"]) == (409, "fence_refused")
    auth = {"Authorization": f"Bearer {read_only.credential}"}
    body = {"edits": [{"op": "add", "line": "- likes jam"}], "baseVersion": 2, "reason": "read_only"}
    proposal = http.post(f"{root}/memory/proposals", headers=auth, json=body)
    assert proposal.status_code == 200 and proposal.json()["status"] == "pending"

    stage.set_mode(Mode.AUTO)  # the admission was taken in Read only: the fence still refuses a commit
    assert http.get(f"{root}/memory", headers=auth).json()["status"] == RecallStatus.PROVIDED
    assert capture(read_only, 2).status_code == 409
    assert stage.person.load().text == "# Memory\n- likes tea\n- likes scones\n"


def test_automation_needs_a_delivery_credential(stage: Stage, http: httpx.Client) -> None:
    for headers in ({}, {"Authorization": "Bearer nonsense"}, {"Authorization": "Bearer cred_x.y"}):
        r = http.get("/api/v1/automation/workspaces/ws/memory", headers=headers)
        assert r.status_code == 401 and r.json()["error"] == "unauthorized"
    a = stage.admit()
    r = http.get("/api/v1/automation/workspaces/other/memory", headers={"Authorization": f"Bearer {a.credential}"})
    assert r.status_code == 401


def test_a_persons_token_is_not_a_delivery_credential(stage: Stage, http: httpx.Client) -> None:
    _, token = stage.service.accounts.create_token("local")
    r = http.get("/api/v1/automation/workspaces/ws/memory", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 401


@pytest.mark.parametrize("path", SPELLINGS)
def test_every_document_route_refuses_every_spelling(stage: Stage, http: httpx.Client, path: str) -> None:
    a = stage.admit()
    auth = {"Authorization": f"Bearer {a.credential}"}
    root = "/api/v1/automation/workspaces/ws"
    http.put(f"{root}/documents/ok.md", headers={**auth, "X-Base-Version": "0"}, json={"text": "fine"})
    encoded = quote(path, safe="/")
    answers = [
        http.put(f"{root}/documents/{encoded}", headers={**auth, "X-Base-Version": "0"}, json={"text": "x"}),
        http.delete(f"{root}/documents/{encoded}", headers={**auth, "X-Base-Version": "1"}),
        http.get(f"{root}/documents/{encoded}", headers=auth),
        http.post(f"{root}/documents/move", headers=auth, json={"source": path, "target": "t.md", "baseVersion": 1}),
        http.post(f"{root}/documents/move", headers=auth, json={"source": "ok.md", "target": path, "baseVersion": 1}),
        http.post(f"{root}/documents/restore", headers=auth, json={"path": path, "baseVersion": 1}),
    ]
    for r in answers:
        assert (r.status_code, r.json()["error"]) == (403, "MEMORY_NAMESPACE_RESERVED"), (path, r.request.url)
    listing = http.get(f"{root}/documents", headers=auth).json()
    assert listing == {"documents": [{"path": "ok.md", "version": 1}]}


def test_off_refuses_the_current_memory_read(stage: Stage, http: httpx.Client) -> None:
    stage.person.save("private\n", 0)
    stage.set_mode(Mode.OFF)
    a = stage.admit()
    r = http.get(
        "/api/v1/automation/workspaces/ws/memory",
        params={"purpose": "current"},
        headers={"Authorization": f"Bearer {a.credential}"},
    )
    assert r.status_code == 409 and "private" not in r.text


def test_a_lookalike_of_the_memory_path_over_http_is_the_namespace(stage: Stage, http: httpx.Client) -> None:
    """Issue 17: `%CD%8F` (U+034F) after `memory` is refused as the namespace and never listed."""
    a = stage.admit()
    auth = {"Authorization": f"Bearer {a.credential}", "X-Base-Version": "0"}
    root = "/api/v1/automation/workspaces/ws"
    r = http.put(f"{root}/documents/.zudotext/memory%CD%8F/MEMORY.md", headers=auth, json={"text": "forged"})
    assert (r.status_code, r.json()["error"]) == (403, "MEMORY_NAMESPACE_RESERVED")
    r = http.put(f"{root}/documents/notes/%E2%80%AEtxt.md", headers=auth, json={"text": "x"})
    assert r.status_code == 422 and "bidi control" in r.json()["message"]
    listed = http.get(f"{root}/documents", headers={"Authorization": f"Bearer {a.credential}"}).json()
    assert "memory" not in str(listed) and "txt.md" not in str(listed)
