"""The Assistant from the CLI: ai, chat, receipts, proposals."""

from __future__ import annotations

import pytest

from memframe.cli import EXIT_ERROR, main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def ready(capsys: pytest.CaptureFixture[str], tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert run(capsys, "init")[0] == 0
    (tmp_path / "m.md").write_text("# Prefs\n- tea\n")
    assert run(capsys, "save", str(tmp_path / "m.md"), "--base", "0")[0] == 0


def test_chat_is_refused_until_ai_is_on(capsys, ready) -> None:  # type: ignore[no-untyped-def]
    code, _, err = run(capsys, "chat", "-m", "hi")
    assert code == EXIT_ERROR and "Workspace AI is off" in err
    assert "Workspace AI is on (consent revision 1)" in run(capsys, "ai", "on")[1]
    assert "is on" in run(capsys, "ai")[1]


def test_chat_shows_the_memory_it_was_given_and_receipts(capsys, ready) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "ai", "on")
    code, out, _ = run(capsys, "chat", "-m", "what do you know?", "-c", "c1")
    assert code == 0 and "- tea" in out and "revision 1 was provided to call 1" in out
    run(capsys, "mode", "off")
    out = run(capsys, "chat", "-m", "and now?", "-c", "c1")[1]
    assert "I was given no memory" in out and "nothing added to call 1 (off)" in out
    out = run(capsys, "receipts", "-c", "c1")[1]
    assert "provided" in out and "off" in out and "tea" not in out


def test_remember_in_read_only_then_apply_the_proposal(capsys, ready) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "ai", "on")
    out = run(capsys, "chat", "-m", "remember: - likes jam")[1]
    assert "Remembered" not in out and "waits for a person to review" in out
    listing = run(capsys, "proposals")[1]
    proposal = listing.split()[0]
    assert "add: - likes jam" in listing
    assert "Applied" in run(capsys, "proposals", "--apply", proposal)[1]
    assert run(capsys, "show", "--text-only")[1] == "# Prefs\n- tea\n- likes jam\n"


def test_remember_in_auto_says_remembered(capsys, ready) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "ai", "on")
    run(capsys, "mode", "auto")
    assert "Remembered (memory version 2)" in run(capsys, "chat", "-m", "remember: - likes jam")[1]
    out = run(capsys, "history")[1]
    assert "assistant" in out and "capture" in out


def test_interactive_chat(capsys, ready, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    run(capsys, "ai", "on")
    lines = iter(["hello", ""])
    monkeypatch.setattr("builtins.input", lambda _prompt: next(lines))
    code, out, _ = run(capsys, "chat")
    assert code == 0 and "- tea" in out and "memframe receipts --conversation c-" in out
