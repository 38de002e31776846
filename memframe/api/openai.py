"""The OpenAI-compatible binding on `memframe serve`: `/v1/chat/completions` and `/v1/models`.

The API key is a memframe token and `model` names the workspace, so any chat client that lets a
person set a base URL, a key and a model gets memframe's memory with no change on its side. Each
request is one Assistant turn admitted by the same ingress as any other (no X-Memory-State, so the
server's current revision), run by `memframe.assistant.relay` under a live key session of the
token's user; its memory receipt comes back in response headers. Errors take OpenAI's shape,
`{"error": {"message", "type", "param", "code"}}`, so the client shows them as its own.
"""

from __future__ import annotations

import json
import logging
import queue
import secrets
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from memframe.api.deps import Endpoint, Service, User
from memframe.assistant.ingress import AssistantEndpoint
from memframe.assistant.memory_tool import TurnContext
from memframe.assistant.relay import RelayResult, check_client_tools, relay_turn
from memframe.core.errors import KeySessionUnavailable, MemframeError, NotFound
from memframe.core.turns import CallRecord

logger = logging.getLogger("memframe.api")

#: What the response says when no key session of the person's was live for the workspace.
NO_KEY_NOTE = (
    "no live key session of yours for this workspace, so memory was not provided and nothing is remembered; "
    "run `memframe key unlock` on your machine"
)

_TYPES = {401: "authentication_error", 403: "permission_error", 502: "api_error", 503: "api_error"}


def openai_error(status: int, message: str, code: str, param: str | None = None) -> JSONResponse:
    """One failure in OpenAI's shape, with the status that fits."""
    kind = _TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    payload = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(payload, status_code=status, headers=headers)


def _translated(exc: Exception, request: Request) -> Response:
    if isinstance(exc, MemframeError):
        return openai_error(exc.status, str(exc), exc.code)
    if isinstance(exc, RequestValidationError):
        problems = exc.errors()
        first = problems[0] if problems else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "body"
        problem = str(first.get("msg", "malformed")).removeprefix("Value error, ")
        if first.get("type") == "json_invalid":
            where, problem = "body", "not valid JSON"
        return openai_error(422, f"{where}: {problem}", "invalid_request", where)
    if isinstance(exc, HTTPException):
        return openai_error(exc.status_code, str(exc.detail), "http_error")
    logger.exception("internal error answering %s %s", request.method, request.url.path)
    return openai_error(500, "The server failed unexpectedly; see its log.", "internal")


class OpenAIRoute(APIRoute):
    """A route whose every failure, a dependency's (the bearer token) and the body's included,
    answers in OpenAI's error shape instead of memframe's."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except Exception as exc:  # every failure becomes one answer in OpenAI's shape
                return _translated(exc, request)

        return answer


router = APIRouter(prefix="/v1", tags=["openai"], route_class=OpenAIRoute)


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class ChatMessage(_Open):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None


class ToolFunction(_Open):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")


class ChatTool(_Open):
    type: Literal["function"]
    function: ToolFunction


class ChatRequest(_Open):
    """OpenAI's request: what memframe reads; every other field (sampling, penalties) is accepted,
    and the upstream model is called with serve's own settings."""

    model: str = Field(min_length=1, max_length=100, description="The workspace id (see GET /v1/models).")
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ChatTool] | None = None
    stream: bool = False


@router.get("/models")
def models(user: User, service: Service) -> dict[str, Any]:
    """The workspaces this token's user is a member of, their ids as model ids."""
    return {
        "object": "list",
        "data": [
            {"id": ws, "object": "model", "created": 0, "owned_by": "memframe"}
            for ws in service.accounts.workspaces(user)
        ],
    }


@router.post("/chat/completions", response_model=None)
def chat_completions(
    body: ChatRequest,
    user: User,
    endpoint: Endpoint,
    conversation: Annotated[str | None, Header(alias="X-Conversation-Id", max_length=100)] = None,
) -> Response:
    """One Assistant turn of a chat client, streamed as server-sent events when it asks."""
    messages = [m.model_dump(exclude_unset=True) for m in body.messages]
    tools = [t.model_dump(exclude_unset=True) for t in body.tools or ()]
    check_client_tools(tools)
    ctx = _admit(endpoint, user, body.model, conversation or "openai-" + secrets.token_hex(8))
    reply = _Reply(ctx, body.model)
    if not body.stream:
        result = relay_turn(endpoint.runtime, ctx, messages, tools)
        return JSONResponse(reply.completion(result), headers=reply.headers(result.calls, result))
    turn = _Turn(
        lambda on_text, on_call: relay_turn(endpoint.runtime, ctx, messages, tools, on_text=on_text, on_call=on_call)
    )
    first = turn.first()  # a failure before any answer is an error status, not a broken stream
    return StreamingResponse(
        reply.events(first, turn), media_type="text/event-stream", headers=reply.headers(turn.calls(), None)
    )


