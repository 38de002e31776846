"""serve's own key-session service: the HTTP app in a child process, on a unix socket only serve's
user can reach.

`memframe serve --workers N` starts one before its workers and stops it after them
(`PrivateService`): a directory only serve's user may enter (0700), a socket there (0600), and a
fresh credential for each serve, passed to the child through the spawn pipe, never a file, an
argument list or the environment. The workers reach it with `PrivateService.spec`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from memframe.core.errors import KeySessionServiceDown, Unavailable
from memframe.keysessions.client import RemoteKeySessions
from memframe.keysessions.store import DEFAULT_IDLE_SECONDS, DEFAULT_LIFETIME_SECONDS, KeySessions

#: The Host the workers name over the socket, and the only one the private service answers.
PRIVATE_HOST = "keysessions"
PRIVATE_URL = f"http://{PRIVATE_HOST}"
#: How long serve waits for its key-session service to answer once started.
START_SECONDS = 30.0


def run_private(uds: str, credential: str, idle: float, lifetime: float, read_timeout: float | None = None) -> None:
    """The child process: the service on a unix socket at `uds` until SIGTERM, then the socket and
    its directory are removed."""
    from memframe.keysessions.app import create_app, serve_on  # the child's: serve itself needs no starlette

    # A process group of its own: a Ctrl+C in the terminal reaches serve and its workers, not this,
    # which serve stops last (with SIGTERM) so the workers' last requests still find their keys.
    os.setpgid(0, 0)
    stop_with_parent()
    sessions = KeySessions(time.time, idle_seconds=idle, lifetime_seconds=lifetime)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(uds)
    sock.bind(uds)
    os.chmod(uds, 0o600)
    sock.listen(2048)
    try:
        serve_on(create_app(sessions, credential, [PRIVATE_HOST]), sock, read_timeout=read_timeout)
    finally:
        sock.close()
        with contextlib.suppress(OSError):  # serve removes the directory too; this covers serve being killed
            os.unlink(uds)
            os.rmdir(os.path.dirname(uds))


def stop_with_parent() -> None:
    """SIGTERM ourselves (a graceful stop) if serve goes away without stopping us (killed by SIGKILL),
    so no worker or key-session service is left serving on its own."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="memframe-parent-watch", daemon=True).start()


class PrivateService:
    """serve's key-session child: `start` (again after it died: every key is then forgotten), `stop`."""

    def __init__(
        self, context: Any, idle: float | None, lifetime: float | None, read_timeout: float | None = None
    ) -> None:
        """`context`: serve's multiprocessing context (spawn), so the child inherits nothing of serve's;
        the rest are serve's options (None: their defaults)."""
        self._context = context
        self._options = (idle or DEFAULT_IDLE_SECONDS, lifetime or DEFAULT_LIFETIME_SECONDS, read_timeout)
        self._dir = tempfile.mkdtemp(prefix="memframe-keysessions-")  # mode 0700
        credential, uds = secrets.token_urlsafe(32), str(Path(self._dir) / "ks.sock")
        #: (url, credential, unix socket) for `RemoteKeySessions(url, credential, uds=…)` in each worker.
        self.spec: tuple[str, str, str] = (PRIVATE_URL, credential, uds)
        self.process: Any = None

    def start(self) -> Any:
        """Start the child and wait until it answers; its process. Unavailable if it never does."""
        _, credential, uds = self.spec
        self.process = self._context.Process(
            target=run_private, args=(uds, credential, *self._options), name="memframe-keysessions", daemon=True
        )
        self.process.start()
        probe = RemoteKeySessions(PRIVATE_URL, credential, uds=uds, timeout=1.0)
        deadline = time.monotonic() + START_SECONDS
        try:
            while True:
                try:
                    len(probe)
                    return self.process
                except KeySessionServiceDown:
                    if not self.process.is_alive() or time.monotonic() > deadline:
                        raise Unavailable("The key-session service for the workers did not start.") from None
                    time.sleep(0.05)
        finally:
            probe.close()

    def stop(self) -> None:
        """SIGTERM (uvicorn finishes the calls in flight), then SIGKILL after 5 s; its directory goes."""
        if self.process is not None:
            self.process.terminate()
            self.process.join(5.0)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
        shutil.rmtree(self._dir, ignore_errors=True)
