"""The `memframe` command: the frame by default, and every operation for scripts.

Start-up stays light: this package imports only `sys` at the top (it is the
console script's entry point); each command imports what it needs (argparse
once the command line is parsed, Textual only for the frame, FastAPI only for
the server), and a plain `history -p` on a local workspace takes a short path
before argparse (`memframe.cli.history`).

One module per command group: `memory` (init, show, save, history, diff, undo,
clear, mode, the frame), `provenance` (blame, revert, import, export), `keys`,
`assistant` (ai, chat, receipts, proposals),
`server` (serve; `serve` for several workers, `listening`), `admin`, `keysessions` and
`mcp`; `options` holds the options they share and
`output` the wording they share. Defaults come from `memframe.settings`.

Every failure a person can cause prints one clear line on stderr and exits
with one of the codes below; argparse's own usage errors exit 2, as argparse does.
"""

from __future__ import annotations

import gc
import sys

from memframe.cli.output import EXIT_CONFLICT, EXIT_ERROR, EXIT_INTERRUPTED  # the exit codes, in one place

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

    from memframe.settings import Settings


__all__ = ["EXIT_CONFLICT", "EXIT_ERROR", "EXIT_INTERRUPTED", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: parse the command line, run the command, return its exit code."""
    ending = argv is None  # the process's own command line: when the command is done, so is the process
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "history":
        code = _history_patch_short(argv[1:], ending=ending)
        if code is not None:
            return code
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv = ["frame", *argv]
    if argv[0] == "--version":
        from memframe import __version__

        print(f"memframe {__version__}")
        return 0
    collecting = gc.isenabled()
    if argv[0] == "frame":
        # Until the memory is on screen the frame only builds what lives as long as it does (modules,
        # the store, the app, the main screen): the collector's passes over them are wasted. The frame
        # turns it back on, and freezes that heap, once its first load is shown (`tui.app.run_frame`).
        gc.disable()
    try:
        parsed: list[argparse.Namespace] = []
        # Building the parser reads the settings: a bad config file is one line, like any other failure.
        code = _guarded(lambda: parsed.append(build_parser(command=argv[0]).parse_args(argv)))
        if not parsed:
            return EXIT_ERROR if code is None else code
        return run(parsed[0])
    finally:
        if collecting:
            gc.enable()


def build_parser(settings: Settings | None = None, *, command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; option defaults come from `settings` (default: the current ones).

    With `command` (the first word of the command line), the command groups are registered in their
    usual order only until one holds that command: the command line parses exactly as with the whole
    parser, and the frame does not build (or import) the other groups before its first paint. A word
    no group holds gets the whole parser, so its error lists every command."""
    import argparse
    from importlib import import_module

    from memframe import settings as settings_module
    from memframe.cli.options import workspace_options

    current = settings_module.current() if settings is None else settings
    common = workspace_options(current)
    parser = argparse.ArgumentParser(
        prog="memframe",
        description="A small, lasting, human-editable memory for an AI assistant.",
    )
    parser.set_defaults(settings=current)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    groups: list[tuple[str, tuple[object, ...]]] = [
        ("memory", (common,)),
        ("provenance", (common,)),  # blame, revert, import, export
        ("keys", (common,)),
        ("assistant", (common, current)),
        ("server", (current,)),
        ("admin", (current,)),
        ("keysessions", (current,)),  # `keysessions`: the key-session service several servers share
        ("mcp", (common, current)),  # `mcp`: notes + Assistant for MCP clients
    ]
    for name, options in groups:
        import_module(f"memframe.cli.{name}").register(sub, *options)
        if command is not None and command in sub.choices:
            break
    return parser


def _history_patch_short(argv: list[str], *, ending: bool = False) -> int | None:
    """`history -p` on a local workspace before argparse, the service or the backends are imported
    (see `memframe.cli.history`); None when the command line or the workspace needs the full CLI.

    With `ending` (the process exits once this returns) what the process holds is frozen when the
    command has run: the interpreter's exit then makes its full collections over nothing (over every
    module's objects, they are a tenth of a one-revision `history -p`). Nothing frozen is ever freed,
    which at exit is what happens anyway."""
    collecting = gc.isenabled()
    gc.disable()  # nothing here makes reference cycles: spare the collector its passes over every module
    code = None
    try:
        from memframe.cli import history

        def short() -> int | None:
            plain = history.plain_request(argv)
            if plain is None:
                return None
            from memframe.cli.output import prompt

            return history.patch_local(*plain, prompt=prompt)

        code = _guarded(short)
        return code
    finally:
        if ending and code is not None:
            gc.freeze()
        if collecting:
            gc.enable()


def run(args: argparse.Namespace) -> int:
    """Run a parsed command line's handler under the one error policy."""
    handler: Callable[[argparse.Namespace], int] = args.handler
    code = _guarded(lambda: handler(args))
    return EXIT_ERROR if code is None else code


def _guarded(command: Callable[[], int | None]) -> int | None:
    """Run a command; every failure a person can cause becomes one line on stderr and an exit code."""
    try:
        return command()
    except KeyboardInterrupt:
        print("memframe: interrupted; nothing more was written.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
    except Exception as exc:
        from memframe.core.errors import MemframeError, PolicyConflict, VersionConflict

        if isinstance(exc, (VersionConflict, PolicyConflict)):
            print(f"memframe: {exc}", file=sys.stderr)
            return EXIT_CONFLICT
        if isinstance(exc, MemframeError):
            print(f"memframe: {exc}", file=sys.stderr)
            return EXIT_ERROR
        raise
