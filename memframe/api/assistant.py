"""The people's Assistant routes: AI consent, key sessions, sends, receipts, transcript, proposals.

Each is a thin call into the service (or, for a send, into the ingress that
writes the admission before the turn runs). Turning workspace AI on is its own
route: changing the memory mode never does it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Path, Query

from memframe.api.deps import Endpoint, Service, User, WorkspaceId
from memframe.api.responses import error_responses
from memframe.core.errors import InvalidInput
from memframe.wire.assistant import (
    AIConsentIn,
    AIConsentOut,
    CaptureOriginList,
    CaptureOriginOut,
    KeyCheck,
    KeySessionIn,
    KeySessionOut,
    MessageIn,
    ProposalList,
    ProposalOut,
    ProposalResolveIn,
    ReceiptList,
    ReceiptOut,
    SealedMessageOut,
    TranscriptOut,
    TurnOut,
)
from memframe.wire.base import decode_base64

router = APIRouter(tags=["assistant"])
ConversationId = Annotated[
    str, Path(max_length=100, description="The conversation id, chosen by the client; unique within its workspace.")
]
InWorkspace = Annotated[
    str | None, Query(max_length=100, description="The conversation's workspace, when the same id is used in several.")
]


@router.get("/api/v1/workspaces/{workspace_id}/ai", responses=error_responses(401, 404, 422))
def get_ai(workspace_id: WorkspaceId, user: User, service: Service) -> AIConsentOut:
    return AIConsentOut.model_validate(service.assistant.ai_consent(user, workspace_id))


@router.put("/api/v1/workspaces/{workspace_id}/ai", responses=error_responses(401, 404, 422))
def set_ai(workspace_id: WorkspaceId, body: AIConsentIn, user: User, service: Service) -> AIConsentOut:
    """Enable or disable workspace AI; a change bumps the consent revision."""
    return AIConsentOut.model_validate(service.assistant.set_ai(user, workspace_id, body.enabled))


@router.get("/api/v1/workspaces/{workspace_id}/key-check", responses=error_responses(401, 404, 422))
def get_key_check(workspace_id: WorkspaceId, user: User, service: Service) -> KeyCheck:
    """The workspace's key check, so a client can prove its key before using it."""
    return KeyCheck(keyCheck=service.get_key_check(user, workspace_id))


@router.put("/api/v1/workspaces/{workspace_id}/key-check", responses=error_responses(401, 403, 404, 422))
def set_key_check(workspace_id: WorkspaceId, body: KeyCheck, user: User, service: Service) -> KeyCheck:
    """Written once, by the workspace's owner only (403 for any other member); another value later is
    refused (wrong_key). An admin resets it with `memframe admin workspace reset-key-check`."""
    if body.keyCheck is None:
        raise InvalidInput("keyCheck is required.")
    return KeyCheck(keyCheck=service.set_key_check(user, workspace_id, body.keyCheck))


@router.post("/api/v1/workspaces/{workspace_id}/key-sessions", responses=error_responses(401, 404, 422))
def open_key_session(workspace_id: WorkspaceId, body: KeySessionIn, user: User, service: Service) -> KeySessionOut:
    """Hand the workspace key to the server's memory for a while; refused if it does not open the memory."""
    key = decode_base64(body.key)
    info = service.assistant.open_key_session(user, workspace_id, key, hold_seconds=body.holdSeconds)
    return KeySessionOut.model_validate(info)


@router.delete("/api/v1/automation/key-sessions/{session_id}", responses=error_responses(401, 404, 422))
def revoke_key_session(session_id: str, user: User, service: Service) -> dict[str, bool]:
    """Writes the durable revocation row first (the commit fence reads it), then forgets the key."""
    service.assistant.revoke_key_session(user, session_id)
    return {"revoked": True}


@router.post("/api/v1/agents/assistant/{conversation_id}/messages", responses=error_responses(401, 404, 409, 422))
def send_message(
    conversation_id: ConversationId,
    body: MessageIn,
    user: User,
    endpoint: Endpoint,
    idempotency_key: Annotated[str, Header(alias="Idempotency-Key", max_length=200)],
    key_session: Annotated[str | None, Header(alias="X-Key-Session")] = None,
    memory_state: Annotated[
        str | None,
        Header(alias="X-Memory-State", description="none | pending | saved; version=N | conflict; version=N"),
    ] = None,
) -> TurnOut:
    """An Assistant send: the admission is written before the turn runs; a resend with the
    same Idempotency-Key reuses it. Without X-Memory-State the server's current revision is used."""
    result = endpoint.send(
        user,
        body.workspace,
        conversation_id,
        body.text,
        idempotency_key=idempotency_key,
        key_session_id=key_session,
        memory_state=memory_state,
    )
    return TurnOut.model_validate(result)


@router.get("/api/v1/agents/assistant/{conversation_id}/memory-receipts", responses=error_responses(401, 404, 422))
def receipts(
    conversation_id: ConversationId, user: User, service: Service, workspace: InWorkspace = None
) -> ReceiptList:
    """Which revision each model call used, or why memory was withheld: ids, versions, statuses, no text."""
    found = service.assistant.receipts(user, conversation_id, workspace)
    return ReceiptList(receipts=[ReceiptOut.model_validate(r) for r in found])


@router.get("/api/v1/agents/assistant/{conversation_id}/transcript", responses=error_responses(401, 404, 422))
def transcript(
    conversation_id: ConversationId, user: User, service: Service, workspace: InWorkspace = None
) -> TranscriptOut:
    """The stored messages, sealed with the workspace key; the client opens them."""
    rows = service.assistant.transcript(user, conversation_id, workspace)
    return TranscriptOut(
        messages=[SealedMessageOut.model_validate({"role": role, "ciphertext": blob}) for role, blob in rows]
    )


@router.get("/api/v1/workspaces/{workspace_id}/memory/capture-origins", responses=error_responses(401, 404, 422))
def capture_origins(workspace_id: WorkspaceId, user: User, service: Service) -> CaptureOriginList:
    """Which admission and conversation of yours made each capture: ids and versions, never text."""
    found = service.assistant.capture_origins(user, workspace_id)
    return CaptureOriginList(captures=[CaptureOriginOut.model_validate(c) for c in found])


@router.get("/api/v1/workspaces/{workspace_id}/memory/proposals", responses=error_responses(401, 404, 422))
def proposals(workspace_id: WorkspaceId, user: User, service: Service) -> ProposalList:
    """Pending proposals; their edits are sealed, so only a key holder can read them."""
    rows = service.assistant.proposals(user, workspace_id)
    return ProposalList(proposals=[ProposalOut.model_validate(p) for p in rows])


@router.put(
    "/api/v1/workspaces/{workspace_id}/memory/proposals/{proposal_id}", responses=error_responses(401, 404, 409, 422)
)
def resolve_proposal(
    workspace_id: WorkspaceId, proposal_id: str, body: ProposalResolveIn, user: User, service: Service
) -> dict[str, str]:
    """Mark a proposal applied (after the person's own Save) or dismissed."""
    service.assistant.resolve_proposal(user, workspace_id, proposal_id, body.status)
    return {"status": body.status}
