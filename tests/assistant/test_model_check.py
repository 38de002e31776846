"""`memframe model check` against the strict fake: each check passes, fails with its fix, or says it
cannot judge; the command exits 1 when one fails."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from memframe.assistant.model_check import Check, run_checks
from memframe.assistant.openai_chat import ModelOptions
from memframe.cli import main
from tests.assistant.strict_openai import Call, CutStream, Raw, StrictChatServer, Text

MISO = json.dumps({"edits": [{"op": "add", "line": "- My cat is called Miso."}]})


def models_listed(fake: StrictChatServer, models: list[dict[str, Any]] | None) -> None:
    """Give the fake a GET /v1/models (llama-cpp-python's shape); None: it lists nothing (404)."""

    def do_get(handler: BaseHTTPRequestHandler) -> None:
        found = handler.path == "/v1/models" and models is not None
        data = json.dumps({"object": "list", "data": models} if found else {"detail": "Not Found"}).encode()
        handler.send_response(200 if found else 404)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    fake.server.RequestHandlerClass.do_GET = do_get  # type: ignore[attr-defined]


def llama(name: str = "gemma") -> list[dict[str, Any]]:
    return [{"id": name, "object": "model", "owned_by": "me", "permissions": []}]


def usage(prompt_tokens: int) -> Raw:
    body = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "P"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": prompt_tokens + 1},
    }
    return Raw(200, json.dumps(body).encode())


def window(n_ctx: int) -> Raw:
    message = f"Requested tokens (131080) exceed context window of {n_ctx}"
    return Raw(500, json.dumps({"error": {"message": message, "type": "internal_server_error"}}).encode())


@pytest.fixture
def fake() -> Iterator[StrictChatServer]:
    server = StrictChatServer()
    models_listed(server, llama())
    yield server
    server.close()


def check(fake: StrictChatServer, *replies: Any, memory: str = "", **options: Any) -> dict[str, Check]:
    fake.replies = list(replies)
    opts = ModelOptions(fake.url, options.pop("name", "gemma"), max_tokens=options.pop("max_tokens", 256), **options)
    return {c.name: c for c in run_checks(opts, memory=memory)}


def healthy(prompt_tokens: int = 900, n_ctx: int = 8192) -> list[Any]:
    """The replies of a server that passes: plain, forced tool, stream, usage, then its window."""
    return [
        Text("Paris is the capital."),
        Call("remember_in_memory", MISO),
        Text("Paris."),
        usage(prompt_tokens),
        window(n_ctx),
    ]


def test_a_ready_server_passes_every_check(fake: StrictChatServer) -> None:
    checks = check(fake, *healthy())
    assert list(checks) == [
        "reachable",
        "model known",
        "plain answer",
        "forced tool call",
        "stream end",
        "context window",
    ]
    assert all(c.ok for c in checks.values()), [c.line() for c in checks.values()]
    assert "'Paris is the capital.'" in checks["plain answer"].line()
    assert checks["forced tool call"].detail == "add '- My cat is called Miso.'"
    assert "finish_reason 'stop' and [DONE]" in checks["stream end"].detail
    assert fake.refusals == []  # every probe was a request llama-cpp-python accepts


def test_the_checks_send_what_the_runtime_sends(fake: StrictChatServer) -> None:
    check(fake, *healthy(), memory="# Memory\n- tea\n", tool_choice="auto")
    plain, forced = fake.requests[0], fake.requests[1]
    assert "[workspace-memory revision=1" in plain["messages"][0]["content"]  # the current memory, framed
    assert plain["tools"][0]["function"]["name"] == "remember_in_memory"
    assert plain["tool_choice"] == "auto" and plain["stream"] is False
    assert forced["tool_choice"] == {"type": "function", "function": {"name": "remember_in_memory"}}


def test_an_empty_answer_fails_with_the_chat_format_to_change(fake: StrictChatServer) -> None:
    checks = check(fake, Text(""), Call("remember_in_memory", MISO), Text("Paris."), usage(900), window(8192))
    assert checks["plain answer"].ok is False
    assert "--chat_format redpajama-incite" in checks["plain answer"].line()


def test_an_answer_that_repeats_its_prompt_fails_with_the_chat_format_to_change(fake: StrictChatServer) -> None:
    """A pretrained model under turn tokens it was not trained on repeats its prompt, case aside."""
    echo = "you are the workspace assistant. Answer the person's   message helpfully and"
    checks = check(fake, Text(echo), *healthy()[1:])
    assert checks["plain answer"].ok is False and "repeats its prompt" in checks["plain answer"].detail
    assert "--chat_format redpajama-incite" in checks["plain answer"].line()


