"""The Assistant against a real model: llama-cpp-python's server with Gemma 3 270M (`make e2e`).

What the server received is checked through the recording proxy; the answer's words are checked
only where a 270M model at temperature 0 is reliable enough to say them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memframe.cli import EXIT_ERROR, main
from tests.e2e.conftest import Recorder

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

CAT = "- The user's cat is called Quincy\n"
#: Room for a runaway answer to end (see conftest): a call that outlives its client delays the next test's.
SMALL = ("--max-tokens", "48", "--model-timeout", "300")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cat(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run(capsys, "init")[0] == 0
    (tmp_path / "m.md").write_text(CAT)
    assert run(capsys, "save", str(tmp_path / "m.md"), "--base", "0")[0] == 0
    assert run(capsys, "ai", "on")[0] == 0


def chat(capsys: pytest.CaptureFixture[str], recorder: Recorder, message: str, *extra: str) -> tuple[int, str, str]:
    return run(capsys, "chat", "-m", message, "--model-url", recorder.url, *SMALL, *extra)


def system_of(request: dict) -> str:  # type: ignore[type-arg]
    return next((m["content"] for m in request["messages"] if m["role"] == "system"), "")


def test_recall_reaches_the_model(capsys, cat, recorder: Recorder) -> None:  # type: ignore[no-untyped-def]
    code, out, err = chat(capsys, recorder, "What is my cat called?")
    assert code == 0, err
    assert recorder.statuses == [200]
    system = system_of(recorder.requests[0])
    opener = re.search(r"\[workspace-memory revision=1 [^\]]* boundary=([0-9a-f]+)\]", system)
    assert opener and CAT.strip() in system
    assert system.rstrip().endswith(f"[/workspace-memory boundary={opener.group(1)}]")  # the call's own closer
    assert recorder.requests[0]["tool_choice"] == "auto" and recorder.requests[0]["max_tokens"] == 48
    assert "revision 1 was provided to call 1" in out
    # What Gemma 3 270M answers is its own business (at temperature 0 it often answers nothing under the
    # chatml-function-calling format); what memframe owes is to show the answer, or say it was empty.
    assert "Quincy" in out or "(the model gave an empty answer)" in out


def test_recall_reaches_the_model_as_a_user_message(capsys, cat, recorder: Recorder) -> None:  # type: ignore[no-untyped-def]
    code, _, err = chat(capsys, recorder, "What is my cat called?", "--system-as-user")
    assert code == 0, err
    messages = recorder.requests[0]["messages"]
    assert [m["role"] for m in messages] == ["user"]
    assert "[workspace-memory revision=1" in messages[0]["content"] and CAT.strip() in messages[0]["content"]


@pytest.mark.xfail(
    strict=False,
    reason="Gemma 3 270M under chatml-function-calling writes remember_in_memory arguments that are not JSON "
    "in most runs (two runs on 2026-12-01 wrote JSON and the capture landed); memframe then says 'Not run: its "
    "arguments were not JSON' and writes nothing",
)
def test_a_forced_capture_commits_through_the_fence_and_the_follow_up_succeeds(capsys, cat, recorder: Recorder) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "mode", "auto")
    # Room for the whole forced call: cut off at 48 tokens, its arguments are not JSON and nothing runs.
    code, out, err = chat(
        capsys, recorder, "Remember that I like jam.", "--tool-choice", "remember_in_memory", "--max-tokens", "256"
    )
    assert code == 0, err
    assert recorder.statuses[:2] == [200, 200] and len(recorder.requests) >= 2
    first, second = recorder.requests[:2]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "remember_in_memory"}}
    assert second["tool_choice"] == "auto"
    sent_back = second["messages"][-2]
    assert sent_back["role"] == "assistant" and isinstance(sent_back["content"], str) and sent_back["tool_calls"]
    committed = re.search(r"Remembered \(memory version (\d+)\)", out)
    refused = "Not remembered" in out
    assert committed or refused, out  # a 270M model writes some edit; the fence decides, and the CLI says which
    if committed:
        assert committed.group(1) == "2"
        history = run(capsys, "history")[1]
        assert "capture" in history


def test_read_only_makes_a_proposal(capsys, cat, recorder: Recorder) -> None:  # type: ignore[no-untyped-def]
    code, out, err = chat(capsys, recorder, "Remember that I like jam.", "--tool-choice", "remember_in_memory")
    assert code == 0, err
    assert "Remembered" not in out
    if "waits for a person to review" in out:
        assert run(capsys, "proposals")[1].strip() != "No pending proposals."
    else:
        assert "Not " in out  # the model's edit did not apply: said, and nothing proposed behind the person's back
    assert run(capsys, "show", "--text-only")[1] == CAT


def test_off_sends_no_memory_and_no_memory_tool(capsys, cat, recorder: Recorder) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "mode", "off")
    code, _, err = chat(capsys, recorder, "What is my cat called?")
    assert code == 0, err
    sent = recorder.requests[0]
    assert "Quincy" not in str(sent["messages"]) and "workspace-memory" not in str(sent["messages"])
    assert "remember_in_memory" not in [t["function"]["name"] for t in sent.get("tools") or []]
    assert "remember_in_memory" not in str(sent["messages"])


def test_a_conversation_continues_after_turns(capsys, cat, recorder: Recorder) -> None:  # type: ignore[no-untyped-def]
    assert chat(capsys, recorder, "Hello.", "-c", "c1")[0] == 0
    code, _, err = chat(capsys, recorder, "What is my cat called?", "-c", "c1")
    assert code == 0, err
    roles = [m["role"] for m in recorder.requests[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]


# --- memframe serve --model-url, with a remote chat ---------------------------------------------------


@pytest.fixture
def served(tmp_path: Path, recorder: Recorder, capsys, monkeypatch) -> Iterator[str]:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "team.db")
    assert run(capsys, "admin", "user", "add", "alice", "--db", db)[0] == 0
    assert run(capsys, "admin", "workspace", "create", "notes", "--owner", "alice", "--db", db)[0] == 0
    token = run(capsys, "admin", "token", "create", "--user", "alice", "--db", db)[1].strip()
    argv = ["serve", "--db", db, "--port", "0", "--model-url", recorder.url, *SMALL]
    process = subprocess.Popen(
        [sys.executable, "-m", "memframe", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        found = re.search(r"at (http://127\.0\.0\.1:\d+) ", first)
        assert found, first
        monkeypatch.setenv("MEMFRAME_URL", found.group(1))
        monkeypatch.setenv("MEMFRAME_TOKEN", token)
        monkeypatch.setenv("MEMFRAME_WORKSPACE", "notes")
        yield found.group(1)
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_a_remote_chat_through_memframe_serve(capsys, served: str, recorder: Recorder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert run(capsys, "init")[0] == 0
    (tmp_path / "m.md").write_text(CAT)
    assert run(capsys, "save", str(tmp_path / "m.md"), "--base", "0")[0] == 0
    assert run(capsys, "ai", "on")[0] == 0
    code, out, err = run(capsys, "chat", "-m", "What is my cat called?")
    assert code == 0, err
    assert "revision 1 was provided to call 1" in out
    assert CAT.strip() in system_of(recorder.requests[0]) and recorder.requests[0]["max_tokens"] == 48
    run(capsys, "mode", "off")
    code, out, err = run(capsys, "chat", "-m", "And now?")
    assert code == 0 and "Quincy" not in str(recorder.requests[-1]["messages"])


def test_an_openai_client_through_memframe_serve(capsys, served: str, recorder: Recorder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The official `openai` client against serve's OpenAI-compatible endpoint, after `key unlock`."""
    import openai

    assert run(capsys, "init")[0] == 0
    (tmp_path / "m.md").write_text(CAT)
    assert run(capsys, "save", str(tmp_path / "m.md"), "--base", "0")[0] == 0
    assert run(capsys, "ai", "on")[0] == 0
    code, out, err = run(capsys, "key", "unlock", "--for", "1h")
    assert code == 0 and "for 1 h" in out, err
    client = openai.OpenAI(base_url=f"{served}/v1", api_key=os.environ["MEMFRAME_TOKEN"], max_retries=0, timeout=600)
    try:
        asked = [{"role": "user", "content": "What is my cat called?"}]
        raw = client.chat.completions.with_raw_response.create(model="notes", messages=asked)
        assert raw.parse().choices[0].finish_reason in ("stop", "length")
        assert (raw.headers["X-Memframe-Memory-Status"], raw.headers["X-Memframe-Memory-Revision"]) == ("provided", "1")
        assert CAT.strip() in system_of(recorder.requests[0])
        chunks = list(client.chat.completions.create(model="notes", messages=asked, stream=True))
        assert chunks[-1].choices[0].finish_reason in ("stop", "length", "tool_calls")
        assert run(capsys, "key", "lock")[0] == 0
        recorder.clear()
        raw = client.chat.completions.with_raw_response.create(model="notes", messages=asked)
        assert "not provided because" in system_of(recorder.requests[0]) and "Quincy" not in str(recorder.requests)
    finally:
        client.close()


def test_a_wrong_model_url_is_one_clear_line(capsys, cat, recorder: Recorder) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run(capsys, "chat", "-m", "hi", "--model-url", recorder.url.removesuffix("/v1"))
    assert code == EXIT_ERROR and "/v1" in err and len(err.strip().splitlines()) == 1
