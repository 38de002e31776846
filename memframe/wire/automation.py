"""The automation routes: what the Assistant's runtime (or an MCP bridge) sends and receives.

Memory text travels only in the recall answer (when its status is `provided`)
and the current-memory read a refused capture turns into a proposal.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from memframe.core.edits import MemoryChange, parse_changes
from memframe.core.types import RecallStatus
from memframe.wire.base import MAX_NUMBER, WireIn, WireOut


class RecallOut(WireOut):
    status: RecallStatus
    revision: int | None
    text: str | None = Field(None, description="Only when the status is `provided`.")


class CurrentMemoryOut(WireOut):
    version: int
    text: str


class EditsIn(WireIn):
    """At most five exact one-line edits, validated by the same rules as the tool."""

    edits: list[dict[str, Any]] = Field(max_length=5)

    def changes(self) -> list[MemoryChange]:
        return parse_changes({"edits": self.edits})


class CaptureIn(EditsIn):
    expected_version: int = Field(ge=0, le=MAX_NUMBER)


class ProposeIn(EditsIn):
    base_version: int = Field(ge=0, le=MAX_NUMBER)
    reason: Literal["read_only", "conflict"]


class CaptureOut(WireOut):
    admission_id: str
    version: int
    replayed: bool


class TranscriptIn(WireIn):
    role: Literal["user", "assistant"]
    content: str = Field(max_length=200_000)


class HistoryOut(WireOut):
    messages: list[dict[str, str]]


class DocumentEntry(WireOut):
    path: str
    version: int


class DocumentList(WireOut):
    documents: list[DocumentEntry]


class SearchHit(WireOut):
    path: str
    version: int
    snippet: str


class SearchOut(WireOut):
    hits: list[SearchHit]


class DocumentOut(WireOut):
    path: str
    version: int
    text: str


class DocumentIn(WireIn):
    text: str = Field(max_length=1_000_000)


class MoveIn(WireIn):
    source: str
    target: str
    base_version: int = Field(ge=0, le=MAX_NUMBER)


class RestoreIn(WireIn):
    path: str
    base_version: int = Field(ge=0, le=MAX_NUMBER)
