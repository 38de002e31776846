"""The Assistant's commands: ai (workspace consent), chat, receipts, proposals."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from memframe.backend.heads import ACCEPT_HINT
from memframe.cli.options import add_command, add_model_options, model_client, open_workspace
from memframe.cli.output import EXIT_ERROR, out, when
from memframe.core.recall import receipt_line
from memframe.core.types import RecallStatus
from memframe.settings import Settings

if TYPE_CHECKING:
    from memframe.backend.sealed import SealedBackend
    from memframe.core.turns import TurnResult


def cmd_ai(args: argparse.Namespace) -> int:
    backend = open_workspace(args)
    try:
        consent = backend.get_ai() if args.state is None else backend.set_ai(args.state == "on")
    finally:
        backend.close()
    state = "on" if consent.enabled else "off"
    out(f"Workspace AI is {state} (consent revision {consent.revision}).")
    if consent.enabled:
        out("The Assistant reads memory only as the mode allows; see 'memframe mode'.")
    return 0


def cmd_chat(args: argparse.Namespace) -> int:
    import secrets

    from memframe.assistant.models import describe

    model = model_client(args)
    backend = open_workspace(args, model=model)
    conversation = args.conversation or f"c-{secrets.token_hex(4)}"
    answers = "the server's model" if args.remote else describe(model)
    if model is None and not args.remote:
        print(f"memframe: {answers} answers.", file=sys.stderr)
    try:
        if args.message is not None:
            return _chat_turn(backend, conversation, args.message)
        out(f"Conversation {conversation} with the Assistant of {backend.workspace_id!r}, answered by {answers}.")
        out("Empty line or ctrl-d ends.")
        while True:
            try:
                line = input("you › ")
            except EOFError:
                out()
                break
            if not line.strip():
                break
            code = _chat_turn(backend, conversation, line)
            if code:
                return code
        out(f"See what each answer used: memframe receipts --conversation {conversation}")
        return 0
    finally:
        backend.close()
        if model is not None:  # an HTTP model client holds a connection pool
            model.close()


def _chat_turn(backend: SealedBackend, conversation: str, message: str) -> int:
    """One message: the answer printed as it streams in, then its receipts and what its tools did.

    A turn that failed after a tool did something still shows what was done
    ("Remembered (memory version N)"), then the failure, and exits non-zero.
    """
    streamed: list[str] = []

    def show(piece: str) -> None:
        if not piece:
            return  # a tool call is on its way: nothing to print
        if not streamed:
            sys.stdout.write("assistant › ")
        streamed.append(piece)
        sys.stdout.write(piece)
        sys.stdout.flush()

    try:
        result = backend.send(conversation, message, on_text=show)
    except Exception:
        if streamed:
            out()  # the failure line starts on a line of its own
        raise
    if streamed:
        out()
    if not (streamed and result.answer and "".join(streamed).endswith(result.answer)):
        _print_answer(result)  # not streamed, or streamed text came before a tool call: the answer whole
    _print_turn(result)
    if result.failure:
        print(f"memframe: {result.failure} The turn ended before an answer.", file=sys.stderr)
        return EXIT_ERROR
    return 0


def _print_answer(result: TurnResult) -> None:
    if result.failure:
        out("assistant › (no answer: the model call failed; see below)")
    elif not result.answer.strip():
        out(f"assistant › (no answer: {_why_empty(result)})")
    else:
        out(f"assistant › {result.answer}")


def _why_empty(result: TurnResult) -> str:
    """An empty answer is never shown without its reason."""
    if result.cut_off:
        return "the model reached the token limit before writing any text; --max-tokens raises it"
    if result.ended_early:
        return f"the server ended the answer early, before any text ({INTERRUPTED})"
    return "the model ended its turn without writing any text"


#: Why a model server ends a streamed answer without a finish_reason.
INTERRUPTED = "a second request to the same model server can interrupt a streamed answer"


def _print_turn(result: TurnResult) -> None:
    if not result.answer.strip():
        pass  # the answer line said why
    elif result.cut_off:
        out("  (the answer was cut off at the token limit; --max-tokens raises it)")
    elif result.ended_early:
        out(f"  (the server ended the answer early: it may be incomplete; {INTERRUPTED})")
    for call in result.calls:
        out(f"  {receipt_line(call.status, call.revision, call.call_index + 1)}")  # calls count from 1
    if any(call.status is RecallStatus.STALE for call in result.calls):
        out(f"  This machine has seen a newer memory than the server holds.{ACCEPT_HINT}")
    for outcome in result.outcomes:
        out(f"  {outcome.message}")


def cmd_receipts(args: argparse.Namespace) -> int:
    backend = open_workspace(args)
    try:
        rows = backend.receipts(args.conversation)
    finally:
        backend.close()
    if not rows:
        out("No model calls in this conversation yet.")
        return 0
    out(f"{'time':19}  {'admission':28}  {'call':>4}  {'status':11}  {'revision':>8}")
    for r in rows:
        revision = "-" if r.revision is None else str(r.revision)
        out(f"{when(r.created_at)}  {r.admission_id:28}  {r.call_index + 1:>4}  {r.status.value:11}  {revision:>8}")
    return 0


def cmd_proposals(args: argparse.Namespace) -> int:
    backend = open_workspace(args)
    try:
        if args.apply:
            info = backend.apply_proposal(args.apply, backend.load().version)
            out(f"Applied {args.apply} as version {info.version}.")
            return 0
        if args.dismiss:
            backend.dismiss_proposal(args.dismiss)
            out(f"Dismissed {args.dismiss}; memory was not changed.")
            return 0
        proposals = backend.proposals()
        generation = backend.get_policy().clear_generation
    finally:
        backend.close()
    if not proposals:
        out("No pending proposals.")
    for p in proposals:
        note = " — made before a Clear: can only be dismissed" if p.clear_generation != generation else ""
        out(f"{p.id} · {when(p.created_at)} · against version {p.base_version} · {p.reason}{note}")
        for c in p.changes:
            target = f" under {c.heading}" if c.heading else ""
            detail = f"{c.line} => {c.new_line}" if c.op == "replace" else c.line
            out(f"    {c.op}{target}: {detail}")
    return 0


def register(sub: Any, common: argparse.ArgumentParser, settings: Settings) -> None:
    """Add ai, chat, receipts and proposals to the memframe command."""
    p = add_command(sub, common, "ai", cmd_ai, "show or switch workspace AI: on or off")
    p.add_argument("state", nargs="?", choices=["on", "off"])
    p = add_command(sub, common, "chat", cmd_chat, "talk to the Assistant (memory recalled before every model call)")
    p.add_argument("-m", "--message", help="send one message, print the answer, and exit")
    p.add_argument("--conversation", "-c", help="continue this conversation (default: a new one)")
    add_model_options(p, settings, purpose="the Assistant's")
    p = add_command(
        sub, common, "receipts", cmd_receipts, "which revision each model call used, or why memory was withheld"
    )
    p.add_argument("--conversation", "-c", required=True)
    p = add_command(sub, common, "proposals", cmd_proposals, "list, apply or dismiss the Assistant's proposed changes")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--apply", metavar="ID", help="apply as your own Save against the current version")
    group.add_argument("--dismiss", metavar="ID")
