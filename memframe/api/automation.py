"""The automation routes: what the Assistant's runtime (or an MCP bridge) may call.

Every route authenticates with the turn's delivery credential, never a
person's token. The memory routes are the only automatic way to the memory
document; the document routes refuse every spelling of the reserved
namespace with MEMORY_NAMESPACE_RESERVED, for the source and target of a move.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response

from memframe.api.deps import Credential, FilePath, Service, WorkspaceId, local_or_threaded
from memframe.api.responses import error_responses
from memframe.wire.assistant import ProposalOut
from memframe.wire.automation import (
    CaptureIn,
    CaptureOut,
    CurrentMemoryOut,
    DocumentEntry,
    DocumentIn,
    DocumentList,
    DocumentOut,
    HistoryOut,
    MoveIn,
    ProposeIn,
    RecallOut,
    RestoreIn,
    SearchHit,
    SearchOut,
    TranscriptIn,
)
from memframe.wire.base import MAX_NUMBER
from memframe.wire.files import VersionOut

router = APIRouter(prefix="/api/v1/automation/workspaces/{workspace_id}", tags=["automation"])
BaseVersion = Annotated[int, Header(alias="X-Base-Version", ge=0, le=MAX_NUMBER)]


@router.get("/memory", response_model=RecallOut | CurrentMemoryOut, responses=error_responses(401, 404, 409, 422))
async def read_memory(
    workspace_id: WorkspaceId,
    credential: Credential,
    service: Service,
    purpose: Annotated[str, Query(pattern="^(recall|current)$")] = "recall",
) -> Response:
    """`recall`: what the next model call may see, judged now and recorded as a receipt.
    `current`: the current text, to turn a refused capture into a proposal (refused when Off)."""
    # Recall runs before every model call. It reads one snapshot on an open connection and
    # queues its receipt instead of waiting for an fsync, so on SQLite it runs on the event loop:
    # a trip through the thread pool would cost more than the read. Its key-session resolve is
    # awaited there (`recall_awaiting_key`): with a key-session service that is a round trip, and
    # the loop serves other requests (and pipelines their resolves) while it is out. On
    # PostgreSQL the read is a round trip to the server, so the whole recall runs on a thread and
    # recalls overlap their waits (`local_or_threaded`). The reply is serialised once by its own
    # model rather than validated again by FastAPI.
    if purpose == "current":
        version, text = await local_or_threaded(service, service.assistant.current_memory, workspace_id, credential)
        out: RecallOut | CurrentMemoryOut = CurrentMemoryOut(version=version, text=text)
    elif service.db.local_reads:
        out = RecallOut.model_validate(await service.assistant.recall_awaiting_key(workspace_id, credential))
    else:
        result = await local_or_threaded(service, service.assistant.recall, workspace_id, credential)
        out = RecallOut.model_validate(result)
    return Response(out.model_dump_json(), media_type="application/json")


@router.put("/memory", responses=error_responses(401, 404, 409, 422))
def commit_memory(
    workspace_id: WorkspaceId,
    body: CaptureIn,
    credential: Credential,
    service: Service,
    idempotency_key: Annotated[str, Header(alias="Idempotency-Key", description="memory:<admissionId>")],
    key_session: Annotated[str | None, Header(alias="X-Key-Session")] = None,
) -> CaptureOut:
    """The only automatic writer: one transaction behind the commit fence, or nothing."""
    receipt = service.assistant.commit_capture(
        workspace_id,
        credential,
        idempotency_key=idempotency_key,
        key_session_id=key_session,
        changes=body.changes(),
        expected_version=body.expected_version,
    )
    return CaptureOut(admission_id=receipt.admission_id, version=receipt.version.version, replayed=receipt.replayed)


@router.post("/memory/proposals", responses=error_responses(401, 404, 409, 422))
def propose(workspace_id: WorkspaceId, body: ProposeIn, credential: Credential, service: Service) -> ProposalOut:
    record = service.assistant.propose(
        workspace_id, credential, changes=body.changes(), base_version=body.base_version, reason=body.reason
    )
    return ProposalOut.model_validate(record)


@router.get("/transcript", responses=error_responses(401, 404, 409, 422))
def conversation_history(workspace_id: WorkspaceId, credential: Credential, service: Service) -> HistoryOut:
    rows = service.assistant.conversation_history(workspace_id, credential)
    return HistoryOut(messages=[{"role": role, "content": content} for role, content in rows])


@router.post("/transcript", responses=error_responses(401, 404, 409, 422))
def append_transcript(
    workspace_id: WorkspaceId, body: TranscriptIn, credential: Credential, service: Service
) -> dict[str, bool]:
    service.assistant.append_transcript(workspace_id, credential, body.role, body.content)
    return {"stored": True}


@router.get("/documents", responses=error_responses(401, 404, 409, 422))
def list_documents(workspace_id: WorkspaceId, credential: Credential, service: Service) -> DocumentList:
    """Live notes; the memory namespace is never listed."""
    rows = service.assistant.list_documents(workspace_id, credential)
    return DocumentList(documents=[DocumentEntry(path=p, version=v) for p, v in rows])


@router.get("/documents-search", responses=error_responses(401, 404, 409, 422))
def search_documents(
    workspace_id: WorkspaceId,
    credential: Credential,
    service: Service,
    q: Annotated[str, Query(min_length=1, max_length=500)],
) -> SearchOut:
    hits = service.assistant.search_documents(workspace_id, credential, q)
    return SearchOut(hits=[SearchHit.model_validate(h) for h in hits])


@router.get("/documents/{path:path}", responses=error_responses(401, 403, 404, 409, 422))
def read_document(workspace_id: WorkspaceId, path: FilePath, credential: Credential, service: Service) -> DocumentOut:
    version, text = service.assistant.read_document(workspace_id, credential, path)
    return DocumentOut(path=path, version=version, text=text)


@router.put("/documents/{path:path}", responses=error_responses(401, 403, 404, 409, 413, 422))
def put_document(
    workspace_id: WorkspaceId,
    path: FilePath,
    body: DocumentIn,
    base_version: BaseVersion,
    credential: Credential,
    service: Service,
) -> VersionOut:
    info = service.assistant.put_document(workspace_id, credential, path, body.text, base_version)
    return VersionOut.model_validate(info)


@router.delete("/documents/{path:path}", responses=error_responses(401, 403, 404, 409, 422))
def delete_document(
    workspace_id: WorkspaceId, path: FilePath, base_version: BaseVersion, credential: Credential, service: Service
) -> VersionOut:
    return VersionOut.model_validate(service.assistant.delete_document(workspace_id, credential, path, base_version))


@router.post("/documents/move", responses=error_responses(401, 403, 404, 409, 422))
def move_document(workspace_id: WorkspaceId, body: MoveIn, credential: Credential, service: Service) -> VersionOut:
    """Both the source and the target are checked against the reserved namespace."""
    info = service.assistant.move_document(workspace_id, credential, body.source, body.target, body.base_version)
    return VersionOut.model_validate(info)


@router.post("/documents/restore", responses=error_responses(401, 403, 404, 409, 422))
def restore_document(
    workspace_id: WorkspaceId, body: RestoreIn, credential: Credential, service: Service
) -> VersionOut:
    info = service.assistant.restore_document(workspace_id, credential, body.path, body.base_version)
    return VersionOut.model_validate(info)
