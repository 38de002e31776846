"""The key-session service for tests: its app on a real unix socket (uvicorn in a thread, with serve's
configuration), as serve's workers reach their private one."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from memframe.api.server import uvicorn_config
from memframe.keysessions.app import create_app
from memframe.keysessions.private import PRIVATE_HOST
from memframe.keysessions.store import KeySessions

CREDENTIAL = "a-credential-of-some-length"


@contextmanager
def socket_dir() -> Iterator[str]:
    """A short private directory for a unix socket (a socket's path is at most ~100 bytes)."""
    where = tempfile.mkdtemp(prefix="ks-")
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


class UnixService:
    """`create_app(sessions, …)` served by uvicorn on a unix socket at `path`, in a thread of this process."""

    def __init__(self, sessions: KeySessions, path: str, credential: str = CREDENTIAL) -> None:
        self.path = path
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(path)
        sock.listen(16)
        app = create_app(sessions, credential, [PRIVATE_HOST])
        self.server = uvicorn.Server(uvicorn_config(app, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "the service did not start"
            time.sleep(0.01)
        self._sock = sock

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self._sock.close()
        if os.path.exists(self.path):
            os.unlink(self.path)
