"""Key rotation routes: what a key holder re-seals, the newest rotation, and the swap.

A thin call into the service each (`MemoryService.rotate_key` holds every rule); the server never
sees a key or a text, only the ciphertexts a person's machine re-sealed under a new key. A rotation
over one request's bound arrives as an upload: its records in parts, then the rotation naming it.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from memframe.api.deps import Service, User, WorkspaceId
from memframe.api.responses import error_responses
from memframe.wire.rotation import (
    DestroyedOut,
    LatestRotationOut,
    RotationIn,
    RotationOut,
    RotationPartIn,
    RotationPartOut,
    RotationUploadOut,
    SealedRecordsOut,
)

router = APIRouter(tags=["forgetting"])
UploadId = Annotated[str, Path(max_length=100, description="The id `key-rotation-uploads` answered.")]


@router.get("/api/v1/workspaces/{workspace_id}/sealed-records", responses=error_responses(401, 404, 422))
def sealed_records(workspace_id: WorkspaceId, user: User, service: Service) -> SealedRecordsOut:
    """The key check, every transcript message and proposal (sealed) and the newest rotation."""
    return SealedRecordsOut.of(service.sealed_records(user, workspace_id))


@router.get("/api/v1/workspaces/{workspace_id}/key-rotation", responses=error_responses(401, 404, 422))
def latest_rotation(workspace_id: WorkspaceId, user: User, service: Service) -> LatestRotationOut:
    """When and by whom the workspace key was last rotated, with that rotation's sealed record."""
    return LatestRotationOut(rotation=RotationOut.of(service.latest_rotation(user, workspace_id)))


@router.post("/api/v1/workspaces/{workspace_id}/key-rotations", responses=error_responses(401, 403, 404, 409, 413, 422))
def rotate_key(workspace_id: WorkspaceId, body: RotationIn, user: User, service: Service) -> DestroyedOut:
    """Swap in a rotation in one transaction against the state it was made from (409 if it moved);
    with `uploadId`, together with the records that upload staged."""
    return DestroyedOut.model_validate(service.rotate_key(user, workspace_id, body.to_plan(), body.upload_id))


@router.post("/api/v1/workspaces/{workspace_id}/key-rotation-uploads", responses=error_responses(401, 403, 404, 422))
def start_upload(workspace_id: WorkspaceId, user: User, service: Service) -> RotationUploadOut:
    """Start staging a rotation too large for one request (the owner only; it replaces an earlier one)."""
    return RotationUploadOut(upload_id=service.start_rotation_upload(user, workspace_id))


@router.post(
    "/api/v1/workspaces/{workspace_id}/key-rotation-uploads/{upload_id}/parts",
    responses=error_responses(401, 403, 404, 413, 422),
)
def stage_part(
    workspace_id: WorkspaceId, upload_id: UploadId, body: RotationPartIn, user: User, service: Service
) -> RotationPartOut:
    """Stage some re-sealed records of the rotation; nothing reads them until it names the upload."""
    return RotationPartOut(staged=service.stage_rotation_part(user, workspace_id, upload_id, body.to_part()))
