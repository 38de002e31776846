"""`memframe key export|import|rotate`: pass a workspace key between members, passphrase-wrapped, never
via a server; rotate it (`memframe.cli.forget`).

`memframe key unlock|lock` (in `unlock`) open and close a key session for a person's chat clients."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from memframe.cli.options import add_command, duration
from memframe.cli.output import out, prompt


def new_passphrase(variable: str = "MEMFRAME_PASSPHRASE") -> str:
    """A new passphrase, asked twice on the terminal; scripts set `variable` instead (the key file's
    MEMFRAME_PASSPHRASE, or MEMFRAME_EXPORT_PASSPHRASE for `key export`)."""
    from memframe.core.errors import InvalidInput

    if not sys.stdin.isatty():
        raise InvalidInput(f"No terminal to ask for a passphrase: set {variable}.")
    import getpass

    first = getpass.getpass("New passphrase: ")
    if not first:
        raise InvalidInput("An empty passphrase protects nothing; nothing was created.")
    if getpass.getpass("Repeat passphrase: ") != first:
        raise InvalidInput("The passphrases differ; nothing was created.")
    return first


#: The passphrase `key export` wraps with and `key import` unwraps with, for scripts.
EXPORT_VARIABLE = "MEMFRAME_EXPORT_PASSPHRASE"


def cmd_key(args: argparse.Namespace) -> int:
    from pathlib import Path

    if args.key_command in ("unlock", "lock"):
        from memframe.cli import unlock

        return unlock.cmd_unlock(args) if args.key_command == "unlock" else unlock.cmd_lock(args)
    from memframe import paths, sealing
    from memframe.sealing import keyfiles
    from memframe.sealing.keyfiles import load_key, write_key

    if args.key_command == "rotate":
        from memframe.cli.forget import cmd_rotate

        return cmd_rotate(args)
    if args.file is None:
        from memframe.core.errors import InvalidInput

        raise InvalidInput(f"'memframe key {args.key_command}' needs a FILE.")
    if args.key_command == "export":
        if args.remote:
            from memframe.backend.server_address import adopt_spelled_key

            adopt_spelled_key(args.workspace, args.remote)
        key = load_key(args.workspace, remote_url=args.remote, prompt=prompt)
        passphrase = args.settings.export_passphrase or new_passphrase(EXPORT_VARIABLE)
        keyfiles.check_export_passphrase(passphrase)
        paths.write_private_file(Path(args.file), keyfiles.encode_key_file(key, args.workspace, passphrase))
        out(f"Wrote the key of {args.workspace!r}, passphrase-wrapped, to {args.file}.")
        out(f"Fingerprint {sealing.key_fingerprint(key)}: the importer should see the same.")
        return 0
    raw = _read_bytes(args.file)
    passphrase = args.settings.export_passphrase or prompt("Passphrase of the exported key: ")
    if not passphrase and not sys.stdin.isatty() and keyfiles.key_file_is_wrapped(raw):
        from memframe.core.errors import KeyFileError

        raise KeyFileError(
            f"The key file {args.file} is protected by a passphrase and there is no terminal to ask for it: "
            f"set {EXPORT_VARIABLE}."
        )
    key = keyfiles.decode_key_file(raw, passphrase or None, source=f"key file {args.file}", workspace_id=args.workspace)
    from memframe.backend.workspaces import prove_key

    prove_key(key, args.workspace, remote_url=args.remote, token=args.token)  # a wrong key is not kept
    path = write_key(key, args.workspace, remote_url=args.remote, overwrite=args.force)
    out(f"Imported the key of {args.workspace!r} to {path} (fingerprint {sealing.key_fingerprint(key)}).")
    return 0


def _read_bytes(source: str) -> bytes:
    from pathlib import Path

    from memframe.core.errors import InvalidInput

    try:
        return Path(source).read_bytes()
    except OSError as exc:
        raise InvalidInput(f"Cannot read {source}: {exc.strerror}.") from None


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add `key` to the memframe command."""
    p = add_command(
        sub,
        common,
        "key",
        cmd_key,
        "export, import (passphrase-wrapped) or rotate a workspace key; unlock or lock it for your chat clients",
    )
    p.add_argument("key_command", choices=["export", "import", "rotate", "unlock", "lock"])
    p.add_argument("file", metavar="FILE", nargs="?", help="export/import: the key file")
    p.add_argument("--force", action="store_true", help="import over an existing key")
    p.add_argument(
        "--for",
        dest="hold",
        type=duration,
        default=duration("8h"),
        metavar="DURATION",
        help="unlock: how long the server holds the key for your chat clients, e.g. 2h, 90m or 1d (default: 8h, "
        "at most the server's key-session lifetime)",
    )
    p.add_argument("--yes", action="store_true", help="rotate without asking (for scripts)")
