"""The OpenAI-compatible client against a strict fake that refuses what llama-cpp-python refuses."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from memframe.assistant.openai_chat import ModelOptions, OpenAIChatModel, fold_system_into_user
from memframe.cli import EXIT_ERROR, main
from memframe.core.errors import ModelUnavailable
from tests.assistant.strict_openai import Call, CutStream, Raw, StrictChatServer, Text, refusal

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


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def ready(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert run(capsys, "init")[0] == 0
    (tmp_path / "m.md").write_text("# Prefs\n- tea\n")
    assert run(capsys, "save", str(tmp_path / "m.md"), "--base", "0")[0] == 0
    assert run(capsys, "ai", "on")[0] == 0


def chat(capsys: pytest.CaptureFixture[str], fake: StrictChatServer, message: str, *extra: str) -> tuple[int, str, str]:
    return run(capsys, "chat", "-m", message, "-c", "c1", "--model-url", fake.url, "--model", "m", *extra)


def memory(capsys: pytest.CaptureFixture[str]) -> str:
    return run(capsys, "show", "--text-only")[1]


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


def test_a_tool_chosen_on_an_empty_stream_is_asked_again_plainly(fake: StrictChatServer) -> None:
    """llama-cpp-python 0.3.36 answers a streamed automatic tool choice with a 200 and no event; the same
    server streams text answers, so only that call is asked again."""
    model = client(fake)
    fake.replies += [Call("t", "{}"), Call("t", "{}"), Text("Quincy.")]
    assert model.complete(USER, TOOL).tool_calls[0].name == "t"
    assert [r["stream"] for r in fake.requests] == [True, False]
    assert model.complete(USER, TOOL).content == "Quincy."
    assert [r["stream"] for r in fake.requests] == [True, False, True]
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
    ],
)
def test_bad_answers_are_one_clear_line(fake: StrictChatServer, reply: Any, words: str) -> None:
    model = client(fake)
    fake.replies.append(reply)
    with pytest.raises(ModelUnavailable, match=words) as caught:
        model.complete(USER, [])
    model.close()
    assert "\n" not in str(caught.value)


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


# --- whole turns through `memframe chat` ------------------------------------------------------------


def test_a_whole_turn_through_the_openai_client(fake: StrictChatServer, capsys, ready) -> None:  # type: ignore[no-untyped-def]
    """memframe chat --model-url: recall reaches the model server's system message; the answer streams."""
    fake.replies.append(Text("You like tea."))
    code, out, _ = chat(capsys, fake, "what do I like?")
    assert code == 0 and "assistant › You like tea.\n" in out
    system = fake.requests[0]["messages"][0]
    assert system["role"] == "system" and "[workspace-memory revision=1" in system["content"]
    assert "- tea" in system["content"]
    assert "remember_in_memory" in [t["function"]["name"] for t in fake.requests[0]["tools"]]


def test_a_forced_capture_commits_and_the_follow_up_call_is_accepted(fake: StrictChatServer, capsys, ready) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "mode", "auto")
    fake.replies += [Call("remember_in_memory", REMEMBER), Text("Noted.")]
    code, out, err = chat(capsys, fake, "I like jam", "--tool-choice", "remember_in_memory")
    assert code == 0, err
    assert "Remembered (memory version 2)" in out and "assistant › Noted." in out
    assert fake.refusals == []
    first, second = fake.requests
    assert first["tool_choice"] == {"type": "function", "function": {"name": "remember_in_memory"}}
    assert second["tool_choice"] == "auto"
    assistant = second["messages"][-2]
    assert assistant["role"] == "assistant" and assistant["content"] == ""
    assert assistant["tool_calls"][0]["function"]["arguments"] == REMEMBER
    assert memory(capsys) == "# Prefs\n- tea\n- likes jam\n"


