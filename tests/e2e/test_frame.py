"""The frame against the real model server, as a person sees it: `memframe frame` in tmux.

The frame reads the same `[model]` settings as `chat`; its Assistant pane names the model that
answers, streams the answer, and says how it ended. tmux is the terminal a person would use; the
pane's text is read with `capture-pane` and keys are sent with `send-keys`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memframe.cli import main
from tests.e2e.conftest import Recorder
from tests.e2e.test_real_model import CAT, configure

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(900),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="the frame is driven in tmux, which is not installed"),
]

#: How long the frame may take to draw, and the model to answer on a loaded machine.
DRAW_SECONDS = 60.0
ANSWER_SECONDS = 300.0


class Terminal:
    """One tmux session on a socket of its own, so nothing else's tmux is touched."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.socket = f"memframe-e2e-{uuid.uuid4().hex[:8]}"
        exports = [f"{key}={value}" for key, value in env.items()]
        self.tmux("new-session", "-d", "-s", "frame", "-x", "120", "-y", "35", "env", *exports, *command)
        self.path = Path(self.tmux("display-message", "-p", "#{socket_path}").strip())

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True)
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "frame")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "frame", *keys)

    def wait_for(self, shows: Callable[[str], bool], seconds: float) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            screen = self.screen()
            if shows(screen):
                return screen
            time.sleep(0.5)
        raise AssertionError(f"the frame did not show it in {seconds:g} s:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)
        self.path.unlink(missing_ok=True)  # tmux can leave its socket file behind


@pytest.fixture
def frame(capsys, tmp_path: Path, memframe_home: Path, recorder: Recorder) -> Iterator[Terminal]:  # type: ignore[no-untyped-def]
    configure(memframe_home, recorder.url)
    assert main(["init"]) == 0
    (tmp_path / "m.md").write_text(CAT)
    assert main(["save", str(tmp_path / "m.md"), "--base", "0"]) == 0
    assert main(["ai", "on"]) == 0
    capsys.readouterr()
    env = {key: os.environ[key] for key in ("PATH", "PYTHONPATH", "MEMFRAME_HOME", "HOME", "LANG") if key in os.environ}
    terminal = Terminal([sys.executable, "-m", "memframe", "frame"], {**env, "MEMFRAME_PASSPHRASE": ""})
    try:
        yield terminal
    finally:
        terminal.close()


def unframed(screen: str) -> str:
    """The pane's words without its borders, one line of text per screen line."""
    return "\n".join(line.strip(" │▌") for line in screen.splitlines())


def test_the_frame_answers_with_the_configured_model(frame: Terminal, recorder: Recorder) -> None:
    frame.wait_for(lambda s: CAT.strip() in s and "f2 Assistant" in s, DRAW_SECONDS)
    frame.keys("F2")
    header = frame.wait_for(lambda s: "Answered by" in s, DRAW_SECONDS)
    assert f"at {recorder.url}" in header and "scripted" not in header.lower(), header
    frame.keys("What is my cat called?", "Enter")
    screen = unframed(frame.wait_for(lambda s: "receipt: memory revision 1 was used" in s, ANSWER_SECONDS))
    sent = recorder.requests[0]
    assert sent["temperature"] == 0 and sent["stream"] is True and CAT.strip() in sent["messages"][0]["content"]
    found = re.search(r"assistant › (.*?)\n(?:\(|receipt:)", screen, re.S)
    assert found, screen
    answer = found.group(1).strip()
    assert answer and not answer.startswith("(no answer"), screen  # an answer, never an empty one
    cut_off = "(cut off at the token limit" in screen
    assert cut_off == (recorder.finish_reasons[0] == "length"), screen  # the ending, as the server gave it
    assert "ended the answer early" not in screen, screen
