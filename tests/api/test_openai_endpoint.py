"""The OpenAI-compatible binding, driven by the official `openai` package over real loopback HTTP.

Upstream is the strict fake model server, so every request memframe makes of the model is
checked as llama-cpp-python checks it, and recorded: the tests read the recall block there.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from memframe import sealing
from memframe.api.app import create_app
from memframe.assistant.openai_chat import ModelOptions, OpenAIChatModel
from memframe.backend.local import LocalBackend
from memframe.core.types import Mode
from memframe.service import MemoryService
from tests.assistant.strict_openai import Call, CutStream, StrictChatServer, Text
from tests.conftest import FakeClock, database_for
from tests.support.remote_kinds import loopback_server

ALICE, BOB = "alice", "bob"
CLIENT_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@dataclass
class Served:
    service: MemoryService
    fake: StrictChatServer
    base_url: str
    token: str
    key: bytes
    person: LocalBackend
    clients: list[openai.OpenAI] = field(default_factory=list)

    def client(self, token: str | None = None) -> openai.OpenAI:
        client = openai.OpenAI(base_url=f"{self.base_url}/v1", api_key=token or self.token, max_retries=0)
        self.clients.append(client)
        return client

    def unlock(self) -> str:
        return self.service.assistant.open_key_session(ALICE, "ws", self.key).id

    def set_mode(self, mode: Mode) -> None:
        self.person.set_policy(mode, self.person.get_policy().revision)

    def upstream_system(self, index: int = -1) -> str:
        """The system text of one request memframe made of the model."""
        messages = self.fake.requests[index]["messages"]
        return "\n".join(str(m.get("content")) for m in messages if m["role"] == "system")


def script(served: Served, *replies: Text | Call) -> None:
    """The model's next answers. A tool call comes twice: llama-cpp-python answers a streamed
    automatic tool choice with an empty stream, and memframe's model client asks again plainly."""
    for reply in replies:
        served.fake.replies += [reply, reply] if isinstance(reply, Call) else [reply]


def serve(database: str, clock: FakeClock) -> Iterator[Served]:
    service = MemoryService(database, clock=clock)
    for user in (ALICE, BOB):
        service.accounts.add_user(user)
    service.accounts.create_workspace("ws", ALICE)
    service.accounts.create_workspace("ws2", ALICE)
    service.accounts.create_workspace("bobs", BOB)
    service.assistant.set_ai(ALICE, "ws", True)
    key = sealing.new_key()
    person = LocalBackend(service, "ws", key, user=ALICE)
    fake = StrictChatServer()
    model = OpenAIChatModel(ModelOptions(fake.url, "upstream-model"))
    server = loopback_server()
    base_url = server.mount(create_app(service, model=model))
    served = Served(service, fake, base_url, service.accounts.create_token(ALICE, "test")[1], key, person)
    try:
        yield served
    finally:
        for client in served.clients:
            client.close()
        server.unmount(base_url)
        model.close()
        fake.close()
        person.close()
        service.close()


@pytest.fixture
def served(tmp_path: Path, clock: FakeClock) -> Iterator[Served]:
    yield from serve(str(tmp_path / "service.db"), clock)


@pytest.fixture
def served_on(engine: str, request: pytest.FixtureRequest, tmp_path: Path, clock: FakeClock) -> Iterator[Served]:
    """`served` on each storage engine."""
    yield from serve(database_for(engine, request, tmp_path), clock)


def ask(served: Served, text: str = "hello", **kwargs: Any) -> Any:
    return served.client().chat.completions.with_raw_response.create(
        model="ws", messages=[{"role": "user", "content": text}], **kwargs
    )


# --- answers ---------------------------------------------------------------------------------


def test_models_are_the_workspaces_of_the_tokens_user(served: Served) -> None:
    assert [m.id for m in served.client().models.list()] == ["ws", "ws2"]


