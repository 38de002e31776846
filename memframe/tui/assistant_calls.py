"""The Assistant's backend calls, as the frame's worker threads run them: never raising.

Like `calls`, each returns a plain outcome that a message carries back. A
send may take a while (it waits up to 5 s for an in-flight Save, then the
model answers), so it must never run on the UI thread. Proposals are opened
and previewed here too, so diffing a long memory stays off the UI thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.text import Text

from memframe.backend.base import Backend
from memframe.core.edits import apply_memory_changes
from memframe.core.errors import EditRefused, MemframeError
from memframe.core.turns import AIConsent, CallRecord, Proposal, TurnResult
from memframe.core.types import Policy
from memframe.tui.calls import attempt
from memframe.tui.state import target_changed, target_gone
from memframe.tui.text import diff_text


@dataclass(frozen=True)
class SendOutcome:
    """The answer and its receipt (one record per model call), or why the message was not answered."""

    result: TurnResult | None
    calls: list[CallRecord]
    error: MemframeError | None = None


def send(
    backend: Backend, conversation_id: str, text: str, *, on_text: Callable[[str], None] | None = None
) -> SendOutcome:
    """Send, then read the receipt the server recorded for this answer's admission.

    `on_text` receives the answer as it streams in (a local model; a server's answer comes whole),
    and may raise to stop the turn (see `ModelClient.complete`). The receipts route is the
    contract's record of which revision each call used; if it cannot be read, the turn's own
    call records say the same.
    """
    result, error = attempt(lambda: backend.send(conversation_id, text, on_text=on_text))
    if result is None:
        return SendOutcome(None, [], error)
    receipts = attempt(lambda: backend.receipts(conversation_id))[0] or []
    mine = sorted((r for r in receipts if r.admission_id == result.admission_id), key=lambda r: r.call_index)
    calls = [CallRecord(r.call_index, r.status, r.revision) for r in mine] or list(result.calls)
    return SendOutcome(result, calls)


@dataclass(frozen=True)
class AssistantStatus:
    """Workspace AI and the memory policy, as the pane shows them."""

    consent: AIConsent | None
    policy: Policy | None
    error: MemframeError | None = None


def status(backend: Backend) -> AssistantStatus:
    consent, error = attempt(backend.get_ai)
    policy, policy_error = attempt(backend.get_policy)
    return AssistantStatus(consent, policy, error or policy_error)


def set_ai(backend: Backend, enabled: bool) -> AssistantStatus:
    """Turn workspace AI on or off; the outcome is the consent now in force (or the error)."""
    consent, error = attempt(lambda: backend.set_ai(enabled))
    policy = attempt(backend.get_policy)[0]
    return AssistantStatus(consent, policy, error)


# --- proposals ---------------------------------------------------------------------------------------

BEFORE_CLEAR = "was made before the memory was cleared, so it cannot be applied; dismiss it"


@dataclass(frozen=True)
class ProposalView:
    """One pending proposal as the frame shows it: its result on the saved text, or why it cannot apply."""

    proposal: Proposal
    made_before_clear: bool
    result: str | None
    problem: str
    diff: RenderableType

    @property
    def state(self) -> str:
        if self.made_before_clear:
            return "before a Clear"
        return "conflict" if self.result is None else "ready"


@dataclass(frozen=True)
class ProposalList:
    """Pending proposals previewed against `base_version`'s text, or why they could not be read."""

    views: list[ProposalView]
    base_version: int
    generation: int | None
    error: MemframeError | None = None


def preview(proposal: Proposal, text: str, base_version: int, generation: int | None) -> ProposalView:
    """What applying `proposal` to `text` (the text of `base_version`) would write, as a diff."""
    stale = generation is not None and proposal.clear_generation != generation
    current = f"version {base_version}" if base_version else "the empty memory"
    try:
        result = apply_memory_changes(text, list(proposal.changes))
    except EditRefused as exc:
        if target_gone(exc):
            problem = f"Conflict: {target_changed(proposal, base_version, exc)}. Edit it by hand or dismiss it."
        else:
            problem = f"Cannot apply: {exc}"
        shown = f"This proposal {BEFORE_CLEAR}." if stale else problem
        return ProposalView(proposal, stale, None, problem, Text(shown, style="bold red"))
    diff: RenderableType = diff_text(text, result, current, "with this proposal applied")
    if stale:
        diff = Group(Text(f"This proposal {BEFORE_CLEAR}.\n", "bold red"), diff)
    return ProposalView(proposal, stale, result, "", diff)


def proposals(backend: Backend, text: str, base_version: int) -> ProposalList:
    """Pending proposals, each previewed against the frame's saved text (what Apply writes against)."""
    found, error = attempt(backend.proposals)
    if found is None:
        return ProposalList([], base_version, None, error)
    policy, error = attempt(backend.get_policy)
    generation = None if policy is None else policy.clear_generation
    views = [preview(p, text, base_version, generation) for p in sorted(found, key=lambda p: p.created_at)]
    return ProposalList(views, base_version, generation, error)


def dismiss(backend: Backend, proposal_id: str) -> MemframeError | None:
    return attempt(lambda: backend.dismiss_proposal(proposal_id))[1]
