"""The Assistant pane: send a message, read the answer and its receipt, open that revision in Changes.

Each answer is followed by its receipt — which memory revision every model
call was given, or why memory was withheld — and by what its tools did
("Remembered" only for a committed receipt). ctrl+g (or enter on an answer)
opens Changes at exactly the revision the highlighted answer used. Workspace
AI is switched here, and only here: the mode switcher never does it.

The screen is installed once per app, so this session's conversation, and a
send still in flight, survive closing and reopening the pane. Sends run on a
thread worker (the backend waits up to 5 s for an in-flight Save itself);
every failure comes back as words in the conversation. The header names the
model that answers; an answer streams in as it is written, the wait is shown
in seconds, and the stop key ends the turn before anything further is written.
"""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input, ListItem, ListView, Static

from memframe.backend.base import Backend
from memframe.core.errors import ModelUnavailable
from memframe.core.turns import AIConsent, OutcomeKind
from memframe.core.types import Policy
from memframe.tui import assistant_calls
from memframe.tui.conversation import STOPPED, Conversation, Exchange, ai_line, no_revision, render_exchange
from memframe.tui.keynames import key_of
from memframe.tui.messages import Answered, StatusRead, Tickets
from memframe.tui.state import DocumentState
from memframe.tui.widgets.footer import KeyFooter

#: The header during an unresolved Save conflict: recall withholds memory, so no version is "seen".
CONFLICT_NOTE = (
    "\nYour unsaved draft is not memory, and your last Save lost to a newer version: memory is withheld "
    "from the Assistant (conflict) until you keep one version."
)


class ExchangeItem(ListItem):
    """One exchange in the list; redrawn from the `Exchange` whenever it changes."""

    def __init__(self, exchange: Exchange) -> None:
        super().__init__(Static(render_exchange(exchange, partial(key_of, self.app)), classes="exchange"))
        self.exchange = exchange

    def redraw(self) -> None:
        self.query_one(Static).update(render_exchange(self.exchange, partial(key_of, self.app)))


