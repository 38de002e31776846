"""The automation routes over HTTP: a runtime apart from the service, and the namespace fence."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest

from memframe.assistant.http_automation import HttpAutomation
from memframe.assistant.memory_tool import TurnContext
from memframe.assistant.models import ScriptedModel
from memframe.assistant.runtime import Runtime
from memframe.core.types import Mode, RecallStatus
from memframe.service.admissions import Admission
from tests.assistant.conftest import Stage
from tests.assistant.test_documents import SPELLINGS
from tests.remote_kinds import PortalASGITransport, app_for

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


def ctx(a: Admission) -> TurnContext:
    return TurnContext(a.workspace_id, a.conversation_id, a.id, a.credential, a.mode, a.key_session_id)


def test_a_runtime_over_http_sees_memory_and_captures_behind_the_fence(
    stage: Stage, transport: PortalASGITransport
) -> None:
    stage.person.save("# Memory\n- likes tea\n", 0)
    stage.set_mode(Mode.AUTO)
    automation = HttpAutomation(BASE, transport=transport)
    model = ScriptedModel()
    runtime = Runtime(automation, model)
    result = runtime.run_turn(ctx(stage.admit()), "remember: - likes scones")
    assert result.remembered and stage.person.load().text == "# Memory\n- likes tea\n- likes scones\n"
    assert "- likes tea" in model.seen[0]
    stage.set_mode(Mode.READ_ONLY)
    result = runtime.run_turn(ctx(stage.admit()), "remember: - likes jam")
    assert result.outcomes[0].kind == "proposed"
    retired = stage.admit()
    stage.set_mode(Mode.AUTO)  # the admission was taken in Read only: the fence refuses a commit
    assert runtime.run_turn(ctx(retired), "hi").calls[0].status is RecallStatus.PROVIDED
    automation.close()


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
