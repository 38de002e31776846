"""The frame's main states as scenarios, and the scaffolding that drives them: test code, not product.

Each state is a `Scenario`: how to seed the workspace, then what a person
(and a second client racing them) does in the frame. The snapshot tests run
these scenarios through `snap_compare`, and the screenshot command
(`python -m tests.tui.screenshots DIR`, `make screenshots`) renders the same
ones for the README, so the pictures and the tested states cannot drift apart.
Everything is fixed: a frozen clock, UTC, the terminal size, no cursor blink,
and predictable ids (admission and proposal ids are random, and answers quote them).
It runs past 400 lines because every state stays in this one table: split, the snapshot tests and
the screenshots would have to gather the states from several modules in the same order.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from textual.pilot import Pilot
from textual.screen import ModalScreen
from textual.widgets import Input, TextArea
from textual.worker import WorkerCancelled, WorkerFailed

from memframe.backend.base import Backend
from memframe.core.errors import Unavailable
from memframe.core.types import Mode
from memframe.tui.app import MemoryFrameApp, build_app
from memframe.tui.screens.changes import ChangesScreen
from memframe.tui.screens.memory import MemoryScreen

SIZE = (100, 30)
#: The standard terminal, and the smallest the frame promises to stay usable at.
SMALL_SIZES = [(80, 24), (60, 20)]
FROZEN_NOW = 1_798_000_000.0  # 2026-12-23 04:26:40 UTC, as the test suite's FakeClock

SAMPLE = """# Workspace memory

## People
- Aiko prefers short answers; Japanese for chat, English for code review.
- Ben is on leave until 14 January.

## Project
- The release branch is `release/2.4`; releases are cut on Thursdays.
- The staging database is read-only for the Assistant.

## Conventions
- Dates in ISO format (2026-12-22).
- Never rename files under `docs/legal/`.
"""


class FrozenClock:
    """The time the frame (and the seeded revisions) believe it is."""

    def __init__(self, now: float = FROZEN_NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


SHORT = """# Workspace memory

## People
- Aiko prefers short answers.
- Ben is on leave until 14 January.

## Project
- Releases are cut on Thursdays.
"""


@contextlib.contextmanager
def predictable_ids() -> Iterator[None]:
    """Ids the service draws at random (admissions, proposals) count up instead, as the clock is frozen.

    The Assistant's answers quote their admission id, so a picture of one is
    only stable when the ids are. Only for screenshots and snapshot tests.
    """
    counter = itertools.count(1)
    original = secrets.token_hex

    def token_hex(nbytes: int | None = None) -> str:
        return f"{next(counter):0{2 * (nbytes or 32)}x}"

    secrets.token_hex = token_hex  # type: ignore[assignment]
    try:
        yield
    finally:
        secrets.token_hex = original


class Outage:
    """A Backend that is unreachable while `down`: every call raises Unavailable, as offline does."""

    def __init__(self, backend: Backend) -> None:
        self._backend = backend
        self.down = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._backend, name)
        if name in ("close",) or not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise Unavailable("The memory service cannot be reached (offline); nothing was changed.")
            return attr(*args, **kwargs)

        return call


class SettableClock(Protocol):
    now: float

    def __call__(self) -> float: ...


@dataclass
class Stage:
    """One workspace: the frame's backend (behind an Outage switch) and another client racing it."""

    frame: Outage
    other: Backend
    clock: SettableClock

    def app(self, backend: Any = None, **options: Any) -> MemoryFrameApp:
        """The frame as the CLI builds it, on this stage's clock, over `backend` (a Gate, a Refusing…)
        or the stage's own; no syntax highlighting or cursor blink unless `options` say otherwise."""
        options = {"syntax": False, "cursor_blink": False, **options}
        return build_app(backend or self.frame, clock=self.clock, **options)


#: The memory most pilot tests start from.
TEXT = "# Memory\n- Aiko prefers short answers.\n"


def main_screen(pilot: Pilot[Any]) -> MemoryScreen:
    """The editor's screen, under whatever side screen or dialog is in front."""
    screen = pilot.app.screen_stack[0]
    assert isinstance(screen, MemoryScreen)
    return screen


async def append(pilot: Pilot[Any], text: str) -> None:
    """Type at the end of the memory, as a person would (through the TextArea)."""
    area = main_screen(pilot).editor.area
    area.move_cursor(area.document.end)
    area.insert(text)
    await pilot.pause()


