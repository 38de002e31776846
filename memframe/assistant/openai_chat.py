"""The OpenAI-compatible chat-completions client: what real model servers (llama-cpp-python,
Ollama, vLLM, LM Studio) are sent, and how their answers and refusals are read.

It speaks the one `ModelClient` protocol of `models`; the runtime attaches recall before
every call, so this client only ever sends finished messages.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from memframe.assistant.models import Message, ModelReply, TextCallback
from memframe.assistant.openai_replies import SERVER_MESSAGE_CHARS, EmptyStream, error_message, read_events, tool_call
from memframe.core.errors import ModelUnavailable
from memframe.core.recall import MEMORY_BLOCK_CLOSE, MEMORY_BLOCK_OPEN

#: tool_choice values the OpenAI API names; anything else is the name of a tool to force.
TOOL_CHOICES = ("auto", "none", "required")
DEFAULT_MAX_TOKENS = 1024
DEFAULT_TIMEOUT = 120.0
_MENTIONS_STREAMING = re.compile(r"\bstream(ing|ed)?\b", re.I)
#: Where every recall block's markers start. A small model that recites the block writes its closing
#: marker, and often runs out of tokens or misspells the boundary value before that line is whole: the
#: start of a marker is where its answer has ended.
MARKER_STOPS = [MEMORY_BLOCK_OPEN, MEMORY_BLOCK_CLOSE[:-1]]


@dataclass(frozen=True)
class ModelOptions:
    """Everything that shapes a request to an OpenAI-compatible server, in one place.

    `max_tokens` is always sent: a server without it may generate until its
    context is full. A streamed answer is also cut off here at `max_tokens`
    pieces, because a server may ignore the limit (llama-cpp-python's
    chatml-function-calling does when it chooses between text and tools
    itself); closing the stream is what stops such a server. `tool_choice` is
    sent whenever tools are: some chat formats (llama-cpp-python's
    chatml-function-calling) render the tool list only when it is set. A
    tool's name forces that tool on the call that answers the person's
    message; the calls after its result go back to "auto", so a forced tool
    cannot loop. `system_as_user` folds the system message (the recall
    block included) into the first user message, for chat formats that drop
    system messages. `stream` asks for server-sent events; a server that answers
    plain JSON, or refuses to stream this request, is read without streaming.
    `temperature` is sent only when set (None: the server's own default).
    The starts of the recall block's markers are sent as `stop` sequences
    with a block: a small model that runs on past its answer into the
    memory text stops where it would write a marker.
    """

    url: str
    name: str = "default"
    api_key: str | None = field(default=None, repr=False)
    max_tokens: int = DEFAULT_MAX_TOKENS
    tool_choice: str = "auto"
    timeout: float = DEFAULT_TIMEOUT
    system_as_user: bool = False
    stream: bool = True
    temperature: float | None = None

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be 1 or more")
        if self.timeout <= 0:
            raise ValueError("the model timeout must be more than 0 seconds")
        if not self.tool_choice.strip():
            raise ValueError("tool_choice must be auto, none, required or a tool's name")
        if self.temperature is not None and not self.temperature >= 0:
            raise ValueError("the temperature must be 0 or more")


class OpenAIChatModel:
    """Chat completions over httpx: llama.cpp server, vLLM, Ollama and the like."""

    def __init__(self, options: ModelOptions | str, model: str | None = None, *, transport: Any = None) -> None:
        if isinstance(options, str):  # the older (url, name) spelling
            options = ModelOptions(options, model or "default")
        self.options = options
        self.base_url = options.url.rstrip("/")
        self.model = options.name
        self.label = f"{options.name} at {self.base_url}"
        self._transport = transport
        # The kinds of call (by the tool_choice sent) this server refused to stream: asked plainly from then on.
        self._plain: set[str] = set()

    @cached_property
    def _client(self) -> Any:
        """Made on the first call, so a frame that never sends pays nothing for httpx at start-up."""
        import httpx

        key = self.options.api_key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(
            base_url=self.base_url, headers=headers, timeout=self.options.timeout, transport=self._transport
        )

    # --- the request ---------------------------------------------------------------------

    def request_body(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], *, stream: bool) -> Message:
        """The exact JSON sent: valid for the strictest server we know (llama-cpp-python's schema)."""
        outgoing = [_wire_message(m) for m in messages]
        if self.options.system_as_user:
            outgoing = fold_system_into_user(outgoing)
        body: Message = {
            "model": self.model,
            "messages": outgoing,
            "max_tokens": int(self.options.max_tokens),
            "stream": stream,
        }
        if self.options.temperature is not None:
            body["temperature"] = self.options.temperature
        stops = stop_sequences(outgoing)
        if stops:
            body["stop"] = stops
        if tools:
            body["tools"] = list(tools)
            body["tool_choice"] = self._tool_choice(messages, tools)
        return body

    def _tool_choice(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]]) -> Any:
        choice = self.options.tool_choice
        answering_the_person = bool(messages) and messages[-1].get("role") == "user"
        if choice in ("auto", "none"):
            return choice
        if not answering_the_person:
            return "auto"  # after a tool result: free to answer, so a forced tool cannot loop
        if choice == "required":
            return choice
        offered = {t.get("function", {}).get("name") for t in tools}
        if choice not in offered:
            return "auto"  # e.g. remember_in_memory while memory is Off: it is not offered at all
        return {"type": "function", "function": {"name": choice}}

    # --- the call ------------------------------------------------------------------------

    def complete(
        self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], *, on_text: TextCallback | None = None
    ) -> ModelReply:
        """One call, streamed unless this kind of call was refused a stream before (see `ModelClient`).

        A kind is the tool_choice sent: llama-cpp-python refuses to stream an automatic
        tool choice (with a 500, or since 0.3.36 with an empty stream) and streams every
        other. The refused call is asked again plainly, once, and its kind is never
        streamed again, so no later call is sent twice.
        """
        body = self.request_body(messages, tools, stream=self.options.stream)
        kind = json.dumps(body.get("tool_choice"))
        reply: ModelReply | None = None
        if self.options.stream and kind not in self._plain:
            try:
                reply = self._post(body, on_text)
            except (_StreamRefused, EmptyStream):
                self._plain.add(kind)  # nothing was shown or done: ask this call again, plainly
        if reply is None:
            reply = self._post({**body, "stream": False}, None)
            if on_text is not None and reply.content:
                on_text(reply.content)
        if on_text is not None and reply.tool_calls:
            on_text("")  # the caller may stop here, before the tool runs
        return _cut_at(reply, body.get("stop") or [])

    def _post(self, body: Message, on_text: TextCallback | None) -> ModelReply:
        import httpx

        try:
            with self._client.stream("POST", "/chat/completions", json=body) as response:
                if response.status_code != 200:
                    response.read()
                    raise self._refusal(response, streaming=bool(body.get("stream")))
                kind = response.headers.get("content-type", "")
                if "text/event-stream" in kind:
                    return read_events(response.iter_lines(), on_text, self.base_url, self.options.max_tokens)
                response.read()
                reply = self._read_json(response)  # a server that does not stream: the answer comes whole
                if on_text is not None and reply.content:
                    on_text(reply.content)
                return reply
        except httpx.TimeoutException:
            raise ModelUnavailable(
                f"The model server at {self.base_url} did not answer in time ({self.options.timeout:g} s; "
                "--model-timeout sets the limit). It may still be working on that request, and the next one "
                "can wait behind it."
            ) from None
        except httpx.RemoteProtocolError:
            raise ModelUnavailable(
                f"The model server at {self.base_url} closed the connection before the answer was complete."
            ) from None
        except httpx.HTTPError:
            raise ModelUnavailable(f"The model server at {self.base_url} cannot be reached.") from None

    def _refusal(self, response: Any, *, streaming: bool) -> Exception:
        said = _server_message(response)
        if streaming and response.status_code >= 400 and _MENTIONS_STREAMING.search(said):
            return _StreamRefused(said)
        if response.status_code == 404 and _openai_error(response) is None:
            hint = (
                ""
                if self.base_url.endswith("/v1")
                else f"; OpenAI-compatible servers usually serve it under {self.base_url}/v1"
            )
            return ModelUnavailable(f"The model server at {self.base_url} has no /chat/completions (404{hint}).")
        where = f"The model server at {self.base_url} answered with status {response.status_code}"
        key = " (memframe sends $MEMFRAME_MODEL_KEY as its API key)" if response.status_code in (401, 403) else ""
        return ModelUnavailable(f"{where}: {said}{key}" if said else f"{where}{key}.")

    def _read_json(self, response: Any) -> ModelReply:
        if _looks_like_html(response):
            raise ModelUnavailable(_html_message(self.base_url))
        try:
            choice = response.json()["choices"][0]
            message = choice["message"]
            calls = tuple(
                tool_call(c.get("id"), i, c["function"]["name"], c["function"].get("arguments"))
                for i, c in enumerate(message.get("tool_calls") or [])
            )
            content = message.get("content")
            if content is not None and not isinstance(content, str):
                raise TypeError("content is not text")
            return ModelReply(content, calls, choice.get("finish_reason"))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise ModelUnavailable(
                f"The model server at {self.base_url} answered with something that is not a chat completion."
            ) from None

    def close(self) -> None:
        if "_client" in self.__dict__:
            self._client.close()


