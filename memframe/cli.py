"""The `memframe` command: the frame by default, and every operation for scripts.

Start-up stays light: this module imports only `os` and `sys` at the top (it is
the console script's entry point); each command imports what it needs (argparse
once the command line is parsed, Textual only for the frame, FastAPI only for the
server), and a plain `history -p` on a local workspace takes a short path before
argparse (`memframe.cli_history`). Every failure a person can cause prints one
clear line and exits non-zero; a version conflict exits 3 and names the server's
version.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence

    from memframe.backend.sealed import SealedBackend

    Handler = Callable[[argparse.Namespace], int]

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CONFLICT = 3


def _out(line: str = "") -> None:
    print(line)


def _prompt(question: str) -> str:
    if not sys.stdin.isatty():
        return ""
    import getpass

    return getpass.getpass(question)


# --- shared options ----------------------------------------------------------------------


def _common() -> argparse.ArgumentParser:
    import argparse

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--workspace",
        "-w",
        default=os.environ.get("MEMFRAME_WORKSPACE", "default"),
        help="workspace name (default: $MEMFRAME_WORKSPACE or 'default')",
    )
    common.add_argument(
        "--remote",
        default=os.environ.get("MEMFRAME_URL") or None,
        metavar="URL",
        help="a memframe server (default: $MEMFRAME_URL; none = the local embedded workspace)",
    )
    common.add_argument(
        "--token",
        default=os.environ.get("MEMFRAME_TOKEN") or None,
        help="bearer token for --remote (default: $MEMFRAME_TOKEN)",
    )
    return common


def _backend(args: argparse.Namespace) -> SealedBackend:
    from memframe.backend.workspaces import open_backend

    return open_backend(args.workspace, remote_url=args.remote, token=args.token, prompt=_prompt)


def _read_text(source: str) -> str:
    from pathlib import Path

    from memframe.core.errors import InvalidInput

    try:
        raw = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise InvalidInput(f"Cannot read {source}: {exc.strerror}.") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(
            f"{'Standard input' if source == '-' else source} is not UTF-8 text; nothing was saved."
        ) from None


def _when(ts: float) -> str:
    from memframe.cli_history import when

    return when(ts)


def _size_line(size: int) -> str:
    from memframe.core.types import MEMORY_RECALL_MAX_BYTES

    line = f"{size:,} / {MEMORY_RECALL_MAX_BYTES:,} bytes"
    if size > MEMORY_RECALL_MAX_BYTES:
        line += " — OVERSIZED: kept intact, but not recalled and closed to automatic capture until shortened"
    return line


# --- commands ----------------------------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    from memframe.backend.workspaces import init_local_workspace, write_key

    passphrase = None
    if args.passphrase:
        passphrase = os.environ.get("MEMFRAME_PASSPHRASE") or _new_passphrase()
    if args.remote:
        from memframe import crypto

        backend_check = _remote_probe(args)
        path = write_key(crypto.new_key(), args.workspace, remote_url=args.remote, passphrase=passphrase)
        _out(f"Workspace {args.workspace!r} on {backend_check}: key created at {path} (mode 0600).")
        _out("The key stays on this machine; share it with 'memframe key export'.")
        return 0
    path = init_local_workspace(args.workspace, passphrase=passphrase)
    _out(f"Created local workspace {args.workspace!r}; its key is at {path} (mode 0600).")
    return 0


def _remote_probe(args: argparse.Namespace) -> str:
    """Before making a key for a server's workspace, check the workspace is reachable."""
    from memframe.backend.remote import RemoteStore

    store = RemoteStore(args.remote, args.token, args.workspace)
    try:
        store.get_policy()
    finally:
        store.close()
    return str(args.remote)


def _new_passphrase() -> str:
    from memframe.core.errors import InvalidInput

    if not sys.stdin.isatty():
        raise InvalidInput("No terminal to ask for a passphrase: set MEMFRAME_PASSPHRASE.")
    import getpass

    first = getpass.getpass("New passphrase: ")
    if not first:
        raise InvalidInput("An empty passphrase protects nothing; nothing was created.")
    if getpass.getpass("Repeat passphrase: ") != first:
        raise InvalidInput("The passphrases differ; nothing was created.")
    return first


def cmd_show(args: argparse.Namespace) -> int:
    backend = _backend(args)
    try:
        doc = backend.load()
        policy = backend.get_policy()
    finally:
        backend.close()
    if args.text_only:
        sys.stdout.write(doc.text)
        return 0
    _out(f"workspace {backend.workspace_id} · {backend.location}")
    state = "never saved" if doc.version == 0 else f"version {doc.version}"
    if doc.deleted:
        state += " (deleted)"
    _out(f"{state} · {_size_line(doc.size)}")
    _out(f"mode {policy.mode.label} (policy revision {policy.revision}, clear generation {policy.clear_generation})")
    _out("─" * 40)
    if doc.text:
        sys.stdout.write(doc.text if doc.text.endswith("\n") else doc.text + "\n")
    else:
        _out("(the memory is empty — edit it with 'memframe' or 'memframe save FILE --base N')")
    return 0