def test_a_capture_is_reported_when_the_follow_up_call_fails(fake: StrictChatServer, capsys, ready) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "mode", "auto")
    fake.replies += [
        Call("remember_in_memory", REMEMBER),
        Raw(500, json.dumps({"error": {"message": "model 'x' not found"}}).encode()),
    ]
    code, out, err = chat(capsys, fake, "I like jam", "--tool-choice", "remember_in_memory")
    assert code == EXIT_ERROR
    assert "Remembered (memory version 2)" in out
    assert "model 'x' not found" in err and "nothing was changed" not in err + out
    assert memory(capsys) == "# Prefs\n- tea\n- likes jam\n"
    # The next turn's request is well-formed: no two user messages in a row (the strict fake would refuse).
    fake.replies.append(Text("Hello again."))
    code, out, _ = chat(capsys, fake, "hello")
    assert code == 0 and "Hello again." in out and fake.refusals == []
    roles = [m["role"] for m in fake.requests[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]


def test_a_failed_turn_is_one_line_and_leaves_the_conversation_well_formed(
    fake: StrictChatServer, capsys, ready
) -> None:  # type: ignore[no-untyped-def]
    fake.replies.append(Raw(500, json.dumps({"error": {"message": "out of memory"}}).encode()))
    code, _, err = chat(capsys, fake, "hi")
    assert code == EXIT_ERROR and "out of memory" in err and len(err.strip().splitlines()) == 1
    fake.replies.append(Text("ok"))
    assert chat(capsys, fake, "hi again")[0] == 0 and fake.refusals == []


def test_a_stream_that_stops_mid_token_writes_nothing(fake: StrictChatServer, capsys, ready) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "mode", "auto")
    fake.replies.append(CutStream(["I will remem"]))
    code, out, err = chat(capsys, fake, "remember jam")
    assert code == EXIT_ERROR and "stopped streaming" in err
    assert "I will remem" in out  # what was shown is what came; nothing more is claimed
    assert memory(capsys) == "# Prefs\n- tea\n"
    fake.replies.append(Text("ok"))
    assert chat(capsys, fake, "again")[0] == 0 and fake.refusals == []


def test_cut_off_and_empty_answers_say_so(fake: StrictChatServer, capsys, ready) -> None:  # type: ignore[no-untyped-def]
    fake.replies.append(Text("The answer is", finish_reason="length"))
    out = chat(capsys, fake, "long?", "--max-tokens", "5")[1]  # the fake streams three characters a piece
    assert "The answer is" in out and "cut off at the token limit" in out
    assert fake.requests[-1]["max_tokens"] == 5
    fake.replies.append(Text(""))
    out = chat(capsys, fake, "empty?", "--no-stream")[1]
    assert "assistant › (the model gave an empty answer)" in out


def test_off_sends_no_memory_and_no_memory_tool(fake: StrictChatServer, capsys, ready) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "mode", "off")
    assert chat(capsys, fake, "what do I like?")[0] == 0
    sent = fake.requests[0]
    names = [t["function"]["name"] for t in sent.get("tools") or []]
    assert "remember_in_memory" not in names
    assert not any("workspace-memory" in m["content"] or "remember_in_memory" in m["content"] for m in sent["messages"])


def test_system_as_user_from_the_cli(fake: StrictChatServer, capsys, ready) -> None:  # type: ignore[no-untyped-def]
    assert chat(capsys, fake, "what do I like?", "--system-as-user")[0] == 0
    messages = fake.requests[0]["messages"]
    assert [m["role"] for m in messages] == ["user"]
    assert "[workspace-memory revision=1" in messages[0]["content"] and messages[0]["content"].endswith(
        "what do I like?"
    )


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (Call("remember_in_memory", "{not json"), "Not run: its arguments were not JSON; nothing was done."),
        (Call("delete_everything", "{}"), "There is no tool called 'delete_everything'"),
    ],
)
def test_bad_tool_calls_do_nothing_and_say_so(fake: StrictChatServer, capsys, ready, call: Call, words: str) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "mode", "auto")
    fake.replies += [call, Text("Sorry.")]
    code, out, _ = chat(capsys, fake, "remember jam", "--no-stream")
    assert code == 0 and words in out and "Sorry." in out
    assert memory(capsys) == "# Prefs\n- tea\n"
    tool = fake.requests[-1]["messages"][-1]
    assert tool["role"] == "tool" and words in tool["content"] and fake.refusals == []


def test_model_flags_are_checked(capsys, ready) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit):
        main(["chat", "-m", "x", "--model-url", "http://127.0.0.1:9/v1", "--max-tokens", "0"])
    with pytest.raises(SystemExit):
        main(["chat", "-m", "x", "--model-url", "http://127.0.0.1:9/v1", "--model-timeout", "-1"])
    capsys.readouterr()


def test_an_empty_stream_is_asked_again_plainly(fake: StrictChatServer, capsys, ready) -> None:  # type: ignore[no-untyped-def]
    """llama-cpp-python's chatml-function-calling answers a streamed call after a tool result with a 200
    and no event at all: nothing reached the person, so that one call is asked again without streaming."""
    fake.replies.append(Raw(200, b"", "text/event-stream"))
    fake.replies.append(Text("Your cat is Quincy."))
    code, out, _ = chat(capsys, fake, "what is my cat called?")
    assert code == 0 and "Your cat is Quincy." in out
    assert [call.get("stream") for call in fake.requests][-2:] == [True, False]
