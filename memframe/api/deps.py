"""What every route depends on: the service, and the user a bearer token speaks for.

Authentication is one dependency so no route can forget it, and it only says
who the caller is; membership is checked by the service inside the same
transaction as the read or write, so a non-member's 404 cannot drift from an
unknown workspace's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, ParamSpec, TypeVar

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from memframe.assistant.ingress import AssistantEndpoint
from memframe.service import MemoryService

P = ParamSpec("P")
T = TypeVar("T")

bearer = HTTPBearer(
    auto_error=False,
    scheme_name="token",
    description="A token made with `memframe admin token create`, sent as `Authorization: Bearer …`.",
)


async def get_service(request: Request) -> MemoryService:
    """Async on purpose: it does no I/O, so it need not cost a trip through the thread pool."""
    service: MemoryService = request.app.state.service
    return service


Service = Annotated[MemoryService, Depends(get_service)]


async def current_user(
    service: Service,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> str:
    """The caller's user id; no token, a malformed header or a revoked token are all one 401.

    One indexed read: on the event loop where reads are local (SQLite), on a thread where they
    cross a network (PostgreSQL), so a person's request pays no thread hand-off for it on SQLite.
    """
    return await local_or_threaded(
        service, service.accounts.authenticate, credentials.credentials if credentials else None
    )


async def local_or_threaded(service: MemoryService, read: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`read(...)`, a read of the service, called where it costs least: right here on the event loop
    when the engine's reads are local (`Database.local_reads`), else in the thread pool, so a read
    that waits on PostgreSQL's network does not stall every other request meanwhile."""
    if service.db.local_reads:
        return read(*args, **kwargs)
    return await run_in_threadpool(read, *args, **kwargs)


User = Annotated[str, Depends(current_user)]
WorkspaceId = Annotated[str, Path(description="The workspace id.")]
FilePath = Annotated[
    str,
    Path(description="The file's relative path, e.g. `.zudotext/memory/MEMORY.md`; `/` separates folders."),
]


async def delivery_credential(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> str:
    """Automation routes take the turn's delivery credential as the bearer; the service judges it.

    Async because it only reads a header: a sync dependency costs a trip through the thread pool.
    """
    from memframe.core.errors import Unauthorized

    if credentials is None or not credentials.credentials:
        raise Unauthorized("A delivery credential is required.")
    return credentials.credentials


Credential = Annotated[str, Depends(delivery_credential)]


async def get_endpoint(request: Request) -> AssistantEndpoint:
    endpoint: AssistantEndpoint = request.app.state.endpoint
    return endpoint


Endpoint = Annotated[AssistantEndpoint, Depends(get_endpoint)]