class _StreamRefused(Exception):
    """The server refused to stream this request (llama-cpp-python: automatic tool choice)."""


def _wire_message(message: Message) -> Message:
    """A copy every server accepts: content is never null (llama-cpp-python refuses it with a 500)."""
    out = dict(message)
    if out.get("content") is None:
        out["content"] = ""
    return out


def stop_sequences(messages: Sequence[Message]) -> list[str]:
    """The starts of the recall block's markers, when one of these messages carries a block (folded
    into the person's message too): generated text that reaches one has left the answer for memory."""
    for message in messages:
        content = message.get("content")
        parts = [content] if isinstance(content, str) else [p.get("text") for p in content or [] if isinstance(p, dict)]
        if any(MEMORY_BLOCK_OPEN in (part or "") for part in parts):
            return list(MARKER_STOPS)
    return []


def _cut_at(reply: ModelReply, stops: Sequence[str]) -> ModelReply:
    """The reply's text up to its first stop sequence, for a server that does not honour `stop`: the
    answer ended there (its stored and returned text; a streamed one was shown as it came)."""
    content = reply.content or ""
    ends = [content.find(s) for s in stops if s in content]
    if not ends:
        return reply
    return dataclasses.replace(reply, content=content[: min(ends)], finish_reason="stop")


def fold_system_into_user(messages: list[Message]) -> list[Message]:
    """The system messages' text, recall block included, put at the start of the first user message.

    For chat formats that drop system messages (llama-cpp-python's `gemma`), so
    memory still reaches the model. Nothing else moves.
    """
    system = [str(m.get("content") or "") for m in messages if m.get("role") == "system"]
    rest = [dict(m) for m in messages if m.get("role") != "system"]
    preface = "\n\n".join(s for s in system if s)
    if not preface:
        return rest
    for message in rest:
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                message["content"] = [{"type": "text", "text": preface}, *content]
            else:
                message["content"] = f"{preface}\n\n{content or ''}"
            return rest
    return [{"role": "user", "content": preface}, *rest]


