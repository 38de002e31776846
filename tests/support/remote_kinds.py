"""The remote backend kinds the contract suite runs against, and the plumbing they share.

* `remote-asgi`: RemoteBackend → httpx.ASGITransport → the app, in this process.
  httpx's ASGI transport is async-only and RemoteStore uses a sync client, so
  `PortalASGITransport` runs it on a private event-loop thread (as Starlette's
  TestClient does, without its deprecated httpx coupling).
* `remote-uvicorn`: RemoteBackend → real HTTP on 127.0.0.1 → uvicorn → the app.
  One uvicorn server serves the whole session; each test's app is mounted
  under its own URL prefix (`/t<n>`), so a world's base URL carries a path,
  just as a server behind a reverse proxy would.

Both serve the world's own MemoryService, so a test may reach past the
backend into `world.service` and both sides see the same state.
"""

from __future__ import annotations

import atexit
import itertools
import json
import socket
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import anyio.from_thread
import httpx
import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from memframe.api import create_app
from memframe.backend.remote import RemoteBackend
from memframe.backend.sealed import SealedBackend
from memframe.service import MemoryService

if TYPE_CHECKING:  # conftest imports this module while it is itself being imported
    from tests.conftest import World


class _AsyncChunks(httpx.AsyncByteStream):
    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._stream:
            yield chunk


class PortalASGITransport(httpx.BaseTransport):
    """A sync httpx transport that calls an ASGI app on its own event-loop thread."""

    def __init__(self, app: ASGIApp) -> None:
        self._asgi = httpx.ASGITransport(app=app)
        self._portal_cm: AbstractContextManager[anyio.from_thread.BlockingPortal] | None = (
            anyio.from_thread.start_blocking_portal()
        )
        self._portal = self._portal_cm.__enter__()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not isinstance(request.stream, httpx.AsyncByteStream):  # a sync generator body, chunk by chunk
            request = httpx.Request(
                request.method, request.url, headers=request.headers, stream=_AsyncChunks(request.stream)
            )

        async def call() -> httpx.Response:
            response = await self._asgi.handle_async_request(request)
            content = await response.aread()
            await response.aclose()
            return httpx.Response(response.status_code, headers=response.headers, content=content)

        return self._portal.call(call)

    def close(self) -> None:
        if self._portal_cm is not None:
            cm, self._portal_cm = self._portal_cm, None
            cm.__exit__(None, None, None)


def asgi_client(app: ASGIApp, base_url: str = "http://memframe.test") -> httpx.Client:
    """An httpx client on an app in this process, for the API tests."""
    return httpx.Client(transport=PortalASGITransport(app), base_url=base_url)


class LoopbackServer:
    """One uvicorn on 127.0.0.1 (a free port), dispatching `/t<n>/…` to mounted apps."""

    def __init__(self) -> None:
        self._apps: dict[str, ASGIApp] = {}
        self._ids = itertools.count(1)
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that name it,
        # and without it every request waits out a 40 ms delayed ACK.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self, lifespan="off", log_config=None, access_log=False, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="loopback-uvicorn", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the loopback uvicorn did not start")
            time.sleep(0.005)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def mount(self, app: ASGIApp) -> str:
        """Serve `app` under a fresh prefix; returns its base URL."""
        prefix = f"t{next(self._ids)}"
        self._apps[prefix] = app
        return f"{self.url}/{prefix}"

    def unmount(self, base_url: str) -> None:
        self._apps.pop(base_url.rsplit("/", 1)[-1], None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        prefix = scope["path"].lstrip("/").split("/", 1)[0]
        app = self._apps.get(prefix)
        if app is None:
            body = json.dumps({"error": "not_found", "message": "Nothing is mounted here."}).encode()
            await send(
                {"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": body})
            return
        await app({**scope, "root_path": scope.get("root_path", "") + "/" + prefix}, receive, send)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)


_server: LoopbackServer | None = None
_server_lock = threading.Lock()


def loopback_server() -> LoopbackServer:
    """The session's one uvicorn, started on first use and stopped when the test run exits.

    conftest's `world` fixture only sees makers (no fixtures), so the server is a
    lazily started singleton whose stop is registered with atexit.
    """
    global _server
    with _server_lock:
        if _server is None:
            _server = LoopbackServer()
            atexit.register(_server.stop)
        return _server


def user_token(service: MemoryService, user: str) -> str:
    return service.accounts.create_token(user, "test")[1]


# FastAPI builds each app's routes on its first request (~0.1 s), so one app serves
# every client of a service; a world's second client reuses it.
_apps: weakref.WeakKeyDictionary[MemoryService, FastAPI] = weakref.WeakKeyDictionary()
_mounted: weakref.WeakKeyDictionary[MemoryService, str] = weakref.WeakKeyDictionary()


def app_for(service: MemoryService) -> FastAPI:
    app = _apps.get(service)
    if app is None:
        app = _apps[service] = create_app(service)
    return app


def _remote_asgi(world: World) -> SealedBackend:
    transport = PortalASGITransport(app_for(world.service))
    token = user_token(world.service, world.user)
    return RemoteBackend("http://memframe.test", token, world.workspace_id, world.key, transport=transport)


def _remote_uvicorn(world: World) -> SealedBackend:
    base_url = _mounted.get(world.service)
    if base_url is None:
        server = loopback_server()
        base_url = _mounted[world.service] = server.mount(app_for(world.service))
        world.cleanups.append(lambda: server.unmount(base_url))
    token = user_token(world.service, world.user)
    return RemoteBackend(base_url, token, world.workspace_id, world.key)


REMOTE_MAKERS: dict[str, Callable[[World], SealedBackend]] = {
    "remote-asgi": _remote_asgi,
    "remote-uvicorn": _remote_uvicorn,
}

__all__ = ["REMOTE_MAKERS", "LoopbackServer", "PortalASGITransport", "asgi_client", "loopback_server"]
