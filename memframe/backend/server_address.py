"""A server's workspace key, found by the server's identity, and a wrong server address said plainly.

A person names a server by a URL whose spelling varies (localhost or 127.0.0.1, a trailing slash),
so the key folder is named by the server's identity (`paths.server_identity`), and a key an older
memframe filed under another spelling is moved to it. When no key is found, the server is reached
first: a mistyped port or host, or something that is not a URL, is then reported as what it is,
never as a missing key that `memframe init` would not fix.
"""

from __future__ import annotations

import os

from memframe import paths
from memframe.core.errors import KeyFileError, MemframeError, NotFound


def adopt_spelled_key(workspace_id: str, remote_url: str) -> None:
    """Move a key (and this machine's record of seen versions beside it) from the folder an older
    memframe named after the URL's spelling to the server's own folder, if only the former has one."""
    target = paths.key_file(workspace_id, remote_url)
    if target.exists():
        return
    folder = target.parent
    for spelling in (remote_url, remote_url.strip().rstrip("/")):
        old = paths.home() / "keys" / paths.key_scope(spelling, as_spelled=True)
        if old == folder or not (old / target.name).is_file():
            continue
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        seen = old / f"{workspace_id}.seen.json"
        if seen.is_file() and not (folder / seen.name).exists():
            os.replace(seen, folder / seen.name)
        os.replace(old / target.name, target)
        return


def explain_missing_key(missing: KeyFileError, workspace_id: str, remote_url: str, token: str | None) -> Exception:
    """Why there is no key for a server's workspace, in one line: the server cannot be reached or
    is not memframe's (named with its URL and what failed), the workspace is not there for this
    token, or truly no key, then with the step that works (init only while there is no key check)."""
    from memframe.backend.remote import RemoteStore

    if not str(missing).startswith("No key"):
        return missing  # a key file that is there but unreadable says so itself
    store = RemoteStore(remote_url, token, workspace_id)  # an address that is not a URL fails here
    try:
        store.get_policy()
        has_check = store.get_key_check() is not None
    except NotFound as exc:
        if str(exc).startswith("No such workspace"):
            return NotFound(f"The server at {store.location} has no workspace {workspace_id!r} for this token ({exc})")
        return exc if store.location in str(exc) else NotFound(f"The server at {store.location} says: {exc}")
    except MemframeError as exc:
        return exc
    finally:
        store.close()
    others = _other_folders(workspace_id, remote_url)
    elsewhere = (
        f" A key for {workspace_id!r} exists for another server address ({', '.join(others)} under "
        f"{paths.home() / 'keys'}): if that is this server, use the --remote you used there."
        if others
        else ""
    )
    where = paths.key_file(workspace_id, remote_url)
    step = (
        "Import the key a member exported with 'memframe key import' (the workspace already has a key)."
        if has_check
        else "The workspace's owner runs 'memframe init' once; members then use 'memframe key import'."
    )
    return KeyFileError(
        f"No key for workspace {workspace_id!r} of the server at {store.location} on this machine "
        f"(looked in {where}).{elsewhere} {step}"
    )


def _other_folders(workspace_id: str, remote_url: str) -> list[str]:
    """Key folders of other servers (not the local one) that hold a key of this workspace name."""
    keys = paths.home() / "keys"
    mine = paths.key_scope(remote_url)
    try:
        folders = sorted(p.name for p in keys.iterdir() if p.is_dir())
    except OSError:
        return []
    return [f for f in folders if f not in (mine, "local") and (keys / f / f"{workspace_id}.key").is_file()]
