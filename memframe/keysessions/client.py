"""`RemoteKeySessions`: the `KeySessionStore` that asks the one key-session service over HTTP.

Every worker of `memframe serve --workers N` (over a private unix socket, httpx's `uds` transport),
or every server on several hosts (over TCP to `memframe keysessions --listen`), holds one of these
instead of keys of its own, and every call carries the shared credential. Each call asks the
service now: liveness is never cached, so the fence's "revalidate the key session immediately
before the batch" is one round trip to the one place that knows. What is kept here is only a memory
opener (the cipher made from a key the service has just confirmed, on this same call), so recall does
not rebuild it before every model call; it is dropped the moment the service says the session is
gone, on `forget`, and beyond a bound.

The service down (refusing connections, timing out, refusing our credential or our Host) is
`KeySessionServiceDown`, a kind of `KeySessionUnavailable`: sends and captures are refused, recall
withholds with `unavailable`, and people's Saves, which need no key, keep working. No message
built here carries a key, a body or the credential.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections import OrderedDict
from typing import Any

import httpx

from memframe import sealing
from memframe.core.errors import KeySessionServiceDown, KeySessionUnavailable
from memframe.core.turns import KeySessionInfo
from memframe.core.types import MEMORY_PATH

#: How long one call may take before the service counts as down (it answers from RAM).
TIMEOUT_SECONDS = 3.0
#: Memory openers kept at most (one per session recently recalled through this process).
MAX_OPENERS = 256


class RemoteKeySessions:
    """The key-session service at `url` (http://host:port; with `uds`, over that unix socket)."""

    def __init__(
        self,
        url: str,
        credential: str,
        *,
        uds: str | None = None,
        timeout: float = TIMEOUT_SECONDS,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """`uds`: serve's private service on a unix socket (`url` then names the Host it expects).
        `transport`: for tests (the app in-process)."""
        self.url = url
        self._http = httpx.Client(
            base_url=url,
            transport=transport or httpx.HTTPTransport(uds=uds),
            timeout=timeout,
            headers={"authorization": f"Bearer {credential}"},
            trust_env=False,  # never through a proxy from the environment: keys travel in these bodies
        )
        self._openers: OrderedDict[str, tuple[bytes, sealing.Opener]] = OrderedDict()
        self._lock = threading.Lock()
        self._limits: tuple[float, float] | None = None

    def __repr__(self) -> str:  # never shows the credential
        return f"<RemoteKeySessions {self.url}>"

    def _call(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """One call's answer, or its refusal raised: 409 the session is unavailable, anything else down."""
        try:
            response = self._http.post(f"/v1/{name}", json=body)
        except httpx.HTTPError:
            raise KeySessionServiceDown() from None  # the exception's text may name the URL, never a key
        if response.status_code == 409:
            raise KeySessionUnavailable(str(_json(response).get("message", "")))
        if response.status_code == 401:
            raise KeySessionServiceDown(
                "The key-session service refused this server's credential; nothing that needs the workspace key "
                "can run until they share one (Saves still work)."
            )
        if response.status_code == 400:
            raise KeySessionServiceDown(
                f"The key-session service refused the host name in {self.url}; start it with --allow-host "
                "naming it (Saves still work)."
            )
        if response.status_code != 200:
            raise KeySessionServiceDown()
        return _json(response)

    def open(self, workspace_id: str, user_id: str, key: bytes, *, hold_seconds: float | None = None) -> KeySessionInfo:
        body: dict[str, Any] = {"workspace_id": workspace_id, "user_id": user_id}
        body["key"] = base64.b64encode(key).decode("ascii")
        if hold_seconds is not None:
            body["hold_seconds"] = hold_seconds
        return _info(self._call("open", body))

    def resolve(self, session_id: str | None, workspace_id: str) -> bytes:
        if not session_id:
            raise KeySessionUnavailable("No key session is open for this conversation.")
        try:
            answer = self._call("resolve", {"session_id": session_id, "workspace_id": workspace_id})
        except KeySessionUnavailable:
            self._drop(session_id)
            raise
        try:
            return base64.b64decode(str(answer["key"]), validate=True)
        except (KeyError, ValueError):
            raise KeySessionServiceDown() from None

    def memory_opener(self, session_id: str | None, workspace_id: str) -> sealing.Opener:
        """Resolved against the service on every call (liveness is never cached); the cipher built
        from the confirmed key is reused while the service keeps returning that same key."""
        return self.key_and_opener(session_id, workspace_id)[1]

    def key_and_opener(self, session_id: str | None, workspace_id: str) -> tuple[bytes, sealing.Opener]:
        key = self.resolve(session_id, workspace_id)
        assert session_id is not None  # resolve refused an empty one
        with self._lock:
            kept = self._openers.get(session_id)
            if kept is not None and kept[0] == key:
                self._openers.move_to_end(session_id)
                return key, kept[1]
        opener = sealing.opener(key, workspace_id=workspace_id, path=MEMORY_PATH, remember=True)
        with self._lock:
            self._openers[session_id] = (key, opener)
            while len(self._openers) > MAX_OPENERS:
                self._openers.popitem(last=False)
        return key, opener

    async def memory_opener_async(self, session_id: str | None, workspace_id: str) -> sealing.Opener:
        """`memory_opener` on a thread, so the event loop serves other requests during the round trip."""
        return await asyncio.to_thread(self.memory_opener, session_id, workspace_id)

    def describe(self, session_id: str) -> KeySessionInfo | None:
        found = self._call("describe", {"session_id": session_id}).get("session")
        if found is None:
            self._drop(session_id)
            return None
        return _info(found)

    def forget(self, session_id: str) -> None:
        self._drop(session_id)
        self._call("forget", {"session_id": session_id})

    def sessions_of(self, user_id: str, workspace_id: str | None = None) -> list[tuple[str, str]]:
        found = self._call("sessions-of", {"user_id": user_id, "workspace_id": workspace_id})["sessions"]
        return [(str(sid), str(ws)) for sid, ws in found]

    def __len__(self) -> int:
        return int(self._call("status", {})["live"])

    def _limits_now(self) -> tuple[float, float]:
        if self._limits is None:  # the service's settings, not liveness: asked once
            answer = self._call("status", {})
            self._limits = (float(answer["idle_seconds"]), float(answer["lifetime_seconds"]))
        return self._limits

    @property
    def idle_seconds(self) -> float:
        return self._limits_now()[0]

    @property
    def lifetime_seconds(self) -> float:
        return self._limits_now()[1]

    def _drop(self, session_id: str) -> None:
        with self._lock:
            self._openers.pop(session_id, None)

    def close(self) -> None:
        with self._lock:
            self._openers.clear()
        self._http.close()


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        payload = response.json()
    except ValueError:
        raise KeySessionServiceDown() from None
    if not isinstance(payload, dict):
        raise KeySessionServiceDown()
    return payload


def _info(found: dict[str, Any]) -> KeySessionInfo:
    try:
        return KeySessionInfo(
            id=str(found["id"]),
            workspace_id=str(found["workspace_id"]),
            user_id=str(found["user_id"]),
            created_at=float(found["created_at"]),
            expires_at=float(found["expires_at"]),
            idle_timeout=float(found["idle_timeout"]),
        )
    except (KeyError, TypeError, ValueError):
        raise KeySessionServiceDown() from None
