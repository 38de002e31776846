"""This client's own Saves, per workspace, and the X-Memory-State they produce.

The contract: each Assistant send waits (up to 5 s) for an in-flight Save,
then reports the state of this client's saves. An unsaved editor draft is
never reported: it is not saved memory. The header's values are defined in
memframe.core.memory_state; `reported` adds what this machine has seen.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from memframe.core.errors import VersionConflict
from memframe.core.memory_state import MemoryState

SEND_WAIT_SECONDS = 5.0


class SaveState:
    """Tracks one workspace's saves for this client; thread-safe."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._in_flight = 0
        self._last = MemoryState()

    @property
    def last(self) -> MemoryState:
        with self._cond:
            return self._last

    @property
    def in_flight(self) -> bool:
        with self._cond:
            return self._in_flight > 0

    @contextmanager
    def saving(self) -> Iterator[None]:
        """Wrap one human write. Success is acknowledged by `acknowledge`; a conflict is
        remembered; any other failure (offline, auth) changes nothing, as it changed nothing."""
        with self._cond:
            self._in_flight += 1
        try:
            yield
        except VersionConflict as exc:
            with self._cond:
                self._last = MemoryState("conflict", exc.current_version)
            raise
        finally:
            with self._cond:
                self._in_flight -= 1
                self._cond.notify_all()

    def acknowledge(self, version: int) -> None:
        with self._cond:
            self._last = MemoryState("saved", version)

    def take_server_version(self, version: int) -> None:
        """The person took the server's version `version` over their refused write (the conflict
        view's "Discard my draft", or a reload after it): the conflict is resolved, and this client
        is in step with `version`, as if it had saved it, so recall checks the server is no older.
        A state that is not a conflict, or a conflict about a newer version, is left alone."""
        with self._cond:
            last = self._last
            if last.kind == "conflict" and version >= (last.version or 0):
                self._last = MemoryState("saved", version)

    def wait_idle(self, timeout: float = SEND_WAIT_SECONDS) -> bool:
        """Wait for in-flight saves to finish; True if none is left."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._in_flight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def for_send(self, timeout: float = SEND_WAIT_SECONDS) -> MemoryState:
        """What an Assistant send reports: waits for an in-flight save, then reads."""
        if not self.wait_idle(timeout):
            return MemoryState("pending")
        return self.last

    def header_for_send(self, timeout: float = SEND_WAIT_SECONDS) -> str:
        return self.for_send(timeout).header()


def reported(own: MemoryState | None, seen_version: int) -> MemoryState | None:
    """What a send reports: this client's own state (None: it has no Saves, as `memframe mcp`),
    raised to `seen_version`, the newest memory version this machine has seen acknowledged.

    A server showing an older version than that was rolled back (a restored dump, a lagging
    standby, a hand-edited database), so recall withholds the memory as `stale` rather than hand
    the model a text from before, say, a Clear. `pending` and `conflict` withhold already and
    are reported as they are."""
    if seen_version <= 0 or (own is not None and own.kind in ("pending", "conflict")):
        return own
    if own is not None and own.kind == "saved" and (own.version or 0) >= seen_version:
        return own
    return MemoryState("saved", seen_version)
