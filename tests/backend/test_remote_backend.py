"""RemoteBackend's own promises, beyond the shared contract suite.

Failures are typed and honest: offline, timeout and auth failure raise
Unavailable/Unauthorized, change nothing on either side, and a write is sent
exactly once. What travels is ciphertext only: no plaintext, no key.
"""

from __future__ import annotations

import base64
import socket
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from memframe import sealing
from memframe.api import create_app
from memframe.backend.base import Backend, MemoryStore
from memframe.backend.remote import RemoteBackend, RemoteStore
from memframe.core.errors import InvalidInput, NotFound, Unauthorized, Unavailable, VersionConflict
from memframe.core.types import MEMORY_PATH, Mode
from memframe.service import MemoryService
from memframe.service.accounts import LOCAL_USER
from tests.support.remote_kinds import PortalASGITransport, asgi_client

URL = "http://memory.example:8765"


class Recorder(httpx.BaseTransport):
    """Counts and keeps every request, then hands it on (or answers from `handler`)."""

    def __init__(
        self, inner: httpx.BaseTransport | None = None, handler: Callable[[httpx.Request], httpx.Response] | None = None
    ) -> None:
        self.inner = inner
        self.handler = handler
        self.requests: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        if self.handler is not None:
            return self.handler(request)
        assert self.inner is not None
        return self.inner.handle_request(request)

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()

    def count(self, method: str) -> int:
        return sum(1 for r in self.requests if r.method == method)


def failing(exc: type[httpx.TransportError]) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc("simulated", request=request)

    return handler


@pytest.fixture
def token(service: MemoryService) -> str:
    return service.accounts.create_token(LOCAL_USER, "tests")[1]


@pytest.fixture
def key() -> bytes:
    return sealing.new_key()


@pytest.fixture
def recorders(service: MemoryService) -> Iterator[Callable[[], Recorder]]:
    """Each backend gets its own transport (closing a backend closes its transport); one app."""
    app = create_app(service)
    made: list[Recorder] = []

    def make() -> Recorder:
        made.append(Recorder(PortalASGITransport(app)))
        return made[-1]

    yield make
    for recorder in made:
        recorder.close()


@pytest.fixture
def recorder(recorders: Callable[[], Recorder]) -> Recorder:
    return recorders()


def remote(recorder: httpx.BaseTransport, token: str, key: bytes, **kwargs: float) -> RemoteBackend:
    return RemoteBackend(URL, token, "ws", key, transport=recorder, **kwargs)  # type: ignore[arg-type]


def test_it_is_the_same_protocol_as_local(token: str, key: bytes, recorder: Recorder) -> None:
    backend = remote(recorder, token, key)
    assert isinstance(backend, Backend) and isinstance(backend.store, MemoryStore)
    assert backend.location == URL
    backend.close()
    backend.close()  # idempotent


def test_only_ciphertext_travels_and_is_stored(
    service: MemoryService, token: str, key: bytes, recorder: Recorder
) -> None:
    text = "# Memory\n- the launch code is swordfish\n"
    backend = remote(recorder, token, key)
    backend.save(text, 0)
    backend.undo(1, 1)
    backend.clear(2)
    assert backend.read_revision(2) == text
    backend.close()
    needles = [b"swordfish", key, base64.b64encode(key), key.hex().encode()]
    for request in recorder.requests:
        wire = request.content + str(request.url).encode() + b"".join(v for _, v in request.headers.raw)
        assert not any(n in wire for n in needles), request
    stored = service.get_version(LOCAL_USER, "ws", MEMORY_PATH, 1).ciphertext
    assert stored is not None and b"swordfish" not in stored
    assert service.db.path.read_bytes().find(b"swordfish") == -1


@pytest.mark.parametrize(
    "exc", [httpx.ConnectError, httpx.ConnectTimeout, httpx.ReadTimeout, httpx.RemoteProtocolError, httpx.ReadError]
)
def test_a_transport_failure_is_unavailable_sent_once_and_keeps_the_state(
    exc: type[httpx.TransportError], token: str, key: bytes
) -> None:
    recorder = Recorder(handler=failing(exc))
    backend = remote(recorder, token, key)
    with pytest.raises(Unavailable) as err:
        backend.save("draft\n", 0)
    assert recorder.count("PUT") == 1  # no retry of a write, ever
    assert backend.save_state.last.header() == "none" and not backend.save_state.in_flight
    message = str(err.value)
    assert URL in message and token not in message and "Traceback" not in message
    if exc in (httpx.ConnectError, httpx.ConnectTimeout):
        assert "nothing was changed" in message
    else:  # the request went out: the outcome is unknown, and the message says so
        assert "may or may not have been stored" in message
    with pytest.raises(Unavailable):
        backend.load()
    backend.close()


