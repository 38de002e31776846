"""The `memframe` command: the frame by default, and every operation for scripts.

Each command group is imported only when its command is asked for, so the frame
and `history -p` do not pay at start-up for FastAPI, the MCP SDK or the model clients.

One module per command group: `memory` (init, show, save, history, diff, undo,
clear, mode, the frame), `provenance` (blame, revert, import, export), `keys`,
`assistant` (ai, chat, receipts, proposals),
`server` (serve; `serve` for several workers, `listening`), `admin`, `keysessions`,
`mcp` and `model` (check a model server); `options` holds the options they share and
`output` the wording they share. Defaults come from `memframe.settings`.

Every failure a person can cause prints one clear line on stderr and exits
with one of the codes below; argparse's own usage errors exit 2, as argparse does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import import_module

from memframe.cli.options import workspace_options
from memframe.cli.output import EXIT_CONFLICT, EXIT_ERROR, EXIT_INTERRUPTED  # the exit codes, in one place
from memframe.core.errors import MemframeError, PolicyConflict, VersionConflict
from memframe.settings import Settings, current

__all__ = ["EXIT_CONFLICT", "EXIT_ERROR", "EXIT_INTERRUPTED", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: parse the command line, run the command, return its exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv = ["frame", *argv]
    if argv[0] == "--version":
        from memframe import __version__

        print(f"memframe {__version__}")
        return 0
    parsed: list[argparse.Namespace] = []
    # Building the parser reads the settings: a bad config file is one line, like any other failure.
    code = _guarded(lambda: parsed.append(build_parser(command=argv[0]).parse_args(argv)))
    if not parsed:
        return EXIT_ERROR if code is None else code
    return run(parsed[0])


def build_parser(settings: Settings | None = None, *, command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; option defaults come from `settings` (default: the current ones).

    With `command` (the first word of the command line), the command groups are registered in their
    usual order only until one holds that command: the command line parses exactly as with the whole
    parser, and the frame (a group of its own) builds no other command before its first paint. A word
    no group holds gets the whole parser, so its error lists every command."""
    chosen = current() if settings is None else settings
    common = workspace_options(chosen)
    parser = argparse.ArgumentParser(
        prog="memframe",
        description="A small, lasting, human-editable memory for an AI assistant.",
    )
    parser.set_defaults(settings=chosen)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    groups: list[tuple[str, str, tuple[object, ...]]] = [
        ("memory", "register_frame", (common, chosen)),  # the default command, alone: nothing else to build
        ("memory", "register", (common, chosen)),
        ("provenance", "register", (common,)),  # blame, revert, import, export
        ("keys", "register", (common,)),
        ("forget", "register", (common,)),  # `forget --before N`: key rotation that destroys older versions
        ("assistant", "register", (common, chosen)),
        ("server", "register", (chosen,)),
        ("admin", "register", (chosen,)),
        ("keysessions", "register", (chosen,)),  # `keysessions`: the key-session service several servers share
        ("mcp", "register", (common, chosen)),  # `mcp`: notes + Assistant for MCP clients
        ("model", "register", (common, chosen)),  # `model check`: is a model server ready for memframe
    ]
    for name, function, options in groups:
        getattr(import_module(f"memframe.cli.{name}"), function)(sub, *options)
        if command is not None and command in sub.choices:
            break
    return parser


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
    except (VersionConflict, PolicyConflict) as exc:
        print(f"memframe: {exc}", file=sys.stderr)
        return EXIT_CONFLICT
    except MemframeError as exc:
        print(f"memframe: {exc}", file=sys.stderr)
        return EXIT_ERROR