def _admit(endpoint: AssistantEndpoint, user: str, workspace_id: str, conversation: str) -> TurnContext:
    """The ingress: the admission row and the conversation's credential, under the person's live
    key session when there is one (a session that closes meanwhile admits the turn without one)."""
    assistant = endpoint.service.assistant
    try:
        key_session = assistant.live_key_session(user, workspace_id)
    except NotFound:
        raise NotFound(f"The model {workspace_id!r} is not a workspace of yours; GET /v1/models lists them.") from None

    def admit(session: str | None) -> TurnContext:
        return endpoint.admit(
            user,
            workspace_id,
            conversation,
            idempotency_key="openai-" + secrets.token_hex(12),
            key_session_id=session,
            memory_state=None,
        )

    try:
        return admit(key_session)
    except KeySessionUnavailable:
        if key_session is None:
            raise
        return admit(None)


class _Turn:
    """A relayed turn on a thread of its own, its text handed over piece by piece as it streams."""

    def __init__(self, run: Callable[[Callable[[str], None], Callable[[CallRecord], None]], RelayResult]) -> None:
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._calls: list[CallRecord] = []
        self._thread = threading.Thread(target=self._run, args=(run,), name="memframe-openai-turn", daemon=True)
        self._thread.start()

    def _run(self, run: Callable[[Callable[[str], None], Callable[[CallRecord], None]], RelayResult]) -> None:
        try:
            result = run(lambda piece: self._events.put(("text", piece)), self._calls.append)
        except Exception as exc:  # handed to the stream, which answers it in OpenAI's shape
            self._events.put(("error", exc))
        else:
            self._events.put(("done", result))

    def first(self) -> tuple[str, Any]:
        """The first piece of text, the whole result, or the failure (raised here)."""
        kind, value = self._events.get()
        if kind == "error":
            raise value
        return kind, value

    def rest(self) -> Iterator[tuple[str, Any]]:
        while True:
            kind, value = self._events.get()
            yield kind, value
            if kind != "text":
                return

    def calls(self) -> list[CallRecord]:
        return self._calls


class _Reply:
    """The answer in OpenAI's formats (a completion, or chunks), and memframe's receipt headers."""

    def __init__(self, ctx: TurnContext, model: str) -> None:
        self.ctx = ctx
        self.id = "chatcmpl-" + ctx.admission_id
        self.model = model
        self.created = int(time.time())

    def headers(self, calls: list[CallRecord], result: RelayResult | None) -> dict[str, str]:
        """Which revision the answer's first model call was given (the receipts route lists every
        call), the conversation to ask it of, and why memory was withheld when no key was live."""
        headers = {"X-Conversation-Id": self.ctx.conversation_id, "X-Memframe-Admission": self.ctx.admission_id}
        first = calls[0] if calls else None
        if first is not None:
            headers["X-Memframe-Memory-Status"] = first.status.value
            headers["X-Memframe-Memory-Revision"] = "none" if first.revision is None else str(first.revision)
        if self.ctx.key_session_id is None:
            headers["X-Memframe-Memory-Note"] = NO_KEY_NOTE
        for outcome in result.outcomes if result is not None else ():
            if outcome.version is not None:
                headers["X-Memframe-Remembered"] = str(outcome.version)
            if outcome.proposal_id is not None:
                headers["X-Memframe-Proposal"] = outcome.proposal_id
        return headers

    def completion(self, result: RelayResult) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": result.content or None}
        if result.tool_calls:
            message["tool_calls"] = _tool_calls(result)
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": result.finish_reason}],
        }

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> str:
        chunk = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"

    def events(self, first: tuple[str, Any], turn: _Turn) -> Iterator[str]:
        """The whole stream: the role, text as it comes, the client's tool calls, the end, [DONE]."""
        yield self._chunk({"role": "assistant", "content": ""})
        kind, value = first
        events = turn.rest() if kind == "text" else iter(())
        while True:
            if kind == "text":
                yield self._chunk({"content": value})
            elif kind == "done":
                if value.tool_calls:
                    yield self._chunk({"tool_calls": _tool_calls(value, indexed=True)})
                yield self._chunk({}, value.finish_reason)
                yield "data: [DONE]\n\n"
                return
            else:  # failed after the answer began: OpenAI's clients raise on an error event
                error = value if isinstance(value, MemframeError) else None
                message = str(error) if error else "The server failed unexpectedly; see its log."
                payload = {
                    "message": message,
                    "type": "api_error",
                    "param": None,
                    "code": getattr(error, "code", "internal"),
                }
                if error is None:
                    logger.error("internal error streaming an answer: %s", type(value).__name__)
                yield f"data: {json.dumps({'error': payload})}\n\n"
                return
            kind, value = next(events)


def _tool_calls(result: RelayResult, *, indexed: bool = False) -> list[dict[str, Any]]:
    return [
        {
            **({"index": i} if indexed else {}),
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.raw_arguments or json.dumps(call.arguments)},
        }
        for i, call in enumerate(result.tool_calls)
    ]
