"""`memframe admin …`: users, tokens, workspaces and members of a server's database.

    memframe admin user add|list …           people
    memframe admin token create|list|revoke  bearer tokens (shown once, stored hashed)
    memframe admin workspace create|list     workspaces (the owner becomes a member)
    memframe admin workspace reset-key-check  remove a wrong key check; the owner's next init sets it
    memframe admin member add|remove|list    who may reach a workspace
    memframe admin compact -w WORKSPACE      rewrite old whole versions as sealed deltas (needs the key)

Admin commands work directly on the database file, so they need no token and
no running server; they are safe to run while `serve` runs (SQLite WAL). Like
every command, a failure prints one line and exits non-zero.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from memframe.cli.listening import shown
from memframe.cli.options import Handler
from memframe.cli.output import when
from memframe.cli.server import db_option, db_target, open_service
from memframe.settings import Settings


def cmd_user_add(args: argparse.Namespace) -> int:
    with open_service(args, create=True) as service:
        service.accounts.add_user(args.name)
    print(f"Added user {args.name!r}.")
    return 0


def cmd_user_list(args: argparse.Namespace) -> int:
    with open_service(args) as service:
        users = service.accounts.users()
    for user in users:
        print(user)
    if not users:
        print("No users yet.", file=sys.stderr)
    return 0


def cmd_token_create(args: argparse.Namespace) -> int:
    """The token goes alone to stdout (for `TOKEN=$(…)`); the explanation goes to stderr."""
    expires_in = _duration(args.expires_in) if args.expires_in else None
    with open_service(args) as service:
        token_id, token = service.accounts.create_token(args.user, args.label, expires_in=expires_in)
    print(
        f"Token {token_id} for {args.user!r}{f' ({args.label})' if args.label else ''}"
        f"{f', expiring in {args.expires_in}' if args.expires_in else ''}. "
        "It is shown only this once and stored only as a hash: keep it now.",
        file=sys.stderr,
    )
    print(token, flush=True)
    return 0


def _duration(text: str) -> float:
    """Seconds in `90d`, `12h`, `30m` or `45s`; anything else is one clear line."""
    from memframe.core.errors import InvalidInput

    units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
    number, unit = text[:-1], text[-1:].lower()
    if unit not in units or not number.isdigit() or int(number) == 0:
        raise InvalidInput(f"{text!r} is not a duration: use a number and d, h, m or s, e.g. 90d.")
    return float(int(number) * units[unit])


def cmd_token_list(args: argparse.Namespace) -> int:
    with open_service(args) as service:
        tokens = service.accounts.tokens(args.user)
    if not tokens:
        print("No tokens.", file=sys.stderr)
        return 0
    print(f"{'id':12}  {'user':16}  {'created':19}  {'state':27}  label")
    for t in tokens:
        state = "active" if t.revoked_at is None else f"revoked {when(t.revoked_at)}"
        print(f"{t.id:12}  {t.user_id[:16]:16}  {when(t.created_at)}  {state:27}  {t.label}")
    return 0


def cmd_token_revoke(args: argparse.Namespace) -> int:
    with open_service(args) as service:
        service.accounts.revoke_token(args.token_id)
    print(f"Revoked token {args.token_id}; it stops working on the next request.")
    return 0


def cmd_workspace_create(args: argparse.Namespace) -> int:
    with open_service(args) as service:
        service.accounts.create_workspace(args.workspace, args.owner)
    print(f"Created workspace {args.workspace!r}, owned by {args.owner!r}.")
    print(f"Its key is made on a member's machine: memframe init --workspace {args.workspace} --remote URL")
    return 0


def cmd_workspace_list(args: argparse.Namespace) -> int:
    with open_service(args) as service:
        rows = [(w, service.accounts.members(w)) for w in service.accounts.workspaces()]
    for workspace, members in rows:
        print(f"{workspace}  members: {', '.join(members) or '-'}")
    if not rows:
        print("No workspaces yet.", file=sys.stderr)
    return 0


def cmd_workspace_reset_key_check(args: argparse.Namespace) -> int:
    """The repair for a key check that is not the owner's key's (set by a member before only owners
    could): say what was done and what follows, since members cannot prove keys until then."""
    with open_service(args) as service:
        removed = service.reset_key_check(args.workspace)
    if removed:
        print(f"Removed the key check of workspace {args.workspace!r}; no memory or key was changed.")
    else:
        print(f"Workspace {args.workspace!r} has no key check; nothing was changed.")
    print(
        "The owner's next key session (e.g. 'memframe chat') sets it anew from her key, or her 'memframe init' "
        "if she has none; until then a member's key is proven only by the memory, if it has one."
    )
    return 0


def cmd_member_add(args: argparse.Namespace) -> int:
    with open_service(args) as service:
        service.accounts.add_member(args.workspace, args.user)
    print(f"{args.user!r} is a member of {args.workspace!r}.")
    print("They still need the workspace key from a member: memframe key export / memframe key import.")
    return 0


def cmd_member_remove(args: argparse.Namespace) -> int:
    with open_service(args) as service:
        service.accounts.remove_member(args.workspace, args.user)
    print(f"{args.user!r} is no longer a member of {args.workspace!r}.")
    print("They keep any key they already have: for old text, that cannot be taken back.")
    return 0


def cmd_member_list(args: argparse.Namespace) -> int:
    from memframe.core.errors import NotFound

    with open_service(args) as service:
        if args.workspace not in service.accounts.workspaces():
            raise NotFound(f"There is no workspace {args.workspace!r}.")
        members = service.accounts.members(args.workspace)
    for member in members:
        print(member)
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    """Compaction needs the workspace key (the server cannot read what it stores), so it runs on a
    key holder's machine against the database file itself: the local one, or a team's with --db."""
    from memframe.backend.local import LocalBackend
    from memframe.backend.workspaces import load_key
    from memframe.cli.output import prompt
    from memframe.core.errors import NotFound
    from memframe.service.accounts import LOCAL_USER

    db: Path | str = args.db if args.db is not None else _local_db()
    key = load_key(args.workspace, remote_url=args.key_for, prompt=prompt)
    with open_service(argparse.Namespace(db=db)) as service:
        if args.workspace not in service.accounts.workspaces():
            raise NotFound(f"There is no workspace {args.workspace!r} in {shown(db)}; nothing was changed.")
        backend = LocalBackend(service, args.workspace, key, user=args.user or LOCAL_USER, owns_service=False)
        backend.prove_key()
        done = backend.compact()
    print(
        f"Compacted {args.workspace!r}: {done.rewritten} of {done.versions} old versions re-sealed as deltas,"
        f" {done.bytes_before:,} bytes of ciphertext became {done.bytes_after:,} (SQLite reuses the freed pages;"
        " VACUUM returns them to the disk)."
    )
    return 0


def _local_db() -> Path:
    from memframe import paths

    return paths.local_database()


def register(subparsers: Any, settings: Settings) -> None:
    """Add `admin` to the memframe command: it takes no workspace options (--workspace, --remote,
    --token), since it acts on a server's database directly, never through a workspace client."""
    db = db_option(settings)

    admin = subparsers.add_parser(
        "admin",
        help="manage users, tokens, workspaces and members of a server's database",
        description="Manage a server's database directly (no token, no running server needed).",
    )
    kinds = admin.add_subparsers(dest="admin_kind", metavar="WHAT", required=True)

    def leaf(group: Any, name: str, handler: Handler, help_: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = group.add_parser(name, parents=[db], help=help_, description=help_)
        p.set_defaults(handler=handler)
        return p

    users = kinds.add_parser("user", help="people").add_subparsers(dest="action", metavar="ACTION", required=True)
    leaf(users, "add", cmd_user_add, "add a user (creates the database if needed)").add_argument("name")
    leaf(users, "list", cmd_user_list, "list users")

    tokens = kinds.add_parser("token", help="bearer tokens").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    p = leaf(tokens, "create", cmd_token_create, "create a token for a user and print it once")
    p.add_argument("--user", required=True)
    p.add_argument("--label", default="", help="what the token is for, e.g. a machine's name")
    p.add_argument("--expires-in", metavar="DURATION", help="stop working after e.g. 90d, 12h or 30m (default: never)")
    p = leaf(tokens, "list", cmd_token_list, "list tokens (never the tokens themselves)")
    p.add_argument("--user", default=None)
    leaf(tokens, "revoke", cmd_token_revoke, "revoke a token by its id").add_argument("token_id", metavar="ID")

    workspaces = kinds.add_parser("workspace", help="workspaces").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    p = leaf(workspaces, "create", cmd_workspace_create, "create a workspace; its owner becomes a member")
    p.add_argument("workspace", metavar="WORKSPACE")
    p.add_argument("--owner", required=True)
    leaf(workspaces, "list", cmd_workspace_list, "list workspaces and their members")
    help_ = "remove a workspace's key check; the owner's next init or key session sets it anew"
    leaf(workspaces, "reset-key-check", cmd_workspace_reset_key_check, help_).add_argument(
        "workspace", metavar="WORKSPACE"
    )

    members = kinds.add_parser("member", help="workspace membership").add_subparsers(
        dest="action", metavar="ACTION", required=True
    )
    for name, handler, help_ in (
        ("add", cmd_member_add, "give a user access to a workspace"),
        ("remove", cmd_member_remove, "take a user's access to a workspace away"),
    ):
        p = leaf(members, name, handler, help_)
        p.add_argument("workspace", metavar="WORKSPACE")
        p.add_argument("user", metavar="USER")
    leaf(members, "list", cmd_member_list, "list a workspace's members").add_argument("workspace", metavar="WORKSPACE")

    help_ = "rewrite a workspace's old whole versions as sealed deltas, with its key (crash-safe, repeatable)"
    p = kinds.add_parser("compact", help=help_, description=help_)
    p.add_argument("-w", "--workspace", required=True, metavar="WORKSPACE")
    p.add_argument(
        "--db", type=db_target, default=None, metavar="PATH|URL", help="a team's database (default: the local one)"
    )
    p.add_argument("--user", default=None, help="a member of the workspace, for --db (default: the local user)")
    p.add_argument("--key-for", default=None, metavar="URL", help="use the key imported for this server")
    p.set_defaults(handler=cmd_compact)
