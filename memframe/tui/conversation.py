"""This session's conversation with the Assistant, and how each answer's receipt is worded.

A plain object (no Textual) so it outlives the pane that shows it and can be
read by tests. The receipt is what the server recorded for the answer's
model calls: which memory revision each call was given, or why it was
withheld. The wording is honest about capture: only a committed receipt is
ever shown as "Remembered"; a proposal says it waits for review.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.text import Text

from memframe.core.errors import MemframeError
from memframe.core.recall import withheld_reason
from memframe.core.turns import AIConsent, CallRecord, OutcomeKind, ToolOutcome, TurnResult
from memframe.core.types import RecallStatus
from memframe.tui.keynames import key_label

MEMORY_TOOL = "remember_in_memory"
#: Why a turn the person stopped ended (the turn's failure, beside what its tools did before).
STOPPED = "you stopped the answer; nothing further was written."


@dataclass
class Exchange:
    """One message and its answer (or why there is none), with the answer's receipt."""

    question: str
    result: TurnResult | None = None
    #: The receipt: one record per model call of the turn, in call order.
    calls: list[CallRecord] = field(default_factory=list)
    error: MemframeError | None = None
    #: The answer's text as it streams in, until the turn is finished.
    partial: str = ""
    #: When the message was sent (`time.monotonic()`), for the waiting line.
    sent_at: float = field(default_factory=time.monotonic)
    #: The person stopped this answer: nothing that arrives afterwards is shown as its answer.
    stopped: bool = False

    @property
    def pending(self) -> bool:
        return self.result is None and self.error is None

    @property
    def revision(self) -> int | None:
        """The memory revision the answer was written with: its last model call's, if memory was provided."""
        if not self.calls or self.calls[-1].status is not RecallStatus.PROVIDED:
            return None
        return self.calls[-1].revision

    def finish(self, result: TurnResult | None, calls: list[CallRecord], error: MemframeError | None) -> None:
        self.result, self.calls, self.error = result, list(calls), error


class Conversation:
    """The exchanges of one conversation id, oldest first; the frame starts a new one per session."""

    def __init__(self, conversation_id: str) -> None:
        self.id = conversation_id
        self.exchanges: list[Exchange] = []

    @classmethod
    def new(cls) -> Conversation:
        return cls(f"frame-{secrets.token_hex(4)}")

    def ask(self, question: str) -> Exchange:
        exchange = Exchange(question)
        self.exchanges.append(exchange)
        return exchange


# --- wording ---------------------------------------------------------------------------------------


def receipt_line(call: CallRecord) -> str:
    """What one model call was given, in the words the contract uses."""
    if call.status is RecallStatus.PROVIDED:
        return f"memory revision {call.revision} was used"
    if call.status is RecallStatus.OFF:
        return "memory is off: nothing was added"
    if call.status is RecallStatus.EMPTY:
        return "memory is empty: nothing was added"
    return f"memory not provided because {withheld_reason(call.status)}"


def no_revision(exchange: Exchange) -> str:
    """Why an answer has no revision to open in Changes."""
    if exchange.pending:
        return "This message has no answer yet."
    if exchange.result is None:
        return "This message was not answered, so no memory was used."
    if not exchange.calls:
        return "No receipt was recorded for this answer."
    return f"This answer used no memory revision: {receipt_line(exchange.calls[-1])}."


def outcome_line(outcome: ToolOutcome, key: Callable[[str], str] = key_label) -> tuple[str, str]:
    """(words, style) for one tool outcome. "Remembered" is said only for a committed receipt."""
    if outcome.tool != MEMORY_TOOL:
        return f"{outcome.tool}: {outcome.kind}", "dim"
    if outcome.committed:
        return f"✓ Remembered (memory version {outcome.version})", "bold green"
    if outcome.kind == OutcomeKind.PROPOSED:
        ref = f" {outcome.proposal_id}" if outcome.proposal_id else ""
        review = f"{key('assistant.proposals')} opens Proposals"
        return f"○ Not remembered yet: proposal{ref} waits for your review ({review})", "yellow"
    if outcome.kind == OutcomeKind.OFF:
        return "Not remembered: memory is Off for this workspace", "dim"
    message = outcome.message if outcome.message.startswith("Not ") else f"Not remembered: {outcome.message}"
    return f"✗ {message}", "red"


