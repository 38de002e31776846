"""What the runtime may ask of the service, through the delivery credential only.

The runtime holds no key and no person's token: each call presents the turn's
delivery credential (and, for writes, the key session the turn was admitted
with). `InProcessAutomation` calls the service directly: the runtime runs
beside the service (in the server, or in `LocalBackend`). The same promises
are open to anything outside over HTTP as the `/api/v1/automation/...` routes
(`memframe.api.automation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from memframe.core.edits import MemoryChange
from memframe.core.turns import CaptureReceipt, ProposalRecord, RecallResult
from memframe.core.types import DocumentHit, VersionInfo
from memframe.service import MemoryService


class Automation(Protocol):
    def recall(self, workspace_id: str, credential: str) -> RecallResult:
        """The memory the next model call may see, judged now; records a receipt."""
        ...

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
        """The only automatic writer: commits behind the fence or raises, writing nothing."""
        ...

    def current_memory(self, workspace_id: str, credential: str) -> tuple[int, str]:
        """The current version and text, to turn a refused capture into a proposal against it."""
        ...

    def propose(
        self,
        workspace_id: str,
        credential: str,
        *,
        changes: Sequence[MemoryChange],
        base_version: int,
        reason: str,
    ) -> ProposalRecord:
        """A change for a person to review; never applied automatically."""
        ...

    def append_transcript(self, workspace_id: str, credential: str, role: str, content: str) -> None:
        """Store a person's message or a final answer (sealed); never a recall block."""
        ...

    def conversation_history(self, workspace_id: str, credential: str) -> list[tuple[str, str]]:
        """Earlier messages of this conversation, for the next turn's context."""
        ...

    def list_documents(self, workspace_id: str, credential: str) -> list[tuple[str, int]]:
        """Live notes, never the memory namespace."""
        ...

    def search_documents(self, workspace_id: str, credential: str, query: str) -> list[DocumentHit]:
        """Notes containing the text, never inside the memory namespace."""
        ...

    def read_document(self, workspace_id: str, credential: str, path: str) -> tuple[int, str]:
        """One note's version and text; the namespace is refused."""
        ...

    def put_document(self, workspace_id: str, credential: str, path: str, text: str, base_version: int) -> VersionInfo:
        """Create (base 0) or update a note; the namespace is refused."""
        ...


class InProcessAutomation:
    """The automation routes' logic, called directly: the local backend and the server use it."""

    def __init__(self, service: MemoryService) -> None:
        self.service = service

    def recall(self, workspace_id: str, credential: str) -> RecallResult:
        return self.service.assistant.recall(workspace_id, credential)

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
        return self.service.assistant.commit_capture(
            workspace_id,
            credential,
            idempotency_key=idempotency_key,
            key_session_id=key_session_id,
            changes=changes,
            expected_version=expected_version,
        )

    def current_memory(self, workspace_id: str, credential: str) -> tuple[int, str]:
        return self.service.assistant.current_memory(workspace_id, credential)

    def propose(
        self,
        workspace_id: str,
        credential: str,
        *,
        changes: Sequence[MemoryChange],
        base_version: int,
        reason: str,
    ) -> ProposalRecord:
        return self.service.assistant.propose(
            workspace_id, credential, changes=changes, base_version=base_version, reason=reason
        )

    def append_transcript(self, workspace_id: str, credential: str, role: str, content: str) -> None:
        self.service.assistant.append_transcript(workspace_id, credential, role, content)

    def conversation_history(self, workspace_id: str, credential: str) -> list[tuple[str, str]]:
        return self.service.assistant.conversation_history(workspace_id, credential)

    def list_documents(self, workspace_id: str, credential: str) -> list[tuple[str, int]]:
        return self.service.assistant.list_documents(workspace_id, credential)

    def search_documents(self, workspace_id: str, credential: str, query: str) -> list[DocumentHit]:
        return self.service.assistant.search_documents(workspace_id, credential, query)

    def read_document(self, workspace_id: str, credential: str, path: str) -> tuple[int, str]:
        return self.service.assistant.read_document(workspace_id, credential, path)

    def put_document(self, workspace_id: str, credential: str, path: str, text: str, base_version: int) -> VersionInfo:
        return self.service.assistant.put_document(workspace_id, credential, path, text, base_version)
