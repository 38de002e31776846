"""KeySessions: workspace keys held only in this process's RAM.

A person who enables the Assistant hands the workspace key to this store for a
while. Nothing here is ever written anywhere: a restart, an idle eviction or an
expiry forgets the key. An explicit revocation is different: the service writes
a durable `key_session_revocations` row first (which the commit fence reads),
then calls `forget`.

`KeySessionStore` is the seam: this in-process `KeySessions` (the default: the local
backend, a one-worker `memframe serve`) or `client.RemoteKeySessions`, which asks the one
key-session service (`app.py`) that several workers or hosts share.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from memframe import sealing
from memframe.core.errors import KeySessionUnavailable
from memframe.core.types import MEMORY_PATH

if TYPE_CHECKING:  # imported when a key session opens: the frame's first paint opens the store without it
    from memframe.core.turns import KeySessionInfo

DEFAULT_IDLE_SECONDS = 30 * 60
DEFAULT_LIFETIME_SECONDS = 12 * 60 * 60
#: How often the whole table is swept of stale sessions; a session being used is judged on
#: every use, so the sweep only bounds how long an abandoned key stays in RAM past its idle time.
SWEEP_SECONDS = 5.0


#: Live key sessions one person may hold in one workspace; opening one more evicts their oldest.
MAX_SESSIONS_PER_PERSON = 8


class KeySessionStore(Protocol):
    """Where the service keeps key sessions. Every method judges liveness now (idle time, expiry):
    nothing may answer from a cached "it was live a moment ago", because the fence revalidates the
    key session immediately before each batch."""

    @property
    def idle_seconds(self) -> float:
        """How long an unused session keeps its key."""
        ...

    @property
    def lifetime_seconds(self) -> float:
        """How long any session keeps its key, used or not."""
        ...

    def open(self, workspace_id: str, user_id: str, key: bytes, *, hold_seconds: float | None = None) -> KeySessionInfo:
        """A new live session holding `key` for this person and workspace; with `hold_seconds`,
        held that long whether used or not (at most the lifetime), for chat clients' unlock."""
        ...

    def resolve(self, session_id: str | None, workspace_id: str) -> bytes:
        """The key of a live session of this workspace (touching it), else KeySessionUnavailable."""
        ...

    def memory_opener(self, session_id: str | None, workspace_id: str) -> sealing.Opener:
        """`sealing.opener` for the workspace's memory under a live session's key (as `resolve` judges),
        remembering what it opened so a head stored as a delta opens with one decrypt."""
        ...

    def key_and_opener(self, session_id: str | None, workspace_id: str) -> tuple[bytes, sealing.Opener]:
        """`resolve` and `memory_opener` judged together, for a capture that opens the head and seals
        the next version: one look at the session (one round trip to a key-session service)."""
        ...

    async def memory_opener_async(self, session_id: str | None, workspace_id: str) -> sealing.Opener:
        """`memory_opener`, judged now exactly as the sync one is, for a caller on an event loop (recall
        on SQLite) that should serve other requests while a key-session service answers."""
        ...

    def describe(self, session_id: str) -> KeySessionInfo | None:
        """The session's facts if it is live (no key), else None."""
        ...

    def forget(self, session_id: str) -> None:
        """Drop the key now (after a revocation row, or an eviction); an unknown id is no error."""
        ...

    def sessions_of(self, user_id: str, workspace_id: str | None = None) -> list[tuple[str, str]]:
        """(id, workspace) of a person's sessions, for revoking them when their access ends."""
        ...

    def __len__(self) -> int:
        """How many sessions are live."""
        ...


@dataclass
class _Session:
    workspace_id: str
    user_id: str
    key: bytes
    created_at: float
    expires_at: float
    last_used: float
    idle_seconds: float
    memory_opener: sealing.Opener | None = None

    def __repr__(self) -> str:  # never shows the key
        return f"<KeySession {self.workspace_id} for {self.user_id}>"


