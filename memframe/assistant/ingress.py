"""An Assistant send: ingress writes the admission, then the turn runs under it.

The admission id and credential reach the runtime as server-set context; the
model never supplies them. Both the local backend and the HTTP route use this.
"""

from __future__ import annotations

from memframe.assistant.memory_tool import TurnContext
from memframe.assistant.models import TextCallback
from memframe.assistant.runtime import Runtime, TurnResult
from memframe.service import MemoryService


class AssistantEndpoint:
    def __init__(self, service: MemoryService, runtime: Runtime) -> None:
        self.service = service
        self.runtime = runtime

    def send(
        self,
        user: str,
        workspace_id: str,
        conversation_id: str,
        text: str,
        *,
        idempotency_key: str,
        key_session_id: str | None,
        memory_state: str | None,
        on_text: TextCallback | None = None,
    ) -> TurnResult:
        ctx = self.admit(
            user,
            workspace_id,
            conversation_id,
            idempotency_key=idempotency_key,
            key_session_id=key_session_id,
            memory_state=memory_state,
        )
        return self.runtime.run_turn(ctx, text, on_text=on_text)

    def admit(
        self,
        user: str,
        workspace_id: str,
        conversation_id: str,
        *,
        idempotency_key: str,
        key_session_id: str | None,
        memory_state: str | None,
    ) -> TurnContext:
        """The admission row and the conversation's delivery credential, as the turn's context."""
        admission = self.service.assistant.admit(
            user,
            workspace_id,
            conversation_id,
            idempotency_key=idempotency_key,
            key_session_id=key_session_id,
            memory_state=memory_state,
        )
        return TurnContext(
            workspace_id=workspace_id,
            conversation_id=conversation_id,
            admission_id=admission.id,
            credential=admission.credential,
            mode=admission.mode,
            key_session_id=admission.key_session_id,
        )