async def open_changes(pilot: Pilot[Any], row: int = 0) -> ChangesScreen:
    """ctrl+g, then `row` Downs: Changes with that row (0 is the newest revision) highlighted."""
    await press(pilot, "ctrl+g")
    screen = pilot.app.screen
    assert isinstance(screen, ChangesScreen)
    for _ in range(row):
        await pilot.press("down")
    await settle(pilot)
    return screen


async def settle(pilot: Pilot[Any]) -> None:
    """Wait until no backend call is in flight and no flow is between steps (never a sleep).

    A flow that waits for a dialog counts as settled: the person has to act next. Settled means
    idle twice in a row: a side screen's request is a message that bubbles to the app before a flow
    starts, so one idle look can fall between the two hops.
    """

    def busy() -> tuple[list[Any], bool]:
        workers = list(pilot.app.workers)
        io = [w for w in workers if w.group.startswith("io") and not w.is_finished]
        flowing = any(w.group == "flow" and not w.is_finished for w in workers)
        try:
            asking = isinstance(pilot.app.screen, ModalScreen)
        except Exception:  # the app has exited: nothing is left to wait for
            return [], False
        return io, flowing and not asking

    idle = 0
    for _ in range(200):
        io, _ = busy()
        if io:
            # The app may exit (cancelling calls) or a call may fail: outcomes, not hangs.
            with contextlib.suppress(WorkerCancelled, WorkerFailed):
                await pilot.app.workers.wait_for_complete(io)
        await pilot.pause()  # let replies' handlers and resumed flows run; they may start more calls
        idle = idle + 1 if busy() == ([], False) else 0
        if idle == 2:
            return
    raise AssertionError(f"the frame did not settle: {busy()}")


async def press(pilot: Pilot[Any], *keys: str) -> None:
    """Press `keys` as the person would, then wait until the frame has settled: one step of a test."""
    await pilot.press(*keys)


async def wait_until(pilot: Pilot[Any], condition: Callable[[], bool], what: str, *, bound: float = 10.0) -> None:
    """Let the frame run until `condition()` holds; fail saying `what` was awaited after `bound` seconds."""
    deadline = time.monotonic() + bound
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what} after {bound:g} s"
        await pilot.pause(0.01)


async def type_text(pilot: Pilot[Any], text: str) -> None:
    """Type at the cursor, as the editor's keystrokes would (one insert, so screenshots stay quick)."""
    pilot.app.screen.query_one(TextArea).insert(text)
    await pilot.pause()


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    seed: Callable[[Stage], None]
    drive: Callable[[Pilot[Any], Stage], Awaitable[None]]


def _seed_sample(stage: Stage) -> None:
    stage.other.save(SAMPLE, 0)


async def _open(pilot: Pilot[Any], stage: Stage) -> None:
    await settle(pilot)


async def _edit(pilot: Pilot[Any], stage: Stage) -> None:
    await settle(pilot)
    await pilot.press("ctrl+end")
    await type_text(pilot, "- Aiko is presenting on Friday.")
    await settle(pilot)


def _seed_oversized(stage: Stage) -> None:
    lines = [f"- Meeting note {i}: decisions, owners and follow-ups from the weekly sync." for i in range(120)]
    stage.other.save(SAMPLE + "\n## Meeting notes\n" + "\n".join(lines) + "\n", 0)


async def _conflict(pilot: Pilot[Any], stage: Stage) -> None:
    await _edit(pilot, stage)
    newer = SAMPLE.replace("Ben is on leave until 14 January.", "Ben is back; ask him about billing.")
    stage.other.save(newer, 1)
    await press(pilot, "ctrl+s")


async def _save_discard_cancel(pilot: Pilot[Any], stage: Stage) -> None:
    await _edit(pilot, stage)
    await press(pilot, "ctrl+q")


async def _clear_conflict(pilot: Pilot[Any], stage: Stage) -> None:
    await settle(pilot)
    stage.other.save(SAMPLE + "- Added from the other window a moment ago.\n", 1)
    await press(pilot, "ctrl+l")
    await press(pilot, "ctrl+l")  # Cancel has the focus; ctrl+l (Clear) again confirms


def _seed_history(stage: Stage) -> None:
    stage.other.save(SAMPLE, 0)
    stage.clock.now += 3600
    stage.other.save(SAMPLE.replace("Thursdays", "Wednesdays") + "- Prefer pytest over unittest.\n", 1)
    stage.clock.now += 3600
    stage.other.clear(2)
    stage.clock.now += 600
    stage.other.undo(2, 3)
    stage.clock.now += 1200