def render_exchange(exchange: Exchange, key: Callable[[str], str] = key_label) -> Text:
    """The question, the answer, then its receipt line(s) and tool outcomes."""
    out = Text.assemble(("you › ", "bold cyan"), exchange.question, "\n")
    if exchange.pending:
        return out.append_text(_waiting(exchange, key))
    if exchange.result is None and exchange.stopped:
        out.append("■ Stopped: no answer, and nothing further was written.", style="yellow")
        return out
    if exchange.result is None:
        out.append(f"✗ Not sent: {exchange.error}", style="red")
        return out
    result = exchange.result
    if result.answer.strip():
        out.append_text(Text.assemble(("assistant › ", "bold green"), result.answer))
        if result.cut_off or result.ended_early:
            out.append_text(Text.assemble("\n  ", (f"({incomplete(result)}: it may be incomplete)", "yellow")))
        if exchange.stopped and not result.failure:  # a server's turn runs there: it cannot be stopped from here
            out.append_text(Text.assemble("\n  ", ("(you pressed stop, but the server's turn ran to its end)", "dim")))
    else:
        out.append_text(Text.assemble(("assistant › ", "bold green"), (f"(no answer: {why_empty(result)})", "yellow")))
    several = len(exchange.calls) > 1
    for call in exchange.calls:
        label = f"receipt (call {call.call_index + 1}): " if several else "receipt: "
        style = "italic" if call.status is RecallStatus.PROVIDED else "italic yellow" if call.status.withheld else "dim"
        out.append_text(Text.assemble("\n  ", (label, "dim"), (receipt_line(call), style)))
    for outcome in exchange.result.outcomes:
        words, style = outcome_line(outcome, key)
        out.append_text(Text.assemble("\n  ", (words, style)))
    return out


def incomplete(result: TurnResult) -> str:
    """Why an answer stopped before the model finished it (cut off, or ended early by the server)."""
    if result.cut_off:
        return "cut off at the token limit (--max-tokens)"
    return "the server ended the answer early; another request to the same model server can interrupt it"


def why_empty(result: TurnResult) -> str:
    """An empty answer is never shown without its reason."""
    if result.failure:
        return f"the turn ended after its tools ran: {result.failure}"
    if result.cut_off or result.ended_early:
        return f"{incomplete(result)}, before any text"
    return "the model ended its turn without writing any text"


def _waiting(exchange: Exchange, key: Callable[[str], str]) -> Text:
    """What a send still in flight shows: the text so far, or that it waits, for how long, and how to stop."""
    waited = f"{int(time.monotonic() - exchange.sent_at)} s"
    if exchange.stopped:
        return Text("assistant › stopping… nothing further is written", style="dim italic")
    stop = f"{key('assistant.stop')} stops"
    if exchange.partial:
        return Text.assemble(
            ("assistant › ", "bold green"), exchange.partial, (f"\n  (answering · {waited} · {stop})", "dim italic")
        )
    return Text(
        f"assistant › waiting for the model… {waited} (a Save in flight is waited for first, up to 5 s; {stop})",
        style="dim italic",
    )


def ai_line(
    consent: AIConsent | None, key: Callable[[str], str] = key_label, error: MemframeError | None = None
) -> str:
    """One line: is workspace AI on, what that means, and how to switch it here."""
    switch = key("assistant.ai")
    if consent is None:
        return f"Workspace AI: unknown ({error}). {switch} tries again."
    if consent.enabled:
        return f"Workspace AI is on: messages go to the Assistant, with memory as the mode allows. {switch}: off"
    return f"Workspace AI is off: nothing is sent to a model. {switch}: on (the memory mode never does this)"
