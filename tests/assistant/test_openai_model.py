"""The OpenAI-compatible client against a strict fake that refuses what llama-cpp-python refuses."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from memframe.assistant.models import ENDED_EARLY
from memframe.assistant.openai_chat import ModelOptions, OpenAIChatModel, fold_system_into_user
from memframe.core.errors import ModelUnavailable
from memframe.core.recall import render_recall_block
from memframe.core.types import RecallStatus
from tests.assistant.strict_openai import Call, CutStream, EndedEarly, Raw, StrictChatServer, Text, refusal

REMEMBER = json.dumps({"edits": [{"op": "add", "line": "- likes jam"}]})
USER = [{"role": "user", "content": "hi"}]
TOOL = [{"type": "function", "function": {"name": "t", "parameters": {"type": "object"}}}]


@pytest.fixture
def fake() -> Iterator[StrictChatServer]:
    server = StrictChatServer()
    yield server
    server.close()


def client(fake: StrictChatServer, **options: Any) -> OpenAIChatModel:
    return OpenAIChatModel(ModelOptions(options.pop("url", fake.url), options.pop("name", "m"), **options))


# --- the fake is as strict as the real server -------------------------------------------------------


@pytest.mark.parametrize(
    ("request_body", "words"),
    [
        ({"messages": USER}, "max_tokens"),
        ({"messages": [*USER, {"role": "assistant", "content": None}], "max_tokens": 9}, "valid string"),
        ({"messages": USER, "max_tokens": 9, "tools": TOOL}, "not rendered"),
        ({"messages": [*USER, *USER], "max_tokens": 9}, "must alternate"),
        ({"messages": [*USER, {"role": "tool", "content": "x"}], "max_tokens": 9}, "tool_call_id"),
    ],
)
def test_the_fake_refuses_what_llama_cpp_python_refuses(request_body: dict[str, Any], words: str) -> None:
    assert words in (refusal(request_body) or "")


# --- requests every server accepts ------------------------------------------------------------------


def test_plain_answer_and_request_shape(fake: StrictChatServer) -> None:
    model = client(fake, name="llama", api_key="k")
    fake.replies.append(Text("Hello!"))
    reply = model.complete(USER, TOOL)
    model.close()
    assert reply.content == "Hello!" and reply.tool_calls == () and reply.finish_reason == "stop"
    sent = fake.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["model"] == "llama" and sent["auth"] == "Bearer k"
    assert sent["max_tokens"] == 1024 and sent["stream"] is True and sent["tool_choice"] == "auto"
    assert sent["tools"][0]["function"]["name"] == "t"
    assert "tool_choice" not in model.request_body(USER, [], stream=False)


def test_settings_reach_the_request(fake: StrictChatServer) -> None:
    model = client(fake, max_tokens=7, stream=False, temperature=0.0)
    model.complete(USER, [])
    model.close()
    sent = fake.requests[0]
    assert sent["max_tokens"] == 7 and sent["stream"] is False and sent["temperature"] == 0.0


def test_a_forced_tool_applies_to_the_call_answering_the_person_only(fake: StrictChatServer) -> None:
    model = client(fake, tool_choice="t")
    forced = model.request_body(USER, TOOL, stream=False)["tool_choice"]
    assert forced == {"type": "function", "function": {"name": "t"}}
    after_a_result = [*USER, {"role": "assistant", "content": "", "tool_calls": []}, {"role": "tool"}]
    assert model.request_body(after_a_result, TOOL, stream=False)["tool_choice"] == "auto"
    assert model.request_body(USER, [], stream=False).get("tool_choice") is None
    other = [{"type": "function", "function": {"name": "other"}}]
    assert model.request_body(USER, other, stream=False)["tool_choice"] == "auto"  # not offered: not forced
    model.close()


def test_content_is_never_null(fake: StrictChatServer) -> None:
    model = client(fake)
    messages = [*USER, {"role": "assistant", "content": None, "tool_calls": []}, {"role": "user", "content": None}]
    body = model.request_body(messages, [], stream=False)
    assert all(isinstance(m["content"], str) for m in body["messages"])
    assert messages[1]["content"] is None  # the caller's messages are not changed
    model.close()


def test_system_as_user_folds_the_system_message_into_the_first_user_message() -> None:
    folded = fold_system_into_user(
        [{"role": "system", "content": "SYS\n[workspace-memory revision=1]x[/workspace-memory]"}, *USER]
    )
    assert folded == [{"role": "user", "content": "SYS\n[workspace-memory revision=1]x[/workspace-memory]\n\nhi"}]
    assert fold_system_into_user([{"role": "system", "content": "S"}]) == [{"role": "user", "content": "S"}]


# --- streaming --------------------------------------------------------------------------------------


def test_streamed_text_arrives_piece_by_piece(fake: StrictChatServer) -> None:
    model = client(fake)
    fake.replies.append(Text("Your cat is Quincy."))
    pieces: list[str] = []
    reply = model.complete(USER, [], on_text=pieces.append)
    model.close()
    assert len(pieces) > 1 and "".join(pieces) == "Your cat is Quincy." == reply.content


def test_streamed_tool_call_deltas_are_assembled(fake: StrictChatServer) -> None:
    model = client(fake, tool_choice="t")
    fake.replies.append(Call("t", REMEMBER, "call_7"))
    reply = model.complete(USER, TOOL)
    model.close()
    (call,) = reply.tool_calls
    assert (call.id, call.name, call.arguments) == ("call_7", "t", json.loads(REMEMBER))
    assert reply.finish_reason == "tool_calls"


def test_a_server_that_answers_json_to_a_stream_request_still_works() -> None:
    fake = StrictChatServer(streams=False)
    model = client(fake)
    fake.replies.append(Text("plain"))
    pieces: list[str] = []
    assert model.complete(USER, [], on_text=pieces.append).content == "plain"
    assert pieces == ["plain"]
    model.close()
    fake.close()


def test_a_server_that_refuses_to_stream_a_tool_choice_is_asked_plainly_from_then_on() -> None:
    fake = StrictChatServer(auto_stream_refusal=True)  # llama-cpp-python before 0.3.36: a 500 that says so
    model = client(fake)
    fake.replies += [Call("t", "{}"), Call("t", "{}")]
    reply = model.complete(USER, TOOL)
    assert reply.tool_calls[0].name == "t"
    assert [r["stream"] for r in fake.requests] == [True, False]
    model.complete(USER, TOOL)  # remembered: no second refused stream
    assert [r["stream"] for r in fake.requests] == [True, False, False]
    model.close()
    fake.close()


def test_a_kind_of_call_answered_with_an_empty_stream_is_asked_plainly_from_then_on(fake: StrictChatServer) -> None:
    """llama-cpp-python 0.3.36 answers a streamed automatic tool choice with a 200 and no event: that call is
    asked again plainly, and every later call of that kind goes plain at once (never sent twice), while
    other kinds (a forced tool, no tools) still stream."""
    model = client(fake)
    fake.replies += [Call("t", "{}"), Call("t", "{}"), Call("t", "{}"), Text("Quincy."), Text("Tea.")]
    assert model.complete(USER, TOOL).tool_calls[0].name == "t"
    assert [r["stream"] for r in fake.requests] == [True, False]
    assert model.complete(USER, TOOL).tool_calls[0].name == "t"
    assert [r["stream"] for r in fake.requests] == [True, False, False]
    assert model.complete(USER, TOOL).content == "Quincy."  # same kind: plain, once
    assert model.complete(USER, []).content == "Tea."  # no tools: another kind, still streamed
    assert [r["stream"] for r in fake.requests] == [True, False, False, False, True]
    model.close()


def test_a_server_that_refuses_streaming_gets_each_kind_refused_once() -> None:
    fake = StrictChatServer(refuses_streaming=True)
    model = client(fake, tool_choice="t")
    fake.replies += [Text("a"), Text("b"), Call("t", "{}"), Call("t", "{}")]
    shown: list[str] = []
    assert model.complete(USER, [], on_text=shown.append).content == "a" and shown == ["a"]
    assert model.complete(USER, []).content == "b"
    assert model.complete(USER, TOOL).tool_calls and model.complete(USER, TOOL).tool_calls
    assert [r["stream"] for r in fake.requests] == [True, False, False, True, False, False]
    assert [r.get("tool_choice") for r in fake.requests][3:] == [{"type": "function", "function": {"name": "t"}}] * 3
    model.close()
    fake.close()


# --- honest endings ---------------------------------------------------------------------------------


def test_a_stream_ended_without_a_finish_reason_is_marked_ended_early(fake: StrictChatServer) -> None:
    """llama-cpp-python's interrupt_requests: another request ends this stream with [DONE] and no
    finish_reason. What came is kept and shown, and the reply says it ended early (not "stop")."""
    model = client(fake)
    fake.replies.append(EndedEarly(["Your c", "at is"]))
    shown: list[str] = []
    reply = model.complete(USER, [], on_text=shown.append)
    model.close()
    assert reply.content == "Your cat is" == "".join(shown) and reply.finish_reason == ENDED_EARLY


def test_a_tool_call_in_a_stream_ended_early_is_never_run(fake: StrictChatServer) -> None:
    model = client(fake, tool_choice="t")
    fake.replies.append(EndedEarly([], Call("t", REMEMBER)))
    with pytest.raises(ModelUnavailable, match="ended the answer early, in the middle of a tool call"):
        model.complete(USER, TOOL)
    model.close()


def test_a_stream_past_max_tokens_is_cut_off_and_closed(fake: StrictChatServer) -> None:
    """A server that ignores max_tokens (llama-cpp-python on automatic tool choice) would generate until its
    context is full: the client stops reading at the limit and hangs up, which is what stops the server."""
    model = client(fake, max_tokens=5)
    fake.delay_per_chunk = 0.002
    fake.replies.append(Text("abc" * 400))  # 400 pieces of three characters
    shown: list[str] = []
    reply = model.complete(USER, [], on_text=shown.append)
    model.close()
    assert reply.content == "abc" * 5 == "".join(shown) and reply.finish_reason == "length"
    deadline = time.monotonic() + 10
    while not fake.hung_up and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake.hung_up == 1


def test_a_stream_within_max_tokens_is_read_whole(fake: StrictChatServer) -> None:
    model = client(fake, max_tokens=5, tool_choice="t")
    fake.replies += [Text("abc" * 5), Call("t", '{"a": 1}')]  # five pieces; then four pieces of arguments
    assert model.complete(USER, []).content == "abc" * 5
    reply = model.complete(USER, TOOL)
    model.close()
    assert reply.tool_calls[0].arguments == {"a": 1} and reply.finish_reason == "tool_calls"
    assert fake.hung_up == 0


# --- clear errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        (
            Raw(500, json.dumps({"error": {"message": "model 'x' not found"}}).encode()),
            "status 500: model 'x' not found",
        ),
        (Raw(400, json.dumps({"detail": [{"msg": "field required"}]}).encode()), "status 400: field required"),
        (Raw(502, b"upstream down"), "status 502: upstream down"),
        (Raw(200, b"not json"), "not a chat completion"),
        (Raw(200, json.dumps({"choices": []}).encode()), "not a chat completion"),
        (Raw(200, b"<!doctype html><html>hi</html>", "text/html"), "a web page, not JSON"),
        (Raw(500, b"<html><body>Internal</body></html>", "text/html"), "a web page, not JSON"),
        (CutStream(["Your c", "at is Qu"]), "stopped streaming before the answer was complete"),
        (Raw(404, json.dumps({"error": {"message": "model 'x' not found"}}).encode()), "status 404: model 'x' not"),
        (Raw(401, json.dumps({"error": {"message": "bad key"}}).encode()), r"401: bad key \(.*MEMFRAME_MODEL_KEY"),
        (
            Raw(200, b'data: {"error": {"message": "context is full"}}\n\n', "text/event-stream"),
            "stopped the answer with an error: context is full",
        ),
    ],
)
def test_bad_answers_are_one_clear_line(fake: StrictChatServer, reply: Any, words: str) -> None:
    model = client(fake)
    fake.replies.append(reply)
    with pytest.raises(ModelUnavailable, match=words) as caught:
        model.complete(USER, [])
    model.close()
    assert "\n" not in str(caught.value)


def test_an_unknown_model_is_named_in_the_servers_own_words() -> None:
    """vLLM and Ollama answer an unknown model with a 404 in OpenAI's error shape: that message is the line."""
    fake = StrictChatServer(known_models={"gemma"})
    model = client(fake, name="x")
    with pytest.raises(ModelUnavailable) as caught:
        model.complete(USER, [])
    model.close()
    fake.close()
    assert "status 404: model 'x' not found" in str(caught.value) and "/chat/completions" not in str(caught.value)