def cmd_save(args: argparse.Namespace) -> int:
    text = _read_text(args.file)
    backend = _backend(args)
    try:
        info = backend.save(text, args.base)
    finally:
        backend.close()
    _out(f"Saved version {info.version} ({_size_line(info.size)}).")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from memframe import cli_history

    backend = _backend(args)
    try:
        if args.patch:
            patch = cli_history.patch_backend(backend, args.limit, args.before)
        else:
            rows = backend.history(limit=args.limit, before=args.before)
    finally:
        backend.close()
    if args.patch:
        cli_history.write_out(patch)
        return 0
    if not rows:
        _out("No revisions yet.")
        return 0
    _out(f"{'version':>7}  {'time':19}  {'author':9}  {'by':12}  {'operation':9}  {'size':>7}")
    for r in rows:
        op = r.operation.value + (f" of {r.restored_from}" if r.restored_from else "")
        _out(f"{r.version:>7}  {_when(r.created_at)}  {r.author.value:9}  {r.actor[:12]:12}  {op:9}  {r.size:>7}")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from memframe.core.diffs import unified_diff_text

    backend = _backend(args)
    try:
        b = args.b if args.b is not None else backend.load().version
        diff = unified_diff_text(
            backend.read_revision(args.a), backend.read_revision(b), f"revision {args.a}", f"revision {b}"
        )
    finally:
        backend.close()
    sys.stdout.write(diff)
    if not diff:
        _out(f"Revisions {args.a} and {b} have the same text.")
    return 0


def cmd_undo(args: argparse.Namespace) -> int:
    backend = _backend(args)
    try:
        info = backend.undo(args.revision, args.base)
    finally:
        backend.close()
    _out(f"Restored revision {args.revision}'s text as version {info.version}.")
    return 0


def cmd_clear(args: argparse.Namespace) -> int:
    backend = _backend(args)
    try:
        info = backend.clear(args.base)
        policy = backend.get_policy()
    finally:
        backend.close()
    _out(f"Cleared: version {info.version} is empty; clear generation is now {policy.clear_generation}.")
    _out("Older automatic work is fenced. Conversation history is not deleted.")
    return 0


def cmd_mode(args: argparse.Namespace) -> int:
    from memframe.core.types import Mode

    backend = _backend(args)
    try:
        policy = backend.get_policy()
        if args.mode is not None:
            expected = args.expected_revision if args.expected_revision is not None else policy.revision
            policy = backend.set_policy(Mode.parse(args.mode), expected)
    finally:
        backend.close()
    _out(f"{policy.mode.label} (policy revision {policy.revision}): {policy.mode.explanation}")
    return 0


def cmd_key(args: argparse.Namespace) -> int:
    from pathlib import Path

    from memframe import crypto
    from memframe.backend.workspaces import load_key, write_key

    if args.key_command == "export":
        key = load_key(args.workspace, remote_url=args.remote, prompt=_prompt)
        passphrase = os.environ.get("MEMFRAME_EXPORT_PASSPHRASE") or _new_passphrase()
        crypto.check_export_passphrase(passphrase)
        crypto.write_private_file(Path(args.file), crypto.encode_key_file(key, args.workspace, passphrase))
        _out(f"Wrote the key of {args.workspace!r}, passphrase-wrapped, to {args.file}.")
        _out(f"Fingerprint {crypto.key_fingerprint(key)}: the importer should see the same.")
        return 0
    raw = _read_bytes(args.file)
    passphrase = os.environ.get("MEMFRAME_EXPORT_PASSPHRASE") or _prompt("Passphrase of the exported key: ")
    key = crypto.decode_key_file(raw, passphrase or None, source=f"key file {args.file}", workspace_id=args.workspace)
    path = write_key(key, args.workspace, remote_url=args.remote, overwrite=args.force)
    _out(f"Imported the key of {args.workspace!r} to {path} (fingerprint {crypto.key_fingerprint(key)}).")
    return 0


def _read_bytes(source: str) -> bytes:
    from pathlib import Path

    from memframe.core.errors import InvalidInput

    try:
        return Path(source).read_bytes()
    except OSError as exc:
        raise InvalidInput(f"Cannot read {source}: {exc.strerror}.") from None


