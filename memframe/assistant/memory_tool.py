"""`remember_in_memory`: the Assistant's only way to change memory, and only as the mode allows.

Off: does nothing and makes no request. Read only: returns a proposal a person
reviews. Auto: commits behind the fence with Idempotency-Key memory:<admissionId>.
A version conflict leaves the newer human text untouched and turns the same
change into a proposal against it, never an automatic rebase; so does a capture
that grounded capture finds unsupported by the person's message of the turn. The outcome says
"Remembered" only for a committed receipt.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memframe.assistant.automation import Automation
from memframe.core.edits import MAX_EDITS, MAX_LINE_BYTES, MemoryChange, apply_memory_changes, parse_changes
from memframe.core.errors import CaptureUngrounded, MemframeError, VersionConflict
from memframe.core.turns import OutcomeKind, ProposalReason, ToolOutcome
from memframe.core.types import MEMORY_RECALL_MAX_BYTES, Mode

# Each string is bounded at the line limit, so a model whose output a grammar constrains to this schema
# (llama.cpp) must close the string instead of running on to its token limit.
_EDIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "op": {"type": "string", "enum": ["add", "replace", "remove"]},
        "line": {
            "type": "string",
            "maxLength": MAX_LINE_BYTES,
            "description": "add: the line to add. replace/remove: the exact existing line to change.",
        },
        "new_line": {
            "type": "string",
            "maxLength": MAX_LINE_BYTES,
            "description": "replace only: the line that takes its place.",
        },
        "heading": {
            "type": "string",
            "maxLength": MAX_LINE_BYTES,
            "description": "add only: put the line under this heading.",
        },
    },
    "required": ["op", "line"],
    "additionalProperties": False,
}

SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "remember_in_memory",
        "description": (
            "Change the workspace memory with up to five exact one-line edits. Use it only for durable "
            "facts or preferences the person stated. replace and remove must match one existing line "
            f"exactly. Each line at most {MAX_LINE_BYTES} bytes; the memory stays under "
            f"{MEMORY_RECALL_MAX_BYTES} bytes. You cannot choose where memory is stored."
        ),
        "parameters": {
            "type": "object",
            "properties": {"edits": {"type": "array", "items": _EDIT_SCHEMA, "minItems": 1, "maxItems": MAX_EDITS}},
            "required": ["edits"],
            "additionalProperties": False,
        },
    },
}


@dataclass(frozen=True)
class TurnContext:
    """What the server set for this turn; the model supplies none of it."""

    workspace_id: str
    conversation_id: str
    admission_id: str
    credential: str = field(repr=False)  # a bearer secret: never in a repr or a traceback's locals
    mode: Mode
    key_session_id: str | None


def remember(
    automation: Automation, ctx: TurnContext, arguments: dict[str, Any], *, seen_revision: int | None
) -> ToolOutcome:
    """Run one remember_in_memory call under the turn's admitted mode."""
    if ctx.mode is Mode.OFF:
        return ToolOutcome(
            "remember_in_memory", OutcomeKind.OFF, "Memory is Off for this workspace; nothing was remembered."
        )
    try:
        changes = parse_changes(arguments)
    except MemframeError as exc:
        return ToolOutcome("remember_in_memory", OutcomeKind.REFUSED, f"Not remembered: {exc}")
    if seen_revision is None:
        return ToolOutcome(
            "remember_in_memory",
            OutcomeKind.REFUSED,
            "Not remembered: memory was not available to this message, so there is nothing to change safely.",
        )
    if ctx.mode is Mode.READ_ONLY:
        return _propose(automation, ctx, changes, seen_revision, ProposalReason.READ_ONLY)
    try:
        receipt = automation.commit_memory(
            ctx.workspace_id,
            ctx.credential,
            key_session_id=ctx.key_session_id,
            idempotency_key=f"memory:{ctx.admission_id}",
            changes=changes,
            expected_version=seen_revision,
        )
    except VersionConflict:
        return _propose_against_newer(automation, ctx, changes)
    except CaptureUngrounded:
        return _propose(automation, ctx, changes, seen_revision, ProposalReason.UNGROUNDED)
    except MemframeError as exc:
        return ToolOutcome("remember_in_memory", OutcomeKind.REFUSED, f"Not remembered: {exc}")
    version = receipt.version.version
    return ToolOutcome(
        "remember_in_memory", OutcomeKind.REMEMBERED, f"Remembered (memory version {version}).", version=version
    )


#: Why a change waits for a person, as the tool's answer says it.
_WHY = {
    ProposalReason.READ_ONLY: "memory is Read only",
    ProposalReason.CONFLICT: "the memory changed since this message was sent",
    ProposalReason.UNGROUNDED: "grounded capture is on and the person's message does not contain every word of it",
}


def _propose(
    automation: Automation, ctx: TurnContext, changes: list[MemoryChange], base: int, reason: ProposalReason
) -> ToolOutcome:
    try:
        # A proposal a person could never apply helps nobody: check it applies to today's text.
        _, current = automation.current_memory(ctx.workspace_id, ctx.credential)
        apply_memory_changes(current, changes)
        proposal = automation.propose(
            ctx.workspace_id, ctx.credential, changes=changes, base_version=base, reason=reason
        )
    except MemframeError as exc:
        return ToolOutcome("remember_in_memory", OutcomeKind.REFUSED, f"Not proposed: {exc}")
    why = _WHY[reason]
    return ToolOutcome(
        "remember_in_memory",
        OutcomeKind.PROPOSED,
        f"Not remembered yet: {why}, so the change waits for a person to review (proposal {proposal.id}).",
        proposal_id=proposal.id,
    )


def _propose_against_newer(automation: Automation, ctx: TurnContext, changes: list[MemoryChange]) -> ToolOutcome:
    """The newer human text stays; the same change becomes a proposal against it."""
    try:
        version, _ = automation.current_memory(ctx.workspace_id, ctx.credential)
    except MemframeError as exc:
        return ToolOutcome("remember_in_memory", OutcomeKind.REFUSED, f"Not remembered: {exc}")
    return _propose(automation, ctx, changes, version, ProposalReason.CONFLICT)