class KeySessions:
    """The in-RAM `KeySessionStore`: every session judged live or stale on every use, under one lock."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        idle_seconds: float = DEFAULT_IDLE_SECONDS,
        lifetime_seconds: float = DEFAULT_LIFETIME_SECONDS,
    ) -> None:
        self._clock = clock
        self.idle_seconds = idle_seconds
        self.lifetime_seconds = lifetime_seconds
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        # (user, workspace) -> their session ids, oldest first: opening one judges that person's
        # sessions only, not every session the service holds (100,000 of them at scale)
        self._theirs: dict[tuple[str, str], dict[str, None]] = {}
        self._swept_at = float("-inf")

    def open(self, workspace_id: str, user_id: str, key: bytes, *, hold_seconds: float | None = None) -> KeySessionInfo:
        """A new session bound to the person who opened it; beyond the cap per person and
        workspace, their oldest session there is evicted (forgotten, as idle eviction does: no
        revocation row). A held session (`memframe key unlock`) is not evicted for idling: the
        person chose how long it lasts, within the lifetime."""
        now = self._clock()
        import secrets  # here, not at the top: reading commands (`history -p`) never open a session

        session_id = "ks_" + secrets.token_urlsafe(24)
        lifetime = self.lifetime_seconds if hold_seconds is None else min(hold_seconds, self.lifetime_seconds)
        idle = self.idle_seconds if hold_seconds is None else lifetime
        session = _Session(workspace_id, user_id, bytes(key), now, now + lifetime, now, idle)
        with self._lock:
            self._evict_locked(now)
            ids = self._theirs.setdefault((user_id, workspace_id), {})
            # In the order they were opened (a dict keeps it): two opened within one tick of the
            # clock are still first and second, never ordered by their random ids.
            theirs = [sid for sid in ids if not self._stale(self._sessions[sid], now)]
            for sid in theirs[: max(0, len(theirs) - MAX_SESSIONS_PER_PERSON + 1)]:
                self._drop_locked(sid)
            self._sessions[session_id] = session
            self._theirs.setdefault((user_id, workspace_id), {})[session_id] = None
        return self._info(session_id, session)

    def sessions_of(self, user_id: str, workspace_id: str | None = None) -> list[tuple[str, str]]:
        """(id, workspace) of a person's sessions (in one workspace, or all), live or not yet swept."""
        with self._lock:
            return [
                (sid, s.workspace_id)
                for sid, s in self._sessions.items()
                if s.user_id == user_id and (workspace_id is None or s.workspace_id == workspace_id)
            ]

    def _info(self, session_id: str, s: _Session) -> KeySessionInfo:
        from memframe.core.turns import KeySessionInfo

        return KeySessionInfo(session_id, s.workspace_id, s.user_id, s.created_at, s.expires_at, s.idle_seconds)

    def _stale(self, s: _Session, now: float) -> bool:
        return now >= s.expires_at or now - s.last_used >= s.idle_seconds

    def _evict_locked(self, now: float) -> None:
        if now - self._swept_at < SWEEP_SECONDS and now >= self._swept_at:
            return  # swept a moment ago (a clock that went back sweeps again)
        self._swept_at = now
        for sid in [sid for sid, s in self._sessions.items() if self._stale(s, now)]:
            self._drop_locked(sid)

    def _drop_locked(self, session_id: str) -> None:
        """Forget one session (and its place in its person's list)."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        key = (session.user_id, session.workspace_id)
        ids = self._theirs.get(key)
        if ids is not None:
            ids.pop(session_id, None)
            if not ids:
                del self._theirs[key]

    def _live_locked(self, session_id: str, now: float) -> _Session | None:
        """The session if it is live; a stale one is forgotten the moment it is asked for."""
        self._evict_locked(now)
        session = self._sessions.get(session_id)
        if session is not None and self._stale(session, now):
            self._drop_locked(session_id)
            return None
        return session

    def resolve(self, session_id: str | None, workspace_id: str) -> bytes:
        """The key, if the session is live and belongs to this workspace; touching it keeps it alive."""
        return self._touch(session_id, workspace_id).key

    def memory_opener(self, session_id: str | None, workspace_id: str) -> sealing.Opener:
        """`sealing.opener` for the workspace's memory under this session's key, made once per session
        (recall opens the memory before every model call) and forgotten with the key. It remembers
        the versions it opened (RAM only, with the exact ciphertext each came from), so a head
        stored as a delta opens with one decrypt against the head before it; each call passes the
        `fetch` that reads earlier versions, for a head whose chain it has not opened yet."""
        return self.key_and_opener(session_id, workspace_id)[1]

    def key_and_opener(self, session_id: str | None, workspace_id: str) -> tuple[bytes, sealing.Opener]:
        session = self._touch(session_id, workspace_id)
        if session.memory_opener is None:
            session.memory_opener = sealing.opener(
                session.key, workspace_id=workspace_id, path=MEMORY_PATH, remember=True
            )
        return session.key, session.memory_opener

    async def memory_opener_async(self, session_id: str | None, workspace_id: str) -> sealing.Opener:
        """The sync `memory_opener`, called right here: in this process it is a dict look-up under a
        lock no one holds for longer, so there is nothing to wait for."""
        return self.key_and_opener(session_id, workspace_id)[1]

    def _touch(self, session_id: str | None, workspace_id: str) -> _Session:
        if not session_id:
            raise KeySessionUnavailable("No key session is open for this conversation.")
        now = self._clock()
        with self._lock:
            session = self._live_locked(session_id, now)
            if session is None or session.workspace_id != workspace_id:
                raise KeySessionUnavailable()
            session.last_used = now
            return session

    def describe(self, session_id: str) -> KeySessionInfo | None:
        with self._lock:
            session = self._live_locked(session_id, self._clock())
            return None if session is None else self._info(session_id, session)

    def forget(self, session_id: str) -> None:
        with self._lock:
            self._drop_locked(session_id)

    def __len__(self) -> int:
        """Live sessions only: a stale one not yet swept away does not count."""
        now = self._clock()
        with self._lock:
            return sum(not self._stale(s, now) for s in self._sessions.values())
