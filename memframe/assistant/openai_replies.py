"""Reading what an OpenAI-compatible chat server answers: streamed events, tool calls, error bodies.

Kept apart from the client (`openai_chat`) because this is where a server's
answer is judged complete or not: a stream ended early, a tool call cut in
half, arguments that are not JSON. The client sends; this module reads.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from memframe.assistant.models import ENDED_EARLY, ModelReply, TextCallback, ToolCall
from memframe.core.errors import ModelUnavailable

#: The longest server message an error line quotes.
SERVER_MESSAGE_CHARS = 240


class EmptyStream(Exception):
    """The server answered a streamed request with an empty stream: no text, no tool call, no end."""


def tool_call(call_id: Any, index: int, name: Any, raw: Any) -> ToolCall:
    """One tool call as the model wrote it: its arguments read, or `malformed` saying why they could not be."""
    if not isinstance(name, str) or not name:
        raise TypeError("a tool call without a name")
    arguments, malformed = _arguments(raw)
    raw_text = raw if isinstance(raw, str) else json.dumps(raw if raw is not None else {}, ensure_ascii=False)
    return ToolCall(str(call_id or f"call_{index}"), name, arguments, malformed, raw_text)


def _arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    """Tool arguments arrive as a JSON string (or, from some servers, an object), read as leniently as
    JSON allows: a control character inside a string is taken as written."""
    if isinstance(raw, dict):
        return raw, None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None
    try:
        value = json.loads(raw, strict=False)  # control characters inside strings: small models write raw newlines
    except (TypeError, ValueError):
        return {}, "its arguments were not JSON"
    if not isinstance(value, dict):
        return {}, "its arguments were not a JSON object"
    return value, None


def read_events(lines: Iterator[str], on_text: TextCallback | None, base_url: str, limit: int) -> ModelReply:
    """Assemble a streamed chat completion: text deltas as they come, tool-call deltas by index.

    Servers stream one token per delta, so more than `limit` (the request's
    max_tokens) non-empty deltas means the server ignores the limit: reading
    stops there and the answer is cut off, as if the server had kept it. A
    stream that says [DONE] without a finish_reason was ended early by the server
    (llama-cpp-python's `interrupt_requests` does this when another request
    arrives): its text is kept and marked `ENDED_EARLY`, and a tool call it
    held is never run, since its arguments may be incomplete.
    """
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    done = False
    events = 0
    pieces = 0
    for line in lines:
        if not line.startswith("data:"):
            continue  # comments, event names, keep-alives
        events += 1
        data = line[5:].strip()
        if data == "[DONE]":
            done = True
            break
        try:
            event = json.loads(data)
            choices = event.get("choices") or []
        except (ValueError, AttributeError):
            raise ModelUnavailable(f"The model server at {base_url} streamed something that is not JSON.") from None
        said = error_message(event)
        if said is not None:
            raise ModelUnavailable(f"The model server at {base_url} stopped the answer with an error: {said}")
        for choice in choices:
            delta = choice.get("delta") or {}
            piece = delta.get("content")
            piece = piece if isinstance(piece, str) else ""
            parts = delta.get("tool_calls") or []
            pieces += bool(piece) + sum(map(_carries_arguments, parts))
            if pieces > limit:
                finish, done = "length", True
                break
            if piece:
                content.append(piece)
                if on_text is not None:
                    on_text(piece)
            for part in parts:
                _merge_tool_delta(calls, part)
            if choice.get("finish_reason"):
                finish = choice["finish_reason"]
        if done:
            break
    if not events:
        # A 200 with no event at all: llama-cpp-python's chatml-function-calling does this when it picks a
        # tool on automatic choice (most often after a tool result). Nothing reached the person, so the
        # caller asks plainly.
        raise EmptyStream
    if not done and finish is None:
        raise ModelUnavailable(f"The model server at {base_url} stopped streaming before the answer was complete.")
    if finish is None:
        if calls:
            raise ModelUnavailable(
                f"The model server at {base_url} ended the answer early, in the middle of a tool call; "
                "the tool was not run."
            )
        finish = ENDED_EARLY
    try:
        tool_calls = tuple(
            tool_call(c.get("id"), i, c.get("name"), "".join(c["arguments"])) for i, c in sorted(calls.items())
        )
    except TypeError:
        raise ModelUnavailable(f"The model server at {base_url} streamed a tool call without a name.") from None
    return ModelReply("".join(content) if content else None, tool_calls, finish)


def _carries_arguments(part: Any) -> bool:
    return isinstance(part, dict) and bool((part.get("function") or {}).get("arguments"))


def _merge_tool_delta(calls: dict[int, dict[str, Any]], part: dict[str, Any]) -> None:
    index = part.get("index", len(calls))
    call = calls.setdefault(index, {"id": None, "name": None, "arguments": []})
    if part.get("id"):
        call["id"] = part["id"]
    function = part.get("function") or {}
    if function.get("name"):
        call["name"] = function["name"]  # some servers repeat the name in every chunk: never concatenate it
    if function.get("arguments"):
        call["arguments"].append(function["arguments"])


def error_message(payload: Any) -> str | None:
    """The message of an OpenAI-shaped error (`{"error": {"message": ...}}`), on one line, or None."""
    error = payload.get("error") if isinstance(payload, dict) else None
    said = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
    if not isinstance(said, str) or not said.strip():
        return None
    text = " ".join(said.split())
    return text if len(text) <= SERVER_MESSAGE_CHARS else text[: SERVER_MESSAGE_CHARS - 1] + "…"
