"""The automation routes over HTTP: for a runtime that lives apart from the service.

Same promises as `InProcessAutomation`, spoken as `/api/v1/automation/...`
requests with the turn's delivery credential as the bearer. Nothing is
retried: a failed write is reported, and the fence decides what landed.
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx

from memframe.api.schemas import VersionOut
from memframe.core.edits import MemoryChange
from memframe.core.errors import Unavailable, error_from_payload
from memframe.core.turns import CaptureReceipt, ProposalRecord, RecallResult
from memframe.core.types import Author, Operation, RecallStatus, VersionInfo
from memframe.service.documents import DocumentHit


def _version(data: dict[str, Any]) -> VersionInfo:
    """The same wire schema the server answers with, read back."""
    return VersionOut.model_validate(data).to_info()


class HttpAutomation:
    def __init__(self, base_url: str, *, transport: httpx.BaseTransport | None = None, timeout: float = 30.0) -> None:
        self._client = httpx.Client(base_url=base_url.rstrip("/") + "/", transport=transport, timeout=timeout)
        self.calls: Counter[str] = Counter()

    def close(self) -> None:
        self._client.close()

    def _call(self, name: str, method: str, workspace_id: str, credential: str, url: str, **kwargs: Any) -> Any:
        self.calls[name] += 1
        headers = {"Authorization": f"Bearer {credential}", **kwargs.pop("headers", {})}
        full = f"api/v1/automation/workspaces/{quote(workspace_id, safe='')}/{url}"
        try:
            response = self._client.request(method, full, headers=headers, **kwargs)
        except httpx.HTTPError:
            raise Unavailable("The memory service cannot be reached; nothing was changed.") from None
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if not response.is_success:
            raise error_from_payload(response.status_code, payload)
        return payload

    def recall(self, workspace_id: str, credential: str) -> RecallResult:
        data = self._call("recall", "GET", workspace_id, credential, "memory", params={"purpose": "recall"})
        return RecallResult(RecallStatus(data["status"]), data.get("revision"), data.get("text"))

    def commit_memory(
        self,
        workspace_id: str,
        credential: str,
        *,
        key_session_id: str | None,
        idempotency_key: str,
        changes: Sequence[MemoryChange],
        expected_version: int,
    ) -> CaptureReceipt:
        headers = {"Idempotency-Key": idempotency_key}
        if key_session_id:
            headers["X-Key-Session"] = key_session_id
        body = {"edits": [c.as_dict() for c in changes], "expectedVersion": expected_version}
        data = self._call("commit_memory", "PUT", workspace_id, credential, "memory", headers=headers, json=body)
        # The receipt names the exact version; its metadata is read back through recall's history if needed.
        info = VersionInfo(int(data["version"]), 0.0, Author.ASSISTANT, "assistant", Operation.CAPTURE, 0, "")
        return CaptureReceipt(str(data["admissionId"]), info, bool(data["replayed"]))

    def current_memory(self, workspace_id: str, credential: str) -> tuple[int, str]:
        data = self._call("current_memory", "GET", workspace_id, credential, "memory", params={"purpose": "current"})
        return int(data["version"]), str(data["text"])

    def propose(
        self,
        workspace_id: str,
        credential: str,
        *,
        changes: Sequence[MemoryChange],
        base_version: int,
        reason: str,
    ) -> ProposalRecord:
        body = {"edits": [c.as_dict() for c in changes], "baseVersion": base_version, "reason": reason}
        d = self._call("propose", "POST", workspace_id, credential, "memory/proposals", json=body)
        return ProposalRecord(
            d["id"],
            d["workspaceId"],
            d["admissionId"],
            d["baseVersion"],
            d["clearGeneration"],
            d["reason"],
            base64.b64decode(d["sealedEdits"]),
            d["status"],
            d["createdAt"],
        )

    def append_transcript(self, workspace_id: str, credential: str, role: str, content: str) -> None:
        self._call(
            "append_transcript", "POST", workspace_id, credential, "transcript", json={"role": role, "content": content}
        )

    def conversation_history(self, workspace_id: str, credential: str) -> list[tuple[str, str]]:
        data = self._call("conversation_history", "GET", workspace_id, credential, "transcript")
        return [(m["role"], m["content"]) for m in data["messages"]]

    def list_documents(self, workspace_id: str, credential: str) -> list[tuple[str, int]]:
        data = self._call("list_documents", "GET", workspace_id, credential, "documents")
        return [(d["path"], int(d["version"])) for d in data["documents"]]

    def search_documents(self, workspace_id: str, credential: str, query: str) -> list[DocumentHit]:
        data = self._call("search_documents", "GET", workspace_id, credential, "documents-search", params={"q": query})
        return [DocumentHit(h["path"], int(h["version"]), h["snippet"]) for h in data["hits"]]

    def read_document(self, workspace_id: str, credential: str, path: str) -> tuple[int, str]:
        data = self._call("read_document", "GET", workspace_id, credential, f"documents/{quote(path, safe='/')}")
        return int(data["version"]), str(data["text"])

    def put_document(self, workspace_id: str, credential: str, path: str, text: str, base_version: int) -> VersionInfo:
        data = self._call(
            "put_document",
            "PUT",
            workspace_id,
            credential,
            f"documents/{quote(path, safe='/')}",
            headers={"X-Base-Version": str(base_version)},
            json={"text": text},
        )
        return _version(data)
