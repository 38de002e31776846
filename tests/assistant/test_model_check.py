"""`memframe model check` against the strict fake: each check passes, fails with its fix, or says it
cannot judge; the command exits 1 when one fails."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from memframe.assistant.model_check import PROBE_QUESTION, PROBE_TRIES, Check, run_checks
from memframe.assistant.openai_chat import ModelOptions
from memframe.assistant.runtime import SYSTEM_PROMPT
from memframe.cli import main
from tests.assistant.strict_openai import Call, CutStream, FromRequest, Raw, StrictChatServer, Text

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


def planted(body: dict[str, Any]) -> str:
    """The name the probe planted in the memory it sent."""
    found = re.search(r"^- The user's cat is called (\w+)$", body["messages"][0]["content"], re.M)
    assert found, body["messages"][0]["content"]
    return found.group(1)


#: A model that answers from memory: it names the cat the probe's memory names.
NAMES_IT = FromRequest(lambda body: Text(f"Your cat is called {planted(body)}."))
#: A model under a chat format it was not trained on: it repeats the start of its prompt.
ECHOES = FromRequest(lambda body: Text(body["messages"][0]["content"][:90].upper()))


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
        NAMES_IT,
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
        "answer from memory",
        "forced tool call",
        "stream end",
        "context window",
    ]
    assert all(c.ok for c in checks.values()), [c.line() for c in checks.values()]
    name = planted(fake.requests[0])
    assert checks["answer from memory"].detail == f"'Your cat is called {name}.' names {name!r} from memory"
    assert checks["forced tool call"].detail == "add '- My cat is called Miso.'"
    assert "finish_reason 'stop' and [DONE]" in checks["stream end"].detail
    assert fake.refusals == []  # every probe was a request llama-cpp-python accepts


def test_the_checks_send_what_the_runtime_sends(fake: StrictChatServer) -> None:
    """The probe asks from a small memory of its own, framed as every call frames memory (the
    person's memory is for the context check), with the tools, the tool choice and the block's stops."""
    check(fake, *healthy(), memory="# Memory\n- tea\n", tool_choice="auto")
    plain, forced, stream, counted = fake.requests[:4]
    system = plain["messages"][0]["content"]
    assert system.startswith(SYSTEM_PROMPT) and plain["messages"][1] == {"role": "user", "content": PROBE_QUESTION}
    opener = re.search(r"^\[workspace-memory revision=1 [^\]]*boundary=(\w+)\]$", system, re.M)
    assert opener and f"- The user's cat is called {planted(plain)}\n[/workspace-memory boundary={opener[1]}]" in system
    assert "- tea" not in system and "- tea" in counted["messages"][0]["content"]
    assert plain["stop"] == ["[workspace-memory", "[/workspace-memory"]
    assert plain["tools"][0]["function"]["name"] == "remember_in_memory"
    assert plain["tool_choice"] == "auto" and plain["stream"] is False
    assert forced["tool_choice"] == {"type": "function", "function": {"name": "remember_in_memory"}}
    assert planted(stream) != planted(plain)  # every probe plants a name of its own


def test_an_empty_answer_fails_with_the_chat_format_to_change(fake: StrictChatServer) -> None:
    checks = check(fake, Text(""), *healthy()[1:])
    assert checks["answer from memory"].ok is False and "empty" in checks["answer from memory"].detail
    assert "--chat_format redpajama-incite" in checks["answer from memory"].line()


def test_an_answer_that_repeats_its_prompt_fails_with_the_chat_format_to_change(fake: StrictChatServer) -> None:
    """A pretrained model under turn tokens it was not trained on repeats its prompt (case aside),
    and the planted name further on in it does not make that an answer."""
    checks = check(fake, ECHOES, *healthy()[1:])
    assert checks["answer from memory"].ok is False and "repeats its prompt" in checks["answer from memory"].detail
    assert "--chat_format redpajama-incite" in checks["answer from memory"].line()


def test_answers_that_miss_the_name_fail_after_every_try(fake: StrictChatServer) -> None:
    checks = check(fake, *[Text("I am a cat.")] * PROBE_TRIES, *healthy()[1:])
    line = checks["answer from memory"].line()
    assert checks["answer from memory"].ok is False and f"{PROBE_TRIES} answers missed the name" in line
    assert "'I am a cat.'" in line and "--temperature 0" in line and "--chat_format redpajama-incite" in line
    at_zero = check(fake, *[Text("I am a cat.")] * PROBE_TRIES, *healthy()[1:], temperature=0)
    assert "--temperature" not in at_zero["answer from memory"].line()  # already the likeliest words
    asked = [planted(r) for r in fake.requests[:PROBE_TRIES]]
    assert len(set(asked)) == PROBE_TRIES  # a new name each try


def test_a_recital_of_the_memory_line_is_not_an_answer(fake: StrictChatServer) -> None:
    """A small model runs on into the memory it was given: the name in that copy does not count."""
    recites = FromRequest(lambda body: Text(f"I am a cat. - The user's cat is called {planted(body)}"))
    checks = check(fake, *[recites] * PROBE_TRIES, *healthy()[1:])
    assert checks["answer from memory"].ok is False
    checks = check(fake, FromRequest(lambda body: Text(f"{planted(body)} - The user's cat is called {planted(body)}")))
    assert checks["answer from memory"].ok


def test_a_miss_then_the_name_passes_and_says_which_try(fake: StrictChatServer) -> None:
    checks = check(fake, Text("I am a cat."), NAMES_IT, *healthy()[1:])
    assert checks["answer from memory"].ok and checks["answer from memory"].detail.endswith(f"(try 2 of {PROBE_TRIES})")


def test_a_name_from_an_older_try_does_not_count(fake: StrictChatServer) -> None:
    """Only the name planted in the memory this answer was given counts: no model knows it beforehand."""
    older: list[str] = []

    def misses(body: dict[str, Any]) -> Text:
        older.append(planted(body))
        return Text("I am a cat.")

    stale = FromRequest(lambda body: Text(f"Your cat is called {older[0]}."))
    checks = check(fake, FromRequest(misses), stale, FromRequest(misses), *healthy()[1:])
    assert checks["answer from memory"].ok is False and older[0] != older[1]


def test_a_tool_call_first_is_answered_and_the_answer_after_it_counts(fake: StrictChatServer) -> None:
    checks = check(fake, Call("remember_in_memory", MISO), NAMES_IT, *healthy()[1:], tool_choice="remember_in_memory")
    name = planted(fake.requests[0])
    assert checks["answer from memory"].ok and name in checks["answer from memory"].detail
    assert fake.requests[1]["messages"][-1]["role"] == "tool"


def test_a_forced_call_that_does_not_parse_fails(fake: StrictChatServer) -> None:
    checks = check(
        fake,
        NAMES_IT,
        Call("remember_in_memory", '{"edits": [{"op": "add", "line": '),
        *healthy()[2:],
        tool_choice="remember_in_memory",
    )
    assert checks["forced tool call"].ok is False and "did not parse" in checks["forced tool call"].detail


def test_a_forced_call_that_does_not_parse_is_shown_not_failed_where_none_is_forced(fake: StrictChatServer) -> None:
    """Under tool_choice auto memframe never forces the tool: the run passes, the line says what a
    forced call would do."""
    checks = check(fake, NAMES_IT, Call("remember_in_memory", '{"edits": [{"op": "add", "line": '), *healthy()[2:])
    forced = checks["forced tool call"]
    assert forced.ok is None and forced.detail.startswith("not used with tool_choice 'auto'; forced, the call did not")


def test_a_forced_line_not_in_the_persons_words_is_said(fake: StrictChatServer) -> None:
    junk = json.dumps({"edits": [{"op": "add", "line": "0x539684c1f17ab702d"}]})
    checks = check(fake, NAMES_IT, Call("remember_in_memory", junk), *healthy()[2:])
    assert checks["forced tool call"].ok and "not in the person's words" in checks["forced tool call"].detail


def test_a_stream_without_its_end_fails_with_interrupt_requests(fake: StrictChatServer) -> None:
    checks = check(fake, NAMES_IT, Call("remember_in_memory", MISO), CutStream(["Par", "is"]), usage(900), window(8192))
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
    assert "FAIL answer from memory" in capsys.readouterr().out


def test_the_command_needs_a_model_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "check"]) == 1
    assert "--model-url" in capsys.readouterr().err