def test_a_url_without_v1_says_so(fake: StrictChatServer) -> None:
    model = client(fake, url=fake.root)
    with pytest.raises(ModelUnavailable, match=r"404; .*under .*/v1"):
        model.complete(USER, [])
    model.close()


def test_timeout_is_a_clear_error(fake: StrictChatServer) -> None:
    model = client(fake, timeout=0.2)
    fake.delay = 1.0
    with pytest.raises(ModelUnavailable, match="did not answer in time"):
        model.complete(USER, [])
    model.close()


def test_server_down_is_a_clear_error() -> None:
    fake = StrictChatServer()
    url = fake.url
    fake.close()
    model = OpenAIChatModel(ModelOptions(url, timeout=2))
    with pytest.raises(ModelUnavailable, match="cannot be reached"):
        model.complete(USER, [])
    model.close()


@pytest.mark.parametrize(("raw", "why"), [("{not json", "not JSON"), ("[1, 2]", "not a JSON object")])
def test_tool_arguments_that_cannot_be_read_are_marked(fake: StrictChatServer, raw: str, why: str) -> None:
    model = client(fake, stream=False)
    fake.replies.append(Call("t", raw))
    (call,) = model.complete(USER, TOOL).tool_calls
    model.close()
    assert call.malformed is not None and why in call.malformed and call.raw_arguments == raw


