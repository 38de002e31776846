"""`RemoteKeySessions`: the `KeySessionStore` that asks the one key-session service.

Every worker of `memframe serve --workers N` (one JSON line per call over a private unix
socket), or every server on several hosts (over HTTP to `memframe keysessions --listen`), holds
one of these instead of keys of its own. Each call asks the service now: liveness is never cached, so the fence's
"revalidate the key session immediately before the batch" is one round trip to the one place
that knows. What is kept here is only a memory opener (the cipher made from a key the service
has just confirmed, on this same call), so recall does not rebuild it before every model call;
it is dropped the moment the service says the session is gone, on `forget`, and beyond a bound.

Recall on SQLite awaits its resolve on the worker's event loop (`memory_opener_async`): over the
unix socket that is `_LinePipe`, one kept connection per loop (its socket watched by the loop) on
which every recall's call is written as it comes and answers come back in order, so the loop serves
other requests while the service answers and one wake-up of the service answers several recalls; a
call alone reads its answer as soon as its write returns, which on few cores is usually when the
service has already answered.

Where a recall's round trip goes (2 cores, one recall at a time, timestamps in both processes):
~150 µs p50 against ~10 µs for the in-process store. The worker's write wakes the service on the
worker's own core and it runs at once (the write returns only after the service has answered, ~9
recalls in 10), so the trip is serial, not overlapped with anything: ~20 µs of this client's Python
before the write, ~25 µs switch and dispatch into the service, ~60 µs of the service's Python for
one resolve (6-9 µs with warm caches; they are cold after the worker's ~1 ms of request), ~15 µs
back, ~25 µs of this client's Python after it. Sending the resolve earlier (say, before recall's
snapshot read) would overlap nothing while the service shares this core.

The service down (refusing connections, timing out, refusing our credential) is
`KeySessionServiceDown`, a kind of `KeySessionUnavailable`: sends and captures are refused, recall
withholds with `unavailable`, and people's Saves, which need no key, keep working. No message
built here carries a key, a body or the credential.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import json.encoder
import re
import socket
import threading
from collections import OrderedDict, deque
from typing import Any

import httpx

from memframe import crypto
from memframe.core.errors import KeySessionServiceDown, KeySessionUnavailable
from memframe.core.turns import KeySessionInfo
from memframe.core.types import MEMORY_PATH

#: How long one call may take before the service counts as down (it answers from RAM).
TIMEOUT_SECONDS = 3.0
#: Memory openers kept at most (one per session recently recalled through this process).
MAX_OPENERS = 256
#: The longest answer line read from the line framing (sessions-of may list many sessions).
ANSWER_LIMIT = 1 << 20
#: The most bytes one read of the awaited calls' connection takes (several answers at once).
RECEIVE_BYTES = 1 << 16
#: A resolve's answer on the line framing, around the key in base64: exactly the bytes of
#: `{"status":200,"body":{"key":…}}` as JSON, which the service writes and this client recognises
#: without a JSON parse (one precedes every recall).
RESOLVED = (b'{"status":200,"body":{"key":"', b'"}}')
_BASE64 = re.compile(rb"[A-Za-z0-9+/]*={0,2}")
#: A str as a JSON string, every character beyond ASCII escaped (json's own encoder, in C).
_string = json.encoder.encode_basestring_ascii


class RemoteKeySessions:
    """The key-session service at `url` (http://host:port, or any URL with `uds` a unix socket)."""

    def __init__(
        self,
        url: str,
        credential: str | None,
        *,
        uds: str | None = None,
        timeout: float = TIMEOUT_SECONDS,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """`uds`: serve's private key-session service on a unix socket, spoken to one JSON line per
        call (`keysessions_app.line_handler`: HTTP framing was most of each round trip's CPU);
        otherwise HTTP to `url`. `transport`: for tests (the app in-process)."""
        self.url = url
        self._uds = uds if transport is None else None
        self._timeout = timeout
        self._authorization = "" if credential is None else f"Bearer {credential}"
        self._framed_authorization = _string(self._authorization)  # as it goes into every line
        self._idle: list[tuple[socket.socket, Any]] = []  # kept line connections, one per call in flight
        self._http = httpx.Client(
            base_url=url,
            transport=transport,
            timeout=timeout,
            headers={} if credential is None else {"authorization": self._authorization},
            trust_env=False,  # never through a proxy from the environment: keys travel in these bodies
        )
        self._openers: OrderedDict[str, tuple[bytes, crypto.Opener]] = OrderedDict()
        self._lock = threading.Lock()
        self._limits: tuple[float, float] | None = None
        self._pipe: _LinePipe | None = None  # the awaited calls' connection, on the loop that made it

    def __repr__(self) -> str:  # never shows the credential
        return f"<RemoteKeySessions {self.url}>"

    # --- the calls ------------------------------------------------------------------------

    def _call(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return _judged(*(self._line_call(name, body) if self._uds else self._http_call(name, body)))

    async def _call_async(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """`_call` awaited on the running loop: pipelined on the unix socket (see `_LinePipe`)."""
        assert self._uds is not None
        loop = asyncio.get_running_loop()
        pipe = self._pipe
        if pipe is None or pipe.loop is not loop or pipe.dead:
            if pipe is not None:
                pipe.close_soon()  # another loop's (a test's former loop), or dead already
            pipe = self._pipe = _LinePipe(loop, self._uds, self._timeout)
        return _judged(*await pipe.call(self._line(name, body)))

    def _line(self, name: str, body: dict[str, Any]) -> bytes:
        """One call as the line service reads it, `{"call", "authorization", "body"}` on one line:
        the JSON that json.dumps would give, written from its strings directly (json.dumps cost more
        of a worker's CPU per round trip than anything else here)."""
        framed = f'{{"call":{_string(name)},"authorization":{self._framed_authorization},"body":{_object(body)}}}'
        return framed.encode() + b"\n"

    def _http_call(self, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        try:
            response = self._http.post(f"/v1/{name}", json=body)
        except httpx.HTTPError:
            raise KeySessionServiceDown() from None  # the exception's text may name the URL, never a key
        return response.status_code, _json(response)

    def _line_call(self, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """One line out, one line back, on a kept connection (a fresh one if a kept one turns out
        dead before answering: the service restarted). Every failure is KeySessionServiceDown."""
        line = self._line(name, body)
        with self._lock:
            kept = self._idle.pop() if self._idle else None
        if kept is not None:
            answered = _exchange(kept, line)
            if answered is not None:
                self._keep(kept)
                return answered
        fresh = self._connect()
        answered = _exchange(fresh, line)
        if answered is None:
            raise KeySessionServiceDown()
        self._keep(fresh)
        return answered

    def _keep(self, conn: tuple[socket.socket, Any]) -> None:
        with self._lock:
            self._idle.append(conn)

    def _connect(self) -> tuple[socket.socket, Any]:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self._timeout)
        try:
            sock.connect(str(self._uds))
        except OSError:
            sock.close()
            raise KeySessionServiceDown() from None  # the error names the socket's path, never a key
        return sock, sock.makefile("rb")

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
        return _key(answer)

    async def resolve_async(self, session_id: str | None, workspace_id: str) -> bytes:
        """`resolve`, awaited: asked of the service now, as every resolve is."""
        if not session_id:
            raise KeySessionUnavailable("No key session is open for this conversation.")
        if not self._uds:  # over HTTP (`--key-sessions URL`): the sync call, on a thread
            return await asyncio.to_thread(self.resolve, session_id, workspace_id)
        try:
            answer = await self._call_async("resolve", {"session_id": session_id, "workspace_id": workspace_id})
        except KeySessionUnavailable:
            self._drop(session_id)
            raise
        return _key(answer)

    def memory_opener(self, session_id: str | None, workspace_id: str) -> crypto.Opener:
        """Resolved against the service on every call (liveness is never cached); the cipher built
        from the confirmed key is reused while the service keeps returning that same key."""
        return self.key_and_opener(session_id, workspace_id)[1]

    def key_and_opener(self, session_id: str | None, workspace_id: str) -> tuple[bytes, crypto.Opener]:
        key = self.resolve(session_id, workspace_id)
        assert session_id is not None  # resolve refused an empty one
        return key, self._opener(session_id, workspace_id, key)

    async def memory_opener_async(self, session_id: str | None, workspace_id: str) -> crypto.Opener:
        """`memory_opener`, awaited: resolved against the service on this call, never cached."""
        return (await self.key_and_opener_async(session_id, workspace_id))[1]

    async def key_and_opener_async(self, session_id: str | None, workspace_id: str) -> tuple[bytes, crypto.Opener]:
        key = await self.resolve_async(session_id, workspace_id)
        assert session_id is not None  # resolve refused an empty one
        return key, self._opener(session_id, workspace_id, key)

    def _opener(self, session_id: str, workspace_id: str, key: bytes) -> crypto.Opener:
        """The kept cipher for `key`, which the service confirmed on this very call, or a new one."""
        with self._lock:
            kept = self._openers.get(session_id)
            if kept is not None and kept[0] == key:
                self._openers.move_to_end(session_id)
                return kept[1]
        opener = crypto.opener(key, workspace_id=workspace_id, path=MEMORY_PATH, remember=True)
        with self._lock:
            self._openers[session_id] = (key, opener)
            while len(self._openers) > MAX_OPENERS:
                self._openers.popitem(last=False)
        return opener

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
            idle, self._idle = self._idle, []
        for conn in idle:
            _close(conn)
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            pipe.close_soon()
        self._http.close()


class _LinePipe:
    """One kept unix-socket connection to the line service, on one event loop, its calls pipelined.

    Each call's line is written as it comes, without waiting for the answers before it; the
    service answers a connection's lines in order, so answers are matched to calls first in, first
    out. A call made while the service owes no answer is written at once (the service is idle:
    nothing is gained by waiting, and it starts while this loop goes on); the calls made while
    answers are owed are gathered and written together at the end of the loop's turn (one send,
    one wake-up of the service for all of them).

    The socket is this pipe's own (non-blocking, read by the loop's reader callback), not an
    asyncio transport, so that a call written while no other is waiting can read its answer the
    moment its write returns, before this coroutine ever suspends. On a machine with few cores that
    answer is usually there already: the write wakes the service on this core and it runs at
    once, answering before the write returns (measured on 2 cores: ~9 calls in 10), and reading it
    then saves a return to the loop, a wake-up from its poll and a resumption of the waiting
    recall (~30 µs of each recall's ~140 µs round trip). Where the answer is not there yet, the
    read finds nothing and the call waits for the reader callback as every pipelined call does.

    A dead connection (the service restarted or went away, a garbled or overlong answer, no answer
    within the timeout) fails every call still waiting as KeySessionServiceDown and is never used
    again: the next call connects afresh. The timeout is one timer for the connection, not one per
    call: answers come in order, so the oldest call waiting is the one that is late first; the
    timer fires at its deadline, and is set again for the next oldest if it was answered."""

    def __init__(self, loop: asyncio.AbstractEventLoop, path: str, timeout: float) -> None:
        self.loop, self.dead = loop, False
        self._timeout = timeout
        self._waiting: deque[tuple[asyncio.Future[tuple[int, dict[str, Any]]], float]] = deque()  # and deadlines
        self._watch: asyncio.TimerHandle | None = None  # at the oldest waiting call's deadline
        self._sock: socket.socket | None = None  # connected, and watched by the loop's reader
        self._outgoing: list[bytes] = []  # lines gathered this turn of the loop, written by `_flush`
        self._unsent = b""  # written while the socket's buffer was full: sent when it drains
        self._incoming = b""  # the start of an answer whose end has not arrived yet
        self._lost: asyncio.Future[None] = loop.create_future()
        self._connected: asyncio.Task[None] = loop.create_task(self._connect(path))
        self._keeper: asyncio.Task[None] | None = None

    async def _connect(self, path: str) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            async with asyncio.timeout(self._timeout):
                await self.loop.sock_connect(sock, path)
        except (OSError, TimeoutError):
            sock.close()
            self.dead = True
            raise KeySessionServiceDown() from None  # the error names the socket's path, never a key
        except BaseException:  # cancelled while connecting (the loop is ending): the socket goes too
            sock.close()
            self.dead = True
            raise
        if self.dead:  # closed while it was connecting
            sock.close()
            raise KeySessionServiceDown()
        self._sock = sock
        self.loop.add_reader(sock.fileno(), self._readable)
        self._keeper = self.loop.create_task(self._keep())

    async def _keep(self) -> None:
        """Lives as long as the connection does: a loop that ends cancels it (as asyncio.run does
        every task left), which closes the connection with the loop."""
        try:
            await self._lost
        finally:
            self._die()

    async def call(self, line: bytes) -> tuple[int, dict[str, Any]]:
        """Write `line` and await its answer (status, body); every failure is KeySessionServiceDown."""
        if self._sock is None and not self.dead:
            await asyncio.shield(self._connected)  # one connect for every call that came meanwhile
        if self.dead or self._sock is None:
            raise KeySessionServiceDown()
        answer = self.loop.create_future()
        alone = not self._waiting
        deadline = self.loop.time() + self._timeout
        self._waiting.append((answer, deadline))  # appended and written (or queued) in one step: answers' order
        if alone and not self._outgoing:
            self._write(line)
            self._readable()  # its answer may be here already (see the class's docstring)
            if answer.done():
                return answer.result()
        else:
            self._outgoing.append(line)
            if len(self._outgoing) == 1:
                self.loop.call_soon(self._flush)
        if self._watch is None:
            self._watch = self.loop.call_at(deadline, self._check)
        return await answer  # cancelled with its caller: its answer, when it comes, is skipped

    def _check(self) -> None:
        """The oldest call waiting is past its deadline: the service is there but not answering, so
        it is down, for every call waiting. Otherwise look again at the deadline of the oldest now."""
        self._watch = None
        if self.dead or not self._waiting:
            return
        deadline = self._waiting[0][1]
        if deadline <= self.loop.time():
            self._die()
        else:
            self._watch = self.loop.call_at(deadline, self._check)

    def _flush(self) -> None:
        """Every line gathered during one turn of the loop, in one write: the loop runs this after
        the callbacks that were ready with the first one."""
        lines, self._outgoing = self._outgoing, []
        if not self.dead:  # dead: its calls have been failed already
            self._write(b"".join(lines))

    # --- the socket ---------------------------------------------------------------------------

    def _write(self, data: bytes) -> None:
        """Send `data` after anything still unsent; what the socket does not take now is sent by
        the loop's writer callback when it drains (lines stay in order)."""
        sock = self._sock
        if sock is None or self.dead:
            return
        if self._unsent:
            self._unsent += data
            return
        try:
            sent = sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:  # the service went away
            return self._die()
        if sent < len(data):
            self._unsent = data[sent:]
            self.loop.add_writer(sock.fileno(), self._writable)

    def _writable(self) -> None:
        sock = self._sock
        if sock is None or self.dead:
            return
        try:
            sent = sock.send(self._unsent)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self._die()
        self._unsent = self._unsent[sent:]
        if not self._unsent:
            self.loop.remove_writer(sock.fileno())

    def _readable(self) -> None:
        """What the socket holds now (nothing: not an error, the answer is still to come)."""
        sock = self._sock
        if sock is None or self.dead:
            return
        try:
            data = sock.recv(RECEIVE_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self._die()
        if not data:  # the service closed the connection (it stopped or restarted)
            return self._die()
        self._received(data)

    def _received(self, data: bytes) -> None:
        """Each whole answer handed to its waiting call, in order."""
        *answers, self._incoming = (self._incoming + data).split(b"\n")
        for line in answers:
            if not self._waiting:  # an answer no call asked for: nothing after it can be trusted
                return self._die()
            answer = self._waiting.popleft()[0]
            if answer.done():  # its caller was cancelled
                continue
            try:
                answer.set_result(_framed(line))
            except KeySessionServiceDown as exc:
                answer.set_exception(exc)
        if len(self._incoming) > ANSWER_LIMIT:
            self._die()

    # --- the end ---------------------------------------------------------------------------

    def _die(self) -> None:
        self.dead = True
        while self._waiting:
            answer = self._waiting.popleft()[0]
            if not answer.done():
                answer.set_exception(KeySessionServiceDown())
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        sock, self._sock = self._sock, None
        if sock is not None:
            if not self.loop.is_closed():
                self.loop.remove_reader(sock.fileno())
                if self._unsent:
                    self.loop.remove_writer(sock.fileno())
            self._unsent = b""
            sock.close()
        if not self._lost.done() and not self.loop.is_closed():
            self._lost.set_result(None)

    def close_soon(self) -> None:
        """Close from any thread: on the pipe's loop if it still runs; on a loop closed already, only
        the socket (its selector is gone with the loop)."""
        if self.loop.is_closed():
            sock, self._sock = self._sock, None
            self.dead = True
            if sock is not None:
                sock.close()
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop or not self.loop.is_running():
            self._die()
        else:
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self._die)


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        payload = response.json()
    except ValueError:
        raise KeySessionServiceDown() from None
    if not isinstance(payload, dict):
        raise KeySessionServiceDown()
    return payload


def _judged(status: int, payload: dict[str, Any]) -> dict[str, Any]:
    """A call's answer, or its refusal raised: 409 the session is unavailable, anything else down."""
    if status == 409:
        raise KeySessionUnavailable(str(payload.get("message", "")) or "")
    if status == 401:
        raise KeySessionServiceDown(
            "The key-session service refused this server's credential; nothing that needs the workspace key "
            "can run until they share one (Saves still work)."
        )
    if status != 200:
        raise KeySessionServiceDown()
    return payload


def _key(answer: dict[str, Any]) -> bytes:
    try:
        return base64.b64decode(str(answer["key"]), validate=True)
    except (KeyError, ValueError):
        raise KeySessionServiceDown() from None


def _exchange(conn: tuple[socket.socket, Any], line: bytes) -> tuple[int, dict[str, Any]] | None:
    """One call on `conn`: its answer, or None (the connection closed) if no whole line came back."""
    try:
        conn[0].sendall(line)
        answer: bytes = conn[1].readline(ANSWER_LIMIT)
    except TimeoutError:  # the service is there but not answering: down, with no second wait
        _close(conn)
        raise KeySessionServiceDown() from None
    except OSError:
        answer = b""
    if not answer.endswith(b"\n"):
        _close(conn)
        return None
    return _framed(answer)


def _object(body: dict[str, Any]) -> str:
    """A call's body as JSON: every body is a flat object of strings (and None), written here
    directly; anything else through json.dumps."""
    parts = []
    for name, value in body.items():
        if value is None:
            parts.append(f"{_string(name)}:null")
        elif isinstance(value, str):
            parts.append(f"{_string(name)}:{_string(value)}")
        else:
            return json.dumps(body)
    return "{" + ",".join(parts) + "}"


def _framed(answer: bytes) -> tuple[int, dict[str, Any]]:
    """An answer line: (status, body). A resolve's answer is recognised by its exact bytes (the line
    service writes it as `RESOLVED` frames it: a key in base64 has nothing JSON would escape);
    every other answer is parsed as JSON."""
    answer = answer.rstrip(b"\n")
    head, tail = RESOLVED
    if answer.startswith(head) and answer.endswith(tail):
        key = answer[len(head) : -len(tail)]
        if _BASE64.fullmatch(key):
            return 200, {"key": key.decode("ascii")}
    try:
        framed = json.loads(answer)
        status, payload = int(framed["status"]), framed["body"]
    except (ValueError, KeyError, TypeError):
        raise KeySessionServiceDown() from None
    if not isinstance(payload, dict):
        raise KeySessionServiceDown()
    return status, payload


def _close(conn: tuple[socket.socket, Any]) -> None:
    with contextlib.suppress(OSError):
        conn[1].close()
        conn[0].close()


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
