"""People's file routes: encrypted versions in and out, each a thin call into the service.

Routing rule for versions: a file path may itself end in `/versions` (or any
word), so version routes do not hang below `files/{path}`. They live under
their own prefixes, where the path is always the *last* part of the URL:

    GET    …/files/{path}                 head version + ciphertext (404 file_not_found if never created)
    PUT    …/files/{path}                 one write against X-Base-Version (`memframe.api.save_route`)
    DELETE …/files/{path}                 a tombstone against X-Base-Version
    GET    …/history/{path}?limit&before  version metadata, newest first, paged
    GET    …/revisions/{n}/{path}         one revision's metadata + ciphertext
    GET    …/revision-runs/{path}?first&last  consecutive revisions + ciphertexts (a delta's bases)

The server only ever sees ciphertext here; it cannot read what it stores.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Path, Query
from starlette.concurrency import run_in_threadpool

from memframe.api.deps import FilePath, Service, User, WorkspaceId
from memframe.api.responses import error_responses
from memframe.core.errors import FileNotFound, InvalidInput
from memframe.wire.base import MAX_NUMBER
from memframe.wire.files import (
    FileEntry,
    FileList,
    StoredVersionOut,
    StoredVersionRun,
    VersionOut,
    VersionPage,
)

router = APIRouter(prefix="/api/v1/workspaces/{workspace_id}", tags=["files"])

#: X-Base-Version, read by one type: FastAPI's for DELETE, and the Save's handler (`save_route`) with it too.
BaseVersion = Annotated[
    int,
    Header(
        alias="X-Base-Version",
        ge=0,
        le=MAX_NUMBER,
        description="The exact version the write is based on; 0 = create-only (the file must not exist).",
    ),
]


@router.get("/files", responses=error_responses(401, 404, 422))
def list_files(workspace_id: WorkspaceId, user: User, service: Service) -> FileList:
    """Every file of the workspace with its head version."""
    rows = service.list_files(user, workspace_id)
    return FileList(files=[FileEntry(path=p, version=v, deleted=d) for p, v, d in rows])


@router.get("/files/{path:path}", responses=error_responses(401, 404, 422))
def get_file(workspace_id: WorkspaceId, path: FilePath, user: User, service: Service) -> StoredVersionOut:
    """The head version and its ciphertext (null for a delete tombstone)."""
    stored = service.get_file(user, workspace_id, path)
    if stored is None:
        raise FileNotFound(f"There is no file {path!r} yet (version 0).")
    return StoredVersionOut.model_validate(stored)


@router.delete("/files/{path:path}", responses=error_responses(401, 404, 409, 422))
async def delete_file(
    workspace_id: WorkspaceId, path: FilePath, base_version: BaseVersion, user: User, service: Service
) -> VersionOut:
    """Write a tombstone version; history stays and the text of older revisions remains readable."""
    info = await run_in_threadpool(service.delete_file, user, workspace_id, path, base_version)
    return VersionOut.model_validate(info)


@router.get("/history/{path:path}", responses=error_responses(401, 404, 422))
def list_versions(
    workspace_id: WorkspaceId,
    path: FilePath,
    user: User,
    service: Service,
    limit: Annotated[int, Query(ge=1, le=1000, description="Revisions per page.")] = 50,
    before: Annotated[int | None, Query(ge=0, le=MAX_NUMBER, description="Only revisions older than this one.")] = None,
) -> VersionPage:
    """Version metadata, newest first, one page; nothing is decrypted or sent but metadata."""
    rows = service.list_versions(user, workspace_id, path, limit=limit, before=before)
    next_before = rows[-1].version if len(rows) == limit and rows[-1].version > 1 else None
    return VersionPage(versions=[VersionOut.model_validate(r) for r in rows], next_before=next_before)


#: Revisions one run answer may hold: a keyframe's run is at most `sealing.KEYFRAME_EVERY` (64).
RUN_LIMIT = 200


@router.get("/revision-runs/{path:path}", responses=error_responses(401, 404, 422))
def get_version_run(
    workspace_id: WorkspaceId,
    path: FilePath,
    user: User,
    service: Service,
    first: Annotated[int, Query(ge=1, le=MAX_NUMBER, description="The oldest revision wanted.")],
    last: Annotated[int, Query(ge=1, le=MAX_NUMBER, description="The newest revision wanted.")],
) -> StoredVersionRun:
    """Revisions `first` to `last` with their ciphertexts, in one read: what a client opening a
    version stored as a delta needs (the run back to its keyframe), in one request instead of one each."""
    if last < first or last - first >= RUN_LIMIT:
        raise InvalidInput(f"A run is 1 to {RUN_LIMIT} consecutive revisions, first to last.")
    stored = service.get_versions(user, workspace_id, path, list(range(first, last + 1)))
    return StoredVersionRun(versions=[StoredVersionOut.model_validate(s) for s in stored])


@router.get("/revisions/{version}/{path:path}", responses=error_responses(401, 404, 422))
def get_version(
    workspace_id: WorkspaceId,
    version: Annotated[int, Path(ge=0, le=MAX_NUMBER, description="The revision number.")],
    path: FilePath,
    user: User,
    service: Service,
) -> StoredVersionOut:
    """One revision's metadata and ciphertext."""
    return StoredVersionOut.model_validate(service.get_version(user, workspace_id, path, version))