def test_tool_arguments_are_read_as_leniently_as_json_allows(fake: StrictChatServer) -> None:
    """A control character inside a string (small models write raw tabs and newlines) is taken as written."""
    raw = '{"edits": [{"op": "add", "line": "- likes\tjam\nand tea"}]}'
    model = client(fake, stream=False)
    fake.replies.append(Call("t", raw))
    (call,) = model.complete(USER, TOOL).tool_calls
    model.close()
    assert call.malformed is None and call.arguments == {"edits": [{"op": "add", "line": "- likes\tjam\nand tea"}]}


def test_temperature_must_be_zero_or_more() -> None:
    with pytest.raises(ValueError, match="temperature"):
        ModelOptions("http://127.0.0.1:9/v1", temperature=-0.1)
    assert ModelOptions("http://127.0.0.1:9/v1", temperature=0).temperature == 0


@pytest.mark.parametrize("stream", [True, False])
def test_on_text_is_asked_before_a_tool_call_is_returned_so_a_caller_can_stop(
    fake: StrictChatServer, stream: bool
) -> None:
    """The frame's stop key raises from on_text: a reply carrying a tool call gets one last on_text("")
    before it is returned, so a stop pressed while the call was on its way runs no tool."""
    model = client(fake, tool_choice="t", stream=stream)
    fake.replies.append(Call("t", "{}"))
    pieces: list[str] = []
    assert model.complete(USER, TOOL, on_text=pieces.append).tool_calls and pieces == [""]

    def stopped(piece: str) -> None:
        raise ModelUnavailable("stopped")

    fake.replies.append(Call("t", "{}"))
    with pytest.raises(ModelUnavailable, match="stopped"):
        model.complete(USER, TOOL, on_text=stopped)
    model.close()


