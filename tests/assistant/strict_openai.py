"""A strict fake OpenAI-compatible chat server: it refuses what llama-cpp-python 0.3.36 refuses.

Read from llama-cpp-python's own request schema (llama_cpp/server/types.py,
llama_cpp/llama_types.py) and chat formats (llama_cpp/llama_chat_format.py):

- an assistant message whose content is null fails the request schema, and the
  server's route handler turns every exception into a 500 with the message;
- without max_tokens the server generates until its context is full: refused here;
- tools sent without tool_choice are never rendered by chatml-function-calling:
  refused here, so the mistake cannot come back unnoticed;
- Gemma's own template raises "Conversation roles must alternate" for two user
  (or two assistant) messages in a row: a 500;
- streaming with tool_choice "auto" when the model picks a tool raises
  "Automatic streaming tool choice is not supported" after the response has
  begun: a 200 with no event at all (0.3.36; older versions answered a 500
  with that message, `auto_stream_refusal=True`);
- on automatic tool choice it generates without max_tokens (until its stop
  word or a full context); this fake never honours max_tokens at all, and a
  stream goes on until the client hangs up (`hung_up` counts those streams);
- with `interrupt_requests` (its default) a second request ends a stream early:
  `data: [DONE]` with no finish_reason (`EndedEarly`);
- a server may refuse to stream at all (`refuses_streaming=True`: a 400 saying
  so) and answers an unknown model with a 404 in OpenAI's error shape
  (`known_models`), as vLLM and Ollama do.

Replies are scripted (`FromRequest` makes one from the request it answers, as a model reads its
prompt); each request is recorded exactly as received.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ROLES = {"system", "user", "assistant", "tool", "function"}


@dataclass
class Text:
    content: str
    finish_reason: str = "stop"


@dataclass
class Call:
    name: str
    arguments: str  # exactly as the model wrote it: may be invalid JSON on purpose
    call_id: str = "call_0"


@dataclass
class Raw:
    status: int
    body: bytes
    content_type: str = "application/json"


@dataclass
class CutStream:
    """Streams these content pieces, then closes the connection: no finish_reason, no [DONE]."""

    pieces: list[str] = field(default_factory=list)


@dataclass
class EndedEarly:
    """Streams these content pieces (and a tool call's first arguments, if any), then `data: [DONE]` with no
    finish_reason: how llama-cpp-python ends a stream another request interrupted."""

    pieces: list[str] = field(default_factory=list)
    call: Call | None = None


@dataclass
class FromRequest:
    """The reply `make` writes from the request's body: an answer that depends on what was sent."""

    make: Callable[[dict[str, Any]], Text | Call]


Reply = Text | Call | Raw | CutStream | EndedEarly | FromRequest


def refusal(request: dict[str, Any]) -> str | None:
    """What llama-cpp-python would refuse in this request, or None."""
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: field required"
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ROLES:
            return f"messages.{i}.role: input should be one of {sorted(ROLES)}"
        content = m.get("content", "")
        if role == "assistant" and "content" in m and not isinstance(content, str):
            return f"messages.{i}.assistant.content: Input should be a valid string [input_value=None]"
        if role == "tool" and not isinstance(m.get("tool_call_id"), str):
            return f"messages.{i}.tool.tool_call_id: Field required"
        for call in m.get("tool_calls") or []:
            if not isinstance(call.get("function", {}).get("arguments"), str):
                return f"messages.{i}.tool_calls.function.arguments: Input should be a valid string"
    if not isinstance(request.get("max_tokens"), int):
        return "max_tokens must be an integer: without it the server generates until its context is full"
    if request.get("tools") and request.get("tool_choice") is None:
        return "tools without tool_choice are not rendered by chatml-function-calling"
    talk = [m["role"] for m in messages if m["role"] in ("user", "assistant")]
    for a, b in itertools.pairwise(talk):
        if a == b:
            return "Conversation roles must alternate user/assistant/user/assistant/..."
    return None


class StrictChatServer:
    """POST /v1/chat/completions on loopback, strict as llama-cpp-python; records every request."""

    def __init__(
        self,
        *,
        streams: bool = True,
        auto_stream_refusal: bool = False,
        refuses_streaming: bool = False,
        known_models: set[str] | None = None,
    ) -> None:
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.refusals: list[str] = []
        self.streams = streams  # False: a server that answers plain JSON even when asked to stream
        self.auto_stream_refusal = auto_stream_refusal
        self.refuses_streaming = refuses_streaming
        self.known_models = known_models  # None: any model name is served
        self.delay = 0.0
        self.delay_per_chunk = 0.0
        self.hung_up = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                if fake.delay:
                    threading.Event().wait(fake.delay)
                if self.path != "/v1/chat/completions":
                    return self._send(404, json.dumps({"detail": "Not Found"}).encode())
                why = refusal(body)
                if why is not None:
                    fake.refusals.append(why)
                    error = {"error": {"message": why, "type": "internal_server_error", "param": None, "code": None}}
                    return self._send(500, json.dumps(error).encode())
                if fake.known_models is not None and body.get("model") not in fake.known_models:
                    error = {"error": {"message": f"model '{body.get('model')}' not found", "type": "not_found"}}
                    return self._send(404, json.dumps(error).encode())
                if fake.refuses_streaming and body.get("stream"):
                    error = {"error": {"message": "streaming is not supported by this server", "code": 400}}
                    return self._send(400, json.dumps(error).encode())
                reply = fake.replies.pop(0) if fake.replies else Text("ok")
                if isinstance(reply, FromRequest):
                    reply = reply.make(body)
                if isinstance(reply, Raw):
                    return self._send(reply.status, reply.body, reply.content_type)
                if isinstance(reply, Call) and body.get("stream") and body.get("tool_choice") == "auto":
                    if not fake.auto_stream_refusal:
                        return self._send(200, b"", "text/event-stream")
                    error = {"error": {"message": "Automatic streaming tool choice is not supported"}}
                    return self._send(500, json.dumps(error).encode())
                if (body.get("stream") and fake.streams) or isinstance(reply, (CutStream, EndedEarly)):
                    return self._stream(reply)
                return self._send(200, json.dumps(_completion(reply)).encode())

            def _send(self, status: int, data: bytes, kind: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, reply: Reply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    for chunk in _chunks(reply):
                        self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
                        self.wfile.flush()
                        threading.Event().wait(fake.delay_per_chunk)
                    if not isinstance(reply, CutStream):
                        self.wfile.write(b"data: [DONE]\r\n\r\n")  # EndedEarly: with no finish_reason before it
                except (BrokenPipeError, ConnectionResetError):
                    fake.hung_up += 1  # the client closed the stream: a real server stops generating here

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.root = f"http://127.0.0.1:{self.server.server_port}"
        self.url = f"{self.root}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _completion(reply: Reply) -> dict[str, Any]:
    if isinstance(reply, Call):
        call = {"id": reply.call_id, "type": "function", "function": {"name": reply.name, "arguments": reply.arguments}}
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    assert isinstance(reply, Text)
    message = {"role": "assistant", "content": reply.content}
    return {"choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}]}


def _choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _chunks(reply: Reply) -> list[dict[str, Any]]:
    out = [_choice({"role": "assistant"})]
    if isinstance(reply, (CutStream, EndedEarly)):
        out += [_choice({"content": piece}) for piece in reply.pieces]
        if isinstance(reply, EndedEarly) and reply.call is not None:
            half = reply.call.arguments[: len(reply.call.arguments) // 2]
            function = {"name": reply.call.name, "arguments": half}
            part = {"index": 0, "id": "call_0", "type": "function", "function": function}
            out.append(_choice({"tool_calls": [part]}))
        return out
    if isinstance(reply, Call):
        # As llama-cpp-python streams a forced tool: id and name repeated in every chunk.
        pieces = [reply.arguments[i : i + 5] for i in range(0, len(reply.arguments), 5)] or [""]
        for piece in pieces:
            function = {"name": reply.name, "arguments": piece}
            out.append(
                _choice({"tool_calls": [{"index": 0, "id": reply.call_id, "type": "function", "function": function}]})
            )
        return [*out, _choice({}, "tool_calls")]
    assert isinstance(reply, Text)
    out += [_choice({"content": reply.content[i : i + 3]}) for i in range(0, len(reply.content), 3)]
    return [*out, _choice({}, reply.finish_reason)]
