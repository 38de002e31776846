"""The memory commands: init, show, save, history, diff, undo, clear, mode, and the frame itself."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from memframe.cli import history as patches
from memframe.cli.options import add_command, add_model_options, model_client, open_workspace, positive, version
from memframe.cli.output import out, size_line, verified, when

if TYPE_CHECKING:
    from memframe.settings import Settings


def cmd_init(args: argparse.Namespace) -> int:
    from memframe.backend.workspaces import init_local_workspace
    from memframe.cli.keys import new_passphrase
    from memframe.sealing.keyfiles import write_key

    passphrase = None
    if args.passphrase:
        passphrase = args.settings.passphrase or new_passphrase()
    if args.remote:
        from memframe import sealing
        from memframe.backend.workspaces import prove_key

        _no_key_yet(args)  # before the key check is written: a key that is then not kept must not set it
        reached = _remote_probe(args)
        key = sealing.new_key()
        prove_key(key, args.workspace, remote_url=args.remote, token=args.token)  # writes the key check
        path = write_key(key, args.workspace, remote_url=args.remote, passphrase=passphrase)
        out(f"Workspace {args.workspace!r} on {reached}: key created at {path} (mode 0600).")
        out("The key stays on this machine; share it with 'memframe key export'.")
        return 0
    path = init_local_workspace(args.workspace, passphrase=passphrase)
    out(f"Created local workspace {args.workspace!r}; its key is at {path} (mode 0600).")
    return 0


def _no_key_yet(args: argparse.Namespace) -> None:
    from memframe import paths
    from memframe.core.errors import InvalidInput

    existing = paths.key_file(args.workspace, args.remote)
    if existing.exists():
        raise InvalidInput(
            f"A key for {args.workspace!r} already exists at {existing}; nothing was changed. "
            "It sets a missing key check on its next key session (e.g. 'memframe chat')."
        )


def _remote_probe(args: argparse.Namespace) -> str:
    """Before making a key for a server's workspace, check the workspace is reachable."""
    from memframe.backend.remote import RemoteStore

    store = RemoteStore(args.remote, args.token, args.workspace)
    try:
        store.get_policy()
    finally:
        store.close()
    return str(args.remote)


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


def cmd_show(args: argparse.Namespace) -> int:
    backend = open_workspace(args)
    try:
        doc = backend.load()
        policy = backend.get_policy()
    finally:
        backend.close()
    if args.text_only:
        sys.stdout.write(doc.text)
        return 0
    if args.sections:
        from memframe.cli.provenance import section_table

        section_table(doc)
        return 0
    out(f"workspace {backend.workspace_id} · {backend.location}")
    state = "never saved" if doc.version == 0 else f"version {doc.version}"
    if doc.deleted:
        state += " (deleted)"
    out(f"{state} · {size_line(doc.size)}")
    out(f"mode {policy.mode.label} (policy revision {policy.revision}, clear generation {policy.clear_generation})")
    out("─" * 40)
    if doc.text:
        sys.stdout.write(doc.text if doc.text.endswith("\n") else doc.text + "\n")
    else:
        out("(the memory is empty — edit it with 'memframe' or 'memframe save FILE --base N')")
    return 0


def cmd_save(args: argparse.Namespace) -> int:
    text = _read_text(args.file)
    backend = open_workspace(args)
    try:
        info = backend.save(text, args.base)
    finally:
        backend.close()
    out(f"Saved version {info.version} ({size_line(info.size)}).")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    backend = open_workspace(args)
    try:
        if args.accept_server:
            return patches.accept_server(backend)
        if args.patch:
            sys.stdout.write(patches.patch(backend, args.limit, args.before))
            return 0
        rows = backend.history(limit=args.limit, before=args.before)
        gone = backend.forgotten_line() if rows and rows[-1].version > 1 and len(rows) < args.limit else None
    finally:
        backend.close()
    if not rows:
        out("No revisions yet.")
        return 0
    out(f"{'version':>7}  {'time':19}  {'author':9}  {'by':12}  {'operation':9}  {'size':>7}")
    for r in rows:
        op = r.operation.value + (f" of {r.restored_from}" if r.restored_from else "")
        out(f"{r.version:>7}  {when(r.created_at)}  {r.author.value:9}  {r.actor[:12]:12}  {op:9}  {r.size:>7}")
    if gone is not None:
        out(f"{'':>7}  {gone}")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    from memframe.core.diffs import unified_diff_text

    backend = open_workspace(args)
    try:
        b = args.b if args.b is not None else backend.load().version
        diff = unified_diff_text(
            backend.read_revision(args.a), backend.read_revision(b), f"revision {args.a}", f"revision {b}"
        )
    finally:
        backend.close()
    sys.stdout.write(diff)
    if not diff:
        out(f"Revisions {args.a} and {b} have the same text.")
    return 0


def cmd_undo(args: argparse.Namespace) -> int:
    backend = open_workspace(args)
    try:
        info = backend.undo(args.revision, args.base)
    finally:
        backend.close()
    out(f"Restored revision {args.revision}'s text as version {info.version}.")
    return 0


def cmd_clear(args: argparse.Namespace) -> int:
    from memframe.core.wording import CLEAR_BOUNDARY

    backend = open_workspace(args)
    try:
        info = backend.clear(args.base)
        policy = backend.get_policy()
    finally:
        backend.close()
    out(f"Cleared: version {info.version} is empty; clear generation is now {policy.clear_generation}.")
    out(CLEAR_BOUNDARY)
    return 0