# --- the recall block's marker lines stop the answer ----------------------------------------------


def recalled(boundary: str = "b0undary-" + "7" * 23) -> list[dict[str, Any]]:
    """A system message with a recall block, as the runtime attaches one, and the person's message."""
    block = render_recall_block(
        status=RecallStatus.PROVIDED,
        text="- cat: Quincy\n",
        revision=3,
        workspace="w",
        bound_to="a/0",
        boundary=boundary,
    )
    return [{"role": "system", "content": f"SYS\n\n{block}"}, *USER]


def test_the_recall_blocks_markers_are_sent_as_stop_sequences(fake: StrictChatServer) -> None:
    """llama-cpp-python adds `stop` to its chat format's own stop word. The start of a marker, not its
    whole line: a small model reciting the block runs out of tokens or misspells the boundary first."""
    model = client(fake)
    model.complete(recalled("f" * 32), [])
    assert fake.requests[0]["stop"] == ["[workspace-memory", "[/workspace-memory"]
    assert "stop" not in model.request_body(USER, [], stream=False)  # no memory, no stop
    withheld = render_recall_block(status=RecallStatus.CONFLICT, text=None, revision=None, workspace="w", bound_to="a")
    without = [{"role": "system", "content": f"S\n\n{withheld}"}, *USER]
    assert model.request_body(without, [], stream=False)["stop"] == fake.requests[0]["stop"]
    folded = client(fake, system_as_user=True).request_body(recalled("f" * 32), [], stream=False)
    assert folded["stop"] == fake.requests[0]["stop"]  # folded into the person's message, still stopped
    assert fake.refusals == []
    model.close()


@pytest.mark.parametrize("stream", [True, False])
def test_an_answer_past_the_closing_marker_is_cut_there_when_the_server_ignores_stop(
    fake: StrictChatServer, stream: bool
) -> None:
    misspelt = f"[/workspace-memory boundary={'e' * 31}"  # and run out of tokens before its "]"
    fake.replies = [Text(f"Quincy\n- cat: Quincy\n{misspelt}", finish_reason="length")]
    model = client(fake, stream=stream)
    reply = model.complete(recalled("e" * 32), [])
    model.close()
    assert reply.content == "Quincy\n- cat: Quincy\n" and reply.finish_reason == "stop"