def test_offline_server_is_unavailable_and_nothing_changes(service: MemoryService, token: str, key: bytes) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # nothing listens on `port` now
    backend = RemoteBackend(f"http://127.0.0.1:{port}", token, "ws", key)
    with pytest.raises(Unavailable) as err:
        backend.save("draft\n", 0)
    assert f"127.0.0.1:{port}" in str(err.value) and "refused" in str(err.value)
    assert backend.save_state.last.header() == "none"
    assert service.get_file(LOCAL_USER, "ws", MEMORY_PATH) is None
    backend.close()


def test_a_server_that_never_answers_times_out(token: str, key: bytes) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)  # accepts the connection in the kernel, never answers
        backend = RemoteBackend(f"http://127.0.0.1:{sock.getsockname()[1]}", token, "ws", key, timeout=0.2)
        started = time.monotonic()
        with pytest.raises(Unavailable) as err:
            backend.save("draft\n", 0)
        assert time.monotonic() - started < 5
        backend.close()
    assert "did not answer within 0.2 s" in str(err.value)
    assert "may or may not have been stored" in str(err.value)


def test_a_read_timeout_says_nothing_changed(token: str, key: bytes) -> None:
    backend = remote(Recorder(handler=failing(httpx.ReadTimeout)), token, key)
    with pytest.raises(Unavailable, match="nothing was changed"):
        backend.get_policy()
    backend.close()


def test_server_errors_are_not_retried(token: str, key: bytes) -> None:
    recorder = Recorder(handler=lambda r: httpx.Response(500, json={"error": "internal", "message": "It broke."}))
    backend = remote(recorder, token, key)
    with pytest.raises(Unavailable, match="It broke"):
        backend.save("draft\n", 0)
    with pytest.raises(Unavailable):
        backend.set_policy(Mode.AUTO, 0)
    assert recorder.count("PUT") == 2 and len(recorder.requests) == 2
    backend.close()


def test_bad_and_revoked_tokens_are_unauthorized_without_echoing_them(
    service: MemoryService, token: str, key: bytes, recorders: Callable[[], Recorder]
) -> None:
    for bad in ("mf_not-a-real-token", None):
        backend = remote(recorders(), bad, key)  # type: ignore[arg-type]
        with pytest.raises(Unauthorized) as err:
            backend.load()
        assert "MEMFRAME_TOKEN" in str(err.value) and "mf_not-a-real" not in str(err.value)
        backend.close()
    backend = remote(recorders(), token, key)
    backend.save("one\n", 0)
    for info in service.accounts.tokens(LOCAL_USER):
        service.accounts.revoke_token(info.id)
    with pytest.raises(Unauthorized) as err:
        backend.save("two\n", 1)
    assert token not in str(err.value)
    assert backend.save_state.last.header() == "saved; version=1"
    assert service.get_file(LOCAL_USER, "ws", MEMORY_PATH).info.version == 1  # type: ignore[union-attr]
    backend.close()


def test_conflict_is_typed_and_remembered(token: str, key: bytes, recorders: Callable[[], Recorder]) -> None:
    alice, bob = remote(recorders(), token, key), remote(recorders(), token, key)
    alice.save("a\n", 0)
    bob.save("b\n", 1)
    with pytest.raises(VersionConflict) as err:
        alice.save("a2\n", 1)
    assert err.value.current_version == 2
    assert alice.save_state.last.header() == "conflict; version=2"
    alice.close()
    bob.close()


@pytest.mark.parametrize(
    ("response", "error", "words"),
    [
        (httpx.Response(502, text="<html>Bad Gateway</html>"), Unavailable, "answered with status 502"),
        (httpx.Response(404, text="<html>nope</html>"), NotFound, "no memframe API at this address"),
        (httpx.Response(401, text="login required"), Unauthorized, "needs a valid token"),
        (httpx.Response(200, text="<html>hello</html>"), Unavailable, "not memframe's API"),
        (httpx.Response(200, json={"version": "x"}), Unavailable, "does not understand"),
        (httpx.Response(418, json={"error": "teapot", "message": "short and stout"}), Unavailable, "stout"),
    ],
)
def test_answers_that_are_not_memframe_are_understood_as_such(
    response: httpx.Response, error: type[Exception], words: str, token: str, key: bytes
) -> None:
    backend = remote(Recorder(handler=lambda r: response), token, key)
    with pytest.raises(error, match=words):
        backend.get_policy()
    backend.close()


