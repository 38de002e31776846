"""Opening a workspace: find its key, pick the backend, create it on first use.

The CLI and the frame both come through here, so "which workspace, which key,
which backend" is decided once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memframe import paths, sealing
from memframe.sealing.keyfiles import PassphrasePrompt, load_key, write_key

if TYPE_CHECKING:  # the backends load with the workspace they open, not with the CLI's cheap commands
    from pathlib import Path

    from memframe.assistant.models import ModelClient
    from memframe.backend.sealed import SealedBackend


def init_local_workspace(workspace_id: str, *, passphrase: str | None = None, db_path: Path | None = None) -> Path:
    """Create a workspace in the embedded database and its key; returns the key file path."""
    from memframe.service import MemoryService
    from memframe.service.accounts import LOCAL_USER

    paths.check_workspace_id(workspace_id)
    if paths.key_file(workspace_id).exists():
        from memframe.core.errors import InvalidInput

        raise InvalidInput(
            f"A key for {workspace_id!r} already exists at {paths.key_file(workspace_id)}; nothing was changed."
        )
    service = MemoryService(db_path or paths.local_database())
    try:
        service.accounts.add_user(LOCAL_USER, exist_ok=True)
        service.accounts.create_workspace(workspace_id, LOCAL_USER)
        key = sealing.new_key()
        # The first key holder writes the workspace's key check: a wrong key is refused from now on,
        # memory or not (an empty workspace included).
        service.set_key_check(LOCAL_USER, workspace_id, sealing.key_check(key, workspace_id))
        return write_key(key, workspace_id, passphrase=passphrase)
    finally:
        service.close()


def prove_key(
    key: bytes,
    workspace_id: str,
    *,
    remote_url: str | None = None,
    token: str | None = None,
    db_path: Path | None = None,
) -> None:
    """Check `key` against the workspace's key check before it is kept (at init, the first key
    holder writes it). WrongKey says so in one line; a local workspace not created yet is left alone."""
    if remote_url:
        from memframe.backend.remote import RemoteStore

        store: object = RemoteStore(remote_url, token, workspace_id)
    else:
        if not local_workspace_exists(workspace_id, db_path):
            return
        from memframe.backend.local import LocalStore
        from memframe.service import MemoryService
        from memframe.service.accounts import LOCAL_USER

        service = MemoryService(db_path or paths.local_database())
        store = LocalStore(service, workspace_id, LOCAL_USER, owns_service=True)
    from memframe.backend.heads import SeenHeads
    from memframe.backend.sealed import SealedBackend

    backend = SealedBackend(store, key, seen=SeenHeads(None))  # type: ignore[arg-type]
    try:
        backend.prove_key()
    finally:
        backend.store.close()


def local_workspace_exists(workspace_id: str, db_path: Path | None = None) -> bool:
    return workspace_id in local_workspaces(db_path)


def local_workspaces(db_path: Path | None = None) -> list[str]:
    """The local workspaces on this machine (none before the first run)."""
    db = db_path or paths.local_database()
    if not db.exists():
        return []
    from memframe.service import MemoryService

    service = MemoryService(db)
    try:
        return sorted(service.accounts.workspaces())
    finally:
        service.close()


def open_backend(
    workspace_id: str,
    *,
    remote_url: str | None = None,
    token: str | None = None,
    prompt: PassphrasePrompt | None = None,
    db_path: Path | None = None,
    model: ModelClient | None = None,
    grounded_capture: bool = False,
) -> SealedBackend:
    """The backend for a workspace: remote when a URL is given, else the local embedded one.

    `model` is the Assistant's model for a local workspace, and `grounded_capture` its capture
    policy (`memframe.core.grounding`); a server chooses its own.
    """
    paths.check_workspace_id(workspace_id)
    if remote_url and model is not None:
        from memframe.core.errors import InvalidInput

        raise InvalidInput("A server runs the Assistant with its own model: start 'memframe serve --model-url'.")
    if remote_url:
        from memframe.backend.remote import RemoteBackend, display_url
        from memframe.backend.server_address import adopt_spelled_key, explain_missing_key
        from memframe.core.errors import KeyFileError

        display_url(remote_url)  # an address that is not a server URL is refused before any key is looked for
        adopt_spelled_key(workspace_id, remote_url)  # a key filed under an older spelling moves to the server's
        try:
            key = load_key(workspace_id, remote_url=remote_url, prompt=prompt)
        except KeyFileError as missing:  # reach the server first: a wrong address says so, not "no key"
            raise explain_missing_key(missing, workspace_id, remote_url, token) from None
        return RemoteBackend(remote_url, token, workspace_id, key)
    from memframe.backend.local import LocalBackend
    from memframe.service import MemoryService

    db = db_path or paths.local_database()
    if not db.exists():
        raise _no_local_workspace(workspace_id)
    service = MemoryService(db, grounded_capture=grounded_capture)  # opened once, then handed to the backend
    try:
        if workspace_id not in service.accounts.workspaces():
            raise _no_local_workspace(workspace_id)
        key = load_key(workspace_id, prompt=prompt)
        return LocalBackend(service, workspace_id, key, model=model, owns_service=True)
    except BaseException:
        service.close()
        raise


def _no_local_workspace(workspace_id: str) -> Exception:
    from memframe.core.errors import NotFound

    return NotFound(
        f"There is no local workspace {workspace_id!r}; create it with 'memframe init --workspace {workspace_id}'."
    )
