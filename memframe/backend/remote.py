"""The remote backend: the same store, over HTTP to `memframe serve`.

`RemoteStore` mirrors `LocalStore` call for call, speaking the people's routes
with httpx. It only ever sends ciphertext: sealing and opening happen in
`SealedBackend` on this machine, so the server never receives a plaintext or a
key. Server errors come back through `error_from_payload`, the same mapping
the server used to send them, so local and remote raise the same types.

Honest failures: a write is one request. Nothing is queued and nothing is
retried; an unreachable server, a timeout or a refused token raises a typed
error and the caller keeps its draft. A message names the server, never the
token. (A key rotation over one request's bound uploads its parts first; the
rotation itself is still the one request that swaps.)

Over 400 lines: it is the whole MemoryStore over HTTP, call for call, beside
the one transport every call goes through.
"""

from __future__ import annotations

import functools
import re
import ssl
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from memframe import __version__
from memframe.backend.save_state import SaveState
from memframe.backend.sealed import SealedBackend
from memframe.core.blame import CaptureOrigin
from memframe.core.errors import (
    FileNotFound,
    InvalidInput,
    MemframeError,
    NotFound,
    Unauthorized,
    Unavailable,
    error_from_payload,
)
from memframe.core.rotation import Destroyed, Rotation, RotationPlan, SealedRecords
from memframe.core.turns import AIConsent, KeySessionInfo, ProposalRecord, Receipt, TurnResult
from memframe.core.types import Mode, Policy, StoredVersion, VersionInfo
from memframe.paths import check_workspace_id
from memframe.wire.assistant import (
    AIConsentOut,
    CaptureOriginList,
    KeySessionOut,
    ProposalList,
    ReceiptList,
    TranscriptOut,
    TurnOut,
)
from memframe.wire.base import decode_base64, encode_base64
from memframe.wire.files import FileList, PolicyOut, StoredVersionOut, StoredVersionRun, VersionOut, VersionPage
from memframe.wire.rotation import DestroyedOut, LatestRotationOut, RotationIn, RotationUploadOut, SealedRecordsOut

DEFAULT_TIMEOUT = 10.0
#: A send runs a whole Assistant turn (several model calls), and a key rotation rewrites the
#: database, before it answers.
SEND_TIMEOUT = 300.0
_Model = TypeVar("_Model", bound=BaseModel)
_TOKEN_RE = re.compile(r"^[\x21-\x7e]+$")  # visible ASCII: what a header value may carry


def display_url(base_url: str) -> str:
    """The base URL as people see it: without a trailing slash or any user:password part."""
    try:
        url = httpx.URL(base_url.strip())
    except httpx.InvalidURL:
        raise InvalidInput(f"{base_url!r} is not a URL; use http://host:port of a memframe server.") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise InvalidInput(f"{base_url!r} is not an http:// or https:// URL of a memframe server.")
    return str(url.copy_with(username=None, password=None)).rstrip("/")


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """Building a verifying TLS context reads the whole CA bundle: do it once per process."""
    return httpx.create_ssl_context()


def _reason(exc: Exception) -> str:
    """A short cause from an httpx error, e.g. 'connection refused'; never the request or headers."""
    text = str(exc).strip() or type(exc).__name__
    text = re.sub(r"^\[Errno -?\d+\]\s*", "", text)
    return text[:1].lower() + text[1:200]