def _looks_like_html(response: Any) -> bool:
    kind = response.headers.get("content-type", "")
    return "html" in kind or response.content.lstrip()[:1] == b"<"


def _html_message(base_url: str) -> str:
    return (
        f"The model server at {base_url} answered with a web page, not JSON: is this the server's "
        "OpenAI-compatible API (often ending in /v1)?"
    )


def _openai_error(response: Any) -> str | None:
    """The server's own message when it answered in the OpenAI error shape (vLLM, Ollama, llama.cpp)."""
    try:
        return error_message(response.json())
    except ValueError:
        return None


def _server_message(response: Any) -> str:
    """The server's own words about a refusal, on one line and short."""
    try:
        payload = response.json()
    except ValueError:
        payload = None
    said: Any = None
    if isinstance(payload, dict):
        said = payload.get("error", payload.get("detail", payload.get("message")))
        if isinstance(said, dict):
            said = said.get("message", said.get("msg"))
        elif isinstance(said, list) and said and isinstance(said[0], dict):
            said = said[0].get("msg")
    elif _looks_like_html(response):
        return "a web page, not JSON (is this the server's OpenAI-compatible API, often ending in /v1?)"
    if said is None:
        said = response.text if payload is None else json.dumps(payload)
    text = " ".join(str(said).split())
    return text if len(text) <= SERVER_MESSAGE_CHARS else text[: SERVER_MESSAGE_CHARS - 1] + "…"