def test_recall_reaches_the_model_and_the_client_prompt_stays_first(served_on: Served) -> None:
    served = served_on
    served.person.save("- likes tea\n", 0)
    served.unlock()
    served.fake.replies.append(Text("Tea it is."))
    raw = served.client().chat.completions.with_raw_response.create(
        model="ws",
        messages=[{"role": "system", "content": "You are terse."}, {"role": "user", "content": "drink?"}],
    )
    answer = raw.parse()
    assert answer.choices[0].message.content == "Tea it is."
    assert answer.choices[0].finish_reason == "stop" and answer.model == "ws"
    system = served.upstream_system()
    assert system.startswith("You are terse.") and "- likes tea" in system and "[workspace-memory" in system
    assert served.fake.requests[-1]["messages"][-1] == {"role": "user", "content": "drink?"}
    assert raw.headers["X-Memframe-Memory-Status"] == "provided"
    assert raw.headers["X-Memframe-Memory-Revision"] == "1"
    assert "X-Memframe-Memory-Note" not in raw.headers


def test_a_streamed_answer_ends_with_done(served: Served) -> None:
    served.unlock()
    served.fake.replies.append(Text("Streamed words arrive."))
    with served.client().chat.completions.with_streaming_response.create(
        model="ws", messages=[{"role": "user", "content": "hi"}], stream=True
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["X-Memframe-Memory-Status"] == "empty"
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[5:]) for line in lines[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == "Streamed words arrive." and chunks[-1]["choices"][0]["finish_reason"] == "stop"
    stream = served.client().chat.completions.create(
        model="ws", messages=[{"role": "user", "content": "again"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "ok"


def test_without_a_key_session_the_answer_comes_and_says_why(served: Served) -> None:
    served.person.save("- likes tea\n", 0)
    served.set_mode(Mode.AUTO)
    script(served, Call("remember_in_memory", '{"edits": [{"op": "add", "line": "- x"}]}'), Text("Done."))
    raw = ask(served, "remember x")
    assert raw.parse().choices[0].message.content == "Done."
    assert "not provided because" in served.upstream_system(0) and "likes tea" not in served.upstream_system(0)
    assert raw.headers["X-Memframe-Memory-Status"] == "unavailable"
    assert "memframe key unlock" in raw.headers["X-Memframe-Memory-Note"]
    assert served.person.load().text == "- likes tea\n"  # no capture without the key


def test_a_receipt_names_the_revision_by_conversation(served: Served) -> None:
    served.person.save("- likes tea\n", 0)
    served.unlock()
    raw = ask(served, extra_headers={"X-Conversation-Id": "chat-1"})
    assert raw.headers["X-Conversation-Id"] == "chat-1"
    receipts = served.person.receipts("chat-1")
    assert [(r.status.value, r.revision) for r in receipts] == [("provided", 1)]
    assert receipts[0].admission_id == raw.headers["X-Memframe-Admission"]
    fresh = ask(served)  # no conversation named: one of its own, said in the answer
    assert fresh.headers["X-Conversation-Id"].startswith("openai-")
    assert len(served.person.receipts(fresh.headers["X-Conversation-Id"])) == 1


def test_Z4_a_chat_clients_request_is_an_ordinary_turn_admitted_by_the_same_ingress(served: Served) -> None:
    served.set_mode(Mode.AUTO)
    session = served.unlock()
    raw = ask(served, extra_headers={"X-Conversation-Id": "chat-z4"})
    policy = served.person.get_policy()
    with served.service.db.read() as conn:
        row = conn.execute(
            "SELECT a.mode, a.policy_revision, a.key_session_id, a.client_memory_state, s.admission_id"
            " FROM workspace_memory_admissions AS a"
            " JOIN agent_delivery_credentials AS s ON s.conversation_id = a.conversation_id WHERE a.id = ?",
            (raw.headers["X-Memframe-Admission"],),
        ).fetchone()
    assert tuple(row) == ("auto", policy.revision, session, None, raw.headers["X-Memframe-Admission"])


# --- tools -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_client_tools_pass_through_and_their_calls_go_back(served: Served, stream: bool) -> None:
    served.unlock()
    script(served, Call("get_weather", '{"city": "Oslo"}', "call_w"))
    messages = [{"role": "user", "content": "weather in Oslo?"}]
    client = served.client()
    if stream:
        calls: dict[int, Any] = {}
        finish = None
        for chunk in client.chat.completions.create(model="ws", messages=messages, tools=[CLIENT_TOOL], stream=True):
            for part in chunk.choices[0].delta.tool_calls or ():
                calls[part.index] = part
            finish = chunk.choices[0].finish_reason or finish
        (call,) = calls.values()
    else:
        answer = client.chat.completions.create(model="ws", messages=messages, tools=[CLIENT_TOOL])
        (call,) = answer.choices[0].message.tool_calls or ()
        finish = answer.choices[0].finish_reason
    assert finish == "tool_calls" and call.id == "call_w"
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Oslo"})
    offered = [t["function"]["name"] for t in served.fake.requests[-1]["tools"]]
    assert offered == ["remember_in_memory", "get_weather"]
    assert served.fake.requests[-1]["tools"][1] == CLIENT_TOOL
    # The client answers its own tool; the conversation it sends back passes through unchanged.
    served.fake.replies.append(Text("Sunny."))
    follow = [
        *messages,
        {"role": "assistant", "content": "", "tool_calls": [call.model_dump(exclude={"index"})]},
        {"role": "tool", "tool_call_id": "call_w", "content": "sunny"},
    ]
    answer = client.chat.completions.create(model="ws", messages=follow, tools=[CLIENT_TOOL])
    assert answer.choices[0].message.content == "Sunny."
    assert served.fake.requests[-1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_w", "content": "sunny"}


@pytest.mark.parametrize("stream", [False, True])
def test_a_capture_commits_in_auto_and_the_client_never_sees_it(served_on: Served, stream: bool) -> None:
    served = served_on
    served.person.save("- likes tea\n", 0)
    served.set_mode(Mode.AUTO)
    served.unlock()
    script(served, Call("remember_in_memory", '{"edits": [{"op": "add", "line": "- lives in Oslo"}]}'), Text("Noted."))
    client = served.client()
    messages = [{"role": "user", "content": "I live in Oslo"}]
    if stream:
        chunks = list(client.chat.completions.create(model="ws", messages=messages, stream=True))
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Noted."
        assert not any(c.choices[0].delta.tool_calls for c in chunks)
    else:
        answer = client.chat.completions.create(model="ws", messages=messages)
        assert answer.choices[0].message.content == "Noted." and not answer.choices[0].message.tool_calls
    assert served.person.load().text == "- likes tea\n- lives in Oslo\n"
    second = served.fake.requests[-1]
    assert second["messages"][-1]["role"] == "tool" and "Remembered" in second["messages"][-1]["content"]
    assert "- lives in Oslo" in served.upstream_system(-1)  # recall bound again before the second call


def test_a_proposal_in_read_only(served: Served) -> None:
    served.person.save("- likes tea\n", 0)
    served.unlock()
    script(served, Call("remember_in_memory", '{"edits": [{"op": "add", "line": "- x"}]}'), Text("OK."))
    raw = ask(served, "remember x")
    assert raw.parse().choices[0].message.content == "OK."
    (proposal,) = served.person.proposals()
    assert raw.headers["X-Memframe-Proposal"] == proposal.id
    assert served.person.load().text == "- likes tea\n"


def test_off_offers_no_memory_and_no_tool(served: Served) -> None:
    served.person.save("- likes tea\n", 0)
    served.set_mode(Mode.OFF)
    served.unlock()
    raw = ask(served, tools=[CLIENT_TOOL])
    assert raw.headers["X-Memframe-Memory-Status"] == "off"
    assert "workspace-memory" not in served.upstream_system() and "likes tea" not in served.upstream_system()
    assert [t["function"]["name"] for t in served.fake.requests[-1]["tools"]] == ["get_weather"]
    assert served.person.proposals() == [] and served.person.load().version == 1


# --- refusals --------------------------------------------------------------------------------


def test_a_bad_token_is_401_in_openais_shape(served: Served) -> None:
    with pytest.raises(openai.AuthenticationError) as caught:
        served.client("not-a-token").models.list()
    assert caught.value.status_code == 401
    assert set(caught.value.body) >= {"message", "type", "code"}  # type: ignore[arg-type]
    assert caught.value.body["type"] == "authentication_error"  # type: ignore[index]


@pytest.mark.parametrize("workspace", ["nowhere", "bobs"])
def test_an_unknown_or_anothers_workspace_is_404(served: Served, workspace: str) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        served.client().chat.completions.create(model=workspace, messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["code"] == "not_found"  # type: ignore[index]
    assert "GET /v1/models" in caught.value.body["message"]  # type: ignore[index]
    bob = served.service.accounts.create_token(BOB, "t")[1]
    with pytest.raises(openai.NotFoundError):
        served.client(bob).chat.completions.create(model="ws", messages=[{"role": "user", "content": "hi"}])
    assert served.fake.requests == []


def test_a_workspace_with_ai_off_is_refused_before_any_model_call(served: Served) -> None:
    served.service.assistant.set_ai(ALICE, "ws", False)
    with pytest.raises(openai.APIStatusError) as caught:
        served.client().chat.completions.create(model="ws", messages=[{"role": "user", "content": "hi"}])
    assert caught.value.status_code == 409 and caught.value.body["code"] == "ai_disabled"  # type: ignore[index]
    assert served.fake.requests == []


@pytest.mark.parametrize(
    "body",
    [
        {"model": "ws", "messages": []},
        {"model": "ws", "messages": [{"role": "wizard", "content": "hi"}]},
        {"messages": [{"role": "user", "content": "hi"}]},
        {"model": "ws", "messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]},
        {
            "model": "ws",
            "messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "function", "function": {"name": "remember_in_memory"}}],
        },
    ],
)
def test_a_malformed_body_is_422_and_writes_nothing(served: Served, body: dict[str, Any]) -> None:
    response = httpx.post(
        f"{served.base_url}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {served.token}"}
    )
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["message"]
    assert served.fake.requests == []
    with served.service.db.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM workspace_memory_admissions").fetchone()[0] == 0


def test_not_json_is_422(served: Served) -> None:
    response = httpx.post(
        f"{served.base_url}/v1/chat/completions",
        content=b"{not json",
        headers={"Authorization": f"Bearer {served.token}", "Content-Type": "application/json"},
    )
    assert response.status_code == 422 and response.json()["error"]["message"].startswith("body: not valid JSON")


@pytest.mark.parametrize("stream", [False, True])
def test_an_unreachable_model_is_502_with_its_reason_and_no_change(served: Served, stream: bool) -> None:
    served.person.save("- likes tea\n", 0)
    served.set_mode(Mode.AUTO)
    served.unlock()
    served.fake.close()
    with pytest.raises(openai.APIStatusError) as caught:
        served.client().chat.completions.create(model="ws", messages=[{"role": "user", "content": "hi"}], stream=stream)
    assert caught.value.status_code == 502
    error = caught.value.body
    assert error["code"] == "model_unavailable" and "cannot be reached" in error["message"]  # type: ignore[index]
    assert served.person.load().version == 1 and served.person.proposals() == []


def test_a_model_that_fails_mid_answer_ends_the_stream_with_an_error_event(served: Served) -> None:
    served.unlock()
    served.fake.replies.append(CutStream(["Half an ", "answer"]))
    stream = served.client().chat.completions.create(
        model="ws", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    seen: list[str] = []
    with pytest.raises(openai.APIError, match="model server"):
        for chunk in stream:
            seen.append(chunk.choices[0].delta.content or "")
    assert "".join(seen) == "Half an answer"


def test_the_endpoint_is_only_served_with_a_model(tmp_path: Path, clock: FakeClock) -> None:
    service = MemoryService(tmp_path / "s.db", clock=clock)
    try:
        paths = {getattr(route, "path", "") for route in create_app(service).routes}
        assert "/v1/chat/completions" not in paths and "/v1/models" not in paths
    finally:
        service.close()
