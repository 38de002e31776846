"""Model clients: one small protocol and a scripted model (the OpenAI-compatible client is
`openai_chat`).

The runtime attaches recall inside the binding immediately before every call,
so a client only ever sees finished messages; it never fetches memory itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

Message = dict[str, Any]


TextCallback = Callable[[str], None]

#: memframe's own finish_reason for a stream the server ended (with [DONE]) without giving one:
#: the answer may be incomplete, and is reported as a cut-off answer is.
ENDED_EARLY = "ended_early"
#: What the scripted model is called wherever a person is told who answers.
SCRIPTED_DEMO = "the scripted demo (no model is configured; see the README's 'Model servers')"
#: Every scripted answer starts with this, so it is never taken for a language model's.
SCRIPTED_MARK = "(scripted demo) "


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    #: Why the arguments could not be read (not JSON, not an object); the tool is then not run.
    malformed: str | None = None
    #: The arguments exactly as the model wrote them, echoed back in the assistant message.
    raw_arguments: str | None = None


@dataclass(frozen=True)
class ModelReply:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    #: The server's finish_reason: "length" means the answer was cut off at max_tokens;
    #: `ENDED_EARLY` that the server ended the stream without one.
    finish_reason: str | None = None


class ModelClient(Protocol):
    def complete(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], *, on_text: TextCallback | None = None
    ) -> ModelReply:
        """One model call: the messages as they go out (recall already attached) and the tools offered.

        `on_text`, when given, receives the answer's text piece by piece as it arrives
        (a client that cannot stream calls it once with the whole text), and once more with
        "" before a reply that carries tool calls is returned. It is also the caller's way to
        stop: an exception raised from it ends the call, so no tool of that reply is run.
        """
        ...

    def close(self) -> None:
        """Let go of what the client holds (an HTTP client's connection pool) once the caller is done."""
        ...


def describe(model: ModelClient | None) -> str:
    """Who answers, for people: a model's name and server, or the scripted demo (None: no model given)."""
    if model is None or isinstance(model, ScriptedModel):
        return SCRIPTED_DEMO
    return str(getattr(model, "label", None) or type(model).__name__)


# --- the scripted model ------------------------------------------------------------------

_COMMANDS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^\s*remember:\s*(.+?)\s*$", re.S), "add"),
    (re.compile(r"^\s*forget:\s*(.+?)\s*$", re.S), "remove"),
    (re.compile(r"^\s*replace:\s*(.+?)\s*=>\s*(.+?)\s*$", re.S), "replace"),
]
_DOC_COMMANDS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^\s*read:\s*(\S.*?)\s*$"), "read_document"),
    (re.compile(r"^\s*list documents\s*$", re.I), "list_documents"),
    (re.compile(r"^\s*search:\s*(\S.*?)\s*$"), "search_documents"),
    (re.compile(r"^\s*note:\s*(\S+)\s*=>\s*(.+?)\s*$", re.S), "create_note"),
]
_BLOCK = re.compile(r"\[workspace-memory[^\]]*\].*?\[/workspace-memory[^\]]*\]", re.S)


@dataclass
class ScriptedModel:
    """A deterministic model for demos and tests.

    It answers by quoting the memory block it was given (or the "not provided
    because …" note, or saying it was given none), so a person can see exactly
    what recall supplied. `remember: LINE`, `forget: LINE` and `replace: OLD =>
    NEW` make it call remember_in_memory; `read: PATH`, `list documents`,
    `search: TEXT` and `note: PATH => TEXT` call the document tools. Every call's
    system message is kept in `seen`, so tests can prove what each call received.
    Every answer starts with `SCRIPTED_MARK`: it answers only when no model is
    configured, and a person must never take it for one.
    """

    seen: list[str] = field(default_factory=list)
    calls: int = 0

    def complete(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], *, on_text: TextCallback | None = None
    ) -> ModelReply:
        reply = self._answer(messages, tools)
        if reply.content is not None:
            reply = ModelReply(SCRIPTED_MARK + reply.content, reply.tool_calls, reply.finish_reason)
        if on_text is not None and reply.content:
            on_text(reply.content)
        if on_text is not None and reply.tool_calls:
            on_text("")  # the caller may stop here, before the tool runs
        return reply

    def close(self) -> None:
        """Nothing to let go of: a scripted model holds no connection."""

    def _answer(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelReply:
        self.calls += 1
        system = next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")
        self.seen.append(system)
        last = messages[-1] if messages else {"role": "user", "content": ""}
        if last.get("role") == "tool":
            return ModelReply(f"Tool result: {last.get('content')}")
        text = str(last.get("content") or "")
        offered = {t["function"]["name"] for t in tools if "function" in t}
        call = self._tool_call(text, offered)
        if call is not None:
            return ModelReply(None, (call,))
        # The boundary is random per call: quoted without it, so what a person is shown is stable.
        blocks = [re.sub(r" boundary=[0-9a-f]+", "", b) for b in _BLOCK.findall(system)]
        if not blocks:
            return ModelReply("I was given no memory for this message.")
        return ModelReply("This is the memory I was given:\n" + "\n".join(blocks))

    def _tool_call(self, text: str, offered: set[str]) -> ToolCall | None:
        call_id = f"call_{self.calls}"
        if "remember_in_memory" in offered:
            for pattern, op in _COMMANDS:
                match = pattern.match(text)
                if match:
                    edit: dict[str, str] = {"op": op, "line": match.group(1)}
                    if op == "replace":
                        edit["new_line"] = match.group(2)
                    return ToolCall(call_id, "remember_in_memory", {"edits": [edit]})
        for pattern, name in _DOC_COMMANDS:
            match = pattern.match(text)
            if match and name in offered:
                args: dict[str, Any] = {}
                if name in ("read_document",):
                    args = {"path": match.group(1)}
                elif name == "search_documents":
                    args = {"query": match.group(1)}
                elif name == "create_note":
                    args = {"path": match.group(1), "text": match.group(2)}
                return ToolCall(call_id, name, args)
        return None