def test_an_answer_that_quotes_a_few_words_of_its_prompt_passes(fake: StrictChatServer) -> None:
    checks = check(fake, Text("The capital of France? Paris, on the Seine, since the Middle Ages."), *healthy()[1:])
    assert checks["plain answer"].ok, checks["plain answer"].line()


def test_a_tool_call_first_is_answered_and_the_answer_after_it_counts(fake: StrictChatServer) -> None:
    checks = check(
        fake, Call("remember_in_memory", MISO), Text("Paris."), *healthy()[1:], tool_choice="remember_in_memory"
    )
    assert checks["plain answer"].ok and checks["plain answer"].detail == "'Paris.'"
    assert fake.requests[1]["messages"][-1]["role"] == "tool"


def test_a_forced_call_that_does_not_parse_fails(fake: StrictChatServer) -> None:
    checks = check(
        fake, Text("Paris."), Call("remember_in_memory", '{"edits": [{"op": "add", "line": '), *healthy()[2:]
    )
    assert checks["forced tool call"].ok is False and "did not parse" in checks["forced tool call"].detail


def test_a_forced_line_not_in_the_persons_words_is_said(fake: StrictChatServer) -> None:
    junk = json.dumps({"edits": [{"op": "add", "line": "0x539684c1f17ab702d"}]})
    checks = check(fake, Text("Paris."), Call("remember_in_memory", junk), *healthy()[2:])
    assert checks["forced tool call"].ok and "not in the person's words" in checks["forced tool call"].detail


def test_a_stream_without_its_end_fails_with_interrupt_requests(fake: StrictChatServer) -> None:
    checks = check(
        fake, Text("Paris."), Call("remember_in_memory", MISO), CutStream(["Par", "is"]), usage(900), window(8192)
    )
    line = checks["stream end"].line()
    assert checks["stream end"].ok is False and "no finish_reason" in line and "--interrupt_requests false" in line


def test_a_context_too_small_for_the_prompt_and_max_tokens_fails(fake: StrictChatServer) -> None:
    checks = check(fake, *healthy(prompt_tokens=3000, n_ctx=3072), max_tokens=512)
    assert checks["context window"].ok is False
    assert "3072 < prompt + current memory + max_tokens 512 = 3512 tokens" in checks["context window"].detail
    assert "--n_ctx" in checks["context window"].fix


def test_room_for_the_current_memory_but_not_a_full_one_passes_with_advice(fake: StrictChatServer) -> None:
    checks = check(fake, *healthy(prompt_tokens=1000, n_ctx=4096), max_tokens=512)
    context = checks["context window"]
    assert context.ok is True and "full 8 KiB memory needs about 3912" in context.detail


def test_a_server_that_does_not_say_its_window_is_not_judged(fake: StrictChatServer) -> None:
    models_listed(fake, [{"id": "gemma", "object": "model", "owned_by": "vendor"}])
    checks = check(fake, *healthy()[:4])
    assert checks["context window"].ok is None and len(fake.requests) == 4  # no oversized probe


def test_an_unknown_model_fails_with_the_name_to_use(fake: StrictChatServer) -> None:
    checks = check(fake, *healthy(), name="gemma-3")
    assert checks["model known"].ok is False
    assert (
        checks["model known"]
        .line()
        .endswith(
            "-> --model 'gemma' (or [model] name), or start llama-cpp-python with --model_alias to give it a short name"
        )
    )


def test_a_server_with_no_model_list_cannot_be_judged_on_the_name(fake: StrictChatServer) -> None:
    models_listed(fake, None)
    assert check(fake, *healthy()[:4])["model known"].ok is None


def test_an_unreachable_server_is_one_failing_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    checks = run_checks(ModelOptions(f"http://127.0.0.1:{port}/v1", "gemma", timeout=5))
    assert [c.name for c in checks] == ["reachable"] and checks[0].ok is False
    assert "--model-url" in checks[0].line()


def test_the_command_prints_one_line_per_check_and_exits_1_on_a_failure(
    fake: StrictChatServer, capsys: pytest.CaptureFixture[str]
) -> None:
    fake.replies = healthy()
    assert main(["model", "check", "--model-url", fake.url, "--model", "gemma"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("checking 'gemma' at") and len(out) == 7 and all(line.startswith("ok") for line in out[1:])
    fake.replies = [Text(""), *healthy()[1:]]
    assert main(["model", "check", "--model-url", fake.url, "--model", "gemma"]) == 1
    assert "FAIL plain answer" in capsys.readouterr().out


def test_the_command_needs_a_model_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "check"]) == 1
    assert "--model-url" in capsys.readouterr().err
