"""The HTTP app factory: routers, error handlers and guards around one MemoryService.

Routes are thin: each is one call into the service, which holds every rule.
One router module per concern (`files`, `policy`, `workspaces`); later
concerns (the Assistant, automation) add their own module and one line here.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI

from memframe import __version__
from memframe.api import assistant, automation, files, openai, policy, rotation, workspaces
from memframe.api.edge import AccessLog, HeaderGuard, known_query
from memframe.api.errors import MAX_BODY_BYTES, BodyLimit, InternalErrorGuard, install_error_handlers
from memframe.api.responses import EDGE_STATUSES, error_responses
from memframe.api.save_route import add_save_route
from memframe.assistant.automation import InProcessAutomation
from memframe.assistant.ingress import AssistantEndpoint
from memframe.assistant.models import ModelClient, ScriptedModel
from memframe.assistant.runtime import Runtime
from memframe.service import MemoryService

# Matched in this order: the automation routes come early because recall runs before every model call.
ROUTERS = (workspaces.router, automation.router, files.router, policy.router, assistant.router, rotation.router)


def create_app(
    service: MemoryService,
    *,
    max_body_bytes: int = MAX_BODY_BYTES,
    model: ModelClient | None = None,
) -> FastAPI:
    """An app serving `service`; the caller owns the service and closes it after the server stops.

    Sends run the Assistant here with `model` (the built-in scripted model by default). With a
    `model` of its own the app also answers OpenAI-compatible chat clients (`memframe.api.openai`).
    """
    app = FastAPI(
        title="memframe",
        version=__version__,
        summary="Encrypted, versioned workspace memory: the people's routes.",
        description='Errors are always `{"error": CODE, "message": …}` with the status that fits. '
        "The server stores and returns ciphertext only; keys and plaintext stay with people.",
        redoc_url=None,
        # Any route can be refused at the edge (a doubled header, a stalled upload, too many connections).
        responses=error_responses(*EDGE_STATUSES),
        dependencies=[Depends(known_query)],
    )
    app.state.service = service
    app.state.endpoint = AssistantEndpoint(service, Runtime(InProcessAutomation(service), model or ScriptedModel()))
    add_save_route(app)  # first: a Save comes in bursts, and is matched before every router
    for router in ROUTERS:
        app.include_router(router)
    if model is not None:
        app.include_router(openai.router)
    install_error_handlers(app)
    # The last added is the outermost: the guard sees every failure, including the limit's,
    # and the access log sees every answer, including the guard's.
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.add_middleware(HeaderGuard)
    app.add_middleware(InternalErrorGuard)
    app.add_middleware(AccessLog, routes=app.routes)
    return app