class RemoteStore:
    """MemoryStore over HTTP for one workspace, as the person a bearer token speaks for."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        workspace_id: str,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.workspace_id = check_workspace_id(workspace_id)
        self.location = display_url(base_url)
        self.timeout = timeout
        headers = {"Accept": "application/json", "User-Agent": f"memframe/{__version__}"}
        if token:
            if not _TOKEN_RE.match(token):
                raise InvalidInput("The token contains characters a memframe token never has (spaces, newlines).")
            headers["Authorization"] = f"Bearer {token}"
        self._client = httpx.Client(
            base_url=base_url.strip().rstrip("/") + "/",
            headers=headers,
            timeout=timeout,
            transport=transport,
            verify=_tls_context(),
            follow_redirects=False,
        )
        self._prefix = f"api/v1/workspaces/{quote(self.workspace_id, safe='')}"
        self._closed = False

    def __repr__(self) -> str:  # never shows the token
        return f"<RemoteStore {self.workspace_id} at {self.location}>"

    @property
    def assistant_model(self) -> str:
        """The server runs the Assistant with its own model (`memframe serve --model-url`)."""
        return f"the model of the server at {self.location}"

    # --- transport -----------------------------------------------------------------------

    def _request(
        self,
        method: str,
        url: str,
        *,
        write: bool = False,
        headers: dict[str, str] | None = None,
        json: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """One request, no retry; answers the JSON of a 2xx or raises the typed error."""
        if self._closed:
            raise Unavailable("This connection to the memory server was closed.")
        try:
            response = self._client.request(
                method, url, headers=headers, json=json, params=params, timeout=timeout or self.timeout
            )
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise Unavailable(
                f"Cannot reach the memory server at {self.location} ({_reason(exc)}); nothing was changed."
            ) from None
        except (httpx.WriteError, httpx.WriteTimeout, httpx.PoolTimeout) as exc:
            raise Unavailable(
                f"The request to {self.location} could not be sent ({_reason(exc)}); nothing was changed."
            ) from None
        except httpx.TimeoutException:
            self._unknown_outcome(f"did not answer within {self.timeout:g} s", write)
        except httpx.TransportError as exc:
            self._unknown_outcome(f"dropped the connection ({_reason(exc)})", write)
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if response.is_success:
            if payload is None:
                raise Unavailable(f"{self.location} answered with something that is not memframe's API.")
            return payload
        raise self._error(response.status_code, payload)

    def _unknown_outcome(self, what: str, write: bool) -> NoReturn:
        """After the request went out, a write may or may not have landed: say so, retry nothing."""
        if write:
            raise Unavailable(
                f"The memory server at {self.location} {what}; the write may or may not have been stored. "
                "Reload to see the server's version: a retry against the same base version cannot "
                "overwrite anything."
            )
        raise Unavailable(f"The memory server at {self.location} {what}; nothing was changed.")

    def _error(self, status: int, payload: Any) -> MemframeError:
        ours = isinstance(payload, dict) and isinstance(payload.get("error"), str)
        if not ours and status == 404:
            return NotFound(f"{self.location} has no memframe API at this address (404); is the URL right?")
        error = error_from_payload(status, payload)
        if isinstance(error, Unauthorized):
            return Unauthorized(
                f"{error.message} The server at {self.location} needs a valid token (--token-file or MEMFRAME_TOKEN)."
            )
        if not ours and isinstance(error, Unavailable):
            return Unavailable(f"The memory server at {self.location} answered with status {status}.")
        return error

    # --- MemoryStore ---------------------------------------------------------------------

    def _file_url(self, kind: str, path: str) -> str:
        return f"{self._prefix}/{kind}/{quote(path, safe='/')}"

    def get_file(self, path: str) -> StoredVersion | None:
        try:
            return _stored(self._request("GET", self._file_url("files", path)), self)
        except FileNotFound:
            return None

    def put_file(
        self,
        path: str,
        ciphertext: bytes,
        base_version: int,
        *,
        clear: bool = False,
        restored_from: int | None = None,
        revive: bool = False,
        source_note: bytes | None = None,
    ) -> VersionInfo:
        headers = {"X-Base-Version": str(base_version)}
        if clear:
            headers["X-Memory-Clear"] = "1"
        if revive:
            headers["X-Revive"] = "1"
        body = {"ciphertext": encode_base64(ciphertext), "restoredFrom": restored_from}
        body |= {} if source_note is None else {"sourceNote": encode_base64(source_note)}  # an import's only
        payload = self._request("PUT", self._file_url("files", path), write=True, headers=headers, json=body)
        return _info(payload, self)

    def list_versions(self, path: str, *, limit: int = 50, before: int | None = None) -> list[VersionInfo]:
        params: dict[str, Any] = {"limit": limit}
        if before is not None:
            params["before"] = before
        payload = self._request("GET", self._file_url("history", path), params=params)
        return [row.to_info() for row in _read(VersionPage, payload, self).versions]

    def list_files(self) -> list[tuple[str, int, bool]]:
        payload = self._request("GET", f"{self._prefix}/files")
        return [(f.path, f.version, f.deleted) for f in _read(FileList, payload, self).files]

    def get_version(self, path: str, version: int) -> StoredVersion:
        return _stored(self._request("GET", self._file_url(f"revisions/{int(version)}", path)), self)

    def get_versions(self, path: str, versions: Sequence[int]) -> list[StoredVersion]:
        """Consecutive revisions (a delta's run back to its keyframe, a history page) in one request per
        200; any other set one request per revision."""
        wanted = list(versions)
        if len(wanted) < 2 or wanted != list(range(wanted[0], wanted[0] + len(wanted))):
            return [self.get_version(path, v) for v in wanted]
        found: list[StoredVersion] = []
        for start in range(0, len(wanted), 200):
            chunk = wanted[start : start + 200]
            params = {"first": chunk[0], "last": chunk[-1]}
            run = _read(
                StoredVersionRun, self._request("GET", self._file_url("revision-runs", path), params=params), self
            )
            found += [v.to_stored() for v in run.versions]
        if [s.info.version for s in found] != wanted:
            raise _not_understood(self)
        return found

    def get_policy(self) -> Policy:
        return _policy(self._request("GET", f"{self._prefix}/memory/policy"), self)

    def set_policy(self, mode: Mode, expected_revision: int) -> Policy:
        body = {"mode": Mode(mode).value, "expectedRevision": expected_revision}
        return _policy(self._request("PUT", f"{self._prefix}/memory/policy", write=True, json=body), self)

    # --- the Assistant ---------------------------------------------------------------------

    def _assistant_url(self, conversation_id: str, what: str) -> str:
        return f"api/v1/agents/assistant/{quote(conversation_id, safe='')}/{what}"

    def get_ai(self) -> AIConsent:
        return _read(AIConsentOut, self._request("GET", f"{self._prefix}/ai"), self).to_consent()

    def set_ai(self, enabled: bool) -> AIConsent:
        payload = self._request("PUT", f"{self._prefix}/ai", write=True, json={"enabled": enabled})
        return _read(AIConsentOut, payload, self).to_consent()

    def get_key_check(self) -> str | None:
        payload = self._request("GET", f"{self._prefix}/key-check")
        value = payload.get("keyCheck") if isinstance(payload, dict) else None
        return value if isinstance(value, str) else None

    def set_key_check(self, key_check: str) -> None:
        self._request("PUT", f"{self._prefix}/key-check", write=True, json={"keyCheck": key_check})

    def rotation(self) -> Rotation | None:
        found = _read(LatestRotationOut, self._request("GET", f"{self._prefix}/key-rotation"), self).rotation
        return None if found is None else found.to_rotation()

    def sealed_records(self) -> SealedRecords:
        return _read(SealedRecordsOut, self._request("GET", f"{self._prefix}/sealed-records"), self).to_records()

    def rotate_key(self, plan: RotationPlan) -> Destroyed:
        """One request, or (over one request's bound) an upload of parts the rotation then names."""
        body, parts = RotationIn.split(plan)
        if parts:
            uploads = f"{self._prefix}/key-rotation-uploads"
            started = self._request("POST", uploads, write=True)
            body["uploadId"] = upload = _read(RotationUploadOut, started, self).upload_id
            for part in parts:
                self._request("POST", f"{uploads}/{quote(upload, safe='')}/parts", write=True, json=part)
        payload = self._request("POST", f"{self._prefix}/key-rotations", write=True, json=body, timeout=SEND_TIMEOUT)
        return _read(DestroyedOut, payload, self).to_destroyed()

    def open_key_session(self, key: bytes, *, hold_seconds: float | None = None) -> KeySessionInfo:
        """A key session on the server; `hold_seconds` holds it that long whether used or not."""
        body: dict[str, Any] = {"key": encode_base64(key)}
        if hold_seconds is not None:
            body["holdSeconds"] = hold_seconds
        payload = self._request("POST", f"{self._prefix}/key-sessions", write=True, json=body)
        return _read(KeySessionOut, payload, self).to_info()

    def revoke_key_session(self, session_id: str) -> None:
        self._request("DELETE", f"api/v1/automation/key-sessions/{quote(session_id, safe='')}", write=True)

    def send_message(
        self,
        conversation_id: str,
        text: str,
        *,
        idempotency_key: str,
        key_session_id: str | None,
        memory_state: str | None,
        on_text: Callable[[str], None] | None = None,  # memframe's HTTP API does not stream: the answer comes whole
    ) -> TurnResult:
        headers = {"Idempotency-Key": idempotency_key}
        if key_session_id:
            headers["X-Key-Session"] = key_session_id
        if memory_state:
            headers["X-Memory-State"] = memory_state
        payload = self._request(
            "POST",
            self._assistant_url(conversation_id, "messages"),
            write=True,
            headers=headers,
            json={"workspace": self.workspace_id, "text": text},
            timeout=SEND_TIMEOUT,
        )
        return _read(TurnOut, payload, self).result()

    def receipts(self, conversation_id: str) -> list[Receipt]:
        payload = self._request("GET", self._assistant_url(conversation_id, "memory-receipts"))
        return [r.to_receipt() for r in _read(ReceiptList, payload, self).receipts]

    def transcript(self, conversation_id: str) -> list[tuple[str, bytes]]:
        payload = self._request("GET", self._assistant_url(conversation_id, "transcript"))
        return [(m.role, decode_base64(m.ciphertext)) for m in _read(TranscriptOut, payload, self).messages]

    def capture_origins(self) -> list[CaptureOrigin]:
        payload = self._request("GET", f"{self._prefix}/memory/capture-origins")
        return [c.to_origin() for c in _read(CaptureOriginList, payload, self).captures]

    def proposals(self) -> list[ProposalRecord]:
        payload = self._request("GET", f"{self._prefix}/memory/proposals")
        return [p.record() for p in _read(ProposalList, payload, self).proposals]

    def resolve_proposal(self, proposal_id: str, status: str) -> None:
        url = f"{self._prefix}/memory/proposals/{quote(proposal_id, safe='')}"
        self._request("PUT", url, write=True, json={"status": status})

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._client.close()


# --- reading the wire format (memframe.wire: the server answers with the same models) ---------


def _not_understood(store: RemoteStore) -> Unavailable:
    return Unavailable(f"{store.location} answered with something this memframe does not understand.")


def _info(data: Any, store: RemoteStore) -> VersionInfo:
    return _read(VersionOut, data, store).to_info()


def _stored(data: Any, store: RemoteStore) -> StoredVersion:
    return _read(StoredVersionOut, data, store).to_stored()


def _read(model: type[_Model], data: Any, store: RemoteStore) -> _Model:
    """Parse an answer with the server's own schema; anything else is 'not understood'."""
    try:
        return model.model_validate(data)
    except ValueError:
        raise _not_understood(store) from None


def _policy(data: Any, store: RemoteStore) -> Policy:
    return _read(PolicyOut, data, store).to_core(Policy)


class RemoteBackend(SealedBackend):
    """A workspace on a memframe server; text is sealed and opened here, never there."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        workspace_id: str,
        key: bytes,
        *,
        transport: httpx.BaseTransport | None = None,
        save_state: SaveState | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        store = RemoteStore(base_url, token, workspace_id, transport=transport, timeout=timeout)
        super().__init__(store, key, save_state=save_state)
