"""Messages that carry a worker thread's outcome back to the UI thread.

Gathered in one place (as toolong does) so a reader sees every way a
backend result can re-enter the app. Each carries a `ticket` so a flow that
is waiting for exactly this reply can be woken when its handler has applied it.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:  # the outcomes' modules load with the screens that use them, not before the first paint
    from rich.console import RenderableType

    from memframe.core.errors import MemframeError
    from memframe.tui.assistant_calls import AssistantStatus, ProposalList, SendOutcome
    from memframe.tui.calls import HeadOutcome, LoadOutcome, ModeOutcome
    from memframe.tui.changes_calls import HistoryPage, RevisionDiff
    from memframe.tui.conversation import Exchange
    from memframe.tui.forget_calls import Outcome, Preview
    from memframe.tui.state import WriteOutcome


class Reply(Message, bubble=False):
    """Base: the outcome of one backend call, addressed to whoever started it."""

    def __init__(self, ticket: int) -> None:
        super().__init__()
        self.ticket = ticket


class Loaded(Reply):
    """`keep_edits`: a load the person did not ask for (catching up with a change made elsewhere),
    so a draft typed while it was in flight wins over it."""

    def __init__(self, ticket: int, outcome: LoadOutcome, *, keep_edits: bool = False) -> None:
        super().__init__(ticket)
        self.outcome = outcome
        self.keep_edits = keep_edits


class HeadRead(Reply):
    """The head poll came back: the server's head revision and policy, or why they could not be read."""

    def __init__(self, ticket: int, outcome: HeadOutcome) -> None:
        super().__init__(ticket)
        self.outcome = outcome


class WriteFinished(Reply):
    def __init__(self, ticket: int, outcome: WriteOutcome) -> None:
        super().__init__(ticket)
        self.outcome = outcome


class ModeSet(Reply):
    def __init__(self, ticket: int, outcome: ModeOutcome) -> None:
        super().__init__(ticket)
        self.outcome = outcome


class PageLoaded(Reply):
    def __init__(self, ticket: int, page: HistoryPage) -> None:
        super().__init__(ticket)
        self.page = page


class DiffReady(Reply):
    def __init__(self, ticket: int, diff: RevisionDiff, rendered: RenderableType | None) -> None:
        super().__init__(ticket)
        self.diff = diff
        self.rendered = rendered


class Answered(Reply):
    """An Assistant send came back: the answer and its receipt, or why it was not answered."""

    def __init__(self, ticket: int, exchange: Exchange, outcome: SendOutcome) -> None:
        super().__init__(ticket)
        self.exchange = exchange
        self.outcome = outcome


class StatusRead(Reply):
    """Workspace AI and the policy were read (or AI was switched)."""

    def __init__(self, ticket: int, status: AssistantStatus, *, switched: bool = False) -> None:
        super().__init__(ticket)
        self.status = status
        self.switched = switched


class ProposalsLoaded(Reply):
    def __init__(self, ticket: int, found: ProposalList) -> None:
        super().__init__(ticket)
        self.found = found


class ProposalDismissed(Reply):
    def __init__(self, ticket: int, proposal_id: str, error: MemframeError | None) -> None:
        super().__init__(ticket)
        self.proposal_id = proposal_id
        self.error = error


class ForgetPreviewed(Reply):
    """What a key rotation (or forgetting) would destroy now, read for its dialog."""

    def __init__(self, ticket: int, preview: Preview) -> None:
        super().__init__(ticket)
        self.preview = preview


class ForgetFinished(Reply):
    """A key rotation (or forgetting) came back: its receipt, or why nothing changed."""

    def __init__(self, ticket: int, outcome: Outcome) -> None:
        super().__init__(ticket)
        self.outcome = outcome


class Tickets:
    """Futures for replies a flow awaits, resolved after the reply's handler applied it.

    A flow (an async worker) asks for a ticket, starts a thread worker with it,
    and awaits the future; the message handler applies the outcome to the shared
    state first, then resolves the future, so the flow always reads applied state.
    """

    def __init__(self) -> None:
        self._next = 0
        self._waiting: dict[int, asyncio.Future[Any]] = {}

    def issue(self) -> int:
        self._next += 1
        return self._next

    def wait(self, ticket: int) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[ticket] = future
        return future

    def latest(self, ticket: int) -> bool:
        """Is this the newest ticket issued? Older replies (superseded requests) are dropped."""
        return ticket == self._next

    def resolve(self, ticket: int, value: Any) -> None:
        future = self._waiting.pop(ticket, None)
        if future is not None and not future.done():
            future.set_result(value)