def cmd_mode(args: argparse.Namespace) -> int:
    from memframe.core.types import Mode

    backend = open_workspace(args)
    try:
        policy = backend.get_policy()
        if args.mode is not None:
            expected = args.expected_revision if args.expected_revision is not None else policy.revision
            policy = backend.set_policy(Mode.parse(args.mode), expected)
    finally:
        backend.close()
    out(f"{policy.mode.label} (policy revision {policy.revision}): {policy.mode.explanation}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    if args.archive:
        from memframe.cli.provenance import verify_archive

        return verify_archive(args)
    backend = open_workspace(args)
    try:
        from memframe.backend.verify import walked

        checked = backend.verify()
        total = walked(checked, backend.chain_starts())
    finally:
        backend.close()
    out(f"The history of {args.workspace!r} chains: {verified(len(checked), total)}.")
    return 0


def cmd_frame(args: argparse.Namespace) -> int:
    from memframe.backend.workspaces import init_local_workspace, local_workspaces
    from memframe.core.errors import NotFound
    from memframe.tui.app import check_settings, run_frame

    check_settings(args.settings)  # before anything is opened or created

    model = model_client(args)  # the local Assistant's; None: the scripted demo (or a server's own model)
    try:  # the usual case opens the database once; only a missing local workspace looks twice
        backend = open_workspace(args, model=model)
    except NotFound:
        existing = [] if args.remote else local_workspaces()
        if args.remote or args.workspace in existing:
            raise
        if not _may_create(args, existing):
            return 1
        init_local_workspace(args.workspace)
        print(f"Created local workspace {args.workspace!r}.", file=sys.stderr)
        backend = open_workspace(args, model=model)
    try:
        return run_frame(backend, poll_seconds=args.poll)
    finally:
        if model is not None:  # an HTTP model client holds a connection pool
            model.close()


def _may_create(args: argparse.Namespace, existing: list[str]) -> bool:
    """A missing local workspace is created without asking only on the first run, under the default
    name (nothing typed): a typo in -w must not silently start an empty memory with a new key.
    Otherwise a person at a terminal is asked; a script gets one line and exit 1."""
    from memframe.core.errors import NotFound

    name = args.workspace
    if not existing and name == args.settings.workspace:
        return True
    here = f"this machine has {', '.join(repr(w) for w in existing)}" if existing else "this machine has none yet"
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise NotFound(
            f"There is no local workspace {name!r} ({here}); nothing was created. "
            f"Check the name, or create it with 'memframe init --workspace {name}'."
        )
    print(f"There is no local workspace {name!r} ({here}).", file=sys.stderr)
    try:
        answer = input(f"Create {name!r}, an empty memory with a new key? [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() in ("y", "yes"):
        return True
    print("Nothing was created.", file=sys.stderr)
    return False


def _poll_seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not 0 <= number < float("inf") or 0 < number < 0.5:
        raise argparse.ArgumentTypeError("use 0 (never) or at least 0.5 seconds")
    return number


def register_frame(sub: Any, common: argparse.ArgumentParser, settings: Settings) -> None:
    """Add the frame to the memframe command."""
    p = add_command(sub, common, "frame", cmd_frame, "open the Memory frame (the default command)")
    add_model_options(p, settings, purpose="the frame's Assistant's")
    p.add_argument(
        "--poll",
        type=_poll_seconds,
        default=3.0,
        metavar="SECONDS",
        help="how often the frame looks for changes made elsewhere (default: 3; 0 = never)",
    )


def register(sub: Any, common: argparse.ArgumentParser, settings: Settings) -> None:
    """Add the memory commands to the memframe command."""
    p = add_command(sub, common, "init", cmd_init, "create a workspace and its key")
    p.add_argument("--passphrase", action="store_true", help="wrap the key file with a passphrase")
    p = add_command(sub, common, "show", cmd_show, "print the current memory, its version and size")
    p.add_argument("--text-only", action="store_true", help="print only the memory text")
    p.add_argument("--sections", action="store_true", help="bytes per top-level heading against the recall bound")
    p = add_command(sub, common, "save", cmd_save, "save a file (or - for stdin) as a new revision")
    p.add_argument("file", metavar="FILE|-")
    p.add_argument("--base", type=version, required=True, help="the version you edited (0 = create-only)")
    p = add_command(sub, common, "history", cmd_history, "list revisions, newest first")
    p.add_argument("--limit", type=positive, default=patches.PAGE_DEFAULT)
    p.add_argument("--before", type=positive, default=None, help="start below this version")
    p.add_argument("-p", "--patch", action="store_true", help="show each revision's diff")
    p.add_argument(
        "--accept-server",
        action="store_true",
        help="after a restore: take the server's history as it is now, and stop expecting the newer versions "
        "this machine has seen (logged beside the key)",
    )
    p = add_command(sub, common, "diff", cmd_diff, "unified diff between two revisions")
    p.add_argument("a", type=positive, metavar="A")
    p.add_argument("b", type=positive, metavar="B", nargs="?", help="default: the current version")
    p = add_command(sub, common, "undo", cmd_undo, "restore revision N's text as a new revision")
    p.add_argument("revision", type=positive, metavar="N")
    p.add_argument("--base", type=version, required=True, help="the current version")
    p = add_command(sub, common, "clear", cmd_clear, "empty the memory and fence older automatic work")
    p.add_argument("--base", type=version, required=True, help="the current version")
    p = add_command(sub, common, "mode", cmd_mode, "show or change the mode: off, read-only or auto")
    p.add_argument("mode", nargs="?", choices=["off", "read-only", "read_only", "auto"])
    p.add_argument("--expected-revision", type=version, default=None)
    p = add_command(sub, common, "verify", cmd_verify, "walk every document's whole history and report the first break")
    p.add_argument("--archive", metavar="FILE", default=None, help="check an exported archive offline with the key")
