"""The Save's one route, `PUT /api/v1/workspaces/{workspace_id}/files/{path}`, answered by a handler of its own.

A team's Saves come in bursts, and FastAPI's work per request (matching through its included
routers, solving dependencies, validating each parameter in its own layer, a thread held for the
commit) cost more CPU than the Save itself, which bounded how many Saves could share one fsync.
`answer_save` takes the same steps in FastAPI's order without that machinery, for the aim of
saves/s over HTTP at 64 clients at least twice one fsync per Save (the figures are in bench/results.md).

FastAPI still matches and documents the route from `put_file`'s signature, as any other route
(`SaveRoute` is FastAPI's documented way to change only how a route handles requests), and the
headers and the body are read by the same pydantic types FastAPI reads them with: a field added to
`PutFileIn` is documented and read with no change here.
"""

from __future__ import annotations

import email.message
import json
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import TypeAdapter, ValidationError
from starlette.exceptions import HTTPException
from starlette.responses import Response

from memframe.api.deps import FilePath, Service, User, WorkspaceId, bearer, current_user
from memframe.api.edge import known_query
from memframe.api.files import BaseVersion
from memframe.api.responses import error_responses
from memframe.service import MemoryService
from memframe.wire.files import PutFileIn, VersionOut

PATH = "/api/v1/workspaces/{workspace_id}/files/{path:path}"

MemoryClear = Annotated[
    bool,
    Header(
        alias="X-Memory-Clear",
        description="`1` on the memory document: write an empty revision and advance the Clear "
        "generation in the same transaction.",
    ),
]
Revive = Annotated[
    bool,
    Header(alias="X-Revive", description="`1` to write over a deleted document; a plain write does not revive it."),
]


async def put_file(
    workspace_id: WorkspaceId,
    path: FilePath,
    body: PutFileIn,
    base_version: BaseVersion,
    user: User,
    service: Service,
    memory_clear: MemoryClear = False,
    revive: Revive = False,
) -> VersionOut:
    """One direct upload; the answer is exactly the version the server now holds.

    A stale base is a 409 `version_conflict` naming `current_version`; a deleted
    document is a 409 `document_deleted` unless X-Revive is set. Nothing is written then.
    """
    info = await service.put_file_async(
        user,
        workspace_id,
        path,
        body.blob(),
        base_version,
        clear=memory_clear,
        restored_from=body.restored_from,
        revive=revive,
        source_note=body.note(),
    )
    return VersionOut.model_validate(info)


_REQUIRED = object()
#: The headers `put_file` declares, in its order: (parameter, header, its type, the value when absent).
HEADERS: tuple[tuple[str, str, TypeAdapter[Any], object], ...] = (
    ("base_version", "X-Base-Version", TypeAdapter(BaseVersion), _REQUIRED),
    ("memory_clear", "X-Memory-Clear", TypeAdapter(MemoryClear), False),
    ("revive", "X-Revive", TypeAdapter(Revive), False),
)
_BODY: TypeAdapter[PutFileIn] = TypeAdapter(PutFileIn)
_NO_BODY = object()


async def answer_save(request: Request) -> Response:
    """What FastAPI's handler does for `put_file`, in its order, so every answer is the one it gave.

    The body is read and decoded first (a body that is not JSON is refused before anything else);
    then the app's dependency (`known_query`) and the token (`current_user`); then the headers and
    the body are validated, every problem in one 422; then the Save, whose answer is serialised as
    FastAPI serialises a `VersionOut`.
    """
    body = await _decoded_body(request)
    await known_query(request)
    service: MemoryService = request.app.state.service
    user = await current_user(service, await bearer(request))
    values: dict[str, Any] = {}
    errors: list[dict[str, Any]] = []
    for name, header, adapter, absent in HEADERS:
        raw = request.headers.get(header)
        if raw is not None:
            values[name] = _validated(adapter, raw, ("header", header), errors)
        elif absent is _REQUIRED:
            errors.append(_missing(("header", header)))
        else:
            values[name] = absent
    if body is _NO_BODY:
        errors.append(_missing(("body",)))
    else:
        values["body"] = _validated(_BODY, body, ("body",), errors)
    if errors:
        raise RequestValidationError(errors)
    params = request.path_params
    answer = await put_file(params["workspace_id"], params["path"], user=user, service=service, **values)
    return Response(answer.model_dump_json(by_alias=True), media_type="application/json")


async def _decoded_body(request: Request) -> Any:
    """The body as FastAPI's handler reads it: JSON-decoded when its content type is JSON
    (`application/json` or `…+json`), the raw bytes under any other (or none), `_NO_BODY` when empty."""
    try:
        raw = await request.body()
        if not raw:
            return _NO_BODY
        kind = request.headers.get("content-type")
        if kind != "application/json" and not _is_json(kind):
            return raw
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        error = {
            "type": "json_invalid",
            "loc": ("body", exc.pos),
            "msg": "JSON decode error",
            "ctx": {"error": exc.msg},
        }
        raise RequestValidationError([error]) from exc
    except HTTPException:  # the edge's: a body over the limit, or late
        raise
    except Exception as exc:  # a body whose bytes do not decode, a client gone mid-body
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from exc


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def _validated(adapter: TypeAdapter[Any], value: Any, loc: tuple[str, ...], errors: list[dict[str, Any]]) -> Any:
    """`value` as `adapter`'s type; its problems, located under `loc`, join `errors`."""
    try:
        return adapter.validate_python(value, from_attributes=True)
    except ValidationError as exc:
        errors.extend({**error, "loc": loc + tuple(error["loc"])} for error in exc.errors(include_url=False))
        return None


def _missing(loc: tuple[str, ...]) -> dict[str, Any]:
    return {"type": "missing", "loc": loc, "msg": "Field required", "input": None}


class SaveRoute(APIRoute):
    """`put_file`'s route: matched and documented by FastAPI from the endpoint like any route,
    answered by `answer_save`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        return answer_save


def add_save_route(app: FastAPI) -> None:
    """The Save's route, on the app itself: a route in an included router costs every request
    FastAPI's matching through that router first. Added before the routers, it is tried first."""
    app.router.add_api_route(
        PATH,
        put_file,
        methods=["PUT"],
        route_class_override=SaveRoute,
        tags=["files"],
        responses=error_responses(401, 404, 409, 413, 422),
    )