async def _changes(pilot: Pilot[Any], stage: Stage) -> None:
    await settle(pilot)
    await press(pilot, "ctrl+g")
    await press(pilot, "down", "down")  # revision 2: the edit


async def _mode_conflict(pilot: Pilot[Any], stage: Stage) -> None:
    await settle(pilot)
    stage.other.set_policy(Mode.AUTO, 0)  # someone switches to Auto while the frame shows Read only
    await press(pilot, "ctrl+o")
    await press(pilot, "up", "enter")  # choose Off against the stale revision


async def _offline(pilot: Pilot[Any], stage: Stage) -> None:
    await _edit(pilot, stage)
    stage.frame.down = True
    await press(pilot, "ctrl+s")


async def _preview(pilot: Pilot[Any], stage: Stage) -> None:
    await settle(pilot)
    await press(pilot, "ctrl+t")


def _seed_assistant(stage: Stage) -> None:
    stage.other.save(SHORT, 0)
    stage.other.set_ai(True)


def _seed_assistant_oversized(stage: Stage) -> None:
    _seed_oversized(stage)
    stage.other.set_ai(True)


async def ask(pilot: Pilot[Any], message: str) -> None:
    """Send a message from the Assistant pane, as typing it and pressing enter would, and wait for the answer."""
    screen = pilot.app.screen
    asked = len(getattr(screen, "exchanges", ()))
    screen.query_one(Input).value = message
    await pilot.press("enter")
    # The send's worker starts only once the exchange is on screen (an awaited mount), so on a loaded
    # machine `settle` could look twice before there is anything to wait for: wait for the exchange
    # to be there and answered first.
    await wait_until(
        pilot,
        lambda: len(getattr(screen, "exchanges", ())) > asked and not getattr(screen, "sending", False),
        f"the answer to {message!r}",
    )
    await settle(pilot)


async def _assistant(pilot: Pilot[Any], stage: Stage) -> None:
    await settle(pilot)
    await press(pilot, "f2")
    await ask(pilot, "What do you know?")


async def _assistant_capture(pilot: Pilot[Any], stage: Stage) -> None:
    await settle(pilot)
    await press(pilot, "f2")
    await ask(pilot, "remember: - Ben prefers tea.")
    stage.other.set_policy(Mode.AUTO, stage.other.get_policy().revision)
    await ask(pilot, "remember: - Aiko is presenting on Friday.")


def _seed_proposals(stage: Stage) -> None:
    stage.other.save(SAMPLE, 0)
    stage.other.set_ai(True)
    stage.clock.now -= 1800
    stage.other.send("c-seed", "remember: - Ben prefers tea.")
    stage.clock.now += 600
    stage.other.send("c-seed", "forget: - Ben is on leave until 14 January.")
    stage.clock.now += 1200
    stage.other.save(SAMPLE.replace("Ben is on leave until 14 January.", "Ben is back; ask him about billing."), 1)


async def _proposals(pilot: Pilot[Any], stage: Stage) -> None:
    await settle(pilot)
    await press(pilot, "f3")


async def _help(pilot: Pilot[Any], stage: Stage) -> None:
    await settle(pilot)
    await press(pilot, "f1")


async def _search(pilot: Pilot[Any], stage: Stage) -> None:
    await _changes(pilot, stage)
    await press(pilot, "slash")
    pilot.app.screen.query_one(Input).value = "pytest"
    await press(pilot, "enter")


async def _proposal_conflict(pilot: Pilot[Any], stage: Stage) -> None:
    await _proposals(pilot, stage)
    await press(pilot, "down", "a")  # the proposal whose target line was edited since


def _seed_blame(stage: Stage) -> None:
    _seed_sample(stage)
    stage.clock.now += 3600
    stage.other.save(SAMPLE.replace("Thursdays", "Wednesdays") + "- Prefer pytest over unittest.\n", 1)
    stage.other.set_ai(True)
    stage.other.set_policy(Mode.AUTO, stage.other.get_policy().revision)
    stage.clock.now += 1200
    stage.other.send("c-tea", "remember: - Ben prefers tea.")
    stage.clock.now += 600


async def _blame(pilot: Pilot[Any], stage: Stage) -> None:
    await settle(pilot)
    await press(pilot, "ctrl+g", "b")  # the newest revision: the capture
    await wait_until(pilot, lambda: getattr(pilot.app.screen, "outcome", None) is not None, "the blame")
    await press(pilot, "ctrl+end")  # the capture's line, with the message that led to it