class AssistantScreen(Screen[None]):
    """This session's conversation with the workspace Assistant.

    What it asks of the main screen it asks by message (they bubble to the app, which routes them):
    `CatchUp` after the Assistant committed a version, `OpenChanges` at an answer's revision,
    `OpenProposals`.
    """

    #: This screen's rules, parsed when it first opens rather than before the frame's first paint.
    DEFAULT_CSS = """
    #assistant-status, #assistant-ai { height: auto; padding: 0 1; background: $boost; }
    #assistant-ai { color: $text-muted; }
    #conversation { height: 1fr; border: round $primary 50%; scrollbar-gutter: stable; }
    #conversation:focus-within { border: round $primary; }
    #conversation .exchange { padding: 0 1 1 1; }
    #assistant-message { height: auto; padding: 0 1; color: $success; }
    #assistant-message.-error { color: $text; background: $error 35%; }
    #assistant-input { margin: 0 0; }
    #conversation > ListItem { background: transparent; border-left: blank; }
    #conversation > ListItem.-highlight { background: $boost; border-left: outer $accent 50%; }
    #conversation:focus > ListItem.-highlight { background: $primary 20%; border-left: outer $accent; }
    """
    SCOPED_CSS = False  # the selectors as written: they name this screen's own ids and classes

    class CatchUp(Message):
        """The Assistant committed `version` of the memory: the editor should show it, if it holds no draft."""

        def __init__(self, version: int) -> None:
            super().__init__()
            self.version = version

    class OpenChanges(Message):
        """Open Changes at revision `at` (the one an answer used); an Undo there runs as any write does."""

        def __init__(self, at: int) -> None:
            super().__init__()
            self.at = at

    class OpenProposals(Message):
        """Open the Proposals screen."""

    class Streamed(Message):
        """A piece of `exchange`'s answer arrived from the model (sent from the send's worker thread)."""

        def __init__(self, exchange: Exchange, piece: str) -> None:
            super().__init__()
            self.exchange = exchange
            self.piece = piece

    HELP_NAME = "Assistant"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", tooltip="Back to the editor", id="memframe.assistant.back"),
        Binding("ctrl+g", "changes", "Changes",
                tooltip="Open Changes at the memory revision the highlighted answer used",
                id="memframe.assistant.changes"),
        Binding("f4", "toggle_ai", "AI on/off", tooltip="Turn workspace AI on or off for this workspace",
                id="memframe.assistant.ai"),
        Binding("f3", "proposals", "Proposals", tooltip="Review the Assistant's proposed changes",
                id="memframe.assistant.proposals"),
        Binding("f6", "stop", "Stop", tooltip="Stop the answer being written: nothing further is written, and a "
                "capture already made is said", id="memframe.assistant.stop"),
        Binding("up", "move(-1)", "Previous answer", show=False, id="memframe.assistant.previous"),
        Binding("down", "move(1)", "Next answer", show=False, id="memframe.assistant.next"),
    ]  # fmt: skip

    def __init__(self, backend: Backend, state: DocumentState, conversation: Conversation | None = None) -> None:
        super().__init__()
        self.backend = backend
        self.state = state
        self.conversation = conversation or Conversation.new()
        #: Who answers, named in the pane's header: the configured model, or the scripted demo.
        self.answered_by = backend.assistant_model
        self.consent: AIConsent | None = None
        self.policy: Policy | None = None
        self.sending = False
        self._proposal_waits = False
        self.tickets = Tickets()

    def compose(self) -> ComposeResult:
        yield Static(id="assistant-status")
        yield Static(id="assistant-ai")
        yield ListView(*(ExchangeItem(e) for e in self.conversation.exchanges), id="conversation")
        yield Static(id="assistant-message")
        yield Input(placeholder="Message the Assistant; enter sends", id="assistant-input")
        yield KeyFooter()

    @property
    def exchanges(self) -> ListView:
        return self.query_one("#conversation", ListView)

    def on_mount(self) -> None:
        self.query_one("#conversation", ListView).border_title = f"Conversation {self.conversation.id}"
        self.query_one("#assistant-ai", Static).update("Workspace AI: reading…")
        if not self.conversation.exchanges:
            self._say("Each answer is followed by its receipt: the memory revision it used, or why it was withheld.")
        self.query_one(Input).focus()
        self._ticker = self.set_interval(1.0, self._tick, pause=True)  # the waiting line's seconds

    def on_screen_resume(self) -> None:
        """Each time the pane is shown: the draft marker and the AI switch may have changed meanwhile,
        and a note about a waiting proposal is stale (it may have been applied or dismissed since)."""
        if self._proposal_waits:
            self._proposal_waits = False
            self._say("")
        self._show_status()
        self._read_status(self.tickets.issue())

    # --- what the pane says ------------------------------------------------------------------

    def _show_status(self) -> None:
        state = self.state
        mode = self.policy.mode if self.policy is not None else state.mode
        line = Text.assemble(("Assistant", "bold"), (" · ", "dim"), (state.workspace_id, "bold"))
        if mode is not None:
            line.append_text(Text.assemble((" · ", "dim"), (mode.label, "bold"), f": {mode.explanation}"))
        line.append_text(Text.assemble(("\nAnswered by ", "dim"), self.answered_by))
        if self.backend.save_state.last.kind == "conflict":  # what the next call really gets: no memory at all
            line.append(CONFLICT_NOTE, style="yellow")
        elif state.dirty:
            line.append(f"\nYour unsaved draft is not memory: the Assistant sees saved version {state.base_version}.",
                        style="yellow")  # fmt: skip
        self.query_one("#assistant-status", Static).update(line)

    def _say(self, message: str, *, error: bool = False) -> None:
        line = self.query_one("#assistant-message", Static)
        line.update(message)
        line.set_class(error, "-error")
        line.display = bool(message)

    @work(thread=True, group="io", exit_on_error=False)
    def _read_status(self, ticket: int) -> None:
        self.post_message(StatusRead(ticket, assistant_calls.status(self.backend)))

    @work(thread=True, group="io", exit_on_error=False)
    def _switch_ai(self, ticket: int, enabled: bool) -> None:
        self.post_message(StatusRead(ticket, assistant_calls.set_ai(self.backend, enabled), switched=True))

    def on_status_read(self, message: StatusRead) -> None:
        status = message.status
        if status.policy is not None:
            self.policy = status.policy
        if status.consent is not None:
            self.consent = status.consent
        if message.switched and status.error is not None:
            self._say(f"Workspace AI was not switched: {status.error}", error=True)
        elif message.switched and self.consent is not None:
            self._say(f"Workspace AI is now {'on' if self.consent.enabled else 'off'} for this workspace.")
        error = None if self.consent is not None else status.error
        self.query_one("#assistant-ai", Static).update(ai_line(self.consent, partial(key_of, self.app), error))
        self._show_status()

    # --- sending -------------------------------------------------------------------------------

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            return
        if self.sending:
            self.notify("Wait for the answer to the last message first.", timeout=3)
            return
        event.input.value = ""
        exchange = self.conversation.ask(text)
        await self.exchanges.append(ExchangeItem(exchange))
        self.exchanges.index = len(self.exchanges) - 1
        self.sending = True
        self.refresh_bindings()
        self._proposal_waits = False
        self._say("")
        self._ticker.resume()
        self._send(self.tickets.issue(), exchange, self.conversation.id, text)

    @work(thread=True, group="io", exit_on_error=False)
    def _send(self, ticket: int, exchange: Exchange, conversation_id: str, text: str) -> None:
        def on_text(piece: str) -> None:
            if exchange.stopped:  # raised into the model call: its stream is closed and no tool of it runs
                raise ModelUnavailable(STOPPED)
            if piece:
                self.post_message(self.Streamed(exchange, piece))

        outcome = assistant_calls.send(self.backend, conversation_id, text, on_text=on_text)
        self.post_message(Answered(ticket, exchange, outcome))

    def on_assistant_screen_streamed(self, message: AssistantScreen.Streamed) -> None:
        exchange = message.exchange
        if exchange.pending and not exchange.stopped:
            exchange.partial += message.piece
            self._redraw(exchange)

    def _redraw(self, exchange: Exchange) -> None:
        for item in self.exchanges.query(ExchangeItem):
            if item.exchange is exchange:
                item.redraw()
        self.exchanges.scroll_end(animate=False)

    def _tick(self) -> None:
        for exchange in self.conversation.exchanges:
            if exchange.pending:
                self._redraw(exchange)

    def on_answered(self, message: Answered) -> None:
        self.sending = False
        self.refresh_bindings()
        self._ticker.pause()
        outcome, exchange = message.outcome, message.exchange
        exchange.finish(outcome.result, outcome.calls, outcome.error)
        self._redraw(exchange)
        if outcome.result is None and exchange.stopped:
            return  # the person stopped it: the exchange says so, and the message is not offered again
        if outcome.result is None:
            off = self.consent is not None and not self.consent.enabled
            turn_on = f" {key_of(self.app, 'assistant.ai')} turns it on." if off else ""
            self._say(f"Not sent: {outcome.error}{turn_on}", error=True)
            prompt = self.query_one(Input)
            if not prompt.value:
                prompt.value = exchange.question  # so the person can send it again as it was
            return
        self._read_status(self.tickets.issue())  # the mode may have changed meanwhile
        committed = [o.version for o in outcome.result.outcomes if o.committed and o.version is not None]
        if committed:
            self.post_message(self.CatchUp(max(committed)))
        if any(o.kind == OutcomeKind.PROPOSED for o in outcome.result.outcomes):
            self._say(f"A proposal waits for your review: {key_of(self.app, 'assistant.proposals')} opens Proposals.")
            self._proposal_waits = True

    # --- keys ----------------------------------------------------------------------------------

    def _selected(self) -> Exchange | None:
        items = list(self.exchanges.query(ExchangeItem))
        index = self.exchanges.index
        if not items:
            return None
        return items[index if index is not None and 0 <= index < len(items) else -1].exchange

    def action_changes(self) -> None:
        exchange = self._selected()
        if exchange is None:
            self.notify("There is no answer yet: send a message first.", timeout=3)
            return
        if exchange.revision is None:
            self.notify(no_revision(exchange), timeout=5)
            return
        self.post_message(self.OpenChanges(exchange.revision))

    def on_list_view_selected(self, event: ListView.Selected) -> None:
        event.stop()
        self.action_changes()

    def action_move(self, step: int) -> None:
        count = len(self.exchanges)
        if count:
            current = self.exchanges.index if self.exchanges.index is not None else count - 1
            self.exchanges.index = max(0, min(count - 1, current + step))

    def action_toggle_ai(self) -> None:
        if self.consent is None:
            self._read_status(self.tickets.issue())
            return
        self._say(f"Turning workspace AI {'off' if self.consent.enabled else 'on'}…")
        self._switch_ai(self.tickets.issue(), not self.consent.enabled)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The stop key is offered only while an answer is on its way."""
        return self.sending if action == "stop" else True

    def action_stop(self) -> None:
        pending = [e for e in self.conversation.exchanges if e.pending and not e.stopped]
        if not pending:
            self.notify("No answer is being written.", timeout=3)
            return
        pending[-1].stopped = True  # the send's worker sees it at the model's next word, or before any tool
        self._redraw(pending[-1])

    def action_proposals(self) -> None:
        self.post_message(self.OpenProposals())

    def action_close(self) -> None:
        self.app.pop_screen()
