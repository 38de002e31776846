"""DocumentState, the worker-side calls and the wording helpers, without a running app."""

from __future__ import annotations

from memframe.backend.save_state import SaveState
from memframe.core.errors import Unavailable, VersionConflict
from memframe.core.types import MEMORY_RECALL_MAX_BYTES, MemoryDocument
from memframe.tui import calls, changes_calls
from memframe.tui.state import DocumentState, WriteOutcome, WriteRequest
from memframe.tui.text import ago, diff_text, short_location, size_meter
from tests.tui.scenarios import Outage, Stage


def test_dirty_is_draft_against_the_base_versions_text() -> None:
    state = DocumentState(SaveState())
    state.adopt(MemoryDocument("a\n", 3))
    assert not state.dirty
    state.edit("a\nb\n")
    assert state.dirty and state.base_version == 3
    state.discard()
    assert not state.dirty and state.draft == "a\n"


def test_size_is_utf8_bytes_and_the_bound_is_exclusive() -> None:
    state = DocumentState(SaveState())
    state.adopt(MemoryDocument("", 0))
    state.edit("é" * (MEMORY_RECALL_MAX_BYTES // 2))
    assert state.size == MEMORY_RECALL_MAX_BYTES and not state.oversized
    state.edit(state.draft + "x")
    assert state.oversized


def test_a_failed_save_moves_nothing_but_the_message() -> None:
    state = DocumentState(SaveState())
    state.adopt(MemoryDocument("a\n", 1))
    state.edit("draft\n")
    request = WriteRequest.save("draft\n", 1)
    state.begin(request)
    assert state.in_flight
    state.finish(WriteOutcome(request, "draft\n", error=Unavailable("offline.")))
    assert (state.base_version, state.server_text, state.draft, state.in_flight) == (1, "a\n", "draft\n", False)
    assert state.message_is_error and "nothing is queued" in state.message


def test_a_conflicting_clear_shows_the_newer_text() -> None:
    state = DocumentState(SaveState())
    state.adopt(MemoryDocument("a\n", 1))
    newer = MemoryDocument("b\n", 2)
    state.finish(WriteOutcome(WriteRequest.clear(1), "", error=VersionConflict(2), server=newer))
    assert (state.base_version, state.draft, state.dirty) == (2, "b\n", False)
    assert state.conflict == newer and "Retry Clear" in state.message


def test_write_reads_the_newer_document_on_conflict(stage: Stage) -> None:
    stage.other.save("one\n", 0)
    stage.other.save("two\n", 1)
    outcome = calls.write(stage.frame, WriteRequest.save("mine\n", 1))  # type: ignore[arg-type]
    assert outcome.conflict and outcome.server is not None and outcome.server.text == "two\n"
    assert stage.frame.save_state.last.header() == "conflict; version=2"


def test_calls_turn_every_failure_into_an_outcome(stage: Stage) -> None:
    frame: Outage = stage.frame
    frame.down = True
    assert isinstance(calls.load(frame).error, Unavailable)  # type: ignore[arg-type]
    assert isinstance(calls.write(frame, WriteRequest.clear(0)).error, Unavailable)  # type: ignore[arg-type]
    assert isinstance(changes_calls.history_page(frame, 10, None).error, Unavailable)  # type: ignore[arg-type]


def test_wording_helpers() -> None:
    assert "No differences" in diff_text("a", "a", "x", "y").plain
    assert "+b" in diff_text("a\n", "a\nb\n", "x", "y").plain
    assert "over by 1" in size_meter(MEMORY_RECALL_MAX_BYTES + 1).plain
    assert ago(30) == "just now" and ago(600) == "10 min ago" and ago(7200) == "2 h ago"
    assert short_location("http://example.test:8080") == "http://example.test:8080"