def _seed_sections(stage: Stage) -> None:
    notes = "".join(f"- Meeting note {i}: decisions, owners and follow-ups.\n" for i in range(40))
    stage.other.save(SAMPLE.split("\n", 2)[2].replace("## ", "# ") + "\n# Meeting notes\n" + notes, 0)


async def _budget(pilot: Pilot[Any], stage: Stage) -> None:
    await settle(pilot)
    await press(pilot, "ctrl+b")


def _seed_forget(stage: Stage) -> None:
    _seed_history(stage)
    stage.other.set_ai(True)
    stage.other.send("c-seed", "remember: - Ben prefers tea.")  # Read only: a proposal, and the transcript


@contextlib.contextmanager
def as_user(name: str) -> Iterator[None]:
    """This machine's user, as a forgetting records it (getpass reads $LOGNAME first)."""
    old = os.environ.get("LOGNAME")
    os.environ["LOGNAME"] = name
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("LOGNAME", None)
        else:
            os.environ["LOGNAME"] = old


async def _forget(pilot: Pilot[Any], stage: Stage) -> None:
    await settle(pilot)
    await press(pilot, "ctrl+g", "down")  # revision 3
    await settle(pilot)
    await press(pilot, "f")
    await settle(pilot)


async def _forgotten(pilot: Pilot[Any], stage: Stage) -> None:
    await _forget(pilot, stage)
    with as_user("ada"):
        await press(pilot, "y")
        await wait_until(pilot, lambda: getattr(pilot.app.screen, "phase", "") == "done", "the receipt")
    await press(pilot, "escape")
    await settle(pilot)


SCENARIOS = [
    Scenario("empty", "A new workspace: nothing saved yet", lambda stage: None, _open),
    Scenario("editing", "Editing, with unsaved changes", _seed_sample, _edit),
    Scenario("preview", "The rendered Markdown preview", _seed_sample, _preview),
    Scenario("oversized", "Over 8 KiB: kept intact, not recalled, capture refused", _seed_oversized, _open),
    Scenario("conflict", "Save lost the race: newer text beside the draft, with a diff", _seed_sample, _conflict),
    Scenario("save_discard_cancel", "Quitting with unsaved changes", _seed_sample, _save_discard_cancel),
    Scenario("clear_conflict", "Clear lost the race: nothing cleared, explicit Retry", _seed_sample, _clear_conflict),
    Scenario("changes", "Changes: revisions and the diff of one", _seed_history, _changes),
    Scenario("mode_conflict", "The mode was changed elsewhere first", _seed_sample, _mode_conflict),
    Scenario("offline", "Save while offline: the draft stays, nothing queued", _seed_sample, _offline),
    Scenario("assistant", "The Assistant: an answer and the memory revision it used", _seed_assistant, _assistant),
    Scenario("assistant_withheld", "The Assistant: memory withheld, and why", _seed_assistant_oversized, _assistant),
    Scenario("assistant_capture", "Remember: a proposal in Read only, Remembered in Auto", _seed_assistant,
             _assistant_capture),
    Scenario("proposals", "Proposals: the diff of each against the saved memory", _seed_proposals, _proposals),
    Scenario("proposal_conflict", "Apply refused: the line it changes was edited since", _seed_proposals,
             _proposal_conflict),
    Scenario("help", "Help (F1): every key of the screen, from its bindings", _seed_sample, _help),
    Scenario("search", "Changes: searching the text of every revision", _seed_history, _search),
    Scenario("blame", "Blame: each line with its version, who and when", _seed_blame, _blame),
    Scenario("budget", "The budget: bytes per top-level heading", _seed_sections, _budget),
    Scenario("forget", "Forget the history before a revision: what goes, asked first", _seed_forget, _forget),
    Scenario("forgotten", "Changes after forgetting: the history starts at N, and says why", _seed_forget,
             _forgotten),
]  # fmt: skip
#: The states pinned (and pictured) at 80×24 and 60×20 too: every screen and the dialogs that carry text.
SMALL = ["editing", "conflict", "save_discard_cancel", "clear_conflict", "changes", "assistant", "proposals",
         "proposal_conflict", "mode_conflict", "help", "blame", "budget", "forget", "forgotten"]  # fmt: skip
BY_NAME = {s.name: s for s in SCENARIOS}
