"""A turn of another chat client: its conversation relayed to the model, with memframe's memory.

An OpenAI-compatible client sends its whole conversation and its own tools with every request.
The relay passes them through unchanged, attaches recall through the runtime's own binding
immediately before every model call, offers `remember_in_memory` beside the client's tools
(except in Off), runs that tool's calls itself and calls the model again, so the client never
sees them; a call of one of the client's tools ends the turn and goes back to the client.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memframe.assistant import memory_tool
from memframe.assistant.memory_tool import TurnContext
from memframe.assistant.models import Message, TextCallback, ToolCall
from memframe.assistant.runtime import Runtime
from memframe.core.errors import InvalidInput, ModelUnavailable
from memframe.core.turns import CallRecord, OutcomeKind, ToolOutcome
from memframe.core.types import Mode

MEMORY_TOOL = memory_tool.SCHEMA["function"]["name"]


@dataclass
class RelayResult:
    """What the client is answered: text, its own tool calls, and why the model stopped."""

    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    #: Each model call's recall, in order: the receipts of this turn.
    calls: list[CallRecord] = field(default_factory=list)
    #: What memframe's own tool calls did (remembered, proposed, refused).
    outcomes: list[ToolOutcome] = field(default_factory=list)


def check_client_tools(tools: Sequence[dict[str, Any]]) -> None:
    """A client tool may not take the memory tool's name: the model could not tell them apart."""
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name") == MEMORY_TOOL:
            raise InvalidInput(f"tools: {MEMORY_TOOL} is memframe's own tool; name the client's tool otherwise.")


def relay_turn(
    runtime: Runtime,
    ctx: TurnContext,
    messages: Sequence[Message],
    client_tools: Sequence[dict[str, Any]],
    *,
    on_text: TextCallback | None = None,
    on_call: Callable[[CallRecord], None] | None = None,
) -> RelayResult:
    """One admitted turn: model calls (recall bound before each) until an answer or a client tool call.

    `on_text` receives the answer's text as it arrives, every model call's in turn, and
    `on_call` each call's recall once it is bound, before the call is made. A model
    call that fails raises ModelUnavailable; its message says what memframe's own tool calls
    of this turn had already done, since those stand.
    """
    own = ctx.mode is not Mode.OFF
    tools = [memory_tool.SCHEMA, *client_tools] if own else list(client_tools)
    conversation = [dict(m) for m in messages]
    result = RelayResult()
    said = new_paragraph = False

    def heard(piece: str) -> None:
        nonlocal said, new_paragraph
        if piece and on_text is not None:
            if new_paragraph:  # a later call's text is a new paragraph of the same answer
                on_text("\n\n")
            on_text(piece)
        said = said or bool(piece)
        new_paragraph = new_paragraph and not piece

    for step in range(runtime.max_steps):
        outgoing, record, seen = runtime.bind(ctx, conversation, step)
        result.calls.append(record)
        if on_call is not None:
            on_call(record)
        new_paragraph = said
        try:
            reply = runtime.model.complete(outgoing, tools, on_text=heard if on_text is not None else None)
        except ModelUnavailable as exc:
            done = [o.message for o in result.outcomes]
            if done:
                raise ModelUnavailable(f"{exc} Before it failed: {' '.join(done)}") from None
            raise
        if reply.content:
            result.content = f"{result.content}\n\n{reply.content}" if result.content else reply.content
            said = True
        mine = [c for c in reply.tool_calls if own and c.name == MEMORY_TOOL]
        result.tool_calls = [c for c in reply.tool_calls if not (own and c.name == MEMORY_TOOL)]
        if not mine:
            result.finish_reason = _finish(reply.finish_reason, bool(result.tool_calls))
            return result
        conversation.append(_assistant_message(reply.content, mine))
        for call in mine:
            outcome = (
                ToolOutcome(call.name, OutcomeKind.ERROR, f"Not run: {call.malformed}; nothing was done.")
                if call.malformed
                else memory_tool.remember(runtime.automation, ctx, call.arguments, seen_revision=seen)
            )
            result.outcomes.append(outcome)
            conversation.append({"role": "tool", "tool_call_id": call.id, "content": outcome.message})
        if result.tool_calls:  # the client's own calls of the same response go back to it now
            result.finish_reason = "tool_calls"
            return result
    result.content = result.content or "I stopped after several memory tool calls without a final answer."
    result.finish_reason = "stop"
    return result


def _assistant_message(content: str | None, calls: Sequence[ToolCall]) -> Message:
    return {
        "role": "assistant",
        "content": content or "",  # never null: strict servers refuse it
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.raw_arguments or "{}"}}
            for c in calls
        ],
    }


def _finish(reason: str | None, client_calls: bool) -> str:
    """OpenAI's finish_reason for the client: a cut-off answer says so, anything else is a stop."""
    if client_calls:
        return "tool_calls"
    return "length" if reason == "length" else "stop"
