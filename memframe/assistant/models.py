"""Model clients: one small protocol, a scripted model and an OpenAI-compatible client.

The runtime attaches recall inside the binding immediately before every call,
so a client only ever sees finished messages; it never fetches memory itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from memframe.core.errors import MemframeError

Message = dict[str, Any]


class ModelUnavailable(MemframeError):
    """The model server could not be reached or answered badly; nothing was changed."""

    code = "model_unavailable"
    status = 502


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ModelReply:
    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()


class ModelClient(Protocol):
    def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelReply:
        """One model call: the messages as they go out (recall already attached) and the tools offered."""
        ...


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
_BLOCK = re.compile(r"<workspace-memory[^>]*>.*?</workspace-memory[^>]*>", re.S)


@dataclass
class ScriptedModel:
    """A deterministic model for demos and tests.

    It answers by quoting the memory block it was given (or the "not provided
    because …" note, or saying it was given none), so a person can see exactly
    what recall supplied. `remember: LINE`, `forget: LINE` and `replace: OLD =>
    NEW` make it call remember_in_memory; `read: PATH`, `list documents`,
    `search: TEXT` and `note: PATH => TEXT` call the document tools. Every call's
    system message is kept in `seen`, so tests can prove what each call received.
    """

    seen: list[str] = field(default_factory=list)
    calls: int = 0

    def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelReply:
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
        blocks = [re.sub(r' boundary="[^"]*"', "", b) for b in _BLOCK.findall(system)]
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


# --- OpenAI-compatible chat completions ----------------------------------------------------


class OpenAIChatModel:
    """Chat completions over httpx: llama.cpp server, vLLM, Ollama and the like."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        transport: Any = None,
    ) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)

    def complete(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> ModelReply:
        import httpx

        body: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if tools:
            body["tools"] = list(tools)
        try:
            response = self._client.post("/chat/completions", json=body)
        except httpx.TimeoutException:
            raise ModelUnavailable(f"The model server at {self.base_url} did not answer in time.") from None
        except httpx.HTTPError:
            raise ModelUnavailable(f"The model server at {self.base_url} cannot be reached.") from None
        if response.status_code != 200:
            raise ModelUnavailable(f"The model server answered with status {response.status_code}.")
        try:
            message = response.json()["choices"][0]["message"]
            calls = tuple(
                ToolCall(
                    str(c.get("id") or f"call_{i}"),
                    str(c["function"]["name"]),
                    _arguments(c["function"].get("arguments")),
                )
                for i, c in enumerate(message.get("tool_calls") or [])
            )
            return ModelReply(message.get("content"), calls)
        except (ValueError, KeyError, IndexError, TypeError):
            raise ModelUnavailable("The model server's answer was not a chat completion.") from None

    def close(self) -> None:
        self._client.close()


def _arguments(raw: Any) -> dict[str, Any]:
    """Tool arguments arrive as a JSON string (or, from some servers, an object)."""
    if isinstance(raw, dict):
        return raw
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        return {"_unparsed": str(raw)}
    return value if isinstance(value, dict) else {"_unparsed": value}