def cmd_ai(args: argparse.Namespace) -> int:
    backend = _backend(args)
    try:
        consent = backend.get_ai() if args.state is None else backend.set_ai(args.state == "on")
    finally:
        backend.close()
    state = "on" if consent.enabled else "off"
    _out(f"Workspace AI is {state} (consent revision {consent.revision}).")
    if consent.enabled:
        _out("The Assistant reads memory only as the mode allows; see 'memframe mode'.")
    return 0


def _model(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    if not args.model_url:
        return None
    from memframe.assistant.models import OpenAIChatModel

    return OpenAIChatModel(args.model_url, args.model, api_key=os.environ.get("MEMFRAME_MODEL_KEY"))


def cmd_chat(args: argparse.Namespace) -> int:
    import secrets

    from memframe.backend.workspaces import open_backend

    backend = open_backend(args.workspace, remote_url=args.remote, token=args.token, prompt=_prompt, model=_model(args))
    conversation = args.conversation or f"c-{secrets.token_hex(4)}"
    try:
        if args.message is not None:
            _print_turn(backend.send(conversation, args.message))
            return 0
        _out(f"Conversation {conversation} with the Assistant of {backend.workspace_id!r}. Empty line or ctrl-d ends.")
        while True:
            try:
                line = input("you › ")
            except EOFError:
                _out()
                break
            if not line.strip():
                break
            _print_turn(backend.send(conversation, line))
        _out(f"See what each answer used: memframe receipts --conversation {conversation}")
        return 0
    finally:
        backend.close()


def _print_turn(result) -> None:  # type: ignore[no-untyped-def]
    from memframe.core.recall import withheld_reason

    _out(f"assistant › {result.answer}")
    for call in result.calls:
        if call.status.value == "provided":
            _out(f"  memory: revision {call.revision} was provided to call {call.call_index + 1}")
        elif call.status.withheld:
            _out(f"  memory: not provided to call {call.call_index + 1} because {withheld_reason(call.status)}")
        else:
            _out(f"  memory: nothing added to call {call.call_index + 1} ({call.status.value})")
    for outcome in result.outcomes:
        _out(f"  {outcome.message}")


def cmd_receipts(args: argparse.Namespace) -> int:
    backend = _backend(args)
    try:
        rows = backend.receipts(args.conversation)
    finally:
        backend.close()
    if not rows:
        _out("No model calls in this conversation yet.")
        return 0
    _out(f"{'time':19}  {'admission':28}  {'call':>4}  {'status':11}  {'revision':>8}")
    for r in rows:
        revision = "-" if r.revision is None else str(r.revision)
        _out(f"{_when(r.created_at)}  {r.admission_id:28}  {r.call_index + 1:>4}  {r.status.value:11}  {revision:>8}")
    return 0


def cmd_proposals(args: argparse.Namespace) -> int:
    backend = _backend(args)
    try:
        if args.apply:
            info = backend.apply_proposal(args.apply, backend.load().version)
            _out(f"Applied {args.apply} as version {info.version}.")
            return 0
        if args.dismiss:
            backend.dismiss_proposal(args.dismiss)
            _out(f"Dismissed {args.dismiss}; memory was not changed.")
            return 0
        proposals = backend.proposals()
        generation = backend.get_policy().clear_generation
    finally:
        backend.close()
    if not proposals:
        _out("No pending proposals.")
    for p in proposals:
        note = " — made before a Clear: can only be dismissed" if p.clear_generation != generation else ""
        _out(f"{p.id} · {_when(p.created_at)} · against version {p.base_version} · {p.reason}{note}")
        for c in p.changes:
            target = f" under {c.heading}" if c.heading else ""
            detail = f"{c.line} => {c.new_line}" if c.op == "replace" else c.line
            _out(f"    {c.op}{target}: {detail}")
    return 0


def cmd_frame(args: argparse.Namespace) -> int:
    from memframe.backend.workspaces import init_local_workspace, local_workspace_exists
    from memframe.core.errors import NotFound

    try:  # the usual case opens the database once; only a missing local workspace looks twice
        backend = _backend(args)
    except NotFound:
        if args.remote or local_workspace_exists(args.workspace):
            raise
        init_local_workspace(args.workspace)
        print(f"Created local workspace {args.workspace!r}.", file=sys.stderr)
        backend = _backend(args)
    from memframe.tui.app import run_frame

    return run_frame(backend)


# --- parser ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    import argparse
    import importlib

    common = _common()
    parser = argparse.ArgumentParser(
        prog="memframe",
        description="A small, lasting, human-editable memory for an AI assistant.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=help_, description=help_)
        p.set_defaults(handler=handler)
        return p

    add("frame", cmd_frame, "open the Memory frame (the default command)")
    p = add("init", cmd_init, "create a workspace and its key")
    p.add_argument("--passphrase", action="store_true", help="wrap the key file with a passphrase")
    p = add("show", cmd_show, "print the current memory, its version and size")
    p.add_argument("--text-only", action="store_true", help="print only the memory text")
    p = add("save", cmd_save, "save a file (or - for stdin) as a new revision")
    p.add_argument("file", metavar="FILE|-")
    p.add_argument("--base", type=_version, required=True, help="the version you edited (0 = create-only)")
    p = add("history", cmd_history, "list revisions, newest first")
    p.add_argument("--limit", type=_positive, default=50)
    p.add_argument("--before", type=_positive, default=None, help="start below this version")
    p.add_argument("-p", "--patch", action="store_true", help="show each revision's diff")
    p = add("diff", cmd_diff, "unified diff between two revisions")
    p.add_argument("a", type=_positive, metavar="A")
    p.add_argument("b", type=_positive, metavar="B", nargs="?", help="default: the current version")
    p = add("undo", cmd_undo, "restore revision N's text as a new revision")
    p.add_argument("revision", type=_positive, metavar="N")
    p.add_argument("--base", type=_version, required=True, help="the current version")
    p = add("clear", cmd_clear, "empty the memory and fence older automatic work")
    p.add_argument("--base", type=_version, required=True, help="the current version")
    p = add("mode", cmd_mode, "show or change the mode: off, read-only or auto")
    p.add_argument("mode", nargs="?", choices=["off", "read-only", "read_only", "auto"])
    p.add_argument("--expected-revision", type=_version, default=None)
    p = add("key", cmd_key, "export or import a workspace key (passphrase-wrapped)")
    p.add_argument("key_command", choices=["export", "import"])
    p.add_argument("file", metavar="FILE")
    p.add_argument("--force", action="store_true", help="import over an existing key")

    p = add("ai", cmd_ai, "show or switch workspace AI: on or off")
    p.add_argument("state", nargs="?", choices=["on", "off"])
    p = add("chat", cmd_chat, "talk to the Assistant (memory recalled before every model call)")
    p.add_argument("-m", "--message", help="send one message, print the answer, and exit")
    p.add_argument("--conversation", "-c", help="continue this conversation (default: a new one)")
    p.add_argument(
        "--model-url",
        help="an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1 "
        "(default: the built-in scripted model, which quotes the memory it was given)",
    )
    p.add_argument("--model", default="default", help="the model name to ask the server for")
    p = add("receipts", cmd_receipts, "which revision each model call used, or why memory was withheld")
    p.add_argument("--conversation", "-c", required=True)
    p = add("proposals", cmd_proposals, "list, apply or dismiss the Assistant's proposed changes")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--apply", metavar="ID", help="apply as your own Save against the current version")
    group.add_argument("--dismiss", metavar="ID")

    try:  # the server's commands (serve, admin) register themselves when present
        cli_server = importlib.import_module("memframe.cli_server")
    except ModuleNotFoundError:
        pass
    else:
        cli_server.register(sub, common)
    importlib.import_module("memframe.cli_mcp").register(sub, common)  # `mcp`: notes + Assistant for MCP clients
    return parser


def _version(value: str) -> int:
    import argparse

    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a version number") from None
    if number < 0:
        raise argparse.ArgumentTypeError("a version cannot be negative")
    return number


def _positive(value: str) -> int:
    import argparse

    number = _version(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be 1 or more")
    return number


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "history":
        code = _history_patch_short(argv[1:])
        if code is not None:
            return code
    parser = build_parser()
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv = ["frame", *argv]
    if argv and argv[0] == "--version":
        from memframe import __version__

        _out(f"memframe {__version__}")
        return 0
    args = parser.parse_args(argv)
    return run(args)


def _history_patch_short(argv: list[str]) -> int | None:
    """`history -p` on a local workspace before argparse, the service or the backends are imported
    (see `memframe.cli_history`); None when the command line or the workspace needs the full CLI."""
    import gc

    collecting = gc.isenabled()
    gc.disable()  # nothing here makes reference cycles: spare the collector its passes over every module
    try:
        from memframe import cli_history

        plain = cli_history.plain_request(argv)
        return None if plain is None else _guarded(lambda: cli_history.patch_local(*plain, prompt=_prompt))
    finally:
        if collecting:
            gc.enable()


def run(args: argparse.Namespace) -> int:
    handler: Handler = args.handler
    code = _guarded(lambda: handler(args))
    return EXIT_ERROR if code is None else code


def _guarded(command: Callable[[], int | None]) -> int | None:
    """Run a command; every failure a person can cause becomes one line on stderr and an exit code."""
    try:
        return command()
    except KeyboardInterrupt:
        print("memframe: interrupted; nothing more was written.", file=sys.stderr)
        return 130
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
