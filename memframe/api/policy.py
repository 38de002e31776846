"""The memory policy route: the mode, compare-and-set on its revision.

Changing the mode needs only normal authenticated workspace access: it never
enables workspace AI, opens a key session or trusts skills.
"""

from __future__ import annotations

from fastapi import APIRouter

from memframe.api.deps import Service, User, WorkspaceId
from memframe.api.responses import error_responses
from memframe.wire.files import PolicyIn, PolicyOut

router = APIRouter(prefix="/api/v1/workspaces/{workspace_id}/memory", tags=["memory policy"])


@router.get("/policy", responses=error_responses(401, 404, 422))
def get_policy(workspace_id: WorkspaceId, user: User, service: Service) -> PolicyOut:
    """The mode, its revision and the Clear generation; no row reads as Read only, 0, 0."""
    return PolicyOut.model_validate(service.get_policy(user, workspace_id))


@router.put("/policy", responses=error_responses(401, 404, 409, 413, 422))
def set_policy(workspace_id: WorkspaceId, body: PolicyIn, user: User, service: Service) -> PolicyOut:
    """Set the mode if `expectedRevision` is current, else 409 `policy_conflict` naming the current one.

    Choosing the mode that is already set is not a change and bumps nothing.
    """
    return PolicyOut.model_validate(service.set_policy(user, workspace_id, body.mode, body.expected_revision))
