"""The Memory frame's App: thin on purpose.

It builds the shared `DocumentState`, shows the main screen, routes Quit
through the main screen's "settle the draft first" flow, routes what the side
screens ask for (their messages bubble up here) to the main screen's flows, and
offers every binding in the command palette. The CLI, the snapshot tests and the
screenshot command all build it with `build_app`, so what is tested is what
people run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from textual.app import App, SystemCommand
from textual.binding import BindingType
from textual.screen import Screen
from textual.theme import BUILTIN_THEMES, Theme

from memframe.backend.base import Backend
from memframe.backend.save_state import SaveState
from memframe.core.errors import MemframeError
from memframe.settings import Settings, invalid_file
from memframe.tui.keynames import full_keymap, key_of
from memframe.tui.keys import APP_BINDINGS, keymap_problem
from memframe.tui.screens.memory import MemoryScreen
from memframe.tui.state import DocumentState

if TYPE_CHECKING:  # the side screens load when first opened; only their messages' names are used here
    from memframe.tui import calls
    from memframe.tui.screens.assistant import AssistantScreen
    from memframe.tui.screens.proposals import ProposalsScreen

Clock = Callable[[], float]


class MemoryFrameApp(App[int]):
    """Edit one workspace's memory through one Backend."""

    #: The main screen's rules. Each side screen (and the modal screens' base, `Modal`) carries its own as
    #: DEFAULT_CSS, which Textual parses alone when the screen first opens; a CSS_PATH or CSS of its own
    #: would make Textual re-parse every stylesheet and restyle every widget then.
    CSS_PATH = "memframe.tcss"
    TITLE = "memframe"
    #: Every screen gets -narrow / -wide and -low / -tall classes, so its CSS can reflow for 80×24 and 60×20.
    # (Textual annotates these as instance variables, so mypy objects to the ClassVar ruff asks for.)
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (90, "-wide")]  # type: ignore[misc]
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-low"), (26, "-tall")]  # type: ignore[misc]
    BINDINGS: ClassVar[list[BindingType]] = APP_BINDINGS

    def __init__(
        self, backend: Backend, *, clock: Clock = time.time, syntax: bool | None = None, cursor_blink: bool = True,
        poll_seconds: float = 0.0,
        settings: Settings | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        #: The settings the keymap and theme come from, and where a theme picked in the palette is written.
        self.settings = settings
        self._theme_to_remember: str | None = None
        if settings is not None:
            self.set_keymap(full_keymap(settings.keymap))
        self.backend = backend
        self.clock = clock
        # The backend's SaveState is what X-Memory-State reads; the frame tracks its saves there too.
        save_state = getattr(backend, "save_state", None) or SaveState()
        self.state = DocumentState(save_state, backend.workspace_id, backend.location)
        self.state.key = partial(key_of, self)
        self._screen_options: dict[str, object] = {"clock": clock, "syntax": syntax, "cursor_blink": cursor_blink,
                                                   "poll_seconds": poll_seconds}  # fmt: skip
        self.sub_title = f"Memory · {backend.workspace_id}"

    def start_first_load(self) -> None:
        """Begin reading the memory now, on a thread of its own, before the app starts running.

        Opening the store, reading the head and opening its text then overlap Textual's own start
        (its imports, the driver, the stylesheet) instead of waiting for the main screen to mount;
        the main screen, when it is made, waits briefly for what is left of the read
        (`screens.memory.FIRST_READ_WAIT`), so its first paint is the memory. Its first load takes
        this read's outcome instead of making its own (errors and all, as `calls.load` reports them). For a process that
        is the frame (`run_frame`): tests mount the screen and let it read as before.
        """
        import threading
        from concurrent.futures import Future

        first: Future[calls.LoadOutcome] = Future()

        def read() -> None:
            try:
                from memframe.tui import calls  # here, on the thread: its imports overlap Textual's start too

                first.set_result(calls.load(self.backend))
            except BaseException as exc:  # the screen's load worker raises it, and says so, as before
                first.set_exception(exc)

        threading.Thread(target=read, name="memframe-first-load", daemon=True).start()
        self._screen_options["first_load"] = first

    def get_default_screen(self) -> Screen:
        return MemoryScreen(self.backend, self.state, **self._screen_options)  # type: ignore[arg-type]

    def on_mount(self) -> None:
        if self.settings is not None and self.settings.theme:
            self.theme = self.settings.theme  # known: `check_settings` refused any other
        self.theme_changed_signal.subscribe(self, self._remember_theme)

    # --- help, and remembering the theme ---------------------------------------------------------

    def action_help(self) -> None:
        """F1: the keys of the screen in front (F1 again, or escape, closes it)."""
        from memframe.tui.keys import every_key, rows
        from memframe.tui.screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss(None)
            return
        here = [active.binding for active in self.screen.active_bindings.values()]
        name = getattr(self.screen, "HELP_NAME", None) or type(self.screen).__name__
        self.push_screen(HelpScreen(name, rows(here), every_key(self._keymap)))

    def _remember_theme(self, theme: Theme) -> None:
        """A theme picked in the palette is written to the settings file, so the next frame opens in it."""
        if self.settings is None or theme.name == (self.settings.theme or "textual-dark"):
            return
        if theme.name == self._theme_to_remember:
            return
        self._theme_to_remember = theme.name
        from memframe.settings import write_setting

        try:
            write_setting(self.settings.config_file, "theme", theme.name)
        except MemframeError as exc:
            self.notify(f"The theme is used now but not remembered: {exc}", severity="warning", timeout=10)

    @property
    def memory_screen(self) -> MemoryScreen | None:
        for screen in self.screen_stack:
            if isinstance(screen, MemoryScreen):
                return screen
        return None

    # --- what the side screens ask for, routed to the main screen's flows ----------------------

    def on_proposals_screen_apply(self, message: ProposalsScreen.Apply) -> None:
        if (screen := self.memory_screen) is not None:
            screen.apply_proposal(message.proposal, message.reply)

    def on_assistant_screen_catch_up(self, message: AssistantScreen.CatchUp) -> None:
        if (screen := self.memory_screen) is not None:
            screen.catch_up(message.version)

    def on_assistant_screen_open_changes(self, message: AssistantScreen.OpenChanges) -> None:
        if (screen := self.memory_screen) is not None:
            screen.open_changes(at=message.at)

    def on_assistant_screen_open_proposals(self) -> None:
        if (screen := self.memory_screen) is not None:
            screen.action_proposals()

    async def action_quit(self) -> None:
        """Quit never drops a draft silently: the main screen settles it first."""
        screen = self.memory_screen
        if screen is None:
            self.exit(0)
        else:
            screen.request_leave()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's own commands, plus every memframe binding active on `screen`.

        Textual's "Keys" side panel squeezes the frame and ignores escape: the palette's Keys opens Help (F1).
        """
        for command in super().get_system_commands(screen):
            if command.title == "Keys":
                command = SystemCommand(
                    "Keys", "Every key of this screen and what it does (escape closes)", self.action_help
                )
            yield command
        seen = {"memframe.quit"}  # Textual already offers Quit, and routes it to action_quit
        for active in screen.active_bindings.values():
            binding = active.binding
            if not (binding.id or "").startswith("memframe.") or binding.id in seen or not active.enabled:
                continue
            seen.add(binding.id or "")
            help_text = f"{binding.tooltip or binding.description} ({self.get_key_display(binding)})"
            yield SystemCommand(binding.description, help_text, partial(self.run_action, binding.action, active.node))


#: How often a frame people run looks for changes made elsewhere (`memframe --poll SECONDS`).
POLL_SECONDS = 3.0


def build_app(
    backend: Backend, *, clock: Clock | None = None, syntax: bool | None = None, cursor_blink: bool = True,
    poll_seconds: float = 0.0,
    settings: Settings | None = None,
) -> MemoryFrameApp:  # fmt: skip
    """The one way to make the frame. Tests pass a frozen clock, no highlighting and no blinking
    cursor so snapshots are byte-stable, and leave the head poll off (a test polls by calling
    `MemoryScreen.poll_head`); people get the defaults, and `run_frame` turns the poll on.
    `settings` gives the keymap and theme (and the file a theme picked in the palette is written
    to); None: Textual's defaults."""
    if settings is not None:
        check_settings(settings)
    return MemoryFrameApp(backend, clock=clock or time.time, syntax=syntax, cursor_blink=cursor_blink,
                          poll_seconds=poll_seconds, settings=settings)  # fmt: skip


def check_settings(settings: Settings) -> None:
    """Refuse a settings file the frame cannot honour, as any unusable config file is refused: a
    `[keymap]` that would leave an action with no key (`keys.keymap_problem`), or an unknown theme."""
    problem = keymap_problem(settings.keymap) if settings.keymap else None
    if problem is None and settings.theme and settings.theme not in BUILTIN_THEMES:
        problem = (
            f'theme "{settings.theme}" is not a theme (ctrl+p in the frame lists them: {", ".join(BUILTIN_THEMES)})'
        )
    if problem is not None:
        raise invalid_file(settings.config_file, problem)


def run_frame(backend: Backend, *, poll_seconds: float = POLL_SECONDS) -> int:
    """Run the frame in this terminal until the person quits; closes the backend; returns an exit code."""
    from memframe.settings import current

    app = build_app(backend, poll_seconds=poll_seconds, settings=current())
    app.start_first_load()
    try:
        app.run()
    finally:
        backend.close()
    return app.return_code or 0
