"""The OpenAI-compatible client against a small fake chat-completions server of ours on loopback."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from memframe.assistant.models import OpenAIChatModel
from memframe.core.errors import ModelUnavailable


class FakeChat:
    """Answers each POST /v1/chat/completions with the next scripted reply; records requests."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.delay = 0.0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                time.sleep(fake.delay)
                status, payload = fake.replies.pop(0) if fake.replies else (200, _message("ok"))
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _message(content: str | None, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {"choices": [{"message": message}]}


@pytest.fixture
def fake() -> Iterator[FakeChat]:
    server = FakeChat()
    yield server
    server.close()


def test_plain_answer_and_request_shape(fake: FakeChat) -> None:
    model = OpenAIChatModel(fake.url, "llama", api_key="k")
    fake.replies.append((200, _message("Hello!")))
    reply = model.complete([{"role": "user", "content": "hi"}], [{"type": "function", "function": {"name": "t"}}])
    model.close()
    assert reply.content == "Hello!" and reply.tool_calls == ()
    sent = fake.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["model"] == "llama" and sent["auth"] == "Bearer k"
    assert sent["tools"][0]["function"]["name"] == "t"


def test_tool_calls_are_parsed(fake: FakeChat) -> None:
    model = OpenAIChatModel(fake.url, "m")
    args = json.dumps({"edits": [{"op": "add", "line": "- x"}]})
    fake.replies.append(
        (
            200,
            _message(
                None, [{"id": "c1", "type": "function", "function": {"name": "remember_in_memory", "arguments": args}}]
            ),
        )
    )
    reply = model.complete([{"role": "user", "content": "remember x"}], [])
    model.close()
    assert reply.tool_calls[0].name == "remember_in_memory"
    assert reply.tool_calls[0].arguments == {"edits": [{"op": "add", "line": "- x"}]}


@pytest.mark.parametrize(
    ("status", "payload", "message"),
    [
        (500, {"error": "boom"}, "status 500"),
        (200, b"not json", "not a chat completion"),
        (200, {"choices": []}, "not a chat completion"),
    ],
)
def test_bad_answers_are_clear_errors(fake: FakeChat, status: int, payload: Any, message: str) -> None:
    model = OpenAIChatModel(fake.url, "m")
    fake.replies.append((status, payload))
    with pytest.raises(ModelUnavailable, match=message):
        model.complete([{"role": "user", "content": "hi"}], [])
    model.close()


def test_timeout_is_a_clear_error(fake: FakeChat) -> None:
    model = OpenAIChatModel(fake.url, "m", timeout=0.2)
    fake.delay = 1.0
    with pytest.raises(ModelUnavailable, match="did not answer in time"):
        model.complete([{"role": "user", "content": "hi"}], [])
    model.close()


def test_server_down_is_a_clear_error() -> None:
    fake = FakeChat()
    url = fake.url
    fake.close()
    model = OpenAIChatModel(url, "m", timeout=2)
    with pytest.raises(ModelUnavailable, match="cannot be reached"):
        model.complete([{"role": "user", "content": "hi"}], [])
    model.close()


def test_a_whole_turn_through_the_openai_client(fake: FakeChat, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """memframe chat --model-url: recall reaches the model server's system message."""
    from memframe.cli import main

    main(["init"])
    (tmp_path / "m.md").write_text("# Prefs\n- tea\n")
    main(["save", str(tmp_path / "m.md"), "--base", "0"])
    main(["ai", "on"])
    fake.replies.append((200, _message("You like tea.")))
    assert main(["chat", "-m", "what do I like?", "--model-url", fake.url, "--model", "m"]) == 0
    out = capsys.readouterr().out
    assert "You like tea." in out
    system = fake.requests[0]["messages"][0]
    assert system["role"] == "system" and '<workspace-memory revision="1"' in system["content"]
    assert "- tea" in system["content"]