def test_location_hides_credentials_and_repr_hides_the_token(token: str, key: bytes) -> None:
    store = RemoteStore("https://user:pw@memory.example/base/", token, "ws")
    assert store.location == "https://memory.example/base"
    assert token not in repr(store) and "pw" not in repr(store)
    store.close()


@pytest.mark.parametrize("url", ["memory.example:8765", "ftp://memory.example", "http://", "not a url"])
def test_bad_urls_are_invalid_input(url: str, token: str) -> None:
    with pytest.raises(InvalidInput):
        RemoteStore(url, token, "ws")


def test_a_malformed_token_is_refused_without_being_shown() -> None:
    with pytest.raises(InvalidInput) as err:
        RemoteStore(URL, "mf_secret\nX-Evil: 1", "ws")
    assert "secret" not in str(err.value)


def test_a_closed_store_sends_nothing(token: str, key: bytes) -> None:
    recorder = Recorder(handler=lambda r: httpx.Response(200, json={}))
    backend = remote(recorder, token, key)
    backend.close()
    with pytest.raises(Unavailable):
        backend.load()
    assert recorder.requests == []


def test_a_send_hands_the_key_only_to_the_key_session_route_and_is_not_retried(token: str, key: bytes) -> None:
    """The key goes out once, to open a key session; the send itself carries only ids and state."""
    import base64

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/key-sessions"):
            return httpx.Response(200, json={"id": "ks_1", "workspaceId": "ws", "expiresAt": 1.0, "idleTimeout": 60.0})
        if request.url.path.endswith("/messages"):
            raise httpx.ReadTimeout("slow model")
        return httpx.Response(200, json={"revoked": True})

    recorder = Recorder(handler=answer)
    backend = remote(recorder, token, key)
    with pytest.raises(Unavailable, match="may or may not"):
        backend.send("conversation-1", "hello")
    sends = [r for r in recorder.requests if r.url.path.endswith("/messages")]
    assert len(sends) == 1, "a send was retried"
    assert sends[0].headers["X-Key-Session"] == "ks_1" and sends[0].headers["X-Memory-State"] == "none"
    encoded = base64.b64encode(key)
    carrying_key = [r.url.path for r in recorder.requests if encoded in r.content]
    assert carrying_key == ["/api/v1/workspaces/ws/key-sessions"]
    backend.close()
    assert recorder.requests[-1].method == "DELETE"  # closing revokes the key session


def test_a_delta_chain_is_read_in_one_request_per_run(
    token: str, key: bytes, recorders: Callable[[], Recorder]
) -> None:
    """Saves over HTTP are sealed deltas; a fresh client opens the longest chain (63 deltas after its
    keyframe) with one `revision-runs` request, not one request per version."""
    writer = remote(recorders(), token, key)
    base = "".join(f"- a remembered fact number {n}\n" for n in range(150))
    texts = [base + f"- edit {n}\n" for n in range(70)]
    for version, text in enumerate(texts):
        writer.save(text, version)
    writer.close()
    recorder = recorders()
    reader = remote(recorder, token, key)
    try:
        assert reader.read_revision(64) == texts[63]
        runs = [r for r in recorder.requests if "/revision-runs/" in r.url.path]
        assert len(recorder.requests) == 2 and len(runs) == 1  # the revision itself, then its run
        assert reader.read_revisions(list(range(1, 71))) == {v: t for v, t in enumerate(texts, start=1)}
    finally:
        reader.close()


def test_a_revision_run_is_one_to_two_hundred_consecutive_revisions(service: MemoryService, token: str) -> None:
    with asgi_client(create_app(service)) as client:
        client.headers["Authorization"] = f"Bearer {token}"
        url = "/api/v1/workspaces/ws/revision-runs/notes/a.md"
        for first, last in ((2, 1), (1, 201), (0, 3)):
            response = client.get(url, params={"first": first, "last": last})
            assert response.status_code == 422, (first, last, response.text)
        assert client.get(url, params={"first": 1, "last": 1}).status_code == 404  # no such note
        assert (
            client.get("/api/v1/workspaces/other/revision-runs/a.md", params={"first": 1, "last": 1}).status_code == 404
        )
