"""`memframe serve --workers N` and `--key-sessions URL`: one server as several processes.

    memframe serve --db team.db --workers 4
    memframe serve --db postgresql://… --key-sessions http://10.0.0.5:8790 --key-sessions-credential-file F

`serve` binds one listening socket per worker to the one port with SO_REUSEPORT
(`listening.listen_each`; elsewhere than Linux the workers share one socket), so the kernel spreads
new connections over the workers, and spawns each worker (multiprocessing's spawn: nothing of the
parent's threads, connections or locks inherited) to run uvicorn on its socket; a replacement
worker takes over its predecessor's socket and the connections queued there.

Why not uvicorn's own supervisor (`uvicorn.supervisors.Multiprocess`, `workers=`): it restarts dead
workers, but has no place for serve's key-session service, which must start before the workers,
start again when it dies and stop after them, and it never gives up on a crash loop (only on a worker
that fails to start). It also pickles one `Config` into every child, so each worker would have to
rebuild its service, its app and the edge's limits from import strings, and it shares one socket
among the workers where serve gives each its own.

What the workers share: the database (SQLite's file lock or PostgreSQL's advisory lock orders their
batches) and the key-session service (one process holding every key). What stays per worker, and
correctly so: the group-commit queue, the receipt queue, the writer lock (they order this worker's
batches before they reach the database's own lock).

A worker that dies is reported on stderr and replaced; a write it had not acknowledged committed
whole or not at all (one transaction per batch). Five deaths within a minute is a crash loop: serve
stops every child and exits 1. A key-session service that dies is started again, which forgets every
key: clients open new sessions, and meanwhile every key-needing call is refused with
KeySessionServiceDown. SIGINT/SIGTERM stops the workers (gracefully, then by force after 15 s), then
the key-session service, then exits 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# multiprocessing is imported where the supervisor uses it: every command
# line (the frame's too) builds `serve`'s options from this module, and only serve runs workers.

#: Worker deaths within `CRASH_WINDOW` seconds that make serve give up instead of replacing them.
CRASH_LIMIT = 5
CRASH_WINDOW = 60.0
#: How long a worker gets to finish its requests after SIGTERM before it is killed.
STOP_SECONDS = 15.0


def _err(line: str) -> None:
    print(f"memframe: {line}", file=sys.stderr, flush=True)


def add_options(serve: argparse.ArgumentParser) -> None:
    """`serve`'s options for several processes and a shared key-session service."""
    serve.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N",
        help="worker processes sharing the port (default: 1, one process with keys in its own RAM); "
        "with more, serve also runs a key-session service for them",
    )
    serve.add_argument(
        "--key-sessions",
        default=None,
        metavar="URL",
        help="use the key-session service `memframe keysessions` runs at URL (http://HOST:PORT) "
        "instead of keys in this server's RAM: for several hosts behind one load balancer "
        "(its own --key-session-idle/-lifetime then apply)",
    )
    serve.add_argument(
        "--key-sessions-credential-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="the secret that service expects (default: $MEMFRAME_KEYSESSIONS_CREDENTIAL)",
    )


