"""`memframe model check`: is this model server ready for memframe, and if not, what to change."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from memframe.cli.options import add_command, add_model_options, model_options
from memframe.settings import Settings


def cmd_model_check(args: argparse.Namespace) -> int:
    from memframe.assistant.model_check import run_checks

    if not args.model_url:
        print(
            "memframe: no model server to check: give --model-url (or [model] url in the config file); "
            "without one the Assistant is the built-in scripted demo.",
            file=sys.stderr,
        )
        return 1
    memory, where = _current_memory(args)
    options = model_options(args)
    print(f"checking {args.model!r} at {args.model_url} with {where}", flush=True)
    checks = run_checks(options, memory=memory, say=lambda check: print(check.line(), flush=True))
    return 1 if any(check.ok is False for check in checks) else 0


def _current_memory(args: argparse.Namespace) -> tuple[str, str]:
    """The workspace's memory text, for the context check; "" when it cannot be opened (said so)."""
    from memframe.cli.options import open_workspace
    from memframe.core.errors import MemframeError

    try:
        backend = open_workspace(args)
    except MemframeError as exc:
        return "", f"no memory (workspace {args.workspace!r}: {exc})"
    try:
        document = backend.load()
    finally:
        backend.close()
    return document.text, f"the memory of workspace {args.workspace!r} ({len(document.text.encode())} bytes)"


def register(sub: Any, common: argparse.ArgumentParser, settings: Settings) -> None:
    """Add `model check` to the memframe command."""
    model = sub.add_parser("model", help="check a model server for the Assistant")
    checks = model.add_subparsers(dest="model_command", metavar="COMMAND", required=True)
    help_ = (
        "probe a model server the way memframe uses it: reachable, model known, an answer from memory, a forced tool "
        "call, the stream's end marker, the context window; exit 1 when a check fails"
    )
    p = add_command(checks, common, "check", cmd_model_check, help_)
    add_model_options(p, settings, purpose="the")
