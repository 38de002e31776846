"""`memframe mcp`: the workspace's notes and its Assistant, for external MCP clients over stdio.

External clients get document tools and `ask_agent`, and nothing else: there is
no tool that reads or writes the memory, changes the mode, or touches policy or
AI consent ("External clients get no memory API in v1").

* The document tools work with the person's key on this machine: notes are
  sealed and opened here, so search decrypts client-side. Every path goes
  through the one rule (`validate_document_path` / `is_reserved`) before any
  backend request is made, so no spelling of `.zudotext/memory/` is read,
  written or even asked about; listing and search never show the namespace.
* `ask_agent` is an ordinary Assistant send through the same ingress and
  policy: workspace AI must be on, recall works as usual, and it reports no
  X-Memory-State (this server makes no Saves of its own), so the server's
  current revision is used. The key session is opened for the turn and
  revoked after it, so a long-running MCP server leaves no key in the
  service's RAM between questions.

Tool logic (`NoteTools`, this module) needs nothing but a backend and imports
nothing of the `mcp` package, so it is tested in-process against a counting
fake; `memframe.mcp.server` puts it behind the MCP SDK when `memframe mcp`
actually starts.
"""

import contextlib
import secrets
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memframe.core.errors import (
    AIDisabled,
    DecryptionFailed,
    DocumentDeleted,
    InvalidInput,
    MemframeError,
    NamespaceReserved,
    NotFound,
    VersionConflict,
)
from memframe.core.namespace import is_reserved, validate_document_path, validate_written_path
from memframe.core.recall import receipt_line

if TYPE_CHECKING:
    from memframe.backend.sealed import SealedBackend
    from memframe.core.turns import TurnResult

#: Exactly what an external client sees; nothing about memory, modes or policy.
TOOL_NAMES = ("list_documents", "search_documents", "read_document", "create_note", "update_note", "ask_agent")
SEARCH_LIMIT = 20
SNIPPET_CHARS = 200
RESERVED_MESSAGE = (
    "That path is inside the workspace memory (.zudotext/memory/), which MCP clients can neither read nor "
    "write; no request was made."
)
INSTRUCTIONS = (
    "Notes of one memframe workspace, and its Assistant. Use list_documents, search_documents and "
    "read_document to find notes; create_note makes a new note and update_note changes one against the "
    "version you read. ask_agent sends one message to the workspace Assistant. The workspace memory "
    "(.zudotext/memory/) is not reachable through this server."
)


