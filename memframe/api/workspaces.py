"""Who am I and where can I go: the caller's workspaces, and the unauthenticated health check."""

from __future__ import annotations

from fastapi import APIRouter

from memframe import __version__
from memframe.api.deps import Service, User
from memframe.api.responses import error_responses
from memframe.wire.base import Health
from memframe.wire.files import WorkspaceEntry, WorkspaceList

router = APIRouter(tags=["workspaces"])


@router.get("/api/v1/workspaces", responses=error_responses(401))
def list_workspaces(user: User, service: Service) -> WorkspaceList:
    """The workspaces the caller is a member of; no other workspace is named."""
    return WorkspaceList(user=user, workspaces=[WorkspaceEntry(id=w) for w in service.accounts.workspaces(user)])


@router.get("/healthz", tags=["health"])
def healthz() -> Health:
    """Liveness for load balancers and scripts; needs no token and says nothing about data."""
    return Health(status="ok", version=__version__)