def _workers(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of workers") from None
    if not 1 <= number <= 64:
        raise argparse.ArgumentTypeError("--workers is 1 to 64")
    return number


def shared_store(args: argparse.Namespace) -> Any:
    """The `RemoteKeySessions` for `--key-sessions URL`, or None without it (keys in this process)."""
    if not getattr(args, "key_sessions", None):
        return None
    from memframe.core.errors import InvalidInput
    from memframe.keysessions.client import RemoteKeySessions

    url = str(args.key_sessions)
    if not url.startswith(("http://", "https://")):
        raise InvalidInput(f"--key-sessions takes http://HOST:PORT, not {url!r}.")
    return RemoteKeySessions(url, _credential(args))


# --- one worker ----------------------------------------------------------------------------


def _worker(
    sock: socket.socket,
    args: argparse.Namespace,
    store_spec: tuple[str, str, str | None],
    open_service: Callable[..., Any],
    serve_on: Callable[..., Any],
) -> None:
    """A worker process: the service over the shared database and key-session service, served
    by uvicorn on the socket serve bound for it. Its access lines name its pid.

    `open_service` and `serve_on` are `memframe.cli.server`'s own (passed by reference through
    the spawn pipe), so a worker serves exactly as one-process `serve` does."""
    from memframe.api.server import access_log_to_stdout
    from memframe.core.errors import MemframeError
    from memframe.keysessions.client import RemoteKeySessions

    access_log_to_stdout(args.log_level, who="[worker %(process)d] ")
    from memframe.keysessions.private import stop_with_parent
    from memframe.settings import current

    stop_with_parent()
    args.settings = current()
    url, credential, uds = store_spec
    store = RemoteKeySessions(url, credential, uds=uds)
    try:
        with open_service(args, key_sessions=store) as service:
            serve_on(sock, service, args, fresh=False, say_serving=False)
    except MemframeError as exc:  # e.g. the database unreachable at start: one line, and serve is told by our exit
        _err(f"worker {os.getpid()}: {exc}")
        sys.exit(1)
    finally:
        store.close()


# --- the supervisor --------------------------------------------------------------------------


class _Supervisor:
    """serve's own process with several workers: starts, watches and stops its children."""

    def __init__(
        self, args: argparse.Namespace, sockets: list[socket.socket], serving: tuple[Callable[..., Any], ...]
    ) -> None:
        self.args = args
        self.serving = serving
        self.sockets = sockets  # worker i's listening socket, kept open here for its replacements
        import multiprocessing

        self.context = multiprocessing.get_context("spawn")
        self.workers: list[Any] = []
        self.deaths: list[float] = []
        self.signal: int | None = None
        self.private: Any = None  # our own key-session service (`memframe.keysessions.private`)
        self.keysessions: Any = None
        self.spec: tuple[str, str, str | None]

    def stop_on(self, signum: int, frame: Any) -> None:
        self.signal = signum

    def start_keysessions(self) -> None:
        """Our own key-session service, on a unix socket in a directory only this user can enter."""
        from memframe.keysessions.private import PrivateService

        if self.private is None:
            a = self.args
            self.private = PrivateService(self.context, a.key_session_idle, a.key_session_lifetime, a.read_timeout)
            self.spec = self.private.spec
        self.keysessions = self.private.start()

    def start_worker(self, index: int) -> Any:
        # The settings are read again in the worker (the same environment and file): they hold a
        # mapping proxy, which does not pickle, and secrets that need not cross the spawn pipe.
        args = argparse.Namespace(**{k: v for k, v in vars(self.args).items() if k != "settings"})
        process = self.context.Process(
            target=_worker,
            args=(self.sockets[index], args, self.spec, *self.serving),
            name=f"memframe-worker-{index + 1}",
        )
        process.start()
        return process

    def run(self) -> int:
        """Start everything, watch until a signal (or a crash loop), stop everything; the exit code."""
        try:
            if self.args.key_sessions:
                self.spec = (str(self.args.key_sessions), _credential(self.args), None)
            else:
                self.start_keysessions()
            self.workers = [self.start_worker(i) for i in range(self.args.workers)]
            pids = ", ".join(str(w.pid) for w in self.workers)
            ks = "" if self.keysessions is None else f", key-session service pid {self.keysessions.pid}"
            print(f"memframe workers started (pids {pids}{ks})", flush=True)
            return self._watch()
        finally:
            self._stop_all()

    def _watch(self) -> int:
        from multiprocessing.connection import wait

        while self.signal is None:
            watched = [w.sentinel for w in self.workers]
            if self.keysessions is not None:
                watched.append(self.keysessions.sentinel)
            wait(watched, timeout=0.5)
            if self.signal is not None:
                break
            for index, process in enumerate(self.workers):
                if process.is_alive():
                    continue
                _err(f"worker {index + 1} (pid {process.pid}) {_how(process.exitcode)}; starting another.")
                now = time.monotonic()
                self.deaths = [t for t in self.deaths if now - t < CRASH_WINDOW] + [now]
                if len(self.deaths) >= CRASH_LIMIT:
                    _err(f"{CRASH_LIMIT} workers died within {CRASH_WINDOW:g} s; stopping (see the lines above).")
                    return 1
                self.workers[index] = self.start_worker(index)
            if self.keysessions is not None and not self.keysessions.is_alive():
                _err(
                    f"the key-session service (pid {self.keysessions.pid}) {_how(self.keysessions.exitcode)}; "
                    "starting it again: every key is forgotten, clients open new key sessions."
                )
                self.start_keysessions()
        return 0

    def _stop_all(self) -> None:
        for process in self.workers:
            if process.is_alive():
                process.terminate()  # SIGTERM: uvicorn finishes the requests in flight
        deadline = time.monotonic() + STOP_SECONDS
        for process in self.workers:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join()
        if self.private is not None:
            self.private.stop()


def _credential(args: argparse.Namespace) -> str:
    from memframe.cli.keysessions import required_credential
    from memframe.settings import current

    return required_credential(args.key_sessions_credential_file, current(), "--key-sessions")


def _how(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"was killed by {signal.Signals(-exitcode).name}"
    return f"exited with status {exitcode}"


def serve_workers(
    args: argparse.Namespace,
    announce: Callable[[socket.socket], None],
    open_service: Callable[..., Any],
    serve_on: Callable[..., Any],
) -> int:
    """Serve with `args.workers` processes, each on its own listening socket of one port, until
    SIGINT/SIGTERM.

    `announce(sock)` prints the serving line once the sockets listen; `open_service(args, key_sessions=…)`
    and `serve_on(sock, service, args, …)` are how each worker serves (the caller's, so one worker
    and several serve alike)."""
    from memframe.cli.listening import listen_each

    sockets = listen_each(args.host, args.port, args.workers)
    try:
        supervisor = _Supervisor(args, sockets, (open_service, serve_on))
        previous = {sig: signal.signal(sig, supervisor.stop_on) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            announce(sockets[0])
            code = supervisor.run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    finally:
        for sock in set(sockets):
            sock.close()
    how = f" on {signal.Signals(supervisor.signal).name}" if supervisor.signal else ""
    print(f"memframe stopped{how}; the database is closed.", flush=True)
    return code