# --- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolText:
    """A tool's answer: one readable text for the client's model, and the same facts as data."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)


def error_line(exc: MemframeError) -> str:
    """The one line an MCP client sees for a failure: the error code, then the message."""
    message = " ".join(str(exc).split())
    return f"{exc.code}: {message}"


def note_path(path: str, *, written: bool = False) -> str:
    """The stored name of an ordinary note; every spelling of the memory namespace is refused here,
    before any backend request (the one rule: `validate_document_path`). A name to write may not
    look like another one (`validate_written_path`); an existing odd name stays readable."""
    try:
        return validate_written_path(path) if written else validate_document_path(path)
    except NamespaceReserved:
        raise NamespaceReserved(RESERVED_MESSAGE) from None


def _snippet(text: str, at: int) -> str:
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at)
    return text[start : end if end >= 0 else None][:SNIPPET_CHARS]


# --- the tools, without MCP ---------------------------------------------------------------------


class NoteTools:
    """What `memframe mcp` offers, over one backend; every method returns a ToolText or raises MemframeError.

    Calls are serialised: an MCP client may send requests concurrently, and a
    backend is one client of the workspace.
    """

    def __init__(self, backend: "SealedBackend") -> None:
        self.backend = backend
        self._lock = threading.Lock()

    # --- notes ---------------------------------------------------------------------------------

    def _live_notes(self) -> list[tuple[str, int]]:
        with self._lock:
            files = self.backend.list_files()
        return sorted((path, version) for path, version, deleted in files if not deleted and not is_reserved(path))

    def list_documents(self) -> ToolText:
        notes = self._live_notes()
        lines = [f"{path} (version {version})" for path, version in notes]
        return ToolText(
            "\n".join(lines) or "There are no notes.",
            {"documents": [{"path": path, "version": version} for path, version in notes]},
        )

    def search_documents(self, query: str) -> ToolText:
        needle = query.strip().casefold()
        if not needle:
            raise InvalidInput("Search for at least one character.")
        hits: list[dict[str, Any]] = []
        unreadable = 0
        for path, _ in self._live_notes():
            if is_reserved(path):  # listed paths are already filtered; never open one inside the namespace
                continue
            try:
                with self._lock:
                    version, text, deleted = self.backend.read_file(path)
            except DecryptionFailed:
                unreadable += 1
                continue
            if deleted:
                continue
            at = text.casefold().find(needle)
            if at >= 0:
                hits.append({"path": path, "version": version, "snippet": _snippet(text, at)})
                if len(hits) >= SEARCH_LIMIT:
                    break
        lines = [f"{h['path']} (version {h['version']}): {h['snippet']}" for h in hits]
        if not lines:
            lines = ["No note contains that text."]
        if unreadable:
            lines.append(f"({unreadable} note(s) could not be decrypted with this workspace key and were skipped.)")
        return ToolText("\n".join(lines), {"hits": hits, "unreadable": unreadable})

    def read_document(self, path: str) -> ToolText:
        name = note_path(path)  # refuses the namespace before any request
        with self._lock:
            version, text, deleted = self.backend.read_file(name)
        if version == 0 or deleted:
            raise NotFound(f"There is no note {name!r}.")
        return ToolText(f"{name} (version {version})\n\n{text}", {"path": name, "version": version, "text": text})

    def create_note(self, path: str, text: str) -> ToolText:
        name = note_path(path, written=True)  # refuses the namespace and lookalikes before any request
        try:
            with self._lock:
                info = self.backend.write_file(name, text, 0)
        except DocumentDeleted as exc:
            raise DocumentDeleted(
                exc.current_version,
                f"A note at {name!r} was deleted (version {exc.current_version}); "
                "it cannot be created again here. Nothing was written.",
            ) from None
        except VersionConflict as exc:
            raise VersionConflict(
                exc.current_version,
                f"A note already exists at {name!r} (version {exc.current_version}); nothing was written. "
                f"Read it, then use update_note with base_version {exc.current_version}.",
            ) from None
        return ToolText(f"Created {name} (version {info.version}).", {"path": name, "version": info.version})

    def update_note(self, path: str, text: str, base_version: int) -> ToolText:
        name = note_path(path, written=True)  # refuses the namespace and lookalikes before any request
        if base_version < 1:
            raise InvalidInput("base_version is the version you read (1 or more); create a new note with create_note.")
        try:
            with self._lock:
                info = self.backend.write_file(name, text, base_version)
        except DocumentDeleted as exc:
            raise DocumentDeleted(
                exc.current_version,
                f"The note {name!r} was deleted (version {exc.current_version}); nothing was written.",
            ) from None
        except VersionConflict as exc:
            if exc.current_version == 0:
                raise NotFound(f"There is no note {name!r}; create it with create_note.") from None
            raise VersionConflict(
                exc.current_version,
                f"The note {name!r} changed (now version {exc.current_version}); nothing was written. "
                "Read it again and redo the change against that version.",
            ) from None
        return ToolText(f"Updated {name} (version {info.version}).", {"path": name, "version": info.version})

    # --- the Assistant ---------------------------------------------------------------------------

    def ask_agent(self, message: str, conversation_id: str | None = None) -> ToolText:
        if not message.strip():
            raise InvalidInput("The message is empty; nothing was sent.")
        conversation = conversation_id or f"mcp-{secrets.token_hex(6)}"
        with self._lock:
            if not self.backend.get_ai().enabled:  # before any key leaves this machine
                raise AIDisabled(
                    "Workspace AI is off for this workspace; a person turns it on with 'memframe ai on'. "
                    "Nothing was sent."
                )
            try:
                result = self.backend.send_turn(
                    conversation,
                    message,
                    idempotency_key=f"mcp-{secrets.token_hex(12)}",
                    # No Saves of its own: the backend reports only the newest memory version this
                    # machine has seen, so the server's current revision is used unless it is older.
                    memory_state=None,
                )
            finally:
                # One key session per turn: nothing of the key stays in the service's RAM between questions.
                with contextlib.suppress(MemframeError):
                    self.backend.close_key_session()
        return _turn_text(conversation, result)


def _turn_text(conversation: str, result: "TurnResult") -> ToolText:
    receipts: list[dict[str, Any]] = []
    outcomes: list[dict[str, Any]] = []
    lines = [result.answer or "(the Assistant gave no answer)", ""]
    for call in result.calls:
        line = receipt_line(call.status, call.revision, call.call_index + 1)
        receipts.append(
            {"call": call.call_index + 1, "status": call.status.value, "revision": call.revision, "line": line}
        )
        lines.append(line)
    for outcome in result.outcomes:
        # A document tool's "ok" message is the note itself; the line says only what happened.
        detail = "" if outcome.kind == "ok" else " — " + " ".join(outcome.message.split())[:SNIPPET_CHARS]
        line = f"{outcome.tool}: {outcome.kind}{detail}"
        outcomes.append({"tool": outcome.tool, "kind": outcome.kind, "line": line})
        lines.append(line)
    lines.append(f"conversation {conversation} · admission {result.admission_id}")
    return ToolText(
        "\n".join(lines),
        {
            "answer": result.answer,
            "conversation_id": conversation,
            "admission_id": result.admission_id,
            "receipts": receipts,
            "tool_outcomes": outcomes,
        },
    )
