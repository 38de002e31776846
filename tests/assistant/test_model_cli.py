"""`memframe chat` against the strict fake: whole turns, and what a person is told when a turn goes wrong."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from memframe.assistant.openai_chat import OpenAIChatModel
from memframe.cli import EXIT_ERROR, main
from memframe.core.edits import MAX_LINE_BYTES
from tests.assistant.strict_openai import Call, CutStream, EndedEarly, Raw, StrictChatServer, Text

REMEMBER = json.dumps({"edits": [{"op": "add", "line": "- likes jam"}]})


@pytest.fixture
def fake() -> Iterator[StrictChatServer]:
    server = StrictChatServer()
    yield server
    server.close()


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
    assert "assistant › (no answer: the model ended its turn without writing any text)" in out
    fake.replies.append(Text("", finish_reason="length"))
    out = chat(capsys, fake, "empty and long?")[1]
    assert "assistant › (no answer: the model reached the token limit before writing any text" in out


def test_an_answer_the_server_ended_early_is_reported_as_a_cut_off_is(fake: StrictChatServer, capsys, ready) -> None:  # type: ignore[no-untyped-def]
    """llama-cpp-python ends a stream another request interrupts with [DONE] and no finish_reason: the stub is
    shown as what it is, never as the whole answer."""
    fake.replies.append(EndedEarly(["Your cat ", "is"]))
    code, out, _ = chat(capsys, fake, "what is my cat called?")
    assert code == 0 and "assistant › Your cat is\n" in out
    assert "(the server ended the answer early: it may be incomplete;" in out
    fake.replies.append(EndedEarly([]))
    out = chat(capsys, fake, "and again?")[1]
    assert "assistant › (no answer: the server ended the answer early, before any text" in out


def test_a_capture_in_a_stream_ended_early_is_not_run(fake: StrictChatServer, capsys, ready) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "mode", "auto")
    fake.replies.append(EndedEarly([], Call("remember_in_memory", REMEMBER)))
    code, _, err = chat(capsys, fake, "I like jam", "--tool-choice", "remember_in_memory")
    assert code == EXIT_ERROR and "the tool was not run" in err
    assert memory(capsys) == "# Prefs\n- tea\n"


def test_temperature_from_the_cli_and_the_settings_file(fake: StrictChatServer, capsys, ready, memframe_home) -> None:  # type: ignore[no-untyped-def]
    assert chat(capsys, fake, "hi")[0] == 0
    assert "temperature" not in fake.requests[-1]  # unset: the server's own default
    assert chat(capsys, fake, "hi", "--temperature", "0")[0] == 0
    assert fake.requests[-1]["temperature"] == 0
    (memframe_home / "config.toml").write_text("[model]\ntemperature = 0.3\n")
    assert chat(capsys, fake, "hi")[0] == 0
    assert fake.requests[-1]["temperature"] == 0.3
    assert chat(capsys, fake, "hi", "--temperature", "1.5")[0] == 0
    assert fake.requests[-1]["temperature"] == 1.5
    with pytest.raises(SystemExit):
        main(["chat", "-m", "x", "--model-url", fake.url, "--temperature", "-1"])
    (memframe_home / "config.toml").write_text("[model]\ntemperature = -1\n")
    code, _, err = run(capsys, "chat", "-m", "x", "--model-url", fake.url)
    assert code != 0 and "model.temperature must be a number, 0 or more" in err


def test_every_string_of_the_memory_tool_is_bounded_at_the_line_limit(fake: StrictChatServer, capsys, ready) -> None:  # type: ignore[no-untyped-def]
    """A grammar-constrained model (llama.cpp) must close each string within the contract's line limit."""
    assert chat(capsys, fake, "hi")[0] == 0
    (tool,) = [t for t in fake.requests[0]["tools"] if t["function"]["name"] == "remember_in_memory"]
    edit = tool["function"]["parameters"]["properties"]["edits"]["items"]["properties"]
    strings = {name: p.get("maxLength") for name, p in edit.items() if p["type"] == "string" and "enum" not in p}
    assert strings == {"line": MAX_LINE_BYTES, "new_line": MAX_LINE_BYTES, "heading": MAX_LINE_BYTES}


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


def test_the_settings_files_model_is_the_local_assistants(fake: StrictChatServer, memframe_home) -> None:  # type: ignore[no-untyped-def]
    """With --remote the server answers with its own model: [model] from the settings file is not sent along
    (an explicit --model-url still is, and is refused by the backend)."""
    from memframe.cli import build_parser
    from memframe.cli.options import model_client

    memframe_home.mkdir(parents=True, exist_ok=True)
    (memframe_home / "config.toml").write_text(f'[model]\nurl = "{fake.url}"\nname = "gemma"\ntemperature = 0\n')
    assert model_client(build_parser().parse_args(["chat", "--remote", "http://127.0.0.1:9"])) is None
    model = model_client(build_parser().parse_args(["chat"]))
    assert isinstance(model, OpenAIChatModel) and model.label == f"gemma at {fake.url}"
    assert model.options.temperature == 0
    model.close()
    explicit = build_parser().parse_args(["chat", "--remote", "http://127.0.0.1:9", "--model-url", fake.root])
    assert explicit.model_url == fake.root and model_client(explicit) is not None
